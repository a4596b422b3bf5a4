// sqlite-idempotency/mcp end to end: real MCP server processes
// (mcp_server.mjs) driven by @modelcontextprotocol/sdk's own Client, over stdio
// and over Streamable HTTP with a bearer-token verifier giving the tenant,
// against the counting target (../lib/target.mjs) on 127.0.0.1. For each
// transport:
//
//   twice          the same call twice (a new request id; over HTTP a new
//                  connection): the target
//                  saw one request, the second caller got the first result
//                  with _meta replay true; the readOnlyHint tool is not
//                  guarded (two calls, two requests)
//   concurrent     four client processes at once: one ran, three got its
//                  result marked as a replay; one request
//   timeout        the client gives up (RequestTimeout) while the tool runs;
//                  a retry gets the first result as a replay; one request
//   cancelled      (stdio) the timed-out client's cancellation aborts the
//                  tool's signal after its request left: the retry answers
//                  unknown (isError, the extension's sentence); one request
//   killed         the server process is killed (SIGKILL) mid-call; after the
//                  lease, a fresh server answers the retry unknown and sends
//                  nothing; one request
//   tenants        two tenants, the same arguments and conversation: two
//                  requests, each replayed to its own tenant
//   conversations  two conversations, the same tenant and arguments: two
//                  requests, each replayed in its own conversation
//   missing        no tenant (stdio without $MCP_TENANT) / no conversation
//                  (http without the _meta key): isError naming it, nothing sent
//
// Usage: node test_mcp.mjs   (run from a project where sqlite-idempotency
// and the SDK resolve; tests/suites/55-integrations-mcp.sh makes it)
import { spawn } from 'node:child_process';
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
const UNKNOWN = 'that request may have reached the target system, the outcome is theirs to report, and nothing is retried here';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'idem-mcp-'));
const db = path.join(tmp, 'agent.db');
{
  const setup = new Database(db);
  Ledger.open(setup);
  Ledger.open(setup, { name: 'short', options: { lease_seconds: 1 } });
  setup.close();
}
const target = await startTarget();
const children = new Set();

const replayed = (r) => r && r._meta && r._meta[META.replay] === true;
const keyOf = (r) => r && r.structuredContent && r.structuredContent.received;
const fresh = (r) => r && !r.isError && !replayed(r) && typeof keyOf(r) === 'string';
const sameBody = (a, b) => isDeepStrictEqual(a.content, b.content) && isDeepStrictEqual(a.structuredContent, b.structuredContent);

// An HTTP server process: resolves to { url, proc } once it printed PORT.
function startHttp(ledger = 'ledger') {
  const proc = spawn(process.execPath, [SERVER, 'http', db, target.url], {
    env: { ...process.env, LEDGER: ledger, WAIT_MS: '8000' }, stdio: ['pipe', 'pipe', 'pipe'],
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
    checks.report(fresh(r1) && replayed(r2) && sameBody(r1, r2) && target.count(keyOf(r1)) === 1,
      `${p}twice`, `first ${j(r1)}, second ${j(r2)}, target saw ${target.count(keyOf(r1))}`);
    checks.report(target.countPath('/lookup') - before === 2, `${p}read-only-unguarded`, `target saw ${target.countPath('/lookup') - before} lookups, want 2`);
  }

  lap(`${mode} before concurrent`);
  // concurrent: four client processes at once
  {
    const args = { to: `concurrent-${mode}@example.com`, subject: 'hello', delay_ms: 700 };
    const rs = await clientsAtOnce([0, 1, 2, 3].map(() => clientArgv(args, 'conv-1')));
    const first = rs.filter(fresh);
    const replays = rs.filter(replayed);
    checks.report(first.length === 1 && replays.length === 3 && replays.every((r) => sameBody(r, first[0])) &&
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

  lap(`${mode} before cancelled`);
  // cancelled: the tool honours the signal the cancellation aborts
  if (mode === 'stdio') {
    const args = { to: 'cancelled@example.com', subject: 'hello', delay_ms: 900, honor_signal: true };
    const sent = target.countPath('/send');
    const t = await caught(callSend(main, args, 'conv-1', { timeout: 300 }));
    await sleep(100); // the cancellation reaches the server, which settles
    const r = await callSend(main, args, 'conv-1');
    const text = r.content && r.content[0] && r.content[0].text;
    const wantRetry = `send_email: not run: an earlier identical call did not finish and its outcome is unknown: ${UNKNOWN}. Do not call send_email again with these arguments; tell the user it may or may not have happened, and that it must be checked in the target system.`;
    checks.report(t.error && r.isError === true && text === wantRetry && r._meta[META.decision] === 'unknown' &&
      target.count(r._meta[META.key]) === 1 && target.countPath('/send') - sent === 1, `${p}cancelled`,
      `first ${t.error ? t.error.message : j(t.value)}, retry ${j(r)}, target saw ${target.count(r._meta && r._meta[META.key])}`);
    // the ledger row records why
    const check = new Database(db);
    const row = Ledger.open(check, { create: false }).row('tenant-a', r._meta[META.key]);
    check.close();
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
    const text = r.content && r.content[0] && r.content[0].text;
    checks.report(first.error !== undefined && r.isError === true && r._meta[META.decision] === 'unknown' && text.includes(UNKNOWN) &&
      target.count(r._meta[META.key]) === 1 && target.countPath('/send') - sent === 1, `${p}killed`,
      `first ${first.error ? first.error.message : j(first.value)}, retry ${j(r)}, requests ${target.countPath('/send') - sent}`);
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
    checks.report(fresh(a1) && fresh(b1) && keyOf(a1) !== keyOf(b1) && replayed(a2) && sameBody(a1, a2) && replayed(b2) && sameBody(b1, b2) &&
      target.count(keyOf(a1)) === 1 && target.count(keyOf(b1)) === 1, `${p}tenants`, j({ a1, b1, a2, b2 }));
  }

  lap(`${mode} before conversations`);
  // conversations: the same tenant and arguments
  {
    const args = { to: `conversations-${mode}@example.com`, subject: 'hello' };
    const r1 = await callSend(main, args, 'conv-1');
    const r2 = await callSend(main, args, 'conv-2');
    const r3 = await callSend(main, args, 'conv-2');
    checks.report(fresh(r1) && fresh(r2) && keyOf(r1) !== keyOf(r2) && replayed(r3) && sameBody(r2, r3) &&
      target.count(keyOf(r1)) === 1 && target.count(keyOf(r2)) === 1, `${p}conversations`, j({ r1, r2, r3 }));
  }

  lap(`${mode} before missing`);
  // missing: no tenant (stdio) / no conversation (http)
  {
    const args = { to: `missing-${mode}@example.com`, subject: 'hello' };
    const sent = target.total();
    let r; let want;
    if (mode === 'stdio') {
      const c = await client({ tenant: undefined });
      r = await callSend(c, args, 'conv-1');
      await c.close();
      want = 'send_email: not run: no tenant: options.tenant gave undefined; nothing was sent';
    } else {
      const c = await client();
      r = await callSend(c, args, undefined);
      await c.close();
      want = `send_email: not run: no conversation: the request has no _meta "${META.conversation}" (give options.conversation); nothing was sent`;
    }
    checks.report(r.isError === true && r.content[0].text === want && target.total() === sent, `${p}missing`, `got ${j(r)}, want text ${j(want)}`);
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
