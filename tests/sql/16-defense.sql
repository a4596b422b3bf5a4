-- One writer: the shadow table L_rows refuses every plain-SQL write, what
-- the ledger would never write (NULLs, a bad key, another domain, a second
-- claim, an illegal status change, deleting a live row) and what it would
-- (a fresh claim, a legal settle, deleting a terminal row) alike; only the
-- extension writes it. A foreign trigger on a shadow table stops every
-- ledger operation.
-- (Defensive mode, SQLITE_DBCONFIG_DEFENSIVE, can only be set through the
-- C API, so it is tested by another suite.)

SELECT sqltest_clock(1700000000000);
CREATE VIRTUAL TABLE L USING idempotency;
SELECT 'seed', json_extract(idem_claim('L', 't', 'c', 'x', '{}', 'external', 'k1'), '$.decision') = 'admitted';
SELECT 'seed-succeeded', json_extract(idem_claim('L', 't', 'c', 'x', '{}', 'external', 'k2'), '$.decision') = 'admitted'
       AND json_extract(idem_settle('L', (SELECT token FROM L WHERE key = 'k2'), 'succeeded', '{}'), '$.status') = 'succeeded';
SELECT 'seed-unknown', json_extract(idem_claim('L', 't', 'c', 'x', '{}', 'external', 'k3'), '$.decision') = 'admitted'
       AND json_extract(idem_settle('L', (SELECT token FROM L WHERE key = 'k3'), 'unknown', NULL), '$.status') = 'unknown';
SELECT 'seed-released', json_extract(idem_claim('L', 't', 'c', 'x', '{}', 'local', 'k4'), '$.decision') = 'admitted'
       AND json_extract(idem_settle('L', (SELECT token FROM L WHERE key = 'k4'), 'released', NULL), '$.status') = 'released';

-- a template of a well-formed direct insert; each check breaks one column
CREATE TEMP TABLE base(tenant, "key", conversation, tool, args, effect, status, attempt, token, created_at, updated_at, lease_until);
INSERT INTO base VALUES ('t', 'd1', 'c', 'x', '{}', 'external', 'claimed', 1, random(), 0, 0, 0);
CREATE TEMP VIEW ins AS SELECT 'INSERT INTO L_rows(tenant, "key", conversation, tool, args, effect, status, attempt, token, created_at, updated_at, lease_until) ' AS pre;

