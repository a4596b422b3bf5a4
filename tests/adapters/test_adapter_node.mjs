// The Node adapter (idem_adapter.mjs, better-sqlite3 12 from
// tests/bindings/node_modules) against the local target (test_server.py,
// started here with Python).
//
// Usage: node test_adapter_node.mjs EXTENSION_PATH PYTHON
//
//   header      the target received the key as an sf-string Idempotency-Key
//   success     admitted, the target answered, settled succeeded
//   replay      a second arrival (also spelled differently) replays the
//               first outcome, "idempotent": true; the target saw it once
//   timeout     the client times out: OutcomeUnknown, the row is unknown, a
//               later call returns decision unknown and sends nothing
//   refused     connection refused: NotSent, the row is released with
//               {"sent": false}; a retry is admitted (attempt 2), sent once
//   http-4xx    the target refuses: settled failed, replayed as failed
//   async       5 concurrent async calls in one process, one connection:
//               one admitted, 4 in_progress, then a replay; sent once
//   concurrent  6 worker processes x 2 async calls on 2 keys at once,
//               retrying while in_progress: exactly one admitted per key,
//               the rest in_progress or replay, all with the same result;
//               the target saw each key once
//
// Prints PASS/FAIL lines; exit status 1 when a check failed.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { IdemAdapter, NotSent, OutcomeUnknown } from './idem_adapter.mjs';

// better-sqlite3 is installed once, for the binding and adapter tests, in tests/bindings.
const Database = createRequire(new URL('../bindings/package.json', import.meta.url))('better-sqlite3');
const SELF = fileURLToPath(import.meta.url);
const PREFIX = 'adapters.node';
const TENANT = 'tenant-a';
const CONV = 'conv-1';
let failures = 0;

