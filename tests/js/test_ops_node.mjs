// tests/js/test_ops_node.mjs: reconciliation, metrics and traces of the Node
// package. Run by tests/suites/57-ops.sh from a scratch project whose
// node_modules holds the package (with the built extension), better-sqlite3,
// prom-client and OpenTelemetry. argv[2]: a scratch directory; argv[3]: the
// port of the counting target (tests/python/test_server.py), which says per
// Idempotency-Key how many requests reached it. The command's check and
// status are asserted to the byte, the same text as tests/python/test_ops_py.py
// asserts, and compared with the Python command's output on the same files
// (PYTHONPATH names the Python package with the extension).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { Checks } from './checks.mjs';

const require = createRequire(path.join(process.cwd(), 'x.js'));
const Database = require('better-sqlite3');
const idem = require('sqlite-idempotency');
const client = require('prom-client');
const otel = require('@opentelemetry/api');
const { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } = require('@opentelemetry/sdk-trace-base');

const { Ledger, Answer, Metrics, OutcomeUnknown, ToolFailed, NotSent } = idem;
const checks = new Checks('ops.node');
const eq = (name, got, want) => checks.report(JSON.stringify(got) === JSON.stringify(want), name, `got ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);
const [tmp, port] = [process.argv[2], Number(process.argv[3])];

async function post(attempt, timeoutMs, delayMs = 0) {
  const r = await fetch(`http://127.0.0.1:${port}/send?delay_ms=${delayMs}`, { method: 'POST', body: '{}', headers: { ...attempt.headers, 'Content-Type': 'application/json' }, signal: AbortSignal.timeout(timeoutMs) });
  return r.json();
}
const counts = async () => (await (await fetch(`http://127.0.0.1:${port}/_counts`)).json()).keys;
async function raises(fn) {
  try { await fn(); } catch (e) { return e; }
  return null;
}

