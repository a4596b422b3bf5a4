-- Guards outside the plain case: a ledger and its guarded table in an
-- attached schema (the guard must keep checking that ledger, also once a
-- ledger of the same name appears in main), and what happens to
-- local claims when a guarded table is dropped or renamed.

-- ==== an attached schema
ATTACH ':memory:' AS aux;
CREATE VIRTUAL TABLE aux.ledger USING idempotency(lease_seconds=60);
CREATE TABLE aux.orders(id INTEGER PRIMARY KEY, tenant, op_key, claim_token, item);
SELECT 'aux-guard', idem_guard('ledger', 'orders', 'op_key', 'tenant', 'claim_token') = 1;
SELECT 'aux-triggers-in-aux', (SELECT count(*) FROM aux.sqlite_schema WHERE type = 'trigger' AND name GLOB 'orders_idem_ledger_*') = 3
   AND (SELECT count(*) FROM main.sqlite_schema WHERE type = 'trigger' AND name GLOB '*_idem_*') = 0;
SELECT 'aux-refused', errmsg('INSERT INTO aux.orders(tenant, op_key, claim_token, item) VALUES (''t1'', ''op-1'', NULL, ''x'')')
       = 'idem_guard: insert into "orders" refused: key "op-1" needs a live claim of ledger ledger; there is no claim for it';
SELECT idem_claim('ledger', 't1', 'c1', 'create_order', '{}', 'local', 'op-1');
SELECT 'aux-accepted', errmsg('INSERT INTO aux.orders(tenant, op_key, claim_token, item) VALUES (''t1'', ''op-1'', (SELECT token FROM aux.ledger WHERE key = ''op-1''), ''a'')') IS NULL;
SELECT 'aux-members', json_extract(idem_settle('ledger', (SELECT token FROM aux.ledger WHERE key = 'op-1'), 'succeeded', '{}'), '$.members') = '[{"table":"orders","rowid":1}]';

