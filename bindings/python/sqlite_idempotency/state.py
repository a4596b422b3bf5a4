"""The ledger's own state, read with SQL: what the operator's command and the metrics show.

`read_state(conn, name)` answers, for one ledger, its format, the problems
that make it broken (the ledger's refusal of reads, a guard missing a
trigger), the rows that need attention (unknown, expired claims), the
oldest unknown and the row counts by status and tool. Open rows (claimed,
unknown) are read through the ledger, whose status column is the effective
status (an external claim whose lease ran out reads unknown); settled rows
are counted on ``<name>_rows``. When the ledger refuses reads (a dropped
trigger, say), everything is read from ``<name>_rows`` and an expired
external claim is counted unknown by the same rule. The Node package's
state.js is the same code: both print the same bytes.
"""
from __future__ import annotations

import os
import re
import sqlite3
from typing import Any, Dict, List, Optional

STATUSES = ("claimed", "unknown", "succeeded", "failed", "released")
# Unix ms from the statement's clock, exactly (julianday would round).
NOW_SQL = ("CAST(strftime('%s', 'now') AS INTEGER) * 1000 + "
           "CAST(substr(strftime('%f', 'now'), 4) AS INTEGER)")
_USING = re.compile(r"\busing\s+idempotency\b", re.IGNORECASE)
NOW_ENV = "SQLITE_IDEMPOTENCY_NOW_MS"


class CommandError(Exception):
    """An error of the command: its message, and the exit status (2: broken or failed; 64: usage)."""

    def __init__(self, message: str, status: int = 2):
        super().__init__(message)
        self.status = status


def q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def open_file(path: str, write: bool = False) -> sqlite3.Connection:
    """The database file, read-only unless write; the extension loaded. Never creates a file."""
    from . import load
    if not os.path.exists(path):
        raise CommandError(f"sqlite-idempotency: no such file: {path}")
    if os.path.isdir(path):
        raise CommandError(f"sqlite-idempotency: {path} is a directory, not a database file")
    uri = "file:" + _uri_path(os.path.abspath(path)) + ("?mode=rw" if write else "?mode=ro")
    try:
        conn = sqlite3.connect(uri, uri=True, isolation_level=None)
        conn.execute("PRAGMA busy_timeout=5000")
        conn.execute("SELECT count(*) FROM sqlite_schema").fetchone()
    except sqlite3.Error as e:
        if "not a database" in str(e):
            raise CommandError(f"sqlite-idempotency: {path} is not a SQLite database ({e})") from None
        raise CommandError(f"sqlite-idempotency: cannot open {path}: {e}") from None
    load(conn)
    return conn


def _uri_path(p: str) -> str:
    from urllib.parse import quote
    return quote(p, safe="/")


def ledgers(conn: sqlite3.Connection) -> List[str]:
    """The ledgers (tables USING idempotency) of the main schema, by name."""
    rows = conn.execute("SELECT name, sql FROM main.sqlite_schema WHERE type = 'table' AND sql IS NOT NULL "
                        "ORDER BY name").fetchall()
    return [n for n, sql in rows if sql.upper().startswith("CREATE VIRTUAL TABLE") and _USING.search(sql)]


def pick(conn: sqlite3.Connection, path: str, name: Optional[str]) -> str:
    """The ledger --ledger names, or the only ledger of the file."""
    have = ledgers(conn)
    if name is not None:
        if name not in have:
            its = f"its ledgers: {', '.join(have)}" if have else "it has none"
            raise CommandError(f"sqlite-idempotency: {path} has no ledger \"{name}\" ({its})")
        return name
    if not have:
        raise CommandError(f"sqlite-idempotency: {path} has no ledger (no table USING idempotency)")
    if len(have) > 1:
        raise CommandError(f"sqlite-idempotency: {path} has {len(have)} ledgers ({', '.join(have)}): "
                           "choose one with --ledger NAME")
    return have[0]


def probe(conn: sqlite3.Connection, name: str) -> Optional[str]:
    """None when the ledger answers a read, else its error message (it refuses every operation then)."""
    try:
        conn.execute(f"SELECT count(*) FROM {q(name)} WHERE status = 'unknown'").fetchone()
        return None
    except sqlite3.Error as e:
        return str(e)


def now_ms(conn: sqlite3.Connection) -> int:
    return conn.execute(f"SELECT {NOW_SQL}").fetchone()[0]


def age_now(conn_now: int) -> int:
    """The time ages are measured from: $SQLITE_IDEMPOTENCY_NOW_MS, else the database's clock."""
    v = os.environ.get(NOW_ENV)
    if v is None or v == "":
        return conn_now
    if not re.fullmatch(r"[0-9]{1,15}", v):
        raise CommandError(f"sqlite-idempotency: {NOW_ENV} must be Unix milliseconds (digits), got \"{v}\"", 64)
    return int(v)


def meta(conn: sqlite3.Connection, name: str) -> Dict[str, Any]:
    try:
        return dict(conn.execute(f"SELECT k, v FROM {q(name + '_meta')} ORDER BY k").fetchall())
    except sqlite3.Error:
        return {}


def effective_sql(now: int) -> str:
    """The effective status of a row of <name>_rows, for a ledger that refuses reads."""
    return (f"CASE WHEN status = 'claimed' AND lease_until <= {int(now)} AND effect = 'external' "
            "THEN 'unknown' ELSE status END")


