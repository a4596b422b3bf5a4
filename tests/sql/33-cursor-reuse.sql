-- Cursors borrow the ledger's prepared statement for their plan; a second
-- cursor of the same plan (a self-join) prepares its own.
CREATE VIRTUAL TABLE L USING idempotency;
SELECT 'c1', json_extract(idem_claim('L','t','c','x','{}','external','a'),'$.decision')='admitted';
SELECT 'c2', json_extract(idem_claim('L','t','c','x','{}','external','b'),'$.decision')='admitted';
SELECT 'self-join', (SELECT count(*) FROM L AS x JOIN L AS y ON x.tenant=y.tenant) = 4;
SELECT 'nested-key', (SELECT count(*) FROM L AS x WHERE EXISTS (SELECT 1 FROM L AS y WHERE y.tenant=x.tenant AND y."key"=x."key")) = 2;
SELECT 'rename-while', 1;
ALTER TABLE L RENAME TO M;
SELECT 'after-rename', (SELECT count(*) FROM M WHERE tenant='t' AND "key"='a') = 1;
SELECT 'repeat-lookups', (SELECT group_concat(n) FROM (SELECT (SELECT count(*) FROM M WHERE tenant='t' AND "key"=v.k) AS n FROM (SELECT 'a' AS k UNION ALL SELECT 'b' UNION ALL SELECT 'zz') AS v)) = '1,1,0';
SELECT 'token-lookup', (SELECT "key" FROM M WHERE token = (SELECT token FROM M WHERE "key"='b')) = 'b';
