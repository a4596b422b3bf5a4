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
const {
  ClaimInProgress, ClaimMismatch, IdempotencyError, LeaseLost, NotCommitted, NotSent, OutcomeUnknown, TargetConflict, ToolFailed,
} = require('./index.js');
const { say, because, sayConflict, UNKNOWN } = require('./words.js');
const JSON_OF_PACKAGE = require('./index.js')[Symbol.for('sqlite-idempotency.json')];

const running = new AsyncLocalStorage();

// A tool call that gives the model no result, only message to read (the
// words of words.json): refused by the ledger (decision 'in_progress',
// 'unknown', 'mismatch', 'conflict' (a target held by another call: the
// holder's result, when it succeeded, follows the words); 'not_sent' when
// nothing was sent, the claim released; or 'no_tenant' /
// 'no_conversation' / 'no_targets', without key, when the application
// gave no part of the key or its targets), or a known failure (decision
// 'failed', with the recorded error; replay true when it is the first
// call's failure again).
class ToolCallError extends IdempotencyError {
  constructor(message, { decision, key, replay = false, error, cause } = {}) {
    super(message, cause === undefined ? undefined : { cause });
    this.decision = decision;
    this.key = key;
    this.replay = replay;
    if (error !== undefined) this.error = error;
  }

  // The words alone, as the model is to read them (the AI SDK hands the
  // model a thrown error's toString()).
  toString() {
    return this.message;
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

// The options of idempotentTool, checked: { tenant, conversation, waitMs,
// renewSeconds, heartbeatSeconds, targets, allowedBy } (renewSeconds and
// heartbeatSeconds are Ledger.call's, passed through; targets a function
// of the tool's input giving what the write touches, docs/ledger.md
// "Targets"; allowedBy a function of the call, as tenant is, giving who
// allows a deliberate second write to a held target, or undefined).
// defaults may give a conversation function and a window ({ strict,
// strictReason, seconds }: a conversation function returning undefined or
// null then means the window, or with strict the refusal strictReason).
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
  const spec = { tenant: options.tenant, conversation: options.conversation ?? defaults.conversation, waitMs: options.waitMs ?? 0, call: {} };
  if (defaults.window) spec.window = defaults.window;
  for (const part of ['tenant', 'conversation']) {
    if (typeof spec[part] !== 'function') {
      throw new TypeError(`${where}: options.${part} must be a function of the call that returns the ${part} (a non-empty string), got ${describe(options[part])}`);
    }
  }
  if (!(Number.isFinite(spec.waitMs) && spec.waitMs >= 0)) {
    throw new RangeError(`${where}: options.waitMs must be a number of milliseconds >= 0, got ${options.waitMs}`);
  }
  for (const k of ['renewSeconds', 'heartbeatSeconds']) {
    if (options[k] === undefined) continue;
    if (!(Number.isInteger(options[k]) && options[k] >= 0)) {
      throw new RangeError(`${where}: options.${k} must be an integer number of seconds >= 0, got ${options[k]}`);
    }
    spec.call[k] = options[k];
  }
  for (const k of ['targets', 'allowedBy']) {
    if (options[k] === undefined) continue;
    if (typeof options[k] !== 'function') {
      throw new TypeError(`${where}: options.${k} must be a function (${k === 'targets' ? "of the tool's input, returning an array of strings" : 'of the call, returning who allows a second write, or undefined'}), got ${describe(options[k])}`);
    }
    spec[k] = options[k];
  }
  return spec;
}

// The targets of one call: an array of strings from spec.targets(input),
// or { missing } naming what went wrong (the ledger checks each string).
async function targetsOf(spec, input) {
  let v;
  try {
    v = await spec.targets(input);
  } catch (e) {
    return { missing: `options.targets threw ${e instanceof Error ? `${e.name}: ${e.message}` : String(e)}` };
  }
  if (!Array.isArray(v) || !v.every((t) => typeof t === 'string')) {
    return { missing: `options.targets returned ${Array.isArray(v) ? 'an array holding a non-string' : describe(v)}, not an array of strings` };
  }
  return v;
}

// What the model reads on a conflict: the words, then the holder's result
// when it succeeded.
function conflictText(name, decision) {
  const c = sayConflict(name, decision);
  return c.result === undefined ? c.text : `${c.text}\n${asText(c.result)}`;
}

// The words of a decision the ledger refused on (ClaimInProgress,
// ClaimMismatch, OutcomeUnknown with its key) for the tool name; targets,
// what the call touches (named in the in_progress and unknown words).
function refusal(name, e, targets) {
  const d = e.decision || {};
  if (e instanceof ClaimInProgress) return say('in_progress', { tool: name, key: e.key, attempt: d.attempt, renewed_at: d.renewed_at, targets });
  if (e instanceof ClaimMismatch) return say('mismatch', { tool: name, key: e.key, differs: d.differs });
  if (e.decision) return say('unknown', { tool: name, key: e.key, attempt: d.attempt, targets });
  return say('outcome_unknown', { tool: name, key: e.key, reason: e.reason, targets });
}

// Why nothing was sent (NotSent, NotCommitted, LeaseLost), for not_sent.
function notSentReason(e) {
  if (e instanceof NotSent) return e.reason;
  if (e instanceof NotCommitted) return because('not_committed');
  return because('lease_lost', { message: e.message });
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
// arguments of the tenant and conversation functions; run(attempt, targets)
// runs the tool.
// Resolves to { replay, key, attempt, result, note } for an outcome that
// succeeded (replay false for the call that ran; note, on a replay, the
// words that go before its result); rejects with ToolCallError for any call
// that gives the model only words (its message); anything else (an error
// of the ledger) is thrown as it is. untilLease: on in_progress, wait
// again until the holder's lease ends, then answer what the ledger decides
// then (LangGraph, whose thread would end on in_progress).
async function runTool(ledger, name, spec, input, parts, signal, run, { untilLease = false } = {}) {
  const who = {};
  for (const part of ['tenant', 'conversation']) {
    let v;
    let reason;
    try {
      v = await spec[part](...parts);
      if (part === 'conversation' && spec.window && (v === undefined || v === null)) {
        // none named: the adapter's window (Mastra without memory), or its refusal with strict
        if (spec.window.strict) reason = spec.window.strictReason;
        else v = windowScope(ledger, who.tenant, name, input, spec.window.seconds);
      } else if (typeof v !== 'string' || v === '') reason = `options.${part} returned ${describe(v)}`;
    } catch (e) {
      reason = `options.${part} threw ${e instanceof Error ? `${e.name}: ${e.message}` : String(e)}`;
    }
    if (reason !== undefined) throw new ToolCallError(say(`no_${part}`, { tool: name, reason }), { decision: `no_${part}` });
    who[part] = v;
  }
  const call = { ...spec.call };
  if (spec.targets) {
    const targets = await targetsOf(spec, input);
    if (!Array.isArray(targets)) throw new ToolCallError(say('no_targets', { tool: name, reason: targets.missing }), { decision: 'no_targets' });
    call.targets = targets;
  }
  if (spec.allowedBy) {
    const by = await spec.allowedBy(...parts);
    if (by !== undefined && by !== null) call.allowedBy = by;
  }
  if (signal && signal.aborted) {
    throw new ToolCallError(say('not_sent', { tool: name, reason: because('cancelled') }), { decision: 'not_sent' });
  }
  const action = (attempt) => running.run(attempt, () => untilAborted(Promise.resolve().then(() => run(attempt, call.targets)), signal, ledger, attempt));
  const once = (waitMs) => ledger.call(who.tenant, who.conversation, name, input, action, { waitMs, ...call });
  let out;
  try {
    try {
      out = await once(spec.waitMs);
    } catch (e) {
      if (!(untilLease && e instanceof ClaimInProgress)) throw e;
      // the holder's lease, with a margin for the claim that reads its end
      out = await once(Math.max(0, Number(e.decision.lease_until) - Date.now()) + LEASE_END_MARGIN_MS);
    }
  } catch (e) {
    if (e instanceof NotSent || e instanceof NotCommitted || e instanceof LeaseLost) {
      throw new ToolCallError(say('not_sent', { tool: name, reason: notSentReason(e) }), { decision: 'not_sent', key: e.key, cause: e });
    }
    if (e instanceof TargetConflict) {
      throw new ToolCallError(conflictText(name, e.decision), { decision: 'conflict', key: e.key, cause: e });
    }
    if (!(e instanceof ClaimInProgress || e instanceof ClaimMismatch || e instanceof OutcomeUnknown) || e.key === undefined) throw e;
    const decision = e instanceof ClaimInProgress ? 'in_progress' : e instanceof ClaimMismatch ? 'mismatch' : 'unknown';
    throw new ToolCallError(refusal(name, e, call.targets), { decision, key: e.key, cause: e });
  }
  const fields = { tool: name, key: out.key, attempt: out.attempt };
  if (out.idempotent) fields.at = out.settled_at; // when the first call's outcome was recorded
  if (out.status === 'failed') {
    const words = say(out.idempotent ? 'failed_replay' : 'failed', fields);
    throw new ToolCallError(`${words}\n${asText(out.error)}`, { decision: 'failed', key: out.key, replay: out.idempotent, error: out.error });
  }
  const r = { replay: out.idempotent, key: out.key, attempt: out.attempt, result: out.result };
  if (out.idempotent) r.note = say('replay', fields);
  return r;
}

const WINDOW_SECONDS = 600; // docs/design.md, "The deduplication window"
const WINDOW_MAX_SECONDS = 86400;

// The window options of an adapter that has one (MCP, Mastra): strict, a
// boolean; windowSeconds, 1 to WINDOW_MAX_SECONDS, and not with strict.
function checkWindow(where, options) {
  if (options.strict !== undefined && typeof options.strict !== 'boolean') {
    throw new TypeError(`${where}: options.strict must be a boolean, got ${typeof options.strict}`);
  }
  if (options.windowSeconds !== undefined && !(Number.isInteger(options.windowSeconds) && options.windowSeconds >= 1 && options.windowSeconds <= WINDOW_MAX_SECONDS)) {
    throw new RangeError(`${where}: options.windowSeconds must be an integer from 1 to ${WINDOW_MAX_SECONDS}, got ${options.windowSeconds}`);
  }
  if (options.strict === true && options.windowSeconds !== undefined) {
    throw new TypeError(`${where}: options.windowSeconds is of no use with strict: true (a call that names no conversation is refused)`);
  }
}

// The conversation of a call that names none: a per-tenant sliding window
// of `seconds`, as a function Ledger.call runs under the ledger's write lock
// (claimChosen), so racing processes choose alike. Buckets of `seconds`
// named "w-<start, Unix seconds>".
//   1. An identical call (this tenant, tool and arguments) of any window
//      that is still claimed or unknown is this call, however long ago it
//      was made: its answer (in progress, unknown) is this call's, and it
//      is never admitted a second time, so "unknown is never retried here"
//      holds past the window too. Read through the partial index of open
//      rows, so its cost is the open rows', not the ledger's.
//   2. Else the operation of a neighbouring bucket that holds an identical
//      claim made less than `seconds` from now (the previous bucket; the
//      next one, when the clock stepped back across an edge), so an
//      identical call within `seconds` of the operation's first call is
//      that operation, also across a bucket's edge.
//   3. Else the operation of the current bucket: one `seconds` or more
//      after a settled first call is a new one.
function windowScope(ledger, tenant, tool, args, seconds) {
  const span = seconds * 1000;
  // the arguments as Ledger.call writes them, so the probe's key is the claim's
  const text = JSON_OF_PACKAGE.jsonText(args, 'args');
  return (nowMs) => {
    const open = ledger.value(
      `SELECT conversation AS v FROM ${ledger.sqlName('_rows')} WHERE (status='claimed' OR status='unknown')`
      + " AND tenant = ? AND tool = ? AND args = idem_canonical(?) AND substr(conversation, 1, 2) = 'w-'"
      + ' ORDER BY created_at DESC LIMIT 1', [tenant, tool, text]);
    if (typeof open === 'string') return open;
    const start = Math.floor(nowMs / span) * span;
    for (const bucket of [start - span, start + span]) {
      const conversation = `w-${bucket / 1000}`;
      const key = ledger.value('SELECT idem_key(?, ?, ?, ?) AS v', [tenant, conversation, tool, text]);
      const created = ledger.value(`SELECT created_at AS v FROM ${ledger.sqlName()} WHERE tenant = ? AND key = ?`, [tenant, key]);
      if (created !== undefined && created !== null && Math.abs(nowMs - Number(created)) < span) return conversation;
    }
    return `w-${start / 1000}`;
  };
}

// A value as the model reads it after the words: a string as it is, else JSON.
function asText(v) {
  if (typeof v === 'string') return v;
  try {
    const t = JSON.stringify(v);
    return t === undefined ? String(v) : t;
  } catch {
    return String(v);
  }
}

// How far past the holder's lease_until the LangGraph wait claims again.
const LEASE_END_MARGIN_MS = 250;

module.exports = {
  UNKNOWN, ToolCallError, currentAttempt, checkOptions, runTool, asText, say, conflictText, windowScope, checkWindow, WINDOW_SECONDS,
};
