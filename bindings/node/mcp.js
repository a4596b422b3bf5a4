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
// session id or a host's per-call id (a retry is a new request id; MCP
// 2026-07-28 has no session). The conversation, in this order: the
// conversation option; the request's _meta "io.github.sqlite-idempotency/
// conversation"; the host keys that name one (HOSTS); else a per-tenant
// deduplication window (windowScope), or with strict a refusal. The claim
// is committed before the tool runs. A replay answers the first
// CallToolResult after a text block saying it already ran, with _meta
// "io.github.sqlite-idempotency/replay": true; in_progress, unknown and
// mismatch answer an isError result whose text tells the model not to call
// again, and why. Every text the model reads comes from words.js. This
// module does not load the SDK: it wraps what the server hands it, so the
// core package installs and loads without it.
const {
  Ledger, NotSent, ToolFailed, OutcomeUnknown, ClaimInProgress, ClaimMismatch, LeaseLost, NotCommitted, TargetConflict,
} = require('./index.js');
const { say, because, sayConflict } = require('./words.js');
const { windowScope, checkWindow, WINDOW_SECONDS } = require('./agent-tools.js');

const PREFIX = 'io.github.sqlite-idempotency/';
const META = {
  conversation: `${PREFIX}conversation`,
  replay: `${PREFIX}replay`,
  decision: `${PREFIX}decision`,
  key: `${PREFIX}key`,
};
// The _meta keys hosts send that name a conversation, each with the tag
// its conversation gets in the key (docs/integrations.md cites them):
// ChatGPT / the Apps SDK, VS Code's agent mode.
const HOSTS = Object.freeze([
  Object.freeze({ key: 'openai/session', tag: 'openai' }),
  Object.freeze({ key: 'vscode.conversationId', tag: 'vscode' }),
]);
const KEY_PART = /^[A-Za-z0-9_-]{1,128}$/; // the key grammar (docs/keys.md)
const KEY_RULE = '1 to 128 characters of A-Za-z0-9_-';
const OPTIONS = ['tenant', 'conversation', 'strict', 'windowSeconds', 'waitMs', 'renewSeconds', 'heartbeatSeconds', 'targets', 'allowedBy', 'askSecondWrite', 'repeatArgument'];
const WRAPPED = Symbol.for('sqlite-idempotency/mcp.wrapped');
const ATTEMPT = Symbol.for('sqlite-idempotency/mcp.attempt');

// The request context's parts, in SDK 1.x (extra.signal, extra._meta,
// extra.authInfo) and 2.x (ctx.mcpReq.signal, ctx.mcpReq._meta, ctx.http.authInfo).
const signalOf = (extra) => (extra && (extra.signal || (extra.mcpReq && extra.mcpReq.signal))) || undefined;
const metaOf = (extra) => (extra && (extra._meta || (extra.mcpReq && extra.mcpReq._meta))) || undefined;
const authOf = (extra) => (extra && (extra.authInfo || (extra.http && extra.http.authInfo))) || undefined;

// Undefined when v is a key part, else the words saying it is not:
// "<said> <v>, not a key part (<the rule>)".
function notKeyPart(said, v) {
  if (typeof v === 'string' && KEY_PART.test(v)) return undefined;
  return `${said} ${typeof v === 'string' ? JSON.stringify(v) : `a ${v === null ? 'null' : typeof v}`}, not a key part (${KEY_RULE})`;
}

// Default tenant: the authenticated client (authInfo.clientId), set by the
// transport from the bearer-token verifier. No authInfo (stdio) is a missing
// tenant, never a constant; a client id that is not a key part (a URL) is
// refused, naming it, never rewritten: the tenant is who an operator
// resolves for.
function defaultTenant(extra) {
  const auth = authOf(extra);
  if (!auth) return { missing: 'the request carries no authInfo: no bearer-token verifier on this transport; give options.tenant' };
  if (auth.clientId === undefined || auth.clientId === null || auth.clientId === '') {
    return { missing: 'authInfo.clientId is empty; give options.tenant' };
  }
  const bad = notKeyPart('authInfo.clientId is', auth.clientId);
  return bad ? { missing: `${bad}; give options.tenant` } : auth.clientId;
}

