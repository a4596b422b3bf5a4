-- sqltest: file
-- The exactly-once local recipe (docs/guards.md): claim, effect rows and settle in
-- one BEGIN IMMEDIATE ... COMMIT. A ROLLBACK leaves neither rows nor claim
-- and the retry is admitted; after the COMMIT a second arrival replays the
-- first outcome with its members and cannot write again.

PRAGMA journal_mode = WAL;
CREATE VIRTUAL TABLE ledger USING idempotency(lease_seconds=60);
CREATE TABLE orders(id INTEGER PRIMARY KEY, tenant, op_key, claim_token, item);
CREATE TABLE "order lines"(id INTEGER PRIMARY KEY, tenant, op_key, n);
SELECT idem_guard('ledger', 'orders', 'op_key', 'tenant', 'claim_token');
SELECT idem_guard('ledger', 'order lines', 'op_key', 'tenant');
CREATE TABLE attempt_log(n INTEGER PRIMARY KEY, what);

-- ==== first arrival: rolled back mid-way (the process gave up before COMMIT)
BEGIN IMMEDIATE;
SELECT 'rb-claim-admitted', json_extract(idem_claim('ledger', 't1', 'c1', 'create_order', '{"item":"a"}', 'local'), '$.decision') = 'admitted';
SELECT 'rb-claim-not-committed', json_extract(idem_claim('ledger', 't1', 'c1', 'create_order', '{"item":"a"}', 'local'), '$.decision') = 'in_progress';
SELECT 'rb-claim-visible-in-tx', (SELECT status FROM ledger WHERE tenant = 't1') = 'claimed';
INSERT INTO orders(tenant, op_key, claim_token, item)
  SELECT tenant, key, token, 'a' FROM ledger WHERE tenant = 't1';
INSERT INTO "order lines"(tenant, op_key, n) SELECT tenant, key, 1 FROM ledger WHERE tenant = 't1';
SELECT 'rb-rows-in-tx', (SELECT count(*) FROM orders) = 1 AND (SELECT count(*) FROM "order lines") = 1;
ROLLBACK;
SELECT 'rb-no-rows', (SELECT count(*) FROM orders) = 0 AND (SELECT count(*) FROM "order lines") = 0;
SELECT 'rb-no-claim', (SELECT count(*) FROM ledger) = 0 AND (SELECT count(*) FROM ledger_rows) = 0;
SELECT 'rb-integrity', (SELECT group_concat(integrity_check) FROM pragma_integrity_check) = 'ok';

-- ==== the retry: the recipe runs to COMMIT
BEGIN IMMEDIATE;
SELECT 'retry-admitted', idem_claim('ledger', 't1', 'c1', 'create_order', '{"item":"a"}', 'local')
       GLOB '{"decision":"admitted","key":"idem1-*","token":"*","attempt":1,"effect":"local","committed":false,*';
INSERT INTO orders(tenant, op_key, claim_token, item)
  SELECT tenant, key, token, 'a' FROM ledger WHERE tenant = 't1';
INSERT INTO "order lines"(tenant, op_key, n) SELECT tenant, key, 1 FROM ledger WHERE tenant = 't1';
INSERT INTO "order lines"(tenant, op_key, n) SELECT tenant, key, 2 FROM ledger WHERE tenant = 't1';
SELECT 'retry-settle', json_extract(idem_settle('ledger', (SELECT token FROM ledger WHERE tenant = 't1'), 'succeeded', '{"order":1}'), '$.members')
       = '[{"table":"orders","rowid":1},{"table":"order lines","rowid":1},{"table":"order lines","rowid":2}]';
COMMIT;
SELECT 'committed-rows', (SELECT count(*) FROM orders) = 1 AND (SELECT count(*) FROM "order lines") = 2;
SELECT 'committed-ledger', (SELECT status || '/' || attempt || '/' || effect FROM ledger WHERE tenant = 't1') = 'succeeded/1/local';

-- ==== a second arrival, also with the recipe: replay with the members, no write
BEGIN IMMEDIATE;
SELECT 'second-arrival-replay', idem_claim('ledger', 't1', 'c1', 'create_order', '{"item":"a"}', 'local')
       = '{"decision":"replay","idempotent":true,"key":"' || idem_key('t1', 'c1', 'create_order', '{"item":"a"}')
         || '","status":"succeeded","attempt":1,"settled_at":' || (SELECT updated_at FROM ledger WHERE tenant = 't1') || ',"result":{"order":1},"members":[{"table":"orders","rowid":1},{"table":"order lines","rowid":1},{"table":"order lines","rowid":2}]}';
