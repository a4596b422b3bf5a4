-- The SQL-native surface of a ledger: INSERT (a claim), idem_last_claim,
-- OR IGNORE / OR REPLACE, columns that cannot be set, UPDATE refused,
-- DELETE of terminal rows only.

SELECT sqltest_clock(1700000000000);
CREATE VIRTUAL TABLE L USING idempotency;

-- ---------------------------------------------------------------- an admitted INSERT
SELECT 'last-claim-initially-null', idem_last_claim('L') IS NULL;
INSERT INTO L(tenant, conversation, tool, args) VALUES ('t', 'c', 'migrate', '{"step":3}');
SELECT 'insert-changes', changes() = 1;
SELECT 'insert-row', (SELECT count(*) FROM L_rows) = 1;
SELECT 'insert-key-derived', (SELECT "key" FROM L_rows) = idem_key('t', 'c', 'migrate', '{"step":3}');
SELECT 'insert-effect-default-external', (SELECT effect FROM L_rows) = 'external';
SELECT 'insert-status-claimed', (SELECT status = 'claimed' AND attempt = 1 AND lease_until = 1700000300000 FROM L_rows);
SELECT 'last-claim-key', json_extract(idem_last_claim('L'), '$.key') = idem_key('t', 'c', 'migrate', '{"step":3}');
SELECT 'last-claim-tenant', json_extract(idem_last_claim('L'), '$.tenant') = 't';
SELECT 'last-claim-token', json_extract(idem_last_claim('L'), '$.token') = (SELECT token FROM L);
SELECT 'last-claim-token-hex', length(json_extract(idem_last_claim('L'), '$.token')) = 32 AND json_extract(idem_last_claim('L'), '$.token') NOT GLOB '*[^0-9a-f]*';
SELECT 'last-claim-attempt', json_type(idem_last_claim('L'), '$.attempt') = 'integer' AND json_extract(idem_last_claim('L'), '$.attempt') = 1;
SELECT 'last-claim-effect', json_extract(idem_last_claim('L'), '$.effect') = 'external';
SELECT 'last-claim-committed', json_type(idem_last_claim('L'), '$.committed') = 'true';
SELECT 'last-claim-keyset', (SELECT group_concat(key, ',') FROM (SELECT key FROM json_each(idem_last_claim('L')) ORDER BY key)) = 'attempt,claims,committed,effect,key,tenant,token';
SELECT 'last-claim-stable', idem_last_claim('L') = idem_last_claim('L');
SELECT 'last-claim-unknown-ledger', errmsg('SELECT idem_last_claim(''nope'')') = 'idem_last_claim: unknown ledger "nope": no table USING idempotency by that name';
-- the claim settles like any other
SELECT 'insert-settle', json_extract(idem_settle('L', json_extract(idem_last_claim('L'), '$.token'), 'succeeded', '{"done":1}'), '$.status') = 'succeeded';
SELECT 'insert-then-claim-replays', json_extract(idem_claim('L', 't', 'c', 'migrate', '{"step":3}'), '$.decision') = 'replay';

-- ---------------------------------------------------------------- a taken key
SELECT 'taken-succeeded', errmsg('INSERT INTO L(tenant, conversation, tool, args) VALUES (''t'', ''c'', ''migrate'', ''{"step":3}'')')
       = 'idempotency: key "' || idem_key('t', 'c', 'migrate', '{"step":3}') || '" of tenant "t" in ledger L is taken: it succeeded at attempt 1';
