// An HTTP tool-call adapter over the sqlite-idempotency npm package.
//
//   npm install sqlite-idempotency better-sqlite3     (the tarball of `make dist`)
//   import Database from 'better-sqlite3';             // or libsql, or node:sqlite
//   import { IdemAdapter } from './idem_adapter.mjs';
//   const idem = IdemAdapter.open(new Database('agent.db'));
//   const out = await idem.callHttpTool(tenant, conversation, 'send_email', { to: 'a@b.c' },
//                                       'https://mail.example/send', { timeoutMs: 5000 });
//
// The claim, the commit check, the renewal before sending, settling and
// replaying are the package's Ledger.call; this file only says what an HTTP
// exchange means (docs/ledger.md, "The adapter pattern"):
//
// * the connection could not be made (refused, unreachable, connect
//   timeout): nothing was sent: throw NotSent (released with
//   {"sent": false}; a retry is admitted again);
// * 2xx: the result is the response body (JSON, else {text});
// * 4xx: the target answered and refused: throw ToolFailed({status, body})
//   (settled failed; retries replay that failure);
// * any other status, a timeout or an error after the connection was made:
//   the target may have acted: throw OutcomeUnknown (settled unknown, never
//   retried: reconcile with the target, then resolve).
//
// The tenant must come from trusted authentication, never from the model.
import http from 'node:http';
import https from 'node:https';
import { Ledger, NotSent, OutcomeUnknown, ToolFailed } from 'sqlite-idempotency';

// POSTs args as JSON to url; resolves to the answer's JSON, or throws as above.
export async function postJson(url, args, headers, timeoutMs) {
  let res;
  try {
    res = await post(url, JSON.stringify(args), headers, timeoutMs);
  } catch (e) {
    if (!e.connected) throw new NotSent(`connect: ${e.timedOut ? 'timeout' : e.code || e.message}`);
    if (e.timedOut) throw new OutcomeUnknown('timeout', { detail: { reason: 'timeout', timeout_ms: timeoutMs } });
    throw new OutcomeUnknown(`${e.code || e.name}: ${e.message}`);
  }
  let payload;
  try {
    payload = JSON.parse(res.body);
  } catch {
    payload = { text: res.body };
  }
  if (res.status >= 200 && res.status < 300) return payload;
  if (res.status >= 400 && res.status < 500) throw new ToolFailed({ status: res.status, body: payload });
  throw new OutcomeUnknown(`http ${res.status}`, { detail: { reason: `http ${res.status}`, body: payload } });
}

export class IdemAdapter {
  constructor(ledger) {
    this.ledger = ledger;
  }

  // db: a better-sqlite3, libsql or node:sqlite connection (Ledger.open
  // loads the extension and sets WAL, synchronous=FULL, busy_timeout).
  static open(db, options) {
    return new IdemAdapter(Ledger.open(db, options));
  }

  close() {
    this.ledger.close();
  }

  // Runs the tool call at most once; resolves to the package's Outcome.
  // waitMs: how long to wait while another caller holds the key.
  callHttpTool(tenant, conversation, tool, args, url, { timeoutMs = 5000, waitMs = 0 } = {}) {
    return this.ledger.call(tenant, conversation, tool, args,
      (attempt) => postJson(url, args, attempt.headers, timeoutMs), { waitMs });
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
