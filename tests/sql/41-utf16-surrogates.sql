-- sqltest: encodings UTF-16le UTF-16be
-- Lone surrogates in a UTF-16 database. SQLite's UTF-16 -> UTF-8
-- conversion merges a lone surrogate (high or low) with the next code unit
-- into one character (U+D800 or U+DC00, then 'A', becomes U+10041), so the
-- JSON functions are also registered for UTF-16 and look at the text
-- before it is converted: every lone surrogate is refused with its code
-- unit. The key grammar accepts only ASCII, so whatever the conversion
-- makes of a surrogate is refused there anyway.
CREATE TABLE s(name TEXT PRIMARY KEY, v);
-- code units, written in the database's byte order
WITH t(name, le, be) AS (VALUES ('high-then-A', x'00D84100', x'D8000041'),
                                ('low-then-A', x'00DC4100', x'DC000041'),
                                ('A-then-high', x'410000D8', x'0041D800'),
                                ('reversed-pair', x'00DE3DD8', x'DE00D83D'),
                                ('pair', x'3DD800DE', x'D83DDE00'))
INSERT INTO s
SELECT name, CAST(CASE (SELECT encoding FROM pragma_encoding) WHEN 'UTF-16le' THEN le ELSE be END AS TEXT)
  FROM t;
SELECT 'setup-units', (SELECT group_concat(length(CAST(v AS BLOB)), ',') FROM s) = '4,4,4,4,4';
SELECT 'setup-pair-is-emoji', (SELECT v FROM s WHERE name = 'pair') = '😀';

-- idem_canonical, idem_fingerprint, idem_key (args): refused, nothing merged
SELECT 'canonical-high-then-A',
       errmsg('SELECT idem_canonical(''["'' || (SELECT v FROM s WHERE name = ''high-then-A'') || ''"]'')')
       = 'idem_canonical: json: lone surrogate U+D800 at UTF-16 code unit 2 of the text';
SELECT 'canonical-high-then-A-code',
       errcode('SELECT idem_canonical(''["'' || (SELECT v FROM s WHERE name = ''high-then-A'') || ''"]'')') = 1;
SELECT 'canonical-low-then-A',
       errmsg('SELECT idem_canonical(''["'' || (SELECT v FROM s WHERE name = ''low-then-A'') || ''"]'')')
       = 'idem_canonical: json: lone surrogate U+DC00 at UTF-16 code unit 2 of the text';
SELECT 'canonical-A-then-high',
       errmsg('SELECT idem_canonical(''["'' || (SELECT v FROM s WHERE name = ''A-then-high'') || ''"]'')')
       = 'idem_canonical: json: lone surrogate U+D800 at UTF-16 code unit 3 of the text';
SELECT 'canonical-reversed-pair',
       errmsg('SELECT idem_canonical(''["'' || (SELECT v FROM s WHERE name = ''reversed-pair'') || ''"]'')')
       = 'idem_canonical: json: lone surrogate U+DE00 at UTF-16 code unit 2 of the text';
SELECT 'canonical-in-member-name',
       errmsg('SELECT idem_canonical(''{"'' || (SELECT v FROM s WHERE name = ''high-then-A'') || ''":1}'')')
       = 'idem_canonical: json: lone surrogate U+D800 at UTF-16 code unit 2 of the text';
SELECT 'fingerprint-high-then-A',
       errmsg('SELECT idem_fingerprint(''["'' || (SELECT v FROM s WHERE name = ''high-then-A'') || ''"]'')')
       = 'idem_fingerprint: json: lone surrogate U+D800 at UTF-16 code unit 2 of the text';
SELECT 'key-args-high-then-A',
       errmsg('SELECT idem_key(''t'', ''c'', ''tool'', ''["'' || (SELECT v FROM s WHERE name = ''high-then-A'') || ''"]'')')
       = 'idem_key: args: lone surrogate U+D800 at UTF-16 code unit 2 of the text';
SELECT 'key-args-high-then-A-code',
       errcode('SELECT idem_key(''t'', ''c'', ''tool'', ''["'' || (SELECT v FROM s WHERE name = ''high-then-A'') || ''"]'')') = 1;

-- a real pair is one character, the same as its escaped spelling
SELECT 'canonical-pair',
       idem_canonical('["' || (SELECT v FROM s WHERE name = 'pair') || '"]') = '["😀"]';
SELECT 'key-pair-equals-escape',
       idem_key('t', 'c', 'tool', '["' || (SELECT v FROM s WHERE name = 'pair') || '"]')
       = idem_key('t', 'c', 'tool', '["\ud83d\ude00"]');
SELECT 'fingerprint-pair-equals-escape',
       idem_fingerprint('["' || (SELECT v FROM s WHERE name = 'pair') || '"]')
       = idem_fingerprint('["\ud83d\ude00"]');
-- the escaped lone surrogate keeps its JSON message
SELECT 'canonical-escaped-lone',
       errmsg('SELECT idem_canonical(''["\ud800A"]'')') = 'idem_canonical: json: lone surrogate \ud800 at byte 2';

-- the key grammar: ASCII only, so every one of them is refused
SELECT 'valid-key-refuses-all', (SELECT count(*) FROM s WHERE idem_valid_key(v) = 0) = 5;
SELECT 'valid-key-refuses-with-prefix', (SELECT count(*) FROM s WHERE idem_valid_key('ab' || v) = 0) = 5;
SELECT 'check-key-high-then-A',
       errmsg('SELECT idem_check_key((SELECT v FROM s WHERE name = ''high-then-A''), ''tenant'')')
       = 'idem_check_key: tenant "\xf0\x90\x81\x81" has byte 0xf0 at offset 0; only A-Z a-z 0-9 _ - are allowed';
SELECT 'check-key-high-then-A-code',
       errcode('SELECT idem_check_key((SELECT v FROM s WHERE name = ''high-then-A''), ''tenant'')') = 19;
SELECT 'check-key-low-then-A',
       errmsg('SELECT idem_check_key((SELECT v FROM s WHERE name = ''low-then-A''), ''tenant'')')
       = 'idem_check_key: tenant "\xf0\x90\x81\x81" has byte 0xf0 at offset 0; only A-Z a-z 0-9 _ - are allowed';
SELECT 'check-key-A-then-high',
       errmsg('SELECT idem_check_key((SELECT v FROM s WHERE name = ''A-then-high''), ''key'')')
       = 'idem_check_key: key "A\xed\xa0\x80" has byte 0xed at offset 1; only A-Z a-z 0-9 _ - are allowed';
SELECT 'key-component-high-then-A',
       errmsg('SELECT idem_key((SELECT v FROM s WHERE name = ''high-then-A''), ''c'', ''tool'', ''{}'')')
       = 'idem_key: tenant "\xf0\x90\x81\x81" has byte 0xf0 at offset 0; only A-Z a-z 0-9 _ - are allowed';
SELECT 'key-component-code',
       errcode('SELECT idem_key(''t'', (SELECT v FROM s WHERE name = ''low-then-A''), ''tool'', ''{}'')') = 19;
