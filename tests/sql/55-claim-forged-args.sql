-- sqltest: file
-- A claim of a key whose stored args are not canonical JSON (a row forged
-- by a program: sqltest_forge runs SQL on another connection with an
-- idem_own_write() of its own; plain SQL cannot write the rows at all)
-- is refused as changed outside the ledger, as docs/ledger.md says and as a
-- settle, a resolve and a read refuse it: not answered mismatch, which
-- would tell the caller the key was reused for another request. Nothing is
-- written. The same for INSERT INTO the ledger and, on a single_tenant=1
-- ledger, a claim of the key under another tenant.
SELECT sqltest_clock(1700000000000);
CREATE VIRTUAL TABLE L USING idempotency(lease_seconds=60);
CREATE VIRTUAL TABLE S USING idempotency(single_tenant=1, lease_seconds=60);
SELECT 'forged', sqltest_forge('INSERT INTO L_rows(tenant, "key", conversation, tool, args, effect, status, attempt, token, created_at, updated_at, lease_until)
  VALUES (''t'', ''forged'', ''c'', ''x'', ''not json'', ''external'', ''claimed'', 1, 7, 0, 0, 0);
INSERT INTO L_rows(tenant, "key", conversation, tool, args, effect, status, attempt, token, created_at, updated_at, lease_until)
  VALUES (''t'', ''spaced'', ''c'', ''x'', ''{ "a": 1 }'', ''local'', ''claimed'', 1, 7, 0, 0, 0);
INSERT INTO S_rows(tenant, "key", conversation, tool, args, effect, status, attempt, token, created_at, updated_at, lease_until)
  VALUES (''t'', ''solo'', ''c'', ''x'', ''[1,'', ''external'', ''claimed'', 1, 7, 0, 0, 0)') IS NULL;
CREATE TEMP TABLE before AS SELECT * FROM L_rows UNION ALL SELECT * FROM S_rows;

SELECT 'claim-not-json', errmsg('SELECT idem_claim(''L'', ''t'', ''c'', ''x'', ''{}'', ''external'', ''forged'')')
       = 'idem_claim: the stored args of key "forged" in L_rows are not canonical JSON; the row was changed outside the ledger, so nothing is done with it';
SELECT 'claim-not-json-code', errcode('SELECT idem_claim(''L'', ''t'', ''c'', ''x'', ''{}'', ''external'', ''forged'')') = 267;
-- other conversation or tool: still the row, not a mismatch
SELECT 'claim-not-json-other-tool', errmsg('SELECT idem_claim(''L'', ''t'', ''c'', ''y'', ''{}'', ''external'', ''forged'')')
       = 'idem_claim: the stored args of key "forged" in L_rows are not canonical JSON; the row was changed outside the ledger, so nothing is done with it';
-- JSON, but not in its canonical spelling
SELECT 'claim-not-canonical', errmsg('SELECT idem_claim(''L'', ''t'', ''c'', ''x'', ''{"a":1}'', ''local'', ''spaced'')')
       = 'idem_claim: the stored args of key "spaced" in L_rows are not canonical JSON; the row was changed outside the ledger, so nothing is done with it';
SELECT 'insert-not-json', errmsg('INSERT INTO L(tenant, conversation, tool, args, effect, key) VALUES (''t'', ''c'', ''x'', ''{}'', ''external'', ''forged'')')
       = 'idempotency: the stored args of key "forged" in L_rows are not canonical JSON; the row was changed outside the ledger, so nothing is done with it';
SELECT 'single-other-tenant', errmsg('SELECT idem_claim(''S'', ''u'', ''c'', ''x'', ''{}'', ''external'', ''solo'')')
       = 'idem_claim: the stored args of key "solo" in S_rows are not canonical JSON; the row was changed outside the ledger, so nothing is done with it';
SELECT 'nothing-written', (SELECT count(*) FROM (SELECT * FROM L_rows UNION ALL SELECT * FROM S_rows EXCEPT SELECT * FROM before)) = 0
   AND (SELECT count(*) FROM L_rows) + (SELECT count(*) FROM S_rows) = 3;
-- a well-formed row beside them is still answered
SELECT 'good-row', json_extract(idem_claim('L', 't', 'c', 'x', '{}', 'external', 'good'), '$.decision') = 'admitted';
