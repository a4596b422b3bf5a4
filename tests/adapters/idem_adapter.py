"""An idempotent tool-call adapter over sqlite-idempotency (standard library only).

    from idem_adapter import IdemAdapter, OutcomeUnknown, NotSent
    idem = IdemAdapter("agent.db", "build/idempotency")        # creates ledger if missing
    out = idem.call_http_tool(tenant, conversation, "send_email", {"to": "a@b.c"},
                              "https://mail.example/send", timeout=5)

The rules it follows (README, "The adapter pattern"):

* claim first, with a bare `SELECT idem_claim(...)` on a connection in
  autocommit mode (so the claim is committed as it returns), with
  `synchronous=FULL` (a power loss cannot undo the claim) and a
  `busy_timeout` (concurrent claimers wait for the write lock);
* act only on `admitted` with `committed` true; every other decision is
  returned as is and nothing runs: `replay` (the first outcome,
  `"idempotent": true`), `in_progress`, `unknown`, `mismatch`;
* send the key as the `Idempotency-Key` header, an RFC 8941 sf-string
  (the key in double quotes), so the target can deduplicate too;
* settle what is known:
    - a 2xx answer: `succeeded` with the response body (JSON, else
      `{"status":..,"text":..}`);
    - a 4xx answer: `failed` with `{"status":..,"body":..}`: the target
      answered and refused, so retries replay that failure;
    - a 5xx answer, a timeout, or a connection lost after the request began:
      `unknown` (the target may have acted), raise `OutcomeUnknown`. The call
      is never retried here: reconcile with the target, then `idem_resolve`;
    - the connection could not be made (refused, unreachable, connect
      timeout): nothing was sent, so `released` with `{"sent": false}` and
      raise `NotSent`; a retry is admitted again.

The tenant must come from trusted authentication, never from the model.
"""
import http.client
import json
import socket
import sqlite3
from urllib.parse import urlsplit

__all__ = ["IdemAdapter", "OutcomeUnknown", "NotSent", "sf_string"]


class OutcomeUnknown(Exception):
    """The request may have reached the target; the claim is settled unknown."""

    def __init__(self, key, reason):
        super().__init__(f"outcome of {key} is unknown ({reason}); it will not be retried: "
                         f"reconcile with the target, then idem_resolve")
        self.key = key
        self.reason = reason


class NotSent(Exception):
    """Nothing was sent; the claim is released, so a retry really retries."""

    def __init__(self, key, reason):
        super().__init__(f"{key} was not sent ({reason}); the claim is released")
        self.key = key
        self.reason = reason


def sf_string(value):
    """RFC 8941 sf-string: printable ASCII in double quotes, with \\ and " escaped."""
    if any(not (0x20 <= ord(c) <= 0x7E) for c in value):
        raise ValueError(f"{value!r} cannot be an sf-string (only printable ASCII)")
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


class IdemAdapter:
    def __init__(self, db_path, extension, ledger="ledger", busy_timeout_ms=10000, create=True):
        self.ledger = ledger
        # isolation_level=None: autocommit, so each bare SELECT idem_claim commits itself.
        self.db = sqlite3.connect(db_path, isolation_level=None, timeout=busy_timeout_ms / 1000,
                                  check_same_thread=True)
        self.db.enable_load_extension(True)
        self.db.load_extension(extension)
        self.db.enable_load_extension(False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=FULL")
        self.db.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
        if create:
            # A ledger is created once; racing creators wait on busy_timeout and
            # the loser sees that it exists.
            try:
                self.db.execute(f'CREATE VIRTUAL TABLE IF NOT EXISTS "{ledger}" USING idempotency')
            except sqlite3.OperationalError:
                if not self._exists():
                    raise

    def _exists(self):
        return self.db.execute("SELECT 1 FROM sqlite_schema WHERE type='table' AND name=?",
                               (self.ledger,)).fetchone() is not None

    def close(self):
        self.db.close()

    def _one(self, sql, args):
        return self.db.execute(sql, args).fetchone()[0]

    def claim(self, tenant, conversation, tool, args):
        """The claim decision (a dict). args is a JSON-serialisable object."""
        text = json.dumps(args, ensure_ascii=False, allow_nan=False)
        return json.loads(self._one("SELECT idem_claim(?, ?, ?, ?, ?)",
                                    (self.ledger, tenant, conversation, tool, text)))

    def settle(self, token, status, detail):
        return json.loads(self._one("SELECT idem_settle(?, ?, ?, ?)",
                                    (self.ledger, token, status,
                                     None if detail is None else json.dumps(detail))))

    def call_http_tool(self, tenant, conversation, tool, args, url, timeout=5.0):
        """Runs the tool call at most once: POST args as JSON to url.

        Returns the claim decision for anything but admitted (nothing ran),
        or for admitted {"decision": "admitted", "key", "attempt", "status":
        "succeeded"|"failed", "result"|"error"}. Raises OutcomeUnknown or
        NotSent as described in the module docstring.
        """
        d = self.claim(tenant, conversation, tool, args)
        if d["decision"] != "admitted":
            return d
        key, token = d["key"], d["token"]
        if not d.get("committed"):
            # Our connection is in autocommit mode, so this means someone opened a
            # transaction on it: never act on a claim that could still roll back.
            self.settle(token, "released", {"sent": False, "reason": "claim not committed"})
            raise RuntimeError("idem_claim was not committed; commit before acting on an external claim")

        u = urlsplit(url)
        if u.scheme == "https":
            conn = http.client.HTTPSConnection(u.hostname, u.port, timeout=timeout)
        else:
            conn = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
        path = (u.path or "/") + (f"?{u.query}" if u.query else "")
        body = json.dumps(args).encode()
        try:
            try:
                conn.connect()  # nothing is sent before this succeeds
            except OSError as e:
                self.settle(token, "released", {"sent": False, "reason": f"connect: {e}"})
                raise NotSent(key, f"connect: {e}") from e
            try:
                conn.request("POST", path, body=body, headers={
                    "Idempotency-Key": sf_string(key),
                    "Content-Type": "application/json",
                })
                resp = conn.getresponse()
                status, raw = resp.status, resp.read()
            except (socket.timeout, TimeoutError) as e:
                self.settle(token, "unknown", {"reason": "timeout", "timeout_s": timeout})
                raise OutcomeUnknown(key, "timeout") from e
            except (OSError, http.client.HTTPException) as e:
                self.settle(token, "unknown", {"reason": f"{type(e).__name__}: {e}"})
                raise OutcomeUnknown(key, f"{type(e).__name__}: {e}") from e
        finally:
            conn.close()

        try:
            payload = json.loads(raw)
        except ValueError:
            payload = {"text": raw.decode("utf-8", "replace")}
        if 200 <= status < 300:
            self.settle(token, "succeeded", payload)
            return {"decision": "admitted", "key": key, "attempt": d["attempt"],
                    "status": "succeeded", "result": payload}
        if 400 <= status < 500:
            error = {"status": status, "body": payload}
            self.settle(token, "failed", error)
            return {"decision": "admitted", "key": key, "attempt": d["attempt"],
                    "status": "failed", "error": error}
        self.settle(token, "unknown", {"reason": f"http {status}", "body": payload})
        raise OutcomeUnknown(key, f"http {status}")
