-- Composite replay. A local claim records, at admission, each guarded
-- table's largest rowid; its settle snapshots the members: the guarded rows
-- of its (tenant, key) above those marks, as {"table","rowid"}, ordered by
-- guard (installation order) then rowid. A replay returns exactly that
-- snapshot: never rows of another tenant, another attempt, or an earlier
-- generation of the key.

SELECT sqltest_clock(1700000000000);
CREATE VIRTUAL TABLE ledger USING idempotency(lease_seconds=60);
CREATE TABLE orders(id INTEGER PRIMARY KEY, tenant, op_key, claim_token, item);
CREATE TABLE "order lines"(id INTEGER PRIMARY KEY, tenant, op_key, n);
-- rows from before the guards, one with the very (tenant, key) used below
INSERT INTO orders(id, tenant, op_key, item) VALUES (1, 't1', 'op-1', 'legacy'), (2, 't9', 'x', 'legacy');
INSERT INTO "order lines"(id, tenant, op_key, n) VALUES (1, 't1', 'op-1', 0);
SELECT idem_guard('ledger', 'orders', 'op_key', 'tenant', 'claim_token');
SELECT idem_guard('ledger', 'order lines', 'op_key', 'tenant');

-- ==== two tenants, one key, two tables, interleaved writes
SELECT 'claim-t1', json_extract(idem_claim('ledger', 't1', 'c1', 'create_order', '{"item":"a"}', 'local', 'op-1'), '$.decision') = 'admitted';
SELECT 'claim-t2', json_extract(idem_claim('ledger', 't2', 'c1', 'create_order', '{"item":"a"}', 'local', 'op-1'), '$.decision') = 'admitted';
SELECT 'no-members-yet', (SELECT count(*) FROM ledger_members) = 0;
-- t1 writes a line first, then two orders with rowids out of insertion order
INSERT INTO "order lines"(id, tenant, op_key, n) VALUES (10, 't1', 'op-1', 1);
INSERT INTO orders(id, tenant, op_key, claim_token, item) VALUES (50, 't1', 'op-1', (SELECT token FROM ledger WHERE tenant = 't1' AND key = 'op-1'), 'a');
INSERT INTO orders(id, tenant, op_key, claim_token, item) VALUES (20, 't2', 'op-1', (SELECT token FROM ledger WHERE tenant = 't2' AND key = 'op-1'), 'a');
INSERT INTO orders(id, tenant, op_key, claim_token, item) VALUES (40, 't1', 'op-1', (SELECT token FROM ledger WHERE tenant = 't1' AND key = 'op-1'), 'a');
INSERT INTO "order lines"(id, tenant, op_key, n) VALUES (11, 't2', 'op-1', 1);
INSERT INTO "order lines"(id, tenant, op_key, n) VALUES (12, 't1', 'op-1', 2);
-- a row of the key in an unguarded table is not a member
CREATE TABLE scratch(id INTEGER PRIMARY KEY, tenant, op_key);
INSERT INTO scratch VALUES (99, 't1', 'op-1');

SELECT 'settle-t1-members', json_extract(idem_settle('ledger', (SELECT token FROM ledger WHERE tenant = 't1' AND key = 'op-1'), 'succeeded', '{"order":40}'), '$.members')
       = '[{"table":"orders","rowid":40},{"table":"orders","rowid":50},{"table":"order lines","rowid":10},{"table":"order lines","rowid":12}]';
SELECT 'settle-t2-members', json_extract(idem_settle('ledger', (SELECT token FROM ledger WHERE tenant = 't2' AND key = 'op-1'), 'succeeded', '{"order":20}'), '$.members')
       = '[{"table":"orders","rowid":20},{"table":"order lines","rowid":11}]';
