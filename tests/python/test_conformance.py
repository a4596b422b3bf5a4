"""The Python runner of tests/conformance/ (its README.md is the format).

    PYTHONPATH=<dir holding sqlite_idempotency> /usr/bin/python3 \
        tests/python/test_conformance.py --clock build/testclock.so --dir DIR FILE...

Every step goes through the package as a user calls it: ``Ledger.open``
(WAL, synchronous=FULL; busy_timeout 0 here), ``claim`` with the arguments
as Python values (the package writes their JSON), ``settle``, ``resolve``,
``renew``, ``row``. What the package does not offer (``idem_purge``, key
derivation, plain SQL such as a guard or a guarded insert) runs as SQL on
the package's connection (``ledger.conn``, loaded by ``sqlite_idempotency.load``).

CLOCK is the test clock (tests/c/testclock.c), loaded before any database is
opened. Prints ``PASS conformance.python:FILE`` per file or ``FAIL
conformance.python:FILE: step N (OP): FIELD: expected E, got G`` at the first
step that differs; exit 1 on a failure. Values compare as Python reads JSON:
member order does not count, an int is not a float, True is not 1.
"""
import json
import os
import sqlite3
import sys

import sqlite_idempotency as idem

PREFIX = "conformance.python"


def text(v):
    return json.dumps(v, ensure_ascii=False, separators=(",", ":"))


def same(a, b):
    """Equal as JSON values read by Python: types must agree (bool, int, float, str)."""
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def compare(expect, got):
    """None when the answer has every member the expectation names, equal; else why."""
    if isinstance(expect, dict):
        for k, v in expect.items():
            if not isinstance(got, dict) or k not in got:
                return f"{k}: expected {text(v)}, got (absent)"
            if not same(v, got[k]):
                return f"{k}: expected {text(v)}, got {text(got[k])}"
        return None
    return None if same(expect, got) else f"the answer: expected {text(expect)}, got {text(got)}"


class Failed(Exception):
    pass


class Sequence:
    def __init__(self, helper, path, spec):
        self.helper = helper
        self.path = path
        self.spec = spec
        self.ledgers = [None, None]
        self.saved = {}
        self.now = spec["clock"]

    def set_clock(self, ms):
        self.now = ms
        self.helper.execute("SELECT testclock_set(?)", (ms,)).fetchone()

    def ledger(self, i):
        if self.ledgers[i] is None:
            if i == 0:
                self.ledgers[0] = idem.Ledger.open(self.path, busy_timeout_ms=0, options=self.spec.get("ledger") or None)
            else:
                self.ledgers[i] = idem.Ledger.open(self.path, busy_timeout_ms=0, create=False)
        return self.ledgers[i]

    def close(self):
        for led in self.ledgers:
            if led is not None:
                led.close()

    def token(self, step):
        if "token" in step:
            if step["token"] not in self.saved:
                raise Failed(f"cannot run the step: no earlier claim saved a token as \"{step['token']}\"")
            return self.saved[step["token"]]
        if "token_text" in step:
            return step["token_text"]
        raise Failed("cannot run the step: the step names no token")

    def run(self, step):
        """The step's answer (a JSON value); raises sqlite3.Error / LedgerError for an error."""
        op = step.get("step")
        led = self.ledger(step.get("conn", 0))
        if op == "clock":
            self.set_clock(step["set"] if "set" in step else self.now + step["advance"])
            return None
        if op == "claim":
            d = led.claim(step["tenant"], step["conversation"], step["tool"], step["args"],
                          effect=step.get("effect"), operation_id=step.get("operation_id"),
                          targets=step.get("targets"), target_window_seconds=step.get("target_window_seconds"),
                          allowed_by=step.get("allowed_by"))
            if "as" in step and "token" in d.raw:
                self.saved[step["as"]] = d.raw["token"]
            return d.raw
        if op == "settle":
            return led.settle(self.token(step), step["status"], step.get("detail"))
        if op == "resolve":
            return led.resolve(step["tenant"], step["key"], step["status"], step.get("detail"))
        if op == "renew":
            return {"lease_until": led.renew(self.token(step), step.get("seconds"))}
        if op == "purge":
            return {"purged": led.conn.execute("SELECT idem_purge('ledger', ?)", (step["older_than"],)).fetchone()[0]}
        if op == "row":
            return led.row(step["tenant"], step["key"])
        if op == "sql":
            binds = [self.saved.get(b["token"]) if isinstance(b, dict) else b for b in step.get("bind", [])]
            return {"rows": [list(r) for r in led.conn.execute(step["sql"], binds).fetchall()]}
        raise Failed(f"cannot run the step: unknown step {op!r}")


