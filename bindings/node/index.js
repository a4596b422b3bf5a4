'use strict';
// sqlite-idempotency for Node: the extension and a claim API around it.
//
//   const Database = require('better-sqlite3');          // or libsql, or node:sqlite
//   const { Ledger } = require('sqlite-idempotency');
//   const ledger = Ledger.open(new Database('agent.db'));  // load, pragmas, CREATE ... IF NOT EXISTS
//   const out = await ledger.call(tenant, conversation, 'send_email', { to: 'a@b.c' },
//                                 (attempt) => sendEmail({ headers: attempt.headers }));
//   out.status, out.result, out.idempotent                 // the same shape on a replay
//
// getLoadablePath() gives the extension's path (without suffix: SQLite adds
// it); load(db) loads it into a better-sqlite3, libsql, node:sqlite or bun:sqlite
// (DatabaseSync, opened with { allowExtension: true }) connection. Errors of
// the extension are thrown as LedgerError carrying its message unchanged.
// The drivers are synchronous: a claim blocks the event loop for at most
// busy_timeout while another process holds the write lock.
const fs = require('node:fs');
const path = require('node:path');

const VERSION = require('./package.json').version;
const SUFFIX = { darwin: 'dylib', win32: 'dll' }[process.platform] || 'so';
const KEY = /^[A-Za-z0-9_-]{1,128}$/;
const OPTION = /^[a-z_]{1,64}$/;
const REQUIRES_TRANSACTION = 'requires a transaction (require_transaction=1)';
const LEASE_LOST = 'do not act on this claim';
const DETAIL_REFUSED = 'idem_settle: detail'; // the ledger cannot store the detail (not JSON, too big)
// The heartbeat of Ledger.call (docs/design.md, "The heartbeat"): every
// heartbeatSeconds the running action's claim is renewed to HEARTBEAT_LEASES
// beats from then, so a holder that died is seen once that lease passes,
// and two late beats do not lose a live holder's claim. A ledger that
// Ledger.open creates in a file gets that lease as its lease_seconds.
const HEARTBEAT_SECONDS = 5;
const HEARTBEAT_LEASES = 3;
const HEARTBEAT_MAX_SECONDS = Math.floor(31536000 / HEARTBEAT_LEASES); // the lease within lease_seconds' range

// --- errors --------------------------------------------------------------------

class IdempotencyError extends Error {
  constructor(message, options) {
    super(message, options);
    this.name = new.target.name;
  }
}

// An error of the extension or SQLite: message unchanged; code is the
// driver's code ('SQLITE_CONSTRAINT' from better-sqlite3 and libsql,
// 'ERR_SQLITE_ERROR' from node:sqlite), sqliteCode the SQLite error code
// number when the driver gives it; cause is the driver's error.
class LedgerError extends IdempotencyError {
  constructor(message, { code, sqliteCode, cause } = {}) {
    super(message, cause === undefined ? undefined : { cause });
    this.code = code;
    this.sqliteCode = sqliteCode;
  }

  static wrap(e, Cls = LedgerError) {
    if (e instanceof IdempotencyError) return e;
    const message = e && typeof e.message === 'string' ? e.message : String(e);
    const sqliteCode = e && (typeof e.errcode === 'number' ? e.errcode : typeof e.rawCode === 'number' ? e.rawCode : undefined);
    return new Cls(message, { code: e && e.code, sqliteCode, cause: e });
  }
}

// idem_renew refused: the token no longer holds a live claim. Nothing was sent.
class LeaseLost extends LedgerError {}

// The read of Ledger.leaseBeforeSend: 1 when the claim the token holds
// has more than the margin left and no renewal to the ms given first (NULL: the claim's
// own lease) would extend it by more than the margin. SQL 'now' is the
// connection's VFS clock, the ledger's.
const LEASE_CHECK_MAX_SECONDS = 1e9;
// The ledger's clock in SQL: ms since the Unix epoch, as the extension
// stamps created_at, updated_at and lease_until.
const NOW_MS_SQL = 'CAST(round(julianday(\'now\') * 86400000.0) AS INTEGER) - 210866760000000';
function leaseCheckSql(table) {
  return 'SELECT (status = \'claimed\' AND lft > max(1000, want / 10) AND lft >= want - max(1000, want / 10)) AS v'
    + ` FROM (SELECT status, lease_until - (${NOW_MS_SQL}) AS lft,`
    + ` coalesce(?, lease_until - updated_at) AS want FROM ${table} WHERE token = ?)`;
}

class NotCommitted extends IdempotencyError {
  constructor(key) {
    super(`${key}: the claim is not committed (a transaction is open on the ledger's connection); nothing was sent and the claim is released: commit before acting on an external claim`);
    this.key = key;
  }
}

class ClaimInProgress extends IdempotencyError {
  constructor(decision) {
    super(`${decision.key} is in progress (attempt ${decision.attempt}, lease until ${new Date(decision.lease_until).toISOString()}); nothing was sent`);
    this.key = decision.key;
    this.decision = decision;
    this.renewedAt = decision.renewed_at; // when the holder claimed or last renewed it (Unix ms)
  }
}

class ClaimMismatch extends IdempotencyError {
  constructor(decision) {
    super(`${decision.key}: ${decision.message} (differs: ${decision.differs})`);
    this.key = decision.key;
    this.decision = decision;
  }
}

