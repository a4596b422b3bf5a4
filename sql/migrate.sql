-- sql/migrate.sql: move a legacy nullable `operations` table into the
-- strict one of sql/operations.sql, in one transaction, losing nothing.
--
--   sqlite3 -bail app.db < sql/migrate.sql
--
-- -bail is required: it stops at the first error, and the open transaction
-- is then rolled back when the shell exits, so a failed migration leaves
-- the database exactly as it was (legacy table under its original name, no
-- new tables). Without -bail the shell would carry on after an error and
-- could commit half a migration. From Python, sqlite3's executescript()
-- also stops at the first error; roll back the connection afterwards.
-- Rehearse on a copy first (see docs/operating.md):
--
--   sqlite3 -bail app.db "VACUUM INTO 'rehearsal.db'"
--   sqlite3 -bail rehearsal.db < sql/migrate.sql
--
-- Steps, all inside BEGIN IMMEDIATE ... COMMIT (the write lock is taken
-- first, so no writer can slip a row in between the inventory and the copy):
--
--   1. inventory: the audit view of sql/audit.sql (the same block, byte for
--      byte) decides, per legacy row, whether it is valid and why not;
--   2. preserve: the legacy table is renamed to operations_legacy and kept,
--      never dropped or changed. ALTER TABLE ... RENAME also renames its
--      indexes, and (SQLite 3.26+) rewrites views, triggers and foreign keys
--      that named `operations` so that they now name operations_legacy:
--      review them and recreate what should point at the new table;
--   3. create the strict table: the same CREATE TABLE as sql/operations.sql
--      (tests/suites/40-sqlkit.sh checks the two are identical);
--   4. quarantine: every invalid row is copied unchanged into
--      operations_quarantine, whose value columns have no declared type, so
--      values keep their type and bytes (a BLOB stays a BLOB, an embedded NUL
--      stays). Each row carries its legacy rowid and the audit's reasons;
--   5. copy the valid rows into operations, keeping their legacy rowids
--      (a row's rowid is the same in operations_legacy and operations);
--   6. verify: every legacy row is in exactly one of operations and
--      operations_quarantine, with the same types and bytes, and
--      legacy = migrated + quarantined. A failed check raises a CHECK
--      constraint error (INSERT OR ROLLBACK), which rolls the transaction
--      back at once, so nothing is committed even if the runner would go on.
--
-- It prints one line: legacy_rows=N migrated_rows=N quarantined_rows=N.
-- Running it twice fails at step 2 (operations_legacy already exists) and
-- changes nothing.

BEGIN IMMEDIATE;

-- 1. inventory
-- ==== audit view: identical in sql/audit.sql and sql/migrate.sql ====
DROP VIEW IF EXISTS temp.operations_audit;
CREATE TEMP VIEW operations_audit(rowid, "column", reason) AS
WITH RECURSIVE
  part(rid, ord, col, v) AS (
    SELECT rowid, 1, 'tenant', tenant FROM operations
    UNION ALL
    SELECT rowid, 2, 'operation_id', operation_id FROM operations),
  graded(rid, ord, col, v, reason) AS (
    SELECT rid, ord, col, v, CASE
      WHEN v IS NULL THEN 'missing'
      WHEN typeof(v) <> 'text' THEN 'not text (' || typeof(v) || ')'
      WHEN instr(v, char(0)) > 0
        THEN printf('contains NUL (at character %d)', instr(v, char(0)))
      WHEN v = '' THEN 'blank (empty)'
      WHEN trim(v, char(9, 10, 11, 12, 13, 32, 133, 160, 5760, 8192, 8193, 8194,
                         8195, 8196, 8197, 8198, 8199, 8200, 8201, 8202, 8232,
                         8233, 8239, 8287, 12288)) = ''
        THEN 'blank (whitespace only)'
      WHEN length(v) > 128 THEN printf('too long (%d characters)', length(v))
      WHEN v GLOB '*[^A-Za-z0-9_-]*' THEN 'bad character'
    END
    FROM part),
  -- the first character outside the grammar, for the 'bad character' rows
  -- (at most 128 steps each: longer values stopped at 'too long')
  scan(rid, ord, v, i) AS (
    SELECT rid, ord, v, 1 FROM graded WHERE reason = 'bad character'
    UNION ALL
    SELECT rid, ord, v, i + 1 FROM scan WHERE substr(v, i, 1) GLOB '[A-Za-z0-9_-]'),
  finding(rid, ord, col, reason) AS (
    SELECT rid, ord, col, reason FROM graded
     WHERE reason IS NOT NULL AND reason <> 'bad character'
    UNION ALL
    SELECT s.rid, s.ord, g.col,
           printf('bad character U+%04X at character %d', unicode(substr(s.v, s.i, 1)), s.i)
      FROM scan s JOIN graded g ON g.rid = s.rid AND g.ord = s.ord
     WHERE NOT (substr(s.v, s.i, 1) GLOB '[A-Za-z0-9_-]')
    UNION ALL
    SELECT rowid, 3, 'payload',
           CASE WHEN payload IS NULL THEN 'missing'
                ELSE 'not text (' || typeof(payload) || ')' END
      FROM operations
     WHERE payload IS NULL OR typeof(payload) IN ('integer', 'real')
    UNION ALL
    SELECT r.rowid, 4, 'tenant, operation_id',
           printf('repeats the key of rowid %d%s, %s payload', e.rowid,
                  CASE WHEN r.tenant IS NULL OR r.operation_id IS NULL
                       THEN ' (a NULL part let UNIQUE admit it again)'
                       ELSE ' (would collide in the strict table)' END,
                  CASE WHEN r.payload IS e.payload AND typeof(r.payload) = typeof(e.payload)
                       THEN 'same' ELSE 'different' END)
      FROM operations r
      JOIN operations e
        ON e.rowid = (SELECT min(x.rowid) FROM operations x
                       WHERE x.tenant IS r.tenant COLLATE BINARY
                         AND x.operation_id IS r.operation_id COLLATE BINARY
                         AND x.rowid < r.rowid))
SELECT rid, col, reason FROM finding ORDER BY rid, ord;
-- ==== end audit view ====
CREATE TEMP TABLE migration_plan (
  legacy_rowid INTEGER PRIMARY KEY,
  reason TEXT NOT NULL
);
INSERT INTO temp.migration_plan(legacy_rowid, reason)
  SELECT rowid, group_concat("column" || ': ' || reason, '; ')
    FROM (SELECT rowid, "column", reason FROM temp.operations_audit)
   GROUP BY rowid;
-- dropped before the rename, so that ALTER TABLE has no temp view to rewrite
DROP VIEW temp.operations_audit;

-- 2. preserve
ALTER TABLE operations RENAME TO operations_legacy;

-- 3. the strict table: identical to sql/operations.sql
CREATE TABLE operations (
  tenant NOT NULL
    CONSTRAINT tenant_key_grammar CHECK (
      typeof(tenant) = 'text'
      AND length(tenant) BETWEEN 1 AND 128
      AND instr(tenant, char(0)) = 0
      AND tenant NOT GLOB '*[^A-Za-z0-9_-]*'),
  operation_id NOT NULL
    CONSTRAINT operation_id_key_grammar CHECK (
      typeof(operation_id) = 'text'
      AND length(operation_id) BETWEEN 1 AND 128
      AND instr(operation_id, char(0)) = 0
      AND operation_id NOT GLOB '*[^A-Za-z0-9_-]*'),
  payload TEXT NOT NULL,
  UNIQUE (tenant, operation_id)
);

-- 4. quarantine
CREATE TABLE operations_quarantine (
  legacy_rowid INTEGER PRIMARY KEY,
  tenant,
  operation_id,
  payload,
  reason TEXT NOT NULL
);
INSERT INTO operations_quarantine(legacy_rowid, tenant, operation_id, payload, reason)
  SELECT l.rowid, l.tenant, l.operation_id, l.payload, p.reason
    FROM operations_legacy AS l
    JOIN temp.migration_plan AS p ON p.legacy_rowid = l.rowid
   ORDER BY l.rowid;

-- 5. copy the valid rows
INSERT INTO operations(rowid, tenant, operation_id, payload)
  SELECT rowid, tenant, operation_id, payload
    FROM operations_legacy
   WHERE rowid NOT IN (SELECT legacy_rowid FROM temp.migration_plan)
   ORDER BY rowid;

-- ==== 6. verify ====
-- A row's fingerprint: type and bytes of each column (hex() reads the whole
-- value, past an embedded NUL).
CREATE TEMP TABLE migration_check (
  legacy INTEGER NOT NULL,
  migrated INTEGER NOT NULL,
  quarantined INTEGER NOT NULL,
  in_both INTEGER NOT NULL,
  in_neither INTEGER NOT NULL,
  changed INTEGER NOT NULL,
  CONSTRAINT counts_add_up CHECK (legacy = migrated + quarantined),
  CONSTRAINT each_row_in_one_table CHECK (in_both = 0 AND in_neither = 0),
  CONSTRAINT rows_unchanged CHECK (changed = 0)
);
INSERT OR ROLLBACK INTO temp.migration_check
  SELECT
    (SELECT count(*) FROM operations_legacy),
    (SELECT count(*) FROM operations),
    (SELECT count(*) FROM operations_quarantine),
    (SELECT count(*) FROM operations_legacy AS l
      WHERE l.rowid IN (SELECT rowid FROM operations)
        AND l.rowid IN (SELECT legacy_rowid FROM operations_quarantine)),
    (SELECT count(*) FROM operations_legacy AS l
      WHERE l.rowid NOT IN (SELECT rowid FROM operations)
        AND l.rowid NOT IN (SELECT legacy_rowid FROM operations_quarantine)),
    (SELECT count(*) FROM operations_legacy AS l
       LEFT JOIN operations AS o ON o.rowid = l.rowid
       LEFT JOIN operations_quarantine AS q ON q.legacy_rowid = l.rowid
      WHERE typeof(l.tenant) || ':' || hex(l.tenant) || '|'
            || typeof(l.operation_id) || ':' || hex(l.operation_id) || '|'
            || typeof(l.payload) || ':' || hex(l.payload)
            IS NOT CASE
              WHEN o.rowid IS NOT NULL THEN
                typeof(o.tenant) || ':' || hex(o.tenant) || '|'
                || typeof(o.operation_id) || ':' || hex(o.operation_id) || '|'
                || typeof(o.payload) || ':' || hex(o.payload)
              WHEN q.legacy_rowid IS NOT NULL THEN
                typeof(q.tenant) || ':' || hex(q.tenant) || '|'
                || typeof(q.operation_id) || ':' || hex(q.operation_id) || '|'
                || typeof(q.payload) || ':' || hex(q.payload)
            END);
SELECT printf('legacy_rows=%d migrated_rows=%d quarantined_rows=%d',
              legacy, migrated, quarantined)
  FROM temp.migration_check;
DROP TABLE temp.migration_check;
DROP TABLE temp.migration_plan;

COMMIT;
