-- Without the extension: a local claim's members are in the file, so the
-- rows table's triggers refuse its release and its take-over; a take-over
-- past the ledger's max_attempts is refused; members cannot be forged,
-- changed or (while their claim is open) lost, options and guards stay.
-- Set up by tests/sql/plain-setup.sql (ledger G: lease 60 s, max_attempts=1).
ATTACH 'build/plain/ledger.db' AS f;
SELECT 'no-extension', (SELECT count(*) FROM pragma_function_list WHERE name = 'idem_claim') = 0;
CREATE TEMP TABLE msg(k PRIMARY KEY, v);
INSERT INTO msg VALUES
  ('upd', 'idempotency: illegal change of a ledger row: the request never changes, a live claim is not taken over, unknown never becomes claimed, succeeded and failed are final, an external claim is released only with detail {"sent": false}, and a local claim that wrote guarded rows is neither released nor taken over'),
  ('mem', 'idempotency: a member is recorded only by a guard trigger, for the claimed local claim that wrote it, and kept unchanged while that claim is claimed or unknown'),
  ('meta', 'idempotency: the format, identity and options of a ledger are fixed when it is created'),
  ('guards', 'idempotency: a guard is added only by idem_guard and removed only by idem_unguard');
CREATE TEMP VIEW m AS SELECT (SELECT v FROM msg WHERE k = 'upd') AS upd, (SELECT v FROM msg WHERE k = 'mem') AS mem,
  (SELECT v FROM msg WHERE k = 'meta') AS meta, (SELECT v FROM msg WHERE k = 'guards') AS guards;
SELECT 'member-recorded', (SELECT rid FROM f.G_members WHERE claim = (SELECT id FROM f.G_rows WHERE "key" = 'with-member')) = 3;
-- release of a local claim with a member: refused; without one: allowed
SELECT 'release-with-member', errmsg('UPDATE f.G_rows SET status = ''released'' WHERE "key" = ''with-member''') = (SELECT upd FROM m);
SELECT 'release-without-member', errmsg('UPDATE f.G_rows SET status = ''released'' WHERE "key" = ''no-member''') IS NULL;
-- past the lease: a take-over of the claim with a member is refused
SELECT sqltest_clock(CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER) + 120000) > 0;
SELECT 'takeover-with-member', errmsg('UPDATE f.G_rows SET status = ''claimed'', attempt = attempt + 1, token = token + 1, expirations = expirations + 1 WHERE "key" = ''with-member''') = (SELECT upd FROM m);
-- a re-claim of the released one is no expiry: allowed
SELECT 'reclaim-released', errmsg('UPDATE f.G_rows SET status = ''claimed'', attempt = attempt + 1, token = token + 1, lease_until = lease_until + 1 WHERE "key" = ''no-member''') IS NULL;
-- its lease passes too: with max_attempts=1 its first expiry fails it, no take-over
SELECT sqltest_clock(CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER) + 120000) > 0;
SELECT 'takeover-past-max-attempts', errmsg('UPDATE f.G_rows SET status = ''claimed'', attempt = attempt + 1, token = token + 1, expirations = expirations + 1 WHERE "key" = ''no-member''') = (SELECT upd FROM m);
SELECT 'still-attempt-2', (SELECT attempt || '/' || expirations FROM f.G_rows WHERE "key" = 'no-member') = '2/0';
-- members: no forgery, no change; the guard's trigger keeps the row's rowid
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
