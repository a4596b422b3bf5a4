"""sqlite-idempotency: the operator's command (docs/operating.md).

    sqlite-idempotency status agent.db
    sqlite-idempotency list agent.db --status unknown --older-than 1h
    python -m sqlite_idempotency show agent.db idem1-... --json

The Node package's cli.js is the same command: the same subcommands,
options, output bytes and exit statuses (0 healthy, 1 needs attention,
2 broken or failed, 64 usage error). Every subcommand that only reads opens
the file read-only.
"""
from __future__ import annotations

import re
import sqlite3
import sys
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

from .state import _uri_path as _uri_part
from .state import (STATUSES, CommandError, age_now, exit_status, iso, now_ms, open_file, pick, plural, probe, q,
                    read_state)

USAGE = """usage: sqlite-idempotency COMMAND FILE [ARGUMENTS] [--ledger NAME] [--json]

commands:
  status FILE          counts by status and tool, the oldest unknown, expired claims, health
  list FILE            rows: --status S (open, all, claimed, unknown, succeeded, failed,
                       released; default open), --tool T, --tenant T, --target T,
                       --older-than AGE, --text T (the key, or text in the arguments),
                       --limit N (default 100)
  show FILE KEY        one row and its targets (--tenant T when several tenants hold the key)
  resolve FILE KEY STATUS [--detail JSON] [--tenant T]
                       settles an unknown row: succeeded, failed or released
  resolve FILE --all STATUS [--tool T] [--tenant T] [--older-than AGE] [--detail JSON] [--dry-run]
                       settles every unknown row that matches, in one transaction
  purge FILE --older-than AGE
                       deletes settled rows not updated for AGE (ends their deduplication)
  check FILE           format, own and guard triggers, options, refusal, integrity_check, rows
  metrics FILE         the ledger's state in the Prometheus text format
  serve FILE [--port N] [--host H] [--token T]
                       a read-only page of the above on http://127.0.0.1:PORT/ (--port 0: any
                       free port); another --host needs --token, a bearer token

--ledger NAME picks the ledger when the file has several; --json prints JSON.
AGE is seconds, or a number and s, m, h or d (90s, 15m, 2h, 7d).
exit status: 0 healthy or done, 1 needs attention, 2 broken or failed, 64 usage error.
"""

_COMMANDS: Dict[str, Tuple[Tuple[str, ...], Tuple[str, ...]]] = {
    # command: (positional arguments, options that take a value)
    "status": (("FILE",), ()),
    "list": (("FILE",), ("--status", "--tool", "--tenant", "--target", "--older-than", "--text", "--limit")),
    "show": (("FILE", "KEY"), ("--tenant",)),
    "resolve": (("FILE", "KEY", "STATUS"), ("--detail", "--tenant", "--all", "--tool", "--older-than")),
    "purge": (("FILE",), ("--older-than",)),
    "check": (("FILE",), ()),
    "metrics": (("FILE",), ()),
    "serve": (("FILE",), ("--port", "--host", "--token")),
}
# options that take no value, by command
_FLAGS: Dict[str, Tuple[str, ...]] = {"resolve": ("--dry-run",)}
_AGE = re.compile(r"([0-9]{1,12})([smhd]?)")
_UNIT = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


class Args:
    def __init__(self, command: str, pos: List[str], opts: Dict[str, str], json_out: bool):
        self.command, self.pos, self.opts, self.json = command, pos, opts, json_out


