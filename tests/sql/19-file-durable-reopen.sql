-- sqltest: file
-- A ledger in a database file: "durable" follows synchronous (true only at
-- FULL or above, on a file), and a ledger created through one schema name
-- is reconnected through another (the file attached again, then detached).

SELECT sqltest_clock(1700000000000);
CREATE VIRTUAL TABLE L USING idempotency;
SELECT 'is-a-file', (SELECT file FROM pragma_database_list WHERE name = 'main') <> '';

PRAGMA synchronous = OFF;
WITH c(j) AS MATERIALIZED (SELECT idem_claim('L', 't', 'c', 'x', '{}', 'external', 's-off'))
SELECT 'sync-off-admitted', json_extract(j, '$.decision') = 'admitted' FROM c
UNION ALL SELECT 'sync-off-not-durable', json_type(j, '$.durable') = 'false' FROM c
UNION ALL SELECT 'sync-off-committed', json_type(j, '$.committed') = 'true' FROM c;
PRAGMA synchronous = NORMAL;
SELECT 'sync-normal-not-durable', json_type(idem_claim('L', 't', 'c', 'x', '{}', 'external', 's-normal'), '$.durable') = 'false';
PRAGMA synchronous = FULL;
WITH c(j) AS MATERIALIZED (SELECT idem_claim('L', 't', 'c', 'x', '{}', 'external', 's-full'))
SELECT 'sync-full-durable', json_type(j, '$.durable') = 'true' FROM c
UNION ALL SELECT 'sync-full-keyset', (SELECT group_concat(key, ',') FROM (SELECT key FROM json_each(j) ORDER BY key))
       = 'attempt,committed,decision,durable,effect,key,lease_until,note,token' FROM c;
SELECT 'sync-full-local-durable', json_type(idem_claim('L', 't', 'c', 'x', '{}', 'local', 's-full-local'), '$.durable') = 'true';
PRAGMA synchronous = EXTRA;
SELECT 'sync-extra-durable', json_type(idem_claim('L', 't', 'c', 'x', '{}', 'external', 's-extra'), '$.durable') = 'true';
-- inside a transaction: durable as the setting says, committed false
PRAGMA synchronous = FULL;
BEGIN;
WITH c(j) AS MATERIALIZED (SELECT idem_claim('L', 't', 'c', 'x', '{}', 'external', 's-tx'))
SELECT 'tx-durable', json_type(j, '$.durable') = 'true' FROM c
UNION ALL SELECT 'tx-not-committed', json_type(j, '$.committed') = 'false' FROM c;
COMMIT;
-- the durability of the ledger's own schema counts, not main's
ATTACH ':memory:' AS mem;
CREATE VIRTUAL TABLE mem.M USING idempotency;
SELECT 'memory-attached-not-durable', json_type(idem_claim('M', 't', 'c', 'x', '{}'), '$.durable') = 'false';
PRAGMA main.synchronous = OFF;
PRAGMA mem.synchronous = FULL;
SELECT 'main-off-not-durable', json_type(idem_claim('L', 't', 'c', 'x', '{}', 'external', 's-off2'), '$.durable') = 'false';
SELECT 'memory-full-still-not-durable', json_type(idem_claim('M', 't', 'c', 'y', '{}'), '$.durable') = 'false';
PRAGMA main.synchronous = FULL;
-- a replay or in_progress carries no durable field
SELECT 'in-progress-no-durable', json_type(idem_claim('L', 't', 'c', 'x', '{}', 'external', 's-full'), '$.durable') IS NULL;
SELECT 'file-integrity', (SELECT integrity_check FROM pragma_integrity_check) = 'ok';

-- ---------------------------------------------------------------- reconnect through another schema name
ATTACH (SELECT file FROM pragma_database_list WHERE name = 'main') AS again;
CREATE VIRTUAL TABLE again.X USING idempotency(lease_seconds=7, max_attempts=2);
INSERT INTO again.X(tenant, conversation, tool, args, key) VALUES ('t', 'c', 'x', '{}', 'x1');
SELECT 'again-insert', changes() = 1 AND (SELECT count(*) FROM again.X) = 1;
INSERT INTO again.X(tenant, conversation, tool, args, effect, key) VALUES ('t', 'c', 'x', '{}', 'local', 'x2');
DETACH again;
-- main reads the file's new schema and connects the ledger (format checked, options read back)
SELECT 'reconnect-rows', (SELECT count(*) FROM X) = 2;
SELECT 'reconnect-meta', (SELECT group_concat(k || '=' || v, ',') FROM (SELECT k, v FROM X_meta WHERE k <> 'id' ORDER BY k))
       = 'format=5,lease_seconds=7,max_args_bytes=1048576,max_attempts=2,require_transaction=0,retention_seconds=0,single_tenant=0,target_window_seconds=86400';
SELECT 'reconnect-in-progress', json_extract(idem_claim('X', 't', 'c', 'x', '{}', 'external', 'x1'), '$.decision') = 'in_progress';
SELECT 'reconnect-lease-option', json_extract(idem_claim('X', 't', 'c', 'x', '{}', 'external', 'x3'), '$.lease_until') = 1700000007000;
SELECT 'reconnect-settle', json_extract(idem_settle('X', (SELECT token FROM X WHERE key = 'x1'), 'succeeded', '{"r":1}'), '$.status') = 'succeeded';
SELECT 'reconnect-replay', json(json_extract(idem_claim('X', 't', 'c', 'x', '{}', 'external', 'x1'), '$.result')) = '{"r":1}';
-- max_attempts=2 read back: attempt 1 expires, take-over to 2, expires, then failed
SELECT sqltest_clock(1700000010000);
SELECT 'reconnect-takeover', json_extract(idem_claim('X', 't', 'c', 'x', '{}', 'local', 'x2'), '$.attempt') = 2;
SELECT sqltest_clock(1700000020000);
SELECT 'reconnect-max-attempts', json_extract(idem_claim('X', 't', 'c', 'x', '{}', 'local', 'x2'), '$.error.reason') = 'max_attempts';
SELECT 'reconnect-defense', errcode('UPDATE X_rows SET args = ''[]''') = 1811;
-- the ledger created in main is still there after the attach/detach
SELECT 'main-ledger-intact', (SELECT count(*) FROM L) = 7;
-- a reconnected ledger is dropped only when no row is live
SELECT 'reconnect-drop-refused', errcode('DROP TABLE X') = 19;
SELECT 'reconnect-ext-unknown', (SELECT status FROM X WHERE key = 'x3') = 'unknown';
SELECT 'file-integrity-end', (SELECT integrity_check FROM pragma_integrity_check) = 'ok';
SELECT sqltest_clock(NULL);
