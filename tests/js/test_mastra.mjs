// sqlite-idempotency/mastra end to end: a Mastra Agent (agent.generate)
// whose model is the AI SDK's own mock (MockLanguageModelV3 from ai/test),
// which emits the same send_email call again under a new toolCallId,
// against the counting target; the tenant comes from the RequestContext the
// application sets, the conversation from options.conversation. The
// scenarios are tests/js/agent_harness.mjs's (a retry under a new call id,
// four processes, a timeout, a reworded re-plan, a killed holder, tenants
// and conversations); here also:
//   reordered    the same arguments spelled in another key order: one send
//   memory-thread  no conversation option, a memory thread (generate's
//                memory.thread): the thread is the conversation
//   window       no memory thread and no conversation option: the window
//                is the conversation, so the retry replays; strict: true
//                refuses instead, naming why
//   replay-text  the words the model reads on a replay, exactly
//   bad-options  what idempotentTool refuses when it wraps, exactly
//   mastra-0     a call made the Mastra 0.x way is refused, saying so
import { Agent } from '@mastra/core/agent';
import { createTool } from '@mastra/core/tools';
import { RequestContext } from '@mastra/core/request-context';
import { MockLanguageModelV3 } from 'ai/test';
import { z } from 'zod';
import { idempotentTool, currentAttempt, ToolCallError } from 'sqlite-idempotency/mastra';
import { say } from 'sqlite-idempotency/words';
import { main, postJson, sendBody, j, argsOf, targetsOf, keyOf } from './agent_harness.mjs';

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

// job.conversation: the conversation option reads it from the request
// context; without it (window: true) the adapter's default decides.
function sendTool(job, extra = {}) {
  return createTool(idempotentTool(job.ledger, 'send_email', {
    tenant: (input, context) => context.requestContext.get('userId'),
    ...(job.window ? {} : { conversation: (input, context) => context.requestContext.get('chatId') }),
    waitMs: job.waitMs || 0,
    ...targetsOf(job),
    ...extra,
  }, {
    id: 'send_email',
    description: 'send an email',
    inputSchema: z.object({ to: z.string(), subject: z.string().optional(), invoice: z.number().optional(), body: z.string().optional() }),
    outputSchema: z.object({ received: z.number() }).passthrough(),
    execute: async (input) => sendBody(postJson, { ...job, args: input }, currentAttempt().headers),
  }));
}

async function turn(job, extra) {
  let step = 0;
  let last = [];
  const model = new MockLanguageModelV3({
    doGenerate: async ({ prompt }) => {
      last = prompt;
      step += 1;
      if (step <= job.calls) {
        const args = argsOf(job, step - 1);
        const input = job.spellings ? job.spellings[step - 1] : j(args);
        return { content: [{ type: 'tool-call', toolCallId: `call-${process.pid}-${step}`, toolName: 'send_email', input }], finishReason: finish('tool-calls'), usage, warnings: [] };
      }
      return { content: [{ type: 'text', text: 'done' }], finishReason: finish('stop'), usage, warnings: [] };
    },
  });
  const agent = new Agent({ id: 'mailer', name: 'mailer', instructions: 'Send what you are asked to.', model, tools: { send_email: sendTool(job, extra) } });
  const requestContext = new RequestContext();
  requestContext.set('userId', job.tenant);
  if (job.conversation) requestContext.set('chatId', job.conversation);
  await agent.generate('send it', { requestContext, maxSteps: job.calls + 1, ...(job.thread ? { memory: { thread: job.thread, resource: job.tenant } } : {}) });
  return readBack(last);
}

