-- sqltest: file
-- retention_seconds: terminal rows older than N seconds are purged by
-- later admitted claims, a bounded batch per claim, never claimed or
-- unknown rows; time is shifted with sqltest_clock. The option's range is
-- checked at CREATE and again when a file is connected.

-- ---------------------------------------------------------------- the option
CREATE VIRTUAL TABLE d USING idempotency;
SELECT 'default-zero', (SELECT v FROM d_meta WHERE k = 'retention_seconds') = 0;
CREATE VIRTUAL TABLE lo USING idempotency(retention_seconds=0);
CREATE VIRTUAL TABLE hi USING idempotency(retention_seconds=315360000);
SELECT 'bounds-stored', (SELECT v FROM lo_meta WHERE k = 'retention_seconds') = 0 AND (SELECT v FROM hi_meta WHERE k = 'retention_seconds') = 315360000
       AND (SELECT typeof(v) FROM hi_meta WHERE k = 'retention_seconds') = 'integer';
SELECT 'below', errmsg('CREATE VIRTUAL TABLE x1 USING idempotency(retention_seconds=-1)')
       = 'idempotency: retention_seconds must be an integer from 0 to 315360000, got "-1"';
SELECT 'above', errmsg('CREATE VIRTUAL TABLE x1 USING idempotency(retention_seconds=315360001)')
       = 'idempotency: retention_seconds must be an integer from 0 to 315360000, got "315360001"';
SELECT 'not-integer', errmsg('CREATE VIRTUAL TABLE x1 USING idempotency(retention_seconds=ten)')
       = 'idempotency: retention_seconds must be an integer from 0 to 315360000, got "ten"';
SELECT 'twice', errmsg('CREATE VIRTUAL TABLE x1 USING idempotency(retention_seconds=1, retention_seconds=2)')
       = 'idempotency: option retention_seconds is given twice';
SELECT 'nothing-created', (SELECT count(*) FROM sqlite_schema WHERE name LIKE 'x1%') = 0;

-- ---------------------------------------------------------------- which rows go
SELECT sqltest_clock(1700000000000);
CREATE VIRTUAL TABLE R USING idempotency(lease_seconds=10, retention_seconds=100);
WITH k(key, effect) AS (VALUES ('s1', 'external'), ('f1', 'external'), ('r1', 'local'), ('c1', 'external'),
                               ('u1', 'external'), ('e1', 'local'), ('late', 'external'))
SELECT 'setup', count(*) = 7 FROM k WHERE json_extract(idem_claim('R', 't', 'c', 'x', '{}', effect, key), '$.decision') = 'admitted';
SELECT 'setup-settle', json_extract(idem_settle('R', (SELECT token FROM R WHERE key = 's1'), 'succeeded', '{"v":1}'), '$.status') = 'succeeded'
       AND json_extract(idem_settle('R', (SELECT token FROM R WHERE key = 'f1'), 'failed', '{"e":1}'), '$.status') = 'failed'
       AND json_extract(idem_settle('R', (SELECT token FROM R WHERE key = 'r1'), 'released', NULL), '$.status') = 'released'
       AND json_extract(idem_settle('R', (SELECT token FROM R WHERE key = 'u1'), 'unknown', NULL), '$.status') = 'unknown';
-- 'late' is settled 50 s later: old by creation, young by update
SELECT sqltest_clock(1700000050000);
SELECT 'setup-late', json_extract(idem_settle('R', (SELECT token FROM R WHERE key = 'late'), 'succeeded', NULL), '$.status') = 'succeeded';
-- within the window: a replay, and no purge
SELECT sqltest_clock(1700000100000);
SELECT 'window-replay', json_extract(idem_claim('R', 't', 'c', 'x', '{}', 'external', 's1'), '$.decision') = 'replay';
SELECT 'boundary-admitted', json_extract(idem_claim('R', 't', 'c', 'x', '{}', 'external', 'n1'), '$.decision') = 'admitted';
SELECT 'boundary-kept', (SELECT count(*) FROM R_rows) = 8;
-- 1 ms past the window: replays and in_progress answers purge nothing
SELECT sqltest_clock(1700000100001);
SELECT 'replay-no-purge', json_extract(idem_claim('R', 't', 'c', 'x', '{}', 'external', 's1'), '$.decision') = 'replay'
       AND json_extract(idem_claim('R', 't', 'c', 'x', '{}', 'external', 'n1'), '$.decision') = 'in_progress'
       AND json_extract(idem_claim('R', 't', 'c', 'x', '{}', 'external', 'u1'), '$.decision') = 'unknown'
       AND (SELECT count(*) FROM R_rows) = 8;