def guards(conn: sqlite3.Connection, name: str) -> List[Dict[str, Any]]:
    """Each guarded table and whether its insert and update triggers are in place."""
    try:
        rows = conn.execute(f"SELECT tbl, key_column, tenant_column, token_column FROM {q(name + '_guards')} "
                            "ORDER BY id").fetchall()
    except sqlite3.Error:
        return []
    out = []
    for tbl, key_col, ten_col, tok_col in rows:
        names = [r[0] for r in conn.execute("SELECT name FROM main.sqlite_schema WHERE type = 'trigger' AND "
                                            "tbl_name = ? COLLATE NOCASE ORDER BY name", (tbl,))]
        missing = [w for w in ("insert", "update") if not any(n.endswith(f"_idem_{name}_{w}") for n in names)]
        out.append({"table": tbl, "key_column": key_col, "tenant_column": ten_col, "token_column": tok_col,
                    "missing": missing})
    return out


def guard_problem(name: str, g: Dict[str, Any]) -> str:
    cols = ", ".join(f"'{c}'" for c in (g["key_column"], g["tenant_column"], g["token_column"]) if c is not None)
    return (f"guard of table {g['table']} is missing its {' and '.join(g['missing'])} "
            f"trigger{'s' if len(g['missing']) > 1 else ''}: writes to {g['table']} are not checked against "
            f"claims; restore it with SELECT idem_unguard('{name}', '{g['table']}'); "
            f"SELECT idem_guard('{name}', '{g['table']}', {cols})")


def read_state(conn: sqlite3.Connection, path: str, name: str) -> Dict[str, Any]:
    now = now_ms(conn)
    ages = age_now(now)
    m = meta(conn, name)
    fmt = m.get("format")
    refused = probe(conn, name)
    problems: List[str] = []
    if refused is not None:
        problems.append(refused)
    gs = guards(conn, name)
    for g in gs:
        if g["missing"]:
            problems.append(guard_problem(name, g))
    counts: Dict[tuple, int] = {}
    oldest = None
    open_claims = expired = 0
    rows_table = q(name + "_rows")
    read_from = name if refused is None else f"{name}_rows"
    try:
        if refused is None:
            for st in ("claimed", "unknown"):
                for tool, n in conn.execute(f"SELECT tool, count(*) FROM {q(name)} WHERE status = ? GROUP BY tool",
                                            (st,)):
                    counts[(st, tool)] = n
            for st, tool, n in conn.execute(f"SELECT status, tool, count(*) FROM {rows_table} WHERE status IN "
                                            "('succeeded', 'failed', 'released') GROUP BY status, tool"):
                counts[(st, tool)] = n
            open_claims = conn.execute(f"SELECT count(*) FROM {q(name)} WHERE status = 'claimed' AND "
                                       "lease_until > ?", (now,)).fetchone()[0]
            r = conn.execute(f"SELECT tenant, key, tool, created_at FROM {q(name)} WHERE status = 'unknown' "
                             "ORDER BY created_at, rowid LIMIT 1").fetchone()
        else:
            eff = effective_sql(now)
            for st, tool, n in conn.execute(f"SELECT {eff}, tool, count(*) FROM {rows_table} GROUP BY 1, 2"):
                counts[(st, tool)] = n
            open_claims = conn.execute(f"SELECT count(*) FROM {rows_table} WHERE status = 'claimed' AND "
                                       "lease_until > ?", (now,)).fetchone()[0]
            r = conn.execute(f"SELECT tenant, key, tool, created_at FROM {rows_table} WHERE {eff} = 'unknown' "
                             "ORDER BY created_at, id LIMIT 1").fetchone()
        expired = conn.execute(f"SELECT count(*) FROM {rows_table} WHERE status = 'claimed' AND lease_until <= ?",
                               (now,)).fetchone()[0]
        if r is not None:
            oldest = {"tenant": r[0], "key": r[1], "tool": r[2], "created_at": r[3],
                      "age_seconds": max(0, (ages - r[3]) // 1000)}
    except sqlite3.Error as e:
        read_from = None
        problems.append(f"{name}_rows cannot be read: {e}")
    unknown = sum(n for (st, _), n in counts.items() if st == "unknown")
    attention = []
    if unknown:
        attention.append(f"{plural(unknown, 'unknown row')}: reconcile with the targets, then resolve")
    if expired:
        attention.append(f"{plural(expired, 'expired claim')}: their holders stopped before settling")
    order = {s: i for i, s in enumerate(STATUSES)}
    return {
        "file": path,
        "ledger": name,
        "format": fmt,
        "verdict": "broken" if problems else "needs attention" if attention else "healthy",
        "problems": problems,
        "attention": attention,
        "read_from": read_from,
        "options": {k: v for k, v in m.items() if k not in ("format", "id")},
        "guards": [{"table": g["table"], "missing": g["missing"]} for g in gs],
        "open_claims": open_claims,
        "unknown": unknown,
        "expired_claims": expired,
        "oldest_unknown": oldest,
        "counts": [{"status": s, "tool": t, "rows": n}
                   for (s, t), n in sorted(counts.items(), key=lambda kv: (order.get(kv[0][0], 9), kv[0][1]))],
    }


def exit_status(state: Dict[str, Any]) -> int:
    return {"healthy": 0, "needs attention": 1}.get(state["verdict"], 2)
