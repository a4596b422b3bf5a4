-- idem_canonical(json): every input rule, with the exact message and code.
-- A rule break is SQLITE_ERROR (1); input over the size cap is
-- SQLITE_TOOBIG (18). Messages name the rule and the byte offset.

-- not TEXT: no coercion, and a missing argument list is not {}
SELECT 'null-message', errmsg('SELECT idem_canonical(NULL)') = 'idem_canonical: json is NULL; a missing argument list is not {}';
SELECT 'null-code', errcode('SELECT idem_canonical(NULL)') = 1;
SELECT 'integer-message', errmsg('SELECT idem_canonical(1)') = 'idem_canonical: json must be TEXT holding JSON, got INTEGER';
SELECT 'integer-code', errcode('SELECT idem_canonical(1)') = 1;
SELECT 'real-message', errmsg('SELECT idem_canonical(1.5)') = 'idem_canonical: json must be TEXT holding JSON, got REAL';
SELECT 'blob-message', errmsg('SELECT idem_canonical(x''7b7d'')') = 'idem_canonical: json must be TEXT holding JSON, got BLOB';
SELECT 'blob-code', errcode('SELECT idem_canonical(x''7b7d'')') = 1;
SELECT 'jsonb-like-blob-refused', errmsg('SELECT idem_canonical(CAST(''{}'' AS BLOB))') = 'idem_canonical: json must be TEXT holding JSON, got BLOB';

