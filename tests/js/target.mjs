// tests/js/target.mjs: the counting HTTP target of the
// integration tests, on 127.0.0.1 (an ephemeral port), in the test's own
// process.
//
//   const target = await startTarget();
//   target.url                      http://127.0.0.1:<port>
//   POST <url>/<path>[?delay_ms=N]  counts the request under its
//       Idempotency-Key header on arrival (so a request whose caller gave up
//       or was killed still counts), waits N ms (at most 10000), answers 200
//       {"received": <key>, "n": <count for that key>, "path": <path>}
//   target.count(key)               requests that carried that key (idem1-..., unquoted)
//   target.countPath(path)          requests to that path, with a key or not
//   target.total()                  every request
//   await target.close()
import http from 'node:http';

export async function startTarget() {
  const keys = new Map();
  const paths = new Map();
  let total = 0;
  const server = http.createServer((req, res) => {
    const url = new URL(req.url, 'http://127.0.0.1');
    // the key as sent: an RFC 8941 sf-string, "idem1-..."; counted without the quotes
    const raw = req.headers['idempotency-key'] || '';
    const key = /^"[A-Za-z0-9_-]+"$/.test(raw) ? raw.slice(1, -1) : raw;
    total += 1;
    keys.set(key, (keys.get(key) || 0) + 1);
    paths.set(url.pathname, (paths.get(url.pathname) || 0) + 1);
    const n = keys.get(key);
    const delay = Math.min(Number(url.searchParams.get('delay_ms') || 0), 10000);
    req.resume();
    const answer = () => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ received: key, n, path: url.pathname }));
    };
    if (delay > 0) setTimeout(answer, delay); else answer();
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    count: (key) => keys.get(key) || 0,
    countPath: (p) => paths.get(p) || 0,
    total: () => total,
    close: () => new Promise((resolve) => { server.closeAllConnections(); server.close(resolve); }),
  };
}
