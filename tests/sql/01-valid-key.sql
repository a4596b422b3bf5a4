-- idem_valid_key(v): 1 when v is a key component (SQL TEXT, 1 to 128
-- characters from A-Z a-z 0-9 _ -), else 0. Never NULL, never an error,
-- no coercion of other types.

-- accepted: every allowed character class, the boundaries
SELECT 'valid-lower', idem_valid_key('abcdefghijklmnopqrstuvwxyz') = 1;
SELECT 'valid-upper', idem_valid_key('ABCDEFGHIJKLMNOPQRSTUVWXYZ') = 1;
SELECT 'valid-digits', idem_valid_key('0123456789') = 1;
SELECT 'valid-underscore', idem_valid_key('_') = 1;
SELECT 'valid-hyphen', idem_valid_key('-') = 1;
SELECT 'valid-mixed', idem_valid_key('Tenant_42-a') = 1;
SELECT 'valid-one-char', idem_valid_key('x') = 1;
SELECT 'valid-128-chars', idem_valid_key(printf('%.128c', 'k')) = 1;
SELECT 'valid-128-mixed', idem_valid_key(printf('%.64c', 'A') || printf('%.64c', '9')) = 1;
SELECT 'valid-digits-only-text', idem_valid_key('12345') = 1;
SELECT 'valid-leading-hyphen', idem_valid_key('-abc') = 1;
SELECT 'valid-derived-key-shape', idem_valid_key('idem1-0123456789abcdef0123456789abcdef') = 1;

-- length
SELECT 'invalid-empty', idem_valid_key('') = 0;
SELECT 'invalid-129-chars', idem_valid_key(printf('%.129c', 'k')) = 0;
SELECT 'invalid-1000-chars', idem_valid_key(printf('%.1000c', 'k')) = 0;
SELECT 'invalid-128-non-ascii', idem_valid_key(printf('%.128c', 'é')) = 0;

-- types: no coercion, and 0 (never NULL) so that a CHECK cannot pass by NULL
SELECT 'null-gives-0', idem_valid_key(NULL) IS 0;
SELECT 'integer-gives-0', idem_valid_key(5) = 0;
SELECT 'integer-large-gives-0', idem_valid_key(9223372036854775807) = 0;
SELECT 'negative-integer-gives-0', idem_valid_key(-1) = 0;
SELECT 'real-gives-0', idem_valid_key(5.0) = 0;
SELECT 'real-fraction-gives-0', idem_valid_key(1.5) = 0;
SELECT 'blob-gives-0', idem_valid_key(x'6b6579') = 0;
SELECT 'empty-blob-gives-0', idem_valid_key(x'') = 0;
SELECT 'zeroblob-gives-0', idem_valid_key(zeroblob(4)) = 0;
SELECT 'text-of-integer-is-valid', idem_valid_key(CAST(5 AS TEXT)) = 1;
SELECT 'result-is-integer', typeof(idem_valid_key('a')) = 'integer' AND typeof(idem_valid_key(NULL)) = 'integer';
SELECT 'never-an-error', errmsg('SELECT idem_valid_key(x''ff''), idem_valid_key(NULL), idem_valid_key(char(0))') IS NULL;

