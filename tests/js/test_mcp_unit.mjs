// sqlite-idempotency/mcp in one process: an McpServer of
// @modelcontextprotocol/sdk and its Client over the SDK's in-memory
// transport, one ledger on a temporary file. Each decision as the model
// sees it, the options, the older tool() method and update(), errors with
// their exact text.
import fs from 'node:fs';
import { isDeepStrictEqual } from 'node:util';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { z } from 'zod';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { Ledger, NotSent } from 'sqlite-idempotency';
import { withIdempotency, idempotentTool, attemptOf, META, PREFIX, WINDOW_SECONDS } from 'sqlite-idempotency/mcp';
import { Checks } from './checks.mjs';

const checks = new Checks('integrations.mcp-unit');
const { report } = checks;
const j = (v) => JSON.stringify(v);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const UNKNOWN = 'that request may have reached the target system, the outcome is theirs to report, and nothing is retried here';
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'idem-mcp-unit-'));
const ledger = Ledger.open(new Database(path.join(tmp, 'agent.db')));
const conv = (c) => ({ [META.conversation]: c });
const text = (r) => r && r.content && r.content[0] && r.content[0].text;
// A replay: the words first (when the first call ran, from its row; which
// attempt), then the first result's content as it was.
const iso = (key, tenant = 'tenant-a') => new Date(ledger.row(tenant, key).updated_at).toISOString();
const replayWords = (tool, key, tenant = 'tenant-a', attempt = 1) =>
  `${tool} was not run again: this request is identical to a call that already ran at ${iso(key, tenant)} (key ${key}, attempt ${attempt}), so nothing new was done, and the result below is that earlier run's: do not report it as done a second time. The result of that run:`;
const isReplayOf = (r, first, tool, tenant) => r && r._meta && r._meta[META.replay] === true && r.content.length === first.content.length + 1 &&
  text(r) === replayWords(tool, r._meta[META.key] || keyIn(r), tenant) && isDeepStrictEqual(r.content.slice(1), first.content);
