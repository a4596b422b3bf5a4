-- sqltest: file
-- Every ledger function that writes is refused first on a read-only
-- connection (a database attached with mode=ro, PRAGMA query_only=1: what
-- an rqlite query path or a libSQL replica gives a claim), with a message
-- saying so and naming the likely causes, before its arguments are checked or the ledger read; nothing is
-- written. INSERT INTO and DELETE FROM the ledger SQLite refuses itself.
-- Reads still answer.
SELECT sqltest_clock(1700000000000);
CREATE VIRTUAL TABLE L USING idempotency(lease_seconds=60);
CREATE TABLE orders(id INTEGER PRIMARY KEY, tenant TEXT, k TEXT);
SELECT 'seed', json_extract(idem_claim('L', 't', 'c', 'x', '{}', 'external', 'k1'), '$.decision') = 'admitted';
CREATE TEMP TABLE tok AS SELECT token FROM L WHERE "key" = 'k1';
CREATE TEMP TABLE causes(v);
INSERT INTO causes VALUES ('refused before anything was read or written; likely causes: an rqlite query path (send the call as an execute), a libSQL replica (write through the primary), a database opened with mode=ro, SQLITE_OPEN_READONLY or without write permission, or PRAGMA query_only=1');
SELECT 'attach-ro', errmsg('ATTACH ''file:'' || (SELECT file FROM pragma_database_list WHERE name = ''main'') || ''?mode=ro'' AS ro') IS NULL;
CREATE TEMP VIEW ro_msg AS SELECT 'ledger L is on a read-only connection (its database "ro" is opened read-only), and ' AS v;

-- mode=ro
SELECT 'ro-claim', errmsg('SELECT idem_claim(''ro.L'', ''t'', ''c'', ''x'', ''{}'', ''external'', ''k2'')')
       = 'idem_claim: ' || (SELECT v FROM ro_msg) || 'idem_claim writes: ' || (SELECT v FROM causes);
