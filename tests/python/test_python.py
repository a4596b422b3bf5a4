#!/usr/bin/python3
"""The extension from Python's standard sqlite3 module (Debian's /usr/bin/python3).

Usage: test_python.py EXTENSION_PATH

On a database file in a temporary directory: load the extension, create a
ledger, claim (admitted, with a token), settle succeeded, claim again
(replay, "idempotent": true, the recorded result), a NULL and a blank
tenant refused as sqlite3.IntegrityError (SQLITE_CONSTRAINT) carrying the
extension's exact message with nothing written, and the SQL-native claim
(INSERT INTO ledger, idem_last_claim, a taken key refused).

Prints one line per check: PASS <name> / FAIL <name>: <why>, and one
non-check line with the Python and SQLite versions. Exit status 1 when a
check failed.
"""
import json
import os
import re
import shutil
import sqlite3
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from idemtest import Checks, load_ext, one  # noqa: E402

PREFIX = "bindings.python"
checks = Checks(PREFIX)
report = checks.report


def expect_error(name, db, sql, args, etype, message, code="SQLITE_CONSTRAINT"):
    """The statement must raise etype with exactly `message` (and code name)."""
    try:
        got = db.execute(sql, args).fetchall()
    except sqlite3.Error as e:
        errname = getattr(e, "sqlite_errorname", None)  # Python 3.11+
        if type(e) is not etype:
            report(False, name, f"raised {type(e).__name__} ({e}), want {etype.__name__}")
        elif str(e) != message:
            report(False, name, f"message {str(e)!r}, want {message!r}")
        elif errname is not None and errname != code:
            report(False, name, f"error code {errname}, want {code}")
        else:
            report(True, name)
        return
    report(False, name, f"no error; returned {got!r}")


def main():
    if len(sys.argv) != 2:
        print(f"usage: {sys.argv[0]} EXTENSION_PATH", file=sys.stderr)
        return 2
    ext = os.path.abspath(sys.argv[1])
    tmp = tempfile.mkdtemp(prefix="idem-py-")
    try:
        run(ext, os.path.join(tmp, "ledger.db"))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 1 if checks.failures else 0