async function reconcileTests() {
  const file = path.join(tmp, 'reconcile-node.db');
  const ledger = Ledger.open(new Database(file));
  let e = await raises(() => ledger.call('t', 'c', 'send', { n: 1 }, (a) => post(a, 1000, 3000)));
  eq('setup:timeout-unknown', e.name, 'OutcomeUnknown');
  const kTimeout = e.key;
  const never = () => { throw new OutcomeUnknown('gave up before sending'); };
  e = await raises(() => ledger.call('t', 'c', 'send', { n: 2 }, never));
  const kNever = e.key;
  for (const [tool, n] of [['charge', 3], ['mail', 4], ['sms', 5]]) await raises(() => ledger.call('t', 'c', tool, { n }, never));
  const kCharge = ledger.claim('t', 'c', 'charge', { n: 3 }).key;
  const kMail = ledger.claim('t', 'c', 'mail', { n: 4 }).key;
  const kSms = ledger.claim('t', 'c', 'sms', { n: 5 }).key;
  const quick = Ledger.open(new Database(file), { name: 'quick', options: { lease_seconds: 0 } });
  const kExpired = quick.claim('t', 'c', 'send', { n: 6 }).key;
  eq('setup:expired-claim-reads-unknown', quick.row('t', kExpired).status, 'unknown');

  const send = async (call) => ((await counts())[call.key] ? Answer.succeeded({ received: (await counts())[call.key] }) : Answer.notSent('the target has no request with this key'));
  const progress = [];
  const report = await ledger.reconcile({ send, charge: () => { throw new Error('provider down'); }, sms: () => Answer.unknown('pending') },
    { by: 'on-call', batchSize: 2, onProgress: (r) => progress.push([r.examined, r.resolved.length]) });
  eq('report:examined', report.examined, 5);
  eq('report:progress', progress.map((p) => p[0]), [1, 2, 3, 4, 5]);
  eq('report:progress-last', progress.at(-1), [5, report.resolved.length]);
  let refused;
  try { await ledger.reconcile({}, { onProgress: 'yes' }); } catch (e) { refused = e.message; }
  eq('report:progress-refused', refused, 'Ledger.reconcile: onProgress must be a function of the report so far, got string');
  eq('report:resolved', report.resolved.map((r) => [r.key, r.status]).sort(), [[kTimeout, 'succeeded'], [kNever, 'released']].sort());
  eq('report:errors', report.errors, [{ tenant: 't', key: kCharge, tool: 'charge', attempt: 1, error: 'Error: provider down' }]);
  eq('report:needs-person', report.needsPerson, [{ tenant: 't', key: kMail, tool: 'mail', attempt: 1, reason: 'no reconciler for tool mail' }]);
  eq('report:unknown', report.unknown, [{ tenant: 't', key: kSms, tool: 'sms', attempt: 1, reason: 'pending' }]);
  eq('report:raced', report.raced, []);
  eq('thrower-row-stays-unknown', ledger.row('t', kCharge).status, 'unknown');
  let row = ledger.row('t', kTimeout);
  const at = row.result.reconciled.at;
  eq('detail:succeeded', row.result, { reconciled: { at, by: 'on-call' }, result: { received: 1 } });
  checks.report(Math.abs(at - row.updated_at) < 5000, 'detail:at-is-the-resolve-time', `${at} vs ${row.updated_at}`);
  row = ledger.row('t', kNever);
  eq('detail:released', row.error, { sent: false, reason: 'the target has no request with this key', reconciled: { at: row.error.reconciled.at, by: 'on-call' } });
  let out = await ledger.call('t', 'c', 'send', { n: 1 }, (a) => post(a, 5000));
  eq('replay-after-reconcile', [out.idempotent, out.result.result], [true, { received: 1 }]);
  out = await ledger.call('t', 'c', 'send', { n: 2 }, (a) => post(a, 5000));
  eq('released-runs-again', [out.idempotent, out.attempt], [false, 2]);
  const c = await counts();
  eq('target-received-each-once', [c[kTimeout], c[kNever]], [1, 1]);

  const rq = await quick.reconcile({ send: () => Answer.failed({ code: 'declined' }) }, { by: 'r' });
  eq('expired-claim:resolved', rq.resolved.map((r) => [r.key, r.status]), [[kExpired, 'failed']]);
  eq('expired-claim:row', quick.row('t', kExpired).error.error, { code: 'declined' });

  const other = Ledger.open(new Database(file));
  let inner;
  const outer = await ledger.reconcile({
    charge: async () => {
      inner = await other.reconcile({ charge: () => Answer.succeeded({ by: 'inner' }) }, { by: 'inner' });
      return Answer.succeeded({ by: 'outer' });
    },
  }, { by: 'outer' });
  eq('race:inner-resolved', inner.resolved.map((r) => [r.key, r.status]), [[kCharge, 'succeeded']]);
  eq('race:outer-raced', outer.raced, [{ tenant: 't', key: kCharge, tool: 'charge', attempt: 1, status: 'succeeded', nowAttempt: 1 }]);
  eq('race:row-is-inner', ledger.row('t', kCharge).result.result, { by: 'inner' });

  const bad = await ledger.reconcile({ sms: () => 'yes' });
  eq('bad-answer', bad.errors[0].error, 'TypeError: reconcile: a reconciler must return an Answer (Answer.succeeded(result), Answer.failed(error), Answer.notSent(reason), Answer.unknown(reason)), got "yes"');
  eq('limit', (await ledger.reconcile({}, { limit: 1 })).examined, 1);
  ledger.db.exec('BEGIN');
  e = await raises(() => ledger.reconcile({}));
  ledger.db.exec('ROLLBACK');
  eq('open-transaction', e && e.message, "Ledger.reconcile: a transaction is open on the ledger's connection; reconcile resolves each row in a transaction of its own: commit first");
  e = await raises(() => ledger.reconcile({}, { batchSize: 0 }));
  eq('batch-size', e && e.message, 'Ledger.reconcile: batchSize must be an integer from 1 to 10000, got 0');
  eq('left-unknown', (await ledger.reconcile({})).needsPerson.map((r) => r.key), [kMail, kSms]);

  // The stored JSON keeps its digits both ways, as in Ledger.call: a 64-bit
  // id in the detail reaches the reconciler as a BigInt, a BigInt in an
  // answer is recorded as its digits, and NaN is refused (the row stays
  // unknown), never stored as null.
  const digits = Ledger.open(new Database(file), { name: 'digits' });
  const unknownRow = (n, detail) => {
    const d = digits.claim('t', 'c', 'charge', { n });
    digits.settle(d.token, 'unknown', detail);
    return d.key;
  };
  const [kId, kBig, kNaN] = [unknownRow(1, { order_id: 1234567890123456789n }), unknownRow(2, { order_id: 1 }), unknownRow(3, null)];
  const seen = [];
  const answers = { 1: (call) => Answer.succeeded({ id: call.detail.order_id }), 2: () => Answer.succeeded({ id: 9223372036854775807n }), 3: () => Answer.succeeded({ x: NaN }) };
  const dr = await digits.reconcile({ charge: (call) => { seen.push(call.detail); return answers[call.args.n](call); } }, { by: 'r' });
  const stored = (key) => digits.db.prepare('SELECT status, result FROM digits WHERE key = ?').get(key);
  checks.report(seen[0]?.order_id === 1234567890123456789n, 'digits:detail-as-bigint', `the reconciler got ${String(seen[0]?.order_id)} (${typeof seen[0]?.order_id})`);
  const resultOf = (key) => /"result":(.*)\}$/.exec(stored(key).result || '')?.[1];
  eq('digits:id-recorded', [stored(kId).status, resultOf(kId)], ['succeeded', '{"id":1234567890123456789}']);
  eq('digits:bigint-recorded', [stored(kBig).status, resultOf(kBig)], ['succeeded', '{"id":9223372036854775807}']);
  eq('digits:nan-refused', [stored(kNaN).status, dr.errors.map((x) => [x.key, x.error])],
     ['unknown', [[kNaN, 'sqlite-idempotency: the reconciled detail is not JSON: member "x" is NaN']]]);
  eq('digits:report', dr.resolved.map((x) => x.key), [kId, kBig]);
}

