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
// and NotSent (nothing was sent), and the tool's own errors.
const { ClaimMismatch, OutcomeUnknown, TargetConflict } = require('./index.js');
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

// A rejection handler: a final refusal is thrown as make(refusal) (the
// runner's non-retryable error, its cause the refusal unless make set one);
// any other error is thrown as it is.
function nonRetryable(make) {
  const where = 'sqlite-idempotency/runners: nonRetryable';
  if (typeof make !== 'function') {
    throw new TypeError(`${where}: make must be a function of the refusal that returns the runner's non-retryable error (e.g. (e) => new FatalError(e.message)), got ${describe(make)}`);
  }
  return (error) => {
    if (!isFinalRefusal(error)) throw error;
    const out = make(error);
    if (!(out instanceof Error)) {
      throw new TypeError(`${where}: make must return an Error (the runner's non-retryable error), got ${describe(out)} for the refusal: ${error.message}`, { cause: error });
    }
    if (out.cause === undefined) out.cause = error;
    throw out;
  };
}

module.exports = { isFinalRefusal, nonRetryable };
