#!/usr/bin/python3
"""Guards from Python's sqlite3 (Debian's /usr/bin/python3), on a database file.

  fail closed   a guard installed with the extension; a second connection
                WITHOUT the extension cannot insert into the guarded table
                ("no such function: idem_guard_check"), yet can read it and
                run integrity_check
  crash         a child process runs BEGIN IMMEDIATE, claim, inserts rows,
                then os._exit(9) before COMMIT; afterwards neither rows nor
                claim exist, integrity_check is ok, and the retry is admitted
  concurrency   several processes run the exactly-once recipe for the same
                key at once: one set of rows; the others replay (or see
                in_progress)

Prints one line per check: PASS <name> / FAIL <name>: <why> / SKIP <name>: <why>.
The extension path comes from $EXT (default build/idempotency.so). A
sanitizer build (under build/asan) cannot be loaded by an uninstrumented
python; then build/idempotency.so is used if present, else everything skips.
Exit status 1 when a check failed.
"""
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from idemtest import Checks, load_ext, one, resolve_ext  # noqa: E402

PREFIX = "guard-python"
checks = Checks(PREFIX)
report, check_eq = checks.report, checks.check_eq


def connect(path, ext, timeout_ms=20000):
    db = sqlite3.connect(path, isolation_level=None, timeout=timeout_ms / 1000)
    if ext:
        load_ext(db, ext)
    db.execute(f"PRAGMA busy_timeout={timeout_ms}")
    return db


SCHEMA = """
CREATE VIRTUAL TABLE ledger USING idempotency(lease_seconds=300);
CREATE TABLE orders(id INTEGER PRIMARY KEY, tenant, op_key, claim_token, item);
CREATE TABLE "order lines"(id INTEGER PRIMARY KEY, tenant, op_key, n);
"""


def make_db(path, ext, journal="wal"):
    db = connect(path, ext)
    db.execute(f"PRAGMA journal_mode={journal}")
    db.execute("PRAGMA synchronous=FULL")
    db.executescript(SCHEMA)
    db.execute("SELECT idem_guard('ledger', 'orders', 'op_key', 'tenant', 'claim_token')")
    db.execute("SELECT idem_guard('ledger', 'order lines', 'op_key', 'tenant')")
    return db


def recipe(db, tenant, conv, tool, args, pause=0.0):
    """The exactly-once local recipe in one transaction; returns the decision."""
    db.execute("BEGIN IMMEDIATE")
    try:
        d = json.loads(one(db, "SELECT idem_claim('ledger', ?, ?, ?, ?, 'local')",
                           (tenant, conv, tool, json.dumps(args))))
        if d["decision"] == "admitted":
            db.execute("INSERT INTO orders(tenant, op_key, claim_token, item) VALUES (?, ?, ?, ?)",
                       (tenant, d["key"], d["token"], args.get("item")))
            if pause:
                time.sleep(pause)
            for n in (1, 2):
                db.execute('INSERT INTO "order lines"(tenant, op_key, n) VALUES (?, ?, ?)',
                           (tenant, d["key"], n))
            s = json.loads(one(db, "SELECT idem_settle('ledger', ?, 'succeeded', ?)",
                               (d["token"], json.dumps({"pid": os.getpid()}))))
            d["settled_members"] = s["members"]
        db.execute("COMMIT")
        return d
    except BaseException:
        db.execute("ROLLBACK")
        raise


# ---------------------------------------------------------------------------
# child modes (run by subprocess)
# ---------------------------------------------------------------------------

def child_crash(path, ext):
    db = connect(path, ext)
    db.execute("BEGIN IMMEDIATE")
    d = json.loads(one(db, "SELECT idem_claim('ledger', 't1', 'c1', 'create_order', ?, 'local')",
                       (json.dumps({"item": "crash"}),)))
    assert d["decision"] == "admitted", d
    db.execute("INSERT INTO orders(tenant, op_key, claim_token, item) VALUES ('t1', ?, ?, 'crash')",
               (d["key"], d["token"]))
    db.execute('INSERT INTO "order lines"(tenant, op_key, n) VALUES (\'t1\', ?, 1)', (d["key"],))
    print(json.dumps({"key": d["key"], "token": d["token"],
                      "rows": one(db, "SELECT count(*) FROM orders")}), flush=True)
    os._exit(9)  # no COMMIT, no ROLLBACK, no close


