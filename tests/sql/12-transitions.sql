-- idem_settle and idem_resolve: every legal and illegal transition with
-- exact messages, the release rules, tokens, status and detail validation,
-- what is stored, and the JSON they return. Keys are operation ids k-...

SELECT sqltest_clock(1700000000000);
CREATE VIRTUAL TABLE L USING idempotency;
CREATE VIRTUAL TABLE S USING idempotency(max_args_bytes=20);
CREATE TEMP TABLE old(name TEXT PRIMARY KEY, t TEXT);

-- one claim per scenario; ext = external, loc = local
-- (MATERIALIZED: a claim must be evaluated once; a flattened subquery may evaluate it twice)
WITH c(j) AS MATERIALIZED (
  SELECT idem_claim('L', 't', 'c', 'tool', '{}', 'external', 'ext-succ') UNION ALL
  SELECT idem_claim('L', 't', 'c', 'tool', '{}', 'external', 'ext-fail') UNION ALL
  SELECT idem_claim('L', 't', 'c', 'tool', '{}', 'external', 'ext-rel') UNION ALL
  SELECT idem_claim('L', 't', 'c', 'tool', '{}', 'external', 'ext-unk') UNION ALL
  SELECT idem_claim('L', 't', 'c', 'tool', '{}', 'local', 'loc-succ') UNION ALL
  SELECT idem_claim('L', 't', 'c', 'tool', '{}', 'local', 'loc-fail') UNION ALL
  SELECT idem_claim('L', 't', 'c', 'tool', '{}', 'local', 'loc-rel') UNION ALL
  SELECT idem_claim('L', 't', 'c', 'tool', '{}', 'local', 'loc-unk') UNION ALL
  SELECT idem_claim('L', 't', 'c', 'tool', '{}', 'external', 'ext-bad') UNION ALL
  SELECT idem_claim('L', 't', 'c', 'tool', '{}', 'external', 'ext-blob') UNION ALL
  SELECT idem_claim('L', 't', 'c', 'tool', '{}', 'external', 'ext-blob2')
)
SELECT 'claims', (SELECT count(*) FROM c WHERE json_extract(j, '$.decision') = 'admitted') = 11;
SELECT sqltest_clock(1700000001000);

-- ---------------------------------------------------------------- claimed -> succeeded
WITH c(j) AS MATERIALIZED (SELECT idem_settle('L', (SELECT token FROM L WHERE "key" = 'ext-succ'), 'succeeded', '{ "b" : 2, "a" : 1 }'))
SELECT 'succ-json-key', json_extract(j, '$.key') = 'ext-succ' FROM c
UNION ALL SELECT 'succ-json-status', json_extract(j, '$.status') = 'succeeded' FROM c
UNION ALL SELECT 'succ-json-attempt', json_type(j, '$.attempt') = 'integer' AND json_extract(j, '$.attempt') = 1 FROM c
UNION ALL SELECT 'succ-json-members', json_type(j, '$.members') = 'array' AND json_array_length(j, '$.members') = 0 FROM c
UNION ALL SELECT 'succ-json-settled-at', json_type(j, '$.settled_at') = 'integer' AND json_extract(j, '$.settled_at') = 1700000001000 FROM c
UNION ALL SELECT 'succ-json-keyset', (SELECT group_concat(key, ',') FROM (SELECT key FROM json_each(j) ORDER BY key)) = 'attempt,durable,key,members,settled_at,status' FROM c
UNION ALL SELECT 'succ-json-no-token', instr(j, (SELECT token FROM L WHERE "key" = 'ext-succ')) = 0 FROM c;
SELECT 'succ-stored', (SELECT status = 'succeeded' AND result = '{"a":1,"b":2}' AND error IS NULL AND attempt = 1 FROM L_rows WHERE "key" = 'ext-succ');
SELECT 'succ-updated-at', (SELECT updated_at = 1700000001000 AND created_at = 1700000000000 FROM L_rows WHERE "key" = 'ext-succ');
SELECT 'succ-members-stored', (SELECT members FROM L_rows WHERE "key" = 'ext-succ') = '[]';
SELECT 'succ-select-status', (SELECT status FROM L WHERE tenant = 't' AND key = 'ext-succ') = 'succeeded';
-- succeeded is terminal: every settle and resolve is refused, nothing changes
SELECT 'succ-to-failed', errmsg('SELECT idem_settle(''L'', (SELECT token FROM L WHERE "key" = ''ext-succ''), ''failed'', NULL)')
       = 'idem_settle: illegal transition succeeded -> failed for key "ext-succ"';
SELECT 'succ-to-failed-code', errcode('SELECT idem_settle(''L'', (SELECT token FROM L WHERE "key" = ''ext-succ''), ''failed'', NULL)') = 19;
SELECT 'succ-to-succ', errmsg('SELECT idem_settle(''L'', (SELECT token FROM L WHERE "key" = ''ext-succ''), ''succeeded'', ''{}'')')
       = 'idem_settle: illegal transition succeeded -> succeeded for key "ext-succ"';
