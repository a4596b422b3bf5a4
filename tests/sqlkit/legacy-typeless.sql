-- tests/sqlkit/legacy-typeless.sql: another legacy shape, columns without a
-- declared type and no UNIQUE, so values keep their type (integer and real
-- keys, a non-text payload) and complete keys can repeat: the audit must
-- report them and the migration must quarantine all but the first.
--
--   sqlite3 -bail legacy.db < tests/sqlkit/legacy-typeless.sql
CREATE TABLE operations (tenant, operation_id, payload);
INSERT INTO operations(rowid, tenant, operation_id, payload) VALUES
  (1, 't', 'a', 'p1'),
  (2, 't', 'a', 'p1'),
  (3, 't', 'a', 'p2'),
  (4, 't', 5, 'integer id'),
  (5, 't', 1.5, 'real id'),
  (6, 't', 'b', NULL),
  (7, 't', 'c', 42),
  (8, 5, 'd', 'integer tenant'),
  (9, 't', 'e', x'ff00');