async function metricsTests() {
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  const register = new client.Registry();
  const m = new Metrics({ register, tracer: provider.getTracer('test'), buckets: [0.5, 5] });
  const file = path.join(tmp, 'metrics-node.db');
  const ledger = m.instrument(Ledger.open(new Database(file)));
  await ledger.call('t', 'c', 'send', { n: 1 }, () => ({ ok: 1 }));
  await ledger.call('t', 'c', 'send', { n: 1 }, () => ({ ok: 2 }));
  await ledger.call('t', 'c', 'send', { n: 2 }, () => { throw new ToolFailed({ code: 'no' }); });
  await raises(() => ledger.call('t', 'c', 'send', { n: 3 }, () => { throw new NotSent('refused'); }));
  const boom = () => { throw new Error('read timeout'); };
  await raises(() => ledger.call('t', 'c', 'mail', { n: 4 }, boom));
  await raises(() => ledger.call('t', 'c', 'mail', { n: 4 }, boom));
  const held = ledger.claim('t', 'c', 'mail', { n: 5 });
  await raises(() => ledger.call('t', 'c', 'mail', { n: 5 }, boom));
  ledger.settle(held.token, 'succeeded', { late: true });

  const data = Object.fromEntries((await register.getMetricsAsJSON()).map((x) => [x.name, x.values]));
  const v = (name, labels) => {
    const want = { ledger: 'ledger', ...labels };
    const hit = (data[name] || []).find((s) => Object.keys(want).every((k) => s.labels[k] === want[k]) && Object.keys(s.labels).length === Object.keys(want).length);
    return hit ? hit.value : undefined;
  };
  eq('decisions', [['send', 'admitted'], ['send', 'replay'], ['mail', 'admitted'], ['mail', 'unknown'], ['mail', 'in_progress']].map(([tool, decision]) => v('idempotency_decisions_total', { tool, decision })), [3, 1, 2, 1, 1]);
  eq('replays', v('idempotency_replays_total', { tool: 'send', status: 'succeeded' }), 1);
  eq('in-progress', v('idempotency_in_progress_refusals_total', { tool: 'mail' }), 1);
  eq('unknown', v('idempotency_unknown_total', { tool: 'mail' }), 1);
  eq('settles', [['send', 'succeeded'], ['send', 'failed'], ['send', 'released'], ['mail', 'unknown'], ['mail', 'succeeded']].map(([tool, status]) => v('idempotency_settles_total', { tool, status })), [1, 1, 1, 1, 1]);
  const count = (name, tool) => (data[name] || []).find((s) => s.metricName === `${name}_count` && s.labels.tool === tool)?.value;
  eq('claim-duration-count', [count('idempotency_claim_duration_seconds', 'send'), count('idempotency_claim_duration_seconds', 'mail')], [4, 4]);
  eq('action-duration-count', [count('idempotency_action_duration_seconds', 'send'), count('idempotency_action_duration_seconds', 'mail')], [3, 1]);

  m.ledgerState(file);
  const text = await register.metrics();
  const gauge = (name) => Number((new RegExp(`^${name}\\{ledger="ledger"\\} (\\S+)$`, 'm').exec(text) || [])[1]);
  eq('state', ['idempotency_ledger_up', 'idempotency_ledger_open_claims', 'idempotency_ledger_unknown', 'idempotency_ledger_expired_claims'].map(gauge), [1, 0, 1, 0]);

  const spans = exporter.getFinishedSpans().map((s) => [s.name, s.attributes['idempotency.tool'], s.attributes['idempotency.decision'] ?? s.attributes['idempotency.status'] ?? null]);
  eq('spans', spans.filter(([, tool]) => tool === 'send'), [
    ['idempotency.claim', 'send', 'admitted'], ['idempotency.action', 'send', null], ['idempotency.settle', 'send', 'succeeded'],
    ['idempotency.claim', 'send', 'replay'],
    ['idempotency.claim', 'send', 'admitted'], ['idempotency.action', 'send', null], ['idempotency.settle', 'send', 'failed'],
    ['idempotency.claim', 'send', 'admitted'], ['idempotency.action', 'send', null], ['idempotency.settle', 'send', 'released'],
  ]);
  const failed = exporter.getFinishedSpans().find((s) => s.name === 'idempotency.action' && s.attributes['idempotency.tool'] === 'mail');
  eq('span:action-error', [failed.status.code, failed.status.message], [otel.SpanStatusCode.ERROR, 'read timeout']);
  const noLibs = await raises(() => new Metrics({ promClient: null, otel: null }));
  eq('metrics-needs-a-library', noLibs && noLibs.message, 'Metrics: neither prom-client nor @opentelemetry/api is installed: there is nothing to record with (npm install prom-client, or @opentelemetry/api)');
}

