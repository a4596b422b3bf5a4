-- SELECT on a ledger: every column, the effective status (expiry is
-- evaluated on read), lookups by tenant+key, tenant and token (served by
-- the shadow table's unique indexes), and rowids.

SELECT sqltest_clock(1700000000000);
CREATE VIRTUAL TABLE L USING idempotency(lease_seconds=10);
WITH c(j) AS MATERIALIZED (
  SELECT idem_claim('L', 'ta', 'c1', 'send', '{"n":1}') UNION ALL
  SELECT idem_claim('L', 'ta', 'c1', 'send', '{"n":2}', 'local') UNION ALL
  SELECT idem_claim('L', 'ta', 'c2', 'write', '{"n":3}', 'local', 'op-a') UNION ALL
  SELECT idem_claim('L', 'tb', 'c1', 'send', '{"n":1}') UNION ALL
  SELECT idem_claim('L', 'tb', 'c2', 'write', '{"n":3}', 'external', 'op-a') UNION ALL
  SELECT idem_claim('L', 'tc', 'c9', 'send', '{"n":9}', 'external', 'op-c')
)
SELECT 'setup', (SELECT count(*) FROM c WHERE json_extract(j, '$.decision') = 'admitted') = 6;
SELECT sqltest_clock(1700000001000);
SELECT 'settle-op-a-ta', json_extract(idem_settle('L', (SELECT token FROM L WHERE tenant = 'ta' AND "key" = 'op-a'), 'succeeded', '{"r":1}'), '$.status') = 'succeeded';
SELECT 'settle-op-a-tb', json_extract(idem_settle('L', (SELECT token FROM L WHERE tenant = 'tb' AND "key" = 'op-a'), 'failed', '{"e":1}'), '$.status') = 'failed';
SELECT 'settle-op-c', json_extract(idem_settle('L', (SELECT token FROM L WHERE "key" = 'op-c'), 'unknown', '{"u":1}'), '$.status') = 'unknown';

-- every column equals the stored row
SELECT 'count', (SELECT count(*) FROM L) = 6;
SELECT 'columns-match-rows', (SELECT count(*) FROM L v JOIN L_rows r ON r.id = v.rowid
       WHERE v.tenant IS r.tenant AND v.key IS r."key" AND v.conversation IS r.conversation AND v.tool IS r.tool
         AND v.args IS r.args AND v.effect IS r.effect AND v.status IS r.status AND v.result IS r.result
         AND v.error IS r.error AND v.attempt IS r.attempt AND v.token IS printf('%016x%016x', r.id, r.token) AND v.created_at IS r.created_at
         AND v.updated_at IS r.updated_at AND v.lease_until IS r.lease_until AND v.members IS r.members) = 6;
SELECT 'rowid-is-id', (SELECT group_concat(rowid, ',') FROM L) = (SELECT group_concat(id, ',') FROM (SELECT id FROM L_rows ORDER BY id));
SELECT 'args-canonical', (SELECT args FROM L WHERE tenant = 'ta' AND key = 'op-a') = '{"n":3}';
SELECT 'result-column', (SELECT result FROM L WHERE tenant = 'ta' AND key = 'op-a') = '{"r":1}';
SELECT 'error-column', (SELECT error FROM L WHERE tenant = 'tb' AND key = 'op-a') = '{"e":1}';
SELECT 'members-column', (SELECT members FROM L WHERE tenant = 'ta' AND key = 'op-a') = '[]';
SELECT 'members-null-while-claimed', (SELECT members IS NULL FROM L WHERE tenant = 'tc' AND key = 'op-c') = 0
       OR (SELECT members IS NULL FROM L WHERE tenant = 'ta' AND conversation = 'c1' AND effect = 'external');
SELECT 'times', (SELECT created_at = 1700000000000 AND updated_at = 1700000001000 AND lease_until = 1700000010000 FROM L WHERE tenant = 'ta' AND key = 'op-a');
SELECT 'types', (SELECT typeof(attempt) || typeof(created_at) || typeof(updated_at) || typeof(lease_until) FROM L WHERE tenant = 'ta' AND key = 'op-a') = 'integerintegerintegerinteger';

-- lookups
SELECT 'by-tenant-key', (SELECT count(*) FROM L WHERE tenant = 'ta' AND key = 'op-a') = 1;
SELECT 'by-tenant-key-right-row', (SELECT status FROM L WHERE tenant = 'tb' AND key = 'op-a') = 'failed';
SELECT 'by-key-reversed', (SELECT status FROM L WHERE key = 'op-a' AND tenant = 'ta') = 'succeeded';
SELECT 'by-tenant-key-missing', (SELECT count(*) FROM L WHERE tenant = 'ta' AND key = 'op-c') = 0;
SELECT 'by-tenant-key-derived', (SELECT count(*) FROM L WHERE tenant = 'ta' AND key = idem_key('ta', 'c1', 'send', '{"n":1}')) = 1;
SELECT 'by-tenant', (SELECT count(*) FROM L WHERE tenant = 'ta') = 3;
SELECT 'by-tenant-none', (SELECT count(*) FROM L WHERE tenant = 'zz') = 0;
SELECT 'by-key-only', (SELECT count(*) FROM L WHERE key = 'op-a') = 2;
SELECT 'by-token', (SELECT key || '/' || tenant FROM L WHERE token = (SELECT token FROM L WHERE "key" = 'op-c')) = 'op-c/tc';
SELECT 'by-token-missing', (SELECT count(*) FROM L WHERE token = '0123456789abcdef0123456789abcdef') = 0;
SELECT 'by-tenant-key-and-more', (SELECT count(*) FROM L WHERE tenant = 'ta' AND key = 'op-a' AND status = 'claimed') = 0;
SELECT 'by-status', (SELECT count(*) FROM L WHERE status = 'claimed') = 3;
SELECT 'by-in-list', (SELECT count(*) FROM L WHERE tenant IN ('ta', 'tb') AND key = 'op-a') = 2;
SELECT 'by-null-tenant', (SELECT count(*) FROM L WHERE tenant = NULL) = 0;
SELECT 'by-integer-tenant', (SELECT count(*) FROM L WHERE tenant = 1) = 0;
SELECT 'by-like', (SELECT count(*) FROM L WHERE tenant LIKE 't%') = 6;
SELECT 'by-range', (SELECT count(*) FROM L WHERE tenant > 'ta') = 3;
SELECT 'order-by', (SELECT group_concat(tenant, ',') FROM (SELECT tenant FROM L ORDER BY tenant DESC, key)) = 'tc,tb,tb,ta,ta,ta';
SELECT 'join', (SELECT count(*) FROM (SELECT 'ta' AS t, 'op-a' AS k UNION ALL SELECT 'tb', 'op-a') q JOIN L ON L.tenant = q.t AND L.key = q.k) = 2;
SELECT 'group-by', (SELECT group_concat(s, ',') FROM (SELECT status || '=' || count(*) AS s FROM L GROUP BY status ORDER BY status))
       = 'claimed=3,failed=1,succeeded=1,unknown=1';
-- the index is used: the cursor's query on the shadow table carries the lookup
SELECT 'plan-tenant-key', (SELECT (SELECT count(*) FROM sqlite_stmt WHERE sql LIKE '%FROM "main"."L_rows" WHERE tenant=?1 AND "key"=?2 ORDER BY id')
       FROM L WHERE tenant = 'ta' AND key = 'op-a') = 1;
SELECT 'plan-tenant', (SELECT (SELECT count(*) FROM sqlite_stmt WHERE sql LIKE '%FROM "main"."L_rows" WHERE tenant=?1 ORDER BY id')
       FROM L WHERE tenant = 'tc') = 1;
SELECT 'plan-token', (SELECT (SELECT count(*) FROM sqlite_stmt WHERE sql LIKE '%,created_at FROM "main"."L_rows" WHERE id=?1 AND token=?2')
       FROM L WHERE token = (SELECT token FROM L WHERE "key" = 'op-c')) = 1;
SELECT 'plan-no-full-scan', (SELECT (SELECT nscan FROM sqlite_stmt WHERE sql LIKE '%FROM "main"."L_rows" WHERE tenant=?1 AND "key"=?2 ORDER BY id')
       FROM L WHERE tenant = 'ta' AND key = 'op-a') = 0;

-- effective status: expiry is evaluated on every read
SELECT 'before-expiry', (SELECT group_concat(tenant || '/' || effect || '/' || status, ',') FROM (SELECT * FROM L WHERE status IN ('claimed', 'unknown') ORDER BY rowid))
       = 'ta/external/claimed,ta/local/claimed,tb/external/claimed,tc/external/unknown';
SELECT sqltest_clock(1700000010000);
SELECT 'after-expiry', (SELECT group_concat(tenant || '/' || effect || '/' || status, ',') FROM (SELECT * FROM L WHERE status IN ('claimed', 'unknown') ORDER BY rowid))
       = 'ta/external/unknown,ta/local/claimed,tb/external/unknown,tc/external/unknown';
SELECT 'after-expiry-by-key', (SELECT status FROM L WHERE tenant = 'tb' AND key = idem_key('tb', 'c1', 'send', '{"n":1}')) = 'unknown';
SELECT 'after-expiry-by-token', (SELECT status FROM L WHERE token = (SELECT token FROM L WHERE tenant = 'tb' AND "key" = idem_key('tb', 'c1', 'send', '{"n":1}'))) = 'unknown';
SELECT 'after-expiry-where-status', (SELECT count(*) FROM L WHERE status = 'unknown') = 3;
SELECT 'after-expiry-stored', (SELECT count(*) FROM L_rows WHERE status = 'claimed') = 3;
SELECT 'terminal-never-expire', (SELECT status FROM L WHERE tenant = 'ta' AND key = 'op-a') = 'succeeded';
-- the clock going back makes it live again (nothing was written by the read)
SELECT sqltest_clock(1700000009999);
SELECT 'read-wrote-nothing', (SELECT status FROM L WHERE tenant = 'tb' AND key = idem_key('tb', 'c1', 'send', '{"n":1}')) = 'claimed';

-- read-only use inside a transaction and from a CTE
BEGIN;
SELECT 'select-in-tx', (SELECT count(*) FROM L) = 6;
COMMIT;
SELECT 'select-cte', (WITH x AS (SELECT * FROM L WHERE tenant = 'ta') SELECT count(*) FROM x) = 3;
-- an empty ledger
CREATE VIRTUAL TABLE E USING idempotency;
SELECT 'empty-select', (SELECT count(*) FROM E) = 0 AND (SELECT count(*) FROM E WHERE tenant = 'ta' AND key = 'k') = 0;
SELECT sqltest_clock(NULL);
