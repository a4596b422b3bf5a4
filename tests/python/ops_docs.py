#!/usr/bin/env python3
"""tests/python/ops_docs.py DOC SCRATCH NODE_PROJECT: runs every `$ ` command of DOC as written.

Each ```console block holds `$ command` lines, each followed by its exact
output (stdout and stderr as a terminal shows them). The blocks run in order
in one scratch directory holding agent.db (tests/fixtures/operating-docs.sql, fixed
times) and build/ (this tree's), with SQLITE_IDEMPOTENCY_NOW_MS fixed so ages
do not move: once with `sqlite-idempotency` the Python command
(python -m sqlite_idempotency), once the Node one (npx, in NODE_PROJECT).
A block after `<!-- norun -->` is skipped, and one after `<!-- run by
tests/suites/59-serve.sh -->` (serve runs until stopped: that suite runs it).
"""
import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from checks import Checks  # noqa: E402

doc, scratch, proj = sys.argv[1:4]
checks = Checks("ops.docs")
text = open(doc, encoding="utf-8").read()
blocks = []
for m in re.finditer(r"(<!-- (?:norun|run by tests/suites/59-serve.sh) -->\n)?```console\n(.*?)```", text, re.S):
    if m.group(1):
        continue
    cmds, cur = [], None
    for line in m.group(2).splitlines(keepends=True):
        if line.startswith("$ "):
            cur = [line[2:].rstrip("\n"), ""]
            cmds.append(cur)
        elif cur is not None:
            cur[1] += line
    blocks.extend(cmds)
checks.report(len(blocks) >= 10, "commands-found", f"{len(blocks)} commands")

wrappers = {
    "python": f'#!/bin/sh\nexec {sys.executable} -m sqlite_idempotency "$@"\n',
    "node": f'#!/bin/sh\nexec node {proj}/node_modules/sqlite-idempotency/cli.js "$@"\n',
}
for who, wrapper in wrappers.items():
    d = os.path.join(scratch, who)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(os.path.join(d, "bin"))
    os.symlink(os.path.join(ROOT, "build"), os.path.join(d, "build"))
    with open(os.path.join(d, "bin", "sqlite-idempotency"), "w") as f:
        f.write(wrapper)
    os.chmod(os.path.join(d, "bin", "sqlite-idempotency"), 0o755)
    with open(os.path.join(ROOT, "tests", "fixtures", "operating-docs.sql")) as f:
        subprocess.run(["sqlite3", "agent.db"], stdin=f, cwd=d, check=True)
    env = dict(os.environ, PATH=os.path.join(d, "bin") + os.pathsep + os.environ["PATH"],
               SQLITE_IDEMPOTENCY_NOW_MS="1790003600000")
    for i, (cmd, want) in enumerate(blocks, 1):
        r = subprocess.run(["bash", "-c", cmd], cwd=d, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True)
        checks.report(r.stdout == want, f"{who}:{i}:{cmd[:60]}",
                      f"output differs:\n--- got\n{r.stdout}--- want\n{want}")
sys.exit(checks.status())
