-- Leases and time, driven by sqltest_clock (no sleeping): expiry of
-- external and local claims, take-over with a new token, max_attempts,
-- lease_seconds=0, and idem_purge.

SELECT sqltest_clock(1700000000000);
CREATE VIRTUAL TABLE L USING idempotency(lease_seconds=10, max_attempts=3);
CREATE TEMP TABLE old(name TEXT PRIMARY KEY, t TEXT);

-- ---------------------------------------------------------------- external claim expires -> unknown
SELECT 'ext-admitted', json_extract(idem_claim('L', 't', 'c', 'send', '{}', 'external', 'ext-1'), '$.lease_until') = 1700000010000;
INSERT INTO old SELECT 'ext-1', token FROM L WHERE "key" = 'ext-1';
SELECT sqltest_clock(1700000009999);
SELECT 'ext-live-1ms-before', json_extract(idem_claim('L', 't', 'c', 'send', '{}', 'external', 'ext-1'), '$.decision') = 'in_progress';
SELECT 'ext-select-live', (SELECT status FROM L WHERE tenant = 't' AND key = 'ext-1') = 'claimed';
SELECT sqltest_clock(1700000010000);
WITH c(j) AS MATERIALIZED (SELECT idem_claim('L', 't', 'c', 'send', '{}', 'external', 'ext-1'))
SELECT 'ext-expired-unknown', json_extract(j, '$.decision') = 'unknown' FROM c
UNION ALL SELECT 'ext-expired-message', json_extract(j, '$.message') = 'that request may have reached the target system, the outcome is theirs to report, and nothing is retried here' FROM c
UNION ALL SELECT 'ext-expired-keyset', (SELECT group_concat(key, ',') FROM (SELECT key FROM json_each(j) ORDER BY key)) = 'attempt,decision,key,message' FROM c;
SELECT 'ext-select-unknown', (SELECT status FROM L WHERE tenant = 't' AND key = 'ext-1') = 'unknown';
SELECT 'ext-select-unknown-scan', (SELECT status FROM L WHERE key = 'ext-1') = 'unknown';
SELECT 'ext-stored-still-claimed', (SELECT status FROM L_rows WHERE "key" = 'ext-1') = 'claimed';
SELECT 'ext-not-taken-over', (SELECT attempt = 1 AND token = (SELECT t FROM old WHERE name = 'ext-1') FROM L WHERE "key" = 'ext-1');
SELECT 'ext-insert-taken', errmsg('INSERT INTO L(tenant, conversation, tool, args, key) VALUES (''t'', ''c'', ''send'', ''{}'', ''ext-1'')')
       GLOB 'idempotency: key "ext-1" of tenant "t" in ledger L is taken: its outcome is unknown*';
-- much later: still unknown, never retried
SELECT sqltest_clock(1710000000000);
SELECT 'ext-unknown-forever', json_extract(idem_claim('L', 't', 'c', 'send', '{}', 'external', 'ext-1'), '$.decision') = 'unknown';
SELECT 'ext-settle-unknown-again', errmsg('SELECT idem_settle(''L'', (SELECT t FROM old WHERE name = ''ext-1''), ''unknown'', NULL)')
       = 'idem_settle: illegal transition unknown -> unknown for key "ext-1"';
-- late settle by the token holder still works: claimed -> succeeded
SELECT 'ext-late-settle', idem_settle('L', (SELECT t FROM old WHERE name = 'ext-1'), 'succeeded', '{"late":true}')
       = '{"key":"ext-1","status":"succeeded","attempt":1,"durable":false,"settled_at":1710000000000,"members":[]}';
SELECT 'ext-late-settle-stored', (SELECT status = 'succeeded' AND result = '{"late":true}' AND updated_at = 1710000000000 FROM L_rows WHERE "key" = 'ext-1');
SELECT 'ext-late-replay', json_extract(idem_claim('L', 't', 'c', 'send', '{}', 'external', 'ext-1'), '$.decision') = 'replay';
-- idem_resolve works on an expired external claim
SELECT sqltest_clock(1700000000000);
SELECT 'ext2-admitted', json_extract(idem_claim('L', 't', 'c', 'send', '{}', 'external', 'ext-2'), '$.decision') = 'admitted';
SELECT 'ext2-resolve-live-refused', errmsg('SELECT idem_resolve(''L'', ''t'', ''ext-2'', ''failed'', NULL)')
       = 'idem_resolve: key "ext-2" is claimed, not unknown; the claim''s holder settles it with its token';
