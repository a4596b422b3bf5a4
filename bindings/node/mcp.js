'use strict';
// sqlite-idempotency/mcp: idempotent tools for MCP servers
// (@modelcontextprotocol/sdk 1.x McpServer, and @modelcontextprotocol/server 2.x).
//
//   const { withIdempotency, idempotentTool, attemptOf } = require('sqlite-idempotency/mcp');
//   withIdempotency(server, ledger, { tenant: (extra) => ..., conversation: (args, extra) => ... });
//   server.registerTool('send_email', { inputSchema }, async (args, extra) =>
//     send(args, { headers: attemptOf(extra).headers }));
//
// The only seam an MCP SDK offers is the tool callback (args, extra), so the
// claim is taken there, through Ledger.call: the key is tenant +
// conversation + tool name + canonical arguments, never a request or
// session id (a retry is a new request id; MCP 2026-07-28 has no session).
// The claim is committed before the tool runs. A replay answers the first
// CallToolResult with _meta "io.github.sqlite-idempotency/replay": true;
// in_progress, unknown and mismatch answer an isError result whose text
// tells the model not to call again, and why. This module does not load
// the SDK: it wraps what the server hands it, so the core package installs
// and loads without it.
const {
  Ledger, NotSent, ToolFailed, OutcomeUnknown, ClaimInProgress, ClaimMismatch, LeaseLost, NotCommitted,
} = require('./index.js');

const PREFIX = 'io.github.sqlite-idempotency/';
const META = {
  conversation: `${PREFIX}conversation`,
  replay: `${PREFIX}replay`,
  decision: `${PREFIX}decision`,
  key: `${PREFIX}key`,
};
// The extension's own words for an unknown outcome (idem_claim's message).
const UNKNOWN_SENTENCE = 'that request may have reached the target system, the outcome is theirs to report, and nothing is retried here';
const OPTIONS = ['tenant', 'conversation', 'waitMs', 'renewSeconds'];
const WRAPPED = Symbol.for('sqlite-idempotency/mcp.wrapped');
const ATTEMPT = Symbol.for('sqlite-idempotency/mcp.attempt');

// The request context's parts, in SDK 1.x (extra.signal, extra._meta,
// extra.authInfo) and 2.x (ctx.mcpReq.signal, ctx.mcpReq._meta, ctx.http.authInfo).
const signalOf = (extra) => (extra && (extra.signal || (extra.mcpReq && extra.mcpReq.signal))) || undefined;
const metaOf = (extra) => (extra && (extra._meta || (extra.mcpReq && extra.mcpReq._meta))) || undefined;
const authOf = (extra) => (extra && (extra.authInfo || (extra.http && extra.http.authInfo))) || undefined;

// Default tenant: the authenticated client (authInfo.clientId), set by the
// transport from the bearer-token verifier. No authInfo (stdio) is a missing
// tenant, never a constant.
function defaultTenant(extra) {
  const auth = authOf(extra);
  if (!auth) return { missing: 'the request carries no authInfo (no bearer-token verifier on this transport; give options.tenant)' };
  if (auth.clientId === undefined || auth.clientId === null || auth.clientId === '') {
    return { missing: 'authInfo.clientId is empty (give options.tenant)' };
  }
  return auth.clientId;
}

// Default conversation: the request's _meta key io.github.sqlite-idempotency/conversation.
function defaultConversation(_args, extra) {
  const meta = metaOf(extra);
  const v = meta ? meta[META.conversation] : undefined;
  if (v === undefined || v === null || v === '') {
    return { missing: `the request has no _meta "${META.conversation}" (give options.conversation)` };
  }
  return v;
}

function checkOptions(where, options) {
  if (options === undefined || options === null) return {};
  if (typeof options !== 'object') throw new TypeError(`${where}: options must be an object, got ${typeof options}`);
  for (const k of Object.keys(options)) {
    if (!OPTIONS.includes(k)) throw new TypeError(`${where}: unknown option ${JSON.stringify(k)} (options are ${OPTIONS.join(', ')})`);
  }
  for (const k of ['tenant', 'conversation']) {
    if (options[k] !== undefined && typeof options[k] !== 'function') {
      throw new TypeError(`${where}: options.${k} must be a function, got ${typeof options[k]}`);
    }
  }
  if (options.waitMs !== undefined && !(Number.isFinite(options.waitMs) && options.waitMs >= 0)) {
    throw new RangeError(`${where}: options.waitMs must be a number of milliseconds >= 0, got ${options.waitMs}`);
  }
  if (options.renewSeconds !== undefined && !(Number.isInteger(options.renewSeconds) && options.renewSeconds >= 0)) {
    throw new RangeError(`${where}: options.renewSeconds must be an integer >= 0, got ${options.renewSeconds}`);
  }
  return options;
}

