#!/bin/sh
# Ensure the Debian packages named on the command line are installed.
# As root with apt-get, install what is missing; otherwise name it in one line.
command -v dpkg-query >/dev/null 2>&1 || exit 0  # not Debian: the compiler will name what is missing
missing=""
for p in "$@"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing:$missing" >&2
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing) >/dev/null || {
    echo "could not install:$missing" >&2; exit 1; }
else
  echo "missing system packages; run: sudo apt-get install -y$missing" >&2
  exit 1
fi
