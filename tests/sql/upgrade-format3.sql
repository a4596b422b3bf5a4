-- A format-3 file (tests/fixtures/format3.db, made by the format-3 build)
-- opened by this build: refused until SELECT idem_upgrade('L'); after it the
-- file is format 5 in place (ids, tokens and members kept, the rows table
-- rebuilt without the grammar CHECKs), its triggers
-- refuse every write but the extension's, and every guard has its three
-- triggers of format 4. Run by tests/suites/65-upgrade.sh on a fresh copy.
ATTACH 'build/upgrade/format3.db' AS f3;
SELECT 'fixture-format-3', (SELECT v FROM f3.L_meta WHERE k = 'format') = 3 AND (SELECT v FROM f3.S_meta WHERE k = 'format') = 3;
SELECT 'fixture-rows', (SELECT count(*) FROM f3.L_rows) = 6 AND (SELECT count(*) FROM f3.S_rows) = 1
       AND (SELECT count(*) FROM f3.L_members) = 3;
CREATE TEMP TABLE before AS SELECT * FROM f3.L_rows;
CREATE TEMP TABLE members_before AS SELECT * FROM f3.L_members;
SELECT 'format3-claim', errmsg('SELECT idem_claim(''L'', ''t1'', ''c1'', ''send'', ''{"to":"a"}'', ''external'', ''op-ok'')')
       = 'idem_claim: ledger L has format 3, made by an earlier release; upgrade it once with SELECT idem_upgrade(''L'')';
SELECT 'format3-insert-guarded', errmsg('INSERT INTO f3.orders(tenant, k, item) VALUES (''t1'', ''op-open'', ''x'')')
       GLOB 'idem_guard: insert into "orders" refused: *format 3*';
-- idem_health compares the tables with this format's text only
SELECT 'health-tables-earlier-format', json_type(idem_health('L'), '$.tables') = 'null';
SELECT 'upgrade-L', idem_upgrade('L') = '{"ledger":"L","from_format":3,"format":5,"rows_copied":6,"members_found":0,"triggers_created":20}';
SELECT 'upgrade-S', idem_upgrade('S') = '{"ledger":"S","from_format":3,"format":5,"rows_copied":1,"members_found":0,"triggers_created":17}';
-- the upgraded file's tables are the ones this format creates
SELECT 'health-tables-upgraded', json_extract(idem_health('L'), '$.tables')
       = '[{"name":"L_rows","state":"ok"},{"name":"L_meta","state":"ok"},{"name":"L_guards","state":"ok"},{"name":"L_members","state":"ok"},{"name":"L_targets","state":"ok"}]';
SELECT 'upgrade-again-nothing', idem_upgrade('L') = '{"ledger":"L","from_format":5,"format":5,"rows_copied":0,"members_found":0,"triggers_created":0}';
SELECT 'meta-format-5', (SELECT v FROM f3.L_meta WHERE k = 'format') = 5 AND (SELECT v FROM f3.S_meta WHERE k = 'format') = 5;
SELECT 'rows-kept', (SELECT count(*) FROM (SELECT * FROM before EXCEPT SELECT * FROM f3.L_rows)) = 0
       AND (SELECT count(*) FROM f3.L_rows) = 6;
SELECT 'members-kept', (SELECT count(*) FROM (SELECT * FROM members_before EXCEPT SELECT * FROM f3.L_members)) = 0
       AND (SELECT count(*) FROM f3.L_members) = 3;
-- the rows table rebuilt without the grammar CHECKs (NOT NULL and the
-- domains kept), the partial index of open rows made again
SELECT 'rows-no-grammar-check', (SELECT sql FROM f3.sqlite_schema WHERE name = 'L_rows') NOT GLOB '*GLOB*'
       AND (SELECT sql FROM f3.sqlite_schema WHERE name = 'L_rows') GLOB '*status NOT NULL CHECK(status=''claimed''*';
SELECT 'open-index', (SELECT count(*) FROM f3.sqlite_schema WHERE type = 'index' AND tbl_name = 'L_rows' AND name GLOB 'idem_*_open') = 1
       AND (SELECT count(*) FROM f3.sqlite_schema WHERE type = 'index' AND tbl_name = 'S_rows' AND name GLOB 'idem_*_key') = 1;
