// sqlite-idempotency/mcp on Node's own SQLite (node:sqlite's DatabaseSync,
// Node 22.13 and later; tests/suites/55-integrations-mcp.sh runs it on
// Node 24 from npm): withIdempotency on an McpServer whose ledger is a
// DatabaseSync file, the SDK's Client over its in-memory transport.
//   replay      the same call twice: the tool runs once; the second answer
//               is the replay's words, then the first result, marked replay
//   unknown     a tool that throws after it may have sent: unknown; the
//               identical call is refused with the unknown words, not run
//   window      calls that name no conversation: the window decides, and
//               the identical call replays
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { z } from 'zod';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { Ledger } from 'sqlite-idempotency';
import { withIdempotency, META } from 'sqlite-idempotency/mcp';
import { say, UNKNOWN } from 'sqlite-idempotency/words';
import { Checks } from './checks.mjs';

const checks = new Checks(`integrations.mcp-node-sqlite@node${process.versions.node.split('.')[0]}`);
const j = (v) => JSON.stringify(v);
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'idem-mcp-node-sqlite-'));
const ledger = Ledger.open(new DatabaseSync(path.join(dir, 'agent.db'), { allowExtension: true }));
const runs = { send: 0, flaky: 0 };
const server = new McpServer({ name: 'mail', version: '1.0.0' });
withIdempotency(server, ledger, { tenant: () => 'tenant-a' });
server.registerTool('send_email', { inputSchema: { to: z.string() } }, async ({ to }) => {
  runs.send += 1;
  return { content: [{ type: 'text', text: j({ queued: runs.send, to }) }] };
});
server.registerTool('charge', { inputSchema: { amount: z.number() } }, async () => {
  runs.flaky += 1;
  throw new Error('read timeout');
});
const [a, b] = InMemoryTransport.createLinkedPair();
await server.connect(a);
const client = new Client({ name: 'host', version: '1.0.0' });
await client.connect(b);
const call = (name, args, conversation) => client.callTool({ name, arguments: args, ...(conversation ? { _meta: { [META.conversation]: conversation } } : {}) });
try {
  const first = await call('send_email', { to: 'ann@example.com' }, 'chat-7');
  const second = await call('send_email', { to: 'ann@example.com' }, 'chat-7');
  const key = ledger.db.prepare('SELECT idem_key(?, ?, ?, ?) AS k').get('tenant-a', 'chat-7', 'send_email', j({ to: 'ann@example.com' })).k;
  const at = ledger.row('tenant-a', key).updated_at;
  checks.report(runs.send === 1 && first.content[0].text === '{"queued":1,"to":"ann@example.com"}'
    && second.content[0].text === say('replay', { tool: 'send_email', key, attempt: 1, at }) && second.content[1].text === first.content[0].text
    && second._meta[META.replay] === true, 'replay', `runs ${runs.send}; ${j(first)} / ${j(second)}`);

  const u1 = await call('charge', { amount: 5 }, 'chat-7');
  const u2 = await call('charge', { amount: 5 }, 'chat-7');
  const ukey = ledger.db.prepare('SELECT idem_key(?, ?, ?, ?) AS k').get('tenant-a', 'chat-7', 'charge', j({ amount: 5 })).k;
  checks.report(runs.flaky === 1 && u1.isError && u1.content[0].text.includes(UNKNOWN) && u2.isError
    && u2.content[0].text === say('unknown', { tool: 'charge', key: ukey, attempt: 1 }) && ledger.row('tenant-a', ukey).status === 'unknown',
  'unknown', `runs ${runs.flaky}; ${j(u1)} / ${j(u2)}`);

  const w1 = await call('send_email', { to: 'bob@example.com' });
  const w2 = await call('send_email', { to: 'bob@example.com' });
  const rows = ledger.db.prepare("SELECT conversation FROM ledger WHERE args LIKE '%bob@example.com%'").all();
  checks.report(runs.send === 2 && rows.length === 1 && /^w-\d+$/.test(rows[0].conversation) && w2._meta[META.replay] === true && w2.content[1].text === w1.content[0].text,
    'window', `runs ${runs.send}; rows ${j(rows)}; ${j(w2)}`);
} catch (e) {
  checks.report(false, 'run', e.stack);
} finally {
  await client.close();
  ledger.close();
  fs.rmSync(dir, { recursive: true, force: true });
}
process.exit(checks.status());
