#!/usr/bin/env bash
# The check that justifies a wheel's manylinux tag and a platform package's
# os/cpu: the extension is an ELF shared object for the platform's machine,
# needs no library but the C library (and libm), and no glibc symbol version
# newer than the tag allows.
#
#   bash bindings/check-lib.sh PLATFORM LIB [GLIBC]
#
# PLATFORM is linux-x64 or linux-arm64; GLIBC the newest glibc the tag
# allows (2.17: manylinux_2_17, also called manylinux2014). Reads the
# dynamic section and symbol versions with readelf (binutils; it reads any
# machine's ELF). On success prints one line saying what it found; on
# failure names the symbol or library and exits 1.
set -euo pipefail

die() { echo "check-lib: $*" >&2; exit 1; }

[ $# -ge 2 ] && [ $# -le 3 ] || die "usage: check-lib.sh PLATFORM LIB [GLIBC]"
plat=$1 lib=$2 max=${3:-2.17}
case "$plat" in
  linux-x64) machine='Advanced Micro Devices X86-64' ;;
  linux-arm64) machine=AArch64 ;;
  *) die "unknown platform '$plat' (linux-x64 or linux-arm64)" ;;
esac
[[ "$max" =~ ^[0-9]+\.[0-9]+$ ]] || die "glibc version must be MAJOR.MINOR, got '$max'"
command -v readelf >/dev/null 2>&1 || die "readelf is not installed (Debian: apt-get install binutils)"
[ -f "$lib" ] || die "no library at $lib"

header=$(readelf -h "$lib" 2>&1) || die "$lib is not an ELF file: $(head -n 1 <<<"$header")"
grep -q '^ *Type: *DYN ' <<<"$header" || die "$lib is not a shared object ($(sed -n 's/^ *Type: *//p' <<<"$header"))"
got=$(sed -n 's/^ *Machine: *//p' <<<"$header")
[ "$got" = "$machine" ] || die "$lib is built for '$got', not $plat ('$machine')"

# Libraries it needs: only the C library and libm, which every manylinux
# system has (the manylinux policy's list is longer; this build needs no more).
needed=$(readelf -d -W "$lib" | sed -n 's/.*(NEEDED).*\[\(.*\)\]$/\1/p')
for so in $needed; do
  case "$so" in
    libc.so.6 | libm.so.6) ;;
    *) die "$lib needs $so; a wheel or platform package may need only libc.so.6 and libm.so.6" ;;
  esac
done

# Symbol versions: every GLIBC_x.y (GLIBC_x.y.z) it references, newest first.
versions=$(readelf --dyn-syms -W "$lib" | awk '$7 == "UND" && $8 ~ /@GLIBC_[0-9]/ {
  split($8, p, "@"); v = p[2]; sub(/^GLIBC_/, "", v); print v, p[1] }')
newest=0.0
while read -r v sym; do
  [ -n "${v:-}" ] || continue
  # compare MAJOR.MINOR[.PATCH] numerically against MAJOR.MINOR
  IFS=. read -r a b _ <<<"$v"
  IFS=. read -r ma mb <<<"$max"
  if [ "$a" -gt "$ma" ] || { [ "$a" -eq "$ma" ] && [ "$b" -gt "$mb" ]; }; then
    die "$lib needs $sym@GLIBC_$v, newer than glibc $max (the manylinux_${max/./_} tag allows symbols up to GLIBC_$max)"
  fi
  IFS=. read -r na nb _ <<<"$newest"
  if [ "$a" -gt "$na" ] || { [ "$a" -eq "$na" ] && [ "$b" -gt "$nb" ]; }; then newest=$v; fi
done <<<"$versions"
other=$(readelf --dyn-syms -W "$lib" | awk '$7 == "UND" && $8 ~ /@/ && $8 !~ /@GLIBC_[0-9]/ { print $8 }' | head -n 1)
[ -z "$other" ] || die "$lib needs $other, which is not a glibc symbol"

echo "check-lib: $lib: $plat ($machine), needs $(tr '\n' ' ' <<<"$needed" | sed 's/ $//'), glibc symbols up to GLIBC_$newest (manylinux_${max/./_} allows up to $max)"
