-- sqltest: file
-- Targets (docs/ledger.md, "Targets"): a claim names what its write
-- touches; before a new key (or a released one) is admitted, a target held
-- by another call of the tenant (claimed live or expired, unknown, or
-- succeeded within the target window) makes the decision conflict and
-- nothing is written. The key's own decision comes first. allowed_by lets
-- the application admit a deliberate second write, recorded with the
-- target. Bad options are refused naming the value and the rule.

SELECT sqltest_clock(1700000000000);
CREATE VIRTUAL TABLE L USING idempotency(lease_seconds=60, target_window_seconds=3600);
CREATE TEMP VIEW tg AS SELECT (SELECT "key" FROM L_rows WHERE id = claim) AS k, target, tenant, allowed_by, allowed_at, overrode FROM L_targets;

-- ---------------------------------------------------------------- a claim names its targets
SELECT 'first-admitted', json_extract(idem_claim('L', 't', 'c', 'send_email', '{"to":"bob","body":"Invoice 42 attached"}', 'external', 'e1',
       '{"targets":["mailto:bob@example.com/invoice-42"]}'), '$.decision') = 'admitted';
SELECT 'recorded', (SELECT group_concat(k || '|' || target || '|' || tenant || '|' || quote(allowed_by), ',') FROM tg)
       = 'e1|mailto:bob@example.com/invoice-42|t|NULL';

-- ---------------------------------------------------------------- held while claimed: the reworded retry is a conflict, written in full
SELECT sqltest_clock(1700000001000);
SELECT 'conflict-claimed', idem_claim('L', 't', 'c', 'send_email', '{"to":"bob","body":"Here is invoice 42"}', 'external', 'e2',
       '{"targets":["mailto:bob@example.com/invoice-42"]}')
       = '{"decision":"conflict","key":"e2","target":"mailto:bob@example.com/invoice-42","held_by":{"key":"e1","tool":"send_email","status":"claimed","attempt":1,"updated_at":1700000000000},"differs":["body"],"message":"another call of this tenant already touched this target (held_by says which and what became of it); this call was not run"}';
SELECT 'conflict-nothing-written', (SELECT count(*) FROM L_rows) = 1 AND (SELECT count(*) FROM L_targets) = 1;
-- a derived key too (the eight-argument form takes NULL for the operation id)
SELECT 'conflict-derived-key', json_extract(idem_claim('L', 't', 'c', 'send_email', '{"to":"bob","body":"Invoice #42"}', 'external', NULL,
       '{"targets":["mailto:bob@example.com/invoice-42"]}'), '$.decision', '$.key')
       = json_array('conflict', idem_key('t', 'c', 'send_email', '{"to":"bob","body":"Invoice #42"}'));
-- the second target of several is found; differs names members only in one of the two
SELECT 'conflict-second-target', json_extract(idem_claim('L', 't', 'c', 'send_email', '{"to":"bob","cc":"ann"}', 'external', 'e3',
       '{"targets":["mailto:ann@example.com/invoice-42","mailto:bob@example.com/invoice-42"]}'), '$.target', '$.differs')
       = '["mailto:bob@example.com/invoice-42",["body","cc"]]';
-- another tenant holds nothing of t's
SELECT 'other-tenant', json_extract(idem_claim('L', 'u', 'c', 'send_email', '{"to":"bob","body":"x"}', 'external', 'u1',
       '{"targets":["mailto:bob@example.com/invoice-42"]}'), '$.decision') = 'admitted';
-- a different target is free; a claim without options as before
SELECT 'other-target', json_extract(idem_claim('L', 't', 'c', 'send_email', '{"to":"cy"}', 'external', 'c1',
       '{"targets":["mailto:cy@example.com/invoice-42"]}'), '$.decision') = 'admitted';
SELECT 'no-options', json_extract(idem_claim('L', 't', 'c', 'send_email', '{"to":"bob","body":"no targets"}', 'external', 'n1'), '$.decision') = 'admitted';
SELECT 'null-options', json_extract(idem_claim('L', 't', 'c', 'send_email', '{"to":"bob","body":"null"}', NULL, 'n2', NULL), '$.decision', '$.effect') = '["admitted","external"]';

-- ---------------------------------------------------------------- the key's own decision comes first
SELECT 'key-in-progress', json_extract(idem_claim('L', 't', 'c', 'send_email', '{"to":"bob","body":"Invoice 42 attached"}', 'external', 'e1',
       '{"targets":["mailto:bob@example.com/invoice-42"]}'), '$.decision') = 'in_progress';
