"""sqlite-idempotency for Python: the extension and a claim API around it.

    import sqlite_idempotency as idem

    ledger = idem.Ledger.open("agent.db")          # load, pragmas, CREATE ... IF NOT EXISTS
    out = ledger.call(tenant, conversation, "send_email", {"to": "a@b.c"},
                      lambda attempt: send_email(..., headers=attempt.headers))
    out.status, out.result, out.idempotent        # the same shape on a replay

`load(conn)` loads the extension into any `sqlite3.Connection` and
`loadable_path()` gives its path (without the file suffix, which SQLite
adds). `Ledger.claim` returns a typed decision (`Admitted`, `Replay`,
`InProgress`, `Unknown`, `Mismatch`); `Ledger.call` runs one external tool
call around a claim: it acts only on a committed claim, checks the lease
right before sending (renewing it when little is left), settles what is known, waits for an in-progress claim
up to a deadline, and returns an `Outcome` of the same shape on a first
call and on a replay.

Errors of the extension are raised as `LedgerError` carrying its message
unchanged (and the SQLite error name, e.g. ``SQLITE_CONSTRAINT``).
"""
from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import inspect
import json
import os
import random
import re
import sqlite3
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Coroutine, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from . import words as _words
from .state import iso as _iso
from .words import say

__version__ = "0.1.0"

__all__ = [
    "__version__", "loadable_path", "load", "header_value", "Ledger", "Attempt",
    "Decision", "Admitted", "Replay", "InProgress", "Unknown", "Mismatch", "Conflict", "Outcome",
    "IdempotencyError", "LedgerError", "LeaseLost", "NotCommitted", "ClaimInProgress",
    "ClaimMismatch", "TargetConflict", "OutcomeUnknown", "NotSent", "ToolFailed",
    "Answer", "ReconcileCall", "ReconcileReport", "Metrics", "say",
]

_HERE = os.path.dirname(os.path.abspath(__file__))


def loadable_path() -> str:
    """The path of the extension inside this package, without its suffix.

    SQLite adds the platform's suffix (``.so``, ``.dylib``, ``.dll``) and
    derives the entry point ``sqlite3_idempotency_init`` from the file name,
    so the path can be given as is to any binding's ``load_extension`` or to
    the shell's ``.load``.
    """
    return os.path.join(_HERE, "idempotency")


def _library_file() -> Optional[str]:
    for suffix in (".so", ".dylib", ".dll"):
        if os.path.isfile(loadable_path() + suffix):
            return loadable_path() + suffix
    return None


def load(conn: sqlite3.Connection) -> None:
    """Loads the extension into ``conn`` (extension loading is turned off again after).

    Raises `IdempotencyError` when this Python's sqlite3 module cannot load
    extensions or the package holds no extension, and `LedgerError` with
    SQLite's message when loading fails.
    """
    if not hasattr(conn, "enable_load_extension"):
        raise IdempotencyError(
            "sqlite_idempotency.load: this Python's sqlite3 module was built without extension "
            "loading (no Connection.enable_load_extension); use a Python whose sqlite3 can load "
            "extensions, such as a Linux distribution's python3")
    if _library_file() is None:
        raise IdempotencyError(
            f"sqlite_idempotency.load: no built extension at {loadable_path()}.so: this package "
            "was not built for this platform (build it with `make dist`)")
    conn.enable_load_extension(True)
    try:
        conn.load_extension(loadable_path())
    except sqlite3.Error as e:
        raise LedgerError.wrap(e) from e
    finally:
        conn.enable_load_extension(False)


def header_value(key: str) -> str:
    """The ``Idempotency-Key`` header value for a key: an RFC 8941 sf-string.

    That is the key in double quotes (``"idem1-…"``). Keys hold only
    ``A-Za-z0-9_-``, so nothing needs escaping; any other text is refused
    with ValueError rather than escaped into a different key.
    """
    if not isinstance(key, str) or not _KEY.fullmatch(key):
        raise ValueError(f"header_value: {key!r} is not a key (1 to 128 characters of A-Za-z0-9_-)")
    return f'"{key}"'


_KEY = re.compile(r"[A-Za-z0-9_-]{1,128}")
_REQUIRES_TRANSACTION = "requires a transaction (require_transaction=1)"
_LEASE_LOST = "do not act on this claim"
_DETAIL_REFUSED = "idem_settle: detail"  # the ledger cannot store the detail (not I-JSON, too big)
# Ledger.lease_before_send's read: 1 when the claim the token holds has
# more than the margin left and no renewal to the ms given first (NULL: the claim's own
# lease) would extend it by more than the margin. SQL 'now' is the
# connection's VFS clock, the ledger's.
_LEASE_CHECK_MAX_SECONDS = 10**9
# The heartbeat of Ledger.call and acall (docs/design.md, "The heartbeat"):
# every heartbeat_seconds the running action's claim is renewed to
# _HEARTBEAT_LEASES beats from then, so a holder that died is seen once that
# lease passes, and two late beats do not lose a live holder's claim. A
# ledger that Ledger.open creates in a file gets that lease as its
# lease_seconds.
_HEARTBEAT_SECONDS = 5
_HEARTBEAT_LEASES = 3
_HEARTBEAT_MAX_SECONDS = 31536000 // _HEARTBEAT_LEASES  # the lease within lease_seconds' range


def _lease_check_sql(table: str) -> str:
    return ("SELECT (status = 'claimed' AND lft > max(1000, want / 10) AND lft >= want - max(1000, want / 10))"
            " FROM (SELECT status, lease_until - (CAST(round(julianday('now') * 86400000.0) AS INTEGER)"
            " - 210866760000000) AS lft, coalesce(?, lease_until - updated_at) AS want FROM " + table +
            " WHERE token = ?)")


# --- errors ------------------------------------------------------------------


class IdempotencyError(Exception):
    """Base class of this package's errors."""


class LedgerError(IdempotencyError):
    """An error of the extension (or of SQLite under it).

    ``str(e)`` is the extension's message unchanged, e.g.
    ``idem_claim: tenant is missing (NULL)``; ``sqlite_errorname`` is the
    SQLite error name (``SQLITE_CONSTRAINT``) when the driver reports it. The
    original ``sqlite3.Error`` is the ``__cause__``.
    """

    def __init__(self, message: str, sqlite_errorname: Optional[str] = None):
        super().__init__(message)
        self.message = message
        self.sqlite_errorname = sqlite_errorname

    @classmethod
    def wrap(cls, e: sqlite3.Error) -> "LedgerError":
        return cls(str(e), getattr(e, "sqlite_errorname", None))


