"""tests/python/soak.py: a soak of one ledger file. Several worker processes
run a mixed load against one database for a set time while one of them is
killed with SIGKILL every few seconds (and restarted); the parent prints
throughput and memory per interval and checks the invariants at the end.

    soak.py --db FILE [--seconds N] [--workers N] [--interval S]
            [--kill-every S] [--seed N] [--ext PATH]
    soak.py --db FILE --verify-only [--workers N]   the end checks of an earlier run

Environment defaults: SOAK_SECONDS (60), SOAK_WORKERS (4), SOAK_INTERVAL (5),
SOAK_KILL_EVERY (2), SOAK_SEED (the time). Run by `make soak`; a five-second
smoke of it runs in tests/suites/71-soak.sh.

The file holds two ledgers: `ledger` (lease_seconds=1, so the claims of a
killed worker run out and are taken over or turn unknown) and `scratch`
(retention_seconds=1: every claim purges old settled rows, and workers call
idem_purge too). Each worker loops over, at random:

  external  claim (autocommit or BEGIN IMMEDIATE ... COMMIT) a key of tenant
            `ext` from a window of keys that slides with time (so keys are
            both new and met again); when admitted, renew right before
            sending, "send" (a row in `sent` of FILE.target, the target's own
            file, committed there), then settle succeeded, or settle unknown (a timeout after
            the send), or release before sending ({"sent": false}), or leave
            the claim to run out (a hang);
  local     the guarded recipe: claim (local), the guarded row in `orders`,
            settle, in one transaction; or the claim committed first and
            the row and the settle in a second transaction (a kill between
            leaves a claim that the next arrival takes over after its lease);
            now and then (and first thing after each start) an unclaimed
            insert, which the guard must refuse;
  resolve   a reconciler: unknown rows of `ext` resolve succeeded when the
            target has the send, released ({"sent": false}) when it has not
            (a claim that only ran out waits GRACE seconds past its lease
            first: its holder may be slow rather than dead);
  scratch   a claim and a settle on `scratch`, and sometimes (and once after
            each start) idem_purge.

Each worker appends what it was told to its own log (one write(2) a line,
after the COMMIT returned): `A TENANT KEY TOKEN ATTEMPT` (admitted and
committed), `S KEY TOKEN STATUS` (settle committed), `X WHAT` (an answer
that breaks a rule: reported as a failure).

At the end (PASS/FAIL lines, prefix soak):
  no_external_sent_twice   no key of `ext` has two rows in `sent`
  no_local_written_twice   no key of `loc` has two rows in `orders`, every
                           row in `orders` belongs to the succeeded attempt
                           of its key, and every succeeded local key has it
  no_claim_lost            every admission a worker (killed or not) was told
                           is in the ledger: the same token at that attempt
                           (claimed, unknown or settled), or a later attempt
  no_settle_lost           every settle told committed holds (or its
                           unknown was resolved since)
  sent_never_released      a key the target has is never released or
                           superseded at that attempt
  guard_refused_unclaimed  every unclaimed insert was refused with the
                           guard's message
  integrity_check          PRAGMA integrity_check is ok
  ledger_check             `python -m sqlite_idempotency check` finds nothing
                           broken (unknown rows and expired claims, the
                           expected leftovers of kills, only need attention)
  mixed_load               every kind of operation ran, and workers were
                           killed
"""
import argparse
import ctypes
import json
import multiprocessing
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from idemtest import Checks, load_ext, one, resolve_ext  # noqa: E402

KINDS = ("claims", "admitted", "replays", "settles", "renewals", "sends", "guarded", "refused",
         "resolves", "purges", "purged", "busy", "late")
MEM, RSS_PID, STOP, BORN = len(KINDS), len(KINDS) + 1, len(KINDS) + 2, len(KINDS) + 3
FIELDS = len(KINDS) + 4
GRACE_MS = 5000  # how long past its lease a claim that ran out waits before it is released
REFUSED = 'idem_guard: insert into "orders" refused: key '