-- an admitted claim purges the due terminal rows, nothing else
SELECT 'purging-claim', json_extract(idem_claim('R', 't', 'c', 'x', '{}', 'external', 'n2'), '$.decision') = 'admitted';
SELECT 'purged', (SELECT group_concat(key, ',') FROM (SELECT key FROM R ORDER BY key)) = 'c1,e1,late,n1,n2,u1';
SELECT 'kept-stored-states', (SELECT group_concat(key || ':' || status, ',') FROM (SELECT key, status FROM R_rows ORDER BY key))
       = 'c1:claimed,e1:claimed,late:succeeded,n1:claimed,n2:claimed,u1:unknown';
-- the deduplication window has ended for s1: the same call is admitted as new
SELECT 'window-ended', json_extract(idem_claim('R', 't', 'c', 'x', '{}', 'external', 's1'), '$.attempt') = 1;
-- 'late' goes 100 s after its settle, not after its creation
SELECT sqltest_clock(1700000150000);
SELECT 'late-not-yet', json_extract(idem_claim('R', 't', 'c', 'x', '{}', 'external', 'n3'), '$.decision') = 'admitted'
       AND (SELECT count(*) FROM R_rows WHERE key = 'late') = 1;
SELECT sqltest_clock(1700000150001);
SELECT 'late-purged', json_extract(idem_claim('R', 't', 'c', 'x', '{}', 'external', 'n4'), '$.decision') = 'admitted'
       AND (SELECT count(*) FROM R_rows WHERE key = 'late') = 0;
-- much later: claimed and unknown rows are never purged, whatever their age
SELECT sqltest_clock(1800000000000);
SELECT 'old-claimed-unknown-kept', json_extract(idem_claim('R', 't', 'c', 'x', '{}', 'external', 'n5'), '$.decision') = 'admitted'
       AND json_extract(idem_claim('R', 't', 'c', 'x', '{}', 'external', 'n6'), '$.decision') = 'admitted'
       AND (SELECT count(*) FROM R_rows WHERE key IN ('c1', 'u1', 'e1', 'n1', 'n2', 'n3', 'n4', 's1')) = 8;
SELECT 'integrity-r', (SELECT integrity_check FROM pragma_integrity_check) = 'ok';

-- ---------------------------------------------------------------- retention 0 keeps everything
SELECT sqltest_clock(1700000000000);
SELECT 'keep-setup', json_extract(idem_settle('d', json_extract(idem_claim('d', 't', 'c', 'x', '{}'), '$.token'), 'succeeded', NULL), '$.status') = 'succeeded';
SELECT sqltest_clock(2000000000000);
SELECT 'keep-forever', json_extract(idem_claim('d', 't', 'c', 'y', '{}'), '$.decision') = 'admitted' AND (SELECT count(*) FROM d_rows) = 2
       AND json_extract(idem_claim('d', 't', 'c', 'x', '{}'), '$.decision') = 'replay';