def parse(argv: Sequence[str]) -> Args:
    """The command line, or CommandError(64) saying what is wrong with it."""
    argv = list(argv)
    command = None
    pos: List[str] = []
    opts: Dict[str, str] = {}
    json_out = False
    i = 0
    while i < len(argv):
        a = argv[i]
        i += 1
        if a == "--":
            pos.extend(argv[i:])
            break
        if a.startswith("--") and len(a) > 2:
            name, eq, value = a.partition("=")
            if name == "--json":
                if eq:
                    raise CommandError("sqlite-idempotency: --json takes no value", 64)
                json_out = True
                continue
            if name in _FLAGS.get(command or "", ()):
                if eq:
                    raise CommandError(f"sqlite-idempotency: {name} takes no value", 64)
                if name in opts:
                    raise CommandError(f"sqlite-idempotency: option {name} is given twice", 64)
                opts[name] = ""
                continue
            allowed = ("--ledger",) + (_COMMANDS[command][1] if command in _COMMANDS else ())
            if name not in allowed:
                where = f" for {command}" if command in _COMMANDS else ""
                raise CommandError(f"sqlite-idempotency: unknown option {name}{where} (see --help)", 64)
            if not eq:
                if i >= len(argv):
                    raise CommandError(f"sqlite-idempotency: option {name} needs a value", 64)
                value = argv[i]
                i += 1
            if name in opts:
                raise CommandError(f"sqlite-idempotency: option {name} is given twice", 64)
            opts[name] = value
            continue
        if a.startswith("-") and a != "-":
            raise CommandError(f"sqlite-idempotency: unknown option {a} (see --help)", 64)
        if command is None:
            if a not in _COMMANDS:
                raise CommandError(f"sqlite-idempotency: unknown command \"{a}\"; the commands are "
                                   + ", ".join(_COMMANDS), 64)
            command = a
        else:
            pos.append(a)
    if command is None:
        raise CommandError("sqlite-idempotency: no command given (see --help)", 64)
    need = _COMMANDS[command][0]
    if command == "resolve" and "--all" in opts:
        need = ("FILE",)
    elif command == "resolve":
        for name in ("--tool", "--older-than", "--dry-run"):
            if name in opts:
                raise CommandError(f"sqlite-idempotency: {name} applies to resolve --all only", 64)
    if len(pos) < len(need):
        raise CommandError(f"sqlite-idempotency: {command} needs {' '.join(need)}", 64)
    if len(pos) > len(need):
        raise CommandError(f"sqlite-idempotency: {command} takes {' '.join(need)}; "
                           f"unexpected argument \"{pos[len(need)]}\"", 64)
    if command == "metrics" and json_out:
        raise CommandError("sqlite-idempotency: metrics prints the Prometheus text format; --json does not apply", 64)
    if command == "serve" and json_out:
        raise CommandError("sqlite-idempotency: serve answers JSON on its own endpoints; --json does not apply", 64)
    if command == "purge" and "--older-than" not in opts:
        raise CommandError("sqlite-idempotency: purge needs --older-than AGE", 64)
    return Args(command, pos, opts, json_out)


def _uri(path: str) -> str:
    import os
    return _uri_part(os.path.abspath(path))


def age_seconds(text: str, option: str) -> int:
    m = _AGE.fullmatch(text)
    if not m:
        raise CommandError(f"sqlite-idempotency: {option} must be seconds or a number and s, m, h or d "
                           f"(90s, 15m, 2h, 7d), got \"{text}\"", 64)
    return int(m.group(1)) * _UNIT[m.group(2)]


# --- output -----------------------------------------------------------------------


class Raw:
    """JSON text put into the output as it is (the ledger's canonical JSON, digits and all)."""

    def __init__(self, text: Optional[str]):
        self.text = text


