-- A function's ledger argument, qualified by schema: 'aux.L', '"aux"."L"'
-- and odd quoted parts reach an attached ledger also when main holds one
-- of the same name (every function, guards too); malformed names are
-- refused with the rule they broke; the resolution cache follows DROP,
-- DETACH, ATTACH, RENAME and a temp table that shadows a name.

SELECT sqltest_clock(1700000000000);
ATTACH ':memory:' AS aux;
CREATE VIRTUAL TABLE main.L USING idempotency(lease_seconds=60);
CREATE VIRTUAL TABLE aux.L USING idempotency(lease_seconds=60);

-- ---------------------------------------------------------------- every function reaches aux.L
SELECT 'claim-aux', json_extract(idem_claim('aux.L', 't', 'c', 'x', '{}', 'external', 'k1'), '$.decision') = 'admitted'
       AND (SELECT count(*) FROM aux.L_rows) = 1 AND (SELECT count(*) FROM main.L_rows) = 0;
SELECT 'claim-aux-quoted', json_extract(idem_claim('"aux"."L"', 't', 'c', 'x', '{}', 'external', 'k1'), '$.decision') = 'in_progress';
SELECT 'claim-aux-mixed', json_extract(idem_claim('aux."L"', 't', 'c', 'x', '{}', 'external', 'k1'), '$.decision') = 'in_progress'
       AND json_extract(idem_claim('"aux".L', 't', 'c', 'x', '{}', 'external', 'k1'), '$.decision') = 'in_progress';
SELECT 'claim-aux-schema-case', json_extract(idem_claim('AUX.L', 't', 'c', 'x', '{}', 'external', 'k1'), '$.decision') = 'in_progress';
SELECT 'claim-unqualified-is-main', json_extract(idem_claim('L', 't', 'c', 'x', '{}', 'external', 'k1'), '$.decision') = 'admitted'
       AND (SELECT count(*) FROM main.L_rows) = 1;
SELECT 'claim-main-qualified', json_extract(idem_claim('main.L', 't', 'c', 'x', '{}', 'external', 'k1'), '$.decision') = 'in_progress';
SELECT 'settle-aux-wrong-ledger', errmsg('SELECT idem_settle(''L'', (SELECT token FROM aux.L WHERE key = ''k1''), ''succeeded'', NULL)')
       = 'idem_settle: no claim of ledger L holds token "' || (SELECT token FROM aux.L WHERE key = 'k1') || '" (a wrong token, or a claim that was taken over)';
SELECT 'settle-aux', idem_settle('aux.L', (SELECT token FROM aux.L WHERE key = 'k1'), 'succeeded', '{"r":"aux"}')
       = '{"key":"k1","status":"succeeded","attempt":1,"durable":false,"settled_at":1700000000000,"members":[]}';
SELECT 'replay-aux', json(json_extract(idem_claim('aux.L', 't', 'c', 'x', '{}', 'external', 'k1'), '$.result')) = '{"r":"aux"}';
SELECT 'main-untouched', (SELECT status FROM main.L WHERE key = 'k1') = 'claimed';
-- INSERT into aux.L, idem_last_claim through the qualified name
INSERT INTO aux.L(tenant, conversation, tool, args, key) VALUES ('t', 'c', 'x', '{}', 'k2');
SELECT 'last-claim-aux', json_extract(idem_last_claim('aux.L'), '$.key') = 'k2' AND idem_last_claim('main.L') IS NULL AND idem_last_claim('L') IS NULL;
-- the INSERT-claimed row of aux.L, which main's same-named ledger hid, settles, resolves and is deleted
SELECT 'settle-aux-unknown', json_extract(idem_settle('"aux"."L"', (SELECT token FROM aux.L WHERE key = 'k2'), 'unknown', NULL), '$.status') = 'unknown';
SELECT 'resolve-aux-wrong-ledger', errmsg('SELECT idem_resolve(''L'', ''t'', ''k2'', ''failed'', NULL)') = 'idem_resolve: ledger L has no key "k2" for tenant "t"';
SELECT 'resolve-aux', idem_resolve('aux.L', 't', 'k2', 'failed', '{"why":"target said no"}')
       = '{"key":"k2","status":"failed","attempt":1,"durable":false,"settled_at":1700000000000,"members":[]}';
