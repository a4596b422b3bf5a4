-- idem_fingerprint(json) = lower-hex XXH3-128 of canonical(json)
-- idem_key(tenant, conversation, tool, args)
--   = 'idem1-' || lower-hex XXH3-128(tenant ':' conversation ':' tool ':' canonical(args))
-- Expected digests were computed with `xxhsum -H2`, not with the extension.

-- fingerprint
SELECT 'fp-empty-object', idem_fingerprint('{}') = 'dc7048f8f8747f561349cde127705c16';
SELECT 'fp-of-canonical', idem_fingerprint(' { } ') = 'dc7048f8f8747f561349cde127705c16';
SELECT 'fp-unicode-numbers', idem_fingerprint('{"n":[1E30,0.10],"a":"\u00e9"}') = '38eae1337df64b0f5a26f3e88e7866f4';
SELECT 'fp-shape', length(idem_fingerprint('[1]')) = 32 AND idem_fingerprint('[1]') NOT GLOB '*[^0-9a-f]*';
SELECT 'fp-text', typeof(idem_fingerprint('1')) = 'text';
SELECT 'fp-is-valid-key', idem_valid_key(idem_fingerprint('{"x":1}')) = 1;
SELECT 'fp-spellings-agree', idem_fingerprint('{"a":1,"b":[1.0,2]}') = idem_fingerprint('{"b":[1,2.0e0],"a":1}');
SELECT 'fp-differs-on-value', idem_fingerprint('{"a":1}') <> idem_fingerprint('{"a":2}');
SELECT 'fp-differs-on-type', idem_fingerprint('{"a":1}') <> idem_fingerprint('{"a":"1"}');
SELECT 'fp-differs-on-nul', idem_fingerprint('"a\u0000b"') <> idem_fingerprint('"a"');
SELECT 'fp-differs-array-order', idem_fingerprint('[1,2]') <> idem_fingerprint('[2,1]');
SELECT 'fp-deterministic', idem_fingerprint('{"q":[true]}') = idem_fingerprint('{"q":[true]}');
SELECT 'fp-null-message', errmsg('SELECT idem_fingerprint(NULL)') = 'idem_fingerprint: json is NULL; a missing argument list is not {}';
SELECT 'fp-null-code', errcode('SELECT idem_fingerprint(NULL)') = 1;
SELECT 'fp-integer-message', errmsg('SELECT idem_fingerprint(7)') = 'idem_fingerprint: json must be TEXT holding JSON, got INTEGER';
SELECT 'fp-real-message', errmsg('SELECT idem_fingerprint(0.5)') = 'idem_fingerprint: json must be TEXT holding JSON, got REAL';
SELECT 'fp-blob-message', errmsg('SELECT idem_fingerprint(x''7b7d'')') = 'idem_fingerprint: json must be TEXT holding JSON, got BLOB';
SELECT 'fp-invalid-message', errmsg('SELECT idem_fingerprint(''{"a":1,"a":2}'')') = 'idem_fingerprint: json: duplicate member name "a" in the object at byte 0';
SELECT 'fp-invalid-code', errcode('SELECT idem_fingerprint(''[1,]'')') = 1;
SELECT 'fp-big-integer', errmsg('SELECT idem_fingerprint(''[9007199254740993]'')')
       = 'idem_fingerprint: json: integer 9007199254740993 at byte 1 is beyond 2^53-1 and would lose precision; send it as a string';
SELECT 'fp-size-cap', errcode('SELECT idem_fingerprint(''"'' || hex(zeroblob(8388608)) || ''"'')') = 18;
SELECT 'fp-size-cap-message', errmsg('SELECT idem_fingerprint(''"'' || hex(zeroblob(8388608)) || ''"'')')
       = 'idem_fingerprint: json: input is 16777218 bytes, the limit is 16777216';
SELECT 'fp-depth', errmsg('SELECT idem_fingerprint(printf(''%.300c'', ''[''))') = 'idem_fingerprint: json: nesting deeper than 256 levels at byte 256';
SELECT 'fp-arity', errmsg('SELECT idem_fingerprint()') = 'wrong number of arguments to function idem_fingerprint()';

-- key: known values
SELECT 'key-known-empty-args', idem_key('a', 'b', 'c', '{}') = 'idem1-a60019a0fd995630ac51badc4d3a952b';
SELECT 'key-known-invoice', idem_key('acme', 'conv-1', 'create_invoice', '{"currency":"EUR","amount":100}')
       = 'idem1-4257073ab9902f2ce55b370ab3000e94';
SELECT 'key-known-nested', idem_key('t1', 'c1', 'send_email', '{ "b" : [ true , null ] , "a" : 1.0 }')
       = 'idem1-e5a477b13cc9e5d77f62db5b675a1b6e';
