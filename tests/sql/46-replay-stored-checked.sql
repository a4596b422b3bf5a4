-- sqltest: file
-- A replay answers stored result, error and members only once they pass
-- the JSON check. The ledger remembers the last text that passed, one per
-- kind (any value; an array for members), and lets the same bytes through
-- again without parsing them: these checks show that a text differing by
-- one byte, a prefix, a text valid as one kind but not the other, and a
-- text too long to be remembered are all still checked. The rows are
-- changed as only a program can (sqltest_forge: another connection with an
-- idem_own_write() of its own): plain SQL cannot write them at all.
SELECT sqltest_clock(1700000000000);
CREATE VIRTUAL TABLE L USING idempotency(lease_seconds=60);
CREATE TEMP TABLE msg(k PRIMARY KEY, v);
INSERT INTO msg VALUES
  ('k2', 'idem_claim: the stored result of key "k2" in L_rows is not valid JSON; the row was changed outside the ledger, so no answer is made from it'),
  ('k3', 'idem_claim: the stored result of key "k3" in L_rows is not valid JSON; the row was changed outside the ledger, so no answer is made from it'),
  ('k5', 'idem_claim: the stored members of key "k5" in L_rows is not valid JSON; the row was changed outside the ledger, so no answer is made from it'),
  ('k8', 'idem_claim: the stored members of key "k8" in L_rows is not valid JSON; the row was changed outside the ledger, so no answer is made from it'),
  ('k7', 'idem_claim: the stored result of key "k7" in L_rows is not valid JSON; the row was changed outside the ledger, so no answer is made from it'),
  ('k10', 'idem_claim: the stored result of key "k10" in L_rows is not valid JSON; the row was changed outside the ledger, so no answer is made from it');
SELECT 'claim-k1', json_extract(idem_claim('L', 't', 'c', 'send', '{}', 'external', 'k1'), '$.decision') = 'admitted';
SELECT 'settle-k1', json_extract(idem_settle('L', (SELECT token FROM L WHERE "key" = 'k1'), 'succeeded', '{"id":1}'), '$.status') = 'succeeded';
SELECT 'replay-k1', json_extract(idem_claim('L', 't', 'c', 'send', '{}', 'external', 'k1'), '$.result') = '{"id":1}';
SELECT 'replay-k1-again', idem_claim('L', 't', 'c', 'send', '{}', 'external', 'k1')
       = '{"decision":"replay","idempotent":true,"key":"k1","status":"succeeded","attempt":1,"settled_at":1700000000000,"result":{"id":1},"members":[]}';