def _jstr(s: str) -> str:
    out = ['"']
    for ch in s:
        c = ord(ch)
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif c < 0x20:
            out.append({"\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f"}.get(ch, f"\\u{c:04x}"))
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def jdump(v: Any, ind: str = "") -> str:
    """JSON with two-space indentation, as the Node command writes it."""
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return _jstr(v)
    if isinstance(v, Raw):
        return "null" if v.text is None else v.text
    inner = ind + "  "
    if isinstance(v, dict):
        if not v:
            return "{}"
        return "{\n" + ",\n".join(f"{inner}{_jstr(k)}: {jdump(x, inner)}" for k, x in v.items()) + f"\n{ind}}}"
    if isinstance(v, (list, tuple)):
        if not v:
            return "[]"
        return "[\n" + ",\n".join(inner + jdump(x, inner) for x in v) + f"\n{ind}]"
    raise TypeError(f"jdump: {v!r}")


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [list(headers)] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = []
    for r in cells:
        lines.append("  ".join(c.ljust(widths[i]) if i < len(r) - 1 else c for i, c in enumerate(r)))
    return "\n".join(lines) + "\n"


def pairs(items: Sequence[Tuple[str, str]]) -> str:
    w = max(len(k) for k, _ in items) + 2
    return "".join(f"{(k + ':').ljust(w)}{v}\n" for k, v in items)


def options_text(options: Optional[Dict[str, Any]]) -> str:
    return " ".join(f"{k}={v}" for k, v in options.items()) if options else "(none readable)"


# --- the commands -----------------------------------------------------------------


def guard_text(g: Dict[str, Any]) -> str:
    """A guard as status shows it: its table and its triggers that are not in place."""
    if g["table_dropped"]:
        return f"{g['table']} (table dropped)"
    bad = [f"{t['name']} {t['state']}" for t in g["triggers"] if t["state"] != "ok"]
    return f"{g['table']} ({', '.join(bad) if bad else 'triggers ok'})"


class _Progress:
    """Progress of a long run, on a terminal only: "LABEL I of N" on stderr, rewritten in place at
    most every 100 ms and cleared at the end; nothing when stderr is not a TTY (a pipe, a file) or
    the output is JSON. The Node command's is the same. Neither language's standard library has a
    progress bar, and one line does not earn the package a dependency."""

    def __init__(self, a: Args, label: str, n: int):
        self.tty = not a.json and sys.stderr.isatty() and n > 0
        self.label, self.n, self.last = label, n, 0.0

    def step(self, i: int) -> None:
        if not self.tty:
            return
        t = time.monotonic()
        if i == self.n or t - self.last >= 0.1:
            self.last = t
            sys.stderr.write(f"\r{self.label} {i} of {self.n}")
            sys.stderr.flush()

    def end(self) -> None:
        if self.tty:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()


def cmd_status(a: Args, out: List[str]) -> int:
    path = a.pos[0]
    conn = open_file(path)
    st = read_state(conn, path, pick(conn, path, a.opts.get("--ledger")))
    if a.json:
        out.append(jdump(st) + "\n")
        return exit_status(st)
    items = [("ledger", f"{st['ledger']} in {path}"),
             ("format", "unreadable" if st["format"] is None else str(st["format"])),
             ("verdict", st["verdict"]),
             ("options", options_text(st["options"])),
             ("guards", ", ".join(guard_text(g) for g in st["guards"]) or "none"),
             ("open claims", str(st["live_claims"])), ("unknown", str(st["unknown"])),
             ("expired claims", str(st["expired_claims"]))]
    o = st["oldest_unknown"]
    items.append(("oldest unknown", "none" if o is None else
                  f"{o['tenant']} {o['key']} {o['tool']}, claimed {iso(o['created_at'])} ({o['age_seconds']} s ago)"))
    for p in st["problems"]:
        items.append(("problem", p))
    for p in st["attention"]:
        items.append(("attention", p))
    text = pairs(items) + "\n"
    text += table(("status", "tool", "rows"), [(c["status"], c["tool"], c["rows"]) for c in st["counts"]]) \
        if st["counts"] else "(no rows)\n"
    out.append(text)
    return exit_status(st)


def stored_note(name: str, refused: str) -> str:
    return (f"read from {name}_rows, stored statuses (an expired claim shows claimed): "
            f"the ledger refuses reads: {refused}")


_ROW_COLS = "tenant, key, conversation, tool, effect, status, attempt, created_at, updated_at, lease_until"


