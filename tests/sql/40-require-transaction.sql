-- sqltest: file
-- require_transaction=1: idem_claim made while no transaction is open is
-- refused (nothing written), with the message replicated engines' users
-- rely on; inside BEGIN or SAVEPOINT it claims as usual. INSERT INTO the
-- ledger is a write statement and is not refused. The option is kept in
-- <name>_meta and checked on connect like the others.

SELECT sqltest_clock(1700000000000);
CREATE VIRTUAL TABLE R USING idempotency(require_transaction=1);
CREATE VIRTUAL TABLE P USING idempotency;

SELECT 'meta-stored', (SELECT v FROM R_meta WHERE k = 'require_transaction') = 1;
SELECT 'meta-default', (SELECT v FROM P_meta WHERE k = 'require_transaction') = 0;

-- ---------------------------------------------------------------- autocommit: refused
SELECT 'autocommit-refused', errmsg('SELECT idem_claim(''R'', ''t'', ''c'', ''send'', ''{"a":1}'')')
       = 'idem_claim: ledger "R" requires a transaction (require_transaction=1): a claim made outside BEGIN ... COMMIT can be routed as a read by a replicated engine and lost; open a transaction, claim, and commit before acting';
SELECT 'autocommit-code', errcode('SELECT idem_claim(''R'', ''t'', ''c'', ''send'', ''{"a":1}'')') = 21;
SELECT 'autocommit-nothing-written', (SELECT count(*) FROM R_rows) = 0;
-- the ledger as the caller named it
SELECT 'autocommit-name-as-given', errmsg('SELECT idem_claim(''r'', ''t'', ''c'', ''send'', ''{"a":1}'', ''local'')')
       = 'idem_claim: ledger "r" requires a transaction (require_transaction=1): a claim made outside BEGIN ... COMMIT can be routed as a read by a replicated engine and lost; open a transaction, claim, and commit before acting';
-- refused before the request is looked at: the call itself is unsafe
SELECT 'autocommit-before-args', errmsg('SELECT idem_claim(''R'', NULL, ''c'', ''send'', ''{bad'')')
       = 'idem_claim: ledger "R" requires a transaction (require_transaction=1): a claim made outside BEGIN ... COMMIT can be routed as a read by a replicated engine and lost; open a transaction, claim, and commit before acting';
SELECT 'autocommit-7-args', errmsg('SELECT idem_claim(''R'', ''t'', ''c'', ''send'', ''{}'', ''external'', ''op-1'')')
       = 'idem_claim: ledger "R" requires a transaction (require_transaction=1): a claim made outside BEGIN ... COMMIT can be routed as a read by a replicated engine and lost; open a transaction, claim, and commit before acting';
SELECT 'autocommit-still-nothing', (SELECT count(*) FROM R_rows) = 0;
-- a ledger without the option claims in autocommit
SELECT 'other-ledger-autocommit', json_extract(idem_claim('P', 't', 'c', 'send', '{"a":1}'), '$.committed') = 1;

-- ---------------------------------------------------------------- inside BEGIN ... COMMIT: claims
BEGIN;
SELECT 'txn-admitted', json_extract(idem_claim('R', 't', 'c', 'send', '{"a":1}'), '$.decision') = 'admitted';
SELECT 'txn-not-yet-committed', json_type(idem_claim('R', 't', 'c', 'send', '{"a":2}'), '$.committed') = 'false';
SELECT 'txn-replay-decisions', json_extract(idem_claim('R', 't', 'c', 'send', '{"a":1}'), '$.decision') = 'in_progress';
COMMIT;
SELECT 'txn-committed-rows', (SELECT count(*) FROM R_rows) = 2;
-- every decision needs the transaction, not only an admission
SELECT 'autocommit-refused-in-progress-too', errmsg('SELECT idem_claim(''R'', ''t'', ''c'', ''send'', ''{"a":1}'')')
       GLOB 'idem_claim: ledger "R" requires a transaction (require_transaction=1): *';
