-- A guarded row's tenant on a single_tenant=1 ledger. The claim is found by
-- key alone there, but the member trigger, the settle's snapshot and the
-- upgrade's inference match a row to its claim by tenant where the guard
-- names a tenant column: a row with a NULL tenant in that column would be
-- accepted and never recorded, so the claim, expired, would be taken over
-- and the local effect done again. One rule: where the guard names a
-- tenant column, the row needs a TEXT tenant in it (docs/guards.md).
SELECT sqltest_clock(1700000000000);
CREATE VIRTUAL TABLE solo USING idempotency(single_tenant=1, lease_seconds=60);
CREATE TABLE orders(id INTEGER PRIMARY KEY, tenant, op_key, item);
SELECT 'guard', idem_guard('solo', 'orders', 'op_key', 'tenant') = 1;
SELECT 'claim', json_extract(idem_claim('solo', 'me', 'c1', 'create', '{"n":1}', 'local', 'op-1'), '$.decision') = 'admitted';

-- the row of the issue: a NULL tenant under the live claim is refused, nothing written
SELECT 'null-tenant-refused', errmsg('INSERT INTO orders(tenant, op_key, item) VALUES (NULL, ''op-1'', ''a'')')
       = 'idem_guard: insert into "orders" needs a TEXT tenant in column "tenant", which its guard names (a guarded row''s tenant is its claim''s); got NULL';
SELECT 'null-tenant-code', errcode('INSERT INTO orders(tenant, op_key, item) VALUES (NULL, ''op-1'', ''a'')') = 19;
SELECT 'null-tenant-or-ignore', errcode('INSERT OR IGNORE INTO orders(tenant, op_key, item) VALUES (NULL, ''op-1'', ''a'')') = 19;
SELECT 'null-tenant-nothing-written', (SELECT count(*) FROM orders) = 0 AND (SELECT count(*) FROM solo_members) = 0;
-- a non-text tenant, the same rule
SELECT 'integer-tenant-refused', errmsg('INSERT INTO orders(tenant, op_key, item) VALUES (7, ''op-1'', ''a'')')
       = 'idem_guard: insert into "orders" needs a TEXT tenant in column "tenant", which its guard names (a guarded row''s tenant is its claim''s); got a non-text value';
-- so the claim, expired, is not taken over to run the effect again: it has
-- no rows, and attempt 2 is the first to write any
SELECT sqltest_clock(1700000061000);
SELECT 'expired-taken-over', json_extract(idem_claim('solo', 'me', 'c1', 'create', '{"n":1}', 'local', 'op-1'), '$.attempt') = 2;
SELECT 'no-row-of-attempt-1', (SELECT count(*) FROM orders) = 0;

-- with the claim's tenant the row is a member: the expired claim reads unknown, never taken over
SELECT 'tenant-accepted', errmsg('INSERT INTO orders(tenant, op_key, item) VALUES (''me'', ''op-1'', ''a'')') IS NULL;
SELECT 'tenant-member', (SELECT count(*) FROM solo_members) = 1;
SELECT sqltest_clock(1700000122000);
SELECT 'member-expired-unknown', json_extract(idem_claim('solo', 'me', 'c1', 'create', '{"n":1}', 'local', 'op-1'), '$.decision') = 'unknown';

-- the rule is the guard's, not the ledger's: a guard without a tenant
-- column passes NULL, matches by key alone, and records its rows
CREATE TABLE steps(id INTEGER PRIMARY KEY, op_key, n);
SELECT 'guard-no-tenant-column', idem_guard('solo', 'steps', 'op_key', NULL) = 1;
SELECT 'claim-2', json_extract(idem_claim('solo', 'me', 'c1', 'create', '{"n":2}', 'local', 'op-2'), '$.decision') = 'admitted';
SELECT 'no-tenant-column-accepted', errmsg('INSERT INTO steps(op_key, n) VALUES (''op-2'', 1)') IS NULL;
SELECT 'still-refused-with-tenant-column', errcode('INSERT INTO orders(tenant, op_key, item) VALUES (NULL, ''op-2'', ''b'')') = 19;
SELECT 'settle-snapshot', json_extract(idem_settle('solo', (SELECT token FROM solo WHERE key = 'op-2'), 'succeeded', '{}'), '$.members')
       = '[{"table":"steps","rowid":1}]';

-- a renamed guarded table: the rule follows its guard
ALTER TABLE orders RENAME TO orders2;
SELECT 'claim-3', json_extract(idem_claim('solo', 'me', 'c1', 'create', '{"n":3}', 'local', 'op-3'), '$.decision') = 'admitted';
SELECT 'renamed-null-tenant-refused', errmsg('INSERT INTO orders2(tenant, op_key, item) VALUES (NULL, ''op-3'', ''c'')')
       = 'idem_guard: insert into "orders2" needs a TEXT tenant in column "tenant", which its guard names (a guarded row''s tenant is its claim''s); got NULL';

-- a multi-tenant ledger: the same message
CREATE VIRTUAL TABLE multi USING idempotency(lease_seconds=60);
CREATE TABLE lines(id INTEGER PRIMARY KEY, who, op_key);
SELECT idem_guard('multi', 'lines', 'op_key', 'who');
SELECT idem_claim('multi', 't1', 'c1', 'create', '{}', 'local', 'op-1');
SELECT 'multi-null-tenant', errmsg('INSERT INTO lines(who, op_key) VALUES (NULL, ''op-1'')')
       = 'idem_guard: insert into "lines" needs a TEXT tenant in column "who", which its guard names (a guarded row''s tenant is its claim''s); got NULL';
SELECT 'multi-nothing-written', (SELECT count(*) FROM lines) = 0;
