#!/usr/bin/python3
"""Copies of a database that holds a ledger, made by every usual tool.

  clone       the sqlite3 shell's .clone: the copy has the shadow tables but
              no CREATE VIRTUAL TABLE row (the shell's connection to the new
              file has no module, so that CREATE fails): unknown ledger,
              guards fail closed; CREATE VIRTUAL TABLE adopts them and
              everything works
  dump        the shell's .dump, restored with .read by a shell WITHOUT the
              extension: the ledger row comes back through writable_schema
  recover     the shell's .recover, restored the same way (skipped when the
              shell lacks the sqlite_dbpage table it needs)
  iterdump    Python's Connection.iterdump(): refused without the extension,
              and with it a script that cannot be restored as is; the
              filtered restore plus CREATE VIRTUAL TABLE (adoption) works
  vacuum      VACUUM INTO: a whole copy that works as it is
  backup      the backup API (Python's Connection.backup, the shell's .backup)

In each working copy the same checks run: the settled key replays its
result, the live claim's token settles it, a guarded insert needs a claim,
integrity_check is ok. Prints PASS/FAIL/SKIP <copies:name>; exit 1 on a
failure. The extension is $EXT (default build/idempotency.so); a sanitizer
build under build/asan cannot be loaded by the shell or Python, so
build/idempotency.so is used instead, or everything skips.
"""
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from idemtest import Checks, load_ext, one, resolve_ext  # noqa: E402

PREFIX = "copies"
checks = Checks(PREFIX)
report, check_eq, skip = checks.report, checks.check_eq, checks.skip


EXT, WHY = resolve_ext()
SHELL = shutil.which("sqlite3")


def connect(path, ext=True):
    db = sqlite3.connect(path, isolation_level=None)
    if ext:
        load_ext(db, EXT)
    return db


def error_of(db, sql, args=()):
    try:
        db.execute(sql, args).fetchall()
    except sqlite3.Error as e:
        return str(e)
    return None


