-- idem_guard: what it installs (three triggers, read back from sqlite_schema
-- and compared with the expected text), identifier quoting, every error,
-- and rows already present. Contract: docs/guards.md.

CREATE VIRTUAL TABLE ledger USING idempotency(lease_seconds=60);
CREATE TABLE orders(id INTEGER PRIMARY KEY, tenant, op_key, claim_token, item);
INSERT INTO orders(tenant, op_key, claim_token, item) VALUES ('t1', 'legacy-1', NULL, 'before the guard');
INSERT INTO orders(tenant, op_key, claim_token, item) VALUES (NULL, NULL, NULL, 'no key at all');
CREATE TABLE other_triggered(x);
CREATE TRIGGER orders_audit AFTER INSERT ON orders BEGIN INSERT INTO other_triggered VALUES (NEW.id); END;

SELECT 'guard-returns-1', idem_guard('ledger', 'orders', 'op_key', 'tenant', 'claim_token') = 1;

-- exactly three triggers, named after the table and the ledger
SELECT 'three-triggers', (SELECT count(*) FROM sqlite_schema WHERE type = 'trigger' AND tbl_name = 'orders' AND name <> 'orders_audit') = 3;
SELECT 'trigger-names', (SELECT group_concat(name, ' ') FROM (SELECT name FROM sqlite_schema WHERE type = 'trigger' AND tbl_name = 'orders' AND name <> 'orders_audit' ORDER BY name))
       = 'orders_idem_ledger_insert orders_idem_ledger_member orders_idem_ledger_update';
-- the member trigger records the row as a member of the claimed local claim
-- of its (tenant, key), compared with BINARY whatever the table declares
SELECT 'member-trigger-sql', (SELECT sql FROM sqlite_schema WHERE name = 'orders_idem_ledger_member')
       = 'CREATE TRIGGER "orders_idem_ledger_member" AFTER INSERT ON "orders" BEGIN SELECT idem_guard_member(''ledger'', ''' || (SELECT v FROM "ledger_meta" WHERE k = 'id') || ''', 1, NEW."tenant", NEW."op_key", NEW.rowid); END';
SELECT 'insert-trigger-sql', (SELECT sql FROM sqlite_schema WHERE name = 'orders_idem_ledger_insert')
       = 'CREATE TRIGGER "orders_idem_ledger_insert" BEFORE INSERT ON "orders" BEGIN SELECT idem_guard_check(''ledger'', ''' || (SELECT v FROM "ledger_meta" WHERE k = 'id') || ''', ''orders'', NEW."tenant", NEW."op_key", NEW."claim_token"); END';
SELECT 'update-trigger-sql', (SELECT sql FROM sqlite_schema WHERE name = 'orders_idem_ledger_update')
       = 'CREATE TRIGGER "orders_idem_ledger_update" BEFORE UPDATE ON "orders" WHEN NEW.rowid IS NOT OLD.rowid OR NEW."op_key" IS NOT OLD."op_key" COLLATE BINARY OR NEW."tenant" IS NOT OLD."tenant" COLLATE BINARY OR NEW."claim_token" IS NOT OLD."claim_token" COLLATE BINARY BEGIN SELECT RAISE(ABORT, ''idem_guard: the rowid and the key, tenant and token columns of a guarded table cannot be updated''); END';
SELECT 'foreign-trigger-kept', (SELECT count(*) FROM sqlite_schema WHERE name = 'orders_audit') = 1;
SELECT 'guard-recorded', (SELECT count(*) FROM ledger_guards WHERE tbl = 'orders' AND key_column = 'op_key' AND tenant_column = 'tenant' AND token_column = 'claim_token') = 1;

-- without a token column: the insert check takes four arguments, the update
-- trigger watches key and tenant only
CREATE TABLE notes(id INTEGER PRIMARY KEY, tenant, op_key, body);
SELECT 'guard-no-token', idem_guard('ledger', 'notes', 'op_key', 'tenant') = 1;
SELECT 'no-token-insert-sql', (SELECT sql FROM sqlite_schema WHERE name = 'notes_idem_ledger_insert')
       = 'CREATE TRIGGER "notes_idem_ledger_insert" BEFORE INSERT ON "notes" BEGIN SELECT idem_guard_check(''ledger'', ''' || (SELECT v FROM "ledger_meta" WHERE k = 'id') || ''', ''notes'', NEW."tenant", NEW."op_key"); END';
SELECT 'no-token-update-sql', (SELECT sql FROM sqlite_schema WHERE name = 'notes_idem_ledger_update')
       = 'CREATE TRIGGER "notes_idem_ledger_update" BEFORE UPDATE ON "notes" WHEN NEW.rowid IS NOT OLD.rowid OR NEW."op_key" IS NOT OLD."op_key" COLLATE BINARY OR NEW."tenant" IS NOT OLD."tenant" COLLATE BINARY BEGIN SELECT RAISE(ABORT, ''idem_guard: the rowid and the key, tenant and token columns of a guarded table cannot be updated''); END';

-- rows already present are left alone: not deleted, not checked, still updatable
SELECT 'existing-rows-kept', (SELECT count(*) FROM orders) = 2;
SELECT 'existing-row-unchanged', (SELECT item FROM orders WHERE op_key = 'legacy-1') = 'before the guard';
SELECT 'existing-row-other-column-updatable', errmsg('UPDATE orders SET item = ''edited'' WHERE op_key = ''legacy-1''') IS NULL;
SELECT 'existing-row-key-frozen', errmsg('UPDATE orders SET op_key = ''legacy-2'' WHERE op_key = ''legacy-1''')
       = 'idem_guard: the rowid and the key, tenant and token columns of a guarded table cannot be updated';
