-- Made with the extension loaded (the runner with --ext): the ledger file
-- that tests/sql/plain-NN-*.sql then change WITHOUT the extension. Each state of
-- the states table has a row; leases are an hour long.
ATTACH 'build/plain/ledger.db' AS f;
CREATE VIRTUAL TABLE f.L USING idempotency(lease_seconds=3600);
CREATE VIRTUAL TABLE f.S USING idempotency(lease_seconds=3600, single_tenant=1);
SELECT idem_claim('L', 't', 'c', 'send', '{"n":1}', 'external', 'live-ext');
SELECT idem_claim('L', 't', 'c', 'write', '{"n":2}', 'local', 'live-loc');
SELECT idem_settle('L', json_extract(idem_claim('L', 't', 'c', 'send', '{"n":3}', 'external', 'done'), '$.token'), 'succeeded', '{"ok":true}');
SELECT idem_settle('L', json_extract(idem_claim('L', 't', 'c', 'send', '{"n":4}', 'external', 'failed'), '$.token'), 'failed', '{"code":500}');
SELECT idem_settle('L', json_extract(idem_claim('L', 't', 'c', 'send', '{"n":5}', 'external', 'unk'), '$.token'), 'unknown', NULL);
SELECT idem_settle('L', json_extract(idem_claim('L', 't', 'c', 'send', '{"n":6}', 'external', 'rel'), '$.token'), 'released', '{"sent":false,"why":"refused locally"}');
SELECT idem_claim('S', 'solo', 'c', 'send', '{"n":1}', 'external', 'solo-live');
SELECT 'setup-rows', (SELECT count(*) FROM f.L_rows) = 6 AND (SELECT count(*) FROM f.S_rows) = 1;
-- a guarded local claim with a member, one without, and a max_attempts=1 ledger
CREATE VIRTUAL TABLE f.G USING idempotency(lease_seconds=60, max_attempts=1);
CREATE TABLE f.items(id INTEGER PRIMARY KEY, tenant TEXT, k TEXT);
INSERT INTO f.items(id, tenant, k) VALUES (1000, 't', 'filler');
SELECT idem_guard('f.G', 'items', 'k', 'tenant');
SELECT idem_claim('f.G', 't', 'c', 'write', '{"n":1}', 'local', 'with-member');
SELECT 'setup-member-low-rowid', errmsg('INSERT INTO f.items(id, tenant, k) VALUES (3, ''t'', ''with-member'')') IS NULL;
SELECT idem_claim('f.G', 't', 'c', 'write', '{"n":2}', 'local', 'no-member');
SELECT 'setup-members', (SELECT count(*) FROM f.G_members) = 1;
