-- idem_check_key(v, label): returns v unchanged when it is a valid key
-- component; otherwise fails with SQLITE_CONSTRAINT (19) and a message
-- that names the label and the exact reason.

-- returns the value itself
SELECT 'returns-value', idem_check_key('abc-1', 'tenant') = 'abc-1';
SELECT 'returns-text', typeof(idem_check_key('abc', 'tenant')) = 'text';
SELECT 'returns-128', idem_check_key(printf('%.128c', 'z'), 'tenant') = printf('%.128c', 'z');
SELECT 'deterministic', idem_check_key('k', 'l') = idem_check_key('k', 'l');

-- missing
SELECT 'null-message', errmsg('SELECT idem_check_key(NULL, ''tenant'')') = 'idem_check_key: tenant is missing (NULL)';
SELECT 'null-code', errcode('SELECT idem_check_key(NULL, ''tenant'')') = 19;
-- wrong type, and which
SELECT 'integer-message', errmsg('SELECT idem_check_key(42, ''tenant'')') = 'idem_check_key: tenant must be TEXT, got INTEGER';
SELECT 'integer-code', errcode('SELECT idem_check_key(42, ''tenant'')') = 19;
SELECT 'real-message', errmsg('SELECT idem_check_key(4.5, ''conversation'')') = 'idem_check_key: conversation must be TEXT, got REAL';
SELECT 'real-code', errcode('SELECT idem_check_key(4.5, ''conversation'')') = 19;
SELECT 'blob-message', errmsg('SELECT idem_check_key(x''6b6579'', ''tool'')') = 'idem_check_key: tool must be TEXT, got BLOB';
SELECT 'blob-code', errcode('SELECT idem_check_key(x''6b6579'', ''tool'')') = 19;
-- empty
SELECT 'empty-message', errmsg('SELECT idem_check_key('''', ''tenant'')') = 'idem_check_key: tenant is empty';
SELECT 'empty-code', errcode('SELECT idem_check_key('''', ''tenant'')') = 19;
-- too long, with the length in characters
SELECT 'too-long-message', errmsg('SELECT idem_check_key(printf(''%.129c'', ''a''), ''tenant'')')
       = 'idem_check_key: tenant is 129 characters long, the limit is 128';
SELECT 'too-long-code', errcode('SELECT idem_check_key(printf(''%.129c'', ''a''), ''tenant'')') = 19;
SELECT 'too-long-counts-characters', errmsg('SELECT idem_check_key(printf(''%.200c'', ''é''), ''tool'')')
       = 'idem_check_key: tool is 200 characters long, the limit is 128';
SELECT 'too-long-wins-over-bad-byte', errmsg('SELECT idem_check_key('' '' || printf(''%.300c'', ''a''), ''tool'')')
       = 'idem_check_key: tool is 301 characters long, the limit is 128';
-- 128 characters of two bytes each: not too long, but a bad byte
SELECT 'non-ascii-128-is-bad-byte', errmsg('SELECT idem_check_key(printf(''%.128c'', ''é''), ''tool'')')
       GLOB 'idem_check_key: tool "\xc3\xa9*..." has byte 0xc3 at offset 0; only A-Z a-z 0-9 _ - are allowed';
-- bad byte: the value (escaped), the byte and its offset
SELECT 'space-message', errmsg('SELECT idem_check_key(''a b'', ''tenant'')')
       = 'idem_check_key: tenant "a b" has byte 0x20 at offset 1; only A-Z a-z 0-9 _ - are allowed';
SELECT 'space-code', errcode('SELECT idem_check_key(''a b'', ''tenant'')') = 19;
SELECT 'colon-message', errmsg('SELECT idem_check_key(''tenant:a'', ''tenant'')')
       = 'idem_check_key: tenant "tenant:a" has byte 0x3a at offset 6; only A-Z a-z 0-9 _ - are allowed';
SELECT 'tab-message', errmsg('SELECT idem_check_key(''ab'' || char(9), ''tenant'')')
       = 'idem_check_key: tenant "ab\x09" has byte 0x09 at offset 2; only A-Z a-z 0-9 _ - are allowed';
SELECT 'newline-message', errmsg('SELECT idem_check_key(char(10) || ''x'', ''tenant'')')
       = 'idem_check_key: tenant "\x0ax" has byte 0x0a at offset 0; only A-Z a-z 0-9 _ - are allowed';
SELECT 'nbsp-message', errmsg('SELECT idem_check_key(''a'' || char(0xa0), ''tenant'')')
       = 'idem_check_key: tenant "a\xc2\xa0" has byte 0xc2 at offset 1; only A-Z a-z 0-9 _ - are allowed';
