-- Fencing with a token column: after an expired local claim (no rows) is
-- taken over, the old holder's token no longer admits rows, nor settles;
-- the new holder's token does.

SELECT sqltest_clock(1700000000000);
CREATE VIRTUAL TABLE ledger USING idempotency(lease_seconds=30, max_attempts=3);
CREATE TABLE orders(id INTEGER PRIMARY KEY, tenant, op_key, claim_token, item);
SELECT idem_guard('ledger', 'orders', 'op_key', 'tenant', 'claim_token');
CREATE TABLE holder(name TEXT PRIMARY KEY, token);

SELECT 'first-claim', json_extract(idem_claim('ledger', 't1', 'c1', 'create_order', '{"item":"a"}', 'local', 'op-1'), '$.attempt') = 1;
INSERT INTO holder SELECT 'old', token FROM ledger WHERE key = 'op-1';
-- the first holder stalls past its lease without writing
SELECT sqltest_clock(1700000030000);
SELECT 'old-expired-insert-refused', errmsg('INSERT INTO orders(tenant, op_key, claim_token, item) VALUES (''t1'', ''op-1'', (SELECT token FROM holder WHERE name = ''old''), ''old'')')
       = 'idem_guard: insert into "orders" refused: key "op-1" needs a live claim of ledger ledger; its claim''s lease has expired';
SELECT 'take-over', json_extract(idem_claim('ledger', 't1', 'c1', 'create_order', '{"item":"a"}', 'local', 'op-1'), '$.attempt') = 2;
INSERT INTO holder SELECT 'new', token FROM ledger WHERE key = 'op-1';
SELECT 'tokens-differ', (SELECT token FROM holder WHERE name = 'old') <> (SELECT token FROM holder WHERE name = 'new');

-- the stale holder wakes up: its inserts are refused while the new claim is live
SELECT 'stale-insert-refused', errmsg('INSERT INTO orders(tenant, op_key, claim_token, item) VALUES (''t1'', ''op-1'', (SELECT token FROM holder WHERE name = ''old''), ''old'')')
       = 'idem_guard: insert into "orders" refused: key "op-1" needs a live claim of ledger ledger; the row''s token is not the live claim''s token (a stale holder?)';
SELECT 'stale-insert-code', errcode('INSERT INTO orders(tenant, op_key, claim_token, item) VALUES (''t1'', ''op-1'', (SELECT token FROM holder WHERE name = ''old''), ''old'')') = 19;
SELECT 'stale-or-ignore-refused', errcode('INSERT OR IGNORE INTO orders(tenant, op_key, claim_token, item) VALUES (''t1'', ''op-1'', (SELECT token FROM holder WHERE name = ''old''), ''old'')') = 19;
SELECT 'stale-settle-refused', errmsg('SELECT idem_settle(''ledger'', (SELECT token FROM holder WHERE name = ''old''), ''succeeded'', ''{}'')')
       GLOB 'idem_settle: no claim of ledger ledger holds token "*"*';
SELECT 'stale-wrote-nothing', (SELECT count(*) FROM orders) = 0;
-- the new holder writes; nobody can re-token its row to the stale token
SELECT 'new-insert-accepted', errmsg('INSERT INTO orders(tenant, op_key, claim_token, item) VALUES (''t1'', ''op-1'', (SELECT token FROM holder WHERE name = ''new''), ''new'')') IS NULL;
SELECT 'stale-cannot-retoken', errcode('UPDATE orders SET claim_token = (SELECT token FROM holder WHERE name = ''old'')') & 255 = 19;
SELECT 'stale-still-refused-after-new-rows', errcode('INSERT INTO orders(tenant, op_key, claim_token, item) VALUES (''t1'', ''op-1'', (SELECT token FROM holder WHERE name = ''old''), ''old'')') = 19;
SELECT 'new-settles', json_extract(idem_settle('ledger', (SELECT token FROM holder WHERE name = 'new'), 'succeeded', '{}'), '$.members') = '[{"table":"orders","rowid":1}]';
SELECT 'after-settle-both-refused',
       errcode('INSERT INTO orders(tenant, op_key, claim_token, item) VALUES (''t1'', ''op-1'', (SELECT token FROM holder WHERE name = ''old''), ''old'')') = 19
   AND errcode('INSERT INTO orders(tenant, op_key, claim_token, item) VALUES (''t1'', ''op-1'', (SELECT token FROM holder WHERE name = ''new''), ''new'')') = 19;
SELECT 'rows', (SELECT group_concat(item) FROM orders) = 'new';

-- a poison call: after max_attempts take-overs the claim fails and no token admits rows
SELECT idem_claim('ledger', 't1', 'c1', 'create_order', '{"item":"p"}', 'local', 'op-p');
INSERT INTO holder SELECT 'p1', token FROM ledger WHERE key = 'op-p';
SELECT sqltest_clock(1700000100000);
SELECT idem_claim('ledger', 't1', 'c1', 'create_order', '{"item":"p"}', 'local', 'op-p');
SELECT sqltest_clock(1700000200000);
SELECT idem_claim('ledger', 't1', 'c1', 'create_order', '{"item":"p"}', 'local', 'op-p');
INSERT INTO holder SELECT 'p3', token FROM ledger WHERE key = 'op-p';
SELECT sqltest_clock(1700000300000);
SELECT 'poison-failed', json_extract(idem_claim('ledger', 't1', 'c1', 'create_order', '{"item":"p"}', 'local', 'op-p'), '$.status') = 'failed';
SELECT 'poison-no-insert',
       errmsg('INSERT INTO orders(tenant, op_key, claim_token, item) VALUES (''t1'', ''op-p'', (SELECT token FROM holder WHERE name = ''p3''), ''p'')')
       = 'idem_guard: insert into "orders" refused: key "op-p" needs a live claim of ledger ledger; it is failed';