class LeaseLost(LedgerError):
    """``idem_renew`` refused: this token no longer holds a live claim.

    The lease expired (an external claim is then unknown), the key was
    resolved or taken over, or the claim was settled. Nothing was sent and
    nothing can be settled with this token.
    """


class NotCommitted(IdempotencyError):
    """An admitted external claim that is not committed yet: nothing is sent.

    The claim was made while a transaction was open on the connection, so it
    could still roll back; `Ledger.call` releases it (``{"sent": false}``)
    and raises this. Commit first, or give the ledger its own connection.
    """

    def __init__(self, key: str):
        super().__init__(f"{key}: the claim is not committed (a transaction is open on the "
                         "ledger's connection); nothing was sent and the claim is released: "
                         "commit before acting on an external claim")
        self.key = key


class ClaimInProgress(IdempotencyError):
    """Another caller holds a live claim of this key (still so at the deadline).

    ``renewed_at`` is when its holder claimed or last renewed it (Unix ms).
    """

    def __init__(self, decision: "InProgress"):
        super().__init__(f"{decision.key} is in progress (attempt {decision.attempt}, lease "
                         f"until {_iso(decision.lease_until)}); nothing was sent")
        self.key = decision.key
        self.decision = decision
        self.renewed_at = decision.renewed_at


class ClaimMismatch(IdempotencyError):
    """The key is bound to another request; nothing was admitted or replayed."""

    def __init__(self, decision: "Mismatch"):
        super().__init__(f"{decision.key}: {decision.message} (differs: {decision.differs})")
        self.key = decision.key
        self.decision = decision


class TargetConflict(IdempotencyError):
    """Another call of the tenant already touched one of this call's targets; nothing was run.

    ``decision`` is the `Conflict` (``held_by``: the other call's key, tool,
    status, attempt, ``updated_at`` and, when it succeeded, ``result``;
    ``differs``: the top-level argument names whose values differ).
    """

    def __init__(self, decision: "Conflict"):
        held = decision.held_by
        super().__init__(f"{decision.key}: target {decision.target} is held by {held.get('key')} "
                         f"({held.get('tool')}, {held.get('status')}); this call was not run")
        self.key = decision.key
        self.decision = decision


class OutcomeUnknown(IdempotencyError):
    """The request may have reached the target: the claim is unknown, never resent here.

    Raised by `Ledger.call` when the action failed after it may have sent
    (any exception but `NotSent` and `ToolFailed`), and when the key is
    already unknown from an earlier attempt (``decision`` is then the
    `Unknown` decision). Reconcile with the target, then `Ledger.resolve`.

    An action may raise it itself to choose the detail stored with the claim:
    ``raise OutcomeUnknown("timeout", detail={"reason": "timeout", "timeout_s": 5})``.
    """

    def __init__(self, reason: str, *, key: Optional[str] = None,
                 detail: Optional[Mapping[str, Any]] = None, decision: Optional["Unknown"] = None):
        self.reason = reason
        self.key = key
        self.detail = dict(detail) if detail is not None else {"reason": reason}
        self.decision = decision
        if key is None:
            super().__init__(f"outcome unknown ({reason})")
        else:
            super().__init__(f"outcome of {key} is unknown ({reason}); it will not be retried: "
                             "reconcile with the target, then resolve")


class NotSent(IdempotencyError):
    """Known that nothing was sent (say, the connection could not be made).

    An action raises it; `Ledger.call` releases the claim with
    ``{"sent": false, "reason": ...}`` (plus ``detail``) and raises it again
    with ``key`` set, so a retry is admitted again.
    """

    def __init__(self, reason: str, *, key: Optional[str] = None,
                 detail: Optional[Mapping[str, Any]] = None):
        self.reason = reason
        self.key = key
        self.detail = dict(detail) if detail is not None else {}
        super().__init__(f"{key or 'the call'} was not sent ({reason}); the claim is released")


class ToolFailed(IdempotencyError):
    """The target answered and refused: a known failure, kept and replayed.

    An action raises it with the error (any JSON value); `Ledger.call`
    settles the claim ``failed`` with it and returns an `Outcome` whose
    ``status`` is ``"failed"``, exactly as a later replay returns it.
    """

    def __init__(self, error: Any):
        super().__init__(f"the tool call failed: {json.dumps(error, default=str)}")
        self.error = error


# --- decisions ------------------------------------------------------------------


@dataclass(frozen=True)
class Admitted:
    """This call owns the execution (docs/ledger.md, "Decisions")."""
    key: str
    token: str
    attempt: int
    effect: str
    committed: bool
    durable: bool
    lease_until: int
    note: Optional[str] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    decision = "admitted"


@dataclass(frozen=True)
class Replay:
    """Already settled: the first outcome (``result`` or ``error``), ``idempotent`` true;
    ``settled_at``: when it was recorded (the settle or resolve, Unix ms)."""
    key: str
    status: str
    attempt: int
    settled_at: int
    result: Any = None
    error: Any = None
    members: List[Dict[str, Any]] = field(default_factory=list)
    idempotent: bool = True
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    decision = "replay"


@dataclass(frozen=True)
class InProgress:
    """Someone holds a live claim: do not run (``renewed_at``: when its holder claimed or last renewed it)."""
    key: str
    attempt: int
    lease_until: int
    renewed_at: int
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    decision = "in_progress"


@dataclass(frozen=True)
class Unknown:
    """An earlier attempt may have reached the target; nothing is retried here."""
    key: str
    attempt: int
    message: str
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    decision = "unknown"


@dataclass(frozen=True)
class Mismatch:
    """The key is bound to another request (``differs`` names the first field)."""
    key: str
    differs: str
    message: str
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    decision = "mismatch"


@dataclass(frozen=True)
class Conflict:
    """One of the claim's targets is held by another call of the tenant (docs/ledger.md,
    "Targets"): ``target``, the call that holds it (``held_by``), the argument names whose
    values differ (``differs``). Nothing was admitted."""
    key: str
    target: str
    held_by: Dict[str, Any]
    differs: List[str]
    message: str
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    decision = "conflict"


Decision = Union[Admitted, Replay, InProgress, Unknown, Mismatch, Conflict]


_DECISIONS = {cls.decision: cls for cls in (Admitted, Replay, InProgress, Unknown, Mismatch, Conflict)}


