-- Ledgers in attached schemas (temp refused), under odd quoted names; how a
-- function's ledger argument resolves (temp, main, then attached); ALTER
-- TABLE ... RENAME; DROP TABLE refused while a row is live.

SELECT sqltest_clock(1700000000000);
ATTACH ':memory:' AS aux;

-- ---------------------------------------------------------------- attached schema
CREATE VIRTUAL TABLE aux.A USING idempotency(lease_seconds=60);
SELECT 'aux-shadows', (SELECT count(*) FROM aux.sqlite_schema WHERE name IN ('A_rows', 'A_meta', 'A_guards', 'A_rows_update', 'A_rows_delete')) = 5;
SELECT 'aux-no-main-shadows', (SELECT count(*) FROM main.sqlite_schema WHERE name LIKE 'A%') = 0;
SELECT 'aux-meta', (SELECT v FROM aux.A_meta WHERE k = 'lease_seconds') = 60;
WITH c(j) AS MATERIALIZED (SELECT idem_claim('A', 't', 'c', 'x', '{}'))
SELECT 'aux-claim', json_extract(j, '$.decision') = 'admitted' FROM c
UNION ALL SELECT 'aux-claim-lease', json_extract(j, '$.lease_until') = 1700000060000 FROM c;
SELECT 'aux-row', (SELECT count(*) FROM aux.A_rows) = 1;
SELECT 'aux-select', (SELECT count(*) FROM aux.A) = 1 AND (SELECT count(*) FROM A) = 1;
SELECT 'aux-in-progress', json_extract(idem_claim('A', 't', 'c', 'x', '{}'), '$.decision') = 'in_progress';
SELECT 'aux-settle', json_extract(idem_settle('A', (SELECT token FROM aux.A), 'succeeded', '{"r":1}'), '$.status') = 'succeeded';
SELECT 'aux-replay', json(json_extract(idem_claim('A', 't', 'c', 'x', '{}'), '$.result')) = '{"r":1}';
INSERT INTO aux.A(tenant, conversation, tool, args, key) VALUES ('t', 'c', 'x', '{}', 'op-aux');
SELECT 'aux-insert', changes() = 1 AND json_extract(idem_last_claim('A'), '$.key') = 'op-aux';
SELECT 'aux-resolve-missing', errmsg('SELECT idem_resolve(''A'', ''t'', ''nope'', ''failed'', NULL)') = 'idem_resolve: ledger A has no key "nope" for tenant "t"';
SELECT 'aux-purge', idem_purge('A', 0) = 0;
SELECT 'aux-qualified-name', json_extract(idem_claim('aux.A', 't', 'c', 'x', '{}'), '$.decision') = 'replay';
SELECT 'main-qualified-name-unknown', errmsg('SELECT idem_claim(''main.A'', ''t'', ''c'', ''x'', ''{}'')') = 'idem_claim: unknown ledger "main.A": no table USING idempotency by that name';

-- ---------------------------------------------------------------- temp schema: refused
SELECT 'temp-refused', errmsg('CREATE VIRTUAL TABLE temp.T USING idempotency')
       = 'idempotency: ledger T cannot be created in the temp schema: a TEMP ledger is seen by this connection only and would not deduplicate a retry made on another one; create it in main or an attached database';
SELECT 'temp-refused-upper', errmsg('CREATE VIRTUAL TABLE TEMP."t 2" USING idempotency(lease_seconds=5)')
       = 'idempotency: ledger t 2 cannot be created in the temp schema: a TEMP ledger is seen by this connection only and would not deduplicate a retry made on another one; create it in main or an attached database';
SELECT 'temp-refused-nothing-left', (SELECT count(*) FROM temp.sqlite_schema) = 0;

-- ---------------------------------------------------------------- resolution order: temp, main, attached
CREATE VIRTUAL TABLE aux.Q USING idempotency;
SELECT 'aux-only', json_extract(idem_claim('Q', 'r', 'c', 'x', '{}', 'external', 'in-aux'), '$.decision') = 'admitted'
       AND (SELECT count(*) FROM aux.Q_rows) = 1;
CREATE VIRTUAL TABLE main.Q USING idempotency;
SELECT 'main-shadows-aux', json_extract(idem_claim('Q', 'r', 'c', 'x', '{}', 'external', 'in-main'), '$.decision') = 'admitted'
       AND (SELECT count(*) FROM main.Q_rows) = 1 AND (SELECT count(*) FROM aux.Q_rows) = 1;
