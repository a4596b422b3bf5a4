"""The Python adapter (idem_adapter.py over the installed sqlite_idempotency
wheel) against the local target (test_server.py).

Usage: VENV_PYTHON test_adapter_py.py      (a virtual environment into which
the wheel of `make dist` was installed; tests/suites/63-packages.sh makes it)

  installed   sqlite_idempotency comes from the environment, not the tree
  header      the target received the key as an sf-string Idempotency-Key
  success     a first call: the target answered, settled succeeded
  replay      a second arrival (also spelled differently) returns the same
              shape with "idempotent" true; the target saw the key once
  tenants     another tenant with the same arguments is another key
  timeout     the client times out: OutcomeUnknown, the row is unknown, a
              later call raises OutcomeUnknown too and sends nothing
  http-5xx    the target answers 500: unknown, never resent
  refused     connection refused: NotSent, the row is released with
              {"sent": false}; a retry is admitted (attempt 2) and sent once
  http-4xx    the target refuses: an Outcome "failed", replayed as failed
  stalled     a holder whose lease expired before it sent, while the key
              was resolved released and sent by another caller: renew
              tells it (LeaseLost) and it sends nothing; the target saw
              the key once
  concurrent  12 processes on 2 keys at once, each waiting while another
              holds the key: one call per key ran, the rest are replays
              of the same result; the target saw each key once

Prints PASS/FAIL lines; exit status 1 when a check failed.
"""
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, HERE)
import sqlite_idempotency  # noqa: E402
from sqlite_idempotency import LeaseLost, NotSent, OutcomeUnknown  # noqa: E402
from idem_adapter import IdemAdapter  # noqa: E402
import test_server  # noqa: E402
from checks import Checks  # noqa: E402

PREFIX = "adapters.python"
TENANT, CONV = "tenant-a", "conv-1"
checks = Checks(PREFIX)
report = checks.report


def worker(db_path, url, args_json):
    """One concurrent caller: says READY, calls on GO, waiting while in progress."""
    idem = IdemAdapter(db_path, create=False)
    args = json.loads(args_json)
    print("READY", flush=True)
    if sys.stdin.readline().strip() != "GO":
        return 1
    out = idem.call_http_tool(TENANT, CONV, "send_email", args, url, timeout=5, wait=20)
    print(json.dumps(out.to_dict()), flush=True)
    return 0


def main():
    if len(sys.argv) == 5 and sys.argv[1] == "--worker":
        return worker(*sys.argv[2:5])
    if len(sys.argv) != 1:
        print(f"usage: {sys.argv[0]}", file=sys.stderr)
        return 2
    tmp = tempfile.mkdtemp(prefix="idem-adapter-py-")
    srv = test_server.start()
    try:
        run(os.path.join(tmp, "agent.db"), srv)
    except Exception as e:  # noqa: BLE001
        report(False, "unexpected", f"{type(e).__name__}: {e}")
    finally:
        srv.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    return checks.status()


def expect_raise(cls, fn):
    """The exception fn raises, if it is a cls; else (None, what happened)."""
    try:
        got = fn()
    except cls as e:
        return e, None
    except Exception as e:  # noqa: BLE001
        return None, f"raised {type(e).__name__}: {e}"
    return None, f"returned {got!r}"