SELECT 'succ-to-released', errmsg('SELECT idem_settle(''L'', (SELECT token FROM L WHERE "key" = ''ext-succ''), ''released'', ''{"sent":false}'')')
       = 'idem_settle: illegal transition succeeded -> released for key "ext-succ"';
SELECT 'succ-to-unknown', errmsg('SELECT idem_settle(''L'', (SELECT token FROM L WHERE "key" = ''ext-succ''), ''unknown'', NULL)')
       = 'idem_settle: illegal transition succeeded -> unknown for key "ext-succ"';
SELECT 'succ-resolve-failed', errmsg('SELECT idem_resolve(''L'', ''t'', ''ext-succ'', ''failed'', NULL)')
       = 'idem_resolve: illegal transition succeeded -> failed for key "ext-succ"';
SELECT 'succ-resolve-released', errmsg('SELECT idem_resolve(''L'', ''t'', ''ext-succ'', ''released'', ''{"sent":false}'')')
       = 'idem_resolve: illegal transition succeeded -> released for key "ext-succ"';
SELECT 'succ-resolve-code', errcode('SELECT idem_resolve(''L'', ''t'', ''ext-succ'', ''failed'', NULL)') = 19;
SELECT 'succ-unchanged', (SELECT status = 'succeeded' AND result = '{"a":1,"b":2}' AND updated_at = 1700000001000 FROM L_rows WHERE "key" = 'ext-succ');

-- ---------------------------------------------------------------- claimed -> failed
SELECT 'fail-settle', idem_settle('L', (SELECT token FROM L WHERE "key" = 'ext-fail'), 'failed', '{"code":"card_declined"}')
       = '{"key":"ext-fail","status":"failed","attempt":1,"durable":false,"settled_at":1700000001000,"members":[]}';
SELECT 'fail-stored', (SELECT status = 'failed' AND error = '{"code":"card_declined"}' AND result IS NULL FROM L_rows WHERE "key" = 'ext-fail');
SELECT 'fail-to-succ', errmsg('SELECT idem_settle(''L'', (SELECT token FROM L WHERE "key" = ''ext-fail''), ''succeeded'', NULL)')
       = 'idem_settle: illegal transition failed -> succeeded for key "ext-fail"';
SELECT 'fail-to-failed', errmsg('SELECT idem_settle(''L'', (SELECT token FROM L WHERE "key" = ''ext-fail''), ''failed'', NULL)')
       = 'idem_settle: illegal transition failed -> failed for key "ext-fail"';
SELECT 'fail-to-released', errmsg('SELECT idem_settle(''L'', (SELECT token FROM L WHERE "key" = ''ext-fail''), ''released'', ''{"sent":false}'')')
       = 'idem_settle: illegal transition failed -> released for key "ext-fail"';
SELECT 'fail-to-unknown', errmsg('SELECT idem_settle(''L'', (SELECT token FROM L WHERE "key" = ''ext-fail''), ''unknown'', NULL)')
       = 'idem_settle: illegal transition failed -> unknown for key "ext-fail"';
SELECT 'fail-resolve-succ', errmsg('SELECT idem_resolve(''L'', ''t'', ''ext-fail'', ''succeeded'', NULL)')
       = 'idem_resolve: illegal transition failed -> succeeded for key "ext-fail"';
-- a retry replays the failure with "error"
WITH c(j) AS MATERIALIZED (SELECT idem_claim('L', 't', 'c', 'tool', '{}', 'external', 'ext-fail'))
SELECT 'fail-replay', json_extract(j, '$.decision') = 'replay' AND json_type(j, '$.idempotent') = 'true' FROM c
UNION ALL SELECT 'fail-replay-error', json(json_extract(j, '$.error')) = '{"code":"card_declined"}' FROM c
UNION ALL SELECT 'fail-replay-no-result', json_type(j, '$.result') IS NULL FROM c
UNION ALL SELECT 'fail-replay-status', json_extract(j, '$.status') = 'failed' FROM c;

-- ---------------------------------------------------------------- claimed -> released (external needs {"sent": false})
SELECT 'rel-missing-detail', errmsg('SELECT idem_settle(''L'', (SELECT token FROM L WHERE "key" = ''ext-rel''), ''released'', NULL)')
       = 'idem_settle: releasing external key "ext-rel" needs detail {"sent": false}: only a request known never to have been sent may be retried';
SELECT 'rel-missing-code', errcode('SELECT idem_settle(''L'', (SELECT token FROM L WHERE "key" = ''ext-rel''), ''released'', NULL)') = 19;
SELECT 'rel-sent-true', errmsg('SELECT idem_settle(''L'', (SELECT token FROM L WHERE "key" = ''ext-rel''), ''released'', ''{"sent":true}'')')
       = 'idem_settle: releasing external key "ext-rel" needs detail {"sent": false}: only a request known never to have been sent may be retried';
