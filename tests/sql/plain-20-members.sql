-- Without the extension: no write of the rows, members or guards tables
-- (their triggers call idem_own_write(), which only the extension defines),
-- so a local claim with members is neither released nor taken over, no
-- claim goes past max_attempts, members cannot be forged, changed or lost,
-- options and guards stay.
-- Set up by tests/sql/plain-setup.sql (ledger G: lease 60 s, max_attempts=1).
ATTACH 'build/plain/ledger.db' AS f;
SELECT 'no-extension', (SELECT count(*) FROM pragma_function_list WHERE name = 'idem_claim') = 0;
CREATE TEMP TABLE msg(k PRIMARY KEY, v);
INSERT INTO msg VALUES
  ('upd', 'no such function: idem_own_write'),
  ('mem', 'no such function: idem_own_write'),
  ('meta', 'idempotency: the format, identity and options of a ledger are fixed when it is created'),
  ('guards', 'no such function: idem_own_write');
CREATE TEMP VIEW m AS SELECT (SELECT v FROM msg WHERE k = 'upd') AS upd, (SELECT v FROM msg WHERE k = 'mem') AS mem,
  (SELECT v FROM msg WHERE k = 'meta') AS meta, (SELECT v FROM msg WHERE k = 'guards') AS guards;
SELECT 'member-recorded', (SELECT rid FROM f.G_members WHERE claim = (SELECT id FROM f.G_rows WHERE "key" = 'with-member')) = 3;
-- release of a local claim, with a member or without: refused
SELECT 'release-with-member', errmsg('UPDATE f.G_rows SET status = ''released'' WHERE "key" = ''with-member''') = (SELECT upd FROM m);
SELECT 'release-without-member', errmsg('UPDATE f.G_rows SET status = ''released'' WHERE "key" = ''no-member''') = (SELECT upd FROM m);
-- past the lease: a take-over of the claim with a member is refused
SELECT sqltest_clock(CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER) + 120000) > 0;
SELECT 'takeover-with-member', errmsg('UPDATE f.G_rows SET status = ''claimed'', attempt = attempt + 1, token = token + 1, expirations = expirations + 1 WHERE "key" = ''with-member''') = (SELECT upd FROM m);
-- a take-over of the one without members: refused too
SELECT 'takeover-without-member', errmsg('UPDATE f.G_rows SET status = ''claimed'', attempt = attempt + 1, token = token + 1, expirations = expirations + 1 WHERE "key" = ''no-member''') = (SELECT upd FROM m);
-- with max_attempts=1 no take-over at all
SELECT 'takeover-past-max-attempts', errmsg('UPDATE f.G_rows SET status = ''claimed'', attempt = attempt + 1, token = token + 1, expirations = expirations + 1 WHERE "key" = ''no-member''') = (SELECT upd FROM m);
SELECT 'still-attempt-1', (SELECT status || '/' || attempt || '/' || expirations FROM f.G_rows WHERE "key" = 'no-member') = 'claimed/1/0';
-- members: no forgery, no change
SELECT 'member-forged', errmsg('INSERT INTO f.G_members VALUES (999, 1, 1, 5)') = (SELECT mem FROM m);
SELECT 'member-changed', errmsg('UPDATE f.G_members SET rid = 4') = (SELECT mem FROM m);
-- options and guards are fixed
SELECT 'meta-fixed', errmsg('UPDATE f.G_meta SET v = 100 WHERE k = ''max_attempts''') = (SELECT meta FROM m);
SELECT 'meta-no-delete', errmsg('DELETE FROM f.G_meta') = (SELECT meta FROM m);
SELECT 'guards-no-delete', errmsg('DELETE FROM f.G_guards') = (SELECT guards FROM m);
SELECT 'guards-no-forge', errmsg('INSERT INTO f.G_guards(tbl, key_column) VALUES (''other'', ''k'')') = (SELECT guards FROM m);
SELECT 'guards-no-update', errmsg('UPDATE f.G_guards SET tenant_column = NULL') = (SELECT guards FROM m);
-- no member lost while its claim is open: not by hand, not by deleting the row
SELECT 'member-delete-refused', errmsg('DELETE FROM f.G_members') = (SELECT mem FROM m);
SELECT 'row-delete-keeps-member', errmsg('DELETE FROM f.items WHERE k = ''with-member''') IS NULL
       AND (SELECT count(*) FROM f.G_members) = 1;
SELECT 'release-after-row-delete', errmsg('UPDATE f.G_rows SET status = ''released'' WHERE "key" = ''with-member''') = (SELECT upd FROM m);
-- a REPLACE cannot rewrite a guard (it deletes without firing delete triggers)
SELECT 'guards-no-replace', errmsg('REPLACE INTO f.G_guards(id, tbl, key_column, tenant_column) VALUES (1, ''items'', ''tenant'', ''k'')') = (SELECT guards FROM m);
SELECT 'unchanged', (SELECT count(*) FROM f.G_members) = 1 AND (SELECT v FROM f.G_meta WHERE k = 'max_attempts') = 1
       AND (SELECT count(*) FROM f.G_guards) = 1;