-- the remembered text with one byte more, and a prefix of it
SELECT 'claim-k2', json_extract(idem_claim('L', 't', 'c', 'send', '{}', 'external', 'k2'), '$.decision') = 'admitted';
SELECT 'plain-settle-k2', sqltest_forge('UPDATE L_rows SET status = ''succeeded'', result = ''{"id":1}x'' WHERE "key" = ''k2''') IS NULL;
SELECT 'replay-k2-refused', errmsg('SELECT idem_claim(''L'', ''t'', ''c'', ''send'', ''{}'', ''external'', ''k2'')') = (SELECT v FROM msg WHERE k = 'k2');
SELECT 'claim-k3', json_extract(idem_claim('L', 't', 'c', 'send', '{}', 'external', 'k3'), '$.decision') = 'admitted';
SELECT 'plain-settle-k3', sqltest_forge('UPDATE L_rows SET status = ''succeeded'', result = ''{"id":1'' WHERE "key" = ''k3''') IS NULL;
SELECT 'replay-k3-refused', errmsg('SELECT idem_claim(''L'', ''t'', ''c'', ''send'', ''{}'', ''external'', ''k3'')') = (SELECT v FROM msg WHERE k = 'k3');
-- the same length as the remembered text, one byte different
SELECT 'claim-k7', json_extract(idem_claim('L', 't', 'c', 'send', '{}', 'external', 'k7'), '$.decision') = 'admitted';
SELECT 'plain-settle-k7', sqltest_forge('UPDATE L_rows SET status = ''succeeded'', result = ''{"id":1]'' WHERE "key" = ''k7''') IS NULL;
SELECT 'replay-k7-refused', errmsg('SELECT idem_claim(''L'', ''t'', ''c'', ''send'', ''{}'', ''external'', ''k7'')') = (SELECT v FROM msg WHERE k = 'k7');
SELECT 'replay-k1-after-refusals', json_extract(idem_claim('L', 't', 'c', 'send', '{}', 'external', 'k1'), '$.result') = '{"id":1}';
-- an object passes as an error, and is still refused as members
SELECT 'claim-k4', json_extract(idem_claim('L', 't', 'c', 'send', '{}', 'external', 'k4'), '$.decision') = 'admitted';
SELECT 'plain-settle-k4', sqltest_forge('UPDATE L_rows SET status = ''failed'', error = ''{"table":"x"}'', members = ''[]'' WHERE "key" = ''k4''') IS NULL;
SELECT 'replay-k4', json_extract(idem_claim('L', 't', 'c', 'send', '{}', 'external', 'k4'), '$.error') = '{"table":"x"}';
SELECT 'claim-k5', json_extract(idem_claim('L', 't', 'c', 'send', '{}', 'external', 'k5'), '$.decision') = 'admitted';
SELECT 'plain-settle-k5', sqltest_forge('UPDATE L_rows SET status = ''failed'', error = ''{"e":1}'', members = ''{"table":"x"}'' WHERE "key" = ''k5''') IS NULL;
SELECT 'replay-k5-refused', errmsg('SELECT idem_claim(''L'', ''t'', ''c'', ''send'', ''{}'', ''external'', ''k5'')') = (SELECT v FROM msg WHERE k = 'k5');
-- members: an array passes, the same with a trailing comma does not
SELECT 'claim-k6', json_extract(idem_claim('L', 't', 'c', 'send', '{}', 'external', 'k6'), '$.decision') = 'admitted';
SELECT 'plain-settle-k6', sqltest_forge('UPDATE L_rows SET status = ''failed'', error = ''{"e":1}'', members = ''[{"table":"t","key":"k"}]'' WHERE "key" = ''k6''') IS NULL;
SELECT 'replay-k6', json_extract(idem_claim('L', 't', 'c', 'send', '{}', 'external', 'k6'), '$.members') = '[{"table":"t","key":"k"}]';
SELECT 'replay-k6-again', json_extract(idem_claim('L', 't', 'c', 'send', '{}', 'external', 'k6'), '$.members') = '[{"table":"t","key":"k"}]';
SELECT 'claim-k8', json_extract(idem_claim('L', 't', 'c', 'send', '{}', 'external', 'k8'), '$.decision') = 'admitted';
SELECT 'plain-settle-k8', sqltest_forge('UPDATE L_rows SET status = ''failed'', error = ''{"e":1}'', members = ''[{"table":"t","key":"k"}],'' WHERE "key" = ''k8''') IS NULL;
SELECT 'replay-k8-refused', errmsg('SELECT idem_claim(''L'', ''t'', ''c'', ''send'', ''{}'', ''external'', ''k8'')') = (SELECT v FROM msg WHERE k = 'k8');
-- longer than the remembered size (1024 bytes): checked every time
SELECT 'claim-k9', json_extract(idem_claim('L', 't', 'c', 'send', '{}', 'external', 'k9'), '$.decision') = 'admitted';
SELECT 'settle-k9', json_extract(idem_settle('L', (SELECT token FROM L WHERE "key" = 'k9'), 'succeeded', json_object('s', printf('%.2000c', 'a'))), '$.status') = 'succeeded';
SELECT 'replay-k9', length(json_extract(idem_claim('L', 't', 'c', 'send', '{}', 'external', 'k9'), '$.result.s')) = 2000;
SELECT 'replay-k9-again', length(json_extract(idem_claim('L', 't', 'c', 'send', '{}', 'external', 'k9'), '$.result.s')) = 2000;
SELECT 'claim-k10', json_extract(idem_claim('L', 't', 'c', 'send', '{}', 'external', 'k10'), '$.decision') = 'admitted';
SELECT 'plain-settle-k10', sqltest_forge('UPDATE L_rows SET status = ''succeeded'', result = (SELECT result FROM L_rows WHERE "key" = ''k9'') || '' x'' WHERE "key" = ''k10''') IS NULL;
SELECT 'replay-k10-refused', errmsg('SELECT idem_claim(''L'', ''t'', ''c'', ''send'', ''{}'', ''external'', ''k10'')') = (SELECT v FROM msg WHERE k = 'k10');
SELECT 'replay-k9-after', length(json_extract(idem_claim('L', 't', 'c', 'send', '{}', 'external', 'k9'), '$.result.s')) = 2000;
-- the claim's derived key is idem_key's, for arguments hashed in one call
-- and for arguments past the one-call buffer (1536 bytes with the prefix)
SELECT 'key-small', json_extract(idem_claim('L', 't', 'c', 'send', '{"n":1}'), '$.key') = idem_key('t', 'c', 'send', '{"n":1}');
SELECT 'key-at-edge', json_extract(idem_claim('L', 't', 'c', 'send', json_object('s', printf('%.1519c', 'a'))), '$.key')
       = idem_key('t', 'c', 'send', json_object('s', printf('%.1519c', 'a')))
       AND length('t:c:send:' || json_object('s', printf('%.1519c', 'a'))) = 1536;
