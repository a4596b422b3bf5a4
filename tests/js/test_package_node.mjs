// The installed npm package (the tarball of `make dist` in a fresh npm
// project) with one driver: load, typed decisions, errors, Ledger.call on a
// first call and on a replay, the failure mapping, the commit check,
// waiting, renewal; also through require() (CommonJS).
//
// Usage: node test_package_node.mjs DRIVER     (better-sqlite3, libsql or node:sqlite)
//        bun test_package_node.mjs bun:sqlite    (Bun's Database)
//   run from the npm project (tests/suites/63-packages.sh copies it there, as
//   tests/js/, beside checks.mjs).
//
// Actions here are local functions that count their runs; the HTTP adapter
// over the same API is tests/js/test_adapter_node.mjs. Prints
// PASS/FAIL/SKIP lines; exit status 1 when a check failed.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import * as idem from 'sqlite-idempotency';
import { Checks } from './checks.mjs';

const require = createRequire(import.meta.url);
const SELF = fileURLToPath(import.meta.url);
const T = 'tenant-a';
const C = 'conv-1';
const driver = process.argv[2];
// node:sqlite runs on several Nodes: the prefix names the major version
const PREFIX = `packages.node.${driver}${driver === 'node:sqlite' ? `@node${process.versions.node.split('.')[0]}` : ''}`;
const tally = new Checks(PREFIX);
const { report } = tally;

const j = (v) => JSON.stringify(v);
// JSON values compared regardless of member order (the ledger may reorder members).
const sorted = (v) => (Array.isArray(v) ? v.map(sorted)
  : v && typeof v === 'object' ? Object.fromEntries(Object.keys(v).sort().map((k) => [k, sorted(v[k])])) : v);
const same = (a, b) => j(sorted(a)) === j(sorted(b));
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const raised = (fn) => { try { fn(); } catch (e) { return e; } return null; };
const rejected = async (p) => { try { await p; } catch (e) { return e; } return null; };
const desc = (e) => (e ? `${e.name}: ${e.message}` : 'no error');

// An action that counts its runs and does what it is told.
function counter({ result, error } = {}) {
  const f = async (attempt) => {
    f.runs++;
    f.seen = attempt;
    if (error) throw error;
    return result;
  };
  f.runs = 0;
  return f;
}

let DatabaseSync;
function openDb(file) {
  if (driver === 'node:sqlite') return new DatabaseSync(file, { allowExtension: true });
  if (driver === 'bun:sqlite') return new (require('bun:sqlite').Database)(file);
  const Database = require(driver);
  return new Database(file);
}