def check(step, seq):
    """None when the step's answer is the expected one, else why."""
    try:
        got = seq.run(step)
    except KeyError as e:
        raise Failed(f"cannot run the step: it has no {e}") from None
    except (sqlite3.Error, idem.LedgerError) as e:
        if "error" not in step:
            return f"expected an answer, got the error \"{e}\""
        parts = step["error"] if isinstance(step["error"], list) else [step["error"]]
        for part in parts:
            if part not in str(e):
                return f"expected an error containing {text(part)}, got \"{e}\""
        return None
    if "error" in step:
        return f"expected the error {text(step['error'])}, got the answer {text(got)}"
    why = compare(step["expect"], got) if "expect" in step else None
    for name in step.get("absent", []):
        if why is None and isinstance(got, dict) and name in got:
            why = f"{name}: expected it absent, got {text(got[name])}"
    return why


def run_sequence(helper, name, spec, db):
    for suffix in ("", "-wal", "-shm", "-journal"):
        if os.path.exists(db + suffix):
            os.remove(db + suffix)
    seq = Sequence(helper, db, spec)
    try:
        seq.set_clock(spec["clock"])
        led = seq.ledger(0)
        for sql in spec.get("setup", []):
            led.conn.execute(sql)
        for i, step in enumerate(spec["steps"], 1):
            try:
                why = check(step, seq)
            except Failed as e:
                why = str(e)
            if why is not None:
                print(f"FAIL {PREFIX}:{name}: step {i} ({step.get('step')}): {why}")
                return False
    finally:
        seq.close()
    print(f"PASS {PREFIX}:{name} ({len(spec['steps'])} steps)")
    return True


def run_keys(name, spec):
    conn = sqlite3.connect(":memory:")
    idem.load(conn)
    fails = []
    vectors = []
    if "vectors_file" in spec:
        where = os.path.join(os.path.dirname(name), spec["vectors_file"])
        with open(where, encoding="utf-8") as f:
            vectors += [(where, i, v) for i, v in enumerate(json.load(f), 1)]
    vectors += [('"vectors"', i, v) for i, v in enumerate(spec.get("vectors", []), 1)]
    for where, i, v in vectors:
        try:
            can, key = conn.execute("SELECT idem_canonical(?4), idem_key(?1, ?2, ?3, ?4)",
                                    (v["tenant"], v["conversation"], v["tool"], v["args"])).fetchone()
        except sqlite3.Error as e:
            fails.append(f"vector {i} of {where}: refused: {e}")
            continue
        if can != v["canonical"]:
            fails.append(f"vector {i} of {where}: canonical: expected {v['canonical']}, got {can}")
        elif key != v["key"]:
            fails.append(f"vector {i} of {where}: key: expected {v['key']}, got {key}")
    for r in spec.get("refusals", []):
        try:
            key = conn.execute("SELECT idem_key(?, ?, ?, ?)", (r["tenant"], r["conversation"], r["tool"], r["args"])).fetchone()[0]
            fails.append(f"refusal {r['name']}: expected the error \"{r['error']}\", got the key {key}")
        except sqlite3.Error as e:
            if r["error"] not in str(e):
                fails.append(f"refusal {r['name']}: expected an error containing \"{r['error']}\", got \"{e}\"")
    conn.close()
    for f in fails:
        print(f"FAIL {PREFIX}:{name}: {f}")
    if not fails:
        print(f"PASS {PREFIX}:{name} ({len(vectors)} vectors, {len(spec.get('refusals', []))} refusals)")
    return not fails


def main(argv):
    opts, files = {}, []
    i = 1
    while i < len(argv):
        if argv[i] in ("--clock", "--dir") and i + 1 < len(argv):
            opts[argv[i]] = argv[i + 1]
            i += 2
        else:
            files.append(argv[i])
            i += 1
    if "--clock" not in opts or "--dir" not in opts or not files:
        print("usage: test_conformance.py --clock CLOCK --dir DIR FILE...", file=sys.stderr)
        return 2
    helper = sqlite3.connect(":memory:")
    helper.enable_load_extension(True)
    helper.load_extension(os.path.abspath(opts["--clock"]))  # the clock VFS is the default from here on
    ok = True
    for n, name in enumerate(files, 1):
        try:
            with open(name, encoding="utf-8") as f:
                spec = json.load(f)
        except (OSError, ValueError) as e:
            print(f"FAIL {PREFIX}:{name}: cannot read the file: {e}")
            ok = False
            continue
        if spec.get("kind") == "sequence":
            ok &= run_sequence(helper, name, spec, os.path.join(opts["--dir"], f"conformance-py-{n}.db"))
        elif spec.get("kind") == "keys":
            ok &= run_keys(name, spec)
        else:
            print(f"FAIL {PREFIX}:{name}: \"kind\" is neither \"sequence\" nor \"keys\"")
            ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
