"""The installed Python package (the wheel of `make dist` in a fresh virtual
environment): load, typed decisions, errors, Ledger.call on a first call and
on a replay, the failure mapping, the commit check, waiting, renewal.

Usage: VENV_PYTHON test_package_py.py     (tests/suites/63-packages.sh)

Actions here are local functions that count their runs; the HTTP adapter
over the same API is tests/python/test_adapter_py.py. Prints PASS/FAIL
lines; exit status 1 when a check failed.
"""
import json
import os
import shutil
import sqlite3
import sys
import tempfile
import threading
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sqlite_idempotency as idem  # noqa: E402
from checks import Checks  # noqa: E402

PREFIX = "packages.python"
T, C = "tenant-a", "conv-1"
checks = Checks(PREFIX)
report = checks.report


def raised(fn):
    """The exception fn raises, or None."""
    try:
        fn()
    except BaseException as e:  # noqa: BLE001
        return e
    return None


class Counter:
    """An action that counts its runs and does what it is told."""

    def __init__(self, result=None, exc=None):
        self.runs = 0
        self.result = result
        self.exc = exc
        self.seen = None

    def __call__(self, attempt):
        self.runs += 1
        self.seen = attempt
        if self.exc is not None:
            raise self.exc
        return self.result


def main():
    tmp = tempfile.mkdtemp(prefix="idem-package-py-")
    try:
        run(tmp)
    except Exception as e:  # noqa: BLE001
        import traceback
        traceback.print_exc()
        report(False, "unexpected", f"{type(e).__name__}: {e}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return checks.status()


def run(tmp):
    # --- installed, load ---------------------------------------------------------
    mod = os.path.realpath(idem.__file__)
    report(mod.startswith(os.path.realpath(sys.prefix) + os.sep) and sys.prefix != sys.base_prefix,
           "installed-in-venv", f"{mod} under {sys.prefix} (base {sys.base_prefix})")
    path = idem.loadable_path()
    report(os.path.isfile(path + ".so") and os.path.dirname(os.path.realpath(path + ".so")) == os.path.dirname(mod),
           "loadable-path", f"{path}(.so) beside {mod}")
    conn = sqlite3.connect(":memory:")
    idem.load(conn)
    version = conn.execute("SELECT idem_version()").fetchone()[0]
    report(version == idem.__version__, "load-version", f"idem_version() {version}, __version__ {idem.__version__}")
    e = raised(lambda: conn.load_extension(path))
    report(isinstance(e, sqlite3.OperationalError) and str(e) == "not authorized",
           "load-turns-loading-off", f"got {e!r}")
    conn.close()

    # --- Ledger.open and options -----------------------------------------------
    db = os.path.join(tmp, "agent.db")
    ledger = idem.Ledger.open(db, options={"lease_seconds": 60})
    pragmas = [ledger.conn.execute(f"PRAGMA {p}").fetchone()[0] for p in ("journal_mode", "synchronous", "busy_timeout")]
    report(pragmas == ["wal", 2, 10000] and ledger.conn.isolation_level is None, "open-pragmas",
           f"journal_mode, synchronous, busy_timeout = {pragmas}; isolation_level {ledger.conn.isolation_level!r}")
    same_opts = idem.Ledger.open(db, options={"lease_seconds": 60})
    same_opts.close()
    e = raised(lambda: idem.Ledger.open(db, options={"lease_seconds": 30}))
    report(isinstance(e, idem.IdempotencyError) and str(e) == "Ledger.create: ledger ledger exists with "
           "lease_seconds=60, not 30; options apply only when a ledger is created", "open-existing-other-options",
           f"got {e!r}")
    e = raised(lambda: idem.Ledger.open(":memory:", options={"lease_seconds": "60"}))
    report(isinstance(e, ValueError) and str(e) == "Ledger.create: option lease_seconds must be an integer, got '60'",
           "open-option-type", f"got {e!r}")
    e = raised(lambda: idem.Ledger.open(":memory:", options={"lease_minutes": 1}))
    report(isinstance(e, idem.LedgerError)
           and str(e).startswith('idempotency: unknown option "lease_minutes"; the options are lease_seconds, '),
           "open-option-unknown", f"got {e!r}")

    # --- typed decisions ---------------------------------------------------------
    d = ledger.claim(T, C, "send_email", {"to": "a@b.c"})
    report(isinstance(d, idem.Admitted) and d.decision == "admitted" and d.attempt == 1 and d.effect == "external"
           and d.committed is True and d.durable is True and len(d.token) == 32 and d.key.startswith("idem1-")
           and d.note and d.lease_until > time.time() * 1000, "decision-admitted", f"got {d!r}")
    d2 = ledger.claim(T, C, "send_email", {"to": "a@b.c"})
    report(isinstance(d2, idem.InProgress) and d2.key == d.key and d2.attempt == 1 and d2.lease_until == d.lease_until,
           "decision-in-progress", f"got {d2!r}")
    s = ledger.settle(d.token, "succeeded", {"message_id": "m-1"})
    r = ledger.claim(T, C, "send_email", {"to": "a@b.c"})
    report(s == {"key": d.key, "status": "succeeded", "attempt": 1, "durable": False, "settled_at": getattr(r, "settled_at", None),
                "members": []} and isinstance(r, idem.Replay) and isinstance(s["settled_at"], int)
           and r.idempotent is True and r.status == "succeeded" and r.result == {"message_id": "m-1"}
           and r.error is None and r.members == [], "decision-replay", f"settle {s!r}, then {r!r}")
    u = ledger.claim(T, C, "charge", {"amount": 5})
    ledger.settle(u.token, "unknown", {"reason": "timeout"})
    u2 = ledger.claim(T, C, "charge", {"amount": 5})
    report(isinstance(u2, idem.Unknown) and u2.key == u.key and "nothing is retried here" in u2.message,
           "decision-unknown", f"got {u2!r}")
    m1 = ledger.claim(T, C, "refund", {"amount": 5}, operation_id="op-1")
    m2 = ledger.claim(T, C, "refund", {"amount": 6}, operation_id="op-1")
    report(isinstance(m1, idem.Admitted) and m1.key == "op-1" and isinstance(m2, idem.Mismatch)
           and m2.key == "op-1" and m2.differs == "args" and "nothing was admitted or replayed" in m2.message,
           "decision-mismatch", f"got {m1!r} / {m2!r}")
    lc = ledger.claim(T, C, "write_row", {"id": 1}, effect="local")
    report(isinstance(lc, idem.Admitted) and lc.effect == "local" and lc.note is None, "decision-local",
           f"got {lc!r}")

    # --- errors carry the extension's message ----------------------------------
    e = raised(lambda: ledger.claim(None, C, "send_email", {}))
    report(isinstance(e, idem.LedgerError) and str(e) == "idem_claim: tenant is missing (NULL)"
           and (sys.version_info < (3, 11) or e.sqlite_errorname == "SQLITE_CONSTRAINT") and isinstance(e.__cause__, sqlite3.IntegrityError),
           "error-message", f"got {e!r} ({getattr(e, 'sqlite_errorname', None)})")
    e = raised(lambda: ledger.settle("0" * 32, "succeeded", None))
    report(isinstance(e, idem.LedgerError) and str(e).startswith('idem_settle: no claim of ledger ledger holds token "'),
           "error-settle-token", f"got {e!r}")
    e = raised(lambda: ledger.claim(T, C, "send_email", {"x": float("nan")}))
    report(isinstance(e, ValueError) and str(e) == "sqlite_idempotency: args is not JSON: Out of range float values are not JSON compliant",
           "error-args-nan", f"got {e!r}")
    e = raised(lambda: idem.Ledger(ledger.conn, "nope").claim(T, C, "t", {}))
    report(isinstance(e, idem.LedgerError) and str(e) == 'idem_claim: unknown ledger "nope": no table USING idempotency by that name',
           "error-unknown-ledger", f"got {e!r}")
    e = raised(lambda: idem.header_value("a b"))
    report(idem.header_value("idem1-ab") == '"idem1-ab"' and isinstance(e, ValueError)
           and str(e) == "header_value: 'a b' is not a key (1 to 128 characters of A-Za-z0-9_-)",
           "header-value", f"got {e!r}")

    # --- call: a first call and its replay have the same shape ----------------
    act = Counter({"message_id": "m-2", "n": [1, 2]})
    o1 = ledger.call(T, C, "send_email", {"to": "b@b.c"}, act)
    o2 = ledger.call(T, C, "send_email", {"to": "b@b.c"}, act)
    d1, d2 = o1.to_dict(), o2.to_dict()
    report(act.runs == 1 and o1.status == "succeeded" and o1.idempotent is False and o2.idempotent is True
           and {**d1, "idempotent": True} == d2 and list(d1) == list(d2) and o1.result == {"message_id": "m-2", "n": [1, 2]},
           "call-replay-same-shape", f"runs {act.runs}; {d1} / {d2}")
    # both say when the outcome was recorded: the settle's time, the row's updated_at
    settled_row = ledger.row(T, o2.key)
    report(isinstance(o1.settled_at, int) and o1.settled_at == o2.settled_at and o2.settled_at == settled_row["updated_at"],
           "call-replay-settled-at", f"first {o1.settled_at!r}, replay {o2.settled_at!r}, updated_at {settled_row['updated_at']}")
    report(act.seen is not None and act.seen.key == o1.key and act.seen.headers == {"Idempotency-Key": f'"{o1.key}"'}
           and act.seen.attempt == 1, "call-attempt-headers", f"attempt {vars(act.seen) if act.seen else None}")

    act = Counter(exc=idem.ToolFailed({"code": "card_declined"}))
    f1 = ledger.call(T, C, "charge", {"amount": 7}, act)
    f2 = ledger.call(T, C, "charge", {"amount": 7}, act)
    report(act.runs == 1 and f1.status == "failed" and f1.error == {"code": "card_declined"} and f1.idempotent is False
           and f2.to_dict() == {**f1.to_dict(), "idempotent": True} and isinstance(f1.settled_at, int)
           and f1.settled_at == f2.settled_at, "call-failed-replayed",
           f"runs {act.runs}; {f1!r} / {f2!r}")

    act = Counter(exc=idem.NotSent("connect: refused", detail={"host": "x"}))
    e = raised(lambda: ledger.call(T, C, "charge", {"amount": 8}, act))
    row = ledger.row(T, e.key) if isinstance(e, idem.NotSent) else None
    ok = Counter({"ok": True})
    o = ledger.call(T, C, "charge", {"amount": 8}, ok)
    report(isinstance(e, idem.NotSent) and e.key and row and row["status"] == "released"
           and row["error"] == {"host": "x", "reason": "connect: refused", "sent": False}
           and o.attempt == 2 and ok.runs == 1 and o.idempotent is False,
           "call-not-sent-released", f"{e!r}; row {row}; then {o!r}")

    act = Counter(exc=ConnectionResetError("peer reset"))
    e = raised(lambda: ledger.call(T, C, "charge", {"amount": 9}, act))
    row = ledger.row(T, e.key) if isinstance(e, idem.OutcomeUnknown) else None
    again = Counter({"ok": True})
    e2 = raised(lambda: ledger.call(T, C, "charge", {"amount": 9}, again))
    report(isinstance(e, idem.OutcomeUnknown) and e.reason == "ConnectionResetError: peer reset"
           and isinstance(e.__cause__, ConnectionResetError) and row and row["status"] == "unknown"
           and row["error"] == {"reason": "ConnectionResetError: peer reset"}
           and isinstance(e2, idem.OutcomeUnknown) and isinstance(e2.decision, idem.Unknown) and again.runs == 0,
           "call-unknown-never-resent", f"{e!r}; row {row}; then {e2!r}, runs {again.runs}")

    act = Counter(exc=idem.OutcomeUnknown("timeout", detail={"reason": "timeout", "timeout_s": 5}))
    e = raised(lambda: ledger.call(T, C, "charge", {"amount": 10}, act))
    row = ledger.row(T, e.key) if isinstance(e, idem.OutcomeUnknown) else None
    report(isinstance(e, idem.OutcomeUnknown) and row and row["error"] == {"reason": "timeout", "timeout_s": 5},
           "call-unknown-detail", f"{e!r}; row {row}")

    act = Counter({"at": {1, 2}})  # a set: not JSON, after the action ran
    e = raised(lambda: ledger.call(T, C, "charge", {"amount": 11}, act))
    row = ledger.row(T, e.key) if isinstance(e, idem.OutcomeUnknown) else None
    report(isinstance(e, idem.OutcomeUnknown) and act.runs == 1 and row and row["status"] == "unknown"
           and row["error"]["reason"].startswith("sqlite_idempotency: the result is not JSON: "),
           "call-result-not-json-unknown", f"{e!r}; row {row}")

    m = raised(lambda: ledger.call(T, C, "refund", {"amount": 7}, Counter(), operation_id="op-1"))
    report(isinstance(m, idem.ClaimMismatch) and m.decision.differs == "args", "call-mismatch", f"got {m!r}")

    # targets: a reworded retry of a call that touched the same target is a
    # conflict, and its action never runs; allowed_by lets a deliberate one through
    to = ["mailto:bob@example.com/invoice-42"]
    first = Counter({"message_id": "m-1"})
    out = ledger.call(T, C, "send_email", {"to": "bob", "body": "Invoice 42"}, first, targets=to)
    again = Counter({"message_id": "m-2"})
    e = raised(lambda: ledger.call(T, C, "send_email", {"to": "bob", "body": "Here is invoice 42"}, again, targets=to))
    report(out.status == "succeeded" and first.runs == 1 and isinstance(e, idem.TargetConflict) and again.runs == 0
           and isinstance(e.decision, idem.Conflict) and e.decision.target == to[0]
           and e.decision.held_by["key"] == out.key and e.decision.held_by["result"] == {"message_id": "m-1"}
           and e.decision.differs == ["body"] and str(e).endswith("this call was not run"),
           "call-target-conflict", f"{out!r}; {e!r}; runs {again.runs}")
    d = ledger.claim(T, C, "send_email", {"to": "bob", "body": "Invoice 42, once more"}, targets=to)
    report(isinstance(d, idem.Conflict) and d.decision == "conflict" and d.held_by["status"] == "succeeded",
           "claim-target-conflict", f"got {d!r}")
    d = ledger.claim(T, C, "send_email", {"to": "bob", "body": "Invoice 42, once more"}, targets=to,
                     target_window_seconds=0)
    report(isinstance(d, idem.Admitted), "claim-target-window-zero", f"got {d!r}")
    ledger.settle(d.token, "succeeded", {"message_id": "m-3"})
    ok = Counter({"message_id": "m-4"})
    out = ledger.call(T, C, "send_email", {"to": "bob", "body": "a copy, as asked"}, ok, targets=to,
                      allowed_by="support:alice")
    row = ledger.conn.execute("SELECT allowed_by, overrode FROM ledger_targets "
                              "WHERE claim = (SELECT id FROM ledger_rows WHERE key = ?)", (out.key,)).fetchone()
    report(ok.runs == 1 and out.status == "succeeded" and row is not None and row[0] == "support:alice",
           "call-target-allowed", f"{out!r}; row {row}")
    e = raised(lambda: ledger.claim(T, C, "send_email", {"to": "x"}, targets=["a"] * 2))
    report(isinstance(e, idem.LedgerError) and str(e) == 'idem_claim: targets names "a" twice; name each target once',
           "claim-targets-refused", f"got {e!r}")

    # KeyboardInterrupt and SystemExit inside an action: the call may have
    # sent, so the claim is settled unknown; the exception itself propagates
    # (not wrapped in OutcomeUnknown), and a retry sends nothing.
    for n, exc in enumerate((KeyboardInterrupt(), SystemExit(3))):
        act = Counter(exc=exc)
        e = raised(lambda: ledger.call(T, C, "charge", {"amount": 20 + n}, act))
        key = ledger.conn.execute("SELECT idem_key(?, ?, 'charge', ?)", (T, C, json.dumps({"amount": 20 + n}))).fetchone()[0]
        row = ledger.row(T, key)
        again = Counter({"ok": True})
        e2 = raised(lambda: ledger.call(T, C, "charge", {"amount": 20 + n}, again))
        name = type(exc).__name__
        report(e is exc and act.runs == 1 and row and row["status"] == "unknown"
               and row["error"] == {"reason": f"{name}: {exc}"}
               and isinstance(e2, idem.OutcomeUnknown) and again.runs == 0,
               f"call-{name}-unknown-propagates", f"raised {e!r}; row {row}; then {e2!r}, runs {again.runs}")

    # the connection attribute: the connection given, for the local recipe
    given = sqlite3.connect(":memory:", isolation_level=None)
    mine = idem.Ledger.open(given)
    report(mine.conn is given and ledger.conn.execute("SELECT idem_version()").fetchone()[0] == idem.__version__,
           "conn-attribute", f"Ledger.open(conn).conn is {mine.conn!r}, not {given!r}")
    given.close()

    # --- the commit check --------------------------------------------------------
    act = Counter({"ok": True})
    ledger.conn.execute("BEGIN")
    e = raised(lambda: ledger.call(T, C, "send_email", {"to": "txn@b.c"}, act))
    ledger.conn.execute("ROLLBACK")
    o = ledger.call(T, C, "send_email", {"to": "txn@b.c"}, act)
    report(isinstance(e, idem.NotCommitted) and act.runs == 1 and o.attempt == 1 and o.idempotent is False
           and str(e).endswith("commit before acting on an external claim"),
           "call-not-committed-refused", f"{e!r}; then {o!r}, runs {act.runs}")

    # --- a require_transaction ledger: call commits the claim itself ---------
    rt = idem.Ledger.open(db, "rt", options={"require_transaction": 1})
    e = raised(lambda: rt.claim(T, C, "send_email", {"to": "rt@b.c"}))
    act = Counter({"ok": 1})
    r1 = rt.call(T, C, "send_email", {"to": "rt@b.c"}, act)
    r2 = rt.call(T, C, "send_email", {"to": "rt@b.c"}, act)
    report(isinstance(e, idem.LedgerError)
           and str(e) == 'idem_claim: ledger "rt" requires a transaction (require_transaction=1): a claim made '
           "outside BEGIN ... COMMIT can be routed as a read by a replicated engine and lost; open a transaction, "
           "claim, and commit before acting"
           and act.runs == 1 and r1.idempotent is False and r2.idempotent is True and not rt.conn.in_transaction,
           "require-transaction-call", f"bare claim {e!r}; {r1!r} / {r2!r}; runs {act.runs}")
    rt.conn.execute("BEGIN")
    e = raised(lambda: rt.call(T, C, "send_email", {"to": "rt2@b.c"}, act))
    rt.conn.execute("ROLLBACK")
    report(isinstance(e, idem.NotCommitted) and act.runs == 1, "require-transaction-caller-txn-refused",
           f"got {e!r}, runs {act.runs}")
    rt.close()

    # --- waiting for an in-progress claim -------------------------------------
    holder = idem.Ledger.open(db, create=False)
    hd = holder.claim(T, C, "send_email", {"to": "slow@b.c"})

    def settle_later():
        time.sleep(0.4)
        h = idem.Ledger.open(db, create=False)  # a connection of this thread
        h.settle(hd.token, "succeeded", {"by": "holder"})
        h.close()

    th = threading.Thread(target=settle_later)
    th.start()
    act = Counter({"by": "waiter"})
    t0 = time.monotonic()
    o = ledger.call(T, C, "send_email", {"to": "slow@b.c"}, act, wait=10)
    waited = time.monotonic() - t0
    th.join()
    report(o.idempotent is True and o.result == {"by": "holder"} and act.runs == 0 and 0.3 < waited < 3,
           "wait-then-replay", f"{o!r} after {waited:.2f}s, runs {act.runs}")
    hd = holder.claim(T, C, "send_email", {"to": "stuck@b.c"})
    t0 = time.monotonic()
    e = raised(lambda: ledger.call(T, C, "send_email", {"to": "stuck@b.c"}, act, wait=0.3))
    waited = time.monotonic() - t0
    report(isinstance(e, idem.ClaimInProgress) and e.decision.key == hd.key and 0.3 <= waited < 1.5 and act.runs == 0,
           "wait-deadline-in-progress", f"{e!r} after {waited:.2f}s")
    # the message gives the lease's end as ISO 8601 (SQLite's own reading of the row's lease_until)
    until = ledger.conn.execute("SELECT strftime('%Y-%m-%dT%H:%M:%S', lease_until / 1000, 'unixepoch') || '.' || "
                                "printf('%03d', lease_until % 1000) || 'Z' FROM ledger_rows WHERE key = ?",
                                (hd.key,)).fetchone()[0]
    report(str(e) == f"{hd.key} is in progress (attempt 1, lease until {until}); nothing was sent",
           "in-progress-message-iso", f"{e} (want lease until {until})")
    e = raised(lambda: ledger.wait(T, C, "x", {}, timeout=-1))
    report(isinstance(e, ValueError) and str(e) == "Ledger.wait: timeout must be a number of seconds >= 0, got -1",
           "wait-bad-timeout", f"got {e!r}")
    holder.close()

    # --- renewal: right before sending -------------------------------------------
    d = ledger.claim(T, C, "renew_me", {"n": 1})
    lu = ledger.renew(d.token, 120)
    now = time.time() * 1000
    report(isinstance(lu, int) and lu > d.lease_until and abs(lu - (now + 120000)) < 5000, "renew-extends",
           f"lease_until {d.lease_until} -> {lu}, now {now:.0f}")
    ledger.settle(d.token, "succeeded", None)
    e = raised(lambda: ledger.renew(d.token))
    report(isinstance(e, idem.LeaseLost) and isinstance(e, idem.LedgerError) and str(e).startswith("idem_renew: "),
           "renew-settled-lease-lost", f"got {e!r}")
    e = raised(lambda: ledger.renew("not-a-token"))
    report(isinstance(e, idem.LedgerError) and not isinstance(e, idem.LeaseLost)
           and str(e) == 'idem_renew: token must be the 32 lowercase hex digits idem_claim returned, got "not-a-token"',
           "renew-malformed-token", f"got {e!r}")

    # A holder that stalls past its lease (1 s) between its claim and its
    # send: meanwhile the key was resolved released and claimed and sent by
    # another caller. The stalled holder learns it from renew and sends nothing.
    short = idem.Ledger.open(db, "short", options={"lease_seconds": 1})
    other = idem.Ledger.open(db, "short", create=False)
    args = {"to": "stall@b.c"}
    key = short.conn.execute("SELECT idem_key(?, ?, ?, ?)", (T, C, "send_email", json.dumps(args))).fetchone()[0]
    second = Counter({"by": "second"})
    took_over = []

    def stalled_renew(token, seconds=None, _renew=short.renew):
        time.sleep(1.2)  # the lease (1 s) expires: the external claim is unknown
        other.resolve(T, key, "released", {"sent": False, "reason": "reconciled: never arrived"})
        took_over.append(other.call(T, C, "send_email", args, second))
        return _renew(token, seconds)

    short.renew = stalled_renew
    first = Counter({"by": "first"})
    e = raised(lambda: short.call(T, C, "send_email", args, first))
    row = other.row(T, key)
    report(isinstance(e, idem.LeaseLost) and str(e).startswith("idem_renew: ") and first.runs == 0
           and second.runs == 1 and took_over and took_over[0].attempt == 2 and row["status"] == "succeeded"
           and row["result"] == {"by": "second"} and row["attempt"] == 2,
           "stalled-holder-learns-from-renew", f"{e!r}; first ran {first.runs}, second {second.runs}; row {row}")
    short.close()
    other.close()

    # An action that outlives its lease (1 s) and then fails in a way that
    # may have sent: the claim is already unknown (its lease expired), and
    # the caller is told OutcomeUnknown, not a refused settle.
    late = idem.Ledger.open(db, "late", options={"lease_seconds": 1})

    def slow(exc):
        def act(attempt):
            time.sleep(1.2)
            raise exc
        return act

    e = raised(lambda: late.call(T, C, "send_email", {"late": 1}, slow(TimeoutError("read timed out"))))
    key = late.conn.execute("SELECT idem_key(?, ?, ?, ?)", (T, C, "send_email", '{"late":1}')).fetchone()[0]
    report(isinstance(e, idem.OutcomeUnknown) and e.key == key and isinstance(e.__cause__, TimeoutError)
           and late.row(T, key)["status"] == "unknown", "late-action-exception-unknown", f"got {e!r}")
    e = raised(lambda: late.call(T, C, "send_email", {"late": 2},
                                 slow(idem.OutcomeUnknown("gateway timeout", detail={"gw": 504}))))
    report(isinstance(e, idem.OutcomeUnknown) and e.detail == {"gw": 504}, "late-action-outcome-unknown",
           f"got {e!r}")
    e = raised(lambda: late.call(T, C, "send_email", {"late": 3}, lambda a: (time.sleep(1.2), {1, 2})[1]))
    report(isinstance(e, idem.OutcomeUnknown), "late-action-unstorable-result-unknown", f"got {e!r}")
    late.close()

    # A result keeps its numbers: a target's 64-bit id (beyond 2^53, where
    # arguments stop) settles succeeded and comes back equal, an int as an
    # int and a float as a float, on the first call and on the replay.
    big = idem.Ledger.open(db, "big")
    value = {"id": 1234567890123456789, "max": 2 ** 63 - 1, "min": -2 ** 63, "huge": 10 ** 30,
             "two60": 2 ** 60, "tenth": 0.1, "one": 1.0, "int_one": 1}
    text = ('{"huge":1000000000000000000000000000000,"id":1234567890123456789,"int_one":1,'
            '"max":9223372036854775807,"min":-9223372036854775808,"one":1.0,"tenth":0.1,'
            '"two60":1152921504606846976}')
    act = Counter(result=value)
    first = big.call(T, C, "create_order", {"n": 1}, act)
    again = big.call(T, C, "create_order", {"n": 1}, act)
    row = big.row(T, first.key)
    stored = big.conn.execute("SELECT result FROM big WHERE key = ?", (first.key,)).fetchone()[0]
    same_types = lambda r: all(type(r[k]) is type(v) for k, v in value.items())  # noqa: E731
    report(first.status == "succeeded" and first.idempotent is False and first.result == value
           and same_types(first.result) and again.idempotent is True and again.result == value
           and same_types(again.result) and act.runs == 1 and row["status"] == "succeeded"
           and stored == text, "big-id-result-settled-and-replayed",
           f"first {first!r}, again {again!r}, runs {act.runs}, stored {stored!r}")
    d = big.claim(T, C, "create_order", {"n": 1})
    report(isinstance(d, idem.Replay) and d.result["id"] == 1234567890123456789 and type(d.result["id"]) is int,
           "big-id-claim-replay", f"got {d!r}")
    err = {"code": "duplicate", "order_id": 9223372036854775807}
    act = Counter(exc=idem.ToolFailed(err))
    first = big.call(T, C, "create_order", {"n": 2}, act)
    again = big.call(T, C, "create_order", {"n": 2}, act)
    stored = big.conn.execute("SELECT error FROM big WHERE key = ?", (first.key,)).fetchone()[0]
    report(first.status == "failed" and first.error == err and again.error == err and again.idempotent is True
           and act.runs == 1 and stored == '{"code":"duplicate","order_id":9223372036854775807}',
           "big-id-error-settled-and-replayed", f"first {first!r}, again {again!r}, stored {stored!r}")
    e = raised(lambda: big.call(T, C, "create_order", {"id": 1234567890123456789}, Counter()))
    report(isinstance(e, idem.LedgerError) and str(e) == "idem_claim: args: integer 1234567890123456789 at byte 6 "
           "is beyond 2^53-1 and would lose precision; send it as a string", "big-id-args-still-refused", f"got {e!r}")
    # the refusal Node gives for the BigInt 2n ** 60n, word for word
    e = raised(lambda: big.claim(T, C, "lookup", {"n": 2 ** 60}))
    report(isinstance(e, idem.LedgerError) and str(e) == "idem_claim: args: integer 1152921504606846976 at byte 5 "
           "is beyond 2^53-1 and would lose precision; send it as a string", "big-int-args-refused", f"got {e!r}")
    # a result of 2 ** 60 is JSON: stored with its digits and returned as that int (not unknown)
    act = Counter(result=2 ** 60)
    first = big.call(T, C, "count_rows", {"n": 1}, act)
    stored = big.conn.execute("SELECT result FROM big WHERE key = ?", (first.key,)).fetchone()[0]
    report(first.status == "succeeded" and first.result == 2 ** 60 and type(first.result) is int
           and stored == "1152921504606846976", "big-int-result-succeeded", f"got {first!r}, stored {stored!r}")
    # numbers beyond a double, and 2.50, as written (docs/reference.md, "Numbers in a result or an error")
    d = big.claim(T, C, "read_meter", {"meter": 7})
    big.conn.execute("SELECT idem_settle(?, ?, 'succeeded', ?)", (big.name, d.token, "[1e400, 1e-400, 9007199254740993, 2.50]"))
    stored = big.conn.execute("SELECT result FROM big WHERE key = ?", (d.key,)).fetchone()[0]
    r = big.claim(T, C, "read_meter", {"meter": 7})
    o = big.call(T, C, "read_meter", {"meter": 7}, Counter())
    want = [float("inf"), 0.0, 9007199254740993, 2.5]
    report(stored == "[1e400,1e-400,9007199254740993,2.50]" and r.result == want and o.result == want and o.idempotent
           and [type(x) for x in o.result] == [float, float, int, float],
           "result-numbers-as-written", f"stored {stored!r}, replayed {r.result!r}, call {o!r}")
    big.close()

    # A result the ledger cannot store (not JSON: a lone surrogate, a float
    # that is not finite; over max_args_bytes): the action ran, so the call
    # is settled unknown and OutcomeUnknown says why (not a raw error with
    # the claim left claimed). A stored result comes back as a replay gives it.
    store = idem.Ledger.open(db, "store", options={"max_args_bytes": 240})
    cases = [("not-finite", {"x": float("inf")}, "sqlite_idempotency: the result is not JSON: "
              "Out of range float values are not JSON compliant"),
             ("lone-surrogate", {"s": "\ud800"}, None),
             ("too-big", {"s": "x" * 300}, "the result cannot be stored: idem_settle: detail is 308 bytes in canonical "
              "form, over the ledger's max_args_bytes of 240")]
    for name, value, want in cases:
        e = raised(lambda: store.call(T, C, "store", {"case": name}, lambda a: value))
        row = store.row(T, e.key) if isinstance(e, idem.OutcomeUnknown) else None
        report(isinstance(e, idem.OutcomeUnknown) and row is not None and row["status"] == "unknown"
               and (want is None or (e.reason == want and row["error"] == {"reason": want})),
               f"unstorable-result-{name}-unknown", f"got {e!r}, row {row!r}")
    # a reason too long for the ledger: settled unknown without it
    tiny = idem.Ledger.open(db, "tiny", options={"max_args_bytes": 16})
    e = raised(lambda: tiny.call(T, C, "store", {}, lambda a: {"s": "x" * 20}))
    row = tiny.row(T, e.key) if isinstance(e, idem.OutcomeUnknown) else None
    report(row is not None and row["status"] == "unknown" and row["error"] is None
           and e.reason.startswith("the result cannot be stored: idem_settle: detail is 28 bytes"),
           "unstorable-reason-too-long-unknown", f"got {e!r}, row {row!r}")
    tiny.close()
    first = store.call(T, C, "store", {"case": "order"}, lambda a: {"b": 1, "a": 1.0, "c": [2.50]})
    again = store.call(T, C, "store", {"case": "order"}, lambda a: None)
    report(first.result == again.result and repr(first.result) == repr(again.result)
           and repr(first.result) == "{'a': 1.0, 'b': 1, 'c': [2.5]}" and first.idempotent is False
           and again.idempotent is True, "first-call-result-as-replayed", f"{first.result!r} / {again.result!r}")
    f1 = store.call(T, C, "store", {"case": "fail"}, Counter(exc=idem.ToolFailed({"z": 1, "code": "x"})))
    f2 = store.call(T, C, "store", {"case": "fail"}, Counter())
    report(f1.status == "failed" and repr(f1.error) == repr(f2.error) == "{'code': 'x', 'z': 1}",
           "first-call-error-as-replayed", f"{f1.error!r} / {f2.error!r}")

    # An async function given to the synchronous call: its coroutine never
    # ran, so nothing was sent; the claim is released and a TypeError says
    # why (it was settled unknown, which blocked the key for good).
    async def async_send(attempt):
        return {"sent": True}

    e = raised(lambda: store.call(T, C, "store", {"case": "async"}, async_send))
    key = store.conn.execute("SELECT idem_key(?, ?, ?, ?)", (T, C, "store", '{"case":"async"}')).fetchone()[0]
    row = store.row(T, key)
    report(isinstance(e, TypeError) and str(e) == "Ledger.call: the action returned a coroutine that never ran "
           "(an async function?); call runs a synchronous action: nothing was sent and the claim is released"
           and row is not None and row["status"] == "released" and row["error"].get("sent") is False,
           "async-action-released", f"got {e!r}, row {row!r}")
    again = store.call(T, C, "store", {"case": "async"}, lambda a: {"sent": True})
    report(again.status == "succeeded" and again.attempt == 2, "async-action-retry-runs", f"got {again!r}")
    store.close()

    # A ledger named with its schema ('aux.ledger', '"aux"."ledger"'), as
    # every extension function takes it, beside a main ledger of the same
    # name: created, claimed, read and called in the attached database.
    conn = sqlite3.connect(os.path.join(tmp, "main-q.db"), isolation_level=None)
    conn.execute("ATTACH ? AS aux", (os.path.join(tmp, "aux-q.db"),))
    main_l = idem.Ledger.open(conn)
    aux_l = idem.Ledger.open(conn, "aux.ledger", options={"lease_seconds": 60})
    tables = conn.execute("SELECT schema, name FROM pragma_table_list WHERE name LIKE '%ledger%' "
                          "AND schema IN ('main', 'aux') ORDER BY 1, 2").fetchall()
    report(tables == [("aux", "ledger"), ("aux", "ledger_guards"), ("aux", "ledger_members"), ("aux", "ledger_meta"), ("aux", "ledger_rows"), ("aux", "ledger_targets"),
                      ("main", "ledger"), ("main", "ledger_guards"), ("main", "ledger_members"), ("main", "ledger_meta"), ("main", "ledger_rows"), ("main", "ledger_targets")],
           "qualified-name-created-in-schema", f"tables {tables}")
    # the second Ledger.open loaded the extension into conn again: the first ledger still works
    md = main_l.claim(T, C, "q", {"n": 0})
    report(isinstance(md, idem.Admitted) and isinstance(main_l.claim(T, C, "q", {"n": 0}), idem.InProgress),
           "two-ledgers-one-connection", f"got {md!r}")
    d = aux_l.claim(T, C, "q", {"n": 1})
    row = aux_l.row(T, d.key) if isinstance(d, idem.Admitted) else None
    report(isinstance(d, idem.Admitted) and row is not None and main_l.row(T, d.key) is None,
           "qualified-name-claim-row", f"got {d!r}, row {row!r}")
    o = idem.Ledger(conn, '"aux"."ledger"').call(T, C, "q", {"n": 2}, lambda a: {"ok": 1})
    n_aux = conn.execute("SELECT count(*) FROM aux.ledger").fetchone()[0]
    n_main = conn.execute("SELECT count(*) FROM main.ledger").fetchone()[0]
    report(o.status == "succeeded" and n_aux == 2 and n_main == 1, "qualified-name-call",
           f"got {o!r}; rows aux {n_aux}, main {n_main}")
    e = raised(lambda: idem.Ledger.open(conn, "aux.ledger", options={"lease_seconds": 30}))
    report(isinstance(e, idem.IdempotencyError) and str(e) == "Ledger.create: ledger aux.ledger exists with "
           "lease_seconds=60, not 30; options apply only when a ledger is created",
           "qualified-name-options-checked", f"got {e!r}")
    e = raised(lambda: idem.Ledger.open(conn, '"aux.ledger'))
    report(isinstance(e, ValueError) and str(e) == "Ledger: malformed ledger name '\"aux.ledger': write ledger or "
           "schema.ledger, a part in double quotes when it holds a '.' (\"a.b\".\"x\"\"y\")",
           "qualified-name-malformed", f"got {e!r}")
    conn.close()
    ledger.close()


if __name__ == "__main__":
    sys.exit(main())