await main({ prefix: 'integrations.mastra', turn }, async ({ ledger, target, base, report }) => {
  // the same arguments in another key order: one key, one send
  {
    const job = { ...base, ledger, args: { to: 'order@example.com', subject: 'Report' }, calls: 2, spellings: ['{"to":"order@example.com","subject":"Report"}', '{"subject":"Report","to":"order@example.com"}'] };
    const key = keyOf(ledger, job.tenant, job.conversation, job.args);
    const seen = await turn(job);
    const n = (await target.counts())[key];
    const want = `${say('replay', { tool: 'send_email', key, attempt: 1, at: ledger.row(job.tenant, key)?.updated_at })}\n${seen[0]}`;
    report(n === 1 && seen.length === 2 && seen[1] === want && seen[1].startsWith(`send_email was not run again: this request is identical to a call that already ran at `),
      'reordered', `the target saw ${n} (want 1); the model read ${j(seen)}`);
  }
  // no conversation option, a memory thread: the thread is the conversation
  {
    const job = { ...base, ledger, conversation: undefined, window: true, thread: 'thread-9', args: { to: 'thread@example.com' }, calls: 2 };
    const key = keyOf(ledger, job.tenant, 'thread-9', job.args);
    const seen = await turn(job);
    const n = (await target.counts())[key];
    report(n === 1 && ledger.row(job.tenant, key)?.status === 'succeeded' && seen.length === 2 && seen[1].startsWith(`send_email was not run again: this request is identical to a call that already ran at `),
      'memory-thread', `the target saw ${n} under the thread's key (want 1); the model read ${j(seen)}`);
  }
  // no memory thread, no conversation option: the window
  {
    const job = { ...base, ledger, conversation: undefined, window: true, args: { to: 'window@example.com' }, calls: 2 };
    const before = (await target.counts());
    const seen = await turn(job);
    const rows = ledger.db.prepare(`SELECT key, conversation FROM ${ledger.sqlName()} WHERE tenant = ? AND args LIKE '%window@example.com%'`).all(job.tenant);
    const n = rows.length === 1 ? (await target.counts())[rows[0].key] : undefined;
    report(rows.length === 1 && /^w-\d+$/.test(rows[0].conversation) && n === 1 && before[rows[0]?.key] === undefined &&
      seen.length === 2 && seen[1].startsWith('send_email was not run again'), 'window', `rows ${j(rows)}, the target saw ${n} (want 1); the model read ${j(seen)}`);
    const strict = { ...job, args: { to: 'strict@example.com' }, calls: 1 };
    const seen2 = await turn(strict, { strict: true });
    const n2 = ledger.db.prepare(`SELECT count(*) AS n FROM ${ledger.sqlName()} WHERE args LIKE '%strict@example.com%'`).get().n;
    report(n2 === 0 && seen2.length === 1 && seen2[0] === 'send_email was not run: no conversation for this call (the run has no Mastra memory thread and strict is true; give options.conversation or run the agent with memory); the application must supply it, and nothing was sent. Do not call send_email again until it does.',
      'strict', `${n2} rows (want 0); the model read ${j(seen2)}`);
  }
  // bad options, refused when it wraps
  {
    const errs = [];
    const tryWrap = (options, config = { id: 'x', description: 'x', execute: async () => 1 }) => {
      try { idempotentTool(ledger, 'send_email', options, config); errs.push('no error'); } catch (e) { errs.push(e.message); }
    };
    tryWrap({ tenant: () => 't', windowSeconds: 0 });
    tryWrap({ tenant: () => 't', strict: true, windowSeconds: 60 });
    tryWrap({ tenant: () => 't', thread: () => 'c' });
    tryWrap({ conversation: () => 'c' });
    tryWrap({ tenant: () => 't' }, { id: 'x', description: 'x' });
    const want = [
      'sqlite-idempotency/mastra: idempotentTool: options.windowSeconds must be an integer from 1 to 86400, got 0',
      'sqlite-idempotency/mastra: idempotentTool: options.windowSeconds is of no use with strict: true (a call that names no conversation is refused)',
      'sqlite-idempotency/mastra: idempotentTool: unknown option "thread" (options are tenant, conversation, strict, windowSeconds, waitMs, renewSeconds, heartbeatSeconds, targets, allowedBy)',
      'sqlite-idempotency/mastra: idempotentTool: options.tenant must be a function of the call that returns the tenant (a non-empty string), got undefined',
      'sqlite-idempotency/mastra: idempotentTool: the tool config must have an execute function (what createTool({ id, description, inputSchema, execute }) takes)',
    ];
    report(j(errs) === j(want) && ToolCallError.name === 'ToolCallError', 'bad-options', `got ${j(errs)}`);
    // Mastra 0.x's call: execute({ context: input, runtimeContext, ... }, options)
    const config = idempotentTool(ledger, 'send_email', { tenant: () => 't', conversation: () => 'c' }, { id: 'send_email', description: 'x', execute: async () => 1 });
    let e0;
    try { await config.execute({ context: { to: 'old@example.com' }, runtimeContext: new Map() }, { toolCallId: 'call-0' }); } catch (e) { e0 = e; }
    report(e0?.message === "sqlite-idempotency/mastra: idempotentTool: send_email was called without Mastra 1's execute context (execute(input, context) with context.requestContext); sqlite-idempotency/mastra needs @mastra/core 1 or later",
      'mastra-0', `got ${e0?.message}`);
  }
});
