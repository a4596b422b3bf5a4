// sqlite-idempotency/runners without a runner: which errors are final
// (isFinalRefusal), what nonRetryable throws for each, and its refusal of
// bad arguments, with the exact messages.
import Database from 'better-sqlite3';
import { Ledger, ClaimInProgress, ClaimMismatch, LeaseLost, NotCommitted, NotSent, OutcomeUnknown } from 'sqlite-idempotency';
import { ToolCallError } from 'sqlite-idempotency/ai';
import { isFinalRefusal, nonRetryable, retryAt, retriesSpanning, LEASE_MARGIN_MS } from 'sqlite-idempotency/runners';
import { Checks } from './checks.mjs';

const checks = new Checks('runners.unit');
const j = (v) => JSON.stringify(v);
class FatalError extends Error {}

const errors = {
  OutcomeUnknown: [new OutcomeUnknown('aborted', { key: 'idem1-00000000000000000000000000000000' }), true],
  ClaimMismatch: [new ClaimMismatch({ key: 'idem1-00000000000000000000000000000000', message: 'bound to another request', differs: 'args' }), true],
  'ToolCallError unknown': [new ToolCallError('send_email did not finish', { decision: 'unknown' }), true],
  'ToolCallError failed': [new ToolCallError('send_email failed', { decision: 'failed' }), true],
  'ToolCallError no_tenant': [new ToolCallError('send_email was not run', { decision: 'no_tenant' }), true],
  ClaimInProgress: [new ClaimInProgress({ key: 'idem1-00000000000000000000000000000000', attempt: 1, lease_until: 0 }), false],
  'ToolCallError in_progress': [new ToolCallError('send_email was not run', { decision: 'in_progress' }), false],
  LeaseLost: [new LeaseLost('idem_renew: the lease is gone'), false],
  NotSent: [new NotSent('the mail API refused the connection'), false],
  NotCommitted: [new NotCommitted('idem1-00000000000000000000000000000000'), false],
  Error: [new Error('ECONNRESET'), false],
  string: ['not an error', false],
};
for (const [name, [error, final]] of Object.entries(errors)) {
  let thrown;
  try { nonRetryable((e) => new FatalError(e.message))(error); } catch (e) { thrown = e; }
  const ok = isFinalRefusal(error) === final
    && (final ? thrown instanceof FatalError && thrown.message === error.message && thrown.cause === error : thrown === error);
  checks.report(ok, `decision:${name}`, `isFinalRefusal ${isFinalRefusal(error)} (want ${final}); nonRetryable threw ${thrown?.constructor?.name} ${j(thrown?.message ?? thrown)} (want ${final ? 'a FatalError with the same message, its cause the refusal' : 'the error itself'})`);
}

// a cause the runner's error already has is kept
{
  const refusal = errors.OutcomeUnknown[0];
  const own = new Error('mine');
  let thrown;
  try { nonRetryable((e) => new FatalError(e.message, { cause: own }))(refusal); } catch (e) { thrown = e; }
  checks.report(thrown?.cause === own, 'cause-kept', `the cause is ${thrown?.cause?.message}`);
}

// bad arguments: make is not a function; make returns no Error
{
  let e1; try { nonRetryable('FatalError'); } catch (e) { e1 = e; }
  let e2; try { nonRetryable(() => 'fatal')(errors.ClaimMismatch[0]); } catch (e) { e2 = e; }
  checks.report(e1 instanceof TypeError && e1.message === 'sqlite-idempotency/runners: nonRetryable: make must be a function of the refusal that returns the runner\'s non-retryable error (e.g. (e) => new FatalError(e.message)), got "FatalError"'
    && e2 instanceof TypeError && e2.message === `sqlite-idempotency/runners: nonRetryable: make must return an Error (the runner's non-retryable error), got "fatal" for the refusal: ${errors.ClaimMismatch[0].message}` && e2.cause === errors.ClaimMismatch[0],
  'bad-arguments', `${e1?.message} / ${e2?.message}`);
}

