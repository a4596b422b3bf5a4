-- CREATE VIRTUAL TABLE ... USING idempotency: the closed list of options,
-- their defaults (read back from <name>_meta), bounds and exact errors, and
-- the shadow tables with their format row.

CREATE VIRTUAL TABLE L USING idempotency;

-- shadow tables and triggers exist
SELECT 'shadow-rows', (SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'L_rows') = 1;
SELECT 'shadow-meta', (SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'L_meta') = 1;
SELECT 'shadow-guards', (SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'L_guards') = 1;
SELECT 'shadow-trigger-update', (SELECT count(*) FROM sqlite_schema WHERE type = 'trigger' AND name = 'L_rows_update' AND tbl_name = 'L_rows') = 1;
SELECT 'shadow-trigger-delete', (SELECT count(*) FROM sqlite_schema WHERE type = 'trigger' AND name = 'L_rows_delete' AND tbl_name = 'L_rows') = 1;
SELECT 'vtab-entry', (SELECT sql FROM sqlite_schema WHERE name = 'L') LIKE 'CREATE VIRTUAL TABLE L USING idempotency%';
-- the ledger, five tables and seventeen own triggers (rows: insert,
-- update, delete, forget, targets; meta, guards, members and targets:
-- insert, update, delete), the partial index of open rows and the index
-- of targets, named by the identity
SELECT 'no-other-objects', (SELECT count(*) FROM sqlite_schema WHERE name LIKE 'L%' AND name NOT LIKE 'sqlite_autoindex_%') = 23;
SELECT 'targets-index', (SELECT count(*) FROM sqlite_schema WHERE type = 'index' AND tbl_name = 'L_targets'
       AND name = 'idem_' || (SELECT v FROM L_meta WHERE k = 'id') || '_targets' AND sql LIKE '%(tenant,target)') = 1;
SELECT 'targets-columns', (SELECT group_concat(name, ',') FROM pragma_table_info('L_targets')) = 'claim,target,tenant,allowed_by,allowed_at,overrode';
SELECT 'open-index', (SELECT count(*) FROM sqlite_schema WHERE type = 'index' AND tbl_name = 'L_rows'
       AND name = 'idem_' || (SELECT v FROM L_meta WHERE k = 'id') || '_open' AND sql LIKE '%WHERE status=''claimed'' OR status=''unknown''') = 1;
