-- PRAGMA ignore_check_constraints turns the rows table's CHECKs off for one
-- connection: its triggers still hold the key grammar and the domains
-- (docs/design.md, "Format 3"), a row id <= 0 is refused (so REPLACE cannot
-- erase one), and args that are not canonical JSON, which no trigger can
-- parse, make every ledger operation on that row refuse it.
SELECT sqltest_clock(1700000000000);
CREATE VIRTUAL TABLE L USING idempotency(lease_seconds=60);
SELECT 'seed', json_extract(idem_claim('L', 't', 'c', 'x', '{}', 'external', 'k1'), '$.decision') = 'admitted';
PRAGMA ignore_check_constraints = ON;
CREATE TEMP VIEW ins AS SELECT 'INSERT INTO L_rows(tenant, "key", conversation, tool, args, effect, status, attempt, token, created_at, updated_at, lease_until) ' AS pre;
CREATE TEMP TABLE msg(v);
INSERT INTO msg VALUES ('idempotency: only a fresh claim may be inserted into a ledger: status claimed, attempt 1, no result, error or members, well-formed key parts, and no row with that id or that key');
SELECT 'tenant-empty', errmsg((SELECT pre FROM ins) || 'VALUES ('''', ''d1'', ''c'', ''x'', ''{}'', ''external'', ''claimed'', 1, 7, 0, 0, 0)') = (SELECT v FROM msg);
SELECT 'key-space', errmsg((SELECT pre FROM ins) || 'VALUES (''t'', ''a b'', ''c'', ''x'', ''{}'', ''external'', ''claimed'', 1, 7, 0, 0, 0)') = (SELECT v FROM msg);
SELECT 'tenant-integer', errmsg((SELECT pre FROM ins) || 'VALUES (5, ''d1'', ''c'', ''x'', ''{}'', ''external'', ''claimed'', 1, 7, 0, 0, 0)') = (SELECT v FROM msg);
SELECT 'tool-129', errmsg((SELECT pre FROM ins) || 'VALUES (''t'', ''d1'', ''c'', printf(''%.129c'', ''x''), ''{}'', ''external'', ''claimed'', 1, 7, 0, 0, 0)') = (SELECT v FROM msg);
SELECT 'effect-bogus', errmsg((SELECT pre FROM ins) || 'VALUES (''t'', ''d1'', ''c'', ''x'', ''{}'', ''bogus'', ''claimed'', 1, 7, 0, 0, 0)') = (SELECT v FROM msg);
SELECT 'token-text', errmsg((SELECT pre FROM ins) || 'VALUES (''t'', ''d1'', ''c'', ''x'', ''{}'', ''external'', ''claimed'', 1, ''abc'', 0, 0, 0)') = (SELECT v FROM msg);
SELECT 'args-blob', errmsg((SELECT pre FROM ins) || 'VALUES (''t'', ''d1'', ''c'', ''x'', x''7b7d'', ''external'', ''claimed'', 1, 7, 0, 0, 0)') = (SELECT v FROM msg);
SELECT 'time-text', errmsg((SELECT pre FROM ins) || 'VALUES (''t'', ''d1'', ''c'', ''x'', ''{}'', ''external'', ''claimed'', 1, 7, ''now'', 0, 0)') = (SELECT v FROM msg);
SELECT 'nothing-written', (SELECT count(*) FROM L_rows) = 1;
-- a row id <= 0 is refused after the insert, so no such row can be erased by REPLACE
SELECT 'id-zero', errmsg('INSERT INTO L_rows(id, tenant, "key", conversation, tool, args, effect, status, attempt, token, created_at, updated_at, lease_until) VALUES (0, ''t'', ''z0'', ''c'', ''x'', ''{}'', ''external'', ''claimed'', 1, 7, 0, 0, 0)')
       = 'idempotency: a ledger row id must be a positive integer';
SELECT 'id-negative', errmsg('INSERT INTO L_rows(id, tenant, "key", conversation, tool, args, effect, status, attempt, token, created_at, updated_at, lease_until) VALUES (-1, ''t'', ''z1'', ''c'', ''x'', ''{}'', ''external'', ''claimed'', 1, 7, 0, 0, 0)')
       = 'idempotency: a ledger row id must be a positive integer';
SELECT 'no-nonpositive-ids', (SELECT count(*) FROM L_rows WHERE id <= 0) = 0;
-- an update keeps every column's type, CHECKs or not
SELECT 'update-result-blob', errcode('UPDATE L_rows SET status = ''succeeded'', result = x''00'' WHERE "key" = ''k1''') = 1811;
SELECT 'update-lease-text', errcode('UPDATE L_rows SET lease_until = ''later'' WHERE "key" = ''k1''') = 1811;
-- args that are not JSON pass the triggers (no innocuous built-in parses JSON on
-- 3.40), and the extension refuses the row in every operation
INSERT INTO L_rows(tenant, "key", conversation, tool, args, effect, status, attempt, token, created_at, updated_at, lease_until)
  VALUES ('t', 'forged', 'c', 'x', 'not json', 'external', 'claimed', 1, 7, 0, 0, 0);
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
INSERT INTO L_rows(tenant, "key", conversation, tool, args, effect, status, attempt, token, created_at, updated_at, lease_until)
  VALUES ('t', 'spaced', 'c', 'x', '{ "a": 1 }', 'external', 'claimed', 1, 7, 0, 0, 0);
SELECT 'spaced-select', errmsg('SELECT args FROM L WHERE "key" = ''spaced''')
       = 'idempotency: the stored args of key "spaced" in L_rows are not canonical JSON; the row was changed outside the ledger, so nothing is done with it';
SELECT 'good-rows-read', (SELECT args FROM L WHERE "key" = 'k1') = '{}';
