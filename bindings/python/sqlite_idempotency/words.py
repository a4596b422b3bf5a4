"""What the model reads on each decision of a guarded tool call.

The one table is ``words.json``, which the Node package ships too and
docs/integrations.md shows: read from this package's directory (the wheel
and the sdist carry a copy), else from the source tree's
``bindings/node/words.json``. `say` fills a text the same way as the Node
package's ``say``: ``{name}`` is a field, required unless the kind lists it
under ``optional``; a string is written as it is, anything else as compact
JSON; ``at`` and ``renewed_at`` (milliseconds since the epoch) as ISO 8601
UTC and as whole seconds before ``now``.

`Ledger.call`, `Ledger.acall` and ``@ledger.tool`` give these words as the
``text`` of what they return or raise (see `telling`).
"""
from __future__ import annotations

import datetime
import functools
import inspect
import json
import os
import re
import time
from typing import Any, Callable, Dict, Mapping, Optional

_HERE = os.path.dirname(os.path.abspath(__file__))
PATHS = (os.path.join(_HERE, "words.json"), os.path.join(_HERE, "..", "..", "node", "words.json"))
_table: Optional[Dict[str, Any]] = None
_FIELD = re.compile(r"\{([a-z_]+)\}")
_WHERE = "sqlite_idempotency: say"


def table() -> Dict[str, Any]:
    """words.json, read once."""
    global _table
    if _table is None:
        for p in PATHS:
            if os.path.exists(p):
                with open(p, encoding="utf-8") as f:
                    _table = json.load(f)
                break
        else:
            raise FileNotFoundError(f"sqlite_idempotency: words.json is in neither {PATHS[0]} nor {PATHS[1]}")
    return _table


def _ms(name: str, v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v != v or v in (float("inf"), float("-inf")):
        raise TypeError(f"{_WHERE}: {name} must be milliseconds since the epoch, got {v!r}")
    return int(v)


def _iso8601(name: str, v: Any, now: float) -> str:
    s, ms = divmod(_ms(name, v), 1000)
    t = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc) + datetime.timedelta(seconds=s)
    return f"{t:%Y-%m-%dT%H:%M:%S}.{ms:03d}Z"