SELECT 'rel-empty-object', errcode('SELECT idem_settle(''L'', (SELECT token FROM L WHERE "key" = ''ext-rel''), ''released'', ''{}'')') = 19;
SELECT 'rel-not-object-array', errcode('SELECT idem_settle(''L'', (SELECT token FROM L WHERE "key" = ''ext-rel''), ''released'', ''[{"sent":false}]'')') = 19;
SELECT 'rel-not-object-false', errcode('SELECT idem_settle(''L'', (SELECT token FROM L WHERE "key" = ''ext-rel''), ''released'', ''false'')') = 19;
SELECT 'rel-not-object-string', errcode('SELECT idem_settle(''L'', (SELECT token FROM L WHERE "key" = ''ext-rel''), ''released'', ''"sent: false"'')') = 19;
SELECT 'rel-nested', errmsg('SELECT idem_settle(''L'', (SELECT token FROM L WHERE "key" = ''ext-rel''), ''released'', ''{"detail":{"sent":false}}'')')
       = 'idem_settle: releasing external key "ext-rel" needs detail {"sent": false}: only a request known never to have been sent may be retried';
SELECT 'rel-sent-zero', errcode('SELECT idem_settle(''L'', (SELECT token FROM L WHERE "key" = ''ext-rel''), ''released'', ''{"sent":0}'')') = 19;
SELECT 'rel-sent-string', errcode('SELECT idem_settle(''L'', (SELECT token FROM L WHERE "key" = ''ext-rel''), ''released'', ''{"sent":"false"}'')') = 19;
SELECT 'rel-sent-null', errcode('SELECT idem_settle(''L'', (SELECT token FROM L WHERE "key" = ''ext-rel''), ''released'', ''{"sent":null}'')') = 19;
SELECT 'rel-sent-case', errcode('SELECT idem_settle(''L'', (SELECT token FROM L WHERE "key" = ''ext-rel''), ''released'', ''{"Sent":false}'')') = 19;
SELECT 'rel-refusals-changed-nothing', (SELECT status = 'claimed' AND error IS NULL AND updated_at = 1700000000000 FROM L_rows WHERE "key" = 'ext-rel');
INSERT INTO old SELECT 'ext-rel', token FROM L WHERE "key" = 'ext-rel';
SELECT 'rel-ok', idem_settle('L', (SELECT token FROM L WHERE "key" = 'ext-rel'), 'released', '{"why":"connection refused","sent":false}')
       = '{"key":"ext-rel","status":"released","attempt":1,"durable":false,"settled_at":1700000001000,"members":[]}';
SELECT 'rel-stored-as-error', (SELECT status = 'released' AND error = '{"sent":false,"why":"connection refused"}' AND result IS NULL FROM L_rows WHERE "key" = 'ext-rel');
SELECT 'rel-to-succ', errmsg('SELECT idem_settle(''L'', (SELECT t FROM old WHERE name = ''ext-rel''), ''succeeded'', NULL)')
       = 'idem_settle: illegal transition released -> succeeded for key "ext-rel"';
SELECT 'rel-to-failed', errmsg('SELECT idem_settle(''L'', (SELECT t FROM old WHERE name = ''ext-rel''), ''failed'', NULL)')
       = 'idem_settle: illegal transition released -> failed for key "ext-rel"';
SELECT 'rel-to-released', errmsg('SELECT idem_settle(''L'', (SELECT t FROM old WHERE name = ''ext-rel''), ''released'', ''{"sent":false}'')')
       = 'idem_settle: illegal transition released -> released for key "ext-rel"';
SELECT 'rel-to-unknown', errmsg('SELECT idem_settle(''L'', (SELECT t FROM old WHERE name = ''ext-rel''), ''unknown'', NULL)')
       = 'idem_settle: illegal transition released -> unknown for key "ext-rel"';
SELECT 'rel-resolve', errmsg('SELECT idem_resolve(''L'', ''t'', ''ext-rel'', ''succeeded'', NULL)')
       = 'idem_resolve: illegal transition released -> succeeded for key "ext-rel"';
-- released then claimed again: admitted, attempt 2, a new token; the old token is refused
SELECT sqltest_clock(1700000002000);
WITH c(j) AS MATERIALIZED (SELECT idem_claim('L', 't', 'c', 'tool', '{}', 'external', 'ext-rel'))
SELECT 'rel-reclaim-admitted', json_extract(j, '$.decision') = 'admitted' FROM c
UNION ALL SELECT 'rel-reclaim-attempt-2', json_extract(j, '$.attempt') = 2 FROM c
UNION ALL SELECT 'rel-reclaim-new-token', json_extract(j, '$.token') <> (SELECT t FROM old WHERE name = 'ext-rel') AND length(json_extract(j, '$.token')) = 32 FROM c
UNION ALL SELECT 'rel-reclaim-token-stored', json_extract(j, '$.token') = (SELECT token FROM L WHERE "key" = 'ext-rel') FROM c
UNION ALL SELECT 'rel-reclaim-lease', json_extract(j, '$.lease_until') = 1700000002000 + 300000 FROM c
UNION ALL SELECT 'rel-reclaim-keyset', (SELECT group_concat(key, ',') FROM (SELECT key FROM json_each(j) ORDER BY key))
       = 'attempt,committed,decision,durable,effect,key,lease_until,note,token' FROM c;
