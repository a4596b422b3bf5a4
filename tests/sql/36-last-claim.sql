-- idem_last_claim never lies: it reports every admitted row of the last
-- INSERT statement into the ledger (a multi-row INSERT OR IGNORE keeps the
-- token of each admitted row), and never a claim that is not in the
-- database (rolled back by ROLLBACK, ROLLBACK TO or a failed COMMIT, or
-- taken over since). "committed" is true only when the claim is known
-- committed.

SELECT sqltest_clock(1700000000000);
CREATE VIRTUAL TABLE L USING idempotency;
INSERT INTO L(tenant, conversation, tool, args, key) VALUES ('t', 'c', 'x', '{}', 'held');

-- ---------------------------------------------------------------- multi-row: admitted then ignored
INSERT OR IGNORE INTO L(tenant, conversation, tool, args, key) VALUES ('t', 'c', 'x', '{"r":1}', 'm1'), ('t', 'c', 'x', '{}', 'held');
SELECT 'admit-ignore-changes', changes() = 1;
SELECT 'admit-ignore-key', json_extract(idem_last_claim('L'), '$.key') = 'm1';
SELECT 'admit-ignore-token', json_extract(idem_last_claim('L'), '$.token') = (SELECT token FROM L WHERE key = 'm1');
SELECT 'admit-ignore-claims', json_array_length(idem_last_claim('L'), '$.claims') = 1
   AND json_extract(idem_last_claim('L'), '$.claims[0].token') = (SELECT token FROM L WHERE key = 'm1');
SELECT 'admit-ignore-shape', idem_last_claim('L') = '{"key":"m1","tenant":"t","token":"' || (SELECT token FROM L WHERE key = 'm1')
       || '","attempt":1,"effect":"external","committed":true,"claims":[{"key":"m1","tenant":"t","token":"' || (SELECT token FROM L WHERE key = 'm1')
       || '","attempt":1,"effect":"external"}]}';

-- ---------------------------------------------------------------- ignored, admitted, ignored, admitted
INSERT OR IGNORE INTO L(tenant, conversation, tool, args, effect, key) VALUES
  ('t', 'c', 'x', '{}', 'external', 'held'),
  ('t', 'c', 'x', '{"r":2}', 'local', 'm2'),
  ('t', 'c', 'x', '{"r":1}', 'external', 'm1'),
  ('u', 'c', 'x', '{"r":3}', 'external', 'm3');
SELECT 'mixed-changes', changes() = 2;
SELECT 'mixed-last', json_extract(idem_last_claim('L'), '$.key') = 'm3' AND json_extract(idem_last_claim('L'), '$.tenant') = 'u';
SELECT 'mixed-claims', (SELECT group_concat(json_extract(value, '$.key') || '/' || json_extract(value, '$.effect'), ',') FROM json_each(idem_last_claim('L'), '$.claims')) = 'm2/local,m3/external';
SELECT 'mixed-tokens', (SELECT count(*) FROM json_each(idem_last_claim('L'), '$.claims') AS j
                        JOIN L ON L.tenant = json_extract(j.value, '$.tenant') AND L.key = json_extract(j.value, '$.key')
                        WHERE L.token = json_extract(j.value, '$.token')) = 2;

-- ---------------------------------------------------------------- a later statement starts a new list
INSERT OR IGNORE INTO L(tenant, conversation, tool, args, key) VALUES ('t', 'c', 'x', '{}', 'held'), ('t', 'c', 'x', '{"r":1}', 'm1');
SELECT 'all-ignored-null', changes() = 0 AND idem_last_claim('L') IS NULL;
INSERT INTO L(tenant, conversation, tool, args, key) VALUES ('t', 'c', 'x', '{"r":4}', 'm4');
SELECT 'single-row', json_array_length(idem_last_claim('L'), '$.claims') = 1 AND json_extract(idem_last_claim('L'), '$.key') = 'm4';
SELECT 'refused-clears', errmsg('INSERT INTO L(tenant, conversation, tool, args, key) VALUES (''t'', ''c'', ''x'', ''{}'', ''held'')') IS NOT NULL
   AND idem_last_claim('L') IS NULL;

-- ---------------------------------------------------------------- ROLLBACK forgets
BEGIN;
INSERT INTO L(tenant, conversation, tool, args, key) VALUES ('t', 'c', 'x', '{"r":5}', 'r5');
SELECT 'txn-reported', json_extract(idem_last_claim('L'), '$.key') = 'r5';
SELECT 'txn-not-committed', json_type(idem_last_claim('L'), '$.committed') = 'false';
ROLLBACK;
SELECT 'rollback-forgets', idem_last_claim('L') IS NULL;
SELECT 'rollback-row-gone', (SELECT count(*) FROM L_rows WHERE key = 'r5') = 0;

