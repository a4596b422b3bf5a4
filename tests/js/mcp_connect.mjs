// The SDK's Client connected to mcp_server.mjs, as the tests drive it.
//
//   connect({ mode: 'stdio', db, target, tenant?, ledger?, waitMs? })
//       spawns node mcp_server.mjs stdio (client.transport.pid is its pid)
//   connect({ mode: 'http', url, token })
//       Streamable HTTP with Authorization: Bearer <token>
//   callSend(client, args, conversation?, options?): tools/call send_email
//       with the conversation in _meta (none when conversation is undefined)
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

export function callSend(client, args, conversation, options) {
  const params = { name: 'send_email', arguments: args };
  if (conversation !== undefined) params._meta = { [META.conversation]: conversation };
  return client.callTool(params, undefined, options);
}
