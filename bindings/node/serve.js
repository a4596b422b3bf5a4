'use strict';
// sqlite-idempotency serve FILE: a read-only page of the ledger for people
// (docs/operating.md, "The page"). The Python package's serve.py is the
// same server: the same page (serve.html, byte for byte), endpoints,
// answers and refusals.
//
//   GET /             serve.html: one file, its style and script inline
//   GET /api/status   status FILE --json
//   GET /api/list     list FILE --json, its options as parameters (status,
//                     tool, tenant, target, older-than, text, limit)
//   GET /api/show     show FILE KEY --json (key, tenant)
//
// Read-only by construction: every answer is a read command's output (the
// file opened read-only, as the command opens it), and the server has no
// other path; any method but GET and HEAD is refused (405). Bound to
// 127.0.0.1 unless --host names another address, and then only with
// --token: every request must carry it (Authorization: Bearer T, or
// ?token=T, which the page moves into the header). Without a token, a
// request whose Host is not this loopback address is refused (421), so a
// web page elsewhere cannot read the ledger through DNS rebinding.
const fs = require('node:fs');
const http = require('node:http');
const path = require('node:path');
const crypto = require('node:crypto');
const { CommandError } = require('./state.js');

const PAGE = fs.readFileSync(path.join(__dirname, 'serve.html'));
const DEFAULT_PORT = 8765;
const LOOPBACK = ['127.0.0.1', 'localhost', '::1'];
const TOKEN = /^[\x21-\x7e]{16,256}$/;
const ROUTES = {
  '/api/status': { command: 'status', params: [] },
  '/api/list': { command: 'list', params: ['status', 'tool', 'tenant', 'target', 'older-than', 'text', 'limit'] },
  '/api/show': { command: 'show', params: ['key', 'tenant'] },
};
const CSP = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";
const HEADERS = { 'cache-control': 'no-store', 'x-content-type-options': 'nosniff', 'referrer-policy': 'no-referrer' };

// The options of serve, checked: { host, port, token, ledger }.
function options(a) {
  const host = a.opts['--host'] ?? '127.0.0.1';
  const portText = a.opts['--port'] ?? String(DEFAULT_PORT);
  if (!/^[0-9]{1,5}$/.test(portText) || Number(portText) > 65535) {
    throw new CommandError(`sqlite-idempotency: --port must be an integer from 0 to 65535 (0: any free port), got "${portText}"`, 64);
  }
  const token = a.opts['--token'];
  if (token !== undefined && !TOKEN.test(token)) {
    throw new CommandError(`sqlite-idempotency: --token must be 16 to 256 printable ASCII characters without spaces, got ${[...token].length} characters`, 64);
  }
  if (!LOOPBACK.includes(host) && token === undefined) {
    throw new CommandError(`sqlite-idempotency: serve --host ${host} needs --token T: the page shows every call's arguments and results to whoever reaches the port, so another address than 127.0.0.1 requires a bearer token`, 64);
  }
  return { host, port: Number(portText), token, ledger: a.opts['--ledger'] };
}

// The answer to one request: [status, headers, body].
function answer(req, o, file, run, port) {
  const json = (code, v) => [code, { 'content-type': 'application/json; charset=utf-8' }, `${JSON.stringify(v)}\n`];
  const url = new URL(req.url, 'http://x');
  if (req.method !== 'GET' && req.method !== 'HEAD') return [405, { allow: 'GET, HEAD', 'content-type': 'application/json; charset=utf-8' }, `${JSON.stringify({ error: `serve is read-only: ${req.method} is not allowed (GET and HEAD are)` })}\n`];
  if (o.token === undefined) {
    const hosts = LOOPBACK.map((h) => (h.includes(':') ? `[${h}]:${port}` : `${h}:${port}`));
    if (!hosts.includes(req.headers.host || '')) return json(421, { error: `serve answers only Host ${hosts.join(', ')}; got ${JSON.stringify(req.headers.host || '')}` });
  } else {
    const given = (req.headers.authorization || '').startsWith('Bearer ') ? req.headers.authorization.slice(7) : url.searchParams.get('token');
    const a = Buffer.from(String(given ?? ''));
    const b = Buffer.from(o.token);
    if (!(a.length === b.length && crypto.timingSafeEqual(a, b))) return json(401, { error: 'serve needs its token: Authorization: Bearer T, or ?token=T on the page' });
  }
  if (url.pathname === '/') return [200, { 'content-type': 'text/html; charset=utf-8', 'content-security-policy': CSP }, PAGE];
  const route = ROUTES[url.pathname];
  if (!route) return json(404, { error: `no such page: ${url.pathname}` });
  const argv = [route.command, file];
  for (const [k, v] of url.searchParams) {
    if (k === 'token') continue;
    if (!route.params.includes(k)) return json(400, { error: `${url.pathname} takes ${route.params.length ? route.params.join(', ') : 'no parameters'}; got "${k}"` });
    if (k !== 'key') argv.push(`--${k}`, v);
  }
  if (route.command === 'show') {
    const key = url.searchParams.get('key');
    if (key === null) return json(400, { error: '/api/show needs key' });
    argv.splice(2, 0, key);
  }
  if (o.ledger !== undefined) argv.push('--ledger', o.ledger);
  try {
    const { text, code } = run(argv);
    return [200, { 'content-type': 'application/json; charset=utf-8', 'x-exit-status': String(code) }, text];
  } catch (e) {
    const code = e instanceof CommandError ? e.status : 2;
    return json(code === 64 ? 400 : 422, { error: e instanceof CommandError ? e.message : `sqlite-idempotency: ${e.message}`, exit_status: code });
  }
}

// Starts the server; prints its URL as the first line on stdout. Returns
// undefined: the process runs until SIGINT or SIGTERM closes it.
function serve(a, { stdout, stderr, run }) {
  const o = options(a);
  const file = a.pos[0];
  const first = ['status', file, ...(o.ledger === undefined ? [] : ['--ledger', o.ledger])];
  run(first); // the file opens and holds a ledger, or the CommandError says why
  const server = http.createServer((req, res) => {
    let out;
    try {
      out = answer(req, o, file, run, server.address().port);
    } catch (e) {
      out = [500, { 'content-type': 'application/json; charset=utf-8' }, `${JSON.stringify({ error: `sqlite-idempotency: ${e.message}` })}\n`];
    }
    const [code, headers, body] = out;
    res.writeHead(code, { ...HEADERS, ...headers, 'content-length': Buffer.byteLength(body) });
    res.end(req.method === 'HEAD' ? undefined : body);
  });
  server.on('error', (e) => {
    stderr.write(`sqlite-idempotency: serve cannot listen on ${o.host}:${o.port}: ${e.message}\n`);
    process.exitCode = 2;
  });
  server.listen(o.port, o.host, () => {
    const { port } = server.address();
    const shown = o.host.includes(':') ? `[${o.host}]` : o.host;
    stdout.write(`http://${shown}:${port}/\n`);
    stdout.write(`serving ${file} read-only${o.token === undefined ? '' : ' (bearer token required)'}; Ctrl-C stops it\n`);
  });
  const stop = () => {
    server.close(() => { process.exitCode = 0; });
    server.closeAllConnections();
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  return undefined;
}

module.exports = { serve, options, DEFAULT_PORT };
