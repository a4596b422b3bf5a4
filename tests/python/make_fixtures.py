#!/usr/bin/env python3
"""tests/python/make_fixtures.py DIR: the database files the operator's command is compared on.

  healthy.db   settled rows only (succeeded, failed, released)
  unknown.db   rows settled unknown, a live claim, and (ledger "quick",
               lease_seconds=0) an external claim whose lease ran out
  one.db       unknown.db's first ledger alone (an unknown call with a target, and a
               second call to that target allowed by an operator)
  dropped.db   a ledger whose update trigger was dropped (it refuses reads)
  guard.db     a guarded table whose insert trigger was dropped
  notdb.db     a text file
Prints KEY lines naming the keys the tests show and resolve.
"""
import os
import sqlite3
import sys

import sqlite_idempotency as idem

d = sys.argv[1]


opened = []


def ledger(name, table="ledger", **options):
    # heartbeat_seconds=0: the extension's lease (300 s), so the live claim stays live through the suite
    opened.append(idem.Ledger.open(os.path.join(d, name), table, options=options or None, heartbeat_seconds=0))
    return opened[-1]


def settled(led):
    a = led.claim("acme", "conv-1", "send_email", {"to": "a@example.com"})
    led.settle(a.token, "succeeded", {"message_id": "m-1"})
    b = led.claim("acme", "conv-1", "charge_card", {"amount": 5})
    led.settle(b.token, "failed", {"code": "card_declined"})
    c = led.claim("globex", "conv-2", "charge_card", {"amount": 7})
    led.settle(c.token, "released", {"sent": False})


h = ledger("healthy.db")
settled(h)
for f in ("unknown.db", "one.db"):
    u = ledger(f)
    settled(u)
    x = u.claim("acme", "conv-3", "charge_card", {"amount": 9}, targets=["card:acme/4242/order-9"])
    u.settle(x.token, "unknown", {"reason": "read timeout"})
    # a deliberate second charge of the same order, allowed by an operator (targets: docs/ledger.md)
    w = u.claim("acme", "conv-3", "charge_card", {"amount": 9, "retry": "by hand"},
                targets=["card:acme/4242/order-9", "receipt:acme/order-9"], allowed_by="ops:alice")
    u.settle(w.token, "succeeded", {"charge_id": "ch-2"})
    y = u.claim("globex", "conv-4", "send_email", {"to": "b@example.com"})
    u.settle(y.token, "unknown", {"reason": "connection reset"})
    u.claim("acme", "conv-5", "send_email", {"to": "c@example.com"})  # live
    if f == "unknown.db":
        ledger(f, "quick", lease_seconds=0).claim("acme", "conv-6", "charge_card", {"amount": 11})
print("KEY", x.key)
print("KEY2", y.key)
dr = ledger("dropped.db")
settled(dr)
z = dr.claim("acme", "conv-7", "charge_card", {"amount": 13})
dr.settle(z.token, "unknown", {"reason": "read timeout"})
dr.conn.execute("DROP TRIGGER ledger_rows_update")
g = ledger("guard.db")
g.conn.execute("CREATE TABLE orders(id INTEGER PRIMARY KEY, tenant TEXT, op TEXT)")
g.conn.execute("SELECT idem_guard('ledger', 'orders', 'op', 'tenant')").fetchone()
trig = g.conn.execute("SELECT name FROM sqlite_schema WHERE type = 'trigger' AND tbl_name = 'orders' "
                      "AND name LIKE '%insert'").fetchone()[0]
g.conn.execute(f'DROP TRIGGER "{trig}"')
with open(os.path.join(d, "notdb.db"), "w") as fh:
    fh.write("this is not a database\n" * 100)
for led in opened:
    led.close()
for f in ("healthy.db", "unknown.db", "one.db", "dropped.db", "guard.db"):
    c = sqlite3.connect(os.path.join(d, f))  # rollback journal: a read-only open needs no -shm then
    c.execute("PRAGMA journal_mode=DELETE")
    c.close()