def _seconds_ago(name: str, v: Any, now: float) -> str:
    return str(max(0, int((now - _ms(name, v)) // 1000)))


def _list(name: str, v: Any, now: float) -> str:
    if not isinstance(v, (list, tuple)) or not all(isinstance(x, str) for x in v):
        raise TypeError(f"{_WHERE}: {name} must be a list of strings, got {v!r}")
    return ", ".join(v)


_FORMATS = {"iso8601": _iso8601, "seconds_ago": _seconds_ago, "list": _list}


def _given(v: Any) -> bool:
    """A field is given unless None or an empty list (no targets)."""
    return v is not None and not (isinstance(v, (list, tuple)) and len(v) == 0)


def _value(name: str, v: Any, now: float) -> str:
    f = table()["formats"].get(name)
    if f:
        return _FORMATS[f](name, v, now)
    return v if isinstance(v, str) else json.dumps(v, separators=(",", ":"), ensure_ascii=False)


def _fill(what: str, template: str, fields: Mapping[str, Any], now: float, optional: Optional[Mapping[str, str]]) -> str:
    constants = table()["constants"]

    def one(m: "re.Match[str]") -> str:
        name = m.group(1)
        if name in constants:
            return constants[name]
        if optional is not None and name in optional:
            return _fill(what, optional[name], fields, now, None) if _given(fields.get(name)) else ""
        if fields.get(name) is None:
            raise TypeError(f"{_WHERE}: the {what} text needs the field {name}, got None")
        return _value(name, fields[name], now)

    return _FIELD.sub(one, template)


def _now(fields: Mapping[str, Any]) -> float:
    return fields["now"] if fields.get("now") is not None else time.time() * 1000


def say(kind: str, fields: Optional[Mapping[str, Any]] = None, **more: Any) -> str:
    """The text of ``kind`` (a key of words.json's kinds) for the fields (a mapping, or keywords)."""
    kinds = table()["kinds"]
    if kind not in kinds:
        raise TypeError(f"{_WHERE}: unknown kind {json.dumps(kind)} (kinds are {', '.join(kinds)})")
    f = {**(fields or {}), **more}
    entry = kinds[kind]
    return _fill(kind, entry["text"], f, _now(f), entry.get("optional"))


def because(name: str, fields: Optional[Mapping[str, Any]] = None, **more: Any) -> str:
    """The words of a reason every adapter shares (words.json's reasons), for a text's ``reason`` field."""
    reasons = table()["reasons"]
    if name not in reasons:
        raise TypeError(f"{_WHERE}: unknown reason {json.dumps(name)} (reasons are {', '.join(reasons)})")
    f = {**(fields or {}), **more}
    return _fill(f"{name} reason", reasons[name], f, _now(f), None)


def say_conflict(tool: str, decision: Any) -> Dict[str, Any]:
    """The words of a conflict decision (a `Conflict`, or its answer as a dict) for the tool name:
    ``{"kind", "text"}``, with ``"result"`` (the holder's result, what the model reads after the
    words) when the holder succeeded. Its ``held_by`` status picks the kind."""
    d = decision if isinstance(decision, Mapping) else decision.raw
    held = d.get("held_by") or {}
    status = held.get("status")
    kind = ("conflict_succeeded" if status == "succeeded" else "conflict_unknown" if status == "unknown"
            else "conflict_claimed")
    text = say(kind, tool=tool, key=d.get("key"), target=d.get("target"), held_tool=held.get("tool"),
               held_key=held.get("key"), at=held.get("updated_at"))
    out: Dict[str, Any] = {"kind": kind, "text": text}
    if kind == "conflict_succeeded":
        out["result"] = held.get("result")
    return out


def _tell(e: BaseException, tool: str, targets: Any = None) -> None:
    """Sets ``e.text``: the words of the refusal or the unknown outcome ``e`` stands for
    (``targets``, what the call touches, named in the in_progress and unknown words)."""
    from . import ClaimInProgress, ClaimMismatch, LeaseLost, NotCommitted, NotSent, OutcomeUnknown, TargetConflict

    key = getattr(e, "key", None)
    d = getattr(e, "decision", None)
    if isinstance(e, ClaimInProgress):
        text = say("in_progress", tool=tool, key=key, attempt=d.attempt, renewed_at=d.raw.get("renewed_at"),
                   targets=targets)
    elif isinstance(e, ClaimMismatch):
        text = say("mismatch", tool=tool, key=key, differs=d.differs)
    elif isinstance(e, TargetConflict):
        c = say_conflict(tool, d)
        text = c["text"] if "result" not in c else (
            c["text"] + "\n" + json.dumps(c["result"], separators=(",", ":"), ensure_ascii=False))
    elif isinstance(e, OutcomeUnknown):
        text = (say("unknown", tool=tool, key=key, attempt=d.attempt, targets=targets) if d is not None
                else say("outcome_unknown", tool=tool, key=key, reason=e.reason, targets=targets))
    elif isinstance(e, NotSent):
        text = say("not_sent", tool=tool, reason=e.reason)
    elif isinstance(e, NotCommitted):
        text = say("not_sent", tool=tool, reason=because("not_committed"))
    elif isinstance(e, LeaseLost):
        text = say("not_sent", tool=tool, reason=because("lease_lost", message=str(e)))
    else:
        return
    e.text = text  # type: ignore[attr-defined]


def _told(out: Any, tool: str) -> Any:
    """The Outcome with its ``text``: the replay's or the failure's words (None for a first success)."""
    import dataclasses

    fields = {"tool": tool, "key": out.key, "attempt": out.attempt}
    if out.idempotent:
        fields["at"] = out.settled_at  # when the first call's outcome was recorded
    if out.status == "failed":
        text: Optional[str] = say("failed_replay" if out.idempotent else "failed", fields)
    elif out.idempotent:
        text = say("replay", fields)
    else:
        return out
    return dataclasses.replace(out, text=text)


def telling(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Wraps ``call(ledger, tenant, conversation, tool, ...)`` (sync or async): the Outcome it
    returns carries ``text`` (`_told`), and a refusal or unknown outcome it raises carries
    ``text`` (`_tell`): the words the model is to read."""
    if inspect.iscoroutinefunction(fn):
        @functools.wraps(fn)
        async def told_async(ledger: Any, tenant: str, conversation: str, tool: str, *a: Any, **kw: Any) -> Any:
            try:
                out = await fn(ledger, tenant, conversation, tool, *a, **kw)
            except Exception as e:
                _tell(e, tool, kw.get("targets"))
                raise
            return _told(out, tool)
        return told_async

    @functools.wraps(fn)
    def told(ledger: Any, tenant: str, conversation: str, tool: str, *a: Any, **kw: Any) -> Any:
        try:
            out = fn(ledger, tenant, conversation, tool, *a, **kw)
        except Exception as e:
            _tell(e, tool, kw.get("targets"))
            raise
        return _told(out, tool)
    return told


__all__ = ["say", "because", "say_conflict", "table", "telling", "PATHS"]
