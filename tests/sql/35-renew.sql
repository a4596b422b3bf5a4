-- idem_renew(ledger, token [, seconds]): extends a live claim's lease and
-- returns the new lease_until; fails once the token no longer holds a live
-- claim (expired, taken over, settled, resolved, unknown, wrong). The
-- stalled-holder story: a holder that slept past its lease, while an
-- operator released its claim and attempt 2 sent, learns it from its
-- renewal before it sends.

SELECT sqltest_clock(1700000000000);
CREATE VIRTUAL TABLE L USING idempotency(lease_seconds=30);
CREATE TABLE tok(name TEXT PRIMARY KEY, token);

-- ---------------------------------------------------------------- a live claim is extended
SELECT idem_claim('L', 't', 'c', 'send', '{"n":1}', 'external', 'k1');
INSERT INTO tok SELECT 'k1', token FROM L WHERE key = 'k1';
SELECT sqltest_clock(1700000010000);
SELECT 'renew-default-seconds', idem_renew('L', (SELECT token FROM tok WHERE name = 'k1')) = 1700000040000;
SELECT 'renew-typeof', typeof(idem_renew('L', (SELECT token FROM tok WHERE name = 'k1'))) = 'integer';
SELECT 'renew-row', (SELECT lease_until FROM L WHERE key = 'k1') = 1700000040000;
SELECT 'renew-updated-at', (SELECT updated_at FROM L WHERE key = 'k1') = 1700000010000;
SELECT 'renew-seconds', idem_renew('L', (SELECT token FROM tok WHERE name = 'k1'), 120) = 1700000130000;
-- never shortened: fewer seconds than are left keeps the lease; 0 only checks
SELECT 'renew-not-shortened', idem_renew('L', (SELECT token FROM tok WHERE name = 'k1'), 5) = 1700000130000;
SELECT 'renew-zero-checks', idem_renew('L', (SELECT token FROM tok WHERE name = 'k1'), 0) = 1700000130000;
SELECT 'renew-max', idem_renew('L', (SELECT token FROM tok WHERE name = 'k1'), 31536000) = 1700000010000 + 31536000000;
SELECT 'renew-same-claim', (SELECT status = 'claimed' AND attempt = 1 AND token = (SELECT token FROM tok WHERE name = 'k1') FROM L WHERE key = 'k1');
-- the renewed claim is still in progress for everyone else, and settles with its token
SELECT 'renewed-in-progress', json_extract(idem_claim('L', 't', 'c', 'send', '{"n":1}', 'external', 'k1'), '$.lease_until') = 1700000010000 + 31536000000;
SELECT 'renewed-settles', json_extract(idem_settle('L', (SELECT token FROM tok WHERE name = 'k1'), 'succeeded', '{}'), '$.status') = 'succeeded';
SELECT 'settled-renew-refused', errmsg('SELECT idem_renew(''L'', (SELECT token FROM tok WHERE name = ''k1''))')
       = 'idem_renew: token "' || (SELECT token FROM tok WHERE name = 'k1') || '" no longer holds a live claim of key "k1" in ledger L: it is succeeded; do not act on this claim';
SELECT 'settled-renew-code', errcode('SELECT idem_renew(''L'', (SELECT token FROM tok WHERE name = ''k1''))') = 19;
SELECT 'settled-unchanged', (SELECT lease_until FROM L WHERE key = 'k1') = 1700000010000 + 31536000000;

-- ---------------------------------------------------------------- arguments
SELECT 'bad-token', errmsg('SELECT idem_renew(''L'', ''xyz'')') = 'idem_renew: token must be the 32 lowercase hex digits idem_claim returned';
SELECT 'null-token', errmsg('SELECT idem_renew(''L'', NULL)') = 'idem_renew: token must be the 32 lowercase hex digits idem_claim returned';
SELECT 'upper-token', errmsg('SELECT idem_renew(''L'', upper((SELECT token FROM tok WHERE name = ''k1'')))') = 'idem_renew: token must be the 32 lowercase hex digits idem_claim returned';
SELECT 'blob-token', errmsg('SELECT idem_renew(''L'', CAST((SELECT token FROM tok WHERE name = ''k1'') AS BLOB))') = 'idem_renew: token must be the 32 lowercase hex digits idem_claim returned';
SELECT 'unknown-token', errmsg('SELECT idem_renew(''L'', ''00000000000000000000000000000000'')')
       = 'idem_renew: no claim of ledger L holds token "00000000000000000000000000000000": it was taken over by a later attempt, or the token is wrong; do not act on this claim';