-- ---------------------------------------------------------------- bounded batches
-- 40 succeeded rows, all due: each admitted claim deletes at most 16
SELECT sqltest_clock(1700000000000);
CREATE VIRTUAL TABLE B USING idempotency(retention_seconds=10);
CREATE TEMP TABLE n(i INTEGER PRIMARY KEY);
WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < 40) INSERT INTO n SELECT i FROM s;
SELECT 'batch-setup', (SELECT count(*) FROM n WHERE json_extract(idem_settle('B', json_extract(idem_claim('B', 't', 'c', 'x', '{}', 'external', 'old-' || i), '$.token'), 'succeeded', NULL), '$.status') = 'succeeded') = 40;
SELECT sqltest_clock(1700000020000);
SELECT 'batch-1', json_extract(idem_claim('B', 't', 'c', 'x', '{}', 'external', 'new-1'), '$.decision') = 'admitted'
       AND (SELECT count(*) FROM B_rows WHERE key GLOB 'old-*') = 24
       AND (SELECT min(CAST(substr(key, 5) AS INTEGER)) FROM B_rows WHERE key GLOB 'old-*') = 17;
SELECT 'batch-2', json_extract(idem_claim('B', 't', 'c', 'x', '{}', 'external', 'new-2'), '$.decision') = 'admitted'
       AND (SELECT count(*) FROM B_rows WHERE key GLOB 'old-*') = 8;
SELECT 'batch-3', json_extract(idem_claim('B', 't', 'c', 'x', '{}', 'external', 'new-3'), '$.decision') = 'admitted'
       AND (SELECT count(*) FROM B_rows WHERE key GLOB 'old-*') = 0 AND (SELECT count(*) FROM B_rows) = 3;
-- rows that must stay are stepped over, at most 16 read per claim, and
-- the rows behind them are reached by the next claims
SELECT sqltest_clock(1700001000000);
CREATE VIRTUAL TABLE S USING idempotency(lease_seconds=10, retention_seconds=10);
SELECT 'skip-setup-unknown', (SELECT count(*) FROM n WHERE i <= 20 AND json_extract(idem_settle('S', json_extract(idem_claim('S', 't', 'c', 'x', '{}', 'external', 'u-' || i), '$.token'), 'unknown', NULL), '$.status') = 'unknown') = 20;
SELECT 'skip-setup-failed', (SELECT count(*) FROM n WHERE i <= 5 AND json_extract(idem_settle('S', json_extract(idem_claim('S', 't', 'c', 'x', '{}', 'external', 'f-' || i), '$.token'), 'failed', NULL), '$.status') = 'failed') = 5;
SELECT sqltest_clock(1700001020000);
SELECT 'skip-1-reads-unknown-only', json_extract(idem_claim('S', 't', 'c', 'x', '{}', 'external', 'sn-1'), '$.decision') = 'admitted'
       AND (SELECT count(*) FROM S_rows WHERE key GLOB 'f-*') = 5;
SELECT 'skip-2-reaches-failed', json_extract(idem_claim('S', 't', 'c', 'x', '{}', 'external', 'sn-2'), '$.decision') = 'admitted'
       AND (SELECT count(*) FROM S_rows WHERE key GLOB 'f-*') = 0 AND (SELECT count(*) FROM S_rows WHERE key GLOB 'u-*') = 20;

-- ---------------------------------------------------------------- INSERT claims purge too; a rollback undoes the purge
SELECT sqltest_clock(1700002000000);
CREATE VIRTUAL TABLE I USING idempotency(retention_seconds=5);
SELECT 'ins-setup', json_extract(idem_settle('I', json_extract(idem_claim('I', 't', 'c', 'x', '{}', 'external', 'i1'), '$.token'), 'failed', NULL), '$.status') = 'failed'
       AND json_extract(idem_settle('I', json_extract(idem_claim('I', 't', 'c', 'x', '{}', 'external', 'i2'), '$.token'), 'succeeded', NULL), '$.status') = 'succeeded';
SELECT sqltest_clock(1700002010000);
BEGIN;
SELECT 'tx-claim', json_extract(idem_claim('I', 't', 'c', 'x', '{}', 'external', 'i3'), '$.committed') = 0;
SELECT 'tx-purged-inside', (SELECT count(*) FROM I_rows) = 1;
ROLLBACK;
SELECT 'tx-rollback-restores', (SELECT group_concat(key, ',') FROM (SELECT key FROM I_rows ORDER BY key)) = 'i1,i2';
INSERT INTO I(tenant, conversation, tool, args, key) VALUES ('t', 'c', 'x', '{}', 'i4');
SELECT 'insert-purges', changes() = 1 AND (SELECT group_concat(key, ',') FROM (SELECT key FROM I_rows ORDER BY key)) = 'i4'
       AND json_extract(idem_last_claim('I'), '$.key') = 'i4';
