-- idem_health(ledger): a ledger's health as one JSON object, the answer the
-- operator's command prints. A healthy ledger; counts by effective status
-- and tool (an external claim whose lease passed counts unknown, a local
-- one without members stays claimed and is expired); the oldest unknown;
-- a dropped ledger trigger and a dropped guard member trigger, each named
-- missing and the ledger's own refusal given as the problem, with the rows
-- still counted; an altered trigger; a guarded table dropped; a ledger
-- missing a shadow table; a shadow table altered (a column dropped, added
-- or renamed), and one renamed with its ledger, which is not; and the
-- errors.
SELECT sqltest_clock(1700000000000);
CREATE VIRTUAL TABLE L USING idempotency(lease_seconds=60);

SELECT 'empty', idem_health('L') = '{"ledger":"L","schema":"main","format":5,"verdict":"healthy","problems":[],"attention":[],"tables":[{"name":"L_rows","state":"ok"},{"name":"L_meta","state":"ok"},{"name":"L_guards","state":"ok"},{"name":"L_members","state":"ok"},{"name":"L_targets","state":"ok"}],"triggers":[{"name":"L_rows_insert","state":"ok"},{"name":"L_rows_update","state":"ok"},{"name":"L_rows_delete","state":"ok"},{"name":"L_rows_forget","state":"ok"},{"name":"L_meta_insert","state":"ok"},{"name":"L_meta_update","state":"ok"},{"name":"L_meta_delete","state":"ok"},{"name":"L_guards_insert","state":"ok"},{"name":"L_guards_update","state":"ok"},{"name":"L_guards_delete","state":"ok"},{"name":"L_members_insert","state":"ok"},{"name":"L_members_update","state":"ok"},{"name":"L_members_delete","state":"ok"},{"name":"L_rows_targets","state":"ok"},{"name":"L_targets_insert","state":"ok"},{"name":"L_targets_update","state":"ok"},{"name":"L_targets_delete","state":"ok"}],"guards":[],"options":{"lease_seconds":60,"max_attempts":5,"max_args_bytes":1048576,"single_tenant":0,"retention_seconds":0,"require_transaction":0,"target_window_seconds":86400},"now":1700000000000,"live_claims":0,"unknown":0,"expired_claims":0,"oldest_unknown":null,"targets":{"recorded":0,"allowed_over_another":0},"counts":[]}';

-- settled rows, a live claim, two unknown rows (one settled unknown, one
-- an external claim whose lease passed) and an expired local claim
CREATE TABLE orders(id INTEGER PRIMARY KEY, tenant TEXT, op TEXT);
SELECT 'guard', idem_guard('L', 'orders', 'op', 'tenant') = 1;
SELECT 'c1', json_extract(idem_settle('L', json_extract(idem_claim('L', 'acme', 'c', 'send', '{"n":1}'), '$.token'), 'succeeded', '{}'), '$.status') = 'succeeded';
SELECT 'c2', json_extract(idem_settle('L', json_extract(idem_claim('L', 'acme', 'c', 'send', '{"n":2}'), '$.token'), 'failed', '{}'), '$.status') = 'failed';
SELECT 'c3', json_extract(idem_settle('L', json_extract(idem_claim('L', 'globex', 'c', 'charge', '{"n":3}'), '$.token'), 'unknown', '{}'), '$.status') = 'unknown';
SELECT sqltest_clock(1700000001000);
SELECT 'c4', json_extract(idem_claim('L', 'acme', 'c', 'charge', '{"n":4}', 'external', 'k4'), '$.decision') = 'admitted';
SELECT 'c5', json_extract(idem_claim('L', 'acme', 'c', 'local_op', '{"n":5}', 'local', 'k5'), '$.decision') = 'admitted';
SELECT sqltest_clock(1700000030000);
SELECT 'c6', json_extract(idem_claim('L', 'acme', 'c', 'send', '{"n":6}'), '$.decision') = 'admitted';

SELECT 'live', json_extract(idem_health('L'), '$.verdict', '$.live_claims', '$.unknown', '$.expired_claims')
       = '["needs attention",3,1,0]';
