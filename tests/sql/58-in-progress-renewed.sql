-- The in_progress answer says when its holder last showed a sign of life:
-- renewed_at is the row's updated_at (Unix ms): the claim's time until a
-- renewal, then the latest renewal's. Exact answers, on a test clock.

SELECT sqltest_clock(1700000000000);
CREATE VIRTUAL TABLE L USING idempotency(lease_seconds=15);
CREATE TABLE tok(name TEXT PRIMARY KEY, token);

-- ---------------------------------------------------------------- never renewed: the claim's time
SELECT idem_claim('L', 't', 'c', 'send', '{"n":1}', 'external', 'k1');
INSERT INTO tok SELECT 'k1', token FROM L WHERE key = 'k1';
SELECT sqltest_clock(1700000004000);
SELECT 'claimed-answer', idem_claim('L', 't', 'c', 'send', '{"n":1}', 'external', 'k1')
       = '{"decision":"in_progress","key":"k1","attempt":1,"lease_until":1700000015000,"renewed_at":1700000000000}';

-- ---------------------------------------------------------------- renewed: the renewal's time
SELECT sqltest_clock(1700000005000);
SELECT 'renewed', idem_renew('L', (SELECT token FROM tok WHERE name = 'k1'), 15) = 1700000020000;
SELECT sqltest_clock(1700000009000);
SELECT 'renewed-answer', idem_claim('L', 't', 'c', 'send', '{"n":1}', 'external', 'k1')
       = '{"decision":"in_progress","key":"k1","attempt":1,"lease_until":1700000020000,"renewed_at":1700000005000}';
SELECT 'renewed-at-is-updated-at', (SELECT updated_at FROM L WHERE key = 'k1') = 1700000005000;

-- a renewal that does not lengthen the lease (0 seconds only checks) still
-- writes the row, and says the holder is alive
SELECT sqltest_clock(1700000010000);
SELECT 'checked', idem_renew('L', (SELECT token FROM tok WHERE name = 'k1'), 0) = 1700000020000;
SELECT 'checked-answer', idem_claim('L', 't', 'c', 'send', '{"n":1}', 'external', 'k1')
       = '{"decision":"in_progress","key":"k1","attempt":1,"lease_until":1700000020000,"renewed_at":1700000010000}';

-- ---------------------------------------------------------------- a local claim: the same shape
SELECT sqltest_clock(1700000100000);
SELECT idem_claim('L', 't', 'c', 'write', '{}', 'local', 'l1');
SELECT sqltest_clock(1700000101000);
SELECT 'local-answer', idem_claim('L', 't', 'c', 'write', '{}', 'local', 'l1')
       = '{"decision":"in_progress","key":"l1","attempt":1,"lease_until":1700000115000,"renewed_at":1700000100000}';

-- ---------------------------------------------------------------- the holder died: its lease passes, the answer is unknown
SELECT sqltest_clock(1700000020000);
SELECT 'expired-unknown', idem_claim('L', 't', 'c', 'send', '{"n":1}', 'external', 'k1')
       = '{"decision":"unknown","key":"k1","attempt":1,"message":"that request may have reached the target system, the outcome is theirs to report, and nothing is retried here"}';
