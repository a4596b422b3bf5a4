// The counting target of make bench-peers: an HTTP server on 127.0.0.1 that
// counts the requests of each logical call and answers with the count.
//
//   POST /call/<id>[?delay=MS][&hold=1]   count one execution of call <id>;
//        answer {"id", "n", "body"} after MS ms (hold=1: only the first
//        request of <id> is held until the server stops, the later ones
//        answer at once)
//   GET  /count/<id>                      {"n": executions of <id>}
//   GET  /counts                          {"<id>": n, ...}
//   POST /reset                           forget every count
//
// Usage: node target.mjs PORTFILE  (writes the port it listens on)
import http from 'node:http';
import fs from 'node:fs';

const counts = new Map();
const held = [];
const server = http.createServer((req, res) => {
  const url = new URL(req.url, 'http://127.0.0.1');
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const answer = (code, value) => {
      res.writeHead(code, { 'content-type': 'application/json' });
      res.end(JSON.stringify(value));
    };
    const parts = url.pathname.split('/');
    if (req.method === 'POST' && parts[1] === 'call' && parts[2]) {
      const id = decodeURIComponent(parts[2]);
      const n = (counts.get(id) || 0) + 1;
      counts.set(id, n);
      const body = Buffer.concat(chunks).toString('utf8');
      if (url.searchParams.get('hold') === '1' && n === 1) {
        held.push(res);
        return;
      }
      const delay = Number(url.searchParams.get('delay') || 0);
      const send = () => answer(200, { id, n, body });
      if (delay > 0) setTimeout(send, delay);
      else send();
    } else if (req.method === 'GET' && parts[1] === 'count' && parts[2]) {
      answer(200, { n: counts.get(decodeURIComponent(parts[2])) || 0 });
    } else if (req.method === 'GET' && parts[1] === 'counts') {
      answer(200, Object.fromEntries(counts));
    } else if (req.method === 'POST' && parts[1] === 'reset') {
      counts.clear();
      answer(200, { ok: true });
    } else {
      answer(404, { error: `target: no route ${req.method} ${url.pathname}` });
    }
  });
});
server.keepAliveTimeout = 60000;
server.listen(0, '127.0.0.1', () => {
  fs.writeFileSync(process.argv[2], String(server.address().port));
});
process.on('SIGTERM', () => {
  for (const r of held) r.destroy();
  server.close(() => process.exit(0));
  setTimeout(() => process.exit(0), 500).unref();
});
