-- A format-1 file (tests/fixtures/format1.db, made by the format-1 build)
-- opened by this build: every operation names the one statement that
-- upgrades it, SELECT idem_upgrade('L'); after it the file is format 4,
-- every row kept, and the holder of a live claim settles with the token
-- the format-1 build gave it. Run by tests/suites/65-upgrade.sh on
-- a fresh copy of the fixture.
ATTACH 'build/upgrade/format1.db' AS f1;
SELECT 'fixture-format-1', (SELECT v FROM f1.L_meta WHERE k = 'format') = 1 AND (SELECT v FROM f1.S_meta WHERE k = 'format') = 1;
SELECT 'fixture-rows', (SELECT count(*) FROM f1.L_rows) = 7 AND (SELECT count(*) FROM f1.S_rows) = 1;
CREATE TEMP TABLE before AS SELECT tenant, "key", conversation, tool, args, effect, status, result, error, attempt, created_at, updated_at, lease_until, members, expirations FROM f1.L_rows;
-- before the upgrade: refused, with the statement to run
SELECT 'format1-select', errmsg('SELECT count(*) FROM L')
       = 'idempotency: ledger L has format 1, made by an earlier release; upgrade it once with SELECT idem_upgrade(''L'')';
SELECT 'format1-claim', errmsg('SELECT idem_claim(''L'', ''t1'', ''c1'', ''send_mail'', ''{"to":"a@b.c"}'', ''external'', ''op-ok'')')
       = 'idem_claim: ledger L has format 1, made by an earlier release; upgrade it once with SELECT idem_upgrade(''L'')';
SELECT 'format1-nothing-written', (SELECT count(*) FROM f1.L_rows) = 7 AND (SELECT v FROM f1.L_meta WHERE k = 'format') = 1;
-- the upgrade
-- idem_health compares the tables with this format's text only
SELECT 'health-tables-earlier-format', json_type(idem_health('L'), '$.tables') = 'null';
SELECT 'upgrade-L', idem_upgrade('L') = '{"ledger":"L","from_format":1,"format":5,"rows_copied":7,"members_found":0,"triggers_created":20}';
SELECT 'upgrade-S', idem_upgrade('S') = '{"ledger":"S","from_format":1,"format":5,"rows_copied":1,"members_found":0,"triggers_created":17}';
-- the upgraded file's tables are the ones this format creates
SELECT 'health-tables-upgraded', json_extract(idem_health('L'), '$.tables')
       = '[{"name":"L_rows","state":"ok"},{"name":"L_meta","state":"ok"},{"name":"L_guards","state":"ok"},{"name":"L_members","state":"ok"},{"name":"L_targets","state":"ok"}]';
SELECT 'upgrade-again-nothing', idem_upgrade('L') = '{"ledger":"L","from_format":5,"format":5,"rows_copied":0,"members_found":0,"triggers_created":0}';
SELECT 'meta-format-5', (SELECT v FROM f1.L_meta WHERE k = 'format') = 5 AND (SELECT v FROM f1.S_meta WHERE k = 'format') = 5;
SELECT 'rows-kept', (SELECT count(*) FROM (SELECT * FROM before EXCEPT SELECT tenant, "key", conversation, tool, args, effect, status, result, error, attempt, created_at, updated_at, lease_until, members, expirations FROM f1.L_rows)) = 0
       AND (SELECT count(*) FROM f1.L_rows) = 7;
SELECT 'triggers', (SELECT group_concat(name, ',') FROM (SELECT name FROM f1.sqlite_schema WHERE type = 'trigger' AND tbl_name = 'L_rows' ORDER BY name))
       = 'L_rows_delete,L_rows_forget,L_rows_insert,L_rows_targets,L_rows_update';
SELECT 'guard-triggers', (SELECT group_concat(name, ',') FROM (SELECT name FROM f1.sqlite_schema WHERE type = 'trigger' AND tbl_name = 'orders' ORDER BY name))
       = 'orders_idem_L_insert,orders_idem_L_member,orders_idem_L_update';
