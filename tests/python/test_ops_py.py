#!/usr/bin/env python3
"""tests/python/test_ops_py.py: reconciliation, metrics and the operator's command of the Python package.

Run by tests/suites/57-ops.sh with PYTHONPATH at a copy of the package that
holds the built extension. argv[1] is a scratch directory.

Reconciliation runs against the counting target in tests/python
(test_server.py), which says per Idempotency-Key how many requests reached
it: the reconciler of "send" asks it, so a call that timed out after
reaching the target is resolved succeeded, and one that never left is
released and then really sent once.

The command's check and status are asserted to the byte on files made here
(tests/js/test_ops_node.mjs asserts the same text from the Node command and
compares the two): a healthy guarded ledger, its guard's member trigger
dropped, its own update trigger dropped, counts and the oldest unknown, and
expired claims.
"""
import asyncio
import json
import os
import shutil
import sqlite3
import sys
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import sqlite_idempotency as idem  # noqa: E402
import test_server  # noqa: E402
from checks import Checks  # noqa: E402

checks = Checks("ops.python")
eq = checks.check_eq
TMP = sys.argv[1]


def post(port, attempt, timeout, delay_ms=0):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/send?delay_ms={delay_ms}", data=b"{}",
                                 headers={**attempt.headers, "Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


def counts(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/_counts") as r:
        return json.loads(r.read())["keys"]


def raises(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001
        return e
    return None


def reconcile_tests(srv):
    path = os.path.join(TMP, "reconcile.db")
    ledger = idem.Ledger.open(path)
    port = srv.port

    # k_timeout reached the target, then the client gave up: unknown
    e = raises(lambda: ledger.call("t", "c", "send", {"n": 1}, lambda a: post(port, a, 1.0, 3000)))
    eq("setup:timeout-unknown", type(e).__name__, "OutcomeUnknown")
    k_timeout = e.key
    # k_never: the action gave up before sending: unknown, and the target has nothing
    def never(a):
        raise idem.OutcomeUnknown("gave up before sending")
    e = raises(lambda: ledger.call("t", "c", "send", {"n": 2}, never))
    k_never = e.key
    # a tool whose reconciler throws, one without reconciler, one that cannot tell
    for tool, n in (("charge", 3), ("mail", 4), ("sms", 5)):
        raises(lambda: ledger.call("t", "c", tool, {"n": n}, never))
    k_charge = ledger.claim("t", "c", "charge", {"n": 3}).key
    k_mail = ledger.claim("t", "c", "mail", {"n": 4}).key
    k_sms = ledger.claim("t", "c", "sms", {"n": 5}).key
    # an external claim whose lease ran out reads unknown: another ledger with lease_seconds=0
    quick = idem.Ledger.open(path, "quick", options={"lease_seconds": 0})
    k_expired = quick.claim("t", "c", "send", {"n": 6}).key
    eq("setup:expired-claim-reads-unknown", quick.row("t", k_expired)["status"], "unknown")

    def send(call):
        n = counts(port).get(call.key, 0)
        return idem.Answer.succeeded({"received": n}) if n else idem.Answer.not_sent("the target has no request with this key")

    def charge(call):
        raise RuntimeError("provider down")

    progress = []
    report = ledger.reconcile({"send": send, "charge": charge, "sms": lambda c: idem.Answer.unknown("pending")},
                              by="on-call", batch_size=2,
                              on_progress=lambda r: progress.append((r.examined, len(r.resolved))))
    eq("report:examined", report.examined, 5)
    eq("report:progress", [p[0] for p in progress], [1, 2, 3, 4, 5])
    eq("report:progress-last", progress[-1], (5, len(report.resolved)))
    try:
        ledger.reconcile({}, on_progress="yes")
        got = "no error"
    except TypeError as e:
        got = str(e)
    eq("report:progress-refused", got, "Ledger.reconcile: on_progress must be a function of the report so far, got 'yes'")
    eq("report:resolved", sorted((r["key"], r["status"]) for r in report.resolved),
       sorted([(k_timeout, "succeeded"), (k_never, "released")]))
    eq("report:errors", report.errors, [{"tenant": "t", "key": k_charge, "tool": "charge", "attempt": 1,
                                         "error": "RuntimeError: provider down"}])
    eq("report:needs-person", report.needs_person, [{"tenant": "t", "key": k_mail, "tool": "mail", "attempt": 1,
                                                     "reason": "no reconciler for tool mail"}])
    eq("report:unknown", report.unknown, [{"tenant": "t", "key": k_sms, "tool": "sms", "attempt": 1,
                                           "reason": "pending"}])
    eq("report:raced", report.raced, [])
    eq("thrower-row-stays-unknown", ledger.row("t", k_charge)["status"], "unknown")
    row = ledger.row("t", k_timeout)
    at = row["result"]["reconciled"]["at"]
    eq("detail:succeeded", row["result"], {"reconciled": {"at": at, "by": "on-call"}, "result": {"received": 1}})
    checks.report(abs(at - row["updated_at"]) < 5000, "detail:at-is-the-resolve-time", f"{at} vs {row['updated_at']}")
    row = ledger.row("t", k_never)
    eq("detail:released", row["error"], {"sent": False, "reason": "the target has no request with this key",
                                         "reconciled": {"at": row["error"]["reconciled"]["at"], "by": "on-call"}})
    out = ledger.call("t", "c", "send", {"n": 1}, lambda a: post(port, a, 5))
    eq("replay-after-reconcile", (out.idempotent, out.result["result"]), (True, {"received": 1}))
    out = ledger.call("t", "c", "send", {"n": 2}, lambda a: post(port, a, 5))
    eq("released-runs-again", (out.idempotent, out.attempt), (False, 2))
    c = counts(port)
    eq("target-received-each-once", (c.get(k_timeout), c.get(k_never)), (1, 1))

    # the expired external claim, resolved by idem_resolve through reconcile
    rq = quick.reconcile({"send": lambda call: idem.Answer.failed({"code": "declined"})}, by="r")
    eq("expired-claim:resolved", [(r["key"], r["status"]) for r in rq.resolved], [(k_expired, "failed")])
    eq("expired-claim:row", quick.row("t", k_expired)["error"]["error"], {"code": "declined"})

    # two reconcilers at once: the inner one (another connection) wins, the outer reports a race
    other = idem.Ledger.open(path)
    inner = {}

    def racing(call):
        inner["report"] = other.reconcile({"charge": lambda c2: idem.Answer.succeeded({"by": "inner"})}, by="inner")
        return idem.Answer.succeeded({"by": "outer"})

    outer = ledger.reconcile({"charge": racing}, by="outer")
    eq("race:inner-resolved", [(r["key"], r["status"]) for r in inner["report"].resolved], [(k_charge, "succeeded")])
    eq("race:outer-raced", outer.raced, [{"tenant": "t", "key": k_charge, "tool": "charge", "attempt": 1,
                                          "status": "succeeded", "now_attempt": 1}])
    eq("race:outer-resolved-nothing", outer.resolved, [])
    eq("race:row-is-inner", ledger.row("t", k_charge)["result"]["result"], {"by": "inner"})

    # a reconciler that answers something else; limit; async; an open transaction
    bad = ledger.reconcile({"sms": lambda c: "yes"})
    eq("bad-answer", bad.errors[0]["error"], "TypeError: reconcile: a reconciler must return an Answer "
       "(Answer.succeeded(result), Answer.failed(error), Answer.not_sent(reason), Answer.unknown(reason)), got 'yes'")
    eq("limit", ledger.reconcile({}, limit=1).examined, 1)

    async def asms(call):
        await asyncio.sleep(0)
        return idem.Answer.succeeded({"async": True})
    e = ledger.reconcile({"sms": asms})
    eq("sync-refuses-async", e.errors[0]["error"], "TypeError: the reconciler returned an awaitable (an async "
       "function?): use Ledger.areconcile")
    ar = asyncio.run(ledger.areconcile({"sms": asms}))
    eq("areconcile", [(r["key"], r["status"]) for r in ar.resolved], [(k_sms, "succeeded")])
    ledger.conn.execute("BEGIN")
    e = raises(lambda: ledger.reconcile({}))
    ledger.conn.execute("ROLLBACK")
    eq("open-transaction", str(e), "Ledger.reconcile: a transaction is open on the ledger's connection; reconcile "
       "resolves each row in a transaction of its own: commit first")
    e = raises(lambda: ledger.reconcile({}, batch_size=0))
    eq("batch-size", str(e), "Ledger.reconcile: batch_size must be an integer from 1 to 10000, got 0")
    eq("left-unknown", [r["key"] for r in ledger.reconcile({}).needs_person], [k_mail])


def metrics_tests():
    try:
        import prometheus_client
    except ImportError:
        checks.skip("metrics", "prometheus_client is not installed (Debian: apt-get install python3-prometheus-client)")
        return
    from prometheus_client.parser import text_string_to_metric_families
    reg = prometheus_client.CollectorRegistry()
    m = idem.Metrics(registry=reg, buckets=(0.5, 5.0))
    path = os.path.join(TMP, "metrics.db")
    ledger = m.instrument(idem.Ledger.open(path))
    v = lambda name, **labels: reg.get_sample_value(name, {"ledger": "ledger", **labels})  # noqa: E731

    ledger.call("t", "c", "send", {"n": 1}, lambda a: {"ok": 1})             # admitted, succeeded
    ledger.call("t", "c", "send", {"n": 1}, lambda a: {"ok": 2})             # replay
    def fail(a):
        raise idem.ToolFailed({"code": "no"})
    ledger.call("t", "c", "send", {"n": 2}, fail)                            # failed
    def not_sent(a):
        raise idem.NotSent("refused")
    raises(lambda: ledger.call("t", "c", "send", {"n": 3}, not_sent))        # released
    def boom(a):
        raise TimeoutError("read timeout")
    raises(lambda: ledger.call("t", "c", "mail", {"n": 4}, boom))            # unknown
    raises(lambda: ledger.call("t", "c", "mail", {"n": 4}, boom))            # decision unknown
    held = ledger.claim("t", "c", "mail", {"n": 5})                          # admitted (direct)
    raises(lambda: ledger.call("t", "c", "mail", {"n": 5}, boom))            # in progress
    ledger.settle(held.token, "succeeded", {"late": True})                   # a direct settle

    eq("decisions", [v("idempotency_decisions_total", tool=t, decision=d) for t, d in
                     (("send", "admitted"), ("send", "replay"), ("mail", "admitted"), ("mail", "unknown"),
                      ("mail", "in_progress"))], [3.0, 1.0, 2.0, 1.0, 1.0])
    eq("replays", v("idempotency_replays_total", tool="send", status="succeeded"), 1.0)
    eq("in-progress", v("idempotency_in_progress_refusals_total", tool="mail"), 1.0)
    eq("unknown", v("idempotency_unknown_total", tool="mail"), 1.0)
    eq("settles", [v("idempotency_settles_total", tool=t, status=s) for t, s in
                   (("send", "succeeded"), ("send", "failed"), ("send", "released"), ("mail", "unknown"),
                    ("mail", "succeeded"))], [1.0, 1.0, 1.0, 1.0, 1.0])
    eq("claim-duration-count", (v("idempotency_claim_duration_seconds_count", tool="send"),
                                v("idempotency_claim_duration_seconds_count", tool="mail")), (4.0, 4.0))
    eq("action-duration-count", (v("idempotency_action_duration_seconds_count", tool="send"),
                                 v("idempotency_action_duration_seconds_count", tool="mail")), (3.0, 1.0))
    checks.report(v("idempotency_action_duration_seconds_sum", tool="send") > 0, "action-duration-sum")

    m.ledger_state(path)
    eq("state", [v(n) for n in ("idempotency_ledger_up", "idempotency_ledger_open_claims",
                                "idempotency_ledger_unknown", "idempotency_ledger_expired_claims")],
       [1.0, 0.0, 1.0, 0.0])
    checks.report(v("idempotency_ledger_format") >= 2, "state:format", v("idempotency_ledger_format"))
    # the command prints the same gauges, and its text parses as the Prometheus text format
    from sqlite_idempotency.cli import main
    import io
    import contextlib
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = main(["metrics", path])
    fams = {f.name: f.samples[0].value for f in text_string_to_metric_families(buf.getvalue())}
    eq("command-metrics", (rc, fams["idempotency_ledger_unknown"], fams["idempotency_ledger_up"]), (0, 1.0, 1.0))

    try:
        import opentelemetry  # noqa: F401
    except ImportError:
        checks.skip("traces", "opentelemetry is not installed (no Debian package): the spans are tested in Node")

OPTS = ("lease_seconds=15 max_attempts=5 max_args_bytes=1048576 single_tenant=0 retention_seconds=0 "
        "require_transaction=0 target_window_seconds=86400")
REFUSAL = ("rows may have been changed without it: check them (SELECT * FROM \"ledger_rows\") against what the "
           "application and the targets know, then restore it with SELECT idem_upgrade('ledger'); every ledger "
           "operation is refused until then")


def check_text(guards, ledger, triggers=("ok", "17 own triggers in place"), rows=None, verdict="healthy",
               opts=OPTS, w=6):
    """What check prints: (result, detail) rows, the result column w wide."""
    rows = rows or [("ok", "no unknown rows, no expired claims")]
    table = ([("result", "check", "detail"), ("ok", "format", "5"), (triggers[0], "triggers", triggers[1]),
              ("ok", "options", opts)] + [(r, "guards", t) for r, t in guards] + [(r, "ledger", t) for r, t in ledger]
             + [("ok", "integrity_check", "ok")] + [(r, "rows", t) for r, t in rows])
    return "".join(f"{r.ljust(w)}  {c.ljust(15)}  {t}\n" for r, c, t in table) + f"verdict: {verdict}\n"


def make_health_files(d):
    """h-healthy.db, h-member.db, h-own.db, h-rows.db (see the module's doc); the unknown rows' keys."""
    os.makedirs(d, exist_ok=True)
    healthy = os.path.join(d, "h-healthy.db")
    led = idem.Ledger.open(healthy)
    a = led.claim("acme", "conv-1", "send_email", {"to": "a"})
    led.settle(a.token, "succeeded", {"id": 1})
    led.claim("globex", "conv-2", "send_email", {"to": "b"})  # live
    led.conn.execute("CREATE TABLE orders(id INTEGER PRIMARY KEY, tenant TEXT, op TEXT)")
    led.conn.execute("SELECT idem_guard('ledger', 'orders', 'op', 'tenant')").fetchone()
    led.conn.execute("PRAGMA journal_mode=DELETE")
    led.close()
    for name, trig in (("h-member.db", "orders_idem_ledger_member"), ("h-own.db", "ledger_rows_update")):
        shutil.copy(healthy, os.path.join(d, name))
        c = sqlite3.connect(os.path.join(d, name))
        c.execute(f'DROP TRIGGER "{trig}"')
        c.close()
    rows = os.path.join(d, "h-rows.db")
    shutil.copy(healthy, rows)
    led = idem.Ledger.open(rows)
    b = led.claim("acme", "conv-3", "charge_card", {"amount": 5})
    led.settle(b.token, "unknown", {"reason": "read timeout"})
    f = led.claim("globex", "conv-4", "send_email", {"to": "c"})
    led.settle(f.token, "unknown", {"reason": "reset"})
    quick = idem.Ledger.open(led.conn, "quick", options={"lease_seconds": 0})
    quick.claim("acme", "conv-5", "charge_card", {"amount": 7})  # external, expired: unknown
    quick.claim("acme", "conv-5", "local_op", {"n": 1}, effect="local")  # local, expired: claimed
    led.conn.execute("PRAGMA journal_mode=DELETE")
    led.close()
    return b.key


def command_tests():
    import contextlib
    import io
    from sqlite_idempotency.cli import iso, main
    d = os.path.join(TMP, "cmd-py")
    key_b = make_health_files(d)
    f = lambda name: os.path.join(d, name)  # noqa: E731

    def run(*argv, now=None):
        out, err = io.StringIO(), io.StringIO()
        old = os.environ.pop("SQLITE_IDEMPOTENCY_NOW_MS", None)
        if now is not None:
            os.environ["SQLITE_IDEMPOTENCY_NOW_MS"] = str(now)
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                rc = main(list(argv))
        finally:
            os.environ.pop("SQLITE_IDEMPOTENCY_NOW_MS", None)
            if old is not None:
                os.environ["SQLITE_IDEMPOTENCY_NOW_MS"] = old
        return rc, out.getvalue() + err.getvalue()

    def refusal(path):
        """The ledger's own refusal, as every operation on it fails (the check's ledger row is this text)."""
        from sqlite_idempotency.state import open_file
        conn = open_file(path)
        try:
            conn.execute("SELECT count(*) FROM ledger").fetchone()
            return None
        except sqlite3.Error as e:
            return str(e).removeprefix("idempotency: ")
        finally:
            conn.close()

    whole = [("ok", "orders: 3 triggers in place")]
    member_refusal = refusal(f("h-member.db"))
    checks.report(member_refusal is not None and member_refusal.startswith(
        'ledger ledger is missing its guard trigger "orders_idem_ledger_member" on table "orders"; '),
        "cmd:member-dropped-refused", member_refusal)
    eq("cmd:check-healthy", run("check", f("h-healthy.db")),
       (0, check_text(whole, [("ok", "it answers operations")])))
    eq("cmd:check-member-dropped", run("check", f("h-member.db")),
       (2, check_text([("broken", "orders: missing orders_idem_ledger_member")],
                      [("broken", member_refusal)], verdict="broken")))
    eq("cmd:check-own-dropped", run("check", f("h-own.db")),
       (2, check_text(whole, [("broken", f'ledger ledger is missing its trigger "ledger_rows_update"; {REFUSAL}')],
                      triggers=("broken", "missing ledger_rows_update"), verdict="broken")))
    eq("cmd:check-expired", run("check", f("h-rows.db"), "--ledger", "quick"),
       (1, check_text([("ok", "none")], [("ok", "it answers operations")],
                      rows=[("attention", "1 unknown row: reconcile with the targets, then resolve"),
                            ("attention", "2 expired claims: their holders stopped before settling")],
                      verdict="needs attention", opts=OPTS.replace("lease_seconds=15", "lease_seconds=0"), w=9)))
    c = sqlite3.connect(f("h-rows.db"))
    created = c.execute("SELECT created_at FROM ledger_rows WHERE key = ?", (key_b,)).fetchone()[0]
    c.close()
    eq("cmd:status-counts-oldest", run("status", f("h-rows.db"), "--ledger", "ledger", now=created + 90500),
       (1, f"ledger:         ledger in {f('h-rows.db')}\n"
           "format:         5\n"
           "verdict:        needs attention\n"
           f"options:        {OPTS}\n"
           "guards:         orders (triggers ok)\n"
           "open claims:    1\n"
           "unknown:        2\n"
           "expired claims: 0\n"
           f"oldest unknown: acme {key_b} charge_card, claimed {iso(created)} (90 s ago)\n"
           "attention:      2 unknown rows: reconcile with the targets, then resolve\n"
           "\n"
           "status     tool         rows\n"
           "claimed    send_email   1\n"
           "unknown    charge_card  1\n"
           "unknown    send_email   1\n"
           "succeeded  send_email   1\n"))
    eq("cmd:status-member-dropped-guards-line",
       [ln for ln in run("status", f("h-member.db"))[1].splitlines() if ln.startswith("guards:")],
       ["guards:         orders (orders_idem_ledger_member missing)"])
    rc, text = run("status", f("h-rows.db"), "--ledger", "ledger", "--json", now=created + 90500)
    st = json.loads(text)
    eq("cmd:status-json", (rc, st["oldest_unknown"], st["counts"][0], st["live_claims"]),
       (1, {"tenant": "acme", "key": key_b, "tool": "charge_card", "created_at": created, "age_seconds": 90},
        {"status": "claimed", "tool": "send_email", "rows": 1}, 1))
    # idem_health's answer whole but for now (docs/operating.md), file first
    eq("cmd:status-json-members", list(st), ["file", "ledger", "schema", "format", "verdict", "problems", "attention",
                                             "tables", "triggers", "guards", "options", "live_claims", "unknown",
                                             "expired_claims", "oldest_unknown", "targets", "counts"])
    rc, text = run("metrics", f("h-member.db"))
    eq("cmd:metrics-member-dropped-down", [ln for ln in text.splitlines() if ln.startswith("idempotency_ledger_up")],
       ['idempotency_ledger_up{ledger="ledger"} 0'])


def main():
    srv = test_server.start()
    try:
        reconcile_tests(srv)
    finally:
        srv.stop()
    metrics_tests()
    command_tests()
    return checks.status()


if __name__ == "__main__":
    sys.exit(main())