SELECT 'existing-row-deletable', errmsg('DELETE FROM orders WHERE op_key IS NULL') IS NULL AND (SELECT count(*) FROM orders) = 1;

-- quoted identifiers: table and column names with spaces, quotes and keywords
CREATE TABLE "order lines"(id INTEGER PRIMARY KEY, "the tenant", "op""key", "select", n);
CREATE TABLE "x""y"("from", "k ey", "t""ok");
CREATE TABLE "select"("where", "group", "order");
SELECT 'guard-spaces', idem_guard('ledger', 'order lines', 'op"key', 'the tenant', 'select') = 1;
SELECT 'guard-quote', idem_guard('ledger', 'x"y', 'k ey', 'from', 't"ok') = 1;
SELECT 'guard-keyword', idem_guard('ledger', 'select', 'group', 'where') = 1;
SELECT 'spaces-insert-sql', (SELECT sql FROM sqlite_schema WHERE name = 'order lines_idem_ledger_insert')
       = 'CREATE TRIGGER "order lines_idem_ledger_insert" BEFORE INSERT ON "order lines" BEGIN SELECT idem_guard_check(''ledger'', ''' || (SELECT v FROM "ledger_meta" WHERE k = 'id') || ''', ''order lines'', NEW."the tenant", NEW."op""key", NEW."select"); END';
SELECT 'spaces-update-sql', (SELECT sql FROM sqlite_schema WHERE name = 'order lines_idem_ledger_update')
       = 'CREATE TRIGGER "order lines_idem_ledger_update" BEFORE UPDATE ON "order lines" WHEN NEW.rowid IS NOT OLD.rowid OR NEW."op""key" IS NOT OLD."op""key" COLLATE BINARY OR NEW."the tenant" IS NOT OLD."the tenant" COLLATE BINARY OR NEW."select" IS NOT OLD."select" COLLATE BINARY BEGIN SELECT RAISE(ABORT, ''idem_guard: the rowid and the key, tenant and token columns of a guarded table cannot be updated''); END';
SELECT 'quote-insert-sql', (SELECT sql FROM sqlite_schema WHERE name = 'x"y_idem_ledger_insert')
       = 'CREATE TRIGGER "x""y_idem_ledger_insert" BEFORE INSERT ON "x""y" BEGIN SELECT idem_guard_check(''ledger'', ''' || (SELECT v FROM "ledger_meta" WHERE k = 'id') || ''', ''x"y'', NEW."from", NEW."k ey", NEW."t""ok"); END';
SELECT 'quote-update-sql', (SELECT sql FROM sqlite_schema WHERE name = 'x"y_idem_ledger_update')
       = 'CREATE TRIGGER "x""y_idem_ledger_update" BEFORE UPDATE ON "x""y" WHEN NEW.rowid IS NOT OLD.rowid OR NEW."k ey" IS NOT OLD."k ey" COLLATE BINARY OR NEW."from" IS NOT OLD."from" COLLATE BINARY OR NEW."t""ok" IS NOT OLD."t""ok" COLLATE BINARY BEGIN SELECT RAISE(ABORT, ''idem_guard: the rowid and the key, tenant and token columns of a guarded table cannot be updated''); END';
SELECT 'keyword-insert-sql', (SELECT sql FROM sqlite_schema WHERE name = 'select_idem_ledger_insert')
       = 'CREATE TRIGGER "select_idem_ledger_insert" BEFORE INSERT ON "select" BEGIN SELECT idem_guard_check(''ledger'', ''' || (SELECT v FROM "ledger_meta" WHERE k = 'id') || ''', ''select'', NEW."where", NEW."group"); END';
SELECT 'keyword-update-sql', (SELECT sql FROM sqlite_schema WHERE name = 'select_idem_ledger_update')
       = 'CREATE TRIGGER "select_idem_ledger_update" BEFORE UPDATE ON "select" WHEN NEW.rowid IS NOT OLD.rowid OR NEW."group" IS NOT OLD."group" COLLATE BINARY OR NEW."where" IS NOT OLD."where" COLLATE BINARY BEGIN SELECT RAISE(ABORT, ''idem_guard: the rowid and the key, tenant and token columns of a guarded table cannot be updated''); END';
-- the quoted guards work: refused without a claim, accepted with one
SELECT 'quoted-refused-without-claim', errmsg('INSERT INTO "order lines"("the tenant", "op""key", "select", n) VALUES (''t1'', ''op-q'', NULL, 1)')
       = 'idem_guard: insert into "order lines" refused: key "op-q" needs a live claim of ledger ledger; there is no claim for it';
SELECT 'quote-refused-message', errmsg('INSERT INTO "x""y" VALUES (''t1'', ''op-q'', NULL)')
       = 'idem_guard: insert into "x"y" refused: key "op-q" needs a live claim of ledger ledger; there is no claim for it';
SELECT idem_claim('ledger', 't1', 'c1', 'quoted', '{}', 'local', 'op-q');
SELECT 'quoted-accepted-with-claim',
       errmsg('INSERT INTO "order lines"("the tenant", "op""key", "select", n) VALUES (''t1'', ''op-q'', (SELECT token FROM ledger WHERE key = ''op-q''), 1)') IS NULL
   AND errmsg('INSERT INTO "x""y" VALUES (''t1'', ''op-q'', (SELECT token FROM ledger WHERE key = ''op-q''))') IS NULL
   AND errmsg('INSERT INTO "select" VALUES (''t1'', ''op-q'', 3)') IS NULL;
SELECT 'quoted-token-column-checked', errmsg('INSERT INTO "x""y" VALUES (''t1'', ''op-q'', ''0123456789abcdef0123456789abcdef'')')
       = 'idem_guard: insert into "x"y" refused: key "op-q" needs a live claim of ledger ledger; the row''s token is not the live claim''s token (a stale holder?)';
SELECT 'quoted-update-frozen', errmsg('UPDATE "order lines" SET "select" = ''x''')
       = 'idem_guard: the rowid and the key, tenant and token columns of a guarded table cannot be updated';