def child_worker(path, ext, start_at, mode):
    db = connect(path, ext, timeout_ms=60000)
    while time.time() < start_at:
        time.sleep(0.001)
    args = {"item": "race"}
    try:
        d = worker_run(db, mode, args)
    except sqlite3.Error as e:
        # reported by the parent: an error is neither a replay nor in_progress
        d = {"decision": "error", "message": str(e)}
    print(json.dumps(d), flush=True)
    db.close()


def worker_run(db, mode, args):
    if mode == "recipe":
        d = recipe(db, "t1", "c1", "create_order", args, pause=0.02)
    else:
        # claim autocommitted first, then the rows, then the settle: the
        # others arrive while the claim is live and must not run
        d = json.loads(one(db, "SELECT idem_claim('ledger', 't1', 'c2', 'create_order', ?, 'local')",
                           (json.dumps(args),)))
        if d["decision"] == "admitted":
            time.sleep(0.3)
            db.execute("BEGIN IMMEDIATE")
            db.execute("INSERT INTO orders(tenant, op_key, claim_token, item) VALUES ('t1', ?, ?, 'race2')",
                       (d["key"], d["token"]))
            s = json.loads(one(db, "SELECT idem_settle('ledger', ?, 'succeeded', '{}')", (d["token"],)))
            db.execute("COMMIT")
            d["settled_members"] = s["members"]
    return d


# ---------------------------------------------------------------------------
# the checks
# ---------------------------------------------------------------------------

def test_fail_closed(tmp, ext):
    path = os.path.join(tmp, "closed.db")
    db = make_db(path, ext, journal="delete")
    db.execute("SELECT idem_claim('ledger', 't1', 'c1', 'create_order', '{}', 'local', 'op-1')")
    tok = one(db, "SELECT token FROM ledger WHERE key = 'op-1'")
    db.execute("INSERT INTO orders(tenant, op_key, claim_token, item) VALUES ('t1', 'op-1', ?, 'a')", (tok,))
    db.close()

    bare = connect(path, None)  # no extension
    for name, sql, params in (
        ("fail-closed-no-claim", "INSERT INTO orders(tenant, op_key, claim_token, item) VALUES ('t1', 'op-9', NULL, 'x')", ()),
        ("fail-closed-live-claim", "INSERT INTO orders(tenant, op_key, claim_token, item) VALUES ('t1', 'op-1', ?, 'x')", (tok,)),
        ("fail-closed-or-ignore", "INSERT OR IGNORE INTO orders(tenant, op_key, claim_token, item) VALUES ('t1', 'op-1', ?, 'x')", (tok,)),
        ("fail-closed-or-replace", "INSERT OR REPLACE INTO orders(id, tenant, op_key, claim_token, item) VALUES (1, 't1', 'op-1', ?, 'x')", (tok,)),
        ("fail-closed-second-table", 'INSERT INTO "order lines"(tenant, op_key, n) VALUES (\'t1\', \'op-1\', 1)', ()),
    ):
        try:
            bare.execute(sql, params)
            report(False, name, "the insert succeeded without the extension")
        except sqlite3.Error as e:
            check_eq(name, str(e), "no such function: idem_guard_check")
    check_eq("fail-closed-no-row-written", one(bare, "SELECT count(*) FROM orders"), 1)
    check_eq("fail-closed-row-kept", one(bare, "SELECT item FROM orders WHERE id = 1"), "a")
    # the update trigger is plain SQL: it still freezes the key without the extension
    try:
        bare.execute("UPDATE orders SET op_key = 'op-2'")
        report(False, "fail-closed-update-key-frozen", "the update succeeded")
    except sqlite3.Error as e:
        check_eq("fail-closed-update-key-frozen", str(e),
                 "idem_guard: the rowid and the key, tenant and token columns of a guarded table cannot be updated")
    try:
        bare.execute("UPDATE orders SET item = 'edited'")
        report(True, "fail-closed-update-other-column")
    except sqlite3.Error as e:
        report(False, "fail-closed-update-other-column", e)
    check_eq("fail-closed-integrity", one(bare, "PRAGMA integrity_check"), "ok")
    # the ledger's virtual table itself is unusable without the module
    try:
        bare.execute("SELECT count(*) FROM ledger").fetchone()
        report(False, "fail-closed-ledger-needs-module", "the ledger was readable without the module")
    except sqlite3.Error as e:
        check_eq("fail-closed-ledger-needs-module", str(e), "no such module: idempotency")
    bare.close()

    # and with the extension loaded again, the guard admits under the claim
    db = connect(path, ext)
    try:
        db.execute("INSERT INTO orders(tenant, op_key, claim_token, item) VALUES ('t1', 'op-1', ?, 'b')", (tok,))
        report(True, "fail-closed-reload-admits")
    except sqlite3.Error as e:
        report(False, "fail-closed-reload-admits", e)
    db.close()


