-- A refused INSERT INTO the ledger writes nothing, also inside a transaction:
-- a poison call (an expired local claim past max_attempts) is refused by the
-- INSERT and recorded failed by the next idem_claim, not by the refused statement.
SELECT sqltest_clock(1700000000000);
CREATE VIRTUAL TABLE L USING idempotency(lease_seconds=1, max_attempts=1);
SELECT json_extract(idem_claim('L', 't', 'c', 'x', '{}', 'local', 'k'), '$.decision');
SELECT sqltest_clock(1700000005000);
BEGIN;
SELECT 'insert-refused', errmsg('INSERT INTO L(tenant, conversation, tool, args, effect, key) VALUES (''t'', ''c'', ''x'', ''{}'', ''local'', ''k'')')
       = 'idempotency: key "k" of tenant "t" in ledger L is taken: it failed at attempt 1';
SELECT 'nothing-written', (SELECT status FROM L_rows WHERE "key" = 'k') = 'claimed';
COMMIT;
SELECT 'claim-records-poison', json_extract(idem_claim('L', 't', 'c', 'x', '{}', 'local', 'k'), '$.decision') = 'replay';
SELECT 'now-failed', (SELECT status FROM L_rows WHERE "key" = 'k') = 'failed';
