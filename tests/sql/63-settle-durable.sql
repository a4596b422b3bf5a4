-- sqltest: file
-- The answer of idem_settle and idem_resolve says in "durable" whether the
-- write was synced when the call returned, or, inside the caller's
-- transaction, whether the caller's COMMIT syncs it: the meaning of
-- "durable" in idem_claim's admitted answer. An autocommit settle of an
-- external claim in WAL at synchronous=FULL commits at NORMAL and rides on
-- the next synced commit (docs/design.md, "A settle rides on the next
-- synced commit"), so it is not durable when it returns; a local claim's
-- settle is never lowered. Under dqlite "durable" rests on the Raft
-- quorum, known only for the caller's COMMIT ("durability" says so).

SELECT sqltest_clock(1700000000000);
CREATE VIRTUAL TABLE L USING idempotency;
PRAGMA journal_mode = WAL;
SELECT 'wal', (SELECT journal_mode FROM pragma_journal_mode) = 'wal';

-- ---------------------------------------------------------------- WAL, FULL, autocommit
PRAGMA synchronous = FULL;
SELECT 'wal-full-claim-durable', json_extract(idem_claim('L', 't', 'c', 'x', '{}', 'external', 'w1'), '$.durable') = 1;
SELECT 'wal-full-external-settle', idem_settle('L', (SELECT token FROM L WHERE key = 'w1'), 'succeeded', '{"r":1}')
       = '{"key":"w1","status":"succeeded","attempt":1,"durable":false,"settled_at":1700000000000,"members":[]}';
SELECT 'wal-full-set-back', (SELECT synchronous FROM pragma_synchronous) = 2;
SELECT 'wal-full-external-unknown-claim', json_extract(idem_claim('L', 't', 'c', 'x', '{}', 'external', 'w2'), '$.durable') = 1;
SELECT 'wal-full-external-unknown', idem_settle('L', (SELECT token FROM L WHERE key = 'w2'), 'unknown', '{"why":"timeout"}')
       = '{"key":"w2","status":"unknown","attempt":1,"durable":false,"settled_at":1700000000000,"members":[]}';
SELECT 'wal-full-external-resolve', idem_resolve('L', 't', 'w2', 'failed', '{"code":402}')
       = '{"key":"w2","status":"failed","attempt":1,"durable":false,"settled_at":1700000000000,"members":[]}';
SELECT 'wal-full-local-settle-claim', json_extract(idem_claim('L', 't', 'c', 'x', '{}', 'local', 'w3'), '$.durable') = 1;
SELECT 'wal-full-local-settle', idem_settle('L', (SELECT token FROM L WHERE key = 'w3'), 'succeeded', NULL)
       = '{"key":"w3","status":"succeeded","attempt":1,"durable":true,"settled_at":1700000000000,"members":[]}';
SELECT 'wal-full-local-release-claim', json_extract(idem_claim('L', 't', 'c', 'x', '{}', 'local', 'w4'), '$.durable') = 1;
SELECT 'wal-full-local-release', idem_settle('L', (SELECT token FROM L WHERE key = 'w4'), 'released', NULL)
       = '{"key":"w4","status":"released","attempt":1,"durable":true,"settled_at":1700000000000,"members":[]}';

-- ---------------------------------------------------------------- WAL, FULL, the caller's transaction
BEGIN;
SELECT 'txn-full-external-settle-claim', json_extract(idem_claim('L', 't', 'c', 'x', '{}', 'external', 't1'), '$.durable') = 1;
SELECT 'txn-full-external-settle', idem_settle('L', (SELECT token FROM L WHERE key = 't1'), 'succeeded', NULL)
       = '{"key":"t1","status":"succeeded","attempt":1,"durable":true,"settled_at":1700000000000,"members":[]}';
SELECT 'txn-full-local-settle-claim', json_extract(idem_claim('L', 't', 'c', 'x', '{}', 'local', 't2'), '$.durable') = 1;
SELECT 'txn-full-local-settle', idem_settle('L', (SELECT token FROM L WHERE key = 't2'), 'failed', '{"e":1}')
       = '{"key":"t2","status":"failed","attempt":1,"durable":true,"settled_at":1700000000000,"members":[]}';
COMMIT;
SELECT 'txn-full-claim-claim', json_extract(idem_claim('L', 't', 'c', 'x', '{}', 'external', 't3'), '$.durable') = 1;
SELECT 'txn-full-claim', idem_settle('L', (SELECT token FROM L WHERE key = 't3'), 'unknown', NULL) IS NOT NULL;
BEGIN;
SELECT 'txn-full-resolve', idem_resolve('L', 't', 't3', 'succeeded', NULL)
       = '{"key":"t3","status":"succeeded","attempt":1,"durable":true,"settled_at":1700000000000,"members":[]}';
COMMIT;
-- a settle that starts outside a write transaction reads synchronous again,
-- not the value a claim kept for a transaction that was rolled back (a
-- ROLLBACK leaves the data version as it was)
SELECT 'rollback-kept-claim', json_extract(idem_claim('L', 't', 'c', 'x', '{}', 'local', 'r1'), '$.durable') = 1;
BEGIN;
SELECT 'rollback-txn-claim', json_extract(idem_claim('L', 't', 'c', 'x', '{}', 'local', 'r2'), '$.durable') = 1;
ROLLBACK;
PRAGMA synchronous = OFF;
SELECT 'rollback-then-off-settle', idem_settle('L', (SELECT token FROM L WHERE key = 'r1'), 'succeeded', NULL)
       = '{"key":"r1","status":"succeeded","attempt":1,"durable":false,"settled_at":1700000000000,"members":[]}';

-- ---------------------------------------------------------------- WAL, EXTRA, NORMAL, OFF
PRAGMA synchronous = EXTRA;
SELECT 'wal-extra-external-settle-claim', json_extract(idem_claim('L', 't', 'c', 'x', '{}', 'external', 'e1'), '$.durable') = 1;
SELECT 'wal-extra-external-settle', idem_settle('L', (SELECT token FROM L WHERE key = 'e1'), 'succeeded', NULL)
       = '{"key":"e1","status":"succeeded","attempt":1,"durable":true,"settled_at":1700000000000,"members":[]}';
SELECT 'wal-extra-left-alone', (SELECT synchronous FROM pragma_synchronous) = 3;
PRAGMA synchronous = NORMAL;
SELECT 'wal-normal-external-settle-claim', json_extract(idem_claim('L', 't', 'c', 'x', '{}', 'external', 'n1'), '$.durable') = 0;
SELECT 'wal-normal-external-settle', idem_settle('L', (SELECT token FROM L WHERE key = 'n1'), 'succeeded', NULL)
       = '{"key":"n1","status":"succeeded","attempt":1,"durable":false,"settled_at":1700000000000,"members":[]}';
SELECT 'wal-normal-local-settle-claim', json_extract(idem_claim('L', 't', 'c', 'x', '{}', 'local', 'n2'), '$.durable') = 0;
SELECT 'wal-normal-local-settle', idem_settle('L', (SELECT token FROM L WHERE key = 'n2'), 'succeeded', NULL)
       = '{"key":"n2","status":"succeeded","attempt":1,"durable":false,"settled_at":1700000000000,"members":[]}';
PRAGMA synchronous = OFF;
SELECT 'wal-off-external-settle-claim', json_extract(idem_claim('L', 't', 'c', 'x', '{}', 'external', 'o1'), '$.durable') = 0;
SELECT 'wal-off-external-settle', idem_settle('L', (SELECT token FROM L WHERE key = 'o1'), 'succeeded', NULL)
       = '{"key":"o1","status":"succeeded","attempt":1,"durable":false,"settled_at":1700000000000,"members":[]}';
SELECT 'wal-off-left-alone', (SELECT synchronous FROM pragma_synchronous) = 0;

-- ---------------------------------------------------------------- rollback journal
PRAGMA journal_mode = DELETE;
SELECT 'delete', (SELECT journal_mode FROM pragma_journal_mode) = 'delete';
PRAGMA synchronous = FULL;
SELECT 'delete-full-external-settle-claim', json_extract(idem_claim('L', 't', 'c', 'x', '{}', 'external', 'd1'), '$.durable') = 1;
SELECT 'delete-full-external-settle', idem_settle('L', (SELECT token FROM L WHERE key = 'd1'), 'succeeded', NULL)
       = '{"key":"d1","status":"succeeded","attempt":1,"durable":true,"settled_at":1700000000000,"members":[]}';
SELECT 'delete-full-external-resolve-claim', json_extract(idem_claim('L', 't', 'c', 'x', '{}', 'external', 'd2'), '$.durable') = 1;
SELECT 'delete-full-external-resolve', idem_settle('L', (SELECT token FROM L WHERE key = 'd2'), 'unknown', NULL)
       = '{"key":"d2","status":"unknown","attempt":1,"durable":true,"settled_at":1700000000000,"members":[]}';
SELECT 'delete-full-external-resolved', idem_resolve('L', 't', 'd2', 'released', '{"sent":false}')
       = '{"key":"d2","status":"released","attempt":1,"durable":true,"settled_at":1700000000000,"members":[]}';
SELECT 'delete-full-local-settle-claim', json_extract(idem_claim('L', 't', 'c', 'x', '{}', 'local', 'd3'), '$.durable') = 1;
SELECT 'delete-full-local-settle', idem_settle('L', (SELECT token FROM L WHERE key = 'd3'), 'succeeded', NULL)
       = '{"key":"d3","status":"succeeded","attempt":1,"durable":true,"settled_at":1700000000000,"members":[]}';
PRAGMA synchronous = NORMAL;
SELECT 'delete-normal-external-settle-claim', json_extract(idem_claim('L', 't', 'c', 'x', '{}', 'external', 'd4'), '$.durable') = 0;
SELECT 'delete-normal-external-settle', idem_settle('L', (SELECT token FROM L WHERE key = 'd4'), 'succeeded', NULL)
       = '{"key":"d4","status":"succeeded","attempt":1,"durable":false,"settled_at":1700000000000,"members":[]}';
PRAGMA synchronous = FULL;

-- ---------------------------------------------------------------- memory and temporary databases
-- the ledger's own schema counts: FULL on a database with no file is not durable
ATTACH ':memory:' AS mem;
CREATE VIRTUAL TABLE mem.M USING idempotency;
PRAGMA mem.synchronous = FULL;
SELECT 'memory-external-settle-claim', json_extract(idem_claim('M', 't', 'c', 'x', '{}', 'external', 'm1'), '$.durable') = 0;
SELECT 'memory-external-settle', idem_settle('M', (SELECT token FROM mem.M WHERE key = 'm1'), 'succeeded', NULL)
       = '{"key":"m1","status":"succeeded","attempt":1,"durable":false,"settled_at":1700000000000,"members":[]}';
SELECT 'memory-local-settle-claim', json_extract(idem_claim('M', 't', 'c', 'x', '{}', 'local', 'm2'), '$.durable') = 0;
SELECT 'memory-local-settle', idem_settle('M', (SELECT token FROM mem.M WHERE key = 'm2'), 'succeeded', NULL)
       = '{"key":"m2","status":"succeeded","attempt":1,"durable":false,"settled_at":1700000000000,"members":[]}';
BEGIN;
SELECT 'memory-txn-settle-claim', json_extract(idem_claim('M', 't', 'c', 'x', '{}', 'external', 'm3'), '$.durable') = 0;
SELECT 'memory-txn-settle', idem_settle('M', (SELECT token FROM mem.M WHERE key = 'm3'), 'succeeded', NULL)
       = '{"key":"m3","status":"succeeded","attempt":1,"durable":false,"settled_at":1700000000000,"members":[]}';
COMMIT;
ATTACH '' AS tmp;
CREATE VIRTUAL TABLE tmp.T USING idempotency;
PRAGMA tmp.synchronous = FULL;
SELECT 'temp-file-external-settle-claim', json_extract(idem_claim('T', 't', 'c', 'x', '{}', 'external', 'f1'), '$.durable') = 0;
SELECT 'temp-file-external-settle', idem_settle('T', (SELECT token FROM tmp.T WHERE key = 'f1'), 'succeeded', NULL)
       = '{"key":"f1","status":"succeeded","attempt":1,"durable":false,"settled_at":1700000000000,"members":[]}';
SELECT 'temp-file-local-settle-claim', json_extract(idem_claim('T', 't', 'c', 'x', '{}', 'local', 'f2'), '$.durable') = 0;
SELECT 'temp-file-local-settle', idem_settle('T', (SELECT token FROM tmp.T WHERE key = 'f2'), 'succeeded', NULL)
       = '{"key":"f2","status":"succeeded","attempt":1,"durable":false,"settled_at":1700000000000,"members":[]}';

-- ---------------------------------------------------------------- dqlite
-- recognised by the VFS name (the runner's "dqlite-sqltest"), at the
-- leader's synchronous=OFF: inside a transaction durable on the quorum,
-- outside one (require_transaction=0) unknown, as an admitted claim says
ATTACH 'file:dq?mode=memory&vfs=dqlite-sqltest' AS dq;
CREATE VIRTUAL TABLE dq.D USING idempotency(require_transaction=0);
PRAGMA dq.synchronous = OFF;
BEGIN;
SELECT 'dqlite-txn-claim', json_extract(idem_claim('D', 't', 'c', 'x', '{}', 'external', 'q1'), '$.durability') = 'raft-quorum';
SELECT 'dqlite-txn-settle', idem_settle('D', (SELECT token FROM dq.D WHERE key = 'q1'), 'unknown', NULL)
       = '{"key":"q1","status":"unknown","attempt":1,"durable":true,"durability":"raft-quorum","settled_at":1700000000000,"members":[]}';
COMMIT;
SELECT 'dqlite-autocommit-resolve', idem_resolve('D', 't', 'q1', 'succeeded', NULL)
       = '{"key":"q1","status":"succeeded","attempt":1,"durable":false,"durability":"unknown","settled_at":1700000000000,"members":[]}';
SELECT 'dqlite-autocommit-local-settle-claim', json_extract(idem_claim('D', 't', 'c', 'x', '{}', 'local', 'q2'), '$.durability') = 'unknown';
SELECT 'dqlite-autocommit-local-settle', idem_settle('D', (SELECT token FROM dq.D WHERE key = 'q2'), 'succeeded', NULL)
       = '{"key":"q2","status":"succeeded","attempt":1,"durable":false,"durability":"unknown","settled_at":1700000000000,"members":[]}';
BEGIN;
SELECT 'dqlite-txn-local-settle-claim', json_extract(idem_claim('D', 't', 'c', 'x', '{}', 'local', 'q3'), '$.durable') = 1;
SELECT 'dqlite-txn-local-settle', idem_settle('D', (SELECT token FROM dq.D WHERE key = 'q3'), 'succeeded', NULL)
       = '{"key":"q3","status":"succeeded","attempt":1,"durable":true,"durability":"raft-quorum","settled_at":1700000000000,"members":[]}';
COMMIT;

-- ---------------------------------------------------------------- what was written
SELECT 'main-rows-settled', (SELECT group_concat(key || '=' || status, ',') FROM (SELECT key, status FROM L ORDER BY key))
       = 'd1=succeeded,d2=released,d3=succeeded,d4=succeeded,e1=succeeded,n1=succeeded,n2=succeeded,o1=succeeded,r1=succeeded,t1=succeeded,t2=failed,t3=succeeded,w1=succeeded,w2=failed,w3=succeeded,w4=released';
SELECT 'main-full-at-end', (SELECT synchronous FROM pragma_synchronous) = 2;
SELECT 'file-integrity', (SELECT integrity_check FROM pragma_integrity_check) = 'ok';
SELECT sqltest_clock(NULL);