// Another call of the tenant already touched one of this call's targets
// (decision.held_by: its key, tool, status, attempt, updated_at and, when
// it succeeded, result; decision.differs: the argument names whose values
// differ); nothing was run.
class TargetConflict extends IdempotencyError {
  constructor(decision) {
    const held = decision.held_by || {};
    super(`${decision.key}: target ${decision.target} is held by ${held.key} (${held.tool}, ${held.status}); this call was not run`);
    this.key = decision.key;
    this.decision = decision;
  }
}

// The request may have reached the target: the claim is unknown, never
// resent here. An action may throw it to choose the stored detail.
class OutcomeUnknown extends IdempotencyError {
  constructor(reason, { key, detail, decision, cause } = {}) {
    super(key === undefined
      ? `outcome unknown (${reason})`
      : `outcome of ${key} is unknown (${reason}); it will not be retried: reconcile with the target, then resolve`,
    cause === undefined ? undefined : { cause });
    this.reason = reason;
    this.key = key;
    this.detail = detail === undefined ? { reason } : detail;
    this.decision = decision;
  }
}

// Known that nothing was sent: an action throws it; call() releases the
// claim with {"sent": false} and throws it again with key set.
class NotSent extends IdempotencyError {
  constructor(reason, { key, detail } = {}) {
    super(`${key || 'the call'} was not sent (${reason}); the claim is released`);
    this.reason = reason;
    this.key = key;
    this.detail = detail || {};
  }
}

// The target answered and refused: call() settles failed and returns the
// outcome, exactly as a replay returns it.
class ToolFailed extends IdempotencyError {
  constructor(error) {
    let text;
    try { text = jsonText(error, 'the error'); } catch { text = String(error); }
    super(`the tool call failed: ${text}`);
    this.error = error;
  }
}

// --- loading -------------------------------------------------------------------

// The extension's path, without suffix, in the package of the running
// platform: sqlite-idempotency-<platform>-<arch>, one of this package's
// optionalDependencies (npm installs only the one whose os/cpu match).
// Throws IdempotencyError naming the package when it is missing, is another
// version, or has no library, and naming the platforms when there is none
// for this one.
const PLATFORMS = ['linux-x64', 'linux-arm64'];
function getLoadablePath() {
  const platform = `${process.platform}-${process.arch}`;
  if (!PLATFORMS.includes(platform)) {
    throw new IdempotencyError(`sqlite-idempotency: no package for ${platform}: the extension is packaged for ${PLATFORMS.join(' and ')} (${PLATFORMS.map((p) => `sqlite-idempotency-${p}`).join(', ')}); on ${platform} build it from source (make) and load build/idempotency with the driver's loadExtension`);
  }
  const name = `sqlite-idempotency-${platform}`;
  const reinstall = `npm install ${name}@${VERSION}`;
  let manifest;
  try {
    manifest = require.resolve(`${name}/package.json`);
  } catch (e) {
    if (e.code !== 'MODULE_NOT_FOUND') throw e;
    throw new IdempotencyError(`sqlite-idempotency: the package for ${platform}, ${name}, is not installed; npm installs it as an optional dependency of sqlite-idempotency unless optional dependencies are left out (--omit=optional, --no-optional) or node_modules was installed on another platform: run ${reinstall}`);
  }
  const dir = path.dirname(manifest);
  const { version } = JSON.parse(fs.readFileSync(manifest, 'utf8'));
  if (version !== VERSION) {
    throw new IdempotencyError(`sqlite-idempotency: ${name} is version ${version}, sqlite-idempotency is ${VERSION}; they must be the same: run ${reinstall}`);
  }
  if (!fs.existsSync(path.join(dir, `idempotency.${SUFFIX}`))) {
    throw new IdempotencyError(`sqlite-idempotency: ${name} in ${dir} has no idempotency.${SUFFIX}: run ${reinstall}`);
  }
  return path.join(dir, 'idempotency');
}

// Loads the extension into a better-sqlite3, libsql, node:sqlite or bun:sqlite connection.
function load(db) {
  if (!db || typeof db.loadExtension !== 'function') {
    throw new IdempotencyError('sqlite-idempotency: load(db): db has no loadExtension method (use better-sqlite3, libsql, or node:sqlite on a Node that has DatabaseSync.loadExtension)');
  }
  const file = getLoadablePath();
  const toggles = typeof db.enableLoadExtension === 'function'; // node:sqlite
  try {
    if (toggles) db.enableLoadExtension(true);
  } catch (e) {
    throw new IdempotencyError(`sqlite-idempotency: load(db): ${e.message} (open node:sqlite databases with { allowExtension: true })`, { cause: e });
  }
  try {
    db.loadExtension(file);
  } catch (e) {
    throw LedgerError.wrap(e);
  } finally {
    if (toggles) db.enableLoadExtension(false);
  }
}

// The Idempotency-Key header value: the key as an RFC 8941 sf-string.
function headerValue(key) {
  if (typeof key !== 'string' || !KEY.test(key)) {
    throw new RangeError(`headerValue: ${JSON.stringify(key)} is not a key (1 to 128 characters of A-Za-z0-9_-)`);
  }
  return `"${key}"`;
}

