-- idem_claim: every decision and its exact JSON shape (each field through
-- json_extract/json_type, and the key set through json_each so that no
-- extra field appears), key derivation and identity, operation ids, and
-- every input error with nothing written.
-- A claim is evaluated once per statement: WITH c AS MATERIALIZED (...).

SELECT sqltest_clock(1700000000000);
CREATE VIRTUAL TABLE L USING idempotency;
CREATE TEMP TABLE tok(name TEXT PRIMARY KEY, t TEXT);

-- ---------------------------------------------------------------- admitted (external, the default)
WITH c(j) AS MATERIALIZED (SELECT idem_claim('L', 'tenant-a', 'conv-1', 'send_email', '{"to":"a@b.c","amount":5}'))
SELECT 'adm-decision', json_extract(j, '$.decision') = 'admitted' FROM c
UNION ALL SELECT 'adm-key', json_extract(j, '$.key') = idem_key('tenant-a', 'conv-1', 'send_email', '{"amount":5,"to":"a@b.c"}') FROM c
UNION ALL SELECT 'adm-key-readme-vector', json_extract(j, '$.key') = 'idem1-24871bd0060b2885a71b5ca5e0486b5c' FROM c
UNION ALL SELECT 'adm-token-32-hex', length(json_extract(j, '$.token')) = 32 AND json_extract(j, '$.token') NOT GLOB '*[^0-9a-f]*' FROM c
UNION ALL SELECT 'adm-token-is-text', json_type(j, '$.token') = 'text' FROM c
UNION ALL SELECT 'adm-token-stored', json_extract(j, '$.token') = (SELECT token FROM L WHERE tenant = 'tenant-a') FROM c
UNION ALL SELECT 'adm-attempt', json_type(j, '$.attempt') = 'integer' AND json_extract(j, '$.attempt') = 1 FROM c
UNION ALL SELECT 'adm-effect', json_extract(j, '$.effect') = 'external' FROM c
UNION ALL SELECT 'adm-committed', json_type(j, '$.committed') = 'true' FROM c
UNION ALL SELECT 'adm-durable-memory', json_type(j, '$.durable') = 'false' FROM c
UNION ALL SELECT 'adm-lease-until', json_type(j, '$.lease_until') = 'integer' AND json_extract(j, '$.lease_until') = 1700000000000 + 300000 FROM c
UNION ALL SELECT 'adm-note', json_extract(j, '$.note') = 'we will not resend this call, but we cannot promise that the target receives it once: send the key as its Idempotency-Key and let the target deduplicate' FROM c
UNION ALL SELECT 'adm-keyset', (SELECT group_concat(key, ',') FROM (SELECT key FROM json_each(j) ORDER BY key))
       = 'attempt,committed,decision,durable,effect,key,lease_until,note,token' FROM c
UNION ALL SELECT 'adm-valid-json', json_valid(j) AND json_type(j) = 'object' FROM c
UNION ALL SELECT 'adm-key-is-valid-key', idem_valid_key(json_extract(j, '$.key')) = 1 FROM c;
INSERT INTO tok SELECT 'a', token FROM L WHERE tenant = 'tenant-a';

-- the stored row
SELECT 'row-tenant', (SELECT tenant FROM L_rows WHERE id = 1) = 'tenant-a';
SELECT 'row-key', (SELECT "key" FROM L_rows WHERE id = 1) = 'idem1-24871bd0060b2885a71b5ca5e0486b5c';
SELECT 'row-conversation', (SELECT conversation FROM L_rows WHERE id = 1) = 'conv-1';
SELECT 'row-tool', (SELECT tool FROM L_rows WHERE id = 1) = 'send_email';
SELECT 'row-args-canonical', (SELECT args FROM L_rows WHERE id = 1) = '{"amount":5,"to":"a@b.c"}';
SELECT 'row-effect', (SELECT effect FROM L_rows WHERE id = 1) = 'external';
SELECT 'row-status', (SELECT status FROM L_rows WHERE id = 1) = 'claimed';
SELECT 'row-attempt', (SELECT attempt FROM L_rows WHERE id = 1) = 1;
SELECT 'row-times', (SELECT created_at = 1700000000000 AND updated_at = 1700000000000 AND lease_until = 1700000300000 FROM L_rows WHERE id = 1);
SELECT 'row-no-outcome', (SELECT result IS NULL AND error IS NULL FROM L_rows WHERE id = 1);
SELECT 'row-count-1', (SELECT count(*) FROM L_rows) = 1;