_libsqlite = ctypes.CDLL("libsqlite3.so.0")  # the library Python's sqlite3 module uses
_libsqlite.sqlite3_memory_used.restype = ctypes.c_int64


def connect(path, ext):
    db = sqlite3.connect(path, timeout=10, isolation_level=None)
    load_ext(db, ext)
    # the target of the external calls: a file of its own, as a remote system
    # would be, so a send never waits for the ledger's write lock
    db.execute("ATTACH ? AS target", (path + ".target",))
    db.execute("PRAGMA synchronous=FULL")
    db.execute("PRAGMA target.synchronous=FULL")
    # a small page cache fills within seconds: memory that grows past it is not the cache
    db.execute("PRAGMA cache_size=-256")
    return db


def setup(path, ext):
    for suffix in ("", "-wal", "-shm", ".target", ".target-wal", ".target-shm"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)
    db = connect(path, ext)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA target.journal_mode=WAL")
    db.executescript("""
        CREATE VIRTUAL TABLE ledger USING idempotency(lease_seconds=1);
        CREATE VIRTUAL TABLE scratch USING idempotency(lease_seconds=1, retention_seconds=1);
        CREATE TABLE orders(tenant, op_key, claim_token, item);
        CREATE TABLE target.sent(key, token, pid);
    """)
    one(db, "SELECT idem_guard('ledger', 'orders', 'op_key', 'tenant', 'claim_token')")
    db.close()


