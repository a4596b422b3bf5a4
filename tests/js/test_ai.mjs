// sqlite-idempotency/ai end to end: generateText with the AI SDK's own mock
// model (MockLanguageModelV3 from ai/test), which emits the same send_email
// call again under a new toolCallId, against the counting target. The
// scenarios are tests/js/agent_harness.mjs's; here also:
//   abort      generateText's abortSignal aborts while the tool is sending:
//              the call is unknown, the retry reads the unknown sentence
//              and sends nothing
//   options    idempotentTool refuses a call with no tenant, naming it, and
//              bad options when it wraps
import { generateText, isStepCount, tool } from 'ai';
import { MockLanguageModelV3 } from 'ai/test';
import { z } from 'zod';
import { idempotentTool, currentAttempt, ToolCallError } from 'sqlite-idempotency/ai';
import { say } from 'sqlite-idempotency/words';
import { main, postJson, sendBody, UNKNOWN, j, argsOf, targetsOf } from './agent_harness.mjs';

const usage = { inputTokens: { total: 1 }, outputTokens: { total: 1 } };
const finish = (unified) => ({ unified, raw: undefined });

// What the model read of each tool result in its last prompt.
function readBack(prompt) {
  const texts = [];
  for (const m of prompt) {
    if (m.role !== 'tool') continue;
    for (const part of m.content) {
      if (part.type !== 'tool-result') continue;
      const o = part.output;
      texts.push(o.type === 'json' || o.type === 'error-json' ? j(o.value) : o.value);
    }
  }
  return texts;
}

function sendTool(job, tenant = () => job.tenant) {
  return idempotentTool(job.ledger, 'send_email', {
    tenant,
    conversation: (input, options) => options.context.chatId,
    waitMs: job.waitMs || 0,
    ...targetsOf(job),
  }, tool({
    inputSchema: z.object({ to: z.string(), invoice: z.number().optional(), body: z.string().optional() }),
    execute: async (input) => sendBody(postJson, { ...job, args: input }, currentAttempt().headers),
  }));
}

async function turn(job, { abortSignal, tenant, toolsContext = { send_email: { chatId: job.conversation } } } = {}) {
  let step = 0;
  let last = [];
  const model = new MockLanguageModelV3({
    doGenerate: async ({ prompt }) => {
      last = prompt;
      step += 1;
      if (step <= job.calls) {
        return { content: [{ type: 'tool-call', toolCallId: `call-${process.pid}-${step}`, toolName: 'send_email', input: j(argsOf(job, step - 1)) }], finishReason: finish('tool-calls'), usage, warnings: [] };
      }
      return { content: [{ type: 'text', text: 'done' }], finishReason: finish('stop'), usage, warnings: [] };
    },
  });
  await generateText({
    model, prompt: 'send it', tools: { send_email: sendTool(job, tenant) }, stopWhen: isStepCount(job.calls + 1),
    toolsContext, abortSignal,
  });
  return readBack(last);
}

await main({ prefix: 'integrations.ai', turn }, async ({ ledger, target, base, report, keyOf }) => {
  // abort: generateText's abortSignal fires while the tool is sending
  {
    const job = { ...base, ledger, args: { to: 'abort@example.com' }, delayMs: 1500 };
    const key = keyOf(job);
    const ac = new AbortController();
    setTimeout(() => ac.abort(new Error('the user stopped it')), 300);
    let error;
    try { await turn(job, { abortSignal: ac.signal }); } catch (e) { error = e; }
    const status = ledger.row(job.tenant, key)?.status;
    const seen = await turn({ ...job, delayMs: 0 });
    const n = (await target.counts())[key];
    report(error !== undefined && status === 'unknown' && n === 1 && seen.length === 1 && seen[0].includes(UNKNOWN), 'abort',
      `generateText ${error ? `rejected (${error.name})` : 'resolved'}, the row is ${status} (want unknown); the target saw ${n} (want 1); the retry read ${j(seen)}`);
  }
  // options: no tenant is a tool error naming it; bad options throw at wrap time
  {
    const job = { ...base, ledger, args: { to: 'no-tenant@example.com' } };
    const seen = await turn(job, { tenant: () => undefined });
    const n = (await target.counts())[keyOf(job)];
    report(n === undefined && seen[0] === say('no_tenant', { tool: 'send_email', reason: 'options.tenant returned undefined' }) &&
      seen[0] === 'send_email was not run: no tenant for this call (options.tenant returned undefined); the application must supply it, and nothing was sent. Do not call send_email again until it does.',
    'no-tenant', `the target saw ${n}; the model read ${j(seen)}`);
    // a conversation function reading a toolsContext that was not given throws: the no-conversation refusal, not a raw TypeError
    const forgot = { ...base, ledger, args: { to: 'no-context@example.com' } };
    const seen2 = await turn(forgot, { toolsContext: null });
    const n2 = (await target.counts())[keyOf(forgot)];
    report(n2 === undefined && seen2.length === 1 &&
      seen2[0] === "send_email was not run: no conversation for this call (options.conversation threw TypeError: Cannot read properties of undefined (reading 'chatId')); the application must supply it, and nothing was sent. Do not call send_email again until it does.",
    'no-tools-context', `the target saw ${n2}; the model read ${j(seen2)}`);
    let e1; try { idempotentTool(ledger, 'send_email', { tenant: 'tenant-a', conversation: () => 'c' }, tool({ inputSchema: z.object({}), execute: async () => 1 })); } catch (e) { e1 = e; }
    let e3; try { idempotentTool(ledger, 'send_email', { tenant: () => 't', conversation: () => 'c', heartbeatSeconds: 1.5 }, tool({ inputSchema: z.object({}), execute: async () => 1 })); } catch (e) { e3 = e; }
    let e2; try { idempotentTool(ledger, 'send_email', { tenant: () => 't', conversation: () => 'c' }, { inputSchema: z.object({}) }); } catch (e) { e2 = e; }
    report(e1?.message === 'sqlite-idempotency/ai: idempotentTool: options.tenant must be a function of the call that returns the tenant (a non-empty string), got "tenant-a"' &&
      e2?.message === 'sqlite-idempotency/ai: idempotentTool: the tool must have an execute function (a tool({ inputSchema, execute }))' && ToolCallError.name === 'ToolCallError' &&
      e3?.message === 'sqlite-idempotency/ai: idempotentTool: options.heartbeatSeconds must be an integer number of seconds >= 0, got 1.5',
    'bad-options', `${e1?.message} / ${e2?.message} / ${e3?.message}`);
  }
});