SELECT 'main-sees-own-rows', json_extract(idem_claim('Q', 'r', 'c', 'x', '{}', 'external', 'in-aux'), '$.decision') = 'admitted';
SELECT 'settle-resolves-main', errmsg('SELECT idem_settle(''Q'', (SELECT token FROM aux.Q WHERE key = ''in-aux''), ''succeeded'', NULL)')
       = 'idem_settle: no claim of ledger Q holds token "' || (SELECT token FROM aux.Q WHERE key = 'in-aux') || '" (a wrong token, or a claim that was taken over)';
SELECT 'settle-qualified-aux', json_extract(idem_settle('aux.Q', (SELECT token FROM aux.Q WHERE key = 'in-aux'), 'succeeded', NULL), '$.status') = 'succeeded';
SELECT 'settle-main-rest', json_extract(idem_settle('Q', (SELECT token FROM main.Q WHERE key = 'in-aux'), 'failed', NULL), '$.status') = 'failed';
-- a plain table in temp named like a ledger hides it: it is what the name resolves to
CREATE TEMP TABLE Q(x);
SELECT 'temp-plain-table-shadows', errmsg('SELECT idem_claim(''Q'', ''r'', ''c'', ''x'', ''{}'')') = 'idem_claim: unknown ledger "Q": no table USING idempotency by that name';
SELECT 'temp-plain-table-main-qualified', json_extract(idem_claim('main.Q', 'r', 'c', 'x', '{}', 'external', 'in-main'), '$.decision') = 'in_progress';
DROP TABLE temp.Q;
SELECT 'plain-dropped-main-again', json_extract(idem_claim('Q', 'r', 'c', 'x', '{}', 'external', 'in-aux'), '$.decision') = 'replay';

-- ---------------------------------------------------------------- odd quoted names
CREATE VIRTUAL TABLE "my ledger" USING idempotency;
SELECT 'space-name-shadows', (SELECT count(*) FROM sqlite_schema WHERE name IN ('my ledger_rows', 'my ledger_meta', 'my ledger_guards', 'my ledger_rows_update', 'my ledger_rows_delete')) = 5;
SELECT 'space-name-claim', json_extract(idem_claim('my ledger', 't', 'c', 'x', '{}'), '$.decision') = 'admitted';
SELECT 'space-name-settle', json_extract(idem_settle('my ledger', (SELECT token FROM "my ledger"), 'succeeded', NULL), '$.status') = 'succeeded';
SELECT 'space-name-replay', json_extract(idem_claim('my ledger', 't', 'c', 'x', '{}'), '$.decision') = 'replay';
INSERT INTO "my ledger"(tenant, conversation, tool, args) VALUES ('t', 'c', 'y', '{}');
SELECT 'space-name-insert', changes() = 1 AND idem_last_claim('my ledger') IS NOT NULL;
SELECT 'space-name-taken-msg', errmsg('INSERT INTO "my ledger"(tenant, conversation, tool, args) VALUES (''t'', ''c'', ''y'', ''{}'')')
       LIKE 'idempotency: key "idem1-%" of tenant "t" in ledger my ledger is taken: it is claimed (attempt 1) until %';
CREATE VIRTUAL TABLE "x""y" USING idempotency;
SELECT 'quote-name-shadows', (SELECT count(*) FROM sqlite_schema WHERE name IN ('x"y_rows', 'x"y_meta', 'x"y_guards')) = 3;
SELECT 'quote-name-claim', json_extract(idem_claim('x"y', 't', 'c', 'x', '{}', 'local'), '$.decision') = 'admitted';
SELECT 'quote-name-settle', json_extract(idem_settle('x"y', (SELECT token FROM "x""y"), 'released', NULL), '$.status') = 'released';
SELECT 'quote-name-reclaim', json_extract(idem_claim('x"y', 't', 'c', 'x', '{}', 'local'), '$.attempt') = 2;
SELECT 'quote-name-purge', idem_purge('x"y', 0) = 0;
SELECT 'quote-name-unknown-msg', errmsg('SELECT idem_claim(''x"z'', ''t'', ''c'', ''x'', ''{}'')') = 'idem_claim: unknown ledger "x\"z": no table USING idempotency by that name';
CREATE VIRTUAL TABLE "select" USING idempotency;
SELECT 'keyword-name-claim', json_extract(idem_claim('select', 't', 'c', 'x', '{}'), '$.decision') = 'admitted';
SELECT 'keyword-name-settle', json_extract(idem_settle('select', (SELECT token FROM "select"), 'failed', '{"e":1}'), '$.status') = 'failed';
SELECT 'keyword-name-replay', json_extract(idem_claim('select', 't', 'c', 'x', '{}'), '$.status') = 'failed';
CREATE VIRTUAL TABLE "Ünï" USING idempotency;
SELECT 'unicode-name-claim', json_extract(idem_claim('Ünï', 't', 'c', 'x', '{}'), '$.decision') = 'admitted';
CREATE VIRTUAL TABLE aux."odd name" USING idempotency;
SELECT 'aux-odd-name', json_extract(idem_claim('odd name', 't', 'c', 'x', '{}'), '$.decision') = 'admitted' AND (SELECT count(*) FROM aux."odd name_rows") = 1;

