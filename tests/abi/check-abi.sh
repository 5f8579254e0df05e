#!/bin/sh
# SPDX-License-Identifier: MIT
# check-abi.sh BASELINE LIB HEADERS_DIR - compares LIB's ABI with the
# committed BASELINE (abidw XML, tests/abi/baseline) using abigail-tools:
# both sides restricted to the declarations of the public headers in
# HEADERS_DIR, and the layout of the opaque types those headers name
# (typedef struct x x;) left out, since it is private.  A removed or
# changed function or variable fails (docs/abi.md: that needs a new
# SONAME); added ones pass, and the baseline may then be refreshed with
# tests/abi/update-baseline.sh.  The types of other libraries that our
# declarations name (glib's GSource, libev's struct ev_loop) are theirs:
# a change in them alone (glib 2.84 made GSourceFuncs' members typedefs)
# is not ours, and one that moves our own layout shows in an aiol_ type.
# abigail-tools 2.x and 3.x: 3.x writes format 3 and refuses to compare it
# with a format-2 baseline, which it reads as written once the version
# says 3 (tests/abi/check-break.sh shows it still finds a break).  Exit 77
# without abigail-tools.
set -u
command -v abidiff >/dev/null 2>&1 && command -v abidw >/dev/null 2>&1 ||
    { echo "check-abi: abidiff/abidw missing (Debian abigail-tools)"; exit 77; }
base=$1 lib=$2 hdrs=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for t in $(cat "$hdrs"/*.h | grep -oE 'typedef struct (aiol_[a-z0-9_]+) \1;' |
           awk '{print $3}' | sort -u); do
    printf '[suppress_type]\n  type_kind = struct\n  name = %s\n\n' "$t"
done > "$tmp/opaque.suppr"
# (glib's GSource, _GSource, gboolean...; libev's; liburing's)
printf '[suppress_type]\n  name_regexp = ^(_?G[A-Z]|g[a-z]|ev_|io_uring)\n' >> "$tmp/opaque.suppr"
abidw --headers-dir "$hdrs" --no-show-locs --no-corpus-path \
    --out-file "$tmp/now.abi" "$lib" || { echo "check-abi: abidw failed on $lib"; exit 1; }
version() { sed -n "1s/.*<abi-corpus version='\([0-9]*\)\..*/\1/p" "$1"; }
read_base=$base
if [ "$(version "$base")" = 2 ] && [ "$(version "$tmp/now.abi")" = 3 ]; then
    read_base=$tmp/base.abi
    sed "1s/<abi-corpus version='2\.[0-9]*'/<abi-corpus version='3.0'/" "$base" > "$read_base"
fi
abidiff --suppressions "$tmp/opaque.suppr" "$read_base" "$tmp/now.abi" > "$tmp/diff"
rc=$?
cat "$tmp/diff"
# status bits: 1 error, 2 usage error, 4 ABI change, 8 incompatible change
if [ $((rc & 11)) -ne 0 ] ||
   grep -qE 'changes summary: [1-9][0-9]* Removed|, [1-9][0-9]* Changed' "$tmp/diff"; then
    echo "check-abi: $lib breaks the ABI recorded in $base (status $rc)"
    exit 1
fi
if [ "$rc" -ne 0 ]; then
    echo "check-abi: $lib adds to $base compatibly (tests/abi/update-baseline.sh refreshes it)"
fi
exit 0
