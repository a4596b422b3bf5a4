-- sqltest: file
-- One writer (format 4): with the extension loaded, every plain-SQL write
-- of a ledger's tables is refused with a message naming the API, with
-- trusted_schema on and off and in defensive mode, while the extension's
-- own writes (claim, settle, renew, resolve, purge, guard, member, unguard,
-- INSERT INTO and DELETE FROM the ledger) go through; reads and the
-- integrity check work. A function named idem_own_write()
-- registered over the extension's on its own connection (as a program
-- could) is found out by the extension's next write, and every ledger
-- operation on that connection is refused from then on.
SELECT sqltest_clock(1700000000000);
CREATE TEMP TABLE msg(k PRIMARY KEY, v);
INSERT INTO msg VALUES
  ('rows', 'idempotency: the rows of ledger L are written only by the extension (idem_claim, idem_settle, idem_resolve, idem_purge, or INSERT INTO and DELETE FROM the ledger table); plain SQL may read them'),
  ('guards', 'idempotency: the guards of ledger L are written only by the extension (idem_guard and idem_unguard); plain SQL may read them'),
  ('members', 'idempotency: the members of ledger L are written only by the extension (the triggers idem_guard installs); plain SQL may read them');
CREATE TEMP VIEW m AS SELECT (SELECT v FROM msg WHERE k = 'rows') AS r, (SELECT v FROM msg WHERE k = 'guards') AS g, (SELECT v FROM msg WHERE k = 'members') AS mem;
CREATE VIRTUAL TABLE L USING idempotency(lease_seconds=60);
CREATE TABLE orders(id INTEGER PRIMARY KEY, tenant TEXT, k TEXT);
SELECT 'guard', idem_guard('L', 'orders', 'k', 'tenant') = 1;

-- each mode in turn: the extension writes, plain SQL does not
PRAGMA trusted_schema = ON;
SELECT 'trusted-claim', json_extract(idem_claim('L', 't', 'c', 'x', '{}', 'local', 'a1'), '$.decision') = 'admitted';
SELECT 'trusted-member', errmsg('INSERT INTO orders(tenant, k) VALUES (''t'', ''a1'')') IS NULL;
SELECT 'trusted-member-recorded', (SELECT count(*) FROM L_members) = 1;
SELECT 'trusted-update', errmsg('UPDATE L_rows SET status = ''released'' WHERE "key" = ''a1''') = (SELECT r FROM m);
SELECT 'trusted-insert', errmsg('INSERT INTO L_rows(tenant, "key", conversation, tool, args, effect, status, attempt, token, created_at, updated_at, lease_until) VALUES (''t'', ''p'', ''c'', ''x'', ''{}'', ''external'', ''claimed'', 1, 7, 0, 0, 0)') = (SELECT r FROM m);
SELECT 'trusted-members', errmsg('DELETE FROM L_members') = (SELECT mem FROM m);
SELECT 'trusted-guards', errmsg('DELETE FROM L_guards') = (SELECT g FROM m);
SELECT 'trusted-settle', json_extract(idem_settle('L', (SELECT token FROM L WHERE key = 'a1'), 'succeeded', NULL), '$.members') = '[{"table":"orders","rowid":1}]';

PRAGMA trusted_schema = OFF;
SELECT 'untrusted-claim', json_extract(idem_claim('L', 't', 'c', 'x', '{}', 'local', 'b1'), '$.decision') = 'admitted';
SELECT 'untrusted-member', errmsg('INSERT INTO orders(tenant, k) VALUES (''t'', ''b1'')') IS NULL;
SELECT 'untrusted-member-recorded', (SELECT count(*) FROM L_members) = 2;
SELECT 'untrusted-renew', idem_renew('L', (SELECT token FROM L WHERE key = 'b1'), 120) > 0;
SELECT 'untrusted-update', errmsg('UPDATE L_rows SET status = ''released'' WHERE "key" = ''b1''') = (SELECT r FROM m);
SELECT 'untrusted-delete', errmsg('DELETE FROM L_rows WHERE "key" = ''a1''') = (SELECT r FROM m);
SELECT 'untrusted-members', errmsg('INSERT INTO L_members VALUES (1, 1, 1, 99)') = (SELECT mem FROM m);
SELECT 'untrusted-settle', json_extract(idem_settle('L', (SELECT token FROM L WHERE key = 'b1'), 'failed', '{"e":1}'), '$.status') = 'failed';
SELECT 'untrusted-vtab-insert', errmsg('INSERT INTO L(tenant, conversation, tool, args, key) VALUES (''t'', ''c'', ''x'', ''{}'', ''v1'')') IS NULL;
SELECT 'untrusted-vtab-settle', json_extract(idem_settle('L', (SELECT token FROM L WHERE key = 'v1'), 'succeeded', NULL), '$.status') = 'succeeded';
SELECT 'untrusted-vtab-delete', errmsg('DELETE FROM L WHERE key = ''v1''') IS NULL;
SELECT 'untrusted-vtab-deleted', (SELECT count(*) FROM L WHERE key = 'v1') = 0;
PRAGMA trusted_schema = ON;

