-- sqltest: file
-- An application may register SQL functions over SQLite's built-ins on the
-- connection the extension runs on (max, lower, json, ...). None is called
-- while the extension writes: not by its own statements, not by the
-- shadow tables' triggers, not by the guards' triggers (docs/design.md,
-- "One writer"). Every built-in below is registered over, after the
-- ledger's first operations (its checks read the schema once), by a
-- function that records its name and fails; each operation then succeeds
-- and sqltest_overloaded() names none.
PRAGMA journal_mode = WAL;
CREATE VIRTUAL TABLE L USING idempotency(lease_seconds=60);
CREATE TABLE orders(id INTEGER PRIMARY KEY, tenant TEXT, op TEXT, item TEXT);
SELECT 'guard', idem_guard('L', 'orders', 'op', 'tenant') = 1;
SELECT 'warm', json_extract(idem_claim('L', 't', 'c', 'x', '{}', 'external', 'k0'), '$.decision') = 'admitted';
-- sqltest: overload max,min,coalesce,abs,iif,ifnull,nullif,lower,upper,length,typeof,instr,substr,substring,printf,format,round,hex,quote,char,unicode,replace,trim,ltrim,rtrim,json,json_object,json_array,json_valid,glob,like,julianday,unixepoch,strftime,datetime,date,time,random,randomblob,changes,total_changes,last_insert_rowid,likelihood,unlikely,likely,sqlite_version,zeroblob,count,sum,total,avg,group_concat,string_agg
SELECT 'claim', json_extract(idem_claim('L', 't', 'c', 'x', '{"n":1}', 'external', 'k1'), '$.decision') = 'admitted';
SELECT 'claim-called', sqltest_overloaded() = '';
SELECT 'claim-targets', json_extract(idem_claim('L', 't', 'c', 'x', '{"n":2}', 'external', 'k2', '{"targets":["a"]}'), '$.decision') = 'admitted';
SELECT 'claim-conflict', json_extract(idem_claim('L', 't', 'c', 'x', '{"n":3}', 'external', 'k3', '{"targets":["a"]}'), '$.decision') = 'conflict';
SELECT 'targets-called', sqltest_overloaded() = '';
SELECT 'renew', idem_renew('L', (SELECT token FROM L WHERE key = 'k1'), 120) > 0;
SELECT 'renew-called', sqltest_overloaded() = '';
SELECT 'settle', json_extract(idem_settle('L', (SELECT token FROM L WHERE key = 'k1'), 'unknown', '{"e":1}'), '$.status') = 'unknown';
SELECT 'settle-called', sqltest_overloaded() = '';
SELECT 'resolve', json_extract(idem_resolve('L', 't', 'k1', 'succeeded', '{"ok":1}'), '$.status') = 'succeeded';
SELECT 'resolve-called', sqltest_overloaded() = '';
SELECT 'replay', json_extract(idem_claim('L', 't', 'c', 'x', '{"n":1}', 'external', 'k1'), '$.decision') = 'replay';
SELECT 'local', json_extract(idem_claim('L', 't', 'c', 'add', '{"item":"pen"}', 'local', 'op-1'), '$.decision') = 'admitted';
INSERT INTO orders(tenant, op, item) VALUES ('t', 'op-1', 'pen');
SELECT 'guarded-called', sqltest_overloaded() = '';
SELECT 'local-settle', json_extract(idem_settle('L', (SELECT token FROM L WHERE key = 'op-1'), 'succeeded', '{}'), '$.members') = '[{"table":"orders","rowid":1}]';
SELECT 'local-settle-called', sqltest_overloaded() = '';
SELECT 'purge', idem_purge('L', 0) >= 0;
SELECT 'purge-called', sqltest_overloaded() = '';
DELETE FROM L WHERE key = 'op-1';
SELECT 'delete-called', sqltest_overloaded() = '';
INSERT INTO L(tenant, conversation, tool, args, key) VALUES ('t', 'c', 'x', '{"n":9}', 'k9');
SELECT 'insert-called', sqltest_overloaded() = '';
SELECT 'upgrade', json_extract(idem_upgrade('L'), '$.format') = 5;
SELECT 'upgrade-called', sqltest_overloaded() = '';
