'use strict';
// sqlite-idempotency/ai: a Vercel AI SDK tool whose execute runs at most
// once per tenant + conversation + tool + canonical arguments.
//
//   import { tool } from 'ai';
//   import { idempotentTool, currentAttempt } from 'sqlite-idempotency/ai';
//   const sendEmail = idempotentTool(ledger, 'send_email', {
//     tenant: (input, { context }) => context.userId,
//     conversation: (input, { context }) => context.chatId,
//   }, tool({ inputSchema, execute: async (input) => post(url, input, currentAttempt().headers) }));
//
// The first call's output is the tool's output; a replay's output is the
// same value and the model reads it after the replay's words (words.json,
// through the tool's toModelOutput). A refusal (in_progress, unknown,
// mismatch, not sent, a missing tenant or conversation: also a tenant or
// conversation function that throws, as one reading a toolsContext that was
// not given does) and a recorded failure are thrown as ToolCallError, which
// the AI SDK hands the model as a tool error (error-text) it reads. The toolCallId is never part of the key: the
// SDK mints a new one when the model re-plans.
const { ToolCallError, currentAttempt, checkOptions, runTool } = require('./agent-tools.js');

const MAX_MARKS = 1024;

// The model output of a replay: the note, then what the tool's own
// toModelOutput (or the SDK's default, the output as JSON) gives.
function markReplay(note, base) {
  switch (base.type) {
    case 'text':
    case 'error-text':
      return { ...base, value: `${note}\n${base.value}` };
    case 'json':
    case 'error-json':
      return { type: base.type === 'json' ? 'text' : 'error-text', value: `${note}\n${JSON.stringify(base.value)}` };
    case 'content':
      return { ...base, value: [{ type: 'text', text: note }, ...base.value] };
    default:
      return base;
  }
}

function idempotentTool(ledger, name, options, aiTool) {
  const where = 'sqlite-idempotency/ai: idempotentTool';
  const spec = checkOptions(where, ledger, name, options);
  if (!aiTool || typeof aiTool.execute !== 'function') {
    throw new TypeError(`${where}: the tool must have an execute function (a tool({ inputSchema, execute }))`);
  }
  const marks = new Map(); // toolCallId -> the replay note, until toModelOutput reads it
  return {
    ...aiTool,
    async execute(input, execOptions) {
      const r = await runTool(ledger, name, spec, input, [input, execOptions], execOptions && execOptions.abortSignal,
        () => aiTool.execute(input, execOptions));
      if (r.replay && execOptions && typeof execOptions.toolCallId === 'string') {
        if (marks.size >= MAX_MARKS) marks.delete(marks.keys().next().value);
        marks.set(execOptions.toolCallId, r.note);
      }
      return r.result;
    },
    async toModelOutput(o) {
      const base = aiTool.toModelOutput ? await aiTool.toModelOutput(o) : { type: 'json', value: o.output ?? null };
      const note = marks.get(o.toolCallId);
      if (note === undefined) return base;
      marks.delete(o.toolCallId);
      return markReplay(note, base);
    },
  };
}

module.exports = { idempotentTool, currentAttempt, ToolCallError };
