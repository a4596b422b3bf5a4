-- sqltest: file
-- PRAGMA ignore_check_constraints turns CHECKs off for one connection, not
-- triggers: a plain-SQL write of the rows table is refused all the same
-- (only the extension writes it, docs/design.md, "One writer"), well-formed
-- or not, and a row id <= 0 with it (so REPLACE cannot erase one). A row
-- forged by a program (sqltest_forge: another connection with an
-- idem_own_write() of its own) whose args are not canonical JSON makes
-- every ledger operation on that row refuse it.
SELECT sqltest_clock(1700000000000);
CREATE VIRTUAL TABLE L USING idempotency(lease_seconds=60);
SELECT 'seed', json_extract(idem_claim('L', 't', 'c', 'x', '{}', 'external', 'k1'), '$.decision') = 'admitted';
PRAGMA ignore_check_constraints = ON;
CREATE TEMP VIEW ins AS SELECT 'INSERT INTO L_rows(tenant, "key", conversation, tool, args, effect, status, attempt, token, created_at, updated_at, lease_until) ' AS pre;
CREATE TEMP TABLE msg(v);
INSERT INTO msg VALUES ('idempotency: the rows of ledger L are written only by the extension (idem_claim, idem_settle, idem_resolve, idem_purge, or INSERT INTO and DELETE FROM the ledger table); plain SQL may read them');
SELECT 'tenant-empty', errmsg((SELECT pre FROM ins) || 'VALUES ('''', ''d1'', ''c'', ''x'', ''{}'', ''external'', ''claimed'', 1, 7, 0, 0, 0)') = (SELECT v FROM msg);
SELECT 'key-space', errmsg((SELECT pre FROM ins) || 'VALUES (''t'', ''a b'', ''c'', ''x'', ''{}'', ''external'', ''claimed'', 1, 7, 0, 0, 0)') = (SELECT v FROM msg);
SELECT 'tenant-integer', errmsg((SELECT pre FROM ins) || 'VALUES (5, ''d1'', ''c'', ''x'', ''{}'', ''external'', ''claimed'', 1, 7, 0, 0, 0)') = (SELECT v FROM msg);
SELECT 'tool-129', errmsg((SELECT pre FROM ins) || 'VALUES (''t'', ''d1'', ''c'', printf(''%.129c'', ''x''), ''{}'', ''external'', ''claimed'', 1, 7, 0, 0, 0)') = (SELECT v FROM msg);
SELECT 'effect-bogus', errmsg((SELECT pre FROM ins) || 'VALUES (''t'', ''d1'', ''c'', ''x'', ''{}'', ''bogus'', ''claimed'', 1, 7, 0, 0, 0)') = (SELECT v FROM msg);
SELECT 'token-text', errmsg((SELECT pre FROM ins) || 'VALUES (''t'', ''d1'', ''c'', ''x'', ''{}'', ''external'', ''claimed'', 1, ''abc'', 0, 0, 0)') = (SELECT v FROM msg);
SELECT 'args-blob', errmsg((SELECT pre FROM ins) || 'VALUES (''t'', ''d1'', ''c'', ''x'', x''7b7d'', ''external'', ''claimed'', 1, 7, 0, 0, 0)') = (SELECT v FROM msg);
SELECT 'time-text', errmsg((SELECT pre FROM ins) || 'VALUES (''t'', ''d1'', ''c'', ''x'', ''{}'', ''external'', ''claimed'', 1, 7, ''now'', 0, 0)') = (SELECT v FROM msg);
SELECT 'well-formed', errmsg((SELECT pre FROM ins) || 'VALUES (''t'', ''d1'', ''c'', ''x'', ''{}'', ''external'', ''claimed'', 1, 7, 0, 0, 0)') = (SELECT v FROM msg);
SELECT 'nothing-written', (SELECT count(*) FROM L_rows) = 1;
-- a row id <= 0 is refused after the insert, so no such row can be erased by REPLACE
SELECT 'id-zero', errmsg('INSERT INTO L_rows(id, tenant, "key", conversation, tool, args, effect, status, attempt, token, created_at, updated_at, lease_until) VALUES (0, ''t'', ''z0'', ''c'', ''x'', ''{}'', ''external'', ''claimed'', 1, 7, 0, 0, 0)')
       = 'idempotency: the rows of ledger L are written only by the extension (idem_claim, idem_settle, idem_resolve, idem_purge, or INSERT INTO and DELETE FROM the ledger table); plain SQL may read them';
SELECT 'id-negative', errmsg('INSERT INTO L_rows(id, tenant, "key", conversation, tool, args, effect, status, attempt, token, created_at, updated_at, lease_until) VALUES (-1, ''t'', ''z1'', ''c'', ''x'', ''{}'', ''external'', ''claimed'', 1, 7, 0, 0, 0)')
       = 'idempotency: the rows of ledger L are written only by the extension (idem_claim, idem_settle, idem_resolve, idem_purge, or INSERT INTO and DELETE FROM the ledger table); plain SQL may read them';
SELECT 'no-nonpositive-ids', (SELECT count(*) FROM L_rows WHERE id <= 0) = 0;
-- an update keeps every column's type, CHECKs or not
SELECT 'update-result-blob', errcode('UPDATE L_rows SET status = ''succeeded'', result = x''00'' WHERE "key" = ''k1''') = 1811;
SELECT 'update-lease-text', errcode('UPDATE L_rows SET lease_until = ''later'' WHERE "key" = ''k1''') = 1811;
-- args that are not JSON, written by a program, are refused by the
-- extension in every operation
SELECT 'forged', sqltest_forge('INSERT INTO L_rows(tenant, "key", conversation, tool, args, effect, status, attempt, token, created_at, updated_at, lease_until)
  VALUES (''t'', ''forged'', ''c'', ''x'', ''not json'', ''external'', ''claimed'', 1, 7, 0, 0, 0)') IS NULL;
SELECT 'forged-select', errmsg('SELECT args FROM L WHERE "key" = ''forged''')
       = 'idempotency: the stored args of key "forged" in L_rows are not canonical JSON; the row was changed outside the ledger, so nothing is done with it';
SELECT 'forged-settle', errmsg('SELECT idem_settle(''L'', (SELECT printf(''%016x%016x'', id, token) FROM L_rows WHERE "key" = ''forged''), ''succeeded'', NULL)')
       = 'idem_settle: the stored args of key "forged" in L_rows are not canonical JSON; the row was changed outside the ledger, so nothing is done with it';
SELECT 'forged-resolve', errmsg('SELECT idem_resolve(''L'', ''t'', ''forged'', ''failed'', NULL)')
       = 'idem_resolve: the stored args of key "forged" in L_rows are not canonical JSON; the row was changed outside the ledger, so nothing is done with it';
SELECT 'forged-claim', errmsg('SELECT idem_claim(''L'', ''t'', ''c'', ''x'', ''{}'', ''external'', ''forged'')')
       = 'idem_claim: the stored args of key "forged" in L_rows are not canonical JSON; the row was changed outside the ledger, so nothing is done with it';
SELECT 'forged-still-claimed', (SELECT status FROM L_rows WHERE "key" = 'forged') = 'claimed';
-- canonical args that are merely spelled otherwise are refused too
SELECT 'spaced', sqltest_forge('INSERT INTO L_rows(tenant, "key", conversation, tool, args, effect, status, attempt, token, created_at, updated_at, lease_until)
  VALUES (''t'', ''spaced'', ''c'', ''x'', ''{ "a": 1 }'', ''external'', ''claimed'', 1, 7, 0, 0, 0)') IS NULL;
SELECT 'spaced-select', errmsg('SELECT args FROM L WHERE "key" = ''spaced''')
       = 'idempotency: the stored args of key "spaced" in L_rows are not canonical JSON; the row was changed outside the ledger, so nothing is done with it';
SELECT 'good-rows-read', (SELECT args FROM L WHERE "key" = 'k1') = '{}';
