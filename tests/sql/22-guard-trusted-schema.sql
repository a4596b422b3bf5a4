-- sqltest: file
-- The guard under PRAGMA trusted_schema=OFF: its insert trigger calls
-- idem_guard_check, which is DETERMINISTIC|INNOCUOUS, so the trigger still
-- runs once the schema is reloaded from the file as untrusted (as
-- 09-schema.sql does with PRAGMA writable_schema=RESET). A control trigger
-- on a non-innocuous function is refused under the same setting, which
-- shows the setting is in force.

CREATE VIRTUAL TABLE ledger USING idempotency(lease_seconds=60);
CREATE TABLE orders(id INTEGER PRIMARY KEY, tenant, op_key, claim_token, item);
SELECT idem_guard('ledger', 'orders', 'op_key', 'tenant', 'claim_token');
CREATE TABLE control(x);
CREATE TRIGGER control_risky BEFORE INSERT ON control BEGIN SELECT sqltest_risky(NEW.x); END;
SELECT 'control-trusted', errmsg('INSERT INTO control VALUES (1)') IS NULL;

PRAGMA trusted_schema = OFF;
SELECT 'trusted-schema-off', (SELECT trusted_schema FROM pragma_trusted_schema) = 0;
PRAGMA writable_schema = RESET;
SELECT 'schema-reloaded', (SELECT count(*) FROM sqlite_schema WHERE name = 'orders_idem_ledger_insert') = 1;
SELECT 'control-untrusted-refused', errmsg('INSERT INTO control VALUES (2)') = 'unsafe use of sqltest_risky()';

SELECT 'untrusted-refused-without-claim', errmsg('INSERT INTO orders(tenant, op_key, claim_token, item) VALUES (''t1'', ''op-1'', NULL, ''a'')')
       = 'idem_guard: insert into "orders" refused: key "op-1" needs a live claim of ledger ledger; there is no claim for it';
SELECT 'untrusted-refused-code', errcode('INSERT INTO orders(tenant, op_key, claim_token, item) VALUES (''t1'', ''op-1'', NULL, ''a'')') = 19;
SELECT 'untrusted-claim', json_extract(idem_claim('ledger', 't1', 'c1', 'create', '{}', 'local', 'op-1'), '$.decision') = 'admitted';
SELECT 'untrusted-accepted-with-claim', errmsg('INSERT INTO orders(tenant, op_key, claim_token, item) VALUES (''t1'', ''op-1'', (SELECT token FROM ledger WHERE key = ''op-1''), ''a'')') IS NULL;
SELECT 'untrusted-wrong-token', errmsg('INSERT INTO orders(tenant, op_key, claim_token, item) VALUES (''t1'', ''op-1'', ''0123456789abcdef0123456789abcdef'', ''b'')')
       = 'idem_guard: insert into "orders" refused: key "op-1" needs a live claim of ledger ledger; the row''s token is not the live claim''s token (a stale holder?)';
SELECT 'untrusted-update-frozen', errmsg('UPDATE orders SET op_key = ''op-2''')
       = 'idem_guard: the rowid and the key, tenant and token columns of a guarded table cannot be updated';
SELECT 'untrusted-settle-members', json_extract(idem_settle('ledger', (SELECT token FROM ledger WHERE key = 'op-1'), 'succeeded', '{}'), '$.members')
       = '[{"table":"orders","rowid":1}]';
SELECT 'untrusted-after-settle-refused', errmsg('INSERT INTO orders(tenant, op_key, claim_token, item) VALUES (''t1'', ''op-1'', (SELECT token FROM ledger WHERE key = ''op-1''), ''c'')')
       = 'idem_guard: insert into "orders" refused: key "op-1" needs a live claim of ledger ledger; it is succeeded';
SELECT 'untrusted-rows', (SELECT count(*) FROM orders) = 1;

-- a guard installed while the schema is untrusted works the same
CREATE TABLE notes(id INTEGER PRIMARY KEY, tenant, op_key, body);
SELECT 'untrusted-guard-install', idem_guard('ledger', 'notes', 'op_key', 'tenant') = 1;
PRAGMA writable_schema = RESET;
SELECT 'untrusted-notes-refused', errcode('INSERT INTO notes(tenant, op_key, body) VALUES (''t1'', ''op-2'', ''n'')') = 19;
SELECT idem_claim('ledger', 't1', 'c1', 'note', '{}', 'local', 'op-2');
SELECT 'untrusted-notes-accepted', errmsg('INSERT INTO notes(tenant, op_key, body) VALUES (''t1'', ''op-2'', ''n'')') IS NULL;
SELECT 'integrity', (SELECT group_concat(integrity_check) FROM pragma_integrity_check) = 'ok';
