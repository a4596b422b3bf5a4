-- A ledger function reads temp's schema version once per call (resolving
-- the ledger name reads it, the trigger check reuses it). A temp trigger
-- made between two calls, or between a call and a statement on the ledger
-- table, is still seen by the next one: each case below makes one right
-- after a call that read the version.
SELECT sqltest_clock(1700000000000);
CREATE VIRTUAL TABLE L USING idempotency(lease_seconds=60);
CREATE TEMP TABLE msg(k PRIMARY KEY, v);
INSERT INTO msg VALUES
  ('claim', 'idem_claim: ledger L has a foreign trigger "tt" on its shadow tables; every ledger operation is refused until it is dropped'),
  ('settle', 'idem_settle: ledger L has a foreign trigger "tt" on its shadow tables; every ledger operation is refused until it is dropped'),
  ('vtab', 'idempotency: ledger L has a foreign trigger "tt" on its shadow tables; every ledger operation is refused until it is dropped');
-- autocommit: a replay, then a temp trigger, then a replay and an INSERT INTO L
SELECT 'claim-a', json_extract(idem_claim('L', 't', 'c', 'x', '{}', 'external', 'a'), '$.decision') = 'admitted';
SELECT 'settle-a', json_extract(idem_settle('L', (SELECT token FROM L WHERE "key" = 'a'), 'succeeded', '{}'), '$.status') = 'succeeded';
SELECT 'replay-a', json_extract(idem_claim('L', 't', 'c', 'x', '{}', 'external', 'a'), '$.decision') = 'replay';
CREATE TEMP TRIGGER tt AFTER UPDATE ON main.L_rows BEGIN SELECT 1; END;
SELECT 'vtab-insert-after-call', errmsg('INSERT INTO L(tenant, conversation, tool, args, key) VALUES (''t'', ''c'', ''x'', ''{}'', ''b'')') = (SELECT v FROM msg WHERE k = 'vtab');
SELECT 'replay-after-trigger', errmsg('SELECT idem_claim(''L'', ''t'', ''c'', ''x'', ''{}'', ''external'', ''a'')') = (SELECT v FROM msg WHERE k = 'claim');
SELECT 'fresh-after-trigger', errmsg('SELECT idem_claim(''L'', ''t'', ''c'', ''x'', ''{}'', ''external'', ''b'')') = (SELECT v FROM msg WHERE k = 'claim');
SELECT 'nothing-written', (SELECT count(*) FROM L_rows WHERE "key" = 'b') = 0;
DROP TRIGGER tt;
-- the same right after a call, with the INSERT INTO L first
SELECT 'replay-a-2', json_extract(idem_claim('L', 't', 'c', 'x', '{}', 'external', 'a'), '$.decision') = 'replay';
CREATE TEMP TRIGGER tt AFTER UPDATE ON main.L_rows BEGIN SELECT 1; END;
SELECT 'replay-after-trigger-2', errmsg('SELECT idem_claim(''L'', ''t'', ''c'', ''x'', ''{}'', ''external'', ''a'')') = (SELECT v FROM msg WHERE k = 'claim');
DROP TRIGGER tt;
-- inside one transaction: a fresh claim, a temp trigger, then a claim and a settle
BEGIN;
SELECT 'txn-claim-c', json_extract(idem_claim('L', 't', 'c', 'x', '{}', 'external', 'c'), '$.decision') = 'admitted';
CREATE TEMP TRIGGER tt AFTER UPDATE ON main.L_rows BEGIN SELECT 1; END;
SELECT 'txn-claim-after-trigger', errmsg('SELECT idem_claim(''L'', ''t'', ''c'', ''x'', ''{}'', ''external'', ''d'')') = (SELECT v FROM msg WHERE k = 'claim');
SELECT 'txn-settle-after-trigger', errmsg('SELECT idem_settle(''L'', (SELECT printf(''%016x%016x'', id, token) FROM L_rows WHERE "key" = ''c''), ''succeeded'', NULL)') = (SELECT v FROM msg WHERE k = 'settle');
SELECT 'txn-nothing-written', (SELECT count(*) FROM L_rows WHERE "key" = 'd') = 0 AND (SELECT status FROM L_rows WHERE "key" = 'c') = 'claimed';
DROP TRIGGER tt;
SELECT 'txn-claim-d', json_extract(idem_claim('L', 't', 'c', 'x', '{}', 'external', 'd'), '$.decision') = 'admitted';
COMMIT;
-- a temp table named like the ledger takes the unqualified name at once
SELECT 'claim-e', json_extract(idem_claim('L', 't', 'c', 'x', '{}', 'external', 'e'), '$.decision') = 'admitted';
CREATE TEMP TABLE L(x);
SELECT 'temp-table-shadows', errmsg('SELECT idem_claim(''L'', ''t'', ''c'', ''x'', ''{}'', ''external'', ''e'')')
       = 'idem_claim: unknown ledger "L": no table USING idempotency by that name';
DROP TABLE temp.L;
SELECT 'main-ledger-again', json_extract(idem_claim('L', 't', 'c', 'x', '{}', 'external', 'e'), '$.decision') = 'in_progress';
