-- A format-2 file (tests/fixtures/format2.db, made by the format-2 build)
-- opened by this build: refused until SELECT idem_upgrade('L'); after it the
-- file is format 5 in place (ids and tokens kept, marks gone), the open
-- local claim's members are recorded (every guarded row of its key), and every guard has
-- its four triggers. Run by tests/suites/65-upgrade.sh on a fresh copy.
ATTACH 'build/upgrade/format2.db' AS f2;
SELECT 'fixture-format-2', (SELECT v FROM f2.L_meta WHERE k = 'format') = 2 AND (SELECT v FROM f2.S_meta WHERE k = 'format') = 2;
SELECT 'fixture-rows', (SELECT count(*) FROM f2.L_rows) = 6 AND (SELECT count(*) FROM f2.S_rows) = 1;
CREATE TEMP TABLE before AS SELECT id, tenant, "key", conversation, tool, args, effect, status, result, error, attempt, token, created_at, updated_at, lease_until, members, expirations FROM f2.L_rows;
SELECT 'format2-claim', errmsg('SELECT idem_claim(''L'', ''t1'', ''c1'', ''send'', ''{"to":"a"}'', ''external'', ''op-ok'')')
       = 'idem_claim: ledger L has format 2, made by an earlier release; upgrade it once with SELECT idem_upgrade(''L'')';
SELECT 'format2-insert-guarded', errmsg('INSERT INTO f2.orders(tenant, k, item) VALUES (''t1'', ''op-open'', ''x'')')
       GLOB 'idem_guard: insert into "orders" refused: *format 2*';
SELECT 'upgrade-L', idem_upgrade('L') = '{"ledger":"L","from_format":2,"format":5,"rows_copied":6,"members_found":2,"triggers_created":20}';
SELECT 'upgrade-S', idem_upgrade('S') = '{"ledger":"S","from_format":2,"format":5,"rows_copied":1,"members_found":0,"triggers_created":17}';
SELECT 'upgrade-again-nothing', idem_upgrade('L') = '{"ledger":"L","from_format":5,"format":5,"rows_copied":0,"members_found":0,"triggers_created":0}';
SELECT 'meta-format-5', (SELECT v FROM f2.L_meta WHERE k = 'format') = 5 AND (SELECT v FROM f2.S_meta WHERE k = 'format') = 5;
SELECT 'rows-kept', (SELECT count(*) FROM (SELECT * FROM before EXCEPT SELECT id, tenant, "key", conversation, tool, args, effect, status, result, error, attempt, token, created_at, updated_at, lease_until, members, expirations FROM f2.L_rows)) = 0
       AND (SELECT count(*) FROM f2.L_rows) = 6;
SELECT 'marks-gone', (SELECT count(*) FROM pragma_table_info('L_rows', 'f2') WHERE name = 'marks') = 0;
-- every guarded row of the open local claim is its member: the one above
-- the marks and the one given an explicit rowid below them (which format
-- 2 never saw: a take-over would have written it again)
SELECT 'members-found', (SELECT group_concat(rid) FROM (SELECT rid FROM f2.L_members WHERE claim = (SELECT id FROM f2.L_rows WHERE "key" = 'op-open') ORDER BY rid)) = '5,20';
SELECT 'guard-triggers', (SELECT group_concat(name, ',') FROM (SELECT name FROM f2.sqlite_schema WHERE type = 'trigger' AND tbl_name = 'orders' ORDER BY name))
       = 'orders_idem_L_insert,orders_idem_L_member,orders_idem_L_update';
SELECT 'single-tenant-index', (SELECT count(*) FROM f2.sqlite_schema WHERE type = 'index' AND name = 'idem_' || (SELECT v FROM f2.S_meta WHERE k = 'id') || '_key') = 1
       AND (SELECT count(*) FROM f2.sqlite_schema WHERE type = 'index' AND name = 'S_rows_key') = 0;
-- the holders keep their tokens
SELECT 'live-token-settles', json_extract(idem_settle('L', '0000000000000004c9a76da320b7f53a', 'succeeded', '{"late":1}'), '$.status') = 'succeeded';
SELECT 'open-local-writes', errmsg('INSERT INTO f2.orders(id, tenant, k, item) VALUES (3, ''t1'', ''op-open'', ''more'')') IS NULL;
SELECT 'open-local-members', json_extract(idem_settle('L', '000000000000000673d7432a51938b0c', 'succeeded', NULL), '$.members')
       = '[{"table":"orders","rowid":3},{"table":"orders","rowid":5},{"table":"orders","rowid":20}]';
SELECT 'replay-done', json_extract(idem_claim('L', 't1', 'c1', 'add', '{"item":"pen"}', 'local', 'op-done'), '$.members') = '[{"table":"orders","rowid":10}]';
SELECT 'unknown-resolves', json_extract(idem_resolve('L', 't1', 'op-unk', 'failed', '{"checked":true}'), '$.status') = 'failed';
SELECT 'released-reclaims', json_extract(idem_claim('L', 't1', 'c1', 'send', '{"to":"c"}', 'external', 'op-rel'), '$.attempt') = 2;
-- (S's lease is the default 300 s: the clock is put back to a second after its claim)
SELECT sqltest_clock((SELECT created_at FROM f2.S_rows WHERE "key" = 's-live') + 1000) > 0;
SELECT 'single-tenant-live', json_extract(idem_claim('S', 'solo', 'c1', 'send', '{"n":1}', 'external', 's-live'), '$.decision') = 'in_progress';
SELECT sqltest_clock(NULL);
SELECT 'trigger-holds', errcode('UPDATE f2.L_meta SET v = 9 WHERE k = ''max_attempts''') = 1811;
SELECT 'integrity', (SELECT integrity_check FROM f2.pragma_integrity_check) = 'ok';
