-- sqltest: file
-- A ledger whose shadow table was altered by hand so that the ledger's
-- statements no longer prepare on it (a column of <name>_rows dropped or
-- renamed) refuses every operation with one message: the ledger, the
-- table, that it is not as the extension made it, and what to do. Each
-- operation runs on a ledger of its own, so that each meets the altered
-- table first; then the refusal holds for what follows, nothing is
-- written, a column renamed back ends it, an ALTER by another connection
-- is found the same way (and its rename back ends it), an odd name is
-- quoted, and a column added changes nothing for the operations
-- (idem_health names the table altered).
SELECT sqltest_clock(1700000000000);
CREATE TABLE orders(id INTEGER PRIMARY KEY, tenant TEXT, op TEXT);
CREATE TEMP TABLE tok(l TEXT PRIMARY KEY, t TEXT);
CREATE TEMP TABLE ledgers(l TEXT PRIMARY KEY);
-- the refusal of ledger l, spelled out once
CREATE TEMP VIEW refusal AS SELECT l, printf('ledger %s has its shadow table %s_rows altered: it is not as the extension made it, and the ledger''s statements no longer prepare on it; see what differs with SELECT idem_health(''%s''), then restore the table from a backup (a dropped column''s data is gone; a renamed column can be renamed back); every operation on it is refused until then', l, l, l) AS m FROM ledgers;

-- one ledger per check, each with a live external claim k1
CREATE VIRTUAL TABLE drop_claim_new USING idempotency;
CREATE VIRTUAL TABLE drop_claim_replay USING idempotency;
CREATE VIRTUAL TABLE drop_settle USING idempotency;
CREATE VIRTUAL TABLE drop_resolve USING idempotency;
CREATE VIRTUAL TABLE drop_renew USING idempotency;
CREATE VIRTUAL TABLE drop_purge USING idempotency;
CREATE VIRTUAL TABLE drop_select USING idempotency;
CREATE VIRTUAL TABLE drop_insert USING idempotency;
CREATE VIRTUAL TABLE drop_guard USING idempotency;
CREATE VIRTUAL TABLE drop_upgrade USING idempotency;
CREATE VIRTUAL TABLE ren_claim_new USING idempotency;
CREATE VIRTUAL TABLE ren_claim_replay USING idempotency;
CREATE VIRTUAL TABLE ren_settle USING idempotency;
CREATE VIRTUAL TABLE ren_resolve USING idempotency;
CREATE VIRTUAL TABLE ren_renew USING idempotency;
CREATE VIRTUAL TABLE ren_purge USING idempotency;
CREATE VIRTUAL TABLE ren_select USING idempotency;
CREATE VIRTUAL TABLE ren_insert USING idempotency;
CREATE VIRTUAL TABLE ren_guard USING idempotency;
CREATE VIRTUAL TABLE ren_upgrade USING idempotency;
INSERT INTO ledgers SELECT name FROM sqlite_schema WHERE type = 'table' AND sql LIKE 'CREATE VIRTUAL TABLE%';
SELECT 'ledgers', count(*) = 20 FROM ledgers;
SELECT idem_claim('drop_claim_new', 'acme', 'c', 'send', '{"n":1}', 'external', 'k1');
INSERT INTO tok SELECT 'drop_claim_new', token FROM drop_claim_new WHERE key = 'k1';
SELECT idem_claim('drop_claim_replay', 'acme', 'c', 'send', '{"n":1}', 'external', 'k1');
INSERT INTO tok SELECT 'drop_claim_replay', token FROM drop_claim_replay WHERE key = 'k1';
SELECT idem_claim('drop_settle', 'acme', 'c', 'send', '{"n":1}', 'external', 'k1');
INSERT INTO tok SELECT 'drop_settle', token FROM drop_settle WHERE key = 'k1';
SELECT idem_claim('drop_resolve', 'acme', 'c', 'send', '{"n":1}', 'external', 'k1');
INSERT INTO tok SELECT 'drop_resolve', token FROM drop_resolve WHERE key = 'k1';
SELECT idem_claim('drop_renew', 'acme', 'c', 'send', '{"n":1}', 'external', 'k1');
INSERT INTO tok SELECT 'drop_renew', token FROM drop_renew WHERE key = 'k1';
SELECT idem_claim('drop_purge', 'acme', 'c', 'send', '{"n":1}', 'external', 'k1');
INSERT INTO tok SELECT 'drop_purge', token FROM drop_purge WHERE key = 'k1';
SELECT idem_claim('drop_select', 'acme', 'c', 'send', '{"n":1}', 'external', 'k1');
INSERT INTO tok SELECT 'drop_select', token FROM drop_select WHERE key = 'k1';
SELECT idem_claim('drop_insert', 'acme', 'c', 'send', '{"n":1}', 'external', 'k1');
INSERT INTO tok SELECT 'drop_insert', token FROM drop_insert WHERE key = 'k1';
SELECT idem_claim('drop_guard', 'acme', 'c', 'send', '{"n":1}', 'external', 'k1');
INSERT INTO tok SELECT 'drop_guard', token FROM drop_guard WHERE key = 'k1';
SELECT idem_claim('drop_upgrade', 'acme', 'c', 'send', '{"n":1}', 'external', 'k1');
INSERT INTO tok SELECT 'drop_upgrade', token FROM drop_upgrade WHERE key = 'k1';
SELECT idem_claim('ren_claim_new', 'acme', 'c', 'send', '{"n":1}', 'external', 'k1');
INSERT INTO tok SELECT 'ren_claim_new', token FROM ren_claim_new WHERE key = 'k1';
SELECT idem_claim('ren_claim_replay', 'acme', 'c', 'send', '{"n":1}', 'external', 'k1');
INSERT INTO tok SELECT 'ren_claim_replay', token FROM ren_claim_replay WHERE key = 'k1';
SELECT idem_claim('ren_settle', 'acme', 'c', 'send', '{"n":1}', 'external', 'k1');
INSERT INTO tok SELECT 'ren_settle', token FROM ren_settle WHERE key = 'k1';
SELECT idem_claim('ren_resolve', 'acme', 'c', 'send', '{"n":1}', 'external', 'k1');
INSERT INTO tok SELECT 'ren_resolve', token FROM ren_resolve WHERE key = 'k1';
SELECT idem_claim('ren_renew', 'acme', 'c', 'send', '{"n":1}', 'external', 'k1');
INSERT INTO tok SELECT 'ren_renew', token FROM ren_renew WHERE key = 'k1';
SELECT idem_claim('ren_purge', 'acme', 'c', 'send', '{"n":1}', 'external', 'k1');
INSERT INTO tok SELECT 'ren_purge', token FROM ren_purge WHERE key = 'k1';
SELECT idem_claim('ren_select', 'acme', 'c', 'send', '{"n":1}', 'external', 'k1');
INSERT INTO tok SELECT 'ren_select', token FROM ren_select WHERE key = 'k1';
SELECT idem_claim('ren_insert', 'acme', 'c', 'send', '{"n":1}', 'external', 'k1');
INSERT INTO tok SELECT 'ren_insert', token FROM ren_insert WHERE key = 'k1';
SELECT idem_claim('ren_guard', 'acme', 'c', 'send', '{"n":1}', 'external', 'k1');
INSERT INTO tok SELECT 'ren_guard', token FROM ren_guard WHERE key = 'k1';
SELECT idem_claim('ren_upgrade', 'acme', 'c', 'send', '{"n":1}', 'external', 'k1');
INSERT INTO tok SELECT 'ren_upgrade', token FROM ren_upgrade WHERE key = 'k1';
SELECT 'claimed', (SELECT count(*) FROM tok WHERE t GLOB '[0-9a-f]*') = 20;