SELECT 'key-null', errmsg((SELECT pre FROM ins) || 'VALUES (''t'', NULL, ''c'', ''x'', ''{}'', ''external'', ''claimed'', 1, random(), 0, 0, 0)') = 'idempotency: the rows of ledger L are written only by the extension (idem_claim, idem_settle, idem_resolve, idem_purge, or INSERT INTO and DELETE FROM the ledger table); plain SQL may read them';
SELECT 'key-null-code', errcode((SELECT pre FROM ins) || 'VALUES (''t'', NULL, ''c'', ''x'', ''{}'', ''external'', ''claimed'', 1, random(), 0, 0, 0)') = 1811;
SELECT 'key-empty', errmsg((SELECT pre FROM ins) || 'VALUES (''t'', '''', ''c'', ''x'', ''{}'', ''external'', ''claimed'', 1, random(), 0, 0, 0)') = 'idempotency: the rows of ledger L are written only by the extension (idem_claim, idem_settle, idem_resolve, idem_purge, or INSERT INTO and DELETE FROM the ledger table); plain SQL may read them';
SELECT 'key-empty-code', errcode((SELECT pre FROM ins) || 'VALUES (''t'', '''', ''c'', ''x'', ''{}'', ''external'', ''claimed'', 1, random(), 0, 0, 0)') = 1811;
SELECT 'key-space', errcode((SELECT pre FROM ins) || 'VALUES (''t'', ''a b'', ''c'', ''x'', ''{}'', ''external'', ''claimed'', 1, random(), 0, 0, 0)') = 1811;
SELECT 'key-129', errcode((SELECT pre FROM ins) || 'VALUES (''t'', printf(''%.129c'', ''k''), ''c'', ''x'', ''{}'', ''external'', ''claimed'', 1, random(), 0, 0, 0)') = 1811;
SELECT 'key-nul', errcode((SELECT pre FROM ins) || 'VALUES (''t'', ''a'' || char(0) || ''b'', ''c'', ''x'', ''{}'', ''external'', ''claimed'', 1, random(), 0, 0, 0)') = 1811;
SELECT 'key-integer', errcode((SELECT pre FROM ins) || 'VALUES (''t'', 5, ''c'', ''x'', ''{}'', ''external'', ''claimed'', 1, random(), 0, 0, 0)') = 1811;
SELECT 'key-blob', errcode((SELECT pre FROM ins) || 'VALUES (''t'', x''6b'', ''c'', ''x'', ''{}'', ''external'', ''claimed'', 1, random(), 0, 0, 0)') = 1811;
SELECT 'key-unicode', errcode((SELECT pre FROM ins) || 'VALUES (''t'', ''café'', ''c'', ''x'', ''{}'', ''external'', ''claimed'', 1, random(), 0, 0, 0)') = 1811;
SELECT 'tenant-integer', errmsg((SELECT pre FROM ins) || 'VALUES (5, ''d1'', ''c'', ''x'', ''{}'', ''external'', ''claimed'', 1, random(), 0, 0, 0)') = 'idempotency: the rows of ledger L are written only by the extension (idem_claim, idem_settle, idem_resolve, idem_purge, or INSERT INTO and DELETE FROM the ledger table); plain SQL may read them';
SELECT 'tenant-null', errmsg((SELECT pre FROM ins) || 'VALUES (NULL, ''d1'', ''c'', ''x'', ''{}'', ''external'', ''claimed'', 1, random(), 0, 0, 0)') = 'idempotency: the rows of ledger L are written only by the extension (idem_claim, idem_settle, idem_resolve, idem_purge, or INSERT INTO and DELETE FROM the ledger table); plain SQL may read them';
SELECT 'tenant-colon', errcode((SELECT pre FROM ins) || 'VALUES (''t:1'', ''d1'', ''c'', ''x'', ''{}'', ''external'', ''claimed'', 1, random(), 0, 0, 0)') = 1811;
SELECT 'conversation-empty', errmsg((SELECT pre FROM ins) || 'VALUES (''t'', ''d1'', '''', ''x'', ''{}'', ''external'', ''claimed'', 1, random(), 0, 0, 0)') = 'idempotency: the rows of ledger L are written only by the extension (idem_claim, idem_settle, idem_resolve, idem_purge, or INSERT INTO and DELETE FROM the ledger table); plain SQL may read them';
SELECT 'tool-bad', errmsg((SELECT pre FROM ins) || 'VALUES (''t'', ''d1'', ''c'', ''x/y'', ''{}'', ''external'', ''claimed'', 1, random(), 0, 0, 0)') = 'idempotency: the rows of ledger L are written only by the extension (idem_claim, idem_settle, idem_resolve, idem_purge, or INSERT INTO and DELETE FROM the ledger table); plain SQL may read them';
SELECT 'args-null', errmsg((SELECT pre FROM ins) || 'VALUES (''t'', ''d1'', ''c'', ''x'', NULL, ''external'', ''claimed'', 1, random(), 0, 0, 0)') = 'idempotency: the rows of ledger L are written only by the extension (idem_claim, idem_settle, idem_resolve, idem_purge, or INSERT INTO and DELETE FROM the ledger table); plain SQL may read them';
SELECT 'effect-bogus', errmsg((SELECT pre FROM ins) || 'VALUES (''t'', ''d1'', ''c'', ''x'', ''{}'', ''remote'', ''claimed'', 1, random(), 0, 0, 0)') = 'idempotency: the rows of ledger L are written only by the extension (idem_claim, idem_settle, idem_resolve, idem_purge, or INSERT INTO and DELETE FROM the ledger table); plain SQL may read them';
SELECT 'status-bogus', errmsg((SELECT pre FROM ins) || 'VALUES (''t'', ''d1'', ''c'', ''x'', ''{}'', ''external'', ''bogus'', 1, random(), 0, 0, 0)') = 'idempotency: the rows of ledger L are written only by the extension (idem_claim, idem_settle, idem_resolve, idem_purge, or INSERT INTO and DELETE FROM the ledger table); plain SQL may read them';
SELECT 'status-bogus-code', errcode((SELECT pre FROM ins) || 'VALUES (''t'', ''d1'', ''c'', ''x'', ''{}'', ''external'', ''bogus'', 1, random(), 0, 0, 0)') = 1811;
SELECT 'status-null', errmsg((SELECT pre FROM ins) || 'VALUES (''t'', ''d1'', ''c'', ''x'', ''{}'', ''external'', NULL, 1, random(), 0, 0, 0)') = 'idempotency: the rows of ledger L are written only by the extension (idem_claim, idem_settle, idem_resolve, idem_purge, or INSERT INTO and DELETE FROM the ledger table); plain SQL may read them';
SELECT 'attempt-zero', errcode((SELECT pre FROM ins) || 'VALUES (''t'', ''d1'', ''c'', ''x'', ''{}'', ''external'', ''claimed'', 0, random(), 0, 0, 0)') = 1811;
SELECT 'token-null', errmsg((SELECT pre FROM ins) || 'VALUES (''t'', ''d1'', ''c'', ''x'', ''{}'', ''external'', ''claimed'', 1, NULL, 0, 0, 0)') = 'idempotency: the rows of ledger L are written only by the extension (idem_claim, idem_settle, idem_resolve, idem_purge, or INSERT INTO and DELETE FROM the ledger table); plain SQL may read them';
SELECT 'token-short', errcode((SELECT pre FROM ins) || 'VALUES (''t'', ''d1'', ''c'', ''x'', ''{}'', ''external'', ''claimed'', 1, randomblob(15), 0, 0, 0)') = 1811;
SELECT 'token-text', errcode((SELECT pre FROM ins) || 'VALUES (''t'', ''d1'', ''c'', ''x'', ''{}'', ''external'', ''claimed'', 1, ''0123456789abcdef'', 0, 0, 0)') = 1811;
SELECT 'time-text', errcode((SELECT pre FROM ins) || 'VALUES (''t'', ''d1'', ''c'', ''x'', ''{}'', ''external'', ''claimed'', 1, random(), ''now'', 0, 0)') = 1811;
-- a second row with the same (tenant, key): a second claim
SELECT 'second-claim', errmsg((SELECT pre FROM ins) || 'VALUES (''t'', ''k1'', ''c'', ''x'', ''{}'', ''external'', ''claimed'', 1, random(), 0, 0, 0)') = 'idempotency: the rows of ledger L are written only by the extension (idem_claim, idem_settle, idem_resolve, idem_purge, or INSERT INTO and DELETE FROM the ledger table); plain SQL may read them';
SELECT 'second-claim-code', errcode((SELECT pre FROM ins) || 'VALUES (''t'', ''k1'', ''c'', ''x'', ''{}'', ''external'', ''claimed'', 1, random(), 0, 0, 0)') = 1811;
SELECT 'second-claim-of-terminal', errcode((SELECT pre FROM ins) || 'VALUES (''t'', ''k2'', ''c'', ''x'', ''{}'', ''external'', ''claimed'', 1, random(), 0, 0, 0)') = 1811;
SELECT 'same-rowid', errmsg('INSERT INTO L_rows(id, tenant, "key", conversation, tool, args, effect, status, attempt, token, created_at, updated_at, lease_until) VALUES ((SELECT id FROM L_rows WHERE "key" = ''k1''), ''t'', ''d9'', ''c'', ''x'', ''{}'', ''external'', ''claimed'', 1, random(), 0, 0, 0)') = 'idempotency: the rows of ledger L are written only by the extension (idem_claim, idem_settle, idem_resolve, idem_purge, or INSERT INTO and DELETE FROM the ledger table); plain SQL may read them';
SELECT 'other-tenant-same-key-refused', errmsg((SELECT pre FROM ins) || 'VALUES (''t2'', ''k1'', ''c'', ''x'', ''{}'', ''external'', ''claimed'', 1, random(), 0, 0, 0)') = 'idempotency: the rows of ledger L are written only by the extension (idem_claim, idem_settle, idem_resolve, idem_purge, or INSERT INTO and DELETE FROM the ledger table); plain SQL may read them';
SELECT 'direct-refusals-wrote-nothing', (SELECT count(*) FROM L_rows) = 4;

-- status changes and deletes by plain SQL: none, legal or not
SELECT 'succeeded-to-claimed', errmsg('UPDATE L_rows SET status = ''claimed'' WHERE "key" = ''k2''') = 'idempotency: the rows of ledger L are written only by the extension (idem_claim, idem_settle, idem_resolve, idem_purge, or INSERT INTO and DELETE FROM the ledger table); plain SQL may read them';
SELECT 'succeeded-to-claimed-code', errcode('UPDATE L_rows SET status = ''claimed'' WHERE "key" = ''k2''') = 1811;
SELECT 'succeeded-to-claimed-new-attempt', errcode('UPDATE L_rows SET status = ''claimed'', attempt = attempt + 1, token = random() WHERE "key" = ''k2''') = 1811;
SELECT 'succeeded-to-failed', errcode('UPDATE L_rows SET status = ''failed'' WHERE "key" = ''k2''') = 1811;
SELECT 'succeeded-to-released', errcode('UPDATE L_rows SET status = ''released'' WHERE "key" = ''k2''') = 1811;
SELECT 'succeeded-to-unknown', errcode('UPDATE L_rows SET status = ''unknown'' WHERE "key" = ''k2''') = 1811;
SELECT 'unknown-to-claimed', errcode('UPDATE L_rows SET status = ''claimed'' WHERE "key" = ''k3''') = 1811;
SELECT 'released-to-succeeded', errcode('UPDATE L_rows SET status = ''succeeded'' WHERE "key" = ''k4''') = 1811;
SELECT 'claimed-to-claimed-same-token', errcode('UPDATE L_rows SET status = ''claimed'', attempt = attempt + 1 WHERE "key" = ''k1''') = 1811;
SELECT 'settle-with-other-token', errcode('UPDATE L_rows SET status = ''succeeded'', token = random() WHERE "key" = ''k1''') = 1811;
SELECT 'settle-with-other-attempt', errcode('UPDATE L_rows SET status = ''succeeded'', attempt = 7 WHERE "key" = ''k1''') = 1811;
-- the request columns never change
SELECT 'change-args', errmsg('UPDATE L_rows SET args = ''{"a":1}'' WHERE "key" = ''k1''') = 'idempotency: the rows of ledger L are written only by the extension (idem_claim, idem_settle, idem_resolve, idem_purge, or INSERT INTO and DELETE FROM the ledger table); plain SQL may read them';
SELECT 'change-args-terminal', errcode('UPDATE L_rows SET args = ''{"a":1}'' WHERE "key" = ''k2''') = 1811;
SELECT 'change-tenant', errcode('UPDATE L_rows SET tenant = ''t9'' WHERE "key" = ''k1''') = 1811;
SELECT 'change-key', errcode('UPDATE L_rows SET "key" = ''k9'' WHERE "key" = ''k1''') = 1811;
SELECT 'change-conversation', errcode('UPDATE L_rows SET conversation = ''c9'' WHERE "key" = ''k1''') = 1811;
SELECT 'change-tool', errcode('UPDATE L_rows SET tool = ''x9'' WHERE "key" = ''k1''') = 1811;
SELECT 'change-effect', errcode('UPDATE L_rows SET effect = ''local'' WHERE "key" = ''k1''') = 1811;
SELECT 'change-created-at', errcode('UPDATE L_rows SET created_at = 1 WHERE "key" = ''k1''') = 1811;
SELECT 'change-id', errcode('UPDATE L_rows SET id = 99 WHERE "key" = ''k1''') = 1811;
SELECT 'change-result-of-terminal', errcode('UPDATE L_rows SET result = ''{"forged":1}'' WHERE "key" = ''k2''') = 1811;
SELECT 'update-to-bogus-status', errcode('UPDATE L_rows SET status = ''bogus'' WHERE "key" = ''k1''') IN (275, 1811);
SELECT 'updates-changed-nothing', (SELECT group_concat("key" || '=' || status || '/' || attempt, ',') FROM (SELECT * FROM L_rows WHERE tenant = 't' ORDER BY "key"))
       = 'k1=claimed/1,k2=succeeded/1,k3=unknown/1,k4=released/1';
