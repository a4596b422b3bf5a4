// The MCP server of the end-to-end tests (test_mcp.mjs): an McpServer of
// @modelcontextprotocol/sdk whose tools are guarded by withIdempotency,
// over stdio or Streamable HTTP.
//
//   node mcp_server.mjs stdio DB TARGET_URL          tenant from $MCP_TENANT
//   node mcp_server.mjs http DB TARGET_URL           prints "PORT <n>"; the tenant
//       is authInfo.clientId from the bearer-token verifier (token-a ->
//       tenant-a, token-b -> tenant-b; anything else is 401)
//
// $LEDGER names the ledger (default "ledger"), $WAIT_MS the wait for an
// identical running call (default 0), $WINDOW_SECONDS the deduplication
// window (default the module's), $HEARTBEAT_SECONDS the heartbeat (default
// Ledger.call's). Tools:
//   send_email {to, subject, invoice?, delay_ms?, honor_signal?}  POSTs to
//       TARGET/send with the call's Idempotency-Key; answers the target's
//       JSON as text and as structuredContent; with honor_signal the request
//       is aborted with the call's signal; with invoice it names the target
//       mailto:<to>/invoice-<invoice> (docs/ledger.md, "Targets")
//   send_email_strict  the same, guarded with strict: true
//   lookup {q}  readOnlyHint: POSTs to TARGET/lookup without a key, unguarded
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { createMcpExpressApp } from '@modelcontextprotocol/sdk/server/express.js';
import { requireBearerAuth } from '@modelcontextprotocol/sdk/server/auth/middleware/bearerAuth.js';
import { InvalidTokenError } from '@modelcontextprotocol/sdk/server/auth/errors.js';
import Database from 'better-sqlite3';
import { z } from 'zod';
import { Ledger } from 'sqlite-idempotency';
import { withIdempotency, idempotentTool, attemptOf } from 'sqlite-idempotency/mcp';

const [mode, dbPath, targetUrl] = process.argv.slice(2);
const ledger = Ledger.open(new Database(dbPath), { name: process.env.LEDGER || 'ledger', create: false });
const options = { waitMs: Number(process.env.WAIT_MS || 0) };
if (mode === 'stdio') options.tenant = () => process.env.MCP_TENANT;
if (process.env.WINDOW_SECONDS) options.windowSeconds = Number(process.env.WINDOW_SECONDS);
if (process.env.HEARTBEAT_SECONDS) options.heartbeatSeconds = Number(process.env.HEARTBEAT_SECONDS);
options.targets = { send_email: (args) => (args.invoice === undefined ? [] : [`mailto:${args.to}/invoice-${args.invoice}`]) };

const sendSchema = { to: z.string(), subject: z.string(), invoice: z.number().optional(), delay_ms: z.number().optional(), honor_signal: z.boolean().optional() };
async function send(args, extra) {
  const q = args.delay_ms ? `?delay_ms=${args.delay_ms}` : '';
  const res = await fetch(`${targetUrl}/send${q}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...attemptOf(extra).headers },
    body: JSON.stringify(args),
    signal: args.honor_signal ? extra.signal : undefined,
  });
  const answer = await res.json();
  return { content: [{ type: 'text', text: `sent to ${args.to}: ${JSON.stringify(answer)}` }], structuredContent: answer };
}

function makeServer() {
  const server = new McpServer({ name: 'idem-e2e', version: '0.0.0' });
  withIdempotency(server, ledger, options);
  server.registerTool('send_email', { description: 'sends an email', inputSchema: sendSchema }, send);
  const { windowSeconds, targets, ...strictOptions } = options;
  server.registerTool('send_email_strict', { description: 'sends an email', inputSchema: sendSchema },
    idempotentTool(ledger, 'send_email_strict', { ...strictOptions, strict: true }, send));
  server.registerTool('lookup', {
    inputSchema: { q: z.string() },
    annotations: { readOnlyHint: true },
  }, async ({ q }) => {
    const res = await fetch(`${targetUrl}/lookup`, { method: 'POST', body: q });
    return { content: [{ type: 'text', text: JSON.stringify(await res.json()) }] };
  });
  return server;
}

if (mode === 'stdio') {
  await makeServer().connect(new StdioServerTransport());
} else if (mode === 'http') {
  const tokens = { 'token-a': 'tenant-a', 'token-b': 'tenant-b' };
  const verifier = {
    async verifyAccessToken(token) {
      if (!tokens[token]) throw new InvalidTokenError('unknown token');
      return { token, clientId: tokens[token], scopes: [], expiresAt: Math.floor(Date.now() / 1000) + 3600 };
    },
  };
  const app = createMcpExpressApp();
  // stateless Streamable HTTP: a server and a transport per request, no session
  app.post('/mcp', requireBearerAuth({ verifier }), async (req, res) => {
    const server = makeServer();
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    res.on('close', () => { transport.close(); server.close(); });
    await server.connect(transport);
    await transport.handleRequest(req, res, req.body);
  });
  app.get('/mcp', (req, res) => res.status(405).end());
  const listener = app.listen(0, '127.0.0.1', () => process.stdout.write(`PORT ${listener.address().port}\n`));
  process.stdin.on('end', () => process.exit(0)); // the parent went away
  process.stdin.resume();
} else {
  console.error(`mcp_server.mjs: mode must be stdio or http, got ${mode}`);
  process.exit(2);
}
