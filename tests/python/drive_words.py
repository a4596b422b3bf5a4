"""Drives @ledger.tool to each decision for tests/js/test_words.mjs.

Usage: PYTHONPATH=<a copy of bindings/python with the extension and words.json>
       python3 drive_words.py DB JOBS_JSON

JOBS_JSON is a list of {"tenant", "conversation", "args": {"to", "mode"}, "targets"};
mode "ok" returns {"sent": to}, "fail" raises ToolFailed({"code":
"declined"}), "throw" raises RuntimeError("socket hang up"), "notsent"
raises NotSent("connection refused"). Prints, as JSON, one
{"text", "payload"} per job (payload: the result or the error of the
Outcome; absent for what was raised): what a Python agent builder hands
the model.
"""
import json
import sys

import sqlite_idempotency as idem


def main(db, jobs):
    ledger = idem.Ledger.open(db, create=False)
    out = []
    for job in jobs:
        @ledger.tool("send_email", tenant=lambda a, job=job: job.get("tenant"),
                     conversation=lambda a, job=job: job.get("conversation"),
                     targets=lambda a, job=job: job.get("targets") or [])
        def send_email(to, mode):
            if mode == "fail":
                raise idem.ToolFailed({"code": "declined"})
            if mode == "throw":
                raise RuntimeError("socket hang up")
            if mode == "notsent":
                raise idem.NotSent("connection refused")
            return {"sent": to}
        try:
            o = send_email(**job["args"])
            out.append({"text": o.text, "payload": o.result if o.status == "succeeded" else o.error})
        except idem.IdempotencyError as e:
            out.append({"text": getattr(e, "text", None)})
    ledger.close()
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1], json.loads(sys.argv[2]))
