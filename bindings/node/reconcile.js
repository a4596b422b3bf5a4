'use strict';
// Reconciliation: asking the target systems what became of the unknown calls.
//
//   const report = await ledger.reconcile({
//     charge_card: async (call) => {                  // one reconciler per tool
//       const found = await provider.findByIdempotencyKey(call.key);
//       return found ? Answer.succeeded({ charge: found.id }) : Answer.notSent('the provider has no such request');
//     },
//   });
//
// ledger.reconcile works through the rows whose status reads unknown (calls
// settled unknown, and external claims whose lease ran out) in batches of
// batchSize, in row order, and resolves each with idem_resolve according to
// its tool's reconciler's answer. The detail it records says who reconciled
// the call and when (docs/operating.md, "Reconciling"):
//
//   succeeded  {"reconciled": {"at": <unix ms>, "by": <by>}, "result": <result>}
//   failed     {"error": <error>, "reconciled": {"at": ..., "by": ...}}
//   not sent   {"sent": false, "reason": <reason>, "reconciled": {...}}  (released)
//
// Each row is resolved in a transaction of its own that first checks the row
// is still unknown at the same attempt, so two reconcilers running at once
// never resolve a row twice: the one that loses reports the row as raced. A
// reconciler that throws leaves its row unknown (reported under errors); the
// others go on. Tools without a reconciler are reported under needsPerson.
// Nothing is held open while a reconciler runs. The stored JSON is read and
// the detail written with the package's own parser and writer (index.js), as
// Ledger.call does: a 64-bit id in a detail reaches the reconciler as a
// BigInt with its digits, a BigInt in an answer is recorded as its digits,
// and what JSON cannot hold (NaN, undefined, a cycle) is refused, leaving
// the row unknown. The Python package's reconcile.py is the same.
const NOW_SQL = "CAST(strftime('%s', 'now') AS INTEGER) * 1000 + CAST(substr(strftime('%f', 'now'), 4) AS INTEGER)";
const ANSWERS = ['succeeded', 'failed', 'not_sent', 'unknown'];

// What a reconciler says about one call.
const Answer = Object.freeze({
  // The target has the call and it succeeded: result is recorded (and replayed).
  succeeded: (result = null) => ({ status: 'succeeded', result }),
  // The target has the call and refused it: error is recorded (and replayed).
  failed: (error) => ({ status: 'failed', error }),
  // The target never received the call: it is released, so the next arrival runs it.
  notSent: (reason = 'the target never received it') => ({ status: 'not_sent', reason }),
  // The target cannot tell (yet): the row stays unknown.
  unknown: (reason = 'the target cannot tell yet') => ({ status: 'unknown', reason }),
});

function checkAnswer(a) {
  if (a === null || typeof a !== 'object' || Array.isArray(a) || Object.keys(a).some((k) => !['status', 'result', 'error', 'reason'].includes(k))) {
    let shown;
    try { shown = JSON.stringify(a); } catch { shown = String(a); }
    throw new TypeError(`reconcile: a reconciler must return an Answer (Answer.succeeded(result), Answer.failed(error), Answer.notSent(reason), Answer.unknown(reason)), got ${shown}`);
  }
  if (!ANSWERS.includes(a.status)) throw new RangeError(`reconcile: answer status must be one of ${ANSWERS.join(', ')}, got ${JSON.stringify(a.status)}`);
  if ((a.status === 'not_sent' || a.status === 'unknown') && a.reason !== undefined && a.reason !== null && typeof a.reason !== 'string') {
    throw new TypeError(`reconcile: the reason of a ${a.status} answer must be text, got ${JSON.stringify(a.reason)}`);
  }
  return a;
}

function checkArgs(reconcilers, batchSize, limit, by) {
  if (reconcilers === null || typeof reconcilers !== 'object' || Array.isArray(reconcilers)) {
    throw new TypeError('Ledger.reconcile: reconcilers must be an object of tool name to function');
  }
  for (const [tool, fn] of Object.entries(reconcilers)) {
    if (typeof fn !== 'function') throw new TypeError(`Ledger.reconcile: the reconciler of tool ${JSON.stringify(tool)} is not a function`);
  }
  if (!Number.isInteger(batchSize) || batchSize < 1 || batchSize > 10000) throw new RangeError(`Ledger.reconcile: batchSize must be an integer from 1 to 10000, got ${batchSize}`);
  if (limit !== undefined && limit !== null && !(Number.isInteger(limit) && limit >= 0)) throw new RangeError(`Ledger.reconcile: limit must be an integer >= 0, got ${limit}`);
  if (typeof by !== 'string' || !by) throw new RangeError(`Ledger.reconcile: by must be a non-empty string naming who reconciles, got ${JSON.stringify(by)}`);
}

const entry = (call, more) => ({ tenant: call.tenant, key: call.key, tool: call.tool, attempt: call.attempt, ...more });