SELECT sqltest_clock(1700000020000);
SELECT 'ext2-resolve', idem_resolve('L', 't', 'ext-2', 'failed', '{"target":"no such order"}') = '{"key":"ext-2","status":"failed","attempt":1,"durable":false,"settled_at":1700000020000,"members":[]}';
SELECT 'ext2-stored', (SELECT status = 'failed' AND error = '{"target":"no such order"}' FROM L_rows WHERE "key" = 'ext-2');
SELECT 'ext2-holder-now-refused', errmsg('SELECT idem_settle(''L'', (SELECT token FROM L WHERE "key" = ''ext-2''), ''succeeded'', NULL)')
       = 'idem_settle: illegal transition failed -> succeeded for key "ext-2"';
-- resolve released on an expired external claim (sent false): claimable again, attempt 2
SELECT sqltest_clock(1700000000000);
SELECT 'ext3-admitted', json_extract(idem_claim('L', 't', 'c', 'send', '{}', 'external', 'ext-3'), '$.decision') = 'admitted';
SELECT sqltest_clock(1700000020000);
SELECT 'ext3-resolve-released', json_extract(idem_resolve('L', 't', 'ext-3', 'released', '{"sent":false}'), '$.status') = 'released';
SELECT 'ext3-reclaim', json_extract(idem_claim('L', 't', 'c', 'send', '{}', 'external', 'ext-3'), '$.attempt') = 2;

-- ---------------------------------------------------------------- local claim expires, no guarded rows -> take-over
SELECT sqltest_clock(1700000000000);
SELECT 'loc-admitted', json_extract(idem_claim('L', 't', 'c', 'write', '{}', 'local', 'loc-1'), '$.attempt') = 1;
INSERT INTO old SELECT 'loc-1a', token FROM L WHERE "key" = 'loc-1';
SELECT sqltest_clock(1700000005000);
SELECT 'loc-live', json_extract(idem_claim('L', 't', 'c', 'write', '{}', 'local', 'loc-1'), '$.decision') = 'in_progress';
SELECT sqltest_clock(1700000010000);
SELECT 'loc-expired-select', (SELECT status FROM L WHERE tenant = 't' AND key = 'loc-1') = 'claimed';
WITH c(j) AS MATERIALIZED (SELECT idem_claim('L', 't', 'c', 'write', '{}', 'local', 'loc-1'))
SELECT 'takeover-admitted', json_extract(j, '$.decision') = 'admitted' FROM c
UNION ALL SELECT 'takeover-attempt-2', json_extract(j, '$.attempt') = 2 FROM c
UNION ALL SELECT 'takeover-new-token', json_extract(j, '$.token') <> (SELECT t FROM old WHERE name = 'loc-1a') FROM c
UNION ALL SELECT 'takeover-token-stored', json_extract(j, '$.token') = (SELECT token FROM L WHERE "key" = 'loc-1') FROM c
UNION ALL SELECT 'takeover-lease', json_extract(j, '$.lease_until') = 1700000020000 FROM c
UNION ALL SELECT 'takeover-keyset', (SELECT group_concat(key, ',') FROM (SELECT key FROM json_each(j) ORDER BY key))
       = 'attempt,committed,decision,durable,effect,key,lease_until,token' FROM c;
INSERT INTO old SELECT 'loc-1b', token FROM L WHERE "key" = 'loc-1';
SELECT 'takeover-row', (SELECT status = 'claimed' AND attempt = 2 AND created_at = 1700000000000 AND updated_at = 1700000010000 AND lease_until = 1700000020000 FROM L_rows WHERE "key" = 'loc-1');
SELECT 'takeover-in-progress', json_extract(idem_claim('L', 't', 'c', 'write', '{}', 'local', 'loc-1'), '$.decision') = 'in_progress';
-- the old token can no longer settle (any status)
SELECT 'stale-token-refused', errmsg('SELECT idem_settle(''L'', (SELECT t FROM old WHERE name = ''loc-1a''), ''succeeded'', NULL)')
       = 'idem_settle: no claim of ledger L holds token "' || (SELECT t FROM old WHERE name = 'loc-1a') || '" (a wrong token, or a claim that was taken over)';
