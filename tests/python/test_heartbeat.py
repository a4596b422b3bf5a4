"""Ledger.call's and Ledger.acall's heartbeat (docs/design.md, "The heartbeat"),
from the package on Debian's python3 and a ledger file:

  killed     a process SIGKILLed while its action runs (its request has
             reached the counting target, tests/python/test_server.py):
             once the lease its heartbeat kept has passed (the row's
             lease_until, 3 beats after its last renewal: a configured
             bound read from the ledger), a new process's retry raises
             OutcomeUnknown (the decision unknown), and the action never
             runs again
  renewed    while a long action runs (call and acall: a thread with its
             own connection), another connection
             sees lease_until and updated_at move, each beat 3 beats ahead;
             after the action ended (returned, raised, NotSent, ToolFailed,
             a result the ledger cannot store, a settle that failed,
             KeyboardInterrupt, a cancelled task) no renewal is made through a beat and a half
  in-tx      a beat while a transaction is open on the ledger's connection
             is skipped, and the beats resume after COMMIT
  blocking   an async def action that blocks its loop (time.sleep) past
             its first lease is still beaten for: another caller reads
             in_progress, never unknown
  lost       a beat refused (the claim's lease ran out before it) stops the
             beats and is attempt.lease_lost; the settle decides as
             without a heartbeat
  off        heartbeat_seconds 0: no renewal; a ledger in memory: no
             heartbeat thread for call
  open       Ledger.open gives a ledger it creates in a file the lease of 3
             beats (unless options name lease_seconds), never compared with
             an existing ledger's; in memory the extension's default; bad
             heartbeat_seconds refused, naming the value, nothing written
  renewed_at ClaimInProgress carries the holder's renewed_at
  none       an action that returns None is settled succeeded with null,
             and replayed as None

Usage: PYTHONPATH=<a copy of bindings/python with the extension> python3 test_heartbeat.py
       python3 test_heartbeat.py child DATABASE URL     (the killed holder)
       python3 test_heartbeat.py retry DATABASE URL     (the retry)

Prints PASS/FAIL lines; exit status 1 when a check failed.
"""
import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import sqlite_idempotency as idem  # noqa: E402
from checks import Checks  # noqa: E402

BEAT = 1  # the heartbeat of the ledgers here, in seconds
ARGS = {"to": "a@example.com", "subject": "heartbeat"}
MAX = 31536000 // 3


def post(url, headers):
    req = urllib.request.Request(f"{url}/send", data=json.dumps(ARGS).encode(),
                                 headers={"Content-Type": "application/json", **headers}, method="POST")
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())


def child(db, url):
    """Claims and sends through Ledger.call with a heartbeat, says SENT, then holds the action until killed."""
    ledger = idem.Ledger.open(db, heartbeat_seconds=BEAT)

    def act(attempt):
        post(url, attempt.headers)
        print("SENT", flush=True)
        threading.Event().wait()  # until SIGKILL
    ledger.call("t", "c", "send", ARGS, act)


def retry(db, url):
    ledger = idem.Ledger.open(db, heartbeat_seconds=BEAT)
    ran = []

    def act(attempt):
        ran.append(1)
        return post(url, attempt.headers)
    try:
        out = ledger.call("t", "c", "send", ARGS, act)
        print(json.dumps({"out": out.to_dict(), "ran": len(ran)}))
    except idem.IdempotencyError as e:
        d = getattr(e, "decision", None)
        print(json.dumps({"raised": type(e).__name__, "message": str(e),
                          "decision": d.decision if d is not None else None, "ran": len(ran)}))


def connect(db):
    conn = sqlite3.connect(db, isolation_level=None, timeout=10)
    idem.load(conn)
    return conn


def row(conn, key):
    r = conn.execute("SELECT status, lease_until, updated_at FROM ledger WHERE key = ?", (key,)).fetchone()
    return None if r is None else {"status": r[0], "lease_until": r[1], "updated_at": r[2]}


def now_ms(conn):
    """The ledger's clock (SQL 'now', Unix ms)."""
    return conn.execute("SELECT CAST(round(julianday('now') * 86400000.0) AS INTEGER) - 210866760000000").fetchone()[0]


def until(conn, ms):
    """Sleeps until the ledger's clock has passed ms (a bound read from the ledger)."""
    left = ms - now_ms(conn)
    while left >= 0:
        time.sleep(left / 1000 + 0.001)
        left = ms - now_ms(conn)


