-- idem_unguard removes exactly the guard's triggers (other triggers on the
-- table stay); after it, inserts need no claim. Unguarding an unguarded
-- table is an error. DROP TABLE of the ledger is refused while a guard
-- exists, and allowed after unguard once every row is terminal.

CREATE VIRTUAL TABLE ledger USING idempotency(lease_seconds=60);
CREATE TABLE orders(id INTEGER PRIMARY KEY, tenant, op_key, claim_token, item);
CREATE TABLE notes(id INTEGER PRIMARY KEY, tenant, op_key, body);
CREATE TABLE audit(what);
CREATE TRIGGER orders_before BEFORE INSERT ON orders BEGIN INSERT INTO audit VALUES ('before ' || NEW.item); END;
CREATE TRIGGER orders_after AFTER UPDATE ON orders BEGIN INSERT INTO audit VALUES ('update ' || NEW.item); END;
-- a user trigger whose name looks like a guard trigger of another ledger
CREATE TRIGGER orders_idem_other_insert BEFORE INSERT ON orders BEGIN INSERT INTO audit VALUES ('lookalike'); END;
SELECT idem_guard('ledger', 'orders', 'op_key', 'tenant', 'claim_token');
SELECT idem_guard('ledger', 'notes', 'op_key', 'tenant');
SELECT 'guarded', (SELECT count(*) FROM sqlite_schema WHERE type = 'trigger' AND tbl_name = 'orders') = 6;

-- DROP TABLE of the ledger: refused while guards exist (SQLite reports a
-- generic "constraint failed"), nothing dropped
SELECT 'drop-refused-guards', errmsg('DROP TABLE ledger') = 'constraint failed';
SELECT 'drop-refused-code', errcode('DROP TABLE ledger') & 255 = 19;
SELECT 'drop-refused-kept', (SELECT count(*) FROM sqlite_schema WHERE name IN ('ledger', 'ledger_rows', 'ledger_meta', 'ledger_guards')) = 4;
SELECT 'drop-refused-guard-still-works', errcode('INSERT INTO orders(tenant, op_key, item) VALUES (''t1'', ''op-1'', ''x'')') = 19;

-- unguard orders: exactly its two triggers go
SELECT 'unguard-returns-1', idem_unguard('ledger', 'orders') = 1;
SELECT 'unguard-exact-triggers', (SELECT group_concat(name, ' ') FROM (SELECT name FROM sqlite_schema WHERE type = 'trigger' AND tbl_name = 'orders' ORDER BY name))
       = 'orders_after orders_before orders_idem_other_insert';
SELECT 'unguard-other-guard-kept', (SELECT group_concat(name, ' ') FROM (SELECT name FROM sqlite_schema WHERE type = 'trigger' AND tbl_name = 'notes' ORDER BY name))
       = 'notes_idem_ledger_insert notes_idem_ledger_member notes_idem_ledger_update';
SELECT 'unguard-record-removed', (SELECT count(*) FROM ledger_guards WHERE tbl = 'orders') = 0 AND (SELECT count(*) FROM ledger_guards) = 1;
SELECT 'unguarded-insert-no-claim', errmsg('INSERT INTO orders(tenant, op_key, item) VALUES (''t1'', ''op-1'', ''free'')') IS NULL;
SELECT 'unguarded-insert-null-key', errmsg('INSERT INTO orders(tenant, op_key, item) VALUES (NULL, NULL, ''free2'')') IS NULL;
SELECT 'unguarded-update-key', errmsg('UPDATE orders SET op_key = ''op-2'' WHERE item = ''free''') IS NULL;
SELECT 'user-triggers-still-fire', (SELECT group_concat(what, ',') FROM audit) = 'lookalike,before free,lookalike,before free2,update free';
SELECT 'notes-still-guarded', errmsg('INSERT INTO notes(tenant, op_key, body) VALUES (''t1'', ''op-1'', ''n'')')
       = 'idem_guard: insert into "notes" refused: key "op-1" needs a live claim of ledger ledger; there is no claim for it';

-- unguard errors
SELECT 'unguard-twice', errmsg('SELECT idem_unguard(''ledger'', ''orders'')') = 'idem_unguard: table "orders" is not guarded by ledger ledger';
SELECT 'unguard-twice-code', errcode('SELECT idem_unguard(''ledger'', ''orders'')') = 1;
SELECT 'unguard-never-guarded', errmsg('SELECT idem_unguard(''ledger'', ''audit'')') = 'idem_unguard: table "audit" is not guarded by ledger ledger';
SELECT 'unguard-missing-table', errcode('SELECT idem_unguard(''ledger'', ''missing'')') <> 0;
SELECT 'unguard-unknown-ledger', errmsg('SELECT idem_unguard(''nope'', ''notes'')') = 'idem_unguard: unknown ledger "nope": no table USING idempotency by that name';
SELECT 'unguard-errors-changed-nothing', (SELECT count(*) FROM ledger_guards) = 1
   AND (SELECT count(*) FROM sqlite_schema WHERE type = 'trigger' AND tbl_name = 'notes') = 3
   AND (SELECT count(*) FROM sqlite_schema WHERE type = 'trigger' AND tbl_name = 'orders') = 3;
-- DIRECTONLY: a trigger cannot unguard
CREATE TABLE sneaky(x);
CREATE TRIGGER sneaky_unguard AFTER INSERT ON sneaky BEGIN SELECT idem_unguard('ledger', 'notes'); END;
SELECT 'unguard-directonly', errmsg('INSERT INTO sneaky VALUES (1)') = 'unsafe use of idem_unguard()';
DROP TRIGGER sneaky_unguard;
-- a guard can be installed again after unguard
SELECT 'reguard', idem_guard('ledger', 'orders', 'op_key', 'tenant') = 1
   AND errcode('INSERT INTO orders(tenant, op_key, item) VALUES (''t1'', ''op-3'', ''x'')') = 19;
SELECT 'unguard-again', idem_unguard('ledger', 'orders') = 1;

-- still one guard (notes): refused; a live claim too
SELECT idem_claim('ledger', 't1', 'c1', 'note', '{}', 'local', 'op-n');
SELECT 'drop-refused-one-guard', errmsg('DROP TABLE ledger') = 'constraint failed';
SELECT 'unguard-notes', idem_unguard('ledger', 'notes') = 1;
SELECT 'no-guards-left', (SELECT count(*) FROM sqlite_schema WHERE type = 'trigger' AND name GLOB '*_idem_ledger_*') = 0;
-- no guards, but a claimed row: still refused
SELECT 'drop-refused-claimed', errcode('DROP TABLE ledger') & 255 = 19 AND (SELECT count(*) FROM sqlite_schema WHERE name = 'ledger') = 1;
SELECT idem_settle('ledger', (SELECT token FROM ledger WHERE key = 'op-n'), 'succeeded', '{}');
-- all rows terminal, no guards: the drop goes through, shadow tables and all
SELECT 'drop-allowed', errmsg('DROP TABLE ledger') IS NULL;
SELECT 'drop-removed-all', (SELECT count(*) FROM sqlite_schema WHERE name GLOB 'ledger*') = 0;
SELECT 'tables-kept', (SELECT count(*) FROM orders) = 2 AND (SELECT count(*) FROM sqlite_schema WHERE type = 'trigger' AND tbl_name = 'orders') = 3;