const OPTS = 'lease_seconds=15 max_attempts=5 max_args_bytes=1048576 single_tenant=0 retention_seconds=0 require_transaction=0 target_window_seconds=86400';
const REFUSAL = 'rows may have been changed without it: check them (SELECT * FROM "ledger_rows") against what the application and the targets know, then restore it with SELECT idem_upgrade(\'ledger\'); every ledger operation is refused until then';

// What check prints: [result, detail] rows, the result column w wide.
function checkText(guards, ledger, { triggers = ['ok', '17 own triggers in place'], rows = [['ok', 'no unknown rows, no expired claims']], verdict = 'healthy', opts = OPTS, w = 6 } = {}) {
  const table = [['result', 'check', 'detail'], ['ok', 'format', '5'], [triggers[0], 'triggers', triggers[1]], ['ok', 'options', opts],
    ...guards.map(([r, t]) => [r, 'guards', t]), ...ledger.map(([r, t]) => [r, 'ledger', t]), ['ok', 'integrity_check', 'ok'],
    ...rows.map(([r, t]) => [r, 'rows', t])];
  return `${table.map(([r, c, t]) => `${r.padEnd(w)}  ${c.padEnd(15)}  ${t}\n`).join('')}verdict: ${verdict}\n`;
}

// h-healthy.db (a guarded ledger: a settled row, a live claim), h-member.db
// and h-own.db (its guard's member trigger, its own update trigger dropped),
// h-rows.db (two unknown rows, and a ledger "quick" with two expired
// claims); the first unknown row's key.
function makeHealthFiles(d) {
  fs.mkdirSync(d, { recursive: true });
  const healthy = path.join(d, 'h-healthy.db');
  let db = new Database(healthy);
  let led = Ledger.open(db);
  const a = led.claim('acme', 'conv-1', 'send_email', { to: 'a' });
  led.settle(a.token, 'succeeded', { id: 1 });
  led.claim('globex', 'conv-2', 'send_email', { to: 'b' });
  db.exec('CREATE TABLE orders(id INTEGER PRIMARY KEY, tenant TEXT, op TEXT)');
  db.prepare("SELECT idem_guard('ledger', 'orders', 'op', 'tenant')").get();
  db.pragma('journal_mode = DELETE');
  db.close();
  for (const [name, trig] of [['h-member.db', 'orders_idem_ledger_member'], ['h-own.db', 'ledger_rows_update']]) {
    fs.copyFileSync(healthy, path.join(d, name));
    const c = new Database(path.join(d, name));
    c.exec(`DROP TRIGGER "${trig}"`);
    c.close();
  }
  const rows = path.join(d, 'h-rows.db');
  fs.copyFileSync(healthy, rows);
  db = new Database(rows);
  led = Ledger.open(db);
  const b = led.claim('acme', 'conv-3', 'charge_card', { amount: 5 });
  led.settle(b.token, 'unknown', { reason: 'read timeout' });
  const f = led.claim('globex', 'conv-4', 'send_email', { to: 'c' });
  led.settle(f.token, 'unknown', { reason: 'reset' });
  const quick = Ledger.open(db, { name: 'quick', options: { lease_seconds: 0 } });
  quick.claim('acme', 'conv-5', 'charge_card', { amount: 7 });
  quick.claim('acme', 'conv-5', 'local_op', { n: 1 }, { effect: 'local' });
  db.pragma('journal_mode = DELETE');
  db.close();
  return b.key;
}

