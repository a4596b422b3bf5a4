-- sqltest: requires sqlite < 3.44.0
-- Defensive mode on SQLite before 3.44: the rows table is a shadow table
-- and read-only to plain SQL, its triggers notwithstanding.
SELECT 'defensive-on', sqltest_defensive(1) = 1;
CREATE VIRTUAL TABLE L USING idempotency(lease_seconds=60);
SELECT 'claim', json_extract(idem_claim('L', 't', 'c', 'x', '{}'), '$.decision') = 'admitted';
-- expect-error: table L_rows may not be modified
INSERT INTO L_rows(tenant,"key",conversation,tool,args,effect,status,attempt,token,created_at,updated_at,lease_until) VALUES('t','k','c','x','{}','external','claimed',1,random(),0,0,0);
-- expect-error: table L_rows may not be modified
UPDATE L_rows SET status = 'succeeded';
-- expect-error: table L_rows may not be modified
DELETE FROM L_rows;
BEGIN;
-- expect-error: table L_rows may not be modified
UPDATE L_rows SET lease_until = 0;
COMMIT;
SELECT 'rows-untouched', (SELECT count(*) FROM L_rows WHERE status = 'claimed' AND lease_until > 0) = 1;
SELECT 'shadow-type', (SELECT type FROM pragma_table_list WHERE name = 'L_rows') = 'shadow';
-- and meta and guards; the members table never is (the guards' triggers write it)
CREATE TABLE items(id INTEGER PRIMARY KEY, tenant TEXT, k TEXT);
SELECT 'guard', idem_guard('L', 'items', 'k', 'tenant') = 1;
-- expect-error: table L_meta may not be modified
UPDATE L_meta SET v = 0 WHERE k = 'lease_seconds';
-- expect-error: table L_guards may not be modified
DELETE FROM L_guards;
SELECT 'members-not-shadow', (SELECT type FROM pragma_table_list WHERE name = 'L_members') = 'table';
-- expect-error: idempotency: the members of ledger L are written only by the extension (the triggers idem_guard installs); plain SQL may read them
INSERT INTO L_members VALUES (99, 1, 1, 1);
-- the holes of format 1, at the top level of a defensive connection
SELECT 'hole-claim-ext', json_extract(idem_claim('L', 't', 'c', 'send', '{}', 'external', 'ext'), '$.decision') = 'admitted';
-- expect-error: table L_rows may not be modified
UPDATE L_rows SET status = 'released' WHERE status = 'claimed';
-- expect-error: table L_rows may not be modified
UPDATE L_rows SET status = 'claimed', attempt = attempt + 1, token = random() WHERE "key" = 'ext';
-- expect-error: table L_rows may not be modified
REPLACE INTO L_rows(id, tenant, "key", conversation, tool, args, effect, status, attempt, token, created_at, updated_at, lease_until) SELECT id, 't', 'other', 'c', 'x', '{}', 'external', 'claimed', 1, random(), 0, 0, 0 FROM L_rows WHERE "key" = 'ext';
-- expect-error: table L_rows may not be modified
REPLACE INTO L_rows(tenant, "key", conversation, tool, args, effect, status, attempt, token, created_at, updated_at, lease_until) VALUES ('t', 'ext', 'c', 'x', '{}', 'external', 'claimed', 1, random(), 0, 0, 0);
-- expect-error: table L_rows may not be modified
INSERT INTO L_rows(tenant, "key", conversation, tool, args, effect, status, result, attempt, token, created_at, updated_at, lease_until) VALUES ('t', 'forged', 'c', 'send', '{}', 'external', 'succeeded', '{"paid":1}', 1, random(), 0, 0, 0);
SELECT 'hole-live-claim-kept', json_extract(idem_claim('L', 't', 'c', 'send', '{}', 'external', 'ext'), '$.decision') = 'in_progress';
SELECT 'hole-forged-absent', (SELECT count(*) FROM L_rows WHERE "key" IN ('forged', 'other')) = 0;
