// sqlite-idempotency/mcp end to end: real MCP server processes
// (mcp_server.mjs) driven by @modelcontextprotocol/sdk's own Client, over stdio
// and over Streamable HTTP with a bearer-token verifier giving the tenant,
// against the counting target (../lib/target.mjs) on 127.0.0.1. For each
// transport:
//
//   stock          the SDK's Client as it is, no _meta (the conversation is
//                  the tenant's deduplication window): the retry, a new
//                  request id (over HTTP a new connection) with the
//                  arguments in another order, is a replay whose first text
//                  block says it already ran, when and which attempt; one
//                  request
//   twice          the same call twice with the project's _meta
//                  conversation: the target saw one request, the second
//                  caller got the first result after the replay's words,
//                  with _meta replay true; the readOnlyHint tool is not
//                  guarded (two calls, two requests)
//   hosts          _meta "openai/session" and "vscode.conversationId" scope
//                  like a conversation (two values, two requests; the same
//                  value again, a replay whatever else _meta carries:
//                  "claudecode/toolUseId", "vscode.requestId")
//   window         a server with a 4 s window: a retry across a bucket's
//                  edge, less than the window after the first call, is a
//                  replay; an identical call the window after the first, in
//                  that next bucket, is a new operation (a sliding window,
//                  not fixed buckets)
//   strict         a strict tool refuses a call that names no conversation,
//                  with the exact text, and sends nothing
//   concurrent     four client processes at once, no _meta: one ran, three
//                  got its result as a replay; one request (the window's
//                  choice and the claim are one write transaction)
//   timeout        the client gives up (RequestTimeout) while the tool runs;
//                  a retry gets the first result as a replay; one request
//   reworded       the client gives up (RequestTimeout) while the tool runs,
//                  and the call comes again with the subject reworded (a new
//                  key) for the same invoice: while the first runs, an
//                  isError conflict saying it has not reported yet; once it
//                  succeeded, a conflict saying so with its result as the
//                  second text block; one request reached the target
//   cancelled      (stdio) the timed-out client's cancellation aborts the
//                  tool's signal after its request left: the retry answers
//                  unknown (isError, the extension's sentence); one request
//   killed         the server process is killed (SIGKILL) mid-call; after the
//                  lease, a fresh server answers the retry unknown and sends
//                  nothing; one request
//   heartbeat      heartbeatSeconds 1 on a ledger whose lease is 3 s: a call
//                  running past the lease still holds its claim; SIGKILLed,
//                  the retry reads unknown within the lease and a second or
//                  two, and nothing is sent again (skipped while Ledger.call
//                  has no heartbeatSeconds)
//   tenants        two tenants, the same arguments and conversation: two
//                  requests, each replayed to its own tenant
//   conversations  two conversations, the same tenant and arguments: two
//                  requests, each replayed in its own conversation
//   missing        (stdio) no tenant (without $MCP_TENANT): isError naming
//                  it, nothing sent
//
// Usage: node test_mcp.mjs   (run from a project where sqlite-idempotency
// and the SDK resolve; tests/suites/55-integrations-mcp.sh makes it)
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';
import { isDeepStrictEqual } from 'node:util';
import Database from 'better-sqlite3';
import { Ledger } from 'sqlite-idempotency';
import { META } from 'sqlite-idempotency/mcp';
import { startTarget } from './target.mjs';
import { connect, callSend, SERVER } from './mcp_connect.mjs';
import { Checks } from './checks.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const checks = new Checks('integrations.mcp');
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const j = (v) => JSON.stringify(v);
// the heartbeat case: a beat each second, a lease of three beats
const BEAT_SECONDS = 1;
const BEAT_LEASE_SECONDS = 3 * BEAT_SECONDS;
const UNKNOWN = 'that request may have reached the target system, the outcome is theirs to report, and nothing is retried here';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'idem-mcp-'));
const db = path.join(tmp, 'agent.db');
{
  const setup = new Database(db);
  Ledger.open(setup);
  Ledger.open(setup, { name: 'short', options: { lease_seconds: 1 } });
  Ledger.open(setup, { name: 'beat', options: { lease_seconds: BEAT_LEASE_SECONDS } });
  setup.close();
}
const target = await startTarget();
const children = new Set();

