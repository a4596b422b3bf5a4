"""Ledger-guarded tools: ``@ledger.tool(...)`` and ``await ledger.acall(...)``.

    ledger = sqlite_idempotency.Ledger.open("agent.db")

    @ledger.tool("send_email", tenant=lambda a: a["user"], conversation=lambda a: a["thread"])
    def send_email(user, thread, to, body, attempt):
        return post(..., headers=attempt.headers)        # runs at most once per key

    out = send_email("u1", "t1", "a@b.c", "hi")          # an Outcome; out.idempotent on a replay

The decorated function (sync or ``async def``) is called with its own
arguments; they are bound to its signature (defaults applied) and become
the key's arguments, except the parameter named ``attempt`` (when the
function has one), which receives the `Attempt` (``headers`` carries the
Idempotency-Key). ``tenant`` and ``conversation`` are each a string or a
function of the bound arguments (a dict) returning one; a missing or empty
one (or a function that raises) raises `MissingPart` (a ValueError) naming
it, and nothing runs. It returns the `Outcome` of `Ledger.call`
(``Ledger.acall`` for ``async def``), and raises as they do:
`ClaimInProgress`, `OutcomeUnknown`, `ClaimMismatch`, `TargetConflict`, `NotSent`.

``targets=lambda a: [f"mailto:{a['to']}/invoice-{a['invoice']}"]`` names what
a call's write touches (docs/ledger.md, "Targets"): a reworded retry of a call
that touched the same target is a `TargetConflict`, and nothing runs.

What the model reads: every one of those exceptions, and `MissingPart`,
has ``text``, and the Outcome of a replay or a failure has ``text`` (with
``idempotent`` True on a replay): the words of words.json, the same as the
Node adapters give; hand the model ``text``, then the result or error.

A `Ledger` is one ``sqlite3`` connection, which belongs to the thread that
opened it. Called on another thread, a decorated tool uses a connection of
that thread to the same database file (opened once per thread with
`Ledger.open`, kept until the thread ends); a ledger in ``:memory:``
cannot be shared, and raises. The decorator notes the database file, so
apply it on the thread that opened the ledger.
"""
from __future__ import annotations

import functools
import inspect
import threading
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional, Union

from . import Attempt, IdempotencyError, Outcome
from .words import say

if TYPE_CHECKING:  # pragma: no cover
    from . import Ledger

Part = Union[str, Callable[[Mapping[str, Any]], Optional[str]]]

_local = threading.local()


def _remember(ledger: "Ledger") -> None:
    """Notes the ledger's file and busy_timeout (on its own thread), for `_thread_ledger`."""
    if hasattr(ledger, "_thread_open") or threading.get_ident() != ledger._thread:
        return
    rows = [r for r in ledger.conn.execute("PRAGMA database_list").fetchall() if r[1] == (ledger._schema or "main")]
    timeout = ledger.conn.execute("PRAGMA busy_timeout").fetchone()[0]
    ledger._thread_open = (rows[0][2] if rows else "", timeout)  # type: ignore[attr-defined]


def _thread_ledger(ledger: "Ledger") -> "Ledger":
    """The ledger on a connection of the calling thread (``ledger`` itself on its own thread)."""
    if threading.get_ident() == ledger._thread:
        return ledger
    cache = getattr(_local, "ledgers", None)
    if cache is None:
        cache = _local.ledgers = {}
    own = cache.get(id(ledger))
    if own is not None and own[0] is ledger:
        return own[1]
    file, timeout = getattr(ledger, "_thread_open", ("", 0))
    if not file:
        raise IdempotencyError(
            f"Ledger.tool: ledger {ledger.name} is not in a database file (it is in memory or temporary), so "
            "another thread cannot open it: call the tool on the thread that opened the ledger")
    mine = type(ledger).open(file, ledger.name, create=False, busy_timeout_ms=timeout,
                              heartbeat_seconds=ledger.heartbeat_seconds)
    cache[id(ledger)] = (ledger, mine)
    return mine


async def acall(ledger: "Ledger", tenant: str, conversation: str, tool: str, args: Any,
                action: Callable[[Attempt], Any], **options: Any) -> Outcome:
    """`Ledger.acall` (the decisions, settles, heartbeat and words are there); ``options`` as it takes them."""
    return await ledger.acall(tenant, conversation, tool, args, action, **options)


class MissingPart(IdempotencyError, ValueError):
    """A decorated tool's tenant, conversation or targets are missing (``decision`` is
    ``"no_tenant"``, ``"no_conversation"`` or ``"no_targets"``); nothing ran. ``text`` is
    what the model is to read (words.json)."""

    def __init__(self, message: str, *, tool: str, which: str, reason: str):
        super().__init__(message)
        self.decision = f"no_{which}"
        self.key = None
        self.text = say(self.decision, tool=tool, reason=reason)


def _part(which: str, value: Part, bound: Mapping[str, Any], tool: str) -> str:
    if callable(value):
        try:
            v = value(bound)
        except Exception as e:
            raise MissingPart(f"Ledger.tool: {tool}: {which} raised {type(e).__name__}: {e}; nothing was run",
                              tool=tool, which=which, reason=f"{which} raised {type(e).__name__}: {e}") from e
    else:
        v = value
    if v is None or v == "":
        raise MissingPart(f"Ledger.tool: {tool}: no {which} (it gave {v!r}); nothing was run",
                          tool=tool, which=which, reason=f"{which} gave {v!r}")
    if not isinstance(v, str):
        raise MissingPart(f"Ledger.tool: {tool}: {which} must be a string, got {type(v).__name__}; nothing was run",
                          tool=tool, which=which, reason=f"{which} gave a {type(v).__name__}, not a string")
    return v


