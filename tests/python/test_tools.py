"""@ledger.tool and Ledger.acall, without any framework, against the
counting target (tests/python/test_server.py) on 127.0.0.1.

Usage: PYTHONPATH=<a copy of bindings/python with the extension> python3 test_tools.py
(tests/suites/55-integrations-mcp.sh makes it)

  sync / async     the same call twice (def and async def): one request,
                   the second returns the first result with idempotent True
  threads          6 threads at once, each on its own connection (opened by
                   the tool for its thread): one request, 5 replays
  tasks            5 asyncio tasks at once on one connection: one request
  processes        4 processes at once: one request, 3 replays
  reworded         after a timeout, the same invoice email in other words:
                   TargetConflict with the conflict's words, nothing sent
  timeout          the caller gives up (asyncio.wait_for; a urllib timeout):
                   unknown, and a retry raises OutcomeUnknown without sending
  killed           a process killed (SIGKILL) mid-call: after the lease the
                   retry raises OutcomeUnknown and sends nothing
  tenants          two tenants x two conversations, the same arguments: four
                   requests, each replayed in its own place
  not-sent         NotSent releases the claim: the retry sends (attempt 2)
  failed           ToolFailed is kept and replayed
  signature        the attempt parameter is the ledger's, not the caller's
  errors           bad decorator arguments and missing parts, exact text
  say-targets      say()'s targets field: joined, left out when empty, refused
                   when not a list of strings
  *-text           the words the model reads (words.json): Outcome.text on
                   a replay and a failure, .text on what is raised

Prints PASS/FAIL lines; exit status 1 when a check failed.
"""
import asyncio
import json
import os
import re
import signal
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

checks = Checks("integrations.python")


