"""Reconciliation: asking the target systems what became of the unknown calls.

    def charge_card(call):                       # one reconciler per tool
        found = provider.find_by_idempotency_key(call.key)
        if found is None:
            return Answer.not_sent("the provider has no request with this key")
        return Answer.succeeded({"charge": found.id})

    report = ledger.reconcile({"charge_card": charge_card})

`Ledger.reconcile` works through the rows whose status reads ``unknown``
(calls settled unknown, and external claims whose lease ran out) in batches
of ``batch_size``, in row order, and resolves each with ``idem_resolve``
according to the answer of its tool's reconciler. The detail it records
says who reconciled the call and when (docs/operating.md, "Reconciling"):

    succeeded  {"reconciled": {"at": <unix ms>, "by": <by>}, "result": <result>}
    failed     {"error": <error>, "reconciled": {"at": ..., "by": ...}}
    not sent   {"sent": false, "reason": <reason>, "reconciled": {...}}  (released)

Each row is resolved in a transaction of its own that first checks the row
is still unknown at the same attempt, so two reconcilers running at once
never resolve a row twice: the one that loses reports the row as ``raced``.
A reconciler that raises leaves its row unknown (reported under
``errors``); the others go on. Tools without a reconciler are reported
under ``needs_person``. Nothing is held open while a reconciler runs: each
batch is read, then the reconcilers are asked, then each row is resolved.
"""
from __future__ import annotations

import inspect
import json
import sqlite3
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Tuple

__all__ = ["Answer", "ReconcileCall", "ReconcileReport", "reconcile", "areconcile"]

_ANSWERS = ("succeeded", "failed", "not_sent", "unknown")
_NOW_MS = "SELECT CAST(strftime('%s', 'now') AS INTEGER) * 1000 + CAST(substr(strftime('%f', 'now'), 4) AS INTEGER)"


@dataclass(frozen=True)
class Answer:
    """What a reconciler says about one call; make it with the four constructors."""
    status: str
    result: Any = None
    error: Any = None
    reason: Optional[str] = None

    @staticmethod
    def succeeded(result: Any = None) -> "Answer":
        """The target has the call and it succeeded: ``result`` is recorded (and replayed)."""
        return Answer("succeeded", result=result)

    @staticmethod
    def failed(error: Any) -> "Answer":
        """The target has the call and refused it: ``error`` is recorded (and replayed)."""
        return Answer("failed", error=error)

    @staticmethod
    def not_sent(reason: str = "the target never received it") -> "Answer":
        """The target never received the call: it is released, so the next arrival runs it."""
        return Answer("not_sent", reason=reason)

    @staticmethod
    def unknown(reason: str = "the target cannot tell yet") -> "Answer":
        """The target cannot tell (yet): the row stays unknown."""
        return Answer("unknown", reason=reason)


@dataclass(frozen=True)
class ReconcileCall:
    """One unknown call, as a reconciler sees it.

    ``key`` is what the target received as ``Idempotency-Key`` (``headers``
    has the header as sent); ``args`` the stored canonical arguments and
    ``detail`` the detail it was settled unknown with (None for an
    external claim whose lease ran out), both parsed, with ``args_text``
    and ``detail_text`` the stored JSON text.
    """
    tenant: str
    key: str
    conversation: str
    tool: str
    args: Any
    effect: str
    attempt: int
    detail: Any
    created_at: int
    updated_at: int
    lease_until: int
    args_text: str
    detail_text: Optional[str]

    @property
    def headers(self) -> Dict[str, str]:
        return {"Idempotency-Key": f'"{self.key}"'}