SELECT 'ideographic-space-message', errmsg('SELECT idem_check_key(char(0x3000) || ''a'', ''tool'')')
       = 'idem_check_key: tool "\xe3\x80\x80a" has byte 0xe3 at offset 0; only A-Z a-z 0-9 _ - are allowed';
SELECT 'bom-message', errmsg('SELECT idem_check_key(char(0xfeff) || ''a'', ''tool'')')
       = 'idem_check_key: tool "\xef\xbb\xbfa" has byte 0xef at offset 0; only A-Z a-z 0-9 _ - are allowed';
SELECT 'nul-message', errmsg('SELECT idem_check_key(''ab'' || char(0) || ''c'', ''tenant'')')
       = 'idem_check_key: tenant "ab\x00c" has byte 0x00 at offset 2; only A-Z a-z 0-9 _ - are allowed';
SELECT 'nul-first-message', errmsg('SELECT idem_check_key(char(0) || ''abc'', ''tenant'')')
       = 'idem_check_key: tenant "\x00abc" has byte 0x00 at offset 0; only A-Z a-z 0-9 _ - are allowed';
SELECT 'nul-cast-message', errmsg('SELECT idem_check_key(CAST(x''610062'' AS TEXT), ''tenant'')')
       = 'idem_check_key: tenant "a\x00b" has byte 0x00 at offset 1; only A-Z a-z 0-9 _ - are allowed';
SELECT 'nul-code', errcode('SELECT idem_check_key(''ab'' || char(0), ''tenant'')') = 19;
SELECT 'quote-escaped', errmsg('SELECT idem_check_key(''a"b\c'', ''tenant'')')
       = 'idem_check_key: tenant "a\x22b\x5cc" has byte 0x22 at offset 1; only A-Z a-z 0-9 _ - are allowed';
SELECT 'invalid-utf8-message', errmsg('SELECT idem_check_key(CAST(x''61ff'' AS TEXT), ''tenant'')')
       = 'idem_check_key: tenant "a\xff" has byte 0xff at offset 1; only A-Z a-z 0-9 _ - are allowed';
-- a long bad value is clipped to 40 bytes in the message
SELECT 'long-value-clipped', errmsg('SELECT idem_check_key(printf(''%.100c'', ''a'') || ''.'', ''tenant'')')
       = 'idem_check_key: tenant "' || printf('%.40c', 'a') || '..." has byte 0x2e at offset 100; only A-Z a-z 0-9 _ - are allowed';
SELECT 'first-bad-byte-reported', errmsg('SELECT idem_check_key(''ab.c d'', ''tenant'')')
       = 'idem_check_key: tenant "ab.c d" has byte 0x2e at offset 2; only A-Z a-z 0-9 _ - are allowed';

-- the label is echoed as given
SELECT 'label-echo', errmsg('SELECT idem_check_key('''', ''operation_id'')') = 'idem_check_key: operation_id is empty';
SELECT 'label-echo-unicode', errmsg('SELECT idem_check_key(NULL, ''clé du client'')') = 'idem_check_key: clé du client is missing (NULL)';
SELECT 'label-not-checked-when-valid', idem_check_key('ok', '') = 'ok';
-- a label that is not TEXT is replaced by "key"
SELECT 'label-null-says-key', errmsg('SELECT idem_check_key('''', NULL)') = 'idem_check_key: key is empty';
SELECT 'label-integer-says-key', errmsg('SELECT idem_check_key('''', 7)') = 'idem_check_key: key is empty';

-- arity
SELECT 'arity-1', errmsg('SELECT idem_check_key(''a'')') = 'wrong number of arguments to function idem_check_key()';

-- in a CHECK constraint the function's own message and code come through
CREATE TABLE ops(tenant CHECK (idem_check_key(tenant, 'tenant') IS tenant));
SELECT 'check-ok', errmsg('INSERT INTO ops VALUES (''acme'')') IS NULL;
SELECT 'check-message', errmsg('INSERT INTO ops VALUES (''ac me'')')
       = 'idem_check_key: tenant "ac me" has byte 0x20 at offset 2; only A-Z a-z 0-9 _ - are allowed';
SELECT 'check-code', errcode('INSERT INTO ops VALUES (NULL)') = 19;
SELECT 'check-refuses-integer', errmsg('INSERT INTO ops VALUES (7)') = 'idem_check_key: tenant must be TEXT, got INTEGER';
SELECT 'check-one-row', (SELECT count(*) FROM ops) = 1;