SELECT 'replay-t1', idem_claim('ledger', 't1', 'c1', 'create_order', '{"item":"a"}', 'local', 'op-1')
       = '{"decision":"replay","idempotent":true,"key":"op-1","status":"succeeded","attempt":1,"settled_at":1700000000000,"result":{"order":40},"members":[{"table":"orders","rowid":40},{"table":"orders","rowid":50},{"table":"order lines","rowid":10},{"table":"order lines","rowid":12}]}';
SELECT 'replay-t2', json_extract(idem_claim('ledger', 't2', 'c1', 'create_order', '{"item":"a"}', 'local', 'op-1'), '$.members')
       = '[{"table":"orders","rowid":20},{"table":"order lines","rowid":11}]';
SELECT 'replay-t2-idempotent', json_extract(idem_claim('ledger', 't2', 'c1', 'create_order', '{"item":"a"}', 'local', 'op-1'), '$.idempotent') = 1;
SELECT 'ledger-members-column', (SELECT members FROM ledger WHERE tenant = 't2' AND key = 'op-1') = '[{"table":"orders","rowid":20},{"table":"order lines","rowid":11}]';
-- the snapshot does not move: a member row deleted later is still listed
DELETE FROM orders WHERE id = 50;
SELECT 'snapshot-fixed', json_extract(idem_claim('ledger', 't1', 'c1', 'create_order', '{"item":"a"}', 'local', 'op-1'), '$.members')
       = '[{"table":"orders","rowid":40},{"table":"orders","rowid":50},{"table":"order lines","rowid":10},{"table":"order lines","rowid":12}]';

-- ==== a failed settle snapshots its members too
SELECT idem_claim('ledger', 't1', 'c1', 'create_order', '{"item":"f"}', 'local', 'op-f');
INSERT INTO orders(id, tenant, op_key, claim_token, item) VALUES (60, 't1', 'op-f', (SELECT token FROM ledger WHERE key = 'op-f'), 'f');
SELECT 'settle-failed-members', json_extract(idem_settle('ledger', (SELECT token FROM ledger WHERE key = 'op-f'), 'failed', '{"code":"stock"}'), '$.members')
       = '[{"table":"orders","rowid":60}]';
SELECT 'replay-failed', idem_claim('ledger', 't1', 'c1', 'create_order', '{"item":"f"}', 'local', 'op-f')
       = '{"decision":"replay","idempotent":true,"key":"op-f","status":"failed","attempt":1,"settled_at":1700000000000,"error":{"code":"stock"},"members":[{"table":"orders","rowid":60}]}';

-- ==== a local claim that wrote rows cannot be released (exact message)
SELECT idem_claim('ledger', 't1', 'c1', 'create_order', '{"item":"r"}', 'local', 'op-r');
INSERT INTO orders(id, tenant, op_key, claim_token, item) VALUES (70, 't1', 'op-r', (SELECT token FROM ledger WHERE key = 'op-r'), 'r');
SELECT 'release-refused-one', errmsg('SELECT idem_settle(''ledger'', (SELECT token FROM ledger WHERE key = ''op-r''), ''released'', NULL)')
       = 'idem_settle: cannot release local key "op-r": its attempt wrote 1 guarded row; settle succeeded or failed';
SELECT 'release-refused-code', errcode('SELECT idem_settle(''ledger'', (SELECT token FROM ledger WHERE key = ''op-r''), ''released'', NULL)') = 19;
INSERT INTO "order lines"(id, tenant, op_key, n) VALUES (70, 't1', 'op-r', 1);
SELECT 'release-refused-two', errmsg('SELECT idem_settle(''ledger'', (SELECT token FROM ledger WHERE key = ''op-r''), ''released'', ''{"why":"x"}'')')
       = 'idem_settle: cannot release local key "op-r": its attempt wrote 2 guarded rows; settle succeeded or failed';
