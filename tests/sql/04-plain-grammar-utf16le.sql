-- The plain-SQL key grammar in a UTF-16le database. The encoding is
-- set by the first statement, before any table exists.
PRAGMA encoding = 'UTF-16le';
SELECT 'encoding-utf16le', (SELECT encoding FROM pragma_encoding) = 'UTF-16le';
-- a byte count through a BLOB cast is twice the length here: the rule
-- uses length() on the text instead
SELECT 'utf16le-blob-bytes', length(CAST('abc' AS BLOB)) = 6 AND length('abc') = 3;
SELECT 'utf16le-cast-valid', idem_valid_key(CAST(CAST('abc' AS BLOB) AS TEXT)) = 1;
-- the extension sees the same characters whatever the encoding
SELECT 'utf16le-key', idem_key('a', 'b', 'c', '{}') = 'idem1-a60019a0fd995630ac51badc4d3a952b';
SELECT 'utf16le-canonical-unicode', idem_canonical('{"é":"😀","a":"\u00e9"}') = '{"a":"é","é":"😀"}';
SELECT 'utf16le-check-key-message', errmsg('SELECT idem_check_key(''a'' || char(0xa0), ''tenant'')')
       = 'idem_check_key: tenant "a\xc2\xa0" has byte 0xc2 at offset 1; only A-Z a-z 0-9 _ - are allowed';
SELECT 'utf16le-check-key-nul', errmsg('SELECT idem_check_key(''ab'' || char(0) || ''c'', ''tenant'')')
       = 'idem_check_key: tenant "ab\x00c" has byte 0x00 at offset 2; only A-Z a-z 0-9 _ - are allowed';
SELECT 'utf16le-too-long', errmsg('SELECT idem_check_key(printf(''%.129c'', ''é''), ''tool'')')
       = 'idem_check_key: tool is 129 characters long, the limit is 128';
SELECT 'utf16le-canonical-bom', errmsg('SELECT idem_canonical(char(0xfeff) || ''{}'')')
       = 'idem_canonical: json: a leading byte order mark (U+FEFF) at byte 0 is not allowed';
SELECT 'utf16le-canonical-nul', idem_canonical('"a\u0000b"') = '"a\u0000b"'
   AND errcode('SELECT idem_canonical(''"a'' || char(0) || ''b"'')') = 1;
-- the grammar cases themselves run in every encoding: 03-plain-grammar-cases.sql
