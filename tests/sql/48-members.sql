-- A local claim's members are the guarded rows written under it, whatever
-- rowid they got: recorded by the guard's member trigger when the row is
-- written (docs/guards.md, "Members"). An explicit rowid below the table's
-- largest, an AUTOINCREMENT table, a reused rowid after a DELETE: each is a
-- member, an expired claim that wrote one becomes unknown (never taken
-- over), and the replay lists it. A guarded row's rowid cannot be updated.
-- Key and tenant compare with BINARY whatever the table declares.

SELECT sqltest_clock(1700000000000);
CREATE VIRTUAL TABLE L USING idempotency(lease_seconds=60);
CREATE TABLE orders(id INTEGER PRIMARY KEY, tenant TEXT, k TEXT, item TEXT);
CREATE TABLE tickets(id INTEGER PRIMARY KEY AUTOINCREMENT, tenant TEXT, k TEXT, n INTEGER);
SELECT 'guard-orders', idem_guard('L', 'orders', 'k', 'tenant') = 1;
SELECT 'guard-tickets', idem_guard('L', 'tickets', 'k', 'tenant') = 1;

-- rows of other keys first, so the table's largest rowid is high
SELECT json_extract(idem_claim('L', 't', 'c', 'order', '{"n":0}', 'local', 'filler'), '$.decision');
INSERT INTO orders(id, tenant, k, item) VALUES (100, 't', 'filler', 'x');
INSERT INTO tickets(tenant, k, n) VALUES ('t', 'filler', 1), ('t', 'filler', 2), ('t', 'filler', 3);
SELECT json_extract(idem_settle('L', (SELECT token FROM L WHERE "key" = 'filler'), 'succeeded', NULL), '$.status');

-- ==== an explicit rowid below the largest: a member all the same
SELECT 'low-claim', json_extract(idem_claim('L', 't', 'c', 'order', '{"n":1}', 'local', 'low'), '$.decision') = 'admitted';
INSERT INTO orders(id, tenant, k, item) VALUES (5, 't', 'low', 'pen');
INSERT INTO tickets(id, tenant, k, n) VALUES (2000, 't', 'low', 9);
SELECT 'low-recorded', (SELECT group_concat(guard || ':' || rid, ',') FROM (SELECT guard, rid FROM L_members
       WHERE claim = (SELECT id FROM L_rows WHERE "key" = 'low') ORDER BY guard, rid)) = '1:5,2:2000';
-- the attempt dies; the lease passes: rows landed without a settle, so unknown, not taken over
SELECT sqltest_clock(1700000000000 + 61000);
SELECT 'low-expired-unknown', json_extract(idem_claim('L', 't', 'c', 'order', '{"n":1}', 'local', 'low'), '$.decision') = 'unknown';
SELECT 'low-not-taken-over', (SELECT status || '/' || attempt FROM L_rows WHERE "key" = 'low') = 'claimed/1';
SELECT 'low-select-unknown', (SELECT status FROM L WHERE "key" = 'low') = 'unknown';
-- its outcome is known here (local): settled with the members snapshot
SELECT 'low-settle-members', json_extract(idem_settle('L', (SELECT token FROM L WHERE "key" = 'low'), 'succeeded', '{"ok":1}'), '$.members')
       = '[{"table":"orders","rowid":5},{"table":"tickets","rowid":2000}]';
SELECT 'low-replay-members', json_extract(idem_claim('L', 't', 'c', 'order', '{"n":1}', 'local', 'low'), '$.members')
       = '[{"table":"orders","rowid":5},{"table":"tickets","rowid":2000}]';

-- ==== AUTOINCREMENT below its sequence, and a reused rowid after a DELETE
SELECT sqltest_clock(1700000100000);
SELECT 'reuse-claim-a', json_extract(idem_claim('L', 't', 'c', 'order', '{"n":2}', 'local', 'reuse-a'), '$.decision') = 'admitted';
INSERT INTO orders(tenant, k, item) VALUES ('t', 'reuse-a', 'a');
SELECT 'reuse-a-row', (SELECT id FROM orders WHERE k = 'reuse-a') = 101;
-- the row is deleted while the claim is open: it still was written, so the
-- claim keeps it as a member (and cannot be released), and a member cannot be
-- deleted by hand while its claim is open
DELETE FROM orders WHERE k = 'reuse-a';
SELECT 'reuse-a-kept', (SELECT count(*) FROM L_members WHERE claim = (SELECT id FROM L_rows WHERE "key" = 'reuse-a')) = 1;
SELECT 'member-delete-refused', errmsg('DELETE FROM L_members')
       = 'idempotency: the members of ledger L are written only by the extension (the triggers idem_guard installs); plain SQL may read them';