SELECT 'release-refused-still-claimed', (SELECT status || '/' || attempt FROM ledger WHERE key = 'op-r') = 'claimed/1';
-- rows written and deleted again still were written: the release stays
-- refused (the members table keeps them while the claim is open), and the
-- settle's snapshot lists only the rows that are still there
DELETE FROM orders WHERE id = 70;
DELETE FROM "order lines" WHERE id = 70;
SELECT 'release-after-delete-refused', errmsg('SELECT idem_settle(''ledger'', (SELECT token FROM ledger WHERE key = ''op-r''), ''released'', NULL)')
       = 'idem_settle: cannot release local key "op-r": its attempt wrote 2 guarded rows; settle succeeded or failed';
SELECT 'settle-after-delete', json_extract(idem_settle('ledger', (SELECT token FROM ledger WHERE key = 'op-r'), 'failed', '{"undone":true}'), '$.members') = '[]';
SELECT 'failed-replays', json_extract(idem_claim('ledger', 't1', 'c1', 'create_order', '{"item":"r"}', 'local', 'op-r'), '$.decision') = 'replay';
-- a claim with no guarded rows releases freely
SELECT idem_claim('ledger', 't1', 'c1', 'create_order', '{"item":"e"}', 'local', 'op-e');
SELECT 'release-no-rows', json_extract(idem_settle('ledger', (SELECT token FROM ledger WHERE key = 'op-e'), 'released', NULL), '$.members') = '[]';

-- ==== an expired local claim: no rows -> taken over; rows -> unknown
SELECT sqltest_clock(1700000100000);
SELECT idem_claim('ledger', 't1', 'c1', 'create_order', '{"item":"x"}', 'local', 'op-x');
SELECT idem_claim('ledger', 't1', 'c1', 'create_order', '{"item":"y"}', 'local', 'op-y');
INSERT INTO orders(id, tenant, op_key, claim_token, item) VALUES (80, 't1', 'op-y', (SELECT token FROM ledger WHERE key = 'op-y'), 'y');
CREATE TEMP TABLE saved AS SELECT key, token FROM ledger WHERE key IN ('op-x', 'op-y');
SELECT sqltest_clock(1700000160000);
SELECT 'expired-no-rows-taken-over', json_extract(idem_claim('ledger', 't1', 'c1', 'create_order', '{"item":"x"}', 'local', 'op-x'), '$.decision') = 'admitted';
SELECT 'taken-over-attempt-2', (SELECT status || '/' || attempt FROM ledger WHERE key = 'op-x') = 'claimed/2'
   AND (SELECT token FROM ledger WHERE key = 'op-x') <> (SELECT token FROM saved WHERE key = 'op-x');
SELECT 'expired-with-rows-unknown', idem_claim('ledger', 't1', 'c1', 'create_order', '{"item":"y"}', 'local', 'op-y')
       = '{"decision":"unknown","key":"op-y","attempt":1,"message":"that request may have reached the target system, the outcome is theirs to report, and nothing is retried here"}';
SELECT 'expired-with-rows-not-taken-over', (SELECT status || '/' || attempt FROM ledger WHERE key = 'op-y') = 'unknown/1'
   AND (SELECT token FROM ledger WHERE key = 'op-y') = (SELECT token FROM saved WHERE key = 'op-y');