SELECT 'unknown-ledger', errmsg('SELECT idem_renew(''nope'', ''00000000000000000000000000000000'')') = 'idem_renew: unknown ledger "nope": no table USING idempotency by that name';
SELECT idem_claim('L', 't', 'c', 'send', '{"n":2}', 'external', 'k2');
INSERT INTO tok SELECT 'k2', token FROM L WHERE key = 'k2';
SELECT 'seconds-above', errmsg('SELECT idem_renew(''L'', (SELECT token FROM tok WHERE name = ''k2''), 31536001)')
       = 'idem_renew: seconds must be an INTEGER from 0 to 31536000 (the lease_seconds range), got 31536001';
SELECT 'seconds-negative', errmsg('SELECT idem_renew(''L'', (SELECT token FROM tok WHERE name = ''k2''), -1)')
       = 'idem_renew: seconds must be an INTEGER from 0 to 31536000 (the lease_seconds range), got -1';
SELECT 'seconds-real', errmsg('SELECT idem_renew(''L'', (SELECT token FROM tok WHERE name = ''k2''), 10.0)')
       = 'idem_renew: seconds must be an INTEGER from 0 to 31536000 (the lease_seconds range), got REAL';
SELECT 'seconds-text', errmsg('SELECT idem_renew(''L'', (SELECT token FROM tok WHERE name = ''k2''), ''10'')')
       = 'idem_renew: seconds must be an INTEGER from 0 to 31536000 (the lease_seconds range), got "10"';
SELECT 'seconds-null', errmsg('SELECT idem_renew(''L'', (SELECT token FROM tok WHERE name = ''k2''), NULL)')
       = 'idem_renew: seconds must be an INTEGER from 0 to 31536000 (the lease_seconds range), got NULL';
SELECT 'seconds-code', errcode('SELECT idem_renew(''L'', (SELECT token FROM tok WHERE name = ''k2''), -1)') = 19;
SELECT 'bad-args-unchanged', (SELECT lease_until FROM L WHERE key = 'k2') = 1700000040000;

-- ---------------------------------------------------------------- expired
-- external: its lease passed, so its outcome is unknown
SELECT sqltest_clock(1700000040000);
SELECT 'expired-external', errmsg('SELECT idem_renew(''L'', (SELECT token FROM tok WHERE name = ''k2''))')
       = 'idem_renew: token "' || (SELECT token FROM tok WHERE name = 'k2') || '" no longer holds a live claim of key "k2" in ledger L: its lease expired at 1700000040000 and its outcome is unknown; do not act on this claim';
SELECT 'expired-external-unchanged', (SELECT lease_until FROM L WHERE key = 'k2') = 1700000040000;
-- local without rows: expired, not yet taken over
SELECT idem_claim('L', 't', 'c', 'write', '{"n":3}', 'local', 'k3');
INSERT INTO tok SELECT 'k3', token FROM L WHERE key = 'k3';
SELECT sqltest_clock(1700000070001);
SELECT 'expired-local', errmsg('SELECT idem_renew(''L'', (SELECT token FROM tok WHERE name = ''k3''))')
       = 'idem_renew: token "' || (SELECT token FROM tok WHERE name = 'k3') || '" no longer holds a live claim of key "k3" in ledger L: its lease expired at 1700000070000; do not act on this claim';
-- taken over: the old token finds no claim
SELECT 'taken-over', json_extract(idem_claim('L', 't', 'c', 'write', '{"n":3}', 'local', 'k3'), '$.attempt') = 2;
SELECT 'taken-over-renew', errmsg('SELECT idem_renew(''L'', (SELECT token FROM tok WHERE name = ''k3''))')
       = 'idem_renew: no claim of ledger L holds token "' || (SELECT token FROM tok WHERE name = 'k3') || '": it was taken over by a later attempt, or the token is wrong; do not act on this claim';
SELECT 'new-holder-renews', idem_renew('L', (SELECT token FROM L WHERE key = 'k3')) = 1700000070001 + 30000;
-- settled unknown by its holder
SELECT idem_claim('L', 't', 'c', 'send', '{"n":4}', 'external', 'k4');
INSERT INTO tok SELECT 'k4', token FROM L WHERE key = 'k4';
SELECT idem_settle('L', (SELECT token FROM tok WHERE name = 'k4'), 'unknown', NULL);
SELECT 'settled-unknown', errmsg('SELECT idem_renew(''L'', (SELECT token FROM tok WHERE name = ''k4''))')
       = 'idem_renew: token "' || (SELECT token FROM tok WHERE name = 'k4') || '" no longer holds a live claim of key "k4" in ledger L: it was settled unknown; do not act on this claim';