SELECT 'members-columns', (SELECT group_concat(name, ',') FROM pragma_table_info('L_members')) = 'claim,attempt,guard,rid';
SELECT 'own-trigger-names', (SELECT group_concat(name, ',') FROM (SELECT name FROM sqlite_schema WHERE type = 'trigger' AND name LIKE 'L\_%' ESCAPE '\' ORDER BY name))
       = 'L_guards_delete,L_guards_insert,L_guards_update,L_members_delete,L_members_insert,L_members_update,L_meta_delete,L_meta_insert,L_meta_update,L_rows_delete,L_rows_forget,L_rows_insert,L_rows_targets,L_rows_update,L_targets_delete,L_targets_insert,L_targets_update';
SELECT 'meta-is-without-rowid', (SELECT sql FROM sqlite_schema WHERE name = 'L_meta') LIKE '%WITHOUT ROWID%';
-- the rows table checks only what describes the file (NOT NULL, the effect
-- and status domains): the key grammar and the types are the extension's
SELECT 'rows-checks', (SELECT sql FROM sqlite_schema WHERE name = 'L_rows')
       = 'CREATE TABLE "L_rows"(id INTEGER PRIMARY KEY,tenant NOT NULL,"key" NOT NULL,conversation NOT NULL,tool NOT NULL,args NOT NULL,effect NOT NULL CHECK(effect=''local'' OR effect=''external''),status NOT NULL CHECK(status=''claimed'' OR status=''succeeded'' OR status=''failed'' OR status=''released'' OR status=''unknown''),result,error,attempt INTEGER NOT NULL,token INTEGER NOT NULL,created_at INTEGER NOT NULL,updated_at INTEGER NOT NULL,lease_until INTEGER NOT NULL,members,expirations INTEGER NOT NULL DEFAULT 0,UNIQUE(tenant,"key"))';
SELECT 'rows-unique-tenant-key', (SELECT sql FROM sqlite_schema WHERE name = 'L_rows') LIKE '%UNIQUE(tenant,"key")%';
-- the one extension function the ledger's tables call is idem_own_write()
-- (in every trigger that refuses a write the extension did not make)
SELECT 'rows-one-extension-function', (SELECT group_concat(DISTINCT f.name) FROM sqlite_schema AS s, pragma_function_list AS f
       WHERE s.tbl_name IN ('L_rows', 'L_meta', 'L_guards', 'L_members', 'L_targets') AND f.name LIKE 'idem%' AND instr(s.sql, f.name || '(') > 0) = 'idem_own_write';
-- innocuous (0x200000: it runs under trusted_schema=OFF), not deterministic (0x800)
SELECT 'own-write-flags', (SELECT group_concat(narg || ':' || (flags & 0x200000 <> 0) || (flags & 0x800 <> 0), ',') FROM pragma_function_list WHERE name = 'idem_own_write') = '0:10';
SELECT 'own-write-outside', idem_own_write() = 0;
SELECT 'rows-empty', (SELECT count(*) FROM L_rows) = 0;
SELECT 'guards-empty', (SELECT count(*) FROM L_guards) = 0;
SELECT 'ledger-empty', (SELECT count(*) FROM L) = 0;
SELECT 'integrity-ok', (SELECT integrity_check FROM pragma_integrity_check) = 'ok';

-- the columns of the ledger table
SELECT 'vtab-columns', (SELECT group_concat(name, ',') FROM pragma_table_xinfo('L'))
       = 'tenant,key,conversation,tool,args,effect,status,result,error,attempt,token,created_at,updated_at,lease_until,members';
SELECT 'rows-columns', (SELECT group_concat(name, ',') FROM pragma_table_info('L_rows'))
       = 'id,tenant,key,conversation,tool,args,effect,status,result,error,attempt,token,created_at,updated_at,lease_until,members,expirations';
SELECT 'guards-columns', (SELECT group_concat(name, ',') FROM pragma_table_info('L_guards')) = 'id,tbl,key_column,tenant_column,token_column';

-- defaults, read back from L_meta
SELECT 'meta-row-count', (SELECT count(*) FROM L_meta) = 9;
SELECT 'meta-id', (SELECT length(v) = 16 AND v NOT GLOB '*[^0-9a-f]*' FROM L_meta WHERE k = 'id');
SELECT 'meta-format', (SELECT v FROM L_meta WHERE k = 'format') = 5;
SELECT 'meta-format-integer', (SELECT typeof(v) FROM L_meta WHERE k = 'format') = 'integer';
SELECT 'default-lease', (SELECT v FROM L_meta WHERE k = 'lease_seconds') = 300;
SELECT 'default-attempts', (SELECT v FROM L_meta WHERE k = 'max_attempts') = 5;
SELECT 'default-args-bytes', (SELECT v FROM L_meta WHERE k = 'max_args_bytes') = 1048576;
SELECT 'default-single-tenant', (SELECT v FROM L_meta WHERE k = 'single_tenant') = 0;
SELECT 'default-retention', (SELECT v FROM L_meta WHERE k = 'retention_seconds') = 0;
SELECT 'default-require-transaction', (SELECT v FROM L_meta WHERE k = 'require_transaction') = 0;
SELECT 'default-target-window', (SELECT v FROM L_meta WHERE k = 'target_window_seconds') = 86400;
SELECT 'meta-keys', (SELECT group_concat(k, ',') FROM (SELECT k FROM L_meta ORDER BY k))
       = 'format,id,lease_seconds,max_args_bytes,max_attempts,require_transaction,retention_seconds,single_tenant,target_window_seconds';

-- the default lease is 300 s: lease_until - created_at
SELECT sqltest_clock(1700000000000);
SELECT 'default-lease-applied',
       json_extract(idem_claim('L', 't', 'c', 'tool', '{}'), '$.lease_until') = 1700000000000 + 300000;
SELECT 'default-lease-row', (SELECT lease_until - created_at FROM L) = 300000;
SELECT sqltest_clock(NULL);

-- empty parentheses: same as no options
CREATE VIRTUAL TABLE E USING idempotency();
SELECT 'empty-parens-defaults', (SELECT group_concat(k || '=' || v, ',') FROM (SELECT k, v FROM E_meta WHERE k <> 'id' ORDER BY k))
       = 'format=5,lease_seconds=300,max_args_bytes=1048576,max_attempts=5,require_transaction=0,retention_seconds=0,single_tenant=0,target_window_seconds=86400';

-- every option at its bounds
CREATE VIRTUAL TABLE lo USING idempotency(lease_seconds=0, max_attempts=1, max_args_bytes=2, single_tenant=0, retention_seconds=0, require_transaction=0, target_window_seconds=0);
SELECT 'lower-bounds', (SELECT group_concat(k || '=' || v, ',') FROM (SELECT k, v FROM lo_meta WHERE k <> 'id' ORDER BY k))
       = 'format=5,lease_seconds=0,max_args_bytes=2,max_attempts=1,require_transaction=0,retention_seconds=0,single_tenant=0,target_window_seconds=0';
CREATE VIRTUAL TABLE hi USING idempotency(lease_seconds=31536000, max_attempts=1000, max_args_bytes=16777216, single_tenant=1, retention_seconds=315360000, require_transaction=1, target_window_seconds=315360000);
SELECT 'upper-bounds', (SELECT group_concat(k || '=' || v, ',') FROM (SELECT k, v FROM hi_meta WHERE k <> 'id' ORDER BY k))
       = 'format=5,lease_seconds=31536000,max_args_bytes=16777216,max_attempts=1000,require_transaction=1,retention_seconds=315360000,single_tenant=1,target_window_seconds=315360000';
SELECT 'upper-bounds-integers', (SELECT count(*) FROM hi_meta WHERE k <> 'id' AND typeof(v) <> 'integer') = 0;
SELECT 'single-tenant-unique-key-index', (SELECT count(*) FROM sqlite_schema WHERE type = 'index' AND tbl_name = 'hi_rows' AND sql LIKE 'CREATE UNIQUE INDEX%') = 1;
SELECT 'multi-tenant-no-key-index', (SELECT count(*) FROM sqlite_schema WHERE type = 'index' AND tbl_name = 'L_rows' AND sql IS NOT NULL AND name NOT LIKE '%\_open' ESCAPE '\') = 0;
-- order of options does not matter; whitespace around '=' is tolerated
CREATE VIRTUAL TABLE ord USING idempotency(single_tenant=1, max_args_bytes=100, lease_seconds=7, max_attempts=3);
SELECT 'any-order', (SELECT group_concat(k || '=' || v, ',') FROM (SELECT k, v FROM ord_meta WHERE k <> 'id' ORDER BY k))
       = 'format=5,lease_seconds=7,max_args_bytes=100,max_attempts=3,require_transaction=0,retention_seconds=0,single_tenant=1,target_window_seconds=86400';
CREATE VIRTUAL TABLE one USING idempotency(max_attempts=2);
SELECT 'one-option-rest-default', (SELECT group_concat(k || '=' || v, ',') FROM (SELECT k, v FROM one_meta WHERE k <> 'id' ORDER BY k))
       = 'format=5,lease_seconds=300,max_args_bytes=1048576,max_attempts=2,require_transaction=0,retention_seconds=0,single_tenant=0,target_window_seconds=86400';

-- out of range, each bound
SELECT 'lease-below', errmsg('CREATE VIRTUAL TABLE x1 USING idempotency(lease_seconds=-1)')
       = 'idempotency: lease_seconds must be an integer from 0 to 31536000, got "-1"';
SELECT 'lease-above', errmsg('CREATE VIRTUAL TABLE x1 USING idempotency(lease_seconds=31536001)')
       = 'idempotency: lease_seconds must be an integer from 0 to 31536000, got "31536001"';
SELECT 'attempts-below', errmsg('CREATE VIRTUAL TABLE x1 USING idempotency(max_attempts=0)')
       = 'idempotency: max_attempts must be an integer from 1 to 1000, got "0"';
SELECT 'attempts-above', errmsg('CREATE VIRTUAL TABLE x1 USING idempotency(max_attempts=1001)')
       = 'idempotency: max_attempts must be an integer from 1 to 1000, got "1001"';
SELECT 'retention-below', errmsg('CREATE VIRTUAL TABLE x1 USING idempotency(retention_seconds=-1)')
       = 'idempotency: retention_seconds must be an integer from 0 to 315360000, got "-1"';
SELECT 'retention-above', errmsg('CREATE VIRTUAL TABLE x1 USING idempotency(retention_seconds=315360001)')
       = 'idempotency: retention_seconds must be an integer from 0 to 315360000, got "315360001"';
SELECT 'require-transaction-above', errmsg('CREATE VIRTUAL TABLE x1 USING idempotency(require_transaction=2)')
       = 'idempotency: require_transaction must be an integer from 0 to 1, got "2"';
SELECT 'require-transaction-word', errmsg('CREATE VIRTUAL TABLE x1 USING idempotency(require_transaction=yes)')
       = 'idempotency: require_transaction must be an integer from 0 to 1, got "yes"';
SELECT 'target-window-above', errmsg('CREATE VIRTUAL TABLE x1 USING idempotency(target_window_seconds=315360001)')
       = 'idempotency: target_window_seconds must be an integer from 0 to 315360000, got "315360001"';
SELECT 'target-window-below', errmsg('CREATE VIRTUAL TABLE x1 USING idempotency(target_window_seconds=-1)')
       = 'idempotency: target_window_seconds must be an integer from 0 to 315360000, got "-1"';
SELECT 'args-bytes-below', errmsg('CREATE VIRTUAL TABLE x1 USING idempotency(max_args_bytes=1)')
       = 'idempotency: max_args_bytes must be an integer from 2 to 16777216, got "1"';
SELECT 'args-bytes-above', errmsg('CREATE VIRTUAL TABLE x1 USING idempotency(max_args_bytes=16777217)')
       = 'idempotency: max_args_bytes must be an integer from 2 to 16777216, got "16777217"';
SELECT 'single-tenant-below', errmsg('CREATE VIRTUAL TABLE x1 USING idempotency(single_tenant=-1)')
       = 'idempotency: single_tenant must be an integer from 0 to 1, got "-1"';
SELECT 'single-tenant-above', errmsg('CREATE VIRTUAL TABLE x1 USING idempotency(single_tenant=2)')
       = 'idempotency: single_tenant must be an integer from 0 to 1, got "2"';
SELECT 'huge-value', errmsg('CREATE VIRTUAL TABLE x1 USING idempotency(lease_seconds=99999999999999999999999)')
       = 'idempotency: lease_seconds must be an integer from 0 to 31536000, got "99999999999999999999999"';
SELECT 'int64-overflow-not-wrapped', errmsg('CREATE VIRTUAL TABLE x1 USING idempotency(max_attempts=18446744073709551617)')
       = 'idempotency: max_attempts must be an integer from 1 to 1000, got "18446744073709551617"';

-- not an integer
SELECT 'real-value', errmsg('CREATE VIRTUAL TABLE x1 USING idempotency(lease_seconds=1.5)')
       = 'idempotency: lease_seconds must be an integer from 0 to 31536000, got "1.5"';
SELECT 'real-integral-value', errmsg('CREATE VIRTUAL TABLE x1 USING idempotency(max_attempts=2.0)')
       = 'idempotency: max_attempts must be an integer from 1 to 1000, got "2.0"';
SELECT 'exponent-value', errmsg('CREATE VIRTUAL TABLE x1 USING idempotency(lease_seconds=1e3)')
       = 'idempotency: lease_seconds must be an integer from 0 to 31536000, got "1e3"';
SELECT 'text-value', errmsg('CREATE VIRTUAL TABLE x1 USING idempotency(lease_seconds=abc)')
       = 'idempotency: lease_seconds must be an integer from 0 to 31536000, got "abc"';
SELECT 'empty-value', errmsg('CREATE VIRTUAL TABLE x1 USING idempotency(lease_seconds=)')
       = 'idempotency: lease_seconds must be an integer from 0 to 31536000, got ""';
SELECT 'hex-value', errmsg('CREATE VIRTUAL TABLE x1 USING idempotency(max_args_bytes=0x10)')
       = 'idempotency: max_args_bytes must be an integer from 2 to 16777216, got "0x10"';
SELECT 'plus-sign-value', errmsg('CREATE VIRTUAL TABLE x1 USING idempotency(max_attempts=+3)')
       = 'idempotency: max_attempts must be an integer from 1 to 1000, got "+3"';
SELECT 'trailing-junk-value', errmsg('CREATE VIRTUAL TABLE x1 USING idempotency(max_attempts=3-1)')
       = 'idempotency: max_attempts must be an integer from 1 to 1000, got "3-1"';
SELECT 'single-tenant-word', errmsg('CREATE VIRTUAL TABLE x1 USING idempotency(single_tenant=true)')
       = 'idempotency: single_tenant must be an integer from 0 to 1, got "true"';
SELECT 'quoted-value', errcode('CREATE VIRTUAL TABLE x1 USING idempotency(lease_seconds=''5'')') = 1;

-- unknown option, case matters
SELECT 'unknown-option', errmsg('CREATE VIRTUAL TABLE x1 USING idempotency(foo=1)')
       = 'idempotency: unknown option "foo"; the options are lease_seconds, max_attempts, max_args_bytes, single_tenant, retention_seconds, require_transaction, target_window_seconds';
SELECT 'unknown-option-code', errcode('CREATE VIRTUAL TABLE x1 USING idempotency(foo=1)') = 1;
SELECT 'unknown-option-uppercase', errmsg('CREATE VIRTUAL TABLE x1 USING idempotency(LEASE_SECONDS=5)')
       = 'idempotency: unknown option "LEASE_SECONDS"; the options are lease_seconds, max_attempts, max_args_bytes, single_tenant, retention_seconds, require_transaction, target_window_seconds';
SELECT 'unknown-option-prefix', errmsg('CREATE VIRTUAL TABLE x1 USING idempotency(lease=5)')
       = 'idempotency: unknown option "lease"; the options are lease_seconds, max_attempts, max_args_bytes, single_tenant, retention_seconds, require_transaction, target_window_seconds';
SELECT 'unknown-option-after-good', errmsg('CREATE VIRTUAL TABLE x1 USING idempotency(lease_seconds=5, tenant=1)')
       = 'idempotency: unknown option "tenant"; the options are lease_seconds, max_attempts, max_args_bytes, single_tenant, retention_seconds, require_transaction, target_window_seconds';

-- repeated option
SELECT 'repeated-option', errmsg('CREATE VIRTUAL TABLE x1 USING idempotency(lease_seconds=1, lease_seconds=2)')
       = 'idempotency: option lease_seconds is given twice';
SELECT 'repeated-same-value', errmsg('CREATE VIRTUAL TABLE x1 USING idempotency(max_attempts=2, lease_seconds=1, max_attempts=2)')
       = 'idempotency: option max_attempts is given twice';
SELECT 'repeated-code', errcode('CREATE VIRTUAL TABLE x1 USING idempotency(single_tenant=1, single_tenant=1)') = 1;

-- malformed: no '='
SELECT 'no-equals', errmsg('CREATE VIRTUAL TABLE x1 USING idempotency(lease_seconds)')
       = 'idempotency: option "lease_seconds" needs the form name=value';
SELECT 'no-equals-number', errmsg('CREATE VIRTUAL TABLE x1 USING idempotency(300)')
       = 'idempotency: option "300" needs the form name=value';
SELECT 'no-equals-code', errcode('CREATE VIRTUAL TABLE x1 USING idempotency(single_tenant)') = 1;
SELECT 'empty-name', errcode('CREATE VIRTUAL TABLE x1 USING idempotency(=5)') = 1;

-- nothing is left behind by a refused CREATE
SELECT 'refused-leaves-nothing', (SELECT count(*) FROM sqlite_schema WHERE name LIKE 'x1%') = 0;

-- the created ledgers are usable: lease 0 is expired at once, args cap 100
SELECT 'lo-args-cap', errmsg('SELECT idem_claim(''lo'', ''t'', ''c'', ''tool'', ''[1]'')')
       = 'idem_claim: args is 3 bytes in canonical form, over the ledger''s max_args_bytes of 2';
SELECT 'lo-args-at-cap', json_extract(idem_claim('lo', 't', 'c', 'tool', '{}'), '$.decision') = 'admitted';
SELECT 'ord-args-cap', errmsg('SELECT idem_claim(''ord'', ''t'', ''c'', ''tool'', ''"' || printf('%.99c', 'a') || '"'')')
       = 'idem_claim: args is 101 bytes in canonical form, over the ledger''s max_args_bytes of 100';
SELECT 'ord-args-at-cap', json_extract(idem_claim('ord', 't', 'c', 'tool', '"' || printf('%.98c', 'a') || '"'), '$.decision') = 'admitted';

-- a second CREATE of the same name fails like any table
SELECT 'create-twice', errmsg('CREATE VIRTUAL TABLE L USING idempotency') = 'table L already exists';
SELECT 'create-if-not-exists', errmsg('CREATE VIRTUAL TABLE IF NOT EXISTS L USING idempotency') IS NULL;
SELECT 'meta-unchanged', (SELECT v FROM L_meta WHERE k = 'lease_seconds') = 300;
-- a name that collides with an existing shadow-like table
CREATE TABLE taken_rows(x);
SELECT 'shadow-name-taken', errmsg('CREATE VIRTUAL TABLE taken USING idempotency')
       = 'idempotency: cannot create ledger taken: its shadow table taken_rows exists but tables taken_meta, taken_guards are missing; restore what is missing from a backup, or drop what is left to start an empty ledger';
SELECT 'shadow-name-taken-no-vtab', (SELECT count(*) FROM sqlite_schema WHERE name IN ('taken', 'taken_meta', 'taken_guards')) = 0;

-- format check on connect: another format is refused (reconnect via a fresh schema load)
CREATE VIRTUAL TABLE F USING idempotency;
SELECT 'format-row-fixed', errmsg('UPDATE F_meta SET v = 6 WHERE k = ''format''')
       = 'idempotency: the format, identity and options of a ledger are fixed when it is created';
DROP TRIGGER F_meta_update;
PRAGMA writable_schema = ON;
UPDATE F_meta SET v = 6 WHERE k = 'format';
PRAGMA writable_schema = OFF;
SELECT 'format-row-changed', (SELECT v FROM F_meta WHERE k = 'format') = 6;
PRAGMA writable_schema = RESET;
SELECT 'format-refused-on-connect', errmsg('SELECT * FROM F') = 'idempotency: ledger F has format 6; this build reads format 5';
SELECT 'format-refused-claim', errmsg('SELECT idem_claim(''F'', ''t'', ''c'', ''x'', ''{}'')') GLOB 'idem_claim: *';
SELECT 'format-refused-claim-nothing-written', (SELECT count(*) FROM F_rows) = 0;
SELECT 'other-ledgers-still-work', (SELECT count(*) FROM L) = 1;
