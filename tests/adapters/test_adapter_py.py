#!/usr/bin/python3
"""The Python adapter (idem_adapter.py) against the local target (test_server.py).

Usage: test_adapter_py.py EXTENSION_PATH     (Debian's /usr/bin/python3)

  header      the target received the key as an sf-string Idempotency-Key
  success     admitted, the target answered, settled succeeded
  replay      a second arrival (also spelled differently) replays the first
              outcome, "idempotent": true; the target saw the key once
  tenants     another tenant with the same arguments is another key
  timeout     the client times out: OutcomeUnknown, the row is unknown, a
              later call returns decision unknown and sends nothing
  refused     connection refused: NotSent, the row is released with
              {"sent": false}; a retry is admitted (attempt 2) and sent once
  http-4xx    the target refuses: settled failed, replayed as failed
  concurrent  12 processes on 2 keys at once, retrying while in_progress:
              exactly one admitted per key, the rest in_progress or replay,
              all end with the same result; the target saw each key once

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
from idem_adapter import IdemAdapter, NotSent, OutcomeUnknown  # noqa: E402
import test_server  # noqa: E402

PREFIX = "adapters.python"
TENANT, CONV = "tenant-a", "conv-1"
failures = 0


def report(ok, name, why=""):
    global failures
    if ok:
        print(f"PASS {PREFIX}:{name}", flush=True)
    else:
        failures += 1
        print(f"FAIL {PREFIX}:{name}: " + str(why).replace("\n", " "), flush=True)


def worker(ext, db_path, url, args_json):
    """One concurrent caller: says READY, claims on GO, retries while in_progress."""
    idem = IdemAdapter(db_path, ext, create=False)
    args = json.loads(args_json)
    print("READY", flush=True)
    if sys.stdin.readline().strip() != "GO":
        return 1
    seen = []
    out = None
    for _ in range(200):  # bounded: 200 x 25 ms
        out = idem.call_http_tool(TENANT, CONV, "send_email", args, url, timeout=5)
        seen.append(out["decision"])
        if out["decision"] != "in_progress":
            break
        time.sleep(0.025)
    print(json.dumps({"seen": seen, "final": out}), flush=True)
    return 0


def row(idem, key):
    """(status, error, attempt) of a key as the ledger shows it (effective status)."""
    r = idem.db.execute("SELECT status, error, attempt FROM ledger WHERE tenant = ? AND key = ?",
                        (TENANT, key)).fetchone()
    return (r[0], json.loads(r[1]) if r[1] else None, r[2]) if r else None


def main():
    if len(sys.argv) == 6 and sys.argv[1] == "--worker":
        return worker(*sys.argv[2:6])
    if len(sys.argv) != 2:
        print(f"usage: {sys.argv[0]} EXTENSION_PATH", file=sys.stderr)
        return 2
    ext = os.path.abspath(sys.argv[1])
    tmp = tempfile.mkdtemp(prefix="idem-adapter-py-")
    srv = test_server.start()
    try:
        run(ext, os.path.join(tmp, "agent.db"), srv)
    except Exception as e:  # noqa: BLE001
        report(False, "unexpected", f"{type(e).__name__}: {e}")
    finally:
        srv.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    return 1 if failures else 0


def run(ext, db_path, srv):
    base = f"http://127.0.0.1:{srv.port}"
    idem = IdemAdapter(db_path, ext)

    # --- success, header, replay --------------------------------------------
    args = {"to": "a@example.com", "subject": "hi", "n": 1}
    first = idem.call_http_tool(TENANT, CONV, "send_email", args, base + "/send")
    key = first.get("key")
    report(first.get("decision") == "admitted" and first.get("status") == "succeeded"
           and first.get("result", {}).get("received") == key and first["result"].get("n") == 1
           and first["result"].get("body") == args,
           "success", f"got {first!r}")
    c = srv.counts()
    report(c["keys"] == {key: 1} and c["missing"] == 0 and not c["malformed"], "header",
           f"target saw {c!r}, want the key {key} once as an sf-string")
    again = idem.call_http_tool(TENANT, CONV, "send_email", args, base + "/send")
    respelled = idem.call_http_tool(TENANT, CONV, "send_email",
                                    {"n": 1.0, "subject": "hi", "to": "a@example.com"}, base + "/send")
    report(again.get("decision") == "replay" and again.get("idempotent") is True
           and again.get("result") == first.get("result") and respelled.get("decision") == "replay"
           and respelled.get("key") == key and srv.counts()["keys"].get(key) == 1,
           "replay", f"got {again!r} / {respelled!r}; target saw {srv.counts()['keys'].get(key)}")

    other = idem.call_http_tool("tenant-b", CONV, "send_email", args, base + "/send")
    report(other.get("decision") == "admitted" and other.get("key") != key
           and srv.counts()["keys"].get(other.get("key")) == 1 and srv.counts()["keys"].get(key) == 1,
           "tenants", f"got {other!r}")

    # --- timeout: unknown, never retried --------------------------------------
    targs = {"to": "slow@example.com"}
    t0 = time.monotonic()
    try:
        got = idem.call_http_tool(TENANT, CONV, "send_email", targs, base + "/send?delay_ms=1500",
                                  timeout=0.3)
        report(False, "timeout", f"no timeout; returned {got!r}")
        tkey = got.get("key")
    except OutcomeUnknown as e:
        tkey = e.key
        st = row(idem, tkey)
        report(e.reason == "timeout" and time.monotonic() - t0 < 1.4 and st and st[0] == "unknown"
               and st[1] == {"reason": "timeout", "timeout_s": 0.3},
               "timeout", f"reason {e.reason}, row {st}")
    later = idem.call_http_tool(TENANT, CONV, "send_email", targs, base + "/send")
    later2 = idem.call_http_tool(TENANT, CONV, "send_email", targs, base + "/send")
    report(later.get("decision") == "unknown" and later2.get("decision") == "unknown"
           and "nothing is retried here" in later.get("message", "")
           and srv.counts()["keys"].get(tkey) == 1,
           "timeout-not-retried", f"got {later!r}; target saw {srv.counts()['keys'].get(tkey)}")

    # --- connection refused: released, retried ------------------------------
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))  # bound, never listening: connect is refused
    try:
        rargs = {"to": "retry@example.com"}
        try:
            got = idem.call_http_tool(TENANT, CONV, "send_email", rargs,
                                      f"http://127.0.0.1:{closed.getsockname()[1]}/send")
            report(False, "refused", f"no error; returned {got!r}")
            rkey = got.get("key")
        except NotSent as e:
            rkey = e.key
            st = row(idem, rkey)
            report(st and st[0] == "released" and st[1].get("sent") is False and rkey not in srv.counts()["keys"],
                   "refused", f"row {st}")
    finally:
        closed.close()
    retry = idem.call_http_tool(TENANT, CONV, "send_email", rargs, base + "/send")
    report(retry.get("decision") == "admitted" and retry.get("attempt") == 2 and retry.get("key") == rkey
           and retry.get("status") == "succeeded" and srv.counts()["keys"].get(rkey) == 1,
           "refused-retry-admitted", f"got {retry!r}")

    # --- 4xx: a known failure, replayed ----------------------------------------
    fargs = {"to": "bounce@example.com"}
    f1 = idem.call_http_tool(TENANT, CONV, "send_email", fargs, base + "/send?status=422")
    f2 = idem.call_http_tool(TENANT, CONV, "send_email", fargs, base + "/send")
    report(f1.get("status") == "failed" and f1.get("error", {}).get("status") == 422
           and f2.get("decision") == "replay" and f2.get("status") == "failed"
           and f2.get("error") == f1.get("error") and srv.counts()["keys"].get(f1.get("key")) == 1,
           "http-4xx-failed", f"got {f1!r} / {f2!r}")

    # --- concurrent callers, each retrying while in_progress -------------------
    n_per_key = 6
    procs = []
    for i in range(2 * n_per_key):
        cargs = json.dumps({"to": f"race{i % 2}@example.com"})
        procs.append(subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--worker", ext, db_path,
             base + "/send?delay_ms=300", cargs],
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
            o, e = p.communicate(timeout=30)
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
        by_key.setdefault(r["final"].get("key"), []).append(r)
    counts = srv.counts()["keys"]
    problems = []
    if len(by_key) != 2:
        problems.append(f"{len(by_key)} keys, want 2")
    for k, rs in by_key.items():
        firsts = [r["seen"][0] for r in rs]
        admitted = firsts.count("admitted")
        if admitted != 1 or any(f not in ("admitted", "in_progress", "replay") for f in firsts):
            problems.append(f"{k}: first decisions {firsts}")
        finals = {json.dumps(r["final"].get("result"), sort_keys=True) for r in rs}
        if len(finals) != 1 or any(r["final"]["decision"] not in ("admitted", "replay") for r in rs):
            problems.append(f"{k}: final outcomes differ: {[r['final'] for r in rs]}")
        if counts.get(k) != 1:
            problems.append(f"{k}: the target saw it {counts.get(k)} times")
    in_progress_seen = sum(r["seen"].count("in_progress") for r in results)
    firsts = [r["seen"][0] for r in results]
    print(f"   {PREFIX}: concurrent: {len(results)} callers on 2 keys, first decisions "
          + ", ".join(f"{d}={firsts.count(d)}" for d in sorted(set(firsts)))
          + f"; in_progress answered {in_progress_seen} times in all", flush=True)
    report(not problems, "concurrent",
           "; ".join(problems) + f" (in_progress seen {in_progress_seen} times)")

    c = srv.counts()
    report(all(v == 1 for v in c["keys"].values()) and c["missing"] == 0 and not c["malformed"],
           "each-key-once", f"target saw {c!r}")
    idem.close()


if __name__ == "__main__":
    sys.exit(main())