-- ---------------------------------------------------------------- ALTER TABLE RENAME
CREATE VIRTUAL TABLE R USING idempotency(max_attempts=7);
SELECT 'r-claim', json_extract(idem_claim('R', 't', 'c', 'x', '{}', 'external', 'r1'), '$.decision') = 'admitted';
SELECT 'r-claim2', json_extract(idem_claim('R', 't', 'c', 'x', '{}', 'external', 'r2'), '$.decision') = 'admitted';
SELECT 'r-settle2', json_extract(idem_settle('R', (SELECT token FROM R WHERE key = 'r2'), 'succeeded', '{"v":2}'), '$.status') = 'succeeded';
CREATE TEMP TABLE old(k TEXT PRIMARY KEY, t TEXT);
INSERT INTO old SELECT key, token FROM R;
ALTER TABLE R RENAME TO R2;
SELECT 'rename-vtab', (SELECT count(*) FROM sqlite_schema WHERE name = 'R2' AND type = 'table') = 1 AND (SELECT count(*) FROM sqlite_schema WHERE name = 'R') = 0;
SELECT 'rename-shadows', (SELECT count(*) FROM sqlite_schema WHERE name IN ('R2_rows', 'R2_meta', 'R2_guards')) = 3;
SELECT 'rename-old-shadows-gone', (SELECT count(*) FROM sqlite_schema WHERE name IN ('R_rows', 'R_meta', 'R_guards')) = 0;
SELECT 'rename-triggers', (SELECT group_concat(name || '@' || tbl_name, ',') FROM (SELECT name, tbl_name FROM sqlite_schema WHERE type = 'trigger' AND tbl_name LIKE 'R%' ORDER BY name))
       = 'R2_guards_delete@R2_guards,R2_guards_insert@R2_guards,R2_guards_update@R2_guards,R2_members_delete@R2_members,R2_members_insert@R2_members,R2_members_update@R2_members,R2_meta_delete@R2_meta,R2_meta_insert@R2_meta,R2_meta_update@R2_meta,R2_rows_delete@R2_rows,R2_rows_forget@R2_rows,R2_rows_insert@R2_rows,R2_rows_targets@R2_rows,R2_rows_update@R2_rows,R2_targets_delete@R2_targets,R2_targets_insert@R2_targets,R2_targets_update@R2_targets';
SELECT 'rename-rows-kept', (SELECT count(*) FROM R2) = 2 AND (SELECT count(*) FROM R2_rows) = 2;
SELECT 'rename-meta-kept', (SELECT v FROM R2_meta WHERE k = 'max_attempts') = 7;
SELECT 'rename-old-name-unknown', errmsg('SELECT idem_claim(''R'', ''t'', ''c'', ''x'', ''{}'', ''external'', ''r1'')') = 'idem_claim: unknown ledger "R": no table USING idempotency by that name';
SELECT 'rename-old-name-settle-unknown', errmsg('SELECT idem_settle(''R'', (SELECT t FROM old WHERE k = ''r1''), ''succeeded'', NULL)') = 'idem_settle: unknown ledger "R": no table USING idempotency by that name';
SELECT 'rename-in-progress', json_extract(idem_claim('R2', 't', 'c', 'x', '{}', 'external', 'r1'), '$.decision') = 'in_progress';
SELECT 'rename-replay', json(json_extract(idem_claim('R2', 't', 'c', 'x', '{}', 'external', 'r2'), '$.result')) = '{"v":2}';
SELECT 'rename-token-kept', (SELECT token FROM R2 WHERE key = 'r1') = (SELECT t FROM old WHERE k = 'r1');
SELECT 'rename-settle-old-token', idem_settle('R2', (SELECT t FROM old WHERE k = 'r1'), 'succeeded', NULL) = '{"key":"r1","status":"succeeded","attempt":1,"durable":false,"settled_at":1700000000000,"members":[]}';
SELECT 'rename-new-claim', json_extract(idem_claim('R2', 't', 'c', 'x', '{}', 'external', 'r3'), '$.decision') = 'admitted';
INSERT INTO R2(tenant, conversation, tool, args, key) VALUES ('t', 'c', 'x', '{}', 'r4');
SELECT 'rename-insert', changes() = 1;
SELECT 'rename-insert-msg-new-name', errmsg('INSERT INTO R2(tenant, conversation, tool, args, key) VALUES (''t'', ''c'', ''x'', ''{}'', ''r4'')')
       LIKE 'idempotency: key "r4" of tenant "t" in ledger R2 is taken: %';