SELECT 'args-unchanged', (SELECT args FROM L_rows WHERE "key" = 'k1') = '{}';
-- deleting a live row
SELECT 'delete-claimed', errmsg('DELETE FROM L_rows WHERE "key" = ''k1''') = 'idempotency: the rows of ledger L are written only by the extension (idem_claim, idem_settle, idem_resolve, idem_purge, or INSERT INTO and DELETE FROM the ledger table); plain SQL may read them';
SELECT 'delete-claimed-code', errcode('DELETE FROM L_rows WHERE "key" = ''k1''') = 1811;
SELECT 'delete-unknown', errmsg('DELETE FROM L_rows WHERE "key" = ''k3''') = 'idempotency: the rows of ledger L are written only by the extension (idem_claim, idem_settle, idem_resolve, idem_purge, or INSERT INTO and DELETE FROM the ledger table); plain SQL may read them';
SELECT 'delete-all-refused-atomic', errcode('DELETE FROM L_rows') = 1811 AND (SELECT count(*) FROM L_rows) = 4;
SELECT 'delete-terminal-refused', errmsg('DELETE FROM L_rows WHERE "key" = ''k4''') = 'idempotency: the rows of ledger L are written only by the extension (idem_claim, idem_settle, idem_resolve, idem_purge, or INSERT INTO and DELETE FROM the ledger table); plain SQL may read them' AND (SELECT count(*) FROM L_rows WHERE "key" = 'k4') = 1;
-- a change the ledger could make (a settle of a live claim) is refused too
SELECT 'legal-direct-settle-refused', errmsg('UPDATE L_rows SET status = ''failed'', error = ''{"direct":1}'' WHERE tenant = ''t'' AND "key" = ''k1''') = 'idempotency: the rows of ledger L are written only by the extension (idem_claim, idem_settle, idem_resolve, idem_purge, or INSERT INTO and DELETE FROM the ledger table); plain SQL may read them';
SELECT 'legal-direct-settle-wrote-nothing', (SELECT status FROM L_rows WHERE tenant = 't' AND "key" = 'k1') = 'claimed';
SELECT 'integrity', (SELECT integrity_check FROM pragma_integrity_check) = 'ok';