function checkLedger(where, ledger) {
  if (!(ledger instanceof Ledger) && !(ledger && typeof ledger.call === 'function' && typeof ledger.claim === 'function')) {
    throw new TypeError(`${where}: ledger must be a Ledger of sqlite-idempotency, got ${ledger === null ? 'null' : typeof ledger}`);
  }
}

// A text result with isError true; _meta names the decision and the key.
function refusal(decision, text, key) {
  const meta = { [META.decision]: decision };
  if (key !== undefined) meta[META.key] = key;
  return { content: [{ type: 'text', text }], isError: true, _meta: meta };
}

function marked(result) {
  const meta = result && typeof result._meta === 'object' && result._meta !== null ? result._meta : {};
  return { ...result, _meta: { ...meta, [META.replay]: true } };
}

const describe = (e) => (e instanceof Error ? e.message : String(e));

// The tenant or conversation of a call: a non-empty string, or the reason
// it is missing.
function part(which, fn, params) {
  let v;
  try {
    v = fn(...params);
  } catch (e) {
    return { missing: `options.${which} threw: ${describe(e)}` };
  }
  if (v && typeof v === 'object' && typeof v.missing === 'string') return v;
  if (v === undefined || v === null || v === '') return { missing: `options.${which} gave ${v === '' ? 'an empty string' : String(v)}` };
  if (typeof v !== 'string') return { missing: `options.${which} gave a ${typeof v}, not a string` };
  return v;
}

// The guarded callback. readOnly (withIdempotency): reads the registered
// tool's annotations at call time; readOnlyHint true passes through.
function guard(ledger, name, options, callback, readOnly) {
  const tenantOf = options.tenant || defaultTenant;
  const conversationOf = options.conversation || defaultConversation;
  const callOptions = { waitMs: options.waitMs === undefined ? 0 : options.waitMs };
  if (options.renewSeconds !== undefined) callOptions.renewSeconds = options.renewSeconds;
  const wrapped = async function idempotentToolCallback(...params) {
    // The SDKs call (args, extra) for a tool with an input schema, (extra) without.
    if (readOnly && readOnly()) return callback.apply(this, params);
    const withArgs = params.length >= 2;
    const args = withArgs ? params[0] : {};
    const extra = withArgs ? params[1] : params[0];
    const tenant = part('tenant', tenantOf, [extra]);
    if (typeof tenant !== 'string') return refusal('missing', `${name}: not run: no tenant: ${tenant.missing}; nothing was sent`);
    const conversation = part('conversation', conversationOf, [args, extra]);
    if (typeof conversation !== 'string') return refusal('missing', `${name}: not run: no conversation: ${conversation.missing}; nothing was sent`);
    const signal = signalOf(extra);
    if (signal && signal.aborted) return refusal('not_sent', `${name}: not run: the request was cancelled before the tool started; nothing was sent`);
    const self = this;
    let out;
    try {
      out = await ledger.call(tenant, conversation, name, args === undefined ? {} : args, async (attempt) => {
        if (signal && signal.aborted) throw new NotSent('the request was cancelled before the tool started');
        const ex = { ...extra, [ATTEMPT]: attempt };
        let result;
        try {
          result = await (withArgs ? callback.call(self, args, ex) : callback.call(self, ex));
        } catch (e) {
          if (signal && signal.aborted && !(e instanceof NotSent) && !(e instanceof ToolFailed) && !(e instanceof OutcomeUnknown)) {
            throw new OutcomeUnknown(`the request was cancelled while the tool ran (${describe(e)})`, { cause: e });
          }
          throw e;
        }
        if (result === null || typeof result !== 'object' || Array.isArray(result)) {
          throw new OutcomeUnknown(`the tool returned ${Array.isArray(result) ? 'an array' : result === null ? 'null' : `a ${typeof result}`}, not a CallToolResult`);
        }
        if (result.isError === true) throw new ToolFailed(result);
        return result;
      }, callOptions);
    } catch (e) {
      if (e instanceof ClaimInProgress) {
        return refusal('in_progress', `${name}: not run: an identical call (same tenant, conversation and arguments) is still running (attempt ${e.decision.attempt}). Do not call ${name} again with these arguments: the running call will finish it, and a later identical call returns its result.`, e.key);
      }
      if (e instanceof OutcomeUnknown) {
        const head = e.decision
          ? `${name}: not run: an earlier identical call did not finish and its outcome is unknown:`
          : `${name}: the outcome is unknown (${e.reason}):`;
        return refusal('unknown', `${head} ${UNKNOWN_SENTENCE}. Do not call ${name} again with these arguments; tell the user it may or may not have happened, and that it must be checked in the target system.`, e.key);
      }
      if (e instanceof ClaimMismatch) {
        return refusal('mismatch', `${name}: not run: the key of this call is bound to a different request (${e.decision.differs} differs); nothing was run or replayed. Do not call ${name} again with these arguments.`, e.key);
      }
      if (e instanceof NotSent || e instanceof LeaseLost || e instanceof NotCommitted) {
        return refusal('not_sent', `${name}: not sent: ${describe(e)}; nothing happened, so the call may be made again.`, e.key);
      }
      throw e;
    }
    if (out.status === 'succeeded') return out.idempotent ? marked(out.result) : out.result;
    return out.idempotent ? marked(out.error) : out.error; // the isError result the tool returned
  };
  wrapped[WRAPPED] = true;
  return wrapped;
}

