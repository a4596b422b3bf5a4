// Ledger.call's heartbeat (docs/design.md, "The heartbeat"), from the
// package as npm installs it, on better-sqlite3 12 and a ledger file:
//
//   killed     a process SIGKILLed while its action runs (its request has
//              reached the counting target, tests/js/target.mjs): once the
//              lease its heartbeat kept has passed (the row's lease_until,
//              3 beats after its last renewal: a configured bound read
//              from the ledger, never a guessed time), a new process's
//              retry reads unknown, and the action never runs again
//   renewed    while a long action runs, another connection sees the
//              claim's lease_until and updated_at move forward, each beat
//              3 beats ahead; after the action ended (returned, threw,
//              NotSent, ToolFailed, a result the ledger cannot store,
//              aborted, a settle that failed) no renewal is made through a beat and a half
//   in-tx      a beat while the application has a transaction open on the
//              connection is skipped, and the beats resume after COMMIT
//   lost       a beat refused (the claim's lease ran out before it) stops
//              the beats and is attempt.leaseLost; the settle decides as
//              without a heartbeat
//   off        heartbeatSeconds 0 (or null): no renewal
//   open       Ledger.open gives a ledger it creates in a file the lease
//              of 3 beats (unless options name lease_seconds); never
//              compared with an existing ledger's; in memory the
//              extension's default; bad heartbeatSeconds refused, naming
//              the value, nothing written
//   renewed_at ClaimInProgress carries the holder's renewed_at
//   void       an action that returns undefined is settled succeeded with
//              null, and replayed as null
//
// Usage: node test_heartbeat.mjs   (sqlite-idempotency and better-sqlite3
//        resolvable as packages; tests/suites/50-bindings.sh stages them)
//        node test_heartbeat.mjs --child DATABASE URL   (the killed holder)
//
// Prints PASS/FAIL lines; exit status 1 when a check failed.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn } from 'node:child_process';
import readline from 'node:readline';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { Checks } from './checks.mjs';
import { startTarget } from './target.mjs';

const require = createRequire(import.meta.url);
const Database = require('better-sqlite3');
const idem = require('sqlite-idempotency');
const SELF = fileURLToPath(import.meta.url);
const BEAT = 1; // the heartbeat of the ledgers here, in seconds
const ARGS = { to: 'a@example.com', subject: 'heartbeat' };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const j = (v) => JSON.stringify(v, (k, x) => (typeof x === 'bigint' ? `${x}n` : x));

// The child: claims and sends through Ledger.call with a heartbeat, says
// SENT once the target answered, then holds the action open until killed.
async function child(file, url) {
  const ledger = idem.Ledger.open(new Database(file), { heartbeatSeconds: BEAT });
  await ledger.call('t', 'c', 'send', ARGS, async (attempt) => {
    const r = await fetch(`${url}/send`, { method: 'POST', headers: attempt.headers, body: j(ARGS) });
    await r.text();
    console.log('SENT');
    setInterval(() => {}, 1 << 30); // keeps the process alive (the heartbeat's timer does not)
    await new Promise(() => {}); // until SIGKILL
  });
}

// The ledger's clock (SQL 'now', Unix ms).
const nowMs = (db) => db.prepare("SELECT CAST(round(julianday('now') * 86400000.0) AS INTEGER) - 210866760000000 AS v").get().v;

// Sleeps until the ledger's clock has passed ms (a bound read from the ledger).
async function until(db, ms) {
  for (let left = ms - nowMs(db); left >= 0; left = ms - nowMs(db)) await sleep(left + 1);
}

// Resolves when pred() holds, polling; rejects after limitMs (a test
// that would otherwise hang).
async function when(pred, limitMs, what) {
  const end = Date.now() + limitMs;
  while (!pred()) {
    if (Date.now() > end) throw new Error(`gave up waiting for ${what}`);
    await sleep(20);
  }
}

// Another connection to the ledger's file, with the extension.
function connect(file) {
  const db = new Database(file);
  idem.load(db);
  db.pragma('busy_timeout = 10000');
  return db;
}

function row(db, key) {
  return db.prepare('SELECT status, lease_until, updated_at, result FROM ledger WHERE key = ?').get(key);
}