def _decision(raw: Dict[str, Any]) -> Decision:
    """The typed decision of an ``idem_claim`` answer: its fields taken by name."""
    cls = _DECISIONS.get(raw.get("decision"))
    if cls is None:
        raise IdempotencyError(f"idem_claim returned an unexpected decision {raw.get('decision')!r}: {raw!r}")
    try:
        return cls(**{f.name: raw[f.name] for f in dataclasses.fields(cls) if f.name in raw and f.name != "raw"},
                   raw=raw)
    except TypeError as e:  # a field the decision needs is missing
        raise IdempotencyError(f"idem_claim returned an unreadable {cls.decision} decision ({e}): {raw!r}") from None


@dataclass(frozen=True)
class Outcome:
    """What `Ledger.call` returns: the same shape on a first call and on a replay.

    ``status`` is ``"succeeded"`` (with ``result``) or ``"failed"`` (with
    ``error``); ``idempotent`` is False for the call that ran and True for a
    replay of it; ``members`` are the guarded rows of a local claim.
    ``settled_at`` is when the outcome was recorded (Unix ms): the settle's
    ``settled_at`` on the call that ran, the replay's on a replay (the same
    time); `Ledger.call` always sets it (None only on an Outcome built by hand).
    ``text`` (from `Ledger.call`) is what the model is to read before the
    result or error: the replay's or the failure's words (words.json),
    None for a call that ran and succeeded.
    """
    key: str
    status: str
    attempt: int
    result: Any = None
    error: Any = None
    members: List[Dict[str, Any]] = field(default_factory=list)
    idempotent: bool = False
    settled_at: Optional[int] = None
    text: Optional[str] = field(default=None, compare=False)

    def to_dict(self) -> Dict[str, Any]:
        d: Dict[str, Any] = {"key": self.key, "status": self.status, "attempt": self.attempt}
        if self.status == "succeeded":
            d["result"] = self.result
        else:
            d["error"] = self.error
        d["members"] = self.members
        d["idempotent"] = self.idempotent
        return d


class Attempt:
    """The admitted claim, handed to the action of `Ledger.call`.

    ``key``, ``token``, ``attempt``, ``headers`` (``{"Idempotency-Key":
    '"idem1-…"'}``: send them with the request) and ``renew()`` for an
    action that runs long before it sends. ``lease_until`` is the claim's
    lease_until as this process last set it (the claim, a renewal, a
    heartbeat's beat); ``lease_lost`` the `LeaseLost` a beat met, else None.
    """

    def __init__(self, ledger: "Ledger", decision: Admitted):
        self.ledger = ledger
        self.decision = decision
        self.key = decision.key
        self.token = decision.token
        self.attempt = decision.attempt
        self.headers = {"Idempotency-Key": header_value(decision.key)}
        self.lease_until = decision.lease_until
        self.lease_lost: Optional[LeaseLost] = None

    def renew(self, seconds: Optional[int] = None) -> int:
        """Extends the lease (see `Ledger.renew`); raises `LeaseLost` if it is gone."""
        self.lease_until = self.ledger.renew(self.token, seconds)
        return self.lease_until


def _heartbeat_arg(seconds: Any, what: str) -> int:
    """heartbeat_seconds checked (named ``what``): an int of seconds; 0 or None for no heartbeat."""
    if seconds is None:
        return 0
    if isinstance(seconds, bool) or not isinstance(seconds, int) or not 0 <= seconds <= _HEARTBEAT_MAX_SECONDS:
        raise ValueError(f"{what} must be an integer from 0 to {_HEARTBEAT_MAX_SECONDS} (seconds; 0: no "
                         f"heartbeat), got {seconds!r}")
    return seconds


def _beat(attempt: Attempt, renew: Callable[[str, int], int], seconds: int) -> bool:
    """One beat of a heartbeat: renews the attempt's claim to _HEARTBEAT_LEASES beats ahead.

    False when the claim is no longer this token's (``attempt.lease_lost``):
    no more beats; it is fenced by its token, and the settle decides as
    without a heartbeat. Any other error (busy past busy_timeout) leaves
    the lease as it is, and the next beat tries again.
    """
    try:
        attempt.lease_until = renew(attempt.token, _HEARTBEAT_LEASES * seconds)
    except LeaseLost as e:
        attempt.lease_lost = e
        return False
    except (LedgerError, sqlite3.Error):
        pass
    return True


class _Heartbeat:
    """The heartbeat of `Ledger.call` and `acall`: a thread that renews the claim while the action runs.

    The action runs in the caller's thread on the ledger's connection, so
    the beats use a connection of their own to the same database file (the
    extension loaded, the same busy_timeout), opened at the first beat (an
    action shorter than a beat opens none) and closed with the thread. A
    beat while a transaction is open on the ledger's connection is
    skipped: the application holds it. It starts when made; as a context
    manager, the thread has ended when the block is left, so no beat comes
    after it.
    """

    def __init__(self, ledger: "Ledger", attempt: Attempt, seconds: int, where: Tuple[str, str, int]):
        self._ledger, self._attempt, self._seconds, self._where = ledger, attempt, seconds, where
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"sqlite-idempotency heartbeat {attempt.key}",
                                        daemon=True)
        self._thread.start()

    def __enter__(self) -> "_Heartbeat":
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stopped.set()
        self._thread.join()

    def _run(self) -> None:
        beats: Optional[Ledger] = None
        try:
            while not self._stopped.wait(self._seconds):
                if self._ledger.conn.in_transaction:
                    continue
                try:
                    if beats is None:
                        beats = self._ledger._beat_ledger(self._where)
                except (IdempotencyError, sqlite3.Error):
                    continue  # could not open it now: the next beat tries again
                if not _beat(self._attempt, beats.renew, self._seconds):
                    return
        finally:
            if beats is not None:
                beats.close()


class _TaskHeartbeat:
    """The heartbeat of `Ledger.acall` on a ledger in memory: the beats (`Ledger._abeats`) as a task of the loop.

    It starts when made and runs only on this loop, between the action's
    steps; as a context manager, it is cancelled as the block is left, so
    no beat comes after it.
    """

    def __init__(self, beats: Coroutine[Any, Any, None]):
        self._task = asyncio.get_running_loop().create_task(beats)

    def __enter__(self) -> "_TaskHeartbeat":
        return self

    def __exit__(self, *exc: Any) -> None:
        self._task.cancel()


class _Backoff:
    """The pauses between claims while another caller holds the key (`Ledger.wait`, `call`, `acall`).

    ``timeout`` is checked (named ``what``) and measured on ``clock``. The
    pauses start at 10 ms and double up to 500 ms, with jitter, and never
    run past the deadline.
    """

    def __init__(self, timeout: Any, what: str, clock: Callable[[], float]):
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout >= 0:
            raise ValueError(f"{what} must be a number of seconds >= 0, got {timeout!r}")
        self._clock = clock
        self._deadline = clock() + timeout
        self._delay = 0.01

    def pause(self, d: "Decision") -> Optional[float]:
        """None when ``d`` is the answer (not `InProgress`, or the deadline passed); else the seconds to
        pause before claiming again."""
        left = self._deadline - self._clock()
        if not isinstance(d, InProgress) or left <= 0:
            return None
        pause = min(left, self._delay * random.uniform(0.5, 1.0))
        self._delay = min(self._delay * 2, 0.5)
        return pause