-- ---------------------------------------------------------------- in_progress (a live claim is never admitted twice)
SELECT sqltest_clock(1700000100000);
WITH c(j) AS MATERIALIZED (SELECT idem_claim('L', 'tenant-a', 'conv-1', 'send_email', '{"amount":5,"to":"a@b.c"}'))
SELECT 'inp-decision', json_extract(j, '$.decision') = 'in_progress' FROM c
UNION ALL SELECT 'inp-key', json_extract(j, '$.key') = 'idem1-24871bd0060b2885a71b5ca5e0486b5c' FROM c
UNION ALL SELECT 'inp-attempt', json_type(j, '$.attempt') = 'integer' AND json_extract(j, '$.attempt') = 1 FROM c
UNION ALL SELECT 'inp-lease-until', json_extract(j, '$.lease_until') = 1700000300000 FROM c
UNION ALL SELECT 'inp-keyset', (SELECT group_concat(key, ',') FROM (SELECT key FROM json_each(j) ORDER BY key)) = 'attempt,decision,key,lease_until,renewed_at' FROM c
UNION ALL SELECT 'inp-no-token', instr(j, (SELECT t FROM tok WHERE name = 'a')) = 0 FROM c;
-- two spellings of one call are one key
SELECT 'spelling-whitespace-order', json_extract(idem_claim('L', 'tenant-a', 'conv-1', 'send_email', ' { "to" : "a@b.c" , "amount" : 5.0 } '), '$.decision') = 'in_progress';
SELECT 'spelling-escapes', json_extract(idem_claim('L', 'tenant-a', 'conv-1', 'send_email', '{"\u0074o":"a@b.c","amount":5e0}'), '$.decision') = 'in_progress';
SELECT 'in-progress-wrote-nothing', (SELECT count(*) FROM L_rows) = 1 AND (SELECT attempt FROM L_rows) = 1
       AND (SELECT token FROM L) = (SELECT t FROM tok WHERE name = 'a');
SELECT 'in-progress-updated-at-unchanged', (SELECT updated_at FROM L_rows) = 1700000000000;
-- one millisecond before the lease ends: still in progress
SELECT sqltest_clock(1700000299999);
SELECT 'inp-last-ms', json_extract(idem_claim('L', 'tenant-a', 'conv-1', 'send_email', '{"amount":5,"to":"a@b.c"}'), '$.decision') = 'in_progress';
SELECT sqltest_clock(1700000100000);

-- different tenant, conversation, tool or args: different keys, each admitted
SELECT 'other-tenant', json_extract(idem_claim('L', 'tenant-b', 'conv-1', 'send_email', '{"amount":5,"to":"a@b.c"}'), '$.decision') = 'admitted';
SELECT 'other-tenant-same-key', (SELECT "key" FROM L_rows WHERE tenant = 'tenant-b') = idem_key('tenant-b', 'conv-1', 'send_email', '{"amount":5,"to":"a@b.c"}')
       AND idem_key('tenant-b', 'conv-1', 'send_email', '{}') <> idem_key('tenant-a', 'conv-1', 'send_email', '{}');
SELECT 'other-conversation', json_extract(idem_claim('L', 'tenant-a', 'conv-2', 'send_email', '{"amount":5,"to":"a@b.c"}'), '$.decision') = 'admitted';
SELECT 'other-tool', json_extract(idem_claim('L', 'tenant-a', 'conv-1', 'send_sms', '{"amount":5,"to":"a@b.c"}'), '$.decision') = 'admitted';
SELECT 'other-args', json_extract(idem_claim('L', 'tenant-a', 'conv-1', 'send_email', '{"amount":6,"to":"a@b.c"}'), '$.decision') = 'admitted';
SELECT 'other-args-type', json_extract(idem_claim('L', 'tenant-a', 'conv-1', 'send_email', '{"amount":"5","to":"a@b.c"}'), '$.decision') = 'admitted';
SELECT 'case-matters', json_extract(idem_claim('L', 'Tenant-a', 'conv-1', 'send_email', '{"amount":5,"to":"a@b.c"}'), '$.decision') = 'admitted';
SELECT 'seven-distinct-keys', (SELECT count(DISTINCT "key") FROM L_rows) = 7 AND (SELECT count(*) FROM L_rows) = 7;
SELECT 'tokens-distinct', (SELECT count(DISTINCT token) FROM L_rows) = 7;
SELECT 'all-attempt-1', (SELECT count(*) FROM L_rows WHERE attempt = 1 AND status = 'claimed') = 7;

-- ---------------------------------------------------------------- replay of succeeded
SELECT 'settle-a', json_extract(idem_settle('L', (SELECT t FROM tok WHERE name = 'a'), 'succeeded', '{"message_id":"m-17", "n": 1.50}'), '$.status') = 'succeeded';
WITH c(j) AS MATERIALIZED (SELECT idem_claim('L', 'tenant-a', 'conv-1', 'send_email', '{"amount":5,"to":"a@b.c"}'))
SELECT 'rep-decision', json_extract(j, '$.decision') = 'replay' FROM c
UNION ALL SELECT 'rep-idempotent', json_type(j, '$.idempotent') = 'true' FROM c
UNION ALL SELECT 'rep-key', json_extract(j, '$.key') = 'idem1-24871bd0060b2885a71b5ca5e0486b5c' FROM c
UNION ALL SELECT 'rep-status', json_extract(j, '$.status') = 'succeeded' FROM c
UNION ALL SELECT 'rep-attempt', json_type(j, '$.attempt') = 'integer' AND json_extract(j, '$.attempt') = 1 FROM c
UNION ALL SELECT 'rep-settled-at', json_type(j, '$.settled_at') = 'integer' AND json_extract(j, '$.settled_at') = 1700000100000 FROM c
UNION ALL SELECT 'rep-result-object', json_type(j, '$.result') = 'object' FROM c
UNION ALL SELECT 'rep-result', json(json_extract(j, '$.result')) = '{"message_id":"m-17","n":1.50}' FROM c
UNION ALL SELECT 'rep-result-stored-text', instr(j, '"result":{"message_id":"m-17","n":1.50}') > 0 FROM c
UNION ALL SELECT 'rep-members', json_type(j, '$.members') = 'array' AND json_array_length(j, '$.members') = 0 FROM c
UNION ALL SELECT 'rep-keyset', (SELECT group_concat(key, ',') FROM (SELECT key FROM json_each(j) ORDER BY key))
       = 'attempt,decision,idempotent,key,members,result,settled_at,status' FROM c
