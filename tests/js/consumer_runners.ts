// tsc --strict over sqlite-idempotency/runners' declarations: a typed user,
// and misuse the declarations refuse (each @ts-expect-error must be an error).
import Database from 'better-sqlite3';
import { Ledger } from 'sqlite-idempotency';
import { isFinalRefusal, nonRetryable } from 'sqlite-idempotency/runners';

class FatalError extends Error {}
const ledger = Ledger.open(new Database(':memory:'));
const sent: Promise<{ n: number }> = ledger.call('tenant-a', 'chat-1', 'send_email', { to: 'ann@example.com' }, async () => ({ n: 1 }))
  .then((o) => o.result ?? { n: 0 })
  .catch(nonRetryable((e) => new FatalError(e.message)));
const retry: (error: unknown) => boolean = (error) => !isFinalRefusal(error);
void sent; void retry;

// @ts-expect-error: make must be a function of the refusal
nonRetryable(FatalError);
// @ts-expect-error: make must return an Error
nonRetryable((e) => e.message);
// @ts-expect-error: isFinalRefusal takes one error
isFinalRefusal();
