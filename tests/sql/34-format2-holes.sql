-- sqltest: file
-- The holes of the first formats, each tried with defensive mode off and
-- then on, with the extension loaded: every plain-SQL write is refused
-- (only the extension writes the ledger's tables). The checks run their SQL
-- through errmsg(), a statement nested in another, which SQLite never holds
-- to the read-only rule of shadow tables: what refuses here is the triggers,
-- on every version. Top-level writes on a defensive connection are in
-- 31-defensive-rows.sql (before 3.44: read-only) and
-- 32-defensive-rows-newer.sql (3.44 and later: the triggers). Options read
-- back from <name>_meta are checked, and a stored result that is not JSON
-- never becomes an answer.
SELECT sqltest_clock(1700000000000);
CREATE VIRTUAL TABLE L USING idempotency(lease_seconds=60);
CREATE TEMP TABLE msg(k PRIMARY KEY, v);
INSERT INTO msg VALUES
  ('ins', 'idempotency: the rows of ledger L are written only by the extension (idem_claim, idem_settle, idem_resolve, idem_purge, or INSERT INTO and DELETE FROM the ledger table); plain SQL may read them'),
  ('upd', 'idempotency: the rows of ledger L are written only by the extension (idem_claim, idem_settle, idem_resolve, idem_purge, or INSERT INTO and DELETE FROM the ledger table); plain SQL may read them');
CREATE TEMP VIEW m AS SELECT (SELECT v FROM msg WHERE k = 'ins') AS ins, (SELECT v FROM msg WHERE k = 'upd') AS upd;
SELECT 'claim-ext', json_extract(idem_claim('L', 't', 'c', 'send', '{}', 'external', 'ext'), '$.decision') = 'admitted';
SELECT 'claim-loc', json_extract(idem_claim('L', 't', 'c', 'write', '{}', 'local', 'loc'), '$.decision') = 'admitted';

-- ---------------------------------------------------------------- defensive off
SELECT 'reset-stuck', errmsg('UPDATE L_rows SET status = ''released'' WHERE status = ''claimed''') = (SELECT upd FROM m);
SELECT 'takeover-live', errmsg('UPDATE L_rows SET status = ''claimed'', attempt = attempt + 1, token = random() WHERE "key" = ''ext''') = (SELECT upd FROM m);
SELECT 'replace-rowid', errmsg('REPLACE INTO L_rows(id, tenant, "key", conversation, tool, args, effect, status, attempt, token, created_at, updated_at, lease_until) SELECT id, ''t'', ''other'', ''c'', ''x'', ''{}'', ''external'', ''claimed'', 1, random(), 0, 0, 0 FROM L_rows WHERE "key" = ''ext''') = (SELECT ins FROM m);
SELECT 'replace-key', errmsg('REPLACE INTO L_rows(tenant, "key", conversation, tool, args, effect, status, attempt, token, created_at, updated_at, lease_until) VALUES (''t'', ''ext'', ''c'', ''x'', ''{}'', ''external'', ''claimed'', 1, random(), 0, 0, 0)') = (SELECT ins FROM m);
SELECT 'forged-succeeded', errmsg('INSERT INTO L_rows(tenant, "key", conversation, tool, args, effect, status, result, attempt, token, created_at, updated_at, lease_until) VALUES (''t'', ''forged'', ''c'', ''send'', ''{}'', ''external'', ''succeeded'', ''{"paid":1}'', 1, random(), 0, 0, 0)') = (SELECT ins FROM m);
SELECT 'still-in-progress', json_extract(idem_claim('L', 't', 'c', 'send', '{}', 'external', 'ext'), '$.decision') = 'in_progress';
SELECT 'forged-not-replayed', json_extract(idem_claim('L', 't', 'c', 'send', '{}', 'external', 'forged'), '$.decision') = 'admitted';

-- ---------------------------------------------------------------- defensive on
SELECT 'defensive-on', sqltest_defensive(1) = 1;
SELECT 'def-reset-stuck', errmsg('UPDATE L_rows SET status = ''released'' WHERE status = ''claimed''') = (SELECT upd FROM m);
SELECT 'def-takeover-live', errmsg('UPDATE L_rows SET status = ''claimed'', attempt = attempt + 1, token = random() WHERE "key" = ''ext''') = (SELECT upd FROM m);
SELECT 'def-replace-key', errmsg('REPLACE INTO L_rows(tenant, "key", conversation, tool, args, effect, status, attempt, token, created_at, updated_at, lease_until) VALUES (''t'', ''ext'', ''c'', ''x'', ''{}'', ''external'', ''claimed'', 1, random(), 0, 0, 0)') = (SELECT ins FROM m);
SELECT 'def-forged', errmsg('INSERT INTO L_rows(tenant, "key", conversation, tool, args, effect, status, result, attempt, token, created_at, updated_at, lease_until) VALUES (''t'', ''forged2'', ''c'', ''send'', ''{}'', ''external'', ''succeeded'', ''{"paid":1}'', 1, random(), 0, 0, 0)') = (SELECT ins FROM m);
SELECT 'def-claims-work', json_extract(idem_claim('L', 't', 'c', 'send', '{}', 'external', 'ext'), '$.decision') = 'in_progress'
       AND json_extract(idem_settle('L', (SELECT token FROM L WHERE "key" = 'forged'), 'succeeded', '{"r":1}'), '$.status') = 'succeeded';
SELECT 'defensive-off', sqltest_defensive(0) = 0;
SELECT 'rows-kept', (SELECT group_concat("key" || '=' || status || '/' || attempt, ',') FROM (SELECT * FROM L_rows ORDER BY id))
       = 'ext=claimed/1,loc=claimed/1,forged=succeeded/1';

-- ---------------------------------------------------------------- an external release keeps "sent": false first
SELECT 'claim-rel', json_extract(idem_claim('L', 't', 'c', 'send', '{}', 'external', 'rel'), '$.decision') = 'admitted';
SELECT 'release-external', json_extract(idem_settle('L', (SELECT token FROM L WHERE "key" = 'rel'), 'released', '{"why":"refused","sent":false}'), '$.status') = 'released';
SELECT 'release-detail-sent-first', (SELECT error FROM L_rows WHERE "key" = 'rel') = '{"sent":false,"why":"refused"}';
SELECT 'release-detail-nested-sent-refused', errmsg('SELECT idem_settle(''L'', (SELECT token FROM L WHERE "key" = ''ext''), ''released'', ''{"x":{"sent":false}}'')')
       = 'idem_settle: releasing external key "ext" needs detail {"sent": false}: only a request known never to have been sent may be retried';
SELECT 'reclaim-released', json_extract(idem_claim('L', 't', 'c', 'send', '{}', 'external', 'rel'), '$.attempt') = 2;

-- ---------------------------------------------------------------- stored JSON is checked before it is answered
SELECT 'claim-bad', json_extract(idem_claim('L', 't', 'c', 'send', '{}', 'external', 'bad'), '$.decision') = 'admitted';
-- a program may write any text (sqltest_forge: another connection with an
-- idem_own_write() of its own); the extension refuses to answer from it
SELECT 'plain-settle-not-json', sqltest_forge('UPDATE L_rows SET status = ''succeeded'', result = ''1,"decision":"admitted"'' WHERE "key" = ''bad''') IS NULL;
SELECT 'replay-not-json-refused', errmsg('SELECT idem_claim(''L'', ''t'', ''c'', ''send'', ''{}'', ''external'', ''bad'')')
       = 'idem_claim: the stored result of key "bad" in L_rows is not valid JSON; the row was changed outside the ledger, so no answer is made from it';
SELECT 'replay-not-json-code', errcode('SELECT idem_claim(''L'', ''t'', ''c'', ''send'', ''{}'', ''external'', ''bad'')') = 11;
SELECT 'claim-bad2', json_extract(idem_claim('L', 't', 'c', 'send', '{}', 'external', 'bad2'), '$.decision') = 'admitted';
SELECT 'plain-settle-members', sqltest_forge('UPDATE L_rows SET status = ''failed'', error = ''{"e":1}'', members = ''{"table":"x"}'' WHERE "key" = ''bad2''') IS NULL;
SELECT 'replay-members-not-array', errmsg('SELECT idem_claim(''L'', ''t'', ''c'', ''send'', ''{}'', ''external'', ''bad2'')')
       = 'idem_claim: the stored members of key "bad2" in L_rows is not valid JSON; the row was changed outside the ledger, so no answer is made from it';
SELECT 'insert-claim-not-json', errcode('INSERT INTO L(tenant, conversation, tool, args, effect, key) VALUES (''t'', ''c'', ''send'', ''{}'', ''external'', ''bad'')') = 11;
-- every answer is one JSON object with one decision
SELECT 'answer-valid', json_valid(idem_claim('L', 't', 'c', 'send', '{}', 'external', 'forged'))
       AND json_extract(idem_claim('L', 't', 'c', 'send', '{}', 'external', 'forged'), '$.decision') = 'replay';

-- ---------------------------------------------------------------- options in <name>_meta are checked on connect
CREATE VIRTUAL TABLE O USING idempotency;
-- the options are fixed by O_meta's triggers: editing them as someone who
-- rewrites the file would, the triggers go first
DROP TRIGGER O_meta_insert; DROP TRIGGER O_meta_update; DROP TRIGGER O_meta_delete;
PRAGMA writable_schema = ON;
UPDATE O_meta SET v = -100000 WHERE k = 'lease_seconds';
PRAGMA writable_schema = RESET;
SELECT 'meta-lease-negative', errmsg('SELECT idem_claim(''O'', ''t'', ''c'', ''x'', ''{}'')')
       = 'idem_claim: idempotency: ledger O has lease_seconds = -100000 in O_meta; it must be an integer from 0 to 31536000';
SELECT 'meta-lease-negative-select', errmsg('SELECT count(*) FROM O') = 'idempotency: ledger O has lease_seconds = -100000 in O_meta; it must be an integer from 0 to 31536000';
SELECT 'meta-nothing-written', (SELECT count(*) FROM O_rows) = 0;
UPDATE O_meta SET v = 9223372036854775807 WHERE k = 'lease_seconds';
PRAGMA writable_schema = RESET;
SELECT 'meta-lease-huge', errmsg('SELECT idem_claim(''O'', ''t'', ''c'', ''x'', ''{}'')')
       = 'idem_claim: idempotency: ledger O has lease_seconds = 9223372036854775807 in O_meta; it must be an integer from 0 to 31536000';
UPDATE O_meta SET v = '300' WHERE k = 'lease_seconds';
PRAGMA writable_schema = RESET;
SELECT 'meta-lease-text', errmsg('SELECT count(*) FROM O') = 'idempotency: ledger O has lease_seconds = ''300'' (TEXT) in O_meta; it must be an integer from 0 to 31536000';
UPDATE O_meta SET v = 0 WHERE k = 'max_attempts';
UPDATE O_meta SET v = 300 WHERE k = 'lease_seconds';
PRAGMA writable_schema = RESET;
SELECT 'meta-attempts-zero', errmsg('SELECT count(*) FROM O') = 'idempotency: ledger O has max_attempts = 0 in O_meta; it must be an integer from 1 to 1000';
UPDATE O_meta SET v = 1 WHERE k = 'max_attempts';
UPDATE O_meta SET v = 2 WHERE k = 'single_tenant';
PRAGMA writable_schema = RESET;
SELECT 'meta-single-two', errmsg('SELECT count(*) FROM O') = 'idempotency: ledger O has single_tenant = 2 in O_meta; it must be an integer from 0 to 1';
UPDATE O_meta SET v = 0 WHERE k = 'single_tenant';
DELETE FROM O_meta WHERE k = 'max_args_bytes';
PRAGMA writable_schema = RESET;
SELECT 'meta-missing', errmsg('SELECT count(*) FROM O') = 'idempotency: ledger O has no max_args_bytes in O_meta; it must be an integer from 2 to 16777216';
INSERT INTO O_meta VALUES ('max_args_bytes', 100);
PRAGMA writable_schema = OFF;
PRAGMA writable_schema = RESET;
SELECT 'meta-triggers-restored', json_extract(idem_upgrade('O'), '$.triggers_created') = 3;
SELECT 'meta-repaired', json_extract(idem_claim('O', 't', 'c', 'x', '{}'), '$.decision') = 'admitted';
SELECT 'meta-repaired-bound', errmsg('SELECT idem_claim(''O'', ''t'', ''c'', ''x'', ''{"long":"' || printf('%.200c', 'x') || '"}'')') GLOB 'idem_claim: args is * bytes in canonical form, over the ledger''s max_args_bytes of 100';
SELECT sqltest_clock(NULL);