// --- JSON: numbers kept as written ---------------------------------------------
//
// Results and errors are stored with their numbers exactly as written
// (a target's 64-bit id digit for digit), which a JS number cannot hold.
// So the package writes a BigInt as its digits and a rawJson(text) as that
// text, and reads an integer literal beyond Number.MAX_SAFE_INTEGER back as
// a BigInt; every other number is a Number, as JSON.parse gives it.

// JSON text to be written as it is, e.g. a target's response body, whose
// numbers then keep their digits: rawJson('{"id":1234567890123456789}').
// idem_claim's options argument (JSON text), or undefined when none is
// given; the extension checks each value and names the rule it breaks.
function claimOptions(targets, window, allowedBy) {
  if (targets === undefined && window === undefined && allowedBy === undefined) return undefined;
  const o = {};
  if (targets !== undefined) o.targets = targets;
  if (window !== undefined) o.target_window_seconds = window;
  if (allowedBy !== undefined) o.allowed_by = allowedBy;
  return jsonText(o, "the claim's options");
}

class RawJson {
  constructor(text) {
    if (typeof text !== 'string') {
      throw new TypeError(`sqlite-idempotency: rawJson: text must be a string of JSON, got ${text === null ? 'null' : typeof text}`);
    }
    try {
      JSON.parse(text); // one JSON value and nothing else; the ledger checks the rest
    } catch (e) {
      throw new TypeError(`sqlite-idempotency: rawJson: text is not one JSON value: ${e.message}`);
    }
    this.text = text;
    Object.freeze(this);
  }
}
const rawJson = (text) => new RawJson(text);

// The JSON text of value, as JSON.stringify writes it (toJSON, boxed
// primitives, own enumerable keys in order), except that a BigInt is its
// digits, a RawJson its text, and what JSON cannot hold (undefined, a
// function, a symbol, NaN, an infinity, a cycle) is refused, naming it.
// A BigInt is an integer whatever BigInt.prototype.toJSON says (a common
// patch makes it a string, which would give 10n another key than 10): in
// args one beyond 2^53-1 then meets the extension's refusal of that
// integer, the same as from any language (docs/install.md, "Node").
function jsonText(value, what) {
  if (value === undefined) throw new TypeError(`sqlite-idempotency: ${what} is not JSON: undefined`);
  const parts = [];
  const open = new Set();
  const bad = (k, is) => new TypeError(`sqlite-idempotency: ${what} is not JSON: ${k === '' ? 'the value' : `member ${JSON.stringify(k)}`} is ${is}`);
  const put = (k, v) => {
    if (v instanceof BigInt) v = v.valueOf();
    if (v !== null && typeof v === 'object' && typeof v.toJSON === 'function') v = v.toJSON(k);
    if (v instanceof Number || v instanceof String || v instanceof Boolean || v instanceof BigInt) v = v.valueOf();
    switch (typeof v) {
      case 'string': parts.push(JSON.stringify(v)); return;
      case 'boolean': parts.push(v ? 'true' : 'false'); return;
      case 'bigint': parts.push(v.toString()); return;
      case 'number':
        if (!Number.isFinite(v)) throw bad(k, String(v));
        parts.push(JSON.stringify(v));
        return;
      case 'object':
        break;
      default:
        throw bad(k, `a ${typeof v}`);
    }
    if (v === null) {
      parts.push('null');
      return;
    }
    if (v instanceof RawJson) {
      parts.push(v.text);
      return;
    }
    if (open.has(v)) throw bad(k, 'a circular reference');
    open.add(v);
    if (Array.isArray(v)) {
      parts.push('[');
      for (let i = 0; i < v.length; i++) {
        if (i) parts.push(',');
        put(String(i), v[i]);
      }
      parts.push(']');
    } else {
      parts.push('{');
      let first = true;
      for (const key of Object.keys(v)) {
        parts.push(first ? '' : ',', JSON.stringify(key), ':');
        first = false;
        put(key, v[key]);
      }
      parts.push('}');
    }
    open.delete(v);
  };
  put('', value);
  return parts.join('');
}

// JSON text from the ledger (already checked there) to a value: JSON.parse,
// except that an integer literal beyond Number.MAX_SAFE_INTEGER is a BigInt
// holding exactly its digits. Text without 16 digits in a row has no such
// literal and goes to JSON.parse as it is.
function parseJson(text) {
  if (!/\d{16}/.test(text)) return JSON.parse(text);
  let i = 0;
  const NUMBER = /-?(?:0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?/y;
  const STRING = /"(?:[^"\\]|\\.)*"/y;
  const ws = () => {
    while (i < text.length && ' \t\n\r'.includes(text[i])) i++;
  };
  const fail = () => {
    throw new SyntaxError(`sqlite-idempotency: not JSON at position ${i}: ${text.slice(i, i + 20)}`);
  };
  const str = () => {
    STRING.lastIndex = i;
    const m = STRING.exec(text);
    if (!m) fail();
    i = STRING.lastIndex;
    return JSON.parse(m[0]);
  };
  const value = () => {
    ws();
    const c = text[i];
    if (c === '{') {
      const o = {};
      i++;
      ws();
      if (text[i] === '}') {
        i++;
        return o;
      }
      for (;;) {
        ws();
        if (text[i] !== '"') fail();
        const k = str();
        ws();
        if (text[i] !== ':') fail();
        i++;
        Object.defineProperty(o, k, { value: value(), writable: true, enumerable: true, configurable: true });
        ws();
        if (text[i] === ',') i++;
        else if (text[i] === '}') return (i++, o);
        else fail();
      }
    }
    if (c === '[') {
      const a = [];
      i++;
      ws();
      if (text[i] === ']') {
        i++;
        return a;
      }
      for (;;) {
        a.push(value());
        ws();
        if (text[i] === ',') i++;
        else if (text[i] === ']') return (i++, a);
        else fail();
      }
    }
    if (c === '"') return str();
    for (const [word, v] of [['true', true], ['false', false], ['null', null]]) {
      if (text.startsWith(word, i)) {
        i += word.length;
        return v;
      }
    }
    NUMBER.lastIndex = i;
    const m = NUMBER.exec(text);
    if (!m) fail();
    i = NUMBER.lastIndex;
    const n = Number(m[0]);
    return m[1] === undefined && m[2] === undefined && !Number.isSafeInteger(n) ? BigInt(m[0]) : n;
  };
  const v = value();
  ws();
  if (i !== text.length) fail();
  return v;
}