def when(pred, what, limit=20.0):
    """Returns once pred() holds, polling; raises after limit seconds (a test that would otherwise hang)."""
    end = time.monotonic() + limit
    while not pred():
        if time.monotonic() > end:
            raise RuntimeError(f"gave up waiting for {what}")
        time.sleep(0.02)


def lease_seconds(conn, name="ledger"):
    return conn.execute(f'SELECT v FROM "{name}_meta" WHERE k = \'lease_seconds\'').fetchone()[0]


class Counted(idem.Ledger):
    """A Ledger whose successful renewals are recorded (the heartbeat's own Ledger is one too)."""
    renewals = None

    def renew(self, token, seconds=None):
        v = super().renew(token, seconds)
        Counted.renewals.append((seconds, v))
        return v


def killed(checks, tmp, srv, url):
    db = os.path.join(tmp, "killed.db")
    p = subprocess.Popen([sys.executable, __file__, "child", db, url], stdout=subprocess.PIPE, text=True)
    said = p.stdout.readline().strip()
    conn = connect(db)
    key = conn.execute("SELECT key FROM ledger").fetchone()[0]
    first = row(conn, key)
    when(lambda: row(conn, key)["updated_at"] > first["updated_at"], "a beat of the holder")
    p.send_signal(signal.SIGKILL)
    p.wait()
    held = row(conn, key)
    count = srv.counts()["keys"].get(key, 0)
    checks.report(said == "SENT" and count == 1 and held["status"] == "claimed" and
                  held["lease_until"] - held["updated_at"] == 3 * BEAT * 1000 and lease_seconds(conn) == 3 * BEAT,
                  "killed-holder", f"said {said!r}, requests {count}, row {held}, lease_seconds {lease_seconds(conn)}")
    until(conn, held["lease_until"])
    out = subprocess.run([sys.executable, __file__, "retry", db, url], capture_output=True, text=True, timeout=60)
    try:
        got = json.loads(out.stdout)
    except ValueError:
        got = {"unparsed": out.stdout + out.stderr}
    count = srv.counts()["keys"].get(key, 0)
    checks.report(got.get("raised") == "OutcomeUnknown" and got.get("decision") == "unknown" and got.get("ran") == 0 and
                  count == 1 and row(conn, key)["status"] == "unknown", "killed-retry-unknown",
                  f"retry {got}, requests {count}, row {row(conn, key)}")
    conn.close()


def endings():
    """The ways an action ends, each (name, action body run after a beat, what call gives)."""
    def cancelled():
        raise asyncio.CancelledError()
    return [
        ("returned", lambda: {"ok": 1}),
        ("raised", lambda: 1 / 0),
        ("not-sent", lambda: (_ for _ in ()).throw(idem.NotSent("no connection"))),
        ("tool-failed", lambda: (_ for _ in ()).throw(idem.ToolFailed({"code": "declined"}))),
        ("unstorable", lambda: float("nan")),
        ("settle-failed", None),  # renewed() makes it: the settle cannot take the write lock
        ("keyboard-interrupt", lambda: (_ for _ in ()).throw(KeyboardInterrupt())),
        ("cancelled", cancelled),
    ]