SELECT 'key-known-nul-string', idem_key('acme', 'conv-1', 'create_invoice', '"a\u0000b"') = 'idem1-ba023ae73a4f617f06e3804b878738ae';
SELECT 'key-known-128-components',
       idem_key(printf('%.128c', 'x'), printf('%.128c', 'x'), printf('%.128c', 'x'), '[ ]') = 'idem1-6a53ec5dfb698ddc79c9179242f8c4a2';

-- key: shape
SELECT 'key-shape', idem_key('a', 'b', 'c', '[1]') GLOB 'idem1-[0-9a-f]*'
   AND idem_key('a', 'b', 'c', '[1]') NOT GLOB 'idem1-*[^0-9a-f]*';
SELECT 'key-length-38', length(idem_key('a', 'b', 'c', '[1]')) = 38;
SELECT 'key-is-valid-key', idem_valid_key(idem_key('a', 'b', 'c', '[1]')) = 1;
SELECT 'key-passes-check-key', idem_check_key(idem_key('a', 'b', 'c', '[1]'), 'operation_id') = idem_key('a', 'b', 'c', '[1]');
SELECT 'key-text', typeof(idem_key('a', 'b', 'c', '1')) = 'text';
SELECT 'key-suffix-is-hash-of-framed', substr(idem_key('a', 'b', 'c', '{"x":1}'), 7) <> idem_fingerprint('{"x":1}');

-- two spellings of one call are one key
SELECT 'key-spelling-order', idem_key('acme', 'c1', 'pay', '{"to":"bob","amount":5}') = idem_key('acme', 'c1', 'pay', '{"amount":5,"to":"bob"}');
SELECT 'key-spelling-whitespace', idem_key('acme', 'c1', 'pay', '{"a":[1,2]}') = idem_key('acme', 'c1', 'pay', ' {' || char(10) || ' "a" : [ 1 , 2 ] } ');
SELECT 'key-spelling-numbers', idem_key('acme', 'c1', 'pay', '{"a":1,"b":0.5,"c":1e30}') = idem_key('acme', 'c1', 'pay', '{"c":1E+30,"b":5e-1,"a":1.00}');
SELECT 'key-spelling-escapes', idem_key('acme', 'c1', 'pay', '{"n":"é/"}') = idem_key('acme', 'c1', 'pay', '{"\u006e":"\u00E9\/"}');
SELECT 'key-spelling-minus-zero', idem_key('acme', 'c1', 'pay', '[0]') = idem_key('acme', 'c1', 'pay', '[-0.0]');

-- different tenant, conversation, tool or args give different keys
SELECT 'key-differs-tenant', idem_key('acme', 'c1', 'pay', '{}') <> idem_key('umbrella', 'c1', 'pay', '{}');
SELECT 'key-differs-conversation', idem_key('acme', 'c1', 'pay', '{}') <> idem_key('acme', 'c2', 'pay', '{}');
SELECT 'key-differs-tool', idem_key('acme', 'c1', 'pay', '{}') <> idem_key('acme', 'c1', 'refund', '{}');
SELECT 'key-differs-args', idem_key('acme', 'c1', 'pay', '{"amount":5}') <> idem_key('acme', 'c1', 'pay', '{"amount":6}');
SELECT 'key-differs-args-type', idem_key('acme', 'c1', 'pay', '{"amount":5}') <> idem_key('acme', 'c1', 'pay', '{"amount":"5"}');
SELECT 'key-differs-case', idem_key('acme', 'c1', 'pay', '{}') <> idem_key('ACME', 'c1', 'pay', '{}');
-- the framing cannot be shifted: moving a hyphen between parts changes the key
SELECT 'key-differs-framing', idem_key('a-b', 'c', 'd', '{}') <> idem_key('a', 'b-c', 'd', '{}');
SELECT 'key-differs-empty-vs-null', idem_key('a', 'b', 'c', '{}') <> idem_key('a', 'b', 'c', 'null')
   AND idem_key('a', 'b', 'c', '[]') <> idem_key('a', 'b', 'c', '{}');
SELECT 'key-deterministic', idem_key('a', 'b', 'c', '{"k":[1,2,3]}') = idem_key('a', 'b', 'c', '{"k":[1,2,3]}');
-- many distinct calls, no collision among them
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2000)
SELECT 'key-2000-distinct', count(DISTINCT idem_key('t', 'c', 'tool', '{"i":' || i || '}')) = 2000 FROM n;