SELECT 'taken-code', errcode('INSERT INTO L(tenant, conversation, tool, args) VALUES (''t'', ''c'', ''migrate'', ''{"step":3}'')') & 255 = 19;
SELECT 'taken-clears-last-claim', idem_last_claim('L') IS NULL;
INSERT INTO L(tenant, conversation, tool, args, effect, key) VALUES ('t', 'c', 'migrate', '{"step":4}', 'local', 'op-7');
SELECT 'op-key-column', (SELECT count(*) FROM L_rows WHERE "key" = 'op-7' AND effect = 'local' AND args = '{"step":4}') = 1;
SELECT 'op-last-claim', json_extract(idem_last_claim('L'), '$.key') = 'op-7' AND json_extract(idem_last_claim('L'), '$.effect') = 'local';
SELECT 'taken-claimed', errmsg('INSERT INTO L(tenant, conversation, tool, args, effect, key) VALUES (''t'', ''c'', ''migrate'', ''{"step":4}'', ''local'', ''op-7'')')
       = 'idempotency: key "op-7" of tenant "t" in ledger L is taken: it is claimed (attempt 1) until 1700000300000';
SELECT 'taken-mismatch', errmsg('INSERT INTO L(tenant, conversation, tool, args, effect, key) VALUES (''t'', ''c'', ''migrate'', ''{"step":5}'', ''local'', ''op-7'')')
       = 'idempotency: key "op-7" of tenant "t" in ledger L is taken: it is bound to another request (the args differs)';
SELECT 'taken-mismatch-no-args-echo', instr(errmsg('INSERT INTO L(tenant, conversation, tool, args, effect, key) VALUES (''t'', ''c'', ''migrate'', ''{"step":5}'', ''local'', ''op-7'')'), 'step') = 0;
SELECT 'taken-no-token-echo', instr(errmsg('INSERT INTO L(tenant, conversation, tool, args, effect, key) VALUES (''t'', ''c'', ''migrate'', ''{"step":4}'', ''local'', ''op-7'')'), (SELECT token FROM L WHERE "key" = 'op-7')) = 0;
SELECT 'taken-failed-msg', CASE WHEN json_extract(idem_settle('L', (SELECT token FROM L WHERE "key" = 'op-7'), 'failed', NULL), '$.status') = 'failed'
       THEN errmsg('INSERT INTO L(tenant, conversation, tool, args, effect, key) VALUES (''t'', ''c'', ''migrate'', ''{"step":4}'', ''local'', ''op-7'')')
       = 'idempotency: key "op-7" of tenant "t" in ledger L is taken: it failed at attempt 1' ELSE 0 END;
SELECT 'taken-message-says-taken', errmsg('INSERT INTO L(tenant, conversation, tool, args, effect, key) VALUES (''t'', ''c'', ''migrate'', ''{"step":4}'', ''local'', ''op-7'')') LIKE '%is taken%';
INSERT INTO L(tenant, conversation, tool, args, key) VALUES ('t', 'c', 'send', '{}', 'op-unk');
SELECT 'op-unk-settle', json_extract(idem_settle('L', (SELECT token FROM L WHERE "key" = 'op-unk'), 'unknown', NULL), '$.status') = 'unknown';
SELECT 'taken-unknown', errmsg('INSERT INTO L(tenant, conversation, tool, args, key) VALUES (''t'', ''c'', ''send'', ''{}'', ''op-unk'')')
       = 'idempotency: key "op-unk" of tenant "t" in ledger L is taken: its outcome is unknown: that request may have reached the target system, the outcome is theirs to report, and nothing is retried here';
SELECT 'taken-wrote-nothing', (SELECT count(*) FROM L_rows) = 3;