-- ---------------------------------------------------------------- foreign triggers
SELECT 'before-trigger-works', json_extract(idem_claim('L', 'f', 'c', 'x', '{}', 'external', 'f0'), '$.decision') = 'admitted';
CREATE TRIGGER t BEFORE INSERT ON L_rows BEGIN SELECT RAISE(IGNORE); END;
SELECT 'foreign-claim', errmsg('SELECT idem_claim(''L'', ''f'', ''c'', ''x'', ''{}'', ''external'', ''f1'')')
       = 'idem_claim: ledger L has a foreign trigger "t" on its shadow tables; every ledger operation is refused until it is dropped';
SELECT 'foreign-claim-code', errcode('SELECT idem_claim(''L'', ''f'', ''c'', ''x'', ''{}'', ''external'', ''f1'')') = 1;
SELECT 'foreign-claim-again', errmsg('SELECT idem_claim(''L'', ''f'', ''c'', ''x'', ''{}'', ''external'', ''f1'')')
       = 'idem_claim: ledger L has a foreign trigger "t" on its shadow tables; every ledger operation is refused until it is dropped';
SELECT 'foreign-claim-existing-key', errmsg('SELECT idem_claim(''L'', ''f'', ''c'', ''x'', ''{}'', ''external'', ''f0'')')
       = 'idem_claim: ledger L has a foreign trigger "t" on its shadow tables; every ledger operation is refused until it is dropped';