SELECT 'stale-token-code', errcode('SELECT idem_settle(''L'', (SELECT t FROM old WHERE name = ''loc-1a''), ''failed'', NULL)') = 19;
SELECT 'stale-token-release', errcode('SELECT idem_settle(''L'', (SELECT t FROM old WHERE name = ''loc-1a''), ''released'', NULL)') = 19;
SELECT 'stale-changed-nothing', (SELECT status = 'claimed' AND attempt = 2 FROM L_rows WHERE "key" = 'loc-1');
-- the new holder settles
SELECT 'new-holder-settles', idem_settle('L', (SELECT t FROM old WHERE name = 'loc-1b'), 'succeeded', '{"rows":0}') = '{"key":"loc-1","status":"succeeded","attempt":2,"durable":false,"settled_at":1700000010000,"members":[]}';
SELECT 'new-holder-replay', json_extract(idem_claim('L', 't', 'c', 'write', '{}', 'local', 'loc-1'), '$.attempt') = 2;
-- a late settle by the holder of an expired local claim nobody took over
SELECT sqltest_clock(1700000000000);
SELECT 'loc2-admitted', json_extract(idem_claim('L', 't', 'c', 'write', '{}', 'local', 'loc-2'), '$.decision') = 'admitted';
SELECT sqltest_clock(1700000050000);
SELECT 'loc2-late-settle', json_extract(idem_settle('L', (SELECT token FROM L WHERE "key" = 'loc-2'), 'failed', NULL), '$.status') = 'failed';
SELECT 'loc2-no-resolve', errmsg('SELECT idem_resolve(''L'', ''t'', ''loc-2'', ''succeeded'', NULL)') = 'idem_resolve: illegal transition failed -> succeeded for key "loc-2"';

-- ---------------------------------------------------------------- max_attempts (3): attempts never exceed it; then failed
SELECT sqltest_clock(1700000100000);
SELECT 'poison-1', json_extract(idem_claim('L', 't', 'c', 'poison', '{}', 'local', 'p-1'), '$.attempt') = 1;
SELECT sqltest_clock(1700000110000);
SELECT 'poison-2', json_extract(idem_claim('L', 't', 'c', 'poison', '{}', 'local', 'p-1'), '$.attempt') = 2;
SELECT sqltest_clock(1700000120000);
SELECT 'poison-3', json_extract(idem_claim('L', 't', 'c', 'poison', '{}', 'local', 'p-1'), '$.attempt') = 3;
INSERT INTO old SELECT 'p-1', token FROM L WHERE "key" = 'p-1';
SELECT sqltest_clock(1700000130000);
WITH c(j) AS MATERIALIZED (SELECT idem_claim('L', 't', 'c', 'poison', '{}', 'local', 'p-1'))
SELECT 'poison-failed', json_extract(j, '$.decision') = 'replay' AND json_extract(j, '$.status') = 'failed' FROM c
UNION ALL SELECT 'poison-idempotent', json_type(j, '$.idempotent') = 'true' FROM c
UNION ALL SELECT 'poison-attempt', json_extract(j, '$.attempt') = 3 FROM c
UNION ALL SELECT 'poison-settled-at', json_extract(j, '$.settled_at') = 1700000130000 FROM c
UNION ALL SELECT 'poison-reason', json_extract(j, '$.error.reason') = 'max_attempts' FROM c
UNION ALL SELECT 'poison-attempts-field', json_extract(j, '$.error.attempts') = 3 FROM c
UNION ALL SELECT 'poison-members', json_array_length(j, '$.members') = 0 FROM c
UNION ALL SELECT 'poison-keyset', (SELECT group_concat(key, ',') FROM (SELECT key FROM json_each(j) ORDER BY key))
       = 'attempt,decision,error,idempotent,key,members,settled_at,status' FROM c;
