#!/usr/bin/env python3
"""Write the generated files of tests/conformance/sequences/ from the states table.

The states table of the contract (docs/ledger.md, "States") is written
below once, as data: for each state a row can be in, what a settle (by
the token holder) and a resolve (after reconciliation) of each status do,
and what the next claim of the same call then decides. Two kinds of file
come from it:

    transitions-<state>.json  every (settle | resolve) x status from that
                              state, one block of steps per pair on a fresh
                              key (an operation id naming the state and the
                              operation, so a failing step reads as the rule
                              it pins); exhaustive, so there is no seed
    walk-<seed>.json          a seeded walk of claims, settles, renewals,
                              resolves, row reads and clock moves onto lease
                              edges, its answers predicted by the same table
                              and the lease rules (see "seeded walks" below)

    python3 tools/gen_conformance.py           rewrite the files
    python3 tools/gen_conformance.py --check   exit 1 if a file differs from what it would write
    python3 tools/gen_conformance.py --walk N  print the walk of seed N (to try other seeds)

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


def next_claim(status, attempt, settled_at):
    """What a claim of the same call decides on a row of this status (the lease still live);
    settled_at is when a terminal row was settled or resolved."""
    if status == "succeeded":
        return {"decision": "replay", "idempotent": True, "status": "succeeded", "attempt": attempt,
                "settled_at": settled_at, "result": DETAIL["succeeded"], "members": []}
    if status == "failed":
        return {"decision": "replay", "idempotent": True, "status": "failed", "attempt": attempt,
                "settled_at": settled_at, "error": DETAIL["failed"], "members": []}
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
                      "expect": {"key": key, "status": reach, "attempt": 1, "settled_at": CLOCK}})
    rule = settle_rule(state, to) if op == "settle" else resolve_rule(state, to)
    if op == "settle":
        step = {"step": "settle", "token": "t", "status": to, "detail": DETAIL[to]}
    else:
        step = {"step": "resolve", "tenant": TENANT, "key": key, "status": to, "detail": DETAIL[to]}
    after = reach or "claimed"
    if rule is None:
        step["expect"] = {"key": key, "status": to, "attempt": 1, "settled_at": CLOCK, "members": []}
        after = to
    else:
        step["error"] = rule.format(key=key)
    steps.append(step)
    steps.append(claim(key, effect, None, next_claim(after, 1, CLOCK)))  # the clock does not move
    return steps


def sequence(state):
    steps = []
    for op in ("settle", "resolve"):
        for to in STATUSES:
            steps.extend(block(state, op, to))
    # the saved token names the claim of the block it is in: each block saves "t" again
    return {
        "kind": "sequence",
        "generated": "tools/gen_conformance.py from its copy of the states table (docs/ledger.md); do not edit",
        "pins": f"docs/ledger.md, States: every settle and resolve of each status on a row that is {state}, "
                "and what the next claim of the call decides",
        "ledger": {"lease_seconds": LEASE_MS // 1000},
        "clock": CLOCK,
        "steps": steps,
    }


# --- seeded walks -------------------------------------------------------------
#
# A walk interleaves claims, settles (with the current token or a stale
# one), renewals, resolves, row reads and clock moves that land on lease
# edges, over a few external and local keys, and predicts each answer
# from the table above plus the lease rules of docs/ledger.md: a claim is live
# while now < lease_until; an expired external claim is unknown; an expired
# local claim (no guarded rows here) stays claimed until a claim takes it
# over, and the max_attempts-th expiry, counted over the key's whole life
# (a release does not reset it), fails the call instead; idem_renew extends
# to max(lease_until, now + seconds) a live claim only.

WALK_LEASE_S, WALK_MAX_ATTEMPTS, WALK_STEPS = 10, 2, 40
# Seeds whose walks each reach every kind of answer: an admission, a take-over of
# each effect, in_progress, unknown, the poison failure, a stale token, a
# renewal and a resolve that succeed and that are refused.
WALK_SEEDS = (43, 206, 223)
WALK_STATUS_WEIGHTS = {"succeeded": 2, "failed": 1, "released": 4, "unknown": 3}  # releases keep keys open
LOST = "do not act on this claim"


class Row:
    def __init__(self, effect):
        self.effect, self.status, self.attempt, self.lease, self.expired = effect, "claimed", 0, 0, 0
        self.token, self.detail, self.settled = None, None, None

    def state(self, now):
        """The row's state as the table names it, at the clock `now`."""
        if self.status != "claimed":
            return self.status
        if now >= self.lease and self.effect == "external":
            return "unknown"
        return "claimed-" + self.effect