SELECT 'rel-reclaim-row', (SELECT status = 'claimed' AND attempt = 2 AND error IS NULL AND result IS NULL AND created_at = 1700000000000 AND updated_at = 1700000002000 FROM L_rows WHERE "key" = 'ext-rel');
SELECT 'rel-old-token-refused', errmsg('SELECT idem_settle(''L'', (SELECT t FROM old WHERE name = ''ext-rel''), ''succeeded'', NULL)')
       = 'idem_settle: no claim of ledger L holds token "' || (SELECT t FROM old WHERE name = 'ext-rel') || '" (a wrong token, or a claim that was taken over)';
SELECT 'rel-reclaim-settle', json_extract(idem_settle('L', (SELECT token FROM L WHERE "key" = 'ext-rel'), 'succeeded', '{"ok":true}'), '$.attempt') = 2;
SELECT 'rel-reclaim-replay-attempt', json_extract(idem_claim('L', 't', 'c', 'tool', '{}', 'external', 'ext-rel'), '$.attempt') = 2;
-- a released claim may be claimed again without limit (max_attempts counts take-overs only)
CREATE VIRTUAL TABLE R USING idempotency(max_attempts=1);
SELECT 'rel-loop-1', json_extract(idem_claim('R', 't', 'c', 'x', '{}', 'local', 'k'), '$.attempt') = 1;
SELECT 'rel-loop-1r', json_extract(idem_settle('R', (SELECT token FROM R), 'released', NULL), '$.status') = 'released';
SELECT 'rel-loop-2', json_extract(idem_claim('R', 't', 'c', 'x', '{}', 'local', 'k'), '$.attempt') = 2;
SELECT 'rel-loop-2r', json_extract(idem_settle('R', (SELECT token FROM R), 'released', '{"any":"reason"}'), '$.status') = 'released';
SELECT 'rel-loop-3', json_extract(idem_claim('R', 't', 'c', 'x', '{}', 'local', 'k'), '$.attempt') = 3;

-- ---------------------------------------------------------------- claimed -> unknown (external) and out of it
SELECT 'unk-settle', idem_settle('L', (SELECT token FROM L WHERE "key" = 'ext-unk'), 'unknown', '{"reason":"timeout"}')
       = '{"key":"ext-unk","status":"unknown","attempt":1,"durable":false,"settled_at":1700000002000,"members":[]}';
SELECT 'unk-stored', (SELECT status = 'unknown' AND error = '{"reason":"timeout"}' AND result IS NULL FROM L_rows WHERE "key" = 'ext-unk');
SELECT 'unk-to-unknown', errmsg('SELECT idem_settle(''L'', (SELECT token FROM L WHERE "key" = ''ext-unk''), ''unknown'', NULL)')
       = 'idem_settle: illegal transition unknown -> unknown for key "ext-unk"';
SELECT 'unk-resolve-unknown', errmsg('SELECT idem_resolve(''L'', ''t'', ''ext-unk'', ''unknown'', NULL)')
       = 'idem_resolve: status must be one of succeeded, failed or released; got "unknown"';
SELECT 'unk-resolve-claimed', errmsg('SELECT idem_resolve(''L'', ''t'', ''ext-unk'', ''claimed'', NULL)')
       = 'idem_resolve: status must be one of succeeded, failed or released; got "claimed"';
SELECT 'unk-resolve-release-needs-sent', errmsg('SELECT idem_resolve(''L'', ''t'', ''ext-unk'', ''released'', ''{"sent":true}'')')
       = 'idem_resolve: releasing external key "ext-unk" needs detail {"sent": false}: only a request known never to have been sent may be retried';
SELECT 'unk-resolve-release-null', errcode('SELECT idem_resolve(''L'', ''t'', ''ext-unk'', ''released'', NULL)') = 19;
SELECT 'unk-still-unknown', (SELECT status FROM L_rows WHERE "key" = 'ext-unk') = 'unknown';
SELECT 'unk-resolve-succ', idem_resolve('L', 't', 'ext-unk', 'succeeded', '{"found":"at target"}')
       = '{"key":"ext-unk","status":"succeeded","attempt":1,"durable":false,"settled_at":1700000002000,"members":[]}';
