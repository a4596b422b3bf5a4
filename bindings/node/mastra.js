'use strict';
// sqlite-idempotency/mastra: the config of a Mastra createTool whose
// execute runs at most once per tenant + conversation + tool + canonical
// input.
//
//   import { createTool } from '@mastra/core/tools';
//   import { idempotentTool, currentAttempt } from 'sqlite-idempotency/mastra';
//   const sendEmail = createTool(idempotentTool(ledger, 'send_email', {
//     tenant: (input, context) => context.requestContext.get('userId'),
//   }, { id: 'send_email', description, inputSchema, execute: async (input) => post(url, input, currentAttempt().headers) }));
//
// The tenant is the application's (from the request context it sets on
// agent.generate, never from the model). The conversation, unless
// options.conversation gives one: the thread of Mastra memory
// (context.agent.threadId) when the run has one, else the per-tenant
// deduplication window the MCP adapter uses (windowSeconds, default 600;
// strict: true refuses instead). The toolCallId is never part of the key:
// Mastra, like the AI SDK below it, mints a new one when the model re-plans.
//
// What the model reads: the first call's output is the tool's; a replay's
// is the replay's words, then the first output (as JSON when it is not a
// string), as text; a refusal (in_progress, unknown, mismatch, conflict,
// not sent, a missing tenant or conversation) or a recorded failure is
// thrown as ToolCallError, which Mastra hands the model as a tool error
// (error-text): its words alone. Because a replay's output is text, the
// returned config has no outputSchema (Mastra would refuse the text against
// it). context.abortSignal aborting while the tool runs leaves the call
// unknown; a result that still arrives is recorded with the claim's token.
const {
  ToolCallError, currentAttempt, checkOptions, checkWindow, runTool, asText, WINDOW_SECONDS,
} = require('./agent-tools.js');

const OPTIONS = ['tenant', 'conversation', 'strict', 'windowSeconds', 'waitMs', 'renewSeconds', 'heartbeatSeconds', 'targets', 'allowedBy'];

// The thread of the run's Mastra memory, when it has one.
const threadOf = (input, context) => {
  const t = context && context.agent && context.agent.threadId;
  return typeof t === 'string' && t !== '' ? t : undefined;
};

function idempotentTool(ledger, name, options, toolConfig) {
  const where = 'sqlite-idempotency/mastra: idempotentTool';
  if (options && typeof options === 'object') {
    for (const k of Object.keys(options)) {
      if (!OPTIONS.includes(k)) throw new TypeError(`${where}: unknown option ${JSON.stringify(k)} (options are ${OPTIONS.join(', ')})`);
    }
    checkWindow(where, options);
  }
  const window = {
    strict: Boolean(options && options.strict),
    strictReason: 'the run has no Mastra memory thread and strict is true; give options.conversation or run the agent with memory',
    seconds: (options && options.windowSeconds) ?? WINDOW_SECONDS,
  };
  const spec = checkOptions(where, ledger, name, options, { conversation: threadOf, window });
  if (!toolConfig || typeof toolConfig.execute !== 'function') {
    throw new TypeError(`${where}: the tool config must have an execute function (what createTool({ id, description, inputSchema, execute }) takes)`);
  }
  const { outputSchema, ...config } = toolConfig; // eslint-disable-line no-unused-vars
  return {
    ...config,
    id: toolConfig.id ?? name,
    async execute(input, context) {
      if (!context || typeof context !== 'object' || !('requestContext' in context)) {
        // Mastra 0.x calls execute({ context: input, runtimeContext, ... }, options)
        throw new TypeError(`${where}: ${name} was called without Mastra 1's execute context (execute(input, context) with context.requestContext); sqlite-idempotency/mastra needs @mastra/core 1 or later`);
      }
      const r = await runTool(ledger, name, spec, input, [input, context], context && context.abortSignal,
        () => toolConfig.execute(input, context));
      return r.replay ? `${r.note}\n${asText(r.result)}` : r.result;
    },
  };
}

module.exports = { idempotentTool, currentAttempt, ToolCallError, WINDOW_SECONDS };