-- not valid JSON
SELECT 'empty-message', errmsg('SELECT idem_canonical('''')') = 'idem_canonical: json: not valid JSON: unexpected end of input at byte 0, expected a JSON value';
SELECT 'empty-code', errcode('SELECT idem_canonical('''')') = 1;
SELECT 'blank-message', errmsg('SELECT idem_canonical(''   '')') = 'idem_canonical: json: not valid JSON: unexpected end of input at byte 3, expected a JSON value';
SELECT 'trailing-comma', errmsg('SELECT idem_canonical(''[1,]'')') = 'idem_canonical: json: not valid JSON: unexpected byte 0x5d at byte 3, expected a JSON value';
SELECT 'missing-colon', errmsg('SELECT idem_canonical(''{"a" 1}'')') = 'idem_canonical: json: not valid JSON: unexpected byte 0x31 at byte 5, expected '':''';
SELECT 'unquoted-name', errmsg('SELECT idem_canonical(''{a:1}'')') GLOB 'idem_canonical: json: not valid JSON: unexpected byte 0x61 at byte 1, expected *';
SELECT 'open-object', errmsg('SELECT idem_canonical(''{'')') = 'idem_canonical: json: not valid JSON: unexpected end of input at byte 1, expected a member name';
SELECT 'unterminated-string', errmsg('SELECT idem_canonical(''"abc'')') = 'idem_canonical: json: not valid JSON: unterminated string starting at byte 0';
SELECT 'nan-literal', errmsg('SELECT idem_canonical(''NaN'')') = 'idem_canonical: json: not valid JSON: unexpected byte 0x4e at byte 0, expected a JSON value';
SELECT 'bad-literal', errmsg('SELECT idem_canonical(''{"a":tru}'')') = 'idem_canonical: json: not valid JSON: unexpected byte 0x74 at byte 5, expected a JSON value';
SELECT 'single-quotes', errmsg('SELECT idem_canonical(''''''a'''''')') = 'idem_canonical: json: not valid JSON: unexpected byte 0x27 at byte 0, expected a JSON value';
SELECT 'comment', errcode('SELECT idem_canonical(''[1 /* c */]'')') = 1;
SELECT 'leading-zero', errmsg('SELECT idem_canonical(''01'')') = 'idem_canonical: json: trailing bytes after the JSON value at byte 1';
SELECT 'plus-sign', errcode('SELECT idem_canonical(''+1'')') = 1;
SELECT 'bare-dot', errcode('SELECT idem_canonical(''1.'')') = 1 AND errcode('SELECT idem_canonical(''.5'')') = 1;
SELECT 'hex-number', errcode('SELECT idem_canonical(''0x10'')') = 1;
SELECT 'infinity-literal', errcode('SELECT idem_canonical(''Infinity'')') = 1;
SELECT 'json5-accepted-by-sqlite-not-here', errcode('SELECT idem_canonical(''{a:1}'')') = 1;
SELECT 'invalid-escape', errmsg('SELECT idem_canonical(''"\x"'')') = 'idem_canonical: json: invalid escape \x at byte 1';
SELECT 'short-u-escape', errmsg('SELECT idem_canonical(''"\u12"'')') = 'idem_canonical: json: invalid \u escape at byte 1 (four hex digits needed)';
SELECT 'raw-tab-in-string', errmsg('SELECT idem_canonical(''"a'' || char(9) || ''"'')') = 'idem_canonical: json: control character 0x09 in a string at byte 2 must be escaped';
SELECT 'raw-newline-in-string', errmsg('SELECT idem_canonical(''["'' || char(10) || ''"]'')') = 'idem_canonical: json: control character 0x0a in a string at byte 2 must be escaped';

-- trailing bytes
SELECT 'trailing-bytes', errmsg('SELECT idem_canonical(''{"a":1} x'')') = 'idem_canonical: json: trailing bytes after the JSON value at byte 8';
SELECT 'trailing-bytes-code', errcode('SELECT idem_canonical(''{"a":1} x'')') = 1;
SELECT 'two-values', errmsg('SELECT idem_canonical(''{} {}'')') = 'idem_canonical: json: trailing bytes after the JSON value at byte 3';
SELECT 'trailing-nul', errmsg('SELECT idem_canonical(''{}'' || char(0))') = 'idem_canonical: json: trailing bytes after the JSON value at byte 2';
SELECT 'trailing-whitespace-ok', idem_canonical('{} ' || char(10)) = '{}';

-- a leading BOM (also with whitespace after it)
SELECT 'bom-message', errmsg('SELECT idem_canonical(char(0xfeff) || ''{}'')') = 'idem_canonical: json: a leading byte order mark (U+FEFF) at byte 0 is not allowed';
SELECT 'bom-code', errcode('SELECT idem_canonical(char(0xfeff) || ''{}'')') = 1;
SELECT 'bom-after-space', errmsg('SELECT idem_canonical('' '' || char(0xfeff) || ''{}'')') = 'idem_canonical: json: not valid JSON: unexpected byte 0xef at byte 1, expected a JSON value';

-- duplicate member names, compared decoded
SELECT 'duplicate-message', errmsg('SELECT idem_canonical(''{"a":1,"a":2}'')') = 'idem_canonical: json: duplicate member name "a" in the object at byte 0';
SELECT 'duplicate-code', errcode('SELECT idem_canonical(''{"a":1,"a":2}'')') = 1;
SELECT 'duplicate-same-value', errcode('SELECT idem_canonical(''{"a":1,"a":1}'')') = 1;
SELECT 'duplicate-decoded', errmsg('SELECT idem_canonical(''{"a":1,"\u0061":2}'')') = 'idem_canonical: json: duplicate member name "a" in the object at byte 0';
SELECT 'duplicate-decoded-unicode', errmsg('SELECT idem_canonical(''{"é":1,"\u00e9":2}'')') = 'idem_canonical: json: duplicate member name "é" in the object at byte 0';
SELECT 'duplicate-nul-name', errmsg('SELECT idem_canonical(''{"\u0000":1,"\u0000":2}'')') = 'idem_canonical: json: duplicate member name "\u0000" in the object at byte 0';
SELECT 'duplicate-nested-offset', errmsg('SELECT idem_canonical(''[1,{"b":1,"b":2}]'')') = 'idem_canonical: json: duplicate member name "b" in the object at byte 3';
SELECT 'not-duplicate-case', idem_canonical('{"a":1,"A":2}') = '{"A":2,"a":1}';
SELECT 'not-duplicate-other-objects', idem_canonical('[{"a":1},{"a":2}]') = '[{"a":1},{"a":2}]';

-- invalid UTF-8 and lone surrogates
SELECT 'invalid-utf8', errmsg('SELECT idem_canonical(CAST(x''22ff22'' AS TEXT))') = 'idem_canonical: json: invalid UTF-8 byte 0xff at byte 1';
SELECT 'invalid-utf8-code', errcode('SELECT idem_canonical(CAST(x''22ff22'' AS TEXT))') = 1;
SELECT 'invalid-utf8-truncated', errcode('SELECT idem_canonical(CAST(x''22c322'' AS TEXT))') = 1;
SELECT 'invalid-utf8-overlong', errcode('SELECT idem_canonical(CAST(x''22c0af22'' AS TEXT))') = 1;
SELECT 'invalid-utf8-encoded-surrogate', errcode('SELECT idem_canonical(CAST(x''22eda08022'' AS TEXT))') = 1;
SELECT 'invalid-utf8-beyond-10ffff', errcode('SELECT idem_canonical(CAST(x''22f490808022'' AS TEXT))') = 1;
SELECT 'invalid-utf8-in-name', errcode('SELECT idem_canonical(CAST(x''7b22ff223a317d'' AS TEXT))') = 1;
SELECT 'lone-high-surrogate', errmsg('SELECT idem_canonical(''"\ud800"'')') = 'idem_canonical: json: lone surrogate \ud800 at byte 1';
SELECT 'lone-low-surrogate', errmsg('SELECT idem_canonical(''"\udc00x"'')') = 'idem_canonical: json: lone surrogate \udc00 at byte 1';
SELECT 'high-then-non-low', errcode('SELECT idem_canonical(''"\ud800\u0041"'')') = 1;
SELECT 'lone-surrogate-in-name', errcode('SELECT idem_canonical(''{"\udbff":1}'')') = 1;

-- numbers
SELECT 'overflow-message', errmsg('SELECT idem_canonical(''1e400'')') = 'idem_canonical: json: number 1e400 at byte 0 overflows a double';
SELECT 'overflow-code', errcode('SELECT idem_canonical(''1e400'')') = 1;
SELECT 'overflow-negative', errmsg('SELECT idem_canonical(''[-1e400]'')') = 'idem_canonical: json: number -1e400 at byte 1 overflows a double';
SELECT 'overflow-just-above-max', errcode('SELECT idem_canonical(''1.7976931348623159e308'')') = 1;
SELECT 'underflow-message', errmsg('SELECT idem_canonical(''1e-400'')') = 'idem_canonical: json: number 1e-400 at byte 0 underflows to zero';
SELECT 'big-integer-message', errmsg('SELECT idem_canonical(''9007199254740992'')')
       = 'idem_canonical: json: integer 9007199254740992 at byte 0 is beyond 2^53-1 and would lose precision; send it as a string';
SELECT 'big-integer-code', errcode('SELECT idem_canonical(''9007199254740992'')') = 1;
SELECT 'big-negative-integer', errmsg('SELECT idem_canonical(''{"id":-9007199254740992}'')')
       = 'idem_canonical: json: integer -9007199254740992 at byte 6 is beyond 2^53-1 and would lose precision; send it as a string';
SELECT 'big-integer-many-digits', errcode('SELECT idem_canonical(''123456789012345678901234567890'')') = 1;
SELECT 'big-integer-as-string-ok', idem_canonical('{"id":"9007199254740993"}') = '{"id":"9007199254740993"}';
SELECT 'max-safe-integer-ok', idem_canonical('[9007199254740991,-9007199254740991]') = '[9007199254740991,-9007199254740991]';
SELECT 'leading-zero-digits-ok', idem_canonical('0.5') = '0.5';

-- nesting: the documented limit is 256; deeper is an error, not a crash
SELECT 'depth-257-message', errmsg('SELECT idem_canonical(printf(''%.257c'', ''['') || printf(''%.257c'', '']''))')
       = 'idem_canonical: json: nesting deeper than 256 levels at byte 256';
SELECT 'depth-257-code', errcode('SELECT idem_canonical(printf(''%.257c'', ''['') || printf(''%.257c'', '']''))') = 1;
SELECT 'depth-100000', errmsg('SELECT idem_canonical(printf(''%.100000c'', ''[''))') = 'idem_canonical: json: nesting deeper than 256 levels at byte 256';
SELECT 'depth-objects', errcode('SELECT idem_canonical(replace(printf(''%.300c'', ''!''), ''!'', ''{"a":'') || ''1'' || printf(''%.300c'', ''}''))') = 1;

-- the size cap (16 MiB of input) is SQLITE_TOOBIG
SELECT 'size-cap-message', errmsg('SELECT idem_canonical(''"'' || hex(zeroblob(8388608)) || ''"'')')
       = 'idem_canonical: json: input is 16777218 bytes, the limit is 16777216';
SELECT 'size-cap-code', errcode('SELECT idem_canonical(''"'' || hex(zeroblob(8388608)) || ''"'')') = 18;
SELECT 'size-cap-whitespace-counts', errcode('SELECT idem_canonical(''{}'' || printf(''%.16777215c'', '' ''))') = 18;

-- arity
SELECT 'arity', errmsg('SELECT idem_canonical()') = 'wrong number of arguments to function idem_canonical()';

-- a CHECK that stores only canonical arguments
CREATE TABLE calls(args TEXT CHECK (args = idem_canonical(args)));
SELECT 'check-accepts-canonical', errmsg('INSERT INTO calls VALUES (''{"a":1,"b":2}'')') IS NULL;
SELECT 'check-refuses-noncanonical', errcode('INSERT INTO calls VALUES (''{"b":2,"a":1}'')') = 275;
SELECT 'check-refuses-invalid', errmsg('INSERT INTO calls VALUES (''{"a":1,"a":1}'')') = 'idem_canonical: json: duplicate member name "a" in the object at byte 0';
