"""sqlite-idempotency serve FILE: a read-only page of the ledger for people (docs/operating.md,
"The page"). The Node package's serve.js is the same server: the same page (serve.html, byte for
byte), endpoints, answers and refusals.

    GET /             serve.html: one file, its style and script inline
    GET /api/status   status FILE --json
    GET /api/list     list FILE --json, its options as parameters (status, tool, tenant, target,
                      older-than, text, limit)
    GET /api/show     show FILE KEY --json (key, tenant)

Read-only by construction: every answer is a read command's output (the file opened read-only, as
the command opens it), and the server has no other path; any method but GET and HEAD is refused
(405). Bound to 127.0.0.1 unless --host names another address, and then only with --token: every
request must carry it (``Authorization: Bearer T``, or ``?token=T``, which the page moves into the
header). Without a token, a request whose Host is not this loopback address is refused (421), so a
web page elsewhere cannot read the ledger through DNS rebinding.
"""
from __future__ import annotations

import functools
import hmac
import http.server
import json
import os
import re
import signal
import socket
import sys
import threading
import urllib.parse
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from .state import CommandError

_HERE = os.path.dirname(os.path.abspath(__file__))
# the page: the package's copy (make dist puts it there), else the Node package's in the source tree
PATHS = (os.path.join(_HERE, "serve.html"), os.path.join(_HERE, "..", "..", "node", "serve.html"))
DEFAULT_PORT = 8765
_LOOPBACK = ("127.0.0.1", "localhost", "::1")
_TOKEN = re.compile(r"[\x21-\x7e]{16,256}")
_ROUTES: Dict[str, Tuple[str, Tuple[str, ...]]] = {
    "/api/status": ("status", ()),
    "/api/list": ("list", ("status", "tool", "tenant", "target", "older-than", "text", "limit")),
    "/api/show": ("show", ("key", "tenant")),
}
_CSP = ("default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; "
        "img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
_HEADERS = {"cache-control": "no-store", "x-content-type-options": "nosniff", "referrer-policy": "no-referrer"}
_JSON = "application/json; charset=utf-8"

Run = Callable[[Sequence[str]], Tuple[str, int]]


@functools.lru_cache(maxsize=1)
def page() -> bytes:
    """serve.html, as the Node package ships it (read once, as serve.js reads it)."""
    for p in PATHS:
        if os.path.exists(p):
            with open(p, "rb") as f:
                return f.read()
    raise FileNotFoundError(f"sqlite_idempotency: serve.html is in neither {PATHS[0]} nor {PATHS[1]}")


def options(a: Any) -> Dict[str, Any]:
    """The options of serve, checked: host, port, token, ledger."""
    host = a.opts.get("--host", "127.0.0.1")
    port_text = a.opts.get("--port", str(DEFAULT_PORT))
    if not re.fullmatch(r"[0-9]{1,5}", port_text) or int(port_text) > 65535:
        raise CommandError(f"sqlite-idempotency: --port must be an integer from 0 to 65535 (0: any free port), "
                           f"got \"{port_text}\"", 64)
    token = a.opts.get("--token")
    if token is not None and not _TOKEN.fullmatch(token):
        raise CommandError(f"sqlite-idempotency: --token must be 16 to 256 printable ASCII characters without "
                           f"spaces, got {len(token)} characters", 64)
    if host not in _LOOPBACK and token is None:
        raise CommandError(f"sqlite-idempotency: serve --host {host} needs --token T: the page shows every call's "
                           f"arguments and results to whoever reaches the port, so another address than 127.0.0.1 "
                           f"requires a bearer token", 64)
    return {"host": host, "port": int(port_text), "token": token, "ledger": a.opts.get("--ledger")}


def _dumps(v: Any) -> str:
    # as JSON.stringify writes it: compact, non-ASCII as it is
    return json.dumps(v, separators=(",", ":"), ensure_ascii=False) + "\n"


def answer(method: str, target: str, headers: Any, o: Dict[str, Any], file: str, run: Run,
           port: int) -> Tuple[int, Dict[str, str], bytes]:
    """The answer to one request: status, headers, body."""
    def js(code: int, v: Any) -> Tuple[int, Dict[str, str], bytes]:
        return code, {"content-type": _JSON}, _dumps(v).encode()

    if method not in ("GET", "HEAD"):
        return (405, {"allow": "GET, HEAD", "content-type": _JSON},
                _dumps({"error": f"serve is read-only: {method} is not allowed (GET and HEAD are)"}).encode())
    url = urllib.parse.urlsplit(target)
    query = urllib.parse.parse_qsl(url.query, keep_blank_values=True)
    if o["token"] is None:
        hosts = [f"[{h}]:{port}" if ":" in h else f"{h}:{port}" for h in _LOOPBACK]
        host = headers.get("host") or ""
        if host not in hosts:
            return js(421, {"error": f"serve answers only Host {', '.join(hosts)}; got {json.dumps(host)}"})
    else:
        auth = headers.get("authorization") or ""
        given = auth[7:] if auth.startswith("Bearer ") else dict(query).get("token", "")
        if not hmac.compare_digest(given.encode(), o["token"].encode()):
            return js(401, {"error": "serve needs its token: Authorization: Bearer T, or ?token=T on the page"})
    path = urllib.parse.unquote(url.path)
    if path == "/":
        return 200, {"content-type": "text/html; charset=utf-8", "content-security-policy": _CSP}, page()
    if path not in _ROUTES:
        return js(404, {"error": f"no such page: {path}"})
    command, params = _ROUTES[path]
    argv: List[str] = [command, file]
    for k, v in query:
        if k == "token":
            continue
        if k not in params:
            return js(400, {"error": f"{path} takes {', '.join(params) if params else 'no parameters'}; got \"{k}\""})
        if k != "key":
            argv += [f"--{k}", v]
    if command == "show":
        key = dict(query).get("key")
        if key is None:
            return js(400, {"error": "/api/show needs key"})
        argv.insert(2, key)
    if o["ledger"] is not None:
        argv += ["--ledger", o["ledger"]]
    try:
        text, code = run(argv)
    except CommandError as e:
        return js(400 if e.status == 64 else 422, {"error": str(e), "exit_status": e.status})
    except Exception as e:  # the package's own errors
        return js(422, {"error": f"sqlite-idempotency: {e}", "exit_status": 2})
    return 200, {"content-type": _JSON, "x-exit-status": str(code)}, text.encode()


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True


def serve(a: Any, run: Run) -> int:
    """Serves until SIGINT or SIGTERM; prints the URL as the first line on stdout. Returns 0."""
    o = options(a)
    file = a.pos[0]
    run(["status", file] + ([] if o["ledger"] is None else ["--ledger", o["ledger"]]))  # opens, or says why
    page()

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _one(self) -> None:
            try:
                code, headers, body = answer(self.command, self.path, self.headers, o, file, run,
                                             self.server.server_address[1])
            except Exception as e:  # never a traceback page
                code, headers, body = 500, {"content-type": _JSON}, _dumps({"error": f"sqlite-idempotency: {e}"}).encode()
            self.send_response(code)
            for k, v in {**_HEADERS, **headers, "content-length": str(len(body))}.items():
                self.send_header(k, v)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        do_GET = do_HEAD = do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _one

        def log_message(self, format: str, *args: Any) -> None:  # quiet, as the Node server is
            pass

    family = socket.AF_INET6 if ":" in o["host"] else socket.AF_INET
    _Server.address_family = family
    try:
        server = _Server((o["host"], o["port"]), Handler)
    except OSError as e:
        raise CommandError(f"sqlite-idempotency: serve cannot listen on {o['host']}:{o['port']}: {e.strerror}") from None
    port = server.server_address[1]
    shown = f"[{o['host']}]" if ":" in o["host"] else o["host"]
    sys.stdout.write(f"http://{shown}:{port}/\n")
    sys.stdout.write(f"serving {file} read-only{'' if o['token'] is None else ' (bearer token required)'}; "
                     f"Ctrl-C stops it\n")
    sys.stdout.flush()

    def stop(signum: int, frame: Any) -> None:
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    try:
        server.serve_forever()
    finally:
        server.server_close()
    return 0


__all__ = ["serve", "options", "answer", "page", "DEFAULT_PORT", "PATHS"]