def _json_text(value: Any, what: str) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError) as e:
        raise type(e)(f"sqlite_idempotency: {what} is not JSON: {e}") from None


def _claim_options(targets: Any, window: Any, allowed_by: Any) -> Optional[str]:
    """idem_claim's options argument (JSON text), or None when none is given; the extension
    checks each value and names the rule it breaks."""
    if targets is None and window is None and allowed_by is None:
        return None
    options: Dict[str, Any] = {}
    if targets is not None:
        options["targets"] = list(targets) if isinstance(targets, (list, tuple)) else targets
    if window is not None:
        options["target_window_seconds"] = window
    if allowed_by is not None:
        options["allowed_by"] = allowed_by
    return _json_text(options, "the claim's options")


def _targets_kw(targets: Any, window: Any, allowed_by: Any) -> Dict[str, Any]:
    """The target options of `Ledger.call` and `acall`, as `Ledger.claim` takes them."""
    return {"targets": targets, "target_window_seconds": window, "allowed_by": allowed_by}


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _split_name(name: str) -> Tuple[Optional[str], str]:
    """(schema or None, table) of a ledger argument, parsed as the extension parses it.

    ``ledger``, ``aux.ledger``, ``"aux"."ledger"``: either part may be in
    double quotes (a quote inside doubled), and must be when it holds a
    ``.``. Anything else raises ValueError, as the extension refuses it.
    """
    bad = ValueError(f"Ledger: malformed ledger name {name!r}: write ledger or schema.ledger, "
                     "a part in double quotes when it holds a '.' (\"a.b\".\"x\"\"y\")")
    if not isinstance(name, str) or "\0" in name:
        raise bad
    parts: List[str] = []
    i, n = 0, len(name)
    while True:
        if i < n and name[i] == '"':
            buf, j = [], i + 1
            while True:
                k = name.find('"', j)
                if k < 0:
                    raise bad
                buf.append(name[j:k])
                if name[k + 1:k + 2] == '"':
                    buf.append('"')
                    j = k + 2
                    continue
                i = k + 1
                break
            if i < n and name[i] != ".":
                raise bad
            part = "".join(buf)
        else:
            k = name.find(".", i)
            k = n if k < 0 else k
            part, i = name[i:k], k
        if part == "":
            raise bad
        parts.append(part)
        if i >= n:
            break
        i += 1  # the '.'
        if i >= n:
            raise bad
    if len(parts) > 2:
        raise bad
    return (parts[0], parts[1]) if len(parts) == 2 else (None, parts[0])


_OPTION = re.compile(r"[a-z_]{1,64}")