def _targets(fn: Callable[[Mapping[str, Any]], Any], bound: Mapping[str, Any], tool: str) -> List[str]:
    """The targets of one call: ``fn(bound)``, a list (or tuple) of strings; else `MissingPart`."""
    try:
        v = fn(bound)
    except Exception as e:
        raise MissingPart(f"Ledger.tool: {tool}: targets raised {type(e).__name__}: {e}; nothing was run",
                          tool=tool, which="targets", reason=f"targets raised {type(e).__name__}: {e}") from e
    if not isinstance(v, (list, tuple)) or not all(isinstance(t, str) for t in v):
        what = "a list holding a non-string" if isinstance(v, (list, tuple)) else f"a {type(v).__name__}"
        raise MissingPart(f"Ledger.tool: {tool}: targets gave {what}, not a list of strings; nothing was run",
                          tool=tool, which="targets", reason=f"targets gave {what}, not a list of strings")
    return list(v)


def tool(ledger: "Ledger", name: str, *, tenant: Part, conversation: Part, attempt: Optional[str] = "attempt",
         wait: float = 0.0, renew_seconds: Optional[int] = None,
         heartbeat_seconds: Optional[int] = None,
         targets: Optional[Callable[[Mapping[str, Any]], Any]] = None,
         allowed_by: Optional[Callable[[Mapping[str, Any]], Optional[str]]] = None,
         ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The decorator of `Ledger.tool` (see the module's documentation); ``wait``,
    ``renew_seconds`` and ``heartbeat_seconds`` go to `Ledger.call` as they are.
    ``targets`` is a function of the bound arguments (a dict) giving what the
    write touches (docs/ledger.md, "Targets"); ``allowed_by`` one giving who
    allows a deliberate second write to a held target (the application's, from
    its own state; None: nobody)."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"Ledger.tool: name must be a non-empty string, got {name!r}")
    for which, v in (("tenant", tenant), ("conversation", conversation)):
        if not (callable(v) or (isinstance(v, str) and v)):
            raise ValueError(f"Ledger.tool: {which} must be a non-empty string or a function of the arguments, got {v!r}")
    if isinstance(wait, bool) or not isinstance(wait, (int, float)) or not wait >= 0:
        raise ValueError(f"Ledger.tool: wait must be a number of seconds >= 0, got {wait!r}")
    for which, f in (("targets", targets), ("allowed_by", allowed_by)):
        if f is not None and not callable(f):
            raise ValueError(f"Ledger.tool: {which} must be a function of the arguments, got {f!r}")

    _remember(ledger)
    options: Dict[str, Any] = {"wait": wait, "renew_seconds": renew_seconds}
    if heartbeat_seconds is not None:
        options["heartbeat_seconds"] = heartbeat_seconds

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        if not callable(fn):
            raise TypeError(f"Ledger.tool: {name}: the decorated object is not callable: {fn!r}")
        sig = inspect.signature(fn)
        takes_attempt = attempt is not None and attempt in sig.parameters
        public = sig.replace(parameters=[p for n, p in sig.parameters.items() if not (takes_attempt and n == attempt)])

        def bind(a: tuple, kw: dict) -> dict:
            if takes_attempt and attempt in kw:
                raise TypeError(f"{name}: {attempt} is given by the ledger, not by the caller")
            b = public.bind(*a, **kw)
            b.apply_defaults()
            return dict(b.arguments)

        def per_call(bound: dict) -> Dict[str, Any]:
            """``options`` with this call's targets and allowed_by."""
            if targets is None and allowed_by is None:
                return options
            more = dict(options)
            if targets is not None:
                more["targets"] = _targets(targets, bound, name)
            if allowed_by is not None:
                more["allowed_by"] = allowed_by(bound)
            return more

        def run(bound: dict, att: Attempt) -> Any:
            # the bound arguments (and the attempt) in the signature's order
            full = {n: (att if takes_attempt and n == attempt else bound[n]) for n in sig.parameters
                    if n in bound or (takes_attempt and n == attempt)}
            b = inspect.BoundArguments(sig, full)  # type: ignore[arg-type]
            return fn(*b.args, **b.kwargs)

        if inspect.iscoroutinefunction(fn):
            @functools.wraps(fn)
            async def async_tool(*a: Any, **kw: Any) -> Outcome:
                bound = bind(a, kw)
                t = _part("tenant", tenant, bound, name)
                c = _part("conversation", conversation, bound, name)
                return await acall(_thread_ledger(ledger), t, c, name, bound, lambda att: run(bound, att),
                                   **per_call(bound))
            async_tool.__signature__ = public  # type: ignore[attr-defined]
            return async_tool

        @functools.wraps(fn)
        def sync_tool(*a: Any, **kw: Any) -> Outcome:
            bound = bind(a, kw)
            t = _part("tenant", tenant, bound, name)
            c = _part("conversation", conversation, bound, name)
            return _thread_ledger(ledger).call(t, c, name, bound, lambda att: run(bound, att), **per_call(bound))
        sync_tool.__signature__ = public  # type: ignore[attr-defined]
        return sync_tool

    return decorate


__all__ = ["MissingPart", "acall", "tool"]