-- the grammar errors name which argument, with SQLITE_CONSTRAINT
SELECT 'key-tenant-null', errmsg('SELECT idem_key(NULL, ''b'', ''c'', ''{}'')') = 'idem_key: tenant is missing (NULL)';
SELECT 'key-tenant-null-code', errcode('SELECT idem_key(NULL, ''b'', ''c'', ''{}'')') = 19;
SELECT 'key-tenant-integer', errmsg('SELECT idem_key(1, ''b'', ''c'', ''{}'')') = 'idem_key: tenant must be TEXT, got INTEGER';
SELECT 'key-conversation-null', errmsg('SELECT idem_key(''a'', NULL, ''c'', ''{}'')') = 'idem_key: conversation is missing (NULL)';
SELECT 'key-conversation-real', errmsg('SELECT idem_key(''a'', 2.5, ''c'', ''{}'')') = 'idem_key: conversation must be TEXT, got REAL';
SELECT 'key-conversation-blob', errmsg('SELECT idem_key(''a'', x''62'', ''c'', ''{}'')') = 'idem_key: conversation must be TEXT, got BLOB';
SELECT 'key-tool-empty', errmsg('SELECT idem_key(''a'', ''b'', '''', ''{}'')') = 'idem_key: tool is empty';
SELECT 'key-tool-empty-code', errcode('SELECT idem_key(''a'', ''b'', '''', ''{}'')') = 19;
SELECT 'key-tool-colon', errmsg('SELECT idem_key(''a'', ''b'', ''c:d'', ''{}'')')
       = 'idem_key: tool "c:d" has byte 0x3a at offset 1; only A-Z a-z 0-9 _ - are allowed';
SELECT 'key-tenant-colon', errmsg('SELECT idem_key(''a:b'', ''c'', ''d'', ''{}'')')
       = 'idem_key: tenant "a:b" has byte 0x3a at offset 1; only A-Z a-z 0-9 _ - are allowed';
SELECT 'key-conversation-too-long', errmsg('SELECT idem_key(''a'', printf(''%.129c'', ''b''), ''c'', ''{}'')')
       = 'idem_key: conversation is 129 characters long, the limit is 128';
SELECT 'key-conversation-nul', errmsg('SELECT idem_key(''a'', ''b'' || char(0), ''c'', ''{}'')')
       = 'idem_key: conversation "b\x00" has byte 0x00 at offset 1; only A-Z a-z 0-9 _ - are allowed';
SELECT 'key-tenant-nbsp', errcode('SELECT idem_key(char(0xa0) || ''a'', ''b'', ''c'', ''{}'')') = 19;
SELECT 'key-first-bad-part-reported', errmsg('SELECT idem_key(''a'', '''', NULL, NULL)') = 'idem_key: conversation is empty';
-- the args errors are SQLITE_ERROR (TOOBIG over the cap) and name "args"
SELECT 'key-args-null', errmsg('SELECT idem_key(''a'', ''b'', ''c'', NULL)') = 'idem_key: args is NULL; a missing argument list is not {}';
SELECT 'key-args-null-code', errcode('SELECT idem_key(''a'', ''b'', ''c'', NULL)') = 1;
SELECT 'key-args-integer', errmsg('SELECT idem_key(''a'', ''b'', ''c'', 5)') = 'idem_key: args must be TEXT holding JSON, got INTEGER';
SELECT 'key-args-blob', errmsg('SELECT idem_key(''a'', ''b'', ''c'', x''7b7d'')') = 'idem_key: args must be TEXT holding JSON, got BLOB';
SELECT 'key-args-invalid', errmsg('SELECT idem_key(''a'', ''b'', ''c'', ''{'')') = 'idem_key: args: not valid JSON: unexpected end of input at byte 1, expected a member name';
SELECT 'key-args-duplicate', errmsg('SELECT idem_key(''a'', ''b'', ''c'', ''{"a":1,"a":1}'')') = 'idem_key: args: duplicate member name "a" in the object at byte 0';
SELECT 'key-args-duplicate-code', errcode('SELECT idem_key(''a'', ''b'', ''c'', ''{"a":1,"a":1}'')') = 1;
SELECT 'key-args-bom', errmsg('SELECT idem_key(''a'', ''b'', ''c'', char(0xfeff) || ''{}'')') = 'idem_key: args: a leading byte order mark (U+FEFF) at byte 0 is not allowed';
SELECT 'key-args-big-integer', errmsg('SELECT idem_key(''a'', ''b'', ''c'', ''{"id":12345678901234567}'')')
       = 'idem_key: args: integer 12345678901234567 at byte 6 is beyond 2^53-1 and would lose precision; send it as a string';
SELECT 'key-args-size-cap', errcode('SELECT idem_key(''a'', ''b'', ''c'', ''"'' || hex(zeroblob(8388608)) || ''"'')') = 18;
SELECT 'key-args-depth', errcode('SELECT idem_key(''a'', ''b'', ''c'', printf(''%.257c'', ''{''))') = 1;
SELECT 'key-components-before-args', errmsg('SELECT idem_key(''a'', ''b'', ''c d'', ''{'')')
       = 'idem_key: tool "c d" has byte 0x20 at offset 1; only A-Z a-z 0-9 _ - are allowed';
SELECT 'key-arity', errmsg('SELECT idem_key(''a'', ''b'', ''c'')') = 'wrong number of arguments to function idem_key()';