SELECT 'poison-stored', (SELECT status = 'failed' AND json_extract(error, '$.reason') = 'max_attempts' AND attempt = 3 AND updated_at = 1700000130000 FROM L_rows WHERE "key" = 'p-1');
SELECT 'poison-replays', json_extract(idem_claim('L', 't', 'c', 'poison', '{}', 'local', 'p-1'), '$.error.reason') = 'max_attempts';
SELECT 'poison-old-holder-refused', errmsg('SELECT idem_settle(''L'', (SELECT t FROM old WHERE name = ''p-1''), ''succeeded'', NULL)')
       = 'idem_settle: illegal transition failed -> succeeded for key "p-1"';
-- max_attempts counts take-overs only: releases in between do not use it up
SELECT sqltest_clock(1700000200000);
SELECT 'relmix-1', json_extract(idem_claim('L', 't', 'c', 'relmix', '{}', 'local', 'r-1'), '$.attempt') = 1;
SELECT 'relmix-1r', json_extract(idem_settle('L', (SELECT token FROM L WHERE "key" = 'r-1'), 'released', NULL), '$.status') = 'released';
SELECT 'relmix-2', json_extract(idem_claim('L', 't', 'c', 'relmix', '{}', 'local', 'r-1'), '$.attempt') = 2;
SELECT 'relmix-2r', json_extract(idem_settle('L', (SELECT token FROM L WHERE "key" = 'r-1'), 'released', NULL), '$.status') = 'released';
SELECT 'relmix-3', json_extract(idem_claim('L', 't', 'c', 'relmix', '{}', 'local', 'r-1'), '$.attempt') = 3;
SELECT sqltest_clock(1700000210000);
-- the first expiry of this key: a take-over, not a poison failure
SELECT 'relmix-first-takeover', json_extract(idem_claim('L', 't', 'c', 'relmix', '{}', 'local', 'r-1'), '$.decision') = 'admitted';
SELECT 'relmix-not-failed', (SELECT status FROM L_rows WHERE "key" = 'r-1') = 'claimed';
-- max_attempts=1: the first expiry fails the call, no take-over
CREATE VIRTUAL TABLE M1 USING idempotency(lease_seconds=1, max_attempts=1);
SELECT sqltest_clock(1700000300000);
SELECT 'm1-admitted', json_extract(idem_claim('M1', 't', 'c', 'x', '{}', 'local'), '$.decision') = 'admitted';
SELECT sqltest_clock(1700000301000);
SELECT 'm1-failed', json_extract(idem_claim('M1', 't', 'c', 'x', '{}', 'local'), '$.error.reason') = 'max_attempts';
-- an external claim never becomes a poison failure: it becomes unknown
SELECT 'm1-ext-admitted', json_extract(idem_claim('M1', 't', 'c', 'y', '{}'), '$.decision') = 'admitted';
SELECT sqltest_clock(1700000302000);
SELECT 'm1-ext-unknown', json_extract(idem_claim('M1', 't', 'c', 'y', '{}'), '$.decision') = 'unknown';

-- ---------------------------------------------------------------- lease_seconds=0 expires at once
CREATE VIRTUAL TABLE Z USING idempotency(lease_seconds=0);
SELECT sqltest_clock(1700000400000);
WITH c(j) AS MATERIALIZED (SELECT idem_claim('Z', 't', 'c', 'x', '{}'))
SELECT 'z-admitted', json_extract(j, '$.decision') = 'admitted' FROM c
UNION ALL SELECT 'z-lease-now', json_extract(j, '$.lease_until') = 1700000400000 FROM c;
SELECT 'z-ext-unknown-at-once', json_extract(idem_claim('Z', 't', 'c', 'x', '{}'), '$.decision') = 'unknown';
SELECT 'z-select-unknown', (SELECT status FROM Z) = 'unknown';
SELECT 'z-loc-admitted', json_extract(idem_claim('Z', 't', 'c', 'x', '{}', 'local', 'zl'), '$.attempt') = 1;
SELECT 'z-loc-takeover-at-once', json_extract(idem_claim('Z', 't', 'c', 'x', '{}', 'local', 'zl'), '$.attempt') = 2;
SELECT 'z-loc-settle', json_extract(idem_settle('Z', (SELECT token FROM Z WHERE "key" = 'zl'), 'succeeded', NULL), '$.attempt') = 2;