// The unknown rows in row order, batchSize at a time (no statement left open between batches).
function* batches(ledger, batchSize, limit, tenant) {
  const { parseJson } = require('./index.js')[Symbol.for('sqlite-idempotency.json')];
  const sql = `SELECT rowid AS rid, tenant, key, conversation, tool, args, effect, attempt, error, created_at, updated_at, lease_until FROM ${ledger.sqlName()} WHERE status = 'unknown' AND rowid > ?${tenant !== undefined ? ' AND tenant = ?' : ''} ORDER BY rowid LIMIT ?`;
  let last = 0;
  let seen = 0;
  while (limit === undefined || limit === null || seen < limit) {
    const n = limit === undefined || limit === null ? batchSize : Math.min(batchSize, limit - seen);
    let rows;
    try {
      const stmt = ledger.db.prepare(sql);
      rows = tenant !== undefined ? stmt.all(last, tenant, n) : stmt.all(last, n);
    } catch (e) {
      const { LedgerError } = require('./index.js');
      throw LedgerError.wrap(e);
    }
    if (!rows.length) return;
    for (const r of rows) {
      last = r.rid;
      seen += 1;
      yield {
        tenant: r.tenant,
        key: r.key,
        conversation: r.conversation,
        tool: r.tool,
        args: parseJson(r.args),
        effect: r.effect,
        attempt: Number(r.attempt),
        detail: r.error === null ? null : parseJson(r.error),
        createdAt: Number(r.created_at),
        updatedAt: Number(r.updated_at),
        leaseUntil: Number(r.lease_until),
        argsText: r.args,
        detailText: r.error,
        headers: { 'Idempotency-Key': `"${r.key}"` },
      };
    }
    if (rows.length < n) return;
  }
}

// Resolves one row with answer a, in a transaction that first checks it is
// still unknown at call.attempt.
function resolveRow(ledger, call, a, by, report) {
  const { jsonText } = require('./index.js')[Symbol.for('sqlite-idempotency.json')];
  const db = ledger.db;
  let status;
  try {
    db.exec('BEGIN IMMEDIATE');
    try {
      const row = db.prepare(`SELECT status, attempt FROM ${ledger.sqlName()} WHERE tenant = ? AND key = ?`).get(call.tenant, call.key);
      if (row === undefined || row.status !== 'unknown' || Number(row.attempt) !== call.attempt) {
        db.exec('ROLLBACK');
        report.raced.push(entry(call, { status: row === undefined ? null : row.status, nowAttempt: row === undefined ? null : Number(row.attempt) }));
        return;
      }
      const mark = { at: Number(db.prepare(`SELECT ${NOW_SQL} AS v`).get().v), by };
      let detail;
      if (a.status === 'succeeded') [status, detail] = ['succeeded', { reconciled: mark, result: a.result === undefined ? null : a.result }];
      else if (a.status === 'failed') [status, detail] = ['failed', { error: a.error === undefined ? null : a.error, reconciled: mark }];
      else [status, detail] = ['released', { sent: false, reason: a.reason === undefined ? null : a.reason, reconciled: mark }];
      const text = jsonText(detail, 'the reconciled detail');
      db.prepare('SELECT idem_resolve(?, ?, ?, ?, ?) AS v').get(ledger.name, call.tenant, call.key, status, text);
      db.exec('COMMIT');
    } finally {
      if (db.inTransaction) db.exec('ROLLBACK');
    }
  } catch (e) {
    report.errors.push(entry(call, { error: e && e.message !== undefined ? e.message : String(e) }));
    return;
  }
  report.resolved.push(entry(call, { status }));
}

// Ledger.reconcile(reconcilers, { batchSize = 100, limit, by = 'reconcile', tenant, onProgress })
// onProgress(report), when given, is called after each call is examined,
// with the report so far: a long run's progress, for the caller to show.
async function reconcile(ledger, reconcilers, { batchSize = 100, limit, by = 'reconcile', tenant, onProgress } = {}) {
  checkArgs(reconcilers, batchSize, limit, by);
  if (onProgress !== undefined && typeof onProgress !== 'function') {
    throw new TypeError(`Ledger.reconcile: onProgress must be a function of the report so far, got ${onProgress === null ? 'null' : typeof onProgress}`);
  }
  if (ledger.inTransaction() === true) {
    const { IdempotencyError } = require('./index.js');
    throw new IdempotencyError("Ledger.reconcile: a transaction is open on the ledger's connection; reconcile resolves each row in a transaction of its own: commit first");
  }
  const report = { examined: 0, resolved: [], unknown: [], errors: [], raced: [], needsPerson: [] };
  for (const call of batches(ledger, batchSize, limit, tenant)) {
    report.examined += 1;
    await examine(ledger, reconcilers, call, by, report);
    if (onProgress) onProgress(report);
  }
  return report;
}

// One call: its reconciler's answer, resolved or reported.
async function examine(ledger, reconcilers, call, by, report) {
  const fn = Object.prototype.hasOwnProperty.call(reconcilers, call.tool) ? reconcilers[call.tool] : undefined;
  if (fn === undefined) {
    report.needsPerson.push(entry(call, { reason: `no reconciler for tool ${call.tool}` }));
    return;
  }
  let a;
  try {
    a = checkAnswer(await fn(call));
  } catch (e) {
    report.errors.push(entry(call, { error: e instanceof Error ? `${e.name}: ${e.message}` : `thrown: ${String(e)}` }));
    return;
  }
  if (a.status === 'unknown') {
    report.unknown.push(entry(call, { reason: a.reason === undefined ? null : a.reason }));
    return;
  }
  resolveRow(ledger, call, a, by, report);
}

module.exports = { Answer, reconcile };