SELECT 'no-leftover-table', (SELECT count(*) FROM f3.sqlite_schema WHERE name GLOB '*_format4') = 0;
-- the triggers of format 4: no rule of the states table is repeated in them
SELECT 'rows-triggers', (SELECT group_concat(name, ',') FROM (SELECT name FROM f3.sqlite_schema WHERE type = 'trigger' AND tbl_name = 'L_rows' ORDER BY name))
       = 'L_rows_delete,L_rows_forget,L_rows_insert,L_rows_targets,L_rows_update';
SELECT 'rows-update-one-writer', (SELECT sql FROM f3.sqlite_schema WHERE name = 'L_rows_update')
       GLOB 'CREATE TRIGGER "L_rows_update" BEFORE UPDATE ON "L_rows" WHEN NOT idem_own_write() BEGIN *';
SELECT 'guard-triggers', (SELECT group_concat(name, ',') FROM (SELECT name FROM f3.sqlite_schema WHERE type = 'trigger' AND tbl_name = 'orders' ORDER BY name))
       = 'orders_idem_L_insert,orders_idem_L_member,orders_idem_L_update';
SELECT 'guard-member-trigger', (SELECT sql FROM f3.sqlite_schema WHERE name = 'orders_idem_L_member') GLOB '*SELECT idem_guard_member(*';
-- plain SQL writes nothing now
SELECT 'plain-refused', errmsg('UPDATE f3.L_rows SET status = ''released'' WHERE "key" = ''op-live''')
       = 'idempotency: the rows of ledger L are written only by the extension (idem_claim, idem_settle, idem_resolve, idem_purge, or INSERT INTO and DELETE FROM the ledger table); plain SQL may read them';
SELECT 'plain-members-refused', errcode('DELETE FROM f3.L_members') = 1811;
-- the holders keep their tokens; the open local claim keeps its members and records new ones
SELECT 'live-token-settles', json_extract(idem_settle('L', '00000000000000041c5f9eccb30c869e', 'succeeded', '{"late":1}'), '$.status') = 'succeeded';
SELECT 'open-local-writes', errmsg('INSERT INTO f3.orders(id, tenant, k, item) VALUES (3, ''t1'', ''op-open'', ''more'')') IS NULL;
SELECT 'open-local-members', json_extract(idem_settle('L', '0000000000000006838a97d1ff4aa57c', 'succeeded', NULL), '$.members')
       = '[{"table":"orders","rowid":3},{"table":"orders","rowid":5},{"table":"orders","rowid":20}]';
SELECT 'replay-done', json_extract(idem_claim('L', 't1', 'c1', 'add', '{"item":"pen"}', 'local', 'op-done'), '$.members') = '[{"table":"orders","rowid":10}]';
SELECT 'unknown-resolves', json_extract(idem_resolve('L', 't1', 'op-unk', 'failed', '{"checked":true}'), '$.status') = 'failed';
SELECT 'released-reclaims', json_extract(idem_claim('L', 't1', 'c1', 'send', '{"to":"c"}', 'external', 'op-rel'), '$.attempt') = 2;
-- a purge deletes the settled local row of the fixture, and its member with it (the forget trigger)
SELECT 'purge', idem_purge('L', 60) = 2;
SELECT 'purged', (SELECT count(*) FROM f3.L_rows WHERE "key" IN ('op-ok', 'op-done')) = 0;
SELECT 'purge-forgets-members', (SELECT group_concat(rid) FROM (SELECT rid FROM f3.L_members ORDER BY rid)) = '3,5,20';
SELECT sqltest_clock((SELECT created_at FROM f3.S_rows WHERE "key" = 's-live') + 1000) > 0;
SELECT 'single-tenant-live', json_extract(idem_claim('S', 'solo', 'c1', 'send', '{"n":1}', 'external', 's-live'), '$.decision') = 'in_progress';
SELECT sqltest_clock(NULL);
SELECT 'meta-holds', errcode('UPDATE f3.L_meta SET v = 9 WHERE k = ''max_attempts''') = 1811;
SELECT 'integrity', (SELECT integrity_check FROM f3.pragma_integrity_check) = 'ok';
