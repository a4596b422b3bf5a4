'use strict';
// Metrics and traces of the claim API, through the ecosystem's libraries,
// each loaded only if installed: prom-client for the counters and
// histograms, @opentelemetry/api for spans.
//
//   const { Ledger, Metrics } = require('sqlite-idempotency');
//   const metrics = new Metrics();          // prom-client's default register
//   metrics.instrument(ledger);             // counts its claims, calls, settles
//   metrics.ledgerState(db);                // gauges read with SQL at each scrape
//
// Counters (labels ledger, tool): idempotency_decisions_total{decision} (every
// claim, also each claim of a wait), idempotency_replays_total{status} (calls
// answered from the ledger), idempotency_in_progress_refusals_total (calls
// refused because another caller held the key), idempotency_unknown_total
// (calls whose outcome became unknown here), idempotency_settles_total{status}
// (what this process settled). Histograms: idempotency_claim_duration_seconds,
// idempotency_action_duration_seconds. Spans: idempotency.claim,
// idempotency.action (active while the action runs, so the request it sends
// is its child), idempotency.settle (from the action's end to the outcome
// being recorded), with attributes idempotency.ledger, .tool, .key,
// .decision, .attempt, .status. The ledger's own state (ledgerState) is the
// gauges sqlite-idempotency metrics prints, read from SQL at each scrape.
const { AsyncLocalStorage } = require('node:async_hooks');
const { performance } = require('node:perf_hooks');

function optional(name) {
  try {
    return require(name);
  } catch (e) {
    if (e && e.code === 'MODULE_NOT_FOUND' && String(e.message).includes(name)) return null;
    throw e;
  }
}

const nowSeconds = () => performance.now() / 1000;
const epochMs = () => performance.timeOrigin + performance.now();

class Metrics {
  // register: a prom-client Registry (default: prom-client's global one);
  // promClient / otel: the libraries (default: required if installed);
  // tracer: an OpenTelemetry tracer (default: the API's 'sqlite-idempotency').
  constructor({ register, promClient, otel, tracer, buckets } = {}) {
    const { IdempotencyError, VERSION } = require('./index.js');
    this.prom = promClient === undefined ? optional('prom-client') : promClient;
    this.otel = otel === undefined ? optional('@opentelemetry/api') : otel;
    if (!this.prom && !this.otel) {
      throw new IdempotencyError('Metrics: neither prom-client nor @opentelemetry/api is installed: there is nothing to record with (npm install prom-client, or @opentelemetry/api)');
    }
    this.tracer = this.otel ? (tracer || this.otel.trace.getTracer('sqlite-idempotency', VERSION)) : null;
    this.inCall = new AsyncLocalStorage();
    if (!this.prom) return;
    this.register = register || this.prom.register;
    const registers = [this.register];
    const counter = (name, help, labelNames) => new this.prom.Counter({ name, help, labelNames, registers });
    const histogram = (name, help) => new this.prom.Histogram({ name, help, labelNames: ['ledger', 'tool'], registers, ...(buckets ? { buckets } : {}) });
    this.decisions = counter('idempotency_decisions_total', 'Claims by decision (admitted, replay, in_progress, unknown, mismatch).', ['ledger', 'tool', 'decision']);
    this.replays = counter('idempotency_replays_total', 'Calls answered from the ledger with the first outcome.', ['ledger', 'tool', 'status']);
    this.inProgress = counter('idempotency_in_progress_refusals_total', 'Calls refused because another caller held a live claim of the key.', ['ledger', 'tool']);
    this.unknowns = counter('idempotency_unknown_total', 'Calls whose outcome became unknown here: reconcile them.', ['ledger', 'tool']);
    this.settles = counter('idempotency_settles_total', 'Claims this process settled, by status.', ['ledger', 'tool', 'status']);
    this.claimSeconds = histogram('idempotency_claim_duration_seconds', 'Time a claim took.');
    this.actionSeconds = histogram('idempotency_action_duration_seconds', 'Time the action of a call took.');
  }

  span(name, attributes, startTime) {
    return this.tracer ? this.tracer.startSpan(name, startTime === undefined ? { attributes } : { attributes, startTime }) : null;
  }

  failSpan(span, e) {
    if (!span) return;
    span.recordException(e instanceof Error ? e : new Error(String(e)));
    span.setStatus({ code: this.otel.SpanStatusCode.ERROR, message: e && e.message });
  }

