-- sqltest: file
-- The pure functions in schemas: CHECK constraints, expression indexes,
-- generated columns, views and triggers, also with PRAGMA
-- trusted_schema=OFF (allowed because they are INNOCUOUS). The helpers
-- errmsg()/errcode() of the test runner are neither deterministic nor
-- innocuous and serve as the control. This file runs on a database file.

CREATE TABLE ops(
  tenant       CHECK (idem_valid_key(tenant)),
  conversation CHECK (idem_valid_key(conversation)),
  tool         CHECK (idem_check_key(tool, 'tool') IS tool),
  args TEXT NOT NULL CHECK (args = idem_canonical(args)),
  key TEXT GENERATED ALWAYS AS (idem_key(tenant, conversation, tool, args)) STORED,
  fp TEXT GENERATED ALWAYS AS (idem_fingerprint(args)) VIRTUAL,
  UNIQUE (tenant, key)
);
CREATE INDEX ops_fp ON ops(idem_fingerprint(args));
CREATE UNIQUE INDEX ops_call ON ops(idem_key(tenant, conversation, tool, args));
CREATE VIEW op_keys AS SELECT tenant, idem_key(tenant, conversation, tool, args) AS k FROM ops;
CREATE VIEW control_view AS SELECT errmsg('SELECT 1') AS e;
CREATE TABLE audit(k TEXT, ok INTEGER);
CREATE TRIGGER ops_audit AFTER INSERT ON ops BEGIN
  INSERT INTO audit VALUES (NEW.key, idem_valid_key(NEW.key));
END;
CREATE TRIGGER ops_control AFTER DELETE ON ops BEGIN
  INSERT INTO audit VALUES (errmsg('SELECT 1'), 0);
END;

SELECT 'schema-created', (SELECT count(*) FROM sqlite_schema WHERE name IN ('ops', 'ops_fp', 'ops_call', 'op_keys')) = 4;
SELECT 'non-deterministic-refused-in-index',
       errmsg('CREATE INDEX bad_ix ON ops(errmsg(args))') = 'non-deterministic functions prohibited in index expressions';

-- every following check runs with the schema untrusted
PRAGMA trusted_schema = OFF;
SELECT 'trusted-schema-off', (SELECT trusted_schema FROM pragma_trusted_schema) = 0;
-- reload the schema from the file, so that every expression in it is
-- parsed as coming from the database file (as after a reopen)
PRAGMA writable_schema = RESET;
SELECT 'schema-reloaded', (SELECT count(*) FROM sqlite_schema WHERE name = 'ops') = 1;

INSERT INTO ops(tenant, conversation, tool, args) VALUES ('acme', 'c1', 'create_invoice', '{"amount":100,"currency":"EUR"}');
SELECT 'insert-under-untrusted-schema', (SELECT count(*) FROM ops) = 1;
SELECT 'generated-key', (SELECT key FROM ops) = 'idem1-a8a9453d8f144e342fc26aeadab2f710';
SELECT 'generated-fingerprint', (SELECT fp FROM ops) = idem_fingerprint('{"currency":"EUR","amount":100}');
SELECT 'trigger-ran', (SELECT count(*) FROM audit WHERE ok = 1 AND k = 'idem1-a8a9453d8f144e342fc26aeadab2f710') = 1;
SELECT 'view-under-untrusted-schema', (SELECT k FROM op_keys) = 'idem1-a8a9453d8f144e342fc26aeadab2f710';
SELECT 'control-view-refused', errmsg('SELECT * FROM control_view') = 'unsafe use of errmsg()';
SELECT 'control-trigger-refused', errmsg('DELETE FROM ops') = 'unsafe use of errmsg()';
SELECT 'control-trigger-kept-row', (SELECT count(*) FROM ops) = 1;

-- CHECK constraints refuse what the grammar refuses. In ops the generated
-- key column is computed before the CHECKs run, so idem_key's own error
-- (SQLITE_CONSTRAINT, naming the part) comes first.
SELECT 'generated-first-tenant-null', errmsg('INSERT INTO ops(tenant, conversation, tool, args) VALUES (NULL, ''c1'', ''t'', ''{}'')')
       = 'idem_key: tenant is missing (NULL)';
SELECT 'generated-first-code', errcode('INSERT INTO ops(tenant, conversation, tool, args) VALUES (NULL, ''c1'', ''t'', ''{}'')') = 19;
SELECT 'generated-first-args', errmsg('INSERT INTO ops(tenant, conversation, tool, args) VALUES (''acme'', ''c1'', ''t'', ''[1,]'')')
       = 'idem_key: args: not valid JSON: unexpected byte 0x5d at byte 3, expected a JSON value';
SELECT 'check-args-not-canonical', errcode('INSERT INTO ops(tenant, conversation, tool, args) VALUES (''acme'', ''c1'', ''t'', ''{ }'')') = 275;
CREATE TABLE parts(
  tenant       CHECK (idem_valid_key(tenant)),
  conversation CHECK (idem_valid_key(conversation)),
  tool         CHECK (idem_check_key(tool, 'tool') IS tool)
);
SELECT 'check-tenant-null', errmsg('INSERT INTO parts VALUES (NULL, ''c1'', ''t'')') = 'CHECK constraint failed: idem_valid_key(tenant)';
SELECT 'check-tenant-null-code', errcode('INSERT INTO parts VALUES (NULL, ''c1'', ''t'')') = 275;
SELECT 'check-conversation-blank', errmsg('INSERT INTO parts VALUES (''acme'', '' '', ''t'')') = 'CHECK constraint failed: idem_valid_key(conversation)';
SELECT 'check-conversation-integer', errcode('INSERT INTO parts VALUES (''acme'', 7, ''t'')') = 275;
SELECT 'check-conversation-nul', errcode('INSERT INTO parts VALUES (''acme'', ''c'' || char(0), ''t'')') = 275;
SELECT 'check-tool-message', errmsg('INSERT INTO parts VALUES (''acme'', ''c1'', ''t:x'')')
       = 'idem_check_key: tool "t:x" has byte 0x3a at offset 1; only A-Z a-z 0-9 _ - are allowed';