def test_crash(tmp, ext, journal):
    path = os.path.join(tmp, f"crash-{journal}.db")
    make_db(path, ext, journal=journal).close()
    p = subprocess.run([sys.executable, __file__, "--child-crash", path, ext],
                       capture_output=True, text=True, timeout=120)
    name = f"crash-{journal}"
    if p.returncode != 9:
        report(False, f"{name}:child-exit", f"status {p.returncode}, stderr {p.stderr.strip()!r}")
        return
    report(True, f"{name}:child-exit")
    info = json.loads(p.stdout.strip().splitlines()[-1])
    check_eq(f"{name}:child-wrote-before-crash", info["rows"], 1)
    db = connect(path, ext)
    check_eq(f"{name}:integrity", one(db, "PRAGMA integrity_check"), "ok")
    check_eq(f"{name}:no-rows", (one(db, "SELECT count(*) FROM orders"),
                                  one(db, 'SELECT count(*) FROM "order lines"')), (0, 0))
    check_eq(f"{name}:no-claim", one(db, "SELECT count(*) FROM ledger"), 0)
    check_eq(f"{name}:no-claim-shadow", one(db, "SELECT count(*) FROM ledger_rows"), 0)
    try:
        db.execute("INSERT INTO orders(tenant, op_key, claim_token, item) VALUES ('t1', ?, ?, 'stale')",
                   (info["key"], info["token"]))
        report(False, f"{name}:crashed-token-admits-nothing", "the crashed attempt's token was accepted")
    except sqlite3.Error as e:
        report(str(e).startswith('idem_guard: insert into "orders" refused: key "'), f"{name}:crashed-token-admits-nothing", e)
    d = recipe(db, "t1", "c1", "create_order", {"item": "crash"})
    check_eq(f"{name}:retry-admitted", (d["decision"], d["attempt"], d["key"]), ("admitted", 1, info["key"]))
    check_eq(f"{name}:retry-rows", (one(db, "SELECT count(*) FROM orders"),
                                     one(db, 'SELECT count(*) FROM "order lines"')), (1, 2))
    r = json.loads(one(db, "SELECT idem_claim('ledger', 't1', 'c1', 'create_order', ?, 'local')",
                       (json.dumps({"item": "crash"}),)))
    check_eq(f"{name}:then-replay", (r["decision"], r["members"]), ("replay", d["settled_members"]))
    check_eq(f"{name}:integrity-after", one(db, "PRAGMA integrity_check"), "ok")
    db.close()