// Wraps one tool callback: (args, extra) or (extra), as the SDK calls it.
function idempotentTool(ledger, name, options, callback) {
  checkLedger('idempotentTool', ledger);
  if (typeof name !== 'string' || name === '') throw new TypeError(`idempotentTool: name must be a non-empty string, got ${JSON.stringify(name)}`);
  const opts = checkOptions('idempotentTool', options);
  if (typeof callback !== 'function') throw new TypeError(`idempotentTool: callback must be a function, got ${typeof callback}`);
  return guard(ledger, name, opts, callback);
}

// Wraps every tool registered on server (registerTool, and the older tool())
// after this call; tools whose annotations say readOnlyHint: true pass
// through. Returns server.
function withIdempotency(server, ledger, options) {
  if (!server || typeof server.registerTool !== 'function') {
    throw new TypeError('withIdempotency: server must be an McpServer (an object with registerTool)');
  }
  checkLedger('withIdempotency', ledger);
  const opts = checkOptions('withIdempotency', options);
  for (const method of ['registerTool', 'tool']) {
    const original = server[method];
    if (typeof original !== 'function' || original[WRAPPED]) continue;
    const patched = function (name, ...rest) {
      // The callback is the last argument of every overload.
      const i = rest.length - 1;
      const cb = rest[i];
      let registered;
      const readOnly = () => !!(registered && registered.annotations && registered.annotations.readOnlyHint === true);
      if (typeof cb === 'function' && !cb[WRAPPED]) rest[i] = guard(ledger, name, opts, cb, readOnly);
      registered = original.call(this, name, ...rest);
      if (registered && typeof registered.update === 'function') {
        // a callback given later by update() is guarded too (under the tool's name then)
        const update = registered.update;
        registered.update = function (updates) {
          if (updates && typeof updates.name === 'string') name = updates.name;
          if (updates && typeof updates.callback === 'function' && !updates.callback[WRAPPED]) {
            updates = { ...updates, callback: guard(ledger, name, opts, updates.callback, readOnly) };
          }
          return update.call(this, updates);
        };
      }
      return registered;
    };
    patched[WRAPPED] = true;
    server[method] = patched;
  }
  return server;
}

// The admitted claim of the guarded call a tool callback is running in
// (key, headers with the Idempotency-Key, renew()).
function attemptOf(extra) {
  const a = extra && extra[ATTEMPT];
  if (!a) throw new TypeError('attemptOf: this extra is not of a tool call guarded by sqlite-idempotency/mcp');
  return a;
}

module.exports = { withIdempotency, idempotentTool, attemptOf, META, PREFIX };