def run(db_path, srv):
    base = f"http://127.0.0.1:{srv.port}"
    project = os.path.dirname(os.path.dirname(HERE))
    mod = os.path.realpath(sqlite_idempotency.__file__)
    report(mod.startswith(os.path.realpath(sys.prefix) + os.sep) and not mod.startswith(project + os.sep),
           "installed", f"sqlite_idempotency from {mod}, want under {sys.prefix}")
    idem = IdemAdapter(db_path)
    send = base + "/send"

    # --- success, header, replay --------------------------------------------
    args = {"to": "a@example.com", "subject": "hi", "n": 1}
    first = idem.call_http_tool(TENANT, CONV, "send_email", args, send)
    key = first.key
    report(first.status == "succeeded" and first.idempotent is False and first.attempt == 1
           and first.result.get("received") == key and first.result.get("n") == 1
           and first.result.get("body") == args, "success", f"got {first!r}")
    c = srv.counts()
    report(c["keys"] == {key: 1} and c["missing"] == 0 and not c["malformed"], "header",
           f"target saw {c!r}, want the key {key} once as an sf-string")
    again = idem.call_http_tool(TENANT, CONV, "send_email", args, send)
    respelled = idem.call_http_tool(TENANT, CONV, "send_email",
                                    {"n": 1.0, "subject": "hi", "to": "a@example.com"}, send)
    shape = {k: v for k, v in first.to_dict().items() if k != "idempotent"}
    report(again.idempotent is True and {k: v for k, v in again.to_dict().items() if k != "idempotent"} == shape
           and respelled.idempotent is True and respelled.key == key and srv.counts()["keys"].get(key) == 1,
           "replay", f"got {again!r} / {respelled!r} after {first!r}; target saw {srv.counts()['keys'].get(key)}")

    other = idem.call_http_tool("tenant-b", CONV, "send_email", args, send)
    report(other.idempotent is False and other.key != key
           and srv.counts()["keys"].get(other.key) == 1 and srv.counts()["keys"].get(key) == 1,
           "tenants", f"got {other!r}")

    # --- timeout: unknown, never retried ----------------------------------------
    targs = {"to": "slow@example.com"}
    t0 = time.monotonic()
    e, why = expect_raise(OutcomeUnknown, lambda: idem.call_http_tool(
        TENANT, CONV, "send_email", targs, base + "/send?delay_ms=1500", timeout=0.3))
    tkey = e.key if e else None
    row = idem.ledger.row(TENANT, tkey) if e else None
    report(e is not None and e.reason == "timeout" and time.monotonic() - t0 < 1.4 and row
           and row["status"] == "unknown" and row["error"] == {"reason": "timeout", "timeout_s": 0.3},
           "timeout", why or f"reason {e.reason}, row {row}")
    later = [expect_raise(OutcomeUnknown, lambda: idem.call_http_tool(TENANT, CONV, "send_email", targs, send))
             for _ in range(2)]
    report(all(x[0] is not None and x[0].key == tkey and x[0].decision is not None
               and "nothing is retried here" in x[0].decision.message for x in later)
           and srv.counts()["keys"].get(tkey) == 1,
           "timeout-not-retried", f"got {later!r}; target saw {srv.counts()['keys'].get(tkey)}")

    s5 = {"to": "five-hundred@example.com"}
    e, why = expect_raise(OutcomeUnknown, lambda: idem.call_http_tool(TENANT, CONV, "send_email", s5,
                                                                      base + "/send?status=503"))
    e2, why2 = expect_raise(OutcomeUnknown, lambda: idem.call_http_tool(TENANT, CONV, "send_email", s5, send))
    row = idem.ledger.row(TENANT, e.key) if e else None
    report(e is not None and e.reason == "http 503" and row and row["status"] == "unknown"
           and row["error"]["reason"] == "http 503" and row["error"]["body"]["n"] == 1
           and e2 is not None and srv.counts()["keys"].get(e.key) == 1,
           "http-5xx-unknown", why or why2 or f"row {row}")

    # --- connection refused: released, retried ---------------------------------
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))  # bound, never listening: connect is refused
    rargs = {"to": "retry@example.com"}
    try:
        e, why = expect_raise(NotSent, lambda: idem.call_http_tool(
            TENANT, CONV, "send_email", rargs, f"http://127.0.0.1:{closed.getsockname()[1]}/send"))
    finally:
        closed.close()
    rkey = e.key if e else None
    row = idem.ledger.row(TENANT, rkey) if e else None
    report(e is not None and row and row["status"] == "released" and row["error"]["sent"] is False
           and row["error"]["reason"].startswith("connect: ") and rkey not in srv.counts()["keys"],
           "refused", why or f"row {row}")
    retry = idem.call_http_tool(TENANT, CONV, "send_email", rargs, send)
    report(retry.idempotent is False and retry.attempt == 2 and retry.key == rkey
           and retry.status == "succeeded" and srv.counts()["keys"].get(rkey) == 1,
           "refused-retry-admitted", f"got {retry!r}")

    # --- 4xx: a known failure, replayed ------------------------------------------
    fargs = {"to": "bounce@example.com"}
    f1 = idem.call_http_tool(TENANT, CONV, "send_email", fargs, base + "/send?status=422")
    f2 = idem.call_http_tool(TENANT, CONV, "send_email", fargs, send)
    report(f1.status == "failed" and f1.idempotent is False and f1.error["status"] == 422
           and f2.status == "failed" and f2.idempotent is True and f2.error == f1.error
           and srv.counts()["keys"].get(f1.key) == 1,
           "http-4xx-failed", f"got {f1!r} / {f2!r}")

    # --- a stalled holder learns from renew that the key moved on -------------
    # Its lease (1 s) expires between its claim and its send; meanwhile the
    # key is resolved released and sent by another caller (attempt 2).
    sidem = IdemAdapter(db_path, ledger="short", options={"lease_seconds": 1})
    other = IdemAdapter(db_path, ledger="short", create=False)
    sargs = {"to": "stalled@example.com"}
    skey = sidem.ledger.conn.execute("SELECT idem_key(?, ?, ?, ?)",
                                     (TENANT, CONV, "send_email", json.dumps(sargs))).fetchone()[0]
    took = []
    renew = sidem.ledger.renew

    def stalled_renew(token, seconds=None):
        time.sleep(1.2)
        other.ledger.resolve(TENANT, skey, "released", {"sent": False, "reason": "reconciled: never arrived"})
        took.append(other.call_http_tool(TENANT, CONV, "send_email", sargs, send))
        return renew(token, seconds)

    sidem.ledger.renew = stalled_renew
    e, why = expect_raise(LeaseLost, lambda: sidem.call_http_tool(TENANT, CONV, "send_email", sargs, send))
    report(e is not None and took and took[0].attempt == 2 and took[0].result.get("n") == 1
           and srv.counts()["keys"].get(skey) == 1, "stalled-holder-does-not-send",
           why or f"{e!r}; second caller {took!r}; target saw {srv.counts()['keys'].get(skey)}")
    sidem.close()
    other.close()

    # --- concurrent callers, each waiting while another holds the key ---------
    n_per_key = 6
    procs = []
    for i in range(2 * n_per_key):
        cargs = json.dumps({"to": f"race{i % 2}@example.com"})
        procs.append(subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--worker", db_path, base + "/send?delay_ms=300", cargs],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    # A start barrier: every worker has opened its connection before any claims.
    ready = [p.stdout.readline().strip() == "READY" for p in procs]
    for p in procs:
        try:
            p.stdin.write("GO\n" if all(ready) else "STOP\n")
            p.stdin.close()
        except OSError:
            pass
        p.stdin = None  # closed: communicate() must not flush it
    outs = []
    for p in procs:
        try:
            o, e = p.communicate(timeout=40)
        except subprocess.TimeoutExpired:
            p.kill()
            o, e = p.communicate()
        outs.append((p.returncode, o, e))
    bad = [(rc, e.strip()[-300:]) for rc, o, e in outs if rc != 0 or not o.strip()]
    if bad:
        report(False, "concurrent", f"workers failed: {bad}")
        return
    results = [json.loads(o.strip().splitlines()[-1]) for rc, o, e in outs]
    by_key = {}
    for r in results:
        by_key.setdefault(r["key"], []).append(r)
    counts = srv.counts()["keys"]
    problems = []
    if len(by_key) != 2:
        problems.append(f"{len(by_key)} keys, want 2")
    for k, rs in by_key.items():
        ran = [r for r in rs if r["idempotent"] is False]
        if len(ran) != 1:
            problems.append(f"{k}: {len(ran)} calls ran, want 1")
        if len({json.dumps(r["result"], sort_keys=True) for r in rs}) != 1 or any(r["status"] != "succeeded" for r in rs):
            problems.append(f"{k}: outcomes differ: {rs}")
        if counts.get(k) != 1:
            problems.append(f"{k}: the target saw it {counts.get(k)} times")
    print(f"   {PREFIX}: concurrent: {len(results)} callers on 2 keys, "
          f"{sum(1 for r in results if r['idempotent'])} replays", flush=True)
    report(not problems, "concurrent", "; ".join(problems))

    c = srv.counts()
    report(all(v == 1 for v in c["keys"].values()) and c["missing"] == 0 and not c["malformed"],
           "each-key-once", f"target saw {c!r}")
    idem.close()


if __name__ == "__main__":
    sys.exit(main())