function commandTests() {
  const { main } = require(path.join(path.dirname(require.resolve('sqlite-idempotency')), 'cli.js'));
  const d = path.join(tmp, 'cmd-node');
  const keyB = makeHealthFiles(d);
  const f = (name) => path.join(d, name);
  const withNow = (now, fn) => {
    const old = process.env.SQLITE_IDEMPOTENCY_NOW_MS;
    delete process.env.SQLITE_IDEMPOTENCY_NOW_MS;
    if (now !== undefined) process.env.SQLITE_IDEMPOTENCY_NOW_MS = String(now);
    try { return fn(); } finally {
      delete process.env.SQLITE_IDEMPOTENCY_NOW_MS;
      if (old !== undefined) process.env.SQLITE_IDEMPOTENCY_NOW_MS = old;
    }
  };
  const py = process.env.PYTHONPATH && fs.existsSync('/usr/bin/python3');
  if (!py) console.log('SKIP ops.node:cmd:same-as-python: PYTHONPATH names no Python package (or /usr/bin/python3 is missing)');
  // the Node command's exit status and output; each run is also compared with the Python command's
  const run = (argv, now) => {
    let text = '';
    const sink = { write: (t) => { text += t; } };
    const rc = withNow(now, () => main(argv, sink, sink));
    if (py) {
      const env = { ...process.env };
      delete env.SQLITE_IDEMPOTENCY_NOW_MS;
      if (now !== undefined) env.SQLITE_IDEMPOTENCY_NOW_MS = String(now);
      const p = spawnSync('/usr/bin/python3', ['-m', 'sqlite_idempotency', ...argv], { env, encoding: 'utf8' });
      checks.report(p.status === rc && p.stdout + p.stderr === text, `cmd:same-as-python:${argv.map((x) => path.basename(x)).join(' ')}`,
        `python exit ${p.status}: ${p.stdout}${p.stderr} / node exit ${rc}: ${text}`);
    }
    return [rc, text];
  };

  // the ledger's own refusal, as every operation on it fails (the check's ledger row is this text)
  const refusal = (file) => {
    const { openFile } = require(path.join(path.dirname(require.resolve('sqlite-idempotency')), 'state.js'));
    const conn = openFile(file);
    try {
      conn.prepare('SELECT count(*) FROM ledger').get();
      return null;
    } catch (e) {
      return e.message.replace(/^idempotency: /, '');
    } finally {
      conn.close();
    }
  };
  const whole = [['ok', 'orders: 3 triggers in place']];
  const memberRefusal = refusal(f('h-member.db'));
  checks.report(memberRefusal !== null && memberRefusal.startsWith('ledger ledger is missing its guard trigger "orders_idem_ledger_member" on table "orders"; '),
    'cmd:member-dropped-refused', memberRefusal);
  eq('cmd:check-healthy', run(['check', f('h-healthy.db')]), [0, checkText(whole, [['ok', 'it answers operations']])]);
  eq('cmd:check-member-dropped', run(['check', f('h-member.db')]), [2, checkText([['broken', 'orders: missing orders_idem_ledger_member']],
    [['broken', memberRefusal]], { verdict: 'broken' })]);
  eq('cmd:check-own-dropped', run(['check', f('h-own.db')]), [2, checkText(whole,
    [['broken', `ledger ledger is missing its trigger "ledger_rows_update"; ${REFUSAL}`]], { triggers: ['broken', 'missing ledger_rows_update'], verdict: 'broken' })]);
  eq('cmd:check-expired', run(['check', f('h-rows.db'), '--ledger', 'quick']), [1, checkText([['ok', 'none']], [['ok', 'it answers operations']], {
    rows: [['attention', '1 unknown row: reconcile with the targets, then resolve'], ['attention', '2 expired claims: their holders stopped before settling']],
    verdict: 'needs attention', opts: OPTS.replace('lease_seconds=15', 'lease_seconds=0'), w: 9,
  })]);
  const c = new Database(f('h-rows.db'), { readonly: true });
  const created = Number(c.prepare('SELECT created_at FROM ledger_rows WHERE key = ?').pluck().get(keyB));
  c.close();
  eq('cmd:status-counts-oldest', run(['status', f('h-rows.db'), '--ledger', 'ledger'], created + 90500), [1,
    `ledger:         ledger in ${f('h-rows.db')}\n`
    + 'format:         5\n'
    + 'verdict:        needs attention\n'
    + `options:        ${OPTS}\n`
    + 'guards:         orders (triggers ok)\n'
    + 'open claims:    1\n'
    + 'unknown:        2\n'
    + 'expired claims: 0\n'
    + `oldest unknown: acme ${keyB} charge_card, claimed ${new Date(created).toISOString()} (90 s ago)\n`
    + 'attention:      2 unknown rows: reconcile with the targets, then resolve\n'
    + '\n'
    + 'status     tool         rows\n'
    + 'claimed    send_email   1\n'
    + 'unknown    charge_card  1\n'
    + 'unknown    send_email   1\n'
    + 'succeeded  send_email   1\n']);
  eq('cmd:status-member-dropped-guards-line', run(['status', f('h-member.db')])[1].split('\n').filter((l) => l.startsWith('guards:')),
    ['guards:         orders (orders_idem_ledger_member missing)']);
  const [rc, text] = run(['status', f('h-rows.db'), '--ledger', 'ledger', '--json'], created + 90500);
  const st = JSON.parse(text);
  eq('cmd:status-json', [rc, st.oldest_unknown, st.counts[0], st.live_claims],
    [1, { tenant: 'acme', key: keyB, tool: 'charge_card', created_at: created, age_seconds: 90 }, { status: 'claimed', tool: 'send_email', rows: 1 }, 1]);
  // idem_health's answer whole but for now (docs/operating.md), file first
  eq('cmd:status-json-members', Object.keys(st), ['file', 'ledger', 'schema', 'format', 'verdict', 'problems', 'attention', 'tables',
    'triggers', 'guards', 'options', 'live_claims', 'unknown', 'expired_claims', 'oldest_unknown', 'targets', 'counts']);
  eq('cmd:metrics-member-dropped-down', run(['metrics', f('h-member.db')])[1].split('\n').filter((l) => l.startsWith('idempotency_ledger_up')),
    ['idempotency_ledger_up{ledger="ledger"} 0']);
}

await reconcileTests();
await metricsTests();
commandTests();
process.exit(checks.status());
