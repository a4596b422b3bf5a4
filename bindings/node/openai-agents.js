'use strict';
// sqlite-idempotency/openai-agents: the options of an @openai/agents
// tool() whose execute runs at most once per tenant + conversation + tool
// + canonical arguments.
//
//   import { tool } from '@openai/agents';
//   import { idempotentTool, currentAttempt } from 'sqlite-idempotency/openai-agents';
//   const sendEmail = tool(idempotentTool(ledger, 'send_email', {
//     tenant: (input, runContext) => runContext.context.userId,
//     conversation: (input, runContext) => runContext.context.conversationId,
//   }, { description, parameters, execute: async (input) => post(url, input, currentAttempt().headers) }));
//
// The model reads a tool's output as text: the first call's output is the
// tool's; a replay's is the replay's words (words.json), then the first
// output as JSON; a refusal (in_progress, unknown, mismatch, not sent, a
// missing tenant or conversation, also a function for them that throws) or
// a recorded failure is its words, telling the model what is known and
// whether to call again. None of them is thrown, so the SDK's error function
// (whose default asks the model to try again) never sees them. The
// callId is never part of the key: the SDK mints a new one when the model
// re-plans. An abort of details.signal (a run aborted, the tool's
// timeoutMs) after the tool started leaves the call unknown; with
// timeoutMs and no timeoutErrorFunction of its own, what the model reads
// on that timeout says so, naming the call's key as every adapter's unknown
// does (the SDK's default only says it timed out).
const { ToolCallError, currentAttempt, checkOptions, runTool, asText, say } = require('./agent-tools.js');

function idempotentTool(ledger, name, options, toolOptions) {
  const where = 'sqlite-idempotency/openai-agents: idempotentTool';
  const spec = checkOptions(where, ledger, name, options);
  if (!toolOptions || typeof toolOptions.execute !== 'function') {
    throw new TypeError(`${where}: the tool options must have an execute function (what tool({ name, parameters, execute }) takes)`);
  }
  // the key and targets of each call whose tool is running, by the SDK's
  // call id: the timeout's words name them (the SDK calls timeoutErrorFunction while the
  // tool still runs; the entry goes when execute ends)
  const running = new Map();
  const callIdOf = (details) => details && details.toolCall && details.toolCall.callId;
  return {
    ...toolOptions,
    name: toolOptions.name ?? name,
    ...(toolOptions.timeoutMs !== undefined && toolOptions.timeoutErrorFunction === undefined && {
      timeoutErrorFunction: (context, error, details) => say('outcome_unknown', {
        tool: name, ...running.get(callIdOf(details)), reason: `timed out after ${toolOptions.timeoutMs} ms`,
      }),
    }),
    async execute(input, runContext, details) {
      const callId = callIdOf(details);
      let r;
      try {
        r = await runTool(ledger, name, spec, input, [input, runContext, details], details && details.signal, (attempt, targets) => {
          if (callId !== undefined) running.set(callId, { key: attempt.key, targets });
          return toolOptions.execute(input, runContext, details);
        });
      } catch (e) {
        if (e instanceof ToolCallError) return e.message;
        throw e;
      } finally {
        if (callId !== undefined) running.delete(callId);
      }
      return r.replay ? `${r.note}\n${asText(r.result)}` : r.result;
    },
  };
}

module.exports = { idempotentTool, currentAttempt, ToolCallError };