const replayed = (r) => r && r._meta && r._meta[META.replay] === true;
const keyOf = (r) => r && r.structuredContent && r.structuredContent.received;
const fresh = (r) => r && !r.isError && !replayed(r) && typeof keyOf(r) === 'string';
const text = (r) => r && r.content && r.content[0] && r.content[0].text;

// The ledger row of a key, read by a connection of the test's own.
function rowOf(tenant, key) {
  const check = new Database(db);
  try {
    return Ledger.open(check, { create: false }).row(tenant, key);
  } finally {
    check.close();
  }
}

// r is a replay of first: the replay's words (when the first call ran, from
// its row; which attempt), then first's content and structuredContent as
// they were.
function isReplayOf(r, first, tenant = 'tenant-a') {
  const key = keyOf(first);
  const row = key && rowOf(tenant, key);
  if (!row || !replayed(r)) return false;
  const words = `send_email was not run again: this request is identical to a call that already ran at ${new Date(row.updated_at).toISOString()} (key ${key}, attempt 1), so nothing new was done, and the result below is that earlier run's: do not report it as done a second time. The result of that run:`;
  return r.content[0].type === 'text' && r.content[0].text === words && isDeepStrictEqual(r.content.slice(1), first.content) &&
    isDeepStrictEqual(r.structuredContent, first.structuredContent);
}

// An HTTP server process: resolves to { url, proc } once it printed PORT.
function startHttp(ledger = 'ledger', env = {}) {
  const proc = spawn(process.execPath, [SERVER, 'http', db, target.url], {
    env: { ...process.env, LEDGER: ledger, WAIT_MS: '8000', ...env }, stdio: ['pipe', 'pipe', 'pipe'],
  });
  children.add(proc);
  proc.on('exit', () => children.delete(proc));
  let err = '';
  proc.stderr.on('data', (d) => { err += d; });
  return new Promise((resolve, reject) => {
    const rl = readline.createInterface({ input: proc.stdout });
    rl.on('line', (l) => { if (l.startsWith('PORT ')) resolve({ url: `http://127.0.0.1:${l.slice(5)}/mcp`, proc }); });
    proc.on('exit', (code) => reject(new Error(`mcp_server.mjs http exited (${code}): ${err}`)));
  });
}

// Client processes that start their call together: resolves to their results.
async function clientsAtOnce(argvs) {
  const procs = argvs.map((argv) => {
    const p = spawn(process.execPath, [path.join(HERE, 'mcp_client.mjs'), ...argv], { stdio: ['pipe', 'pipe', 'pipe'] });
    children.add(p);
    p.on('exit', () => children.delete(p));
    const lines = [];
    const rl = readline.createInterface({ input: p.stdout });
    const ready = new Promise((resolve) => rl.on('line', (l) => { lines.push(l); if (l === 'READY') resolve(); }));
    const done = new Promise((resolve) => p.on('exit', () => resolve(lines)));
    return { p, ready, done };
  });
  await Promise.all(procs.map((c) => c.ready));
  for (const c of procs) c.p.stdin.write('GO\n');
  const outs = await Promise.all(procs.map((c) => c.done));
  return outs.map((lines) => { try { return JSON.parse(lines[lines.length - 1]); } catch { return { bad: lines }; } });
}

async function caught(promise) {
  try { return { value: await promise }; } catch (e) { return { error: e }; }
}