-- the text, as a reader sees it
SELECT 'refusal-text', (SELECT m FROM refusal WHERE l = 'drop_settle') = 'ledger drop_settle has its shadow table drop_settle_rows altered: it is not as the extension made it, and the ledger''s statements no longer prepare on it; see what differs with SELECT idem_health(''drop_settle''), then restore the table from a backup (a dropped column''s data is gone; a renamed column can be renamed back); every operation on it is refused until then';

-- a column dropped, and a column renamed
ALTER TABLE drop_claim_new_rows DROP COLUMN members;
ALTER TABLE drop_claim_replay_rows DROP COLUMN members;
ALTER TABLE drop_settle_rows DROP COLUMN members;
ALTER TABLE drop_resolve_rows DROP COLUMN members;
ALTER TABLE drop_renew_rows DROP COLUMN members;
ALTER TABLE drop_purge_rows DROP COLUMN members;
ALTER TABLE drop_select_rows DROP COLUMN members;
ALTER TABLE drop_insert_rows DROP COLUMN members;
ALTER TABLE drop_guard_rows DROP COLUMN members;
ALTER TABLE drop_upgrade_rows DROP COLUMN members;
ALTER TABLE ren_claim_new_rows RENAME COLUMN members TO m2;
ALTER TABLE ren_claim_replay_rows RENAME COLUMN members TO m2;
ALTER TABLE ren_settle_rows RENAME COLUMN members TO m2;
ALTER TABLE ren_resolve_rows RENAME COLUMN members TO m2;
ALTER TABLE ren_renew_rows RENAME COLUMN members TO m2;
ALTER TABLE ren_purge_rows RENAME COLUMN members TO m2;
ALTER TABLE ren_select_rows RENAME COLUMN members TO m2;
ALTER TABLE ren_insert_rows RENAME COLUMN members TO m2;
ALTER TABLE ren_guard_rows RENAME COLUMN members TO m2;
ALTER TABLE ren_upgrade_rows RENAME COLUMN members TO m2;