SELECT 'unk-resolved-stored', (SELECT status = 'succeeded' AND result = '{"found":"at target"}' FROM L_rows WHERE "key" = 'ext-unk');
SELECT 'unk-resolved-replays', json(json_extract(idem_claim('L', 't', 'c', 'tool', '{}', 'external', 'ext-unk'), '$.result')) = '{"found":"at target"}';
SELECT 'unk-resolve-again', errmsg('SELECT idem_resolve(''L'', ''t'', ''ext-unk'', ''failed'', NULL)')
       = 'idem_resolve: illegal transition succeeded -> failed for key "ext-unk"';
-- unknown -> failed by resolve, unknown -> released by resolve, unknown -> succeeded by a late settle
SELECT 'u2-claims', json_extract(idem_claim('L', 't', 'c', 'tool', '{}', 'external', 'u2'), '$.decision') || json_extract(idem_claim('L', 't', 'c', 'tool', '{}', 'external', 'u3'), '$.decision')
       || json_extract(idem_claim('L', 't', 'c', 'tool', '{}', 'external', 'u4'), '$.decision') = 'admittedadmittedadmitted';
SELECT 'u-settle-unknown', (SELECT count(*) FROM L WHERE "key" IN ('u2', 'u3', 'u4')
       AND json_extract(idem_settle('L', token, 'unknown', NULL), '$.status') = 'unknown') = 3;
SELECT 'u-stored-unknown-null-error', (SELECT count(*) FROM L_rows WHERE "key" IN ('u2', 'u3', 'u4') AND status = 'unknown' AND error IS NULL) = 3;
SELECT 'u2-resolve-failed', idem_resolve('L', 't', 'u2', 'failed', '{"target":"declined"}') = '{"key":"u2","status":"failed","attempt":1,"durable":false,"settled_at":1700000002000,"members":[]}';
SELECT 'u2-stored', (SELECT status = 'failed' AND error = '{"target":"declined"}' FROM L_rows WHERE "key" = 'u2');
SELECT 'u3-resolve-released', idem_resolve('L', 't', 'u3', 'released', '{"sent":false}') = '{"key":"u3","status":"released","attempt":1,"durable":false,"settled_at":1700000002000,"members":[]}';
SELECT 'u3-reclaim', json_extract(idem_claim('L', 't', 'c', 'tool', '{}', 'external', 'u3'), '$.attempt') = 2;
SELECT 'u4-late-settle', idem_settle('L', (SELECT token FROM L WHERE "key" = 'u4'), 'succeeded', '{"late":1}') = '{"key":"u4","status":"succeeded","attempt":1,"durable":false,"settled_at":1700000002000,"members":[]}';
SELECT 'u4-stored', (SELECT status = 'succeeded' AND result = '{"late":1}' FROM L_rows WHERE "key" = 'u4');
SELECT 'u5-claim', json_extract(idem_claim('L', 't', 'c', 'tool', '{}', 'external', 'u5'), '$.decision') = 'admitted';
SELECT 'u5-unknown', json_extract(idem_settle('L', (SELECT token FROM L WHERE "key" = 'u5'), 'unknown', NULL), '$.status') = 'unknown';
SELECT 'u5-late-settle-failed', json_extract(idem_settle('L', (SELECT token FROM L WHERE "key" = 'u5'), 'failed', NULL), '$.status') = 'failed';
SELECT 'u6-claim', json_extract(idem_claim('L', 't', 'c', 'tool', '{}', 'external', 'u6'), '$.decision') = 'admitted';
SELECT 'u6-unknown', json_extract(idem_settle('L', (SELECT token FROM L WHERE "key" = 'u6'), 'unknown', NULL), '$.status') = 'unknown';
SELECT 'u6-late-release-needs-sent', errcode('SELECT idem_settle(''L'', (SELECT token FROM L WHERE "key" = ''u6''), ''released'', NULL)') = 19;
SELECT 'u6-late-release', json_extract(idem_settle('L', (SELECT token FROM L WHERE "key" = 'u6'), 'released', '{"sent":false}'), '$.status') = 'released';
-- resolve is refused on a live claim
SELECT 'resolve-claimed', errmsg('SELECT idem_resolve(''L'', ''t'', ''ext-bad'', ''succeeded'', NULL)')
       = 'idem_resolve: key "ext-bad" is claimed, not unknown; the claim''s holder settles it with its token';
