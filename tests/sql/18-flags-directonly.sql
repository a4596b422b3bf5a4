-- Function flags and DIRECTONLY: a view or trigger stored in a database
-- file (main or attached) cannot claim, settle, resolve, purge or read the
-- last claim, nor reach the ledger table itself; direct use works, also
-- with trusted_schema=OFF.

SELECT sqltest_clock(1700000000000);
CREATE VIRTUAL TABLE L USING idempotency;
SELECT 'seed', json_extract(idem_claim('L', 't', 'c', 'x', '{}', 'external', 'k1'), '$.decision') = 'admitted';

-- ---------------------------------------------------------------- flags (pragma_function_list)
-- SQLITE_DIRECTONLY = 0x80000, SQLITE_INNOCUOUS = 0x200000, SQLITE_DETERMINISTIC = 0x800
SELECT 'flags-claim-5', (SELECT flags & 0x80000 FROM pragma_function_list WHERE name = 'idem_claim' AND narg = 5) = 0x80000;
SELECT 'flags-claim-6', (SELECT flags & 0x80000 FROM pragma_function_list WHERE name = 'idem_claim' AND narg = 6) = 0x80000;
SELECT 'flags-claim-7', (SELECT flags & 0x80000 FROM pragma_function_list WHERE name = 'idem_claim' AND narg = 7) = 0x80000;
SELECT 'flags-settle', (SELECT flags & 0x80000 FROM pragma_function_list WHERE name = 'idem_settle' AND narg = 4) = 0x80000;
SELECT 'flags-resolve', (SELECT flags & 0x80000 FROM pragma_function_list WHERE name = 'idem_resolve' AND narg = 5) = 0x80000;
SELECT 'flags-purge', (SELECT flags & 0x80000 FROM pragma_function_list WHERE name = 'idem_purge' AND narg = 2) = 0x80000;
SELECT 'flags-last-claim', (SELECT flags & 0x80000 FROM pragma_function_list WHERE name = 'idem_last_claim' AND narg = 1) = 0x80000;
SELECT 'flags-guard', (SELECT count(*) FROM pragma_function_list WHERE name = 'idem_guard' AND flags & 0x80000 = 0x80000) >= 1
       AND (SELECT count(*) FROM pragma_function_list WHERE name = 'idem_guard' AND flags & 0x80000 = 0) = 0;
SELECT 'flags-unguard', (SELECT count(*) FROM pragma_function_list WHERE name = 'idem_unguard' AND flags & 0x80000 = 0x80000) >= 1
       AND (SELECT count(*) FROM pragma_function_list WHERE name = 'idem_unguard' AND flags & 0x80000 = 0) = 0;
SELECT 'writers-all-directonly', (SELECT count(*) FROM pragma_function_list
       WHERE name IN ('idem_claim', 'idem_settle', 'idem_resolve', 'idem_purge', 'idem_last_claim', 'idem_guard', 'idem_unguard') AND flags & 0x80000 = 0) = 0;
SELECT 'writers-not-innocuous', (SELECT count(*) FROM pragma_function_list
       WHERE name IN ('idem_claim', 'idem_settle', 'idem_resolve', 'idem_purge', 'idem_last_claim', 'idem_guard', 'idem_unguard') AND flags & 0x200000 <> 0) = 0;
SELECT 'writers-not-deterministic', (SELECT count(*) FROM pragma_function_list
       WHERE name IN ('idem_claim', 'idem_settle', 'idem_resolve', 'idem_purge', 'idem_last_claim', 'idem_guard', 'idem_unguard') AND flags & 0x800 <> 0) = 0;
SELECT 'writers-registered', (SELECT count(DISTINCT name) FROM pragma_function_list
       WHERE name IN ('idem_claim', 'idem_settle', 'idem_resolve', 'idem_purge', 'idem_last_claim', 'idem_guard', 'idem_unguard')) = 7;
SELECT 'claim-arities', (SELECT group_concat(narg, ',') FROM (SELECT narg FROM pragma_function_list WHERE name = 'idem_claim' ORDER BY narg)) = '5,6,7,8';
SELECT 'pure-innocuous-deterministic', (SELECT count(*) FROM pragma_function_list
       WHERE name IN ('idem_version', 'idem_valid_key', 'idem_check_key', 'idem_canonical', 'idem_fingerprint', 'idem_key', 'idem_guard_check')
         AND flags & 0x200800 = 0x200800 AND flags & 0x80000 = 0) = (SELECT count(*) FROM pragma_function_list
       WHERE name IN ('idem_version', 'idem_valid_key', 'idem_check_key', 'idem_canonical', 'idem_fingerprint', 'idem_key', 'idem_guard_check'));

