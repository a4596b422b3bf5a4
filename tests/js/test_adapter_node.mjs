// The Node adapter (idem_adapter.mjs over the installed sqlite-idempotency
// npm package) against the local target (test_server.py, started here with
// Python).
//
// Usage: node test_adapter_node.mjs DRIVER PYTHON TEST_SERVER_PY
//   run from an npm project into which the tarball of `make dist` and the
//   driver (better-sqlite3 or libsql) were installed, with idem_adapter.mjs
//   copied beside this file (tests/suites/63-packages.sh does this).
//
//   installed   sqlite-idempotency comes from the project's node_modules
//   header      the target received the key as an sf-string Idempotency-Key
//   success     a first call: the target answered, settled succeeded
//   replay      a second arrival (also spelled differently) resolves to the
//               same shape with idempotent true; the target saw it once
//   timeout     the client times out: OutcomeUnknown, the row is unknown, a
//               later call throws OutcomeUnknown too and sends nothing
//   refused     connection refused: NotSent, the row is released with
//               {"sent": false}; a retry is admitted (attempt 2), sent once
//   http-4xx    the target refuses: an outcome "failed", replayed as failed
//   stalled     a holder whose lease expired before it sent, while the key
//               was resolved released: renew tells it (LeaseLost) and it
//               sends nothing; another caller then sends it (attempt 2) once
//   async       5 concurrent async calls in one process, one connection:
//               one ran, 4 ClaimInProgress, then a replay; sent once
//   concurrent  6 worker processes x 2 async calls on 2 keys at once, each
//               waiting while another holds the key: one call per key ran,
//               the rest replay the same result; the target saw each once
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
import { ClaimInProgress, LeaseLost, NotSent, OutcomeUnknown } from 'sqlite-idempotency';
import { IdemAdapter } from './idem_adapter.mjs';
import { Checks } from './checks.mjs';

const require = createRequire(import.meta.url);
const SELF = fileURLToPath(import.meta.url);
const TENANT = 'tenant-a';
const CONV = 'conv-1';
const tally = new Checks('adapters.node');
const { report } = tally;

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const j = (v) => JSON.stringify(v);
// Compares JSON values regardless of member order (the ledger stores results canonical).
const sorted = (v) => (Array.isArray(v) ? v.map(sorted)
  : v && typeof v === 'object' ? Object.fromEntries(Object.keys(v).sort().map((k) => [k, sorted(v[k])])) : v);
const same = (a, b) => j(sorted(a)) === j(sorted(b));
// An outcome less what tells a replay from the call that ran: idempotent.
const withoutIdempotent = (o) => { const { idempotent, ...rest } = o; return rest; };

function openDb(driver, file) {
  const Database = require(driver);
  return new Database(file);
}

async function caught(promise) {
  try {
    return { value: await promise };
  } catch (e) {
    return { error: e };
  }
}

async function worker(driver, dbPath, url, argsJson) {
  const idem = IdemAdapter.open(openDb(driver, dbPath), { create: false });
  const args = JSON.parse(argsJson);
  process.stdout.write('READY\n');
  const rl = readline.createInterface({ input: process.stdin });
  const [line] = await Promise.race([
    new Promise((r) => rl.once('line', (l) => r([l]))),
    sleep(30000).then(() => ['TIMEOUT']),
  ]);
  rl.close();
  if (line.trim() !== 'GO') return 1;
  const call = () => idem.callHttpTool(TENANT, CONV, 'send_email', args, url, { timeoutMs: 5000, waitMs: 20000 });
  const results = await Promise.all([call(), call()]);
  process.stdout.write(j(results) + '\n');
  idem.close();
  return 0;
}