INSERT OR IGNORE INTO I(tenant, conversation, tool, args, key) VALUES ('t', 'c', 'x', '{}', 'i4');
SELECT 'insert-ignored-no-purge', changes() = 0;

-- ---------------------------------------------------------------- guard members go with their row, as with idem_purge
SELECT sqltest_clock(1700003000000);
CREATE VIRTUAL TABLE G USING idempotency(retention_seconds=60);
CREATE TABLE orders(id INTEGER PRIMARY KEY, tenant, op_key, item);
SELECT idem_guard('G', 'orders', 'op_key', 'tenant');
SELECT json_extract(idem_claim('G', 't', 'c', 'order', '{}', 'local', 'g1'), '$.decision');
INSERT INTO orders(tenant, op_key, item) VALUES ('t', 'g1', 'book');
SELECT 'guard-settled', json_extract(idem_settle('G', (SELECT token FROM G WHERE key = 'g1'), 'succeeded', '{}'), '$.members') = '[{"table":"orders","rowid":1}]';
SELECT sqltest_clock(1700003061000);
SELECT 'guard-purge', json_extract(idem_claim('G', 't', 'c', 'order', '{}', 'local', 'g2'), '$.decision') = 'admitted'
       AND (SELECT count(*) FROM G_rows WHERE key = 'g1') = 0;
SELECT 'guard-rows-stay', (SELECT count(*) FROM orders WHERE op_key = 'g1') = 1;
SELECT 'guard-key-claimable-again', json_extract(idem_claim('G', 't', 'c', 'order', '{}', 'local', 'g1'), '$.attempt') = 1;

-- ---------------------------------------------------------------- checked on connect
-- the options are fixed by R_meta's triggers: editing them as someone who
-- rewrites the file would, the triggers go first
DROP TRIGGER R_meta_insert; DROP TRIGGER R_meta_update; DROP TRIGGER R_meta_delete;
DROP TRIGGER d_meta_insert; DROP TRIGGER d_meta_update; DROP TRIGGER d_meta_delete;
DROP TRIGGER lo_meta_insert; DROP TRIGGER lo_meta_update; DROP TRIGGER lo_meta_delete;
UPDATE R_meta SET v = 315360001 WHERE k = 'retention_seconds';
UPDATE d_meta SET v = 'ten' WHERE k = 'retention_seconds';
DELETE FROM lo_meta WHERE k = 'retention_seconds';
ATTACH (SELECT file FROM pragma_database_list WHERE name = 'main') AS again;
SELECT 'connect-out-of-range', errmsg('SELECT count(*) FROM again.R')
       = 'idempotency: ledger R has retention_seconds = 315360001 in R_meta; it must be an integer from 0 to 315360000';
SELECT 'connect-not-integer', errmsg('SELECT count(*) FROM again.d')
       = 'idempotency: ledger d has retention_seconds = ''ten'' (TEXT) in d_meta; it must be an integer from 0 to 315360000';
-- a file made before the option existed has no row for it: the default (keep forever)
SELECT 'connect-missing-default', json_extract(idem_upgrade('again.lo'), '$.triggers_created') = 3
       AND errmsg('SELECT count(*) FROM again.lo') IS NULL
       AND json_extract(idem_claim('again.lo', 't', 'c', 'x', '{}'), '$.decision') = 'admitted';
-- the edited values put back (SQLite 3.44+ connects every ledger in integrity_check)
UPDATE R_meta SET v = 100 WHERE k = 'retention_seconds';
UPDATE d_meta SET v = 0 WHERE k = 'retention_seconds';
DETACH again;
SELECT 'integrity', (SELECT integrity_check FROM pragma_integrity_check) = 'ok';
SELECT sqltest_clock(NULL);
