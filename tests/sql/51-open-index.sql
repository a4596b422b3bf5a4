-- WHERE status = 'claimed' / 'unknown' on a ledger reads the partial index
-- of open rows (plan 4), not the table, and answers exactly what a scan
-- answers, effective statuses included: an external claim past its lease
-- reads unknown, a local one with members too, one without stays claimed.
SELECT sqltest_clock(1700000000000);
CREATE VIRTUAL TABLE L USING idempotency(lease_seconds=60);
CREATE TABLE items(id INTEGER PRIMARY KEY, tenant TEXT, k TEXT);
SELECT idem_guard('L', 'items', 'k', 'tenant');
SELECT idem_settle('L', json_extract(idem_claim('L', 't', 'c', 'x', '{"n":1}', 'external', 'done'), '$.token'), 'succeeded', NULL);
SELECT idem_settle('L', json_extract(idem_claim('L', 't', 'c', 'x', '{"n":2}', 'external', 'unk'), '$.token'), 'unknown', NULL);
SELECT idem_claim('L', 't', 'c', 'x', '{"n":3}', 'external', 'ext-live');
SELECT idem_claim('L', 't', 'c', 'x', '{"n":4}', 'local', 'loc-members');
INSERT INTO items(tenant, k) VALUES ('t', 'loc-members');
SELECT idem_claim('L', 't', 'c', 'x', '{"n":5}', 'local', 'loc-empty');
SELECT sqltest_clock(1700000000000 + 61000);
SELECT idem_claim('L', 't', 'c', 'x', '{"n":6}', 'external', 'ext-fresh');
SELECT 'unknown-rows', (SELECT group_concat("key", ',') FROM (SELECT "key" FROM L WHERE status = 'unknown' ORDER BY "key"))
       = 'ext-live,loc-members,unk';
SELECT 'unknown-as-scan', (SELECT group_concat("key", ',') FROM (SELECT "key" FROM L WHERE status || '' = 'unknown' ORDER BY "key"))
       = 'ext-live,loc-members,unk';
SELECT 'claimed-rows', (SELECT group_concat("key", ',') FROM (SELECT "key" FROM L WHERE status = 'claimed' ORDER BY "key"))
       = 'ext-fresh,loc-empty';
SELECT 'succeeded-scan', (SELECT group_concat("key", ',') FROM L WHERE status = 'succeeded') = 'done';
SELECT 'counts-agree', (SELECT count(*) FROM L WHERE status = 'unknown') + (SELECT count(*) FROM L WHERE status = 'claimed')
       = (SELECT count(*) FROM L WHERE status IN ('claimed', 'unknown'));
SELECT 'index-holds-open-rows-only', (SELECT count(*) FROM L_rows WHERE status = 'claimed' OR status = 'unknown') = 5;