SELECT 'quoted-update-other-column', errmsg('UPDATE "order lines" SET n = 2') IS NULL;
SELECT 'quoted-members', json_extract(idem_settle('ledger', (SELECT token FROM ledger WHERE key = 'op-q'), 'succeeded', '{}'), '$.members')
       = '[{"table":"order lines","rowid":1},{"table":"x\"y","rowid":1},{"table":"select","rowid":1}]';

-- errors: each with its exact message and SQLITE_ERROR; nothing installed
CREATE TABLE plain(id INTEGER PRIMARY KEY, tenant, op_key, tok);
CREATE VIEW plain_view AS SELECT * FROM plain;
CREATE TABLE wr(a PRIMARY KEY, tenant, op_key) WITHOUT ROWID;
CREATE VIRTUAL TABLE other_ledger USING idempotency;
SELECT 'err-unknown-ledger', errmsg('SELECT idem_guard(''nope'', ''plain'', ''op_key'', ''tenant'')')
       = 'idem_guard: unknown ledger "nope": no table USING idempotency by that name';
SELECT 'err-unknown-ledger-code', errcode('SELECT idem_guard(''nope'', ''plain'', ''op_key'', ''tenant'')') = 1;
SELECT 'err-ledger-is-plain-table', errmsg('SELECT idem_guard(''plain'', ''orders'', ''op_key'', ''tenant'')')
       = 'idem_guard: unknown ledger "plain": no table USING idempotency by that name';