-- ---------------------------------------------------------------- OR IGNORE, OR REPLACE and other conflict clauses
INSERT INTO L(tenant, conversation, tool, args, key) VALUES ('t', 'c', 'x', '{}', 'op-ign');
SELECT 'ignore-setup-last-claim', idem_last_claim('L') IS NOT NULL;
INSERT OR IGNORE INTO L(tenant, conversation, tool, args, key) VALUES ('t', 'c', 'x', '{}', 'op-ign');
SELECT 'ignore-changes-0', changes() = 0;
SELECT 'ignore-last-claim-null', idem_last_claim('L') IS NULL;
SELECT 'ignore-one-row', (SELECT count(*) FROM L_rows WHERE "key" = 'op-ign') = 1 AND (SELECT attempt FROM L_rows WHERE "key" = 'op-ign') = 1;
INSERT OR IGNORE INTO L(tenant, conversation, tool, args, key) VALUES ('t', 'c', 'x', '{}', 'op-ign2');
SELECT 'ignore-admits-new', changes() = 1 AND json_extract(idem_last_claim('L'), '$.key') = 'op-ign2';
-- a malformed key under OR IGNORE: SQLite's OR IGNORE skips constraint
-- errors (as it skips a CHECK failure); whatever happens, nothing is written
SELECT 'ignore-bad-tenant-writes-nothing', (errmsg('INSERT OR IGNORE INTO L(tenant, conversation, tool, args) VALUES (NULL, ''c'', ''x'', ''{"ig":1}'')') IS NULL
         OR errmsg('INSERT OR IGNORE INTO L(tenant, conversation, tool, args) VALUES (NULL, ''c'', ''x'', ''{"ig":1}'')') = 'idempotency: tenant is missing (NULL)')
       AND (SELECT count(*) FROM L_rows WHERE args = '{"ig":1}') = 0;
SELECT 'ignore-bad-args-is-an-error', errmsg('INSERT OR IGNORE INTO L(tenant, conversation, tool, args) VALUES (''t'', ''c'', ''x'', ''{bad'')') GLOB 'idempotency: args: not valid JSON: *';
SELECT 'replace-refused', errmsg('INSERT OR REPLACE INTO L(tenant, conversation, tool, args, key) VALUES (''t'', ''c'', ''x'', ''{}'', ''op-ign'')')
       = 'idempotency: INSERT OR REPLACE into ledger L is refused: it would erase the recorded request';
SELECT 'replace-refused-new-key', errmsg('REPLACE INTO L(tenant, conversation, tool, args, key) VALUES (''t'', ''c'', ''x'', ''{}'', ''op-rep'')')
       = 'idempotency: INSERT OR REPLACE into ledger L is refused: it would erase the recorded request';
SELECT 'replace-code', errcode('INSERT OR REPLACE INTO L(tenant, conversation, tool, args, key) VALUES (''t'', ''c'', ''x'', ''{}'', ''op-ign'')') & 255 = 19;
SELECT 'replace-wrote-nothing', (SELECT count(*) FROM L_rows WHERE "key" = 'op-rep') = 0 AND (SELECT attempt FROM L_rows WHERE "key" = 'op-ign') = 1;
SELECT 'or-abort-taken', errmsg('INSERT OR ABORT INTO L(tenant, conversation, tool, args, key) VALUES (''t'', ''c'', ''x'', ''{}'', ''op-ign'')') LIKE 'idempotency: key "op-ign" of tenant "t" in ledger L is taken: %';
SELECT 'or-fail-taken', errcode('INSERT OR FAIL INTO L(tenant, conversation, tool, args, key) VALUES (''t'', ''c'', ''x'', ''{}'', ''op-ign'')') & 255 = 19;

-- ---------------------------------------------------------------- columns that cannot be set
SELECT 'set-status', errmsg('INSERT INTO L(tenant, conversation, tool, args, status) VALUES (''t'', ''c'', ''x'', ''{"s":1}'', ''succeeded'')')
       = 'idempotency: INSERT into ledger L cannot set status; a claim starts claimed and its outcome is recorded by idem_settle';
SELECT 'set-status-claimed', errmsg('INSERT INTO L(tenant, conversation, tool, args, status) VALUES (''t'', ''c'', ''x'', ''{"s":1}'', ''claimed'')')
       = 'idempotency: INSERT into ledger L cannot set status; a claim starts claimed and its outcome is recorded by idem_settle';
SELECT 'set-result', errmsg('INSERT INTO L(tenant, conversation, tool, args, result) VALUES (''t'', ''c'', ''x'', ''{"s":1}'', ''{}'')')
       = 'idempotency: INSERT into ledger L cannot set result; a claim starts claimed and its outcome is recorded by idem_settle';