SELECT 'resolve-claimed-code', errcode('SELECT idem_resolve(''L'', ''t'', ''ext-bad'', ''failed'', NULL)') = 19;
SELECT 'resolve-missing-key', errmsg('SELECT idem_resolve(''L'', ''t'', ''nokey'', ''failed'', NULL)') = 'idem_resolve: ledger L has no key "nokey" for tenant "t"';
SELECT 'resolve-other-tenant', errmsg('SELECT idem_resolve(''L'', ''t2'', ''u2'', ''failed'', NULL)') = 'idem_resolve: ledger L has no key "u2" for tenant "t2"';
SELECT 'resolve-tenant-null', errmsg('SELECT idem_resolve(''L'', NULL, ''u2'', ''failed'', NULL)') = 'idem_resolve: tenant is missing (NULL)';
SELECT 'resolve-tenant-integer', errmsg('SELECT idem_resolve(''L'', 1, ''u2'', ''failed'', NULL)') = 'idem_resolve: tenant must be TEXT, got INTEGER';
SELECT 'resolve-key-empty', errmsg('SELECT idem_resolve(''L'', ''t'', '''', ''failed'', NULL)') = 'idem_resolve: key is empty';
SELECT 'resolve-key-bad-byte', errmsg('SELECT idem_resolve(''L'', ''t'', ''u 2'', ''failed'', NULL)') = 'idem_resolve: key "u 2" has byte 0x20 at offset 1; only A-Z a-z 0-9 _ - are allowed';
SELECT 'resolve-unknown-ledger', errmsg('SELECT idem_resolve(''nope'', ''t'', ''u2'', ''failed'', NULL)') = 'idem_resolve: unknown ledger "nope": no table USING idempotency by that name';
SELECT 'resolve-detail-not-json', errmsg('SELECT idem_resolve(''L'', ''t'', ''u2'', ''failed'', ''{x}'')') GLOB 'idem_resolve: detail: not valid JSON: *';

-- ---------------------------------------------------------------- local claims
SELECT 'loc-succ', idem_settle('L', (SELECT token FROM L WHERE "key" = 'loc-succ'), 'succeeded', '[1,2]') = '{"key":"loc-succ","status":"succeeded","attempt":1,"durable":false,"settled_at":1700000002000,"members":[]}';
SELECT 'loc-succ-stored', (SELECT result FROM L_rows WHERE "key" = 'loc-succ') = '[1,2]';
SELECT 'loc-fail', json_extract(idem_settle('L', (SELECT token FROM L WHERE "key" = 'loc-fail'), 'failed', '"boom"'), '$.status') = 'failed';
SELECT 'loc-fail-stored', (SELECT error FROM L_rows WHERE "key" = 'loc-fail') = '"boom"';
SELECT 'loc-unknown-refused', errmsg('SELECT idem_settle(''L'', (SELECT token FROM L WHERE "key" = ''loc-unk''), ''unknown'', NULL)')
       = 'idem_settle: status unknown is for external claims; the outcome of local key "loc-unk" is known: settle succeeded, failed or released';
SELECT 'loc-unknown-code', errcode('SELECT idem_settle(''L'', (SELECT token FROM L WHERE "key" = ''loc-unk''), ''unknown'', ''{}'')') = 19;
SELECT 'loc-unknown-unchanged', (SELECT status FROM L_rows WHERE "key" = 'loc-unk') = 'claimed';
SELECT 'loc-release-no-detail', idem_settle('L', (SELECT token FROM L WHERE "key" = 'loc-rel'), 'released', NULL) = '{"key":"loc-rel","status":"released","attempt":1,"durable":false,"settled_at":1700000002000,"members":[]}';
SELECT 'loc-release-stored', (SELECT status = 'released' AND error IS NULL FROM L_rows WHERE "key" = 'loc-rel');
SELECT 'loc-release-reclaim', json_extract(idem_claim('L', 't', 'c', 'tool', '{}', 'local', 'loc-rel'), '$.attempt') = 2;
SELECT 'loc-release-sent-true-ok', json_extract(idem_settle('L', (SELECT token FROM L WHERE "key" = 'loc-rel'), 'released', '{"sent":true}'), '$.status') = 'released';

-- ---------------------------------------------------------------- tokens
SELECT 'tok-not-hex', errmsg('SELECT idem_settle(''L'', ''zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz'', ''failed'', NULL)') = 'idem_settle: token must be the 32 lowercase hex digits idem_claim returned, got "zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz"';
SELECT 'tok-not-hex-code', errcode('SELECT idem_settle(''L'', ''zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz'', ''failed'', NULL)') = 19;
SELECT 'tok-uppercase', errmsg('SELECT idem_settle(''L'', upper((SELECT token FROM L WHERE "key" = ''ext-bad'')) , ''failed'', NULL)') = 'idem_settle: token must be the 32 lowercase hex digits idem_claim returned, got "' || upper((SELECT token FROM L WHERE "key" = 'ext-bad')) || '"'
       OR (SELECT token FROM L WHERE "key" = 'ext-bad') NOT GLOB '*[a-f]*';
SELECT 'tok-short', errmsg('SELECT idem_settle(''L'', substr((SELECT token FROM L WHERE "key" = ''ext-bad''), 1, 31), ''failed'', NULL)') = 'idem_settle: token must be the 32 lowercase hex digits idem_claim returned, got "' || substr((SELECT token FROM L WHERE "key" = 'ext-bad'), 1, 31) || '"';
SELECT 'tok-long', errmsg('SELECT idem_settle(''L'', (SELECT token FROM L WHERE "key" = ''ext-bad'') || ''0'', ''failed'', NULL)') = 'idem_settle: token must be the 32 lowercase hex digits idem_claim returned, got "' || (SELECT token FROM L WHERE "key" = 'ext-bad') || '0"';
SELECT 'tok-padded', errmsg('SELECT idem_settle(''L'', '' '' || (SELECT token FROM L WHERE "key" = ''ext-bad''), ''failed'', NULL)') = 'idem_settle: token must be the 32 lowercase hex digits idem_claim returned, got " ' || (SELECT token FROM L WHERE "key" = 'ext-bad') || '"';
SELECT 'tok-null', errmsg('SELECT idem_settle(''L'', NULL, ''failed'', NULL)') = 'idem_settle: token must be the 32 lowercase hex digits idem_claim returned, got NULL';
SELECT 'tok-integer', errmsg('SELECT idem_settle(''L'', 12345678901234567890123456789012, ''failed'', NULL)') = 'idem_settle: token must be the 32 lowercase hex digits idem_claim returned, got REAL';
SELECT 'tok-integer-small', errmsg('SELECT idem_settle(''L'', 1, ''failed'', NULL)') = 'idem_settle: token must be the 32 lowercase hex digits idem_claim returned, got 1';
-- a BLOB holding the token's bytes is not the TEXT token (no coercion)
SELECT 'tok-blob', errmsg('SELECT idem_settle(''L'', CAST((SELECT token FROM L WHERE "key" = ''ext-blob'') AS BLOB), ''failed'', NULL)') = 'idem_settle: token must be the 32 lowercase hex digits idem_claim returned, got BLOB';
SELECT 'tok-blob-changed-nothing', (SELECT status FROM L_rows WHERE "key" = 'ext-blob') = 'claimed';
SELECT 'tok-nul-inside', errcode('SELECT idem_settle(''L'', substr((SELECT token FROM L WHERE "key" = ''ext-bad''), 1, 16) || char(0) || substr((SELECT token FROM L WHERE "key" = ''ext-bad''), 18), ''failed'', NULL)') = 19;
SELECT 'tok-wrong', errmsg('SELECT idem_settle(''L'', ''0123456789abcdef0123456789abcdef'', ''failed'', NULL)')
       = 'idem_settle: no claim of ledger L holds token "0123456789abcdef0123456789abcdef" (a wrong token, or a claim that was taken over)';
SELECT 'tok-wrong-code', errcode('SELECT idem_settle(''L'', ''0123456789abcdef0123456789abcdef'', ''failed'', NULL)') = 19;
SELECT 'tok-other-ledger', errmsg('SELECT idem_settle(''S'', (SELECT token FROM L WHERE "key" = ''ext-bad''), ''failed'', NULL)')
       = 'idem_settle: no claim of ledger S holds token "' || (SELECT token FROM L WHERE "key" = 'ext-bad') || '" (a wrong token, or a claim that was taken over)';
SELECT 'tok-unknown-ledger', errmsg('SELECT idem_settle(''nope'', (SELECT token FROM L WHERE "key" = ''ext-bad''), ''failed'', NULL)')
       = 'idem_settle: unknown ledger "nope": no table USING idempotency by that name';
SELECT 'tok-errors-changed-nothing', (SELECT status = 'claimed' AND updated_at = 1700000000000 FROM L_rows WHERE "key" = 'ext-bad');

-- ---------------------------------------------------------------- status and detail validation
SELECT 'status-bogus', errmsg('SELECT idem_settle(''L'', (SELECT token FROM L WHERE "key" = ''ext-bad''), ''bogus'', NULL)')
       = 'idem_settle: status must be one of succeeded, failed, released or unknown; got "bogus"';
SELECT 'status-claimed', errmsg('SELECT idem_settle(''L'', (SELECT token FROM L WHERE "key" = ''ext-bad''), ''claimed'', NULL)')
       = 'idem_settle: status must be one of succeeded, failed, released or unknown; got "claimed"';
SELECT 'status-case', errmsg('SELECT idem_settle(''L'', (SELECT token FROM L WHERE "key" = ''ext-bad''), ''Succeeded'', NULL)')
       = 'idem_settle: status must be one of succeeded, failed, released or unknown; got "Succeeded"';
SELECT 'status-null', errmsg('SELECT idem_settle(''L'', (SELECT token FROM L WHERE "key" = ''ext-bad''), NULL, NULL)')
       = 'idem_settle: status must be one of succeeded, failed, released or unknown; got NULL';
SELECT 'status-integer', errmsg('SELECT idem_settle(''L'', (SELECT token FROM L WHERE "key" = ''ext-bad''), 1, NULL)')
       = 'idem_settle: status must be one of succeeded, failed, released or unknown; got INTEGER';
SELECT 'status-blob', errmsg('SELECT idem_settle(''L'', (SELECT token FROM L WHERE "key" = ''ext-blob2''), CAST(''failed'' AS BLOB), NULL)')
       = 'idem_settle: status must be one of succeeded, failed, released or unknown; got BLOB';
SELECT 'status-blob-changed-nothing', (SELECT status FROM L_rows WHERE "key" = 'ext-blob2') = 'claimed';
SELECT 'status-code', errcode('SELECT idem_settle(''L'', (SELECT token FROM L WHERE "key" = ''ext-bad''), ''bogus'', NULL)') = 19;
SELECT 'resolve-status-bogus', errmsg('SELECT idem_resolve(''L'', ''t'', ''ext-bad'', ''done'', NULL)')
       = 'idem_resolve: status must be one of succeeded, failed or released; got "done"';
SELECT 'detail-not-json', errmsg('SELECT idem_settle(''L'', (SELECT token FROM L WHERE "key" = ''ext-bad''), ''succeeded'', ''nope'')')
       = 'idem_settle: detail: not valid JSON: unexpected byte 0x6e at byte 0, expected a JSON value';
SELECT 'detail-not-json-code', errcode('SELECT idem_settle(''L'', (SELECT token FROM L WHERE "key" = ''ext-bad''), ''succeeded'', ''nope'')') = 1;
SELECT 'detail-duplicate', errmsg('SELECT idem_settle(''L'', (SELECT token FROM L WHERE "key" = ''ext-bad''), ''succeeded'', ''{"a":1,"a":1}'')')
       = 'idem_settle: detail: duplicate member name "a" in the object at byte 0';
SELECT 'detail-integer', errmsg('SELECT idem_settle(''L'', (SELECT token FROM L WHERE "key" = ''ext-bad''), ''succeeded'', 5)')
       = 'idem_settle: detail must be TEXT holding JSON, got INTEGER';
SELECT 'detail-blob', errmsg('SELECT idem_settle(''L'', (SELECT token FROM L WHERE "key" = ''ext-bad''), ''succeeded'', x''7b7d'')')
       = 'idem_settle: detail must be TEXT holding JSON, got BLOB';
SELECT 'detail-errors-changed-nothing', (SELECT status = 'claimed' AND result IS NULL AND updated_at = 1700000000000 FROM L_rows WHERE "key" = 'ext-bad');
-- detail over max_args_bytes (S: 20 bytes)
SELECT 's-claim', json_extract(idem_claim('S', 't', 'c', 'tool', '{}', 'external', 'k'), '$.decision') = 'admitted';
SELECT 'detail-over-cap', errmsg('SELECT idem_settle(''S'', (SELECT token FROM S), ''succeeded'', ''{"m":"0123456789abc"}'')')
       = 'idem_settle: detail is 21 bytes in canonical form, over the ledger''s max_args_bytes of 20';
SELECT 'detail-over-cap-code', errcode('SELECT idem_settle(''S'', (SELECT token FROM S), ''succeeded'', ''{"m":"0123456789abc"}'')') = 18;
SELECT 'detail-over-cap-resolve', errmsg('SELECT idem_resolve(''S'', ''t'', ''k'', ''succeeded'', ''{"m":"0123456789abc"}'')')
       = 'idem_resolve: detail is 21 bytes in canonical form, over the ledger''s max_args_bytes of 20';
SELECT 'detail-over-cap-unchanged', (SELECT status FROM S_rows) = 'claimed';
SELECT 'detail-at-cap', json_extract(idem_settle('S', (SELECT token FROM S), 'succeeded', '{"m":"0123456789ab"}'), '$.status') = 'succeeded';

-- arity
SELECT 'settle-arity', errmsg('SELECT idem_settle(''L'', ''0123456789abcdef0123456789abcdef'', ''failed'')') = 'wrong number of arguments to function idem_settle()';
SELECT 'resolve-arity', errmsg('SELECT idem_resolve(''L'', ''t'', ''k'', ''failed'')') = 'wrong number of arguments to function idem_resolve()';

-- the plain-SQL layer agrees: every stored row is consistent
SELECT 'final-statuses', (SELECT group_concat("key" || '=' || status, ',') FROM (SELECT "key", status FROM L_rows WHERE "key" NOT LIKE 'ext-blob%' ORDER BY "key"))
       = 'ext-bad=claimed,ext-fail=failed,ext-rel=succeeded,ext-succ=succeeded,ext-unk=succeeded,loc-fail=failed,loc-rel=released,loc-succ=succeeded,loc-unk=claimed,u2=failed,u3=claimed,u4=succeeded,u5=failed,u6=released';
SELECT 'integrity', (SELECT integrity_check FROM pragma_integrity_check) = 'ok';
SELECT sqltest_clock(NULL);