SELECT 'key-mismatch', json_extract(idem_claim('L', 't', 'c', 'send_email', '{"to":"bob","body":"other"}', 'external', 'e1',
       '{"targets":["mailto:bob@example.com/invoice-42"]}'), '$.decision') = 'mismatch';

-- ---------------------------------------------------------------- held while its lease has passed (unknown for an external claim, expired for a local one)
SELECT sqltest_clock(1700000061000);
SELECT 'expired-external-unknown', json_extract(idem_claim('L', 't', 'c', 'send_email', '{"to":"bob","body":"later"}', 'external', 'e4',
       '{"targets":["mailto:bob@example.com/invoice-42"]}'), '$.decision', '$.held_by.status') = '["conflict","unknown"]';
SELECT 'key-unknown', json_extract(idem_claim('L', 't', 'c', 'send_email', '{"to":"bob","body":"Invoice 42 attached"}', 'external', 'e1',
       '{"targets":["mailto:bob@example.com/invoice-42"]}'), '$.decision') = 'unknown';
SELECT 'local-claim', json_extract(idem_claim('L', 't', 'c', 'add_row', '{"n":1}', 'local', 'l1', '{"targets":["row:1"]}'), '$.decision') = 'admitted';
SELECT sqltest_clock(1700000200000);
SELECT 'expired-local-held', json_extract(idem_claim('L', 't', 'c', 'add_row', '{"n":1,"why":"again"}', 'local', 'l2', '{"targets":["row:1"]}'), '$.decision', '$.held_by.status')
       = '["conflict","claimed"]';
-- the same key takes its expired local claim over, keeping its target
SELECT 'takeover', json_extract(idem_claim('L', 't', 'c', 'add_row', '{"n":1}', 'local', 'l1', '{"targets":["row:1"]}'), '$.decision', '$.attempt') = '["admitted",2]';
SELECT 'takeover-targets', (SELECT group_concat(target) FROM tg WHERE k = 'l1') = 'row:1';

-- ---------------------------------------------------------------- unknown holds whatever its age; resolved succeeded, it holds for the window
SELECT sqltest_clock(1800000000000);
SELECT 'unknown-any-age', json_extract(idem_claim('L', 't', 'c', 'send_email', '{"to":"bob","body":"a year on"}', 'external', 'e5',
       '{"targets":["mailto:bob@example.com/invoice-42"]}'), '$.decision') = 'conflict';
SELECT 'resolved', json_extract(idem_resolve('L', 't', 'e1', 'succeeded', '{"message_id":"m-1"}'), '$.settled_at') = 1800000000000;
SELECT 'succeeded-held', idem_claim('L', 't', 'c', 'send_email', '{"to":"bob","body":"a year on"}', 'external', 'e5',
       '{"targets":["mailto:bob@example.com/invoice-42"]}')
       = '{"decision":"conflict","key":"e5","target":"mailto:bob@example.com/invoice-42","held_by":{"key":"e1","tool":"send_email","status":"succeeded","attempt":1,"updated_at":1800000000000,"result":{"message_id":"m-1"}},"differs":["body"],"message":"another call of this tenant already touched this target (held_by says which and what became of it); this call was not run"}';
-- the window's edge: held until target_window_seconds have passed since the settle
SELECT sqltest_clock(1800000000000 + 3600000 - 1);
SELECT 'window-last-ms', json_extract(idem_claim('L', 't', 'c', 'send_email', '{"to":"bob","body":"edge"}', 'external', 'e6',
       '{"targets":["mailto:bob@example.com/invoice-42"]}'), '$.decision') = 'conflict';
-- a claim may name a shorter window, never a longer one
SELECT 'window-shorter', json_extract(idem_claim('L', 't', 'c', 'send_email', '{"to":"bob","body":"edge"}', 'external', 'e6',
       '{"targets":["mailto:bob@example.com/invoice-42"],"target_window_seconds":600}'), '$.decision') = 'admitted';
SELECT 'window-shorter-settle', json_extract(idem_settle('L', (SELECT token FROM L WHERE key = 'e6'), 'succeeded', '{"message_id":"m-6"}'), '$.status') = 'succeeded';
SELECT sqltest_clock(1800000000000 + 3600000 - 1 + 3600000);
SELECT 'window-passed', json_extract(idem_claim('L', 't', 'c', 'send_email', '{"to":"bob","body":"next day"}', 'external', 'e7',
       '{"targets":["mailto:bob@example.com/invoice-42"]}'), '$.decision') = 'admitted';