async function waitFor(cond, ms, what) {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

const t0 = Date.now();
const lap = (what) => { if (process.env.IDEM_TEST_TIMES) console.log(`   ${what}: ${Date.now() - t0} ms`); };

async function suite(mode) {
  const p = `${mode}.`;
  const http = mode === 'http' ? await startHttp() : undefined;
  const client = (o = {}) => (mode === 'stdio'
    ? connect({ mode, db, target: target.url, tenant: 'tenant-a', ...o })
    : connect({ mode, url: http.url, token: o.token || 'token-a' }));
  const main = await client();
  const clientArgv = (args, conv, tenant = 'a') => (mode === 'stdio'
    ? ['stdio', db, target.url, `tenant-${tenant}`, j(args), conv]
    : ['http', http.url, `token-${tenant}`, j(args), conv]);

  lap(`${mode} before stock`);
  // stock: no _meta; the retry is a new request id with reordered arguments
  {
    const args = { to: `stock-${mode}@example.com`, subject: 'hello' };
    const r1 = await callSend(main, args);
    const c2 = mode === 'http' ? await client() : main;
    const r2 = await callSend(c2, { subject: 'hello', to: args.to });
    if (c2 !== main) await c2.close();
    const row = fresh(r1) && rowOf('tenant-a', keyOf(r1));
    checks.report(fresh(r1) && isReplayOf(r2, r1) && /^w-[0-9]+$/.test(row.conversation) && target.count(keyOf(r1)) === 1,
      `${p}stock`, `first ${j(r1)}, retry ${j(r2)}, row ${j(row)}, target saw ${target.count(keyOf(r1))}`);
  }

  lap(`${mode} before twice`);
  // twice
  {
    const args = { to: `twice-${mode}@example.com`, subject: 'hello' };
    const r1 = await callSend(main, args, 'conv-1');
    const c2 = mode === 'http' ? await client() : main; // over HTTP the second call comes on a new connection
    const r2 = await callSend(c2, args, 'conv-1');
    const before = target.countPath('/lookup');
    await c2.callTool({ name: 'lookup', arguments: { q: 'x' } });
    await c2.callTool({ name: 'lookup', arguments: { q: 'x' } });
    if (c2 !== main) await c2.close();
    checks.report(fresh(r1) && isReplayOf(r2, r1) && target.count(keyOf(r1)) === 1,
      `${p}twice`, `first ${j(r1)}, second ${j(r2)}, target saw ${target.count(keyOf(r1))}`);
    checks.report(target.countPath('/lookup') - before === 2, `${p}read-only-unguarded`, `target saw ${target.countPath('/lookup') - before} lookups, want 2`);
  }

  lap(`${mode} before hosts`);
  // hosts: the keys hosts send that name a conversation
  {
    const args = { to: `hosts-${mode}@example.com`, subject: 'hello' };
    const [u1, u2] = [randomUUID(), randomUUID()];
    const s1 = await callSend(main, args, { 'openai/session': `v1-${u1}` });
    const s2 = await callSend(main, args, { 'openai/session': `v1-${u2}` });
    const s1b = await callSend(main, args, { 'openai/session': `v1-${u1}`, 'claudecode/toolUseId': `toolu_${u2}` });
    const v1 = await callSend(main, args, { 'vscode.conversationId': u1, 'vscode.requestId': 'r-1' });
    const v2 = await callSend(main, args, { 'vscode.conversationId': u2, 'vscode.requestId': 'r-1' });
    const v1b = await callSend(main, args, { 'vscode.conversationId': u1, 'vscode.requestId': 'r-2' });
    const conversations = [s1, s2, v1, v2].map((r) => fresh(r) && rowOf('tenant-a', keyOf(r)).conversation);
    const want = [`openai-v1-${u1}`, `openai-v1-${u2}`, `vscode-${u1}`, `vscode-${u2}`];
    checks.report(j(conversations) === j(want) && new Set([s1, s2, v1, v2].map(keyOf)).size === 4 &&
      isReplayOf(s1b, s1) && isReplayOf(v1b, v1) && [s1, s2, v1, v2].every((r) => target.count(keyOf(r)) === 1),
      `${p}hosts`, `conversations ${j(conversations)}, want ${j(want)}; ${j({ s1b, v1b })}`);
  }

  lap(`${mode} before window`);
  // window: a server whose window is 4 s (buckets of 4 s)
  {
    const W = 4000;
    let wc; let wh;
    if (mode === 'stdio') {
      wc = await client({ windowSeconds: W / 1000 });
    } else {
      wh = await startHttp('ledger', { WINDOW_SECONDS: String(W / 1000) });
      wc = await connect({ mode, url: wh.url, token: 'token-a' });
    }
    const args = { to: `window-${mode}@example.com`, subject: 'hello' };
    // the first call in the second half of a bucket, at least 1 s before its end
    await waitFor(() => Date.now() % W >= W / 2 && Date.now() % W < W - 1000, 2 * W, 'the second half of a bucket');
    const r1 = await callSend(wc, args);
    const row1 = fresh(r1) && rowOf('tenant-a', keyOf(r1));
    const b0 = Math.floor(row1.created_at / W);
    // the retry in the next bucket, less than the window after the first call
    await waitFor(() => Date.now() >= (b0 + 1) * W + 10, 2 * W, 'the next bucket');
    const retrySent = Date.now();
    const r2 = await callSend(wc, { subject: 'hello', to: args.to });
    // an identical call the window after the first one, still in that next bucket
    await waitFor(() => Date.now() >= row1.created_at + W + 10, 2 * W, 'the end of the window');
    const r3 = await callSend(wc, args);
    const row3 = fresh(r3) && rowOf('tenant-a', keyOf(r3));
    await wc.close();
    if (wh) wh.proc.kill();
    checks.report(row1.conversation === `w-${(b0 * W) / 1000}` && retrySent >= (b0 + 1) * W && isReplayOf(r2, r1) && target.count(keyOf(r1)) === 1,
      `${p}window-edge`, `first ${j(r1)} row ${j(row1)}, retry sent at ${retrySent} ${j(r2)}`);
    checks.report(row3 && keyOf(r3) !== keyOf(r1) && row3.conversation === `w-${((b0 + 1) * W) / 1000}` && target.count(keyOf(r3)) === 1,
      `${p}window-after`, `after the window ${j(r3)} row ${j(row3)}`);
  }

  lap(`${mode} before strict`);
  // strict: no conversation named, refused; a host key names one
  {
    const args = { to: `strict-${mode}@example.com`, subject: 'hello' };
    const sent = target.total();
    const r = await callSend(main, args, undefined, undefined, 'send_email_strict');
    const refusedSent = target.total() - sent;
    const ok = await callSend(main, args, { 'vscode.conversationId': `strict-${mode}` }, undefined, 'send_email_strict');
    const want = 'send_email_strict was not run: no conversation for this call (the request names none and strict is true: no _meta "io.github.sqlite-idempotency/conversation", "openai/session" or "vscode.conversationId"; give options.conversation); the application must supply it, and nothing was sent. Do not call send_email_strict again until it does.';
    checks.report(r.isError === true && text(r) === want && r._meta[META.decision] === 'no_conversation' && refusedSent === 0 &&
      fresh(ok) && target.count(keyOf(ok)) === 1, `${p}strict`, `got ${j(r)}, want text ${j(want)}; with a host key ${j(ok)}`);
  }

  lap(`${mode} before concurrent`);
  // concurrent: four client processes at once, no _meta
  {
    const args = { to: `concurrent-${mode}@example.com`, subject: 'hello', delay_ms: 700 };
    const rs = await clientsAtOnce([0, 1, 2, 3].map(() => clientArgv(args, '-')));
    const first = rs.filter(fresh);
    const replays = rs.filter(replayed);
    checks.report(first.length === 1 && replays.length === 3 && replays.every((r) => isReplayOf(r, first[0])) &&
      target.count(keyOf(first[0])) === 1, `${p}concurrent`, `results ${j(rs)}, target saw ${first.length ? target.count(keyOf(first[0])) : '?'}`);
  }

  lap(`${mode} before timeout`);
  // timeout: the client gives up, the tool finishes, a retry replays
  {
    const args = { to: `timeout-${mode}@example.com`, subject: 'hello', delay_ms: 900 };
    const t = await caught(callSend(main, args, 'conv-1', { timeout: 250 }));
    const r = await callSend(main, args, 'conv-1');
    const timedOut = t.error && /timed out/i.test(t.error.message);
    checks.report(timedOut && replayed(r) && !r.isError && target.count(keyOf(r)) === 1, `${p}timeout`,
      `first ${t.error ? t.error.message : j(t.value)}, retry ${j(r)}, target saw ${target.count(keyOf(r))}`);
  }

  lap(`${mode} before reworded`);
  // reworded: a timeout, then the same invoice email in other words
  {
    const first = { to: `reword-${mode}@example.com`, subject: 'Invoice 42', invoice: 42, delay_ms: 900 };
    const second = { to: `reword-${mode}@example.com`, subject: 'Your invoice 42, again', invoice: 42 };
    const t = await caught(callSend(main, first, 'conv-1', { timeout: 250 }));
    const during = await callSend(main, second, 'conv-1');
    await sleep(1000); // the first call finishes and settles succeeded
    const after = await callSend(main, second, 'conv-1');
    const held = after._meta && after._meta[META.key];
    const rows = new Database(db).prepare("SELECT r.key, r.status, r.updated_at, r.result FROM ledger_rows r JOIN ledger_targets t ON t.claim = r.id WHERE t.target = ?").all(`mailto:reword-${mode}@example.com/invoice-42`);
    const h = rows.length === 1 ? rows[0] : {};
    const want = (status) => {
      const at = new Date(h.updated_at).toISOString();
      return status === 'succeeded'
        ? `send_email was not run: a different call (send_email, key ${h.key}) already touched mailto:reword-${mode}@example.com/invoice-42 at ${at} and succeeded. This call (key ${held}) was not run and nothing was sent: other wording does not make it another request. Do not call send_email again for mailto:reword-${mode}@example.com/invoice-42; if the user wants it done a second time, tell them so, and the application must allow it. The result of that call:`
        : `send_email was not run: a different call (send_email, key ${h.key}) that touches mailto:reword-${mode}@example.com/invoice-42 has not reported its outcome yet (claimed or last renewed at `;
    };
    const sent = target.count(h.key);
    checks.report(t.error && /timed out/i.test(t.error.message) && rows.length === 1 && h.status === 'succeeded' && sent === 1 &&
      during.isError === true && during._meta[META.decision] === 'conflict' && text(during).startsWith(want('claimed')) &&
      after.isError === true && after._meta[META.decision] === 'conflict' && text(after) === want('succeeded') &&
      h.result && isDeepStrictEqual(after.content.slice(1), JSON.parse(h.result).content) && held !== h.key && target.count(held) === 0,
    `${p}reworded`, `first ${t.error ? t.error.message : j(t.value)}; during ${j(during)}; after ${j(after)}; rows ${j(rows)}; target saw ${sent}`);
  }

  lap(`${mode} before cancelled`);
  // cancelled: the tool honours the signal the cancellation aborts
  if (mode === 'stdio') {
    const args = { to: 'cancelled@example.com', subject: 'hello', delay_ms: 900, honor_signal: true };
    const sent = target.countPath('/send');
    const t = await caught(callSend(main, args, 'conv-1', { timeout: 300 }));
    await sleep(100); // the cancellation reaches the server, which settles
    const r = await callSend(main, args, 'conv-1');
    const wantRetry = `send_email was not run: an earlier identical call (key ${r._meta[META.key]}, attempt 1) did not report its outcome: ${UNKNOWN}. Do not call send_email again for this, however its arguments are worded; tell the user it may or may not have happened and that it must be checked in the target system.`;
    checks.report(t.error && r.isError === true && text(r) === wantRetry && r._meta[META.decision] === 'unknown' &&
      target.count(r._meta[META.key]) === 1 && target.countPath('/send') - sent === 1, `${p}cancelled`,
      `first ${t.error ? t.error.message : j(t.value)}, retry ${j(r)}, target saw ${target.count(r._meta && r._meta[META.key])}`);
    // the ledger row records why
    const row = rowOf('tenant-a', r._meta[META.key]);
    checks.report(row && row.status === 'unknown' && Object.keys(row.error).length === 1 &&
      row.error.reason.startsWith('the request was cancelled while the tool ran (') && /timed out/.test(row.error.reason),
      `${p}cancelled-recorded`, `row ${j(row)}`);
  }

  lap(`${mode} before killed`);
  // killed: SIGKILL the server process mid-call, retry against a fresh one
  {
    const args = { to: `killed-${mode}@example.com`, subject: 'hello', delay_ms: 5000 };
    const sent = target.countPath('/send');
    let victim; let c;
    if (mode === 'stdio') {
      c = await client({ ledger: 'short' });
      victim = { pid: c.transport.pid };
    } else {
      const h = await startHttp('short');
      victim = h.proc;
      c = await connect({ mode, url: h.url, token: 'token-a' });
    }
    const pending = caught(callSend(c, args, 'conv-1'));
    await waitFor(() => target.countPath('/send') > sent, 5000, 'the request to reach the target');
    process.kill(victim.pid, 'SIGKILL');
    // over HTTP the client hears nothing of the dead server until its request timeout
    const first = await Promise.race([pending, sleep(500).then(() => ({ error: new Error('no answer: the server was killed') }))]);
    await caught(c.close());
    await sleep(1100); // the lease (lease_seconds=1) runs out: the claim is unknown
    let r;
    if (mode === 'stdio') {
      const c2 = await client({ ledger: 'short' });
      r = await callSend(c2, args, 'conv-1');
      await c2.close();
    } else {
      const h2 = await startHttp('short');
      const c2 = await connect({ mode, url: h2.url, token: 'token-a' });
      r = await callSend(c2, args, 'conv-1');
      await c2.close();
      h2.proc.kill();
    }
    checks.report(first.error !== undefined && r.isError === true && r._meta[META.decision] === 'unknown' && text(r).includes(UNKNOWN) &&
      target.count(r._meta[META.key]) === 1 && target.countPath('/send') - sent === 1, `${p}killed`,
      `first ${first.error ? first.error.message : j(first.value)}, retry ${j(r)}, requests ${target.countPath('/send') - sent}`);
  }

  lap(`${mode} before heartbeat`);
  // heartbeat: on the ledger 'beat' (a lease of three beats), a call
  // running past that lease still holds its claim (an identical call is
  // in_progress); SIGKILLed, its claim is seen dead within the lease and a
  // second, and the retry reads unknown; one request
  if (!/heartbeatSeconds/.test(Ledger.prototype.call.toString())) {
    console.log(`SKIP integrations.mcp:${p}heartbeat: Ledger.call of this tree takes no heartbeatSeconds (the heartbeat is not in it yet)`);
  } else {
    const BOUND_MS = BEAT_LEASE_SECONDS * 1000 + 2000; // the lease three beats give, and two seconds for the retry's server to start
    const args = { to: `heartbeat-${mode}@example.com`, subject: 'hello', delay_ms: 9000 };
    const sent = target.countPath('/send');
    const beatServer = async () => {
      if (mode === 'stdio') return { c: await client({ ledger: 'beat', heartbeatSeconds: BEAT_SECONDS, waitMs: 0 }) };
      const h = await startHttp('beat', { HEARTBEAT_SECONDS: String(BEAT_SECONDS), WAIT_MS: '0' });
      return { c: await connect({ mode, url: h.url, token: 'token-a' }), proc: h.proc };
    };
    const first = await beatServer();
    const victim = first.proc || { pid: first.c.transport.pid };
    const pending = caught(callSend(first.c, args));
    await waitFor(() => target.countPath('/send') > sent, 5000, 'the request to reach the target');
    await sleep(BEAT_LEASE_SECONDS * 1000 + 500); // past the claim's first lease: only the beats keep it
    const during = await callSend(first.c, args);
    process.kill(victim.pid, 'SIGKILL');
    const killedAt = Date.now();
    await Promise.race([pending, sleep(500)]);
    await caught(first.c.close());
    const second = await beatServer();
    let r;
    do {
      r = await callSend(second.c, args);
      if (r._meta && r._meta[META.decision] === 'in_progress') await sleep(200);
    } while (r._meta && r._meta[META.decision] === 'in_progress' && Date.now() - killedAt < BOUND_MS);
    const took = Date.now() - killedAt;
    await second.c.close();
    if (second.proc) second.proc.kill();
    checks.report(during._meta && during._meta[META.decision] === 'in_progress' && r.isError === true && r._meta[META.decision] === 'unknown' &&
      text(r).includes(UNKNOWN) && took <= BOUND_MS && target.countPath('/send') - sent === 1, `${p}heartbeat`,
      `while running ${j(during)}; retry ${j(r)} ${took} ms after the kill (bound ${BOUND_MS} ms), requests ${target.countPath('/send') - sent}`);
  }

  lap(`${mode} before tenants`);
  // tenants: the same arguments and conversation
  {
    const args = { to: `tenants-${mode}@example.com`, subject: 'hello' };
    const ca = await client({ tenant: 'tenant-a', token: 'token-a' });
    const cb = await client({ tenant: 'tenant-b', token: 'token-b' });
    const a1 = await callSend(ca, args, 'conv-1');
    const b1 = await callSend(cb, args, 'conv-1');
    const a2 = await callSend(ca, args, 'conv-1');
    const b2 = await callSend(cb, args, 'conv-1');
    await ca.close();
    await cb.close();
    checks.report(fresh(a1) && fresh(b1) && keyOf(a1) !== keyOf(b1) && isReplayOf(a2, a1) && isReplayOf(b2, b1, 'tenant-b') &&
      target.count(keyOf(a1)) === 1 && target.count(keyOf(b1)) === 1, `${p}tenants`, j({ a1, b1, a2, b2 }));
  }

  lap(`${mode} before conversations`);
  // conversations: the same tenant and arguments
  {
    const args = { to: `conversations-${mode}@example.com`, subject: 'hello' };
    const r1 = await callSend(main, args, 'conv-1');
    const r2 = await callSend(main, args, 'conv-2');
    const r3 = await callSend(main, args, 'conv-2');
    checks.report(fresh(r1) && fresh(r2) && keyOf(r1) !== keyOf(r2) && isReplayOf(r3, r2) &&
      target.count(keyOf(r1)) === 1 && target.count(keyOf(r2)) === 1, `${p}conversations`, j({ r1, r2, r3 }));
  }

  lap(`${mode} before missing`);
  // missing: no tenant (stdio; over HTTP the verifier gives one or refuses, http.bad-token)
  if (mode === 'stdio') {
    const args = { to: `missing-${mode}@example.com`, subject: 'hello' };
    const sent = target.total();
    const c = await client({ tenant: undefined });
    const r = await callSend(c, args);
    await c.close();
    const want = 'send_email was not run: no tenant for this call (options.tenant gave undefined); the application must supply it, and nothing was sent. Do not call send_email again until it does.';
    checks.report(r.isError === true && text(r) === want && r._meta[META.decision] === 'no_tenant' && target.total() === sent,
      `${p}missing`, `got ${j(r)}, want text ${j(want)}`);
  }
  await main.close();
  if (http) http.proc.kill();
}

try {
  await suite('stdio');
  await suite('http');
  // no tenant over HTTP without a token: the verifier refuses (401), nothing sent
  {
    const h = await startHttp();
    const sent = target.total();
    const r = await caught(connect({ mode: 'http', url: h.url, token: 'token-x' }));
    h.proc.kill();
    checks.report(r.error && /401|invalid_token|unknown token/i.test(r.error.message) && target.total() === sent,
      'http.bad-token', r.error ? r.error.message : 'connected');
  }
} catch (e) {
  checks.report(false, 'run', e.stack);
} finally {
  for (const c of children) c.kill('SIGKILL');
  await target.close();
  fs.rmSync(tmp, { recursive: true, force: true });
}
process.exit(checks.status());
