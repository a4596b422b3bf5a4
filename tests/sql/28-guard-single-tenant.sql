-- A single_tenant=1 ledger: keys are unique across the whole ledger, and a
-- guard may omit the tenant column (NULL tenant_column).

CREATE VIRTUAL TABLE solo USING idempotency(single_tenant=1, lease_seconds=60);
CREATE TABLE jobs(id INTEGER PRIMARY KEY, op_key, claim_token, payload);
CREATE TABLE steps(id INTEGER PRIMARY KEY, op_key, n);
SELECT 'guard-null-tenant', idem_guard('solo', 'jobs', 'op_key', NULL, 'claim_token') = 1;
SELECT 'guard-null-tenant-no-token', idem_guard('solo', 'steps', 'op_key', NULL) = 1;
SELECT 'guard-recorded', (SELECT count(*) FROM solo_guards WHERE tenant_column IS NULL) = 2;
SELECT 'insert-sql', (SELECT sql FROM sqlite_schema WHERE name = 'jobs_idem_solo_insert')
       = 'CREATE TRIGGER "jobs_idem_solo_insert" BEFORE INSERT ON "jobs" BEGIN SELECT idem_guard_check(''solo'', ''' || (SELECT v FROM "solo_meta" WHERE k = 'id') || ''', ''jobs'', NULL, NEW."op_key", NEW."claim_token"); END';
SELECT 'update-sql', (SELECT sql FROM sqlite_schema WHERE name = 'jobs_idem_solo_update')
       = 'CREATE TRIGGER "jobs_idem_solo_update" BEFORE UPDATE ON "jobs" WHEN NEW.rowid IS NOT OLD.rowid OR NEW."op_key" IS NOT OLD."op_key" COLLATE BINARY OR NEW."claim_token" IS NOT OLD."claim_token" COLLATE BINARY BEGIN SELECT RAISE(ABORT, ''idem_guard: the rowid and the key, tenant and token columns of a guarded table cannot be updated''); END';
SELECT 'steps-insert-sql', (SELECT sql FROM sqlite_schema WHERE name = 'steps_idem_solo_insert')
       = 'CREATE TRIGGER "steps_idem_solo_insert" BEFORE INSERT ON "steps" BEGIN SELECT idem_guard_check(''solo'', ''' || (SELECT v FROM "solo_meta" WHERE k = 'id') || ''', ''steps'', NULL, NEW."op_key"); END';

-- keys unique across the ledger: another tenant cannot claim a taken key
SELECT 'claim', json_extract(idem_claim('solo', 'me', 'c1', 'run_job', '{"j":1}', 'local', 'op-1'), '$.decision') = 'admitted';
-- (whether that is an error or a non-admitted decision, the key is not admitted twice)
SELECT errcode('SELECT idem_claim(''solo'', ''other'', ''c1'', ''run_job'', ''{"j":1}'', ''local'', ''op-1'')');
SELECT 'key-unique-across-tenants', (SELECT count(*) FROM solo WHERE tenant = 'other') = 0
   AND (SELECT count(*) FROM solo_rows) = 1;
SELECT 'one-row-for-key', (SELECT count(*) FROM solo WHERE key = 'op-1') = 1;

-- inserts: refused without a claim, accepted with it (no tenant column)
SELECT 'no-claim', errmsg('INSERT INTO jobs(op_key, claim_token, payload) VALUES (''op-9'', NULL, ''x'')')
       = 'idem_guard: insert into "jobs" refused: key "op-9" needs a live claim of ledger solo; there is no claim for it';
SELECT 'no-claim-code', errcode('INSERT INTO steps(op_key, n) VALUES (''op-9'', 1)') = 19;
SELECT 'null-key', errmsg('INSERT INTO steps(op_key, n) VALUES (NULL, 1)') = 'idem_guard: insert into "steps" needs a key; got NULL';
SELECT 'accepted', errmsg('INSERT INTO jobs(op_key, claim_token, payload) VALUES (''op-1'', (SELECT token FROM solo WHERE key = ''op-1''), ''p'')') IS NULL
   AND errmsg('INSERT INTO steps(op_key, n) VALUES (''op-1'', 1)') IS NULL
   AND errmsg('INSERT INTO steps(op_key, n) VALUES (''op-1'', 2)') IS NULL;
SELECT 'wrong-token', errmsg('INSERT INTO jobs(op_key, claim_token, payload) VALUES (''op-1'', ''0123456789abcdef0123456789abcdef'', ''p'')')
       = 'idem_guard: insert into "jobs" refused: key "op-1" needs a live claim of ledger solo; the row''s token is not the live claim''s token (a stale holder?)';
SELECT 'update-key-frozen', errmsg('UPDATE steps SET op_key = ''op-2''') = 'idem_guard: the rowid and the key, tenant and token columns of a guarded table cannot be updated';
SELECT 'update-other', errmsg('UPDATE steps SET n = n + 10') IS NULL;
SELECT 'members', json_extract(idem_settle('solo', (SELECT token FROM solo WHERE key = 'op-1'), 'succeeded', '{}'), '$.members')
       = '[{"table":"jobs","rowid":1},{"table":"steps","rowid":1},{"table":"steps","rowid":2}]';
SELECT 'replay', json_extract(idem_claim('solo', 'me', 'c1', 'run_job', '{"j":1}', 'local', 'op-1'), '$.members')
       = '[{"table":"jobs","rowid":1},{"table":"steps","rowid":1},{"table":"steps","rowid":2}]';
SELECT 'after-settle-refused', errmsg('INSERT INTO steps(op_key, n) VALUES (''op-1'', 3)')
       = 'idem_guard: insert into "steps" refused: key "op-1" needs a live claim of ledger solo; it is succeeded';

-- a single-tenant ledger may still be guarded with a tenant column
CREATE TABLE tagged(id INTEGER PRIMARY KEY, tenant, op_key);
SELECT 'guard-with-tenant-column', idem_guard('solo', 'tagged', 'op_key', 'tenant') = 1;
SELECT idem_claim('solo', 'me', 'c1', 'run_job', '{"j":2}', 'local', 'op-2');
SELECT 'tenant-column-accepted', errmsg('INSERT INTO tagged(tenant, op_key) VALUES (''me'', ''op-2'')') IS NULL;
SELECT 'tenant-column-other-tenant', errcode('INSERT INTO tagged(tenant, op_key) VALUES (''other'', ''op-2'')') = 19;

-- the NULL tenant_column is refused for a normal ledger (exact message)
CREATE VIRTUAL TABLE multi USING idempotency;
CREATE TABLE t(id INTEGER PRIMARY KEY, op_key);
SELECT 'multi-null-tenant-refused', errmsg('SELECT idem_guard(''multi'', ''t'', ''op_key'', NULL)')
       = 'idem_guard: tenant_column is NULL, but ledger multi was not created with single_tenant=1';
SELECT 'multi-null-tenant-code', errcode('SELECT idem_guard(''multi'', ''t'', ''op_key'', NULL)') = 1;
SELECT 'multi-nothing-installed', (SELECT count(*) FROM sqlite_schema WHERE type = 'trigger' AND tbl_name = 't') = 0;
