#!/bin/sh
# SPDX-License-Identifier: MIT
# check-break.sh BASELINE LIB HEADERS_DIR - check-abi.sh must still find a
# real ABI break with the abigail-tools at hand (2.x or 3.x, whose format-3
# reading of a format-2 baseline this proves) and the libraries the
# headers name: LIB against BASELINE passes, and against two copies of
# BASELINE broken on purpose it fails, once for a function the library
# no longer has, once for a public struct whose size changed.  Exit 77
# without abigail-tools.
set -u
command -v abidiff >/dev/null 2>&1 ||
    { echo "check-break: abidiff missing (Debian abigail-tools)"; exit 77; }
base=$1 lib=$2 hdrs=$3
check=$(dirname "$0")/check-abi.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

grep -q "name='aiol_loop_poll'" "$base" &&
    grep -q "<class-decl name='aiol_loop_stats' size-in-bits='768'" "$base" ||
    { echo "check-break: $base no longer has what this test breaks"; exit 1; }
sed "s/'aiol_loop_poll'/'aiol_loop_poll_gone'/g" "$base" > "$tmp/removed.abi"
sed "s/<class-decl name='aiol_loop_stats' size-in-bits='768'/<class-decl name='aiol_loop_stats' size-in-bits='832'/" \
    "$base" > "$tmp/resized.abi"

"$check" "$base" "$lib" "$hdrs" > "$tmp/out" 2>&1 ||
    { cat "$tmp/out"; echo "check-break: the baseline itself fails"; exit 1; }
for broken in removed resized; do
    if "$check" "$tmp/$broken.abi" "$lib" "$hdrs" > "$tmp/out" 2>&1; then
        cat "$tmp/out"
        echo "check-break: check-abi.sh passed a baseline with a $broken public name"
        exit 1
    fi
    grep -q 'breaks the ABI' "$tmp/out" ||
        { cat "$tmp/out"; echo "check-break: $broken: failed for another reason"; exit 1; }
    echo "check-break: $broken: found"
done
