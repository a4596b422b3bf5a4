-- Shadow tables without their CREATE VIRTUAL TABLE row (what the shell's
-- .clone leaves) are adopted by CREATE VIRTUAL TABLE: rows, identity,
-- options and guards kept; options given must match; a partial set is
-- refused. A ledger missing a shadow table refuses every operation with
-- a message naming it, and DROP TABLE removes it. The copy below is made
-- the way .clone makes it: tables and their rows first, then triggers.

SELECT sqltest_clock(1700000000000);
ATTACH ':memory:' AS src;
CREATE VIRTUAL TABLE src.L USING idempotency(lease_seconds=60, max_attempts=3, retention_seconds=3600);
CREATE TABLE src.orders(id INTEGER PRIMARY KEY, tenant, op_key, item);
SELECT idem_guard('src.L', 'orders', 'op_key', 'tenant');
SELECT json_extract(idem_claim('src.L', 't', 'c', 'order', '{"n":1}', 'local', 'k1'), '$.decision');
INSERT INTO src.orders(tenant, op_key, item) VALUES ('t', 'k1', 'book');
SELECT json_extract(idem_settle('src.L', (SELECT token FROM src.L WHERE key = 'k1'), 'succeeded', '{"id":1}'), '$.status');
SELECT json_extract(idem_claim('src.L', 't', 'c', 'send', '{}', 'external', 'k2'), '$.decision');
CREATE TEMP TABLE keep(name TEXT PRIMARY KEY, v);
INSERT INTO keep SELECT 'token-k2', token FROM src.L WHERE key = 'k2';
INSERT INTO keep SELECT 'id', v FROM src.L_meta WHERE k = 'id';

-- ---------------------------------------------------------------- the .clone copy into main
SELECT 'clone-tables', errmsg((SELECT group_concat(sql, ';') FROM src.sqlite_schema WHERE type = 'table' AND sql NOT LIKE 'CREATE VIRTUAL%')) IS NULL;
INSERT INTO main.L_rows SELECT * FROM src.L_rows;
INSERT INTO main.L_meta SELECT * FROM src.L_meta;
INSERT INTO main.L_guards SELECT * FROM src.L_guards;
INSERT INTO main.orders SELECT * FROM src.orders;
SELECT 'clone-triggers', errmsg((SELECT group_concat(sql, ';') FROM src.sqlite_schema WHERE type = 'trigger')) IS NULL;
DETACH src;
SELECT 'clone-orphaned', (SELECT count(*) FROM main.sqlite_schema WHERE name = 'L') = 0
       AND (SELECT count(*) FROM main.sqlite_schema WHERE name IN ('L_rows', 'L_meta', 'L_guards')) = 3;
SELECT 'orphan-unknown', errmsg('SELECT idem_claim(''main.L'', ''t'', ''c'', ''send'', ''{}'', ''external'', ''k2'')')
       = 'idem_claim: unknown ledger "main.L": no table USING idempotency by that name';
-- the guard's trigger came along and fails closed while the ledger is orphaned
SELECT 'orphan-guard-closed', errmsg('INSERT INTO main.orders(tenant, op_key, item) VALUES (''t'', ''k9'', ''x'')')
       = 'idem_guard: insert into "orders" refused: its guard names ledger L (' || (SELECT v FROM keep WHERE name = 'id') || '), which is not attached';

-- ---------------------------------------------------------------- adoption: options that differ are refused, nothing changes
SELECT 'adopt-option-differs', errmsg('CREATE VIRTUAL TABLE main.L USING idempotency(lease_seconds=300)')
       = 'idempotency: ledger L would adopt its existing shadow tables, made with lease_seconds=60, but CREATE gives lease_seconds=300; give the stored value or omit the option';
SELECT 'adopt-default-differs', errmsg('CREATE VIRTUAL TABLE main.L USING idempotency(lease_seconds=60, retention_seconds=0)')
       = 'idempotency: ledger L would adopt its existing shadow tables, made with retention_seconds=3600, but CREATE gives retention_seconds=0; give the stored value or omit the option';
SELECT 'adopt-refused-unchanged', (SELECT count(*) FROM main.sqlite_schema WHERE name = 'L') = 0 AND (SELECT count(*) FROM main.L_rows) = 2;
-- options equal to the stored ones (or omitted) adopt
CREATE VIRTUAL TABLE main.L USING idempotency(max_attempts=3, lease_seconds = 60);
SELECT 'adopted', (SELECT count(*) FROM main.sqlite_schema WHERE name = 'L' AND sql LIKE 'CREATE VIRTUAL TABLE%') = 1;
SELECT 'adopted-meta-kept', (SELECT group_concat(k || '=' || v, ',') FROM (SELECT k, v FROM main.L_meta ORDER BY k))
       = 'format=5,id=' || (SELECT v FROM keep WHERE name = 'id') || ',lease_seconds=60,max_args_bytes=1048576,max_attempts=3,require_transaction=0,retention_seconds=3600,single_tenant=0,target_window_seconds=86400';
