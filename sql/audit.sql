-- sql/audit.sql: inventory of a legacy `operations` table before migration.
--
--   sqlite3 -bail -readonly app.db < sql/audit.sql
--
-- Lists every row of `operations` whose key parts are missing, blank or
-- malformed under the key grammar of docs/keys.md, "Key grammar" (the rule
-- sql/operations.sql enforces), one line per row and column:
--
--   rowid | column | reason
--
-- Plain SQL, no extension. The database file is not written: the only
-- object created is the TEMP view operations_audit (in the connection's
-- temp schema), so the script also runs on a -readonly connection, and the
-- view can be queried afterwards in the same session. No output means
-- every row would migrate.
--
-- The legacy table is the seed's:
--   CREATE TABLE operations (tenant TEXT, operation_id TEXT,
--                            payload TEXT NOT NULL, UNIQUE (tenant, operation_id));
-- Other shapes work as long as the three columns exist.
--
-- Reasons, per column, the first that applies in this order:
--   missing                            NULL
--   not text (integer|real|blob)       a value of another type. In a TEXT
--                                      column, affinity has already turned
--                                      the integer 5 into the text '5', which
--                                      is a valid key, and the real 1.5 into
--                                      '1.5' (bad character '.'); only a BLOB
--                                      keeps its type there
--   contains NUL (at character N)      an embedded U+0000
--   blank (empty)                      ''
--   blank (whitespace only)            only Unicode White_Space characters
--                                      (space, tab, newlines, NBSP, U+3000, ...)
--   too long (N characters)            more than 128 characters
--   bad character U+XXXX at character N   the first character outside
--                                      A-Z a-z 0-9 _ - (surrounding spaces,
--                                      a tab, non-ASCII letters, '.', ...)
-- and for the payload (not a key part, but the strict table needs it):
--   payload | missing                  NULL
--   payload | not text (integer|real)  TEXT affinity would change its type
-- and, per row, column 'tenant, operation_id':
--   repeats the key of rowid N ...     an earlier row has the same tenant and
--                                      operation_id (compared with IS, so NULL
--                                      equals NULL). In the seed's table UNIQUE
--                                      already holds for complete keys, so this
--                                      only reports rows that a NULL part let
--                                      in twice (the seed's counterexample);
--                                      they are quarantined anyway, and each
--                                      repeat is a possible duplicated effect
--                                      to reconcile. In a legacy table without
--                                      UNIQUE it also reports complete keys
--                                      that would collide in the strict table:
--                                      the first row migrates, the repeats are
--                                      quarantined.
--
-- Row ids name rows of the database the audit ran on. VACUUM (and VACUUM
-- INTO) may renumber the rowids of a table without INTEGER PRIMARY KEY, so
-- audit a rehearsal copy again rather than reusing the original's list.
--
-- The block below is byte-identical in sql/audit.sql and sql/migrate.sql
-- (checked by tests/suites/40-sqlkit.sh), so the migration quarantines
-- exactly the rows this audit lists, with the same reasons.

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

SELECT rowid, "column", reason FROM temp.operations_audit;