def renewed(checks, tmp):
    db = os.path.join(tmp, "renewed.db")
    ledger = Counted.open(db, heartbeat_seconds=BEAT)
    other = connect(db)
    for mode in ("call", "acall"):
        Counted.renewals = []
        seen = []
        got = {}

        def watch(attempt):
            got["attempt"] = attempt
            seen.append(row(other, attempt.key))

            def moved():
                r = row(other, attempt.key)
                if r["updated_at"] > seen[-1]["updated_at"]:
                    seen.append(r)
                return len(seen) >= 3
            return moved

        if mode == "call":
            def act(attempt):
                when(watch(attempt), "two beats")
                return {"done": True}
            out = ledger.call("t", "c", "long", {"n": 1}, act)
        else:
            async def aact(attempt):
                moved = watch(attempt)
                while not moved():
                    await asyncio.sleep(0.02)
                return {"done": True}
            out = asyncio.run(ledger.acall("t", "c", "long", {"n": 2}, aact))
        rn = Counted.renewals
        ok_moved = all(i == 0 or (r["lease_until"] > seen[i - 1]["lease_until"] and
                                  r["updated_at"] > seen[i - 1]["updated_at"]) for i, r in enumerate(seen))
        ahead = all(r["lease_until"] - r["updated_at"] == 3 * BEAT * 1000 for r in seen[1:])
        checks.report(out.status == "succeeded" and len(seen) == 3 and ok_moved and ahead and len(rn) >= 2 and
                      all(s == 3 * BEAT for s, _ in rn) and got["attempt"].lease_until == rn[-1][1],
                      f"{mode}-renewed-while-running", f"rows {seen}, renewals {rn}, outcome {out}")

        # after the action ended, however it ended: no renewal through a beat and a half
        def locked():
            other.execute("BEGIN IMMEDIATE")  # another connection holds the write lock
            ledger.conn.execute("PRAGMA busy_timeout=100")
            return {"ok": 2}

        for n, (name, body) in enumerate(endings()):
            body = body or locked
            before = len(Counted.renewals)

            def after_a_beat():
                at = len(Counted.renewals)
                when(lambda: len(Counted.renewals) > at, "a beat")

            try:
                if mode == "call":
                    def act(attempt, body=body):
                        after_a_beat()
                        return body()
                    settled = ledger.call("t", "c", "ending", {"name": name, "n": n}, act)
                else:
                    async def aact(attempt, body=body):
                        at = len(Counted.renewals)
                        while len(Counted.renewals) == at:
                            await asyncio.sleep(0.02)
                        return body()
                    settled = asyncio.run(ledger.acall("t", "c", "ending", {"name": name, "n": n, "a": 1}, aact))
            except BaseException as e:  # KeyboardInterrupt and CancelledError included: they propagate
                settled = e
            ended = len(Counted.renewals)
            if other.in_transaction:
                other.execute("ROLLBACK")
                ledger.conn.execute("PRAGMA busy_timeout=10000")
            time.sleep(1.5 * ledger.heartbeat_seconds)
            refused = name != "settle-failed" or (isinstance(settled, idem.LedgerError) and
                                                   str(settled) == "idem_settle: database is locked")
            checks.report(ended > before and len(Counted.renewals) == ended and refused,
                          f"{mode}-no-renewal-after-{name}",
                          f"renewals before {before}, when it ended {ended}, a beat and a half later "
                          f"{len(Counted.renewals)}; call gave {type(settled).__name__}: {settled}")
    threads = [t.name for t in threading.enumerate() if t.name.startswith("sqlite-idempotency heartbeat")]
    checks.report(threads == [], "no-heartbeat-thread-left", threads)
    ledger.close()
    other.close()


def in_transaction(checks, tmp):
    db = os.path.join(tmp, "in-tx.db")
    ledger = Counted.open(db, heartbeat_seconds=BEAT)
    for mode in ("call", "acall"):
        Counted.renewals = []
        inside = []

        def act(attempt):
            ledger.conn.execute("BEGIN")
            at = len(Counted.renewals)
            time.sleep(1.5 * ledger.heartbeat_seconds)  # a beat's time and a half, within the lease (3 beats)
            inside.append(len(Counted.renewals) - at)
            ledger.conn.execute("COMMIT")
            return at

        if mode == "call":
            def whole(attempt):
                act(attempt)
                after = len(Counted.renewals)
                when(lambda: len(Counted.renewals) > after, "a beat after COMMIT")
            ledger.call("t", "c", "tx", {"n": 1}, whole)
        else:
            async def awhole(attempt):
                ledger.conn.execute("BEGIN")
                at = len(Counted.renewals)
                await asyncio.sleep(1.5 * ledger.heartbeat_seconds)  # the loop runs the beats meanwhile
                inside.append(len(Counted.renewals) - at)
                ledger.conn.execute("COMMIT")
                after = len(Counted.renewals)
                while len(Counted.renewals) == after:
                    await asyncio.sleep(0.02)
            asyncio.run(ledger.acall("t", "c", "tx", {"n": 2}, awhole))
        checks.report(inside == [0] and len(Counted.renewals) >= 1, f"{mode}-skipped-in-transaction",
                      f"renewals inside the transaction {inside}, in all {Counted.renewals}")
    ledger.close()


def lost(checks, tmp):
    db = os.path.join(tmp, "lost.db")
    # the claim's lease (1 s) runs out before the first beat (2 s)
    ledger = Counted.open(db, heartbeat_seconds=2 * BEAT, options={"lease_seconds": BEAT})
    Counted.renewals = []
    got = {}

    def act(attempt):
        got["attempt"] = attempt
        when(lambda: attempt.lease_lost is not None, "the lost lease")
        time.sleep(2 * 2 * BEAT)  # two more beats' time: none comes
        return {"late": True}
    out = ledger.call("t", "c", "lost", {"n": 1}, act)
    att = got["attempt"]
    e = att.lease_lost
    beats = [x for x in Counted.renewals if x[0] is not None]  # the one without seconds: the check before sending
    checks.report(isinstance(e, idem.LeaseLost) and
                  str(e).endswith(f"its lease expired at {att.lease_until} and its outcome is unknown; do not act "
                                  "on this claim") and beats == [] and out.status == "succeeded" and
                  ledger.row("t", out.key)["status"] == "succeeded", "lease-lost-fenced",
                  f"lease_lost {e}, renewals {Counted.renewals}, outcome {out}")
    ledger.close()