SELECT 'reuse-claim-b', json_extract(idem_claim('L', 't', 'c', 'order', '{"n":3}', 'local', 'reuse-b'), '$.decision') = 'admitted';
INSERT INTO orders(tenant, k, item) VALUES ('t', 'reuse-b', 'b');
SELECT 'reuse-b-same-rowid', (SELECT id FROM orders WHERE k = 'reuse-b') = 101;
DELETE FROM tickets WHERE id = 1;
INSERT INTO tickets(id, tenant, k, n) VALUES (1, 't', 'reuse-b', 4);
SELECT 'autoincrement-below-sequence', (SELECT seq FROM sqlite_sequence WHERE name = 'tickets') = 2000;
SELECT 'reuse-a-release-refused', errmsg('SELECT idem_settle(''L'', (SELECT token FROM L WHERE "key" = ''reuse-a''), ''released'', NULL)')
       = 'idem_settle: cannot release local key "reuse-a": its attempt wrote 1 guarded row; settle succeeded or failed';
-- reuse-a's snapshot does not list rowid 101, which reuse-b wrote since
SELECT 'reuse-a-snapshot', json_extract(idem_settle('L', (SELECT token FROM L WHERE "key" = 'reuse-a'), 'failed', '{"undone":true}'), '$.members') = '[]';
SELECT 'reuse-b-members', json_extract(idem_settle('L', (SELECT token FROM L WHERE "key" = 'reuse-b'), 'succeeded', NULL), '$.members')
       = '[{"table":"orders","rowid":101},{"table":"tickets","rowid":1}]';

-- ==== a guarded row's rowid cannot move (the members would lose it)
SELECT 'move-claim', json_extract(idem_claim('L', 't', 'c', 'order', '{"n":4}', 'local', 'move'), '$.decision') = 'admitted';
INSERT INTO orders(id, tenant, k, item) VALUES (300, 't', 'move', 'm');
SELECT 'rowid-update-refused', errmsg('UPDATE orders SET id = 3 WHERE k = ''move''')
       = 'idem_guard: the rowid and the key, tenant and token columns of a guarded table cannot be updated';
SELECT 'rowid-update-refused-rowid', errmsg('UPDATE orders SET rowid = 3 WHERE k = ''move''')
       = 'idem_guard: the rowid and the key, tenant and token columns of a guarded table cannot be updated';
SELECT 'rowid-kept', (SELECT id FROM orders WHERE k = 'move') = 300;
SELECT 'other-column-updatable', errmsg('UPDATE orders SET item = ''m2'' WHERE k = ''move''') IS NULL;
-- release refused while it has a member; the plain-SQL trigger refuses it too
SELECT 'move-release-refused', errmsg('SELECT idem_settle(''L'', (SELECT token FROM L WHERE "key" = ''move''), ''released'', NULL)')
       = 'idem_settle: cannot release local key "move": its attempt wrote 1 guarded row; settle succeeded or failed';
SELECT 'move-release-plain-refused', errcode('UPDATE L_rows SET status = ''released'', updated_at = 1 WHERE "key" = ''move''') = 1811;
-- the lease passes: plain SQL cannot take it over either
SELECT sqltest_clock(1700000100000 + 61000);
SELECT 'move-takeover-plain-refused', errcode('UPDATE L_rows SET status = ''claimed'', attempt = attempt + 1, token = token + 1, expirations = expirations + 1 WHERE "key" = ''move''') = 1811;
SELECT 'move-unknown', json_extract(idem_claim('L', 't', 'c', 'order', '{"n":4}', 'local', 'move'), '$.decision') = 'unknown';
-- the members table takes no plain write: no forged or changed member
SELECT 'member-forge-refused', errmsg('INSERT INTO L_members VALUES ((SELECT id FROM L_rows WHERE "key" = ''reuse-b''), 1, 1, 77)')
       = 'idempotency: the members of ledger L are written only by the extension (the triggers idem_guard installs); plain SQL may read them';
