#!/usr/bin/env python3
"""Write tests/conformance/sequences/transitions-*.json from the states table.

The states table of the contract (DESIGN section 6, "States") is written
below once, as data: for each state a row can be in, what a settle (by
the token holder) and a resolve (after reconciliation) of each status do,
and what the next claim of the same call then decides. The generator walks
every pair, state by state: one file per state, one block of steps per
operation, each on a fresh key (an operation id that names the state and
the operation, so a failing step reads as the rule it pins). Exhaustive
rather than random, so there is no seed: the files are the whole table.

    python3 tools/gen_conformance.py           rewrite the files
    python3 tools/gen_conformance.py --check   exit 1 if a file differs from what it would write

tests/suites/23-conformance.sh runs --check, so the files cannot drift
from this table.
"""
import json
import os
import sys

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "conformance", "sequences")
CLOCK = 1800000000000
LEASE_MS = 30000
TENANT, CONVERSATION, TOOL, ARGS = "acme", "conv-1", "charge_card", {"amount": 100, "currency": "EUR"}

# The detail each status is given, and how it is stored (result for succeeded, error otherwise).
DETAIL = {"succeeded": {"charge": "ch_1"}, "failed": {"code": 402}, "released": {"sent": False, "why": "dns"},
          "unknown": {"reason": "timeout"}}
STATUSES = ("succeeded", "failed", "released", "unknown")

# The states a row can be in, each with its effect and how it is reached
# from a fresh claim (a settle of that status, or nothing for claimed).
STATES = {
    "claimed-external": ("external", None),
    "claimed-local": ("local", None),
    "succeeded": ("external", "succeeded"),
    "failed": ("external", "failed"),
    "released": ("external", "released"),
    "unknown": ("external", "unknown"),
}


def settle_rule(state, to):
    """None when the token holder's settle to `to` is a transition of the table, else the refusal."""
    status = state.split("-")[0]
    if status == "claimed":
        if to == "unknown" and state == "claimed-local":
            return ("status unknown is for external claims; the outcome of local key \"{key}\" is known: "
                    "settle succeeded, failed or released")
        return None  # claimed -> succeeded | failed | released | unknown
    if status == "unknown" and to != "unknown":
        return None  # unknown -> succeeded | failed | released: a late settle by the token holder
    return "illegal transition " + status + " -> " + to + " for key \"{key}\""  # terminal, or unknown -> unknown


def resolve_rule(state, to):
    """None when resolve to `to` is a transition of the table, else the refusal."""
    status = state.split("-")[0]
    if to == "unknown":
        return "status must be one of succeeded, failed or released; got \"unknown\""
    if status == "claimed":
        return "key \"{key}\" is claimed, not unknown; the claim's holder settles it with its token"
    if status == "unknown":
        return None  # unknown -> succeeded | failed | released: reconciliation
    return "illegal transition " + status + " -> " + to + " for key \"{key}\""


def next_claim(status, attempt):
    """What a claim of the same call decides on a row of this status (the lease still live)."""
    if status == "succeeded":
        return {"decision": "replay", "idempotent": True, "status": "succeeded", "attempt": attempt,
                "result": DETAIL["succeeded"], "members": []}
    if status == "failed":
        return {"decision": "replay", "idempotent": True, "status": "failed", "attempt": attempt,
                "error": DETAIL["failed"], "members": []}
    if status == "released":
        return {"decision": "admitted", "attempt": attempt + 1}
    if status == "unknown":
        return {"decision": "unknown", "attempt": attempt,
                "message": "that request may have reached the target system, the outcome is theirs to report, "
                           "and nothing is retried here"}
    return {"decision": "in_progress", "attempt": attempt, "lease_until": CLOCK + LEASE_MS}


def claim(key, effect, name=None, expect=None):
    step = {"step": "claim", "tenant": TENANT, "conversation": CONVERSATION, "tool": TOOL, "args": ARGS,
            "effect": effect, "operation_id": key}
    if name is not None:
        step["as"] = name
    step["expect"] = expect
    return step


def block(state, op, to):
    """The steps of one (state, operation, status): reach the state, apply, check the outcome."""
    effect, reach = STATES[state]
    key = f"{state}-{op}-{to}"
    steps = [claim(key, effect, "t", {"decision": "admitted", "key": key, "attempt": 1, "effect": effect})]
    if reach is not None:
        steps.append({"step": "settle", "token": "t", "status": reach, "detail": DETAIL[reach],
                      "expect": {"key": key, "status": reach, "attempt": 1}})
    rule = settle_rule(state, to) if op == "settle" else resolve_rule(state, to)
    if op == "settle":
        step = {"step": "settle", "token": "t", "status": to, "detail": DETAIL[to]}
    else:
        step = {"step": "resolve", "tenant": TENANT, "key": key, "status": to, "detail": DETAIL[to]}
    after = reach or "claimed"
    if rule is None:
        step["expect"] = {"key": key, "status": to, "attempt": 1, "members": []}
        after = to
    else:
        step["error"] = rule.format(key=key)
    steps.append(step)
    steps.append(claim(key, effect, None, next_claim(after, 1)))
    return steps


def sequence(state):
    steps = []
    for op in ("settle", "resolve"):
        for to in STATUSES:
            steps.extend(block(state, op, to))
    # the saved token names the claim of the block it is in: each block saves "t" again
    return {
        "kind": "sequence",
        "generated": "tools/gen_conformance.py from its copy of the states table (DESIGN 6); do not edit",
        "pins": f"DESIGN 6, States: every settle and resolve of each status on a row that is {state}, "
                "and what the next claim of the call decides",
        "ledger": {"lease_seconds": LEASE_MS // 1000},
        "clock": CLOCK,
        "steps": steps,
    }


def render(spec):
    """One step per line, so a diff names the step."""
    head = {k: v for k, v in spec.items() if k != "steps"}
    lines = ["{"]
    for k, v in head.items():
        lines.append(f"  {json.dumps(k)}: {json.dumps(v, ensure_ascii=False)},")
    lines.append('  "steps": [')
    lines.append(",\n".join("    " + json.dumps(s, ensure_ascii=False) for s in spec["steps"]))
    lines.append("  ]")
    lines.append("}")
    return "\n".join(lines) + "\n"


def main(argv):
    check = argv[1:] == ["--check"]
    if argv[1:] and not check:
        print("usage: gen_conformance.py [--check]", file=sys.stderr)
        return 2
    bad = 0
    for state in STATES:
        path = os.path.join(OUT, f"transitions-{state}.json")
        text = render(sequence(state))
        if check:
            try:
                with open(path, encoding="utf-8") as f:
                    same = f.read() == text
            except OSError:
                same = False
            if not same:
                print(f"gen_conformance: {os.path.relpath(path)} differs from what tools/gen_conformance.py writes")
                bad = 1
        else:
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
    return bad


if __name__ == "__main__":
    sys.exit(main(sys.argv))
