// make bench-peers: the same tool calls through sqlite-idempotency
// (Ledger.call) and through what a Node user would pick instead, each
// behind one adapter with the same shape:
//
//   ledger       Ledger.call of the Node package, better-sqlite3, WAL
//   powertools   @aws-lambda-powertools/idempotency, makeIdempotent with its
//                CachePersistenceLayer on @redis/client
//   nodeidem     @node-idempotency/core with @node-idempotency/storage-adapter-redis
//   pgtable      a hand-written Postgres claim table (INSERT ... ON CONFLICT
//                DO NOTHING through pg)
//   dbos         @dbos-inc/dbos-sdk: a workflow with one step, the key as
//                its workflow ID
//
// Every call sends one POST to the counting target (target.mjs), so the
// executions of each logical call are counted there, not by the peers.
//
// Usage (run.sh sets the environment: TARGET_URL, REDIS_URL, PG_URL,
// IDEM_EXT, WORK_DIR, LEASE_MS):
//   node peers.mjs latency PEER DURABLE N   one JSON line: first-call and replay figures
//   node peers.mjs worker PEER JOBFILE      prints READY, waits for a line on stdin,
//                                           runs the job's calls, prints one JSON line
//   node peers.mjs main                     every figure and scenario; prints the tables
import { createRequire } from 'node:module';
import { spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';

const require = createRequire(import.meta.url);
const HERE = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(HERE, '..', '..');
const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`peers.mjs: environment variable ${name} is not set (run it through bench/peers/run.sh)`);
  return v;
};
const LEASE_MS = Number(process.env.LEASE_MS || 5000);
const CALL_TIMEOUT_MS = 20000;
const TENANT = 'acme';
const CONVERSATION = 'conv-1';

export const PEERS = ['ledger', 'powertools', 'nodeidem', 'pgtable', 'dbos'];
const LABEL = {
  ledger: 'sqlite-idempotency (Ledger.call)',
  powertools: 'Powertools idempotency + Redis',
  nodeidem: '@node-idempotency/core + Redis',
  pgtable: 'Postgres claim table (pg)',
  dbos: 'DBOS workflow + step',
};
const DURABILITY = {
  ledger: ['WAL, synchronous=FULL', 'WAL, synchronous=NORMAL'],
  powertools: ['appendfsync always', 'appendfsync everysec'],
  nodeidem: ['appendfsync always', 'appendfsync everysec'],
  pgtable: ['synchronous_commit=on', 'synchronous_commit=off'],
  dbos: ['synchronous_commit=on', 'synchronous_commit=off'],
};

// --- the tool's request -------------------------------------------------------

