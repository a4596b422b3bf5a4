// TypeScript declarations of sqlite-idempotency/runners (runners.js).

/**
 * Whether error is a decision of the ledger that no retry of the step
 * changes: OutcomeUnknown, ClaimMismatch, or an adapter's ToolCallError
 * for any decision but in_progress.
 */
export function isFinalRefusal(error: unknown): boolean;

/**
 * A rejection handler for a durable runner's step: a final refusal is
 * thrown as make(refusal), the runner's non-retryable error (its cause is
 * the refusal unless make set one); with options.retry, a call another
 * holder is running is thrown as retry(error, retryAt(error)); any other
 * error is thrown as it is. TypeError when make (or retry) is not a
 * function, or returns no Error.
 */
export function nonRetryable(make: (refusal: Error) => Error, options?: NonRetryableOptions): (error: unknown) => never;

/** Options of nonRetryable. */
export interface NonRetryableOptions {
  /**
   * The runner's retryable error for a call another holder is running
   * (ClaimInProgress, or an adapter's in_progress refusal), to be retried
   * at `at` (retryAt: the holder's lease end plus a second), e.g.
   * `(e, at) => new RetryableError(e.message, { retryAfter: at })`.
   * Without it such an error is thrown as it is.
   */
  retry?: (error: Error, at: Date) => Error;
}

/**
 * The Date after which a retry of the step can learn more: for a call
 * another holder is running, its lease's end plus LEASE_MARGIN_MS (by then
 * it settled, renewed, or is unknown); undefined for any other error.
 */
export function retryAt(error: unknown): Date | undefined;

/** The second added to a holder's lease end by retryAt (1000). */
export const LEASE_MARGIN_MS: number;

/**
 * Retry settings for a runner whose delays are fixed (DBOS's step config):
 * the fewest attempts whose delays (intervalSeconds, times backoffRate each
 * time) reach past a holder's lease of `seconds` plus LEASE_MARGIN_MS, so a
 * call in progress at the first attempt is read again after the lease.
 * RangeError for a bad argument.
 */
export function retriesSpanning(seconds: number, options?: { intervalSeconds?: number; backoffRate?: number }):
  { retriesAllowed: true; intervalSeconds: number; backoffRate: number; maxAttempts: number };
