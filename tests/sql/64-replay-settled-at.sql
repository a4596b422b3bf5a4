-- A replay says when its outcome was recorded: settled_at is the row's
-- updated_at (Unix ms), the time of the settle or resolve that made it
-- terminal, not the claim's nor the replay's. The settle's and the
-- resolve's own answers name the same time, so the call that ran and its
-- replays agree exactly. A poison call's replay is the settle it makes, so
-- its settled_at is that claim's time. Exact answers, on a test clock.

SELECT sqltest_clock(1700000000000);
CREATE VIRTUAL TABLE L USING idempotency(lease_seconds=15, max_attempts=2);

-- ---------------------------------------------------------------- settled succeeded: the settle's time
SELECT idem_claim('L', 't', 'c', 'send', '{"n":1}', 'external', 'k1');
SELECT sqltest_clock(1700000003000);
CREATE TEMP TABLE s1 AS SELECT idem_settle('L', (SELECT token FROM L WHERE key = 'k1'), 'succeeded', '{"id":1}') AS v;
SELECT 'succeeded-settle-answer', v = '{"key":"k1","status":"succeeded","attempt":1,"durable":false,"settled_at":1700000003000,"members":[]}' FROM s1;
SELECT sqltest_clock(1700000009000);
SELECT 'succeeded-answer', idem_claim('L', 't', 'c', 'send', '{"n":1}', 'external', 'k1')
       = '{"decision":"replay","idempotent":true,"key":"k1","status":"succeeded","attempt":1,"settled_at":1700000003000,"result":{"id":1},"members":[]}';
SELECT 'succeeded-is-updated-at',
       json_extract(idem_claim('L', 't', 'c', 'send', '{"n":1}', 'external', 'k1'), '$.settled_at')
       = (SELECT updated_at FROM L WHERE key = 'k1');
SELECT 'succeeded-settle-is-replay',
       json_extract(v, '$.settled_at') = json_extract(idem_claim('L', 't', 'c', 'send', '{"n":1}', 'external', 'k1'), '$.settled_at')
       AND json_extract(v, '$.settled_at') = (SELECT updated_at FROM L WHERE key = 'k1') FROM s1;
-- a later replay still names the settle, not itself
SELECT sqltest_clock(1700000500000);
SELECT 'succeeded-later', json_extract(idem_claim('L', 't', 'c', 'send', '{"n":1}', 'external', 'k1'), '$.settled_at') = 1700000003000;

-- ---------------------------------------------------------------- settled failed, inside a transaction: the settle's time
SELECT sqltest_clock(1700001000000);
BEGIN;
SELECT idem_claim('L', 't', 'c', 'send', '{"n":2}', 'external', 'k2');
SELECT sqltest_clock(1700001001000);
CREATE TEMP TABLE s2 AS SELECT idem_settle('L', (SELECT token FROM L WHERE key = 'k2'), 'failed', '{"code":402}') AS v;
COMMIT;
SELECT 'failed-settle-answer', v = '{"key":"k2","status":"failed","attempt":1,"durable":false,"settled_at":1700001001000,"members":[]}' FROM s2;
SELECT sqltest_clock(1700001002000);
SELECT 'failed-answer', idem_claim('L', 't', 'c', 'send', '{"n":2}', 'external', 'k2')
       = '{"decision":"replay","idempotent":true,"key":"k2","status":"failed","attempt":1,"settled_at":1700001001000,"error":{"code":402},"members":[]}';
SELECT 'failed-settle-is-replay',
       json_extract(v, '$.settled_at') = json_extract(idem_claim('L', 't', 'c', 'send', '{"n":2}', 'external', 'k2'), '$.settled_at')
       AND json_extract(v, '$.settled_at') = (SELECT updated_at FROM L WHERE key = 'k2') FROM s2;

-- ---------------------------------------------------------------- resolved after unknown: the resolve's time
SELECT sqltest_clock(1700002000000);
SELECT idem_claim('L', 't', 'c', 'send', '{"n":3}', 'external', 'k3');
SELECT sqltest_clock(1700002020000);
SELECT 'unknown-first', json_extract(idem_claim('L', 't', 'c', 'send', '{"n":3}', 'external', 'k3'), '$.decision') = 'unknown';
SELECT sqltest_clock(1700002030000);
CREATE TEMP TABLE s3 AS SELECT idem_resolve('L', 't', 'k3', 'succeeded', '{"id":3}') AS v;
SELECT 'resolve-answer', v = '{"key":"k3","status":"succeeded","attempt":1,"durable":false,"settled_at":1700002030000,"members":[]}' FROM s3;
SELECT sqltest_clock(1700002040000);
SELECT 'resolved-answer', idem_claim('L', 't', 'c', 'send', '{"n":3}', 'external', 'k3')
       = '{"decision":"replay","idempotent":true,"key":"k3","status":"succeeded","attempt":1,"settled_at":1700002030000,"result":{"id":3},"members":[]}';
SELECT 'resolve-is-replay',
       json_extract(v, '$.settled_at') = json_extract(idem_claim('L', 't', 'c', 'send', '{"n":3}', 'external', 'k3'), '$.settled_at')
       AND json_extract(v, '$.settled_at') = (SELECT updated_at FROM L WHERE key = 'k3') FROM s3;

-- ---------------------------------------------------------------- a poison call: the claim that fails it
-- attempt 1 at ...000, taken over at ...020 (attempt 2, updated_at ...020),
-- and its expiry at ...040 is the 2nd of max_attempts=2: that claim settles
-- the row failed, now
SELECT sqltest_clock(1700003000000);
SELECT idem_claim('L', 't', 'c', 'write', '{}', 'local', 'p1');
SELECT sqltest_clock(1700003020000);
SELECT 'poison-take-over', json_extract(idem_claim('L', 't', 'c', 'write', '{}', 'local', 'p1'), '$.attempt') = 2;
SELECT 'poison-claimed-at', (SELECT updated_at FROM L WHERE key = 'p1') = 1700003020000;
SELECT sqltest_clock(1700003040000);
SELECT 'poison-answer', idem_claim('L', 't', 'c', 'write', '{}', 'local', 'p1')
       = '{"decision":"replay","idempotent":true,"key":"p1","status":"failed","attempt":2,"settled_at":1700003040000,"error":{"reason":"max_attempts","attempts":2,"message":"2 attempts expired without a settle; the call is not retried"},"members":[]}';
SELECT 'poison-settled-now', (SELECT updated_at FROM L WHERE key = 'p1') = 1700003040000;
-- and its replays name that settle
SELECT sqltest_clock(1700003050000);
SELECT 'poison-replay', json_extract(idem_claim('L', 't', 'c', 'write', '{}', 'local', 'p1'), '$.settled_at') = 1700003040000;

-- ---------------------------------------------------------------- no other answer carries it
SELECT sqltest_clock(1700004000000);
SELECT 'admitted-none', json_type(idem_claim('L', 't', 'c', 'send', '{"n":4}', 'external', 'k4'), '$.settled_at') IS NULL;
SELECT 'in-progress-none', json_type(idem_claim('L', 't', 'c', 'send', '{"n":4}', 'external', 'k4'), '$.settled_at') IS NULL;
