-- sqltest: file
-- An application's commit hook runs inside the commit of each of the
-- extension's autocommit writes (a fresh claim, a renewal, a settle, a
-- resolve, a purge): the commit is the release of the own write's
-- savepoint, so idem_own_write() is false by then, and a hook that writes
-- the shadow tables is refused like any plain SQL: nothing is forged (the
-- WAL-hook twin is 58-own-write-hooks.sql). SQLite's contract asks a commit
-- hook not to change the connection; one that does all the same, and fails,
-- takes the commit it ran in down with it (docs/design.md, "One writer"),
-- so each operation's own effect is not checked here, only the refusal.
PRAGMA journal_mode = WAL;
CREATE VIRTUAL TABLE L USING idempotency(lease_seconds=60);
CREATE TEMP TABLE msg(v);
INSERT INTO msg VALUES ('idempotency: the rows of ledger L are written only by the extension (idem_claim, idem_settle, idem_resolve, idem_purge, or INSERT INTO and DELETE FROM the ledger table); plain SQL may read them');
-- a hook that writes nothing of the ledger's while the claims are made
-- sqltest: commit-hook SELECT 1
SELECT 'setup-1', json_extract(idem_claim('L', 't', 'c', 'x', '{}', 'external', 'k1'), '$.decision') = 'admitted';
SELECT 'setup-2', json_extract(idem_claim('L', 't', 'c', 'x', '{}', 'external', 'k2'), '$.decision') = 'admitted';
SELECT 'setup-3', json_extract(idem_settle('L', (SELECT token FROM L WHERE key = 'k2'), 'unknown', '{"e":1}'), '$.status') = 'unknown';
SELECT 'setup-4', json_extract(idem_settle('L', json_extract(idem_claim('L', 't', 'c', 'x', '{}', 'external', 'k3'), '$.token'), 'succeeded', '{}'), '$.status') = 'succeeded';
SELECT 'setup-hook-ran', sqltest_commit_hook() IS NULL;
-- sqltest: commit-hook UPDATE L_rows SET result = '{"forged":1}'
SELECT 'claim', json_extract(idem_claim('L', 't', 'c', 'x', '{}', 'external', 'k4'), '$.decision') = 'admitted';
SELECT 'claim-hook-refused', sqltest_commit_hook() = (SELECT v FROM msg);
SELECT 'renew', idem_renew('L', (SELECT token FROM L WHERE key = 'k1'), 120) > 0;
SELECT 'renew-hook-refused', sqltest_commit_hook() = (SELECT v FROM msg);
SELECT 'settle', json_extract(idem_settle('L', (SELECT token FROM L WHERE key = 'k1'), 'succeeded', '{"ok":1}'), '$.status') = 'succeeded';
SELECT 'settle-hook-refused', sqltest_commit_hook() = (SELECT v FROM msg);
SELECT 'resolve', json_extract(idem_resolve('L', 't', 'k2', 'failed', '{"e":2}'), '$.status') = 'failed';
SELECT 'resolve-hook-refused', sqltest_commit_hook() = (SELECT v FROM msg);
-- sqltest: commit-hook INSERT INTO L_rows(tenant, "key", conversation, tool, args, effect, status, attempt, token, created_at, updated_at, lease_until) VALUES ('t', 'forged', 'c', 'x', '{}', 'external', 'succeeded', 1, 1, 0, 0, 0)
SELECT 'purge', idem_purge('L', 0) >= 0;
SELECT 'purge-hook-refused', sqltest_commit_hook() = (SELECT v FROM msg);
SELECT 'nothing-forged', (SELECT count(*) FROM L_rows WHERE "key" = 'forged' OR result = '{"forged":1}') = 0;