SELECT 'foreign-select', errmsg('SELECT count(*) FROM L')
       = 'idempotency: ledger L has a foreign trigger "t" on its shadow tables; every ledger operation is refused until it is dropped';
SELECT 'foreign-settle', errmsg('SELECT idem_settle(''L'', (SELECT printf(''%016x%016x'', id, token) FROM L_rows WHERE "key" = ''f0''), ''succeeded'', NULL)')
       = 'idem_settle: ledger L has a foreign trigger "t" on its shadow tables; every ledger operation is refused until it is dropped';
SELECT 'foreign-resolve', errmsg('SELECT idem_resolve(''L'', ''t'', ''k3'', ''failed'', NULL)')
       = 'idem_resolve: ledger L has a foreign trigger "t" on its shadow tables; every ledger operation is refused until it is dropped';
SELECT 'foreign-purge', errmsg('SELECT idem_purge(''L'', 0)')
       = 'idem_purge: ledger L has a foreign trigger "t" on its shadow tables; every ledger operation is refused until it is dropped';
SELECT 'foreign-insert', errmsg('INSERT INTO L(tenant, conversation, tool, args, key) VALUES (''f'', ''c'', ''x'', ''{}'', ''f2'')')
       = 'idempotency: ledger L has a foreign trigger "t" on its shadow tables; every ledger operation is refused until it is dropped';
