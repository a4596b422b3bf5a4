-- sqltest: file
-- Loading the extension a second time into a connection that has it (SQL
-- load_extension() again, or a binding's load() on a connection that
-- already loaded it) changes nothing: ledgers already connected keep
-- working, new ones connect, and the connection closes cleanly.

ATTACH ':memory:' AS aux;
CREATE VIRTUAL TABLE L USING idempotency;
CREATE VIRTUAL TABLE aux.M USING idempotency;
CREATE TABLE orders(k TEXT, t TEXT);
SELECT 'guarded', idem_guard('L', 'orders', 'k', 't') = 1;
SELECT 'first-claim', json_extract(idem_claim('L', 't', 'c', 'x', '{}', 'local', 'k1'), '$.decision') = 'admitted';

SELECT 'loaded-again', sqltest_load_again() = 1;

SELECT 'connected-ledger-claims', json_extract(idem_claim('L', 't', 'c', 'x', '{}', 'external', 'k2'), '$.decision') = 'admitted';
SELECT 'attached-ledger-claims', json_extract(idem_claim('aux.M', 't', 'c', 'x', '{}'), '$.decision') = 'admitted';
INSERT INTO orders VALUES ('k1', 't');
SELECT 'guard-still-works', errmsg('INSERT INTO orders VALUES (''zz'', ''t'')') LIKE 'idem_guard: insert into "orders" refused: %';
SELECT 'settle', json_extract(idem_settle('L', (SELECT token FROM L WHERE key = 'k1'), 'succeeded', '{}'), '$.members[0].table') = 'orders';
SELECT 'replay', json_extract(idem_claim('L', 't', 'c', 'x', '{}', 'local', 'k1'), '$.decision') = 'replay';
CREATE VIRTUAL TABLE N USING idempotency;
SELECT 'new-ledger', json_extract(idem_claim('N', 't', 'c', 'x', '{}'), '$.decision') = 'admitted';
SELECT 'loaded-a-third-time', sqltest_load_again() = 1;
SELECT 'rows', (SELECT count(*) FROM L) = 2 AND (SELECT count(*) FROM aux.M) = 1 AND (SELECT count(*) FROM N) = 1;