@dataclass
class ReconcileReport:
    """What `Ledger.reconcile` did, row by row (each entry a dict naming tenant, key, tool, attempt).

    ``resolved`` entries carry the new ``status``; ``unknown`` the
    reconciler's ``reason``; ``errors`` the ``error`` message (the row stays
    unknown); ``raced`` the ``status`` the row had when this reconciler came
    to resolve it (someone else resolved or settled it first);
    ``needs_person`` the rows of tools that have no reconciler.
    """
    examined: int = 0
    resolved: List[Dict[str, Any]] = field(default_factory=list)
    unknown: List[Dict[str, Any]] = field(default_factory=list)
    errors: List[Dict[str, Any]] = field(default_factory=list)
    raced: List[Dict[str, Any]] = field(default_factory=list)
    needs_person: List[Dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> Dict[str, Any]:
        return {"examined": self.examined, "resolved": self.resolved, "unknown": self.unknown,
                "errors": self.errors, "raced": self.raced, "needs_person": self.needs_person}


def _answer(value: Any) -> Answer:
    """The Answer a reconciler returned (an `Answer`, or a dict of the same fields)."""
    if isinstance(value, Answer):
        a = value
    elif isinstance(value, Mapping) and set(value) <= {"status", "result", "error", "reason"}:
        a = Answer(**value)  # type: ignore[arg-type]
    else:
        raise TypeError(f"reconcile: a reconciler must return an Answer (Answer.succeeded(result), "
                        f"Answer.failed(error), Answer.not_sent(reason), Answer.unknown(reason)), got {value!r}")
    if a.status not in _ANSWERS:
        raise ValueError(f"reconcile: answer status must be one of {', '.join(_ANSWERS)}, got {a.status!r}")
    if a.status in ("not_sent", "unknown") and a.reason is not None and not isinstance(a.reason, str):
        raise TypeError(f"reconcile: the reason of a {a.status} answer must be text, got {a.reason!r}")
    return a


def _check_args(reconcilers: Any, batch_size: Any, limit: Any, by: Any, on_progress: Any = None) -> None:
    if not isinstance(reconcilers, Mapping):
        raise TypeError(f"Ledger.reconcile: reconcilers must be a mapping of tool name to function, got {reconcilers!r}")
    for tool, fn in reconcilers.items():
        if not callable(fn):
            raise TypeError(f"Ledger.reconcile: the reconciler of tool {tool!r} is not callable: {fn!r}")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or not 1 <= batch_size <= 10000:
        raise ValueError(f"Ledger.reconcile: batch_size must be an integer from 1 to 10000, got {batch_size!r}")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise ValueError(f"Ledger.reconcile: limit must be None or an integer >= 0, got {limit!r}")
    if not isinstance(by, str) or not by:
        raise ValueError(f"Ledger.reconcile: by must be a non-empty text naming who reconciles, got {by!r}")
    if on_progress is not None and not callable(on_progress):
        raise TypeError(f"Ledger.reconcile: on_progress must be a function of the report so far, got {on_progress!r}")


def _batches(ledger: Any, batch_size: int, limit: Optional[int], tenant: Optional[str]) -> Iterator[ReconcileCall]:
    """The unknown rows in row order, read batch_size at a time (no statement left open between batches)."""
    sql = (f"SELECT rowid, tenant, key, conversation, tool, args, effect, attempt, error, created_at, "
           f"updated_at, lease_until FROM {ledger._sql_name()} WHERE status = 'unknown' AND rowid > ?"
           + (" AND tenant = ?" if tenant is not None else "") + " ORDER BY rowid LIMIT ?")
    last, seen = 0, 0
    while limit is None or seen < limit:
        n = batch_size if limit is None else min(batch_size, limit - seen)
        params: Tuple[Any, ...] = (last, tenant, n) if tenant is not None else (last, n)
        try:
            rows = ledger.conn.execute(sql, params).fetchall()
        except sqlite3.Error as e:
            from . import LedgerError
            raise LedgerError.wrap(e) from e
        if not rows:
            return
        for r in rows:
            last = r[0]
            seen += 1
            yield ReconcileCall(tenant=r[1], key=r[2], conversation=r[3], tool=r[4], args=json.loads(r[5]),
                                effect=r[6], attempt=r[7], detail=None if r[8] is None else json.loads(r[8]),
                                created_at=r[9], updated_at=r[10], lease_until=r[11], args_text=r[5],
                                detail_text=r[8])
        if len(rows) < n:
            return


def _entry(call: ReconcileCall, **more: Any) -> Dict[str, Any]:
    return {"tenant": call.tenant, "key": call.key, "tool": call.tool, "attempt": call.attempt, **more}


def _resolve(ledger: Any, call: ReconcileCall, a: Answer, by: str, report: ReconcileReport) -> None:
    """Resolves one row with answer a, in a transaction that first checks it is still unknown at call.attempt."""
    from . import LedgerError, _json_text
    conn = ledger.conn
    table = ledger._sql_name()
    try:
        conn.execute("BEGIN IMMEDIATE")
        try:
            row = conn.execute(f"SELECT status, attempt FROM {table} WHERE tenant = ? AND key = ?",
                               (call.tenant, call.key)).fetchone()
            if row is None or row[0] != "unknown" or row[1] != call.attempt:
                conn.execute("ROLLBACK")
                report.raced.append(_entry(call, status=None if row is None else row[0],
                                           now_attempt=None if row is None else row[1]))
                return
            at = conn.execute(_NOW_MS).fetchone()[0]
            mark = {"at": at, "by": by}
            if a.status == "succeeded":
                status, detail = "succeeded", {"reconciled": mark, "result": a.result}
            elif a.status == "failed":
                status, detail = "failed", {"error": a.error, "reconciled": mark}
            else:
                status, detail = "released", {"sent": False, "reason": a.reason, "reconciled": mark}
            text = _json_text(detail, "the reconciled detail")
            conn.execute("SELECT idem_resolve(?, ?, ?, ?, ?)", (ledger.name, call.tenant, call.key, status, text)).fetchone()
            conn.execute("COMMIT")
        finally:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
    except (sqlite3.Error, TypeError, ValueError) as e:
        msg = str(e) if not isinstance(e, sqlite3.Error) else LedgerError.wrap(e).message
        report.errors.append(_entry(call, error=msg))
        return
    report.resolved.append(_entry(call, status=status))


def _steps(ledger: Any, reconcilers: Mapping[str, Callable[[ReconcileCall], Any]], batch_size: int,
           limit: Optional[int], by: str, tenant: Optional[str],
           on_progress: Optional[Callable[[ReconcileReport], Any]] = None):
    """The reconciliation as a generator: yields (reconciler, call), is sent its answer or thrown its error."""
    if ledger.conn.in_transaction:
        from . import IdempotencyError
        raise IdempotencyError("Ledger.reconcile: a transaction is open on the ledger's connection; "
                               "reconcile resolves each row in a transaction of its own: commit first")
    report = ReconcileReport()
    for call in _batches(ledger, batch_size, limit, tenant):
        report.examined += 1
        fn = reconcilers.get(call.tool)
        if fn is None:
            report.needs_person.append(_entry(call, reason=f"no reconciler for tool {call.tool}"))
        else:
            try:
                a = _answer((yield fn, call))
            except Exception as e:  # the reconciler raised, or answered something that is not an Answer
                report.errors.append(_entry(call, error=f"{type(e).__name__}: {e}"))
            else:
                if a.status == "unknown":
                    report.unknown.append(_entry(call, reason=a.reason))
                else:
                    _resolve(ledger, call, a, by, report)
        if on_progress is not None:
            on_progress(report)
    return report


def reconcile(ledger: Any, reconcilers: Mapping[str, Callable[[ReconcileCall], Any]], *, batch_size: int = 100,
              limit: Optional[int] = None, by: str = "reconcile", tenant: Optional[str] = None,
              on_progress: Optional[Callable[[ReconcileReport], Any]] = None) -> ReconcileReport:
    """`Ledger.reconcile`: synchronous reconcilers (see the module's text). on_progress(report), when
    given, is called after each call is examined, with the report so far: a long run's progress."""
    _check_args(reconcilers, batch_size, limit, by, on_progress)
    gen = _steps(ledger, reconcilers, batch_size, limit, by, tenant, on_progress)
    try:
        fn, call = next(gen)
        while True:
            try:
                answer = fn(call)
                if inspect.isawaitable(answer):
                    if inspect.iscoroutine(answer):
                        answer.close()
                    raise TypeError("the reconciler returned an awaitable (an async function?): use Ledger.areconcile")
            except Exception as e:
                fn, call = gen.throw(e)
                continue
            fn, call = gen.send(answer)
    except StopIteration as stop:
        return stop.value


async def areconcile(ledger: Any, reconcilers: Mapping[str, Callable[[ReconcileCall], Any]], *,
                     batch_size: int = 100, limit: Optional[int] = None, by: str = "reconcile",
                     tenant: Optional[str] = None,
                     on_progress: Optional[Callable[[ReconcileReport], Any]] = None) -> ReconcileReport:
    """`Ledger.areconcile`: the same, awaiting reconcilers that are async (sync ones work too)."""
    _check_args(reconcilers, batch_size, limit, by, on_progress)
    gen = _steps(ledger, reconcilers, batch_size, limit, by, tenant, on_progress)
    try:
        fn, call = next(gen)
        while True:
            try:
                answer = fn(call)
                if inspect.isawaitable(answer):
                    answer = await answer
            except Exception as e:
                fn, call = gen.throw(e)
                continue
            fn, call = gen.send(answer)
    except StopIteration as stop:
        return stop.value
