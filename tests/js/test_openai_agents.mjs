// sqlite-idempotency/openai-agents end to end (from @openai/agents-core,
// what @openai/agents re-exports, which loads faster): run() with a custom Model
// (the SDK's Model interface) that emits the same send_email call again
// under a new callId, against the counting target. The scenarios are
// tests/js/agent_harness.mjs's; here also:
//   tool-timeout  the tool's own timeoutMs (tool({ timeoutMs })) fires while
//                 it is sending: the call is unknown, the model reads the
//                 unknown sentence (not the SDK's "try again"), and the
//                 retry sends nothing
//   no-conversation  a run without a conversation in its context: the model
//                 reads the refusal naming it; nothing is sent
import { Agent, run, setTracingDisabled, tool, Usage } from '@openai/agents-core';
import { z } from 'zod';
import { idempotentTool, currentAttempt } from 'sqlite-idempotency/openai-agents';
import { main, postJson, sendBody, UNKNOWN, j, argsOf, targetsOf } from './agent_harness.mjs';

setTracingDisabled(true);

// A Model that calls send_email `calls` times, each under a new callId, then answers.
function scriptedModel(job, seen) {
  let step = 0;
  return {
    async getResponse(request) {
      step += 1;
      seen.length = 0;
      for (const item of request.input) {
        if (item.type === 'function_call_result') seen.push(item.output.type === 'text' ? item.output.text : j(item.output));
      }
      const output = step <= job.calls
        ? [{ type: 'function_call', callId: `call-${process.pid}-${step}`, name: 'send_email', arguments: j(argsOf(job, step - 1)), status: 'completed' }]
        : [{ type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: 'done' }] }];
      return { usage: new Usage(), output };
    },
    // eslint-disable-next-line require-yield
    async *getStreamedResponse() { throw new Error('scriptedModel: streaming is not scripted'); },
  };
}

async function turn(job, { toolTimeoutMs, context } = {}) {
  const seen = [];
  const sendEmail = tool(idempotentTool(job.ledger, 'send_email', {
    tenant: (input, runContext) => runContext.context.userId,
    conversation: (input, runContext) => runContext.context.conversationId,
    waitMs: job.waitMs || 0,
    ...targetsOf(job),
  }, {
    description: 'send an email',
    parameters: z.object({ to: z.string(), invoice: z.number().nullable().optional(), body: z.string().nullable().optional() }),
    timeoutMs: toolTimeoutMs,
    execute: async (input) => sendBody(postJson, { ...job, args: input }, currentAttempt().headers),
  }));
  const agent = new Agent({ name: 'mailer', model: scriptedModel(job, seen), tools: [sendEmail] });
  await run(agent, 'send it', { context: context || { userId: job.tenant, conversationId: job.conversation }, maxTurns: job.calls + 2 });
  return seen;
}

await main({ prefix: 'integrations.openai-agents', turn }, async ({ ledger, target, base, report, keyOf }) => {
  {
    const job = { ...base, ledger, args: { to: 'tool-timeout@example.com' }, calls: 2, delayMs: 1500, timeoutMs: 8000 };
    const key = keyOf(job);
    const seen = await turn(job, { toolTimeoutMs: 300 });
    const n = (await target.counts())[key];
    const status = ledger.row(job.tenant, key)?.status;
    report(n === 1 && status === 'unknown' && seen.length === 2 && seen.every((t) => t.includes(UNKNOWN)) && seen[0].startsWith(`send_email did not finish (key ${key}: timed out after 300 ms): `),
      'tool-timeout', `the target saw ${n} (want 1), the row is ${status}; the model read ${j(seen)}`);
  }
  {
    const job = { ...base, ledger, args: { to: 'no-conversation@example.com' } };
    const before = j(await target.counts());
    const seen = await turn(job, { context: { userId: 'tenant-a' } });
    report(seen.length === 1 && seen[0] === 'send_email was not run: no conversation for this call (options.conversation returned undefined); the application must supply it, and nothing was sent. Do not call send_email again until it does.' &&
      j(await target.counts()) === before, 'no-conversation', `the model read ${j(seen)}; the target saw ${before}, then ${j(await target.counts())}`);
  }
});