SELECT 'expired-with-rows-unknown-again', json_extract(idem_claim('ledger', 't1', 'c1', 'create_order', '{"item":"y"}', 'local', 'op-y'), '$.decision') = 'unknown';
SELECT 'expired-with-rows-no-insert', errcode('INSERT INTO orders(id, tenant, op_key, claim_token, item) VALUES (81, ''t1'', ''op-y'', (SELECT token FROM saved WHERE key = ''op-y''), ''y2'')') = 19;
-- the token holder may still settle late; the replay then carries the members
SELECT 'late-settle', json_extract(idem_settle('ledger', (SELECT token FROM saved WHERE key = 'op-y'), 'succeeded', '{}'), '$.members') = '[{"table":"orders","rowid":80}]';
SELECT 'late-settle-replay', json_extract(idem_claim('ledger', 't1', 'c1', 'create_order', '{"item":"y"}', 'local', 'op-y'), '$.members') = '[{"table":"orders","rowid":80}]';
-- the taken-over attempt's members are only its own rows
INSERT INTO orders(id, tenant, op_key, claim_token, item) VALUES (90, 't1', 'op-x', (SELECT token FROM ledger WHERE key = 'op-x'), 'x');
SELECT 'stale-holder-refused', errcode('INSERT INTO orders(id, tenant, op_key, claim_token, item) VALUES (91, ''t1'', ''op-x'', (SELECT token FROM saved WHERE key = ''op-x''), ''stale'')') = 19;
SELECT 'taken-over-members', json_extract(idem_settle('ledger', (SELECT token FROM ledger WHERE key = 'op-x'), 'succeeded', '{}'), '$.members') = '[{"table":"orders","rowid":90}]';

-- ==== an earlier generation of the key: claim, settle, purge, claim again
SELECT sqltest_clock(1700000200000);
SELECT idem_claim('ledger', 't1', 'c1', 'create_order', '{"item":"g"}', 'local', 'op-g');
INSERT INTO orders(id, tenant, op_key, claim_token, item) VALUES (100, 't1', 'op-g', (SELECT token FROM ledger WHERE key = 'op-g'), 'g1');
INSERT INTO "order lines"(id, tenant, op_key, n) VALUES (100, 't1', 'op-g', 1);
SELECT 'gen1-members', json_extract(idem_settle('ledger', (SELECT token FROM ledger WHERE key = 'op-g'), 'succeeded', '{"gen":1}'), '$.members')
       = '[{"table":"orders","rowid":100},{"table":"order lines","rowid":100}]';
SELECT sqltest_clock(1700000300000);
SELECT 'purge', idem_purge('ledger', 10) >= 1 AND (SELECT count(*) FROM ledger WHERE key = 'op-g') = 0;
SELECT 'gen2-admitted', idem_claim('ledger', 't1', 'c1', 'create_order', '{"item":"g"}', 'local', 'op-g') GLOB '{"decision":"admitted","key":"op-g",*"attempt":1,*';
INSERT INTO orders(id, tenant, op_key, claim_token, item) VALUES (110, 't1', 'op-g', (SELECT token FROM ledger WHERE key = 'op-g'), 'g2');
SELECT 'gen2-members', json_extract(idem_settle('ledger', (SELECT token FROM ledger WHERE key = 'op-g'), 'succeeded', '{"gen":2}'), '$.members')
       = '[{"table":"orders","rowid":110}]';
SELECT 'gen2-replay', idem_claim('ledger', 't1', 'c1', 'create_order', '{"item":"g"}', 'local', 'op-g')
       = '{"decision":"replay","idempotent":true,"key":"op-g","status":"succeeded","attempt":1,"settled_at":1700000300000,"result":{"gen":2},"members":[{"table":"orders","rowid":110}]}';
SELECT 'gen1-rows-still-there', (SELECT count(*) FROM orders WHERE op_key = 'op-g') = 2;

-- ==== the legacy rows of (t1, op-1) from before the guard never became members
SELECT 'legacy-not-member', (SELECT count(*) FROM ledger, json_each(ledger.members) AS m
                              WHERE json_extract(m.value, '$.rowid') = 1) = 0;

-- ==== an external claim records no members (members are for local claims)
SELECT idem_claim('ledger', 't1', 'c1', 'send', '{}', 'external', 'op-ext');
INSERT INTO orders(id, tenant, op_key, claim_token, item) VALUES (120, 't1', 'op-ext', (SELECT token FROM ledger WHERE key = 'op-ext'), 'ext');
SELECT 'external-settle-members-empty', json_extract(idem_settle('ledger', (SELECT token FROM ledger WHERE key = 'op-ext'), 'succeeded', '{}'), '$.members') = '[]';