function report(ok, name, why = '') {
  if (ok) {
    console.log(`PASS ${PREFIX}:${name}`);
  } else {
    failures++;
    console.log(`FAIL ${PREFIX}:${name}: ${String(why).replace(/\n/g, ' ')}`);
  }
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const j = (v) => JSON.stringify(v);
// Compares JSON values regardless of member order (the ledger stores results canonical).
const sorted = (v) => (Array.isArray(v) ? v.map(sorted)
  : v && typeof v === 'object' ? Object.fromEntries(Object.keys(v).sort().map((k) => [k, sorted(v[k])])) : v);
const same = (a, b) => j(sorted(a)) === j(sorted(b));

// Calls the tool, retrying (bounded) while another caller holds the claim.
async function callRetrying(idem, args, url) {
  const seen = [];
  let out;
  for (let i = 0; i < 200; i++) {
    out = await idem.callHttpTool(TENANT, CONV, 'send_email', args, url, { timeoutMs: 5000 });
    seen.push(out.decision);
    if (out.decision !== 'in_progress') break;
    await sleep(25);
  }
  return { seen, final: out };
}

async function worker(ext, dbPath, url, argsJson) {
  const idem = IdemAdapter.open(Database, dbPath, ext, { create: false });
  const args = JSON.parse(argsJson);
  process.stdout.write('READY\n');
  const rl = readline.createInterface({ input: process.stdin });
  const [line] = await Promise.race([
    new Promise((r) => rl.once('line', (l) => r([l]))),
    sleep(30000).then(() => ['TIMEOUT']),
  ]);
  rl.close();
  if (line.trim() !== 'GO') return 1;
  const results = await Promise.all([callRetrying(idem, args, url), callRetrying(idem, args, url)]);
  process.stdout.write(j(results) + '\n');
  idem.close();
  return 0;
}

// Starts test_server.py; resolves to { port, counts(), stop() }.
function startServer(python) {
  return new Promise((resolve, reject) => {
    const child = spawn(python, [path.join(path.dirname(SELF), 'test_server.py'), '--max-seconds', '90'],
                        { stdio: ['pipe', 'pipe', 'inherit'] });
    const timer = setTimeout(() => { child.kill(); reject(new Error('test_server.py did not start within 10 s')); }, 10000);
    child.on('error', (e) => { clearTimeout(timer); reject(e); });
    const rl = readline.createInterface({ input: child.stdout });
    rl.once('line', (line) => {
      clearTimeout(timer);
      const m = /^PORT (\d+)$/.exec(line);
      if (!m) { child.kill(); reject(new Error(`test_server.py said ${line}`)); return; }
      const port = Number(m[1]);
      resolve({
        port,
        async counts() {
          const r = await fetch(`http://127.0.0.1:${port}/_counts`);
          return r.json();
        },
        stop() {
          child.stdin.end(); // the server stops when its stdin closes
          return new Promise((r) => { if (child.exitCode !== null) r(); else child.once('exit', r); });
        },
      });
    });
  });
}

// A TCP port that refuses connections: a server that listened, then closed.
async function refusedPort() {
  const s = net.createServer();
  await new Promise((r) => s.listen(0, '127.0.0.1', r));
  const { port } = s.address();
  await new Promise((r) => s.close(r));
  return port;
}

function rowOf(idem, key) {
  const r = idem.db.prepare('SELECT status, error, attempt FROM ledger WHERE tenant = ? AND key = ?').get(TENANT, key);
  return r ? { ...r, error: r.error ? JSON.parse(r.error) : null } : null;
}

async function run(ext, python, dbPath) {
  const srv = await startServer(python);
  try {
    await checks(ext, python, dbPath, srv);
  } finally {
    await srv.stop();
  }
}

async function checks(ext, python, dbPath, srv) {
  const base = `http://127.0.0.1:${srv.port}`;
  const idem = IdemAdapter.open(Database, dbPath, ext);

  // --- success, header, replay ---------------------------------------------
  const args = { to: 'a@example.com', subject: 'hi', n: 1 };
  const first = await idem.callHttpTool(TENANT, CONV, 'send_email', args, `${base}/send`);
  const key = first.key;
  report(first.decision === 'admitted' && first.status === 'succeeded' && first.result?.received === key &&
         first.result?.n === 1 && same(first.result?.body, args), 'success', `got ${j(first)}`);
  let c = await srv.counts();
  report(same(c.keys, { [key]: 1 }) && c.missing === 0 && c.malformed.length === 0, 'header',
         `target saw ${j(c)}, want the key ${key} once as an sf-string`);
  const again = await idem.callHttpTool(TENANT, CONV, 'send_email', args, `${base}/send`);
  const respelled = await idem.callHttpTool(TENANT, CONV, 'send_email', { n: 1.0, subject: 'hi', to: 'a@example.com' }, `${base}/send`);
  c = await srv.counts();
  report(again.decision === 'replay' && again.idempotent === true && same(again.result, first.result) &&
         respelled.decision === 'replay' && respelled.key === key && c.keys[key] === 1,
         'replay', `got ${j(again)} / ${j(respelled)}; target saw ${c.keys[key]}`);

  // --- timeout: unknown, never retried ---------------------------------------
  const targs = { to: 'slow@example.com' };
  let tkey;
  const t0 = Date.now();
  try {
    const got = await idem.callHttpTool(TENANT, CONV, 'send_email', targs, `${base}/send?delay_ms=1500`, { timeoutMs: 300 });
    report(false, 'timeout', `no timeout; returned ${j(got)}`);
    tkey = got.key;
  } catch (e) {
    tkey = e.key;
    const st = e instanceof OutcomeUnknown ? rowOf(idem, tkey) : null;
    report(e instanceof OutcomeUnknown && e.reason === 'timeout' && Date.now() - t0 < 1400 &&
           st?.status === 'unknown' && same(st.error, { reason: 'timeout', timeout_ms: 300 }),
           'timeout', `${e.name}: ${e.message}; row ${j(st)}`);
  }
  const later = await idem.callHttpTool(TENANT, CONV, 'send_email', targs, `${base}/send`);
  const later2 = await idem.callHttpTool(TENANT, CONV, 'send_email', targs, `${base}/send`);
  c = await srv.counts();
  report(later.decision === 'unknown' && later2.decision === 'unknown' &&
         (later.message || '').includes('nothing is retried here') && c.keys[tkey] === 1,
         'timeout-not-retried', `got ${j(later)}; target saw ${c.keys[tkey]}`);

  // --- connection refused: released, retried -------------------------------
  const rargs = { to: 'retry@example.com' };
  let rkey;
  try {
    const got = await idem.callHttpTool(TENANT, CONV, 'send_email', rargs, `http://127.0.0.1:${await refusedPort()}/send`);
    report(false, 'refused', `no error; returned ${j(got)}`);
    rkey = got.key;
  } catch (e) {
    rkey = e.key;
    const st = e instanceof NotSent ? rowOf(idem, rkey) : null;
    c = await srv.counts();
    report(e instanceof NotSent && st?.status === 'released' && st.error?.sent === false && !(rkey in c.keys),
           'refused', `${e.name}: ${e.message}; row ${j(st)}`);
  }
  const retry = await idem.callHttpTool(TENANT, CONV, 'send_email', rargs, `${base}/send`);
  c = await srv.counts();
  report(retry.decision === 'admitted' && retry.attempt === 2 && retry.key === rkey && retry.status === 'succeeded' &&
         c.keys[rkey] === 1, 'refused-retry-admitted', `got ${j(retry)}`);

  // --- 4xx: a known failure, replayed ----------------------------------------
  const fargs = { to: 'bounce@example.com' };
  const f1 = await idem.callHttpTool(TENANT, CONV, 'send_email', fargs, `${base}/send?status=422`);
  const f2 = await idem.callHttpTool(TENANT, CONV, 'send_email', fargs, `${base}/send`);
  c = await srv.counts();
  report(f1.status === 'failed' && f1.error?.status === 422 && f2.decision === 'replay' && f2.status === 'failed' &&
         same(f2.error, f1.error) && c.keys[f1.key] === 1, 'http-4xx-failed', `got ${j(f1)} / ${j(f2)}`);

  // --- concurrent async calls on one connection ------------------------------
  const aargs = { to: 'async@example.com' };
  const calls = await Promise.all(Array.from({ length: 5 }, () =>
    idem.callHttpTool(TENANT, CONV, 'send_email', aargs, `${base}/send?delay_ms=200`)));
  const decisions = calls.map((x) => x.decision);
  const after = await idem.callHttpTool(TENANT, CONV, 'send_email', aargs, `${base}/send`);
  c = await srv.counts();
  report(decisions.filter((d) => d === 'admitted').length === 1 &&
         decisions.filter((d) => d === 'in_progress').length === 4 &&
         after.decision === 'replay' && c.keys[after.key] === 1,
         'async', `decisions ${j(decisions)}, then ${after.decision}; target saw ${c.keys[after.key]}`);

  // --- worker processes, each with two async callers -------------------------
  const nWorkers = 6;
  const procs = [];
  for (let i = 0; i < nWorkers; i++) {
    const child = spawn(process.execPath, [SELF, '--worker', ext, dbPath, `${base}/send?delay_ms=300`, j({ to: `race${i % 2}@example.com` })],
                        { stdio: ['pipe', 'pipe', 'pipe'] });
    const lines = [];
    let stderr = '';
    const rl = readline.createInterface({ input: child.stdout });
    rl.on('line', (l) => lines.push(l));
    child.stderr.on('data', (d) => { stderr += d; });
    const exited = new Promise((r) => child.on('close', (code) => r(code)));
    procs.push({ child, lines, exited, stderr: () => stderr });
  }
  // The start barrier: every worker has opened its connection before any claims.
  const deadline = Date.now() + 30000;
  while (procs.some((p) => p.lines.length === 0 && p.child.exitCode === null) && Date.now() < deadline) await sleep(10);
  const allReady = procs.every((p) => p.lines[0] === 'READY');
  for (const p of procs) p.child.stdin.end(allReady ? 'GO\n' : 'STOP\n');
  const timer = setTimeout(() => procs.forEach((p) => p.child.kill()), 30000);
  const codes = await Promise.all(procs.map((p) => p.exited));
  clearTimeout(timer);
  const bad = procs.map((p, i) => ({ i, code: codes[i], err: p.stderr().slice(-300) }))
    .filter((x, i) => x.code !== 0 || procs[i].lines.length < 2);
  if (bad.length) {
    report(false, 'concurrent', `workers failed: ${j(bad)}`);
  } else {
    const results = procs.flatMap((p) => JSON.parse(p.lines[p.lines.length - 1]));
    const byKey = new Map();
    for (const r of results) {
      const k = r.final.key;
      if (!byKey.has(k)) byKey.set(k, []);
      byKey.get(k).push(r);
    }
    c = await srv.counts();
    const problems = [];
    if (byKey.size !== 2) problems.push(`${byKey.size} keys, want 2`);
    for (const [k, rs] of byKey) {
      const firsts = rs.map((r) => r.seen[0]);
      if (firsts.filter((d) => d === 'admitted').length !== 1 ||
          firsts.some((d) => !['admitted', 'in_progress', 'replay'].includes(d))) problems.push(`${k}: first decisions ${j(firsts)}`);
      const finals = new Set(rs.map((r) => j(sorted(r.final.result))));
      if (finals.size !== 1 || rs.some((r) => !['admitted', 'replay'].includes(r.final.decision))) {
        problems.push(`${k}: final outcomes differ: ${j(rs.map((r) => r.final))}`);
      }
      if (c.keys[k] !== 1) problems.push(`${k}: the target saw it ${c.keys[k]} times`);
    }
    const firsts = results.map((r) => r.seen[0]);
    const tally = [...new Set(firsts)].sort().map((d) => `${d}=${firsts.filter((x) => x === d).length}`).join(', ');
    console.log(`   ${PREFIX}: concurrent: ${results.length} callers (${nWorkers} processes x 2 async) on 2 keys, first decisions ${tally}`);
    report(problems.length === 0, 'concurrent', problems.join('; '));
  }

  c = await srv.counts();
  report(Object.values(c.keys).every((n) => n === 1) && c.missing === 0 && c.malformed.length === 0,
         'each-key-once', `target saw ${j(c)}`);
  idem.close();
}

const argv = process.argv.slice(2);
if (argv[0] === '--worker' && argv.length === 5) {
  process.exit(await worker(...argv.slice(1)));
}
if (argv.length !== 2) {
  console.error('usage: node test_adapter_node.mjs EXTENSION_PATH PYTHON');
  process.exit(2);
}
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'idem-adapter-node-'));
try {
  await run(path.resolve(argv[0]), argv[1], path.join(tmp, 'agent.db'));
} catch (e) {
  report(false, 'unexpected', e && e.stack ? e.stack : e);
} finally {
  fs.rmSync(tmp, { recursive: true, force: true });
}
process.exit(failures ? 1 : 0);