SELECT 'set-error', errmsg('INSERT INTO L(tenant, conversation, tool, args, error) VALUES (''t'', ''c'', ''x'', ''{"s":1}'', ''{}'')')
       = 'idempotency: INSERT into ledger L cannot set error; a claim starts claimed and its outcome is recorded by idem_settle';
SELECT 'set-attempt', errmsg('INSERT INTO L(tenant, conversation, tool, args, attempt) VALUES (''t'', ''c'', ''x'', ''{"s":1}'', 1)')
       = 'idempotency: INSERT into ledger L cannot set attempt; a claim starts claimed and its outcome is recorded by idem_settle';
SELECT 'set-token', errmsg('INSERT INTO L(tenant, conversation, tool, args, token) VALUES (''t'', ''c'', ''x'', ''{"s":1}'', ''0123456789abcdef0123456789abcdef'')')
       = 'idempotency: INSERT into ledger L cannot set token; a claim starts claimed and its outcome is recorded by idem_settle';
SELECT 'set-created-at', errmsg('INSERT INTO L(tenant, conversation, tool, args, created_at) VALUES (''t'', ''c'', ''x'', ''{"s":1}'', 0)')
       = 'idempotency: INSERT into ledger L cannot set created_at; a claim starts claimed and its outcome is recorded by idem_settle';
SELECT 'set-updated-at', errmsg('INSERT INTO L(tenant, conversation, tool, args, updated_at) VALUES (''t'', ''c'', ''x'', ''{"s":1}'', 0)')
       = 'idempotency: INSERT into ledger L cannot set updated_at; a claim starts claimed and its outcome is recorded by idem_settle';
SELECT 'set-lease-until', errmsg('INSERT INTO L(tenant, conversation, tool, args, lease_until) VALUES (''t'', ''c'', ''x'', ''{"s":1}'', 9999999999999)')
       = 'idempotency: INSERT into ledger L cannot set lease_until; a claim starts claimed and its outcome is recorded by idem_settle';
SELECT 'set-members', errmsg('INSERT INTO L(tenant, conversation, tool, args, members) VALUES (''t'', ''c'', ''x'', ''{"s":1}'', ''[]'')')
       = 'idempotency: INSERT into ledger L cannot set members; a claim starts claimed and its outcome is recorded by idem_settle';