SELECT 'ro-claim-code', errcode('SELECT idem_claim(''ro.L'', ''t'', ''c'', ''x'', ''{}'', ''external'', ''k2'')') = 8;
-- before the arguments are checked
SELECT 'ro-claim-first', errmsg('SELECT idem_claim(''ro.L'', '''', ''c'', ''x'', ''not json'')')
       = 'idem_claim: ' || (SELECT v FROM ro_msg) || 'idem_claim writes: ' || (SELECT v FROM causes);
SELECT 'ro-settle', errmsg('SELECT idem_settle(''ro.L'', (SELECT token FROM tok), ''succeeded'', ''{}'')')
       = 'idem_settle: ' || (SELECT v FROM ro_msg) || 'idem_settle writes: ' || (SELECT v FROM causes);
SELECT 'ro-resolve', errmsg('SELECT idem_resolve(''ro.L'', ''t'', ''k1'', ''succeeded'', ''{}'')')
       = 'idem_resolve: ' || (SELECT v FROM ro_msg) || 'idem_resolve writes: ' || (SELECT v FROM causes);
SELECT 'ro-renew', errmsg('SELECT idem_renew(''ro.L'', (SELECT token FROM tok))')
       = 'idem_renew: ' || (SELECT v FROM ro_msg) || 'idem_renew writes: ' || (SELECT v FROM causes);
SELECT 'ro-purge', errmsg('SELECT idem_purge(''ro.L'', 0)')
       = 'idem_purge: ' || (SELECT v FROM ro_msg) || 'idem_purge writes: ' || (SELECT v FROM causes);
SELECT 'ro-upgrade', errmsg('SELECT idem_upgrade(''ro.L'')')
       = 'idem_upgrade: ' || (SELECT v FROM ro_msg) || 'idem_upgrade writes: ' || (SELECT v FROM causes);
SELECT 'ro-guard', errmsg('SELECT idem_guard(''ro.L'', ''orders'', ''k'', ''tenant'')')
       = 'idem_guard: ' || (SELECT v FROM ro_msg) || 'idem_guard writes: ' || (SELECT v FROM causes);
SELECT 'ro-unguard', errmsg('SELECT idem_unguard(''ro.L'', ''orders'')')
       = 'idem_unguard: ' || (SELECT v FROM ro_msg) || 'idem_unguard writes: ' || (SELECT v FROM causes);
-- INSERT INTO and DELETE FROM the ledger are statements that write: SQLite
-- refuses them itself, before the ledger sees them
SELECT 'ro-insert', errmsg('INSERT INTO ro.L(tenant, conversation, tool, args, key) VALUES (''t'', ''c'', ''x'', ''{}'', ''k3'')')
       = 'attempt to write a readonly database';
SELECT 'ro-delete', errmsg('DELETE FROM ro.L') = 'attempt to write a readonly database';
-- reads answer
SELECT 'ro-reads', (SELECT count(*) FROM ro.L) = 1 AND idem_last_claim('ro.L') IS NULL;
DETACH ro;

-- PRAGMA query_only
CREATE TEMP VIEW qo_msg AS SELECT 'ledger L is on a read-only connection (PRAGMA query_only is on), and ' AS v;
PRAGMA query_only = 1;
SELECT 'qo-claim', errmsg('SELECT idem_claim(''L'', ''t'', ''c'', ''x'', ''{}'', ''external'', ''k2'')')
       = 'idem_claim: ' || (SELECT v FROM qo_msg) || 'idem_claim writes: ' || (SELECT v FROM causes);
SELECT 'qo-claim-code', errcode('SELECT idem_claim(''L'', ''t'', ''c'', ''x'', ''{}'', ''external'', ''k2'')') = 8;
-- a replay would need no write, and is refused all the same
SELECT 'qo-claim-existing', errmsg('SELECT idem_claim(''L'', ''t'', ''c'', ''x'', ''{}'', ''external'', ''k1'')')
       = 'idem_claim: ' || (SELECT v FROM qo_msg) || 'idem_claim writes: ' || (SELECT v FROM causes);
SELECT 'qo-settle', errmsg('SELECT idem_settle(''L'', (SELECT token FROM tok), ''succeeded'', ''{}'')')
       = 'idem_settle: ' || (SELECT v FROM qo_msg) || 'idem_settle writes: ' || (SELECT v FROM causes);
SELECT 'qo-guard', errmsg('SELECT idem_guard(''L'', ''orders'', ''k'', ''tenant'')')
       = 'idem_guard: ' || (SELECT v FROM qo_msg) || 'idem_guard writes: ' || (SELECT v FROM causes);
-- inside a transaction, the ledger already read: still first
BEGIN;
SELECT 'qo-txn-read', (SELECT count(*) FROM L) = 1;
SELECT 'qo-txn-claim', errmsg('SELECT idem_claim(''L'', ''t'', ''c'', ''x'', ''{}'', ''external'', ''k2'')')
       = 'idem_claim: ' || (SELECT v FROM qo_msg) || 'idem_claim writes: ' || (SELECT v FROM causes);
COMMIT;
SELECT 'qo-reads', (SELECT status FROM L WHERE "key" = 'k1') = 'claimed';
PRAGMA query_only = 0;
SELECT 'nothing-written', (SELECT count(*) FROM L_rows) = 1 AND (SELECT count(*) FROM L_guards) = 0;
SELECT 'writable-again', json_extract(idem_claim('L', 't', 'c', 'x', '{}', 'external', 'k2'), '$.decision') = 'admitted';
-- the value is read again whenever it may have changed (setting it, even
-- from a nested statement, expires the connection's statements): a claim
-- right after is refused, and admitted again once it is off
SELECT 'qo-set-nested', errmsg('PRAGMA query_only = 1') IS NULL;
SELECT 'qo-after-nested-set', errcode('SELECT idem_claim(''L'', ''t'', ''c'', ''x'', ''{}'', ''external'', ''k3'')') = 8;
SELECT 'qo-unset-nested', errmsg('PRAGMA query_only = 0') IS NULL;
SELECT 'qo-after-nested-unset', json_extract(idem_claim('L', 't', 'c', 'x', '{}', 'external', 'k3'), '$.decision') = 'admitted';