class Walk:
    def __init__(self, seed):
        import random
        self.rnd = random.Random(seed)
        self.now = CLOCK
        self.rows = {}
        self.stale = []  # tokens that no longer hold their key
        self.minted = 0
        self.steps = []

    def step(self, step, expect=None, error=None):
        if error is not None:
            step["error"] = error
        elif expect is not None:
            step["expect"] = expect
        self.steps.append(step)

    def admit(self, key, r):
        if r.token is not None:
            self.stale.append(r.token)
        self.minted += 1
        r.token, r.status, r.attempt, r.detail = f"{key}-{self.minted}", "claimed", r.attempt + 1, None
        r.lease = self.now + WALK_LEASE_S * 1000
        return {"decision": "admitted", "key": key, "attempt": r.attempt, "effect": r.effect, "lease_until": r.lease}

    def pick_key(self):
        """An open key mostly; a new one (external or local) while fewer than two are open, or now and then."""
        open_keys = sorted(k for k, r in self.rows.items() if r.status not in ("succeeded", "failed"))
        if len(open_keys) < 2 or self.rnd.random() < 0.15:
            effect = self.rnd.choice(("external", "local"))
            return f"{effect[:3]}-{len(self.rows) + 1}", effect
        key = self.rnd.choice(open_keys)
        return key, self.rows[key].effect

    def claim(self):
        key, effect = self.pick_key()
        step = {"step": "claim", "tenant": TENANT, "conversation": CONVERSATION, "tool": TOOL, "args": {"key": key},
                "effect": effect, "operation_id": key}
        r = self.rows.get(key)
        if r is None:
            r = self.rows[key] = Row(effect)
            expect = self.admit(key, r)
        else:
            state = r.state(self.now)
            if state.startswith("claimed") and self.now < r.lease:
                expect = {"decision": "in_progress", "attempt": r.attempt, "lease_until": r.lease}
            elif state == "claimed-local":  # expired: a take-over, or the poison failure
                r.expired += 1
                if r.expired >= WALK_MAX_ATTEMPTS:
                    r.status, r.settled = "failed", self.now  # this claim settles it failed
                    r.detail = {"reason": "max_attempts", "attempts": r.attempt,
                                "message": f"{r.expired} attempts expired without a settle; the call is not retried"}
                    expect = {"decision": "replay", "status": "failed", "attempt": r.attempt, "settled_at": r.settled,
                              "error": r.detail}
                else:
                    expect = self.admit(key, r)
            elif state == "released":
                expect = self.admit(key, r)
            else:
                expect = next_claim(state, r.attempt, r.settled)
                expect.pop("lease_until", None)
                if state in ("succeeded", "failed"):
                    expect["result" if state == "succeeded" else "error"] = r.detail
        if expect.get("decision") == "admitted":
            step["as"] = r.token
        self.step(step, expect)

    def pick_token(self):
        held = [r.token for r in self.rows.values()]
        if not held:
            return None, None
        tok = self.rnd.choice(self.stale) if self.stale and self.rnd.random() < 0.3 else self.rnd.choice(held)
        key = next((k for k, r in self.rows.items() if r.token == tok), None)
        return tok, key

    def settle(self):
        tok, key = self.pick_token()
        if tok is None:
            return self.claim()
        to = self.rnd.choice([st for st, w in WALK_STATUS_WEIGHTS.items() for _ in range(w)])
        step = {"step": "settle", "token": tok, "status": to, "detail": DETAIL[to]}
        if key is None:
            return self.step(step, error="(a wrong token, or a claim that was taken over)")
        r = self.rows[key]
        rule = settle_rule(r.state(self.now), to)
        if rule is not None:
            return self.step(step, error=rule.format(key=key))
        r.status, r.detail, r.settled = to, DETAIL[to], self.now
        self.step(step, {"key": key, "status": to, "attempt": r.attempt, "settled_at": r.settled, "members": []})

    def renew(self):
        tok, key = self.pick_token()
        if tok is None:
            return self.claim()
        seconds = self.rnd.choice((None, 0, 5, 30))
        step = {"step": "renew", "token": tok}
        if seconds is not None:
            step["seconds"] = seconds
        r = self.rows.get(key)
        if r is None or not r.state(self.now).startswith("claimed") or self.now >= r.lease:
            return self.step(step, error=LOST)
        r.lease = max(r.lease, self.now + (WALK_LEASE_S if seconds is None else seconds) * 1000)
        self.step(step, {"lease_until": r.lease})

    def resolve(self):
        if not self.rows:
            return self.claim()
        key = self.rnd.choice(sorted(self.rows))
        to = self.rnd.choice(STATUSES)
        r = self.rows[key]
        step = {"step": "resolve", "tenant": TENANT, "key": key, "status": to, "detail": DETAIL[to]}
        rule = resolve_rule(r.state(self.now), to)
        if rule is not None:
            return self.step(step, error=rule.format(key=key))
        r.status, r.detail, r.settled = to, DETAIL[to], self.now
        self.step(step, {"key": key, "status": to, "attempt": r.attempt, "settled_at": r.settled, "members": []})

    def row(self):
        if not self.rows:
            return self.claim()
        key = self.rnd.choice(sorted(self.rows))
        r = self.rows[key]
        self.step({"step": "row", "tenant": TENANT, "key": key},
                  {"status": r.state(self.now).split("-")[0], "attempt": r.attempt, "effect": r.effect})

    def clock(self):
        live = sorted(r.lease for r in self.rows.values() if r.status == "claimed" and r.lease > self.now)
        if live and self.rnd.random() < 0.6:
            delta = self.rnd.choice(live) - self.now - self.rnd.choice((0, 1))  # onto an edge, or 1 ms before it
        else:
            delta = self.rnd.choice((1, 1000, 4000, 9999, 10000))
        delta = max(delta, 1)
        self.now += delta
        self.step({"step": "clock", "advance": delta})

    def run(self):
        ops = (self.claim,) * 7 + (self.settle,) * 4 + (self.renew,) * 2 + (self.resolve,) * 2 + \
              (self.row,) * 2 + (self.clock,) * 5
        while len(self.steps) < WALK_STEPS:
            self.rnd.choice(ops)()
        return self.steps


