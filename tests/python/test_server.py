#!/usr/bin/env python3
"""A local HTTP target for the adapter tests: it counts, per Idempotency-Key,
how many requests reached it.

Standard library only. Listens on 127.0.0.1 on an ephemeral port (port 0).

  POST /<anything>[?delay_ms=N][&status=S]
      Counts the request under its Idempotency-Key header (parsed as an
      RFC 8941 sf-string; a missing or malformed header is counted apart),
      then waits N ms (at most 10000; or the X-Test-Delay-Ms header) before
      answering, and answers status S (default 200) with a JSON body:
      {"received": <key>, "n": <count for that key>, "path": ..., "body": <request JSON>}.
      The count is taken on arrival, so a request whose client gave up
      (timed out) still counts as having reached the target.
  GET /_counts
      {"keys": {key: count}, "missing": n, "malformed": [raw header values]}
      (not counted itself).

As a module: `srv = start(); srv.port; srv.counts(); srv.stop()` (a daemon
thread). As a program: prints "PORT <n>" on stdout, then serves until its
stdin reaches end of file (the parent went away) or --max-seconds pass
(default 120), so it always stops by itself.
"""
import json
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

MAX_DELAY_MS = 10000
# RFC 8941 sString: DQUOTE *( unescaped / "\" ( DQUOTE / "\" ) ) DQUOTE, where
# unescaped is %x20-21 / %x23-5B / %x5D-7E.
SF_STRING = re.compile(r'"((?:[\x20\x21\x23-\x5b\x5d-\x7e]|\\["\\])*)"')


def parse_sf_string(value):
    """The decoded sf-string, or None when value is not exactly one."""
    m = SF_STRING.fullmatch(value)
    if not m:
        return None
    return re.sub(r'\\(["\\])', r"\1", m.group(1))


class Target(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), Handler)
        self.lock = threading.Lock()
        self.keys = {}
        self.missing = 0
        self.malformed = []

    @property
    def port(self):
        return self.server_address[1]

    def counts(self):
        with self.lock:
            return {"keys": dict(self.keys), "missing": self.missing,
                    "malformed": list(self.malformed)}

    def record(self, raw):
        """Counts one arrival; returns (key or None, count)."""
        with self.lock:
            if raw is None:
                self.missing += 1
                return None, self.missing
            key = parse_sf_string(raw)
            if key is None:
                self.malformed.append(raw)
                return None, len(self.malformed)
            self.keys[key] = self.keys.get(key, 0) + 1
            return key, self.keys[key]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "idem-test-target/1"

    def log_message(self, fmt, *args):  # quiet
        pass

    def reply(self, status, obj):
        body = json.dumps(obj).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(body)
        except OSError:
            pass  # the client gave up (timed out) before the answer
        self.close_connection = True

    def do_GET(self):
        if urlsplit(self.path).path == "/_counts":
            self.reply(200, self.server.counts())
        else:
            self.reply(404, {"error": "not found"})

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        raw_body = self.rfile.read(min(length, 1 << 20)) if length > 0 else b""
        key, n = self.server.record(self.headers.get("Idempotency-Key"))
        url = urlsplit(self.path)
        q = parse_qs(url.query)
        try:
            delay = int(q.get("delay_ms", [self.headers.get("X-Test-Delay-Ms") or 0])[0])
            status = int(q.get("status", [200])[0])
        except ValueError:
            self.reply(400, {"error": "bad delay_ms or status"})
            return
        if key is None:
            self.reply(400, {"error": "Idempotency-Key missing or not an sf-string"})
            return
        if delay > 0:
            time.sleep(min(delay, MAX_DELAY_MS) / 1000)
        try:
            body = json.loads(raw_body) if raw_body else None
        except ValueError:
            body = raw_body.decode("utf-8", "replace")
        self.reply(status, {"received": key, "n": n, "path": url.path, "body": body})


def start():
    """Starts a Target in a daemon thread; stop it with .stop()."""
    srv = Target()
    t = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    t.start()

    def stop():
        srv.shutdown()
        srv.server_close()
        t.join(5)

    srv.stop = stop
    return srv


def main(argv):
    max_seconds = 120.0
    if len(argv) == 3 and argv[1] == "--max-seconds":
        max_seconds = float(argv[2])
    elif len(argv) != 1:
        print(f"usage: {argv[0]} [--max-seconds N]", file=sys.stderr)
        return 2
    srv = start()
    print(f"PORT {srv.port}", flush=True)
    done = threading.Event()

    def watch_stdin():
        try:
            while sys.stdin.read(4096):
                pass
        except (OSError, ValueError):
            pass
        done.set()

    threading.Thread(target=watch_stdin, daemon=True).start()
    done.wait(max_seconds)
    srv.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