-- ---------------------------------------------------------------- views in main
CREATE VIEW v_claim AS SELECT idem_claim('L', 't', 'c', 'x', '{}', 'external', 'via-view') AS j;
CREATE VIEW v_settle AS SELECT idem_settle('L', (SELECT token FROM L_rows LIMIT 0), 'failed', NULL) AS j;
CREATE VIEW v_resolve AS SELECT idem_resolve('L', 't', 'k1', 'failed', NULL) AS j;
CREATE VIEW v_purge AS SELECT idem_purge('L', 0) AS j;
CREATE VIEW v_last AS SELECT idem_last_claim('L') AS j;
CREATE VIEW v_ledger AS SELECT * FROM L;
CREATE VIEW v_ledger_count AS SELECT count(*) AS n FROM L;
SELECT 'view-claim', errmsg('SELECT * FROM v_claim') = 'unsafe use of idem_claim()';
SELECT 'view-claim-code', errcode('SELECT * FROM v_claim') = 1;
SELECT 'view-claim-nothing', (SELECT count(*) FROM L_rows WHERE "key" = 'via-view') = 0;
SELECT 'view-settle', errmsg('SELECT * FROM v_settle') = 'unsafe use of idem_settle()';
SELECT 'view-resolve', errmsg('SELECT * FROM v_resolve') = 'unsafe use of idem_resolve()';
SELECT 'view-purge', errmsg('SELECT * FROM v_purge') = 'unsafe use of idem_purge()';
SELECT 'view-last-claim', errmsg('SELECT * FROM v_last') = 'unsafe use of idem_last_claim()';
SELECT 'view-ledger', errmsg('SELECT * FROM v_ledger') = 'unsafe use of virtual table "L"';
SELECT 'view-ledger-count', errmsg('SELECT n FROM v_ledger_count') = 'unsafe use of virtual table "L"';
SELECT 'view-in-subquery', errmsg('SELECT (SELECT j FROM v_claim)') = 'unsafe use of idem_claim()';
SELECT 'view-in-cte', errmsg('WITH x AS (SELECT * FROM v_claim) SELECT * FROM x') = 'unsafe use of idem_claim()';

