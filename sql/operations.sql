-- sql/operations.sql: the seed's `operations` table, repaired and hardened
-- in plain SQL. No extension is needed to create, read or write it.
--
--   sqlite3 -bail app.db < sql/operations.sql
--
-- Guarantees, enforced by SQLite itself on every INSERT and UPDATE, whoever
-- the writer is (an adapter that skipped its own validation, a shell, a
-- migration):
--
--   * tenant and operation_id are present (NOT NULL) and follow the key
--     grammar of docs/keys.md, "Key grammar": SQL TEXT (no INTEGER, REAL or BLOB,
--     and no coercion), 1 to 128 characters, only A-Z a-z 0-9 _ -. Nothing
--     is trimmed, case-folded or normalised: what is stored is what was
--     given. instr(x, char(0)) refuses an embedded NUL, which GLOB alone
--     does not see (it stops at the NUL); length() counts characters, so
--     the rule holds in UTF-8 and UTF-16 databases alike.
--   * an operation id is unique within its tenant: UNIQUE(tenant,
--     operation_id). Because neither part can be NULL, "NULLs are distinct"
--     no longer lets a missing id repeat. The same id in another tenant is
--     another operation.
--   * payload is present (NOT NULL).
--
-- Decisions:
--
--   * The key columns are declared WITHOUT a type. A TEXT column has TEXT
--     affinity, which turns the integer 5 into the text '5' before any CHECK
--     runs, so typeof(x)='text' could never refuse it. A column without a
--     type keeps every value as given, and the CHECK sees the real type.
--     A STRICT table with ANY columns would do the same, but STRICT needs
--     SQLite 3.37+ to even open the file; this form works with any SQLite
--     a legacy database may still be read with, and keeps the table an
--     ordinary rowid table that idem_guard() can guard.
--   * The CHECK constraints are named, so a refusal says which column broke
--     the grammar: "CHECK constraint failed: operation_id_key_grammar".
--   * CREATE TABLE, not CREATE TABLE IF NOT EXISTS: this is a migration
--     step. If a table named operations already exists (for instance the
--     seed's nullable one), the script must fail loudly instead of leaving
--     the weak table in place and reporting success. To convert an existing
--     table, use sql/audit.sql and sql/migrate.sql.
--
-- sql/migrate.sql creates this same table; tests/suites/40-sqlkit.sh checks
-- that both produce byte-identical schema entries.

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