-- the leases of k4 and k5 pass (60 s after 1700000001000); k6's does not
SELECT sqltest_clock(1700000061000);
SELECT 'counts', json_extract(idem_health('L'), '$.counts')
       = '[{"status":"claimed","tool":"local_op","rows":1},{"status":"claimed","tool":"send","rows":1},{"status":"unknown","tool":"charge","rows":2},{"status":"succeeded","tool":"send","rows":1},{"status":"failed","tool":"send","rows":1}]';
SELECT 'expired', json_extract(idem_health('L'), '$.verdict', '$.live_claims', '$.unknown', '$.expired_claims', '$.attention')
       = '["needs attention",1,2,2,["2 unknown rows: reconcile with the targets, then resolve","2 expired claims: their holders stopped before settling"]]';
SELECT 'oldest-unknown', json_extract(idem_health('L'), '$.oldest_unknown')
       = '{"tenant":"globex","key":"' || (SELECT "key" FROM L_rows WHERE tool = 'charge' AND status = 'unknown') || '","tool":"charge","created_at":1700000000000}';
SELECT 'now', json_extract(idem_health('L'), '$.now') = 1700000061000;
SELECT 'targets-counted', json_extract(idem_claim('L', 'acme', 'c', 'send', '{"n":7}', 'external', 'k7', '{"targets":["mailto:a","mailto:b"]}'), '$.decision') = 'admitted'
       AND json_extract(idem_health('L'), '$.targets') = '{"recorded":2,"allowed_over_another":0}';
SELECT 'targets-allowed-counted', json_extract(idem_claim('L', 'acme', 'c', 'send', '{"n":8}', 'external', 'k8', '{"targets":["mailto:a"],"allowed_by":"ops"}'), '$.decision') = 'admitted'
       AND json_extract(idem_health('L'), '$.targets') = '{"recorded":3,"allowed_over_another":1}';
-- the counts agree with the ledger's own effective status column
SELECT 'agrees-with-select', (SELECT json_group_array(json_object('status', status, 'tool', tool, 'rows', n)) FROM
         (SELECT status, tool, count(*) AS n FROM L GROUP BY status, tool
          ORDER BY CASE status WHEN 'claimed' THEN 1 WHEN 'unknown' THEN 2 WHEN 'succeeded' THEN 3 WHEN 'failed' THEN 4 ELSE 5 END, tool))
       = json_extract(idem_health('L'), '$.counts');
-- one attention line in the singular
SELECT 'resolve', json_extract(idem_resolve('L', 'acme', 'k4', 'succeeded', '{}'), '$.status') = 'succeeded';
SELECT 'singular', json_extract(idem_health('L'), '$.attention')
       = '["1 unknown row: reconcile with the targets, then resolve","1 expired claim: their holders stopped before settling"]';

SELECT 'guard-whole', json_extract(idem_health('L'), '$.guards')
       = '[{"table":"orders","table_dropped":false,"triggers":[{"name":"orders_idem_L_insert","state":"ok"},{"name":"orders_idem_L_member","state":"ok"},{"name":"orders_idem_L_update","state":"ok"}]}]';

-- a guard's member trigger dropped: named missing, and the ledger's refusal is the problem
DROP TRIGGER orders_idem_L_member;
SELECT 'member-dropped-guards', json_extract(idem_health('L'), '$.guards[0].triggers')
       = '[{"name":"orders_idem_L_insert","state":"ok"},{"name":"orders_idem_L_member","state":"missing"},{"name":"orders_idem_L_update","state":"ok"}]';
SELECT 'member-dropped-problem', json_extract(idem_health('L'), '$.verdict') = 'broken'
       AND json_array_length(idem_health('L'), '$.problems') = 1
       AND json_extract(idem_health('L'), '$.problems[0]') GLOB 'ledger L is missing its guard trigger "orders_idem_L_member" on table "orders"; *';