class Worker:
    """One worker process's loop; its counters are its slot of the shared array."""

    def __init__(self, path, ext, slot, shared, log, seed, start):
        self.path, self.ext, self.slot, self.shared = path, ext, slot, shared
        self.rng, self.start, self.pid = random.Random(seed), start, os.getpid()
        self.fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def count(self, kind, n=1):
        self.shared[self.slot * FIELDS + KINDS.index(kind)] += n

    def tell(self, line):
        os.write(self.fd, (line + "\n").encode())

    def key_index(self):
        # a window of 300 keys sliding by 20 a second: new keys and keys met again
        return int((time.time() - self.start) * 20) + self.rng.randrange(300)

    def claim(self, tenant, tool, i, effect, in_tx, tell=True):
        args = json.dumps({"n": i})
        key = f"{tenant[0]}-{i}"
        if in_tx:
            self.db.execute("BEGIN IMMEDIATE")
        d = json.loads(one(self.db, "SELECT idem_claim('ledger', ?, 'c', ?, ?, ?, ?)",
                           (tenant, tool, args, effect, key)))
        if in_tx:
            self.db.execute("COMMIT")
        self.count("claims")
        if d["decision"] == "admitted":
            self.count("admitted")
            if tell:  # else the caller tells, once its transaction committed
                self.tell(f"A {tenant} {key} {d['token']} {d['attempt']}")
        elif d["decision"] == "replay":
            self.count("replays")
            if d.get("idempotent") is not True:
                self.tell(f"X replay without idempotent:true: {json.dumps(d)}")
        elif d["decision"] not in ("in_progress", "unknown"):
            self.tell(f"X claim of {key}: decision {d['decision']}: {json.dumps(d)}")
        return key, d

    def settle(self, ledger, key, token, status, detail):
        one(self.db, f"SELECT idem_settle('{ledger}', ?, ?, ?)", (token, status, json.dumps(detail)))
        self.count("settles")
        if ledger == "ledger":
            self.tell(f"S {key} {token} {status}")

    def external(self):
        i = self.key_index()
        key, d = self.claim("ext", "pay", i, "external", self.rng.random() < 0.5)
        if d["decision"] != "admitted":
            return
        token, r = d["token"], self.rng.random()
        if r < 0.05:
            self.settle("ledger", key, token, "released", {"sent": False})
            return
        try:  # every holder renews right before it sends
            one(self.db, "SELECT idem_renew('ledger', ?)", (token,))
            self.count("renewals")
        except sqlite3.IntegrityError:
            return  # the lease ran out (a slow worker): do not send
        self.db.execute("INSERT INTO target.sent VALUES (?, ?, ?)", (key, token, self.pid))
        self.count("sends")
        if r < 0.10:
            return  # a hang: the claim runs out and turns unknown
        try:
            if r < 0.20:
                self.settle("ledger", key, token, "unknown", {"reason": "read timeout"})
            else:
                self.settle("ledger", key, token, "succeeded", {"sent_by": self.pid})
        except sqlite3.IntegrityError:
            # the lease ran out first (a slow worker: the reconciler resolves it), or the
            # reconciler resolved the row first: refused as it is when called after
            self.count("late")

    def unclaimed(self):
        i = self.key_index()
        try:
            self.db.execute("INSERT INTO orders VALUES ('loc', ?, NULL, 'unclaimed')", (f"u-{i}",))
            self.tell(f"X unclaimed insert of u-{i} accepted")
        except sqlite3.IntegrityError as e:
            if not str(e).startswith(REFUSED + f'"u-{i}"'):
                self.tell(f"X unclaimed insert of u-{i}: {e}")
            self.count("refused")

    def local(self):
        i = self.key_index()
        if self.rng.random() < 0.03:
            self.unclaimed()
            return
        two_steps = self.rng.random() < 0.2
        self.db.execute("BEGIN IMMEDIATE")
        try:
            key, d = self.claim("loc", "order", i, "local", False, tell=False)
            admitted = d["decision"] == "admitted"
            if admitted and two_steps:  # the claim committed alone; a kill here leaves it to run out
                self.db.execute("COMMIT")
                self.tell(f"A loc {key} {d['token']} {d['attempt']}")
                self.db.execute("BEGIN IMMEDIATE")
            if admitted:
                self.db.execute("INSERT INTO orders VALUES ('loc', ?, ?, ?)", (key, d["token"], i))
                self.count("guarded")
                one(self.db, "SELECT idem_settle('ledger', ?, 'succeeded', ?)",
                    (d["token"], json.dumps({"order": i})))
                self.count("settles")
            self.db.execute("COMMIT")
        except sqlite3.IntegrityError as e:
            self.db.execute("ROLLBACK")
            if not str(e).startswith(REFUSED):
                raise
            self.count("late")  # the lease ran out between the steps, or was taken over: refused
            return
        except BaseException:
            if self.db.in_transaction:
                self.db.execute("ROLLBACK")
            raise
        if admitted:
            if not two_steps:
                self.tell(f"A loc {key} {d['token']} {d['attempt']}")
            self.tell(f"S {key} {d['token']} succeeded")

    def resolve(self):
        # the reads of the target and of the ledger, and the resolves they
        # decide, in one write transaction: nothing changes between them
        self.db.execute("BEGIN IMMEDIATE")
        try:
            self.reconcile()
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise

    def reconcile(self):
        now = one(self.db, "SELECT CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)")
        rows = self.db.execute("SELECT key, token, error IS NOT NULL, lease_until FROM ledger"
                               " WHERE tenant = 'ext' AND status = 'unknown' LIMIT 10").fetchall()
        for key, token, settled, lease_until in rows:
            was_sent = one(self.db, "SELECT count(*) FROM target.sent WHERE key = ? AND token = ?", (key, token))
            if was_sent:
                status, detail = "succeeded", {"reconciled": True}
            elif settled or lease_until < now - GRACE_MS:
                status, detail = "released", {"sent": False}
            else:
                continue
            one(self.db, "SELECT idem_resolve('ledger', 'ext', ?, ?, ?)", (key, status, json.dumps(detail)))
            self.count("resolves")

    def purge(self):
        self.count("purged", one(self.db, "SELECT idem_purge('scratch', 1)"))
        self.count("purges")

    def scratch(self):
        if self.rng.random() < 0.1:
            self.purge()
            return
        i = self.rng.randrange(1 << 40)
        d = json.loads(one(self.db, "SELECT idem_claim('scratch', 's', 'c', 'note', ?)", (json.dumps({"n": i}),)))
        if d["decision"] == "admitted":
            self.settle("scratch", None, d["token"], "succeeded", {"n": i})

    def run(self):
        self.db = connect(self.path, self.ext)
        base = self.slot * FIELDS
        self.shared[base + RSS_PID] = self.pid
        self.shared[base + BORN] = int(time.time() * 1000)
        ops = [self.external] * 5 + [self.local] * 4 + [self.resolve] + [self.scratch] * 2
        first = [self.unclaimed, self.purge]  # every start, so even a short run has both
        n = 0
        while not self.shared[base + STOP]:
            try:
                (first.pop(0) if first else self.rng.choice(ops))()
            except sqlite3.OperationalError as e:
                if "another writer interfered, so nothing was decided" in str(e):
                    # a settle or resolve that met another writer between its
                    # read and its write decides again on the row as it is
                    # then: this refusal is a broken answer
                    self.tell(f"X {e}")
                elif "locked" in str(e) or "busy" in str(e):
                    self.count("busy")
                else:
                    raise
                if self.db.in_transaction:
                    self.db.execute("ROLLBACK")
            n += 1
            if n % 20 == 0:
                self.shared[base + MEM] = _libsqlite.sqlite3_memory_used()
        self.db.close()