-- failed and released hold nothing
SELECT 'e7-failed', json_extract(idem_settle('L', (SELECT token FROM L WHERE key = 'e7'), 'failed', '{"code":550}'), '$.status') = 'failed';
SELECT 'failed-holds-nothing', json_extract(idem_claim('L', 't', 'c', 'send_email', '{"to":"bob","body":"retry"}', 'external', 'e8',
       '{"targets":["mailto:bob@example.com/invoice-42"]}'), '$.decision') = 'admitted';
SELECT 'e8-released', json_extract(idem_settle('L', (SELECT token FROM L WHERE key = 'e8'), 'released', '{"sent":false}'), '$.status') = 'released';
SELECT 'released-holds-nothing', json_extract(idem_claim('L', 't', 'c', 'send_email', '{"to":"bob","body":"retry 2"}', 'external', 'e9',
       '{"targets":["mailto:bob@example.com/invoice-42"]}'), '$.decision') = 'admitted';
-- a released key claimed again is checked too, and stays released on a conflict
SELECT 'released-again-conflict', json_extract(idem_claim('L', 't', 'c', 'send_email', '{"to":"bob","body":"retry"}', 'external', 'e8',
       '{"targets":["mailto:bob@example.com/invoice-42"]}'), '$.decision', '$.held_by.key') = '["conflict","e9"]';
SELECT 'released-stays', (SELECT status FROM L WHERE key = 'e8') = 'released';
-- a new attempt's targets replace the earlier attempt's
SELECT 'released-again-other-target', json_extract(idem_claim('L', 't', 'c', 'send_email', '{"to":"bob","body":"retry"}', 'external', 'e8',
       '{"targets":["mailto:bob@example.com/invoice-43"]}'), '$.decision', '$.attempt') = '["admitted",2]';
SELECT 'replaced', (SELECT group_concat(target) FROM tg WHERE k = 'e8') = 'mailto:bob@example.com/invoice-43';

-- ---------------------------------------------------------------- a deliberate second write: allowed_by, recorded
SELECT 'allowed', json_extract(idem_claim('L', 't', 'c', 'send_email', '{"to":"bob","body":"a second copy, on request"}', 'external', 'e10',
       '{"targets":["mailto:bob@example.com/invoice-42","mailto:bob@example.com/receipt"],"allowed_by":"support:alice"}'), '$.decision') = 'admitted';
SELECT 'allowed-recorded', (SELECT group_concat(target || '|' || quote(allowed_by) || '|' || quote(allowed_at) || '|' || quote(overrode), ',') FROM (SELECT * FROM tg WHERE k = 'e10' ORDER BY target))
       = 'mailto:bob@example.com/invoice-42|''support:alice''|' || (1800000000000 + 3600000 - 1 + 3600000) || '|''e9'',mailto:bob@example.com/receipt|NULL|NULL|NULL';

-- ---------------------------------------------------------------- inside the caller's transaction
BEGIN IMMEDIATE;
SELECT 'txn-conflict', json_extract(idem_claim('L', 't', 'c', 'send_email', '{"to":"bob","body":"in a txn"}', 'external', 't1',
       '{"targets":["mailto:bob@example.com/invoice-42"]}'), '$.decision') = 'conflict';
SELECT 'txn-admitted', json_extract(idem_claim('L', 't', 'c', 'send_email', '{"to":"dee"}', 'external', 't2',
       '{"targets":["mailto:dee@example.com"]}'), '$.decision', '$.committed') = '["admitted",false]';
COMMIT;
SELECT 'txn-kept', (SELECT count(*) FROM tg WHERE k = 't2') = 1 AND (SELECT count(*) FROM L WHERE key = 't1') = 0;

-- ---------------------------------------------------------------- arguments that are not both objects list no names
SELECT 'arrays-held', json_extract(idem_claim('L', 't', 'c', 'post', '[1,2]', 'external', 'a1', '{"targets":["chan:x"]}'), '$.decision') = 'admitted';
SELECT 'arrays-differ-empty', json_extract(idem_claim('L', 't', 'c', 'post', '[1,3]', 'external', 'a2', '{"targets":["chan:x"]}'), '$.differs') = '[]';
SELECT 'object-vs-array', json_extract(idem_claim('L', 't', 'c', 'post', '{"a":1}', 'external', 'a3', '{"targets":["chan:x"]}'), '$.differs') = '[]';

-- ---------------------------------------------------------------- targets go with their rows
SELECT 'before-purge', (SELECT count(*) FROM tg WHERE k IN ('e1', 'e6', 'e7')) = 3;
SELECT sqltest_clock(1800000000000 + 3600000 - 1 + 3600000 + 1);
SELECT 'purge', idem_purge('L', 0) = 3;
SELECT 'purge-forgets-targets', (SELECT count(*) FROM L_targets WHERE claim NOT IN (SELECT id FROM L_rows)) = 0
       AND (SELECT count(*) FROM L_rows WHERE "key" IN ('e1', 'e6', 'e7')) = 0 AND (SELECT count(*) FROM tg WHERE k = 'e10') = 2;
