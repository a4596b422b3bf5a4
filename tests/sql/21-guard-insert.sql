-- INSERT into a guarded table: refused unless (tenant, key) holds a live
-- claimed claim of the ledger (and, with a token column, the row carries its
-- token). Each refusal: exact message, SQLITE_CONSTRAINT, no row. OR IGNORE
-- and OR REPLACE do not turn a refusal into a row. Key, tenant and token
-- columns cannot be updated. Times come from the test clock.

SELECT sqltest_clock(1700000000000);
CREATE VIRTUAL TABLE ledger USING idempotency(lease_seconds=60);
CREATE TABLE orders(id INTEGER PRIMARY KEY, tenant, op_key, claim_token, item);
SELECT idem_guard('ledger', 'orders', 'op_key', 'tenant', 'claim_token');

-- no claim at all
SELECT 'no-claim', errmsg('INSERT INTO orders(tenant, op_key, claim_token, item) VALUES (''t1'', ''op-1'', NULL, ''a'')')
       = 'idem_guard: insert into "orders" refused: key "op-1" needs a live claim of ledger ledger; there is no claim for it';
SELECT 'no-claim-code', errcode('INSERT INTO orders(tenant, op_key, claim_token, item) VALUES (''t1'', ''op-1'', NULL, ''a'')') = 19;
SELECT 'no-claim-derived-key', errmsg('INSERT INTO orders(tenant, op_key, item) VALUES (''t1'', idem_key(''t1'', ''c1'', ''create'', ''{}''), ''a'')')
       = 'idem_guard: insert into "orders" refused: key "idem1-' || substr(idem_key('t1', 'c1', 'create', '{}'), 7) || '" needs a live claim of ledger ledger; there is no claim for it';

-- a live claim, the right token: accepted
SELECT 'claim-op-1', json_extract(idem_claim('ledger', 't1', 'c1', 'create', '{"n":1}', 'local', 'op-1'), '$.decision') = 'admitted';
SELECT 'live-claim-accepted', errmsg('INSERT INTO orders(tenant, op_key, claim_token, item) VALUES (''t1'', ''op-1'', (SELECT token FROM ledger WHERE key = ''op-1''), ''a'')') IS NULL;
SELECT 'live-claim-second-row', errmsg('INSERT INTO orders(tenant, op_key, claim_token, item) VALUES (''t1'', ''op-1'', (SELECT token FROM ledger WHERE key = ''op-1''), ''b'')') IS NULL;
SELECT 'live-claim-rows', (SELECT count(*) FROM orders WHERE op_key = 'op-1') = 2;

-- a live claim, but the wrong token, a NULL token, a non-text token
SELECT 'wrong-token', errmsg('INSERT INTO orders(tenant, op_key, claim_token, item) VALUES (''t1'', ''op-1'', ''0123456789abcdef0123456789abcdef'', ''x'')')
       = 'idem_guard: insert into "orders" refused: key "op-1" needs a live claim of ledger ledger; the row''s token is not the live claim''s token (a stale holder?)';
SELECT 'wrong-token-code', errcode('INSERT INTO orders(tenant, op_key, claim_token, item) VALUES (''t1'', ''op-1'', ''0123456789abcdef0123456789abcdef'', ''x'')') = 19;
SELECT 'null-token', errmsg('INSERT INTO orders(tenant, op_key, claim_token, item) VALUES (''t1'', ''op-1'', NULL, ''x'')')
       = 'idem_guard: insert into "orders" refused: key "op-1" needs a live claim of ledger ledger; the row''s token is not the live claim''s token (a stale holder?)';
SELECT 'token-uppercase', errcode('INSERT INTO orders(tenant, op_key, claim_token, item) VALUES (''t1'', ''op-1'', upper((SELECT token FROM ledger WHERE key = ''op-1'')), ''x'')') = 19;
SELECT 'token-as-blob', errcode('INSERT INTO orders(tenant, op_key, claim_token, item) VALUES (''t1'', ''op-1'', CAST((SELECT token FROM ledger WHERE key = ''op-1'') AS BLOB), ''x'')') = 19;