SELECT 'err-table-missing', errmsg('SELECT idem_guard(''ledger'', ''missing'', ''op_key'', ''tenant'')')
       = 'idem_guard: no table "missing" in schema main, the schema of ledger ledger';
SELECT 'err-table-missing-code', errcode('SELECT idem_guard(''ledger'', ''missing'', ''op_key'', ''tenant'')') = 1;
SELECT 'err-view', errmsg('SELECT idem_guard(''ledger'', ''plain_view'', ''op_key'', ''tenant'')')
       = 'idem_guard: "plain_view" is not a rowid table that can be guarded (a view)';
SELECT 'err-view-code', errcode('SELECT idem_guard(''ledger'', ''plain_view'', ''op_key'', ''tenant'')') = 1;
SELECT 'err-virtual-table', errmsg('SELECT idem_guard(''ledger'', ''other_ledger'', ''key'', ''tenant'')')
       = 'idem_guard: "other_ledger" is not a rowid table that can be guarded (a virtual table)';
SELECT 'err-the-ledger-itself', errmsg('SELECT idem_guard(''ledger'', ''ledger'', ''key'', ''tenant'')')
       = 'idem_guard: "ledger" is not a rowid table that can be guarded (a virtual table)';
SELECT 'err-without-rowid', errmsg('SELECT idem_guard(''ledger'', ''wr'', ''op_key'', ''tenant'')')
       = 'idem_guard: "wr" is not a rowid table that can be guarded (a WITHOUT ROWID table)';
SELECT 'err-shadow-rows', errmsg('SELECT idem_guard(''ledger'', ''ledger_rows'', ''key'', ''tenant'')')
       = 'idem_guard: "ledger_rows" is not a rowid table that can be guarded (a shadow table of the ledger)';
SELECT 'err-shadow-guards', errmsg('SELECT idem_guard(''ledger'', ''ledger_guards'', ''tbl'', ''key_column'')')
       = 'idem_guard: "ledger_guards" is not a rowid table that can be guarded (a shadow table of the ledger)';
SELECT 'err-missing-key-column', errmsg('SELECT idem_guard(''ledger'', ''plain'', ''nokey'', ''tenant'', ''tok'')')
       = 'idem_guard: table "plain" has no column "nokey" (key_column)';
