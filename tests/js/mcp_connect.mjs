// The SDK's Client connected to mcp_server.mjs, as the tests drive it.
//
//   connect({ mode: 'stdio', db, target, tenant?, ledger?, waitMs?, windowSeconds?, heartbeatSeconds? })
//       spawns node mcp_server.mjs stdio (client.transport.pid is its pid)
//   connect({ mode: 'http', url, token })
//       Streamable HTTP with Authorization: Bearer <token>
//   callSend(client, args, meta?, options?, tool?): tools/call send_email
//       (or tool); meta a string is the conversation under the project's
//       _meta key, an object the request's _meta as it is, undefined none
//       (as the SDK's Client sends by itself)
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { META } from 'sqlite-idempotency/mcp';

export const SERVER = path.join(path.dirname(fileURLToPath(import.meta.url)), 'mcp_server.mjs');

export async function connect(o) {
  let transport;
  if (o.mode === 'stdio') {
    const env = { ...process.env, LEDGER: o.ledger || 'ledger', WAIT_MS: String(o.waitMs ?? 8000) };
    for (const [k, v] of [['WINDOW_SECONDS', o.windowSeconds], ['HEARTBEAT_SECONDS', o.heartbeatSeconds]]) {
      if (v === undefined) delete env[k]; else env[k] = String(v);
    }
    if (o.tenant === undefined) delete env.MCP_TENANT; else env.MCP_TENANT = o.tenant;
    transport = new StdioClientTransport({ command: process.execPath, args: [SERVER, 'stdio', o.db, o.target], env, stderr: 'pipe' });
  } else {
    transport = new StreamableHTTPClientTransport(new URL(o.url), {
      requestInit: { headers: { Authorization: `Bearer ${o.token}` } },
    });
  }
  const client = new Client({ name: 'idem-e2e-client', version: '0.0.0' });
  await client.connect(transport);
  return client;
}

export function callSend(client, args, meta, options, tool = 'send_email') {
  const params = { name: tool, arguments: args };
  if (typeof meta === 'string') params._meta = { [META.conversation]: meta };
  else if (meta !== undefined) params._meta = meta;
  return client.callTool(params, undefined, options);
}
