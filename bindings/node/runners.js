'use strict';
// sqlite-idempotency/runners: the ledger's refusals as a durable runner's
// non-retryable error, so that the runner's own retries of a step stop
// where the ledger has decided (docs/integrations.md, "Durable runners").
//
//   import { FatalError } from 'workflow';
//   import { nonRetryable } from 'sqlite-idempotency/runners';
//   async function sendEmail(input) {
//     'use step';
//     return ledger.call(tenant, chat, 'send_email', input, send)
//       .catch(nonRetryable((e) => new FatalError(e.message)));
//   }
//
// Final (no retry changes it): OutcomeUnknown (the request may have reached
// the target; it is never sent again here), ClaimMismatch (the key is
// bound to another request), TargetConflict with a holder that succeeded
// or is unknown (a target held by another call; one still claimed may be
// freed by its outcome, so that one is retried), and the adapters'
// ToolCallError for every decision but in_progress (and such a conflict). Everything else is the runner's to retry as
// it would: ClaimInProgress (another holder is running the call: a later
// retry reads its outcome, or unknown once its lease is gone), LeaseLost
// and NotSent (nothing was sent), and the tool's own errors; with the retry
// option, ClaimInProgress is the runner's retryable error delayed to the
// holder's lease end (retryAt).
const { ClaimInProgress, ClaimMismatch, OutcomeUnknown, TargetConflict } = require('./index.js');
const { ToolCallError } = require('./agent-tools.js');

const describe = (v) => (typeof v === 'string' ? JSON.stringify(v) : v === null ? 'null' : typeof v);

// Whether error is a decision of the ledger that a retry of the step
// cannot change.
function isFinalRefusal(error) {
  if (error instanceof OutcomeUnknown || error instanceof ClaimMismatch) return true;
  const held = (c) => c instanceof TargetConflict && c.decision && c.decision.held_by && c.decision.held_by.status === 'claimed';
  if (error instanceof TargetConflict) return !held(error);
  return error instanceof ToolCallError && error.decision !== 'in_progress' && !(error.decision === 'conflict' && held(error.cause));
}

// The second after which a retry of the step can learn more than now: for
// a call another holder is running (ClaimInProgress, or an adapter's
// in_progress refusal caused by one), the end of that holder's lease plus
// a second. By then the holder has settled (a retry replays it), renewed
// (in_progress again, with a later lease), or died (its external claim is
// unknown: final). A runner's own retry delays (the DevKit's one second,
// three times) can all land inside a dead holder's lease, and the run then
// fails on "in progress", never reaching unknown. undefined for any other
// error.
const LEASE_MARGIN_MS = 1000;
function retryAt(error) {
  const held = error instanceof ToolCallError && error.decision === 'in_progress' ? error.cause : error;
  if (!(held instanceof ClaimInProgress) || !held.decision || typeof held.decision.lease_until !== 'number') return undefined;
  return new Date(held.decision.lease_until + LEASE_MARGIN_MS);
}

// A rejection handler: a final refusal is thrown as make(refusal) (the
// runner's non-retryable error, its cause the refusal unless make set one);
// with options.retry, a call another holder is running is thrown as
// retry(error, at) (the runner's retryable error with a delay: at is
// retryAt(error)); any other error is thrown as it is.
function nonRetryable(make, options) {
  const where = 'sqlite-idempotency/runners: nonRetryable';
  if (typeof make !== 'function') {
    throw new TypeError(`${where}: make must be a function of the refusal that returns the runner's non-retryable error (e.g. (e) => new FatalError(e.message)), got ${describe(make)}`);
  }
  if (options !== undefined && (options === null || typeof options !== 'object' || Array.isArray(options))) {
    throw new TypeError(`${where}: options must be an object ({ retry }), got ${Array.isArray(options) ? 'an array' : describe(options)}`);
  }
  const retry = options && options.retry;
  if (retry !== undefined && typeof retry !== 'function') {
    throw new TypeError(`${where}: options.retry must be a function of the error and the Date to retry at that returns the runner's retryable error (e.g. (e, at) => new RetryableError(e.message, { retryAfter: at })), got ${describe(retry)}`);
  }
  // out, the runner's error made by fn ("make" or "options.retry") for error
  const thrown = (out, error, fn, kind, of) => {
    if (!(out instanceof Error)) {
      throw new TypeError(`${where}: ${fn} must return an Error (the runner's ${kind} error), got ${describe(out)} for ${of}: ${error.message}`, { cause: error });
    }
    if (out.cause === undefined) out.cause = error;
    return out;
  };
  return (error) => {
    if (isFinalRefusal(error)) throw thrown(make(error), error, 'make', 'non-retryable', 'the refusal');
    const at = retry ? retryAt(error) : undefined;
    if (at) throw thrown(retry(error, at), error, 'options.retry', 'retryable', 'the call in progress');
    throw error;
  };
}

// For a runner whose retry delays are fixed settings (DBOS's step
// retriesAllowed, intervalSeconds, backoffRate, maxAttempts): the fewest
// attempts whose delays reach past a holder's lease of seconds (plus
// LEASE_MARGIN_MS), so that when a crashed holder's call is in progress
// at the first attempt, a later attempt reads its outcome or unknown rather
// than the retries ending inside the lease. seconds: the ledger's
// lease_seconds (3 heartbeats for a ledger Ledger.open created: 15).
function retriesSpanning(seconds, { intervalSeconds = 1, backoffRate = 2 } = {}) {
  const where = 'sqlite-idempotency/runners: retriesSpanning';
  if (!(Number.isFinite(seconds) && seconds >= 0)) throw new RangeError(`${where}: seconds must be a number of seconds >= 0 (the ledger's lease_seconds), got ${describe(seconds)}`);
  if (!(Number.isFinite(intervalSeconds) && intervalSeconds > 0)) throw new RangeError(`${where}: intervalSeconds must be a number > 0, got ${describe(intervalSeconds)}`);
  if (!(Number.isFinite(backoffRate) && backoffRate >= 1)) throw new RangeError(`${where}: backoffRate must be a number >= 1, got ${describe(backoffRate)}`);
  const need = seconds + LEASE_MARGIN_MS / 1000;
  let maxAttempts = 1;
  for (let waited = 0, delay = intervalSeconds; waited < need; delay *= backoffRate) {
    waited += delay;
    maxAttempts += 1;
  }
  return { retriesAllowed: true, intervalSeconds, backoffRate, maxAttempts };
}

module.exports = { isFinalRefusal, nonRetryable, retryAt, retriesSpanning, LEASE_MARGIN_MS };
