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
 * the refusal unless make set one); any other error is thrown as it is.
 * TypeError when make is not a function, or returns no Error.
 */
export function nonRetryable(make: (refusal: Error) => Error): (error: unknown) => never;
