-- ALTER TABLE <ledger> RENAME TO ...: the guards follow the ledger. The
-- triggers are recreated naming the new ledger, inserts are checked
-- against it, members and replays keep working, unguard and drop use the
-- new name.

CREATE VIRTUAL TABLE ledger USING idempotency(lease_seconds=60);
CREATE TABLE orders(id INTEGER PRIMARY KEY, tenant, op_key, claim_token, item);
CREATE TABLE "order lines"(id INTEGER PRIMARY KEY, tenant, op_key, n);
CREATE TRIGGER orders_user AFTER INSERT ON orders BEGIN SELECT 1; END;
SELECT idem_guard('ledger', 'orders', 'op_key', 'tenant', 'claim_token');
SELECT idem_guard('ledger', 'order lines', 'op_key', 'tenant');
-- a claim settled before the rename, replayed after it
SELECT idem_claim('ledger', 't1', 'c1', 'create_order', '{}', 'local', 'op-0');
INSERT INTO orders(tenant, op_key, claim_token, item) VALUES ('t1', 'op-0', (SELECT token FROM ledger WHERE key = 'op-0'), 'zero');
SELECT idem_settle('ledger', (SELECT token FROM ledger WHERE key = 'op-0'), 'succeeded', '{}');
-- a claim live across the rename
SELECT idem_claim('ledger', 't1', 'c1', 'create_order', '{"n":1}', 'local', 'op-1');
CREATE TEMP TABLE saved AS SELECT key, token FROM ledger;

ALTER TABLE ledger RENAME TO "books 2";
SELECT 'renamed', (SELECT count(*) FROM sqlite_schema WHERE name = 'books 2') = 1 AND (SELECT count(*) FROM sqlite_schema WHERE name = 'ledger') = 0;
SELECT 'old-triggers-gone', (SELECT count(*) FROM sqlite_schema WHERE type = 'trigger' AND name GLOB '*_idem_ledger_*') = 0;
SELECT 'new-trigger-names', (SELECT group_concat(name, ' ') FROM (SELECT name FROM sqlite_schema WHERE type = 'trigger' AND name GLOB '*_idem_*' ORDER BY name))
       = 'order lines_idem_books 2_insert order lines_idem_books 2_member order lines_idem_books 2_update orders_idem_books 2_insert orders_idem_books 2_member orders_idem_books 2_update';
SELECT 'new-insert-sql', (SELECT sql FROM sqlite_schema WHERE name = 'orders_idem_books 2_insert')
       = 'CREATE TRIGGER "orders_idem_books 2_insert" BEFORE INSERT ON "orders" BEGIN SELECT idem_guard_check(''books 2'', ''' || (SELECT v FROM "books 2_meta" WHERE k = 'id') || ''', ''orders'', NEW."tenant", NEW."op_key", NEW."claim_token"); END';
SELECT 'new-update-sql', (SELECT sql FROM sqlite_schema WHERE name = 'orders_idem_books 2_update')
       = 'CREATE TRIGGER "orders_idem_books 2_update" BEFORE UPDATE ON "orders" WHEN NEW.rowid IS NOT OLD.rowid OR NEW."op_key" IS NOT OLD."op_key" COLLATE BINARY OR NEW."tenant" IS NOT OLD."tenant" COLLATE BINARY OR NEW."claim_token" IS NOT OLD."claim_token" COLLATE BINARY BEGIN SELECT RAISE(ABORT, ''idem_guard: the rowid and the key, tenant and token columns of a guarded table cannot be updated''); END';
SELECT 'lines-insert-sql', (SELECT sql FROM sqlite_schema WHERE name = 'order lines_idem_books 2_insert')
       = 'CREATE TRIGGER "order lines_idem_books 2_insert" BEFORE INSERT ON "order lines" BEGIN SELECT idem_guard_check(''books 2'', ''' || (SELECT v FROM "books 2_meta" WHERE k = 'id') || ''', ''order lines'', NEW."tenant", NEW."op_key"); END';
SELECT 'user-trigger-kept', (SELECT count(*) FROM sqlite_schema WHERE name = 'orders_user') = 1;
SELECT 'guards-table-renamed', (SELECT count(*) FROM "books 2_guards") = 2;

-- the guard works against the renamed ledger
SELECT 'refused-names-new-ledger', errmsg('INSERT INTO orders(tenant, op_key, claim_token, item) VALUES (''t1'', ''op-9'', NULL, ''x'')')
       = 'idem_guard: insert into "orders" refused: key "op-9" needs a live claim of ledger books 2; there is no claim for it';
SELECT 'refused-code', errcode('INSERT INTO orders(tenant, op_key, claim_token, item) VALUES (''t1'', ''op-9'', NULL, ''x'')') = 19;
SELECT 'live-claim-survives-rename', errmsg('INSERT INTO orders(tenant, op_key, claim_token, item) VALUES (''t1'', ''op-1'', (SELECT token FROM saved WHERE key = ''op-1''), ''one'')') IS NULL;
SELECT 'wrong-token-after-rename', errcode('INSERT INTO orders(tenant, op_key, claim_token, item) VALUES (''t1'', ''op-1'', ''0123456789abcdef0123456789abcdef'', ''x'')') = 19;
SELECT 'lines-with-claim', errmsg('INSERT INTO "order lines"(tenant, op_key, n) VALUES (''t1'', ''op-1'', 1)') IS NULL;
SELECT 'update-still-frozen', errmsg('UPDATE orders SET op_key = ''op-5''') = 'idem_guard: the rowid and the key, tenant and token columns of a guarded table cannot be updated';
SELECT 'settle-members', json_extract(idem_settle('books 2', (SELECT token FROM saved WHERE key = 'op-1'), 'succeeded', '{}'), '$.members')
       = '[{"table":"orders","rowid":2},{"table":"order lines","rowid":1}]';