SELECT 'set-empty-string-status', errcode('INSERT INTO L(tenant, conversation, tool, args, status) VALUES (''t'', ''c'', ''x'', ''{"s":1}'', '''')') & 255 = 19;
SELECT 'set-code', errcode('INSERT INTO L(tenant, conversation, tool, args, token) VALUES (''t'', ''c'', ''x'', ''{"s":1}'', ''x'')') & 255 = 19;
SELECT 'set-rowid', errmsg('INSERT INTO L(rowid, tenant, conversation, tool, args) VALUES (99, ''t'', ''c'', ''x'', ''{"s":1}'')')
       = 'idempotency: INSERT into ledger L cannot set the rowid';
SELECT 'set-oid', errmsg('INSERT INTO L(oid, tenant, conversation, tool, args) VALUES (99, ''t'', ''c'', ''x'', ''{"s":1}'')')
       = 'idempotency: INSERT into ledger L cannot set the rowid';
SELECT 'set-ignore-writes-nothing', errcode('INSERT OR IGNORE INTO L(tenant, conversation, tool, args, status) VALUES (''t'', ''c'', ''x'', ''{"s":1}'', ''succeeded'')') IN (0, 19)
       AND (SELECT count(*) FROM L_rows WHERE args = '{"s":1}') = 0 AND idem_last_claim('L') IS NULL;
SELECT 'set-wrote-nothing', (SELECT count(*) FROM L_rows WHERE args = '{"s":1}') = 0;
-- all columns by position (full VALUES list with outcome columns NULL) is a plain claim
INSERT INTO L VALUES ('t', 'op-pos', 'c', 'x', '{"pos":1}', 'local', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
SELECT 'positional-insert', (SELECT count(*) FROM L_rows WHERE "key" = 'op-pos' AND effect = 'local') = 1;

-- ---------------------------------------------------------------- input errors on INSERT: exact, nothing written
SELECT 'ins-tenant-null', errmsg('INSERT INTO L(tenant, conversation, tool, args) VALUES (NULL, ''c'', ''x'', ''{"e":1}'')') = 'idempotency: tenant is missing (NULL)';
SELECT 'ins-tenant-null-code', errcode('INSERT INTO L(tenant, conversation, tool, args) VALUES (NULL, ''c'', ''x'', ''{"e":1}'')') & 255 = 19;
SELECT 'ins-tenant-integer', errmsg('INSERT INTO L(tenant, conversation, tool, args) VALUES (5, ''c'', ''x'', ''{"e":1}'')') = 'idempotency: tenant must be TEXT, got INTEGER';
SELECT 'ins-conv-empty', errmsg('INSERT INTO L(tenant, conversation, tool, args) VALUES (''t'', '''', ''x'', ''{"e":1}'')') = 'idempotency: conversation is empty';
SELECT 'ins-tool-missing', errmsg('INSERT INTO L(tenant, conversation, args) VALUES (''t'', ''c'', ''{"e":1}'')') = 'idempotency: tool is missing (NULL)';
SELECT 'ins-tool-bad', errmsg('INSERT INTO L(tenant, conversation, tool, args) VALUES (''t'', ''c'', ''x y'', ''{"e":1}'')') = 'idempotency: tool "x y" has byte 0x20 at offset 1; only A-Z a-z 0-9 _ - are allowed';
SELECT 'ins-args-missing', errmsg('INSERT INTO L(tenant, conversation, tool) VALUES (''t'', ''c'', ''x'')') = 'idempotency: args is NULL; a missing argument list is not {}';
SELECT 'ins-args-bad', errmsg('INSERT INTO L(tenant, conversation, tool, args) VALUES (''t'', ''c'', ''x'', ''{"e":1,"e":2}'')') = 'idempotency: args: duplicate member name "e" in the object at byte 0';
SELECT 'ins-effect-bad', errmsg('INSERT INTO L(tenant, conversation, tool, args, effect) VALUES (''t'', ''c'', ''x'', ''{"e":1}'', ''remote'')') = 'idempotency: effect must be ''local'' or ''external'', got "remote"';
SELECT 'ins-key-bad', errmsg('INSERT INTO L(tenant, conversation, tool, args, key) VALUES (''t'', ''c'', ''x'', ''{"e":1}'', ''a b'')') = 'idempotency: operation_id "a b" has byte 0x20 at offset 1; only A-Z a-z 0-9 _ - are allowed';
SELECT 'ins-key-empty', errmsg('INSERT INTO L(tenant, conversation, tool, args, key) VALUES (''t'', ''c'', ''x'', ''{"e":1}'', '''')') = 'idempotency: operation_id is empty';
SELECT 'ins-key-integer', errmsg('INSERT INTO L(tenant, conversation, tool, args, key) VALUES (''t'', ''c'', ''x'', ''{"e":1}'', 7)') = 'idempotency: operation_id must be TEXT, got INTEGER';
SELECT 'ins-key-derived', errmsg('INSERT INTO L(tenant, conversation, tool, args, key) VALUES (''t'', ''c'', ''x'', ''{"e":1}'', ''idem1-abc'')')
       = 'idempotency: operation_id "idem1-abc" looks like a derived key (idem<digit>-...); omit it to derive the key';
SELECT 'ins-errors-wrote-nothing', (SELECT count(*) FROM L_rows WHERE args = '{"e":1}') = 0;
SELECT 'ins-errors-clear-last-claim', idem_last_claim('L') IS NULL;
-- NULL effect is the default (external); 'local' is kept
INSERT INTO L(tenant, conversation, tool, args, effect, key) VALUES ('t', 'c', 'x', '{}', NULL, 'op-nulleff');
SELECT 'null-effect-external', (SELECT effect FROM L_rows WHERE "key" = 'op-nulleff') = 'external' AND json_extract(idem_last_claim('L'), '$.effect') = 'external';

-- ---------------------------------------------------------------- transactions and multi-row INSERT
BEGIN;
INSERT INTO L(tenant, conversation, tool, args, key) VALUES ('tx', 'c', 'x', '{}', 'op-tx');
SELECT 'tx-last-claim-uncommitted', json_type(idem_last_claim('L'), '$.committed') = 'false';
ROLLBACK;
SELECT 'tx-rolled-back', (SELECT count(*) FROM L_rows WHERE tenant = 'tx') = 0;
INSERT INTO L(tenant, conversation, tool, args) VALUES ('m', 'c', 'x', '{"n":1}'), ('m', 'c', 'x', '{"n":2}'), ('m', 'c', 'x', '{"n":3}');
SELECT 'multi-row', changes() = 3 AND (SELECT count(*) FROM L_rows WHERE tenant = 'm') = 3;
SELECT 'multi-row-distinct-tokens', (SELECT count(DISTINCT token) FROM L_rows WHERE tenant = 'm') = 3;
-- a taken key in the middle fails the whole statement
SELECT 'multi-row-taken', errmsg('INSERT INTO L(tenant, conversation, tool, args) VALUES (''m'', ''c'', ''x'', ''{"n":4}''), (''m'', ''c'', ''x'', ''{"n":1}''), (''m'', ''c'', ''x'', ''{"n":5}'')')
       LIKE 'idempotency: key "idem1-%" of tenant "m" in ledger L is taken: it is claimed (attempt 1) until %';
SELECT 'multi-row-taken-atomic', (SELECT count(*) FROM L_rows WHERE tenant = 'm') = 3;
INSERT OR IGNORE INTO L(tenant, conversation, tool, args) VALUES ('m', 'c', 'x', '{"n":4}'), ('m', 'c', 'x', '{"n":1}'), ('m', 'c', 'x', '{"n":5}');
SELECT 'multi-row-ignore', changes() = 2 AND (SELECT count(*) FROM L_rows WHERE tenant = 'm') = 5;
-- INSERT ... SELECT from a table (a migration)
CREATE TABLE src(tenant, step);
INSERT INTO src VALUES ('mig', 1), ('mig', 2);
INSERT INTO L(tenant, conversation, tool, args) SELECT tenant, 'c', 'migrate', json_object('step', step) FROM src;
SELECT 'insert-select', changes() = 2 AND (SELECT count(*) FROM L_rows WHERE tenant = 'mig') = 2;
-- RETURNING only echoes the inputs
SELECT 'returning-echo', errmsg('INSERT INTO L(tenant, conversation, tool, args, key) VALUES (''r'', ''c'', ''x'', ''{}'', ''op-ret'') RETURNING status, token') IS NULL
       AND (SELECT count(*) FROM L_rows WHERE "key" = 'op-ret') = 1;

-- ---------------------------------------------------------------- UPDATE refused
SELECT 'update-status', errmsg('UPDATE L SET status = ''succeeded'' WHERE key = ''op-pos''')
       = 'idempotency: UPDATE of ledger L is refused; record outcomes with idem_settle or idem_resolve';