-- BEGIN IMMEDIATE, and a SAVEPOINT outside BEGIN (it opens a transaction)
BEGIN IMMEDIATE;
SELECT 'immediate-admitted', json_extract(idem_claim('R', 't', 'c', 'send', '{"a":3}', 'local'), '$.decision') = 'admitted';
COMMIT;
SAVEPOINT sp;
SELECT 'savepoint-admitted', json_extract(idem_claim('R', 't', 'c', 'send', '{"a":4}'), '$.decision') = 'admitted';
RELEASE sp;
SELECT 'savepoint-committed', (SELECT count(*) FROM R_rows) = 4;
-- a rolled-back transaction leaves nothing
BEGIN;
SELECT 'rollback-admitted', json_extract(idem_claim('R', 't', 'c', 'send', '{"a":5}'), '$.decision') = 'admitted';
ROLLBACK;
SELECT 'rollback-nothing', (SELECT count(*) FROM R_rows WHERE args = '{"a":5}') = 0;

-- ---------------------------------------------------------------- INSERT: a write statement, not refused
INSERT INTO R(tenant, conversation, tool, args) VALUES ('t', 'c', 'migrate', '{"step":1}');
SELECT 'insert-autocommit-admitted', changes() = 1 AND json_type(idem_last_claim('R'), '$.committed') = 'true';
SELECT 'insert-row', (SELECT count(*) FROM R_rows WHERE tool = 'migrate') = 1;

-- ---------------------------------------------------------------- settle and friends are not claims
SELECT 'settle-autocommit', json_extract(idem_settle('R', (SELECT token FROM R WHERE args = '{"a":1}'), 'succeeded', '{"ok":1}'), '$.status') = 'succeeded';

-- ---------------------------------------------------------------- kept across connections, checked on connect
-- made through another schema name, then connected by main from <name>_meta
ATTACH (SELECT file FROM pragma_database_list WHERE name = 'main') AS again;
CREATE VIRTUAL TABLE again.Q USING idempotency(require_transaction=1);
DETACH again;
SELECT 'reconnect-refused', errmsg('SELECT idem_claim(''Q'', ''t'', ''c'', ''send'', ''{}'')')
       = 'idem_claim: ledger "Q" requires a transaction (require_transaction=1): a claim made outside BEGIN ... COMMIT can be routed as a read by a replicated engine and lost; open a transaction, claim, and commit before acting';
BEGIN;
SELECT 'reconnect-txn-admitted', json_extract(idem_claim('Q', 't', 'c', 'send', '{}'), '$.decision') = 'admitted';
COMMIT;
-- a value out of range in the file is an error on connect, never used
CREATE VIRTUAL TABLE B USING idempotency;
-- the options are fixed by B_meta's triggers: editing them as someone who
-- rewrites the file would, the triggers go first
DROP TRIGGER B_meta_insert; DROP TRIGGER B_meta_update; DROP TRIGGER B_meta_delete;
PRAGMA writable_schema = ON;
UPDATE B_meta SET v = 2 WHERE k = 'require_transaction';
PRAGMA writable_schema = OFF;
PRAGMA writable_schema = RESET;
SELECT 'meta-out-of-range', errmsg('SELECT * FROM B')
       = 'idempotency: ledger B has require_transaction = 2 in B_meta; it must be an integer from 0 to 1';
-- a ledger made before the option existed has no row for it: the default
PRAGMA writable_schema = ON;
DELETE FROM B_meta WHERE k IN ('require_transaction', 'retention_seconds');
PRAGMA writable_schema = OFF;
PRAGMA writable_schema = RESET;
SELECT 'meta-triggers-restored', json_extract(idem_upgrade('B'), '$.triggers_created') = 3;
SELECT 'meta-absent-default', json_extract(idem_claim('B', 't', 'c', 'send', '{}'), '$.decision') = 'admitted';
SELECT 'integrity', (SELECT integrity_check FROM pragma_integrity_check) = 'ok';