def row_filters(a: Args, older: Optional[int], now: int) -> Tuple[List[str], List[Any]]:
    """The WHERE terms and parameters of --tool, --tenant, --text (list: the key, or text inside the
    arguments) and --older-than (seconds, measured from now)."""
    where, params = [], []
    for opt, col in (("--tool", "tool"), ("--tenant", "tenant")):
        if opt in a.opts:
            where.append(f"{col} = ?")
            params.append(a.opts[opt])
    if "--text" in a.opts:
        where.append("(key = ? OR instr(args, ?) > 0)")
        params += [a.opts["--text"], a.opts["--text"]]
    if older is not None:
        where.append("updated_at <= ?")
        params.append(age_now(now) - older * 1000)
    return where, params


def cmd_list(a: Args, out: List[str]) -> int:
    path = a.pos[0]
    status = a.opts.get("--status", "open")
    if status not in STATUSES + ("open", "all"):
        raise CommandError(f"sqlite-idempotency: --status must be one of open, all, {', '.join(STATUSES)}; "
                           f"got \"{status}\"", 64)
    limit_text = a.opts.get("--limit", "100")
    if not re.fullmatch(r"[0-9]{1,7}", limit_text) or not 1 <= int(limit_text) <= 1000000:
        raise CommandError(f"sqlite-idempotency: --limit must be an integer from 1 to 1000000, got \"{limit_text}\"", 64)
    limit = int(limit_text)
    older = age_seconds(a.opts["--older-than"], "--older-than") if "--older-than" in a.opts else None
    conn = open_file(path)
    name = pick(conn, path, a.opts.get("--ledger"))
    refused = probe(conn, name)
    now = now_ms(conn)
    where, params = row_filters(a, older, now)
    targets_sql = None
    if "--target" in a.opts:
        if not _targets_kept(conn, name):
            raise CommandError(f"sqlite-idempotency: ledger {name} keeps no targets (format 4); upgrade it once "
                               f"with SELECT idem_upgrade('{name}')")
        targets_sql = f"SELECT claim FROM {q(name + '_targets')} WHERE target = ?"
        params.append(a.opts["--target"])
    statuses = list(STATUSES) if status == "all" else ["claimed", "unknown"] if status == "open" else [status]
    rows: List[Tuple[Any, ...]] = []
    try:
        if refused is None:
            for s in statuses:
                # the status as a literal (one of STATUSES): the ledger then reads claimed and
                # unknown through its partial index of open rows, which a bound parameter,
                # unknown when the plan is made, would not let it
                sql = (f"SELECT rowid, {_ROW_COLS} FROM {q(name)} WHERE status = '{s}'"
                       + "".join(f" AND {w}" for w in where)
                       + (f" AND rowid IN ({targets_sql})" if targets_sql else "") + " ORDER BY rowid LIMIT ?")
                rows += conn.execute(sql, params + [limit + 1]).fetchall()
        else:
            # the stored statuses: the ledger, which sees them at its clock, refuses
            sql = (f"SELECT id, {_ROW_COLS} FROM {q(name + '_rows')} WHERE status IN "
                   f"({', '.join('?' for _ in statuses)})" + "".join(f" AND {w}" for w in where)
                   + (f" AND id IN ({targets_sql})" if targets_sql else "")
                   + " ORDER BY id LIMIT ?")
            rows = conn.execute(sql, statuses + params + [limit + 1]).fetchall()
    except sqlite3.Error as e:
        raise CommandError(f"sqlite-idempotency: {name} cannot be read: {e}") from None
    rows.sort(key=lambda r: r[0])
    more = len(rows) > limit
    rows = rows[:limit]
    names = _ROW_COLS.split(", ")
    code = 2 if refused is not None else 0
    if a.json:
        out.append(jdump([dict(zip(names, r[1:])) for r in rows]) + "\n")
        if refused is not None:
            out.append(f"[{stored_note(name, refused)}]\n")
        return code
    text = table(("tenant", "key", "tool", "status", "attempt", "updated"),
                 [(r[1], r[2], r[4], r[6], r[7], iso(r[9])) for r in rows]) if rows else ""
    text += f"first {limit} rows (--limit N shows more)\n" if more else f"{plural(len(rows), 'row')}\n"
    if refused is not None:
        text += f"{stored_note(name, refused)}\n"
    out.append(text)
    return code


