-- The ledger file WITHOUT the extension loaded (plain SQLite, as an
-- operator's shell or a migration sees it): every write of the rows table
-- fails, since its triggers call idem_own_write(), which only the extension
-- defines (format 4, "One writer"); reads work. Run twice by tests/suites/64-plain-sql.sh,
-- defensive mode off and on (SQLite knows no shadow table without the
-- extension, so defensive mode changes nothing here), on the system SQLite
-- and on the newer one.
ATTACH 'build/plain/ledger.db' AS f;
CREATE TEMP TABLE msg(k PRIMARY KEY, v);
INSERT INTO msg VALUES
  ('ins', 'no such function: idem_own_write'),
  ('upd', 'no such function: idem_own_write'),
  ('del', 'no such function: idem_own_write');
CREATE TEMP VIEW m AS SELECT (SELECT v FROM msg WHERE k = 'ins') AS ins, (SELECT v FROM msg WHERE k = 'upd') AS upd, (SELECT v FROM msg WHERE k = 'del') AS del;
SELECT 'no-extension', (SELECT count(*) FROM pragma_function_list WHERE name = 'idem_claim') = 0;
SELECT 'seeded', (SELECT group_concat("key" || '=' || status, ',') FROM (SELECT * FROM f.L_rows ORDER BY id))
       = 'live-ext=claimed,live-loc=claimed,done=succeeded,failed=failed,unk=unknown,rel=released';
CREATE TEMP TABLE before AS SELECT * FROM f.L_rows;

-- the classic "reset stuck rows"
SELECT 'reset-stuck-refused', errmsg('UPDATE f.L_rows SET status = ''released'' WHERE status = ''claimed''') = (SELECT upd FROM m);
SELECT 'reset-stuck-code', errcode('UPDATE f.L_rows SET status = ''released'' WHERE status = ''claimed''') = 1;
-- releasing a live external claim: only with "sent": false first
SELECT 'release-external-no-detail', errcode('UPDATE f.L_rows SET status = ''released'' WHERE "key" = ''live-ext''') = 1;
SELECT 'release-external-sent-true', errcode('UPDATE f.L_rows SET status = ''released'', error = ''{"sent":true}'' WHERE "key" = ''live-ext''') = 1;
SELECT 'release-external-sent-not-first', errcode('UPDATE f.L_rows SET status = ''released'', error = ''{"a":1,"sent":false}'' WHERE "key" = ''live-ext''') = 1;
SELECT 'release-external-nested-sent', errcode('UPDATE f.L_rows SET status = ''released'', error = ''{"x":{"sent":false}}'' WHERE "key" = ''live-ext''') = 1;
-- a take-over of a live claim
SELECT 'takeover-live-external', errmsg('UPDATE f.L_rows SET status = ''claimed'', attempt = attempt + 1, token = random() WHERE "key" = ''live-ext''') = (SELECT upd FROM m);
SELECT 'takeover-live-local', errcode('UPDATE f.L_rows SET status = ''claimed'', attempt = attempt + 1, token = random(), expirations = expirations + 1 WHERE "key" = ''live-loc''') = 1;
SELECT 'renew-shorter-refused', errcode('UPDATE f.L_rows SET lease_until = lease_until - 1 WHERE "key" = ''live-loc''') = 1;
-- REPLACE by rowid with another key, by key, and a forged terminal row
SELECT 'replace-by-rowid', errmsg('REPLACE INTO f.L_rows(id, tenant, "key", conversation, tool, args, effect, status, attempt, token, created_at, updated_at, lease_until) SELECT id, ''t'', ''other'', ''c'', ''x'', ''{}'', ''external'', ''claimed'', 1, random(), 0, 0, 0 FROM f.L_rows WHERE "key" = ''live-ext''') = (SELECT ins FROM m);
SELECT 'replace-by-key', errmsg('REPLACE INTO f.L_rows(tenant, "key", conversation, tool, args, effect, status, attempt, token, created_at, updated_at, lease_until) VALUES (''t'', ''live-ext'', ''c'', ''x'', ''{}'', ''external'', ''claimed'', 1, random(), 0, 0, 0)') = (SELECT ins FROM m);
SELECT 'replace-by-key-terminal', errcode('REPLACE INTO f.L_rows(tenant, "key", conversation, tool, args, effect, status, attempt, token, created_at, updated_at, lease_until) VALUES (''t'', ''done'', ''c'', ''send'', ''{"n":3}'', ''external'', ''claimed'', 1, random(), 0, 0, 0)') = 1;
SELECT 'insert-or-replace-by-key', errcode('INSERT OR REPLACE INTO f.L_rows(tenant, "key", conversation, tool, args, effect, status, attempt, token, created_at, updated_at, lease_until) VALUES (''t'', ''unk'', ''c'', ''x'', ''{}'', ''external'', ''claimed'', 1, random(), 0, 0, 0)') = 1;
SELECT 'forged-succeeded', errmsg('INSERT INTO f.L_rows(tenant, "key", conversation, tool, args, effect, status, result, attempt, token, created_at, updated_at, lease_until) VALUES (''t'', ''forged'', ''c'', ''x'', ''{}'', ''external'', ''succeeded'', ''{"paid":1}'', 1, random(), 0, 0, 0)') = (SELECT ins FROM m);
SELECT 'forged-claimed-with-result', errcode('INSERT INTO f.L_rows(tenant, "key", conversation, tool, args, effect, status, result, attempt, token, created_at, updated_at, lease_until) VALUES (''t'', ''forged'', ''c'', ''x'', ''{}'', ''external'', ''claimed'', ''{"paid":1}'', 1, random(), 0, 0, 0)') = 1;
SELECT 'forged-attempt-2', errcode('INSERT INTO f.L_rows(tenant, "key", conversation, tool, args, effect, status, attempt, token, created_at, updated_at, lease_until) VALUES (''t'', ''forged'', ''c'', ''x'', ''{}'', ''external'', ''claimed'', 2, random(), 0, 0, 0)') = 1;
-- single_tenant: a key is unique across tenants, REPLACE under another tenant too
SELECT 'single-tenant-replace-other-tenant', errcode('REPLACE INTO f.S_rows(tenant, "key", conversation, tool, args, effect, status, attempt, token, created_at, updated_at, lease_until) VALUES (''other'', ''solo-live'', ''c'', ''x'', ''{}'', ''external'', ''claimed'', 1, random(), 0, 0, 0)') = 1;
-- unknown never becomes claimed; terminal rows never change
SELECT 'unknown-to-claimed', errcode('UPDATE f.L_rows SET status = ''claimed'', attempt = attempt + 1, token = random() WHERE "key" = ''unk''') = 1;
SELECT 'succeeded-result-forged', errcode('UPDATE f.L_rows SET result = ''{"paid":2}'' WHERE "key" = ''done''') = 1;
SELECT 'failed-to-succeeded', errcode('UPDATE f.L_rows SET status = ''succeeded'' WHERE "key" = ''failed''') = 1;
SELECT 'released-to-succeeded', errcode('UPDATE f.L_rows SET status = ''succeeded'' WHERE "key" = ''rel''') = 1;
SELECT 'request-args-change', errcode('UPDATE f.L_rows SET args = ''{"n":99}'' WHERE "key" = ''live-ext''') = 1;
SELECT 'unknown-to-unknown', errcode('UPDATE f.L_rows SET status = ''unknown'', updated_at = updated_at + 1 WHERE "key" = ''unk''') = 1;
SELECT 'local-to-unknown', errcode('UPDATE f.L_rows SET status = ''unknown'' WHERE "key" = ''live-loc''') = 1;
-- claimed and unknown rows are never deleted
SELECT 'delete-claimed', errmsg('DELETE FROM f.L_rows WHERE "key" = ''live-ext''') = (SELECT del FROM m);
SELECT 'delete-unknown', errcode('DELETE FROM f.L_rows WHERE "key" = ''unk''') = 1;
SELECT 'nothing-changed', (SELECT count(*) FROM (SELECT * FROM f.L_rows EXCEPT SELECT * FROM before)) = 0
       AND (SELECT count(*) FROM f.L_rows) = 6;

-- what the states table allows is refused all the same: only the extension writes
SELECT 'release-external-sent-false', errmsg('UPDATE f.L_rows SET status = ''released'', error = ''{"sent":false,"why":"never sent"}'' WHERE "key" = ''live-ext''') = (SELECT upd FROM m);
SELECT 'reclaim-released', errmsg('UPDATE f.L_rows SET status = ''claimed'', attempt = attempt + 1, token = random(), error = NULL WHERE "key" = ''live-ext''') = (SELECT upd FROM m);
SELECT 'resolve-unknown', errmsg('UPDATE f.L_rows SET status = ''failed'', error = ''{"checked":1}'' WHERE "key" = ''unk''') = (SELECT upd FROM m);
SELECT 'fresh-claim', errmsg('INSERT INTO f.L_rows(tenant, "key", conversation, tool, args, effect, status, attempt, token, created_at, updated_at, lease_until) VALUES (''t'', ''fresh'', ''c'', ''x'', ''{}'', ''external'', ''claimed'', 1, random(), 0, 0, 0)') = (SELECT ins FROM m);
SELECT 'renew-longer', errmsg('UPDATE f.L_rows SET lease_until = lease_until + 1000 WHERE "key" = ''live-loc''') = (SELECT upd FROM m);
SELECT 'delete-terminal', errmsg('DELETE FROM f.L_rows WHERE "key" = ''done''') = (SELECT del FROM m);
-- after the lease: no take-over either
SELECT sqltest_clock((SELECT max(lease_until) FROM f.L_rows) + 1);
SELECT 'takeover-expired-external', errcode('UPDATE f.L_rows SET status = ''claimed'', attempt = attempt + 1, token = random(), expirations = expirations + 1 WHERE "key" = ''live-ext''') = 1;
SELECT 'takeover-expired-local-same-token', errcode('UPDATE f.L_rows SET status = ''claimed'', attempt = attempt + 1, expirations = expirations + 1 WHERE "key" = ''live-loc''') = 1;
SELECT 'takeover-expired-local-no-expiry', errcode('UPDATE f.L_rows SET status = ''claimed'', attempt = attempt + 1, token = random() WHERE "key" = ''live-loc''') = 1;
SELECT 'takeover-expired-local', errmsg('UPDATE f.L_rows SET status = ''claimed'', attempt = attempt + 1, token = random(), expirations = expirations + 1 WHERE "key" = ''live-loc''') = (SELECT upd FROM m);
SELECT 'renew-expired-refused', errcode('UPDATE f.L_rows SET lease_until = lease_until + 1000 WHERE "key" = ''live-ext''') = 1;
SELECT sqltest_clock(NULL);
SELECT 'nothing-written', (SELECT count(*) FROM (SELECT * FROM f.L_rows EXCEPT SELECT * FROM before)) = 0
       AND (SELECT count(*) FROM f.L_rows) = 6;
-- reads, the dump's SELECT and the integrity check need no extension
SELECT 'reads', (SELECT count(*) FROM f.L_rows WHERE status = 'claimed') = 2;
SELECT 'integrity', (SELECT integrity_check FROM f.pragma_integrity_check) = 'ok';
VACUUM f INTO 'build/plain/copy.db';
ATTACH 'build/plain/copy.db' AS copy;
SELECT 'vacuum-into', (SELECT count(*) FROM (SELECT * FROM copy.L_rows EXCEPT SELECT * FROM f.L_rows)) = 0
       AND (SELECT count(*) FROM copy.L_rows) = 6
       AND (SELECT count(*) FROM copy.sqlite_schema WHERE type = 'trigger') = (SELECT count(*) FROM f.sqlite_schema WHERE type = 'trigger');
SELECT 'copy-refuses-too', errmsg('DELETE FROM copy.L_rows') = (SELECT del FROM m);
-- with trusted_schema off as well: the same refusal, and reads still work
PRAGMA trusted_schema = OFF;
SELECT 'untrusted-refused', errmsg('UPDATE f.L_rows SET status = ''released'' WHERE status = ''claimed''') = (SELECT upd FROM m);
SELECT 'untrusted-insert-refused', errmsg('INSERT INTO f.L_rows(tenant, "key", conversation, tool, args, effect, status, attempt, token, created_at, updated_at, lease_until) VALUES (''t'', ''u'', ''c'', ''x'', ''{}'', ''external'', ''claimed'', 1, 1, 0, 0, 0)') = (SELECT ins FROM m);
SELECT 'untrusted-reads', (SELECT count(*) FROM f.L_rows) = 6;
PRAGMA trusted_schema = ON;
