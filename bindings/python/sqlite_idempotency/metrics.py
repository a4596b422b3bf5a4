"""Metrics and traces of the claim API, through the ecosystem's libraries, each used only if installed.

    from sqlite_idempotency.metrics import Metrics
    metrics = Metrics()                 # prometheus_client's default REGISTRY
    metrics.instrument(ledger)          # counts its claims, calls and settles
    metrics.ledger_state("agent.db")    # gauges read with SQL at each scrape

``prometheus_client`` (Debian python3-prometheus-client) records the
counters and histograms, ``opentelemetry`` (the API) the spans; the same
names, labels and spans as the Node package's metrics.js:

Counters (labels ledger, tool): ``idempotency_decisions_total{decision}``
(every claim, also each claim of a wait), ``idempotency_replays_total{status}``
(calls answered from the ledger), ``idempotency_in_progress_refusals_total``
(calls refused because another caller held the key),
``idempotency_unknown_total`` (calls whose outcome became unknown here),
``idempotency_settles_total{status}`` (what this process settled).
Histograms: ``idempotency_claim_duration_seconds``,
``idempotency_action_duration_seconds``. Spans ``idempotency.claim``,
``idempotency.action`` (current while the action runs) and
``idempotency.settle`` (from the action's end to the outcome being
recorded). `Metrics.ledger_state` exports the gauges that
``sqlite-idempotency metrics`` prints, read from SQL at each scrape.
"""
from __future__ import annotations

import contextvars
import time
from typing import Any, Optional

_in_call: contextvars.ContextVar[bool] = contextvars.ContextVar("sqlite_idempotency_in_call", default=False)


def _optional(name: str) -> Any:
    import importlib
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