def walk(seed):
    return {
        "kind": "sequence",
        "generated": f"tools/gen_conformance.py, seeded walk {seed}, from its states table and the lease rules "
                     "of docs/ledger.md; do not edit",
        "pins": "docs/ledger.md, States and Decisions under interleaving: claims, settles with live and stale tokens, "
                "renewals, resolves and clock moves onto lease edges, over external and local keys "
                f"(lease_seconds={WALK_LEASE_S}, max_attempts={WALK_MAX_ATTEMPTS})",
        "ledger": {"lease_seconds": WALK_LEASE_S, "max_attempts": WALK_MAX_ATTEMPTS},
        "clock": CLOCK,
        "steps": Walk(seed).run(),
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
    if len(argv) == 3 and argv[1] == "--walk" and argv[2].isdigit():
        sys.stdout.write(render(walk(int(argv[2]))))
        return 0
    check = argv[1:] == ["--check"]
    if argv[1:] and not check:
        print("usage: gen_conformance.py [--check | --walk SEED]", file=sys.stderr)
        return 2
    bad = 0
    files = [(f"transitions-{state}.json", sequence(state)) for state in STATES]
    files += [(f"walk-{seed}.json", walk(seed)) for seed in WALK_SEEDS]
    for name, spec in files:
        path = os.path.join(OUT, name)
        text = render(spec)
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
