#!/usr/bin/env bash
# The layers of ext/ (docs/design.md, "The layers, and who may call whom"):
# every file of ext/ has a row in that table, and each object's undefined
# symbols that another file of ext/ defines are defined by a file its row
# lists (the sqlite3_api pointer of idempotency.c is data, not a call), so
# no file calls one above it and there is no circle. Also: no .c file of
# ext/ is over 1,500 lines.
set -u
cd "$(dirname "$0")/../.." || exit 1
BUILD=${BUILD:-build}
out=$BUILD/layers
mkdir -p "$out"
rc=0
for f in ext/*.c; do
  o=$out/$(basename "$f" .c).o
  if ! ${CC:-cc} -c -O0 -std=gnu11 -fPIC -Iinclude -Iext -o "$o" "$f" 2>"$out/err"; then
    echo "FAIL layers:compile:$(basename "$f"): $(head -c 300 "$out/err")"
    rc=1
  fi
done
[ "$rc" = 0 ] || exit 1
/usr/bin/env python3 - "$out" <<'PY' || rc=1
import os, re, subprocess, sys
out = sys.argv[1]
rows = {}
for line in open("docs/design.md", encoding="utf-8"):
    m = re.match(r"^\| `([a-z_]+\.c)` \| .* \| (.*) \|$", line.rstrip("\n"))
    if m:
        calls = m.group(2)
        rows[m.group(1)] = set(re.findall(r"([a-z_]+\.c)", calls)) if calls != "nothing" else set()
        if "every ledger file" in calls:  # ledger.c: the ledger_*.c files and the schema of the guards
            rows[m.group(1)] |= {f for f in os.listdir("ext") if f.startswith("ledger_") and f.endswith(".c")} | {"guard_schema.c"}
files = sorted(f for f in os.listdir("ext") if f.endswith(".c"))
fail = 0
defs = {}
for f in files:
    o = os.path.join(out, f[:-2] + ".o")
    for l in subprocess.run(["nm", "--defined-only", "-g", o], capture_output=True, text=True).stdout.splitlines():
        defs[l.split()[-1]] = f
for f in files:
    if f not in rows:
        print(f"FAIL layers:row:{f}: docs/design.md's table of layers has no row for ext/{f}"); fail = 1; continue
    o = os.path.join(out, f[:-2] + ".o")
    used = {l.split()[-1] for l in subprocess.run(["nm", "-u", o], capture_output=True, text=True).stdout.splitlines()}
    bad = sorted({(defs[s], s) for s in used if s in defs and defs[s] != f and defs[s] != "idempotency.c" and defs[s] not in rows[f]})
    if bad:
        print(f"FAIL layers:calls:{f}: calls what its row does not list: " + ", ".join(f"{d} ({s})" for d, s in bad)); fail = 1
    else:
        print(f"PASS layers:calls:{f}")
    n = sum(1 for _ in open(os.path.join("ext", f), encoding="utf-8"))
    if n > 1500:
        print(f"FAIL layers:size:{f}: {n} lines, over 1,500"); fail = 1
sys.exit(fail)
PY
exit $rc