UNION ALL SELECT 'rep-no-token', instr(j, (SELECT t FROM tok WHERE name = 'a')) = 0 FROM c;
SELECT 'replay-wrote-nothing', (SELECT status FROM L_rows WHERE id = 1) = 'succeeded' AND (SELECT attempt FROM L_rows WHERE id = 1) = 1;
-- replay in another spelling, and much later (no lease for terminal rows)
SELECT sqltest_clock(1800000000000);
SELECT 'replay-other-spelling', json_extract(idem_claim('L', 'tenant-a', 'conv-1', 'send_email', '{"to":"a@b.c","amount":5}'), '$.decision') = 'replay';
SELECT sqltest_clock(1700000100000);
-- a succeeded with NULL detail: result null
SELECT 'settle-null-detail', json_extract(idem_settle('L', (SELECT token FROM L WHERE tenant = 'tenant-b'), 'succeeded', NULL), '$.status') = 'succeeded';
WITH c(j) AS MATERIALIZED (SELECT idem_claim('L', 'tenant-b', 'conv-1', 'send_email', '{"amount":5,"to":"a@b.c"}'))
SELECT 'rep-null-result', json_type(j, '$.result') = 'null' FROM c
UNION ALL SELECT 'rep-null-keyset', (SELECT group_concat(key, ',') FROM (SELECT key FROM json_each(j) ORDER BY key))
       = 'attempt,decision,idempotent,key,members,result,settled_at,status' FROM c;

-- ---------------------------------------------------------------- replay of failed: "error"
SELECT 'settle-failed', json_extract(idem_settle('L', (SELECT token FROM L WHERE conversation = 'conv-2'), 'failed', '{"code":"card_declined"}'), '$.status') = 'failed';
WITH c(j) AS MATERIALIZED (SELECT idem_claim('L', 'tenant-a', 'conv-2', 'send_email', '{"amount":5,"to":"a@b.c"}'))
SELECT 'repf-decision', json_extract(j, '$.decision') = 'replay' FROM c
UNION ALL SELECT 'repf-idempotent', json_type(j, '$.idempotent') = 'true' FROM c
UNION ALL SELECT 'repf-status', json_extract(j, '$.status') = 'failed' FROM c
UNION ALL SELECT 'repf-error', json_extract(j, '$.error.code') = 'card_declined' AND json(json_extract(j, '$.error')) = '{"code":"card_declined"}' FROM c
UNION ALL SELECT 'repf-no-result', json_type(j, '$.result') IS NULL FROM c
UNION ALL SELECT 'repf-members', json_array_length(j, '$.members') = 0 FROM c
UNION ALL SELECT 'repf-keyset', (SELECT group_concat(key, ',') FROM (SELECT key FROM json_each(j) ORDER BY key))
       = 'attempt,decision,error,idempotent,key,members,settled_at,status' FROM c;

-- ---------------------------------------------------------------- unknown
SELECT 'settle-unknown', json_extract(idem_settle('L', (SELECT token FROM L WHERE tool = 'send_sms'), 'unknown', '{"reason":"timeout"}'), '$.status') = 'unknown';
WITH c(j) AS MATERIALIZED (SELECT idem_claim('L', 'tenant-a', 'conv-1', 'send_sms', '{"amount":5,"to":"a@b.c"}'))
SELECT 'unk-decision', json_extract(j, '$.decision') = 'unknown' FROM c
UNION ALL SELECT 'unk-key', json_extract(j, '$.key') = idem_key('tenant-a', 'conv-1', 'send_sms', '{"amount":5,"to":"a@b.c"}') FROM c
UNION ALL SELECT 'unk-attempt', json_extract(j, '$.attempt') = 1 FROM c
UNION ALL SELECT 'unk-message', json_extract(j, '$.message') = 'that request may have reached the target system, the outcome is theirs to report, and nothing is retried here' FROM c
UNION ALL SELECT 'unk-keyset', (SELECT group_concat(key, ',') FROM (SELECT key FROM json_each(j) ORDER BY key)) = 'attempt,decision,key,message' FROM c
UNION ALL SELECT 'unk-no-token', instr(j, (SELECT token FROM L WHERE tool = 'send_sms')) = 0 FROM c
UNION ALL SELECT 'unk-no-error-echo', instr(j, 'timeout') = 0 FROM c;
SELECT 'unknown-wrote-nothing', (SELECT status || attempt FROM L_rows WHERE tool = 'send_sms') = 'unknown1';
-- unknown stays unknown, however late
SELECT sqltest_clock(1900000000000);
SELECT 'unknown-stays', json_extract(idem_claim('L', 'tenant-a', 'conv-1', 'send_sms', '{"amount":5,"to":"a@b.c"}'), '$.decision') = 'unknown';
SELECT sqltest_clock(1700000100000);