def _targets_kept(conn: sqlite3.Connection, name: str) -> bool:
    """Whether the ledger keeps targets (format 5 on); --target raises when it does not."""
    try:
        kept = conn.execute("SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = ?",
                            (name + "_targets",)).fetchone() is not None
    except sqlite3.Error as e:
        raise CommandError(f"sqlite-idempotency: {name} cannot be read: {e}") from None
    return kept


def _targets_of(conn: sqlite3.Connection, name: str, tenant: str, key: str) -> List[Dict[str, Any]]:
    """A row's targets (docs/ledger.md, "Targets"), by target; none on a ledger that keeps none."""
    if not _targets_kept(conn, name):
        return []
    try:
        rows = conn.execute(f"SELECT target, allowed_by, allowed_at, overrode FROM {q(name + '_targets')} "
                            f"WHERE claim = (SELECT id FROM {q(name + '_rows')} WHERE tenant = ? AND key = ?) "
                            "ORDER BY target", (tenant, key)).fetchall()
    except sqlite3.Error as e:
        raise CommandError(f"sqlite-idempotency: {name}_targets cannot be read: {e}") from None
    return [dict(zip(("target", "allowed_by", "allowed_at", "overrode"), r)) for r in rows]


def _targets_text(targets: List[Dict[str, Any]]) -> str:
    if not targets:
        return "none"
    return ", ".join(t["target"] if t["allowed_by"] is None else
                     f"{t['target']} (allowed by {t['allowed_by']} at {iso(t['allowed_at'])}, over {t['overrode']})"
                     for t in targets)


def _tenant_of(conn: sqlite3.Connection, name: str, key: str, tenant: Optional[str]) -> str:
    if tenant is not None:
        return tenant
    try:
        tenants = [r[0] for r in conn.execute(f"SELECT tenant FROM {q(name + '_rows')} WHERE key = ? ORDER BY tenant",
                                              (key,))]
    except sqlite3.Error as e:
        raise CommandError(f"sqlite-idempotency: {name}_rows cannot be read: {e}") from None
    if not tenants:
        raise CommandError(f"sqlite-idempotency: ledger {name} has no key \"{key}\"")
    if len(tenants) > 1:
        raise CommandError(f"sqlite-idempotency: key \"{key}\" is held by {len(tenants)} tenants "
                           f"({', '.join(tenants)}): choose one with --tenant")
    return tenants[0]


_SHOW = ("tenant", "key", "conversation", "tool", "effect", "status", "attempt", "created_at", "updated_at",
         "lease_until", "args", "result", "error", "members")


