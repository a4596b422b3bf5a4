#!/usr/bin/python3
"""Ledger operations wait for another process's write transaction, from
Python's sqlite3 module in its default isolation mode (isolation_level "",
which sends a deferred BEGIN before an INSERT, UPDATE or DELETE).

Usage: test_wait_python.py EXTENSION_PATH
       test_wait_python.py EXTENSION_PATH --hold DATABASE   (the holder)

For each case a holder process (this program run again) takes the write
lock of the file (BEGIN IMMEDIATE and a marker row holding its pid), says
so on its stdout, holds it ~300 ms and commits. Meanwhile a fresh
connection (timeout 5 s, so its busy handler waits) makes the call as the
first use of the ledger: it must wait and succeed, the holder's row
visible when it returns; never fail at once with "database is locked".
Cases: INSERT INTO the ledger as the first statement (Python's implicit
BEGIN), and idem_claim, idem_settle and idem_purge inside the implicit
transaction a write to a TEMP table opened (a deferred BEGIN that holds no
lock on the ledger's file). Then the documented limit: a transaction that
read the file first cannot wait, and the claim says to use BEGIN IMMEDIATE.

Prints PASS/FAIL lines; exit status 1 when a check failed.
"""
import os
import subprocess
import sqlite3
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from idemtest import Checks, load_ext, one  # noqa: E402

checks = Checks("wait.python")

READ_FIRST = ("idem_claim: database is locked, and this transaction cannot wait for it: it read "
              "database main before this call, and SQLite does not upgrade a read transaction "
              "to a write through the busy handler; begin it with BEGIN IMMEDIATE")


def hold(path):
    """The holder: the write lock for ~300 ms after saying "1"."""
    db = sqlite3.connect(path, isolation_level=None, timeout=5)
    db.execute("BEGIN IMMEDIATE")
    db.execute("INSERT INTO marker VALUES (?)", (os.getpid(),))
    print("1", flush=True)
    time.sleep(0.3)
    db.execute("COMMIT")
    db.close()
    return 0


def connect(ext, path):
    """A fresh connection in the default isolation mode."""
    db = sqlite3.connect(path, timeout=5)
    load_ext(db, ext)
    return db


def case(ext, path, name, call, want_error=None):
    """Run call(db) on a fresh connection while a holder holds the lock."""
    db = connect(ext, path)
    holder = subprocess.Popen([sys.executable, os.path.abspath(__file__), ext, "--hold", path],
                              stdout=subprocess.PIPE, text=True)
    try:
        if holder.stdout.readline().strip() != "1":
            checks.report(False, name, "the holder could not take the write lock")
            return
        try:
            call(db)
            got_error = None
        except sqlite3.Error as e:
            got_error = str(e)
        if want_error is not None:
            checks.report(got_error == want_error, name, f"got error {got_error!r}, want {want_error!r}")
            db.rollback()
            return
        if got_error is not None:
            checks.report(False, name, got_error)
            db.rollback()
            return
        # the holder's row is visible before it is waited for: the call
        # completed after its commit
        n = one(db, "SELECT count(*) FROM marker WHERE x = ?", (holder.pid,))
        db.commit()
        checks.report(n == 1, name, "it completed before the other process committed")
    finally:
        if db.in_transaction:
            db.rollback()
        db.close()
        holder.wait()


def main(argv):
    if len(argv) == 4 and argv[2] == "--hold":
        return hold(argv[3])
    if len(argv) != 2:
        print("usage: test_wait_python.py EXTENSION_PATH", file=sys.stderr)
        return 2
    ext = os.path.abspath(argv[1])
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "wait.db")
        db = connect(ext, path)
        db.isolation_level = None
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("CREATE TABLE marker(x)")
        db.execute("CREATE VIRTUAL TABLE L USING idempotency")
        token = one(db, "SELECT json_extract(idem_claim('L', 't', 'c', 'x', '{\"n\":0}'), '$.token')")
        db.close()

        def temp_write(db):
            db.execute("CREATE TEMP TABLE IF NOT EXISTS stage(x)")
            db.execute("INSERT INTO stage VALUES (1)")  # the implicit BEGIN, no lock on main
            if not db.in_transaction:
                raise sqlite3.Error("the write to the TEMP table opened no transaction")

        case(ext, path, "insert-first",
             lambda db: db.execute("INSERT INTO L(tenant, conversation, tool, args) "
                                   "VALUES ('t', 'c', 'x', '{\"n\":1}')"))

        def claim(db):
            temp_write(db)
            got = one(db, "SELECT json_extract(idem_claim('L', 't', 'c', 'x', '{\"n\":2}'), '$.decision')")
            if got != "admitted":
                raise sqlite3.Error(f"decision {got!r}")
        case(ext, path, "claim-in-implicit-transaction", claim)

        def settle(db):
            temp_write(db)
            got = one(db, "SELECT json_extract(idem_settle('L', ?, 'succeeded', '{}'), '$.status')", (token,))
            if got != "succeeded":
                raise sqlite3.Error(f"status {got!r}")
        case(ext, path, "settle-in-implicit-transaction", settle)

        def purge(db):
            temp_write(db)
            one(db, "SELECT idem_purge('L', 0)")
        case(ext, path, "purge-in-implicit-transaction", purge)

        def read_first(db):
            temp_write(db)
            one(db, "SELECT count(*) FROM marker")  # a read of the file first
            one(db, "SELECT idem_claim('L', 't', 'c', 'x', '{\"n\":3}')")
        case(ext, path, "read-first-refused", read_first, READ_FIRST)
    return checks.status()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
