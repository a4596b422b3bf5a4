-- A format-4 file (tests/fixtures/format4.db, made by the format-4 build)
-- opened by this build: it keeps working for every operation but a claim
-- that names targets, which is refused naming idem_upgrade with nothing
-- written; SELECT idem_upgrade('L') adds the targets table, its index and
-- its four triggers in place (rows, tokens, members and guards untouched),
-- after which claims with targets decide conflicts. Run by
-- tests/suites/65-upgrade.sh on a fresh copy.
ATTACH 'build/upgrade/format4.db' AS f4;
SELECT 'fixture-format-4', (SELECT v FROM f4.L_meta WHERE k = 'format') = 4 AND (SELECT v FROM f4.S_meta WHERE k = 'format') = 4;
SELECT 'fixture-rows', (SELECT count(*) FROM f4.L_rows) = 6 AND (SELECT count(*) FROM f4.S_rows) = 1
       AND (SELECT count(*) FROM f4.L_members) = 3;
SELECT 'fixture-no-targets', (SELECT count(*) FROM f4.sqlite_schema WHERE name GLOB '*targets*') = 0;
CREATE TEMP TABLE before AS SELECT * FROM f4.L_rows;
CREATE TEMP TABLE members_before AS SELECT * FROM f4.L_members;
-- format 4 works as it did: a replay, a new claim and its settle, a guarded write
SELECT 'format4-replay', json_extract(idem_claim('L', 't1', 'c1', 'send', '{"to":"a"}', 'external', 'op-ok'), '$.result') = '{"id":42}';
SELECT 'format4-claim', json_extract(idem_claim('L', 't1', 'c1', 'send', '{"to":"e"}', 'external', 'op-new'), '$.decision') = 'admitted';
SELECT 'format4-settle', json_extract(idem_settle('L', (SELECT token FROM f4.L WHERE key = 'op-new'), 'succeeded', '{"id":43}'), '$.status') = 'succeeded';
SELECT 'format4-guarded', errmsg('INSERT INTO f4.orders(id, tenant, k, item) VALUES (30, ''t1'', ''op-open'', ''pad'')') IS NULL;
SELECT 'format4-options-null', json_extract(idem_claim('L', 't1', 'c1', 'send', '{"to":"f"}', 'external', NULL, NULL), '$.decision') = 'admitted';
SELECT 'format4-targets-empty', json_extract(idem_claim('L', 't1', 'c1', 'send', '{"to":"g"}', 'external', NULL, '{"targets":[]}'), '$.decision') = 'admitted';
-- a claim with targets: refused, naming the upgrade; nothing written
SELECT 'format4-targets-refused', errmsg('SELECT idem_claim(''L'', ''t1'', ''c1'', ''send'', ''{"to":"h"}'', ''external'', NULL, ''{"targets":["mailto:h"]}'')')
       = 'idem_claim: ledger L has format 4, which keeps no targets; upgrade it once with SELECT idem_upgrade(''L'') to claim with targets';
SELECT 'format4-targets-nothing-written', (SELECT count(*) FROM f4.L_rows) = 9;
SELECT 'format4-health', json_extract(idem_health('L'), '$.format', '$.verdict') = '[4,"needs attention"]'
       AND json_array_length(idem_health('L'), '$.tables') = 4 AND json_array_length(idem_health('L'), '$.triggers') = 13;
-- the upgrade: four triggers made, nothing copied
SELECT 'upgrade-L', idem_upgrade('L') = '{"ledger":"L","from_format":4,"format":5,"rows_copied":0,"members_found":0,"triggers_created":4}';
SELECT 'upgrade-S', idem_upgrade('S') = '{"ledger":"S","from_format":4,"format":5,"rows_copied":0,"members_found":0,"triggers_created":4}';
SELECT 'upgrade-again-nothing', idem_upgrade('L') = '{"ledger":"L","from_format":5,"format":5,"rows_copied":0,"members_found":0,"triggers_created":0}';
SELECT 'meta-format-5', (SELECT v FROM f4.L_meta WHERE k = 'format') = 5 AND (SELECT v FROM f4.S_meta WHERE k = 'format') = 5;
SELECT 'rows-kept', (SELECT count(*) FROM (SELECT * FROM before EXCEPT SELECT * FROM f4.L_rows)) = 0;
SELECT 'members-kept', (SELECT count(*) FROM (SELECT * FROM members_before EXCEPT SELECT * FROM f4.L_members)) = 0;
SELECT 'health-tables-upgraded', json_extract(idem_health('L'), '$.tables')
       = '[{"name":"L_rows","state":"ok"},{"name":"L_meta","state":"ok"},{"name":"L_guards","state":"ok"},{"name":"L_members","state":"ok"},{"name":"L_targets","state":"ok"}]';
SELECT 'targets-triggers', (SELECT group_concat(name, ',') FROM (SELECT name FROM f4.sqlite_schema WHERE type = 'trigger' AND name GLOB 'L_*targets*' ORDER BY name))
       = 'L_rows_targets,L_targets_delete,L_targets_insert,L_targets_update';
SELECT 'targets-index', (SELECT count(*) FROM f4.sqlite_schema WHERE type = 'index' AND tbl_name = 'L_targets' AND name GLOB 'idem_*_targets') = 1;
SELECT 'meta-holds', errcode('UPDATE f4.L_meta SET v = 9 WHERE k = ''max_attempts''') = 1811;
-- the holders keep their tokens; claims with targets now decide
SELECT 'live-token-renews', idem_renew('L', '0000000000000004f7d72fd137254802', 0) > 0;
SELECT 'targets-admitted', json_extract(idem_claim('L', 't1', 'c1', 'send', '{"to":"h","body":"one"}', 'external', NULL, '{"targets":["mailto:h"]}'), '$.decision') = 'admitted';
SELECT 'targets-conflict', json_extract(idem_claim('L', 't1', 'c1', 'send', '{"to":"h","body":"two"}', 'external', NULL, '{"targets":["mailto:h"]}'), '$.decision', '$.differs') = '["conflict",["body"]]';
SELECT 'targets-plain-refused', errmsg('DELETE FROM f4.L_targets')
       = 'idempotency: the targets of ledger L are written only by the extension (idem_claim); plain SQL may read them';
SELECT 'integrity', (SELECT integrity_check FROM f4.pragma_integrity_check) = 'ok';