const quote = (name) => `"${String(name).replace(/"/g, '""')}"`;

// [schema or undefined, table] of a ledger argument, parsed as the extension
// parses it: ledger, aux.ledger, "aux"."ledger"; either part may be in double
// quotes (a quote inside doubled), and must be when it holds a '.'. Anything
// else throws RangeError, as the extension refuses it.
function splitName(name) {
  const bad = new RangeError(`Ledger: malformed ledger name ${JSON.stringify(String(name))}: write ledger or schema.ledger, a part in double quotes when it holds a '.' ("a.b"."x""y")`);
  if (typeof name !== 'string' || name.includes('\0')) throw bad;
  const parts = [];
  const n = name.length;
  let i = 0;
  for (;;) {
    let part;
    if (name[i] === '"') {
      let j = i + 1;
      part = '';
      for (;;) {
        const k = name.indexOf('"', j);
        if (k < 0) throw bad;
        part += name.slice(j, k);
        if (name[k + 1] === '"') {
          part += '"';
          j = k + 2;
          continue;
        }
        i = k + 1;
        break;
      }
      if (i < n && name[i] !== '.') throw bad;
    } else {
      let k = name.indexOf('.', i);
      if (k < 0) k = n;
      part = name.slice(i, k);
      i = k;
    }
    if (part === '') throw bad;
    parts.push(part);
    if (i >= n) break;
    i += 1; // the '.'
    if (i >= n) throw bad;
  }
  if (parts.length > 2) throw bad;
  return parts.length === 2 ? parts : [undefined, parts[0]];
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// --- the ledger ------------------------------------------------------------------

// The admitted claim, handed to the action of call(). leaseUntil is the
// claim's lease_until as this process last set it (the claim, a renewal,
// a heartbeat); leaseLost the LeaseLost a heartbeat met, when it met one.
class Attempt {
  constructor(ledger, decision) {
    this.ledger = ledger;
    this.decision = decision;
    this.key = decision.key;
    this.token = decision.token;
    this.attempt = decision.attempt;
    this.headers = { 'Idempotency-Key': headerValue(decision.key) };
    this.leaseUntil = decision.lease_until;
    this.leaseLost = undefined;
  }

  renew(seconds) {
    const until = this.ledger.renew(this.token, seconds);
    this.leaseUntil = until;
    return until;
  }
}

// heartbeatSeconds checked (named what): an integer number of seconds, 0
// (or null) for no heartbeat.
function heartbeatArg(seconds, what) {
  if (seconds === null) return 0;
  if (!(Number.isSafeInteger(seconds) && seconds >= 0 && seconds <= HEARTBEAT_MAX_SECONDS)) {
    const got = typeof seconds === 'string' ? JSON.stringify(seconds) : String(seconds);
    throw new RangeError(`${what} must be an integer from 0 to ${HEARTBEAT_MAX_SECONDS} (seconds; 0 or null: no heartbeat), got ${got}`);
  }
  return seconds;
}

// Renews an action's claim while the action runs (Ledger.call): each beat,
// seconds apart, is idem_renew(token, HEARTBEAT_LEASES * seconds) on the
// ledger's connection, between the action's own steps (the drivers are
// synchronous, so a beat never runs inside one of its statements). A beat
// while a transaction is open on the connection is skipped: the
// application's transaction is not the place of a renewal (it would roll
// back with it). A LeaseLost stops the beats (attempt.leaseLost): the claim
// is fenced by its token, and the settle decides as without a heartbeat.
// Any other error (busy past busy_timeout) leaves the lease as it is, and
// the next beat tries again. The timer does not keep the process alive.
class Heartbeat {
  constructor(ledger, attempt, seconds) {
    this.ledger = ledger;
    this.attempt = attempt;
    this.seconds = seconds;
    this.timer = undefined;
    this.next();
  }

  next() {
    this.timer = setTimeout(() => this.beat(), this.seconds * 1000);
    if (typeof this.timer.unref === 'function') this.timer.unref();
  }

  beat() {
    this.timer = undefined;
    if (this.ledger.inTransaction() === false) {
      try {
        this.attempt.leaseUntil = this.ledger.renew(this.attempt.token, HEARTBEAT_LEASES * this.seconds);
      } catch (e) {
        if (e instanceof LeaseLost) {
          this.attempt.leaseLost = e;
          return;
        }
      }
    }
    this.next();
  }

  // No beat after this returns: a beat runs only from the timer.
  stop() {
    clearTimeout(this.timer);
    this.timer = undefined;
  }
}

class Ledger {
  // db: a connection with the extension loaded (see Ledger.open and load);
  // heartbeatSeconds: call()'s default (0 or null: no heartbeat).
  constructor(db, { name = 'ledger', heartbeatSeconds = HEARTBEAT_SECONDS } = {}) {
    this.heartbeatSeconds = heartbeatArg(heartbeatSeconds, 'Ledger: heartbeatSeconds');
    this.db = db;
    this.name = name;
    [this.schema, this.table] = splitName(name); // a malformed name is refused here, once
    this.stmts = new Map();
    this.transactional = false; // the ledger refused a claim outside a transaction
  }

  // The ledger (or its shadow table suffix) as a quoted SQL name.
  sqlName(suffix = '') {
    return `${this.schema === undefined ? '' : `${quote(this.schema)}.`}${quote(this.table + suffix)}`;
  }

  // Whether a transaction is open (undefined when the driver does not say).
  inTransaction() {
    if (typeof this.db.inTransaction === 'boolean') return this.db.inTransaction; // better-sqlite3, libsql
    if (typeof this.db.isTransaction === 'boolean') return this.db.isTransaction; // node:sqlite
    return undefined;
  }

  // The claim of call(): committed as it returns unless the caller has a
  // transaction open. A ledger created with require_transaction=1 refuses a
  // claim outside a transaction; then (and for every later claim) the claim
  // is made inside BEGIN IMMEDIATE ... COMMIT, and an admitted claim is
  // reported committed once that COMMIT succeeded.
  // conversation may be a function that chooses it under the write lock
  // (claimChosen).
  // targets: { targets, targetWindowSeconds, allowedBy } (claim()).
  claimCommitted(tenant, conversation, tool, args, operationId, targets = {}) {
    if (typeof conversation === 'function') return this.claimChosen(tenant, conversation, tool, args, operationId, targets);
    if (!(this.transactional && this.inTransaction() === false)) {
      try {
        return this.claim(tenant, conversation, tool, args, { operationId, ...targets });
      } catch (e) {
        if (!(e instanceof LedgerError) || !e.message.includes(REQUIRES_TRANSACTION) || this.inTransaction() === true) throw e;
        this.transactional = true;
      }
    }
    return this.claimLocked(() => this.claim(tenant, conversation, tool, args, { operationId, ...targets }));
  }

  // The claim of call() when the conversation depends on what the ledger
  // holds (sqlite-idempotency/mcp's deduplication window):
  // choose(nowMs) reads the ledger and names the conversation, and the
  // claim follows in the same BEGIN IMMEDIATE ... COMMIT, with nowMs the
  // ledger's clock read under the write lock; so processes that race
  // choose alike (the second sees the first's claim). Inside a transaction
  // of the caller's, the claim is the caller's and not committed (call()
  // then releases it: NotCommitted).
  claimChosen(tenant, choose, tool, args, operationId, targets = {}) {
    const claim = () => this.claim(tenant, choose(Number(this.value(`SELECT ${NOW_MS_SQL} AS v`, []))), tool, args, { operationId, ...targets });
    return this.inTransaction() === true ? claim() : this.claimLocked(claim);
  }

  // claim() inside BEGIN IMMEDIATE ... COMMIT: an admitted claim is
  // reported committed once that COMMIT succeeded.
  claimLocked(claim) {
    let d;
    try {
      this.db.exec('BEGIN IMMEDIATE');
    } catch (e) {
      throw LedgerError.wrap(e);
    }
    try {
      d = claim();
      this.db.exec('COMMIT');
    } catch (e) {
      try { this.db.exec('ROLLBACK'); } catch { /* the transaction is gone already */ }
      throw LedgerError.wrap(e);
    }
    if (d.decision === 'admitted') d.committed = true;
    return d;
  }

  // Prepares a connection the way the claim API needs it: loads the
  // extension, journal_mode=WAL (on a file), synchronous=FULL,
  // busy_timeout; with create, CREATE VIRTUAL TABLE IF NOT EXISTS. A ledger
  // it creates in a file with the heartbeat on has the heartbeat's lease
  // as its lease_seconds unless options name one (docs/design.md, "The
  // heartbeat"); in memory no other process can see a dead holder, and the
  // extension's default stays.
  static open(db, { name = 'ledger', create = true, busyTimeoutMs = 10000, options, heartbeatSeconds = HEARTBEAT_SECONDS } = {}) {
    if (!Number.isInteger(busyTimeoutMs) || busyTimeoutMs < 0) {
      throw new RangeError(`Ledger.open: busyTimeoutMs must be an integer >= 0, got ${busyTimeoutMs}`);
    }
    const beat = heartbeatArg(heartbeatSeconds, 'Ledger.open: heartbeatSeconds');
    load(db);
    const ledger = new Ledger(db, { name, heartbeatSeconds: beat });
    let inFile;
    try {
      const file = ledger.value("SELECT file AS v FROM pragma_database_list WHERE name = 'main'", []);
      if (file) db.exec('PRAGMA journal_mode=WAL');
      db.exec('PRAGMA synchronous=FULL');
      db.exec(`PRAGMA busy_timeout=${busyTimeoutMs}`);
      inFile = Boolean(ledger.value('SELECT file AS v FROM pragma_database_list WHERE name = ?', [ledger.schema ?? 'main']));
    } catch (e) {
      throw LedgerError.wrap(e);
    }
    if (create) ledger.createWith(options, inFile && beat > 0 ? { lease_seconds: HEARTBEAT_LEASES * beat } : {});
    return ledger;
  }

  // CREATE VIRTUAL TABLE IF NOT EXISTS name USING idempotency(options).
  create(options = {}) {
    this.createWith(options, {});
  }

  // create(options), with defaults for the options it does not name: used
  // when the ledger is created, never compared with an existing one's.
  createWith(options, defaults) {
    const parts = [];
    for (const [k, v] of Object.entries(options || {})) {
      if (!OPTION.test(k)) throw new RangeError(`Ledger.create: option name ${JSON.stringify(k)} is not a word of a-z and _`);
      if (!Number.isInteger(v)) throw new RangeError(`Ledger.create: option ${k} must be an integer, got ${JSON.stringify(v)}`);
      parts.push(`${k}=${v}`);
    }
    const given = parts.length;
    for (const [k, v] of Object.entries(defaults)) {
      if (!Object.prototype.hasOwnProperty.call(options || {}, k)) parts.push(`${k}=${v}`);
    }
    const sql = `CREATE VIRTUAL TABLE IF NOT EXISTS ${this.sqlName()} USING idempotency${parts.length ? `(${parts.join(', ')})` : ''}`;
    try {
      this.db.exec(sql);
    } catch (e) {
      // A creator racing another waits on busy_timeout; if the other won, fine.
      if (!this.value(`SELECT count(*) AS v FROM ${quote(this.schema ?? 'main')}.sqlite_schema WHERE type = 'table' AND name = ?`, [this.table])) {
        throw LedgerError.wrap(e);
      }
    }
    // Options apply when the ledger is created; an existing ledger must have
    // been created with the ones given (never silently ignored).
    if (given) {
      let rows;
      try {
        rows = this.db.prepare(`SELECT k, v FROM ${this.sqlName('_meta')}`).all();
      } catch (e) {
        throw LedgerError.wrap(e);
      }
      const stored = new Map(rows.map((r) => [r.k, r.v]));
      for (const [k, v] of Object.entries(options)) {
        const have = stored.get(k);
        if (String(have) !== String(v)) {
          throw new IdempotencyError(`Ledger.create: ledger ${this.name} exists with ${k}=${have === undefined ? '(none)' : have}, not ${v}; options apply only when a ledger is created`);
        }
      }
    }
  }

  close() {
    this.db.close();
  }

  // The column v of the first row of sql.
  value(sql, params) {
    let stmt = this.stmts.get(sql);
    try {
      if (!stmt) {
        stmt = this.db.prepare(sql);
        this.stmts.set(sql, stmt);
      }
      const row = stmt.get(...params);
      return row === undefined || row === null ? undefined : row.v; // no row: undefined (better-sqlite3, node:sqlite), null (bun:sqlite)
    } catch (e) {
      // A statement that failed is not reused: libsql's fails again with the same error.
      this.stmts.delete(sql);
      throw LedgerError.wrap(e);
    }
  }

  // targets (what the write touches), targetWindowSeconds and allowedBy:
  // docs/ledger.md, "Targets"; the extension checks each value.
  claim(tenant, conversation, tool, args, { effect, operationId, targets, targetWindowSeconds, allowedBy } = {}) {
    const text = jsonText(args, 'args');
    const options = claimOptions(targets, targetWindowSeconds, allowedBy);
    let raw;
    if (options !== undefined) {
      raw = this.value('SELECT idem_claim(?, ?, ?, ?, ?, ?, ?, ?) AS v', [this.name, tenant, conversation, tool, text,
        effect === undefined ? 'external' : effect, operationId === undefined ? null : operationId, options]);
    } else if (operationId !== undefined) {
      raw = this.value('SELECT idem_claim(?, ?, ?, ?, ?, ?, ?) AS v', [this.name, tenant, conversation, tool, text, effect === undefined ? 'external' : effect, operationId]);
    } else if (effect !== undefined) {
      raw = this.value('SELECT idem_claim(?, ?, ?, ?, ?, ?) AS v', [this.name, tenant, conversation, tool, text, effect]);
    } else {
      raw = this.value('SELECT idem_claim(?, ?, ?, ?, ?) AS v', [this.name, tenant, conversation, tool, text]);
    }
    const d = parseJson(raw);
    if (!['admitted', 'replay', 'in_progress', 'unknown', 'mismatch', 'conflict'].includes(d.decision)) {
      throw new IdempotencyError(`idem_claim returned an unexpected decision ${JSON.stringify(d.decision)}: ${raw}`);
    }
    return d;
  }

  settle(token, status, detail = null) {
    const text = detail === null ? null : jsonText(detail, 'detail');
    return parseJson(this.value('SELECT idem_settle(?, ?, ?, ?) AS v', [this.name, token, status, text]));
  }

  resolve(tenant, key, status, detail = null) {
    const text = detail === null ? null : jsonText(detail, 'detail');
    return parseJson(this.value('SELECT idem_resolve(?, ?, ?, ?, ?) AS v', [this.name, tenant, key, status, text]));
  }

  renew(token, seconds) {
    try {
      if (seconds === undefined) return Number(this.value('SELECT idem_renew(?, ?) AS v', [this.name, token]));
      // better-sqlite3 and libsql bind every number as REAL; the extension
      // takes only an INTEGER (a fraction is passed on, and refused there).
      const s = Number.isSafeInteger(seconds) ? BigInt(seconds) : seconds;
      return Number(this.value('SELECT idem_renew(?, ?, ?) AS v', [this.name, token, s]));
    } catch (e) {
      // Both of idem_renew's "this claim is gone" messages end so; a
      // malformed token or seconds stays a LedgerError.
      if (e instanceof LedgerError && e.message.endsWith(LEASE_LOST)) {
        throw new LeaseLost(e.message, { code: e.code, sqliteCode: e.sqliteCode, cause: e.cause });
      }
      throw e;
    }
  }

  // The check right before sending (Ledger.call): a read while the lease
  // has more than the margin left, a renewal (a write) only when less is
  // left or the lease asked for (seconds, default the claim's own) is longer
  // than what is left by more than the margin. The margin is max(1 s, 10%
  // of that lease). No one takes a claim over before its lease_until, so a
  // claim with more than the margin left is still this token's when the
  // action starts (given clocks that agree within the margin: docs/leases.md).
  // A token that no longer holds a claim is renewed, and refused: LeaseLost.
  leaseBeforeSend(token, seconds) {
    let wantMs = null;
    if (seconds !== undefined) {
      if (!(Number.isSafeInteger(seconds) && seconds >= 0 && seconds <= LEASE_CHECK_MAX_SECONDS)) return this.renew(token, seconds);
      wantMs = BigInt(seconds) * 1000n;
    }
    if (Number(this.value(leaseCheckSql(this.sqlName()), [wantMs, token])) === 1) return undefined;
    return this.renew(token, seconds);
  }

  // The ledger row of a key (effective status; JSON columns parsed), or null.
  row(tenant, key) {
    let r;
    try {
      r = this.db.prepare(`SELECT * FROM ${this.sqlName()} WHERE tenant = ? AND key = ?`).get(tenant, key);
    } catch (e) {
      throw LedgerError.wrap(e);
    }
    if (r === undefined || r === null) return null; // no row (bun:sqlite gives null)
    const out = {};
    for (const [k, v] of Object.entries(r)) {
      if (k === '_metadata') continue; // libsql's
      out[k] = ['args', 'result', 'error', 'members'].includes(k) && typeof v === 'string' ? parseJson(v) : v;
    }
    return out;
  }

  // Claims, and claims again with backoff (10 ms doubling to 500 ms, with
  // jitter, never past the deadline) while the decision is in_progress.
  async wait(tenant, conversation, tool, args, { timeoutMs, effect, operationId, targets, targetWindowSeconds, allowedBy } = {}) {
    return waitFor(() => this.claim(tenant, conversation, tool, args, { effect, operationId, targets, targetWindowSeconds, allowedBy }), timeoutMs, 'Ledger.wait: timeoutMs');
  }

  // Runs one external tool call at most once; action(attempt) resolves to its
  // result. See index.d.ts for the rules.
  async call(tenant, conversation, tool, args, action, { operationId, waitMs = 0, renewSeconds, heartbeatSeconds, targets, targetWindowSeconds, allowedBy } = {}) {
    const beat = heartbeatSeconds === undefined ? this.heartbeatSeconds : heartbeatArg(heartbeatSeconds, 'Ledger.call: heartbeatSeconds');
    const t = { targets, targetWindowSeconds, allowedBy };
    const d = await waitFor(() => this.claimCommitted(tenant, conversation, tool, args, operationId, t), waitMs, 'Ledger.call: waitMs');
    switch (d.decision) {
      case 'replay':
        return outcome(d.key, d.status, d.attempt, d.result, d.error, d.members, true, d.settled_at);
      case 'in_progress':
        throw new ClaimInProgress(d);
      case 'unknown':
        throw new OutcomeUnknown('an earlier attempt may have reached the target', { key: d.key, decision: d });
      case 'mismatch':
        throw new ClaimMismatch(d);
      case 'conflict':
        throw new TargetConflict(d);
      default:
    }
    if (d.committed !== true) {
      this.settle(d.token, 'released', { sent: false, reason: 'claim not committed' });
      throw new NotCommitted(d.key);
    }
    const attempt = new Attempt(this, d);
    const renewed = this.leaseBeforeSend(d.token, renewSeconds); // LeaseLost: nothing sent, nothing to settle
    if (renewed !== undefined) attempt.leaseUntil = renewed;
    const heartbeat = beat > 0 ? new Heartbeat(this, attempt, beat) : undefined;
    let result;
    try {
      result = await action(attempt);
    } catch (e) {
      heartbeat?.stop(); // before the settle: the heartbeat never outlives the action
      if (e instanceof NotSent) {
        this.settle(d.token, 'released', { ...e.detail, sent: false, reason: e.reason });
        e.key = d.key;
        e.message = `${d.key} was not sent (${e.reason}); the claim is released`;
        throw e;
      }
      if (e instanceof ToolFailed) {
        const [error, s] = this.settleValue(d, 'failed', e.error, 'the error');
        return outcome(d.key, 'failed', d.attempt, undefined, error, s.members, false, s.settled_at);
      }
      if (e instanceof OutcomeUnknown) {
        this.settleUnknown(d, e.detail);
        throw new OutcomeUnknown(e.reason, { key: d.key, detail: e.detail, cause: e });
      }
      const reason = e instanceof Error ? `${e.name}: ${e.message}` : `thrown: ${String(e)}`;
      this.settleUnknown(d, { reason });
      throw new OutcomeUnknown(reason, { key: d.key, cause: e });
    } finally {
      heartbeat?.stop();
    }
    // an action that returns nothing (undefined) succeeded with no value: null
    const [stored, s] = this.settleValue(d, 'succeeded', result === undefined ? null : result, 'the result');
    return outcome(d.key, 'succeeded', d.attempt, stored, undefined, s.members, false, s.settled_at);
  }

  // Settles status with value; returns [the value as stored, the settle's
  // answer]. The value returned is the stored JSON parsed, as a replay
  // returns it (numbers as written; a big integer as a BigInt). A value the
  // ledger cannot store (not JSON, such as NaN or a lone surrogate; over
  // max_args_bytes) leaves the call unknown: the action ran, so it may have
  // taken effect; it is settled unknown (never resent) and OutcomeUnknown
  // says why.
  settleValue(d, status, value, what) {
    let reason;
    let cause;
    try {
      const text = jsonText(value, what);
      const answer = parseJson(this.value('SELECT idem_settle(?, ?, ?, ?) AS v', [this.name, d.token, status, text]));
      const column = status === 'succeeded' ? 'result' : 'error';
      const stored = this.value(`SELECT ${column} AS v FROM ${this.sqlName()} WHERE token = ?`, [d.token]);
      return [stored === null || stored === undefined ? null : parseJson(stored), answer];
    } catch (e) {
      if (e instanceof LedgerError) {
        if (!e.message.startsWith(DETAIL_REFUSED)) throw e;
        reason = `${what} cannot be stored: ${e.message}`;
      } else if (e instanceof TypeError) {
        reason = e.message;
      } else {
        throw e;
      }
      cause = e;
    }
    this.settleUnknown(d, { reason });
    throw new OutcomeUnknown(reason, { key: d.key, cause });
  }

  // Settles the claim unknown. A claim whose lease ran out while the action
  // ran is unknown already and the extension refuses unknown -> unknown:
  // that refusal is taken as done when the row the token names is
  // (effectively) unknown (the detail is then not recorded); any other
  // error is thrown.
  settleUnknown(d, detail) {
    try {
      try {
        this.settle(d.token, 'unknown', detail);
      } catch (e) {
        // a detail the ledger cannot store (over max_args_bytes) is dropped
        if (detail === null || detail === undefined || !(e instanceof LedgerError) ||
            !e.message.startsWith(DETAIL_REFUSED)) throw e;
        this.settle(d.token, 'unknown', null);
      }
    } catch (e) {
      let row;
      try {
        row = this.db.prepare(`SELECT status FROM ${this.sqlName()} WHERE token = ?`).get(d.token);
      } catch {
        row = undefined;
      }
      if (!(e instanceof LedgerError) || row?.status !== 'unknown') throw e;
    }
  }
}

// Calls claim() until its decision is not in_progress or timeoutMs (checked,
// named what) passed.
async function waitFor(claim, timeoutMs, what) {
  if (!(Number.isFinite(timeoutMs) && timeoutMs >= 0)) {
    throw new RangeError(`${what} must be a number of milliseconds >= 0, got ${timeoutMs}`);
  }
  const deadline = Date.now() + timeoutMs;
  let delay = 10;
  for (;;) {
    const d = claim();
    const left = deadline - Date.now();
    if (d.decision !== 'in_progress' || left <= 0) return d;
    await sleep(Math.min(left, delay * (0.5 + Math.random() / 2)));
    delay = Math.min(delay * 2, 500);
  }
}

// settledAt: when the outcome was recorded (Unix ms): the settle answer's
// settled_at on the call that ran, the replay's on a replay (the same time).
function outcome(key, status, attempt, result, error, members, idempotent, settledAt) {
  const o = { key, status, attempt };
  if (status === 'succeeded') o.result = result === undefined ? null : result;
  else o.error = error === undefined ? null : error;
  o.members = members || [];
  o.idempotent = idempotent;
  o.settled_at = settledAt;
  return o;
}

// Resolves the unknown rows with what each tool's reconciler learns from the
// target (reconcile.js); resolves to a report.
Ledger.prototype.reconcile = function reconcile(reconcilers, options) {
  return require('./reconcile.js').reconcile(this, reconcilers, options);
};

module.exports = {
  VERSION,
  getLoadablePath,
  load,
  headerValue,
  Ledger,
  Attempt,
  IdempotencyError,
  LedgerError,
  LeaseLost,
  NotCommitted,
  ClaimInProgress,
  ClaimMismatch,
  TargetConflict,
  OutcomeUnknown,
  NotSent,
  ToolFailed,
  RawJson,
  rawJson,
};
// The JSON reader and writer, for the package's own files (reconcile.js),
// under a symbol: not a name of the ES module or of the types.
module.exports[Symbol.for('sqlite-idempotency.json')] = Object.freeze({ parseJson, jsonText });
// Defined after the exports above, which reconcile.js and metrics.js use.
module.exports.Answer = require('./reconcile.js').Answer;
module.exports.Metrics = require('./metrics.js').Metrics;
