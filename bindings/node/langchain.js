'use strict';
// sqlite-idempotency/langchain: a @langchain/core tool that runs at most
// once per tenant + conversation + tool + canonical arguments, inside a
// LangGraph ToolNode or an agent's tool loop.
//
//   import { tool } from '@langchain/core/tools';
//   import { idempotentTool, currentAttempt } from 'sqlite-idempotency/langchain';
//   const sendEmail = idempotentTool(ledger, 'send_email', {
//     tenant: (input, config) => config.configurable.user_id,
//   }, tool(async (input) => post(url, input, currentAttempt().headers), { name: 'send_email', schema }));
//
// The conversation defaults to config.configurable.thread_id, LangGraph's
// thread. Called with a tool call (as a ToolNode and createAgent call it),
// the first call gives the tool's result; a replay gives a ToolMessage
// whose content is the replay's words (words.json), then the first result,
// and whose response_metadata.idempotency is { decision: 'replay', key };
// a refusal (unknown, mismatch, a missing tenant or conversation) or a
// recorded failure is a ToolMessage with status 'error' and its words,
// returned, not thrown, so neither ToolNode's error handler nor the
// tool-retry middleware (which retry what is thrown) runs it again. A call
// that finds an identical one in progress (after waitMs) waits until the
// holder's lease ends and answers what the ledger decides then (its
// replay, or unknown when the holder died), so that the thread goes on
// with the final decision; in_progress only while the holder still renews.
// Nothing sent (not_sent) is thrown as ToolCallError, and the middleware
// may retry it. Called with plain arguments, a replay gives the first
// result and a refusal is thrown as ToolCallError. The tool call id is not
// part of the key (the retry middleware and LangGraph's resume keep it;
// other callers do not).
const { ToolCallError, currentAttempt, checkOptions, runTool, asText } = require('./agent-tools.js');

const where = 'sqlite-idempotency/langchain: idempotentTool';

function toolMessageClass() {
  try {
    return require('@langchain/core/messages').ToolMessage;
  } catch (e) {
    throw new Error(`${where}: @langchain/core is not installed (npm install @langchain/core): ${e.message}`, { cause: e });
  }
}

function idempotentTool(ledger, name, options, lcTool) {
  const spec = checkOptions(where, ledger, name, options, {
    conversation: (input, config) => config && config.configurable && config.configurable.thread_id,
  });
  if (!lcTool || typeof lcTool._call !== 'function' || typeof lcTool.invoke !== 'function') {
    throw new TypeError(`${where}: the tool must be a @langchain/core tool (tool(func, { name, schema }) or a StructuredTool)`);
  }
  const ToolMessage = toolMessageClass();
  const pair = lcTool.responseFormat === 'content_and_artifact';
  // a copy of the tool (same class, fields, schema) whose _call goes through the ledger
  const wrapped = Object.assign(Object.create(Object.getPrototypeOf(lcTool)), lcTool);
  wrapped._call = async (arg, runManager, config) => {
    const id = config && config.toolCall ? config.toolCall.id : undefined;
    const message = (fields, decision, key) => new ToolMessage({
      ...fields, tool_call_id: id, name: lcTool.name, response_metadata: { idempotency: { decision, key } },
    });
    let r;
    try {
      r = await runTool(ledger, name, spec, arg, [arg, config], config && config.signal,
        () => lcTool._call(arg, runManager, config), { untilLease: true });
    } catch (e) {
      // not_sent is thrown: nothing was sent, so the tool-retry middleware may run it again
      if (!(e instanceof ToolCallError) || id === undefined || e.decision === 'not_sent') throw e;
      const m = message({ content: e.message, status: 'error' }, e.decision, e.key);
      return pair ? [m, undefined] : m;
    }
    if (!r.replay || id === undefined) return r.result;
    const [content, artifact] = pair ? r.result : [r.result, undefined];
    const text = `${r.note}\n${asText(content)}`;
    const m = message({ content: text, status: 'success', artifact }, 'replay', r.key);
    return pair ? [m, artifact] : m;
  };
  return wrapped;
}

module.exports = { idempotentTool, currentAttempt, ToolCallError };