async function killed(checks, dir, target) {
  const file = path.join(dir, 'killed.db');
  const proc = spawn(process.execPath, [SELF, '--child', file, target.url], { stdio: ['ignore', 'pipe', 'inherit'] });
  const said = await new Promise((resolve) => {
    const rl = readline.createInterface({ input: proc.stdout });
    rl.once('line', (l) => { rl.close(); resolve(l); });
    proc.once('exit', () => resolve('(exited)'));
  });
  const db = connect(file);
  const key = db.prepare('SELECT key FROM ledger').get().key;
  // one beat seen by this connection: the lease moved past the claim's
  const first = row(db, key);
  await when(() => row(db, key).updated_at > first.updated_at, 20000, 'a beat of the holder');
  process.kill(proc.pid, 'SIGKILL');
  await new Promise((r) => (proc.exitCode !== null || proc.signalCode !== null ? r() : proc.once('exit', r)));
  const held = row(db, key);
  const lease = db.prepare("SELECT v FROM ledger_meta WHERE k = 'lease_seconds'").get().v;
  checks.report(said === 'SENT' && target.count(key) === 1 && held.status === 'claimed' &&
    held.lease_until - held.updated_at === 3 * BEAT * 1000 && lease === 3 * BEAT,
  'killed-holder', `said ${said}, requests ${target.count(key)}, row ${j(held)}, lease_seconds ${lease}`);
  await until(db, held.lease_until);
  // a new process retries: unknown, and the action never runs
  const retry = path.join(dir, 'retry.mjs');
  fs.writeFileSync(retry, `
    import { createRequire } from 'node:module';
    const require = createRequire(${j(SELF)});
    const Database = require('better-sqlite3');
    const idem = require('sqlite-idempotency');
    const ledger = idem.Ledger.open(new Database(${j(file)}), { heartbeatSeconds: ${BEAT} });
    let ran = 0;
    try {
      const out = await ledger.call('t', 'c', 'send', ${j(ARGS)}, async (attempt) => {
        ran += 1;
        await fetch(${j(`${target.url}/send`)}, { method: 'POST', headers: attempt.headers, body: '{}' });
        return { sent: true };
      });
      console.log(JSON.stringify({ out, ran }));
    } catch (e) {
      console.log(JSON.stringify({ error: e.constructor.name, message: e.message, decision: e.decision, ran }));
    }
  `);
  const got = await new Promise((resolve) => {
    const p = spawn(process.execPath, [retry], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    p.stdout.on('data', (b) => { out += b; });
    p.once('exit', () => resolve(out.trim()));
  });
  let r;
  try { r = JSON.parse(got); } catch { r = { unparsed: got }; }
  checks.report(r.error === 'OutcomeUnknown' && r.decision && r.decision.decision === 'unknown' && r.ran === 0 &&
    target.count(key) === 1 && row(db, key).status === 'unknown',
  'killed-retry-unknown', `retry ${got}, requests ${target.count(key)}, row ${j(row(db, key))}`);
  db.close();
}

// A ledger on file whose renew calls are counted.
function counted(file, options) {
  const ledger = idem.Ledger.open(new Database(file), options);
  const renewals = [];
  const renew = ledger.renew.bind(ledger);
  ledger.renew = (token, seconds) => {
    const v = renew(token, seconds);
    renewals.push({ seconds, v });
    return v;
  };
  return { ledger, renewals };
}

async function renewed(checks, dir) {
  const file = path.join(dir, 'renewed.db');
  const { ledger, renewals } = counted(file, { heartbeatSeconds: BEAT });
  const other = connect(file);
  let seen = [];
  let attemptSeen;
  const out = await ledger.call('t', 'c', 'long', { n: 1 }, async (attempt) => {
    attemptSeen = attempt;
    const key = attempt.key;
    seen.push(row(other, key));
    // two beats, seen from another connection
    await when(() => {
      const r = row(other, key);
      if (r.updated_at > seen[seen.length - 1].updated_at) seen.push(r);
      return seen.length >= 3;
    }, 20000, 'two beats');
    return { done: true };
  });
  const moved = seen.every((r, i) => i === 0 || (r.lease_until > seen[i - 1].lease_until && r.updated_at > seen[i - 1].updated_at));
  const ahead = seen.slice(1).every((r) => r.lease_until - r.updated_at === 3 * BEAT * 1000);
  checks.report(out.status === 'succeeded' && seen.length === 3 && moved && ahead && renewals.length >= 2 &&
    renewals.every((x) => x.seconds === 3 * BEAT) && attemptSeen.leaseUntil === renewals[renewals.length - 1].v,
  'renewed-while-running', `rows ${j(seen)}, renewals ${j(renewals)}, outcome ${j(out)}`);

  // after the action ended, however it ended: no renewal through two beats' time
  const endings = {
    returned: async () => ({ ok: 1 }),
    threw: async () => { throw new Error('boom'); },
    'not-sent': async () => { throw new idem.NotSent('no connection'); },
    'tool-failed': async () => { throw new idem.ToolFailed({ code: 'declined' }); },
    unstorable: async () => Number.NaN,
    // the settle cannot take the write lock: another connection holds it
    'settle-failed': async () => {
      other.exec('BEGIN IMMEDIATE');
      ledger.db.pragma('busy_timeout = 100');
      return { ok: 2 };
    },
    aborted: async () => {
      const ac = new AbortController();
      setTimeout(() => ac.abort(), 10);
      await new Promise((_, reject) => ac.signal.addEventListener('abort', () => reject(ac.signal.reason)));
    },
  };
  let n = 0;
  for (const [name, action] of Object.entries(endings)) {
    n += 1;
    const before = renewals.length;
    let settled;
    try {
      settled = await ledger.call('t', 'c', 'ending', { name, n }, async (attempt) => {
        // a beat while it runs, so that a heartbeat was going
        const at = renewals.length;
        await when(() => renewals.length > at, 20000, 'a beat');
        return action(attempt);
      });
    } catch (e) {
      settled = e;
    }
    const after = renewals.length;
    if (other.inTransaction) {
      other.exec('ROLLBACK');
      ledger.db.pragma('busy_timeout = 10000');
    }
    await sleep(1.5 * ledger.heartbeatSeconds * 1000); // a beat's time and a half
    const refused = name !== 'settle-failed' || (settled instanceof idem.LedgerError && settled.message === 'idem_settle: database is locked');
    checks.report(after > before && renewals.length === after && refused, `no-renewal-after-${name}`,
      `renewals before ${before}, when it ended ${after}, a beat and a half later ${renewals.length}; call gave ${settled && settled.constructor.name}: ${settled && settled.message}`);
  }
  ledger.close();
  other.close();
}

async function inTransaction(checks, dir) {
  const file = path.join(dir, 'in-tx.db');
  const { ledger, renewals } = counted(file, { heartbeatSeconds: BEAT });
  const skipped = [];
  await ledger.call('t', 'c', 'tx', { n: 1 }, async () => {
    ledger.db.exec('BEGIN');
    const at = renewals.length;
    // a beat's time and a half inside it, within the lease (3 beats from the claim)
    await sleep(1.5 * ledger.heartbeatSeconds * 1000);
    skipped.push(renewals.length - at);
    ledger.db.exec('COMMIT');
    const after = renewals.length;
    await when(() => renewals.length > after, 20000, 'a beat after COMMIT');
    return null;
  });
  checks.report(skipped[0] === 0 && renewals.length >= 1, 'skipped-in-transaction',
    `renewals inside the transaction ${skipped[0]}, in all ${renewals.length}`);
  ledger.close();
}

async function lost(checks, dir) {
  const file = path.join(dir, 'lost.db');
  // the claim's lease (1 s) runs out before the first beat (2 s)
  const { ledger, renewals } = counted(file, { heartbeatSeconds: 2 * BEAT, options: { lease_seconds: BEAT } });
  let att;
  const out = await ledger.call('t', 'c', 'lost', { n: 1 }, async (attempt) => {
    att = attempt;
    await when(() => attempt.leaseLost !== undefined, 20000, 'the lost lease');
    await sleep(2 * 2 * BEAT * 1000); // two more beats' time: none comes
    return { late: true };
  });
  const e = att.leaseLost;
  const beats = renewals.filter((x) => x.seconds !== undefined); // the one without seconds: the check before sending
  checks.report(e instanceof idem.LeaseLost && e.message.endsWith(`its lease expired at ${att.leaseUntil}` +
    ' and its outcome is unknown; do not act on this claim') && beats.length === 0 &&
    out.status === 'succeeded' && ledger.row('t', out.key).status === 'succeeded',
  'lease-lost-fenced', `leaseLost ${e && e.message}, renewals ${j(renewals)}, outcome ${j(out)}`);
  ledger.close();
}

async function off(checks, dir) {
  for (const [name, opts] of [['zero', { heartbeatSeconds: 0 }], ['null', { heartbeatSeconds: null }]]) {
    const file = path.join(dir, `off-${name}.db`);
    const { ledger, renewals } = counted(file, { heartbeatSeconds: BEAT });
    const out = await ledger.call('t', 'c', 'off', { n: 1 }, async () => {
      await sleep(2 * ledger.heartbeatSeconds * 1000 + 200);
      return 1;
    }, opts);
    checks.report(out.status === 'succeeded' && renewals.length === 0 && ledger.heartbeatSeconds === BEAT, `off-${name}`,
      `renewals ${j(renewals)}, default ${ledger.heartbeatSeconds}`);
    ledger.close();
  }
  const file = path.join(dir, 'off-ledger.db');
  const ledger = idem.Ledger.open(new Database(file), { heartbeatSeconds: 0 });
  const lease = ledger.db.prepare("SELECT v FROM ledger_meta WHERE k = 'lease_seconds'").get().v;
  checks.report(ledger.heartbeatSeconds === 0 && lease === 300, 'off-ledger',
    `heartbeatSeconds ${ledger.heartbeatSeconds}, lease_seconds ${lease}`);
  ledger.close();
}

function open(checks, dir) {
  const lease = (l) => l.db.prepare(`SELECT v FROM ${l.sqlName('_meta')} WHERE k = 'lease_seconds'`).get().v;
  const file = path.join(dir, 'open.db');
  let l = idem.Ledger.open(new Database(file));
  checks.report(l.heartbeatSeconds === 5 && lease(l) === 15, 'open-default-lease', `heartbeat ${l.heartbeatSeconds}, lease ${lease(l)}`);
  l.close();
  l = idem.Ledger.open(new Database(file), { heartbeatSeconds: 2 }); // exists: not compared
  checks.report(l.heartbeatSeconds === 2 && lease(l) === 15, 'open-existing-not-compared', `lease ${lease(l)}`);
  l.close();
  l = idem.Ledger.open(new Database(file), { name: 'given', heartbeatSeconds: 2, options: { lease_seconds: 60 } });
  checks.report(lease(l) === 60, 'open-options-lease', `lease ${lease(l)}`);
  l.close();
  l = idem.Ledger.open(new Database(':memory:'));
  checks.report(lease(l) === 300, 'open-memory-lease', `lease ${lease(l)}`);
  const bad = (fn) => { try { fn(); return undefined; } catch (e) { return e; } };
  let e = bad(() => idem.Ledger.open(new Database(':memory:'), { heartbeatSeconds: -1 }));
  checks.report(e instanceof RangeError && e.message === 'Ledger.open: heartbeatSeconds must be an integer from 0 to 10512000 (seconds; 0 or null: no heartbeat), got -1',
    'open-bad-heartbeat', e && e.message);
  e = bad(() => new idem.Ledger(l.db, { heartbeatSeconds: '5' }));
  checks.report(e instanceof RangeError && e.message === 'Ledger: heartbeatSeconds must be an integer from 0 to 10512000 (seconds; 0 or null: no heartbeat), got "5"',
    'constructor-bad-heartbeat', e && e.message);
  return l;
}

async function callRefused(checks, l) {
  let ran = 0;
  let e;
  try {
    await l.call('t', 'c', 'bad', { n: 1 }, () => { ran += 1; }, { heartbeatSeconds: 1.5 });
  } catch (x) {
    e = x;
  }
  const rows = l.db.prepare('SELECT count(*) AS n FROM ledger').get().n;
  checks.report(e instanceof RangeError && e.message === 'Ledger.call: heartbeatSeconds must be an integer from 0 to 10512000 (seconds; 0 or null: no heartbeat), got 1.5' &&
    ran === 0 && rows === 0, 'call-bad-heartbeat', `${e && e.message}, ran ${ran}, rows ${rows}`);
}

async function renewedAt(checks, dir) {
  const file = path.join(dir, 'renewed-at.db');
  const a = idem.Ledger.open(new Database(file));
  const b = idem.Ledger.open(new Database(file));
  const d = a.claim('t', 'c', 'held', { n: 1 });
  a.renew(d.token, 60);
  let e;
  try {
    await b.call('t', 'c', 'held', { n: 1 }, () => 1);
  } catch (x) {
    e = x;
  }
  const r = a.row('t', d.key);
  checks.report(e instanceof idem.ClaimInProgress && e.renewedAt === r.updated_at && e.decision.renewed_at === r.updated_at &&
    e.decision.lease_until === r.lease_until, 'in-progress-renewed-at', `${e && e.constructor.name} renewedAt ${e && e.renewedAt}, row ${j(r)}`);
  a.close();
  b.close();
}

async function voidResult(checks, l) {
  const first = await l.call('t', 'c', 'void', { n: 1 }, async () => {});
  const again = await l.call('t', 'c', 'void', { n: 1 }, () => { throw new Error('must not run'); });
  const sync = await l.call('t', 'c', 'void', { n: 2 }, () => undefined);
  const r = l.row('t', first.key);
  checks.report(first.status === 'succeeded' && first.result === null && first.idempotent === false &&
    again.status === 'succeeded' && again.result === null && again.idempotent === true &&
    sync.status === 'succeeded' && sync.result === null && r.status === 'succeeded' && r.result === null,
  'void-succeeded-null', `first ${j(first)}, replay ${j(again)}, sync ${j(sync)}, row ${j(r)}`);
}

async function main() {
  if (process.argv[2] === '--child') return child(process.argv[3], process.argv[4]);
  const checks = new Checks('bindings.heartbeat');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'idem-heartbeat-'));
  const target = await startTarget();
  try {
    const l = open(checks, dir);
    await callRefused(checks, l);
    await voidResult(checks, l);
    l.close();
    await renewedAt(checks, dir);
    await killed(checks, dir, target);
    await renewed(checks, dir);
    await inTransaction(checks, dir);
    await lost(checks, dir);
    await off(checks, dir);
  } catch (e) {
    checks.report(false, 'run', e && e.stack);
  } finally {
    await target.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
  process.exit(checks.status());
}

await main();