def cmd_show(a: Args, out: List[str]) -> int:
    path, key = a.pos[0], a.pos[1]
    conn = open_file(path)
    name = pick(conn, path, a.opts.get("--ledger"))
    tenant = _tenant_of(conn, name, key, a.opts.get("--tenant"))
    refused = probe(conn, name)
    cols = ", ".join(_SHOW)
    try:
        if refused is None:
            r = conn.execute(f"SELECT {cols} FROM {q(name)} WHERE tenant = ? AND key = ?", (tenant, key)).fetchone()
        else:
            r = conn.execute(f"SELECT {cols} FROM {q(name + '_rows')} WHERE tenant = ? AND key = ?",
                             (tenant, key)).fetchone()
    except sqlite3.Error as e:
        raise CommandError(f"sqlite-idempotency: {name} cannot be read: {e}") from None
    if r is None:
        raise CommandError(f"sqlite-idempotency: ledger {name} has no key \"{key}\" of tenant \"{tenant}\"")
    d = dict(zip(_SHOW, r))
    targets = _targets_of(conn, name, tenant, key)
    code = 2 if refused is not None else 0
    if a.json:
        obj = {k: (Raw(v) if k in ("args", "result", "error", "members") else v) for k, v in d.items()}
        obj["targets"] = targets
        out.append(jdump(obj) + "\n")
        if refused is not None:
            out.append(f"[{stored_note(name, refused)}]\n")
        return code
    items = []
    for k in _SHOW:
        v = d[k]
        if k in ("created_at", "updated_at", "lease_until"):
            items.append((k, f"{iso(v)} ({v})"))
        elif k in ("args", "result", "error", "members"):
            items.append((k, "null" if v is None else v))
        else:
            items.append((k, str(v)))
    items.append(("targets", _targets_text(targets)))
    if refused is not None:
        items.append(("read from", stored_note(name, refused)))
    out.append(pairs(items))
    return code


def cmd_resolve(a: Args, out: List[str]) -> int:
    if "--all" in a.opts:
        return cmd_resolve_all(a, out)
    path, key, status = a.pos
    if status not in ("succeeded", "failed", "released"):
        raise CommandError(f"sqlite-idempotency: resolve STATUS must be succeeded, failed or released; got \"{status}\"", 64)
    conn = open_file(path, write=True)
    name = pick(conn, path, a.opts.get("--ledger"))
    tenant = _tenant_of(conn, name, key, a.opts.get("--tenant"))
    try:
        answer = conn.execute("SELECT idem_resolve(?, ?, ?, ?, ?)",
                              (name, tenant, key, status, a.opts.get("--detail"))).fetchone()[0]
    except sqlite3.Error as e:
        raise CommandError(f"sqlite-idempotency: {e}") from None
    if a.json:
        out.append(answer + "\n")
    else:
        out.append(f"resolved {tenant} {key}: {status}\n")
    return 0


def cmd_resolve_all(a: Args, out: List[str]) -> int:
    """resolve --all: every unknown row that matches, resolved in one write transaction.

    The rows are chosen inside the transaction (BEGIN IMMEDIATE), so a
    resolver working at the same time either finished before (its rows are
    no longer unknown, and are not chosen) or waits until this one is
    done: no row is resolved twice. A refusal of any row (released without
    {"sent": false} for an external call, say) rolls back every row, and
    names the row; --dry-run lists the rows and changes nothing.
    """
    path = a.pos[0]
    status = a.opts["--all"]
    if status not in ("succeeded", "failed", "released"):
        raise CommandError(f"sqlite-idempotency: resolve --all STATUS must be succeeded, failed or released; "
                           f"got \"{status}\"", 64)
    older = age_seconds(a.opts["--older-than"], "--older-than") if "--older-than" in a.opts else None
    dry = "--dry-run" in a.opts
    conn = open_file(path, write=not dry)
    name = pick(conn, path, a.opts.get("--ledger"))
    done: List[Dict[str, Any]] = []
    try:
        if not dry:
            conn.execute("BEGIN IMMEDIATE")
        where, params = row_filters(a, older, now_ms(conn))  # the clock read inside the transaction
        where.insert(0, "status = 'unknown'")
        rows = conn.execute(f"SELECT tenant, key, tool, updated_at FROM {q(name)} WHERE {' AND '.join(where)} "
                            "ORDER BY rowid", params).fetchall()
        shown = _Progress(a, "listing" if dry else "resolving", len(rows))
        for tenant, key, tool, updated in rows:
            shown.step(len(done) + 1)
            if not dry:
                try:
                    conn.execute("SELECT idem_resolve(?, ?, ?, ?, ?)",
                                 (name, tenant, key, status, a.opts.get("--detail"))).fetchone()
                except sqlite3.Error as e:
                    raise CommandError(f"sqlite-idempotency: {e} (tenant {tenant}, tool {tool}); nothing was "
                                       f"resolved") from None
            done.append({"tenant": tenant, "key": key, "tool": tool, "updated_at": updated})
        shown.end()
        if not dry:
            conn.execute("COMMIT")
    except sqlite3.Error as e:
        raise CommandError(f"sqlite-idempotency: {e}; nothing was resolved") from None
    finally:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
    if a.json:
        out.append(jdump({"status": status, "dry_run": dry, "count": len(done), "rows": done}) + "\n")
        return 0
    verb = "would resolve" if dry else "resolved"
    for r in done:
        out.append(f"{verb} {r['tenant']} {r['key']} ({r['tool']}, updated {iso(r['updated_at'])}): {status}\n")
    if dry:
        out.append(f"{plural(len(done), 'unknown row')} would be resolved {status}; nothing was changed\n")
    else:
        out.append(f"resolved {plural(len(done), 'row')} {status}\n")
    return 0


