-- sqltest: file
-- The extension's own writes that would commit themselves (a fresh claim
-- and a renewal in autocommit) commit at the release of their savepoint,
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
-- (a settle in autocommit that needs no second decision still commits
-- inside its own write: docs/design.md says so; the hook is made harmless)
-- sqltest: wal-hook SELECT 1
SELECT 'settle', json_extract(idem_settle('L', (SELECT token FROM L WHERE key = 'k1'), 'failed', '{"e":1}'), '$.status') = 'failed';
SELECT 'replay-is-the-settle', json_extract(idem_claim('L', 't', 'c', 'x', '{}', 'external', 'k1'), '$.error') = '{"e":1}';