def run(ext, path):
    print(f"   {PREFIX}: Python {sys.version.split()[0]}, sqlite3 module with SQLite "
          f"{sqlite3.sqlite_version} (the system libsqlite3)", flush=True)
    db = sqlite3.connect(path, isolation_level=None)
    try:
        load_ext(db, ext)
        version = one(db, "SELECT idem_version()")
        report(isinstance(version, str) and version != "", "load", f"idem_version() = {version!r}")
    except Exception as e:  # noqa: BLE001 - reported, then stop
        report(False, "load", f"{type(e).__name__}: {e}")
        return
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    db.execute("PRAGMA busy_timeout=10000")
    db.execute("CREATE VIRTUAL TABLE ledger USING idempotency")

    claim_sql = "SELECT idem_claim('ledger', ?, ?, ?, ?)"
    args = json.dumps({"to": "a@example.com", "subject": "hi"})
    d = json.loads(one(db, claim_sql, ("tenant-a", "conv-1", "send_email", args)))
    token = d.get("token", "")
    report(d.get("decision") == "admitted" and re.fullmatch(r"[0-9a-f]{32}", token or "")
           and d.get("committed") is True and d.get("attempt") == 1
           and re.fullmatch(r"idem1-[0-9a-f]{32}", d.get("key", "")),
           "claim-admitted", f"got {d!r}")

    result = {"message_id": "m-17"}
    s = json.loads(one(db, "SELECT idem_settle('ledger', ?, 'succeeded', ?)",
                       (token, json.dumps(result))))
    report(s.get("status") == "succeeded" and s.get("key") == d.get("key"),
           "settle-succeeded", f"got {s!r}")

    # The same call spelled differently (member order): one key, a replay.
    args2 = json.dumps({"subject": "hi", "to": "a@example.com"})
    r = json.loads(one(db, claim_sql, ("tenant-a", "conv-1", "send_email", args2)))
    report(r.get("decision") == "replay" and r.get("idempotent") is True
           and r.get("result") == result and r.get("key") == d.get("key")
           and "token" not in r, "claim-replay", f"got {r!r}")

    before = one(db, "SELECT count(*) FROM ledger")
    expect_error("refused-null-tenant", db, claim_sql, (None, "conv-1", "send_email", args),
                 sqlite3.IntegrityError, "idem_claim: tenant is missing (NULL)")
    expect_error("refused-blank-tenant", db, claim_sql, ("", "conv-1", "send_email", args),
                 sqlite3.IntegrityError, "idem_claim: tenant is empty")
    expect_error("refused-space-tenant", db, claim_sql, (" ", "conv-1", "send_email", args),
                 sqlite3.IntegrityError,
                 'idem_claim: tenant " " has byte 0x20 at offset 0; only A-Z a-z 0-9 _ - are allowed')
    after = one(db, "SELECT count(*) FROM ledger")
    report(before == after == 1, "refused-wrote-nothing", f"rows before {before}, after {after}")

    # The SQL-native claim: INSERT INTO ledger, then idem_last_claim.
    ins = "INSERT INTO ledger(tenant, conversation, tool, args) VALUES (?, ?, ?, ?)"
    db.execute(ins, ("tenant-a", "conv-1", "migrate", '{"step":3}'))
    lc = one(db, "SELECT idem_last_claim('ledger')")
    lc = json.loads(lc) if lc else None
    report(isinstance(lc, dict) and lc.get("tenant") == "tenant-a"
           and re.fullmatch(r"[0-9a-f]{32}", lc.get("token", "")) and lc.get("committed") is True
           and lc.get("key") == one(db, "SELECT idem_key('tenant-a','conv-1','migrate','{\"step\":3}')"),
           "insert-last-claim", f"got {lc!r}")
    try:
        db.execute(ins, ("tenant-a", "conv-1", "migrate", '{"step":3}'))
        report(False, "insert-taken-refused", "a second INSERT of the same key succeeded")
    except sqlite3.IntegrityError as e:
        report(str(e).startswith(f'idempotency: key "{lc and lc.get("key")}" of tenant "tenant-a" in ledger ledger is taken')
               and one(db, "SELECT idem_last_claim('ledger')") is None,
               "insert-taken-refused", f"message {e}")
    cur = db.execute("INSERT OR IGNORE INTO ledger(tenant, conversation, tool, args) VALUES (?, ?, ?, ?)",
                     ("tenant-a", "conv-1", "migrate", '{"step":3}'))
    report(cur.rowcount == 0 and one(db, "SELECT count(*) FROM ledger") == 2,
           "insert-or-ignore-skips", f"rowcount {cur.rowcount}")
    db.close()

    # A new connection on the existing file: load first, then the replay.
    db = sqlite3.connect(path, isolation_level=None)
    try:
        load_ext(db, ext)
        r2 = json.loads(one(db, claim_sql, ("tenant-a", "conv-1", "send_email", args)))
        report(r2.get("decision") == "replay" and r2.get("result") == result, "reopen", f"got {r2!r}")
    except sqlite3.Error as e:
        report(False, "reopen", f"{type(e).__name__}: {e}")
    finally:
        db.close()

    # Python's implicit transactions (the default isolation_level): after a
    # DML statement the module has opened a transaction, so a claim made
    # then is not committed as it returns ("committed": false) and commits
    # with db.commit(); a rollback takes it back.
    db = sqlite3.connect(path)
    try:
        load_ext(db, ext)
        db.execute("CREATE TABLE IF NOT EXISTS audit(n)")
        db.execute("INSERT INTO audit VALUES (1)")  # implicit BEGIN
        d = json.loads(one(db, claim_sql, ("tenant-b", "conv-9", "send_email", '{"n":1}')))
        report(db.in_transaction and d.get("decision") == "admitted" and d.get("committed") is False,
               "implicit-begin-not-committed", f"in_transaction={db.in_transaction}, got {d!r}")
        db.rollback()
        d = json.loads(one(db, claim_sql, ("tenant-b", "conv-9", "send_email", '{"n":1}')))
        report(d.get("decision") == "admitted" and d.get("attempt") == 1 and d.get("committed") is True,
               "implicit-rollback-undoes-claim", f"got {d!r}")
        db.execute("INSERT INTO audit VALUES (2)")
        d = json.loads(one(db, claim_sql, ("tenant-b", "conv-9", "send_email", '{"n":2}')))
        db.commit()
        again = json.loads(one(db, claim_sql, ("tenant-b", "conv-9", "send_email", '{"n":2}')))
        report(d.get("committed") is False and again.get("decision") == "in_progress",
               "implicit-commit-keeps-claim", f"got {d!r} then {again!r}")
    except sqlite3.Error as e:
        report(False, "implicit-begin", f"{type(e).__name__}: {e}")
    finally:
        db.close()


if __name__ == "__main__":
    sys.exit(main())
