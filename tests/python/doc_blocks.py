"""The examples of a Markdown file that a suite runs, written out for it: the
one reader of marked blocks (tests/python/run_docs.py runs the unmarked ones).

    python3 doc_blocks.py FILE OUTDIR                      (63-packages)
    python3 doc_blocks.py --suite NAME FILE OUTDIR          (any suite)

A block is marked for a suite by `<!-- run by tests/suites/NAME.sh -->` on
the line before its fence.

Without --suite (tests/suites/63-packages.sh's form): python blocks become
NN.py, js blocks NN.mjs, console blocks one pair per `$ command` line,
NN-MM.cmd (the command) and NN-MM.out (the lines after it up to the next
command, its expected output); a block of another language is an error.

With --suite NAME: every block marked for NAME becomes NN.LANG (LANG as its
fence names it: go, rust, toml, js, python, console, ...), and a ```text
block right after `<!-- output -->` that follows a marked block becomes
NN.out, that block's expected output. Prints the names written, one a
line (NN.LANG; the .out files are not listed).
"""
import os
import re
import sys


def blocks(path, mark):
    """[(lang, body, marked, before)] of FILE's fenced blocks, in order: before is
    the line before the fence, stripped; body without the fence's indentation."""
    lines = open(path, encoding="utf-8").read().split("\n")
    out, i = [], 0
    while i < len(lines):
        m = re.match(r"^( *)```(\w*)\s*$", lines[i])
        if not m:
            i += 1
            continue
        indent, lang = m.group(1), m.group(2)
        before = lines[i - 1].strip() if i else ""
        body = []
        i += 1
        while i < len(lines) and lines[i].strip() != "```":
            body.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i])
            i += 1
        i += 1
        out.append((lang, "\n".join(body) + "\n", before == mark, before))
    return out


def write(out, name, text):
    with open(os.path.join(out, name), "w", encoding="utf-8") as f:
        f.write(text)


def by_suite(path, out, suite):
    """Every block marked for suite as NN.LANG, its output block as NN.out."""
    written, n, last = [], 0, None
    for lang, body, marked, before in blocks(path, f"<!-- run by tests/suites/{suite}.sh -->"):
        if marked:
            n += 1
            last = f"{n:02d}"
            write(out, f"{last}.{lang}", body)
            written.append(f"{last}.{lang}")
        elif before == "<!-- output -->" and lang == "text" and last:
            write(out, f"{last}.out", body)
            last = None
        else:
            last = None
    return written


def packages(path, out):
    """63-packages' form: python and js programs, console commands one by one."""
    written, n = [], 0
    for lang, body, marked, _ in blocks(path, "<!-- run by tests/suites/63-packages.sh -->"):
        if not marked:
            continue
        n += 1
        lines = body[:-1].split("\n")
        if lang in ("python", "js"):
            name = f"{n:02d}.{'py' if lang == 'python' else 'mjs'}"
            write(out, name, body)
            written.append(name)
        elif lang == "console":
            k, cmd, expect = 0, None, []
            for line in lines + ["$ "]:
                if line.startswith("$ "):
                    if cmd is not None:
                        k += 1
                        base = f"{n:02d}-{k:02d}"
                        write(out, base + ".cmd", cmd + "\n")
                        write(out, base + ".out", "".join(e + "\n" for e in expect))
                        written.append(base + ".cmd")
                    cmd, expect = line[2:], []
                elif cmd is None:
                    sys.exit(f"doc_blocks: {path}: console block {n} starts with {line!r}, not a $ command")
                else:
                    expect.append(line)
        else:
            sys.exit(f"doc_blocks: {path}: block {n} is {lang or 'unlabelled'}, which no test runs "
                     "(mark it <!-- norun --> or make it python, js or console)")
    return written


def main(argv):
    suite = None
    if argv[:1] == ["--suite"]:
        suite, argv = argv[1], argv[2:]
    path, out = argv
    os.makedirs(out, exist_ok=True)
    written = by_suite(path, out, suite) if suite else packages(path, out)
    print("\n".join(written))


if __name__ == "__main__":
    main(sys.argv[1:])
