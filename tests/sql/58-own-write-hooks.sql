-- sqltest: file
-- The extension's own writes that would commit themselves (a fresh claim,
-- a renewal, a settle, a resolve, a purge in autocommit) commit at the
-- release of their savepoint,
-- after idem_own_write() is false again: an application's WAL hook that
-- writes the rows table after a commit is refused like any plain SQL.
PRAGMA journal_mode = WAL;
CREATE VIRTUAL TABLE L USING idempotency(lease_seconds=60);
CREATE TEMP TABLE msg(v);
INSERT INTO msg VALUES ('idempotency: the rows of ledger L are written only by the extension (idem_claim, idem_settle, idem_resolve, idem_purge, or INSERT INTO and DELETE FROM the ledger table); plain SQL may read them');
-- sqltest: wal-hook UPDATE L_rows SET status = 'succeeded', result = '{"forged":1}' WHERE status = 'claimed'
SELECT 'claim', json_extract(idem_claim('L', 't', 'c', 'x', '{}', 'external', 'k1'), '$.decision') = 'admitted';
SELECT 'claim-hook-refused', sqltest_wal_hook() = (SELECT v FROM msg);
SELECT 'claim-still-claimed', (SELECT status || ',' || quote(result) FROM L_rows WHERE "key" = 'k1') = 'claimed,NULL';
SELECT 'renew', idem_renew('L', (SELECT token FROM L WHERE key = 'k1'), 120) > 0;
SELECT 'renew-hook-refused', sqltest_wal_hook() = (SELECT v FROM msg);
SELECT 'renew-still-claimed', (SELECT status FROM L_rows WHERE "key" = 'k1') = 'claimed';
-- a settle, a resolve and a purge in autocommit commit at the release of
-- the savepoint their own write runs under (ledger_storage.c, own_step_done)
-- sqltest: wal-hook UPDATE L_rows SET result = '{"forged":1}'
SELECT 'settle', json_extract(idem_settle('L', (SELECT token FROM L WHERE key = 'k1'), 'unknown', '{"e":1}'), '$.status') = 'unknown';
SELECT 'settle-hook-refused', sqltest_wal_hook() = (SELECT v FROM msg);
-- sqltest: wal-hook UPDATE L_rows SET result = '{"forged":1}'
SELECT 'resolve', json_extract(idem_resolve('L', 't', 'k1', 'failed', '{"e":2}'), '$.status') = 'failed';
SELECT 'resolve-hook-refused', sqltest_wal_hook() = (SELECT v FROM msg);
SELECT 'replay-is-the-resolve', json_extract(idem_claim('L', 't', 'c', 'x', '{}', 'external', 'k1'), '$.error') = '{"e":2}';
SELECT 'k2', json_extract(idem_settle('L', json_extract(idem_claim('L', 't', 'c', 'x', '{}', 'external', 'k2'), '$.token'), 'succeeded', '{}'), '$.status') = 'succeeded';
-- sqltest: wal-hook INSERT INTO L_rows(tenant, "key", conversation, tool, args, effect, status, attempt, token, created_at, updated_at, lease_until) VALUES ('t', 'forged', 'c', 'x', '{}', 'external', 'succeeded', 1, 1, 0, 0, 0)
SELECT 'purge', idem_purge('L', 0) >= 0;
SELECT 'purge-hook-refused', sqltest_wal_hook() = (SELECT v FROM msg);
SELECT 'nothing-forged', (SELECT count(*) FROM L_rows WHERE "key" = 'forged') = 0;
