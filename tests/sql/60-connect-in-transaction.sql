-- sqltest: file
-- A ledger connected inside a deferred BEGIN (the first use on a fresh
-- connection, or after a schema reset disconnected it) reads its file at
-- its first use, once its statement or function holds the lock, not in
-- xConnect: what it reads there (options, identity, missing shadow
-- tables) must still hold for every path. A rolled-back schema change
-- resets the connection's schema, which disconnects its ledgers; the next
-- statement in a deferred BEGIN connects them again with no lock held.
-- (tests/c/wait.c shows, with two processes, that this makes every
-- operation wait for busy_timeout.)

SELECT sqltest_clock(1700000000000);
CREATE VIRTUAL TABLE L USING idempotency(lease_seconds=77, max_attempts=2);
CREATE TABLE orders(id INTEGER PRIMARY KEY, tenant, op_key);
SELECT idem_guard('L', 'orders', 'op_key', 'tenant');

-- ---------------------------------------------------------------- SELECT first (xFilter reads the file)
BEGIN; CREATE TABLE junk(x); ROLLBACK;
BEGIN;
SELECT 'select-first-empty', count(*) = 0 FROM L;
SELECT 'select-first-claim-lease', json_extract(idem_claim('L', 't', 'c', 'x', '{"n":1}', 'external'), '$.lease_until') = 1700000000000 + 77000;
COMMIT;

-- ---------------------------------------------------------------- a function first (it takes the write lock, then reads)
BEGIN; CREATE TABLE junk(x); ROLLBACK;
BEGIN;
SELECT 'claim-first-lease', json_extract(idem_claim('L', 't', 'c', 'x', '{"n":2}', 'external'), '$.lease_until') = 1700000000000 + 77000;
COMMIT;
-- max_attempts=2 was read: the second expiry of a local claim fails it
SELECT json_extract(idem_claim('L', 't', 'c', 'x', '{}', 'local', 'poison'), '$.decision');
SELECT sqltest_clock(1700000100000);
BEGIN; CREATE TABLE junk(x); ROLLBACK;
BEGIN;
SELECT 'claim-first-take-over', json_extract(idem_claim('L', 't', 'c', 'x', '{}', 'local', 'poison'), '$.attempt') = 2;
COMMIT;
SELECT sqltest_clock(1700000200000);
BEGIN; CREATE TABLE junk(x); ROLLBACK;
BEGIN;
SELECT 'claim-first-max-attempts', json_extract(idem_claim('L', 't', 'c', 'x', '{}', 'local', 'poison'), '$.status') = 'failed';
COMMIT;
SELECT sqltest_clock(1700000000000);
BEGIN; CREATE TABLE junk(x); ROLLBACK;
BEGIN;
SELECT 'settle-first', json_extract(idem_settle('L', (SELECT token FROM L WHERE args = '{"n":2}'), 'succeeded', '{}'), '$.status') = 'succeeded';
COMMIT;

-- ---------------------------------------------------------------- INSERT first (xUpdate reads the file)
BEGIN; CREATE TABLE junk(x); ROLLBACK;
BEGIN;
INSERT INTO L(tenant, conversation, tool, args, effect, key) VALUES ('t', 'c', 'x', '{"n":3}', 'local', 'op-3');
SELECT 'insert-first-lease', lease_until - created_at = 77000 FROM L WHERE key = 'op-3';
COMMIT;

-- ---------------------------------------------------------------- idem_last_claim first (reads, takes no write lock)
BEGIN; CREATE TABLE junk(x); ROLLBACK;
BEGIN;
SELECT 'last-claim-first', json_extract(idem_last_claim('L'), '$.key') = 'op-3';
-- the transaction read first: with no other writer the claim's lock is taken at once
SELECT 'claim-after-read', json_extract(idem_claim('L', 't', 'c', 'x', '{"n":4}', 'external'), '$.decision') = 'admitted';
COMMIT;

-- ---------------------------------------------------------------- the guard trigger first (it finds the ledger by its identity)
BEGIN; CREATE TABLE junk(x); ROLLBACK;
BEGIN;
INSERT INTO orders(tenant, op_key) VALUES ('t', 'op-3');
SELECT 'guard-trigger-first', count(*) = 1 FROM orders WHERE op_key = 'op-3';
COMMIT;
BEGIN; CREATE TABLE junk(x); ROLLBACK;
BEGIN;
-- expect-error: idem_guard: insert into "orders" refused: key "op-9" needs a live claim of ledger L; there is no claim for it
INSERT INTO orders(tenant, op_key) VALUES ('t', 'op-9');
COMMIT;

-- ---------------------------------------------------------------- DROP TABLE first (xDestroy counts what is held)
BEGIN; CREATE TABLE junk(x); ROLLBACK;
BEGIN;
SELECT 'drop-first-refused', errmsg('DROP TABLE L') IS NOT NULL;
COMMIT;
SELECT 'drop-first-kept', count(*) = 1 FROM sqlite_schema WHERE name = 'L';

-- ---------------------------------------------------------------- ALTER TABLE RENAME first (the guards move with the identity)
BEGIN; CREATE TABLE junk(x); ROLLBACK;
BEGIN;
ALTER TABLE L RENAME TO L2;
COMMIT;
SELECT 'rename-first-guard', json_extract(idem_claim('L2', 't', 'c', 'x', '{"n":5}', 'local', 'op-5'), '$.decision') = 'admitted';
INSERT INTO orders(tenant, op_key) VALUES ('t', 'op-5');
SELECT 'rename-first-member', json_extract(idem_settle('L2', (SELECT token FROM L2 WHERE key = 'op-5'), 'succeeded', '{}'), '$.members') = '[{"table":"orders","rowid":2}]';

-- ---------------------------------------------------------------- a missing shadow table, found at the first use
CREATE VIRTUAL TABLE M USING idempotency;
DROP TABLE M_guards;
BEGIN; CREATE TABLE junk(x); ROLLBACK;
BEGIN;
SELECT 'missing-select-first', errmsg('SELECT count(*) FROM M') GLOB 'idempotency: ledger M is missing its shadow table M_guards; *';
COMMIT;
BEGIN; CREATE TABLE junk(x); ROLLBACK;
BEGIN;
SELECT 'missing-claim-first', errmsg('SELECT idem_claim(''M'', ''t'', ''c'', ''x'', ''{}'')')
       = 'idem_claim: ledger M is missing its shadow table M_guards; every operation on it is refused until that is restored from a backup and the database reopened, or the ledger is dropped with DROP TABLE';
COMMIT;
BEGIN; CREATE TABLE junk(x); ROLLBACK;
BEGIN;
SELECT 'missing-insert-first', errmsg('INSERT INTO M(tenant, conversation, tool, args) VALUES (''t'', ''c'', ''x'', ''{}'')') GLOB 'idempotency: ledger M is missing its shadow table M_guards; *';
COMMIT;
DROP TABLE M;
SELECT 'missing-dropped', count(*) = 0 FROM sqlite_schema WHERE name GLOB 'M*';