def shell(path, *commands, load=True):
    """Run the sqlite3 shell on path with commands (-bail); (rc, out, err)."""
    args = [SHELL, "-bail", path]
    if load:
        args.append(f".load {EXT[:-3] if EXT.endswith('.so') else EXT}")
    args += list(commands)
    p = subprocess.run(args, capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout, p.stderr


CREATE = "CREATE VIRTUAL TABLE ledger USING idempotency(lease_seconds=3600, retention_seconds=86400)"


def make_source(path):
    """A ledger with a guard, a settled local key (with a member), a live
    external claim and a released key. Returns (token of the live claim,
    the stored meta)."""
    db = connect(path)
    db.execute(CREATE)
    db.execute("CREATE TABLE orders(id INTEGER PRIMARY KEY, tenant, op_key, item)")
    db.execute("SELECT idem_guard('ledger', 'orders', 'op_key', 'tenant')")
    tok = one(db, "SELECT json_extract(idem_claim('ledger', 't', 'c', 'order', '{\"n\":1}', "
                  "'local', 'k1'), '$.token')")
    db.execute("INSERT INTO orders(tenant, op_key, item) VALUES ('t', 'k1', 'book')")
    db.execute("SELECT idem_settle('ledger', ?, 'succeeded', '{\"order\":1}')", (tok,))
    live = one(db, "SELECT json_extract(idem_claim('ledger', 't', 'c', 'send', '{}', "
                   "'external', 'k2'), '$.token')")
    tok = one(db, "SELECT json_extract(idem_claim('ledger', 't', 'c', 'order', '{\"n\":3}', "
                  "'local', 'k3'), '$.token')")
    db.execute("SELECT idem_settle('ledger', ?, 'released', NULL)", (tok,))
    meta = db.execute("SELECT k, v FROM ledger_meta ORDER BY k").fetchall()
    db.close()
    return live, meta


def check_copy(name, path, live, meta):
    """The checks every working copy must pass (writes to the copy)."""
    db = connect(path)
    try:
        check_eq(f"{name}-meta", db.execute("SELECT k, v FROM ledger_meta ORDER BY k").fetchall(),
                 meta)
        check_eq(f"{name}-rows", db.execute(
            "SELECT key, status FROM ledger ORDER BY key").fetchall(),
            [("k1", "succeeded"), ("k2", "claimed"), ("k3", "released")])
        check_eq(f"{name}-replay", one(
            db, "SELECT json_extract(idem_claim('ledger', 't', 'c', 'order', '{\"n\":1}', "
                "'local', 'k1'), '$.result.order')"), 1)
        check_eq(f"{name}-in-progress", one(
            db, "SELECT json_extract(idem_claim('ledger', 't', 'c', 'send', '{}', 'external', "
                "'k2'), '$.decision')"), "in_progress")
        check_eq(f"{name}-token-settles", one(
            db, "SELECT json_extract(idem_settle('ledger', ?, 'succeeded', NULL), '$.status')",
            (live,)), "succeeded")
        check_eq(f"{name}-guard-refuses", error_of(
            db, "INSERT INTO orders(tenant, op_key, item) VALUES ('t', 'k9', 'x')"),
            'idem_guard: insert into "orders" refused: key "k9" needs a live claim of ledger '
            'ledger; there is no claim for it')
        one(db, "SELECT idem_claim('ledger', 't', 'c', 'order', '{\"n\":3}', 'local', 'k3')")
        check_eq(f"{name}-guard-admits", error_of(
            db, "INSERT INTO orders(tenant, op_key, item) VALUES ('t', 'k3', 'pen')"), None)
        check_eq(f"{name}-integrity", one(db, "PRAGMA integrity_check"), "ok")
    finally:
        db.close()


def main():
    if EXT is None:
        for n in ("clone", "dump", "recover", "iterdump", "vacuum", "backup"):
            skip(n, WHY)
        return 0
    tmp = tempfile.mkdtemp(prefix="idem-copies-")
    try:
        src = os.path.join(tmp, "src.db")
        live, meta = make_source(src)

        # ------------------------------------------------------------ .clone
        if SHELL is None:
            skip("clone", "the sqlite3 shell is not installed (Debian: apt-get install sqlite3)")
            skip("dump", "the sqlite3 shell is not installed")
            skip("recover", "the sqlite3 shell is not installed")
        else:
            clone = os.path.join(tmp, "clone.db")
            rc, out, err = shell(src, f".clone {clone}", load=False)
            # the new database's connection has no module: its CREATE
            # VIRTUAL TABLE fails (reported, exit status 0); the rest is copied
            check_eq("clone-runs", (rc, err.splitlines()[:2]),
                     (0, ["Error: no such module: idempotency", f"SQL: [{CREATE}]"]))
            db = connect(clone)
            check_eq("clone-no-vtab-row", one(
                db, "SELECT count(*) FROM sqlite_schema WHERE name = 'ledger'"), 0)
            check_eq("clone-shadows-copied", one(
                db, "SELECT count(*) FROM sqlite_schema WHERE name IN "
                    "('ledger_rows', 'ledger_meta', 'ledger_guards')"), 3)
            check_eq("clone-unknown-ledger", error_of(
                db, "SELECT idem_claim('ledger', 't', 'c', 'x', '{}')"),
                'idem_claim: unknown ledger "ledger": no table USING idempotency by that name')
            ident = dict(meta)["id"]
            check_eq("clone-guard-fails-closed", error_of(
                db, "INSERT INTO orders(tenant, op_key, item) VALUES ('t', 'k3', 'x')"),
                f'idem_guard: insert into "orders" refused: its guard names ledger ledger '
                f'({ident}), which is not attached')
            check_eq("clone-adopt-wrong-option", error_of(
                db, "CREATE VIRTUAL TABLE ledger USING idempotency(lease_seconds=60)"),
                "idempotency: ledger ledger would adopt its existing shadow tables, made with "
                "lease_seconds=3600, but CREATE gives lease_seconds=60; give the stored value "
                "or omit the option")
            db.execute("CREATE VIRTUAL TABLE ledger USING idempotency")
            db.close()
            check_copy("clone-adopted", clone, live, meta)

            # -------------------------------------------------------- .dump
            dump = os.path.join(tmp, "dump.sql")
            rc, out, err = shell(src, ".dump", load=False)
            check_eq("dump-runs-without-extension", (rc, err), (0, ""))
            with open(dump, "w") as f:
                f.write(out)
            report("INSERT INTO sqlite_schema(type,name,tbl_name,rootpage,sql)VALUES('table',"
                   "'ledger','ledger',0,'CREATE VIRTUAL TABLE ledger USING" in out,
                   "dump-writes-vtab-row", "the dump has no INSERT INTO sqlite_schema for ledger")
            restored = os.path.join(tmp, "dump.db")
            rc, out, err = shell(restored, f".read {dump}", load=False)
            check_eq("dump-restores-without-extension", (rc, err), (0, ""))
            check_copy("dump", restored, live, meta)

            # -------------------------------------------------------- .recover
            rc, out, err = shell(src, "SELECT 1 FROM sqlite_dbpage LIMIT 1", load=False)
            if rc != 0:
                skip("recover", "this sqlite3 shell lacks sqlite_dbpage (built without "
                     "SQLITE_ENABLE_DBPAGE_VTAB), so .recover cannot run: "
                     + err.strip().replace("\n", " "))
            else:
                rc, out, err = shell(src, ".recover", load=False)
                check_eq("recover-runs", rc, 0)
                rec = os.path.join(tmp, "recover.sql")
                with open(rec, "w") as f:
                    f.write(out)
                restored = os.path.join(tmp, "recover.db")
                rc, out, err = shell(restored, f".read {rec}", load=False)
                check_eq("recover-restores", (rc, err), (0, ""))
                check_copy("recover", restored, live, meta)

        # ------------------------------------------------------------ iterdump
        db = sqlite3.connect(src)
        try:
            list(db.iterdump())
            report(False, "iterdump-without-extension", "iterdump succeeded")
        except sqlite3.Error as e:
            check_eq("iterdump-without-extension", str(e), "no such module: idempotency")
        db.close()
        db = connect(src)
        lines = list(db.iterdump())
        db.close()
        report(CREATE + ";" in lines, "iterdump-emits-create", "no CREATE VIRTUAL TABLE line")
        report(any(l.startswith('INSERT INTO "ledger" VALUES(') for l in lines),
               "iterdump-emits-vtab-rows", "no INSERT INTO \"ledger\" line")
        naive = connect(os.path.join(tmp, "iterdump-naive.db"))
        try:
            naive.executescript("\n".join(lines))
            report(False, "iterdump-naive-restore-fails", "the restore succeeded")
        except sqlite3.Error as e:
            check_eq("iterdump-naive-restore-fails", str(e),
                     "idempotency: INSERT into ledger ledger cannot set status; a claim starts "
                     "claimed and its outcome is recorded by idem_settle")
        naive.close()
        # the fix: leave out the ledger's own lines, restore the shadow
        # tables, then CREATE VIRTUAL TABLE adopts them
        def restore_iterdump(src_path, dst_path):
            # the snippet of docs/operating.md, as written there
            src = connect(src_path)
            dst = sqlite3.connect(dst_path, isolation_level=None)
            ledgers = src.execute("SELECT name, sql FROM sqlite_schema WHERE type = 'table' "
                                  "AND sql LIKE 'CREATE VIRTUAL TABLE % USING idempotency%'").fetchall()
            own = {sql + ";" for _, sql in ledgers}           # iterdump's CREATE line of each ledger
            rows = tuple('INSERT INTO "%s" VALUES(' % name.replace('"', '""') for name, _ in ledgers)
            kept = [l for l in src.iterdump() if l not in own and not l.startswith(rows)]
            dst.executescript("\n".join(kept))                # no extension needed for this part
            dst.close()
            dst = connect(dst_path)                           # dst has the extension loaded
            for _, sql in ledgers:
                dst.execute(sql)                              # adopts <name>_rows, _meta, _guards
            dst.close()
            src.close()

        fixed = os.path.join(tmp, "iterdump.db")
        restore_iterdump(src, fixed)
        check_copy("iterdump-filtered-adopted", fixed, live, meta)
        # a ledger under an odd quoted name, beside one whose name is a prefix of it
        odd_src = os.path.join(tmp, "iterdump-odd-src.db")
        db = connect(odd_src)
        db.execute('CREATE VIRTUAL TABLE "odd ""q"" name" USING idempotency')
        db.execute("CREATE VIRTUAL TABLE odd USING idempotency")
        tok = json.loads(db.execute('SELECT idem_claim(\'"odd ""q"" name"\', \'t\', \'c\', \'x\', \'{}\')').fetchone()[0])["token"]
        db.execute("SELECT idem_claim('odd', 't', 'c', 'x', '{}')")
        db.close()
        odd_dst = os.path.join(tmp, "iterdump-odd.db")
        try:
            restore_iterdump(odd_src, odd_dst)
            db = connect(odd_dst)
            got = (json.loads(db.execute('SELECT idem_settle(\'"odd ""q"" name"\', ?, \'succeeded\', \'{}\')',
                                         (tok,)).fetchone()[0])["status"],
                   db.execute("SELECT count(*) FROM odd").fetchone()[0])
            db.close()
            check_eq("iterdump-filtered-odd-name", got, ("succeeded", 1))
        except sqlite3.Error as e:
            report(False, "iterdump-filtered-odd-name", str(e))

        # ------------------------------------------------------------ VACUUM INTO
        db = connect(src)
        vac = os.path.join(tmp, "vacuum.db")
        db.execute("VACUUM INTO ?", (vac,))
        db.close()
        check_copy("vacuum-into", vac, live, meta)
        db = sqlite3.connect(src)  # without the extension too
        vac2 = os.path.join(tmp, "vacuum2.db")
        db.execute("VACUUM INTO ?", (vac2,))
        db.close()
        check_copy("vacuum-into-without-extension", vac2, live, meta)

        # ------------------------------------------------------------ backup API
        db = sqlite3.connect(src)
        bak = os.path.join(tmp, "backup.db")
        dst = sqlite3.connect(bak)
        db.backup(dst)
        dst.close()
        db.close()
        check_copy("backup-python", bak, live, meta)
        if SHELL is not None:
            bak2 = os.path.join(tmp, "backup2.db")
            rc, out, err = shell(src, f".backup {bak2}", load=False)
            check_eq("backup-shell-runs", (rc, err), (0, ""))
            check_copy("backup-shell", bak2, live, meta)
        else:
            skip("backup-shell", "the sqlite3 shell is not installed")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 1 if checks.failures else 0


if __name__ == "__main__":
    sys.exit(main())