SELECT 'adopted-rows', (SELECT group_concat(key || ':' || status, ',') FROM (SELECT key, status FROM main.L ORDER BY key)) = 'k1:succeeded,k2:claimed';
SELECT 'adopted-replay', json(json_extract(idem_claim('main.L', 't', 'c', 'order', '{"n":1}', 'local', 'k1'), '$.result')) = '{"id":1}';
SELECT 'adopted-in-progress', json_extract(idem_claim('main.L', 't', 'c', 'send', '{}', 'external', 'k2'), '$.decision') = 'in_progress';
SELECT 'adopted-token-settles', json_extract(idem_settle('main.L', (SELECT v FROM keep WHERE name = 'token-k2'), 'succeeded', NULL), '$.status') = 'succeeded';
SELECT 'adopted-lease-option', json_extract(idem_claim('main.L', 't', 'c', 'send', '{}', 'external', 'k3'), '$.lease_until') = 1700000060000;
-- the identity is kept, so the copied guard works again
SELECT json_extract(idem_claim('main.L', 't', 'c', 'order', '{"n":4}', 'local', 'k4'), '$.decision');
SELECT 'adopted-guard-admits', errmsg('INSERT INTO main.orders(tenant, op_key, item) VALUES (''t'', ''k4'', ''pen'')') IS NULL;
SELECT 'adopted-guard-refuses', errmsg('INSERT INTO main.orders(tenant, op_key, item) VALUES (''t'', ''k5'', ''x'')')
       = 'idem_guard: insert into "orders" refused: key "k5" needs a live claim of ledger L; there is no claim for it';
SELECT 'adopted-members', json_extract(idem_settle('main.L', (SELECT token FROM main.L WHERE key = 'k4'), 'succeeded', '{}'), '$.members') = '[{"table":"orders","rowid":2}]';
SELECT 'adopted-integrity', (SELECT integrity_check FROM pragma_integrity_check) = 'ok';

-- ---------------------------------------------------------------- adoption checks the meta like a connect
CREATE TABLE bad_rows(x);
CREATE TABLE bad_meta(k TEXT PRIMARY KEY NOT NULL, v NOT NULL) WITHOUT ROWID;
CREATE TABLE bad_guards(id INTEGER PRIMARY KEY);
INSERT INTO bad_meta VALUES ('format', 99), ('id', '0123456789abcdef');
SELECT 'adopt-format-refused', errmsg('CREATE VIRTUAL TABLE bad USING idempotency') = 'idempotency: ledger bad has format 99; this build reads format 5';
UPDATE bad_meta SET v = 1 WHERE k = 'format';
SELECT 'adopt-incomplete-refused', errmsg('CREATE VIRTUAL TABLE bad USING idempotency') = 'idempotency: ledger bad has no lease_seconds in bad_meta; it must be an integer from 0 to 31536000';
INSERT INTO bad_meta VALUES ('lease_seconds', 40000000), ('max_attempts', 5), ('max_args_bytes', 1000), ('single_tenant', 0);
SELECT 'adopt-range-refused', errmsg('CREATE VIRTUAL TABLE bad USING idempotency')
       = 'idempotency: ledger bad has lease_seconds = 40000000 in bad_meta; it must be an integer from 0 to 31536000';
SELECT 'adopt-refused-no-vtab', (SELECT count(*) FROM sqlite_schema WHERE name = 'bad') = 0;
-- a partial set is refused, naming what exists and what does not
CREATE TABLE part_rows(x);
CREATE TABLE part_guards(x);
SELECT 'adopt-partial', errmsg('CREATE VIRTUAL TABLE part USING idempotency')
       = 'idempotency: cannot create ledger part: its shadow tables part_rows, part_guards exist but table part_meta is missing; restore what is missing from a backup, or drop what is left to start an empty ledger';
SELECT 'adopt-partial-untouched', (SELECT count(*) FROM sqlite_schema WHERE name LIKE 'part%') = 2;

-- ---------------------------------------------------------------- a shadow table goes missing
CREATE VIRTUAL TABLE M USING idempotency;
SELECT json_extract(idem_claim('M', 't', 'c', 'x', '{}', 'local', 'm1'), '$.decision');
SELECT json_extract(idem_settle('M', (SELECT token FROM M), 'released', NULL), '$.status');
DROP TABLE M_guards;
SELECT 'missing-claim', errmsg('SELECT idem_claim(''M'', ''t'', ''c'', ''x'', ''{}'')')
       = 'idem_claim: ledger M is missing its shadow table M_guards; every operation on it is refused until that is restored from a backup and the database reopened, or the ledger is dropped with DROP TABLE';
SELECT 'missing-settle', errmsg('SELECT idem_settle(''M'', ''00000000000000000000000000000000'', ''failed'', NULL)')
       = 'idem_settle: ledger M is missing its shadow table M_guards; every operation on it is refused until that is restored from a backup and the database reopened, or the ledger is dropped with DROP TABLE';
SELECT 'missing-resolve', errmsg('SELECT idem_resolve(''M'', ''t'', ''m1'', ''failed'', NULL)')
       GLOB 'idem_resolve: ledger M is missing its shadow table M_guards; *';