-- the problem is exactly what the ledger refuses with
SELECT 'member-dropped-is-the-refusal', errmsg('SELECT count(*) FROM L') = 'idempotency: ' || json_extract(idem_health('L'), '$.problems[0]');
SELECT 'member-dropped-counts-still', json_extract(idem_health('L'), '$.unknown', '$.expired_claims') = '[1,1]';
SELECT 'member-restore', json_extract(idem_upgrade('L'), '$.triggers_created') = 3;
SELECT 'member-restored', json_extract(idem_health('L'), '$.verdict', '$.problems') = '["needs attention",[]]';

-- a ledger trigger dropped
DROP TRIGGER L_rows_update;
SELECT 'own-dropped-trigger', (SELECT json_extract(value, '$.state') FROM json_each(idem_health('L'), '$.triggers') WHERE json_extract(value, '$.name') = 'L_rows_update') = 'missing';
SELECT 'own-dropped-others-ok', (SELECT count(*) FROM json_each(idem_health('L'), '$.triggers') WHERE json_extract(value, '$.state') = 'ok') = 16;
SELECT 'own-dropped-problem', json_extract(idem_health('L'), '$.problems')
       = json_array('ledger L is missing its trigger "L_rows_update"; rows may have been changed without it: check them (SELECT * FROM "L_rows") against what the application and the targets know, then restore it with SELECT idem_upgrade(''L''); every ledger operation is refused until then');
SELECT 'own-dropped-verdict', json_extract(idem_health('L'), '$.verdict') = 'broken';
-- altered: a trigger of that name with another text
CREATE TRIGGER L_rows_update BEFORE UPDATE ON L_rows BEGIN SELECT 1; END;
SELECT 'own-altered', (SELECT json_extract(value, '$.state') FROM json_each(idem_health('L'), '$.triggers') WHERE json_extract(value, '$.name') = 'L_rows_update') = 'altered';
SELECT 'own-altered-problem', json_extract(idem_health('L'), '$.problems[0]') GLOB 'ledger L has its trigger "L_rows_update" altered; *';
SELECT 'own-restore', json_extract(idem_upgrade('L'), '$.triggers_created') = 1;
SELECT 'own-restored', json_extract(idem_health('L'), '$.problems') = '[]';

-- a guarded table dropped takes its triggers with it: not a problem
DROP TABLE orders;
SELECT 'table-dropped', json_extract(idem_health('L'), '$.guards[0].table_dropped', '$.guards[0].triggers[1].state', '$.problems') = '[true,"missing",[]]';

-- it reads only: no row changes
SELECT 'changes-nothing', (SELECT total_changes()) = (SELECT total_changes() FROM (SELECT idem_health('L')));

-- a ledger missing a shadow table answers, naming it
CREATE VIRTUAL TABLE M USING idempotency;
DROP TABLE M_guards;
SELECT 'shadow-missing', json_extract(idem_health('M'), '$.verdict', '$.problems', '$.guards', '$.format')
       = json_array('broken', json_array('ledger M is missing its shadow table M_guards; every operation on it is refused until that is restored from a backup and the database reopened, or the ledger is dropped with DROP TABLE'), json_array(), 5);

-- a shadow table altered (a column dropped, added or renamed) is named
-- altered, against the text the ledger creates, and is a problem: the
-- ledger's refusal when its statements no longer prepare on it (a column
-- dropped or renamed), else that operations may fail on it
CREATE VIRTUAL TABLE A1 USING idempotency;
CREATE VIRTUAL TABLE A2 USING idempotency;
CREATE VIRTUAL TABLE A3 USING idempotency;
CREATE VIRTUAL TABLE A4 USING idempotency;
ALTER TABLE A1_rows DROP COLUMN members;
ALTER TABLE A2_rows ADD COLUMN note;
ALTER TABLE A3_rows RENAME COLUMN members TO m;
ALTER TABLE A4_guards ADD COLUMN note;
SELECT 'rows-dropped-column', json_extract(idem_health('A1'), '$.verdict', '$.problems', '$.tables')
       = '["broken",["ledger A1 has its shadow table A1_rows altered: it is not as the extension made it, and the ledger''s statements no longer prepare on it; see what differs with SELECT idem_health(''A1''), then restore the table from a backup (a dropped column''s data is gone; a renamed column can be renamed back); every operation on it is refused until then"],[{"name":"A1_rows","state":"altered"},{"name":"A1_meta","state":"ok"},{"name":"A1_guards","state":"ok"},{"name":"A1_members","state":"ok"},{"name":"A1_targets","state":"ok"}]]';
