-- tests/sqlkit/legacy-fixture.sql: a legacy database with the seed's
-- nullable `operations` table and a mix of good and bad rows, for the
-- audit and migration tests of tests/suites/40-sqlkit.sh.
--
--   sqlite3 -bail legacy.db < tests/sqlkit/legacy-fixture.sql
--
-- Expected audit: tests/sqlkit/legacy-audit.expected. Row 4 is deleted, so
-- the rowids have a gap (the migration must keep the legacy rowids, not
-- renumber them).
CREATE TABLE operations (
    tenant TEXT,
    operation_id TEXT,
    payload TEXT NOT NULL,
    UNIQUE (tenant, operation_id)
);
INSERT INTO operations(rowid, tenant, operation_id, payload) VALUES
  (1, 'tenant-a', 'op-1', 'first request'),
  (2, 'tenant-b', 'op-1', 'same id, another tenant'),
  -- the seed's counterexample: NULLs are distinct, so both rows got in
  (3, 'tenant-a', NULL, 'same-request'),
  (4, 'tenant-a', 'deleted', 'removed below'),
  (5, 'tenant-a', NULL, 'same-request'),
  (6, NULL, 'op-1', 'missing tenant'),
  (7, NULL, 'op-1', 'missing tenant, other payload'),
  (8, '', 'op-2', 'empty tenant'),
  (9, 'tenant-a', '', 'empty id'),
  (10, ' ', 'op-3', 'space tenant'),
  (11, 'tenant-a', char(9), 'tab id'),
  (12, 'tenant-a', ' op-4', 'leading space'),
  (13, 'tenant-a', 'op-5' || char(9), 'trailing tab'),
  (14, 'tenant-a', char(160), 'nbsp id'),
  (15, 'tenant-a', 'caf' || char(233), 'non-ascii e-acute'),
  (16, 'tenant-a', 'op' || char(12288) || '6', 'ideographic space'),
  (17, 'tenant-a', 'a' || char(0) || 'b', 'embedded nul'),
  (18, 'tenant-a', printf('%.129c', 'x'), '129 characters'),
  (19, 'tenant-a', printf('%.128c', 'y'), '128 characters: valid'),
  -- TEXT affinity stores the integer 5 as the text '5': a valid key
  (20, 'tenant-a', 5, 'integer became text'),
  -- and the real 1.5 as the text '1.5': '.' is outside the grammar
  (21, 'tenant-a', 1.5, 'real became text'),
  -- a BLOB keeps its type in a TEXT column
  (22, 'tenant-a', x'6162', 'blob id'),
  (23, 'tenant-c', 'op-7', x'00ff10'),
  (24, 'tenant-c', 'op-8', 'payload with' || char(0) || 'nul'),
  (25, NULL, NULL, 'both missing'),
  (26, NULL, NULL, 'both missing'),
  (27, 'Tenant_A', 'OP-1', 'case differs: another key');
DELETE FROM operations WHERE rowid = 4;