-- ---------------------------------------------------------------- mismatch (operation id reused)
WITH c(j) AS MATERIALIZED (SELECT idem_claim('L', 'tenant-a', 'conv-9', 'charge', '{"secret":"s3cr3t-args"}', 'external', 'op-1'))
SELECT 'op-admitted', json_extract(j, '$.decision') = 'admitted' FROM c
UNION ALL SELECT 'op-key', json_extract(j, '$.key') = 'op-1' FROM c
UNION ALL SELECT 'op-keyset', (SELECT group_concat(key, ',') FROM (SELECT key FROM json_each(j) ORDER BY key))
       = 'attempt,committed,decision,durable,effect,key,lease_until,note,token' FROM c;
SELECT 'op-row', (SELECT count(*) FROM L_rows WHERE "key" = 'op-1' AND tenant = 'tenant-a' AND args = '{"secret":"s3cr3t-args"}') = 1;
SELECT 'op-settle', json_extract(idem_settle('L', (SELECT token FROM L WHERE "key" = 'op-1'), 'succeeded', '{"stored":"zz-result-zz"}'), '$.status') = 'succeeded';
WITH c(j) AS MATERIALIZED (SELECT idem_claim('L', 'tenant-a', 'conv-9', 'charge', '{"secret":"other"}', 'external', 'op-1'))
SELECT 'mm-decision', json_extract(j, '$.decision') = 'mismatch' FROM c
UNION ALL SELECT 'mm-key', json_extract(j, '$.key') = 'op-1' FROM c
UNION ALL SELECT 'mm-differs', json_extract(j, '$.differs') = 'args' FROM c
UNION ALL SELECT 'mm-message', json_extract(j, '$.message') = 'this key is bound to another request; nothing was admitted or replayed' FROM c
UNION ALL SELECT 'mm-keyset', (SELECT group_concat(key, ',') FROM (SELECT key FROM json_each(j) ORDER BY key)) = 'decision,differs,key,message' FROM c
UNION ALL SELECT 'mm-no-stored-args', instr(j, 's3cr3t') = 0 FROM c
UNION ALL SELECT 'mm-no-result', instr(j, 'zz-result-zz') = 0 FROM c
UNION ALL SELECT 'mm-no-token', instr(j, (SELECT token FROM L WHERE "key" = 'op-1')) = 0 FROM c
UNION ALL SELECT 'mm-no-idempotent', json_type(j, '$.idempotent') IS NULL FROM c;
SELECT 'mm-conversation', json_extract(idem_claim('L', 'tenant-a', 'conv-8', 'charge', '{"secret":"s3cr3t-args"}', 'external', 'op-1'), '$.differs') = 'conversation';
SELECT 'mm-tool', json_extract(idem_claim('L', 'tenant-a', 'conv-9', 'refund', '{"secret":"s3cr3t-args"}', 'external', 'op-1'), '$.differs') = 'tool';
SELECT 'mm-effect', json_extract(idem_claim('L', 'tenant-a', 'conv-9', 'charge', '{"secret":"s3cr3t-args"}', 'local', 'op-1'), '$.differs') = 'effect';
SELECT 'mm-effect-default', json_extract(idem_claim('L', 'tenant-a', 'conv-9', 'charge', '{"secret":"s3cr3t-args"}', 'external', 'op-1'), '$.decision') = 'replay';
SELECT 'mm-same-in-other-spelling', json_extract(idem_claim('L', 'tenant-a', 'conv-9', 'charge', '{ "secret" : "s3cr3t-args" }', 'external', 'op-1'), '$.decision') = 'replay';
SELECT 'mm-decision-each', (SELECT count(*) FROM (
         SELECT idem_claim('L', 'tenant-a', 'conv-8', 'charge', '{"secret":"s3cr3t-args"}', 'external', 'op-1') AS j) WHERE json_extract(j, '$.decision') = 'mismatch') = 1;