SELECT 'foreign-insert-ignore', errcode('INSERT OR IGNORE INTO L(tenant, conversation, tool, args, key) VALUES (''f'', ''c'', ''x'', ''{}'', ''f2'')') <> 0;
SELECT 'foreign-delete', errmsg('DELETE FROM L WHERE key = ''k2''')
       = 'idempotency: ledger L has a foreign trigger "t" on its shadow tables; every ledger operation is refused until it is dropped';
SELECT 'foreign-nothing-admitted', (SELECT count(*) FROM L_rows WHERE tenant = 'f') = 1 AND (SELECT status FROM L_rows WHERE "key" = 'f0') = 'claimed';
SELECT 'foreign-nothing-changed', (SELECT count(*) FROM L_rows) = 5 AND (SELECT status FROM L_rows WHERE "key" = 'k3') = 'unknown';
-- another ledger is not affected
CREATE VIRTUAL TABLE M USING idempotency;
SELECT 'other-ledger-works', json_extract(idem_claim('M', 'f', 'c', 'x', '{}'), '$.decision') = 'admitted';
-- dropping it restores operation
DROP TRIGGER t;
SELECT 'restored-claim', json_extract(idem_claim('L', 'f', 'c', 'x', '{}', 'external', 'f1'), '$.decision') = 'admitted';
SELECT 'restored-settle', json_extract(idem_settle('L', (SELECT token FROM L WHERE key = 'f0'), 'succeeded', NULL), '$.status') = 'succeeded';
INSERT INTO L(tenant, conversation, tool, args, key) VALUES ('f', 'c', 'x', '{}', 'f2');
SELECT 'restored-insert', changes() = 1;
-- a TEMP trigger on main.L_rows
CREATE TEMP TRIGGER tt AFTER UPDATE ON main.L_rows BEGIN SELECT 1; END;
SELECT 'temp-trigger-claim', errmsg('SELECT idem_claim(''L'', ''f'', ''c'', ''x'', ''{}'', ''external'', ''f3'')')
       = 'idem_claim: ledger L has a foreign trigger "tt" on its shadow tables; every ledger operation is refused until it is dropped';
SELECT 'temp-trigger-settle', errmsg('SELECT idem_settle(''L'', (SELECT printf(''%016x%016x'', id, token) FROM L_rows WHERE "key" = ''f1''), ''succeeded'', NULL)')
       = 'idem_settle: ledger L has a foreign trigger "tt" on its shadow tables; every ledger operation is refused until it is dropped';
