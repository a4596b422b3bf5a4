// An idempotent tool-call adapter over sqlite-idempotency for Node, with
// better-sqlite3 (12.x) and Node's built-in http/https.
//
//   import Database from 'better-sqlite3';
//   import { IdemAdapter, OutcomeUnknown, NotSent } from './idem_adapter.mjs';
//   const idem = IdemAdapter.open(Database, 'agent.db', 'build/idempotency');
//   const out = await idem.callHttpTool(tenant, conversation, 'send_email', { to: 'a@b.c' },
//                                       'https://mail.example/send', { timeoutMs: 5000 });
//
// The rules it follows (README, "The adapter pattern"):
//
// * claim first, with a bare `SELECT idem_claim(...)` on a connection that
//   has no transaction open (better-sqlite3 autocommits each statement), so
//   the claim is committed as it returns; `synchronous=FULL` (a power loss
//   cannot undo the claim) and a `busy_timeout` (concurrent claimers wait);
// * act only on `admitted` with `committed` true; every other decision is
//   returned as is and nothing runs: `replay` (the first outcome,
//   `"idempotent": true`), `in_progress`, `unknown`, `mismatch`;
// * send the key as the `Idempotency-Key` header, an RFC 8941 sf-string (the
//   key in double quotes), so the target can deduplicate too;
// * settle what is known:
//     - 2xx: `succeeded` with the response body (JSON, else {status, text});
//     - 4xx: `failed` with {status, body}: the target answered and refused,
//       so retries replay that failure;
//     - any other status, a timeout or an error after the connection was
//       made: `unknown` (the target may have acted), throw OutcomeUnknown;
//       never retried here: reconcile with the target, then idem_resolve;
//     - the connection could not be made (refused, unreachable, connect
//       timeout): nothing was sent, so `released` with {"sent": false},
//       throw NotSent; a retry is admitted again.
//
// better-sqlite3 is synchronous: a claim blocks the event loop for at most
// busy_timeout while another process holds the write lock.
// The tenant must come from trusted authentication, never from the model.
import http from 'node:http';
import https from 'node:https';

export class OutcomeUnknown extends Error {
  constructor(key, reason) {
    super(`outcome of ${key} is unknown (${reason}); it will not be retried: reconcile with the target, then idem_resolve`);
    this.name = 'OutcomeUnknown';
    this.key = key;
    this.reason = reason;
  }
}

export class NotSent extends Error {
  constructor(key, reason) {
    super(`${key} was not sent (${reason}); the claim is released`);
    this.name = 'NotSent';
    this.key = key;
    this.reason = reason;
  }
}

// RFC 8941 sf-string: printable ASCII in double quotes, with \ and " escaped.
export function sfString(value) {
  if (!/^[\x20-\x7e]*$/.test(value)) throw new RangeError(`${JSON.stringify(value)} cannot be an sf-string (only printable ASCII)`);
  return `"${value.replace(/[\\"]/g, (c) => `\\${c}`)}"`;
}

function quoteIdent(name) {
  return `"${String(name).replace(/"/g, '""')}"`;
}

export class IdemAdapter {
  // db: a better-sqlite3 Database with the extension loaded (see open()).
  constructor(db, { ledger = 'ledger' } = {}) {
    this.db = db;
    this.ledger = ledger;
    this.claimStmt = db.prepare('SELECT idem_claim(?, ?, ?, ?, ?)').pluck();
    this.settleStmt = db.prepare('SELECT idem_settle(?, ?, ?, ?)').pluck();
  }

  // Opens a connection the way the adapter needs it.
  static open(Database, file, extension, { ledger = 'ledger', busyTimeoutMs = 10000, create = true } = {}) {
    const db = new Database(file, { timeout: busyTimeoutMs });
    // better-sqlite3 keeps SQLITE_DBCONFIG_DEFENSIVE on; the extension
    // works with it (on SQLite 3.44+ the ledger's rows table is not declared
    // a shadow table, since SQLite refuses triggers on one in defensive mode).
    db.loadExtension(extension);
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = FULL');
    db.pragma(`busy_timeout = ${Math.trunc(busyTimeoutMs)}`);
    if (create) db.exec(`CREATE VIRTUAL TABLE IF NOT EXISTS ${quoteIdent(ledger)} USING idempotency`);
    return new IdemAdapter(db, { ledger });
  }