// A host's conversation id as a key part: "<tag>-<value>" when that is one
// (1 to 128 characters of A-Za-z0-9_-), else "<tag>_<idem_fingerprint of
// the value as a JSON string>" (32 hex digits): deterministic, never
// truncated, and never equal to a value kept as it is ('_' after the tag).
function hostScope(ledger, tag, value) {
  const plain = `${tag}-${value}`;
  if (KEY_PART.test(plain)) return plain;
  return `${tag}_${ledger.value('SELECT idem_fingerprint(?) AS v', [JSON.stringify(value)])}`;
}

// Default conversation: the request's _meta key
// io.github.sqlite-idempotency/conversation, as given (a value that is not
// a key part is { missing }, naming it); else the first host key with a
// non-empty string, mapped by hostScope; else undefined (nothing names one).
function namedConversation(ledger, extra) {
  const meta = metaOf(extra);
  if (!meta) return undefined;
  const own = meta[META.conversation];
  if (own !== undefined && own !== null && own !== '') {
    const bad = notKeyPart(`_meta "${META.conversation}" is`, own);
    return bad ? { missing: bad } : own;
  }
  for (const h of HOSTS) {
    const v = meta[h.key];
    if (typeof v === 'string' && v !== '') return hostScope(ledger, h.tag, v);
  }
  return undefined;
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
  checkWindow(where, options);
  if (options.waitMs !== undefined && !(Number.isFinite(options.waitMs) && options.waitMs >= 0)) {
    throw new RangeError(`${where}: options.waitMs must be a number of milliseconds >= 0, got ${options.waitMs}`);
  }
  for (const k of ['renewSeconds', 'heartbeatSeconds']) {
    if (options[k] !== undefined && !(Number.isInteger(options[k]) && options[k] >= 0)) {
      throw new RangeError(`${where}: options.${k} must be an integer >= 0, got ${options[k]}`);
    }
  }
  if (options.askSecondWrite !== undefined && typeof options.askSecondWrite !== 'boolean') {
    throw new TypeError(`${where}: options.askSecondWrite must be a boolean, got ${typeof options.askSecondWrite}`);
  }
  if (options.askSecondWrite === true && !where.startsWith('withIdempotency')) {
    throw new TypeError(`${where}: options.askSecondWrite needs the server to ask the person through: give it to withIdempotency`);
  }
  if (options.allowedBy !== undefined && typeof options.allowedBy !== 'function') {
    throw new TypeError(`${where}: options.allowedBy must be a function of (args, extra) returning who allows a second write, or undefined; got ${typeof options.allowedBy}`);
  }
  if (options.targets !== undefined) {
    // idempotentTool: a function of the tool's arguments; withIdempotency: an
    // object of such functions by tool name
    const perTool = where.startsWith('withIdempotency');
    const ok = perTool
      ? options.targets !== null && typeof options.targets === 'object' && !Array.isArray(options.targets) && Object.values(options.targets).every((f) => typeof f === 'function')
      : typeof options.targets === 'function';
    if (!ok) {
      throw new TypeError(perTool
        ? `${where}: options.targets must be an object of functions by tool name ({ send_email: (args) => [...] }), got ${options.targets === null ? 'null' : typeof options.targets}`
        : `${where}: options.targets must be a function of the tool's arguments returning an array of strings, got ${options.targets === null ? 'null' : typeof options.targets}`);
    }
  }
  if (options.repeatArgument !== undefined) {
    // idempotentTool: the argument's name; withIdempotency: an object of
    // names by tool name
    const perTool = where.startsWith('withIdempotency');
    const r = options.repeatArgument;
    const ok = perTool
      ? r !== null && typeof r === 'object' && !Array.isArray(r) && Object.values(r).every((n) => typeof n === 'string' && n !== '')
      : typeof r === 'string' && r !== '';
    if (!ok) {
      throw new TypeError(perTool
        ? `${where}: options.repeatArgument must be an object of argument names by tool name ({ transfer: 'repeat' }), got ${r === null ? 'null' : JSON.stringify(r) ?? typeof r}`
        : `${where}: options.repeatArgument must be the name of an argument of the tool (a non-empty string), got ${r === null ? 'null' : JSON.stringify(r) ?? typeof r}`);
    }
  }
  return options;
}