SELECT 'dropped-claim-new', errmsg('SELECT idem_claim(''drop_claim_new'', ''acme'', ''c'', ''send'', ''{"n":9}'')') = 'idem_claim: ' || (SELECT m FROM refusal WHERE l = 'drop_claim_new');
SELECT 'dropped-claim-replay', errmsg('SELECT idem_claim(''drop_claim_replay'', ''acme'', ''c'', ''send'', ''{"n":1}'', ''external'', ''k1'')') = 'idem_claim: ' || (SELECT m FROM refusal WHERE l = 'drop_claim_replay');
SELECT 'dropped-settle', errmsg('SELECT idem_settle(''drop_settle'', (SELECT t FROM tok WHERE l = ''drop_settle''), ''succeeded'', ''{}'')') = 'idem_settle: ' || (SELECT m FROM refusal WHERE l = 'drop_settle');
SELECT 'dropped-resolve', errmsg('SELECT idem_resolve(''drop_resolve'', ''acme'', ''k1'', ''succeeded'', ''{}'')') = 'idem_resolve: ' || (SELECT m FROM refusal WHERE l = 'drop_resolve');
SELECT 'dropped-renew', errmsg('SELECT idem_renew(''drop_renew'', (SELECT t FROM tok WHERE l = ''drop_renew''))') = 'idem_renew: ' || (SELECT m FROM refusal WHERE l = 'drop_renew');
SELECT 'dropped-purge', errmsg('SELECT idem_purge(''drop_purge'', 0)') = 'idem_purge: ' || (SELECT m FROM refusal WHERE l = 'drop_purge');
SELECT 'dropped-select', errmsg('SELECT count(*) FROM drop_select') = 'idempotency: ' || (SELECT m FROM refusal WHERE l = 'drop_select');
SELECT 'dropped-insert', errmsg('INSERT INTO drop_insert(tenant, conversation, tool, args, key) VALUES (''acme'', ''c'', ''send'', ''{}'', ''k2'')') = 'idempotency: ' || (SELECT m FROM refusal WHERE l = 'drop_insert');
SELECT 'dropped-guard', errmsg('SELECT idem_guard(''drop_guard'', ''orders'', ''op'', ''tenant'')') = 'idem_guard: ' || (SELECT m FROM refusal WHERE l = 'drop_guard');
SELECT 'dropped-upgrade', errmsg('SELECT idem_upgrade(''drop_upgrade'')') = 'idem_upgrade: ' || (SELECT m FROM refusal WHERE l = 'drop_upgrade');
SELECT 'renamed-claim-new', errmsg('SELECT idem_claim(''ren_claim_new'', ''acme'', ''c'', ''send'', ''{"n":9}'')') = 'idem_claim: ' || (SELECT m FROM refusal WHERE l = 'ren_claim_new');
SELECT 'renamed-claim-replay', errmsg('SELECT idem_claim(''ren_claim_replay'', ''acme'', ''c'', ''send'', ''{"n":1}'', ''external'', ''k1'')') = 'idem_claim: ' || (SELECT m FROM refusal WHERE l = 'ren_claim_replay');
SELECT 'renamed-settle', errmsg('SELECT idem_settle(''ren_settle'', (SELECT t FROM tok WHERE l = ''ren_settle''), ''succeeded'', ''{}'')') = 'idem_settle: ' || (SELECT m FROM refusal WHERE l = 'ren_settle');
SELECT 'renamed-resolve', errmsg('SELECT idem_resolve(''ren_resolve'', ''acme'', ''k1'', ''succeeded'', ''{}'')') = 'idem_resolve: ' || (SELECT m FROM refusal WHERE l = 'ren_resolve');
SELECT 'renamed-renew', errmsg('SELECT idem_renew(''ren_renew'', (SELECT t FROM tok WHERE l = ''ren_renew''))') = 'idem_renew: ' || (SELECT m FROM refusal WHERE l = 'ren_renew');
SELECT 'renamed-purge', errmsg('SELECT idem_purge(''ren_purge'', 0)') = 'idem_purge: ' || (SELECT m FROM refusal WHERE l = 'ren_purge');
SELECT 'renamed-select', errmsg('SELECT count(*) FROM ren_select') = 'idempotency: ' || (SELECT m FROM refusal WHERE l = 'ren_select');
SELECT 'renamed-insert', errmsg('INSERT INTO ren_insert(tenant, conversation, tool, args, key) VALUES (''acme'', ''c'', ''send'', ''{}'', ''k2'')') = 'idempotency: ' || (SELECT m FROM refusal WHERE l = 'ren_insert');
SELECT 'renamed-guard', errmsg('SELECT idem_guard(''ren_guard'', ''orders'', ''op'', ''tenant'')') = 'idem_guard: ' || (SELECT m FROM refusal WHERE l = 'ren_guard');
SELECT 'renamed-upgrade', errmsg('SELECT idem_upgrade(''ren_upgrade'')') = 'idem_upgrade: ' || (SELECT m FROM refusal WHERE l = 'ren_upgrade');
-- the code is the one a missing shadow table's refusal has (SQLITE_ERROR)
SELECT 'dropped-code', errcode('SELECT idem_claim(''drop_claim_new'', ''acme'', ''c'', ''send'', ''{"n":9}'')') = 1
       AND errmsg('SELECT idem_claim(''drop_claim_new'', ''acme'', ''c'', ''send'', ''{"n":9}'')') = 'idem_claim: ' || (SELECT m FROM refusal WHERE l = 'drop_claim_new');