SELECT sqltest_clock(1700000100000);
SELECT 'purge-aux', idem_purge('aux.L', 10) = 2 AND (SELECT count(*) FROM aux.L_rows) = 0;
SELECT 'purge-main-kept', (SELECT count(*) FROM main.L_rows) = 1;
SELECT sqltest_clock(1700000000000);
SELECT 'delete-through-aux', json_extract(idem_claim('aux.L', 't', 'c', 'x', '{}', 'local', 'k3'), '$.decision') = 'admitted'
       AND json_extract(idem_settle('aux.L', (SELECT token FROM aux.L WHERE key = 'k3'), 'released', NULL), '$.status') = 'released';
DELETE FROM aux.L WHERE key = 'k3';
SELECT 'deleted-aux', (SELECT count(*) FROM aux.L_rows) = 0;

-- ---------------------------------------------------------------- guards through a qualified name
CREATE TABLE aux.orders(id INTEGER PRIMARY KEY, tenant, op_key, item);
SELECT 'guard-unqualified-wrong-schema', errmsg('SELECT idem_guard(''L'', ''orders'', ''op_key'', ''tenant'')') = 'idem_guard: no table "orders" in schema main, the schema of ledger L';
SELECT 'guard-aux', idem_guard('aux.L', 'orders', 'op_key', 'tenant') = 1
       AND (SELECT count(*) FROM aux.sqlite_schema WHERE type = 'trigger' AND name GLOB 'orders_idem_L_*') = 3;
SELECT 'guard-aux-twice', errmsg('SELECT idem_guard(''"aux"."L"'', ''orders'', ''op_key'', ''tenant'')') = 'idem_guard: table "orders" is already guarded by ledger L';
SELECT 'guard-aux-refuses', errmsg('INSERT INTO aux.orders(tenant, op_key, item) VALUES (''t'', ''g1'', ''x'')')
       = 'idem_guard: insert into "orders" refused: key "g1" needs a live claim of ledger L; there is no claim for it';
SELECT json_extract(idem_claim('L', 't', 'c', 'order', '{}', 'local', 'g1'), '$.decision');
SELECT 'guard-main-claim-does-not-admit', errmsg('INSERT INTO aux.orders(tenant, op_key, item) VALUES (''t'', ''g1'', ''x'')')
       = 'idem_guard: insert into "orders" refused: key "g1" needs a live claim of ledger L; there is no claim for it';
SELECT json_extract(idem_claim('aux.L', 't', 'c', 'order', '{}', 'local', 'g1'), '$.decision');
INSERT INTO aux.orders(tenant, op_key, item) VALUES ('t', 'g1', 'x');
SELECT 'guard-aux-members', json_extract(idem_settle('aux.L', (SELECT token FROM aux.L WHERE key = 'g1'), 'succeeded', '{}'), '$.members') = '[{"table":"orders","rowid":1}]';
SELECT 'unguard-aux-unqualified-refused', errmsg('SELECT idem_unguard(''L'', ''orders'')') = 'idem_unguard: table "orders" is not guarded by ledger L';
SELECT 'unguard-aux', idem_unguard('aux.L', 'orders') = 1
       AND (SELECT count(*) FROM aux.sqlite_schema WHERE type = 'trigger' AND name GLOB 'orders_idem_L_*') = 0;

-- idem_upgrade restores aux.L's own trigger, not main's
DROP TRIGGER aux.L_rows_delete;
SELECT 'upgrade-aux', idem_upgrade('aux.L') = '{"ledger":"L","from_format":5,"format":5,"rows_copied":0,"members_found":0,"triggers_created":1}'
       AND (SELECT count(*) FROM aux.sqlite_schema WHERE name = 'L_rows_delete') = 1;
SELECT 'upgrade-main-nothing', idem_upgrade('L') = '{"ledger":"L","from_format":5,"format":5,"rows_copied":0,"members_found":0,"triggers_created":0}';

-- ---------------------------------------------------------------- odd names: a schema holding '.', a ledger holding a space and a quote
ATTACH ':memory:' AS "a.b";
CREATE VIRTUAL TABLE "a.b"."x y" USING idempotency;
CREATE VIRTUAL TABLE "a.b"."q""t" USING idempotency;
SELECT 'odd-claim', json_extract(idem_claim('"a.b"."x y"', 't', 'c', 'x', '{}'), '$.decision') = 'admitted'
       AND (SELECT count(*) FROM "a.b"."x y_rows") = 1;