// The argument a deliberate repeat of tool name sets (options.repeatArgument),
// named in its replay's words; undefined when it has none.
function repeatArgumentOf(options, name) {
  const r = options.repeatArgument;
  if (typeof r === 'string') return r;
  if (r && Object.hasOwn(r, name)) return r[name];
  return undefined;
}

// The targets function of tool name under options, or undefined.
function targetsFn(options, name) {
  if (typeof options.targets === 'function') return options.targets;
  if (options.targets && Object.hasOwn(options.targets, name)) return options.targets[name];
  return undefined;
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

// A stored result as the model reads it: the words first (a replay's, or
// a recorded failure's), then the result's own content, its _meta with
// marks added (the replay marker).
function told(result, text, marks) {
  const meta = result && typeof result._meta === 'object' && result._meta !== null ? result._meta : {};
  const content = result && Array.isArray(result.content) ? result.content : [];
  return { ...result, content: [{ type: 'text', text }, ...content], _meta: { ...meta, ...marks } };
}

const describe = (e) => (e instanceof Error ? e.message : String(e));

// The tenant or conversation of a call: a non-empty string, or the reason
// it is missing (a function that throws or rejects is a missing part).
async function part(which, fn, params) {
  let v;
  try {
    v = await fn(...params);
  } catch (e) {
    return { missing: `options.${which} threw: ${describe(e)}` };
  }
  if (v && typeof v === 'object' && typeof v.missing === 'string') return v;
  if (v === undefined || v === null || v === '') return { missing: `options.${which} gave ${v === '' ? 'an empty string' : String(v)}` };
  if (typeof v !== 'string') return { missing: `options.${which} gave a ${typeof v}, not a string` };
  const bad = notKeyPart(`options.${which} gave`, v);
  return bad ? { missing: bad } : v;
}

// The conversation of a call, as Ledger.call takes it: a string, a window
// (a function, windowScope), or { missing }.
// destructive: the tool's annotations say destructiveHint: true, which
// makes it strict unless options.strict is false.
async function conversationFor(ledger, name, options, tenant, args, extra, destructive) {
  if (options.conversation) return part('conversation', options.conversation, [args, extra]);
  const named = namedConversation(ledger, extra);
  if (named !== undefined) return named;
  const why = options.strict === true ? 'strict is true'
    : options.strict === undefined && destructive ? 'the tool declares destructiveHint: true (strict: false lets the window decide)' : undefined;
  if (why) {
    return { missing: `the request names none and ${why}: no _meta "${META.conversation}", ${HOSTS.map((h) => `"${h.key}"`).join(' or ')}; give options.conversation` };
  }
  return windowScope(ledger, tenant, name, args, options.windowSeconds === undefined ? WINDOW_SECONDS : options.windowSeconds);
}

// What the model reads when the call was not run, or ran and its outcome
// is unknown; targets, what the call touches (named in the in_progress and
// unknown words).
function refused(ledger, name, tenant, e, targets) {
  if (e instanceof ClaimInProgress) {
    const d = e.decision;
    return refusal('in_progress', say('in_progress', { tool: name, key: e.key, attempt: d.attempt, renewed_at: d.renewed_at, targets }), e.key);
  }
  if (e instanceof OutcomeUnknown) {
    const text = e.decision
      ? say('unknown', { tool: name, key: e.key, attempt: e.decision.attempt, targets })
      : say('outcome_unknown', { tool: name, key: e.key, reason: e.reason, targets });
    return refusal('unknown', text, e.key);
  }
  if (e instanceof ClaimMismatch) {
    return refusal('mismatch', say('mismatch', { tool: name, key: e.key, differs: e.decision.differs }), e.key);
  }
  if (e instanceof TargetConflict) {
    // the words, then (when the holder succeeded) its result: a stored
    // CallToolResult's content blocks, as a replay shows them, or else a
    // text block of the value
    const c = sayConflict(name, e.decision);
    const r = refusal('conflict', c.text, e.key);
    if (c.result !== undefined && c.result !== null && Array.isArray(c.result.content)) r.content.push(...c.result.content);
    else if (c.result !== undefined) r.content.push({ type: 'text', text: typeof c.result === 'string' ? c.result : JSON.stringify(c.result) });
    return r;
  }
  if (e instanceof NotSent) return refusal('not_sent', say('not_sent', { tool: name, reason: e.reason }), e.key);
  if (e instanceof NotCommitted) return refusal('not_sent', say('not_sent', { tool: name, reason: because('not_committed') }), e.key);
  if (e instanceof LeaseLost) return refusal('not_sent', say('not_sent', { tool: name, reason: because('lease_lost', { message: e.message }) }), e.key);
  return undefined;
}

// askSecondWrite: on a conflict whose holder succeeded, ask the person
// through the client (MCP elicitation, where the client declares it)
// whether to do it a second time; true only on an explicit accept with
// confirm checked. Any failure to ask (no elicitation, an error, a
// timeout) is a no.
async function personAllows(server, words, extra) {
  const inner = server && server.server;
  if (!inner || typeof inner.elicitInput !== 'function') return false;
  const caps = typeof inner.getClientCapabilities === 'function' ? inner.getClientCapabilities() : undefined;
  if (!caps || !caps.elicitation) return false;
  try {
    const r = await inner.elicitInput({
      message: `${words} Do it a second time anyway?`,
      requestedSchema: {
        type: 'object',
        properties: { confirm: { type: 'boolean', title: 'Do it a second time', description: 'The earlier call already did this.' } },
        required: ['confirm'],
      },
    }, { signal: signalOf(extra) });
    return r && r.action === 'accept' && r.content && r.content.confirm === true;
  } catch {
    return false;
  }
}

// The guarded callback. hints (withIdempotency): the registered tool's
// annotations, read at call time: readOnlyHint true passes through,
// destructiveHint true makes the tool strict unless options.strict is false.
// server (withIdempotency): the McpServer, to ask the person through.
function guard(ledger, name, options, callback, hints, server) {
  const tenantOf = options.tenant || defaultTenant;
  const callOptions = { waitMs: options.waitMs === undefined ? 0 : options.waitMs };
  for (const k of ['renewSeconds', 'heartbeatSeconds']) if (options[k] !== undefined) callOptions[k] = options[k];
  const wrapped = async function idempotentToolCallback(...params) {
    // The SDKs call (args, extra) for a tool with an input schema, (extra) without.
    const declared = (hints && hints()) || {};
    if (declared.readOnlyHint === true) return callback.apply(this, params);
    const withArgs = params.length >= 2;
    const args = withArgs && params[0] !== undefined ? params[0] : {};
    const extra = withArgs ? params[1] : params[0];
    const tenant = await part('tenant', tenantOf, [extra]);
    if (typeof tenant !== 'string') return refusal('no_tenant', say('no_tenant', { tool: name, reason: tenant.missing }));
    const conversation = await conversationFor(ledger, name, options, tenant, args, extra, declared.destructiveHint === true);
    if (conversation && typeof conversation === 'object') {
      return refusal('no_conversation', say('no_conversation', { tool: name, reason: conversation.missing }));
    }
    const call = { ...callOptions };
    const targets = targetsFn(options, name);
    if (targets) {
      let t;
      let reason;
      try {
        t = await targets(args);
        if (!Array.isArray(t) || !t.every((x) => typeof x === 'string')) {
          reason = `options.targets gave ${Array.isArray(t) ? 'an array holding a non-string' : t === null ? 'null' : `a ${typeof t}`}, not an array of strings`;
        }
      } catch (e) {
        reason = `options.targets threw: ${describe(e)}`;
      }
      if (reason !== undefined) return refusal('no_targets', say('no_targets', { tool: name, reason }));
      call.targets = t;
    }
    if (options.allowedBy) {
      const by = await options.allowedBy(args, extra);
      if (by !== undefined && by !== null) call.allowedBy = by;
    }
    const signal = signalOf(extra);
    if (signal && signal.aborted) return refusal('not_sent', say('not_sent', { tool: name, reason: because('cancelled') }));
    const self = this;
    let out;
    const run = (how) => ledger.call(tenant, conversation, name, args, async (attempt) => {
        if (signal && signal.aborted) throw new NotSent(because('cancelled'));
        const ex = { ...extra, [ATTEMPT]: attempt };
        let result;
        try {
          result = await (withArgs ? callback.call(self, params[0], ex) : callback.call(self, ex));
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
      }, how);
    try {
      try {
        out = await run(call);
      } catch (e) {
        // a person may allow a second write of what succeeded (askSecondWrite)
        if (!(e instanceof TargetConflict && options.askSecondWrite === true && e.decision.held_by && e.decision.held_by.status === 'succeeded')) throw e;
        if (!(await personAllows(server, sayConflict(name, e.decision).text, extra))) throw e;
        out = await run({ ...call, allowedBy: `person:${tenant}` });
      }
    } catch (e) {
      const r = refused(ledger, name, tenant, e, call.targets);
      if (r) return r;
      throw e;
    }
    const stored = out.status === 'succeeded' ? out.result : out.error; // the error: the isError result the tool returned
    if (!out.idempotent && out.status === 'succeeded') return stored;
    const words = { tool: name, key: out.key, attempt: out.attempt };
    if (!out.idempotent) return told(stored, say('failed', words), {}); // the failure is recorded: the model is told so
    words.at = out.settled_at; // when the first call's outcome was recorded
    words.repeat = repeatArgumentOf(options, name); // the way to a deliberate repeat, when the tool has one
    return told(stored, say(out.status === 'succeeded' ? 'replay' : 'failed_replay', words), { [META.replay]: true });
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

// A wrapped tool never advertises idempotentHint: true: clients read it as
// "safe to retry on their own", and the ledger's protection of a call ends
// when its row is purged. The hint is removed (a process warning says so,
// once per tool name).
const hintCleared = new Set();
function notIdempotent(name, annotations) {
  if (!annotations || annotations.idempotentHint !== true) return annotations;
  const { idempotentHint, ...rest } = annotations; // eslint-disable-line no-unused-vars
  if (!hintCleared.has(name)) {
    hintCleared.add(name);
    process.emitWarning(`tool "${name}" declared idempotentHint: true, which withIdempotency removed: clients retry a tool so hinted on their own, and the ledger's protection of a call ends when its row is purged (retention_seconds, idem_purge)`,
      { type: 'sqlite-idempotency/mcp', code: 'IDEM_IDEMPOTENT_HINT' });
  }
  return rest;
}

// Wraps every tool registered on server (registerTool, and the older tool())
// after this call; tools whose annotations say readOnlyHint: true pass
// through, destructiveHint: true is strict unless options.strict is false,
// idempotentHint: true is removed (notIdempotent). Returns server.
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
      const hints = () => registered && registered.annotations;
      if (typeof cb === 'function' && !cb[WRAPPED]) rest[i] = guard(ledger, name, opts, cb, hints, server);
      registered = original.call(this, name, ...rest);
      if (registered && registered.annotations) registered.annotations = notIdempotent(name, registered.annotations);
      if (registered && typeof registered.update === 'function') {
        // a callback given later by update() is guarded too (under the tool's name then)
        const update = registered.update;
        registered.update = function (updates) {
          if (updates && typeof updates.name === 'string') name = updates.name;
          if (updates && typeof updates.callback === 'function' && !updates.callback[WRAPPED]) {
            updates = { ...updates, callback: guard(ledger, name, opts, updates.callback, hints, server) };
          }
          if (updates && updates.annotations) updates = { ...updates, annotations: notIdempotent(name, updates.annotations) };
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

module.exports = { withIdempotency, idempotentTool, attemptOf, META, PREFIX, HOSTS, WINDOW_SECONDS };