class Ledger:
    """A ledger (a table ``USING idempotency``) on one ``sqlite3`` connection.

    Use it from one thread (as the connection). For external tool calls the
    connection must be in autocommit mode when claiming (``Ledger.open``
    makes it so), so that a claim is committed as it returns.
    """

    def __init__(self, conn: sqlite3.Connection, name: str = "ledger", *,
                 heartbeat_seconds: Optional[int] = _HEARTBEAT_SECONDS):
        """Wraps a connection that already has the extension loaded.

        ``heartbeat_seconds`` is the heartbeat of `call` and `acall` when
        they do not give one (0 or None: none).
        """
        self.heartbeat_seconds = _heartbeat_arg(heartbeat_seconds, "Ledger: heartbeat_seconds")
        self._beat_where: Optional[Tuple[str, str, int]] = None  # (schema, file, busy_timeout) for the beats
        self.conn = conn
        self.name = name
        self._schema, self._table = _split_name(name)  # a malformed name is refused here, once
        self._transactional = False  # the ledger refused a claim outside a transaction
        self._thread = threading.get_ident()  # the connection's thread (tools.py opens others per thread)

    def _sql_name(self, suffix: str = "") -> str:
        """The ledger (or its shadow table ``suffix``) as a quoted SQL name."""
        return (f"{_quote(self._schema)}." if self._schema is not None else "") + _quote(self._table + suffix)

    @classmethod
    def open(cls, db: Union[str, "os.PathLike[str]", sqlite3.Connection], name: str = "ledger", *,
             create: bool = True, busy_timeout_ms: int = 10000,
             options: Optional[Mapping[str, int]] = None,
             heartbeat_seconds: Optional[int] = _HEARTBEAT_SECONDS) -> "Ledger":
        """Opens (or takes) a connection the way the claim API needs it.

        ``db`` is a file path (opened in autocommit mode,
        ``isolation_level=None``) or an open ``sqlite3.Connection``. Loads
        the extension; sets ``journal_mode=WAL`` (on a file),
        ``synchronous=FULL`` (a power loss cannot undo a claim) and
        ``busy_timeout``; with ``create`` runs ``CREATE VIRTUAL TABLE IF NOT
        EXISTS name USING idempotency(options)``, e.g. ``options={"lease_seconds": 60}``.
        ``heartbeat_seconds`` is the ledger's heartbeat (0 or None: none); a
        ledger created in a file with the heartbeat on has the heartbeat's
        lease (3 beats) as its ``lease_seconds`` unless ``options`` name one
        (docs/design.md, "The heartbeat"); in memory no other process can
        see a dead holder, and the extension's default stays.
        """
        if isinstance(busy_timeout_ms, bool) or not isinstance(busy_timeout_ms, int) or busy_timeout_ms < 0:
            raise ValueError(f"Ledger.open: busy_timeout_ms must be an integer >= 0, got {busy_timeout_ms!r}")
        beat = _heartbeat_arg(heartbeat_seconds, "Ledger.open: heartbeat_seconds")
        if isinstance(db, sqlite3.Connection):
            conn = db
        else:
            conn = sqlite3.connect(db, isolation_level=None, timeout=busy_timeout_ms / 1000)
        try:
            load(conn)
            try:
                if conn.execute("PRAGMA database_list").fetchone()[2]:  # a file, not :memory:
                    conn.execute("PRAGMA journal_mode=WAL").fetchone()
                conn.execute("PRAGMA synchronous=FULL")
                conn.execute(f"PRAGMA busy_timeout={busy_timeout_ms}")
            except sqlite3.Error as e:
                raise LedgerError.wrap(e) from e
            ledger = cls(conn, name, heartbeat_seconds=beat)
            if create:
                in_file = beat > 0 and bool(ledger._beat_file())
                ledger._create(options, {"lease_seconds": _HEARTBEAT_LEASES * beat} if in_file else {})
        except BaseException:
            if conn is not db:
                conn.close()
            raise
        return ledger

    def create(self, options: Optional[Mapping[str, int]] = None) -> None:
        """``CREATE VIRTUAL TABLE IF NOT EXISTS`` the ledger (racing creators are fine).

        Options apply when the ledger is created; when it exists already,
        each option given must be the one it was created with, else
        `IdempotencyError` says which differs (never silently ignored).
        """
        self._create(options, {})

    def _create(self, options: Optional[Mapping[str, int]], defaults: Mapping[str, int]) -> None:
        """`create`, with ``defaults`` for the options it does not name: used
        when the ledger is created, never compared with an existing one's."""
        parts = []
        for k, v in (options or {}).items():
            if not isinstance(k, str) or not _OPTION.fullmatch(k):
                raise ValueError(f"Ledger.create: option name {k!r} is not a word of a-z and _")
            if isinstance(v, bool) or not isinstance(v, int):
                raise ValueError(f"Ledger.create: option {k} must be an integer, got {v!r}")
            parts.append(f"{k}={v}")
        parts += [f"{k}={v}" for k, v in defaults.items() if k not in (options or {})]
        sql = f"CREATE VIRTUAL TABLE IF NOT EXISTS {self._sql_name()} USING idempotency"
        if parts:
            sql += "(" + ", ".join(parts) + ")"
        try:
            self.conn.execute(sql)
        except sqlite3.Error as e:
            # A creator racing another waits on busy_timeout; if the other won, fine.
            exists = self.conn.execute(f"SELECT 1 FROM {_quote(self._schema or 'main')}.sqlite_schema "
                                       "WHERE type = 'table' AND name = ?", (self._table,)).fetchone()
            if not exists:
                raise LedgerError.wrap(e) from e
        if options:
            try:
                stored = dict(self.conn.execute(f"SELECT k, v FROM {self._sql_name('_meta')}").fetchall())
            except sqlite3.Error as e:
                raise LedgerError.wrap(e) from e
            for k, v in options.items():
                have = stored.get(k)
                if str(have) != str(v):
                    raise IdempotencyError(
                        f"Ledger.create: ledger {self.name} exists with {k}="
                        f"{'(none)' if have is None else have}, not {v}; options apply only when a "
                        "ledger is created")

    def close(self) -> None:
        """Closes the connection."""
        self.conn.close()

    def _beat_file(self) -> str:
        """The file of the ledger's database ("" in memory or temporary), noted for the heartbeat's connection."""
        if self._beat_where is None:
            schema = self._schema or "main"
            try:
                rows = self.conn.execute("PRAGMA database_list").fetchall()
                timeout = self.conn.execute("PRAGMA busy_timeout").fetchone()[0]
            except sqlite3.Error as e:
                raise LedgerError.wrap(e) from e
            files = [r[2] for r in rows if r[1] == schema]
            self._beat_where = (schema, files[0] if files else "", timeout)
        return self._beat_where[1]

    def _beat_ledger(self, where: Tuple[str, str, int]) -> "Ledger":
        """The heartbeat's own Ledger: a connection to the ledger's file (attached as its schema)."""
        schema, file, timeout = where
        conn = sqlite3.connect(file if schema == "main" else ":memory:", isolation_level=None,
                               timeout=timeout / 1000, check_same_thread=True)
        try:
            load(conn)
            conn.execute(f"PRAGMA busy_timeout={timeout}")
            if schema != "main":
                conn.execute(f"ATTACH DATABASE ? AS {_quote(schema)}", (file,))
        except BaseException:
            conn.close()
            raise
        return type(self)(conn, self.name, heartbeat_seconds=0)

    def _one(self, sql: str, args: tuple) -> Any:
        try:
            return self.conn.execute(sql, args).fetchone()[0]
        except sqlite3.Error as e:
            raise LedgerError.wrap(e) from e

    # --- the functions ---------------------------------------------------------

    def claim(self, tenant: str, conversation: str, tool: str, args: Any, *,
              effect: Optional[str] = None, operation_id: Optional[str] = None,
              targets: Optional[Sequence[str]] = None, target_window_seconds: Optional[int] = None,
              allowed_by: Optional[str] = None) -> Decision:
        """``idem_claim``: takes or reports the claim of this call; returns its decision.

        ``args`` is a JSON value (a dict, usually), serialised here; the key
        is derived from tenant, conversation, tool and canonical args, or is
        ``operation_id`` when given. ``effect`` is ``"external"`` (default)
        or ``"local"``. ``targets`` names what the write touches (up to 16
        strings derived from the arguments that identify the effect, such as
        ``"mailto:bob@example.com/invoice-42"``): one held by another call of
        the tenant makes the decision `Conflict`. ``target_window_seconds``
        shortens the ledger's window for this claim; ``allowed_by`` (the
        application's, never the model's) admits a deliberate second write to
        a held target and is recorded with it (docs/ledger.md, "Targets").
        """
        text = _json_text(args, "args")
        options = _claim_options(targets, target_window_seconds, allowed_by)
        if options is not None:
            raw = self._one("SELECT idem_claim(?, ?, ?, ?, ?, ?, ?, ?)",
                            (self.name, tenant, conversation, tool, text, effect or "external", operation_id,
                             options))
        elif operation_id is not None:
            raw = self._one("SELECT idem_claim(?, ?, ?, ?, ?, ?, ?)",
                            (self.name, tenant, conversation, tool, text, effect or "external", operation_id))
        elif effect is not None:
            raw = self._one("SELECT idem_claim(?, ?, ?, ?, ?, ?)",
                            (self.name, tenant, conversation, tool, text, effect))
        else:
            raw = self._one("SELECT idem_claim(?, ?, ?, ?, ?)", (self.name, tenant, conversation, tool, text))
        return _decision(json.loads(raw))

    def settle(self, token: str, status: str, detail: Any = None) -> Dict[str, Any]:
        """``idem_settle``: records the outcome of the claim ``token`` holds.

        ``status`` is succeeded (detail is the result), failed, released (an
        external release needs ``{"sent": False}``) or unknown. Returns
        ``{"key", "status", "attempt", "durable", "settled_at", "members"}``
        (``durable``: the write was synced when the call returned, or the
        caller's COMMIT syncs it; ``settled_at``: the time of the write, the
        row's ``updated_at``, Unix ms).
        """
        text = None if detail is None else _json_text(detail, "detail")
        return json.loads(self._one("SELECT idem_settle(?, ?, ?, ?)", (self.name, token, status, text)))

    def resolve(self, tenant: str, key: str, status: str, detail: Any = None) -> Dict[str, Any]:
        """``idem_resolve``: settles an unknown key after reconciling with the target."""
        text = None if detail is None else _json_text(detail, "detail")
        return json.loads(self._one("SELECT idem_resolve(?, ?, ?, ?, ?)", (self.name, tenant, key, status, text)))

    def reconcile(self, reconcilers: Mapping[str, Callable[["ReconcileCall"], Any]], **kw: Any) -> "ReconcileReport":
        """Resolves the unknown rows with what each tool's reconciler learns from the target.

        See `sqlite_idempotency.reconcile`: ``reconcilers`` maps a tool to a
        function of one `ReconcileCall` that returns an `Answer`; options
        ``batch_size`` (100), ``limit``, ``by`` (who reconciles, recorded in
        the detail) and ``tenant``. Returns a `ReconcileReport`.
        """
        from .reconcile import reconcile
        return reconcile(self, reconcilers, **kw)

    async def areconcile(self, reconcilers: Mapping[str, Callable[["ReconcileCall"], Any]],
                         **kw: Any) -> "ReconcileReport":
        """`reconcile` with reconcilers that may be async functions."""
        from .reconcile import areconcile
        return await areconcile(self, reconcilers, **kw)

    def renew(self, token: str, seconds: Optional[int] = None) -> int:
        """``idem_renew``: extends the live claim ``token`` holds; returns the new lease_until.

        Raises `LeaseLost` (with the extension's message) when the token no
        longer holds a live claim.
        """
        if isinstance(seconds, bool):
            raise TypeError(f"Ledger.renew: seconds must be an integer, got {seconds!r}")
        try:
            if seconds is None:
                return self._one("SELECT idem_renew(?, ?)", (self.name, token))
            return self._one("SELECT idem_renew(?, ?, ?)", (self.name, token, seconds))
        except LedgerError as e:
            # Both of idem_renew's "this claim is gone" messages end so; a
            # malformed token or seconds stays a LedgerError.
            if str(e).endswith(_LEASE_LOST):
                raise LeaseLost(e.message, e.sqlite_errorname) from e.__cause__
            raise

    def lease_before_send(self, token: str, seconds: Optional[int] = None) -> Optional[int]:
        """The check `call` makes right before the action: a read while the lease lasts.

        Reads the claim ``token`` holds; renews it (``idem_renew``, a write,
        returning the new lease_until) only when it has no more than the
        margin left, or when ``seconds`` asks for a lease longer than what
        is left by more than the margin; returns None when it only read. The
        margin is max(1 s, 10% of the lease: ``seconds``, or the claim's own
        ``lease_seconds``). No one takes a claim over before its
        lease_until, so a claim with more than the margin left is still this
        token's as the action starts, with clocks that agree within the
        margin (docs/leases.md). Raises `LeaseLost` as `renew` does.
        """
        want = None
        if seconds is not None:
            if isinstance(seconds, bool) or not isinstance(seconds, int) or not 0 <= seconds <= _LEASE_CHECK_MAX_SECONDS:
                return self.renew(token, seconds)
            want = seconds * 1000
        try:
            r = self.conn.execute(_lease_check_sql(self._sql_name()), (want, token)).fetchone()
        except sqlite3.Error as e:
            raise LedgerError.wrap(e) from e
        if r is not None and r[0] == 1:
            return None
        return self.renew(token, seconds)

    def row(self, tenant: str, key: str) -> Optional[Dict[str, Any]]:
        """The ledger row of a key as a dict (effective status), or None."""
        try:
            cur = self.conn.execute(f"SELECT * FROM {self._sql_name()} WHERE tenant = ? AND key = ?", (tenant, key))
            r = cur.fetchone()
        except sqlite3.Error as e:
            raise LedgerError.wrap(e) from e
        if r is None:
            return None
        d = dict(zip([c[0] for c in cur.description], r))
        for col in ("args", "result", "error", "members"):
            if isinstance(d.get(col), str):
                d[col] = json.loads(d[col])
        return d

    # --- waiting and calling ---------------------------------------------------

    def _claim_committed(self, tenant: str, conversation: str, tool: str, args: Any,
                         operation_id: Optional[str], **targets: Any) -> Decision:
        """The claim of `call`: committed as it returns unless the caller has a transaction open.

        A ledger created with ``require_transaction=1`` refuses a claim made
        outside a transaction; then (and for every later claim) the claim is
        made inside ``BEGIN IMMEDIATE ... COMMIT``, and an admitted claim is
        reported with ``committed`` true once that COMMIT succeeded.
        """
        if not (self._transactional and not self.conn.in_transaction):
            try:
                return self.claim(tenant, conversation, tool, args, operation_id=operation_id, **targets)
            except LedgerError as e:
                if _REQUIRES_TRANSACTION not in str(e) or self.conn.in_transaction:
                    raise
                self._transactional = True
        try:
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                d = self.claim(tenant, conversation, tool, args, operation_id=operation_id, **targets)
                self.conn.execute("COMMIT")
            finally:
                if self.conn.in_transaction:
                    self.conn.execute("ROLLBACK")
        except sqlite3.Error as e:
            raise LedgerError.wrap(e) from e
        if isinstance(d, Admitted):
            d = dataclasses.replace(d, committed=True, raw={**d.raw, "committed": True})
        return d

    def wait(self, tenant: str, conversation: str, tool: str, args: Any, *, timeout: float,
             effect: Optional[str] = None, operation_id: Optional[str] = None,
             targets: Optional[Sequence[str]] = None, target_window_seconds: Optional[int] = None,
             allowed_by: Optional[str] = None) -> Decision:
        """Claims, and claims again with backoff while the decision is in_progress.

        Returns the first decision that is not `InProgress`, or the last
        `InProgress` once ``timeout`` seconds have passed. The backoff starts
        at 10 ms and doubles up to 500 ms, with jitter, and never sleeps
        past the deadline. A later decision may be `Admitted` (the holder
        released), which the caller then owns.
        """
        return self._wait(lambda: self.claim(tenant, conversation, tool, args, effect=effect,
                                             operation_id=operation_id, targets=targets,
                                             target_window_seconds=target_window_seconds,
                                             allowed_by=allowed_by), timeout, "Ledger.wait: timeout")

    @staticmethod
    def _wait(claim: Callable[[], Decision], timeout: float, what: str) -> Decision:
        """Claims until the decision is not `InProgress` or ``timeout`` (checked, named ``what``) passed."""
        backoff = _Backoff(timeout, what, time.monotonic)
        d = claim()
        while (pause := backoff.pause(d)) is not None:
            time.sleep(pause)
            d = claim()
        return d

    def _admit(self, d: Decision, renew_seconds: Optional[int]) -> Union["Outcome", Attempt]:
        """What `call` and `acall` do with a claim's decision before the action:
        the replayed Outcome, an exception for a call that must not run, or
        the Attempt of an admitted claim that is committed, its lease checked
        right before sending (LeaseLost: nothing sent)."""
        if isinstance(d, Replay):
            return Outcome(d.key, d.status, d.attempt, d.result, d.error, d.members, True, d.settled_at)
        if isinstance(d, InProgress):
            raise ClaimInProgress(d)
        if isinstance(d, Unknown):
            raise OutcomeUnknown("an earlier attempt may have reached the target", key=d.key, decision=d)
        if isinstance(d, Mismatch):
            raise ClaimMismatch(d)
        if isinstance(d, Conflict):
            raise TargetConflict(d)
        if not d.committed:
            self.settle(d.token, "released", {"sent": False, "reason": "claim not committed"})
            raise NotCommitted(d.key)
        attempt = Attempt(self, d)
        renewed = self.lease_before_send(d.token, renew_seconds)
        if renewed is not None:
            attempt.lease_until = renewed
        return attempt

    def _beat_seconds(self, heartbeat_seconds: Optional[int], what: str) -> int:
        """The heartbeat of one call: the ledger's when None, else checked."""
        return self.heartbeat_seconds if heartbeat_seconds is None else _heartbeat_arg(heartbeat_seconds, what)

    def _settle_raised(self, d: Admitted, e: BaseException) -> "Outcome":
        """Settles what an action's exception says (`call` and `acall`): ToolFailed returns the
        failed Outcome; NotSent is raised again, released; anything else is unknown."""
        if isinstance(e, NotSent):
            self.settle(d.token, "released", {**e.detail, "sent": False, "reason": e.reason})
            e.key = d.key
            e.args = (f"{d.key} was not sent ({e.reason}); the claim is released",)
            raise e
        if isinstance(e, ToolFailed):
            error, s = self._settle_value(d, "failed", e.error, "the error")
            return Outcome(d.key, "failed", d.attempt, None, error, s.get("members", []), False, s["settled_at"])
        if isinstance(e, OutcomeUnknown):
            self._settle_unknown(d, e.detail)
            raise OutcomeUnknown(e.reason, key=d.key, detail=e.detail) from e
        if isinstance(e, asyncio.CancelledError):
            self._settle_unknown(d, {"reason": "CancelledError: the task was cancelled while the action ran"})
            raise e
        reason = f"{type(e).__name__}: {e}"
        self._settle_unknown(d, {"reason": reason})
        if not isinstance(e, Exception):
            raise e  # KeyboardInterrupt, SystemExit: settled unknown, then propagated
        raise OutcomeUnknown(reason, key=d.key) from e

    def _settle_result(self, d: Admitted, result: Any) -> "Outcome":
        """Settles the action's return value succeeded (None is a result: JSON null)."""
        result, s = self._settle_value(d, "succeeded", result, "the result")
        return Outcome(d.key, "succeeded", d.attempt, result, None, s.get("members", []), False, s["settled_at"])

    @_words.telling
    def call(self, tenant: str, conversation: str, tool: str, args: Any,
             action: Callable[[Attempt], Any], *, operation_id: Optional[str] = None,
             wait: float = 0.0, renew_seconds: Optional[int] = None,
             heartbeat_seconds: Optional[int] = None, targets: Optional[Sequence[str]] = None,
             target_window_seconds: Optional[int] = None, allowed_by: Optional[str] = None) -> Outcome:
        """Runs one external tool call at most once: ``action(attempt)`` returns its result.

        1. Claims (waiting up to ``wait`` seconds while another caller holds
           the key). A replay returns the first `Outcome` (``idempotent``
           True); in_progress at the deadline raises `ClaimInProgress`;
           unknown raises `OutcomeUnknown`; mismatch raises `ClaimMismatch`;
           conflict (one of ``targets`` is held by another call of the
           tenant, see `claim`) raises `TargetConflict`.
        2. The claim is committed before anything is sent: a bare claim
           commits itself; a ``require_transaction=1`` ledger is claimed
           inside ``BEGIN IMMEDIATE ... COMMIT``. Admitted but not committed
           (the caller has a transaction open): releases the claim and
           raises `NotCommitted`; nothing is sent.
        3. Checks the lease right before calling the action
           (`lease_before_send`: a read while more than the margin is left,
           ``idem_renew`` otherwise): a caller that stalled past its lease
           gets `LeaseLost` and sends nothing.
        4. While the action runs, a heartbeat renews the claim every
           ``heartbeat_seconds`` (None: the ledger's ``heartbeat_seconds``;
           0: none) to 3 beats ahead, from a thread on a connection of its
           own (none for a ledger in memory, which no other process sees);
           it is stopped as the action ends, however it ends.
        5. Settles what is known: the action's return value → succeeded
           (None is stored as null); `ToolFailed` → failed, returned as an
           Outcome; `NotSent` → released with ``{"sent": false}``, raised
           again; any other exception (a timeout, a lost connection: it may
           have sent) → unknown, raised as `OutcomeUnknown` (never retried
           here).

        The result must be JSON (it is stored, and replayed). Its numbers
        are kept as written: an int of any size (a 64-bit id) comes back
        equal, on the first call and on every replay.
        """
        beat = self._beat_seconds(heartbeat_seconds, "Ledger.call: heartbeat_seconds")
        if beat and not self._beat_file():
            beat = 0  # in memory: no file for the beats' connection, and no other process to see the holder
        kw = _targets_kw(targets, target_window_seconds, allowed_by)
        d = self._wait(lambda: self._claim_committed(tenant, conversation, tool, args, operation_id, **kw), wait,
                       "Ledger.call: wait")
        attempt = self._admit(d, renew_seconds)
        if isinstance(attempt, Outcome):
            return attempt
        beats = _Heartbeat(self, attempt, beat, self._beat_where) if beat else contextlib.nullcontext()
        try:
            with beats:  # stopped as the action ends, however it ends: before the settle
                result = action(attempt)
        except BaseException as e:
            return self._settle_raised(d, e)
        if inspect.iscoroutine(result) and inspect.getcoroutinestate(result) == inspect.CORO_CREATED:
            # an async function: its coroutine never ran, so nothing was sent
            result.close()
            self.settle(d.token, "released", {"sent": False, "reason": "the action returned a coroutine"})
            raise TypeError("Ledger.call: the action returned a coroutine that never ran (an async function?); "
                            "call runs a synchronous action: nothing was sent and the claim is released")
        return self._settle_result(d, result)

    @_words.telling
    async def acall(self, tenant: str, conversation: str, tool: str, args: Any,
                    action: Callable[[Attempt], Any], *, operation_id: Optional[str] = None,
                    wait: float = 0.0, renew_seconds: Optional[int] = None,
                    heartbeat_seconds: Optional[int] = None, targets: Optional[Sequence[str]] = None,
                    target_window_seconds: Optional[int] = None, allowed_by: Optional[str] = None) -> Outcome:
        """`call` for asyncio: ``action(attempt)`` may return an awaitable, which is awaited.

        The same decisions and settles as `call`; waiting for an in-progress
        claim sleeps with ``asyncio.sleep``. The claim and settle statements
        run on the event loop's thread (the connection's), each blocking it
        at most ``busy_timeout`` while another process holds the write lock.
        The heartbeat is the thread of `call`, with a connection of its own
        to the ledger's file: an ``async def`` action that blocks its loop (a
        ``time.sleep``, a synchronous client) is still beaten for, so no other
        caller is told ``unknown`` while it runs. A beat while a transaction
        is open on the ledger's connection is skipped; the thread is stopped
        (and joined, a beat's time at most) as the action ends. A ledger in
        memory has no file for that connection: its beats are a task of the
        loop on the ledger's own connection, between the action's steps. A task
        cancelled while its action runs (``asyncio.wait_for`` timing out,
        say) settles the claim unknown: the action may have sent; the
        CancelledError propagates.
        """
        beat = self._beat_seconds(heartbeat_seconds, "Ledger.acall: heartbeat_seconds")
        backoff = _Backoff(wait, "Ledger.acall: wait", asyncio.get_running_loop().time)
        kw = _targets_kw(targets, target_window_seconds, allowed_by)
        d = self._claim_committed(tenant, conversation, tool, args, operation_id, **kw)
        while (pause := backoff.pause(d)) is not None:
            await asyncio.sleep(pause)
            d = self._claim_committed(tenant, conversation, tool, args, operation_id, **kw)
        attempt = self._admit(d, renew_seconds)
        if isinstance(attempt, Outcome):
            return attempt
        if not beat:
            beats: Any = contextlib.nullcontext()
        elif self._beat_file():
            beats = _Heartbeat(self, attempt, beat, self._beat_where)  # beats while the loop is blocked too
        else:
            beats = _TaskHeartbeat(self._abeats(attempt, beat))
        try:
            with beats:  # stopped as the action ends, however it ends: before the settle
                result = action(attempt)
                if inspect.isawaitable(result):
                    result = await result
        except BaseException as e:
            return self._settle_raised(d, e)
        return self._settle_result(d, result)

    async def _abeats(self, attempt: Attempt, seconds: int) -> None:
        """The heartbeat of `acall`: a beat every ``seconds`` on the ledger's connection, on the loop."""
        while True:
            await asyncio.sleep(seconds)
            if not self.conn.in_transaction and not _beat(attempt, self.renew, seconds):
                return
    def tool(self, name: str, *, tenant: Any, conversation: Any, attempt: Optional[str] = "attempt",
             wait: float = 0.0, renew_seconds: Optional[int] = None,
             heartbeat_seconds: Optional[int] = None, targets: Optional[Callable[..., Any]] = None,
             allowed_by: Optional[Callable[..., Any]] = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """A decorator: ``@ledger.tool("send_email", tenant=..., conversation=..., targets=...)`` guards a
        function (sync or ``async def``) with `call` / `acall`; see `sqlite_idempotency.tools`."""
        from .tools import tool
        return tool(self, name, tenant=tenant, conversation=conversation, attempt=attempt, wait=wait,
                    renew_seconds=renew_seconds, heartbeat_seconds=heartbeat_seconds, targets=targets,
                    allowed_by=allowed_by)

    def _settle_value(self, d: Admitted, status: str, value: Any, what: str) -> Tuple[Any, Dict[str, Any]]:
        """Settles ``status`` with ``value``; returns (the value as stored, the settle's answer).

        The value returned is the stored JSON parsed, as a replay returns
        it (numbers as written: ints of any size stay exact). A value the
        ledger cannot store (not JSON, such as a set, NaN or a lone
        surrogate; over max_args_bytes) leaves the call unknown: the action
        has run, so the call may have taken effect; it is settled unknown
        (never resent) and `OutcomeUnknown` says why.
        """
        try:
            text = _json_text(value, what)  # None is a value: JSON null, stored as Node stores it
            answer = json.loads(self._one("SELECT idem_settle(?, ?, ?, ?)", (self.name, d.token, status, text)))
        except LedgerError as e:
            if not str(e).startswith(_DETAIL_REFUSED):
                raise
            reason, cause = f"{what} cannot be stored: {e}", e
        except (TypeError, ValueError) as e:  # not JSON; UnicodeEncodeError: a lone surrogate
            reason, cause = str(e), e
        else:
            column = "result" if status == "succeeded" else "error"
            stored = self._one(f"SELECT {column} FROM {self._sql_name()} WHERE token = ?", (d.token,))
            return (None if stored is None else json.loads(stored)), answer
        self._settle_unknown(d, {"reason": reason})
        raise OutcomeUnknown(reason, key=d.key) from cause

    def _settle_unknown(self, d: Admitted, detail: Any) -> None:
        """Settles the claim unknown; one whose lease ran out while the action ran is unknown already.

        The extension refuses unknown -> unknown, so that refusal is taken
        as done when the row the token names is (effectively) unknown; the
        detail is then not recorded. A detail the ledger cannot store (over
        its max_args_bytes) is dropped: the claim is settled unknown without
        it. Any other error is raised.
        """
        try:
            try:
                self.settle(d.token, "unknown", detail)
            except LedgerError as e:
                if detail is None or not str(e).startswith(_DETAIL_REFUSED):
                    raise
                self.settle(d.token, "unknown", None)
        except LedgerError:
            try:
                row = self.conn.execute(f"SELECT status FROM {self._sql_name()} WHERE token = ?",
                                        (d.token,)).fetchone()
            except sqlite3.Error:
                row = None
            if row is None or row[0] != "unknown":
                raise


from .reconcile import Answer, ReconcileCall, ReconcileReport  # noqa: E402  (uses the names above)
from .metrics import Metrics  # noqa: E402
