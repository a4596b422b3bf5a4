-- tests/ops/docs_fixture.sql: the agent.db that docs/operating.md's commands
-- run on (tests/ops/run_docs.py), with fixed times so that every output is
-- the same on every run: rows written in plain SQL as a claim and its settle
-- would write them. op-1 and op-7 are external claims whose lease ran out in
-- 2026 (they read unknown), op-3 a claim live until 2100.
.load build/idempotency
CREATE VIRTUAL TABLE ledger USING idempotency;
INSERT INTO ledger_rows(tenant, key, conversation, tool, args, effect, status, attempt, token, created_at, updated_at, lease_until) VALUES
  ('acme', 'op-1', 'conv-1', 'charge_card', '{"amount":5}', 'external', 'claimed', 1, 11, 1790000000000, 1790000000000, 1790000300000),
  ('acme', 'op-2', 'conv-1', 'send_email', '{"to":"a@example.com"}', 'external', 'claimed', 1, 12, 1790000100000, 1790000100000, 1790000400000),
  ('acme', 'op-3', 'conv-2', 'send_email', '{"to":"b@example.com"}', 'external', 'claimed', 1, 13, 1790000200000, 1790000200000, 4102444800000),
  ('globex', 'op-7', 'conv-9', 'charge_card', '{"amount":7}', 'external', 'claimed', 1, 14, 1790000300000, 1790000300000, 1790000600000);
UPDATE ledger_rows SET status = 'succeeded', result = '{"message_id":"m-1"}', updated_at = 1790000101000 WHERE key = 'op-2';