-- ---------------------------------------------------------------- a live lease is never admitted twice
SELECT sqltest_clock(1700000500000);
SELECT 'live-1', json_extract(idem_claim('L', 'u', 'c', 'once', '{}', 'local', 'live'), '$.decision') = 'admitted';
SELECT 'live-2', json_extract(idem_claim('L', 'u', 'c', 'once', '{}', 'local', 'live'), '$.decision') = 'in_progress';
SELECT 'live-insert', errmsg('INSERT INTO L(tenant, conversation, tool, args, effect, key) VALUES (''u'', ''c'', ''once'', ''{}'', ''local'', ''live'')')
       = 'idempotency: key "live" of tenant "u" in ledger L is taken: it is claimed (attempt 1) until 1700000510000';
SELECT 'live-insert-ignore', errmsg('INSERT OR IGNORE INTO L(tenant, conversation, tool, args, effect, key) VALUES (''u'', ''c'', ''once'', ''{}'', ''local'', ''live'')') IS NULL;
SELECT sqltest_clock(1700000509999);
SELECT 'live-3', json_extract(idem_claim('L', 'u', 'c', 'once', '{}', 'local', 'live'), '$.decision') = 'in_progress';
SELECT 'live-one-row', (SELECT count(*) FROM L_rows WHERE "key" = 'live') = 1 AND (SELECT attempt FROM L_rows WHERE "key" = 'live') = 1;
-- a clock that goes backwards only lengthens the lease
SELECT sqltest_clock(1600000000000);
SELECT 'clock-back', json_extract(idem_claim('L', 'u', 'c', 'once', '{}', 'local', 'live'), '$.decision') = 'in_progress';

-- ---------------------------------------------------------------- idem_purge
CREATE VIRTUAL TABLE P USING idempotency(lease_seconds=10);
SELECT sqltest_clock(1700001000000);
WITH c(j) AS MATERIALIZED (
  SELECT idem_claim('P', 't', 'c', 'x', '{}', 'local', 'p-succ') UNION ALL
  SELECT idem_claim('P', 't', 'c', 'x', '{}', 'local', 'p-fail') UNION ALL
  SELECT idem_claim('P', 't', 'c', 'x', '{}', 'local', 'p-rel') UNION ALL
  SELECT idem_claim('P', 't', 'c', 'x', '{}', 'local', 'p-new') UNION ALL
  SELECT idem_claim('P', 't', 'c', 'x', '{}', 'external', 'p-claimed') UNION ALL
  SELECT idem_claim('P', 't', 'c', 'x', '{}', 'external', 'p-unk') UNION ALL
  SELECT idem_claim('P', 't', 'c', 'x', '{}', 'external', 'p-expired') UNION ALL
  SELECT idem_claim('P', 't2', 'c', 'x', '{}', 'local', 'p-succ')
)
SELECT 'purge-setup', (SELECT count(*) FROM c WHERE json_extract(j, '$.decision') = 'admitted') = 8;
SELECT 'purge-settle', (SELECT count(*) FROM P WHERE "key" = 'p-succ' AND json_extract(idem_settle('P', token, 'succeeded', NULL), '$.status') = 'succeeded') = 2;
SELECT 'purge-settle2', json_extract(idem_settle('P', (SELECT token FROM P WHERE "key" = 'p-fail'), 'failed', NULL), '$.status')
       || json_extract(idem_settle('P', (SELECT token FROM P WHERE "key" = 'p-rel'), 'released', NULL), '$.status')
       || json_extract(idem_settle('P', (SELECT token FROM P WHERE "key" = 'p-unk'), 'unknown', NULL), '$.status') = 'failedreleasedunknown';