SELECT 'check-tool-code', errcode('INSERT INTO parts VALUES (''acme'', ''c1'', NULL)') = 19;
SELECT 'check-accepts', errmsg('INSERT INTO parts VALUES (''acme'', ''c1'', ''t'')') IS NULL;
SELECT 'check-one-row', (SELECT count(*) FROM parts) = 1;

-- the generated key and the expression index refuse a second spelling of one call
SELECT 'duplicate-call-refused', errmsg('INSERT INTO ops(tenant, conversation, tool, args) VALUES (''acme'', ''c1'', ''create_invoice'', idem_canonical(''{"currency":"EUR","amount":100.0}''))')
       GLOB 'UNIQUE constraint failed: *';
SELECT 'duplicate-call-code', errcode('INSERT INTO ops(tenant, conversation, tool, args) VALUES (''acme'', ''c1'', ''create_invoice'', ''{"amount":100,"currency":"EUR"}'')') = 2067;
SELECT 'other-tenant-accepted', errmsg('INSERT INTO ops(tenant, conversation, tool, args) VALUES (''umbrella'', ''c1'', ''create_invoice'', ''{"amount":100,"currency":"EUR"}'')') IS NULL;
SELECT 'other-conversation-accepted', errmsg('INSERT INTO ops(tenant, conversation, tool, args) VALUES (''acme'', ''c2'', ''create_invoice'', ''{"amount":100,"currency":"EUR"}'')') IS NULL;
SELECT 'rows-now', (SELECT count(*) FROM ops) = 3;
SELECT 'generated-matches-function', (SELECT count(*) FROM ops WHERE key = idem_key(tenant, conversation, tool, args)) = 3;

-- the expression indexes are used and consistent
SELECT 'index-lookup-fp', (SELECT count(*) FROM ops INDEXED BY ops_fp WHERE idem_fingerprint(args) = idem_fingerprint('{"currency":"EUR","amount":100}')) = 3;
SELECT 'index-lookup-key', (SELECT tenant FROM ops INDEXED BY ops_call WHERE idem_key(tenant, conversation, tool, args) = 'idem1-a8a9453d8f144e342fc26aeadab2f710') = 'acme';
SELECT 'integrity-check', (SELECT group_concat(integrity_check) FROM pragma_integrity_check) = 'ok';
SELECT 'quick-check', (SELECT group_concat(quick_check) FROM pragma_quick_check) = 'ok';
REINDEX ops;
SELECT 'reindex-ok', (SELECT group_concat(integrity_check) FROM pragma_integrity_check) = 'ok';

-- results are deterministic across calls and rows
SELECT 'deterministic-across-rows', (SELECT count(DISTINCT idem_fingerprint(args)) FROM ops) = 1;

-- Controls: the same kinds of schema object built on sqltest_risky(), which
-- is deterministic but not innocuous. Trusted, they work; untrusted, the
-- schema no longer loads. Each is created, checked and dropped in turn.
PRAGMA trusted_schema = ON;
CREATE TABLE control_check(x CHECK (sqltest_risky(x) IS x));
SELECT 'control-check-trusted', errmsg('INSERT INTO control_check VALUES (1)') IS NULL;
PRAGMA trusted_schema = OFF;
PRAGMA writable_schema = RESET;
SELECT 'control-check-refused', errmsg('SELECT * FROM ops') = 'malformed database schema (control_check) - unsafe use of sqltest_risky()';
PRAGMA trusted_schema = ON;
PRAGMA writable_schema = RESET;
DROP TABLE control_check;

CREATE TABLE control_gen(x, y AS (sqltest_risky(x)));
SELECT 'control-gen-trusted', errmsg('INSERT INTO control_gen(x) VALUES (1)') IS NULL;
PRAGMA trusted_schema = OFF;
PRAGMA writable_schema = RESET;
SELECT 'control-gen-refused', errmsg('INSERT INTO control_gen(x) VALUES (2)') GLOB '*unsafe use of sqltest_risky()';
PRAGMA trusted_schema = ON;
PRAGMA writable_schema = RESET;
DROP TABLE control_gen;

CREATE TABLE control_idx(x);
CREATE INDEX control_idx_x ON control_idx(sqltest_risky(x));
SELECT 'control-idx-trusted', errmsg('INSERT INTO control_idx VALUES (1)') IS NULL;
PRAGMA trusted_schema = OFF;
PRAGMA writable_schema = RESET;
SELECT 'control-idx-refused', errmsg('INSERT INTO control_idx VALUES (2)') GLOB '*unsafe use of sqltest_risky()';
PRAGMA trusted_schema = ON;
PRAGMA writable_schema = RESET;
DROP TABLE control_idx;

-- and with the controls gone, the untrusted schema loads again
PRAGMA trusted_schema = OFF;
PRAGMA writable_schema = RESET;
SELECT 'untrusted-again', CASE WHEN (SELECT count(*) FROM ops) = 3
   THEN errmsg('INSERT INTO ops(tenant, conversation, tool, args) VALUES (''acme'', ''c3'', ''t'', ''{}'')') IS NULL ELSE 0 END;
