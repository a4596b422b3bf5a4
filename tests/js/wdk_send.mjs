// tests/js/wdk_send.mjs: the workflow module of test_runner_workflow.mjs,
// built by Vercel's Workflow DevKit (its "use workflow" and "use step"
// directives are compiled by the DevKit's builder; run as a plain module it
// is an ordinary function).
//
// sendEmail is one step: a guarded send_email call (Ledger.call) that POSTs
// job.args to the counting target with the attempt's Idempotency-Key.
// Each attempt appends { stepId, attempt } (getStepMetadata) to job.log.
//   job.fail 'inside'  the send throws after the request went out (the
//                      call is unknown)
//            'after'   the step throws on its first attempt after the call
//                      settled (the runner retries the step)
//   job.guard          the ledger's final refusal is the runner's FatalError
//                      (sqlite-idempotency/runners), ending its retries
//   job.waitOut        with job.guard: a call another holder is running is
//                      the runner's RetryableError, retried after that
//                      holder's lease (nonRetryable's retry option)
//   job.steps          how many times the workflow runs the step with the
//                      same arguments (a model re-planning the call)
import fs from 'node:fs';
import Database from 'better-sqlite3';
import { FatalError, RetryableError, getStepMetadata } from 'workflow';
import { Ledger } from 'sqlite-idempotency';
import { nonRetryable } from 'sqlite-idempotency/runners';

async function sendEmail(job) {
  'use step';
  const { stepId, attempt } = getStepMetadata();
  fs.appendFileSync(job.log, `${JSON.stringify({ stepId, attempt })}\n`);
  const ledger = Ledger.open(new Database(job.db), { options: { lease_seconds: 1 } });
  try {
    let call = ledger.call(job.tenant, job.conversation, 'send_email', job.args, async (a) => {
      const res = await fetch(job.url, { method: 'POST', headers: { ...a.headers, 'content-type': 'application/json' }, body: JSON.stringify(job.args) });
      const body = await res.json();
      if (job.fail === 'inside') throw new Error('the connection reset after the request was sent');
      return body;
    });
    const waitOut = job.waitOut ? { retry: (e, at) => new RetryableError(e.message, { retryAfter: at }) } : undefined;
    if (job.guard) call = call.catch(nonRetryable((e) => new FatalError(e.message), waitOut));
    const out = await call;
    if (job.fail === 'after' && attempt === 1) throw new Error('writing the receipt failed after the email was sent');
    return { idempotent: out.idempotent, key: out.key, n: out.result.n };
  } finally {
    ledger.close();
  }
}

export async function emailWorkflow(job) {
  'use workflow';
  const results = [];
  for (let i = 0; i < (job.steps || 1); i += 1) results.push(await sendEmail(job));
  return results;
}