-- ---------------------------------------------------------------- triggers in main
CREATE TABLE p(x);
CREATE TABLE q(x);
CREATE TABLE r(x);
CREATE TABLE s(x);
CREATE TRIGGER p_claim AFTER INSERT ON p BEGIN SELECT idem_claim('L', 't', 'c', 'x', '{}', 'external', 'via-trigger'); END;
CREATE TRIGGER q_settle AFTER INSERT ON q BEGIN SELECT idem_settle('L', NEW.x, 'succeeded', NULL); END;
CREATE TRIGGER r_purge AFTER INSERT ON r BEGIN SELECT idem_purge('L', 0); END;
CREATE TRIGGER s_insert AFTER INSERT ON s BEGIN INSERT INTO L(tenant, conversation, tool, args, key) VALUES ('t', 'c', 'x', '{}', 'via-trigger-insert'); END;
SELECT 'trigger-claim', errmsg('INSERT INTO p VALUES (1)') = 'unsafe use of idem_claim()';
SELECT 'trigger-claim-nothing', (SELECT count(*) FROM p) = 0 AND (SELECT count(*) FROM L_rows WHERE "key" = 'via-trigger') = 0;
SELECT 'trigger-settle', errmsg('INSERT INTO q VALUES (''' || (SELECT token FROM L WHERE key = 'k1') || ''')') = 'unsafe use of idem_settle()';
SELECT 'trigger-settle-nothing', (SELECT status FROM L_rows WHERE "key" = 'k1') = 'claimed' AND (SELECT count(*) FROM q) = 0;
SELECT 'trigger-purge', errmsg('INSERT INTO r VALUES (1)') = 'unsafe use of idem_purge()';
SELECT 'trigger-ledger-insert', errmsg('INSERT INTO s VALUES (1)') = 'unsafe use of virtual table "L"';
SELECT 'trigger-ledger-insert-nothing', (SELECT count(*) FROM L_rows WHERE "key" = 'via-trigger-insert') = 0;

-- ---------------------------------------------------------------- attached database: views and triggers there
ATTACH ':memory:' AS aux;
CREATE VIEW aux.va_claim AS SELECT idem_claim('L', 't', 'c', 'x', '{}', 'external', 'via-aux') AS j;
CREATE VIEW aux.va_purge AS SELECT idem_purge('L', 0) AS j;
CREATE VIEW aux.va_settle AS SELECT idem_settle('L', '0123456789abcdef0123456789abcdef', 'failed', NULL) AS j;
CREATE TABLE aux.pa(x);
CREATE TRIGGER aux.pa_claim AFTER INSERT ON pa BEGIN SELECT idem_claim('L', 't', 'c', 'x', '{}', 'external', 'via-aux-trigger'); END;
SELECT 'aux-view-claim', errmsg('SELECT * FROM aux.va_claim') = 'unsafe use of idem_claim()';
SELECT 'aux-view-purge', errmsg('SELECT * FROM aux.va_purge') = 'unsafe use of idem_purge()';
SELECT 'aux-view-settle', errmsg('SELECT * FROM aux.va_settle') = 'unsafe use of idem_settle()';
SELECT 'aux-trigger-claim', errmsg('INSERT INTO aux.pa VALUES (1)') = 'unsafe use of idem_claim()';
SELECT 'aux-nothing', (SELECT count(*) FROM L_rows WHERE "key" LIKE 'via-aux%') = 0;
-- a ledger in the attached database, reached by a view there
CREATE VIRTUAL TABLE aux.AL USING idempotency;
CREATE VIEW aux.va_ledger AS SELECT * FROM AL;
SELECT 'aux-view-ledger', errmsg('SELECT * FROM aux.va_ledger') = 'unsafe use of virtual table "AL"';
SELECT 'aux-ledger-direct', json_extract(idem_claim('AL', 't', 'c', 'x', '{}'), '$.decision') = 'admitted' AND (SELECT count(*) FROM aux.AL) = 1;

-- ---------------------------------------------------------------- TEMP views and triggers are the connection's own SQL: allowed
CREATE TEMP VIEW tv_claim AS SELECT idem_claim('L', 't', 'c', 'x', '{}', 'external', 'via-temp-view') AS j;
SELECT 'temp-view-claim', (SELECT json_extract(j, '$.decision') FROM tv_claim) = 'admitted';
CREATE TEMP VIEW tv_ledger AS SELECT * FROM L;
SELECT 'temp-view-ledger', (SELECT count(*) FROM tv_ledger) = 2;

-- ---------------------------------------------------------------- trusted_schema=OFF does not stop direct use
PRAGMA trusted_schema = OFF;
SELECT 'untrusted-claim', json_extract(idem_claim('L', 't', 'c', 'x', '{}', 'external', 'k2'), '$.decision') = 'admitted';
SELECT 'untrusted-settle', json_extract(idem_settle('L', (SELECT token FROM L WHERE key = 'k2'), 'succeeded', NULL), '$.status') = 'succeeded';
SELECT 'untrusted-resolve', errmsg('SELECT idem_resolve(''L'', ''t'', ''k1'', ''failed'', NULL)') = 'idem_resolve: key "k1" is claimed, not unknown; the claim''s holder settles it with its token';
SELECT 'untrusted-purge', idem_purge('L', 0) = 0;
SELECT 'untrusted-select', (SELECT count(*) FROM L) = 3;
INSERT INTO L(tenant, conversation, tool, args, key) VALUES ('t', 'c', 'x', '{}', 'k3');
SELECT 'untrusted-insert', changes() = 1 AND json_extract(idem_last_claim('L'), '$.key') = 'k3';
SELECT 'untrusted-delete', errmsg('DELETE FROM L WHERE key = ''k2''') IS NULL;
SELECT 'untrusted-view-still-refused', errmsg('SELECT * FROM v_claim') = 'unsafe use of idem_claim()';
SELECT 'untrusted-view-ledger-refused', errmsg('SELECT * FROM v_ledger') = 'unsafe use of virtual table "L"';
-- a ledger created under trusted_schema=OFF works
CREATE VIRTUAL TABLE U USING idempotency;
SELECT 'untrusted-create', json_extract(idem_claim('U', 't', 'c', 'x', '{}'), '$.decision') = 'admitted';
-- the schema reloaded from the file (as after a reopen) keeps working
PRAGMA writable_schema = RESET;
SELECT 'untrusted-after-reload', json_extract(idem_claim('L', 't', 'c', 'x', '{}', 'external', 'k3'), '$.decision') = 'in_progress';
SELECT 'untrusted-view-after-reload', errmsg('SELECT * FROM v_claim') = 'unsafe use of idem_claim()';
PRAGMA trusted_schema = ON;
SELECT 'trusted-view-still-refused', errmsg('SELECT * FROM v_claim') = 'unsafe use of idem_claim()';
SELECT 'final-nothing-via-schema', (SELECT count(*) FROM L_rows WHERE "key" IN ('via-view', 'via-trigger', 'via-trigger-insert', 'via-aux', 'via-aux-trigger')) = 0;
SELECT sqltest_clock(NULL);