SELECT 'err-missing-key-column-code', errcode('SELECT idem_guard(''ledger'', ''plain'', ''nokey'', ''tenant'', ''tok'')') = 1;
SELECT 'err-missing-tenant-column', errmsg('SELECT idem_guard(''ledger'', ''plain'', ''op_key'', ''notenant'', ''tok'')')
       = 'idem_guard: table "plain" has no column "notenant" (tenant_column)';
SELECT 'err-missing-token-column', errmsg('SELECT idem_guard(''ledger'', ''plain'', ''op_key'', ''tenant'', ''notok'')')
       = 'idem_guard: table "plain" has no column "notok" (token_column)';
SELECT 'err-null-tenant-column', errmsg('SELECT idem_guard(''ledger'', ''plain'', ''op_key'', NULL)')
       = 'idem_guard: tenant_column is NULL, but ledger ledger was not created with single_tenant=1';
SELECT 'err-null-tenant-column-code', errcode('SELECT idem_guard(''ledger'', ''plain'', ''op_key'', NULL, ''tok'')') = 1;
SELECT 'err-null-key-column', errmsg('SELECT idem_guard(''ledger'', ''plain'', NULL, ''tenant'')')
       = 'idem_guard: key_column must be a non-empty TEXT name';
SELECT 'err-empty-table-name', errmsg('SELECT idem_guard(''ledger'', '''', ''op_key'', ''tenant'')')
       = 'idem_guard: table must be a non-empty TEXT name';
SELECT 'errors-installed-nothing',
       (SELECT count(*) FROM sqlite_schema WHERE type = 'trigger' AND name GLOB '*_idem_*' AND tbl_name IN ('plain', 'plain_view', 'wr', 'other_ledger', 'ledger', 'ledger_rows', 'ledger_guards')) = 0
   AND (SELECT count(*) FROM ledger_guards WHERE tbl IN ('plain', 'plain_view', 'wr', 'other_ledger', 'ledger', 'ledger_rows', 'ledger_guards', 'missing')) = 0;

-- a user table whose name merely starts with the ledger's name is not a
-- shadow table (only ledger_rows, ledger_meta and ledger_guards are)
CREATE TABLE ledger_entries(id INTEGER PRIMARY KEY, tenant, op_key);
SELECT 'prefix-named-table-guardable', errmsg('SELECT idem_guard(''ledger'', ''ledger_entries'', ''op_key'', ''tenant'')') IS NULL;

-- guarding twice is an error and changes nothing
SELECT 'err-guard-twice', errmsg('SELECT idem_guard(''ledger'', ''orders'', ''op_key'', ''tenant'', ''claim_token'')')
       = 'idem_guard: table "orders" is already guarded by ledger ledger';
SELECT 'err-guard-twice-is-error', errcode('SELECT idem_guard(''ledger'', ''orders'', ''op_key'', ''tenant'')') <> 0;
SELECT 'err-guard-twice-other-case', errcode('SELECT idem_guard(''ledger'', ''ORDERS'', ''op_key'', ''tenant'')') <> 0;
SELECT 'guard-twice-changed-nothing',
       (SELECT count(*) FROM ledger_guards WHERE tbl LIKE 'orders') = 1
   AND (SELECT count(*) FROM sqlite_schema WHERE type = 'trigger' AND tbl_name LIKE 'orders') = 4
   AND (SELECT sql FROM sqlite_schema WHERE name = 'orders_idem_ledger_insert') LIKE '%NEW."claim_token"); END';
-- DIRECTONLY: a trigger cannot install a guard
CREATE TABLE sneaky(x);
CREATE TRIGGER sneaky_guard AFTER INSERT ON sneaky BEGIN SELECT idem_guard('ledger', 'plain', 'op_key', 'tenant'); END;
SELECT 'guard-directonly', errmsg('INSERT INTO sneaky VALUES (1)') = 'unsafe use of idem_guard()';
