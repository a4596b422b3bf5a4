-- sqltest: file
-- Every answer is JSON, whatever the names. A table or ledger name can
-- hold any bytes (SQL text built with CAST(x'..' AS TEXT)); the one JSON
-- builder writes well-formed UTF-8 as it is and each maximal ill-formed
-- subpart of anything else as U+FFFD. A new ledger must have a UTF-8 name
-- (CREATE VIRTUAL TABLE and ALTER TABLE ... RENAME refuse another); a
-- ledger given such a name outside the extension (here with PRAGMA
-- writable_schema, as in a file made before that rule) still answers
-- JSON, and so do a settle and its replays when a guarded table was
-- renamed to such a name.

SELECT sqltest_clock(1700000000000);

-- ---------------------------------------------------------------- the builder, seen through a message that quotes a name
-- "unknown ledger <JSON string>": ff; an overlong C0 AF; a truncated E2 82;
-- a surrogate ED A0 80; past U+10FFFF, F4 90 80 80; a truncated F0 90 8D;
-- stray continuations; well-formed text (€, U+1F600) as it is; a quote,
-- a control and a backslash escaped
CREATE TABLE bad(id INTEGER PRIMARY KEY, name TEXT, want_json TEXT, want TEXT);
INSERT INTO bad(name, want) VALUES
  (CAST(x'4cff' AS TEXT), 'L' || char(65533)),
  (CAST(x'4cc0af' AS TEXT), 'L' || char(65533, 65533)),
  (CAST(x'4ce2824c' AS TEXT), 'L' || char(65533) || 'L'),
  (CAST(x'4ceda080' AS TEXT), 'L' || char(65533, 65533, 65533)),
  (CAST(x'4cf4908080' AS TEXT), 'L' || char(65533, 65533, 65533, 65533)),
  (CAST(x'4cf0908d' AS TEXT), 'L' || char(65533)),
  (CAST(x'804cbfbf' AS TEXT), char(65533) || 'L' || char(65533, 65533)),
  (CAST(x'e282ac4cf09f9880' AS TEXT), char(8364) || 'L' || char(128512));