  // Wraps the claim, settle and call of this ledger (its own methods; the
  // class is not changed). Returns the ledger.
  instrument(ledger) {
    const { ClaimInProgress, OutcomeUnknown, NotSent, NotCommitted } = require('./index.js');
    const m = this;
    const name = ledger.name;
    const tools = new Map(); // token -> tool, for settle(token)
    const claim = ledger.claim.bind(ledger);
    const settle = ledger.settle.bind(ledger);
    const call = ledger.call.bind(ledger);

    ledger.claim = function instrumentedClaim(tenant, conversation, tool, args, options) {
      const span = m.span('idempotency.claim', { 'idempotency.ledger': name, 'idempotency.tool': tool });
      const t0 = nowSeconds();
      let d;
      try {
        d = claim(tenant, conversation, tool, args, options);
      } catch (e) {
        m.failSpan(span, e);
        if (span) span.end();
        throw e;
      }
      if (m.prom) {
        m.claimSeconds.observe({ ledger: name, tool }, nowSeconds() - t0);
        m.decisions.inc({ ledger: name, tool, decision: d.decision });
      }
      if (d.decision === 'admitted') tools.set(d.token, tool);
      if (span) {
        span.setAttributes({ 'idempotency.decision': d.decision, 'idempotency.key': d.key });
        if (d.attempt !== undefined) span.setAttribute('idempotency.attempt', d.attempt);
        span.end();
      }
      return d;
    };

    ledger.settle = function instrumentedSettle(token, status, detail) {
      const r = settle(token, status, detail);
      if (m.prom && !m.inCall.getStore()) {
        let tool = tools.get(token);
        if (tool === undefined) tool = ledger.value(`SELECT tool AS v FROM ${ledger.sqlName()} WHERE token = ?`, [token]) ?? '';
        m.settles.inc({ ledger: name, tool, status });
        if (status === 'unknown') m.unknowns.inc({ ledger: name, tool });
      }
      tools.delete(token);
      return r;
    };

    ledger.call = function instrumentedCall(tenant, conversation, tool, args, action, options) {
      const labels = { ledger: name, tool };
      let actionEnd;
      let key;
      const timed = async (attempt) => {
        key = attempt.key;
        const t0 = nowSeconds();
        const span = m.span('idempotency.action', { 'idempotency.ledger': name, 'idempotency.tool': tool, 'idempotency.key': attempt.key, 'idempotency.attempt': attempt.attempt });
        const run = () => action(attempt);
        try {
          return await (span ? m.otel.context.with(m.otel.trace.setSpan(m.otel.context.active(), span), run) : run());
        } catch (e) {
          m.failSpan(span, e);
          throw e;
        } finally {
          if (m.prom) m.actionSeconds.observe(labels, nowSeconds() - t0);
          actionEnd = epochMs();
          if (span) span.end();
        }
      };
      const settled = (status) => {
        if (m.prom) {
          m.settles.inc({ ...labels, status });
          if (status === 'unknown') m.unknowns.inc(labels);
        }
        if (actionEnd !== undefined) {
          const span = m.span('idempotency.settle', { 'idempotency.ledger': name, 'idempotency.tool': tool, 'idempotency.key': key, 'idempotency.status': status }, actionEnd);
          if (span) span.end();
        }
      };
      return m.inCall.run(true, async () => {
        let out;
        try {
          out = await call(tenant, conversation, tool, args, timed, options);
        } catch (e) {
          if (e instanceof ClaimInProgress) {
            if (m.prom) m.inProgress.inc(labels);
          } else if (e instanceof OutcomeUnknown && e.decision === undefined && e.key !== undefined) {
            settled('unknown');
          } else if ((e instanceof NotSent && e.key !== undefined) || e instanceof NotCommitted) {
            settled('released');
          }
          throw e;
        }
        if (out.idempotent) {
          if (m.prom) m.replays.inc({ ...labels, status: out.status });
        } else {
          settled(out.status);
        }
        return out;
      });
    };
    return ledger;
  }

  // Gauges of the ledger's own state (what sqlite-idempotency metrics
  // prints), read with SQL at each scrape from db: a better-sqlite3 (or
  // libsql) connection with the extension loaded, or a file path (opened
  // read-only for each scrape).
  ledgerState(db, name = 'ledger') {
    const { IdempotencyError } = require('./index.js');
    if (!this.prom) throw new IdempotencyError('Metrics.ledgerState: prom-client is not installed (npm install prom-client)');
    const { readState, openFile } = require('./state.js');
    const { METRICS, metricValues } = require('./cli.js');
    let cache = null; // one read per scrape serves every gauge
    const read = () => {
      if (cache === null) {
        const conn = typeof db === 'string' ? openFile(db) : db;
        try {
          cache = metricValues(readState(conn, typeof db === 'string' ? db : '', name));
        } finally {
          if (conn !== db) conn.close();
        }
        setImmediate(() => { cache = null; });
      }
      return cache;
    };
    const gauges = METRICS.map(([metric, help], i) => new this.prom.Gauge({
      name: metric,
      help,
      labelNames: ['ledger'],
      registers: [this.register],
      collect() {
        this.set({ ledger: name }, read()[i]);
      },
    }));
    return gauges;
  }
}

module.exports = { Metrics };