SELECT 'odd-bare-table-part', json_extract(idem_claim('"a.b".x y', 't', 'c', 'x', '{}'), '$.decision') = 'in_progress';
SELECT 'odd-settle', json_extract(idem_settle('"a.b"."x y"', (SELECT token FROM "a.b"."x y"), 'succeeded', NULL), '$.status') = 'succeeded';
SELECT 'odd-unqualified', json_extract(idem_claim('x y', 't', 'c', 'x', '{}'), '$.decision') = 'replay';
SELECT 'odd-schema-unquoted', errmsg('SELECT idem_claim(''a.b.x y'', ''t'', ''c'', ''x'', ''{}'')')
       = 'idem_claim: malformed ledger name "a.b.x y": it has more than two parts; write ledger or schema.ledger, a part in double quotes when it holds a ''.'' ("a.b"."x""y")';
SELECT 'odd-doubled-quote', json_extract(idem_claim('"a.b"."q""t"', 't', 'c', 'x', '{}', 'local'), '$.decision') = 'admitted'
       AND (SELECT count(*) FROM "a.b"."q""t_rows") = 1;
SELECT 'odd-bare-quote-inside', json_extract(idem_claim('q"t', 't', 'c', 'x', '{}', 'local'), '$.decision') = 'in_progress';
SELECT 'odd-purge', idem_purge('"a.b"."q""t"', 0) = 0;
SELECT 'odd-unknown-message', errmsg('SELECT idem_claim(''"a.b"."nope"'', ''t'', ''c'', ''x'', ''{}'')')
       = 'idem_claim: unknown ledger "\"a.b\".\"nope\"": no table USING idempotency by that name';
-- a table whose name holds a '.' is reached by quoting it
CREATE VIRTUAL TABLE "v.1" USING idempotency;
SELECT 'dotted-name-quoted', json_extract(idem_claim('"v.1"', 't', 'c', 'x', '{}'), '$.decision') = 'admitted'
       AND json_extract(idem_claim('main."v.1"', 't', 'c', 'x', '{}'), '$.decision') = 'in_progress';
SELECT 'dotted-name-bare-is-schema', errmsg('SELECT idem_claim(''v.1'', ''t'', ''c'', ''x'', ''{}'')')
       = 'idem_claim: unknown ledger "v.1": no table USING idempotency by that name';

-- ---------------------------------------------------------------- malformed names
SELECT 'bad-unterminated', errmsg('SELECT idem_claim(''"aux.L'', ''t'', ''c'', ''x'', ''{}'')')
       = 'idem_claim: malformed ledger name "\"aux.L": a quoted part has no closing quote; write ledger or schema.ledger, a part in double quotes when it holds a ''.'' ("a.b"."x""y")';
SELECT 'bad-unterminated-second', errmsg('SELECT idem_settle(''aux."L'', ''00000000000000000000000000000000'', ''failed'', NULL)')
       = 'idem_settle: malformed ledger name "aux.\"L": a quoted part has no closing quote; write ledger or schema.ledger, a part in double quotes when it holds a ''.'' ("a.b"."x""y")';
SELECT 'bad-doubled-at-end', errmsg('SELECT idem_purge(''"aux"."L""'', 0)')
       = 'idem_purge: malformed ledger name "\"aux\".\"L\"\"": a quoted part has no closing quote; write ledger or schema.ledger, a part in double quotes when it holds a ''.'' ("a.b"."x""y")';