// Starts test_server.py; resolves to { port, counts(), stop() }.
function startServer(python, serverPy) {
  return new Promise((resolve, reject) => {
    const child = spawn(python, [serverPy, '--max-seconds', '90'], { stdio: ['pipe', 'pipe', 'inherit'] });
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

async function checks(driver, dbPath, srv) {
  const base = `http://127.0.0.1:${srv.port}`;
  const send = `${base}/send`;
  const pkg = fs.realpathSync(require.resolve('sqlite-idempotency'));
  const project = fs.realpathSync(path.join(path.dirname(SELF), '..', '..')); // PROJECT/tests/DIR/SELF
  report(pkg.startsWith(path.join(project, 'node_modules', 'sqlite-idempotency') + path.sep), 'installed',
         `sqlite-idempotency resolved to ${pkg}, want under ${project}/node_modules`);
  const idem = IdemAdapter.open(openDb(driver, dbPath));

  // --- success, header, replay ---------------------------------------------
  const args = { to: 'a@example.com', subject: 'hi', n: 1 };
  const first = await idem.callHttpTool(TENANT, CONV, 'send_email', args, send);
  const key = first.key;
  report(first.status === 'succeeded' && first.idempotent === false && first.attempt === 1 &&
         first.result?.received === key && first.result?.n === 1 && same(first.result?.body, args),
         'success', `got ${j(first)}`);
  let c = await srv.counts();
  report(same(c.keys, { [key]: 1 }) && c.missing === 0 && c.malformed.length === 0, 'header',
         `target saw ${j(c)}, want the key ${key} once as an sf-string`);
  const again = await idem.callHttpTool(TENANT, CONV, 'send_email', args, send);
  const respelled = await idem.callHttpTool(TENANT, CONV, 'send_email', { n: 1.0, subject: 'hi', to: 'a@example.com' }, send);
  c = await srv.counts();
  report(again.idempotent === true && same(withoutIdempotent(again), withoutIdempotent(first)) &&
         j(Object.keys(again)) === j(Object.keys(first)) &&
         Number.isInteger(first.settled_at) && again.settled_at === first.settled_at && respelled.settled_at === again.settled_at &&
         respelled.idempotent === true && respelled.key === key && c.keys[key] === 1,
         'replay', `got ${j(again)} / ${j(respelled)} after ${j(first)}; target saw ${c.keys[key]}`);

  // --- timeout: unknown, never retried ---------------------------------------
  const targs = { to: 'slow@example.com' };
  const t0 = Date.now();
  const t = await caught(idem.callHttpTool(TENANT, CONV, 'send_email', targs, `${base}/send?delay_ms=1500`, { timeoutMs: 300 }));
  const tkey = t.error?.key;
  let st = t.error instanceof OutcomeUnknown ? idem.ledger.row(TENANT, tkey) : null;
  report(t.error instanceof OutcomeUnknown && t.error.reason === 'timeout' && Date.now() - t0 < 1400 &&
         st?.status === 'unknown' && same(st.error, { reason: 'timeout', timeout_ms: 300 }),
         'timeout', `${t.error ? `${t.error.name}: ${t.error.message}` : `returned ${j(t.value)}`}; row ${j(st)}`);
  const later = [await caught(idem.callHttpTool(TENANT, CONV, 'send_email', targs, send)),
    await caught(idem.callHttpTool(TENANT, CONV, 'send_email', targs, send))];
  c = await srv.counts();
  report(later.every((x) => x.error instanceof OutcomeUnknown && x.error.key === tkey &&
                            x.error.decision?.message.includes('nothing is retried here')) && c.keys[tkey] === 1,
         'timeout-not-retried', `got ${later.map((x) => x.error?.message || j(x.value))}; target saw ${c.keys[tkey]}`);

  // --- connection refused: released, retried -------------------------------
  const rargs = { to: 'retry@example.com' };
  const r = await caught(idem.callHttpTool(TENANT, CONV, 'send_email', rargs, `http://127.0.0.1:${await refusedPort()}/send`));
  const rkey = r.error?.key;
  st = r.error instanceof NotSent ? idem.ledger.row(TENANT, rkey) : null;
  c = await srv.counts();
  report(r.error instanceof NotSent && st?.status === 'released' && st.error?.sent === false &&
         st.error?.reason === 'connect: ECONNREFUSED' && !(rkey in c.keys),
         'refused', `${r.error ? `${r.error.name}: ${r.error.message}` : `returned ${j(r.value)}`}; row ${j(st)}`);
  const retry = await idem.callHttpTool(TENANT, CONV, 'send_email', rargs, send);
  c = await srv.counts();
  report(retry.idempotent === false && retry.attempt === 2 && retry.key === rkey && retry.status === 'succeeded' &&
         c.keys[rkey] === 1, 'refused-retry-admitted', `got ${j(retry)}`);

  // --- 4xx: a known failure, replayed ----------------------------------------
  const fargs = { to: 'bounce@example.com' };
  const f1 = await idem.callHttpTool(TENANT, CONV, 'send_email', fargs, `${base}/send?status=422`);
  const f2 = await idem.callHttpTool(TENANT, CONV, 'send_email', fargs, send);
  c = await srv.counts();
  report(f1.status === 'failed' && f1.idempotent === false && f1.error?.status === 422 && f2.status === 'failed' &&
         f2.idempotent === true && same(f2.error, f1.error) && c.keys[f1.key] === 1,
         'http-4xx-failed', `got ${j(f1)} / ${j(f2)}`);

  // --- a stalled holder learns from renew that the key moved on -------------
  // Its lease (1 s) expires between its claim and its send; meanwhile the key
  // is resolved released; after it, another caller sends it (attempt 2).
  const sidem = IdemAdapter.open(openDb(driver, dbPath), { name: 'short', options: { lease_seconds: 1 } });
  const other = IdemAdapter.open(openDb(driver, dbPath), { name: 'short', create: false });
  const sargs = { to: 'stalled@example.com' };
  const skey = sidem.ledger.db.prepare('SELECT idem_key(?, ?, ?, ?) AS v').get(TENANT, CONV, 'send_email', j(sargs)).v;
  const renew = sidem.ledger.renew.bind(sidem.ledger);
  sidem.ledger.renew = (token, seconds) => {
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1200);
    other.ledger.resolve(TENANT, skey, 'released', { sent: false, reason: 'reconciled: never arrived' });
    return renew(token, seconds);
  };
  const sr = await caught(sidem.callHttpTool(TENANT, CONV, 'send_email', sargs, send));
  c = await srv.counts();
  const seenBefore = c.keys[skey];
  const took = await caught(other.callHttpTool(TENANT, CONV, 'send_email', sargs, send));
  c = await srv.counts();
  report(sr.error instanceof LeaseLost && seenBefore === undefined && took.value?.attempt === 2 &&
         took.value?.result?.n === 1 && c.keys[skey] === 1, 'stalled-holder-does-not-send',
         `${sr.error ? `${sr.error.name}: ${sr.error.message}` : `returned ${j(sr.value)}`}; target saw ${seenBefore} before the second caller, then ${c.keys[skey]}; second ${j(took)}`);
  sidem.close();
  other.close();

  // --- concurrent async calls on one connection ------------------------------
  const aargs = { to: 'async@example.com' };
  const calls = await Promise.all(Array.from({ length: 5 }, () =>
    caught(idem.callHttpTool(TENANT, CONV, 'send_email', aargs, `${base}/send?delay_ms=200`))));
  const ran = calls.filter((x) => x.value && x.value.idempotent === false).length;
  const busy = calls.filter((x) => x.error instanceof ClaimInProgress).length;
  const after = await idem.callHttpTool(TENANT, CONV, 'send_email', aargs, send);
  c = await srv.counts();
  report(ran === 1 && busy === 4 && after.idempotent === true && c.keys[after.key] === 1, 'async',
         `${ran} ran, ${busy} in progress, then ${j(after)}; target saw ${c.keys[after.key]}`);

  // --- worker processes, each with two async callers -------------------------
  const nWorkers = 6;
  const procs = [];
  for (let i = 0; i < nWorkers; i++) {
    const child = spawn(process.execPath, [SELF, '--worker', driver, dbPath, `${base}/send?delay_ms=300`, j({ to: `race${i % 2}@example.com` })],
                        { stdio: ['pipe', 'pipe', 'pipe'] });
    const lines = [];
    let stderr = '';
    const rl = readline.createInterface({ input: child.stdout });
    rl.on('line', (l) => lines.push(l));
    child.stderr.on('data', (d) => { stderr += d; });
    const exited = new Promise((res) => child.on('close', (code) => res(code)));
    procs.push({ child, lines, exited, stderr: () => stderr });
  }
  // The start barrier: every worker has opened its connection before any claims.
  const deadline = Date.now() + 30000;
  while (procs.some((p) => p.lines.length === 0 && p.child.exitCode === null) && Date.now() < deadline) await sleep(10);
  const allReady = procs.every((p) => p.lines[0] === 'READY');
  for (const p of procs) p.child.stdin.end(allReady ? 'GO\n' : 'STOP\n');
  const timer = setTimeout(() => procs.forEach((p) => p.child.kill()), 40000);
  const codes = await Promise.all(procs.map((p) => p.exited));
  clearTimeout(timer);
  const bad = procs.map((p, i) => ({ i, code: codes[i], err: p.stderr().slice(-300) }))
    .filter((x, i) => x.code !== 0 || procs[i].lines.length < 2);
  if (bad.length) {
    report(false, 'concurrent', `workers failed: ${j(bad)}`);
  } else {
    const results = procs.flatMap((p) => JSON.parse(p.lines[p.lines.length - 1]));
    const byKey = new Map();
    for (const o of results) {
      if (!byKey.has(o.key)) byKey.set(o.key, []);
      byKey.get(o.key).push(o);
    }
    c = await srv.counts();
    const problems = [];
    if (byKey.size !== 2) problems.push(`${byKey.size} keys, want 2`);
    for (const [k, os_] of byKey) {
      const ranHere = os_.filter((o) => o.idempotent === false).length;
      if (ranHere !== 1) problems.push(`${k}: ${ranHere} calls ran, want 1`);
      if (new Set(os_.map((o) => j(sorted(o.result)))).size !== 1 || os_.some((o) => o.status !== 'succeeded')) {
        problems.push(`${k}: outcomes differ: ${j(os_)}`);
      }
      if (c.keys[k] !== 1) problems.push(`${k}: the target saw it ${c.keys[k]} times`);
    }
    console.log(`   ${tally.prefix}: concurrent: ${results.length} callers (${nWorkers} processes x 2 async) on 2 keys, ${results.filter((o) => o.idempotent).length} replays`);
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
if (argv.length !== 3) {
  console.error('usage: node test_adapter_node.mjs DRIVER PYTHON TEST_SERVER_PY');
  process.exit(2);
}
const [driver, python, serverPy] = argv;
tally.prefix = `adapters.node.${driver}`;
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'idem-adapter-node-'));
try {
  const srv = await startServer(python, serverPy);
  try {
    await checks(driver, path.join(tmp, 'agent.db'), srv);
  } finally {
    await srv.stop();
  }
} catch (e) {
  report(false, 'unexpected', e && e.stack ? e.stack : e);
} finally {
  fs.rmSync(tmp, { recursive: true, force: true });
}
process.exit(tally.status());