SELECT 'defensive-on', sqltest_defensive(1) = 1;
SELECT 'defensive-claim', json_extract(idem_claim('L', 't', 'c', 'x', '{}', 'external', 'c1'), '$.decision') = 'admitted';
SELECT 'defensive-update', errmsg('UPDATE L_rows SET status = ''released'', error = ''{"sent":false}'' WHERE "key" = ''c1''') = (SELECT r FROM m);
SELECT 'defensive-unknown', json_extract(idem_settle('L', (SELECT token FROM L WHERE key = 'c1'), 'unknown', NULL), '$.status') = 'unknown';
SELECT 'defensive-resolve', json_extract(idem_resolve('L', 't', 'c1', 'succeeded', '{"ok":1}'), '$.status') = 'succeeded';
SELECT 'defensive-unguard-refused-while-held', errmsg('DELETE FROM L_guards') = (SELECT g FROM m);
SELECT 'defensive-off', sqltest_defensive(0) = 0;

-- what was written is what the extension wrote: nothing else
SELECT 'rows', (SELECT group_concat("key" || ':' || status, ',') FROM (SELECT "key", status FROM L_rows ORDER BY id)) = 'a1:succeeded,b1:failed,c1:succeeded';
-- the settled rows purge (their members with them), the guard goes
SELECT sqltest_clock(1700000100000);
SELECT 'purge', idem_purge('L', 60) = 3;
SELECT 'purge-members', (SELECT count(*) FROM L_members) = 0;
SELECT 'unguard', idem_unguard('L', 'orders') = 1;
SELECT 'unguarded', (SELECT count(*) FROM L_guards) = 0;
SELECT sqltest_clock(NULL);
SELECT 'integrity', (SELECT integrity_check FROM pragma_integrity_check) = 'ok';

-- a function of that name registered over the extension's lets plain SQL write
-- sqltest: forge-own-write
-- the replacement is found before the next write: the claim is refused
SELECT 'forged-claim-refused', errmsg('SELECT idem_claim(''L'', ''t'', ''c'', ''x'', ''{}'', ''external'', ''f1'')')
       = 'idem_claim: the function idem_own_write() on this connection is not the extension''s (another was registered over it, which would let plain SQL write the ledger''s tables); every ledger operation on this connection is refused';
SELECT 'forged-claim-nothing-written', (SELECT count(*) FROM L_rows WHERE "key" = 'f1') = 0;
-- plain SQL can write through the forged function (as code could rewrite
-- the file); the extension refuses every operation from then on
SELECT 'forged-plain-write', errmsg('INSERT INTO L_rows(tenant, "key", conversation, tool, args, effect, status, attempt, token, created_at, updated_at, lease_until) VALUES (''t'', ''f1'', ''c'', ''x'', ''{}'', ''external'', ''succeeded'', 1, 1, 0, 0, 0)') IS NULL;
SELECT 'forged-found', errmsg('SELECT idem_claim(''L'', ''t'', ''c'', ''x'', ''{}'', ''external'', ''f2'')')
       = 'idem_claim: the function idem_own_write() on this connection is not the extension''s (another was registered over it, which would let plain SQL write the ledger''s tables); every ledger operation on this connection is refused';
SELECT 'forged-found-settle', errmsg('SELECT idem_settle(''L'', ''00000000000000010000000000000000'', ''failed'', NULL)')
       GLOB 'idem_settle: the function idem_own_write() on this connection is not the extension''s *';
SELECT 'forged-found-read', errmsg('SELECT count(*) FROM L') GLOB 'idempotency: the function idem_own_write() on this connection is not the extension''s *';
SELECT 'forged-nothing-more', (SELECT count(*) FROM L_rows WHERE "key" = 'f2') = 0;