def post(url, path, body, headers, delay_ms=0, timeout=10):
    req = urllib.request.Request(f"{url}/{path}?delay_ms={delay_ms}", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json", **headers}, method="POST")
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


def counting_rows(ledger, fn):
    """fn()'s value and how many rows it read through ledger.row."""
    reads = []

    def row(*a, **kw):
        reads.append(a)
        return type(ledger).row(ledger, *a, **kw)
    ledger.row = row
    try:
        return fn(), len(reads)
    finally:
        del ledger.row


def tools(ledger, url):
    """The tools of the tests, on one ledger."""
    @ledger.tool("send_email", tenant=lambda a: a["user"], conversation=lambda a: a["thread"], wait=15)
    def send_email(user, thread, to, delay_ms=0, timeout=10, attempt=None):
        return post(url, "send", {"to": to}, attempt.headers, delay_ms, timeout)

    @ledger.tool("send_sms", tenant=lambda a: a["user"], conversation=lambda a: a["thread"], wait=15)
    async def send_sms(user, thread, to, delay_ms=0, attempt=None):
        return await asyncio.to_thread(post, url, "sms", {"to": to}, attempt.headers, delay_ms)

    return send_email, send_sms


def worker(db, url, ledger_name, to, delay_ms):
    """A process: waits for GO on stdin, calls send_email once, prints the outcome as JSON."""
    ledger = idem.Ledger.open(db, ledger_name, create=False)
    send_email, _ = tools(ledger, url)
    print("READY", flush=True)
    sys.stdin.readline()
    try:
        out = send_email("u1", "t1", to, delay_ms=delay_ms)
        print(json.dumps(out.to_dict()), flush=True)
    except idem.IdempotencyError as e:
        print(json.dumps({"raised": type(e).__name__, "message": str(e)}), flush=True)


def spawn_workers(n, db, url, ledger_name, to, delay_ms):
    procs = [subprocess.Popen([sys.executable, __file__, "worker", db, url, ledger_name, to, str(delay_ms)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) for _ in range(n)]
    for p in procs:
        assert p.stdout.readline().strip() == "READY"
    return procs


def main():
    import test_server
    srv = test_server.start()
    url = f"http://127.0.0.1:{srv.port}"
    count = lambda key: srv.counts()["keys"].get(key, 0)  # noqa: E731
    tmp = tempfile.mkdtemp(prefix="idem-py-tools-")
    db = os.path.join(tmp, "agent.db")
    ledger = idem.Ledger.open(db)
    idem.Ledger.open(db, "short", options={"lease_seconds": 1}).close()
    send_email, send_sms = tools(ledger, url)
    try:
        # sync and async, twice
        a = send_email("u1", "t1", "sync@example.com")
        b, reads = counting_rows(ledger, lambda: send_email("u1", "t1", to="sync@example.com"))
        checks.report(isinstance(a, idem.Outcome) and not a.idempotent and b.idempotent and b.result == a.result and
                      a.status == "succeeded" and count(a.key) == 1, "sync", f"{a} {b} sent {count(a.key)}")
        # the words the model reads: none for the call that ran, the replay's for the replay
        at = ledger.row("u1", a.key)["updated_at"]
        checks.report(a.text is None and b.text == idem.say("replay", tool="send_email", key=a.key, attempt=1, at=at) and
                      re.fullmatch(rf"send_email was not run again: this request is identical to a call that already ran at "
                                   rf"\d{{4}}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{{3}}Z \(key {a.key}, attempt 1\), so nothing new "
                                   rf"was done, and the result below is that earlier run's: do not report it as done a second "
                                   rf"time\. The result of that run:", b.text),
                      "sync-text", repr(b.text))
        # the replay's words take the time from the claim's answer, not from a second read of the row
        checks.report(reads == 0 and b.settled_at == at and a.settled_at == at, "sync-text-no-row-read",
                      f"{reads} row reads, settled_at {b.settled_at!r} (first call {a.settled_at!r}), updated_at {at}")
        a = asyncio.run(send_sms("u1", "t1", "async@example.com"))
        b = asyncio.run(send_sms("u1", "t1", "async@example.com"))
        checks.report(not a.idempotent and b.idempotent and b.result == a.result and count(a.key) == 1, "async",
                      f"{a} {b} sent {count(a.key)}")
        checks.report(a.text is None and b.text == idem.say("replay", tool="send_sms", key=a.key, attempt=1,
                                                             at=ledger.row("u1", a.key)["updated_at"]), "async-text",
                      repr(b.text))
        # the key's args are the bound arguments, defaults applied, without attempt
        row = ledger.row("u1", a.key)
        checks.check_eq("args", row["args"], {"user": "u1", "thread": "t1", "to": "async@example.com", "delay_ms": 0})

        # threads, each on its own connection
        outs, errs = [], []
        barrier = threading.Barrier(6)

        def in_thread():
            barrier.wait()
            try:
                outs.append(send_email("u1", "t1", "threads@example.com", delay_ms=300))
            except Exception as e:  # noqa: BLE001
                errs.append(repr(e))
        ts = [threading.Thread(target=in_thread) for _ in range(6)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        ran = [o for o in outs if not o.idempotent]
        checks.report(not errs and len(outs) == 6 and len(ran) == 1 and all(o.result == ran[0].result for o in outs) and
                      count(ran[0].key) == 1, "threads", f"errors {errs}, outcomes {outs}")

        # asyncio tasks on one connection
        async def tasks():
            return await asyncio.gather(*[send_sms("u1", "t1", "tasks@example.com", delay_ms=300) for _ in range(5)])
        outs = asyncio.run(tasks())
        ran = [o for o in outs if not o.idempotent]
        checks.report(len(ran) == 1 and all(o.result == ran[0].result for o in outs) and count(ran[0].key) == 1,
                      "tasks", f"{outs}")

        # processes at once
        procs = spawn_workers(4, db, url, "ledger", "processes@example.com", 500)
        for p in procs:
            p.stdin.write("GO\n")
            p.stdin.flush()
        results = [json.loads(p.communicate(timeout=60)[0].strip().splitlines()[-1]) for p in procs]
        ran = [r for r in results if r.get("idempotent") is False]
        checks.report(len(ran) == 1 and all(r.get("result") == ran[0]["result"] for r in results) and
                      count(ran[0]["key"]) == 1, "processes", f"{results}")

        # timeout: asyncio.wait_for gives up while the action runs
        async def timed_out():
            try:
                await asyncio.wait_for(send_sms("u1", "t1", "timeout@example.com", delay_ms=800), 0.2)
            except asyncio.TimeoutError:
                return "timeout"
        first = asyncio.run(timed_out())
        try:
            asyncio.run(send_sms("u1", "t1", "timeout@example.com", delay_ms=800))
            second = "ran"
        except idem.OutcomeUnknown as e:
            second = e
        key = getattr(second, "key", None)
        row = ledger.row("u1", key) if key else None
        checks.report(first == "timeout" and isinstance(second, idem.OutcomeUnknown) and second.decision is not None and
                      row["status"] == "unknown" and
                      row["error"] == {"reason": "CancelledError: the task was cancelled while the action ran"} and
                      count(key) == 1, "timeout-async", f"{first} {second!r} {row}")
        # timeout: the HTTP client gives up (urllib timeout) while the request is at the target
        try:
            send_email("u1", "t1", "timeout-sync@example.com", delay_ms=800, timeout=0.2)
            first = "ran"
        except idem.OutcomeUnknown as e:
            first = e
        try:
            send_email("u1", "t1", "timeout-sync@example.com", delay_ms=800, timeout=0.2)
            second = "ran"
        except idem.OutcomeUnknown as e:
            second = e
        key = getattr(first, "key", None)
        checks.report(isinstance(first, idem.OutcomeUnknown) and first.decision is None and
                      isinstance(second, idem.OutcomeUnknown) and second.decision is not None and second.key == key and
                      count(key) == 1, "timeout-sync", f"{first!r} {second!r}")
        checks.report(getattr(first, "text", None) == idem.say("outcome_unknown", tool="send_email", key=key, reason=first.reason) and
                      first.reason.startswith("TimeoutError") and
                      getattr(second, "text", None) == idem.say("unknown", tool="send_email", key=key, attempt=1),
                      "timeout-sync-text", f"{getattr(first, 'text', None)!r} {getattr(second, 'text', None)!r}")

        # a timeout, then the model re-plans and rewords the body (a new key): the tool names
        # what the email touches (to, invoice), so the reworded one is a conflict and sends nothing
        @ledger.tool("send_invoice", tenant=lambda a: a["user"], conversation=lambda a: a["thread"],
                     targets=lambda a: [f"mailto:{a['to']}/invoice-{a['invoice']}"])
        def send_invoice(user, thread, to, invoice, body, delay_ms=0, timeout=10, attempt=None):
            return post(url, "send", {"to": to, "invoice": invoice, "body": body}, attempt.headers, delay_ms, timeout)

        try:
            send_invoice("u1", "t1", "reword@example.com", 42, "Your invoice 42 is attached.", delay_ms=800, timeout=0.2)
            first = "ran"
        except idem.OutcomeUnknown as e:
            first = e
        try:
            send_invoice("u1", "t1", "reword@example.com", 42, "Please find attached invoice 42.")
            second = "ran"
        except idem.TargetConflict as e:
            second = e
        k1 = getattr(first, "key", None)
        row = ledger.row("u1", k1) if k1 else None
        want = idem.say("conflict_unknown", tool="send_invoice", key=getattr(second, "key", None),
                        target="mailto:reword@example.com/invoice-42", held_tool="send_invoice", held_key=k1,
                        at=row and row["updated_at"])
        checks.report(isinstance(first, idem.OutcomeUnknown) and isinstance(second, idem.TargetConflict) and
                      second.key != k1 and count(k1) == 1 and count(second.key) == 0 and row["status"] == "unknown" and
                      ledger.row("u1", second.key) is None and getattr(second, "text", None) == want and
                      second.decision.differs == ["body", "delay_ms", "timeout"],
                      "reworded-after-timeout", f"{first!r} {second!r}: {getattr(second, 'text', None)!r}, want {want!r}")

        # killed mid-call (ledger "short": lease_seconds=1)
        before = sum(srv.counts()["keys"].values())
        (p,) = spawn_workers(1, db, url, "short", "killed@example.com", 5000)
        p.stdin.write("GO\n")
        p.stdin.flush()
        deadline = time.monotonic() + 10
        while sum(srv.counts()["keys"].values()) == before and time.monotonic() < deadline:
            time.sleep(0.02)
        p.send_signal(signal.SIGKILL)
        p.wait()
        time.sleep(1.1)
        short = idem.Ledger.open(db, "short", create=False)
        send_short, _ = tools(short, url)
        try:
            send_short("u1", "t1", "killed@example.com", delay_ms=5000)
            got = "ran"
        except idem.OutcomeUnknown as e:
            got = e
        checks.report(p.returncode == -signal.SIGKILL and isinstance(got, idem.OutcomeUnknown) and
                      got.decision is not None and count(got.key) == 1 and
                      sum(srv.counts()["keys"].values()) == before + 1, "killed", f"{p.returncode} {got!r}")
        short.close()

        # two tenants x two conversations
        outs = {(u, t): send_email(u, t, "same@example.com") for u in ("u1", "u2") for t in ("t1", "t2")}
        again = {(u, t): send_email(u, t, "same@example.com") for u in ("u1", "u2") for t in ("t1", "t2")}
        checks.report(len({o.key for o in outs.values()}) == 4 and all(not o.idempotent and count(o.key) == 1 for o in outs.values()) and
                      all(again[k].idempotent and again[k].result == outs[k].result for k in outs), "tenants",
                      f"{outs} {again}")

        # NotSent: released, the retry sends
        tries = []

        @ledger.tool("flaky", tenant="u1", conversation="t1")
        def flaky(to, attempt):
            tries.append(attempt.attempt)
            if len(tries) == 1:
                raise idem.NotSent("connection refused")
            return post(url, "flaky", {"to": to}, attempt.headers)
        try:
            flaky("x@example.com")
            first = "ran"
        except idem.NotSent as e:
            first = e
        second = flaky("x@example.com")
        checks.report(isinstance(first, idem.NotSent) and tries == [1, 2] and second.attempt == 2 and
                      count(second.key) == 1, "not-sent", f"{first!r} {tries} {second}")
        checks.check_eq("not-sent-text", getattr(first, "text", None),
                        "flaky was not sent: connection refused; nothing happened, so the call may be made again.")

        # ToolFailed: kept, replayed
        @ledger.tool("refused", tenant="u1", conversation="t1")
        async def refused(to):
            raise idem.ToolFailed({"status": 422, "to": to})
        a = asyncio.run(refused("r@example.com"))
        b, reads = counting_rows(ledger, lambda: asyncio.run(refused("r@example.com")))
        checks.report(a.status == "failed" and a.error == {"status": 422, "to": "r@example.com"} and b.idempotent and
                      b.error == a.error, "failed", f"{a} {b}")
        checks.report(a.text == idem.say("failed", tool="refused", key=a.key, attempt=1) and
                      b.text == idem.say("failed_replay", tool="refused", key=a.key, attempt=1,
                                         at=ledger.row("u1", a.key)["updated_at"]), "failed-text",
                      f"{a.text!r} {b.text!r}")
        checks.report(reads == 0 and b.settled_at == ledger.row("u1", a.key)["updated_at"], "failed-text-no-row-read",
                      f"{reads} row reads, settled_at {b.settled_at!r}")

        # the signature: attempt is the ledger's
        import inspect
        checks.check_eq("signature", str(inspect.signature(send_email)), "(user, thread, to, delay_ms=0, timeout=10)")
        try:
            send_email("u1", "t1", "x", attempt=1)
            got = "ran"
        except TypeError as e:
            got = str(e)
        checks.check_eq("attempt-given", got, "send_email: attempt is given by the ledger, not by the caller")

        # errors, each with its text; nothing runs
        def raised(fn):
            try:
                fn()
            except Exception as e:  # noqa: BLE001
                return f"{type(e).__name__}: {e}"
            return "did not raise"
        ran = []

        @ledger.tool("nobody", tenant=lambda a: a.get("user"), conversation=lambda a: a["thread"])
        def nobody(thread, user=None):
            ran.append(1)
            return 1

        @ledger.tool("broken", tenant="u1", conversation=lambda a: a["missing"])
        def broken(x):
            ran.append(1)
            return 1
        mem = idem.Ledger.open(":memory:")

        @mem.tool("mem", tenant="u1", conversation="t1")
        def in_memory(x):
            return x
        box = []
        th = threading.Thread(target=lambda: box.append(raised(lambda: in_memory(1))))
        th.start()
        th.join()
        got = [
            raised(lambda: nobody("t1")),
            raised(lambda: broken(1)),
            raised(lambda: ledger.tool("", tenant="u", conversation="c")),
            raised(lambda: ledger.tool("x", tenant="", conversation="c")),
            raised(lambda: ledger.tool("x", tenant="u", conversation=7)),
            raised(lambda: ledger.tool("x", tenant="u", conversation="c", wait=-1)),
            raised(lambda: asyncio.run(ledger.acall("u", "c", "x", {}, lambda a: 1, wait=True))),
            box[0],
        ]
        want = [
            "MissingPart: Ledger.tool: nobody: no tenant (it gave None); nothing was run",
            "MissingPart: Ledger.tool: broken: conversation raised KeyError: 'missing'; nothing was run",
            "ValueError: Ledger.tool: name must be a non-empty string, got ''",
            "ValueError: Ledger.tool: tenant must be a non-empty string or a function of the arguments, got ''",
            "ValueError: Ledger.tool: conversation must be a non-empty string or a function of the arguments, got 7",
            "ValueError: Ledger.tool: wait must be a number of seconds >= 0, got -1",
            "ValueError: Ledger.acall: wait must be a number of seconds >= 0, got True",
            "IdempotencyError: Ledger.tool: ledger ledger is not in a database file (it is in memory or temporary), so "
            "another thread cannot open it: call the tool on the thread that opened the ledger",
        ]
        for i, (g, w) in enumerate(zip(got, want)):
            checks.check_eq(f"error-{i + 1}", g, w)
        checks.check_eq("errors-ran-nothing", ran, [])
        # a missing part is a ValueError with the words the model reads
        from sqlite_idempotency.tools import MissingPart
        try:
            broken(1)
            got = "ran"
        except ValueError as e:
            got = (isinstance(e, MissingPart), e.decision, e.text)
        checks.check_eq("missing-part-text", got, (True, "no_conversation",
                        "broken was not run: no conversation for this call (conversation raised KeyError: 'missing'); "
                        "the application must supply it, and nothing was sent. Do not call broken again until it does."))
        mem.close()

        # say()'s targets: a list of strings joined by ", ", left out when empty, refused otherwise
        fields = dict(tool="t", key="k", attempt=1)
        got = [idem.say("unknown", fields, targets=["mailto:a", "mailto:b"]), idem.say("unknown", fields, targets=[])]
        try:
            idem.say("unknown", fields, targets="mailto:a")
        except TypeError as e:
            got.append(str(e))
        checks.check_eq("say-targets", got, [
            idem.say("unknown", fields).replace("again for this,", "again for this or for mailto:a, mailto:b,"),
            idem.say("unknown", fields),
            "sqlite_idempotency: say: targets must be a list of strings, got 'mailto:a'"])

        # acall with a plain function and a coroutine function
        async def both():
            x = await ledger.acall("u1", "t1", "acall", {"n": 1}, lambda att: {"sync": att.attempt})
            y = await ledger.acall("u1", "t1", "acall", {"n": 2}, lambda att: asyncio.sleep(0, {"async": att.attempt}))
            z = await ledger.acall("u1", "t1", "acall", {"n": 1}, lambda att: {"sync": "again"})
            return x, y, z
        x, y, z = asyncio.run(both())
        checks.report(x.result == {"sync": 1} and y.result == {"async": 1} and z.idempotent and z.result == {"sync": 1},
                      "acall", f"{x} {y} {z}")
    finally:
        ledger.close()
        srv.stop()
    return checks.status()


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        worker(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], int(sys.argv[6]))
        sys.exit(0)
    sys.exit(main())