SELECT 'missing-purge', errmsg('SELECT idem_purge(''M'', 0)') GLOB 'idem_purge: ledger M is missing its shadow table M_guards; *';
SELECT 'missing-select', errmsg('SELECT count(*) FROM M') GLOB 'idempotency: ledger M is missing its shadow table M_guards; *';
SELECT 'missing-insert', errmsg('INSERT INTO M(tenant, conversation, tool, args) VALUES (''t'', ''c'', ''x'', ''{}'')') GLOB 'idempotency: ledger M is missing its shadow table M_guards; *';
SELECT 'missing-delete', errmsg('DELETE FROM M') GLOB 'idempotency: ledger M is missing its shadow table M_guards; *';
CREATE TABLE m_items(id INTEGER PRIMARY KEY, tenant, op_key);
SELECT 'missing-guard-refused', errmsg('SELECT idem_guard(''M'', ''m_items'', ''op_key'', ''tenant'')')
       = 'idem_guard: ledger M is missing its shadow table M_guards; every operation on it is refused until that is restored from a backup and the database reopened, or the ledger is dropped with DROP TABLE';
SELECT 'missing-nothing-written', (SELECT count(*) FROM M_rows) = 1
       AND (SELECT count(*) FROM sqlite_schema WHERE name GLOB 'm_items_idem_*') = 0;
SELECT 'missing-drop', errmsg('DROP TABLE M') IS NULL;
SELECT 'missing-drop-gone', (SELECT count(*) FROM sqlite_schema WHERE name GLOB 'M*') = 0;
-- the rows table missing: every operation refused; DROP works (no row can be live)
CREATE VIRTUAL TABLE N USING idempotency;
CREATE TABLE n_items(id INTEGER PRIMARY KEY, tenant, op_key);
SELECT idem_guard('N', 'n_items', 'op_key', 'tenant');
SELECT json_extract(idem_claim('N', 't', 'c', 'x', '{}', 'local', 'n1'), '$.decision');
DROP TABLE N_rows;
-- the first thing to notice is a guarded insert: it fails closed, saying why
SELECT 'missing-rows-guarded-insert', errmsg('INSERT INTO n_items(tenant, op_key) VALUES (''t'', ''n1'')')
       = 'idem_guard: insert into "n_items" refused: key "n1" needs a live claim of ledger N; ledger N is missing its shadow table N_rows; every operation on it is refused until that is restored from a backup and the database reopened, or the ledger is dropped with DROP TABLE';
SELECT 'missing-rows-unguard', idem_unguard('N', 'n_items') = 1;
SELECT 'missing-rows-claim', errmsg('SELECT idem_claim(''N'', ''t'', ''c'', ''x'', ''{}'')') GLOB 'idem_claim: ledger N is missing its shadow table N_rows; *';
SELECT 'missing-rows-drop', errmsg('DROP TABLE N') IS NULL;
SELECT 'missing-rows-drop-gone', (SELECT count(*) FROM sqlite_schema WHERE name GLOB 'N*') = 0;
-- two missing, one of them holding a live claim's guard: DROP keeps its rule
CREATE VIRTUAL TABLE P USING idempotency;
CREATE TABLE p_items(id INTEGER PRIMARY KEY, tenant, op_key);
SELECT idem_guard('P', 'p_items', 'op_key', 'tenant');
SELECT json_extract(idem_claim('P', 't', 'c', 'x', '{}', 'local', 'p1'), '$.decision');
DROP TABLE P_meta;
SELECT 'missing-meta-noticed', errmsg('SELECT idem_claim(''P'', ''t'', ''c'', ''x'', ''{}'', ''local'', ''p1'')') GLOB 'idem_claim: ledger P is missing its shadow table P_meta; *';
SELECT 'missing-guard-check', errmsg('INSERT INTO p_items(tenant, op_key) VALUES (''t'', ''p1'')')
       GLOB 'idem_guard: insert into "p_items" refused: key "p1" needs a live claim of ledger P; ledger P is missing its shadow table P_meta; *';
SELECT 'missing-held-drop-refused', errcode('DROP TABLE P') = 19;
SELECT 'missing-held-drop-kept', (SELECT count(*) FROM sqlite_schema WHERE name IN ('P', 'P_rows', 'P_guards')) = 3;
DROP TABLE P_rows;
SELECT 'missing-two', errmsg('SELECT idem_claim(''P'', ''t'', ''c'', ''x'', ''{}'')')
       = 'idem_claim: ledger P is missing its shadow tables P_rows, P_meta; every operation on it is refused until that is restored from a backup and the database reopened, or the ledger is dropped with DROP TABLE';
SELECT 'missing-guards-left-drop-refused', errcode('DROP TABLE P') = 19;
SELECT 'missing-unguard', idem_unguard('P', 'p_items') = 1;
SELECT 'missing-unguard-then-drop', errmsg('DROP TABLE P') IS NULL;
SELECT 'missing-unguard-then-drop-gone', (SELECT group_concat(name) FROM sqlite_schema WHERE name GLOB 'P*' OR name GLOB 'p_items*') = 'p_items';
SELECT 'integrity', (SELECT integrity_check FROM pragma_integrity_check) = 'ok';
SELECT sqltest_clock(NULL);