-- failed and released
SELECT idem_claim('L', 't', 'c', 'send', '{"n":5}', 'external', 'k5');
INSERT INTO tok SELECT 'k5', token FROM L WHERE key = 'k5';
SELECT idem_settle('L', (SELECT token FROM tok WHERE name = 'k5'), 'released', '{"sent":false}');
SELECT 'released-renew', errmsg('SELECT idem_renew(''L'', (SELECT token FROM tok WHERE name = ''k5''))')
       = 'idem_renew: token "' || (SELECT token FROM tok WHERE name = 'k5') || '" no longer holds a live claim of key "k5" in ledger L: it is released; do not act on this claim';

-- ---------------------------------------------------------------- the stalled holder
SELECT sqltest_clock(1700001000000);
-- holder A claims an external send and stalls past its lease
SELECT 'a-admitted', json_extract(idem_claim('L', 't', 'c', 'send_email', '{"to":"x"}', 'external', 'mail-1'), '$.attempt') = 1;
INSERT INTO tok SELECT 'A', token FROM L WHERE key = 'mail-1';
SELECT sqltest_clock(1700001031000);
SELECT 'a-expired-unknown', (SELECT status FROM L WHERE key = 'mail-1') = 'unknown';
-- an operator learns from the target that nothing was sent and releases it
SELECT 'operator-releases', json_extract(idem_resolve('L', 't', 'mail-1', 'released', '{"sent":false,"checked":"provider log"}'), '$.status') = 'released';
-- A wakes before attempt 2 exists: still refused (released)
SELECT 'a-renew-after-release', errmsg('SELECT idem_renew(''L'', (SELECT token FROM tok WHERE name = ''A''))')
       = 'idem_renew: token "' || (SELECT token FROM tok WHERE name = 'A') || '" no longer holds a live claim of key "mail-1" in ledger L: it is released; do not act on this claim';
-- attempt 2 is admitted and sends
SELECT 'b-admitted', json_extract(idem_claim('L', 't', 'c', 'send_email', '{"to":"x"}', 'external', 'mail-1'), '$.attempt') = 2;
INSERT INTO tok SELECT 'B', token FROM L WHERE key = 'mail-1';
SELECT 'b-renews-before-sending', idem_renew('L', (SELECT token FROM tok WHERE name = 'B')) = 1700001031000 + 30000;
-- A wakes up and renews right before it would send: refused, so A does not send
SELECT 'a-renew-refused', errmsg('SELECT idem_renew(''L'', (SELECT token FROM tok WHERE name = ''A''))')
       = 'idem_renew: no claim of ledger L holds token "' || (SELECT token FROM tok WHERE name = 'A') || '": it was taken over by a later attempt, or the token is wrong; do not act on this claim';
SELECT 'a-renew-wrote-nothing', (SELECT lease_until = 1700001061000 AND attempt = 2 AND token = (SELECT token FROM tok WHERE name = 'B') FROM L WHERE key = 'mail-1');
-- nor can A settle; B settles
SELECT 'a-settle-refused', errmsg('SELECT idem_settle(''L'', (SELECT token FROM tok WHERE name = ''A''), ''succeeded'', ''{}'')') GLOB 'idem_settle: no claim of ledger L holds token *';
SELECT 'b-settles', json_extract(idem_settle('L', (SELECT token FROM tok WHERE name = 'B'), 'succeeded', '{"id":"m-2"}'), '$.status') = 'succeeded';

-- ---------------------------------------------------------------- in a transaction, rolled back with it
SELECT idem_claim('L', 't', 'c', 'send', '{"n":6}', 'external', 'k6');
INSERT INTO tok SELECT 'k6', token FROM L WHERE key = 'k6';
BEGIN;
SELECT 'txn-renew', idem_renew('L', (SELECT token FROM L WHERE key = 'k6'), 600) = 1700001031000 + 600000;
ROLLBACK;
SELECT 'txn-rolled-back', (SELECT lease_until FROM L WHERE key = 'k6') = 1700001061000;

-- ---------------------------------------------------------------- a renewal refused by a foreign trigger changes nothing
CREATE TRIGGER foreign_t BEFORE UPDATE ON L_rows BEGIN SELECT 1; END;
SELECT 'foreign-trigger', errmsg('SELECT idem_renew(''L'', (SELECT token FROM tok WHERE name = ''k6''))') GLOB 'idem_renew: ledger L has a foreign trigger "foreign_t" on its shadow tables; *';
DROP TRIGGER foreign_t;
SELECT 'integrity', (SELECT integrity_check FROM pragma_integrity_check) = 'ok';