SELECT 'update-code', errcode('UPDATE L SET status = ''succeeded'' WHERE key = ''op-pos''') & 255 = 19;
SELECT 'update-args', errmsg('UPDATE L SET args = ''{}'' WHERE key = ''op-pos''')
       = 'idempotency: UPDATE of ledger L is refused; record outcomes with idem_settle or idem_resolve';
SELECT 'update-terminal', errmsg('UPDATE L SET result = ''{}'' WHERE key = ''op-7''')
       = 'idempotency: UPDATE of ledger L is refused; record outcomes with idem_settle or idem_resolve';
SELECT 'update-same-value', errcode('UPDATE L SET tenant = tenant WHERE key = ''op-7''') & 255 = 19;
SELECT 'update-changed-nothing', (SELECT status FROM L_rows WHERE "key" = 'op-pos') = 'claimed' AND (SELECT result IS NULL FROM L_rows WHERE "key" = 'op-7');

-- ---------------------------------------------------------------- DELETE: terminal rows only
SELECT 'delete-claimed', errmsg('DELETE FROM L WHERE key = ''op-pos''')
       = 'idempotency: cannot delete a claimed or unknown row of ledger L; only succeeded, failed or released rows are deleted';
SELECT 'delete-claimed-code', errcode('DELETE FROM L WHERE key = ''op-pos''') & 255 = 19;
SELECT 'delete-unknown', errmsg('DELETE FROM L WHERE key = ''op-unk''')
       = 'idempotency: cannot delete a claimed or unknown row of ledger L; only succeeded, failed or released rows are deleted';