def spawn(args, slot, shared, logs, seed, start):
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            Worker(args.db, args.ext, slot, shared, logs[slot], seed, start).run()
        except BaseException as e:  # shown by the parent as a failure
            with open(logs[slot], "a") as f:
                f.write(f"X worker {os.getpid()} stopped: {type(e).__name__}: {e}\n")
            code = 1
        os._exit(code)
    return pid


def rss_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def read_logs(logs):
    told = {"A": [], "S": [], "X": []}
    for p in logs:
        if os.path.exists(p):
            with open(p) as f:
                for line in f:
                    parts = line.split(" ", 1)
                    if parts[0] in told and line.endswith("\n"):
                        told[parts[0]].append(parts[1].rstrip("\n"))
    return told


def ledger_check(path, ext):
    """The package's own `check` command on the file: (exit, broken checks)."""
    tmp = tempfile.mkdtemp()
    try:
        pkg = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bindings", "python",
                           "sqlite_idempotency")
        shutil.copytree(pkg, os.path.join(tmp, "sqlite_idempotency"))
        shutil.copy(ext, os.path.join(tmp, "sqlite_idempotency", "idempotency.so"))
        p = subprocess.run([sys.executable, "-m", "sqlite_idempotency", "check", path, "--ledger", "ledger", "--json"],
                           env=dict(os.environ, PYTHONPATH=tmp), capture_output=True, text=True, timeout=60)
    finally:
        shutil.rmtree(tmp)
    try:
        checks = json.loads(p.stdout)["checks"]
    except (ValueError, KeyError):
        return p.returncode, [p.stdout + p.stderr]
    return p.returncode, [c for c in checks if c["result"] == "broken"]