UPDATE bad SET want_json = '"' || want || '"';
INSERT INTO bad(name, want_json, want) VALUES
  (CAST(x'4c22ff0a5c' AS TEXT), '"L\"' || char(65533) || '\u000a\\"', 'L"' || char(65533, 10) || '\');
CREATE TABLE got AS SELECT id, errmsg('SELECT idem_claim(' || quote(name) || ', ''t'', ''c'', ''x'', ''{}'')') AS msg FROM bad;
SELECT 'builder-message', (SELECT count(*) FROM bad JOIN got USING (id)
   WHERE msg = 'idem_claim: unknown ledger ' || want_json || ': no table USING idempotency by that name') = 9;
-- the quoted name is a JSON string that decodes to the replaced text
SELECT 'builder-json', (SELECT count(*) FROM bad JOIN got USING (id)
   WHERE json_valid(substr(msg, 28, instr(msg, ': no table USING') - 28))
     AND json_extract('[' || substr(msg, 28, instr(msg, ': no table USING') - 28) || ']', '$[0]') = want) = 9;

-- ---------------------------------------------------------------- a new ledger's name must be UTF-8
SELECT 'create-refused', errmsg('CREATE VIRTUAL TABLE "L' || CAST(x'ff' AS TEXT) || '" USING idempotency')
       = 'idempotency: cannot create ledger "L' || char(65533) || '": the name is not valid UTF-8 (byte 0xff at offset 1); a ledger''s name must be UTF-8 text';
SELECT 'create-refused-nothing', (SELECT count(*) FROM sqlite_schema WHERE name GLOB 'L*') = 0;
SELECT 'create-refused-surrogate', errmsg('CREATE VIRTUAL TABLE "ab' || CAST(x'eda080' AS TEXT) || '" USING idempotency')
       = 'idempotency: cannot create ledger "ab' || char(65533, 65533, 65533) || '": the name is not valid UTF-8 (byte 0xed at offset 2); a ledger''s name must be UTF-8 text';
CREATE VIRTUAL TABLE "Lé" USING idempotency;
SELECT 'create-utf8', json_extract(idem_claim('Lé', 't', 'c', 'x', '{}'), '$.decision') = 'admitted';
CREATE VIRTUAL TABLE R USING idempotency;
SELECT 'rename-refused', errmsg('ALTER TABLE R RENAME TO "R' || CAST(x'c0' AS TEXT) || '"')
       = 'idempotency: cannot rename a ledger to "R' || char(65533) || '": the name is not valid UTF-8 (byte 0xc0 at offset 1); a ledger''s name must be UTF-8 text';
SELECT 'rename-refused-kept', (SELECT group_concat(name, ' ') FROM (SELECT name FROM sqlite_schema WHERE type = 'table' AND name GLOB 'R*' ORDER BY name))
       = 'R R_guards R_members R_meta R_rows R_targets';
SELECT 'rename-refused-works', json_extract(idem_claim('R', 't', 'c', 'x', '{}'), '$.decision') = 'admitted';
ALTER TABLE R RENAME TO "Rü";
SELECT 'rename-utf8', json_extract(idem_claim('Rü', 't', 'c', 'x', '{}'), '$.decision') = 'in_progress'
       AND (SELECT count(*) FROM "Rü") = 1;

-- ---------------------------------------------------------------- a ledger whose name is not UTF-8, made outside the extension
CREATE VIRTUAL TABLE zzledger USING idempotency;
SELECT json_extract(idem_settle('zzledger', json_extract(idem_claim('zzledger', 't', 'c', 'x', '{}', 'external', 'op-1'), '$.token'), 'succeeded', '{"ok":1}'), '$.status');
PRAGMA writable_schema = ON;
UPDATE sqlite_schema SET name = replace(name, 'zzledger', 'zz' || CAST(x'ff' AS TEXT)),
  tbl_name = replace(tbl_name, 'zzledger', 'zz' || CAST(x'ff' AS TEXT)),
  sql = replace(sql, 'zzledger', 'zz' || CAST(x'ff' AS TEXT))
  WHERE name GLOB '*zzledger*' OR tbl_name GLOB '*zzledger*';
PRAGMA writable_schema = RESET;
PRAGMA writable_schema = OFF;
SELECT 'legacy-renamed', (SELECT count(*) FROM sqlite_schema WHERE CAST(name AS BLOB) = x'7a7aff') = 1;
-- (each answer is taken once, in a MATERIALIZED CTE: a function that
-- writes cannot run inside an INSERT)
WITH a(v) AS MATERIALIZED (SELECT idem_upgrade('zz' || CAST(x'ff' AS TEXT)))
SELECT 'legacy-upgrade-json', json_valid(v) AND json_extract(v, '$.ledger') = 'zz' || char(65533)
       AND json_extract(v, '$.from_format') = json_extract(v, '$.format') AND json_extract(v, '$.triggers_created') = 0 FROM a;
WITH a(v) AS MATERIALIZED (SELECT idem_claim('zz' || CAST(x'ff' AS TEXT), 't', 'c', 'x', '{}', 'external', 'op-1'))
SELECT 'legacy-replay', json_valid(v) AND json_extract(v, '$.decision') = 'replay' AND json_extract(v, '$.result') = '{"ok":1}' FROM a;
WITH c(v) AS MATERIALIZED (SELECT idem_claim('zz' || CAST(x'ff' AS TEXT), 't', 'c', 'x', '{}', 'external', 'op-2')),
     d(v) AS MATERIALIZED (SELECT idem_settle('zz' || CAST(x'ff' AS TEXT), json_extract(c.v, '$.token'), 'failed', '{"e":1}') FROM c)
SELECT 'legacy-claim-settle', json_valid(c.v) AND json_extract(c.v, '$.decision') = 'admitted'
       AND json_valid(d.v) AND json_extract(d.v, '$.status') = 'failed' FROM c, d;
SELECT 'legacy-select', errmsg('SELECT count(*) FROM "zz' || CAST(x'ff' AS TEXT) || '"') IS NULL;

-- ---------------------------------------------------------------- a guarded table renamed to a name that is not UTF-8
CREATE VIRTUAL TABLE G USING idempotency;
CREATE TABLE orders(id INTEGER PRIMARY KEY, tenant, op_key);
SELECT idem_guard('G', 'orders', 'op_key', 'tenant');
SELECT json_extract(idem_claim('G', 't', 'c', 'x', '{}', 'local', 'op-1'), '$.decision');
INSERT INTO orders(tenant, op_key) VALUES ('t', 'op-1');
SELECT 'guarded-rename', errmsg('ALTER TABLE orders RENAME TO "o' || CAST(x'ff' AS TEXT) || '"') IS NULL;
WITH a(v) AS MATERIALIZED (SELECT idem_settle('G', (SELECT token FROM G WHERE key = 'op-1'), 'succeeded', '{}'))
SELECT 'guarded-settle', v = '{"key":"op-1","status":"succeeded","attempt":1,"durable":true,"settled_at":1700000000000,"members":[{"table":"o' || char(65533) || '","rowid":1}]}' FROM a;
WITH a(v) AS MATERIALIZED (SELECT idem_claim('G', 't', 'c', 'x', '{}', 'local', 'op-1'))
SELECT 'guarded-replay', json_valid(v) AND json_extract(v, '$.decision') = 'replay'
       AND json_extract(v, '$.members') = '[{"table":"o' || char(65533) || '","rowid":1}]' FROM a;
SELECT 'guarded-replay-again', json_extract(idem_claim('G', 't', 'c', 'x', '{}', 'local', 'op-1'), '$.decision') = 'replay';
SELECT 'guarded-select', json_valid(members) FROM G WHERE key = 'op-1';