// One POST to the target; resolves to its JSON answer. Aborted after
// timeoutMs (an error thrown after the request left).
async function send(s, argsText) {
  if (s.abortOnArrival) return sendAbortOnArrival(s, argsText);
  const q = new URLSearchParams();
  if (s.delay) q.set('delay', String(s.delay));
  if (s.hold) q.set('hold', '1');
  const res = await fetch(`${env('TARGET_URL')}/call/${encodeURIComponent(s.id)}?${q}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: argsText,
    signal: AbortSignal.timeout(s.timeoutMs || 5000),
  });
  if (res.status !== 200) throw new Error(`target answered ${res.status}`);
  return res.json();
}

// A timeout after the request left: the request is sent, and abandoned as
// soon as the target has counted it (the target answers only later), so the
// caller sees a timeout for a request that arrived.
async function sendAbortOnArrival(s, argsText) {
  const start = await targetCount(s.id);
  const ac = new AbortController();
  const pending = fetch(`${env('TARGET_URL')}/call/${encodeURIComponent(s.id)}?delay=1000`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: argsText, signal: ac.signal,
  }).catch(() => {});
  for (let i = 0; i < 400; i++) {
    if ((await targetCount(s.id)) > start) break;
    await new Promise((r) => setTimeout(r, 10));
  }
  ac.abort();
  await pending;
  throw new Error('send: timed out waiting for the answer (the request had arrived)');
}

// The key of the peers that take one from the caller: the operation ID when
// the call has one, else a hash of what names the call, args written with
// JSON.stringify (the obvious line to write).
function derivedKey(c, args) {
  if (c.op) return `${TENANT}:${c.op}`;
  return crypto.createHash('sha256').update(`${TENANT}\0${CONVERSATION}\0${c.tool}\0${JSON.stringify(args)}`).digest('hex');
}

const ok = (result, replay) => ({ status: 'ok', result, replay });
const err = (kind, e) => ({ status: 'error', kind, message: String(e && e.message ? e.message : e).slice(0, 160) });

// --- adapters -------------------------------------------------------------------

async function openLedger(durable, file) {
  const Database = require('better-sqlite3');
  const idem = require(path.join(ROOT, 'bindings', 'node', 'index.js'));
  const db = new Database(file);
  db.loadExtension(env('IDEM_EXT'));
  db.pragma('busy_timeout = 10000');
  db.pragma('journal_mode = WAL');
  db.pragma(`synchronous = ${durable ? 'FULL' : 'NORMAL'}`);
  const ledger = new idem.Ledger(db);
  ledger.create({ lease_seconds: Math.round(LEASE_MS / 1000) });
  return {
    async call(c) {
      let ran = false;
      try {
        const o = await ledger.call(TENANT, CONVERSATION, c.tool, idem.rawJson(c.argsText), async () => {
          ran = true;
          return send(c.send, c.argsText);
        }, c.op ? { operationId: c.op } : {});
        return ok(o.result, o.idempotent && !ran);
      } catch (e) {
        if (e instanceof idem.ClaimInProgress) return err('in_progress', e);
        if (e instanceof idem.LeaseLost) return err('lease_lost', e);
        if (e instanceof idem.OutcomeUnknown) return err('unknown', e);
        if (e instanceof idem.ClaimMismatch) return err('mismatch', e);
        return err('error', e);
      }
    },
    async close() { db.close(); },
  };
}

async function openPowertools() {
  const { makeIdempotent, IdempotencyConfig } = await import('@aws-lambda-powertools/idempotency');
  const { CachePersistenceLayer } = await import('@aws-lambda-powertools/idempotency/cache');
  const { createClient } = await import('@redis/client');
  const client = createClient({ url: env('REDIS_URL') });
  await client.connect();
  const persistenceStore = new CachePersistenceLayer({ client });
  // The key: the operation ID when there is one, else the call itself
  // (Powertools hashes the selected data with its keys sorted).
  const config = new IdempotencyConfig({ eventKeyJmesPath: 'op || [tenant, conversation, tool, args]', expiresAfterSeconds: 3600 });
  const fn = makeIdempotent(async (payload, context, action) => action(), { persistenceStore, config, keyPrefix: 'peers' });
  // Outside Lambda nothing bounds an in-progress record but its expiry: the
  // context is how Powertools learns the lease (the remaining time).
  const context = { getRemainingTimeInMillis: () => LEASE_MS, functionName: 'peers' };
  return {
    async call(c) {
      let ran = false;
      try {
        const payload = { tenant: TENANT, conversation: CONVERSATION, tool: c.tool, args: JSON.parse(c.argsText), op: c.op || null };
        const r = await fn(payload, context, async () => {
          ran = true;
          return send(c.send, c.argsText);
        });
        return ok(r, !ran);
      } catch (e) {
        if (e && e.name === 'IdempotencyAlreadyInProgressError') return err('in_progress', e);
        if (e && e.name === 'IdempotencyValidationError') return err('mismatch', e);
        return err('error', e);
      }
    },
    async close() { await client.quit(); },
  };
}

async function openNodeIdem() {
  const { Idempotency, IdempotencyErrorCodes } = require('@node-idempotency/core');
  const { RedisStorageAdapter } = require('@node-idempotency/storage-adapter-redis');
  const storage = new RedisStorageAdapter({ url: env('REDIS_URL') });
  await storage.connect();
  const idem = new Idempotency(storage, {});
  return {
    async call(c) {
      const args = JSON.parse(c.argsText);
      const req = { method: 'POST', path: `/tools/${c.tool}`, headers: { 'idempotency-key': derivedKey(c, args) }, body: args };
      let cached;
      try {
        cached = await idem.onRequest(req);
      } catch (e) {
        if (e.code === IdempotencyErrorCodes.REQUEST_IN_PROGRESS) return err('in_progress', e);
        if (e.code === IdempotencyErrorCodes.IDEMPOTENCY_FINGERPRINT_MISSMATCH) return err('mismatch', e);
        return err('error', e);
      }
      if (cached) {
        if (cached.error !== undefined) return err('replayed_error', cached.error);
        return ok(cached.body, true);
      }
      try {
        const r = await send(c.send, c.argsText);
        await idem.onResponse(req, { body: r });
        return ok(r, false);
      } catch (e) {
        await idem.onResponse(req, { error: String(e.message || e) });
        return err('error', e);
      }
    },
    async close() { await storage.disconnect(); },
  };
}

async function openPgTable(durable) {
  const pg = require('pg');
  const client = new pg.Client({ connectionString: env('PG_URL'), options: `-c synchronous_commit=${durable ? 'on' : 'off'}` });
  await client.connect();
  return {
    async call(c) {
      const key = derivedKey(c, JSON.parse(c.argsText));
      try {
        const claim = await client.query("INSERT INTO tool_claims (key, status) VALUES ($1, 'started') ON CONFLICT (key) DO NOTHING", [key]);
        if (claim.rowCount === 0) {
          const row = (await client.query('SELECT status, result FROM tool_claims WHERE key = $1', [key])).rows[0];
          if (row && row.status === 'done') return ok(row.result, true);
          return err('in_progress', `${key} is ${row ? row.status : 'gone'}`);
        }
      } catch (e) {
        return err('error', e);
      }
      try {
        const r = await send(c.send, c.argsText);
        await client.query("UPDATE tool_claims SET status = 'done', result = $2 WHERE key = $1", [key, r]);
        return ok(r, false);
      } catch (e) {
        // Let the call be retried: the claim goes.
        await client.query('DELETE FROM tool_claims WHERE key = $1', [key]);
        return err('error', e);
      }
    },
    async close() { await client.end(); },
  };
}

export async function pgSetup() {
  const pg = require('pg');
  const client = new pg.Client({ connectionString: env('PG_URL') });
  await client.connect();
  await client.query('CREATE TABLE IF NOT EXISTS tool_claims (key text PRIMARY KEY, status text NOT NULL, result jsonb, created_at timestamptz NOT NULL DEFAULT now())');
  await client.query('TRUNCATE tool_claims');
  await client.end();
}

const dbosRan = new Set();
async function openDbos(durable) {
  const { DBOS } = await import('@dbos-inc/dbos-sdk');
  const url = new URL(env('DBOS_URL'));
  url.searchParams.set('options', `-c synchronous_commit=${durable ? 'on' : 'off'}`);
  DBOS.setConfig({ name: 'peers', systemDatabaseUrl: url.toString(), logLevel: 'error', runAdminServer: false });
  const workflow = DBOS.registerWorkflow(async (s, argsText) => DBOS.runStep(async () => {
    dbosRan.add(s.id);
    return send(s, argsText);
  }, { name: 'send' }), { name: 'toolcall' });
  await DBOS.launch();
  return {
    async call(c) {
      const key = derivedKey(c, JSON.parse(c.argsText));
      const before = dbosRan.has(c.send.id);
      dbosRan.delete(c.send.id);
      try {
        const handle = await DBOS.startWorkflow(workflow, { workflowID: key })(c.send, c.argsText);
        const r = await handle.getResult();
        const ran = dbosRan.has(c.send.id);
        if (before) dbosRan.add(c.send.id);
        return ok(r, !ran);
      } catch (e) {
        return err('error', e);
      }
    },
    async close() { await DBOS.shutdown(); },
  };
}

async function openPeer(peer, durable, file) {
  switch (peer) {
    case 'none': return { async call(c) { return ok(await send(c.send, c.argsText), false); }, async close() {} };
    case 'ledger': return openLedger(durable, file);
    case 'powertools': return openPowertools(durable);
    case 'nodeidem': return openNodeIdem(durable);
    case 'pgtable': return openPgTable(durable);
    case 'dbos': return openDbos(durable);
    default: throw new Error(`peers.mjs: no peer ${peer} (one of ${PEERS.join(', ')})`);
  }
}

// A peer's call, bounded: a call that does not end in CALL_TIMEOUT_MS is
// reported as hung (and the process exits after its job).
async function bounded(p, c) {
  let timer;
  const hung = new Promise((resolve) => { timer = setTimeout(() => resolve(err('hung', `no answer in ${CALL_TIMEOUT_MS} ms`)), CALL_TIMEOUT_MS); });
  try {
    return await Promise.race([p.call(c).catch((e) => err('error', e)), hung]);
  } finally {
    clearTimeout(timer);
  }
}

// --- latency ------------------------------------------------------------------------

function stats(ns) {
  const s = [...ns].sort((a, b) => a - b);
  const q = (f) => s[Math.min(s.length - 1, Math.floor(f * s.length))];
  return { median: q(0.5) / 1000, p99: q(0.99) / 1000, n: s.length }; // microseconds
}

async function latency(peer, durable, n) {
  const p = await openPeer(peer, durable, path.join(env('WORK_DIR'), `lat-${peer}-${durable ? 1 : 0}.db`));
  const run = `${peer}-${durable ? 'd' : 'n'}-${process.pid}`;
  const mk = (i) => ({ tool: 'send_email', argsText: JSON.stringify({ to: `user${i}@example.com`, subject: 'Your refund', amount: i, run }), send: { id: `lat-${run}-${i}` } });
  const calls = Array.from({ length: n + 20 }, (_, i) => mk(i));
  const first = [];
  const replay = [];
  let bad = 0;
  for (const [i, c] of calls.entries()) {
    const t = process.hrtime.bigint();
    const r = await bounded(p, c);
    const d = Number(process.hrtime.bigint() - t);
    if (r.status !== "ok" || r.replay) { bad++; if (process.env.DEBUG) console.error("first", JSON.stringify(r)); }
    if (i >= 20) first.push(d);
  }
  for (const [i, c] of (peer === 'none' ? [] : calls).entries()) {
    const t = process.hrtime.bigint();
    const r = await bounded(p, c);
    const d = Number(process.hrtime.bigint() - t);
    if (r.status !== "ok" || !r.replay) { bad++; if (process.env.DEBUG) console.error("replay", JSON.stringify(r)); }
    if (i >= 20) replay.push(d);
  }
  await p.close();
  return { peer, durable, first: stats(first), replay: replay.length ? stats(replay) : null, bad };
}

// --- worker -------------------------------------------------------------------------

async function worker(peer, jobFile) {
  const job = JSON.parse(fs.readFileSync(jobFile, 'utf8'));
  const p = await openPeer(peer, true, job.db);
  process.stdout.write('READY\n');
  // The go line; a parent that is gone (stdin closed) ends the worker.
  const rl = readline.createInterface({ input: process.stdin });
  rl.once('close', () => process.exit(1));
  await new Promise((resolve) => rl.once('line', resolve));
  const results = [];
  const runOne = async (c) => {
    if (c.sleepBefore) await new Promise((r) => setTimeout(r, c.sleepBefore));
    return { id: c.send.id, argsText: c.argsText, ...(await bounded(p, c)) };
  };
  if (job.parallel) results.push(...(await Promise.all(job.calls.map(runOne))));
  else for (const c of job.calls) results.push(await runOne(c));
  process.stdout.write(`${JSON.stringify(results)}\n`);
  await Promise.race([p.close(), new Promise((r) => setTimeout(r, 2000))]);
  process.exit(0);
}

// --- main -----------------------------------------------------------------------------

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function child(args, { input } = {}) {
  const proc = spawn(process.execPath, ['--no-deprecation', path.join(HERE, 'peers.mjs'), ...args], { stdio: ['pipe', 'pipe', 'pipe'], env: process.env });
  let out = '';
  let errText = '';
  let readyResolve;
  const ready = new Promise((r) => { readyResolve = r; });
  proc.stdout.on('data', (d) => {
    out += d;
    if (out.startsWith('READY\n')) readyResolve(true);
  });
  proc.stderr.on('data', (d) => { errText += d; });
  // No child outlives 180 s (a peer that hangs ends as a failed worker).
  const limit = setTimeout(() => { errText += 'peers.mjs: killed after 180 s\n'; proc.kill('SIGKILL'); }, 180000);
  const done = new Promise((resolve) => proc.on('exit', (code, signal) => { clearTimeout(limit); resolve({ code, signal, out, err: errText }); }));
  proc.on('exit', () => readyResolve(false));
  if (input !== undefined) proc.stdin.end(input);
  return { proc, ready, done, go: () => proc.stdin.write('go\n') };
}

async function targetCount(id) {
  return (await (await fetch(`${env('TARGET_URL')}/count/${encodeURIComponent(id)}`)).json()).n;
}

let jobSeq = 0;
function jobFile(peer, job) {
  const f = path.join(env('WORK_DIR'), `job-${peer}-${jobSeq++}.json`);
  fs.writeFileSync(f, JSON.stringify({ db: path.join(env('WORK_DIR'), `scen-${peer}.db`), ...job }));
  return f;
}

// The target line of the durable table: each durable peer's first call
// (median) over ours, at least PEER_TARGET; a peer that did not run is
// named, not counted as met.
const PEER_TARGET = 1.3;
function peerTarget(lat, base) {
  if (!base || base.failed || !base.first) return `target: each durable peer's first call / ours >= ${PEER_TARGET.toFixed(2)}x: not measured (ours did not run)`;
  const ran = [];
  const absent = [];
  for (const peer of PEERS) {
    if (peer === 'ledger') continue;
    const l = lat[`${peer}/true`];
    if (!l || l.failed || !l.first) absent.push(LABEL[peer]);
    else ran.push([l.first.median / base.first.median, LABEL[peer]]);
  }
  if (ran.length === 0) return `target: each durable peer's first call / ours >= ${PEER_TARGET.toFixed(2)}x: not measured (no peer ran)`;
  ran.sort((a, b) => a[0] - b[0]);
  const [low, who] = ran[0];
  const verdict = low < PEER_TARGET ? 'MISSED' : absent.length ? `met by those that ran; not measured for ${absent.join(', ')}` : 'met';
  return `target: each durable peer's first call / ours >= ${PEER_TARGET.toFixed(2)}x: lowest ${low.toFixed(2)}x (${who}): ${verdict}`;
}

// Runs one job in WORKERS processes at once (each prints READY first);
// resolves to their result arrays (a failed worker: its stderr as an error).
async function runWorkers(peer, job, workers = 1) {
  const f = jobFile(peer, job);
  const kids = Array.from({ length: workers }, () => child(['worker', peer, f]));
  const ready = await Promise.all(kids.map((k) => Promise.race([k.ready, sleep(30000).then(() => false)])));
  if (ready.every(Boolean)) for (const k of kids) k.go();
  else for (const k of kids) k.proc.kill('SIGKILL');
  const done = await Promise.all(kids.map((k) => k.done));
  return done.map((d) => {
    const line = d.out.split('\n').find((l) => l.startsWith('['));
    if (line) return JSON.parse(line);
    return [{ status: 'error', kind: 'worker', message: `worker exited ${d.code ?? d.signal}: ${d.err.trim().split('\n').slice(-3).join(' | ').slice(0, 300)}` }];
  });
}

function tally(results) {
  const t = {};
  for (const r of results) {
    const k = r.status === 'ok' ? (r.replay ? 'replay' : 'ran') : r.kind;
    t[k] = (t[k] || 0) + 1;
  }
  return Object.entries(t).map(([k, v]) => `${v} ${k}`).join(', ');
}

// The payload a result answers (the target echoes the request body), as a
// canonical string, or null when the result is not the target's answer.
function answered(result) {
  if (!result || typeof result.body !== 'string') return null;
  try {
    return canon(JSON.parse(result.body));
  } catch {
    return null;
  }
}
function canon(v) {
  if (Array.isArray(v)) return `[${v.map(canon).join(',')}]`;
  if (v && typeof v === 'object') return `{${Object.keys(v).sort().map((k) => `${JSON.stringify(k)}:${canon(v[k])}`).join(',')}}`;
  return JSON.stringify(v);
}

// A wrong replay: a caller told its call succeeded with an answer to other
// arguments than its own.
function wrongReplays(results) {
  return results.filter((r) => r.status === 'ok' && answered(r.result) !== canon(JSON.parse(r.argsText))).length;
}

const call = (id, argsText, { send: s = {}, ...rest } = {}) => ({ tool: 'refund', argsText, ...rest, send: { id, ...s } });

async function scenarios(peer) {
  const out = {};
  // 1. Eight processes make the same 20 calls at once.
  {
    const calls = Array.from({ length: 10 }, (_, i) => call(`conc-${peer}-${i}`, JSON.stringify({ order: `o-${i}`, amount: 10 + i })));
    const res = (await runWorkers(peer, { calls, parallel: true }, 8)).flat();
    const counts = await Promise.all(calls.map((c) => targetCount(c.send.id)));
    out.concurrent = { executions: counts, got: tally(res), wrong: wrongReplays(res), errors: res.filter((r) => r.kind === 'worker' || r.kind === 'error').map((r) => r.message) };
  }
  // 2. A timeout after the request left (the target answers in 800 ms, the
  //    caller gives up at 200 ms), retried once the target has answered.
  {
    const argsText = JSON.stringify({ order: 'o-timeout', amount: 25 });
    const id = `timeout-${peer}`;
    const res = (await runWorkers(peer, { calls: [call(id, argsText, { send: { abortOnArrival: true } }), call(id, argsText, { sleepBefore: 1200 })] }))[0];
    out.timeout = { executions: [await targetCount(id)], got: res.map((r) => (r.status === 'ok' ? (r.replay ? 'replay' : 'ran') : r.kind)).join(' / '), wrong: wrongReplays(res.slice(1)), errors: res.filter((r) => r.kind === 'worker').map((r) => r.message) };
  }
  // 3. A kill mid-action: the target holds the first request; once it has
  //    arrived the caller is killed (SIGKILL); retried at once from a new
  //    process (before the lease ends), then again after the lease.
  {
    const argsText = JSON.stringify({ order: 'o-kill', amount: 30 });
    const id = `kill-${peer}`;
    const f = jobFile(peer, { calls: [call(id, argsText, { send: { hold: true, timeoutMs: 60000 } })] });
    const k = child(['worker', peer, f]);
    await Promise.race([k.ready, sleep(30000)]);
    // The retry is started and ready before the kill, so that it comes at
    // once after it; DBOS's is started after it (a DBOS process recovers the
    // pending workflows of its executor when it launches, the live one's too).
    const retryFile = jobFile(peer, { calls: [call(id, argsText)] });
    const early = peer === 'dbos' ? null : child(['worker', peer, retryFile]);
    if (early) await Promise.race([early.ready, sleep(30000)]);
    k.go();
    for (let i = 0; i < 400 && (await targetCount(id)) < 1; i++) await sleep(25);
    k.proc.kill('SIGKILL');
    await k.done;
    const killedAt = Date.now();
    let before;
    if (early) {
      early.go();
      const d = await early.done;
      const line = d.out.split('\n').find((l) => l.startsWith('['));
      before = line ? JSON.parse(line)[0] : err('worker', d.err.trim().split('\n').slice(-1)[0]);
    } else {
      before = (await runWorkers(peer, { calls: [call(id, argsText)] }))[0][0];
    }
    const beforeMs = Date.now() - killedAt;
    const afterKillRetry = await targetCount(id);
    const late = child(['worker', peer, retryFile]);
    await Promise.race([late.ready, sleep(30000)]);
    await sleep(Math.max(0, killedAt + LEASE_MS + 700 - Date.now()));
    late.go();
    const dl = await late.done;
    const lateLine = dl.out.split('\n').find((l) => l.startsWith('['));
    const after = lateLine ? JSON.parse(lateLine)[0] : err('worker', dl.err.trim().split('\n').slice(-1)[0]);
    await sleep(300);
    const fmt = (r) => (r.status === 'ok' ? (r.replay ? 'replay' : 'ran') : r.kind);
    out.kill = { executions: [await targetCount(id)], beforeExec: afterKillRetry, got: `before the lease (${beforeMs} ms after the kill): ${fmt(before)} / after: ${fmt(after)}`, wrong: wrongReplays([before, after]), errors: [before, after].filter((r) => r.kind === 'worker' || r.kind === 'error').map((r) => r.message) };
  }
  // 4. One call spelled three ways (key order, whitespace, number spelling).
  {
    const id = `spell-${peer}`;
    const texts = ['{"to":"ops@example.com","amount":10}', '{ "amount" : 10, "to" : "ops@example.com" }', '{"to":"ops@example.com","amount":10.0}'];
    const res = (await runWorkers(peer, { calls: texts.map((t) => call(id, t)) }))[0];
    out.spellings = { executions: [await targetCount(id)], got: res.map((r) => (r.status === 'ok' ? (r.replay ? 'replay' : 'ran') : r.kind)).join(' / '), wrong: wrongReplays(res), errors: res.filter((r) => r.kind === 'worker' || r.kind === 'error').map((r) => r.message) };
  }
  // 5. One key (an operation ID) with two payloads.
  {
    const id = `twopayloads-${peer}`;
    const res = (await runWorkers(peer, { calls: [call(id, '{"order":"o-42","amount":10}', { op: `refund-42-${peer}` }), call(id, '{"order":"o-42","amount":99}', { op: `refund-42-${peer}` })] }))[0];
    out.payloads = { executions: [await targetCount(id)], got: res.map((r) => (r.status === 'ok' ? (r.replay ? 'replay' : 'ran') : r.kind)).join(' / '), wrong: wrongReplays(res), errors: res.filter((r) => r.kind === 'worker' || r.kind === 'error').map((r) => r.message) };
  }
  return out;
}

function fmtTime(us) {
  return us >= 1000 ? `${(us / 1000).toFixed(2)} ms` : `${Math.round(us)} µs`;
}

async function redisConfig(value) {
  const { createClient } = await import('@redis/client');
  const c = createClient({ url: env('REDIS_URL') });
  await c.connect();
  await c.configSet('appendfsync', value);
  await c.flushAll();
  await c.quit();
}

async function main() {
  const n = Number(process.env.N || 200);
  const only = (process.env.PEERS || PEERS.join(',')).split(',');
  const skipped = {};
  for (const [peer, why] of Object.entries(JSON.parse(process.env.PEERS_SKIPPED || '{}'))) skipped[peer] = why;
  const peers = only.filter((p) => !skipped[p]);
  console.log(`bench-peers: ${n} calls per figure, lease ${LEASE_MS} ms, Node ${process.version}`);
  const lat = {};
  for (const durable of [true, false]) {
    for (const peer of ['none', ...peers]) {
      if (peer === 'powertools' || peer === 'nodeidem') await redisConfig(durable ? 'always' : 'everysec');
      if (peer === 'pgtable') await pgSetup();
      const k = child(['latency', peer, durable ? '1' : '0', String(n)], { input: '' });
      const d = await k.done;
      const line = d.out.split('\n').find((l) => l.startsWith('{'));
      if (!line) {
        lat[`${peer}/${durable}`] = { failed: d.err.trim().split('\n').slice(-3).join(' | ').slice(0, 300) };
        console.log(`bench-peers: ${peer} (${durable ? 'durable' : 'not durable'}) failed: ${lat[`${peer}/${durable}`].failed}`);
      } else {
        lat[`${peer}/${durable}`] = JSON.parse(line);
      }
    }
  }
  for (const durable of [true, false]) {
    console.log(`\n### ${durable ? 'Durable' : 'Not durable'}: ${n} first calls, then ${n} replays, one process\n`);
    console.log('| peer | durability | first call median | p99 | ratio | replay median | p99 | ratio |');
    console.log('|---|---|---:|---:|---:|---:|---:|---:|');
    const base = lat[`ledger/${durable}`];
    const none = lat[`none/${durable}`];
    if (none && none.first) console.log(`| the request alone (no idempotency) | - | ${fmtTime(none.first.median)} | ${fmtTime(none.first.p99)} | | | | |`);
    for (const peer of PEERS) {
      const l = lat[`${peer}/${durable}`];
      const dur = DURABILITY[peer][durable ? 0 : 1];
      if (skipped[peer]) { console.log(`| ${LABEL[peer]} | ${dur} | skipped: ${skipped[peer]} | | | | | |`); continue; }
      if (!l || l.failed) { console.log(`| ${LABEL[peer]} | ${dur} | failed: ${l ? l.failed : 'not run'} | | | | | |`); continue; }
      const ratio = (a, b) => (b && !b.failed ? `${(a / b).toFixed(2)}x` : '-');
      console.log(`| ${LABEL[peer]} | ${dur} | ${fmtTime(l.first.median)} | ${fmtTime(l.first.p99)} | ${ratio(l.first.median, base && base.first && base.first.median)} | ${fmtTime(l.replay.median)} | ${fmtTime(l.replay.p99)} | ${ratio(l.replay.median, base && base.replay && base.replay.median)} |${l.bad ? ` (${l.bad} calls not as expected)` : ''}`);
    }
    if (durable) console.log(`\n${peerTarget(lat, base)}`);
  }
  // The scenarios at the durable settings.
  await redisConfig('always');
  await pgSetup();
  const scen = {};
  for (const peer of peers) {
    const t0 = Date.now();
    try {
      scen[peer] = await scenarios(peer);
      console.error(`bench-peers: scenarios of ${peer}: ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    } catch (e) {
      scen[peer] = { failed: String(e.message || e) };
    }
  }
  const NAMES = {
    concurrent: '8 processes, the same 10 calls at once',
    timeout: 'timeout after the request left, retried',
    kill: 'kill mid-action, retried before and after the lease',
    spellings: 'one call spelled three ways',
    payloads: 'one key, two payloads',
  };
  console.log('\n### Scenario matrix (durable settings): executions per logical call counted by the target\n');
  console.log('| scenario | peer | executions | duplicate | wrong replay | what the callers got |');
  console.log('|---|---|---:|---|---|---|');
  for (const s of Object.keys(NAMES)) {
    for (const peer of PEERS) {
      if (skipped[peer]) { console.log(`| ${NAMES[s]} | ${LABEL[peer]} | skipped | | | ${skipped[peer]} |`); continue; }
      const r = scen[peer] && scen[peer][s];
      if (!r) { console.log(`| ${NAMES[s]} | ${LABEL[peer]} | failed | | | ${scen[peer] ? scen[peer].failed : 'not run'} |`); continue; }
      const max = Math.max(...r.executions);
      const exec = r.beforeExec !== undefined ? `${r.beforeExec} before the lease, ${max} after` : r.executions.length > 1 ? `max ${max}, mean ${(r.executions.reduce((a, b) => a + b, 0) / r.executions.length).toFixed(2)}` : String(max);
      // Two payloads are two requests; a second execution under the used key is reported, not a duplicate.
      const dup = s === 'payloads' ? (max > 1 ? 'no (the second payload ran under the used key)' : 'no') : (max > 1 ? '**yes**' : 'no');
      const errs = r.errors && r.errors.length ? `; errors: ${[...new Set(r.errors)].join(' | ').slice(0, 200)}` : '';
      console.log(`| ${NAMES[s]} | ${LABEL[peer]} | ${exec} | ${dup} | ${r.wrong ? `**yes** (${r.wrong})` : 'no'} | ${r.got}${errs} |`);
    }
  }
}

const [mode, ...rest] = process.argv.slice(2);
if (mode === 'latency') {
  latency(rest[0], rest[1] === '1', Number(rest[2])).then((r) => {
    process.stdout.write(`${JSON.stringify(r)}\n`);
    process.exit(0);
  }, (e) => {
    console.error(`peers.mjs latency ${rest[0]}: ${e.stack || e}`);
    process.exit(1);
  });
} else if (mode === 'worker') {
  worker(rest[0], rest[1]).catch((e) => {
    console.error(`peers.mjs worker ${rest[0]}: ${e.stack || e}`);
    process.exit(1);
  });
} else if (mode === 'main') {
  main().then(() => process.exit(0), (e) => {
    console.error(`peers.mjs: ${e.stack || e}`);
    process.exit(1);
  });
} else {
  console.error('peers.mjs: usage: node peers.mjs main | latency PEER DURABLE N | worker PEER JOBFILE');
  process.exit(2);
}