def test_concurrency(tmp, ext, mode, n=6):
    path = os.path.join(tmp, f"race-{mode}.db")
    make_db(path, ext).close()
    start_at = time.time() + 1.0
    procs = [subprocess.Popen([sys.executable, __file__, "--child-worker", path, ext, repr(start_at), mode],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(n)]
    outs = []
    ok = True
    for p in procs:
        out, err = p.communicate(timeout=180)
        if p.returncode != 0:
            ok = False
            report(False, f"race-{mode}:worker", f"status {p.returncode}: {err.strip()[-300:]!r}")
        else:
            outs.append(json.loads(out.strip().splitlines()[-1]))
    if ok:
        report(True, f"race-{mode}:workers")
    decisions = sorted(d["decision"] for d in outs)
    admitted = [d for d in outs if d["decision"] == "admitted"]
    check_eq(f"race-{mode}:one-admitted", len(admitted), 1)
    allowed = {"admitted", "replay", "in_progress"}
    errors = sorted({d["message"] for d in outs if d["decision"] == "error"})
    report(set(decisions) <= allowed, f"race-{mode}:others-replay-or-in-progress",
           f"decisions {decisions}; errors {errors}")
    db = connect(path, ext)
    want_orders, want_lines = (1, 2) if mode == "recipe" else (1, 0)
    check_eq(f"race-{mode}:one-set-of-rows", (one(db, "SELECT count(*) FROM orders"),
                                              one(db, 'SELECT count(*) FROM "order lines"')),
             (want_orders, want_lines))
    check_eq(f"race-{mode}:one-ledger-row", one(db, "SELECT count(*) || '/' || max(status) || '/' || max(attempt) FROM ledger"),
             "1/succeeded/1")
    if admitted:
        members = admitted[0].get("settled_members")
        replays = [d for d in outs if d["decision"] == "replay"]
        report(all(d["members"] == members for d in replays), f"race-{mode}:replays-carry-members",
               f"members {members}, replays {[d.get('members') for d in replays]}")
        key = admitted[0]["key"]
        check_eq(f"race-{mode}:rows-carry-the-key",
                 one(db, "SELECT count(*) FROM orders WHERE op_key <> ?", (key,)), 0)
        # a late arrival after everything: a replay with the same members
        tool_conv = ("c1" if mode == "recipe" else "c2")
        r = json.loads(one(db, "SELECT idem_claim('ledger', 't1', ?, 'create_order', ?, 'local')",
                           (tool_conv, json.dumps({"item": "race"}))))
        check_eq(f"race-{mode}:late-arrival-replays", (r["decision"], r["members"]), ("replay", members))
    check_eq(f"race-{mode}:integrity", one(db, "PRAGMA integrity_check"), "ok")
    db.close()


def main():
    if len(sys.argv) >= 2 and sys.argv[1] == "--child-crash":
        child_crash(sys.argv[2], sys.argv[3])
        return 0
    if len(sys.argv) >= 2 and sys.argv[1] == "--child-worker":
        child_worker(sys.argv[2], sys.argv[3], float(sys.argv[4]), sys.argv[5])
        return 0

    probe = sqlite3.connect(":memory:")
    if not hasattr(probe, "enable_load_extension"):
        print(f"SKIP {PREFIX}: {sys.executable}'s sqlite3 module was built without "
              "enable_load_extension, so it cannot load the extension")
        return 0
    probe.close()
    ext, why = resolve_ext()
    if ext is None:
        print(f"SKIP {PREFIX}: {why}")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        for test in (lambda: test_fail_closed(tmp, ext),
                     lambda: test_crash(tmp, ext, "wal"),
                     lambda: test_crash(tmp, ext, "delete"),
                     lambda: test_concurrency(tmp, ext, "recipe"),
                     lambda: test_concurrency(tmp, ext, "claim-first")):
            try:
                test()
            except Exception as e:  # a crash of one test is one failure, the rest still run
                report(False, "unexpected-error", f"{type(e).__name__}: {e}")
    return 1 if checks.failures else 0


if __name__ == "__main__":
    sys.exit(main())
