-- The tenant rule through idem_upgrade (docs/guards.md): a format-2 file
-- whose guard on a single_tenant=1 ledger names a tenant column, with a row
-- of an open local claim's key whose tenant there is NULL (the old guard
-- found the claim by key alone and took it). Such a row cannot be a member
-- (the member rule matches the claim's tenant), so inferring the others
-- and going on would let the claim be taken over and the row written
-- again: the upgrade is refused naming the row, nothing changed; without
-- the row it upgrades. Run by tests/suites/65-upgrade.sh on a fresh copy of
-- tests/fixtures/format2.db (the guard and rows added here by plain SQL, as
-- the format-2 file allowed).
ATTACH 'build/upgrade/format2.db' AS f2;
CREATE TABLE f2.jobs(id INTEGER PRIMARY KEY, tenant TEXT, k TEXT);
INSERT INTO f2.S_guards(id, tbl, key_column, tenant_column, token_column) VALUES (1, 'jobs', 'k', 'tenant', NULL);
INSERT INTO f2.S_rows(tenant, "key", conversation, tool, args, effect, status, attempt, token, created_at, updated_at, lease_until)
  VALUES ('solo', 's-loc', 'c1', 'run', '{}', 'local', 'claimed', 1, 7, 0, 0, 4102444800000);
INSERT INTO f2.jobs(tenant, k) VALUES ('solo', 's-loc'), (NULL, 's-loc'), (NULL, 'other');
SELECT 'refused', errmsg('SELECT idem_upgrade(''S'')')
       = 'idem_upgrade: ledger S has a row of "jobs" (rowid 2) of the open local claim of key "s-loc" whose tenant column "tenant" is not TEXT: a guarded row''s tenant is its claim''s, so it cannot be recorded as a member and the claim''s take-over would write it again; delete the row (the claim''s next attempt writes it again, recorded), then upgrade (nothing was changed)';
SELECT 'refused-code', errcode('SELECT idem_upgrade(''S'')') = 19;
SELECT 'nothing-changed', (SELECT v FROM f2.S_meta WHERE k = 'format') = 2
   AND (SELECT count(*) FROM f2.sqlite_schema WHERE name = 'S_members') = 0
   AND (SELECT count(*) FROM pragma_table_info('S_rows', 'f2') WHERE name = 'marks') = 1;
-- without it, the row with the claim's tenant is found, the other key's is not
DELETE FROM f2.jobs WHERE id = 2;
SELECT 'upgraded', json_extract(idem_upgrade('S'), '$.members_found') = 1;
SELECT 'member', (SELECT group_concat(rid) FROM f2.S_members) = '1';
SELECT 'rule-holds-after', errmsg('INSERT INTO f2.jobs(tenant, k) VALUES (NULL, ''s-loc'')')
       = 'idem_guard: insert into "jobs" needs a TEXT tenant in column "tenant", which its guard names (a guarded row''s tenant is its claim''s); got NULL';