-- another tenant's claim does not admit the key for this tenant
SELECT 'other-tenant', errmsg('INSERT INTO orders(tenant, op_key, claim_token, item) VALUES (''t2'', ''op-1'', (SELECT token FROM ledger WHERE key = ''op-1''), ''x'')')
       = 'idem_guard: insert into "orders" refused: key "op-1" needs a live claim of ledger ledger; there is no claim for it';
SELECT 'other-tenant-code', errcode('INSERT INTO orders(tenant, op_key, claim_token, item) VALUES (''t2'', ''op-1'', (SELECT token FROM ledger WHERE key = ''op-1''), ''x'')') = 19;
-- nor the case-folded key or tenant
SELECT 'other-case-key', errcode('INSERT INTO orders(tenant, op_key, claim_token, item) VALUES (''t1'', ''OP-1'', (SELECT token FROM ledger WHERE key = ''op-1''), ''x'')') = 19;
SELECT 'other-case-tenant', errcode('INSERT INTO orders(tenant, op_key, claim_token, item) VALUES (''T1'', ''op-1'', (SELECT token FROM ledger WHERE key = ''op-1''), ''x'')') = 19;

-- NULL and non-text key or tenant
SELECT 'null-key', errmsg('INSERT INTO orders(tenant, op_key, claim_token, item) VALUES (''t1'', NULL, (SELECT token FROM ledger WHERE key = ''op-1''), ''x'')')
       = 'idem_guard: insert into "orders" needs a key; got NULL';
SELECT 'null-key-code', errcode('INSERT INTO orders(tenant, op_key, claim_token, item) VALUES (''t1'', NULL, (SELECT token FROM ledger WHERE key = ''op-1''), ''x'')') = 19;
SELECT 'null-tenant', errmsg('INSERT INTO orders(tenant, op_key, claim_token, item) VALUES (NULL, ''op-1'', (SELECT token FROM ledger WHERE key = ''op-1''), ''x'')')
       = 'idem_guard: insert into "orders" needs a TEXT tenant in column "tenant", which its guard names (a guarded row''s tenant is its claim''s); got NULL';
SELECT 'null-tenant-code', errcode('INSERT INTO orders(tenant, op_key, claim_token, item) VALUES (NULL, ''op-1'', (SELECT token FROM ledger WHERE key = ''op-1''), ''x'')') = 19;
SELECT 'integer-key', errmsg('INSERT INTO orders(tenant, op_key, claim_token, item) VALUES (''t1'', 5, NULL, ''x'')')
       = 'idem_guard: insert into "orders" needs a key; got a non-text value';
SELECT 'blob-tenant', errmsg('INSERT INTO orders(tenant, op_key, claim_token, item) VALUES (x''7431'', ''op-1'', NULL, ''x'')')
       = 'idem_guard: insert into "orders" needs a TEXT tenant in column "tenant", which its guard names (a guarded row''s tenant is its claim''s); got a non-text value';
SELECT 'omitted-key-column', errmsg('INSERT INTO orders(tenant, item) VALUES (''t1'', ''x'')')
       = 'idem_guard: insert into "orders" needs a key; got NULL';

-- OR IGNORE / OR REPLACE / OR FAIL / OR ROLLBACK: still an error, still no row
SELECT 'or-ignore-no-claim', errmsg('INSERT OR IGNORE INTO orders(tenant, op_key, claim_token, item) VALUES (''t1'', ''op-9'', NULL, ''x'')')
       = 'idem_guard: insert into "orders" refused: key "op-9" needs a live claim of ledger ledger; there is no claim for it';
SELECT 'or-ignore-code', errcode('INSERT OR IGNORE INTO orders(tenant, op_key, claim_token, item) VALUES (''t1'', ''op-9'', NULL, ''x'')') = 19;
SELECT 'or-replace-no-claim', errmsg('INSERT OR REPLACE INTO orders(tenant, op_key, claim_token, item) VALUES (''t1'', ''op-9'', NULL, ''x'')')
       = 'idem_guard: insert into "orders" refused: key "op-9" needs a live claim of ledger ledger; there is no claim for it';
