"""An HTTP tool-call adapter over the sqlite-idempotency Python package.

    pip install sqlite-idempotency         # the wheel of `make dist`
    from idem_adapter import IdemAdapter
    idem = IdemAdapter("agent.db")         # Ledger.open: extension, WAL, synchronous=FULL, busy_timeout
    out = idem.call_http_tool(tenant, conversation, "send_email", {"to": "a@b.c"},
                              "https://mail.example/send", timeout=5)

The claim, the commit check, the renewal before sending, settling and
replaying are the package's `Ledger.call`; this file only says what an HTTP
exchange means (docs/ledger.md, "The adapter pattern"):

* the connection could not be made (refused, unreachable, connect timeout):
  nothing was sent: raise `NotSent` (the claim is released with
  ``{"sent": false}``; a retry is admitted again);
* a 2xx answer: the result is the response body (JSON, else ``{"text": ...}``);
* a 4xx answer: the target answered and refused: raise `ToolFailed` with
  ``{"status", "body"}`` (settled failed; retries replay that failure);
* a timeout, a 5xx answer, or the connection lost after the request began:
  the target may have acted: raise `OutcomeUnknown` (settled unknown, never
  retried: reconcile with the target, then resolve).

The tenant must come from trusted authentication, never from the model.
"""
import http.client
import json
import socket
from urllib.parse import urlsplit

from sqlite_idempotency import Ledger, NotSent, OutcomeUnknown, ToolFailed

__all__ = ["IdemAdapter", "post_json"]


def post_json(url, args, headers, timeout):
    """POSTs args as JSON to url; returns the answer's JSON, or raises as above."""
    u = urlsplit(url)
    cls = http.client.HTTPSConnection if u.scheme == "https" else http.client.HTTPConnection
    conn = cls(u.hostname, u.port, timeout=timeout)
    path = (u.path or "/") + (f"?{u.query}" if u.query else "")
    try:
        try:
            conn.connect()  # nothing is sent before this succeeds
        except OSError as e:
            raise NotSent(f"connect: {e}") from e
        try:
            conn.request("POST", path, body=json.dumps(args).encode(),
                         headers={**headers, "Content-Type": "application/json"})
            resp = conn.getresponse()
            status, raw = resp.status, resp.read()
        except (socket.timeout, TimeoutError) as e:
            raise OutcomeUnknown("timeout", detail={"reason": "timeout", "timeout_s": timeout}) from e
        except (OSError, http.client.HTTPException) as e:
            raise OutcomeUnknown(f"{type(e).__name__}: {e}") from e
    finally:
        conn.close()
    try:
        payload = json.loads(raw)
    except ValueError:
        payload = {"text": raw.decode("utf-8", "replace")}
    if 200 <= status < 300:
        return payload
    if 400 <= status < 500:
        raise ToolFailed({"status": status, "body": payload})
    raise OutcomeUnknown(f"http {status}", detail={"reason": f"http {status}", "body": payload})


class IdemAdapter:
    def __init__(self, db_path, ledger="ledger", busy_timeout_ms=10000, create=True, options=None):
        self.ledger = Ledger.open(db_path, ledger, create=create, busy_timeout_ms=busy_timeout_ms,
                                  options=options)

    def close(self):
        self.ledger.close()

    def call_http_tool(self, tenant, conversation, tool, args, url, timeout=5.0, wait=0.0):
        """Runs the tool call at most once; returns the package's `Outcome`.

        ``wait`` seconds: how long to wait while another caller holds the key.
        """
        return self.ledger.call(tenant, conversation, tool, args,
                                lambda attempt: post_json(url, args, attempt.headers, timeout), wait=wait)