SELECT 'second-arrival-cannot-write', errmsg('INSERT INTO orders(tenant, op_key, claim_token, item) SELECT tenant, key, token, ''dup'' FROM ledger WHERE tenant = ''t1''')
       = 'idem_guard: insert into "orders" refused: key "' || idem_key('t1', 'c1', 'create_order', '{"item":"a"}') || '" needs a live claim of ledger ledger; it is succeeded';
COMMIT;
-- a second spelling of the same call is the same key: a replay too
SELECT 'respelled-replay', json_extract(idem_claim('ledger', 't1', 'c1', 'create_order', '{ "item" : "a" }', 'local'), '$.decision') = 'replay';
SELECT 'still-one-set', (SELECT count(*) FROM orders) = 1 AND (SELECT count(*) FROM "order lines") = 2;

-- ==== the recipe for another tenant with the same call: its own rows
BEGIN IMMEDIATE;
SELECT 't2-admitted', json_extract(idem_claim('ledger', 't2', 'c1', 'create_order', '{"item":"a"}', 'local'), '$.decision') = 'admitted';
INSERT INTO orders(tenant, op_key, claim_token, item) SELECT tenant, key, token, 'a' FROM ledger WHERE tenant = 't2';
SELECT idem_settle('ledger', (SELECT token FROM ledger WHERE tenant = 't2'), 'succeeded', '{"order":2}');
COMMIT;
SELECT 't2-replay-members', json_extract(idem_claim('ledger', 't2', 'c1', 'create_order', '{"item":"a"}', 'local'), '$.members') = '[{"table":"orders","rowid":2}]';

-- ==== a refused insert inside the recipe aborts only that statement; the
-- caller rolls back, and nothing of the attempt survives
BEGIN IMMEDIATE;
SELECT idem_claim('ledger', 't1', 'c1', 'create_order', '{"item":"b"}', 'local', 'op-b');
INSERT INTO orders(tenant, op_key, claim_token, item) VALUES ('t1', 'op-b', (SELECT token FROM ledger WHERE key = 'op-b'), 'b');
SELECT 'in-tx-refusal', errcode('INSERT INTO orders(tenant, op_key, claim_token, item) VALUES (''t1'', ''op-other'', NULL, ''b'')') = 19;
SELECT 'in-tx-still-open', (SELECT count(*) FROM orders WHERE op_key = 'op-b') = 1;
ROLLBACK;
SELECT 'in-tx-rolled-back', (SELECT count(*) FROM orders WHERE op_key = 'op-b') = 0 AND (SELECT count(*) FROM ledger WHERE key = 'op-b') = 0;
SELECT 'retry-b-admitted', json_extract(idem_claim('ledger', 't1', 'c1', 'create_order', '{"item":"b"}', 'local', 'op-b'), '$.attempt') = 1;

-- ==== a settle that fails inside the recipe (release refused) leaves the
-- transaction usable; the caller settles succeeded instead
BEGIN IMMEDIATE;
SELECT idem_claim('ledger', 't1', 'c1', 'create_order', '{"item":"c"}', 'local', 'op-c');
INSERT INTO orders(tenant, op_key, claim_token, item) VALUES ('t1', 'op-c', (SELECT token FROM ledger WHERE key = 'op-c'), 'c');
SELECT 'in-tx-release-refused', errcode('SELECT idem_settle(''ledger'', (SELECT token FROM ledger WHERE key = ''op-c''), ''released'', NULL)') = 19;
SELECT 'in-tx-settle-after-refusal', json_extract(idem_settle('ledger', (SELECT token FROM ledger WHERE key = 'op-c'), 'succeeded', '{}'), '$.status') = 'succeeded';
COMMIT;
SELECT 'op-c-committed', (SELECT status FROM ledger WHERE key = 'op-c') = 'succeeded' AND (SELECT count(*) FROM orders WHERE op_key = 'op-c') = 1;
SELECT 'final-integrity', (SELECT group_concat(integrity_check) FROM pragma_integrity_check) = 'ok';