SELECT 'key-past-edge', json_extract(idem_claim('L', 't', 'c', 'send', json_object('s', printf('%.1520c', 'a'))), '$.key')
       = idem_key('t', 'c', 'send', json_object('s', printf('%.1520c', 'a')));
SELECT 'key-large', json_extract(idem_claim('L', 't', 'c', 'send', json_object('s', printf('%.5000c', 'b'))), '$.key')
       = idem_key('t', 'c', 'send', json_object('s', printf('%.5000c', 'b')));
-- a NUL inside stored JSON (never valid JSON) is refused, not cut off at
-- the NUL: the text before it is JSON, and was remembered as passing
SELECT 'claim-k11', json_extract(idem_claim('L', 't', 'c', 'send', '{}', 'external', 'k11'), '$.decision') = 'admitted';
SELECT 'plain-settle-k11', sqltest_forge('UPDATE L_rows SET status = ''succeeded'', result = ''{"id":1}'' || char(0) || ''x'' WHERE "key" = ''k11''') IS NULL;
SELECT 'plain-settle-k11-nul', (SELECT length(CAST(result AS BLOB)) FROM L_rows WHERE "key" = 'k11') = 10;
SELECT 'replay-k11-refused', errmsg('SELECT idem_claim(''L'', ''t'', ''c'', ''send'', ''{}'', ''external'', ''k11'')')
       = 'idem_claim: the stored result of key "k11" in L_rows is not valid JSON; the row was changed outside the ledger, so no answer is made from it';
SELECT 'claim-k12', json_extract(idem_claim('L', 't', 'c', 'send', '{}', 'external', 'k12'), '$.decision') = 'admitted';
SELECT 'plain-settle-k12', sqltest_forge('UPDATE L_rows SET status = ''failed'', error = ''{"e":1}'', members = ''[]'' || char(0) || ''x'' WHERE "key" = ''k12''') IS NULL;
SELECT 'replay-k12-refused', errmsg('SELECT idem_claim(''L'', ''t'', ''c'', ''send'', ''{}'', ''external'', ''k12'')')
       = 'idem_claim: the stored members of key "k12" in L_rows is not valid JSON; the row was changed outside the ledger, so no answer is made from it';
SELECT 'claim-k13', json_extract(idem_claim('L', 't', 'c', 'send', '{}', 'external', 'k13'), '$.decision') = 'admitted';
SELECT 'plain-settle-k13', sqltest_forge('UPDATE L_rows SET status = ''failed'', error = ''{"e":1}'' || char(0), members = ''[]'' WHERE "key" = ''k13''') IS NULL;
SELECT 'replay-k13-refused', errmsg('SELECT idem_claim(''L'', ''t'', ''c'', ''send'', ''{}'', ''external'', ''k13'')')
       = 'idem_claim: the stored error of key "k13" in L_rows is not valid JSON; the row was changed outside the ledger, so no answer is made from it';
