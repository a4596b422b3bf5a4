-- idem_canonical(json): RFC 8785 (JCS) canonical text of strict I-JSON.

-- whitespace goes, member order is by UTF-16 code units of decoded names
SELECT 'no-whitespace', idem_canonical(' { "a" : [ 1 , 2 ] ,' || char(9, 10, 13) || '"b" : { } } ') = '{"a":[1,2],"b":{}}';
SELECT 'sorted-members', idem_canonical('{"b":1,"a":2,"c":3}') = '{"a":2,"b":1,"c":3}';
SELECT 'sorted-nested', idem_canonical('{"z":{"y":1,"x":[{"d":1,"c":2}]},"a":null}') = '{"a":null,"z":{"x":[{"c":2,"d":1}],"y":1}}';
SELECT 'arrays-keep-order', idem_canonical('[3,1,2]') = '[3,1,2]';
SELECT 'sort-is-bytewise-case', idem_canonical('{"b":1,"B":2,"a":3,"A":4}') = '{"A":4,"B":2,"a":3,"b":1}';
SELECT 'sort-prefix-first', idem_canonical('{"ab":1,"a":2,"":3}') = '{"":3,"a":2,"ab":1}';
-- U+20AC < U+D83D (the high surrogate of U+1F600) < U+FB33: UTF-16 order,
-- which differs from code point (and UTF-8) order for the last two
SELECT 'sort-utf16-units', idem_canonical('{"\ufb33":3,"\ud83d\ude00":2,"\u20ac":1,"a":0}') = '{"a":0,"' || char(0x20ac) || '":1,"' || char(0x1f600) || '":2,"' || char(0xfb33) || '":3}';
SELECT 'sort-decoded-names', idem_canonical('{"\u0062":1,"a":2}') = '{"a":2,"b":1}';
SELECT 'sort-nul-in-name', idem_canonical('{"a\u0000":1,"a":2}') = '{"a":2,"a\u0000":1}';
SELECT 'scalars-top-level', idem_canonical('true') = 'true' AND idem_canonical('false') = 'false'
   AND idem_canonical('null') = 'null' AND idem_canonical('"x"') = '"x"' AND idem_canonical('7') = '7';
SELECT 'empty-containers', idem_canonical('[ ]') = '[]' AND idem_canonical('{ }') = '{}';

-- strings: short escapes, lowercase \u00xx for other controls, the rest raw
SELECT 'short-escapes', idem_canonical('"\b\t\n\f\r\"\\"') = '"\b\t\n\f\r\"\\"';
SELECT 'short-escapes-from-u', idem_canonical('"\u0008\u0009\u000a\u000C\u000D\u0022\u005c"') = '"\b\t\n\f\r\"\\"';
SELECT 'control-lowercase-hex', idem_canonical('"\u001F\u0001\u000B"') = '"\u001f\u0001\u000b"';
SELECT 'nul-kept-escaped', idem_canonical('"a\u0000b"') = '"a\u0000b"';
SELECT 'nul-not-truncated', length(idem_canonical('"a\u0000b"')) = 10;
SELECT 'solidus-unescaped', idem_canonical('"\/"') = '"/"';
SELECT 'del-raw', idem_canonical('"\u007f"') = '"' || char(127) || '"';
SELECT 'non-ascii-raw', idem_canonical('"\u00e9\u20ac"') = '"é€"';
SELECT 'raw-utf8-kept', idem_canonical('"café 😀"') = '"café 😀"';
SELECT 'surrogate-pair-decoded', idem_canonical('"\ud83d\ude00"') = '"😀"';
SELECT 'uppercase-u-escape', idem_canonical('"\u00E9"') = '"é"';
SELECT 'line-separator-raw', idem_canonical('"\u2028"') = '"' || char(0x2028) || '"';
SELECT 'bom-inside-string-kept', idem_canonical('"\ufeff"') = '"' || char(0xfeff) || '"';

-- numbers: ECMAScript shortest round-trip form
SELECT 'num-integer', idem_canonical('[0,1,-1,100,9007199254740991,-9007199254740991]') = '[0,1,-1,100,9007199254740991,-9007199254740991]';
SELECT 'num-minus-zero', idem_canonical('[-0,-0.0,0.0,0e5,-0e-5]') = '[0,0,0,0,0]';
SELECT 'num-fraction-trimmed', idem_canonical('[1.0,4.50,2.500e0,10.0e-1]') = '[1,4.5,2.5,1]';
SELECT 'num-exponent-large', idem_canonical('[1e30,1E30,1e+30,1e21,1e20]') = '[1e+30,1e+30,1e+30,1e+21,100000000000000000000]';
SELECT 'num-exponent-small', idem_canonical('[1e-7,0.000001,1.5e-7,-1e-7]') = '[1e-7,0.000001,1.5e-7,-1e-7]';
SELECT 'num-shortest', idem_canonical('[0.1,0.30000000000000004,1e23,5e-324,1.7976931348623157e308]')
       = '[0.1,0.30000000000000004,1e+23,5e-324,1.7976931348623157e+308]';
SELECT 'num-fraction-beyond-2-53', idem_canonical('[9007199254740993.0,1e16,12345678901234567890.5]')
       = '[9007199254740992,10000000000000000,12345678901234567000]';
SELECT 'num-jcs-examples', idem_canonical('[333333333.33333329,1E30,4.50,2e-3,0.000000000000000000000000001]')
       = '[333333333.3333333,1e+30,4.5,0.002,1e-27]';
SELECT 'num-rounding', idem_canonical('[1.00000000000000011,0.1e1,123e-2]') = '[1,1,1.23]';

-- the RFC 8785 section 3.2.2 example
SELECT 'rfc8785-example',
       idem_canonical('{"numbers":[333333333.33333329,1E30,4.50,2e-3,0.000000000000000000000000001],'
         || '"string":"\u20ac$\u000F\u000aA''\u0042\u0022\u005c\\\"\/","literals":[null,true,false]}')
       = '{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],'
         || '"string":"€$\u000f\nA''B\"\\\\\"/"}';

-- idempotent, deterministic, and the result is TEXT
SELECT 'idempotent', idem_canonical(idem_canonical('{"b":[1.0,{"d":2,"c":1}],"a":"\u00e9"}'))
       = idem_canonical('{"b":[1.0,{"d":2,"c":1}],"a":"\u00e9"}');
SELECT 'deterministic', idem_canonical('{"x":1.50}') = idem_canonical('{"x":1.50}');
SELECT 'result-text', typeof(idem_canonical('1')) = 'text';
-- nesting up to the documented limit of 256 is accepted
SELECT 'depth-256-accepted', idem_canonical(printf('%.256c', '[') || printf('%.256c', ']'))
       = printf('%.256c', '[') || printf('%.256c', ']');
SELECT 'depth-256-objects', length(idem_canonical(replace(printf('%.255c', '!'), '!', '{"a":') || '1' || printf('%.255c', '}'))) = 255 * 5 + 1 + 255;
-- the size cap is 16 MiB of input: exactly 16 MiB is accepted
SELECT 'size-at-cap-accepted', length(idem_canonical('"' || substr(hex(zeroblob(8388608)), 3) || '"')) = 16777216;
SELECT 'large-array', length(idem_canonical('[' || substr(replace(hex(zeroblob(50000)), '00', ',1'), 2) || ']')) = 100001;

-- agrees with SQLite's json() wherever ordering and numbers do not matter
SELECT 'agrees-with-json-minify', idem_canonical('[ "a" , true , null , [ ] ]') = json('[ "a" , true , null , [ ] ]');