SELECT sqltest_clock(1700001100000);
SELECT 'purge-settle-later', json_extract(idem_settle('P', (SELECT token FROM P WHERE "key" = 'p-new'), 'succeeded', NULL), '$.status') = 'succeeded';
SELECT 'purge-claimed-renewed', json_extract(idem_claim('P', 't', 'c', 'x', '{}', 'external', 'p-claimed'), '$.decision') = 'unknown';
-- now = 1700001100000: p-succ (x2), p-fail, p-rel updated 100 s ago; p-new updated now
SELECT 'purge-validation-negative', errmsg('SELECT idem_purge(''P'', -1)') = 'idem_purge: older_than_seconds must be an INTEGER from 0 to 315360000000, got -1';
SELECT 'purge-validation-code', errcode('SELECT idem_purge(''P'', -1)') = 19;
SELECT 'purge-validation-real', errmsg('SELECT idem_purge(''P'', 1.5)') = 'idem_purge: older_than_seconds must be an INTEGER from 0 to 315360000000, got REAL';
SELECT 'purge-validation-real-integral', errmsg('SELECT idem_purge(''P'', 10.0)') = 'idem_purge: older_than_seconds must be an INTEGER from 0 to 315360000000, got REAL';
SELECT 'purge-validation-null', errmsg('SELECT idem_purge(''P'', NULL)') = 'idem_purge: older_than_seconds must be an INTEGER from 0 to 315360000000, got NULL';
SELECT 'purge-validation-text', errmsg('SELECT idem_purge(''P'', ''10'')') = 'idem_purge: older_than_seconds must be an INTEGER from 0 to 315360000000, got "10"';
SELECT 'purge-validation-blob', errcode('SELECT idem_purge(''P'', x''00'')') = 19;
SELECT 'purge-validation-huge', errcode('SELECT idem_purge(''P'', 315360000001)') = 19;
SELECT 'purge-unknown-ledger', errmsg('SELECT idem_purge(''nope'', 0)') = 'idem_purge: unknown ledger "nope": no table USING idempotency by that name';
SELECT 'purge-arity', errmsg('SELECT idem_purge(''P'')') = 'wrong number of arguments to function idem_purge()';
SELECT 'purge-validation-deleted-nothing', (SELECT count(*) FROM P_rows) = 8;
SELECT 'purge-none-older', idem_purge('P', 101) = 0;
SELECT 'purge-boundary-exact', idem_purge('P', 100) = 0;
SELECT 'purge-max', idem_purge('P', 315360000000) = 0;
SELECT 'purge-99', idem_purge('P', 99) = 4;
SELECT 'purge-kept', (SELECT group_concat(tenant || '/' || "key", ',') FROM (SELECT tenant, "key" FROM P_rows ORDER BY "key", tenant))
       = 't/p-claimed,t/p-expired,t/p-new,t/p-unk';
SELECT 'purge-zero-keeps-now', idem_purge('P', 0) = 0;
SELECT sqltest_clock(1700001100001);
SELECT 'purge-zero', idem_purge('P', 0) = 1;
SELECT sqltest_clock(1800000000000);
SELECT 'purge-never-claimed-unknown', idem_purge('P', 0) = 0;
SELECT 'purge-kept-live', (SELECT group_concat("key", ',') FROM (SELECT "key" FROM P_rows ORDER BY "key")) = 'p-claimed,p-expired,p-unk';
SELECT 'purge-expired-is-unknown', (SELECT status FROM P WHERE key = 'p-expired') = 'unknown';
-- a purged key is admitted again as new: attempt 1
WITH c(j) AS MATERIALIZED (SELECT idem_claim('P', 't', 'c', 'x', '{}', 'local', 'p-succ'))
SELECT 'purged-admitted', json_extract(j, '$.decision') = 'admitted' FROM c
UNION ALL SELECT 'purged-attempt-1', json_extract(j, '$.attempt') = 1 FROM c;
SELECT 'purged-rel-admitted', json_extract(idem_claim('P', 't', 'c', 'x', '{}', 'local', 'p-rel'), '$.attempt') = 1;
SELECT 'purged-other-args-ok', json_extract(idem_claim('P', 't', 'c', 'x', '{"new":1}', 'local', 'p-fail'), '$.decision') = 'admitted';
SELECT 'purge-returns-integer', typeof(idem_purge('P', 0)) = 'integer';
SELECT sqltest_clock(NULL);
