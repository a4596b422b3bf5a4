-- The plain-SQL key grammar in a UTF-8 database.
SELECT 'encoding-utf8', (SELECT encoding FROM pragma_encoding) = 'UTF-8';
-- BLOB casts are read in the database encoding: x'610062' is "a", NUL, "b"
SELECT 'utf8-cast-nul', idem_valid_key(CAST(x'610062' AS TEXT)) = 0
   AND (typeof(CAST(x'610062' AS TEXT)) = 'text' AND length(CAST(x'610062' AS TEXT)) BETWEEN 1 AND 128
        AND instr(CAST(x'610062' AS TEXT), char(0)) = 0) = 0;
SELECT 'utf8-cast-valid', idem_valid_key(CAST(x'616263' AS TEXT)) = 1;
SELECT 'utf8-blob-bytes', length(CAST('abc' AS BLOB)) = 3;
SELECT 'utf8-key', idem_key('a', 'b', 'c', '{}') = 'idem1-a60019a0fd995630ac51badc4d3a952b';
-- the grammar cases themselves run in every encoding: 03-plain-grammar-cases.sql