SELECT 'rows-added-column', json_extract(idem_health('A2'), '$.verdict', '$.problems', '$.tables')
       = '["broken",["table A2_rows was altered: its definition is not the one ledger A2 creates, and operations on the ledger may fail on it; restore it from a backup (idem_upgrade does not rebuild it)"],[{"name":"A2_rows","state":"altered"},{"name":"A2_meta","state":"ok"},{"name":"A2_guards","state":"ok"},{"name":"A2_members","state":"ok"},{"name":"A2_targets","state":"ok"}]]';
SELECT 'rows-renamed-column', json_extract(idem_health('A3'), '$.verdict', '$.problems', '$.tables')
       = '["broken",["ledger A3 has its shadow table A3_rows altered: it is not as the extension made it, and the ledger''s statements no longer prepare on it; see what differs with SELECT idem_health(''A3''), then restore the table from a backup (a dropped column''s data is gone; a renamed column can be renamed back); every operation on it is refused until then"],[{"name":"A3_rows","state":"altered"},{"name":"A3_meta","state":"ok"},{"name":"A3_guards","state":"ok"},{"name":"A3_members","state":"ok"},{"name":"A3_targets","state":"ok"}]]';
SELECT 'guards-added-column', json_extract(idem_health('A4'), '$.verdict', '$.problems', '$.tables')
       = '["broken",["table A4_guards was altered: its definition is not the one ledger A4 creates, and operations on the ledger may fail on it; restore it from a backup (idem_upgrade does not rebuild it)"],[{"name":"A4_rows","state":"ok"},{"name":"A4_meta","state":"ok"},{"name":"A4_guards","state":"altered"},{"name":"A4_members","state":"ok"},{"name":"A4_targets","state":"ok"}]]';
-- a missing table is named missing (the problem is the ledger's refusal, above)
SELECT 'table-missing', json_extract(idem_health('M'), '$.tables[2]') = '{"name":"M_guards","state":"missing"}';
-- not altered: a ledger renamed (SQLite rewrites the names in the tables'
-- text), with an odd name, in an attached schema
CREATE VIRTUAL TABLE R USING idempotency;
ALTER TABLE R RENAME TO "R ""odd"" 2";
ATTACH ':memory:' AS aux;
CREATE VIRTUAL TABLE aux.X USING idempotency;
SELECT 'renamed-ok', json_extract(idem_health('R "odd" 2'), '$.verdict', '$.tables')
       = '["healthy",[{"name":"R \"odd\" 2_rows","state":"ok"},{"name":"R \"odd\" 2_meta","state":"ok"},{"name":"R \"odd\" 2_guards","state":"ok"},{"name":"R \"odd\" 2_members","state":"ok"},{"name":"R \"odd\" 2_targets","state":"ok"}]]';
SELECT 'attached-ok', json_extract(idem_health('aux.X'), '$.verdict', '$.tables')
       = '["healthy",[{"name":"X_rows","state":"ok"},{"name":"X_meta","state":"ok"},{"name":"X_guards","state":"ok"},{"name":"X_members","state":"ok"},{"name":"X_targets","state":"ok"}]]';

-- errors
SELECT 'not-a-ledger', errmsg('SELECT idem_health(''nope'')') = 'idem_health: unknown ledger "nope": no table USING idempotency by that name';
SELECT 'not-text', errmsg('SELECT idem_health(1)') = 'idem_health: ledger must be TEXT naming a table USING idempotency';
SELECT 'arity', errmsg('SELECT idem_health()') = 'wrong number of arguments to function idem_health()';
-- DIRECTONLY: a view cannot call it
CREATE VIEW v AS SELECT idem_health('L') AS h;
SELECT 'directonly', errmsg('SELECT h FROM v') = 'unsafe use of idem_health()';