SELECT 'temp-trigger-insert', errmsg('INSERT INTO L(tenant, conversation, tool, args, key) VALUES (''f'', ''c'', ''x'', ''{}'', ''f3'')')
       = 'idempotency: ledger L has a foreign trigger "tt" on its shadow tables; every ledger operation is refused until it is dropped';
SELECT 'temp-trigger-nothing', (SELECT count(*) FROM L_rows WHERE "key" = 'f3') = 0 AND (SELECT status FROM L_rows WHERE "key" = 'f1') = 'claimed';
DROP TRIGGER tt;
SELECT 'temp-dropped-restored', json_extract(idem_claim('L', 'f', 'c', 'x', '{}', 'external', 'f3'), '$.decision') = 'admitted';
-- a TEMP trigger made by a nested statement, right after a call that read
-- temp's schema version: seen at the next call all the same
SELECT 'temp-nested-made', errmsg('CREATE TEMP TRIGGER tn AFTER UPDATE ON main.L_rows BEGIN SELECT 1; END') IS NULL;
SELECT 'temp-nested-claim', errmsg('SELECT idem_claim(''L'', ''f'', ''c'', ''x'', ''{}'', ''external'', ''f3'')')
       = 'idem_claim: ledger L has a foreign trigger "tn" on its shadow tables; every ledger operation is refused until it is dropped';
DROP TRIGGER tn;
SELECT 'temp-nested-dropped', json_extract(idem_claim('L', 'f', 'c', 'x', '{}', 'external', 'f3'), '$.decision') = 'in_progress';
-- a trigger on the meta and the guards table
CREATE TRIGGER tm AFTER UPDATE ON L_meta BEGIN SELECT 1; END;
SELECT 'meta-trigger', errmsg('SELECT idem_claim(''L'', ''f'', ''c'', ''x'', ''{}'', ''external'', ''f4'')')
       = 'idem_claim: ledger L has a foreign trigger "tm" on its shadow tables; every ledger operation is refused until it is dropped';
DROP TRIGGER tm;
CREATE TRIGGER tg BEFORE INSERT ON L_guards BEGIN SELECT 1; END;
SELECT 'guards-trigger', errmsg('SELECT idem_claim(''L'', ''f'', ''c'', ''x'', ''{}'', ''external'', ''f4'')')
       = 'idem_claim: ledger L has a foreign trigger "tg" on its shadow tables; every ledger operation is refused until it is dropped';
DROP TRIGGER tg;
-- the table named in another case (SQL names are case-insensitive)
CREATE TRIGGER tcase BEFORE INSERT ON l_ROWS BEGIN SELECT RAISE(IGNORE); END;
SELECT 'case-trigger', errmsg('SELECT idem_claim(''L'', ''f'', ''c'', ''x'', ''{}'', ''external'', ''f5'')')
       = 'idem_claim: ledger L has a foreign trigger "tcase" on its shadow tables; every ledger operation is refused until it is dropped';
-- whatever the message, a suppressed write is an error, never a false admitted
SELECT 'case-trigger-never-admitted', errcode('SELECT idem_claim(''L'', ''f'', ''c'', ''x'', ''{}'', ''external'', ''f5'')') = 1
       AND (SELECT count(*) FROM L_rows WHERE "key" = 'f5') = 0;
SELECT 'case-trigger-insert-never-admitted', errcode('INSERT INTO L(tenant, conversation, tool, args, key) VALUES (''f'', ''c'', ''x'', ''{}'', ''f5'')') <> 0
       AND (SELECT count(*) FROM L_rows WHERE "key" = 'f5') = 0;
DROP TRIGGER tcase;
CREATE TRIGGER tcase2 BEFORE UPDATE ON l_rows BEGIN SELECT RAISE(IGNORE); END;
SELECT 'case-trigger-update', errmsg('SELECT idem_settle(''L'', (SELECT printf(''%016x%016x'', id, token) FROM L_rows WHERE "key" = ''f1''), ''succeeded'', NULL)')
       = 'idem_settle: ledger L has a foreign trigger "tcase2" on its shadow tables; every ledger operation is refused until it is dropped';