-- once refused, every operation is (the claim's ledger, now settled)
SELECT 'refused-after', errmsg('SELECT idem_settle(''drop_claim_new'', (SELECT t FROM tok WHERE l = ''drop_claim_new''), ''succeeded'', ''{}'')') = 'idem_settle: ' || (SELECT m FROM refusal WHERE l = 'drop_claim_new');
SELECT 'refused-after-upgrade', errmsg('SELECT idem_upgrade(''drop_claim_new'')') = 'idem_upgrade: ' || (SELECT m FROM refusal WHERE l = 'drop_claim_new');
-- nothing was written: one row each, claimed; no guard; the upgrade left the triggers
SELECT 'nothing-written', (SELECT count(*) FROM drop_claim_new_rows) = 1 AND (SELECT count(*) FROM drop_insert_rows) = 1
       AND (SELECT status FROM drop_settle_rows) = 'claimed' AND (SELECT status FROM drop_resolve_rows) = 'claimed'
       AND (SELECT count(*) FROM drop_guard_guards) = 0 AND (SELECT count(*) FROM ren_guard_guards) = 0
       AND (SELECT count(*) FROM sqlite_schema WHERE type = 'trigger' AND tbl_name = 'orders') = 0;
-- idem_health gives the refusal as the problem, and names the table altered
SELECT 'health', json_extract(idem_health('ren_purge'), '$.verdict', '$.problems', '$.tables[0]')
       = json_array('broken', json_array((SELECT m FROM refusal WHERE l = 'ren_purge')), json('{"name":"ren_purge_rows","state":"altered"}'));
-- the same answer before any operation met the table
SELECT 'health-first', json_extract(idem_health('ren_select'), '$.problems') = json_array((SELECT m FROM refusal WHERE l = 'ren_select'));

-- a renamed column renamed back: the ledger works again, its claim kept
ALTER TABLE ren_settle_rows RENAME COLUMN m2 TO members;
SELECT 'renamed-back-health', json_extract(idem_health('ren_settle'), '$.verdict', '$.problems') = '["healthy",[]]';
SELECT 'renamed-back-settle', json_extract(idem_settle('ren_settle', (SELECT t FROM tok WHERE l = 'ren_settle'), 'succeeded', '{}'), '$.status') = 'succeeded';

-- another connection drops the column while this one holds the ledger's
-- statements prepared: found the same way (a statement of its own: a
-- claim that fails in autocommit rolls back, which would end errmsg()'s
-- outer statement)
CREATE VIRTUAL TABLE other USING idempotency;
SELECT 'other-before', json_extract(idem_claim('other', 'acme', 'c', 'send', '{"n":1}', 'external', 'k1'), '$.decision') = 'admitted';
SELECT 'other-alter', sqltest_forge('ALTER TABLE other_rows DROP COLUMN members') IS NULL;
-- expect-error: idem_claim: ledger other has its shadow table other_rows altered: it is not as the extension made it, and the ledger's statements no longer prepare on it; see what differs with SELECT idem_health('other'), then restore the table from a backup (a dropped column's data is gone; a renamed column can be renamed back); every operation on it is refused until then
SELECT idem_claim('other', 'acme', 'c', 'send', '{"n":1}', 'external', 'k1');
-- expect-error: idem_claim: ledger other has its shadow table other_rows altered: it is not as the extension made it, and the ledger's statements no longer prepare on it; see what differs with SELECT idem_health('other'), then restore the table from a backup (a dropped column's data is gone; a renamed column can be renamed back); every operation on it is refused until then
SELECT idem_claim('other', 'acme', 'c', 'send', '{"n":2}');