def verify(checks, args, told, kills, totals):
    db = connect(args.db, args.ext)
    rows = {(t, k): (tok, st, att) for t, k, tok, st, att in
            db.execute("SELECT tenant, key, token, status, attempt FROM ledger")}
    twice = db.execute("SELECT key, count(*) FROM target.sent GROUP BY key HAVING count(*) > 1").fetchall()
    checks.report(not twice, "no_external_sent_twice", f"keys sent more than once: {twice[:10]}")
    bad = db.execute("SELECT op_key, count(*) FROM orders WHERE tenant = 'loc' GROUP BY op_key"
                     " HAVING count(*) > 1").fetchall()
    bad += db.execute("SELECT o.op_key, o.claim_token FROM orders o LEFT JOIN ledger l ON l.tenant = o.tenant"
                      " AND l.key = o.op_key WHERE o.tenant = 'loc' AND (l.status IS NOT 'succeeded'"
                      " OR l.token IS NOT o.claim_token)").fetchall()
    bad += db.execute("SELECT key, 'no guarded row' FROM ledger WHERE tenant = 'loc' AND status = 'succeeded'"
                      " AND key NOT IN (SELECT op_key FROM orders WHERE tenant = 'loc')").fetchall()
    checks.report(not bad, "no_local_written_twice", f"{len(bad)} keys: {bad[:10]}")
    lost = []
    for line in told["A"]:
        tenant, key, token, attempt = line.split()
        row = rows.get((tenant, key))
        if row is None or row[2] < int(attempt) or (row[2] == int(attempt) and row[0] != token):
            lost.append(f"{key} attempt {attempt} token {token}: now {row}")
    checks.report(not lost, "no_claim_lost", f"{len(lost)} of {len(told['A'])} admissions: {lost[:5]}")
    gone = []
    for line in told["S"]:
        key, token, status = line.split()
        tenant = "ext" if key.startswith("e-") else "loc"
        row = rows.get((tenant, key))
        if row is None:
            gone.append(f"{key}: no row")
        elif row[0] == token and row[1] != status and not (status == "unknown" and row[1] in ("succeeded", "released")):
            gone.append(f"{key}: told {status}, now {row[1]}")
        elif row[0] != token and not (status == "released" or (status == "unknown" and row[2] > 1)):
            gone.append(f"{key}: told {status} with {token}, now attempt {row[2]} {row[1]}")
    checks.report(not gone and told["S"], "no_settle_lost", f"{len(gone)} of {len(told['S'])} settles: {gone[:5]}")
    wrong = []
    for key, token in db.execute("SELECT key, token FROM target.sent"):
        row = rows.get(("ext", key))
        if row is None or row[0] != token or row[1] in ("released", "failed"):
            wrong.append(f"{key} sent with {token}: now {row}")
    checks.report(not wrong, "sent_never_released", f"{len(wrong)} sends: {wrong[:5]}")
    guard = [x for x in told["X"] if "unclaimed insert" in x]
    checks.report(not guard and (totals["refused"] > 0 or args.verify_only), "guard_refused_unclaimed",
                  f"{totals['refused']} refused; {guard[:5]}")
    other = [x for x in told["X"] if "unclaimed insert" not in x]
    checks.report(not other, "answers", f"{len(other)} broken answers or stopped workers: {other[:5]}")
    ic = [r[0] for r in db.execute("PRAGMA integrity_check")]
    checks.report(ic == ["ok"], "integrity_check", "; ".join(ic[:5]))
    by_status = db.execute("SELECT tenant, status, count(*) FROM ledger GROUP BY 1, 2 ORDER BY 1, 2").fetchall()
    scratch_rows = one(db, "SELECT count(*) FROM scratch")
    db.close()
    code, broken = ledger_check(args.db, args.ext)
    checks.report(code in (0, 1) and not broken, "ledger_check", f"exit {code}: {broken}")
    if not args.verify_only:
        idle = [k for k in KINDS if k not in ("purged", "busy", "late") and totals[k] == 0]
        checks.report(not idle and kills > 0, "mixed_load", f"{kills} kills; no {', '.join(idle)}")
    print("   soak: ledger rows by tenant and status: "
          + ", ".join(f"{t}/{s}={n}" for t, s, n in by_status) + f"; scratch rows left: {scratch_rows}")


