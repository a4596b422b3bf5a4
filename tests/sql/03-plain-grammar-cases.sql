-- sqltest: encodings UTF-8 UTF-16le UTF-16be
-- The plain-SQL key grammar against idem_valid_key, once per text encoding
-- (the runner makes each database's first statement PRAGMA encoding).
-- The plain-SQL rule of docs/keys.md, "Key grammar" (no extension needed) must
-- agree with idem_valid_key on every case, and both with the expected
-- answer. The column v has no declared type, so values keep their type.
CREATE TABLE cases(id TEXT PRIMARY KEY, v, expect INTEGER NOT NULL);
INSERT INTO cases VALUES
  ('one-letter', 'a', 1),
  ('upper', 'ABCXYZ', 1),
  ('digits', '0123456789', 1),
  ('underscore', '_', 1),
  ('hyphen', '-', 1),
  ('double-hyphen', '--', 1),
  ('mixed', 'Tenant_42-b', 1),
  ('text-from-integer', CAST(5 AS TEXT), 1),
  ('len-127', printf('%.127c', 'q'), 1),
  ('len-128', printf('%.128c', 'q'), 1),
  ('len-128-mixed', printf('%.127c', 'Z') || '-', 1),
  ('derived-key', 'idem1-a60019a0fd995630ac51badc4d3a952b', 1),
  ('len-129', printf('%.129c', 'q'), 0),
  ('len-500', printf('%.500c', 'q'), 0),
  ('empty', '', 0),
  ('null', NULL, 0),
  ('integer', 5, 0),
  ('integer-max', 9223372036854775807, 0),
  ('real', 5.0, 0),
  ('real-fraction', 2.5, 0),
  ('blob', x'6b6579', 0),
  ('blob-empty', x'', 0),
  ('zeroblob', zeroblob(4), 0),
  ('space-inside', 'a b', 0),
  ('space-leading', ' a', 0),
  ('space-trailing', 'a ', 0),
  ('tab', 'a' || char(9), 0),
  ('newline', char(10) || 'a', 0),
  ('carriage-return', 'a' || char(13) || 'b', 0),
  ('form-feed', char(12), 0),
  ('nbsp', 'a' || char(0xa0), 0),
  ('ideographic-space', char(0x3000) || 'a', 0),
  ('bom-leading', char(0xfeff) || 'abc', 0),
  ('bom-trailing', 'abc' || char(0xfeff), 0),
  ('zero-width-space', 'a' || char(0x200b) || 'b', 0),
  ('nul-middle', 'ab' || char(0) || 'cd', 0),
  ('nul-first', char(0) || 'ab', 0),
  ('nul-last', 'ab' || char(0), 0),
  ('nul-only', char(0), 0),
  ('nul-after-128', printf('%.128c', 'q') || char(0), 0),
  ('nul-then-space', 'ab' || char(0) || ' x', 0),
  ('nul-blob-cast', CAST(CAST('a' AS BLOB) || CAST(char(0) AS BLOB) || CAST('b' AS BLOB) AS TEXT), 0),
  ('zero-bytes-cast', CAST(x'00000000' AS TEXT), 0),
  ('colon', 'a:b', 0),
  ('colon-only', ':', 0),
  ('dot', 'a.b', 0),
  ('slash', 'a/b', 0),
  ('backslash', 'a\b', 0),
  ('quote', 'a''b', 0),
  ('dquote', '"a"', 0),
  ('glob-star', '*', 0),
  ('glob-question', 'a?', 0),
  ('glob-class', '[a]', 0),
  ('glob-caret', '^a', 0),
  ('like-percent', 'a%', 0),
  ('del', 'a' || char(127), 0),
  ('e-acute', 'café', 0),
  ('e-combining', 'e' || char(0x301), 0),
  ('fullwidth-a', char(0xff21), 0),
  ('arabic-digit', char(0x663), 0),
  ('cyrillic-a', char(0x430), 0),
  ('kelvin-sign', char(0x212a), 0),
  ('emoji', '😀', 0),
  ('len-128-two-byte', printf('%.128c', 'é'), 0),
  ('len-64-emoji', printf('%.64c', '😀'), 0),
  ('lone-surrogate', 'a' || char(0xd800), 0);

SELECT 'case-count', (SELECT count(*) FROM cases) >= 40;
SELECT 'plain-rule-is-0-or-1',
       (SELECT count(*) FROM cases
         WHERE (typeof(v) = 'text' AND length(v) BETWEEN 1 AND 128 AND instr(v, char(0)) = 0
                AND v NOT GLOB '*[^A-Za-z0-9_-]*') NOT IN (0, 1)) = 0;
-- one check per case and side: the plain rule, then idem_valid_key
SELECT 'plain:' || id,
       (typeof(v) = 'text' AND length(v) BETWEEN 1 AND 128 AND instr(v, char(0)) = 0
        AND v NOT GLOB '*[^A-Za-z0-9_-]*') IS expect
  FROM cases ORDER BY rowid;
SELECT 'ext:' || id, idem_valid_key(v) IS expect FROM cases ORDER BY rowid;
SELECT 'agree:' || id,
       idem_valid_key(v) IS (typeof(v) = 'text' AND length(v) BETWEEN 1 AND 128
                             AND instr(v, char(0)) = 0 AND v NOT GLOB '*[^A-Za-z0-9_-]*')
  FROM cases ORDER BY rowid;
-- why each part of the rule is there: GLOB alone stops at an embedded NUL
SELECT 'glob-alone-is-fooled-by-nul', ('ab' || char(0) || ' x') NOT GLOB '*[^A-Za-z0-9_-]*';
-- a CHECK built from the plain rule refuses what idem_check_key refuses
CREATE TABLE plain_ops(k CHECK (typeof(k) = 'text' AND length(k) BETWEEN 1 AND 128
                                AND instr(k, char(0)) = 0 AND k NOT GLOB '*[^A-Za-z0-9_-]*'));
INSERT INTO plain_ops SELECT v FROM cases WHERE expect = 1;
INSERT OR IGNORE INTO plain_ops SELECT v FROM cases WHERE expect = 0;
SELECT 'plain-check-keeps-valid-only',
       (SELECT count(*) FROM plain_ops) = (SELECT count(*) FROM cases WHERE expect = 1)
   AND (SELECT count(*) FROM plain_ops WHERE idem_valid_key(k) = 0) = 0;
SELECT 'plain-check-refuses-nul', errmsg('INSERT INTO plain_ops VALUES (''ab'' || char(0))') GLOB 'CHECK constraint failed: *';
SELECT 'plain-check-refuses-integer', errcode('INSERT INTO plain_ops VALUES (5)') = 275;
SELECT 'plain-check-refuses-null', errcode('INSERT INTO plain_ops VALUES (NULL)') = 275;
-- the ledger's rows table takes no plain insert at all (only the
-- extension writes it): a fresh claim whose key (then tenant) is each
-- case is refused, valid or not, with the message naming the API
CREATE VIRTUAL TABLE G USING idempotency;
CREATE TEMP TABLE gk(id TEXT PRIMARY KEY, msg_key, msg_tenant);
-- (the value is read from the cases table, not pasted into the SQL text,
-- which would end at an embedded NUL)
INSERT INTO gk SELECT id,
  errmsg('INSERT INTO G_rows(tenant,"key",conversation,tool,args,effect,status,attempt,token,created_at,updated_at,lease_until) SELECT ''t'',v,''c'',''x'',''{}'',''external'',''claimed'',1,random(),0,0,0 FROM cases WHERE id = ' || quote(id)),
  errmsg('INSERT INTO G_rows(tenant,"key",conversation,tool,args,effect,status,attempt,token,created_at,updated_at,lease_until) SELECT v,''k-'' || rowid,''c'',''x'',''{}'',''external'',''claimed'',1,random(),0,0,0 FROM cases WHERE id = ' || quote(id))
  FROM cases;
SELECT 'rows-key:' || gk.id, gk.msg_key IS 'idempotency: the rows of ledger G are written only by the extension (idem_claim, idem_settle, idem_resolve, idem_purge, or INSERT INTO and DELETE FROM the ledger table); plain SQL may read them' FROM gk JOIN cases c USING (id) ORDER BY c.rowid;
SELECT 'rows-tenant:' || gk.id, gk.msg_tenant IS 'idempotency: the rows of ledger G are written only by the extension (idem_claim, idem_settle, idem_resolve, idem_purge, or INSERT INTO and DELETE FROM the ledger table); plain SQL may read them' FROM gk JOIN cases c USING (id) ORDER BY c.rowid;
SELECT 'rows-none-written', (SELECT count(*) FROM G_rows) = 0;