SELECT 'delete-terminal', json_extract(idem_settle('L', (SELECT token FROM L WHERE key = 't2'), 'succeeded', '{}'), '$.status') = 'succeeded';
DELETE FROM L WHERE key = 't2';
SELECT 'delete-forgets-targets', (SELECT count(*) FROM L_targets WHERE claim NOT IN (SELECT id FROM L_rows)) = 0;

-- ---------------------------------------------------------------- one writer: plain SQL reads the targets, writes none
SELECT 'plain-read', (SELECT count(*) FROM L_targets) >= 1;
SELECT 'plain-insert', errmsg('INSERT INTO L_targets(claim, target, tenant) VALUES (1, ''x'', ''t'')')
       = 'idempotency: the targets of ledger L are written only by the extension (idem_claim); plain SQL may read them';
SELECT 'plain-update', errmsg('UPDATE L_targets SET target = ''y''')
       = 'idempotency: the targets of ledger L are written only by the extension (idem_claim); plain SQL may read them';
SELECT 'plain-delete', errmsg('DELETE FROM L_targets')
       = 'idempotency: the targets of ledger L are written only by the extension (idem_claim); plain SQL may read them';
CREATE TRIGGER sneaky BEFORE INSERT ON L_targets BEGIN SELECT RAISE(IGNORE); END;
SELECT 'foreign-trigger-refused', errmsg('SELECT idem_claim(''L'', ''t'', ''c'', ''x'', ''{}'', ''external'', ''f1'', ''{"targets":["z"]}'')')
       = 'idem_claim: ledger L has a foreign trigger "sneaky" on its shadow tables; every ledger operation is refused until it is dropped';
DROP TRIGGER sneaky;

-- ---------------------------------------------------------------- bad options: the value and the rule, nothing written
CREATE TEMP TABLE n AS SELECT count(*) AS r, (SELECT count(*) FROM L_targets) AS t FROM L_rows;
SELECT 'not-object', errmsg('SELECT idem_claim(''L'', ''t'', ''c'', ''x'', ''{}'', ''external'', NULL, ''["a"]'')')
       = 'idem_claim: options must be a JSON object such as {"targets": ["..."]}, got ["a"]';
SELECT 'not-json', errmsg('SELECT idem_claim(''L'', ''t'', ''c'', ''x'', ''{}'', ''external'', NULL, ''{targets}'')')
       GLOB 'idem_claim: options: *';
SELECT 'not-text', errmsg('SELECT idem_claim(''L'', ''t'', ''c'', ''x'', ''{}'', ''external'', NULL, 7)')
       = 'idem_claim: options must be TEXT holding JSON, got INTEGER';
SELECT 'targets-not-array', errmsg('SELECT idem_claim(''L'', ''t'', ''c'', ''x'', ''{}'', ''external'', NULL, ''{"targets":"mailto:a"}'')')
       = 'idem_claim: targets must be an array of strings, got "mailto:a"';
SELECT 'target-not-string', errmsg('SELECT idem_claim(''L'', ''t'', ''c'', ''x'', ''{}'', ''external'', NULL, ''{"targets":[42]}'')')
       = 'idem_claim: a target must be a string, got 42';
SELECT 'target-empty', errmsg('SELECT idem_claim(''L'', ''t'', ''c'', ''x'', ''{}'', ''external'', NULL, ''{"targets":[""]}'')')
       = 'idem_claim: a target "" is 0 bytes; it must be 1 to 256 bytes of UTF-8';
SELECT 'target-256-bytes', json_extract(idem_claim('L', 't', 'c', 'x', '{}', 'external', 'big', '{"targets":["' || printf('%.254c', 'a') || 'é"]}'), '$.decision') = 'admitted';
SELECT 'target-257-bytes', errmsg('SELECT idem_claim(''L'', ''t'', ''c'', ''x'', ''{}'', ''external'', NULL, ''{"targets":["' || printf('%.255c', 'a') || 'é"]}'')')
       = 'idem_claim: a target "' || printf('%.79c', 'a') || '... is 257 bytes; it must be 1 to 256 bytes of UTF-8';
SELECT 'target-nul', errmsg('SELECT idem_claim(''L'', ''t'', ''c'', ''x'', ''{}'', ''external'', NULL, ''{"targets":["a\u0000b"]}'')')
       = 'idem_claim: a target "a\u0000b" holds U+0000; a target is text without NUL';
