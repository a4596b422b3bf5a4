-- Smaller holes: a single_tenant ledger answers another tenant's key with
-- mismatch inside a transaction and a clear message through INSERT (never
-- a raw UNIQUE error); a lookup under a collation other than BINARY is left
-- to SQLite (tenant = 'T' COLLATE NOCASE finds 't'); max_args_bytes counts
-- the canonical text, so every spelling of one call gets one answer.

SELECT sqltest_clock(1700000000000);

-- ---------------------------------------------------------------- single_tenant: another tenant's key
CREATE VIRTUAL TABLE S USING idempotency(single_tenant=1);
SELECT 'st-first', json_extract(idem_claim('S', 'a', 'c', 'x', '{}', 'external', 'k1'), '$.decision') = 'admitted';
SELECT 'st-autocommit-mismatch', idem_claim('S', 'b', 'c', 'x', '{}', 'external', 'k1')
       = '{"decision":"mismatch","key":"k1","differs":"tenant","message":"this key is bound to another request; nothing was admitted or replayed"}';
BEGIN;
SELECT 'st-txn-mismatch', idem_claim('S', 'b', 'c', 'x', '{}', 'external', 'k1')
       = '{"decision":"mismatch","key":"k1","differs":"tenant","message":"this key is bound to another request; nothing was admitted or replayed"}';
COMMIT;
SAVEPOINT sp;
SELECT 'st-savepoint-mismatch', json_extract(idem_claim('S', 'b', 'c', 'x', '{}', 'external', 'k1'), '$.differs') = 'tenant';
RELEASE sp;
SELECT 'st-insert-message', errmsg('INSERT INTO S(tenant, conversation, tool, args, key) VALUES (''b'', ''c'', ''x'', ''{}'', ''k1'')')
       = 'idempotency: key "k1" of tenant "b" in ledger S is taken: it is bound to another request (the tenant differs)';
SELECT 'st-insert-code', errcode('INSERT INTO S(tenant, conversation, tool, args, key) VALUES (''b'', ''c'', ''x'', ''{}'', ''k1'')') = 19;
BEGIN;
SELECT 'st-insert-in-txn-message', errmsg('INSERT INTO S(tenant, conversation, tool, args, key) VALUES (''b'', ''c'', ''x'', ''{}'', ''k1'')')
       = 'idempotency: key "k1" of tenant "b" in ledger S is taken: it is bound to another request (the tenant differs)';
COMMIT;
INSERT OR IGNORE INTO S(tenant, conversation, tool, args, key) VALUES ('b', 'c', 'x', '{}', 'k1');
SELECT 'st-insert-or-ignore-skips', changes() = 0 AND idem_last_claim('S') IS NULL;
SELECT 'st-one-row', (SELECT count(*) FROM S_rows) = 1 AND (SELECT tenant FROM S_rows) = 'a';

-- ---------------------------------------------------------------- collations other than BINARY
CREATE VIRTUAL TABLE C USING idempotency;
SELECT idem_claim('C', 'Tn', 'c', 'x', '{}', 'external', 'Key-1');
SELECT 'coll-binary-miss', (SELECT count(*) FROM C WHERE tenant = 'tn') = 0;
SELECT 'coll-nocase-tenant', (SELECT count(*) FROM C WHERE tenant = 'tn' COLLATE NOCASE) = 1;
SELECT 'coll-nocase-both', (SELECT count(*) FROM C WHERE tenant = 'TN' COLLATE NOCASE AND key = 'key-1' COLLATE NOCASE) = 1;
SELECT 'coll-nocase-key-only', (SELECT count(*) FROM C WHERE tenant = 'Tn' AND key = 'KEY-1' COLLATE NOCASE) = 1;
SELECT 'coll-binary-key', (SELECT count(*) FROM C WHERE tenant = 'Tn' AND key = 'KEY-1') = 0;
SELECT 'coll-nocase-token', (SELECT count(*) FROM C WHERE token = upper((SELECT token FROM C)) COLLATE NOCASE) = 1;
SELECT 'coll-rtrim', (SELECT count(*) FROM C WHERE tenant = 'Tn  ' COLLATE RTRIM) = 1;
-- the same answers as SQLite gives for a plain copy of the rows
CREATE TABLE plain AS SELECT tenant, key, token FROM C;
SELECT 'coll-matches-plain', (SELECT count(*) FROM C WHERE tenant = 'tN' COLLATE NOCASE) = (SELECT count(*) FROM plain WHERE tenant = 'tN' COLLATE NOCASE);

-- ---------------------------------------------------------------- max_args_bytes counts the canonical text
CREATE VIRTUAL TABLE M USING idempotency(max_args_bytes=7);
-- '{"a":1}' is 7 bytes canonical; these spellings are longer as given
SELECT 'cap-spaced-admitted', json_extract(idem_claim('M', 't', 'c', 'x', '{ "a" : 1 }', 'external', 'm1'), '$.decision') = 'admitted';
SELECT 'cap-canonical-in-progress', json_extract(idem_claim('M', 't', 'c', 'x', '{"a":1}', 'external', 'm1'), '$.decision') = 'in_progress';
SELECT 'cap-escaped-in-progress', json_extract(idem_claim('M', 't', 'c', 'x', '{"\u0061":1.0}', 'external', 'm1'), '$.decision') = 'in_progress';
SELECT 'cap-stored-canonical', (SELECT args FROM M_rows WHERE key = 'm1') = '{"a":1}';
SELECT 'cap-over', errmsg('SELECT idem_claim(''M'', ''t'', ''c'', ''x'', ''{"a":12}'')')
       = 'idem_claim: args is 8 bytes in canonical form, over the ledger''s max_args_bytes of 7';
SELECT 'cap-over-spaced', errmsg('SELECT idem_claim(''M'', ''t'', ''c'', ''x'', ''  {"a" :  12}  '')')
       = 'idem_claim: args is 8 bytes in canonical form, over the ledger''s max_args_bytes of 7';
SELECT 'cap-over-code', errcode('SELECT idem_claim(''M'', ''t'', ''c'', ''x'', ''{"a":12}'')') = 18;
SELECT 'cap-over-insert', errmsg('INSERT INTO M(tenant, conversation, tool, args) VALUES (''t'', ''c'', ''x'', ''{"b":12}'')')
       = 'idempotency: args is 8 bytes in canonical form, over the ledger''s max_args_bytes of 7';
SELECT 'cap-over-wrote-nothing', (SELECT count(*) FROM M_rows) = 1;
-- the detail of a settle, the same way
SELECT 'cap-detail-spaced', json_extract(idem_settle('M', (SELECT token FROM M WHERE key = 'm1'), 'succeeded', ' { "r" : 1 } '), '$.status') = 'succeeded';
SELECT 'cap-detail-stored', (SELECT result FROM M_rows WHERE key = 'm1') = '{"r":1}';
SELECT idem_claim('M', 't', 'c', 'x', '{}', 'external', 'm2');
SELECT 'cap-detail-over', errmsg('SELECT idem_settle(''M'', (SELECT token FROM M WHERE key = ''m2''), ''succeeded'', ''{"r":10}'')')
       = 'idem_settle: detail is 8 bytes in canonical form, over the ledger''s max_args_bytes of 7';