def cmd_purge(a: Args, out: List[str]) -> int:
    path = a.pos[0]
    secs = age_seconds(a.opts["--older-than"], "--older-than")
    conn = open_file(path, write=True)
    name = pick(conn, path, a.opts.get("--ledger"))
    try:
        n = conn.execute("SELECT idem_purge(?, ?)", (name, secs)).fetchone()[0]
    except sqlite3.Error as e:
        raise CommandError(f"sqlite-idempotency: {e}") from None
    out.append(jdump({"purged": n}) + "\n" if a.json else f"purged {plural(n, 'row')}\n")
    return 0


def check_rows(st: Dict[str, Any]) -> List[Dict[str, str]]:
    """The checks of idem_health's answer, one row each, as check prints them."""
    checks: List[Dict[str, str]] = []

    def add(check: str, result: str, detail: str) -> None:
        checks.append({"check": check, "result": result, "detail": detail})

    def not_ok(triggers: List[Dict[str, str]]) -> str:
        return ", ".join(f"{t['state']} {t['name']}" for t in triggers if t["state"] != "ok")

    add("format", "broken" if st["format"] is None else "ok",
        "unreadable" if st["format"] is None else str(st["format"]))
    bad = not_ok(st["triggers"])
    if st["triggers"]:
        add("triggers", "broken" if bad else "ok", bad or f"{plural(len(st['triggers']), 'own trigger')} in place")
    else:
        add("triggers", "broken", "unreadable")
    add("options", "ok" if st["options"] else "broken", options_text(st["options"]))
    if not st["guards"]:
        add("guards", "ok", "none")
    for g in st["guards"]:
        bad = not_ok(g["triggers"])
        if g["table_dropped"]:
            add("guards", "ok", f"{g['table']}: the table was dropped, its triggers with it")
        else:
            add("guards", "broken" if bad else "ok",
                f"{g['table']}: " + (bad or f"{plural(len(g['triggers']), 'trigger')} in place"))
    if not st["problems"]:
        add("ledger", "ok", "it answers operations")
    for p in st["problems"]:
        add("ledger", "broken", p)
    return checks