-- mismatch on a live (claimed) key too; effect fixed by the first claim on a derived key
SELECT 'mm-live-claim', json_extract(idem_claim('L', 'tenant-a', 'conv-1', 'send_email', '{"amount":6,"to":"a@b.c"}', 'local'), '$.differs') = 'effect';
SELECT 'mm-wrote-nothing', (SELECT count(*) FROM L_rows) = 8 AND (SELECT status FROM L_rows WHERE "key" = 'op-1') = 'succeeded';
-- tenant isolation: the same operation id in another tenant is another claim
WITH c(j) AS MATERIALIZED (SELECT idem_claim('L', 'tenant-b', 'conv-x', 'other', '{"z":1}', 'local', 'op-1'))
SELECT 'op-other-tenant', json_extract(j, '$.decision') = 'admitted' FROM c
UNION ALL SELECT 'op-other-tenant-key', json_extract(j, '$.key') = 'op-1' FROM c
UNION ALL SELECT 'op-local-no-note', json_type(j, '$.note') IS NULL FROM c
UNION ALL SELECT 'op-local-effect', json_extract(j, '$.effect') = 'local' FROM c
UNION ALL SELECT 'op-local-keyset', (SELECT group_concat(key, ',') FROM (SELECT key FROM json_each(j) ORDER BY key))
       = 'attempt,committed,decision,durable,effect,key,lease_until,token' FROM c;
SELECT 'op-two-tenants', (SELECT count(*) FROM L_rows WHERE "key" = 'op-1') = 2;
SELECT 'op-in-progress-per-tenant', json_extract(idem_claim('L', 'tenant-b', 'conv-x', 'other', '{"z":1}', 'local', 'op-1'), '$.decision') = 'in_progress';
-- an operation id equal to a derived key's text of another call is refused; ids like it are not
SELECT 'op-idem1', errmsg('SELECT idem_claim(''L'', ''t'', ''c'', ''x'', ''{}'', ''external'', ''idem1-24871bd0060b2885a71b5ca5e0486b5c'')')
       = 'idem_claim: operation_id "idem1-24871bd0060b2885a71b5ca5e0486b5c" looks like a derived key (idem<digit>-...); omit it to derive the key';
SELECT 'op-idem9', errmsg('SELECT idem_claim(''L'', ''t'', ''c'', ''x'', ''{}'', ''external'', ''idem9-x'')')
       = 'idem_claim: operation_id "idem9-x" looks like a derived key (idem<digit>-...); omit it to derive the key';
SELECT 'op-idem0', errmsg('SELECT idem_claim(''L'', ''t'', ''c'', ''x'', ''{}'', ''local'', ''idem0-'')')
       = 'idem_claim: operation_id "idem0-" looks like a derived key (idem<digit>-...); omit it to derive the key';
SELECT 'op-idem-code', errcode('SELECT idem_claim(''L'', ''t'', ''c'', ''x'', ''{}'', ''external'', ''idem1-a'')') = 19;
SELECT 'op-idem-dash-ok', json_extract(idem_claim('L', 't', 'c', 'x', '{}', 'external', 'idem-1'), '$.decision') = 'admitted';
SELECT 'op-idemx-ok', json_extract(idem_claim('L', 't', 'c', 'x', '{}', 'external', 'idemx-1'), '$.decision') = 'admitted';
SELECT 'op-idem12-ok', json_extract(idem_claim('L', 't', 'c', 'x', '{}', 'external', 'idem12-1'), '$.decision') = 'admitted';
SELECT 'op-idem1-no-dash-ok', json_extract(idem_claim('L', 't', 'c', 'x', '{}', 'external', 'idem1'), '$.decision') = 'admitted';
SELECT 'op-xidem1-ok', json_extract(idem_claim('L', 't', 'c', 'x', '{}', 'external', 'xidem1-a'), '$.decision') = 'admitted';
SELECT 'op-128-chars', json_extract(idem_claim('L', 't', 'c', 'x', '{}', 'external', printf('%.128c', 'k')), '$.key') = printf('%.128c', 'k');

-- ---------------------------------------------------------------- committed / transactions
BEGIN;
SELECT 'tx-committed-false', json_type(idem_claim('L', 'tx', 'c', 'x', '{}'), '$.committed') = 'false';
SELECT 'tx-row-visible-inside', (SELECT count(*) FROM L WHERE tenant = 'tx') = 1;
SELECT 'tx-in-progress-inside', json_extract(idem_claim('L', 'tx', 'c', 'x', '{}'), '$.decision') = 'in_progress';
ROLLBACK;
SELECT 'tx-rollback-removes-claim', (SELECT count(*) FROM L_rows WHERE tenant = 'tx') = 0;
SELECT 'tx-retry-admitted', json_type(idem_claim('L', 'tx', 'c', 'x', '{}'), '$.committed') = 'true';
BEGIN;
SELECT 'tx2-committed-false', json_type(idem_claim('L', 'tx', 'c', 'y', '{}'), '$.committed') = 'false';
COMMIT;
SELECT 'tx2-kept-after-commit', (SELECT status FROM L WHERE tenant = 'tx' AND tool = 'y') = 'claimed';
BEGIN IMMEDIATE;
SELECT 'tx3-immediate-committed-false', json_type(idem_claim('L', 'tx', 'c', 'z', '{}', 'local'), '$.committed') = 'false';
COMMIT;
SAVEPOINT s1;
SELECT 'savepoint-committed-false', json_type(idem_claim('L', 'tx', 'c', 'w', '{}'), '$.committed') = 'false';
RELEASE s1;
SELECT 'savepoint-kept', (SELECT count(*) FROM L WHERE tenant = 'tx') = 4;
-- a claim inside a statement that writes is refused
CREATE TEMP TABLE sink(j TEXT);
SELECT 'claim-in-insert-refused', errmsg('INSERT INTO sink SELECT idem_claim(''L'', ''w'', ''c'', ''x'', ''{}'')')
       = 'idem_claim: call it in a statement of its own (SELECT idem_claim(...)); a statement that writes is in progress';