SELECT 'or-replace-code', errcode('REPLACE INTO orders(tenant, op_key, claim_token, item) VALUES (''t1'', ''op-9'', NULL, ''x'')') = 19;
SELECT 'or-ignore-wrong-token', errcode('INSERT OR IGNORE INTO orders(tenant, op_key, claim_token, item) VALUES (''t1'', ''op-1'', ''0123456789abcdef0123456789abcdef'', ''x'')') = 19;
-- OR REPLACE over an existing row's rowid: refused, and the old row survives
SELECT 'or-replace-existing-rowid', errcode('INSERT OR REPLACE INTO orders(id, tenant, op_key, claim_token, item) VALUES (1, ''t1'', ''op-9'', NULL, ''replaced'')') = 19;
SELECT 'or-replace-kept-old-row', (SELECT item FROM orders WHERE id = 1) = 'a';
SELECT 'or-null-key', errcode('INSERT OR IGNORE INTO orders(tenant, op_key, claim_token, item) VALUES (''t1'', NULL, NULL, ''x'')') = 19;
SELECT 'or-fail-no-claim', errcode('INSERT OR FAIL INTO orders(tenant, op_key, claim_token, item) VALUES (''t1'', ''op-9'', NULL, ''x'')') = 19;
SELECT 'upsert-no-claim', errcode('INSERT INTO orders(id, tenant, op_key, claim_token, item) VALUES (1, ''t1'', ''op-9'', NULL, ''x'') ON CONFLICT(id) DO UPDATE SET item = ''upserted''') = 19;
SELECT 'upsert-kept-old-row', (SELECT item FROM orders WHERE id = 1) = 'a';
-- a multi-row insert with one refused row inserts none of them
SELECT 'multi-row-all-or-nothing', errcode('INSERT INTO orders(tenant, op_key, claim_token, item) SELECT ''t1'', k, (SELECT token FROM ledger WHERE key = ''op-1''), ''m'' FROM (SELECT ''op-1'' AS k UNION ALL SELECT ''op-9'')') = 19;
SELECT 'refusals-wrote-nothing', (SELECT count(*) FROM orders) = 2 AND (SELECT count(*) FROM orders WHERE op_key <> 'op-1' OR op_key IS NULL OR item NOT IN ('a', 'b')) = 0;

-- updates: key, tenant and token frozen (RAISE(ABORT): SQLITE_CONSTRAINT_TRIGGER,
-- primary code SQLITE_CONSTRAINT), other columns free; no-op assignments are fine
SELECT 'update-key', errmsg('UPDATE orders SET op_key = ''op-2'' WHERE item = ''a''')
       = 'idem_guard: the rowid and the key, tenant and token columns of a guarded table cannot be updated';
SELECT 'update-key-code', errcode('UPDATE orders SET op_key = ''op-2'' WHERE item = ''a''') & 255 = 19;
SELECT 'update-key-to-null', errcode('UPDATE orders SET op_key = NULL WHERE item = ''a''') & 255 = 19;
SELECT 'update-tenant', errmsg('UPDATE orders SET tenant = ''t2'' WHERE item = ''a''')
       = 'idem_guard: the rowid and the key, tenant and token columns of a guarded table cannot be updated';
SELECT 'update-token', errmsg('UPDATE orders SET claim_token = NULL WHERE item = ''a''')
       = 'idem_guard: the rowid and the key, tenant and token columns of a guarded table cannot be updated';
SELECT 'update-or-ignore-key', errcode('UPDATE OR IGNORE orders SET op_key = ''op-2''') & 255 = 19;
SELECT 'update-or-replace-tenant', errcode('UPDATE OR REPLACE orders SET tenant = ''t2''') & 255 = 19;
SELECT 'update-other-column', errmsg('UPDATE orders SET item = ''a2'' WHERE item = ''a''') IS NULL;
SELECT 'update-same-values', errmsg('UPDATE orders SET op_key = op_key, tenant = tenant, claim_token = claim_token') IS NULL;
SELECT 'updates-kept-keys', (SELECT group_concat(tenant || '/' || op_key || '/' || item, ' ') FROM (SELECT * FROM orders ORDER BY id)) = 't1/op-1/a2 t1/op-1/b';
SELECT 'delete-allowed', errmsg('DELETE FROM orders WHERE item = ''b''') IS NULL AND (SELECT count(*) FROM orders) = 1;