-- characters outside the grammar: whitespace of every kind
SELECT 'invalid-space', idem_valid_key('a b') = 0;
SELECT 'invalid-leading-space', idem_valid_key(' a') = 0;
SELECT 'invalid-trailing-space', idem_valid_key('a ') = 0;
SELECT 'invalid-tab', idem_valid_key('a' || char(9) || 'b') = 0;
SELECT 'invalid-newline', idem_valid_key('a' || char(10)) = 0;
SELECT 'invalid-cr', idem_valid_key('a' || char(13)) = 0;
SELECT 'invalid-vtab', idem_valid_key(char(11) || 'a') = 0;
SELECT 'invalid-nbsp', idem_valid_key('a' || char(0xa0) || 'b') = 0;
SELECT 'invalid-ideographic-space', idem_valid_key(char(0x3000) || 'a') = 0;
SELECT 'invalid-bom', idem_valid_key(char(0xfeff) || 'a') = 0;
SELECT 'invalid-zero-width-space', idem_valid_key('a' || char(0x200b)) = 0;
SELECT 'invalid-line-separator', idem_valid_key('a' || char(0x2028)) = 0;
-- embedded NUL: char(0), and a BLOB cast holding 0x00
SELECT 'invalid-nul-middle', idem_valid_key('ab' || char(0) || 'cd') = 0;
SELECT 'invalid-nul-first', idem_valid_key(char(0) || 'abc') = 0;
SELECT 'invalid-nul-last', idem_valid_key('abc' || char(0)) = 0;
SELECT 'invalid-nul-only', idem_valid_key(char(0)) = 0;
SELECT 'invalid-nul-cast', idem_valid_key(CAST(x'610062' AS TEXT)) = 0;
SELECT 'invalid-nul-cast-trailing', idem_valid_key(CAST(x'61626300' AS TEXT)) = 0;
-- separators and punctuation
SELECT 'invalid-colon', idem_valid_key(':') = 0;
SELECT 'invalid-colon-inside', idem_valid_key('tenant:a') = 0;
SELECT 'invalid-dot', idem_valid_key('a.b') = 0;
SELECT 'invalid-slash', idem_valid_key('a/b') = 0;
SELECT 'invalid-backslash', idem_valid_key('a\b') = 0;
SELECT 'invalid-quote', idem_valid_key('a''b') = 0;
SELECT 'invalid-dquote', idem_valid_key('a"b') = 0;
SELECT 'invalid-glob-star', idem_valid_key('a*') = 0;
SELECT 'invalid-glob-class', idem_valid_key('[a]') = 0;
SELECT 'invalid-percent', idem_valid_key('a%') = 0;
SELECT 'invalid-plus', idem_valid_key('a+b') = 0;
SELECT 'invalid-del', idem_valid_key('a' || char(127)) = 0;
-- no Unicode letters, digits or look-alikes, no normalisation
SELECT 'invalid-e-acute', idem_valid_key('café') = 0;
SELECT 'invalid-combining', idem_valid_key('e' || char(0x301)) = 0;
SELECT 'invalid-fullwidth-a', idem_valid_key(char(0xff21)) = 0;
SELECT 'invalid-arabic-digit', idem_valid_key(char(0x663)) = 0;
SELECT 'invalid-cyrillic-a', idem_valid_key(char(0x430)) = 0;
SELECT 'invalid-emoji', idem_valid_key('a😀') = 0;
SELECT 'invalid-utf8-byte', idem_valid_key(CAST(x'61ff' AS TEXT)) = 0;
SELECT 'invalid-continuation-byte', idem_valid_key(CAST(x'6180' AS TEXT)) = 0;
SELECT 'invalid-overlong-slash', idem_valid_key(CAST(x'c0af' AS TEXT)) = 0;

-- deterministic: the same input gives the same answer
SELECT 'deterministic', idem_valid_key('abc') = idem_valid_key('abc') AND idem_valid_key('a b') = idem_valid_key('a b');
-- arity
SELECT 'arity', errmsg('SELECT idem_valid_key()') = 'wrong number of arguments to function idem_valid_key()';

-- A column with TEXT affinity turns 5 into '5' before the CHECK runs;
-- a column without a declared type keeps the INTEGER and is refused.
CREATE TABLE affinity_text(k TEXT CHECK (idem_valid_key(k)));
CREATE TABLE affinity_none(k CHECK (idem_valid_key(k)));
INSERT INTO affinity_text VALUES (5);
SELECT 'text-affinity-coerces', (SELECT typeof(k) FROM affinity_text) = 'text';
SELECT 'no-affinity-refuses-integer',
       errmsg('INSERT INTO affinity_none VALUES (5)') = 'CHECK constraint failed: idem_valid_key(k)';
SELECT 'check-refuses-null', errmsg('INSERT INTO affinity_none VALUES (NULL)') = 'CHECK constraint failed: idem_valid_key(k)';
SELECT 'check-refuses-null-code', errcode('INSERT INTO affinity_none VALUES (NULL)') = 275;
SELECT 'check-accepts-key', errmsg('INSERT INTO affinity_none VALUES (''ok-1'')') IS NULL;
SELECT 'check-stored-one-row', (SELECT count(*) FROM affinity_none) = 1;
