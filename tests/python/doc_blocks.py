"""The examples of a Markdown file, written out for a suite to run.

    python3 doc_blocks.py FILE OUTDIR

Each fenced block marked `<!-- run by tests/suites/63-packages.sh -->` on
the line before its fence (the page's other blocks are run by the docs
suite, tests/python/run_docs.py) becomes a file in OUTDIR: python blocks NN.py, js blocks NN.mjs, console
blocks one pair per `$ command` line, NN-MM.cmd (the command) and NN-MM.out
(the lines after it up to the next command, its expected output). Prints
the names written, one a line; a block of another language is an error.
"""
import os
import re
import sys


def main(path, out):
    lines = open(path, encoding="utf-8").read().split("\n")
    os.makedirs(out, exist_ok=True)
    written, i, n = [], 0, 0
    while i < len(lines):
        m = re.match(r"^( *)```(\w*)\s*$", lines[i])
        if not m:
            i += 1
            continue
        indent, lang = m.group(1), m.group(2)
        norun = i == 0 or lines[i - 1].strip() != "<!-- run by tests/suites/63-packages.sh -->"
        body = []
        i += 1
        while i < len(lines) and lines[i].strip() != "```":
            body.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i])
            i += 1
        i += 1
        if norun:
            continue
        n += 1
        if lang in ("python", "js"):
            name = f"{n:02d}.{'py' if lang == 'python' else 'mjs'}"
            with open(os.path.join(out, name), "w", encoding="utf-8") as f:
                f.write("\n".join(body) + "\n")
            written.append(name)
        elif lang == "console":
            k, cmd, expect = 0, None, []
            for line in body + ["$ "]:
                if line.startswith("$ "):
                    if cmd is not None:
                        k += 1
                        base = f"{n:02d}-{k:02d}"
                        with open(os.path.join(out, base + ".cmd"), "w", encoding="utf-8") as f:
                            f.write(cmd + "\n")
                        with open(os.path.join(out, base + ".out"), "w", encoding="utf-8") as f:
                            f.write("".join(e + "\n" for e in expect))
                        written.append(base + ".cmd")
                    cmd, expect = line[2:], []
                elif cmd is None:
                    sys.exit(f"doc_blocks: {path}: console block {n} starts with {line!r}, not a $ command")
                else:
                    expect.append(line)
        else:
            sys.exit(f"doc_blocks: {path}: block {n} is {lang or 'unlabelled'}, which no test runs "
                     "(mark it <!-- norun --> or make it python, js or console)")
    print("\n".join(written))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