def off(checks, tmp):
    db = os.path.join(tmp, "off.db")
    ledger = Counted.open(db, heartbeat_seconds=BEAT)
    Counted.renewals = []
    out = ledger.call("t", "c", "off", {"n": 1}, lambda a: time.sleep(1.5 * BEAT) or 1, heartbeat_seconds=0)
    checks.report(out.status == "succeeded" and Counted.renewals == [], "off-zero", f"renewals {Counted.renewals}")
    ledger.close()
    ledger = idem.Ledger.open(db, "quiet", heartbeat_seconds=None)
    checks.report(ledger.heartbeat_seconds == 0 and lease_seconds(ledger.conn, "quiet") == 300, "off-ledger",
                  f"heartbeat_seconds {ledger.heartbeat_seconds}, lease_seconds {lease_seconds(ledger.conn, 'quiet')}")
    ledger.close()
    # in memory: no other process sees the ledger, and call starts no heartbeat thread
    mem = idem.Ledger.open(":memory:", heartbeat_seconds=BEAT, options={"lease_seconds": 60})
    threads = []
    mem.call("t", "c", "mem", {"n": 1}, lambda a: threads.extend(
        t.name for t in threading.enumerate() if t.name.startswith("sqlite-idempotency heartbeat")))
    checks.report(threads == [], "off-in-memory", threads)
    mem.close()


def opening(checks, tmp):
    db = os.path.join(tmp, "open.db")
    ledger = idem.Ledger.open(db)
    checks.report(ledger.heartbeat_seconds == 5 and lease_seconds(ledger.conn) == 15, "open-default-lease",
                  f"heartbeat {ledger.heartbeat_seconds}, lease {lease_seconds(ledger.conn)}")
    ledger.close()
    ledger = idem.Ledger.open(db, heartbeat_seconds=2)  # exists: not compared
    checks.report(ledger.heartbeat_seconds == 2 and lease_seconds(ledger.conn) == 15, "open-existing-not-compared",
                  f"lease {lease_seconds(ledger.conn)}")
    ledger.close()
    ledger = idem.Ledger.open(db, "given", heartbeat_seconds=2, options={"lease_seconds": 60})
    checks.report(lease_seconds(ledger.conn, "given") == 60, "open-options-lease", lease_seconds(ledger.conn, "given"))
    ledger.close()
    mem = idem.Ledger.open(":memory:")
    checks.report(lease_seconds(mem.conn) == 300, "open-memory-lease", lease_seconds(mem.conn))

    def raised(fn):
        try:
            fn()
        except Exception as e:  # noqa: BLE001
            return e
        return None
    e = raised(lambda: idem.Ledger.open(":memory:", heartbeat_seconds=-1))
    checks.report(isinstance(e, ValueError) and str(e) == f"Ledger.open: heartbeat_seconds must be an integer from 0 to "
                  f"{MAX} (seconds; 0: no heartbeat), got -1", "open-bad-heartbeat", e)
    e = raised(lambda: idem.Ledger(mem.conn, heartbeat_seconds=True))
    checks.report(isinstance(e, ValueError) and str(e) == f"Ledger: heartbeat_seconds must be an integer from 0 to "
                  f"{MAX} (seconds; 0: no heartbeat), got True", "constructor-bad-heartbeat", e)
    ran = []
    e = raised(lambda: mem.call("t", "c", "bad", {"n": 1}, lambda a: ran.append(1), heartbeat_seconds=1.5))
    rows = mem.conn.execute("SELECT count(*) FROM ledger").fetchone()[0]
    checks.report(isinstance(e, ValueError) and str(e) == f"Ledger.call: heartbeat_seconds must be an integer from 0 "
                  f"to {MAX} (seconds; 0: no heartbeat), got 1.5" and ran == [] and rows == 0, "call-bad-heartbeat",
                  f"{e}, ran {ran}, rows {rows}")
    e = raised(lambda: asyncio.run(mem.acall("t", "c", "bad", {"n": 1}, lambda a: ran.append(1),
                                             heartbeat_seconds="5")))
    rows = mem.conn.execute("SELECT count(*) FROM ledger").fetchone()[0]
    checks.report(isinstance(e, ValueError) and str(e) == f"Ledger.acall: heartbeat_seconds must be an integer from 0 "
                  f"to {MAX} (seconds; 0: no heartbeat), got '5'" and ran == [] and rows == 0, "acall-bad-heartbeat",
                  f"{e}, ran {ran}, rows {rows}")
    return mem