-- no token index: the unique (tenant, key) index and the partial index of open rows
SELECT 'no-token-index', (SELECT group_concat(name, ',') FROM (SELECT name FROM f1.sqlite_schema WHERE type = 'index' AND tbl_name = 'L_rows' ORDER BY name))
       = 'idem_' || (SELECT v FROM f1.L_meta WHERE k = 'id') || '_open,sqlite_autoindex_L_rows_1';
SELECT 'single-tenant-index', (SELECT count(*) FROM f1.sqlite_schema WHERE type = 'index' AND name = 'idem_' || (SELECT v FROM f1.S_meta WHERE k = 'id') || '_key') = 1;
SELECT 'token-integer', (SELECT count(*) FROM f1.L_rows WHERE typeof(token) <> 'integer') = 0;
-- the ledger works as it did
SELECT 'replay', idem_claim('L', 't1', 'c1', 'send_mail', '{"to":"a@b.c"}', 'external', 'op-ok')
       = '{"decision":"replay","idempotent":true,"key":"op-ok","status":"succeeded","attempt":1,"settled_at":1796030840604,"result":{"id":42},"members":[]}';
SELECT 'replay-local-members', json_extract(idem_claim('L', 't1', 'c1', 'add_order', '{"item":"pen"}', 'local', 'op-local'), '$.members') = '[{"table":"orders","rowid":1}]';
SELECT 'live-in-progress', json_extract(idem_claim('L', 't1', 'c1', 'send_mail', '{"to":"live"}', 'external', 'op-live'), '$.decision') = 'in_progress';
-- the holder of the live claim still settles with its format-1 token
CREATE TEMP TABLE settled AS SELECT idem_settle('L', 'bc1fb5815ada9a4ea788ec7ce08b2d4c', 'succeeded', '{"late":true}') AS v;
SELECT 'old-token-settles', v = '{"key":"op-live","status":"succeeded","attempt":1,"durable":true,"settled_at":'
       || (SELECT updated_at FROM L WHERE "key" = 'op-live') || ',"members":[]}' FROM settled;
SELECT 'old-token-replays', json_extract(idem_claim('L', 't1', 'c1', 'send_mail', '{"to":"live"}', 'external', 'op-live'), '$.result') = '{"late":true}';
SELECT 'unknown-resolves', json_extract(idem_resolve('L', 't1', 'op-unk', 'failed', '{"checked":true}'), '$.status') = 'failed';
SELECT 'released-reclaims', json_extract(idem_claim('L', 't1', 'c1', 'send_mail', '{"to":"y"}', 'external', 'op-rel'), '$.attempt') = 2;
SELECT 'new-claim', json_extract(idem_claim('L', 't9', 'c1', 'send_mail', '{}', 'external', 'op-new'), '$.decision') = 'admitted';
SELECT 'new-claim-settles', json_extract(idem_settle('L', (SELECT token FROM L WHERE "key" = 'op-new'), 'succeeded', NULL), '$.status') = 'succeeded';
-- the guard made by the format-1 build still guards
SELECT 'guard-claim', json_extract(idem_claim('L', 't1', 'c1', 'add_order', '{"item":"ink"}', 'local', 'op-g2'), '$.decision') = 'admitted';
INSERT INTO f1.orders(tenant, idem_key, item) VALUES ('t1', 'op-g2', 'ink');
SELECT 'guard-insert-under-claim', changes() = 1;
SELECT 'guard-refuses', errcode('INSERT INTO f1.orders(tenant, idem_key, item) VALUES (''t1'', ''op-none'', ''x'')') = 19;
SELECT 'single-tenant-replay', json_extract(idem_claim('S', 'solo', 'c1', 'send', '{"n":1}', 'external', 's-ok'), '$.decision') = 'replay';
-- the format-4 triggers hold on the upgraded file
SELECT 'trigger-holds', errcode('UPDATE f1.L_rows SET status = ''released'' WHERE "key" = ''op-rel''') = 1811;
SELECT 'integrity', (SELECT integrity_check FROM f1.pragma_integrity_check) = 'ok';