def cmd_check(a: Args, out: List[str]) -> int:
    path = a.pos[0]
    conn = open_file(path)
    name = pick(conn, path, a.opts.get("--ledger"))
    st = read_state(conn, path, name)
    checks = check_rows(st)
    # on a connection without the extension, as any tool would run it (a newer
    # SQLite would otherwise ask the ledger too, which refuses when broken)
    try:
        plain = sqlite3.connect("file:" + _uri(path) + "?mode=ro", uri=True)
        try:
            res = [r[0] for r in plain.execute("PRAGMA integrity_check")]
        finally:
            plain.close()
    except sqlite3.Error as e:
        res = [str(e)]
    checks.append({"check": "integrity_check", "result": "ok" if res == ["ok"] else "broken", "detail": "; ".join(res)})
    for p in st["attention"]:
        checks.append({"check": "rows", "result": "attention", "detail": p})
    if not st["attention"]:
        checks.append({"check": "rows", "result": "ok", "detail": "no unknown rows, no expired claims"})
    verdict = "broken" if res != ["ok"] else st["verdict"]
    if a.json:
        out.append(jdump({"file": path, "ledger": name, "checks": checks, "verdict": verdict}) + "\n")
    else:
        out.append(table(("result", "check", "detail"), [(c["result"], c["check"], c["detail"]) for c in checks])
                   + f"verdict: {verdict}\n")
    return {"healthy": 0, "needs attention": 1}.get(verdict, 2)


METRICS = (
    ("idempotency_ledger_up", "1 when the ledger answers reads and its guards have their triggers, else 0."),
    ("idempotency_ledger_format", "The format version in the ledger's _meta table."),
    ("idempotency_ledger_open_claims", "Live claims: calls running now."),
    ("idempotency_ledger_unknown", "Rows whose outcome is unknown (settled unknown, or an external claim whose "
                                   "lease ran out): reconcile them."),
    ("idempotency_ledger_expired_claims", "Claims whose lease ran out before their holder settled them."),
    ("idempotency_ledger_oldest_unknown_age_seconds", "Seconds since the oldest unknown row was claimed; "
                                                      "0 when there is none."),
)


def metric_values(st: Dict[str, Any]) -> List[int]:
    o = st["oldest_unknown"]
    return [0 if st["problems"] else 1, st["format"] if isinstance(st["format"], int) else 0, st["live_claims"],
            st["unknown"], st["expired_claims"], 0 if o is None else o["age_seconds"]]


def _label(v: str) -> str:
    return v.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def cmd_metrics(a: Args, out: List[str]) -> int:
    path = a.pos[0]
    conn = open_file(path)
    st = read_state(conn, path, pick(conn, path, a.opts.get("--ledger")))
    label = f'{{ledger="{_label(st["ledger"])}"}}'
    text = ""
    for (metric, help_text), value in zip(METRICS, metric_values(st)):
        text += f"# HELP {metric} {help_text}\n# TYPE {metric} gauge\n{metric}{label} {value}\n"
    out.append(text)
    return 0


_RUN = {"status": cmd_status, "list": cmd_list, "show": cmd_show, "resolve": cmd_resolve, "purge": cmd_purge,
        "check": cmd_check, "metrics": cmd_metrics}


def run_json(argv: Sequence[str]) -> Tuple[str, int]:
    """What serve answers for a read: the command's --json output for argv, and its exit status
    (or CommandError)."""
    a = parse(list(argv) + ["--json"])
    out: List[str] = []
    code = _RUN[a.command](a, out)
    return "".join(out), code


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Runs the command; returns its exit status (the console script exits with it)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if any(x in ("-h", "--help") for x in argv) or not argv:
        (sys.stdout if argv else sys.stderr).write(USAGE)
        return 0 if argv else 64
    if argv == ["--version"]:
        from . import __version__
        sys.stdout.write(f"sqlite-idempotency {__version__}\n")
        return 0
    out: List[str] = []
    try:
        a = parse(argv)
        if a.command == "serve":
            from .serve import serve
            return serve(a, run_json)
        code = _RUN[a.command](a, out)
    except CommandError as e:
        sys.stdout.write("".join(out))
        sys.stderr.write(f"{e}\n")
        return e.status
    except Exception as e:  # the package's own errors (an extension that cannot load, say)
        sys.stdout.write("".join(out))
        sys.stderr.write(f"sqlite-idempotency: {e}\n")
        return 2
    sys.stdout.write("".join(out))
    sys.stdout.flush()
    return code


def console() -> None:
    sys.exit(main())