// retryAt and the retry option: a call another holder is running is the
// runner's retryable error, to be retried a second after the holder's lease
// ends; every other error is as without the option
{
  class RetryableError extends Error {
    constructor(message, { retryAfter } = {}) { super(message); this.retryAfter = retryAfter; }
  }
  const handler = nonRetryable((e) => new FatalError(e.message), { retry: (e, at) => new RetryableError(e.message, { retryAfter: at }) });
  const lease = Date.UTC(2026, 11, 7, 15, 0, 0, 250);
  const held = new ClaimInProgress({ key: 'idem1-00000000000000000000000000000000', attempt: 1, lease_until: lease });
  const viaAdapter = new ToolCallError('send_email was not run', { decision: 'in_progress', cause: held });
  const outcomes = [];
  for (const error of [held, viaAdapter, errors.OutcomeUnknown[0], errors.NotSent[0], errors['ToolCallError in_progress'][0]]) {
    try { handler(error); } catch (e) { outcomes.push([e.constructor.name, e.retryAfter instanceof Date ? e.retryAfter.toISOString() : null, e === error || e.cause === error]); }
  }
  checks.report(LEASE_MARGIN_MS === 1000 && retryAt(held).toISOString() === '2026-12-07T15:00:01.250Z' && retryAt(viaAdapter).getTime() === lease + 1000
    && retryAt(errors.NotSent[0]) === undefined && retryAt(errors['ToolCallError in_progress'][0]) === undefined
    && held.message === 'idem1-00000000000000000000000000000000 is in progress (attempt 1, lease until 2026-12-07T15:00:00.250Z); nothing was sent'
    && j(outcomes) === j([
      ['RetryableError', '2026-12-07T15:00:01.250Z', true],
      ['RetryableError', '2026-12-07T15:00:01.250Z', true],
      ['FatalError', null, true],
      ['NotSent', null, true],
      ['ToolCallError', null, true],
    ]), 'retry-at-lease-end', `${held.message}; ${j(outcomes)}`);
  let e1; try { nonRetryable((e) => new FatalError(e.message), { retry: 'later' }); } catch (e) { e1 = e; }
  let e2; try { nonRetryable((e) => new FatalError(e.message), { retry: () => 'later' })(held); } catch (e) { e2 = e; }
  let e3; try { nonRetryable((e) => new FatalError(e.message), []); } catch (e) { e3 = e; }
  checks.report(e1 instanceof TypeError && e1.message === 'sqlite-idempotency/runners: nonRetryable: options.retry must be a function of the error and the Date to retry at that returns the runner\'s retryable error (e.g. (e, at) => new RetryableError(e.message, { retryAfter: at })), got "later"'
    && e2 instanceof TypeError && e2.message === `sqlite-idempotency/runners: nonRetryable: options.retry must return an Error (the runner's retryable error), got "later" for the call in progress: ${held.message}` && e2.cause === held
    && e3 instanceof TypeError && e3.message === 'sqlite-idempotency/runners: nonRetryable: options must be an object ({ retry }), got an array',
  'retry-bad-arguments', `${e1?.message} / ${e2?.message} / ${e3?.message}`);
}

// retriesSpanning: the fewest attempts whose delays reach past the lease
// and its margin (15 s + 1 s: 1+2+4+8+16 = 31 s of delays, six attempts;
// five would stop at 15 s, inside it), and its refusals
{
  const got = [retriesSpanning(15), retriesSpanning(0), retriesSpanning(15, { intervalSeconds: 2, backoffRate: 1 })];
  const bad = [() => retriesSpanning(-1), () => retriesSpanning(15, { backoffRate: 0.5 }), () => retriesSpanning(15, { intervalSeconds: 0 })].map((f) => {
    try { f(); return 'no error'; } catch (e) { return `${e.name}: ${e.message}`; }
  });
  checks.report(j(got) === j([
    { retriesAllowed: true, intervalSeconds: 1, backoffRate: 2, maxAttempts: 6 },
    { retriesAllowed: true, intervalSeconds: 1, backoffRate: 2, maxAttempts: 2 },
    { retriesAllowed: true, intervalSeconds: 2, backoffRate: 1, maxAttempts: 9 },
  ]) && j(bad) === j([
    "RangeError: sqlite-idempotency/runners: retriesSpanning: seconds must be a number of seconds >= 0 (the ledger's lease_seconds), got number",
    'RangeError: sqlite-idempotency/runners: retriesSpanning: backoffRate must be a number >= 1, got number',
    'RangeError: sqlite-idempotency/runners: retriesSpanning: intervalSeconds must be a number > 0, got number',
  ]), 'retries-spanning', `${j(got)} ${j(bad)}`);
}

// end to end without a runner: an unknown call's retry, through Ledger.call
{
  const ledger = Ledger.open(new Database(':memory:'));
  const send = () => ledger.call('tenant-a', 'chat-1', 'send_email', { to: 'ann@example.com' }, async () => { throw new Error('the connection reset after the request was sent'); })
    .catch(nonRetryable((e) => new FatalError(e.message)));
  const outcomes = [];
  for (let i = 0; i < 2; i += 1) { try { await send(); outcomes.push('resolved'); } catch (e) { outcomes.push(`${e.constructor.name}: ${e.message}`); } }
  const key = ledger.db.prepare("SELECT idem_key('tenant-a', 'chat-1', 'send_email', '{\"to\":\"ann@example.com\"}') AS k").get().k;
  checks.report(j(outcomes) === j([
    `FatalError: outcome of ${key} is unknown (Error: the connection reset after the request was sent); it will not be retried: reconcile with the target, then resolve`,
    `FatalError: outcome of ${key} is unknown (an earlier attempt may have reached the target); it will not be retried: reconcile with the target, then resolve`,
  ]), 'ledger-call', j(outcomes));
  ledger.close();
}
process.exit(checks.status());
