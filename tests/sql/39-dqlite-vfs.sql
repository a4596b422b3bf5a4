-- Under dqlite, recognised by the VFS of the ledger's database (libdqlite
-- names it "dqlite-<n>"): a ledger is created with require_transaction=1
-- unless CREATE says otherwise, and an admitted claim made inside a
-- transaction says its durability rests on the Raft quorum
-- ("durable":true,"durability":"raft-quorum") rather than on the leader's
-- synchronous=OFF. The runner registers a copy of the default VFS named
-- "dqlite-sqltest"; the same statements on the default VFS keep the plain
-- rules. tests/suites/70-dqlite.sh checks the same on a real cluster.

SELECT sqltest_clock(1700000000000);
ATTACH 'file:dq?mode=memory&vfs=dqlite-sqltest' AS dq;
CREATE VIRTUAL TABLE dq.D USING idempotency;
CREATE VIRTUAL TABLE dq.D0 USING idempotency(require_transaction=0);
CREATE VIRTUAL TABLE main.P USING idempotency;
PRAGMA dq.synchronous = OFF;

-- ---------------------------------------------------------------- the default
SELECT 'dqlite-default-require-transaction', (SELECT v FROM dq.D_meta WHERE k = 'require_transaction') = 1;
SELECT 'dqlite-explicit-0-kept', (SELECT v FROM dq.D0_meta WHERE k = 'require_transaction') = 0;
SELECT 'plain-default-0', (SELECT v FROM main.P_meta WHERE k = 'require_transaction') = 0;
SELECT 'dqlite-autocommit-refused', errmsg('SELECT idem_claim(''D'', ''t'', ''c'', ''send'', ''{"a":1}'')')
       = 'idem_claim: ledger "D" requires a transaction (require_transaction=1): a claim made outside BEGIN ... COMMIT can be routed as a read by a replicated engine and lost; open a transaction, claim, and commit before acting';
SELECT 'dqlite-autocommit-nothing-written', (SELECT count(*) FROM dq.D_rows) = 0;

-- ---------------------------------------------------------------- durability
-- a claim is evaluated once per statement: WITH c AS MATERIALIZED (...)
BEGIN;
WITH c(j) AS MATERIALIZED (SELECT idem_claim('D', 't', 'c', 'send', '{"a":1}'))
SELECT 'dqlite-in-tx-admitted', json_extract(j, '$.decision') = 'admitted' FROM c
UNION ALL SELECT 'dqlite-in-tx-durable', json_extract(j, '$.committed') = 0 AND json_extract(j, '$.durable') = 1
       AND json_extract(j, '$.durability') = 'raft-quorum' FROM c
UNION ALL SELECT 'dqlite-in-tx-shape', (SELECT json_group_array(key) FROM json_each(c.j))
       = '["decision","key","token","attempt","effect","committed","durable","durability","lease_until","note"]' FROM c;
COMMIT;
SELECT 'dqlite-claim-landed', (SELECT count(*) FROM dq.D_rows) = 1;

-- an explicit require_transaction=0 ledger claims in autocommit; whether
-- that write reached a quorum depends on the client's path, unseen here
WITH c(j) AS MATERIALIZED (SELECT idem_claim('D0', 't', 'c', 'send', '{"a":1}'))
SELECT 'dqlite-autocommit-durable-unknown', json_extract(j, '$.decision') = 'admitted'
       AND json_extract(j, '$.committed') = 1 AND json_extract(j, '$.durable') = 0
       AND json_extract(j, '$.durability') = 'unknown' FROM c;

-- the default VFS: no durability member; durable from synchronous as before
BEGIN;
WITH c(j) AS MATERIALIZED (SELECT idem_claim('P', 't', 'c', 'send', '{"a":1}'))
SELECT 'plain-no-durability-member', json_extract(j, '$.decision') = 'admitted'
       AND json_type(j, '$.durability') IS NULL AND json_type(j, '$.durable') IS NOT NULL FROM c;
COMMIT;
