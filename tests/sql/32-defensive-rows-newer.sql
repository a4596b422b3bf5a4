-- sqltest: requires sqlite >= 3.44.0
-- Defensive mode on SQLite 3.44 and later, which refuses a trigger on a
-- shadow table: the rows table is not declared one, so plain SQL may write
-- it, but only what its CHECKs, unique indexes and triggers allow.
SELECT 'defensive-on', sqltest_defensive(1) = 1;
CREATE VIRTUAL TABLE L USING idempotency(lease_seconds=60);
SELECT 'claim', json_extract(idem_claim('L', 't', 'c', 'x', '{}', 'external', 'op-1'), '$.decision') = 'admitted';
SELECT 'settle', json_extract(idem_settle('L', (SELECT token FROM L WHERE "key" = 'op-1'), 'succeeded', NULL), '$.status') = 'succeeded';
SELECT 'not-shadow', (SELECT type FROM pragma_table_list WHERE name = 'L_rows') = 'table';
-- no table is a shadow table there: every one carries triggers
SELECT 'meta-not-shadow', (SELECT count(*) FROM pragma_table_list WHERE name GLOB 'L_*' AND type = 'shadow') = 0;
-- expect-error: idempotency: the format, identity and options of a ledger are fixed when it is created
UPDATE L_meta SET v = 0 WHERE k = 'lease_seconds';
-- expect-error: idempotency: the guards of ledger L are written only by the extension (idem_guard and idem_unguard); plain SQL may read them
INSERT INTO L_guards(tbl, key_column) VALUES ('nothing', 'k');
-- expect-error: idempotency: the rows of ledger L are written only by the extension (idem_claim, idem_settle, idem_resolve, idem_purge, or INSERT INTO and DELETE FROM the ledger table); plain SQL may read them
UPDATE L_rows SET status = 'claimed';
-- expect-error: idempotency: the rows of ledger L are written only by the extension (idem_claim, idem_settle, idem_resolve, idem_purge, or INSERT INTO and DELETE FROM the ledger table); plain SQL may read them
UPDATE L_rows SET args = '{"x":1}';
-- expect-error: idempotency: the rows of ledger L are written only by the extension (idem_claim, idem_settle, idem_resolve, idem_purge, or INSERT INTO and DELETE FROM the ledger table); plain SQL may read them
INSERT INTO L_rows(tenant,"key",conversation,tool,args,effect,status,attempt,token,created_at,updated_at,lease_until) VALUES('t',NULL,'c','x','{}','external','claimed',1,random(),0,0,0);
-- expect-error: idempotency: the rows of ledger L are written only by the extension (idem_claim, idem_settle, idem_resolve, idem_purge, or INSERT INTO and DELETE FROM the ledger table); plain SQL may read them
INSERT INTO L_rows(tenant,"key",conversation,tool,args,effect,status,attempt,token,created_at,updated_at,lease_until) VALUES('t','op-1','c','x','{}','external','claimed',1,random(),0,0,0);
SELECT 'still-succeeded', (SELECT status FROM L WHERE "key" = 'op-1') = 'succeeded';
-- the holes of format 1, at the top level of a defensive connection
SELECT 'hole-claim-ext', json_extract(idem_claim('L', 't', 'c', 'send', '{}', 'external', 'ext'), '$.decision') = 'admitted';
-- expect-error: idempotency: the rows of ledger L are written only by the extension (idem_claim, idem_settle, idem_resolve, idem_purge, or INSERT INTO and DELETE FROM the ledger table); plain SQL may read them
UPDATE L_rows SET status = 'released' WHERE status = 'claimed';
-- expect-error: idempotency: the rows of ledger L are written only by the extension (idem_claim, idem_settle, idem_resolve, idem_purge, or INSERT INTO and DELETE FROM the ledger table); plain SQL may read them
UPDATE L_rows SET status = 'claimed', attempt = attempt + 1, token = random() WHERE "key" = 'ext';
-- expect-error: idempotency: the rows of ledger L are written only by the extension (idem_claim, idem_settle, idem_resolve, idem_purge, or INSERT INTO and DELETE FROM the ledger table); plain SQL may read them
REPLACE INTO L_rows(id, tenant, "key", conversation, tool, args, effect, status, attempt, token, created_at, updated_at, lease_until) SELECT id, 't', 'other', 'c', 'x', '{}', 'external', 'claimed', 1, random(), 0, 0, 0 FROM L_rows WHERE "key" = 'ext';
-- expect-error: idempotency: the rows of ledger L are written only by the extension (idem_claim, idem_settle, idem_resolve, idem_purge, or INSERT INTO and DELETE FROM the ledger table); plain SQL may read them
REPLACE INTO L_rows(tenant, "key", conversation, tool, args, effect, status, attempt, token, created_at, updated_at, lease_until) VALUES ('t', 'ext', 'c', 'x', '{}', 'external', 'claimed', 1, random(), 0, 0, 0);
-- expect-error: idempotency: the rows of ledger L are written only by the extension (idem_claim, idem_settle, idem_resolve, idem_purge, or INSERT INTO and DELETE FROM the ledger table); plain SQL may read them
INSERT INTO L_rows(tenant, "key", conversation, tool, args, effect, status, result, attempt, token, created_at, updated_at, lease_until) VALUES ('t', 'forged', 'c', 'send', '{}', 'external', 'succeeded', '{"paid":1}', 1, random(), 0, 0, 0);
SELECT 'hole-live-claim-kept', json_extract(idem_claim('L', 't', 'c', 'send', '{}', 'external', 'ext'), '$.decision') = 'in_progress';
SELECT 'hole-forged-absent', (SELECT count(*) FROM L_rows WHERE "key" IN ('forged', 'other')) = 0;