def renewed_at(checks, tmp):
    db = os.path.join(tmp, "renewed-at.db")
    a = idem.Ledger.open(db)
    b = idem.Ledger.open(db)
    d = a.claim("t", "c", "held", {"n": 1})
    a.renew(d.token, 60)
    try:
        b.call("t", "c", "held", {"n": 1}, lambda att: 1)
        e = None
    except idem.ClaimInProgress as x:
        e = x
    r = a.row("t", d.key)
    checks.report(e is not None and e.renewed_at == r["updated_at"] and e.decision.renewed_at == r["updated_at"] and
                  e.decision.lease_until == r["lease_until"], "in-progress-renewed-at", f"{e!r}, row {r}")
    a.close()
    b.close()


def none_result(checks, mem):
    first = mem.call("t", "c", "void", {"n": 1}, lambda a: None)
    again = mem.call("t", "c", "void", {"n": 1}, lambda a: 1 / 0)

    async def nothing(a):
        return None
    asynced = asyncio.run(mem.acall("t", "c", "void", {"n": 2}, nothing))
    r = mem.row("t", first.key)
    stored = mem.conn.execute("SELECT result FROM ledger WHERE key = ?", (first.key,)).fetchone()[0]
    checks.report(first.status == "succeeded" and first.result is None and not first.idempotent and
                  again.status == "succeeded" and again.result is None and again.idempotent and
                  asynced.status == "succeeded" and asynced.result is None and r["status"] == "succeeded" and
                  stored == "null", "none-succeeded-null", f"first {first}, replay {again}, async {asynced}, row {r}")


def blocking_async(checks, tmp):
    """An async def action that blocks its loop (time.sleep) past the lease
    the claim started with: the beats (a thread) keep it live, so another
    caller reads in_progress, never unknown, and the action's outcome is
    recorded."""
    db = os.path.join(tmp, "blocking.db")
    ledger = Counted.open(db, heartbeat_seconds=BEAT)
    rival = idem.Ledger(connect(db), "ledger", heartbeat_seconds=0)
    seen = {}

    async def blocks(attempt):
        first = attempt.lease_until
        until(ledger.conn, first + 500)  # the loop is blocked past the first lease, and half a second more
        try:
            rival.call("t", "c", "blocking", {"n": 1}, lambda a: {"by": "rival"})
        except BaseException as e:  # noqa: BLE001
            seen["rival"] = e
        seen["first"], seen["now"] = first, now_ms(ledger.conn)
        return {"by": "holder"}

    Counted.renewals = []
    out = asyncio.run(ledger.acall("t", "c", "blocking", {"n": 1}, blocks))
    e = seen.get("rival")
    checks.report(out.status == "succeeded" and out.result == {"by": "holder"} and isinstance(e, idem.ClaimInProgress)
                  and seen["now"] > seen["first"] and len(Counted.renewals) >= 1,
                  "acall-blocking-loop-beats",
                  f"outcome {out}; the rival got {type(e).__name__}: {e} (want ClaimInProgress); "
                  f"renewals {Counted.renewals}")
    rival.conn.close()
    ledger.close()


def main():
    if len(sys.argv) == 4 and sys.argv[1] in ("child", "retry"):
        return (child if sys.argv[1] == "child" else retry)(sys.argv[2], sys.argv[3]) or 0
    checks = Checks("bindings.heartbeat-python")
    import test_server
    srv = test_server.start()
    url = f"http://127.0.0.1:{srv.port}"
    tmp = tempfile.mkdtemp(prefix="idem-py-heartbeat-")
    try:
        mem = opening(checks, tmp)
        none_result(checks, mem)
        mem.close()
        renewed_at(checks, tmp)
        killed(checks, tmp, srv, url)
        renewed(checks, tmp)
        in_transaction(checks, tmp)
        blocking_async(checks, tmp)
        lost(checks, tmp)
        off(checks, tmp)
    except Exception as e:  # noqa: BLE001
        checks.report(False, "run", f"{type(e).__name__}: {e}")
    finally:
        srv.stop()
    return checks.status()


if __name__ == "__main__":
    sys.exit(main())