SELECT 'member-update-refused', errcode('UPDATE L_members SET rid = 1') = 1811;
-- unguard is refused while an open claim has members in the guard
SELECT 'unguard-refused-open', errmsg('SELECT idem_unguard(''L'', ''orders'')')
       = 'idem_unguard: table "orders" has rows written under the open claim of key "move" of ledger L; settle or resolve it first';
SELECT 'move-settled', json_extract(idem_settle('L', (SELECT token FROM L WHERE "key" = 'move'), 'failed', '{"why":"test"}'), '$.members') = '[{"table":"orders","rowid":300}]';

-- ==== COLLATE NOCASE columns: another tenant's or key's case is another row
SELECT sqltest_clock(1700000200000);
CREATE TABLE nc(id INTEGER PRIMARY KEY, tenant TEXT COLLATE NOCASE, k TEXT COLLATE NOCASE, v TEXT);
SELECT 'guard-nocase', idem_guard('L', 'nc', 'k', 'tenant') = 1;
SELECT json_extract(idem_claim('L', 't1', 'c', 'order', '{}', 'local', 'op-1'), '$.decision');
SELECT json_extract(idem_claim('L', 'T1', 'c', 'order', '{}', 'local', 'OP-1'), '$.decision');
INSERT INTO nc(tenant, k, v) VALUES ('t1', 'op-1', 'lower');
INSERT INTO nc(tenant, k, v) VALUES ('T1', 'OP-1', 'upper');
SELECT 'nocase-members-lower', json_extract(idem_settle('L', (SELECT token FROM L WHERE tenant = 't1' AND "key" = 'op-1'), 'succeeded', NULL), '$.members')
       = '[{"table":"nc","rowid":1}]';
SELECT 'nocase-key-case-frozen', errmsg('UPDATE nc SET k = ''OP-1'' WHERE id = 1')
       = 'idem_guard: the rowid and the key, tenant and token columns of a guarded table cannot be updated';
SELECT 'nocase-tenant-case-frozen', errmsg('UPDATE nc SET tenant = ''T1'' WHERE id = 1')
       = 'idem_guard: the rowid and the key, tenant and token columns of a guarded table cannot be updated';
SELECT 'nocase-members-upper', json_extract(idem_settle('L', (SELECT token FROM L WHERE tenant = 'T1' AND "key" = 'OP-1'), 'succeeded', NULL), '$.members')
       = '[{"table":"nc","rowid":2}]';
SELECT 'integrity', (SELECT integrity_check FROM pragma_integrity_check) = 'ok';
-- idem_guard_member called directly (not from a guard's trigger) records a
-- member of an open local claim, which then is neither released nor taken
-- over; the settle's snapshot lists only rows that exist (docs/design.md)
SELECT 'direct-claim', json_extract(idem_claim('L', 't', 'c', 'order', '{"n":9}', 'local', 'direct'), '$.decision') = 'admitted';
SELECT 'direct-member', idem_guard_member('L', (SELECT v FROM L_meta WHERE k = 'id'), (SELECT id FROM L_guards WHERE tbl = 'orders'), 't', 'direct', 424242) IS NULL;
SELECT 'direct-member-recorded', (SELECT group_concat(rid) FROM L_members WHERE claim = (SELECT id FROM L_rows WHERE "key" = 'direct')) = '424242';
SELECT 'direct-release-refused', errmsg('SELECT idem_settle(''L'', (SELECT token FROM L WHERE "key" = ''direct''), ''released'', NULL)')
       = 'idem_settle: cannot release local key "direct": its attempt wrote 1 guarded row; settle succeeded or failed';
SELECT 'direct-snapshot-empty', json_extract(idem_settle('L', (SELECT token FROM L WHERE "key" = 'direct'), 'succeeded', NULL), '$.members') = '[]';