SELECT 'bad-empty', errmsg('SELECT idem_claim('''', ''t'', ''c'', ''x'', ''{}'')')
       = 'idem_claim: malformed ledger name "": a part is empty; write ledger or schema.ledger, a part in double quotes when it holds a ''.'' ("a.b"."x""y")';
SELECT 'bad-empty-table', errmsg('SELECT idem_resolve(''aux.'', ''t'', ''k'', ''failed'', NULL)')
       = 'idem_resolve: malformed ledger name "aux.": a part is empty; write ledger or schema.ledger, a part in double quotes when it holds a ''.'' ("a.b"."x""y")';
SELECT 'bad-empty-schema', errmsg('SELECT idem_last_claim(''.L'')')
       = 'idem_last_claim: malformed ledger name ".L": a part is empty; write ledger or schema.ledger, a part in double quotes when it holds a ''.'' ("a.b"."x""y")';
SELECT 'bad-empty-quoted', errmsg('SELECT idem_claim(''aux.""'', ''t'', ''c'', ''x'', ''{}'')')
       = 'idem_claim: malformed ledger name "aux.\"\"": a part is empty; write ledger or schema.ledger, a part in double quotes when it holds a ''.'' ("a.b"."x""y")';
SELECT 'bad-three-parts', errmsg('SELECT idem_claim(''main.aux.L'', ''t'', ''c'', ''x'', ''{}'')')
       = 'idem_claim: malformed ledger name "main.aux.L": it has more than two parts; write ledger or schema.ledger, a part in double quotes when it holds a ''.'' ("a.b"."x""y")';
SELECT 'bad-three-quoted-parts', errmsg('SELECT idem_guard(''"a"."b"."c"'', ''t'', ''k'', ''t'')')
       = 'idem_guard: malformed ledger name "\"a\".\"b\".\"c\"": it has more than two parts; write ledger or schema.ledger, a part in double quotes when it holds a ''.'' ("a.b"."x""y")';
SELECT 'bad-after-quote', errmsg('SELECT idem_unguard(''"aux"L'', ''t'')')
       = 'idem_unguard: malformed ledger name "\"aux\"L": a closing quote is followed by something other than ''.''; write ledger or schema.ledger, a part in double quotes when it holds a ''.'' ("a.b"."x""y")';
SELECT 'bad-trailing-dot', errmsg('SELECT idem_claim(''"aux"."L".'', ''t'', ''c'', ''x'', ''{}'')')
       = 'idem_claim: malformed ledger name "\"aux\".\"L\".": it has more than two parts; write ledger or schema.ledger, a part in double quotes when it holds a ''.'' ("a.b"."x""y")';
SELECT 'bad-nul', errmsg('SELECT idem_claim(''L'' || char(0) || ''x'', ''t'', ''c'', ''x'', ''{}'')')
       = 'idem_claim: malformed ledger name "L": it contains a NUL character; write ledger or schema.ledger, a part in double quotes when it holds a ''.'' ("a.b"."x""y")';
SELECT 'bad-not-text', errmsg('SELECT idem_claim(1, ''t'', ''c'', ''x'', ''{}'')') = 'idem_claim: ledger must be TEXT naming a table USING idempotency';
SELECT 'unknown-schema', errmsg('SELECT idem_claim(''nosuch.L'', ''t'', ''c'', ''x'', ''{}'')')
       = 'idem_claim: unknown ledger "nosuch.L": no table USING idempotency by that name';
SELECT 'temp-qualified-unknown', errmsg('SELECT idem_claim(''temp.L'', ''t'', ''c'', ''x'', ''{}'')')
       = 'idem_claim: unknown ledger "temp.L": no table USING idempotency by that name';
CREATE TABLE aux.plain(x);
SELECT 'qualified-plain-table', errmsg('SELECT idem_claim(''aux.plain'', ''t'', ''c'', ''x'', ''{}'')')
       = 'idem_claim: unknown ledger "aux.plain": no table USING idempotency by that name';
SELECT 'nothing-written', (SELECT count(*) FROM aux.L_rows) = 1;

-- ---------------------------------------------------------------- the cache follows the schema
-- DETACH: a cached 'aux.L' is gone; a new file attached as aux is resolved afresh
SELECT 'cache-warm', json_extract(idem_claim('aux.L', 't', 'c', 'x', '{}', 'external', 'c1'), '$.decision') = 'admitted';
DETACH aux;
SELECT 'cache-detached', errmsg('SELECT idem_claim(''aux.L'', ''t'', ''c'', ''x'', ''{}'', ''external'', ''c1'')')
       = 'idem_claim: unknown ledger "aux.L": no table USING idempotency by that name';
ATTACH ':memory:' AS aux;
SELECT 'cache-reattached-empty', errmsg('SELECT idem_claim(''aux.L'', ''t'', ''c'', ''x'', ''{}'', ''external'', ''c1'')')
       = 'idem_claim: unknown ledger "aux.L": no table USING idempotency by that name';
CREATE VIRTUAL TABLE aux.L USING idempotency;
SELECT 'cache-reattached-new', json_extract(idem_claim('aux.L', 't', 'c', 'x', '{}', 'external', 'c1'), '$.attempt') = 1
       AND (SELECT count(*) FROM aux.L_rows) = 1;
-- RENAME: the old qualified name is unknown, the new one works
ALTER TABLE aux.L RENAME TO L2;
SELECT 'cache-renamed-old', errmsg('SELECT idem_claim(''aux.L'', ''t'', ''c'', ''x'', ''{}'', ''external'', ''c1'')')
       = 'idem_claim: unknown ledger "aux.L": no table USING idempotency by that name';
SELECT 'cache-renamed-new', json_extract(idem_claim('aux.L2', 't', 'c', 'x', '{}', 'external', 'c1'), '$.decision') = 'in_progress';
-- DROP: gone
SELECT json_extract(idem_settle('aux.L2', (SELECT token FROM aux.L2), 'failed', NULL), '$.status');
DROP TABLE aux.L2;
SELECT 'cache-dropped', errmsg('SELECT idem_purge(''aux.L2'', 0)') = 'idem_purge: unknown ledger "aux.L2": no table USING idempotency by that name';
-- an unqualified name cached for main is hidden by a temp table, then seen again
SELECT 'cache-main', json_extract(idem_claim('L', 't', 'c', 'x', '{}', 'external', 'k1'), '$.decision') = 'in_progress';
CREATE TEMP TABLE L(x);
SELECT 'cache-temp-shadow', errmsg('SELECT idem_claim(''L'', ''t'', ''c'', ''x'', ''{}'')') = 'idem_claim: unknown ledger "L": no table USING idempotency by that name';
SELECT 'cache-temp-shadow-qualified', json_extract(idem_claim('main.L', 't', 'c', 'x', '{}', 'external', 'k1'), '$.decision') = 'in_progress';
DROP TABLE temp.L;
SELECT 'cache-main-again', json_extract(idem_claim('L', 't', 'c', 'x', '{}', 'external', 'k1'), '$.decision') = 'in_progress';
-- an unqualified name that reached an attached schema follows a new ledger in main
CREATE VIRTUAL TABLE aux.M USING idempotency;
SELECT 'cache-aux-unqualified', json_extract(idem_claim('M', 't', 'c', 'x', '{}', 'external', 'm1'), '$.decision') = 'admitted'
       AND (SELECT count(*) FROM aux.M_rows) = 1;
CREATE VIRTUAL TABLE main.M USING idempotency;
SELECT 'cache-main-takes-over', json_extract(idem_claim('M', 't', 'c', 'x', '{}', 'external', 'm1'), '$.decision') = 'admitted'
       AND (SELECT count(*) FROM main.M_rows) = 1;
SELECT json_extract(idem_settle('main.M', (SELECT token FROM main.M), 'failed', NULL), '$.status');
DROP TABLE main.M;
SELECT 'cache-back-to-aux', json_extract(idem_claim('M', 't', 'c', 'x', '{}', 'external', 'm1'), '$.decision') = 'in_progress';
-- the cache holds four names: more names than that still resolve right
CREATE VIRTUAL TABLE n1 USING idempotency;
CREATE VIRTUAL TABLE n2 USING idempotency;
CREATE VIRTUAL TABLE n3 USING idempotency;
CREATE VIRTUAL TABLE aux.n4 USING idempotency;
SELECT 'cache-many', (SELECT count(*) FROM (VALUES ('n1'), ('main.n2'), ('"n3"'), ('aux.n4'), ('main.L'), ('n1'), ('aux.n4'))
       WHERE json_extract(idem_claim(column1, 't', 'c', 'x', '{}', 'external', 'many'), '$.decision') IN ('admitted', 'in_progress')) = 7;
SELECT 'cache-many-rows', (SELECT count(*) FROM n1_rows) = 1 AND (SELECT count(*) FROM n2_rows) = 1 AND (SELECT count(*) FROM n3_rows) = 1
       AND (SELECT count(*) FROM aux.n4_rows) = 1;
SELECT sqltest_clock(NULL);