-- the claim's status: succeeded, failed, released, unknown (external), each refused
SELECT idem_claim('ledger', 't1', 'c1', 'create', '{"n":2}', 'local', 'op-s');
SELECT idem_settle('ledger', (SELECT token FROM ledger WHERE key = 'op-s'), 'succeeded', '{}');
SELECT 'succeeded', errmsg('INSERT INTO orders(tenant, op_key, claim_token, item) VALUES (''t1'', ''op-s'', (SELECT token FROM ledger WHERE key = ''op-s''), ''x'')')
       = 'idem_guard: insert into "orders" refused: key "op-s" needs a live claim of ledger ledger; it is succeeded';
SELECT 'succeeded-code', errcode('INSERT INTO orders(tenant, op_key, claim_token, item) VALUES (''t1'', ''op-s'', (SELECT token FROM ledger WHERE key = ''op-s''), ''x'')') = 19;
SELECT idem_claim('ledger', 't1', 'c1', 'create', '{"n":3}', 'local', 'op-f');
SELECT idem_settle('ledger', (SELECT token FROM ledger WHERE key = 'op-f'), 'failed', '{"code":"x"}');
SELECT 'failed', errmsg('INSERT INTO orders(tenant, op_key, claim_token, item) VALUES (''t1'', ''op-f'', (SELECT token FROM ledger WHERE key = ''op-f''), ''x'')')
       = 'idem_guard: insert into "orders" refused: key "op-f" needs a live claim of ledger ledger; it is failed';
SELECT 'failed-code', errcode('INSERT INTO orders(tenant, op_key, claim_token, item) VALUES (''t1'', ''op-f'', (SELECT token FROM ledger WHERE key = ''op-f''), ''x'')') = 19;
SELECT idem_claim('ledger', 't1', 'c1', 'create', '{"n":4}', 'local', 'op-r');
SELECT idem_settle('ledger', (SELECT token FROM ledger WHERE key = 'op-r'), 'released', NULL);
SELECT 'released', errmsg('INSERT INTO orders(tenant, op_key, claim_token, item) VALUES (''t1'', ''op-r'', (SELECT token FROM ledger WHERE key = ''op-r''), ''x'')')
       = 'idem_guard: insert into "orders" refused: key "op-r" needs a live claim of ledger ledger; it is released';
SELECT 'released-code', errcode('INSERT INTO orders(tenant, op_key, claim_token, item) VALUES (''t1'', ''op-r'', (SELECT token FROM ledger WHERE key = ''op-r''), ''x'')') = 19;
SELECT idem_claim('ledger', 't1', 'c1', 'send', '{"n":5}', 'external', 'op-u');
SELECT idem_settle('ledger', (SELECT token FROM ledger WHERE key = 'op-u'), 'unknown', '{"reason":"timeout"}');
SELECT 'unknown', errmsg('INSERT INTO orders(tenant, op_key, claim_token, item) VALUES (''t1'', ''op-u'', (SELECT token FROM ledger WHERE key = ''op-u''), ''x'')')
       = 'idem_guard: insert into "orders" refused: key "op-u" needs a live claim of ledger ledger; it is unknown';
SELECT 'unknown-code', errcode('INSERT INTO orders(tenant, op_key, claim_token, item) VALUES (''t1'', ''op-u'', (SELECT token FROM ledger WHERE key = ''op-u''), ''x'')') = 19;