-- ---------------------------------------------------------------- COMMIT: then known committed
BEGIN;
INSERT INTO L(tenant, conversation, tool, args, key) VALUES ('t', 'c', 'x', '{"r":6}', 'r6');
COMMIT;
SELECT 'commit-reported-committed', json_extract(idem_last_claim('L'), '$.key') = 'r6' AND json_type(idem_last_claim('L'), '$.committed') = 'true';

-- ---------------------------------------------------------------- ROLLBACK TO forgets what it undid, keeps what it did not
BEGIN;
SAVEPOINT a;
INSERT INTO L(tenant, conversation, tool, args, key) VALUES ('t', 'c', 'x', '{"r":7}', 'r7');
SAVEPOINT b;
CREATE TABLE sp_t(x); INSERT INTO sp_t VALUES (1);
SELECT 'before-rollback-to', json_extract(idem_last_claim('L'), '$.key') = 'r7';
ROLLBACK TO b;
SELECT 'rollback-to-later-keeps', json_extract(idem_last_claim('L'), '$.key') = 'r7';
ROLLBACK TO a;
SELECT 'rollback-to-forgets', idem_last_claim('L') IS NULL;
SELECT 'rollback-to-row-gone', (SELECT count(*) FROM L_rows WHERE key = 'r7') = 0;
-- the row id may be used again: the old token does not name the new row
INSERT INTO L(tenant, conversation, tool, args, key) VALUES ('t', 'c', 'x', '{"r":8}', 'r8');
SELECT 'reinsert-reported', json_extract(idem_last_claim('L'), '$.key') = 'r8';
COMMIT;

-- ---------------------------------------------------------------- a failed COMMIT
PRAGMA foreign_keys = ON;
CREATE TABLE parent(id INTEGER PRIMARY KEY);
CREATE TABLE child(pid REFERENCES parent(id) DEFERRABLE INITIALLY DEFERRED);
BEGIN;
INSERT INTO L(tenant, conversation, tool, args, key) VALUES ('t', 'c', 'x', '{"r":9}', 'r9');
INSERT INTO child VALUES (42);
SELECT 'commit-fails', errmsg('COMMIT') = 'FOREIGN KEY constraint failed';
-- the transaction is still open: the claim is there, not committed
SELECT 'failed-commit-uncommitted', json_extract(idem_last_claim('L'), '$.key') = 'r9' AND json_type(idem_last_claim('L'), '$.committed') = 'false';
ROLLBACK;
SELECT 'failed-commit-forgets', idem_last_claim('L') IS NULL;
PRAGMA foreign_keys = OFF;

-- ---------------------------------------------------------------- a failed multi-row INSERT inside a transaction
BEGIN;
SELECT 'multi-row-taken-fails', errmsg('INSERT INTO L(tenant, conversation, tool, args, key) VALUES (''t'', ''c'', ''x'', ''{"r":10}'', ''r10''), (''t'', ''c'', ''x'', ''{}'', ''held'')')
       GLOB 'idempotency: key "held" of tenant "t" in ledger L is taken: *';
-- whatever SQLite kept of the statement, the answer matches the database
SELECT 'multi-row-taken-truthful',
       CASE WHEN (SELECT count(*) FROM L_rows WHERE key = 'r10') = 0 THEN idem_last_claim('L') IS NULL
            ELSE json_extract(idem_last_claim('L'), '$.token') = (SELECT token FROM L WHERE key = 'r10') END;
ROLLBACK;
SELECT 'multi-row-taken-rolled-back', idem_last_claim('L') IS NULL;

-- ---------------------------------------------------------------- settled: still reported; taken over or deleted: forgotten
INSERT INTO L(tenant, conversation, tool, args, key) VALUES ('t', 'c', 'x', '{"r":11}', 'r11');
SELECT idem_settle('L', (SELECT token FROM L WHERE key = 'r11'), 'succeeded', NULL);
SELECT 'settled-still-reported', json_extract(idem_last_claim('L'), '$.key') = 'r11';
DELETE FROM L WHERE key = 'r11';
SELECT 'deleted-forgotten', idem_last_claim('L') IS NULL;
CREATE VIRTUAL TABLE Z USING idempotency(lease_seconds=0);
INSERT INTO Z(tenant, conversation, tool, args, effect, key) VALUES ('t', 'c', 'x', '{}', 'local', 'z1');
SELECT 'z-reported', json_extract(idem_last_claim('Z'), '$.key') = 'z1';
SELECT 'z-taken-over', json_extract(idem_claim('Z', 't', 'c', 'x', '{}', 'local', 'z1'), '$.attempt') = 2;
SELECT 'taken-over-forgotten', idem_last_claim('Z') IS NULL;
-- each ledger keeps its own
SELECT 'other-ledger-unaffected', idem_last_claim('L') IS NULL AND json_extract(idem_claim('L', 't', 'c', 'x', '{}', 'external', 'held'), '$.decision') = 'in_progress';