SELECT 'replay-from-before-rename', json_extract(idem_claim('books 2', 't1', 'c1', 'create_order', '{}', 'local', 'op-0'), '$.members') = '[{"table":"orders","rowid":1}]';
SELECT 'old-name-unknown', errmsg('SELECT idem_claim(''ledger'', ''t1'', ''c1'', ''create_order'', ''{}'', ''local'', ''op-0'')')
       = 'idem_claim: unknown ledger "ledger": no table USING idempotency by that name';
-- a new local claim after the rename records marks against the guards
SELECT 'claim-after-rename', json_extract(idem_claim('books 2', 't1', 'c1', 'create_order', '{"n":2}', 'local', 'op-2'), '$.decision') = 'admitted';
INSERT INTO orders(tenant, op_key, claim_token, item) VALUES ('t1', 'op-2', (SELECT token FROM "books 2" WHERE key = 'op-2'), 'two');
SELECT 'members-after-rename', json_extract(idem_settle('books 2', (SELECT token FROM "books 2" WHERE key = 'op-2'), 'succeeded', '{}'), '$.members') = '[{"table":"orders","rowid":3}]';

-- rename twice, then unguard and drop under the final name
ALTER TABLE "books 2" RENAME TO ledger3;
SELECT 'second-rename-triggers', (SELECT group_concat(name, ' ') FROM (SELECT name FROM sqlite_schema WHERE type = 'trigger' AND name GLOB '*_idem_*' ORDER BY name))
       = 'order lines_idem_ledger3_insert order lines_idem_ledger3_member order lines_idem_ledger3_update orders_idem_ledger3_insert orders_idem_ledger3_member orders_idem_ledger3_update';
SELECT 'second-rename-refuses', errmsg('INSERT INTO orders(tenant, op_key, claim_token, item) VALUES (''t1'', ''op-9'', NULL, ''x'')')
       = 'idem_guard: insert into "orders" refused: key "op-9" needs a live claim of ledger ledger3; there is no claim for it';
SELECT 'drop-refused-after-rename', errmsg('DROP TABLE ledger3') = 'constraint failed';
SELECT 'unguard-after-rename', idem_unguard('ledger3', 'orders') = 1 AND idem_unguard('ledger3', 'order lines') = 1;
SELECT 'no-guard-triggers-left', (SELECT count(*) FROM sqlite_schema WHERE type = 'trigger' AND name GLOB '*_idem_*') = 0;
SELECT 'drop-after-rename', errmsg('DROP TABLE ledger3') IS NULL;
SELECT 'dropped-all', (SELECT count(*) FROM sqlite_schema WHERE name GLOB 'ledger3*') = 0;
SELECT 'integrity', (SELECT group_concat(integrity_check) FROM pragma_integrity_check) = 'ok';