-- a live external claim also admits guarded rows (docs/design.md: guards accept either effect)
SELECT idem_claim('ledger', 't1', 'c1', 'send', '{"n":6}', 'external', 'op-e');
SELECT 'external-live-claim-accepted', errmsg('INSERT INTO orders(tenant, op_key, claim_token, item) VALUES (''t1'', ''op-e'', (SELECT token FROM ledger WHERE key = ''op-e''), ''e'')') IS NULL;

-- expiry (the test clock): the lease ends at claim time + 60 s
SELECT idem_claim('ledger', 't1', 'c1', 'create', '{"n":7}', 'local', 'op-x');
SELECT sqltest_clock(1700000059999);
SELECT 'just-before-expiry', errmsg('INSERT INTO orders(tenant, op_key, claim_token, item) VALUES (''t1'', ''op-x'', (SELECT token FROM ledger WHERE key = ''op-x''), ''x1'')') IS NULL;
SELECT sqltest_clock(1700000060000);
SELECT 'expired-lease', errmsg('INSERT INTO orders(tenant, op_key, claim_token, item) VALUES (''t1'', ''op-x'', (SELECT token FROM ledger WHERE key = ''op-x''), ''x2'')')
       = 'idem_guard: insert into "orders" refused: key "op-x" needs a live claim of ledger ledger; its claim''s lease has expired';
SELECT 'expired-lease-code', errcode('INSERT INTO orders(tenant, op_key, claim_token, item) VALUES (''t1'', ''op-x'', (SELECT token FROM ledger WHERE key = ''op-x''), ''x2'')') = 19;
-- an expired external claim (effectively unknown) is refused too
SELECT 'expired-external', errcode('INSERT INTO orders(tenant, op_key, claim_token, item) VALUES (''t1'', ''op-e'', (SELECT token FROM ledger WHERE key = ''op-e''), ''e2'')') = 19;
SELECT 'expired-external-message', errmsg('INSERT INTO orders(tenant, op_key, claim_token, item) VALUES (''t1'', ''op-e'', (SELECT token FROM ledger WHERE key = ''op-e''), ''e2'')')
       GLOB 'idem_guard: insert into "orders" refused: key "op-e" needs a live claim of ledger ledger; *';
SELECT 'expiry-rows', (SELECT group_concat(item, ' ') FROM (SELECT item FROM orders ORDER BY id)) = 'a2 e x1';

-- a guarded table without a token column: the live claim alone admits
CREATE TABLE notes(id INTEGER PRIMARY KEY, tenant, op_key, body);
SELECT idem_guard('ledger', 'notes', 'op_key', 'tenant');
SELECT idem_claim('ledger', 't1', 'c1', 'note', '{}', 'local', 'op-n');
SELECT 'no-token-column-accepted', errmsg('INSERT INTO notes(tenant, op_key, body) VALUES (''t1'', ''op-n'', ''n'')') IS NULL;
SELECT 'no-token-column-other-key', errmsg('INSERT INTO notes(tenant, op_key, body) VALUES (''t1'', ''op-m'', ''n'')')
       = 'idem_guard: insert into "notes" refused: key "op-m" needs a live claim of ledger ledger; there is no claim for it';
SELECT 'no-token-column-update-key', errcode('UPDATE notes SET op_key = ''op-m''') & 255 = 19;
SELECT 'no-token-column-update-body', errmsg('UPDATE notes SET body = ''n2''') IS NULL;

-- a statement that inserts through a view with an INSTEAD OF trigger is still checked
CREATE VIEW orders_in AS SELECT tenant, op_key, claim_token, item FROM orders;
CREATE TRIGGER orders_in_ins INSTEAD OF INSERT ON orders_in BEGIN
  INSERT INTO orders(tenant, op_key, claim_token, item) VALUES (NEW.tenant, NEW.op_key, NEW.claim_token, NEW.item);
END;
SELECT 'through-view-refused', errmsg('INSERT INTO orders_in VALUES (''t1'', ''op-9'', NULL, ''v'')')
       = 'idem_guard: insert into "orders" refused: key "op-9" needs a live claim of ledger ledger; there is no claim for it';
SELECT 'final-rows', (SELECT count(*) FROM orders) = 3 AND (SELECT count(*) FROM notes) = 1;
