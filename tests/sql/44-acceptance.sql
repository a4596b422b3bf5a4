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

-- ---------------------------------------------------------------- _meta values of another type, missing rows
CREATE VIRTUAL TABLE O USING idempotency;
-- the options are fixed by O_meta's triggers: editing them as someone who
-- rewrites the file would, the triggers go first
DROP TRIGGER O_meta_insert; DROP TRIGGER O_meta_update; DROP TRIGGER O_meta_delete;
UPDATE O_meta SET v = '300' WHERE k = 'lease_seconds';
PRAGMA writable_schema = RESET;
SELECT 'meta-text-says-text', errmsg('SELECT count(*) FROM O')
       = 'idempotency: ledger O has lease_seconds = ''300'' (TEXT) in O_meta; it must be an integer from 0 to 31536000';
UPDATE O_meta SET v = 300.0 WHERE k = 'lease_seconds';
PRAGMA writable_schema = RESET;
SELECT 'meta-real-says-real', errmsg('SELECT count(*) FROM O')
       = 'idempotency: ledger O has lease_seconds = 300.0 (REAL) in O_meta; it must be an integer from 0 to 31536000';
UPDATE O_meta SET v = x'01' WHERE k = 'lease_seconds';
PRAGMA writable_schema = RESET;
SELECT 'meta-blob-says-blob', errmsg('SELECT count(*) FROM O')
       = 'idempotency: ledger O has lease_seconds = a BLOB in O_meta; it must be an integer from 0 to 31536000';
UPDATE O_meta SET v = 300 WHERE k = 'lease_seconds';
DELETE FROM O_meta WHERE k = 'max_attempts';
PRAGMA writable_schema = RESET;
SELECT 'meta-missing-named', errmsg('SELECT count(*) FROM O')
       = 'idempotency: ledger O has no max_attempts in O_meta; it must be an integer from 1 to 1000';
INSERT INTO O_meta VALUES ('max_attempts', 5);
UPDATE O_meta SET v = 'x' WHERE k = 'id';
PRAGMA writable_schema = RESET;
SELECT 'meta-id-named', errmsg('SELECT count(*) FROM O')
       = 'idempotency: ledger O has no id in O_meta; it must be the ledger''s 16-character identity';
UPDATE O_meta SET v = '0123456789abcdef' WHERE k = 'id';
UPDATE O_meta SET v = '2' WHERE k = 'format';
PRAGMA writable_schema = RESET;
SELECT 'meta-format-text', errmsg('SELECT count(*) FROM O')
       = 'idempotency: ledger O has no integer format in O_meta; this build reads format 5';
UPDATE O_meta SET v = 5 WHERE k = 'format';
PRAGMA writable_schema = RESET;
SELECT 'meta-restored', json_extract(idem_upgrade('O'), '$.triggers_created') = 3
       AND (SELECT count(*) FROM O) = 0;

-- ---------------------------------------------------------------- a malformed token is named (a long one by its length)
CREATE VIRTUAL TABLE K USING idempotency;
SELECT 'token-long-named-by-length', errmsg('SELECT idem_settle(''K'', printf(''%.100c'', ''a''), ''failed'', NULL)')
       = 'idem_settle: token must be the 32 lowercase hex digits idem_claim returned, got a TEXT of 100 bytes';
SELECT 'token-renew-named', errmsg('SELECT idem_renew(''K'', ''abc'')')
       = 'idem_renew: token must be the 32 lowercase hex digits idem_claim returned, got "abc"';
SELECT 'token-resolve-by-key-unaffected', errmsg('SELECT idem_resolve(''K'', ''t'', ''nokey'', ''released'', NULL)')
       = 'idem_resolve: ledger K has no key "nokey" for tenant "t"';

-- ---------------------------------------------------------------- numbers in stored JSON
-- A result keeps its numbers as written (docs/design.md, "Stored results
-- and errors": results are not keys): 1e20 stays 1e20, 9007199254740993.0 is not rounded to a double,
-- and the stored text is replayed as it is, not called corrupt.
CREATE VIRTUAL TABLE B USING idempotency;
SELECT 'big-claim', json_extract(idem_claim('B', 't', 'c', 'x', '{"q":1e20}', 'external', 'big1'), '$.decision') = 'admitted';
SELECT 'big-settle', json_extract(idem_settle('B', (SELECT token FROM B WHERE key = 'big1'), 'succeeded', '{"x":1e20,"y":[-1.5e18,9007199254740993.0]}'), '$.status') = 'succeeded';
SELECT 'big-stored', (SELECT result FROM B WHERE key = 'big1') = '{"x":1e20,"y":[-1.5e18,9007199254740993.0]}';
SELECT 'big-replay', idem_claim('B', 't', 'c', 'x', '{"q":1e20}', 'external', 'big1')
       = '{"decision":"replay","idempotent":true,"key":"big1","status":"succeeded","attempt":1,"settled_at":' || (SELECT updated_at FROM B WHERE key = 'big1') || ',"result":{"x":1e20,"y":[-1.5e18,9007199254740993.0]},"members":[]}';
SELECT 'big-failed', json_extract(idem_claim('B', 't', 'c', 'x', '{}', 'external', 'big2'), '$.decision') = 'admitted';
SELECT 'big-failed-settle', json_extract(idem_settle('B', (SELECT token FROM B WHERE key = 'big2'), 'failed', '{"code":123456789012345678901e0}'), '$.status') = 'failed';
SELECT 'big-failed-replay', json_extract(idem_claim('B', 't', 'c', 'x', '{}', 'external', 'big2'), '$.error') = '{"code":123456789012345678901e0}';
-- stored by a program (plain SQL cannot write the rows): an integer of 22 digits is JSON and replayed as it is;
-- text that is not JSON (a leading zero) is still refused
SELECT 'big-plain-claim', json_extract(idem_claim('B', 't', 'c', 'x', '{}', 'external', 'big3'), '$.decision') = 'admitted';
SELECT 'big-forged-22', sqltest_forge('UPDATE B_rows SET status = ''succeeded'', result = ''[1234567890123456789012]'' WHERE key = ''big3''') IS NULL;
SELECT 'big-22-digits-replayed', json_extract(idem_claim('B', 't', 'c', 'x', '{}', 'external', 'big3'), '$.decision') = 'replay'
       AND instr(idem_claim('B', 't', 'c', 'x', '{}', 'external', 'big3'), '"result":[1234567890123456789012]') > 0;
SELECT 'big-plain-claim-2', json_extract(idem_claim('B', 't', 'c', 'x', '{}', 'external', 'big4'), '$.decision') = 'admitted';
SELECT 'big-forged-01', sqltest_forge('UPDATE B_rows SET status = ''succeeded'', result = ''[01]'' WHERE key = ''big4''') IS NULL;
SELECT 'leading-zero-refused', errmsg('SELECT idem_claim(''B'', ''t'', ''c'', ''x'', ''{}'', ''external'', ''big4'')')
       = 'idem_claim: the stored result of key "big4" in B_rows is not valid JSON; the row was changed outside the ledger, so no answer is made from it';
-- input keeps the I-JSON rule
SELECT 'big-input-still-refused', errmsg('SELECT idem_canonical(''[100000000000000000000]'')')
       = 'idem_canonical: json: integer 100000000000000000000 at byte 1 is beyond 2^53-1 and would lose precision; send it as a string';