SELECT 'claim-in-insert-nothing', (SELECT count(*) FROM L_rows WHERE tenant = 'w') = 0 AND (SELECT count(*) FROM sink) = 0;
-- the same into a table of the ledger's own schema, and one that writes
-- nothing yet (outside a transaction a writing statement holds the write
-- transaction from its first step, however many rows it has written)
CREATE TABLE main_sink(j TEXT);
SELECT 'claim-in-insert-main-refused', errmsg('INSERT INTO main_sink SELECT idem_claim(''L'', ''w'', ''c'', ''x'', ''{}'')')
       = 'idem_claim: call it in a statement of its own (SELECT idem_claim(...)); a statement that writes is in progress';
INSERT INTO main_sink VALUES ('before');
SELECT 'claim-in-update-refused', errmsg('UPDATE main_sink SET j = idem_claim(''L'', ''w'', ''c'', ''x'', ''{}'')')
       = 'idem_claim: call it in a statement of its own (SELECT idem_claim(...)); a statement that writes is in progress';
SELECT 'claim-in-insert-main-nothing', (SELECT count(*) FROM L_rows WHERE tenant = 'w') = 0
       AND (SELECT group_concat(j) FROM main_sink) = 'before';
DROP TABLE main_sink;

-- ---------------------------------------------------------------- input errors: exact messages, nothing written
CREATE VIRTUAL TABLE G USING idempotency;
-- tenant
SELECT 'tenant-null', errmsg('SELECT idem_claim(''G'', NULL, ''c'', ''tool'', ''{}'')') = 'idem_claim: tenant is missing (NULL)';
SELECT 'tenant-null-code', errcode('SELECT idem_claim(''G'', NULL, ''c'', ''tool'', ''{}'')') = 19;
SELECT 'tenant-integer', errmsg('SELECT idem_claim(''G'', 42, ''c'', ''tool'', ''{}'')') = 'idem_claim: tenant must be TEXT, got INTEGER';
SELECT 'tenant-real', errmsg('SELECT idem_claim(''G'', 4.5, ''c'', ''tool'', ''{}'')') = 'idem_claim: tenant must be TEXT, got REAL';
SELECT 'tenant-blob', errmsg('SELECT idem_claim(''G'', x''6161'', ''c'', ''tool'', ''{}'')') = 'idem_claim: tenant must be TEXT, got BLOB';
SELECT 'tenant-empty', errmsg('SELECT idem_claim(''G'', '''', ''c'', ''tool'', ''{}'')') = 'idem_claim: tenant is empty';
SELECT 'tenant-129', errmsg('SELECT idem_claim(''G'', printf(''%.129c'', ''a''), ''c'', ''tool'', ''{}'')') = 'idem_claim: tenant is 129 characters long, the limit is 128';
SELECT 'tenant-bad-byte', errmsg('SELECT idem_claim(''G'', ''a b'', ''c'', ''tool'', ''{}'')') = 'idem_claim: tenant "a b" has byte 0x20 at offset 1; only A-Z a-z 0-9 _ - are allowed';
SELECT 'tenant-colon', errmsg('SELECT idem_claim(''G'', ''a:b'', ''c'', ''tool'', ''{}'')') = 'idem_claim: tenant "a:b" has byte 0x3a at offset 1; only A-Z a-z 0-9 _ - are allowed';
SELECT 'tenant-code', errcode('SELECT idem_claim(''G'', ''a b'', ''c'', ''tool'', ''{}'')') = 19;
-- conversation
SELECT 'conv-null', errmsg('SELECT idem_claim(''G'', ''t'', NULL, ''tool'', ''{}'')') = 'idem_claim: conversation is missing (NULL)';
SELECT 'conv-integer', errmsg('SELECT idem_claim(''G'', ''t'', 7, ''tool'', ''{}'')') = 'idem_claim: conversation must be TEXT, got INTEGER';
SELECT 'conv-empty', errmsg('SELECT idem_claim(''G'', ''t'', '''', ''tool'', ''{}'')') = 'idem_claim: conversation is empty';
SELECT 'conv-129', errmsg('SELECT idem_claim(''G'', ''t'', printf(''%.129c'', ''c''), ''tool'', ''{}'')') = 'idem_claim: conversation is 129 characters long, the limit is 128';
SELECT 'conv-bad-byte', errmsg('SELECT idem_claim(''G'', ''t'', ''c.1'', ''tool'', ''{}'')') = 'idem_claim: conversation "c.1" has byte 0x2e at offset 1; only A-Z a-z 0-9 _ - are allowed';
SELECT 'conv-code', errcode('SELECT idem_claim(''G'', ''t'', NULL, ''tool'', ''{}'')') = 19;
-- tool
SELECT 'tool-null', errmsg('SELECT idem_claim(''G'', ''t'', ''c'', NULL, ''{}'')') = 'idem_claim: tool is missing (NULL)';
SELECT 'tool-integer', errmsg('SELECT idem_claim(''G'', ''t'', ''c'', 1, ''{}'')') = 'idem_claim: tool must be TEXT, got INTEGER';
SELECT 'tool-empty', errmsg('SELECT idem_claim(''G'', ''t'', ''c'', '''', ''{}'')') = 'idem_claim: tool is empty';
SELECT 'tool-129', errmsg('SELECT idem_claim(''G'', ''t'', ''c'', printf(''%.129c'', ''x''), ''{}'')') = 'idem_claim: tool is 129 characters long, the limit is 128';
SELECT 'tool-bad-byte', errmsg('SELECT idem_claim(''G'', ''t'', ''c'', ''to/ol'', ''{}'')') = 'idem_claim: tool "to/ol" has byte 0x2f at offset 2; only A-Z a-z 0-9 _ - are allowed';
SELECT 'tool-nul-byte', errcode('SELECT idem_claim(''G'', ''t'', ''c'', ''to'' || char(0) || ''ol'', ''{}'')') = 19;
-- operation_id
-- an explicit NULL operation id is a missing key part, not "derive the key"
SELECT 'opid-null', errmsg('SELECT idem_claim(''G'', ''nullop'', ''c'', ''tool'', ''{}'', ''external'', NULL)') = 'idem_claim: operation_id is missing (NULL)';
SELECT 'opid-null-nothing-written', (SELECT count(*) FROM G_rows WHERE tenant = 'nullop') = 0;
SELECT 'opid-integer', errmsg('SELECT idem_claim(''G'', ''t'', ''c'', ''tool'', ''{}'', ''external'', 17)') = 'idem_claim: operation_id must be TEXT, got INTEGER';
SELECT 'opid-empty', errmsg('SELECT idem_claim(''G'', ''t'', ''c'', ''tool'', ''{}'', ''external'', '''')') = 'idem_claim: operation_id is empty';
SELECT 'opid-129', errmsg('SELECT idem_claim(''G'', ''t'', ''c'', ''tool'', ''{}'', ''external'', printf(''%.129c'', ''o''))') = 'idem_claim: operation_id is 129 characters long, the limit is 128';
SELECT 'opid-bad-byte', errmsg('SELECT idem_claim(''G'', ''t'', ''c'', ''tool'', ''{}'', ''external'', ''op 1'')') = 'idem_claim: operation_id "op 1" has byte 0x20 at offset 2; only A-Z a-z 0-9 _ - are allowed';
SELECT 'opid-code', errcode('SELECT idem_claim(''G'', ''t'', ''c'', ''tool'', ''{}'', ''external'', ''op 1'')') = 19;
-- args
SELECT 'args-null', errmsg('SELECT idem_claim(''G'', ''t'', ''c'', ''tool'', NULL)') = 'idem_claim: args is NULL; a missing argument list is not {}';
SELECT 'args-null-code', errcode('SELECT idem_claim(''G'', ''t'', ''c'', ''tool'', NULL)') = 1;
SELECT 'args-integer', errmsg('SELECT idem_claim(''G'', ''t'', ''c'', ''tool'', 5)') = 'idem_claim: args must be TEXT holding JSON, got INTEGER';
SELECT 'args-not-json', errmsg('SELECT idem_claim(''G'', ''t'', ''c'', ''tool'', ''nope'')') = 'idem_claim: args: not valid JSON: unexpected byte 0x6e at byte 0, expected a JSON value';
SELECT 'args-not-json-code', errcode('SELECT idem_claim(''G'', ''t'', ''c'', ''tool'', ''nope'')') = 1;
SELECT 'args-duplicate', errmsg('SELECT idem_claim(''G'', ''t'', ''c'', ''tool'', ''{"a":1,"a":2}'')') = 'idem_claim: args: duplicate member name "a" in the object at byte 0';
SELECT 'args-big-integer', errmsg('SELECT idem_claim(''G'', ''t'', ''c'', ''tool'', ''{"id":9007199254740993}'')')
       = 'idem_claim: args: integer 9007199254740993 at byte 6 is beyond 2^53-1 and would lose precision; send it as a string';