SELECT 'delete-kept', (SELECT count(*) FROM L_rows WHERE "key" IN ('op-pos', 'op-unk')) = 2;
SELECT 'delete-failed', errmsg('DELETE FROM L WHERE key = ''op-7''') IS NULL AND (SELECT count(*) FROM L_rows WHERE "key" = 'op-7') = 0;
SELECT 'delete-succeeded', errmsg('DELETE FROM L WHERE tenant = ''t'' AND key = ''' || idem_key('t', 'c', 'migrate', '{"step":3}') || '''') IS NULL;
SELECT 'delete-succeeded-gone', (SELECT count(*) FROM L_rows WHERE "key" = idem_key('t', 'c', 'migrate', '{"step":3}')) = 0;
SELECT 'release-op-ign', json_extract(idem_settle('L', (SELECT token FROM L WHERE "key" = 'op-ign'), 'released', '{"sent":false}'), '$.status') = 'released';
DELETE FROM L WHERE key = 'op-ign';
SELECT 'delete-released', changes() = 1 AND (SELECT count(*) FROM L_rows WHERE "key" = 'op-ign') = 0;
-- after DELETE the key is new again
SELECT 'deleted-key-admitted', json_extract(idem_claim('L', 't', 'c', 'migrate', '{"step":4}', 'local', 'op-7'), '$.attempt') = 1;
-- an expired external claim (unknown) cannot be deleted
SELECT sqltest_clock(1700001000000);
SELECT 'delete-expired-external', errcode('DELETE FROM L WHERE key = ''op-ign2''') & 255 = 19 AND (SELECT count(*) FROM L_rows WHERE "key" = 'op-ign2') = 1;
-- a DELETE that reaches a claimed row fails as a whole
SELECT 'settle-m', (SELECT count(*) FROM L WHERE tenant = 'm' AND args IN ('{"n":1}', '{"n":2}') AND json_extract(idem_settle('L', token, 'failed', NULL), '$.status') = 'failed') = 2;
SELECT 'delete-mixed-refused', errcode('DELETE FROM L WHERE tenant = ''m''') & 255 = 19;
SELECT 'delete-mixed-atomic', (SELECT count(*) FROM L_rows WHERE tenant = 'm') = 5;
SELECT 'delete-terminal-only-where', errmsg('DELETE FROM L WHERE tenant = ''m'' AND status = ''failed''') IS NULL AND (SELECT count(*) FROM L_rows WHERE tenant = 'm') = 3;
SELECT 'delete-nothing-matches', errmsg('DELETE FROM L WHERE key = ''no-such''') IS NULL;
SELECT 'integrity', (SELECT integrity_check FROM pragma_integrity_check) = 'ok';
SELECT sqltest_clock(NULL);