def main():
    env = os.environ.get
    ap = argparse.ArgumentParser(description="soak: mixed load on one ledger file, with kills")
    ap.add_argument("--db", required=True)
    ap.add_argument("--ext")
    ap.add_argument("--seconds", type=float, default=float(env("SOAK_SECONDS", "60")))
    ap.add_argument("--workers", type=int, default=int(env("SOAK_WORKERS", "4")))
    ap.add_argument("--interval", type=float, default=float(env("SOAK_INTERVAL", "5")))
    ap.add_argument("--kill-every", type=float, default=float(env("SOAK_KILL_EVERY", "2")))
    ap.add_argument("--seed", type=int, default=int(env("SOAK_SEED", str(int(time.time()) % 100000))))
    ap.add_argument("--verify-only", action="store_true", help="only the end checks, on an earlier run's files")
    args = ap.parse_args()
    checks = Checks("soak")
    if args.ext is None:
        args.ext, why = resolve_ext()
        if args.ext is None:
            checks.skip("run", why)
            return 0
    logs = [f"{args.db}.worker{w}.log" for w in range(args.workers)]
    if args.verify_only:
        if not os.path.exists(args.db):
            print(f"soak: --verify-only: no database {args.db}", file=sys.stderr)
            return 64
        verify(checks, args, read_logs(logs), 0, dict.fromkeys(KINDS, 0))
        return checks.status()
    for name, v in (("--seconds", args.seconds), ("--interval", args.interval), ("--kill-every", args.kill_every)):
        if not v > 0:
            print(f"soak: {name} must be a number above 0, got {v}", file=sys.stderr)
            return 64
    if not 2 <= args.workers <= 64:
        print(f"soak: --workers must be from 2 to 64, got {args.workers}", file=sys.stderr)
        return 64
    rng = random.Random(args.seed)
    print(f"   soak: {args.workers} workers, {args.seconds:g} s, a kill every {args.kill_every:g} s,"
          f" seed {args.seed} (SOAK_SEED={args.seed} reproduces the kill order)")
    setup(args.db, args.ext)
    shared = multiprocessing.RawArray("q", args.workers * FIELDS)
    for p in logs:
        if os.path.exists(p):
            os.remove(p)
    start = time.time()
    pids = [spawn(args, w, shared, logs, rng.randrange(1 << 30), start) for w in range(args.workers)]
    kills, next_kill, next_report = 0, start + args.kill_every, start + args.interval
    last = [0] * len(KINDS)
    last_t = start
    print("   soak:    t  " + " ".join(f"{k:>8}" for k in KINDS)
          + "  (per second)  RSS KiB max   oldest worker: up, sqlite3_memory_used")
    while True:
        now = time.time()
        if now >= start + args.seconds:
            break
        if now >= next_kill:
            w = rng.randrange(args.workers)
            os.kill(pids[w], signal.SIGKILL)
            os.waitpid(pids[w], 0)
            kills += 1
            pids[w] = spawn(args, w, shared, logs, rng.randrange(1 << 30), start)
            next_kill += args.kill_every
        if now >= next_report:
            tot = [sum(shared[w * FIELDS + i] for w in range(args.workers)) for i in range(len(KINDS))]
            dt = now - last_t
            rss = max(rss_kib(p) for p in pids)
            old = min(range(args.workers), key=lambda w: shared[w * FIELDS + BORN] or now * 1000)
            up = now - shared[old * FIELDS + BORN] / 1000 if shared[old * FIELDS + BORN] else 0
            print(f"   soak: {now - start:4.0f}s " + " ".join(f"{(t - l) / dt:8.0f}" for t, l in zip(tot, last))
                  + f"  {rss:25d}  {up:8.0f} s {shared[old * FIELDS + MEM]:12d}", flush=True)
            last, last_t = tot, now
            next_report += args.interval
        time.sleep(min(0.05, max(0.0, min(next_kill, next_report) - time.time())))
    for w in range(args.workers):
        shared[w * FIELDS + STOP] = 1
    for w, pid in enumerate(pids):
        deadline = time.time() + 15
        while time.time() < deadline and os.waitpid(pid, os.WNOHANG) == (0, 0):
            time.sleep(0.05)
        else:
            if time.time() >= deadline:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                print(f"   soak: worker {w} did not stop within 15 s; killed")
    totals = {k: sum(shared[w * FIELDS + i] for w in range(args.workers)) for i, k in enumerate(KINDS)}
    elapsed = time.time() - start
    print(f"   soak: {elapsed:.1f} s, {kills} kills; totals: " + " ".join(f"{k}={v}" for k, v in totals.items()))
    told = read_logs(logs)
    print(f"   soak: workers were told {len(told['A'])} admissions and {len(told['S'])} settles")
    verify(checks, args, told, kills, totals)
    return checks.status()


if __name__ == "__main__":
    sys.exit(main())