SELECT 'targets-17', errmsg('SELECT idem_claim(''L'', ''t'', ''c'', ''x'', ''{}'', ''external'', NULL, ''{"targets":["1","2","3","4","5","6","7","8","9","10","11","12","13","14","15","16","17"]}'')')
       = 'idem_claim: targets names 17 targets; a claim may name at most 16';
SELECT 'targets-twice', errmsg('SELECT idem_claim(''L'', ''t'', ''c'', ''x'', ''{}'', ''external'', NULL, ''{"targets":["a","b","a"]}'')')
       = 'idem_claim: targets names "a" twice; name each target once';
SELECT 'unknown-option', errmsg('SELECT idem_claim(''L'', ''t'', ''c'', ''x'', ''{}'', ''external'', NULL, ''{"target":["a"]}'')')
       = 'idem_claim: unknown option "target"; the options are allowed_by, target_window_seconds and targets';
SELECT 'window-longer', errmsg('SELECT idem_claim(''L'', ''t'', ''c'', ''x'', ''{}'', ''external'', NULL, ''{"targets":["a"],"target_window_seconds":3601}'')')
       = 'idem_claim: target_window_seconds must be a whole number of seconds from 0 to the ledger''s target_window_seconds (3600), got 3601';
SELECT 'window-negative', errmsg('SELECT idem_claim(''L'', ''t'', ''c'', ''x'', ''{}'', ''external'', NULL, ''{"targets":["a"],"target_window_seconds":-1}'')')
       = 'idem_claim: target_window_seconds must be a whole number of seconds from 0 to the ledger''s target_window_seconds (3600), got -1';
SELECT 'window-fraction', errmsg('SELECT idem_claim(''L'', ''t'', ''c'', ''x'', ''{}'', ''external'', NULL, ''{"targets":["a"],"target_window_seconds":1.5}'')')
       = 'idem_claim: target_window_seconds must be a whole number of seconds from 0 to the ledger''s target_window_seconds (3600), got 1.5';
SELECT 'window-text', errmsg('SELECT idem_claim(''L'', ''t'', ''c'', ''x'', ''{}'', ''external'', NULL, ''{"targets":["a"],"target_window_seconds":"60"}'')')
       = 'idem_claim: target_window_seconds must be a whole number of seconds from 0 to the ledger''s target_window_seconds (3600), got "60"';
SELECT 'allowed-without-targets', errmsg('SELECT idem_claim(''L'', ''t'', ''c'', ''x'', ''{}'', ''external'', NULL, ''{"allowed_by":"ops"}'')')
       = 'idem_claim: allowed_by applies to targets; name the claim''s targets too';
SELECT 'allowed-empty', errmsg('SELECT idem_claim(''L'', ''t'', ''c'', ''x'', ''{}'', ''external'', NULL, ''{"targets":["a"],"allowed_by":""}'')')
       = 'idem_claim: allowed_by "" is 0 bytes; it must be 1 to 256 bytes of UTF-8';
SELECT 'allowed-not-string', errmsg('SELECT idem_claim(''L'', ''t'', ''c'', ''x'', ''{}'', ''external'', NULL, ''{"targets":["a"],"allowed_by":true}'')')
       = 'idem_claim: allowed_by must be a string, got true';
SELECT 'opid-still-checked', errmsg('SELECT idem_claim(''L'', ''t'', ''c'', ''x'', ''{}'', ''external'', ''bad id'', ''{"targets":["a"]}'')')
       GLOB 'idem_claim: operation_id *';
SELECT 'nothing-written', (SELECT r FROM n) = (SELECT count(*) FROM L_rows) - 1 AND (SELECT t FROM n) = (SELECT count(*) FROM L_targets) - 1;

-- ---------------------------------------------------------------- a renamed ledger keeps its targets
DROP VIEW tg;
ALTER TABLE L RENAME TO L2;
SELECT 'renamed-table', (SELECT count(*) FROM sqlite_schema WHERE name = 'L2_targets') = 1;
SELECT 'renamed-conflict', json_extract(idem_claim('L2', 't', 'c', 'x', '{"n":2}', 'external', 'big2', '{"targets":["' || printf('%.254c', 'a') || 'é"]}'), '$.decision') = 'conflict';
SELECT 'renamed-health', json_extract(idem_health('L2'), '$.verdict') IN ('healthy', 'needs attention');
SELECT 'integrity', (SELECT integrity_check FROM pragma_integrity_check) = 'ok';