-- and renamed by another connection, then renamed back there: this
-- connection's ledger works again
CREATE VIRTUAL TABLE other2 USING idempotency;
SELECT 'other2-before', json_extract(idem_claim('other2', 'acme', 'c', 'send', '{"n":1}', 'external', 'k1'), '$.decision') = 'admitted';
SELECT 'other2-rename', sqltest_forge('ALTER TABLE other2_rows RENAME COLUMN members TO m2') IS NULL;
-- expect-error: idem_claim: ledger other2 has its shadow table other2_rows altered: it is not as the extension made it, and the ledger's statements no longer prepare on it; see what differs with SELECT idem_health('other2'), then restore the table from a backup (a dropped column's data is gone; a renamed column can be renamed back); every operation on it is refused until then
SELECT idem_claim('other2', 'acme', 'c', 'send', '{"n":1}', 'external', 'k1');
SELECT 'other2-rename-back', sqltest_forge('ALTER TABLE other2_rows RENAME COLUMN m2 TO members') IS NULL;
SELECT 'other2-works', json_extract(idem_claim('other2', 'acme', 'c', 'send', '{"n":1}', 'external', 'k1'), '$.decision') = 'in_progress';

-- an odd name: the table as it is named, the ledger quoted in the query
CREATE VIRTUAL TABLE "it's ""odd""" USING idempotency;
ALTER TABLE "it's ""odd""_rows" DROP COLUMN members;
SELECT 'odd-name', errmsg('SELECT idem_purge(''it''''s "odd"'', 0)') = 'idem_purge: ledger it''s "odd" has its shadow table it''s "odd"_rows altered: it is not as the extension made it, and the ledger''s statements no longer prepare on it; see what differs with SELECT idem_health(''it''''s "odd"''), then restore the table from a backup (a dropped column''s data is gone; a renamed column can be renamed back); every operation on it is refused until then';

-- a column added: every operation works; idem_health names the table altered
CREATE VIRTUAL TABLE added USING idempotency;
ALTER TABLE added_rows ADD COLUMN note;
ALTER TABLE added_guards ADD COLUMN note;
SELECT 'added-claim', json_extract(idem_claim('added', 'acme', 'c', 'send', '{"n":1}', 'external', 'k1'), '$.decision') = 'admitted';
SELECT 'added-replay', json_extract(idem_claim('added', 'acme', 'c', 'send', '{"n":1}', 'external', 'k1'), '$.decision') = 'in_progress';
SELECT 'added-renew', idem_renew('added', (SELECT token FROM added WHERE key = 'k1'), 600) = 1700000600000;
SELECT 'added-settle', json_extract(idem_settle('added', (SELECT token FROM added WHERE key = 'k1'), 'unknown', '{}'), '$.status') = 'unknown';
SELECT 'added-resolve', json_extract(idem_resolve('added', 'acme', 'k1', 'succeeded', '{}'), '$.status') = 'succeeded';
INSERT INTO added(tenant, conversation, tool, args, key) VALUES ('acme', 'c', 'send', '{}', 'k2');
SELECT 'added-insert', (SELECT status FROM added WHERE key = 'k2') = 'claimed';
SELECT 'added-guard', idem_guard('added', 'orders', 'op', 'tenant') = 1;
SELECT 'added-upgrade', idem_upgrade('added') = '{"ledger":"added","from_format":5,"format":5,"rows_copied":0,"members_found":0,"triggers_created":0}';
SELECT sqltest_clock(1700000001000);
SELECT 'added-purge', idem_purge('added', 0) = 1;
SELECT 'added-health', json_extract(idem_health('added'), '$.verdict', '$.problems', '$.tables')
       = '["broken",["table added_rows was altered: its definition is not the one ledger added creates, and operations on the ledger may fail on it; restore it from a backup (idem_upgrade does not rebuild it); table added_guards was altered: its definition is not the one ledger added creates, and operations on the ledger may fail on it; restore it from a backup (idem_upgrade does not rebuild it)"],[{"name":"added_rows","state":"altered"},{"name":"added_meta","state":"ok"},{"name":"added_guards","state":"altered"},{"name":"added_members","state":"ok"},{"name":"added_targets","state":"ok"}]]';