  close() {
    this.db.close();
  }

  claim(tenant, conversation, tool, args) {
    return JSON.parse(this.claimStmt.get(this.ledger, tenant, conversation, tool, JSON.stringify(args)));
  }

  settle(token, status, detail) {
    return JSON.parse(this.settleStmt.get(this.ledger, token, status, detail == null ? null : JSON.stringify(detail)));
  }

  // Runs the tool call at most once: POST args as JSON to url. Resolves to the
  // claim decision for anything but admitted (nothing ran), or for admitted
  // {decision: 'admitted', key, attempt, status: 'succeeded'|'failed', result|error}.
  async callHttpTool(tenant, conversation, tool, args, url, { timeoutMs = 5000 } = {}) {
    const d = this.claim(tenant, conversation, tool, args);
    if (d.decision !== 'admitted') return d;
    const { key, token, attempt } = d;
    if (d.committed !== true) {
      // Someone opened a transaction on this connection: never act on a claim
      // that could still roll back.
      this.settle(token, 'released', { sent: false, reason: 'claim not committed' });
      throw new Error('idem_claim was not committed; commit before acting on an external claim');
    }
    let res;
    try {
      res = await post(url, JSON.stringify(args), { 'Idempotency-Key': sfString(key) }, timeoutMs);
    } catch (e) {
      if (e.connected) {
        const reason = e.timedOut ? 'timeout' : `${e.code || e.name}: ${e.message}`;
        this.settle(token, 'unknown', e.timedOut ? { reason: 'timeout', timeout_ms: timeoutMs } : { reason });
        throw new OutcomeUnknown(key, reason);
      }
      const reason = `connect: ${e.timedOut ? 'timeout' : e.code || e.message}`;
      this.settle(token, 'released', { sent: false, reason });
      throw new NotSent(key, reason);
    }
    let payload;
    try {
      payload = JSON.parse(res.body);
    } catch {
      payload = { text: res.body };
    }
    if (res.status >= 200 && res.status < 300) {
      this.settle(token, 'succeeded', payload);
      return { decision: 'admitted', key, attempt, status: 'succeeded', result: payload };
    }
    if (res.status >= 400 && res.status < 500) {
      const error = { status: res.status, body: payload };
      this.settle(token, 'failed', error);
      return { decision: 'admitted', key, attempt, status: 'failed', error };
    }
    this.settle(token, 'unknown', { reason: `http ${res.status}`, body: payload });
    throw new OutcomeUnknown(key, `http ${res.status}`);
  }
}

// POST body to url on a fresh connection (no keep-alive reuse, so "connected"
// means this request's socket connected). Rejects with an Error carrying
// .connected (whether anything may have been sent) and .timedOut.
function post(url, body, headers, timeoutMs) {
  return new Promise((resolve, reject) => {
    const u = new URL(url);
    const lib = u.protocol === 'https:' ? https : http;
    let connected = false;
    let timedOut = false;
    let settled = false;
    const fail = (err) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      err.connected = connected;
      err.timedOut = timedOut;
      reject(err);
    };
    const req = lib.request(u, {
      method: 'POST',
      agent: false,
      headers: { ...headers, 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) },
    }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        resolve({ status: res.statusCode, body: Buffer.concat(chunks).toString('utf8') });
      });
      res.on('error', fail);
    });
    const timer = setTimeout(() => {
      timedOut = true;
      req.destroy(Object.assign(new Error(`no answer within ${timeoutMs} ms`), { code: 'ETIMEDOUT' }));
    }, timeoutMs);
    req.on('socket', (s) => {
      s.once(u.protocol === 'https:' ? 'secureConnect' : 'connect', () => { connected = true; });
    });
    req.on('error', fail);
    req.end(body);
  });
}
