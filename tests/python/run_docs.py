#!/usr/bin/env python3
"""Runs every example of README.md and docs/*.md, as a reader would paste it.

    run_docs.py [--no-python REASON] [--no-js REASON] [--show] [PAGE...]

The rules (docs/design.md, "How the docs' examples are run", says the same
for authors):

- A page's blocks run in order, in one fresh temporary directory per page
  holding `build/idempotency.so` (the extension under test) and `sql/` (the
  repository's kit), so that `.load build/idempotency` resolves as it does
  from the repository's top.
- ```sql blocks are sqlite3 shell transcripts: `sqlite> ` input lines,
  `   ...> ` continuations, then the exact output. All the SQL blocks of a
  page share one `sqlite3 -interactive` session (the system shell, as a
  user runs it: its readline echoes each line after its prompt). Each input
  line and its continuations are fed as one unit; the runner waits for the
  next prompt before the next unit, so the unit's stdout and stderr (errors,
  placed after its rows) keep their order.
- ```python blocks are complete programs, run with /usr/bin/python3 and the
  package importable as `sqlite_idempotency`; ```js blocks are ES modules,
  run with node, `sqlite-idempotency` and `better-sqlite3` resolvable as
  packages. A program passes when it exits 0; a block fenced ```text right
  after it, marked `<!-- output -->` on the line before its fence, is the
  program's exact stdout.
- ```sh / ```console blocks are `$ command` lines (a trailing `\\`
  continues one), each followed by its exact output (stdout and stderr).
- A block marked `<!-- norun -->` on the line before its fence is skipped
  and counted. One marked `<!-- run by tests/suites/NN-x.sh -->` is run by
  that suite (which must exist and name the page) and counted as such. Any other sql, python, js or sh block must run: a sql block
  that is no transcript, or a sh block without `$ `, is a failure. Blocks of
  other languages (json, c, go, text, none) are displays and not run.
- Values that differ on every run are matched, not compared: a token (32
  hex digits whose first 8 are 0: the row id and 64 random bits) must have
  the same row id, and the random half stands for the same random half
  wherever it appears on the page; a time (a 13-digit integer, Unix ms)
  stands for the same time wherever it appears on the page.
- Programs that send find the target in $MAIL_URL: the runner serves a
  local counting HTTP target there (any POST path; the answer is
  {"message_id": "m-N"}, N counting the distinct Idempotency-Keys the
  program sent; `?status=S` answers status S instead). A key that reaches
  it twice from one program is a failure of the block.

Prints `PASS docs.<page> (...)` per page that passed, saying how many
blocks ran and how many were skipped, `FAIL docs.<page>:<line>: why` per
failing block, and `SKIP docs.<page>.<lang>: why` for a runtime that is
absent. --show prints what each sql block actually printed, for authors.
"""
import fcntl
import glob
import json
import os
import re
import select
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
EXT = os.path.abspath(os.environ.get("EXT") or os.path.join(ROOT, "build", "idempotency.so"))
PY = "/usr/bin/python3"
PROMPT, CONT = "sqlite> ", "   ...> "
UNIT_TIMEOUT = 15.0
PROGRAM_TIMEOUT = 60
RUNNABLE = {"sql": "sql", "python": "python", "py": "python", "js": "js", "javascript": "js",
            "mjs": "js", "sh": "sh", "shell": "sh", "console": "sh", "bash": "sh"}


# --- the counting target ---------------------------------------------------------