class Metrics:
    """Counters, histograms and spans for the ledgers it instruments.

    ``registry``: a prometheus_client CollectorRegistry (default: its
    REGISTRY); ``tracer``: an OpenTelemetry tracer (default: the API's
    ``sqlite-idempotency`` tracer, when opentelemetry is installed).
    """

    def __init__(self, registry: Any = None, tracer: Any = None, buckets: Optional[tuple] = None):
        from . import IdempotencyError, __version__
        self.prom = _optional("prometheus_client")
        trace = _optional("opentelemetry.trace")
        if tracer is None and trace is not None:
            tracer = trace.get_tracer("sqlite-idempotency", __version__)
        self.tracer = tracer
        self.trace = trace
        if self.prom is None and self.tracer is None:
            raise IdempotencyError("Metrics: neither prometheus_client nor opentelemetry is installed: there is "
                                   "nothing to record with (Debian: apt-get install python3-prometheus-client)")
        if self.prom is None:
            return
        self.registry = registry if registry is not None else self.prom.REGISTRY
        p, r = self.prom, self.registry
        h = {"buckets": buckets} if buckets else {}
        self.decisions = p.Counter("idempotency_decisions", "Claims by decision (admitted, replay, in_progress, "
                                   "unknown, mismatch).", ["ledger", "tool", "decision"], registry=r)
        self.replays = p.Counter("idempotency_replays", "Calls answered from the ledger with the first outcome.",
                                 ["ledger", "tool", "status"], registry=r)
        self.in_progress = p.Counter("idempotency_in_progress_refusals", "Calls refused because another caller "
                                     "held a live claim of the key.", ["ledger", "tool"], registry=r)
        self.unknowns = p.Counter("idempotency_unknown", "Calls whose outcome became unknown here: reconcile them.",
                                  ["ledger", "tool"], registry=r)
        self.settles = p.Counter("idempotency_settles", "Claims this process settled, by status.",
                                 ["ledger", "tool", "status"], registry=r)
        self.claim_seconds = p.Histogram("idempotency_claim_duration_seconds", "Time a claim took.",
                                         ["ledger", "tool"], registry=r, **h)
        self.action_seconds = p.Histogram("idempotency_action_duration_seconds", "Time the action of a call took.",
                                          ["ledger", "tool"], registry=r, **h)

    def _span(self, name: str, attributes: dict, start_time: Optional[int] = None) -> Any:
        if self.tracer is None:
            return None
        if start_time is None:
            return self.tracer.start_span(name, attributes=attributes)
        return self.tracer.start_span(name, attributes=attributes, start_time=start_time)

    def _fail(self, span: Any, e: BaseException) -> None:
        if span is None:
            return
        span.record_exception(e)
        if self.trace is not None:
            span.set_status(self.trace.Status(self.trace.StatusCode.ERROR, str(e)))

    def instrument(self, ledger: Any) -> Any:
        """Wraps the claim, settle and call of this ledger (its own attributes; the class is not changed)."""
        from . import ClaimInProgress, NotCommitted, NotSent, OutcomeUnknown
        m, name, tools = self, ledger.name, {}
        claim, settle, call = ledger.claim, ledger.settle, ledger.call

        def instrumented_claim(tenant, conversation, tool, args, **kw):
            span = m._span("idempotency.claim", {"idempotency.ledger": name, "idempotency.tool": tool})
            t0 = time.perf_counter()
            try:
                d = claim(tenant, conversation, tool, args, **kw)
            except BaseException as e:
                m._fail(span, e)
                if span is not None:
                    span.end()
                raise
            if m.prom is not None:
                m.claim_seconds.labels(name, tool).observe(time.perf_counter() - t0)
                m.decisions.labels(name, tool, d.decision).inc()
            if d.decision == "admitted":
                tools[d.token] = tool
            if span is not None:
                span.set_attribute("idempotency.decision", d.decision)
                span.set_attribute("idempotency.key", d.key)
                if getattr(d, "attempt", None) is not None:
                    span.set_attribute("idempotency.attempt", d.attempt)
                span.end()
            return d

        def instrumented_settle(token, status, detail=None):
            r = settle(token, status, detail)
            if m.prom is not None and not _in_call.get():
                tool = tools.get(token)
                if tool is None:
                    row = ledger.conn.execute(f"SELECT tool FROM {ledger._sql_name()} WHERE token = ?", (token,)).fetchone()
                    tool = row[0] if row else ""
                m.settles.labels(name, tool, status).inc()
                if status == "unknown":
                    m.unknowns.labels(name, tool).inc()
            tools.pop(token, None)
            return r

        def instrumented_call(tenant, conversation, tool, args, action, **kw):
            state: dict = {}

            def timed(attempt):
                state["key"] = attempt.key
                span = m._span("idempotency.action", {"idempotency.ledger": name, "idempotency.tool": tool,
                                                      "idempotency.key": attempt.key,
                                                      "idempotency.attempt": attempt.attempt})
                t0 = time.perf_counter()
                try:
                    if span is not None and m.trace is not None:
                        with m.trace.use_span(span, end_on_exit=False, record_exception=False,
                                              set_status_on_exception=False):
                            return action(attempt)
                    return action(attempt)
                except BaseException as e:
                    m._fail(span, e)
                    raise
                finally:
                    if m.prom is not None:
                        m.action_seconds.labels(name, tool).observe(time.perf_counter() - t0)
                    state["end"] = time.time_ns()
                    if span is not None:
                        span.end()

            def settled(status):
                if m.prom is not None:
                    m.settles.labels(name, tool, status).inc()
                    if status == "unknown":
                        m.unknowns.labels(name, tool).inc()
                if "end" in state:
                    span = m._span("idempotency.settle", {"idempotency.ledger": name, "idempotency.tool": tool,
                                                          "idempotency.key": state["key"],
                                                          "idempotency.status": status}, state["end"])
                    if span is not None:
                        span.end()

            token = _in_call.set(True)
            try:
                out = call(tenant, conversation, tool, args, timed, **kw)
            except ClaimInProgress:
                if m.prom is not None:
                    m.in_progress.labels(name, tool).inc()
                raise
            except OutcomeUnknown as e:
                if e.decision is None and e.key is not None:
                    settled("unknown")
                raise
            except (NotSent, NotCommitted) as e:
                if getattr(e, "key", None) is not None:
                    settled("released")
                raise
            finally:
                _in_call.reset(token)
            if out.idempotent:
                if m.prom is not None:
                    m.replays.labels(name, tool, out.status).inc()
            else:
                settled(out.status)
            return out

        ledger.claim, ledger.settle, ledger.call = instrumented_claim, instrumented_settle, instrumented_call
        return ledger

    def ledger_state(self, db: Any, name: str = "ledger") -> Any:
        """Registers a collector of the ledger's own state (the gauges ``sqlite-idempotency metrics`` prints).

        ``db`` is a sqlite3 connection with the extension loaded, or a file
        path (opened read-only at each scrape). Returns the collector.
        """
        from . import IdempotencyError
        if self.prom is None:
            raise IdempotencyError("Metrics.ledger_state: prometheus_client is not installed "
                                   "(Debian: apt-get install python3-prometheus-client)")
        collector = LedgerStateCollector(db, name, self.prom)
        self.registry.register(collector)
        return collector


class LedgerStateCollector:
    """A prometheus_client collector: the ledger's state, read with SQL at each scrape."""

    def __init__(self, db: Any, name: str, prom: Any):
        self.db, self.name, self.prom = db, name, prom

    def collect(self):
        from .cli import METRICS, metric_values
        from .state import open_file, read_state
        from prometheus_client.core import GaugeMetricFamily
        conn = open_file(self.db) if isinstance(self.db, str) else self.db
        try:
            values = metric_values(read_state(conn, self.db if isinstance(self.db, str) else "", self.name))
        finally:
            if conn is not self.db:
                conn.close()
        for (metric, help_text), value in zip(METRICS, values):
            g = GaugeMetricFamily(metric, help_text, labels=["ledger"])
            g.add_metric([self.name], value)
            yield g

    def describe(self):
        return []  # read at scrape time only: registering it reads nothing
