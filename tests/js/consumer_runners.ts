// tsc --strict over sqlite-idempotency/runners' declarations: a typed user,
// and misuse the declarations refuse (each @ts-expect-error must be an error).
import Database from 'better-sqlite3';
import { Ledger } from 'sqlite-idempotency';
import { isFinalRefusal, nonRetryable, retryAt, retriesSpanning, LEASE_MARGIN_MS } from 'sqlite-idempotency/runners';

class FatalError extends Error {}
const ledger = Ledger.open(new Database(':memory:'));
const sent: Promise<{ n: number }> = ledger.call('tenant-a', 'chat-1', 'send_email', { to: 'ann@example.com' }, async () => ({ n: 1 }))
  .then((o) => o.result ?? { n: 0 })
  .catch(nonRetryable((e) => new FatalError(e.message)));
const retry: (error: unknown) => boolean = (error) => !isFinalRefusal(error);
void sent; void retry;
class RetryableError extends Error {
  constructor(message: string, public options: { retryAfter: Date }) { super(message); }
}
const waited = nonRetryable((e) => new FatalError(e.message), { retry: (e, at) => new RetryableError(e.message, { retryAfter: at }) });
const at: Date | undefined = retryAt(new Error('x'));
const margin: number = LEASE_MARGIN_MS;
void waited; void at; void margin;
const attempts: number = retriesSpanning(15, { backoffRate: 2 }).maxAttempts;
void attempts;

// @ts-expect-error: make must be a function of the refusal
nonRetryable(FatalError);
// @ts-expect-error: make must return an Error
nonRetryable((e) => e.message);
// @ts-expect-error: isFinalRefusal takes one error
isFinalRefusal();
// @ts-expect-error: retry must return an Error
nonRetryable((e) => new FatalError(e.message), { retry: (e: Error, when: Date) => when });