SELECT 'args-trailing', errmsg('SELECT idem_claim(''G'', ''t'', ''c'', ''tool'', ''{} x'')') GLOB 'idem_claim: args: trailing bytes after the JSON value at byte *';
-- effect
SELECT 'effect-null', errmsg('SELECT idem_claim(''G'', ''t'', ''c'', ''tool'', ''{}'', NULL)') = 'idem_claim: effect must be ''local'' or ''external'', got NULL';
SELECT 'effect-case', errmsg('SELECT idem_claim(''G'', ''t'', ''c'', ''tool'', ''{}'', ''Local'')') = 'idem_claim: effect must be ''local'' or ''external'', got "Local"';
SELECT 'effect-integer', errmsg('SELECT idem_claim(''G'', ''t'', ''c'', ''tool'', ''{}'', 5)') = 'idem_claim: effect must be ''local'' or ''external'', got INTEGER';
SELECT 'effect-empty', errmsg('SELECT idem_claim(''G'', ''t'', ''c'', ''tool'', ''{}'', '''')') = 'idem_claim: effect must be ''local'' or ''external'', got ""';
SELECT 'effect-padded', errmsg('SELECT idem_claim(''G'', ''t'', ''c'', ''tool'', ''{}'', ''local '')') = 'idem_claim: effect must be ''local'' or ''external'', got "local "';
SELECT 'effect-blob', errmsg('SELECT idem_claim(''G'', ''eb'', ''c'', ''tool'', ''{}'', CAST(''local'' AS BLOB))') = 'idem_claim: effect must be ''local'' or ''external'', got BLOB';
SELECT 'effect-blob-nothing-written', (SELECT count(*) FROM G_rows WHERE tenant = 'eb') = 0;
SELECT 'effect-code', errcode('SELECT idem_claim(''G'', ''t'', ''c'', ''tool'', ''{}'', ''Local'')') = 19;
-- size cap of the ledger (default 1 MiB)
SELECT 'args-over-cap', errmsg('SELECT idem_claim(''G'', ''t'', ''c'', ''tool'', ''"'' || printf(''%.1048575c'', ''a'') || ''"'')')
       = 'idem_claim: args is 1048577 bytes in canonical form, over the ledger''s max_args_bytes of 1048576';
SELECT 'args-over-cap-code', errcode('SELECT idem_claim(''G'', ''t'', ''c'', ''tool'', ''"'' || printf(''%.1048575c'', ''a'') || ''"'')') = 18;
-- arity
SELECT 'arity-4', errmsg('SELECT idem_claim(''G'', ''t'', ''c'', ''tool'')') = 'wrong number of arguments to function idem_claim()';
SELECT 'arity-9', errmsg('SELECT idem_claim(''G'', ''t'', ''c'', ''tool'', ''{}'', ''local'', ''op'', NULL, 1)') = 'wrong number of arguments to function idem_claim()';
-- unknown ledger: missing, a plain table, a view, a shadow table, a non-text name
CREATE TABLE plain(x);
CREATE VIEW plainv AS SELECT 1 AS x;
SELECT 'ledger-missing', errmsg('SELECT idem_claim(''nope'', ''t'', ''c'', ''tool'', ''{}'')') = 'idem_claim: unknown ledger "nope": no table USING idempotency by that name';
SELECT 'ledger-missing-code', errcode('SELECT idem_claim(''nope'', ''t'', ''c'', ''tool'', ''{}'')') = 1;
SELECT 'ledger-plain-table', errmsg('SELECT idem_claim(''plain'', ''t'', ''c'', ''tool'', ''{}'')') = 'idem_claim: unknown ledger "plain": no table USING idempotency by that name';
SELECT 'ledger-view', errmsg('SELECT idem_claim(''plainv'', ''t'', ''c'', ''tool'', ''{}'')') = 'idem_claim: unknown ledger "plainv": no table USING idempotency by that name';
SELECT 'ledger-shadow', errmsg('SELECT idem_claim(''G_rows'', ''t'', ''c'', ''tool'', ''{}'')') = 'idem_claim: unknown ledger "G_rows": no table USING idempotency by that name';
SELECT 'ledger-json-each', errmsg('SELECT idem_claim(''json_each'', ''t'', ''c'', ''tool'', ''{}'')') = 'idem_claim: unknown ledger "json_each": no table USING idempotency by that name';
SELECT 'ledger-qualified-name-elsewhere', errmsg('SELECT idem_claim(''temp.G'', ''t'', ''c'', ''tool'', ''{}'')') = 'idem_claim: unknown ledger "temp.G": no table USING idempotency by that name';
SELECT 'ledger-null', errcode('SELECT idem_claim(NULL, ''t'', ''c'', ''tool'', ''{}'')') = 1;
SELECT 'ledger-integer', errcode('SELECT idem_claim(1, ''t'', ''c'', ''tool'', ''{}'')') = 1;
SELECT 'ledger-case-insensitive', json_extract(idem_claim('g', 'ci', 'c', 'tool', '{}'), '$.decision') = 'admitted';
SELECT 'nothing-written-by-errors', (SELECT count(*) FROM G_rows WHERE tenant NOT IN ('nullop', 'eb')) = 1 AND (SELECT count(*) FROM G_rows WHERE tenant NOT IN ('ci', 'nullop', 'eb')) = 0;
SELECT 'plain-untouched', (SELECT count(*) FROM plain) = 0;
SELECT sqltest_clock(NULL);