// the key a replayed result of these tools names in its words
const keyIn = (r) => (/\(key (idem1-[0-9a-f]{32}),/.exec(text(r)) || [])[1];

function threw(fn) {
  try { fn(); } catch (e) { return `${e.name}: ${e.message}`; }
  return 'did not throw';
}

async function pair(server) {
  const [a, b] = InMemoryTransport.createLinkedPair();
  await server.connect(a);
  const client = new Client({ name: 'unit', version: '0' });
  await client.connect(b);
  return client;
}

try {
  report(PREFIX === 'io.github.sqlite-idempotency/' && META.conversation === `${PREFIX}conversation` && META.replay === `${PREFIX}replay`,
    'meta-keys', j({ PREFIX, META }));

  const server = new McpServer({ name: 'unit', version: '0' });
  server.registerTool('before', { inputSchema: { x: z.number() } }, async ({ x }) => ({ content: [{ type: 'text', text: `before ${x} ${Math.random()}` }] }));
  withIdempotency(server, ledger, { tenant: (extra) => (extra._meta && extra._meta.tenant) || 'tenant-a' });
  let runs = 0;
  let gate;
  server.registerTool('act', { inputSchema: { x: z.number(), mode: z.string().optional() } }, async ({ x, mode }, extra) => {
    runs += 1;
    if (mode === 'slow') await gate;
    if (mode === 'refuse') return { content: [{ type: 'text', text: `refused ${x}` }], isError: true };
    if (mode === 'notsent') throw new NotSent('the connection was refused');
    if (mode === 'throw') throw new Error('socket hang up');
    if (mode === 'string') return 'done';
    return { content: [{ type: 'text', text: `did ${x} ${attemptOf(extra).headers['Idempotency-Key']}` }], _meta: { mine: 1 } };
  });
  server.registerTool('noargs', {}, async (extra) => {
    runs += 1;
    return { content: [{ type: 'text', text: `noargs ${attemptOf(extra).key}` }] };
  });
  server.tool('legacy', { y: z.string() }, async ({ y }) => { runs += 1; return { content: [{ type: 'text', text: `legacy ${y}` }] }; });
  const ro = server.registerTool('peek', { annotations: { readOnlyHint: true } }, async () => { runs += 1; return { content: [{ type: 'text', text: 'peek' }] }; });
  const upd = server.registerTool('upd', {}, async () => ({ content: [{ type: 'text', text: 'old' }] }));
  upd.update({ callback: async () => { runs += 1; return { content: [{ type: 'text', text: `new ${runs}` }] }; } });
  const client = await pair(server);
  const call = (name, args, meta) => client.callTool({ name, arguments: args, _meta: meta });

  // a first call, a replay, the marker merged into the tool's own _meta
  {
    const r1 = await call('act', { x: 1 }, conv('c1'));
    const r2 = await call('act', { x: 1 }, conv('c1'));
    report(!r1.isError && r1._meta.mine === 1 && r1._meta[META.replay] === undefined && text(r1).startsWith('did 1 "idem1-') &&
      r2._meta.mine === 1 && isReplayOf(r2, r1, 'act') && text(r1).includes(keyIn(r2)), 'replay', j({ r1, r2 }));
  }
  // arguments in another order are the same call; other args another
  {
    const before = runs;
    await call('act', { x: 2, mode: 'plain' }, conv('c1'));
    const r = await call('act', { mode: 'plain', x: 2 }, conv('c1'));
    report(runs === before + 1 && r._meta[META.replay] === true, 'canonical-args', j(r));
  }
  // tools registered before withIdempotency are not guarded
  {
    const r1 = await call('before', { x: 1 }, conv('c1'));
    const r2 = await call('before', { x: 1 }, conv('c1'));
    report(text(r1) !== text(r2) && !(r2._meta && r2._meta[META.replay]), 'registered-before-unguarded', j({ r1, r2 }));
  }
  // readOnlyHint: unguarded; annotations updated later are read at call time
  {
    const before = runs;
    await call('peek', {}, conv('c1'));
    await call('peek', {}, conv('c1'));
    const okRo = runs === before + 2;
    ro.update({ annotations: { readOnlyHint: false } });
    await call('peek', {}, conv('c1'));
    const r = await call('peek', {}, conv('c1'));
    report(okRo && runs === before + 3 && r._meta[META.replay] === true, 'read-only', `runs ${runs - before}, ${j(r)}`);
  }
  // no inputSchema: the callback gets (extra) and the args of the key are {}
  {
    const r1 = await call('noargs', undefined, conv('c1'));
    const r2 = await call('noargs', undefined, conv('c1'));
    report(text(r1).startsWith('noargs idem1-') && isReplayOf(r2, r1, 'noargs'), 'no-input-schema', j({ r1, r2 }));
  }
  // the older tool() method, and a callback given by update()
  {
    const before = runs;
    const l1 = await call('legacy', { y: 'a' }, conv('c1'));
    const l2 = await call('legacy', { y: 'a' }, conv('c1'));
    const u1 = await call('upd', {}, conv('c1'));
    const u2 = await call('upd', {}, conv('c1'));
    report(runs === before + 2 && isReplayOf(l2, l1, 'legacy') && text(l1) === 'legacy a' && isReplayOf(u2, u1, 'upd'),
      'tool-and-update', j({ l1, l2, u1, u2 }));
  }
  // in progress: a second identical call while the first runs
  {
    let open;
    gate = new Promise((r) => { open = r; });
    const first = call('act', { x: 3, mode: 'slow' }, conv('c1'));
    await sleep(50);
    const r = await call('act', { x: 3, mode: 'slow' }, conv('c1'));
    open();
    await first;
    const k = r._meta[META.key];
    // claimed a few ms before: 0 s ago (1 when a second's edge fell between)
    const ago = Number((/renewed it ([0-9]+) s ago/.exec(text(r)) || [])[1]);
    const want = `act was not run: another caller holds an identical call (key ${k}, attempt 1) and renewed it ${ago <= 1 ? ago : 'at most 1'} s ago. This one was not started a second time, and its outcome is not known yet. Do not do it another way meanwhile: once that call finishes, an identical call returns its outcome without running again.`;
    report(r.isError === true && text(r) === want && r._meta[META.decision] === 'in_progress' && /^idem1-/.test(k), 'in-progress', j(r));
  }
  // in progress, the holder having renewed its lease: the text says when
  {
    const s11 = new McpServer({ name: 'renewed', version: '0' });
    withIdempotency(s11, ledger, { tenant: () => 'tenant-r', conversation: () => 'c1' });
    let open;
    const g = new Promise((r) => { open = r; });
    let renewed;
    const isRenewed = new Promise((r) => { renewed = r; });
    s11.registerTool('slow', {}, async (extra) => { await sleep(5); attemptOf(extra).renew(600); renewed(); await g; return { content: [] }; });
    const c11 = await pair(s11);
    const first = c11.callTool({ name: 'slow', arguments: {} });
    await isRenewed;
    const r = await c11.callTool({ name: 'slow', arguments: {} });
    open();
    await first;
    const k = r._meta[META.key];
    // renewed a few ms before: 0 s ago (1 when a second's edge fell between)
    const ago = Number((/renewed it ([0-9]+) s ago/.exec(text(r)) || [])[1]);
    const want = `slow was not run: another caller holds an identical call (key ${k}, attempt 1) and renewed it ${ago} s ago. This one was not started a second time, and its outcome is not known yet. Do not do it another way meanwhile: once that call finishes, an identical call returns its outcome without running again.`;
    report(r.isError === true && ago <= 1 && ledger.row('tenant-r', k).updated_at > ledger.row('tenant-r', k).created_at && text(r) === want, 'in-progress-renewed', `got ${j(text(r))}, want ${j(want)}`);
    await c11.close();
  }
  // waitMs: the second caller waits and gets the replay
  {
    const s2 = new McpServer({ name: 'wait', version: '0' });
    withIdempotency(s2, ledger, { tenant: () => 'tenant-w', waitMs: 5000 });
    let n = 0;
    let open;
    const g = new Promise((r) => { open = r; });
    s2.registerTool('w', { inputSchema: { x: z.number() } }, async ({ x }) => { n += 1; await g; return { content: [{ type: 'text', text: `w ${x}` }] }; });
    const c2 = await pair(s2);
    const first = c2.callTool({ name: 'w', arguments: { x: 1 }, _meta: conv('c1') });
    await sleep(50);
    const second = c2.callTool({ name: 'w', arguments: { x: 1 }, _meta: conv('c1') });
    await sleep(100);
    open();
    const [a, b] = await Promise.all([first, second]);
    report(n === 1 && !a.isError && isReplayOf(b, a, 'w', 'tenant-w') && text(a) === 'w 1', 'wait', j({ a, b, n }));
    await c2.close();
  }
  // a known failure: the isError result is kept and replayed
  {
    const before = runs;
    const r1 = await call('act', { x: 4, mode: 'refuse' }, conv('c1'));
    const r2 = await call('act', { x: 4, mode: 'refuse' }, conv('c1'));
    const k = keyIn(r2);
    const want = `act already ran at ${k && iso(k)} with these arguments (key ${k}, attempt 1), failed, and was not run again. Do not call act again with these arguments. The failure of that run:`;
    const told = `act failed (key ${k}). The failure is recorded: an identical call gives it again without running. Do not call act again with these arguments. The failure:`;
    report(runs === before + 1 && r1.isError === true && text(r1) === told && isDeepStrictEqual(r1.content.slice(1), [{ type: 'text', text: 'refused 4' }]) &&
      r1._meta[META.replay] === undefined && r2.isError === true && text(r2) === want &&
      isDeepStrictEqual(r2.content.slice(1), r1.content.slice(1)) && r2._meta[META.replay] === true, 'failed-replayed', j({ r1, r2 }));
  }
  // NotSent: released, the model may call again, and the retry runs
  {
    const before = runs;
    const r1 = await call('act', { x: 5, mode: 'notsent' }, conv('c1'));
    const r2 = await call('act', { x: 5, mode: 'notsent' }, conv('c1'));
    const key = r1._meta && r1._meta[META.key];
    const want = 'act was not sent: the connection was refused; nothing happened, so the call may be made again.';
    report(runs === before + 2 && r1.isError === true && text(r1) === want && r1._meta[META.decision] === 'not_sent' && text(r2) === want &&
      ledger.row('tenant-a', key).status === 'released',
      'not-sent', j({ r1, r2 }));
  }
  // a thrown error: unknown now and on every retry, which does not run
  {
    const before = runs;
    const r1 = await call('act', { x: 6, mode: 'throw' }, conv('c1'));
    const r2 = await call('act', { x: 6, mode: 'throw' }, conv('c1'));
    const k = r1._meta[META.key];
    const w1 = `act did not finish (key ${k}: Error: socket hang up): ${UNKNOWN}. Do not call act again for this, however its arguments are worded; tell the user it may or may not have happened and that it must be checked in the target system.`;
    const w2 = `act was not run: an earlier identical call (key ${k}, attempt 1) did not report its outcome: ${UNKNOWN}. Do not call act again for this, however its arguments are worded; tell the user it may or may not have happened and that it must be checked in the target system.`;
    report(runs === before + 1 && r1.isError === true && text(r1) === w1 && r1._meta[META.decision] === 'unknown' &&
      r2.isError === true && text(r2) === w2 && r2._meta[META.key] === r1._meta[META.key], 'unknown', j({ r1, r2 }));
  }
  // a result that is not a CallToolResult: unknown (the tool ran)
  {
    const r = await call('act', { x: 7, mode: 'string' }, conv('c1'));
    report(r.isError === true && text(r).startsWith(`act did not finish (key ${r._meta[META.key]}: the tool returned a string, not a CallToolResult): `), 'not-a-result', j(r));
  }
  // mismatch: the key is held by another request (here: a local claim of the same key)
  {
    ledger.claim('tenant-a', 'c9', 'act', { x: 8 }, { effect: 'local' });
    const before = runs;
    const r = await call('act', { x: 8 }, conv('c9'));
    const want = `act was not run: its key ${r._meta[META.key]} is bound to a different request (effect differs); nothing was run or replayed. Do not call act again with these arguments.`;
    report(runs === before && r.isError === true && text(r) === want && r._meta[META.decision] === 'mismatch', 'mismatch', j(r));
  }
  // two tenants and two conversations, the same arguments: four keys
  {
    const before = runs;
    const rs = [];
    for (const t of ['tenant-a', 'tenant-b']) for (const c of ['k1', 'k2']) rs.push(await call('act', { x: 9 }, { ...conv(c), tenant: t }));
    const again = await call('act', { x: 9 }, { ...conv('k2'), tenant: 'tenant-b' });
    report(runs === before + 4 && new Set(rs.map(text)).size === 4 && isReplayOf(again, rs[3], 'act', 'tenant-b'),
      'tenants-conversations', j(rs.map(text)));
  }
  // the conversation, in order: the option; the project's _meta key;
  // openai/session; vscode.conversationId; else the tenant's window. A host
  // value that is not a key part as "<tag>-<value>" is "<tag>_<the
  // idem_fingerprint of the value as a JSON string>", never truncated.
  // claudecode/toolUseId, new on every call, is never part of the key.
  {
    const s9 = new McpServer({ name: 'order', version: '0' });
    withIdempotency(s9, ledger, { tenant: () => 'tenant-o' });
    s9.registerTool('order', { inputSchema: { x: z.number() } }, async (args, extra) => ({ content: [{ type: 'text', text: attemptOf(extra).key }] }));
    const s10 = new McpServer({ name: 'order-option', version: '0' });
    withIdempotency(s10, ledger, { tenant: () => 'tenant-o', conversation: (args) => `opt-${args.x}` });
    s10.registerTool('order', { inputSchema: { x: z.number() } }, async (args, extra) => ({ content: [{ type: 'text', text: attemptOf(extra).key }] }));
    const [c9, c10] = [await pair(s9), await pair(s10)];
    const fp = (sqlLiteral) => ledger.value(`SELECT idem_fingerprint('${sqlLiteral}') AS v`, []);
    const long = 'x'.repeat(121); // "vscode-" + 121 characters: 128, a key part
    const cases = [
      [c10, 1, { [META.conversation]: 'own', 'openai/session': 's' }, 'opt-1'],
      [c9, 1, { [META.conversation]: 'own', 'openai/session': 's', 'vscode.conversationId': 'v' }, 'own'],
      [c9, 2, { 'openai/session': 's', 'vscode.conversationId': 'v' }, 'openai-s'],
      [c9, 3, { 'vscode.conversationId': 'v', 'openai/session': '' }, 'vscode-v'],
      [c9, 4, { 'openai/session': 'a/b c' }, `openai_${fp('"a/b c"')}`],
      [c9, 5, { 'vscode.conversationId': long }, `vscode-${long}`],
      [c9, 6, { 'vscode.conversationId': `${long}y` }, `vscode_${fp(`"${long}y"`)}`],
      [c9, 7, { 'vscode.conversationId': `${long}z` }, `vscode_${fp(`"${long}z"`)}`],
    ];
    const got = [];
    for (const [c, x, meta] of cases) {
      const r = await c.callTool({ name: 'order', arguments: { x }, _meta: meta });
      got.push(ledger.row('tenant-o', text(r)).conversation);
    }
    const want = cases.map((w) => w[3]);
    report(j(got) === j(want) && new Set(got).size === got.length, 'conversation-order', `got ${j(got)}, want ${j(want)}`);
    // nothing names one: the window, whatever the per-call ids
    const w1 = await c9.callTool({ name: 'order', arguments: { x: 8 }, _meta: { 'claudecode/toolUseId': 'toolu_01' } });
    const w2 = await c9.callTool({ name: 'order', arguments: { x: 8 }, _meta: { 'claudecode/toolUseId': 'toolu_02' } });
    const w3 = await c9.callTool({ name: 'order', arguments: { x: 8 } });
    const row = ledger.row('tenant-o', text(w1));
    report(/^w-[0-9]+$/.test(row.conversation) && Number(row.conversation.slice(2)) % WINDOW_SECONDS === 0 &&
      keyIn(w2) === text(w1) && keyIn(w3) === text(w1) && w3._meta[META.replay] === true && WINDOW_SECONDS === 600,
      'window-default', j({ row, w2, w3 }));
    await c9.close();
    await c10.close();
  }
  // a transaction open on the ledger's connection: the window's claim is the
  // caller's, not committed, so it is released and nothing runs (not_sent)
  {
    const s15 = new McpServer({ name: 'open-tx', version: '0' });
    withIdempotency(s15, ledger, { tenant: () => 'tenant-t' });
    let n = 0;
    s15.registerTool('tx', {}, async () => { n += 1; return { content: [] }; });
    const c15 = await pair(s15);
    ledger.db.exec('BEGIN');
    let r;
    try {
      r = await c15.callTool({ name: 'tx', arguments: {} });
    } finally {
      ledger.db.exec('ROLLBACK');
    }
    const want = 'tx was not sent: the claim was not committed (a transaction is open on the ledger\'s connection), so it was released; nothing happened, so the call may be made again.';
    report(n === 0 && r.isError === true && text(r) === want && r._meta[META.decision] === 'not_sent', 'not-committed', j(r));
    await c15.close();
  }
  // the window's choice, on a claim of the previous bucket that another
  // process made (a row inserted as a fresh claim, with the created_at the
  // case needs, by a connection without the extension that answers
  // idem_own_write itself: the ledger's tables take plain SQL from no
  // one else, docs/ledger.md): created less than the window ago, that claim is the call
  // (here still running: in_progress under its key); an identical call
  // still claimed or unknown, however many windows ago, is that call (its
  // answer, never a second admission: "unknown is never retried here"); a
  // settled one the window ago or more, the call is a new one in the current
  // bucket; with the clock stepped back, a call of the next bucket a moment
  // ahead is that call
  {
    const W = 60000;
    const s16 = new McpServer({ name: 'window', version: '0' });
    withIdempotency(s16, ledger, { tenant: () => 'tenant-w2', windowSeconds: W / 1000 });
    let n = 0;
    s16.registerTool('win', { inputSchema: { x: z.number() } }, async (args, extra) => { n += 1; return { content: [{ type: 'text', text: attemptOf(extra).key }] }; });
    const c16 = await pair(s16);
    // 1 s into a bucket to 2 s before its end, so every case holds as built
    // (the call a moment ahead, made at 0.5 s into the next bucket, is then
    // less than a window away; the recent one, 1 s before this bucket, too)
    while (Date.now() % W < 1000 || Date.now() % W >= W - 2000) await sleep(50);
    const start = Math.floor(Date.now() / W) * W;
    const previous = `w-${(start - W) / 1000}`;
    const forger = new Database(path.join(tmp, 'agent.db'));
    forger.function('idem_own_write', () => 1);
    const claimOf = (x, createdAt, token, { conversation = previous, status = 'claimed', lease = createdAt + 10 * W } = {}) => {
      const args = JSON.stringify({ x });
      const key = ledger.value('SELECT idem_key(?, ?, ?, ?) AS v', ['tenant-w2', conversation, 'win', args]);
      forger.prepare(`INSERT INTO ledger_rows(tenant, key, conversation, tool, args, effect, status, attempt, token, created_at, updated_at, lease_until)
        VALUES ('tenant-w2', ?, ?, 'win', ?, 'external', 'claimed', 1, ?, ?, ?, ?)`).run(key, conversation, args, token, createdAt, createdAt, lease);
      if (status !== 'claimed') {
        forger.prepare(`UPDATE ledger_rows SET status = ?, ${status === 'succeeded' ? "result = '{}', members = '[]'" : "error = '{\"reason\":\"the holder died\"}'"} WHERE key = ?`).run(status, key);
      }
      return key;
    };
    const recent = claimOf(1, start - 1000, 9001);
    // still claimed a window and more ago: that call, never a second one
    const old = claimOf(2, Date.now() - W - 1, 9002);
    // unknown ten windows ago (its server was killed after it sent): unknown, never admitted
    const lost = claimOf(3, start - 10 * W + 5, 9003, { conversation: `w-${(start - 10 * W) / 1000}`, status: 'unknown', lease: start - 10 * W + 10 });
    // succeeded two windows ago: the window has passed, a new call
    claimOf(4, start - 2 * W + 5, 9004, { conversation: `w-${(start - 2 * W) / 1000}`, status: 'succeeded' });
    // the clock stepped back across an edge: the first call is in the next bucket, a moment ahead
    const ahead = claimOf(5, start + W + 500, 9005, { conversation: `w-${(start + W) / 1000}`, status: 'succeeded' });
    forger.close();
    const r1 = await c16.callTool({ name: 'win', arguments: { x: 1 } });
    const r2 = await c16.callTool({ name: 'win', arguments: { x: 2 } });
    const r3 = await c16.callTool({ name: 'win', arguments: { x: 3 } });
    const r4 = await c16.callTool({ name: 'win', arguments: { x: 4 } });
    const r5 = await c16.callTool({ name: 'win', arguments: { x: 5 } });
    const sameBucket = Math.floor(Date.now() / W) * W === start;
    const row4 = r4.isError ? null : ledger.row('tenant-w2', text(r4));
    report(sameBucket && r1.isError === true && r1._meta[META.decision] === 'in_progress' && r1._meta[META.key] === recent &&
      r2.isError === true && r2._meta[META.decision] === 'in_progress' && r2._meta[META.key] === old &&
      r3.isError === true && r3._meta[META.decision] === 'unknown' && r3._meta[META.key] === lost && text(r3).includes(UNKNOWN) &&
      row4 && row4.conversation === `w-${start / 1000}` && n === 1 &&
      r5._meta && r5._meta[`${PREFIX}replay`] === true && text(r5).includes(`(key ${ahead},`),
    'window-choice', j({ r1, r2, r3, r4, row4, r5, recent, old, lost, ahead }));
    await c16.close();
  }
  // strict: a call that names no conversation is refused; a host key names one
  {
    const s12 = new McpServer({ name: 'strict', version: '0' });
    withIdempotency(s12, ledger, { tenant: () => 'tenant-s', strict: true });
    let n = 0;
    s12.registerTool('st', {}, async () => { n += 1; return { content: [{ type: 'text', text: 'st' }] }; });
    const c12 = await pair(s12);
    const r1 = await c12.callTool({ name: 'st', arguments: {}, _meta: { 'claudecode/toolUseId': 'toolu_01' } });
    const r2 = await c12.callTool({ name: 'st', arguments: {}, _meta: { 'openai/session': 'sess-9' } });
    const want = 'st was not run: no conversation for this call (the request names none and strict is true: no _meta "io.github.sqlite-idempotency/conversation", "openai/session" or "vscode.conversationId"; give options.conversation); the application must supply it, and nothing was sent. Do not call st again until it does.';
    report(text(r1) === want && r1.isError === true && r1._meta[META.decision] === 'no_conversation' && text(r2) === 'st' && n === 1,
      'strict', j({ r1, r2 }));
    await c12.close();
  }
  // annotations: destructiveHint true makes the tool strict (unless strict
  // is false: then the window decides); idempotentHint true is never
  // advertised (removed at registration and at update, one warning a tool)
  {
    const warned = [];
    const onWarning = (w) => { if (w.code === 'IDEM_IDEMPOTENT_HINT') warned.push(w.message); };
    process.on('warning', onWarning);
    const s17 = new McpServer({ name: 'hints', version: '0' });
    withIdempotency(s17, ledger, { tenant: () => 'tenant-h' });
    let wipes = 0;
    s17.registerTool('wipe', { annotations: { destructiveHint: true } }, async () => { wipes += 1; return { content: [{ type: 'text', text: `wiped ${wipes}` }] }; });
    const again = s17.registerTool('again', { annotations: { idempotentHint: true, title: 'Again' } }, async () => ({ content: [{ type: 'text', text: 'again' }] }));
    const c17 = await pair(s17);
    const r1 = await c17.callTool({ name: 'wipe', arguments: {} });
    const r2 = await c17.callTool({ name: 'wipe', arguments: {}, _meta: conv('c-h') });
    const want = 'wipe was not run: no conversation for this call (the request names none and the tool declares destructiveHint: true (strict: false lets the window decide): no _meta "io.github.sqlite-idempotency/conversation", "openai/session" or "vscode.conversationId"; give options.conversation); the application must supply it, and nothing was sent. Do not call wipe again until it does.';
    report(text(r1) === want && r1._meta[META.decision] === 'no_conversation' && text(r2) === 'wiped 1' && wipes === 1,
      'destructive-strict', j({ r1, r2 }));
    again.update({ annotations: { idempotentHint: true, title: 'Again 2' } });
    await sleep(0); // process warnings are emitted on the next tick
    const listed = (await c17.listTools()).tools.find((t) => t.name === 'again');
    report(j(listed.annotations) === j({ title: 'Again 2' }) && warned.length === 1 &&
      warned[0] === 'tool "again" declared idempotentHint: true, which withIdempotency removed: clients retry a tool so hinted on their own, and the ledger\'s protection of a call ends when its row is purged (retention_seconds, idem_purge)',
    'idempotent-hint-removed', j({ listed, warned }));
    process.off('warning', onWarning);
    await c17.close();
    // strict: false: a destructive tool without a conversation takes the window
    const s18 = new McpServer({ name: 'hints2', version: '0' });
    withIdempotency(s18, ledger, { tenant: () => 'tenant-h2', strict: false });
    let drops = 0;
    s18.registerTool('drop', { annotations: { destructiveHint: true } }, async () => { drops += 1; return { content: [{ type: 'text', text: `dropped ${drops}` }] }; });
    const c18 = await pair(s18);
    const d1 = await c18.callTool({ name: 'drop', arguments: {} });
    const d2 = await c18.callTool({ name: 'drop', arguments: {} });
    report(text(d1) === 'dropped 1' && d2._meta[META.replay] === true && drops === 1, 'destructive-strict-false', j({ d1, d2 }));
    await c18.close();
  }
  // a deliberate repeat: "send Bob another $5" inside the window is a
  // replay whose words say nothing new was done (one payment); with
  // repeatArgument the words name the way, and the model's call that sets
  // it is a new call (two payments); a retry of that one replays again
  {
    const runPay = async (options) => {
      const s = new McpServer({ name: 'pay', version: '0' });
      withIdempotency(s, ledger, { tenant: () => 'tenant-pay', ...options });
      const paid = [];
      s.registerTool('pay', { inputSchema: { to: z.string(), amount: z.number(), repeat: z.number().optional() } }, async (args) => {
        paid.push(args);
        return { content: [{ type: 'text', text: `paid ${args.amount} to ${args.to}` }] };
      });
      const c = await pair(s);
      return { c, paid };
    };
    const a = await runPay({});
    await a.c.callTool({ name: 'pay', arguments: { to: 'bob', amount: 5 }, _meta: conv('c-pay-1') });
    const again = await a.c.callTool({ name: 'pay', arguments: { to: 'bob', amount: 5 }, _meta: conv('c-pay-1') });
    const key1 = again._meta[META.key] || keyIn(again);
    report(a.paid.length === 1 && again._meta[META.replay] === true &&
      text(again) === `pay was not run again: this request is identical to a call that already ran at ${iso(key1, 'tenant-pay')} (key ${key1}, attempt 1), so nothing new was done, and the result below is that earlier run's: do not report it as done a second time. The result of that run:`,
    'repeat-without-a-way', `paid ${j(a.paid)}, ${j(again)}`);
    await a.c.close();
    const b = await runPay({ repeatArgument: { pay: 'repeat' } });
    await b.c.callTool({ name: 'pay', arguments: { to: 'bob', amount: 5 }, _meta: conv('c-pay-2') });
    const told2 = await b.c.callTool({ name: 'pay', arguments: { to: 'bob', amount: 5 }, _meta: conv('c-pay-2') });
    const key2 = keyIn(told2);
    const second = await b.c.callTool({ name: 'pay', arguments: { to: 'bob', amount: 5, repeat: 2 }, _meta: conv('c-pay-2') });
    const retry = await b.c.callTool({ name: 'pay', arguments: { to: 'bob', amount: 5, repeat: 2 }, _meta: conv('c-pay-2') });
    report(b.paid.length === 2 && j(b.paid[1]) === j({ to: 'bob', amount: 5, repeat: 2 }) && told2._meta[META.replay] === true &&
      text(told2) === `pay was not run again: this request is identical to a call that already ran at ${iso(key2, 'tenant-pay')} (key ${key2}, attempt 1), so nothing new was done, and the result below is that earlier run's: do not report it as done a second time. To do it again on purpose, call pay with "repeat" set to a value not used before. The result of that run:` &&
      !second.isError && text(second) === 'paid 5 to bob' && retry._meta[META.replay] === true,
    'repeat-with-repeat-argument', `paid ${j(b.paid)}, ${j({ told2, second, retry })}`);
    await b.c.close();
    report(threw(() => idempotentTool(ledger, 'x', { repeatArgument: { x: 'again' } }, async () => ({}))) ===
      'TypeError: idempotentTool: options.repeatArgument must be the name of an argument of the tool (a non-empty string), got {"x":"again"}' &&
      threw(() => withIdempotency(new McpServer({ name: 'r', version: '0' }), ledger, { repeatArgument: 'again' })) ===
      'TypeError: withIdempotency: options.repeatArgument must be an object of argument names by tool name ({ transfer: \'repeat\' }), got "again"',
    'repeat-argument-errors', 'no error');
  }
  // a tenant function that rejects, or a conversation function that throws: refused, not a raw error
  {
    const s13 = new McpServer({ name: 'throws', version: '0' });
    withIdempotency(s13, ledger, { tenant: async () => { throw new TypeError('toolsContext is undefined'); } });
    s13.registerTool('t13', {}, async () => { runs += 1; return { content: [] }; });
    const s14 = new McpServer({ name: 'throws2', version: '0' });
    withIdempotency(s14, ledger, { tenant: async () => 'tenant-a', conversation: () => { throw new RangeError('no thread'); } });
    s14.registerTool('t14', {}, async () => { runs += 1; return { content: [] }; });
    const [c13, c14] = [await pair(s13), await pair(s14)];
    const before = runs;
    const r13 = await c13.callTool({ name: 't13', arguments: {} });
    const r14 = await c14.callTool({ name: 't14', arguments: {} });
    const want13 = 't13 was not run: no tenant for this call (options.tenant threw: toolsContext is undefined); the application must supply it, and nothing was sent. Do not call t13 again until it does.';
    const want14 = 't14 was not run: no conversation for this call (options.conversation threw: no thread); the application must supply it, and nothing was sent. Do not call t14 again until it does.';
    report(text(r13) === want13 && r13._meta[META.decision] === 'no_tenant' && text(r14) === want14 && r14._meta[META.decision] === 'no_conversation' &&
      runs === before, 'function-throws', j({ r13, r14 }));
    await c13.close();
    await c14.close();
  }
  // missing parts, each named; nothing runs
  {
    const s3 = new McpServer({ name: 'missing', version: '0' });
    withIdempotency(s3, ledger);
    s3.registerTool('m', { inputSchema: { x: z.number() } }, async () => { runs += 1; return { content: [] }; });
    const s4 = new McpServer({ name: 'missing2', version: '0' });
    withIdempotency(s4, ledger, { tenant: () => 'tenant-a', conversation: (args) => args.thread });
    s4.registerTool('m', { inputSchema: { x: z.number(), thread: z.string().optional() } }, async () => { runs += 1; return { content: [{ type: 'text', text: 'ran' }] }; });
    const s5 = new McpServer({ name: 'missing3', version: '0' });
    withIdempotency(s5, ledger, { tenant: () => { throw new Error('no user'); }, conversation: () => 7 });
    s5.registerTool('m', {}, async () => { runs += 1; return { content: [] }; });
    const [c3, c4, c5] = [await pair(s3), await pair(s4), await pair(s5)];
    const before = runs;
    const r3 = await c3.callTool({ name: 'm', arguments: { x: 1 }, _meta: conv('c1') });
    const r4 = await c4.callTool({ name: 'm', arguments: { x: 1 } });
    const r4b = await c4.callTool({ name: 'm', arguments: { x: 1, thread: 't1' } });
    const r5 = await c5.callTool({ name: 'm', arguments: {} });
    const got = [r3, r4, r5].map(text);
    const want = [
      'm was not run: no tenant for this call (the request carries no authInfo: no bearer-token verifier on this transport; give options.tenant); the application must supply it, and nothing was sent. Do not call m again until it does.',
      'm was not run: no conversation for this call (options.conversation gave undefined); the application must supply it, and nothing was sent. Do not call m again until it does.',
      'm was not run: no tenant for this call (options.tenant threw: no user); the application must supply it, and nothing was sent. Do not call m again until it does.',
    ];
    const decisions = [r3, r4, r5].map((r) => r.isError === true && r._meta[META.decision]);
    report(j(got) === j(want) && j(decisions) === j(['no_tenant', 'no_conversation', 'no_tenant']) &&
      text(r4b) === 'ran' && runs === before + 1, 'missing', j({ got, r4b }));
    const s6 = new McpServer({ name: 'missing4', version: '0' });
    withIdempotency(s6, ledger, { tenant: () => 'tenant-a', conversation: () => 7 });
    s6.registerTool('m', {}, async () => ({ content: [] }));
    const c6 = await pair(s6);
    const r6 = await c6.callTool({ name: 'm', arguments: {} });
    report(text(r6) === 'm was not run: no conversation for this call (options.conversation gave a number, not a string); the application must supply it, and nothing was sent. Do not call m again until it does.', 'missing-type', j(r6));
    for (const c of [c3, c4, c5, c6]) await c.close();
  }
  // parts that are not key parts: refused, naming the value and the rule, nothing claimed
  {
    const sources = [
      ['clientId', { tenant: undefined }, { authInfo: { token: 't', clientId: 'https://client.example/meta.json', scopes: [] } }],
      ['own-meta', { tenant: () => 'tenant-k' }, { _meta: { [META.conversation]: 'thread 7' } }],
      ['own-meta-type', { tenant: () => 'tenant-k' }, { _meta: { [META.conversation]: 7 } }],
      ['option', { tenant: () => 'tenant-k', conversation: () => 'x'.repeat(129) }, {}],
    ];
    const rule = 'not a key part (1 to 128 characters of A-Za-z0-9_-)';
    const want = [
      `kp was not run: no tenant for this call (authInfo.clientId is "https://client.example/meta.json", ${rule}; give options.tenant); the application must supply it, and nothing was sent. Do not call kp again until it does.`,
      `kp was not run: no conversation for this call (_meta "${META.conversation}" is "thread 7", ${rule}); the application must supply it, and nothing was sent. Do not call kp again until it does.`,
      `kp was not run: no conversation for this call (_meta "${META.conversation}" is a number, ${rule}); the application must supply it, and nothing was sent. Do not call kp again until it does.`,
      `kp was not run: no conversation for this call (options.conversation gave "${'x'.repeat(129)}", ${rule}); the application must supply it, and nothing was sent. Do not call kp again until it does.`,
    ];
    let n = 0;
    for (let i = 0; i < sources.length; i++) {
      const [name, opts, extra] = sources[i];
      const cb = idempotentTool(ledger, 'kp', opts, async () => { n += 1; return { content: [] }; });
      const r = await cb({ a: 1 }, extra);
      report(text(r) === want[i] && r.isError === true && n === 0, `not-a-key-part-${name}`, `got ${j(text(r))}, want ${j(want[i])}`);
    }
  }
  // the signal: aborted before the tool started, nothing claimed
  {
    const ac = new AbortController();
    ac.abort();
    let n = 0;
    const cb = idempotentTool(ledger, 'sig', { tenant: () => 't', conversation: () => 'c' }, async () => { n += 1; return { content: [] }; });
    const r = await cb({ a: 1 }, { signal: ac.signal });
    const d = ledger.claim('t', 'c', 'sig', { a: 1 });
    report(n === 0 && r.isError === true && text(r) === 'sig was not sent: the call was cancelled before the tool started; nothing happened, so the call may be made again.' && d.decision === 'admitted',
      'aborted-before', j({ r, d }));
  }
  // the signal aborting while the tool runs: unknown; unless the tool says NotSent
  {
    const ac = new AbortController();
    const cb = idempotentTool(ledger, 'sig2', { tenant: () => 't', conversation: () => 'c' }, async (args, extra) => {
      await new Promise((resolve, reject) => extra.signal.addEventListener('abort', () => reject(args.ns ? new NotSent('aborted before the request was written') : new Error('aborted'))));
      return { content: [] };
    });
    const p1 = cb({ ns: false }, { signal: ac.signal });
    await sleep(10);
    ac.abort();
    const r1 = await p1;
    const ac2 = new AbortController();
    const p2 = cb({ ns: true }, { signal: ac2.signal });
    await sleep(10);
    ac2.abort();
    const r2 = await p2;
    report(r1._meta[META.decision] === 'unknown' && text(r1).startsWith(`sig2 did not finish (key ${r1._meta[META.key]}: the request was cancelled while the tool ran (aborted)): `) &&
      r2._meta[META.decision] === 'not_sent' && ledger.row('t', r2._meta[META.key]).status === 'released', 'aborted-during', j({ r1, r2 }));
  }
  // idempotentTool by itself, registered on a server without withIdempotency
  {
    const s7 = new McpServer({ name: 'single', version: '0' });
    let n = 0;
    s7.registerTool('one', { inputSchema: { to: z.string() } }, idempotentTool(ledger, 'one', { tenant: () => 'tenant-a' }, async ({ to }, extra) => {
      n += 1;
      return { content: [{ type: 'text', text: `one ${to} ${attemptOf(extra).attempt}` }] };
    }));
    const c7 = await pair(s7);
    const r1 = await c7.callTool({ name: 'one', arguments: { to: 'x' }, _meta: conv('c1') });
    const r2 = await c7.callTool({ name: 'one', arguments: { to: 'x' }, _meta: conv('c1') });
    report(n === 1 && text(r1) === 'one x 1' && r2._meta[META.replay] === true, 'idempotent-tool', j({ r1, r2 }));
    await c7.close();
  }
  // withIdempotency twice on one server guards once
  {
    const s8 = new McpServer({ name: 'twice', version: '0' });
    withIdempotency(s8, ledger, { tenant: () => 'tenant-a' });
    withIdempotency(s8, ledger, { tenant: () => 'tenant-a' });
    let n = 0;
    s8.registerTool('t8', {}, async () => { n += 1; return { content: [{ type: 'text', text: 't8' }] }; });
    const c8 = await pair(s8);
    const r1 = await c8.callTool({ name: 't8', arguments: {}, _meta: conv('c1') });
    const r2 = await c8.callTool({ name: 't8', arguments: {}, _meta: conv('c1') });
    const key = ledger.claim('tenant-a', 'c1', 't8', {}).key;
    report(n === 1 && r2._meta[META.replay] === true && ledger.row('tenant-a', key).attempt === 1, 'wrapped-once', j({ r1, r2 }));
    await c8.close();
  }
  // errors of the API, with their text
  {
    const got = [
      threw(() => withIdempotency({}, ledger)),
      threw(() => withIdempotency(new McpServer({ name: 'x', version: '0' }), {})),
      threw(() => withIdempotency(new McpServer({ name: 'x', version: '0' }), ledger, { tenants: () => 'a' })),
      threw(() => withIdempotency(new McpServer({ name: 'x', version: '0' }), ledger, { tenant: 'a' })),
      threw(() => withIdempotency(new McpServer({ name: 'x', version: '0' }), ledger, { waitMs: -1 })),
      threw(() => idempotentTool(ledger, '', {}, async () => ({}))),
      threw(() => idempotentTool(ledger, 'x', {}, 'nope')),
      threw(() => idempotentTool(ledger, 'x', { renewSeconds: 1.5 }, async () => ({}))),
      threw(() => attemptOf({})),
      threw(() => idempotentTool(ledger, 'x', { strict: 1 }, async () => ({}))),
      threw(() => idempotentTool(ledger, 'x', { windowSeconds: 0 }, async () => ({}))),
      threw(() => idempotentTool(ledger, 'x', { windowSeconds: 86401 }, async () => ({}))),
      threw(() => idempotentTool(ledger, 'x', { windowSeconds: 60, strict: true }, async () => ({}))),
      threw(() => idempotentTool(ledger, 'x', { heartbeatSeconds: -1 }, async () => ({}))),
      threw(() => idempotentTool(ledger, 'x', { targets: ['mailto:a'] }, async () => ({}))),
      threw(() => withIdempotency(new McpServer({ name: 'e', version: '0' }), ledger, { targets: (args) => [args.to] })),
      threw(() => withIdempotency(new McpServer({ name: 'e', version: '0' }), ledger, { targets: { send: 'mailto:a' } })),
      threw(() => idempotentTool(ledger, 'x', { allowedBy: 'ops' }, async () => ({}))),
    ];
    const want = [
      'TypeError: withIdempotency: server must be an McpServer (an object with registerTool)',
      'TypeError: withIdempotency: ledger must be a Ledger of sqlite-idempotency, got object',
      'TypeError: withIdempotency: unknown option "tenants" (options are tenant, conversation, strict, windowSeconds, waitMs, renewSeconds, heartbeatSeconds, targets, allowedBy, askSecondWrite, repeatArgument)',
      'TypeError: withIdempotency: options.tenant must be a function, got string',
      'RangeError: withIdempotency: options.waitMs must be a number of milliseconds >= 0, got -1',
      'TypeError: idempotentTool: name must be a non-empty string, got ""',
      'TypeError: idempotentTool: callback must be a function, got string',
      'RangeError: idempotentTool: options.renewSeconds must be an integer >= 0, got 1.5',
      'TypeError: attemptOf: this extra is not of a tool call guarded by sqlite-idempotency/mcp',
      'TypeError: idempotentTool: options.strict must be a boolean, got number',
      'RangeError: idempotentTool: options.windowSeconds must be an integer from 1 to 86400, got 0',
      'RangeError: idempotentTool: options.windowSeconds must be an integer from 1 to 86400, got 86401',
      'TypeError: idempotentTool: options.windowSeconds is of no use with strict: true (a call that names no conversation is refused)',
      'RangeError: idempotentTool: options.heartbeatSeconds must be an integer >= 0, got -1',
      "TypeError: idempotentTool: options.targets must be a function of the tool's arguments returning an array of strings, got object",
      'TypeError: withIdempotency: options.targets must be an object of functions by tool name ({ send_email: (args) => [...] }), got function',
      'TypeError: withIdempotency: options.targets must be an object of functions by tool name ({ send_email: (args) => [...] }), got object',
      'TypeError: idempotentTool: options.allowedBy must be a function of (args, extra) returning who allows a second write, or undefined; got string',
    ];
    for (let i = 0; i < want.length; i++) report(got[i] === want[i], `api-error-${i + 1}`, `got ${j(got[i])}, want ${j(want[i])}`);
  }
  // targets: a function that throws, or gives no array of strings, is a
  // refusal naming it (no_targets); nothing runs, nothing is claimed
  {
    const srv = new McpServer({ name: 'targets', version: '0' });
    let ran = 0;
    srv.registerTool('mail', { inputSchema: { to: z.string() } }, idempotentTool(ledger, 'mail', {
      tenant: () => 'tenant-t',
      targets: (args) => { if (args.to === 'boom') throw new Error('no recipient'); return args.to === 'text' ? 'mailto:x' : [`mailto:${args.to}`]; },
    }, async () => { ran += 1; return { content: [{ type: 'text', text: 'ok' }] }; }));
    const c = await pair(srv);
    const rows = () => ledger.db.prepare("SELECT count(*) AS n FROM ledger_rows WHERE tenant = 'tenant-t'").get().n;
    const boom = await c.callTool({ name: 'mail', arguments: { to: 'boom' }, _meta: conv('c-t') });
    const notArray = await c.callTool({ name: 'mail', arguments: { to: 'text' }, _meta: conv('c-t') });
    report(boom.isError === true && boom._meta[META.decision] === 'no_targets' &&
      text(boom) === 'mail was not run: what it would touch could not be named (options.targets threw: no recipient); the application must fix this, and nothing was sent. Do not call mail again until it does.' &&
      text(notArray) === 'mail was not run: what it would touch could not be named (options.targets gave a string, not an array of strings); the application must fix this, and nothing was sent. Do not call mail again until it does.' &&
      ran === 0 && rows() === 0, 'no-targets', `${j(boom)} ${j(notArray)}, ran ${ran}, rows ${rows()}`);
    await c.close();
  }
  // askSecondWrite: a conflict with a call that succeeded asks the person
  // (elicitation); only an accept with confirm checked runs the second
  // write, recorded as allowed by the person of the tenant; a decline, or a
  // client without elicitation, is the conflict
  {
    const srv = new McpServer({ name: 'ask', version: '0' });
    withIdempotency(srv, ledger, { tenant: () => 'tenant-e', targets: { mail: (args) => [`mailto:${args.to}`] }, askSecondWrite: true });
    let ran = 0;
    srv.registerTool('mail', { inputSchema: { to: z.string(), body: z.string() } }, async () => { ran += 1; return { content: [{ type: 'text', text: `sent ${ran}` }] }; });
    const [a, b] = InMemoryTransport.createLinkedPair();
    await srv.connect(a);
    const asking = new Client({ name: 'person', version: '0' }, { capabilities: { elicitation: { form: {} } } });
    const asked = [];
    let answer = { action: 'decline' };
    asking.setRequestHandler(ElicitRequestSchema, async (req) => { asked.push(req.params.message); return answer; });
    await asking.connect(b);
    const m = (body) => asking.callTool({ name: 'mail', arguments: { to: 'bob@example.com', body }, _meta: conv('c-e') });
    await m('first');
    const declined = await m('second, reworded');
    answer = { action: 'accept', content: { confirm: false } };
    const unchecked = await m('third, reworded');
    answer = { action: 'accept', content: { confirm: true } };
    const accepted = await m('fourth, asked for');
    const allowed = ledger.db.prepare("SELECT t.allowed_by FROM ledger_targets t JOIN ledger_rows r ON r.id = t.claim WHERE r.tenant = 'tenant-e' AND t.allowed_by IS NOT NULL").all();
    report(declined._meta[META.decision] === 'conflict' && unchecked._meta[META.decision] === 'conflict' && accepted.isError !== true &&
      text(accepted) === 'sent 2' && ran === 2 && asked.length === 3 && asked[0].endsWith(' Do it a second time anyway?') &&
      asked[0].startsWith('mail was not run: a different call (mail, key ') && j(allowed) === '[{"allowed_by":"person:tenant-e"}]',
    'ask-second-write', `declined ${j(declined)}, unchecked ${j(unchecked)}, accepted ${j(accepted)}, ran ${ran}, asked ${j(asked)}, allowed ${j(allowed)}`);
    await asking.close();
    // a client that cannot be asked: the conflict, nothing asked
    const srv2 = new McpServer({ name: 'ask2', version: '0' });
    withIdempotency(srv2, ledger, { tenant: () => 'tenant-e', targets: { mail: (args) => [`mailto:${args.to}`] }, askSecondWrite: true });
    srv2.registerTool('mail', { inputSchema: { to: z.string(), body: z.string() } }, async () => { ran += 1; return { content: [{ type: 'text', text: 'sent' }] }; });
    const plain = await pair(srv2);
    const r = await plain.callTool({ name: 'mail', arguments: { to: 'bob@example.com', body: 'fifth' }, _meta: conv('c-e') });
    report(r._meta[META.decision] === 'conflict' && ran === 2, 'ask-second-write-no-elicitation', `${j(r)}, ran ${ran}`);
    await plain.close();
    report(threw(() => idempotentTool(ledger, 'x', { askSecondWrite: true }, async () => ({}))) ===
      'TypeError: idempotentTool: options.askSecondWrite needs the server to ask the person through: give it to withIdempotency', 'ask-second-write-needs-server', 'no error');
  }
  await client.close();
} catch (e) {
  report(false, 'run', e.stack);
} finally {
  ledger.close();
  fs.rmSync(tmp, { recursive: true, force: true });
}
process.exit(checks.status());