-- a ledger of the same name now appears in main: the trigger in aux must
-- still check aux.ledger (an unqualified name in a trigger of schema aux
-- means aux's table), so a claim held in main.ledger admits nothing in aux
CREATE VIRTUAL TABLE main.ledger USING idempotency(lease_seconds=60);
SELECT json_extract(idem_claim('ledger', 't1', 'c1', 'create_order', '{"n":2}', 'local', 'op-2'), '$.decision');
SELECT 'main-claim-taken', (SELECT count(*) FROM main.ledger WHERE key = 'op-2') = 1 AND (SELECT count(*) FROM aux.ledger WHERE key = 'op-2') = 0;
SELECT 'shadowed-main-claim-does-not-admit-aux', errcode('INSERT INTO aux.orders(tenant, op_key, claim_token, item) VALUES (''t1'', ''op-2'', (SELECT token FROM main.ledger WHERE key = ''op-2''), ''wrong ledger'')') = 19;
SELECT 'shadowed-no-row', (SELECT count(*) FROM aux.orders WHERE op_key = 'op-2') = 0;
-- a settled key of aux.ledger stays settled for aux.orders whatever main holds
SELECT json_extract(idem_claim('ledger', 't1', 'c1', 'create_order', '{}', 'local', 'op-1'), '$.decision');
SELECT 'shadowed-settled-key-refused', errcode('INSERT INTO aux.orders(tenant, op_key, claim_token, item) VALUES (''t1'', ''op-1'', (SELECT token FROM main.ledger WHERE key = ''op-1''), ''again'')') = 19;
SELECT 'shadowed-aux-rows', (SELECT count(*) FROM aux.orders) = 1;

-- main's ledger is reached from outside by its qualified name: a claim
-- held in aux.ledger (claimed as 'aux.ledger') does not admit main's guard
CREATE TABLE main.notes(id INTEGER PRIMARY KEY, tenant, op_key, body);
SELECT 'qualified-guard-main', idem_guard('main.ledger', 'notes', 'op_key', 'tenant') = 1;
SELECT 'qualified-guard-main-triggers', (SELECT count(*) FROM main.sqlite_schema WHERE type = 'trigger' AND name GLOB 'notes_idem_ledger_*') = 3;
SELECT json_extract(idem_claim('aux.ledger', 't1', 'c1', 'note', '{}', 'local', 'op-n'), '$.decision');
SELECT 'aux-claim-taken', (SELECT count(*) FROM aux.ledger WHERE key = 'op-n') = 1 AND (SELECT count(*) FROM main.ledger WHERE key = 'op-n') = 0;
SELECT 'aux-claim-does-not-admit-main', errmsg('INSERT INTO main.notes(tenant, op_key, body) VALUES (''t1'', ''op-n'', ''wrong ledger'')')
       = 'idem_guard: insert into "notes" refused: key "op-n" needs a live claim of ledger ledger; there is no claim for it';
SELECT 'qualified-unguard-main', idem_unguard('"main"."ledger"', 'notes') = 1
       AND (SELECT count(*) FROM main.sqlite_schema WHERE type = 'trigger' AND name GLOB 'notes_idem_ledger_*') = 0;

-- ==== a guarded table dropped: the guard's record stays behind; local
-- claims must still work, or fail with an error that says what is wrong
CREATE VIRTUAL TABLE l2 USING idempotency(lease_seconds=60);
CREATE TABLE gone(id INTEGER PRIMARY KEY, tenant, op_key);
CREATE TABLE kept(id INTEGER PRIMARY KEY, tenant, op_key);
SELECT idem_guard('l2', 'gone', 'op_key', 'tenant');
SELECT idem_guard('l2', 'kept', 'op_key', 'tenant');
DROP TABLE gone;
SELECT 'dropped-external-claim-ok', errmsg('SELECT idem_claim(''l2'', ''t1'', ''c1'', ''send'', ''{}'', ''external'', ''op-e'')') IS NULL;
SELECT 'dropped-local-claim-clear', coalesce(errmsg('SELECT idem_claim(''l2'', ''t1'', ''c1'', ''create'', ''{}'', ''local'', ''op-d'')'), 'admitted') GLOB '*gone*'
    OR (SELECT count(*) FROM l2 WHERE key = 'op-d') = 1;
SELECT 'dropped-local-claim-not-garbage', coalesce(errmsg('SELECT idem_claim(''l2'', ''t1'', ''c1'', ''create'', ''{"n":2}'', ''local'', ''op-d2'')'), '') NOT GLOB '*not an error*';
SELECT 'dropped-unguard-cleans-up', errmsg('SELECT idem_unguard(''l2'', ''gone'')') IS NULL;
SELECT 'after-cleanup-local-claim', errmsg('SELECT idem_claim(''l2'', ''t1'', ''c1'', ''create'', ''{"n":3}'', ''local'', ''op-d3'')') IS NULL;

-- ==== a guarded table renamed: the guard follows it (as guards follow a
-- renamed ledger) and local claims keep working
CREATE VIRTUAL TABLE l3 USING idempotency(lease_seconds=60);
CREATE TABLE before_name(id INTEGER PRIMARY KEY, tenant, op_key);
SELECT idem_guard('l3', 'before_name', 'op_key', 'tenant');
ALTER TABLE before_name RENAME TO after_name;
SELECT 'renamed-still-refuses', errcode('INSERT INTO after_name(tenant, op_key) VALUES (''t1'', ''op-r'')') = 19;
SELECT 'renamed-local-claim', errmsg('SELECT idem_claim(''l3'', ''t1'', ''c1'', ''create'', ''{}'', ''local'', ''op-r'')') IS NULL;
SELECT 'renamed-insert-with-claim', errmsg('INSERT INTO after_name(tenant, op_key) VALUES (''t1'', ''op-r'')') IS NULL;
SELECT 'renamed-refusal-names-table', errmsg('INSERT INTO after_name(tenant, op_key) VALUES (''t1'', ''op-x'')')
       = 'idem_guard: insert into "after_name" refused: key "op-x" needs a live claim of ledger l3; there is no claim for it';
