-- sqltest: file
-- Acceptance cases found after the first round: durable follows the
-- synchronous setting of each transaction (it was kept from an earlier
-- transaction), and a _meta option of another type says its type.

CREATE VIRTUAL TABLE D USING idempotency;
CREATE TABLE other(x);

-- ---------------------------------------------------------------- durable per transaction
PRAGMA synchronous = FULL;
BEGIN;
SELECT 'durable-full-txn', json_extract(idem_claim('D', 't', 'c', 'x', '{"a":1}'), '$.durable') = 1;
COMMIT;
PRAGMA synchronous = OFF;
BEGIN;
SELECT 'durable-off-next-txn', json_extract(idem_claim('D', 't', 'c', 'x', '{"a":2}'), '$.durable') = 0;
SELECT 'durable-off-same-txn', json_extract(idem_claim('D', 't', 'c', 'x', '{"a":3}'), '$.durable') = 0;
COMMIT;
PRAGMA synchronous = FULL;
BEGIN;
INSERT INTO other VALUES (1);
SELECT 'durable-full-after-other-write', json_extract(idem_claim('D', 't', 'c', 'x', '{"a":4}'), '$.durable') = 1;
COMMIT;
PRAGMA synchronous = OFF;
BEGIN;
INSERT INTO other VALUES (2);
SELECT 'durable-off-after-other-write', json_extract(idem_claim('D', 't', 'c', 'x', '{"a":5}'), '$.durable') = 0;
COMMIT;
PRAGMA synchronous = FULL;
SELECT 'durable-autocommit', json_extract(idem_claim('D', 't', 'c', 'x', '{"a":6}'), '$.durable') = 1;