SELECT 'case-trigger-update-never-settled', errcode('SELECT idem_settle(''L'', (SELECT printf(''%016x%016x'', id, token) FROM L_rows WHERE "key" = ''f1''), ''succeeded'', NULL)') = 1
       AND (SELECT status FROM L_rows WHERE "key" = 'f1') = 'claimed';
DROP TRIGGER tcase2;
-- one of the ledger's own names with other SQL: an altered own trigger
DROP TRIGGER L_rows_delete;
CREATE TRIGGER L_rows_delete BEFORE DELETE ON L_rows BEGIN SELECT 1; END;
SELECT 'impostor-trigger', errmsg('SELECT idem_claim(''L'', ''f'', ''c'', ''x'', ''{}'', ''external'', ''f6'')')
       = 'idem_claim: ledger L has its trigger "L_rows_delete" altered; rows may have been changed without it: check them (SELECT * FROM "L_rows") against what the application and the targets know, then restore it with SELECT idem_upgrade(''L''); every ledger operation is refused until then';
SELECT 'impostor-nothing', (SELECT count(*) FROM L_rows WHERE "key" = 'f6') = 0;
-- a missing own trigger stops every operation too (format 2)
DROP TRIGGER L_rows_delete;
SELECT 'missing-trigger-claim', errmsg('SELECT idem_claim(''L'', ''f'', ''c'', ''x'', ''{}'', ''external'', ''f6'')')
       = 'idem_claim: ledger L is missing its trigger "L_rows_delete"; rows may have been changed without it: check them (SELECT * FROM "L_rows") against what the application and the targets know, then restore it with SELECT idem_upgrade(''L''); every ledger operation is refused until then';
SELECT 'missing-trigger-select', errmsg('SELECT count(*) FROM L') GLOB 'idempotency: ledger L is missing its trigger "L_rows_delete"; *';
-- idem_upgrade restores it, and the ledger works again
SELECT 'restore-trigger', idem_upgrade('L') = '{"ledger":"L","from_format":5,"format":5,"rows_copied":0,"members_found":0,"triggers_created":1}';
SELECT 'restored-after-missing', json_extract(idem_claim('L', 'f', 'c', 'x', '{}', 'external', 'f6'), '$.decision') = 'admitted';
SELECT 'restore-nothing-to-do', idem_upgrade('L') = '{"ledger":"L","from_format":5,"format":5,"rows_copied":0,"members_found":0,"triggers_created":0}';
-- an altered own trigger is dropped and recreated by idem_upgrade
DROP TRIGGER L_rows_insert;
CREATE TRIGGER L_rows_insert BEFORE INSERT ON L_rows BEGIN SELECT 1; END;
SELECT 'restore-altered', idem_upgrade('L') = '{"ledger":"L","from_format":5,"format":5,"rows_copied":0,"members_found":0,"triggers_created":1}';
SELECT 'restore-altered-works', json_extract(idem_claim('L', 'f', 'c', 'x', '{}', 'external', 'f8'), '$.decision') = 'admitted';
-- a foreign trigger is not dropped for the user: idem_upgrade refuses
CREATE TRIGGER sneaky BEFORE UPDATE ON L_rows BEGIN SELECT 1; END;
SELECT 'upgrade-refuses-foreign', errmsg('SELECT idem_upgrade(''L'')')
       = 'idem_upgrade: ledger L has a foreign trigger "sneaky" on its shadow tables; drop it first (nothing was changed)';
DROP TRIGGER sneaky;
-- a trigger on an unrelated table does not matter
CREATE TABLE plain(x);
CREATE TRIGGER unrelated AFTER INSERT ON plain BEGIN SELECT 1; END;
SELECT 'unrelated-trigger-ok', json_extract(idem_claim('L', 'f', 'c', 'x', '{}', 'external', 'f7'), '$.decision') = 'admitted';
SELECT sqltest_clock(NULL);