SELECT 'rename-defense-kept', errcode('UPDATE R2_rows SET args = ''[]'' WHERE "key" = ''r3''') = 1811 AND errcode('DELETE FROM R2_rows WHERE "key" = ''r3''') = 1811;
SELECT 'rename-update-refused', errmsg('UPDATE R2 SET status = ''failed''') = 'idempotency: UPDATE of ledger R2 is refused; record outcomes with idem_settle or idem_resolve';
-- renamed back, and to an odd name
ALTER TABLE R2 RENAME TO "r 3";
SELECT 'rename-odd', json_extract(idem_claim('r 3', 't', 'c', 'x', '{}', 'external', 'r2'), '$.decision') = 'replay'
       AND (SELECT count(*) FROM sqlite_schema WHERE name IN ('r 3_rows', 'r 3_meta', 'r 3_guards', 'r 3_rows_update', 'r 3_rows_delete')) = 5;
SELECT 'rename-odd-old-unknown', errcode('SELECT idem_claim(''R2'', ''t'', ''c'', ''x'', ''{}'')') = 1;
ALTER TABLE aux.A RENAME TO A2;
SELECT 'rename-aux', (SELECT count(*) FROM aux.sqlite_schema WHERE name IN ('A2_rows', 'A2_meta', 'A2_guards')) = 3
       AND json_extract(idem_claim('A2', 't', 'c', 'x', '{}'), '$.decision') = 'replay';
-- a rename onto a name whose shadow table exists fails and leaves the ledger intact
CREATE TABLE busy_rows(x);
SELECT 'rename-collision', errcode('ALTER TABLE "r 3" RENAME TO busy') <> 0;
SELECT 'rename-collision-intact', json_extract(idem_claim('r 3', 't', 'c', 'x', '{}', 'external', 'r2'), '$.decision') = 'replay'
       AND (SELECT count(*) FROM "r 3_rows") = 4;

-- ---------------------------------------------------------------- DROP TABLE
CREATE VIRTUAL TABLE D USING idempotency;
SELECT 'd-claim', json_extract(idem_claim('D', 't', 'c', 'x', '{}', 'external', 'd1'), '$.decision') = 'admitted';
SELECT 'drop-claimed-refused', errmsg('DROP TABLE D') = 'constraint failed';
SELECT 'drop-claimed-code', errcode('DROP TABLE D') = 19;
SELECT 'drop-refused-intact', (SELECT count(*) FROM sqlite_schema WHERE name IN ('D', 'D_rows', 'D_meta', 'D_guards')) = 4 AND (SELECT count(*) FROM D) = 1;
SELECT 'd-unknown', json_extract(idem_settle('D', (SELECT token FROM D), 'unknown', NULL), '$.status') = 'unknown';
SELECT 'drop-unknown-refused', errcode('DROP TABLE D') = 19;
SELECT 'd-resolve', json_extract(idem_resolve('D', 't', 'd1', 'failed', NULL), '$.status') = 'failed';
SELECT 'd-claim2', json_extract(idem_claim('D', 't', 'c', 'x', '{}', 'external', 'd2'), '$.decision') = 'admitted';
SELECT sqltest_clock(1700001000000);
SELECT 'drop-expired-external-refused', errcode('DROP TABLE D') = 19;
SELECT 'd-late-settle', json_extract(idem_settle('D', (SELECT token FROM D WHERE key = 'd2'), 'succeeded', NULL), '$.status') = 'succeeded';
SELECT 'drop-terminal-allowed', errmsg('DROP TABLE D') IS NULL;
SELECT 'drop-shadows-gone', (SELECT count(*) FROM sqlite_schema WHERE name LIKE 'D%') = 0;
SELECT 'drop-unknown-ledger', errmsg('SELECT idem_claim(''D'', ''t'', ''c'', ''x'', ''{}'')') = 'idem_claim: unknown ledger "D": no table USING idempotency by that name';
CREATE VIRTUAL TABLE D USING idempotency;
SELECT 'recreate-fresh', json_extract(idem_claim('D', 't', 'c', 'x', '{}', 'external', 'd1'), '$.attempt') = 1;
CREATE VIRTUAL TABLE E USING idempotency;
SELECT 'drop-empty', errmsg('DROP TABLE E') IS NULL;
SELECT 'drop-empty-gone', (SELECT count(*) FROM sqlite_schema WHERE name LIKE 'E%') = 0;
SELECT 'drop-aux-claimed-refused', errcode('DROP TABLE aux."odd name"') = 19;
SELECT 'integrity', (SELECT integrity_check FROM pragma_integrity_check) = 'ok';
SELECT sqltest_clock(NULL);