class Target(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), Handler)
        self.lock = threading.Lock()
        self.keys = {}

    def reset(self):
        with self.lock:
            self.keys = {}


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(n)
        key = self.headers.get("Idempotency-Key") or "(none)"
        with self.server.lock:
            self.server.keys[key] = self.server.keys.get(key, 0) + 1
            number = list(self.server.keys).index(key) + 1
        m = re.search(r"[?&]status=(\d{3})", self.path)
        status = int(m.group(1)) if m else 200
        body = json.dumps({"message_id": f"m-{number}"} if status < 400 else
                          {"error": f"status {status}"}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


# --- pages and blocks ------------------------------------------------------------

class Block:
    def __init__(self, lang, info, line, text, norun, output_marked):
        self.lang, self.info, self.line, self.text = lang, info, line, text
        self.norun, self.output_marked = norun, output_marked
        self.output = None  # the expected output block of a program


FENCE = re.compile(r"^(\s*)(```+)\s*([\w+-]*)\s*$")


# A block run by another suite (the packages suite runs the release's
# commands, which need make and the whole tree): counted here once that
# suite is found to name this page.
RUN_BY = re.compile(r"^<!-- run by (tests/suites/[\w.-]+\.sh) -->$")


def parse(path):
    """The fenced blocks of a page, with the line of their opening fence."""
    lines = open(path, encoding="utf-8").read().split("\n")
    blocks, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, info = len(m.group(1)), m.group(2), m.group(3).lower()
        before = lines[i - 1].strip() if i > 0 else ""
        start, body = i + 1, []
        i += 1
        while i < len(lines) and not re.match(r"^\s*" + fence + r"\s*$", lines[i]):
            body.append(lines[i][indent:] if lines[i][:indent].strip() == "" else lines[i])
            i += 1
        i += 1
        blocks.append(Block(RUNNABLE.get(info), info, start, "\n".join(body),
                            before == "<!-- norun -->", before == "<!-- output -->"))
        m2 = RUN_BY.match(before)
        blocks[-1].run_by = m2.group(1) if m2 else None
    # an output block belongs to the program just before it
    for a, b in zip(blocks, blocks[1:]):
        if b.output_marked and a.lang in ("python", "js"):
            a.output = b
    return blocks


# --- matching what differs on every run ----------------------------------------------

VOLATILE = re.compile(r"\b(0{8}[0-9a-f]{8})([0-9a-f]{16})\b|\b(1\d{12})\b")


class Volatile:
    """The page's bindings of printed tokens and times to the actual ones."""

    def __init__(self):
        self.rand, self.rand_back, self.times = {}, {}, {}

    def _bind(self, table, back, want, got):
        if want in table:
            return table[want] == got
        if back is not None:
            if got in back:
                return False
            back[got] = want
        table[want] = got
        return True

    def line_matches(self, want, got):
        wp, gp = VOLATILE.split(want), VOLATILE.split(got)
        if len(wp) != len(gp):
            return False
        # split() yields text, id, random, time, text, ...
        for k in range(0, len(wp), 4):
            if wp[k] != gp[k]:
                return False
            if k + 3 >= len(wp):
                break
            wid, wrand, wtime = wp[k + 1], wp[k + 2], wp[k + 3]
            gid, grand, gtime = gp[k + 1], gp[k + 2], gp[k + 3]
            if (wid is None) != (gid is None):
                return False
            if wid is not None:
                if wid != gid or not self._bind(self.rand, self.rand_back, wrand, grand):
                    return False
            elif not self._bind(self.times, None, wtime, gtime):
                return False
        return True

    def difference(self, want, got):
        """None when got matches want, else the first differing line, described."""
        wl, gl = want.split("\n"), got.split("\n")
        for n in range(max(len(wl), len(gl))):
            w = wl[n] if n < len(wl) else None
            g = gl[n] if n < len(gl) else None
            if w is None or g is None or not self.line_matches(w, g):
                return (f"line {n + 1} of the output differs:\n      docs: "
                        f"{'(nothing)' if w is None else w!r}\n    actual: {'(nothing)' if g is None else g!r}")
        return None


# --- the sqlite3 session of a page ---------------------------------------------------

class Shell:
    def __init__(self, cwd, env):
        self.proc = subprocess.Popen(["sqlite3", "-interactive"], cwd=cwd, env=env, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for f in (self.proc.stdout, self.proc.stderr):
            fl = fcntl.fcntl(f, fcntl.F_GETFL)
            fcntl.fcntl(f, fcntl.F_SETFL, fl | os.O_NONBLOCK)
        self._read_until_prompt()  # the banner and the first prompt

    def _read_until_prompt(self):
        out, deadline = b"", time.monotonic() + UNIT_TIMEOUT
        while not out.endswith(PROMPT.encode()):
            left = deadline - time.monotonic()
            if left <= 0 or self.proc.poll() is not None:
                raise TimeoutError(out.decode(errors="replace"))
            r, _, _ = select.select([self.proc.stdout], [], [], left)
            if r:
                chunk = os.read(self.proc.stdout.fileno(), 65536)
                if not chunk:
                    raise TimeoutError(out.decode(errors="replace"))
                out += chunk
        return out[:-len(PROMPT)].decode(errors="replace")

    def _stderr(self):
        try:
            return (os.read(self.proc.stderr.fileno(), 1 << 20) or b"").decode(errors="replace")
        except BlockingIOError:
            return ""

    def run(self, lines):
        """Feeds one unit (a line and its continuations); returns what the user sees after the prompt."""
        self.proc.stdin.write(("\n".join(lines) + "\n").encode())
        self.proc.stdin.flush()
        out = self._read_until_prompt()
        err = self._stderr()
        echo = lines[0] + "\n" + "".join(CONT + l + "\n" for l in lines[1:])
        if out.startswith(echo):
            return echo + out[len(echo):] + err
        return out + err

    def close(self):
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=5)
        except Exception:
            self.proc.kill()


def transcript_units(text):
    """[(input lines, the transcript text of the unit)] of a sqlite3 transcript."""
    units, lines = [], text.split("\n")
    while lines and lines[-1] == "":
        lines.pop()
    i = 0
    while i < len(lines) and not lines[i].startswith(PROMPT):
        i += 1
    if i:
        return None
    while i < len(lines):
        inp, j = [lines[i][len(PROMPT):]], i + 1
        while j < len(lines) and lines[j].startswith(CONT):
            inp.append(lines[j][len(CONT):])
            j += 1
        k = j
        while k < len(lines) and not lines[k].startswith(PROMPT):
            k += 1
        units.append((inp, "\n".join(lines[i:k]) + "\n"))
        i = k
    return units


# --- running a page ---------------------------------------------------------------

def stage(tmp):
    """The packages as a user has them: sqlite_idempotency on PYTHONPATH, npm packages in node_modules."""
    py = os.path.join(tmp, "py")
    shutil.copytree(os.path.join(ROOT, "bindings", "python", "sqlite_idempotency"),
                    os.path.join(py, "sqlite_idempotency"), ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(EXT, os.path.join(py, "sqlite_idempotency", "idempotency.so"))
    shutil.copy(os.path.join(ROOT, "bindings", "node", "words.json"), os.path.join(py, "sqlite_idempotency"))  # as make dist does
    nm = os.path.join(tmp, "node_modules")
    pkg = os.path.join(nm, "sqlite-idempotency")
    shutil.copytree(os.path.join(ROOT, "bindings", "node"), pkg)
    plat = subprocess.run(["node", "-p", "process.platform + '-' + process.arch"], capture_output=True,
                          text=True).stdout.strip() if shutil.which("node") else "none"
    # the library is in the platform's own package, as npm installs it (an
    # optional dependency of sqlite-idempotency, docs/install.md)
    version = json.load(open(os.path.join(pkg, "package.json"), encoding="utf-8"))["version"]
    ppkg = os.path.join(nm, "sqlite-idempotency-" + plat)
    os.makedirs(ppkg)
    with open(os.path.join(ppkg, "package.json"), "w", encoding="utf-8") as f:
        json.dump({"name": "sqlite-idempotency-" + plat, "version": version}, f)
    shutil.copy(EXT, os.path.join(ppkg, "idempotency.so"))
    bs3 = os.path.join(ROOT, "tests", "js", "node_modules", "better-sqlite3")
    if os.path.isdir(bs3):
        os.symlink(bs3, os.path.join(nm, "better-sqlite3"))
    return py


def page_dir(tmp, page):
    d = os.path.join(tmp, "pages", re.sub(r"[^A-Za-z0-9_.-]", "_", page))
    os.makedirs(os.path.join(d, "build"))
    os.symlink(EXT, os.path.join(d, "build", "idempotency.so"))
    os.symlink(os.path.join(ROOT, "sql"), os.path.join(d, "sql"))
    return d


def shell_commands(text):
    """[(command, expected output)] of a `$ command` block, or None when it has none."""
    lines = text.split("\n")
    while lines and lines[-1] == "":
        lines.pop()
    if not lines or not lines[0].startswith("$ "):
        return None
    cmds, i = [], 0
    while i < len(lines):
        cmd = lines[i][2:]
        while cmd.endswith("\\") and i + 1 < len(lines):
            i += 1
            cmd = cmd[:-1] + "\n" + lines[i]
        i += 1
        out = []
        while i < len(lines) and not lines[i].startswith("$ "):
            out.append(lines[i])
            i += 1
        cmds.append((cmd, "\n".join(out) + ("\n" if out else "")))
    return cmds


def slug(heading):
    """The anchor GitHub gives a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", ""))
    return text.replace(" ", "-")


def anchors(path):
    text = re.sub(r"```.*?```", "", open(path, encoding="utf-8").read(), flags=re.S)
    return {slug(m.group(1)) for m in re.finditer(r"^#+ (.*)$", text, flags=re.M)}


def broken_links(path):
    """[(line, link, why)] of the page's relative links whose file or heading does not exist."""
    out = []
    text = open(path, encoding="utf-8").read()
    text = re.sub(r"```.*?```", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    for n, line in enumerate(text.split("\n"), 1):
        for m in re.finditer(r"\]\(([^)\s]+)\)", line):
            link = m.group(1)
            if re.match(r"[a-z]+:", link):
                continue
            file, _, anchor = link.partition("#")
            target = os.path.normpath(os.path.join(os.path.dirname(path), file)) if file else path
            if not os.path.exists(target):
                out.append((n, link, f"{file} does not exist"))
            elif anchor and target.endswith(".md") and anchor not in anchors(target):
                out.append((n, link, f"{os.path.basename(target)} has no heading #{anchor}"))
    return out


def run_program(argv, cwd, env):
    try:
        p = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=PROGRAM_TIMEOUT)
    except subprocess.TimeoutExpired:
        return None, "", f"did not finish within {PROGRAM_TIMEOUT} s"
    return p.returncode, p.stdout, p.stderr


def tail(text, n=12):
    lines = [l for l in text.rstrip("\n").split("\n") if l != ""]
    return "\n      ".join(lines[-n:])


def run_page(page, tmp, py_path, target, absent, show):
    path = os.path.join(ROOT, page)
    blocks = parse(path)
    cwd = page_dir(tmp, page)
    env = dict(os.environ, HOME=cwd, INPUTRC="/dev/null", PYTHONPATH=py_path, PYTHONDONTWRITEBYTECODE="1",
               MAIL_URL=f"http://127.0.0.1:{target.server_address[1]}/send", SQLITE_HISTORY=os.devnull)
    env.pop("NODE_OPTIONS", None)
    vol = Volatile()
    label = page[len("docs/"):] if page.startswith("docs/") else page
    shell = None
    ran, skipped, elsewhere, failures, absent_langs = {}, 0, 0, [], {}

    def fail(block, why):
        failures.append(f"FAIL docs.{label}:{block.line}: {why}")

    for b in blocks:
        if b.lang is None:
            continue
        if b.norun:
            skipped += 1
            continue
        if b.run_by:
            suite = os.path.join(ROOT, b.run_by)
            if not os.path.isfile(suite) or os.path.basename(page) not in open(suite, encoding="utf-8").read():
                fail(b, f"marked as run by {b.run_by}, which does not exist or never names {os.path.basename(page)}")
            else:
                elsewhere += 1
            continue
        if b.lang in absent:
            absent_langs[b.lang] = absent_langs.get(b.lang, 0) + 1
            continue
        ran[b.lang] = ran.get(b.lang, 0) + 1
        if b.lang == "sql":
            units = transcript_units(b.text)
            if not units:
                fail(b, "a sql block that is not a sqlite3 transcript (its first line must start with "
                        "'sqlite> '); make it one, or mark it <!-- norun -->")
                continue
            if shell is None:
                shell = Shell(cwd, env)
            actual = []
            for inp, want in units:
                try:
                    got = PROMPT + shell.run(inp)
                except TimeoutError as e:
                    got = PROMPT + str(e)
                    actual.append(got)
                    fail(b, f"the shell did not come back within {UNIT_TIMEOUT:.0f} s after {inp[0]!r} "
                            f"(an unfinished statement?); it printed {got!r}")
                    shell.close()
                    shell = None
                    break
                actual.append(got)
                why = vol.difference(want, got)
                if why is not None:
                    fail(b, f"after {inp[0]!r}: {why}")
                    break
            if show:
                print(f"--- {page}:{b.line} (sql, actual)\n" + "".join(actual), end="")
        elif b.lang in ("python", "js"):
            name = os.path.join(cwd, f"block-{b.line}.{'py' if b.lang == 'python' else 'mjs'}")
            with open(name, "w", encoding="utf-8") as f:
                f.write(b.text + "\n")
            argv = [PY, name] if b.lang == "python" else ["node", name]
            target.reset()
            rc, out, err = run_program(argv, cwd, env)
            for key, n in sorted(target.keys.items()):
                if n > 1:
                    fail(b, f"the target received Idempotency-Key {key} {n} times")
            if show:
                print(f"--- {page}:{b.line} ({b.lang}, actual stdout)\n{out}", end="")
            if rc != 0:
                fail(b, f"the {b.lang} block " + ("exited with status %d" % rc if rc is not None else err) +
                        f":\n      {tail(err or out)}")
            elif b.output is not None:
                why = vol.difference(b.output.text.rstrip("\n") + "\n", out)
                if why is not None:
                    fail(b, f"its output (the block at line {b.output.line}): {why}")
        elif b.lang == "sh":
            cmds = shell_commands(b.text)
            if cmds is None:
                fail(b, "a sh block without '$ ' command lines; give each command its '$ ' and its output, "
                        "or mark it <!-- norun -->")
                continue
            for cmd, want in cmds:
                try:
                    p = subprocess.run(["bash", "-c", cmd], cwd=cwd, env=env, stdout=subprocess.PIPE,
                                       stderr=subprocess.STDOUT, text=True, timeout=PROGRAM_TIMEOUT)
                    got = p.stdout
                except subprocess.TimeoutExpired:
                    got = f"(did not finish within {PROGRAM_TIMEOUT} s)\n"
                if show:
                    print(f"--- {page}:{b.line} (sh, actual)\n$ {cmd}\n{got}", end="")
                why = vol.difference(want, got)
                if why is not None:
                    fail(b, f"after '$ {cmd}': {why}")
                    break
    if shell is not None:
        shell.close()
    for n, link, why in broken_links(path):
        failures.append(f"FAIL docs.{label}:{n}: the link ({link}) is broken: {why}")
    for lang, n in sorted(absent_langs.items()):
        print(f"SKIP docs.{label}.{lang}: {absent[lang]} ({n} block{'s' if n > 1 else ''} not run)")
    for line in failures:
        print(line)
    if not failures:
        total = sum(ran.values())
        kinds = ", ".join(f"{n} {lang}" for lang, n in sorted(ran.items()))
        print(f"PASS docs.{label} ({total} block{'' if total == 1 else 's'} ran{': ' + kinds if kinds else ''}; "
              f"{skipped} skipped: norun" + (f"; {elsewhere} run by another suite" if elsewhere else "") + ")")
    return not failures


def main(argv):
    absent, show, pages = {}, False, []
    i = 0
    while i < len(argv):
        if argv[i] in ("--no-python", "--no-js"):
            absent["python" if argv[i] == "--no-python" else "js"] = argv[i + 1]
            i += 2
        elif argv[i] == "--show":
            show = True
            i += 1
        else:
            pages.append(os.path.relpath(os.path.abspath(argv[i]), ROOT))
            i += 1
    if not pages:
        pages = ["README.md"] + sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "docs", "*.md")))
    if not os.path.isfile(EXT):
        print(f"FAIL docs: the extension {EXT} is not built (run make)")
        return 1
    if not shutil.which("sqlite3"):
        absent["sql"] = "the sqlite3 shell is not installed (Debian: apt-get install sqlite3)"
    target = Target()
    threading.Thread(target=target.serve_forever, daemon=True).start()
    tmp = tempfile.mkdtemp(prefix="idem-docs-")
    ok = True
    try:
        py_path = stage(tmp)
        for page in pages:
            ok = run_page(page, tmp, py_path, target, absent, show) and ok
    finally:
        target.shutdown()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
