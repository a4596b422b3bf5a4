#!/usr/bin/python3
"""The cost of Ledger.call from the Python package, seen from outside.

Usage (run by tests/suites/37-syncs.sh under strace, the package on
PYTHONPATH): syncs.py DIR

Opens two file ledgers in DIR with Ledger.open (WAL, synchronous=FULL):
a.db with the default lease, b.db with lease_seconds=1 (a lease no longer
than the margin, so the check before sending renews). Each first makes a
warm-up call (the WAL then holds frames, as it does in service, so no
commit syncs a new WAL header), then, between markers the suite finds in
the strace log (a chdir to /syncs-mark-NAME, which fails), a first call
and its replay. The suite counts the fsync/fdatasync calls on each file
between the markers.

Then the replay under a writer: a second connection holds the write lock
(BEGIN IMMEDIATE) and the ledger's connection has busy_timeout=0. The
replay (Ledger.call and a bare idem_claim) answers at once; a new key's
claim, the control, fails with "database is locked".

Prints PASS/FAIL lines; exit status 1 when a check failed.
"""
import os
import sqlite3
import sys

from sqlite_idempotency import Ledger, LedgerError

failed = False


def check(name, ok, why=""):
    global failed
    print(f"PASS syncs.python.{name}" if ok else f"FAIL syncs.python.{name}: {why}", flush=True)
    failed = failed or not ok


def mark(name):
    try:
        os.chdir(f"/syncs-mark-{name}")
    except OSError:
        pass


def send(attempt):
    return {"sent": True}


d = sys.argv[1]
for db, options in (("a", None), ("b", {"lease_seconds": 1})):
    ledger = Ledger.open(os.path.join(d, db + ".db"), options=options)
    ledger.call("t1", "c1", "warm_up", {"i": 0}, send)
    mark(db + "-first")
    first = ledger.call("t1", "c1", "send_email", {"to": "a@example.com"}, send)
    mark(db + "-replay")
    again = ledger.call("t1", "c1", "send_email", {"to": "a@example.com"}, send)
    mark(db + "-end")
    check(f"{db}.outcomes", (first.idempotent, again.idempotent, again.result) == (False, True, {"sent": True}),
          f"first {first!r}, replay {again!r}")
    if db == "a":
        holder = sqlite3.connect(os.path.join(d, "a.db"), isolation_level=None, timeout=0)
        holder.execute("BEGIN IMMEDIATE")
        ledger.conn.execute("PRAGMA busy_timeout=0")
        try:
            r = ledger.call("t1", "c1", "send_email", {"to": "a@example.com"}, send)
            check("replay_beside_writer", r.idempotent and r.result == {"sent": True}, repr(r))
        except Exception as e:  # noqa: BLE001 - the check reports it
            check("replay_beside_writer", False, f"{type(e).__name__}: {e}")
        try:
            raw = ledger.conn.execute(
                "SELECT json_extract(idem_claim('ledger', 't1', 'c1', 'send_email', '{\"to\":\"a@example.com\"}'),"
                " '$.decision')").fetchone()[0]
            check("bare_replay_beside_writer", raw == "replay", repr(raw))
        except sqlite3.Error as e:
            check("bare_replay_beside_writer", False, str(e))
        try:
            ledger.claim("t1", "c1", "send_email", {"to": "b@example.com"})
            check("control_claim_locked", False, "a new key was claimed while another connection held the write lock")
        except LedgerError as e:
            check("control_claim_locked", str(e) == "idem_claim: database is locked", repr(str(e)))
        holder.execute("ROLLBACK")
        holder.close()
    ledger.close()
sys.exit(1 if failed else 0)