async function run(tmp) {
  // --- installed, load ----------------------------------------------------------
  const pkgDir = path.dirname(fs.realpathSync(require.resolve('sqlite-idempotency/package.json')));
  const project = fs.realpathSync(path.join(path.dirname(SELF), '..', '..')); // PROJECT/tests/DIR/SELF
  report(pkgDir === path.join(project, 'node_modules', 'sqlite-idempotency'), 'installed', `package at ${pkgDir}`);
  const cjs = require('sqlite-idempotency');
  report(cjs.Ledger === idem.Ledger && cjs.LedgerError === idem.LedgerError && typeof cjs.load === 'function',
         'esm-and-commonjs-same', 'require() and import give different objects');
  const lp = idem.getLoadablePath();
  // the library is in the platform package npm installed beside it
  const platformPkg = fs.realpathSync(path.join(project, 'node_modules', `sqlite-idempotency-${process.platform}-${process.arch}`));
  report(lp === path.join(platformPkg, 'idempotency') && fs.existsSync(`${lp}.so`) &&
         !fs.existsSync(path.join(pkgDir, 'prebuilds')), 'loadable-path', lp);

  const mem = openDb(':memory:');
  idem.load(mem);
  const version = mem.prepare('SELECT idem_version() AS v').get().v;
  report(version === idem.VERSION && version === require('sqlite-idempotency/package.json').version,
         'load-version', `idem_version() ${version}, VERSION ${idem.VERSION}`);
  mem.close();
  const e0 = raised(() => idem.load({}));
  report(e0 instanceof idem.IdempotencyError && e0.message.startsWith('sqlite-idempotency: load(db): db has no loadExtension method'),
         'load-not-a-database', desc(e0));

  // --- Ledger.open and options ---------------------------------------------------
  const file = path.join(tmp, 'agent.db');
  const ledger = idem.Ledger.open(openDb(file), { options: { lease_seconds: 60 } });
  const pr = ['journal_mode', 'synchronous', 'busy_timeout'].map((p) => Object.values(ledger.db.prepare(`PRAGMA ${p}`).get())[0]);
  report(j(pr) === j(['wal', 2, 10000]), 'open-pragmas', `journal_mode, synchronous, busy_timeout = ${j(pr)}`);
  idem.Ledger.open(openDb(file), { options: { lease_seconds: 60 } }).close();
  let e = raised(() => idem.Ledger.open(openDb(file), { options: { lease_seconds: 30 } }));
  report(e instanceof idem.IdempotencyError &&
         e.message === 'Ledger.create: ledger ledger exists with lease_seconds=60, not 30; options apply only when a ledger is created',
         'open-existing-other-options', desc(e));
  e = raised(() => idem.Ledger.open(openDb(':memory:'), { options: { lease_seconds: '60' } }));
  report(e instanceof RangeError && e.message === 'Ledger.create: option lease_seconds must be an integer, got "60"',
         'open-option-type', desc(e));
  e = raised(() => idem.Ledger.open(openDb(':memory:'), { options: { lease_minutes: 1 } }));
  report(e instanceof idem.LedgerError && e.message.startsWith('idempotency: unknown option "lease_minutes"; the options are lease_seconds, '),
         'open-option-unknown', desc(e));

  // --- typed decisions ---------------------------------------------------------
  const d = ledger.claim(T, C, 'send_email', { to: 'a@b.c' });
  report(d.decision === 'admitted' && d.attempt === 1 && d.effect === 'external' && d.committed === true &&
         d.durable === true && /^[0-9a-f]{32}$/.test(d.token) && d.key.startsWith('idem1-') && d.note &&
         d.lease_until > Date.now(), 'decision-admitted', j(d));
  const d2 = ledger.claim(T, C, 'send_email', { to: 'a@b.c' });
  report(d2.decision === 'in_progress' && d2.key === d.key && d2.lease_until === d.lease_until, 'decision-in-progress', j(d2));
  const s = ledger.settle(d.token, 'succeeded', { message_id: 'm-1' });
  const r = ledger.claim(T, C, 'send_email', { to: 'a@b.c' });
  report(j(s) === j({ key: d.key, status: 'succeeded', attempt: 1, durable: false, settled_at: r.settled_at, members: [] }) &&
         r.decision === 'replay' && Number.isInteger(s.settled_at) &&
         r.idempotent === true && j(r.result) === j({ message_id: 'm-1' }) && j(r.members) === '[]',
         'decision-replay', `${j(s)} then ${j(r)}`);
  const u = ledger.claim(T, C, 'charge', { amount: 5 });
  ledger.settle(u.token, 'unknown', { reason: 'timeout' });
  const u2 = ledger.claim(T, C, 'charge', { amount: 5 });
  report(u2.decision === 'unknown' && u2.key === u.key && u2.message.includes('nothing is retried here'), 'decision-unknown', j(u2));
  const m1 = ledger.claim(T, C, 'refund', { amount: 5 }, { operationId: 'op-1' });
  const m2 = ledger.claim(T, C, 'refund', { amount: 6 }, { operationId: 'op-1' });
  report(m1.decision === 'admitted' && m1.key === 'op-1' && m2.decision === 'mismatch' && m2.differs === 'args',
         'decision-mismatch', `${j(m1)} / ${j(m2)}`);
  const lc = ledger.claim(T, C, 'write_row', { id: 1 }, { effect: 'local' });
  report(lc.decision === 'admitted' && lc.effect === 'local' && !('note' in lc), 'decision-local', j(lc));

  // --- errors carry the extension's message -------------------------------------
  e = raised(() => ledger.claim(null, C, 'send_email', {}));
  const wantCode = driver === 'node:sqlite' ? 'ERR_SQLITE_ERROR' : 'SQLITE_CONSTRAINT';
  report(e instanceof idem.LedgerError && e.message === 'idem_claim: tenant is missing (NULL)' && e.code === wantCode &&
         e.cause !== undefined, 'error-message', `${desc(e)} (code ${e && e.code})`);
  e = raised(() => ledger.settle('0'.repeat(32), 'succeeded'));
  report(e instanceof idem.LedgerError && e.message.startsWith('idem_settle: no claim of ledger ledger holds token "'),
         'error-settle-token', desc(e));
  e = raised(() => ledger.claim(T, C, 'send_email', { x: NaN }));
  report(e instanceof TypeError && e.message === 'sqlite-idempotency: args is not JSON: member "x" is NaN', 'error-args-nan', desc(e));
  e = raised(() => ledger.claim(T, C, 'send_email', { x: undefined }));
  report(e instanceof TypeError && e.message === 'sqlite-idempotency: args is not JSON: member "x" is a undefined',
         'error-args-undefined', desc(e));
  e = raised(() => new idem.Ledger(ledger.db, { name: 'nope' }).claim(T, C, 't', {}));
  report(e instanceof idem.LedgerError && e.message === 'idem_claim: unknown ledger "nope": no table USING idempotency by that name',
         'error-unknown-ledger', desc(e));
  // the connection attribute: the connection given, for the local recipe
  const given = openDb(':memory:');
  const mine = idem.Ledger.open(given);
  report(mine.db === given && Object.values(mine.db.prepare('SELECT idem_version()').get())[0] === idem.VERSION,
         'db-attribute', 'Ledger.open(db).db is not the connection given');
  given.close();
  e = raised(() => idem.headerValue('a b'));
  report(idem.headerValue('idem1-ab') === '"idem1-ab"' && e instanceof RangeError &&
         e.message === 'headerValue: "a b" is not a key (1 to 128 characters of A-Za-z0-9_-)', 'header-value', desc(e));

  // --- call: a first call and its replay have the same shape ----------------
  let act = counter({ result: { message_id: 'm-2', n: [1, 2] } });
  const o1 = await ledger.call(T, C, 'send_email', { to: 'b@b.c' }, act);
  const o2 = await ledger.call(T, C, 'send_email', { to: 'b@b.c' }, act);
  report(act.runs === 1 && o1.status === 'succeeded' && o1.idempotent === false && o2.idempotent === true &&
         same({ ...o1, idempotent: true }, o2) &&
         j(Object.keys(o1)) === j(Object.keys(o2)), 'call-replay-same-shape', `runs ${act.runs}; ${j(o1)} / ${j(o2)}`);
  // both say when the outcome was recorded: the settle's time, the row's updated_at
  const settledRow = ledger.row(T, o2.key);
  report(typeof o1.settled_at === 'number' && o1.settled_at === o2.settled_at && o2.settled_at === Number(settledRow.updated_at),
         'call-replay-settled-at', `first ${o1.settled_at}, replay ${o2.settled_at}, updated_at ${settledRow.updated_at}`);
  report(act.seen instanceof idem.Attempt && act.seen.key === o1.key && j(act.seen.headers) === j({ 'Idempotency-Key': `"${o1.key}"` }),
         'call-attempt-headers', j(act.seen && act.seen.headers));

  act = counter({ error: new idem.ToolFailed({ code: 'card_declined' }) });
  const f1 = await ledger.call(T, C, 'charge', { amount: 7 }, act);
  const f2 = await ledger.call(T, C, 'charge', { amount: 7 }, act);
  report(act.runs === 1 && f1.status === 'failed' && j(f1.error) === j({ code: 'card_declined' }) && f1.idempotent === false &&
         same({ ...f1, idempotent: true }, f2) && typeof f1.settled_at === 'number' &&
         j(Object.keys(f1)) === j(Object.keys(f2)), 'call-failed-replayed', `runs ${act.runs}; ${j(f1)} / ${j(f2)}`);

  act = counter({ error: new idem.NotSent('connect: refused', { detail: { host: 'x' } }) });
  e = await rejected(ledger.call(T, C, 'charge', { amount: 8 }, act));
  let row = e instanceof idem.NotSent ? ledger.row(T, e.key) : null;
  const ok = counter({ result: { ok: true } });
  const o = await ledger.call(T, C, 'charge', { amount: 8 }, ok);
  report(e instanceof idem.NotSent && row?.status === 'released' &&
         same(row.error, { host: 'x', reason: 'connect: refused', sent: false }) && o.attempt === 2 && ok.runs === 1,
         'call-not-sent-released', `${desc(e)}; row ${j(row)}; then ${j(o)}`);

  const reset = Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' });
  act = counter({ error: reset });
  e = await rejected(ledger.call(T, C, 'charge', { amount: 9 }, act));
  row = e instanceof idem.OutcomeUnknown ? ledger.row(T, e.key) : null;
  const again = counter({ result: { ok: true } });
  const e2 = await rejected(ledger.call(T, C, 'charge', { amount: 9 }, again));
  report(e instanceof idem.OutcomeUnknown && e.reason === 'Error: socket hang up' && e.cause === reset &&
         row?.status === 'unknown' && same(row.error, { reason: 'Error: socket hang up' }) &&
         e2 instanceof idem.OutcomeUnknown && e2.decision?.decision === 'unknown' && again.runs === 0,
         'call-unknown-never-resent', `${desc(e)}; row ${j(row)}; then ${desc(e2)}, runs ${again.runs}`);

  act = counter({ error: new idem.OutcomeUnknown('timeout', { detail: { reason: 'timeout', timeout_ms: 5000 } }) });
  e = await rejected(ledger.call(T, C, 'charge', { amount: 10 }, act));
  row = e instanceof idem.OutcomeUnknown ? ledger.row(T, e.key) : null;
  report(e instanceof idem.OutcomeUnknown && same(row?.error, { reason: 'timeout', timeout_ms: 5000 }),
         'call-unknown-detail', `${desc(e)}; row ${j(row)}`);

  act = counter({ result: { n: Symbol('x') } }); // a symbol: not JSON, after the action ran
  e = await rejected(ledger.call(T, C, 'charge', { amount: 11 }, act));
  row = e instanceof idem.OutcomeUnknown ? ledger.row(T, e.key) : null;
  report(e instanceof idem.OutcomeUnknown && act.runs === 1 && row?.status === 'unknown' &&
         row.error.reason === 'sqlite-idempotency: the result is not JSON: member "n" is a symbol',
         'call-result-not-json-unknown', `${desc(e)}; row ${j(row)}`);

  e = await rejected(ledger.call(T, C, 'refund', { amount: 7 }, counter(), { operationId: 'op-1' }));
  report(e instanceof idem.ClaimMismatch && e.decision.differs === 'args', 'call-mismatch', desc(e));

  // targets: a reworded retry of a call that touched the same target is a
  // conflict, and its action never runs; allowedBy lets a deliberate one through
  {
    const targets = ['mailto:bob@example.com/invoice-42'];
    const first = counter({ result: { message_id: 'm-1' } });
    const out = await ledger.call(T, C, 'send_email', { to: 'bob', body: 'Invoice 42' }, first, { targets });
    const again = counter({ result: { message_id: 'm-2' } });
    e = await rejected(ledger.call(T, C, 'send_email', { to: 'bob', body: 'Here is invoice 42' }, again, { targets }));
    report(out.status === 'succeeded' && first.runs === 1 && e instanceof idem.TargetConflict && again.runs === 0 &&
           e.decision.decision === 'conflict' && e.decision.target === targets[0] && e.decision.held_by.key === out.key &&
           same(e.decision.held_by.result, { message_id: 'm-1' }) && j(e.decision.differs) === '["body"]' &&
           e.message.endsWith('this call was not run'),
           'call-target-conflict', `${j(out)}; ${desc(e)}; runs ${again.runs}`);
    let d = ledger.claim(T, C, 'send_email', { to: 'bob', body: 'Invoice 42, once more' }, { targets, targetWindowSeconds: 0 });
    report(d.decision === 'admitted', 'claim-target-window-zero', j(d));
    ledger.settle(d.token, 'succeeded', { message_id: 'm-3' });
    d = ledger.claim(T, C, 'send_email', { to: 'bob', body: 'Invoice 42, twice more' }, { targets });
    report(d.decision === 'conflict' && d.held_by.status === 'succeeded', 'claim-target-conflict', j(d));
    const ok = counter({ result: { message_id: 'm-4' } });
    const out2 = await ledger.call(T, C, 'send_email', { to: 'bob', body: 'a copy, as asked' }, ok, { targets, allowedBy: 'support:alice' });
    const row = ledger.db.prepare('SELECT allowed_by FROM ledger_targets WHERE claim = (SELECT id FROM ledger_rows WHERE key = ?)').get(out2.key);
    report(ok.runs === 1 && out2.status === 'succeeded' && row?.allowed_by === 'support:alice', 'call-target-allowed', `${j(out2)}; ${j(row)}`);
    e = raised(() => ledger.claim(T, C, 'send_email', { to: 'x' }, { targets: ['a', 'a'] }));
    report(e instanceof idem.LedgerError && e.message === 'idem_claim: targets names "a" twice; name each target once',
           'claim-targets-refused', desc(e));
  }

  // --- the commit check --------------------------------------------------------
  act = counter({ result: { ok: true } });
  ledger.db.exec('BEGIN');
  e = await rejected(ledger.call(T, C, 'send_email', { to: 'txn@b.c' }, act));
  ledger.db.exec('ROLLBACK');
  const ot = await ledger.call(T, C, 'send_email', { to: 'txn@b.c' }, act);
  report(e instanceof idem.NotCommitted && act.runs === 1 && ot.attempt === 1 && ot.idempotent === false &&
         e.message.endsWith('commit before acting on an external claim'), 'call-not-committed-refused',
         `${desc(e)}; then ${j(ot)}, runs ${act.runs}`);

  // --- a require_transaction ledger: call commits the claim itself ---------
  const rt = idem.Ledger.open(openDb(file), { name: 'rt', options: { require_transaction: 1 } });
  e = raised(() => rt.claim(T, C, 'send_email', { to: 'rt@b.c' }));
  act = counter({ result: { ok: 1 } });
  const r1 = await rt.call(T, C, 'send_email', { to: 'rt@b.c' }, act);
  const r2 = await rt.call(T, C, 'send_email', { to: 'rt@b.c' }, act);
  report(e instanceof idem.LedgerError &&
         e.message === 'idem_claim: ledger "rt" requires a transaction (require_transaction=1): a claim made outside BEGIN ... COMMIT can be routed as a read by a replicated engine and lost; open a transaction, claim, and commit before acting' &&
         act.runs === 1 && r1.idempotent === false && r2.idempotent === true && rt.inTransaction() !== true,
         'require-transaction-call', `bare claim ${desc(e)}; ${j(r1)} / ${j(r2)}; runs ${act.runs}`);
  rt.db.exec('BEGIN');
  e = await rejected(rt.call(T, C, 'send_email', { to: 'rt2@b.c' }, act));
  rt.db.exec('ROLLBACK');
  report(e instanceof idem.NotCommitted && act.runs === 1, 'require-transaction-caller-txn-refused', `${desc(e)}, runs ${act.runs}`);
  rt.close();

  // --- waiting for an in-progress claim -----------------------------------------
  const holder = idem.Ledger.open(openDb(file), { create: false });
  let hd = holder.claim(T, C, 'send_email', { to: 'slow@b.c' });
  setTimeout(() => holder.settle(hd.token, 'succeeded', { by: 'holder' }), 400);
  act = counter({ result: { by: 'waiter' } });
  let t0 = Date.now();
  const ow = await ledger.call(T, C, 'send_email', { to: 'slow@b.c' }, act, { waitMs: 10000 });
  let waited = Date.now() - t0;
  report(ow.idempotent === true && j(ow.result) === j({ by: 'holder' }) && act.runs === 0 && waited > 300 && waited < 3000,
         'wait-then-replay', `${j(ow)} after ${waited} ms, runs ${act.runs}`);
  hd = holder.claim(T, C, 'send_email', { to: 'stuck@b.c' });
  t0 = Date.now();
  e = await rejected(ledger.call(T, C, 'send_email', { to: 'stuck@b.c' }, act, { waitMs: 300 }));
  waited = Date.now() - t0;
  report(e instanceof idem.ClaimInProgress && e.decision.key === hd.key && waited >= 300 && waited < 1500 && act.runs === 0,
         'wait-deadline-in-progress', `${desc(e)} after ${waited} ms`);
  {
    // the message gives the lease's end as ISO 8601 (SQLite's own reading of the row's lease_until)
    const until = ledger.db.prepare("SELECT strftime('%Y-%m-%dT%H:%M:%S', lease_until / 1000, 'unixepoch') || '.' || printf('%03d', lease_until % 1000) || 'Z' AS t FROM ledger_rows WHERE key = ?").get(hd.key).t;
    report(e.message === `${hd.key} is in progress (attempt 1, lease until ${until}); nothing was sent`, 'in-progress-message-iso', `${e.message} (want lease until ${until})`);
  }
  e = await rejected(ledger.wait(T, C, 'x', {}, { timeoutMs: -1 }));
  report(e instanceof RangeError && e.message === 'Ledger.wait: timeoutMs must be a number of milliseconds >= 0, got -1',
         'wait-bad-timeout', desc(e));
  holder.close();

  // --- renewal: right before sending -----------------------------------------
  const dr = ledger.claim(T, C, 'renew_me', { n: 1 });
  const lu = ledger.renew(dr.token, 120);
  const now = Date.now();
  report(Number.isInteger(lu) && lu > dr.lease_until && Math.abs(lu - (now + 120000)) < 5000, 'renew-extends',
         `lease_until ${dr.lease_until} -> ${lu}, now ${now}`);
  ledger.settle(dr.token, 'succeeded');
  e = raised(() => ledger.renew(dr.token));
  report(e instanceof idem.LeaseLost && e instanceof idem.LedgerError && e.message.startsWith('idem_renew: '),
         'renew-settled-lease-lost', desc(e));
  e = raised(() => ledger.renew('not-a-token'));
  report(e instanceof idem.LedgerError && !(e instanceof idem.LeaseLost) &&
         e.message === 'idem_renew: token must be the 32 lowercase hex digits idem_claim returned, got "not-a-token"', 'renew-malformed-token', desc(e));

  // A holder that stalls past its lease (1 s) between its claim and its send:
  // meanwhile the key was resolved released and claimed again by another
  // caller. The stalled holder learns it from renew and sends nothing.
  const short = idem.Ledger.open(openDb(file), { name: 'short', options: { lease_seconds: 1 } });
  const other = idem.Ledger.open(openDb(file), { name: 'short', create: false });
  const sargs = { to: 'stall@b.c' };
  const key = short.db.prepare('SELECT idem_key(?, ?, ?, ?) AS v').get(T, C, 'send_email', JSON.stringify(sargs)).v;
  let second = null;
  const renew = short.renew.bind(short);
  short.renew = (token, seconds) => {
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1200); // the lease expires: unknown
    other.resolve(T, key, 'released', { sent: false, reason: 'reconciled: never arrived' });
    second = other.claim(T, C, 'send_email', sargs);
    return renew(token, seconds);
  };
  act = counter({ result: { by: 'first' } });
  e = await rejected(short.call(T, C, 'send_email', sargs, act));
  if (second?.decision === 'admitted') other.settle(second.token, 'succeeded', { by: 'second' });
  row = other.row(T, key);
  report(e instanceof idem.LeaseLost && e.message.startsWith('idem_renew: ') && act.runs === 0 &&
         second?.decision === 'admitted' && second.attempt === 2 && row?.status === 'succeeded' &&
         j(row.result) === j({ by: 'second' }), 'stalled-holder-learns-from-renew',
         `${desc(e)}; first ran ${act.runs}; second ${j(second)}; row ${j(row)}`);
  short.close();
  other.close();

  // An action that outlives its lease (1 s) and then fails in a way that may
  // have sent: the claim is already unknown (its lease expired), and the
  // caller is told OutcomeUnknown, not a refused settle.
  const late = idem.Ledger.open(openDb(file), { name: 'late', options: { lease_seconds: 1 } });
  const slow = (err) => async () => { await sleep(1200); throw err; };
  const timeout = new Error('read timed out');
  e = await rejected(late.call(T, C, 'send_email', { late: 1 }, slow(timeout)));
  const lateRow = e instanceof idem.OutcomeUnknown ? late.row(T, e.key) : null;
  report(e instanceof idem.OutcomeUnknown && e.cause === timeout && lateRow?.status === 'unknown',
         'late-action-exception-unknown', desc(e));
  e = await rejected(late.call(T, C, 'send_email', { late: 2 },
                               slow(new idem.OutcomeUnknown('gateway timeout', { detail: { gw: 504 } }))));
  report(e instanceof idem.OutcomeUnknown && same(e.detail, { gw: 504 }), 'late-action-outcome-unknown', desc(e));
  e = await rejected(late.call(T, C, 'send_email', { late: 3 }, async () => { await sleep(1200); return { n: NaN }; }));
  report(e instanceof idem.OutcomeUnknown, 'late-action-unstorable-result-unknown', desc(e));
  late.close();

  // A result keeps its numbers: a target's 64-bit id settles succeeded and
  // comes back with its digits, as a BigInt, on the first call and on every
  // replay; a response body passed as rawJson(text) keeps every digit of it.
  const big = idem.Ledger.open(openDb(file), { name: 'big' });
  const bigText = (key, column) => big.db.prepare(`SELECT ${column} AS v FROM big WHERE key = ?`).get(key).v;
  act = counter({ result: { id: 1234567890123456789n, max: 2n ** 63n - 1n, min: -(2n ** 63n), small: 5n, n: 1.5 } });
  const firstB = await big.call(T, C, 'create_order', { n: 1 }, act);
  const againB = await big.call(T, C, 'create_order', { n: 1 }, act);
  const wantB = { id: 1234567890123456789n, max: 9223372036854775807n, min: -9223372036854775808n, n: 1.5, small: 5 };
  const isWantB = (r) => r && Object.keys(r).join() === 'id,max,min,n,small' && Object.keys(wantB).every((k) => r[k] === wantB[k]);
  report(firstB.status === 'succeeded' && firstB.idempotent === false && isWantB(firstB.result) &&
         againB.idempotent === true && isWantB(againB.result) && act.runs === 1 &&
         bigText(firstB.key, 'result') === '{"id":1234567890123456789,"max":9223372036854775807,"min":-9223372036854775808,"n":1.5,"small":5}',
         'big-id-bigint-settled-and-replayed', `first ${firstB.result?.id}, again ${againB.result?.id}, runs ${act.runs}, stored ${bigText(firstB.key, 'result')}`);
  const dB = big.claim(T, C, 'create_order', { n: 1 });
  const rB = big.row(T, firstB.key);
  report(dB.decision === 'replay' && dB.result.id === 1234567890123456789n && rB.result.id === 1234567890123456789n,
         'big-id-claim-and-row', `claim ${dB.result?.id}, row ${rB.result?.id}`);
  // the target's JSON text as it came, unparsed: every digit stays
  const body = '{"id": 1234567890123456789, "amount": 1.0, "rate": 0.1000000000000000055511151231257827}';
  act = counter({ result: idem.rawJson(body) });
  const firstR = await big.call(T, C, 'create_order', { n: 2 }, act);
  const againR = await big.call(T, C, 'create_order', { n: 2 }, act);
  report(firstR.status === 'succeeded' && firstR.result.id === 1234567890123456789n && firstR.result.amount === 1 &&
         againR.result.id === 1234567890123456789n && act.runs === 1 &&
         bigText(firstR.key, 'result') === '{"amount":1.0,"id":1234567890123456789,"rate":0.1000000000000000055511151231257827}',
         'big-id-raw-json-kept', `stored ${bigText(firstR.key, 'result')}`);
  // an error with a big id: failed, replayed with it
  act = counter({ error: new idem.ToolFailed({ code: 'duplicate', order_id: 9223372036854775807n }) });
  const firstF = await big.call(T, C, 'create_order', { n: 3 }, act);
  const againF = await big.call(T, C, 'create_order', { n: 3 }, act);
  report(firstF.status === 'failed' && firstF.error.order_id === 9223372036854775807n && againF.error.order_id === 9223372036854775807n &&
         act.runs === 1 && bigText(firstF.key, 'error') === '{"code":"duplicate","order_id":9223372036854775807}' &&
         new idem.ToolFailed({ id: 1234567890123456789n }).message === 'the tool call failed: {"id":1234567890123456789}',
         'big-id-error-settled-and-replayed', `first ${j(firstF.error?.code)}, stored ${bigText(firstF.key, 'error')}`);
  // a Number beyond 2^53 is stored as JavaScript prints it and read back as those digits
  act = counter({ result: { id: 2 ** 60 } });
  const firstN = await big.call(T, C, 'create_order', { n: 4 }, act);
  report(firstN.status === 'succeeded' && firstN.result.id === 1152921504606847000n && Number(firstN.result.id) === 2 ** 60 &&
         bigText(firstN.key, 'result') === '{"id":1152921504606847000}', 'big-number-result-stored', `stored ${bigText(firstN.key, 'result')}`);
  // arguments keep the I-JSON rule; a BigInt within it is the same key as the Number
  e = raised(() => big.claim(T, C, 'create_order', { id: 1234567890123456789n }));
  report(e instanceof idem.LedgerError && e.message === 'idem_claim: args: integer 1234567890123456789 at byte 6 is beyond 2^53-1 and would lose precision; send it as a string',
         'big-id-args-still-refused', desc(e));
  report(big.claim(T, C, 'create_order', { n: 1n }).decision === 'replay', 'bigint-args-same-key', 'args {n: 1n} is not the key of {n: 1}');
  // A BigInt in args is an integer: within 2^53-1 the key of that Number,
  // beyond it the extension's refusal of that integer (what Python gets for
  // the same int), also when BigInt.prototype.toJSON is patched to a string.
  const keyOf = (args) => big.claim(T, C, 'lookup', args).key;
  report(keyOf({ n: 2n ** 53n - 1n }) === keyOf({ n: 2 ** 53 - 1 }) && keyOf({ n: -(2n ** 53n - 1n) }) === keyOf({ n: -(2 ** 53 - 1) }),
         'bigint-args-edge-is-integer', 'a BigInt of +-(2^53-1) is not the key of that Number');
  const refusal = (n, at = 5) => `idem_claim: args: integer ${n} at byte ${at} is beyond 2^53-1 and would lose precision; send it as a string`;
  for (const [name, args, want] of [['2^53', { n: 2n ** 53n }, refusal('9007199254740992')], ['2^60', { n: 2n ** 60n }, refusal('1152921504606846976')],
    ['minus-2^60', { n: -(2n ** 60n) }, refusal('-1152921504606846976')], ['nested', { a: [{ id: 1234567890123456789n }] }, refusal('1234567890123456789', 12)]]) {
    e = raised(() => big.claim(T, C, 'lookup', args));
    report(e instanceof idem.LedgerError && e.message === want, `bigint-args-refused-${name}`, desc(e));
  }
  const patched = Object.getOwnPropertyDescriptor(BigInt.prototype, 'toJSON');
  BigInt.prototype.toJSON = function toJSON() { return this.toString(); };
  try {
    report(keyOf({ n: 7n }) === keyOf({ n: 7 }) && keyOf({ n: Object(7n) }) === keyOf({ n: 7 }), 'bigint-args-tojson-patched-still-integer',
           `with BigInt.prototype.toJSON patched, {n: 7n} got the key of ${keyOf({ n: 7n }) === keyOf({ n: '7' }) ? "{n: '7'}" : 'something else'}`);
    e = raised(() => big.claim(T, C, 'lookup', { n: 2n ** 60n }));
    report(e instanceof idem.LedgerError && e.message === refusal('1152921504606846976'), 'bigint-args-tojson-patched-refused', desc(e));
  } finally {
    if (patched) Object.defineProperty(BigInt.prototype, 'toJSON', patched);
    else delete BigInt.prototype.toJSON;
  }
  // A result keeps its numbers as written (docs/reference.md, "Numbers in a
  // result or an error"): stored so, and replayed as the package reads them.
  const nums = '[1e400, 1e-400, 9007199254740993, 2.50]';
  act = counter({ result: idem.rawJson(nums) });
  const firstM = await big.call(T, C, 'read_meter', { meter: 7 }, act);
  const againM = await big.call(T, C, 'read_meter', { meter: 7 }, act);
  const wantM = [Infinity, 0, 9007199254740993n, 2.5];
  const isWantM = (r) => Array.isArray(r) && r.length === 4 && r.every((x, i) => Object.is(x, wantM[i]));
  report(bigText(firstM.key, 'result') === '[1e400,1e-400,9007199254740993,2.50]' && isWantM(firstM.result) && isWantM(againM.result) &&
         againM.idempotent === true && act.runs === 1 && isWantM(big.claim(T, C, 'read_meter', { meter: 7 }).result),
         'result-numbers-as-written', `stored ${bigText(firstM.key, 'result')}, replayed ${String(againM.result)}`);
  e = raised(() => idem.rawJson('{"id": 1} x'));
  report(e instanceof TypeError && e.message.startsWith('sqlite-idempotency: rawJson: text is not one JSON value: '), 'raw-json-not-json', desc(e));
  e = raised(() => idem.rawJson({ id: 1 }));
  report(e instanceof TypeError && e.message === 'sqlite-idempotency: rawJson: text must be a string of JSON, got object', 'raw-json-not-text', desc(e));
  big.close();

  // A result the ledger cannot store (not JSON: a lone surrogate; over
  // max_args_bytes): the action ran, so the call is settled unknown and
  // OutcomeUnknown says why. A stored result comes back as a replay gives it.
  const store = idem.Ledger.open(openDb(file), { name: 'store', options: { max_args_bytes: 240 } });
  const cases = [['duplicate-name', idem.rawJson('{"id":1,"id":2}'), 'the result cannot be stored: idem_settle: detail: duplicate member name "id" in the object at byte 0'],
                 ['lone-surrogate', { s: '\ud800' }, 'the result cannot be stored: idem_settle: detail: lone surrogate \\ud800 at byte 6'],
                 ['too-big', { s: 'x'.repeat(300) }, "the result cannot be stored: idem_settle: detail is 308 bytes in canonical form, over the ledger's max_args_bytes of 240"]];
  for (const [name, value, want] of cases) {
    e = await rejected(store.call(T, C, 'store', { case: name }, async () => value));
    const srow = e instanceof idem.OutcomeUnknown ? store.row(T, e.key) : null;
    report(e instanceof idem.OutcomeUnknown && srow?.status === 'unknown' && e.reason === want && same(srow.error, { reason: want }),
           `unstorable-result-${name}-unknown`, `${desc(e)}; row ${j(srow)}`);
  }
  const tiny = idem.Ledger.open(openDb(file), { name: 'tiny', options: { max_args_bytes: 16 } });
  e = await rejected(tiny.call(T, C, 'store', {}, async () => ({ s: 'x'.repeat(20) })));
  const trow = e instanceof idem.OutcomeUnknown ? tiny.row(T, e.key) : null;
  report(trow?.status === 'unknown' && trow.error === null && e.reason.startsWith('the result cannot be stored: idem_settle: detail is 28 bytes'),
         'unstorable-reason-too-long-unknown', `${desc(e)}; row ${j(trow)}`);
  tiny.close();
  const firstO = await store.call(T, C, 'store', { case: 'order' }, async () => ({ b: 1, a: 1.0, c: [2.50] }));
  const againO = await store.call(T, C, 'store', { case: 'order' }, async () => null);
  report(j(firstO.result) === j(againO.result) && j(firstO.result) === '{"a":1,"b":1,"c":[2.5]}' && firstO.idempotent === false && againO.idempotent === true,
         'first-call-result-as-replayed', `${j(firstO.result)} / ${j(againO.result)}`);
  store.close();

  // A ledger named with its schema ('aux.ledger', '"aux"."ledger"'), as every
  // extension function takes it, beside a main ledger of the same name.
  const qdb = openDb(path.join(tmp, 'main-q.db'));
  qdb.exec(`ATTACH '${path.join(tmp, 'aux-q.db')}' AS aux`);
  const mainL = idem.Ledger.open(qdb);
  const auxL = idem.Ledger.open(qdb, { name: 'aux.ledger', options: { lease_seconds: 60 } });
  const tables = qdb.prepare("SELECT schema || '.' || name AS t FROM pragma_table_list WHERE name LIKE '%ledger%' AND schema IN ('main', 'aux') ORDER BY 1").all().map((r) => r.t);
  report(j(tables) === j(['aux.ledger', 'aux.ledger_guards', 'aux.ledger_members', 'aux.ledger_meta', 'aux.ledger_rows', 'aux.ledger_targets', 'main.ledger', 'main.ledger_guards', 'main.ledger_members', 'main.ledger_meta', 'main.ledger_rows', 'main.ledger_targets']),
         'qualified-name-created-in-schema', j(tables));
  // the second Ledger.open loaded the extension into qdb again: the first ledger still works
  const md = mainL.claim(T, C, 'q', { n: 0 });
  report(md.decision === 'admitted' && mainL.claim(T, C, 'q', { n: 0 }).decision === 'in_progress',
         'two-ledgers-one-connection', j(md));
  const qd = auxL.claim(T, C, 'q', { n: 1 });
  report(qd.decision === 'admitted' && auxL.row(T, qd.key) && !mainL.row(T, qd.key), 'qualified-name-claim-row', j(qd));
  const qo = await new idem.Ledger(qdb, { name: '"aux"."ledger"' }).call(T, C, 'q', { n: 2 }, async () => ({ ok: 1 }));
  const nAux = qdb.prepare('SELECT count(*) AS n FROM aux.ledger').get().n;
  const nMain = qdb.prepare('SELECT count(*) AS n FROM main.ledger').get().n;
  report(qo.status === 'succeeded' && Number(nAux) === 2 && Number(nMain) === 1, 'qualified-name-call', `${j(qo)}; rows aux ${nAux}, main ${nMain}`);
  e = raised(() => idem.Ledger.open(qdb, { name: 'aux.ledger', options: { lease_seconds: 30 } }));
  report(e instanceof idem.IdempotencyError && e.message === 'Ledger.create: ledger aux.ledger exists with lease_seconds=60, not 30; options apply only when a ledger is created',
         'qualified-name-options-checked', desc(e));
  e = raised(() => idem.Ledger.open(qdb, { name: '"aux.ledger' }));
  report(e instanceof RangeError && e.message === 'Ledger: malformed ledger name "\\"aux.ledger": write ledger or schema.ledger, a part in double quotes when it holds a \'.\' ("a.b"."x""y")',
         'qualified-name-malformed', desc(e));
  qdb.close();
  ledger.close();
}

if (!['better-sqlite3', 'libsql', 'node:sqlite', 'bun:sqlite'].includes(driver)) {
  console.error('usage: node test_package_node.mjs better-sqlite3|libsql|node:sqlite, or bun test_package_node.mjs bun:sqlite');
  process.exit(2);
}
if (driver === 'node:sqlite') {
  try {
    ({ DatabaseSync } = await import('node:sqlite'));
  } catch {
    console.log(`SKIP ${PREFIX}: node ${process.version} has no node:sqlite (Node 22.5 and later)`);
    process.exit(0);
  }
  if (typeof DatabaseSync.prototype.loadExtension !== 'function') {
    console.log(`SKIP ${PREFIX}: node ${process.version}'s node:sqlite cannot load extensions (DatabaseSync.loadExtension: Node 22.13, 23.5 and later)`);
    process.exit(0);
  }
}
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'idem-package-node-'));
try {
  await run(tmp);
} catch (err) {
  report(false, 'unexpected', err && err.stack ? err.stack : err);
} finally {
  fs.rmSync(tmp, { recursive: true, force: true });
}
process.exit(tally.status());
