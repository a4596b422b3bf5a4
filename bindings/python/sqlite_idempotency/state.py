"""The ledger's own state, as the extension reports it: what the operator's command and the metrics show.

`read_state(conn, path, name)` is the answer of the extension's
``idem_health(name)`` (docs/reference.md): the format, the problems that
make the ledger broken (its refusal of operations, in its own words), its
tables, its own and its guards' triggers by name, the options, the rows by effective
status and tool, the live and expired claims and the oldest unknown row.
Nothing here restates a rule of the ledger: the command only adds the file
name and the age of the oldest unknown. The Node package's state.js is the
same code: both print the same bytes.
"""
from __future__ import annotations

import json
import os
import re
import sqlite3
from datetime import datetime, timezone
from typing import Any, Dict, List, Optional


def iso(ms: Optional[int]) -> str:
    """Unix milliseconds as ISO 8601 in UTC, as JavaScript's toISOString
    writes it ("-" for none): every time the package shows a person."""
    if ms is None:
        return "-"
    secs, rest = divmod(int(ms), 1000)
    return datetime.fromtimestamp(secs, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S") + f".{rest:03d}Z"

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


def read_state(conn: sqlite3.Connection, path: str, name: str) -> Dict[str, Any]:
    """idem_health(name) with the file's name first, and the oldest unknown's age instead of "now".

    When the extension cannot answer for the ledger at all (a format this
    build does not read, options out of range), its error is the one problem.
    """
    try:
        health = json.loads(conn.execute("SELECT idem_health(?)", (name,)).fetchone()[0])
    except sqlite3.Error as e:
        health = {"ledger": name, "schema": None, "format": None, "verdict": "broken", "problems": [str(e)],
                  "attention": [], "tables": [], "triggers": [], "guards": [], "options": None, "now": None, "live_claims": 0,
                  "unknown": 0, "expired_claims": 0, "oldest_unknown": None, "counts": []}
    # the ledger's clock decided what is expired; ages are measured from
    # $SQLITE_IDEMPOTENCY_NOW_MS when it is set, so the ledger's own time is
    # not shown
    now = health.pop("now")
    o = health["oldest_unknown"]
    if o is not None:
        o["age_seconds"] = max(0, (age_now(now) - o["created_at"]) // 1000)
    return {"file": path, **health}


def exit_status(state: Dict[str, Any]) -> int:
    return {"healthy": 0, "needs attention": 1}.get(state["verdict"], 2)
