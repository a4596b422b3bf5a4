'use strict';
// What the agent-framework adapters (ai.js, openai-agents.js, langchain.js)
// share: checking a wrapped tool's options, running one tool call through
// Ledger.call, and the texts the model reads on each decision. Internal: the
// adapters re-export what users need (currentAttempt, ToolCallError).
//
// The key is who + conversation + tool + canonical arguments; the
// framework's call id is never part of it (the AI SDK and OpenAI Agents
// mint a new one when the model re-plans).
const { AsyncLocalStorage } = require('node:async_hooks');
const { ClaimInProgress, ClaimMismatch, IdempotencyError, OutcomeUnknown, ToolFailed } = require('./index.js');

const UNKNOWN = 'that request may have reached the target system, the outcome is theirs to report, and nothing is retried here';
const running = new AsyncLocalStorage();

// A tool call that gives the model no result, only message to read:
// refused by the ledger (decision 'in_progress', 'unknown', 'mismatch'; or
// 'no_tenant' / 'no_conversation', without key, when the application gave
// no part of the key), or a known failure (decision 'failed', with the
// recorded error; replay true when it is the first call's failure again).
class ToolCallError extends IdempotencyError {
  constructor(message, { decision, key, replay = false, error } = {}) {
    super(message);
    this.decision = decision;
    this.key = key;
    this.replay = replay;
    if (error !== undefined) this.error = error;
  }
}

// The Attempt of the wrapped tool call running in this async context: its
// headers carry the Idempotency-Key to send.
function currentAttempt() {
  const attempt = running.getStore();
  if (attempt === undefined) {
    throw new IdempotencyError('currentAttempt: no idempotent tool call is running here (call it inside the execute of a tool wrapped by idempotentTool)');
  }
  return attempt;
}

const describe = (v) => (typeof v === 'string' ? JSON.stringify(v) : v === null ? 'null' : typeof v);

// The options of idempotentTool, checked: { tenant, conversation, waitMs }.
// defaults may give a conversation function.
function checkOptions(where, ledger, name, options, defaults = {}) {
  if (!ledger || typeof ledger.call !== 'function') {
    throw new TypeError(`${where}: ledger must be a Ledger (Ledger.open(db)), got ${describe(ledger)}`);
  }
  if (typeof name !== 'string' || name === '') {
    throw new TypeError(`${where}: name must be a non-empty string (the tool's name in the key), got ${describe(name)}`);
  }
  if (!options || typeof options !== 'object') {
    throw new TypeError(`${where}: options must be an object with tenant and conversation functions, got ${describe(options)}`);
  }
  const spec = { tenant: options.tenant, conversation: options.conversation ?? defaults.conversation, waitMs: options.waitMs ?? 0 };
  for (const part of ['tenant', 'conversation']) {
    if (typeof spec[part] !== 'function') {
      throw new TypeError(`${where}: options.${part} must be a function of the call that returns the ${part} (a non-empty string), got ${describe(options[part])}`);
    }
  }
  if (!(Number.isFinite(spec.waitMs) && spec.waitMs >= 0)) {
    throw new RangeError(`${where}: options.waitMs must be a number of milliseconds >= 0, got ${options.waitMs}`);
  }
  return spec;
}

// What the model reads when the call was not run.
function refusal(name, d, reason) {
  const again = 'Do not call it again with these arguments.';
  switch (d.decision) {
    case 'in_progress':
      return `${name} was not run: the same call (key ${d.key}, attempt ${d.attempt}) is running now and was not started a second time. ${again}`;
    case 'mismatch':
      return `${name} was not run: its key ${d.key} is recorded for a different request (differs: ${d.differs}). ${again}`;
    default:
      return `${name} did not finish (${d.key === undefined ? '' : `key ${d.key}: `}${reason}): ${UNKNOWN}. ${again}`;
  }
}

// Rejects with OutcomeUnknown when signal aborts before promise settles; a
// result that arrives after the abort is settled late with the claim's
// token (unknown -> succeeded or failed), so the ledger records what
// happened.
function untilAborted(promise, signal, ledger, attempt) {
  if (!signal) return promise;
  let onAbort;
  const aborted = new Promise((resolve, reject) => {
    onAbort = () => reject(new OutcomeUnknown(`aborted: ${signal.reason instanceof Error ? signal.reason.message : String(signal.reason)}`));
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
  });
  const late = (status, value) => {
    if (!signal.aborted) return;
    try { ledger.settle(attempt.token, status, value); } catch { /* stays unknown */ }
  };
  promise.then((v) => late('succeeded', v), (e) => { if (e instanceof ToolFailed) late('failed', e.error); });
  return Promise.race([promise, aborted]).finally(() => signal.removeEventListener('abort', onAbort));
}

// Runs one call of the tool `name` through ledger.call. parts are the
// arguments of the tenant and conversation functions; run() runs the tool.
// Resolves to { replay, key, result } for an outcome that succeeded (replay
// false for the call that ran); rejects with ToolCallError for any call the
// model must not repeat; anything else (NotSent: the tool said nothing was
// sent, the claim is released; NotCommitted; an error of the ledger) is
// thrown as it is.
async function runTool(ledger, name, spec, input, parts, signal, run) {
  const who = {};
  for (const part of ['tenant', 'conversation']) {
    const v = await spec[part](...parts);
    if (typeof v !== 'string' || v === '') {
      throw new ToolCallError(`${name} was not run: no ${part} for this call (options.${part} returned ${describe(v)}); the application must supply it. Do not call it again until it does.`, { decision: `no_${part}` });
    }
    who[part] = v;
  }
  if (signal && signal.aborted) throw signal.reason;
  let out;
  try {
    out = await ledger.call(who.tenant, who.conversation, name, input,
      (attempt) => running.run(attempt, () => untilAborted(Promise.resolve().then(() => run(attempt)), signal, ledger, attempt)),
      { waitMs: spec.waitMs });
  } catch (e) {
    if (!(e instanceof ClaimInProgress || e instanceof ClaimMismatch || e instanceof OutcomeUnknown) || e.key === undefined) throw e;
    const d = e.decision || { decision: 'unknown', key: e.key };
    throw new ToolCallError(refusal(name, d, e.reason || 'an earlier attempt did not report its outcome'), { decision: d.decision, key: e.key });
  }
  if (out.status === 'failed') {
    let text;
    try { text = JSON.stringify(out.error); } catch { text = String(out.error); }
    const first = out.idempotent ? `this call already ran (key ${out.key}) and failed` : `the target refused it (key ${out.key})`;
    throw new ToolCallError(`${name} failed: ${first}: ${text}. The failure is recorded. Do not call it again with these arguments.`,
      { decision: 'failed', key: out.key, replay: out.idempotent, error: out.error });
  }
  return { replay: out.idempotent, key: out.key, attempt: out.attempt, result: out.result };
}

// The note before a replayed result.
const replayNote = (name, r) => `replay: ${name} already ran with these arguments (key ${r.key}); it was not run again. Its first result:`;

module.exports = { UNKNOWN, ToolCallError, currentAttempt, checkOptions, runTool, replayNote, refusal };
