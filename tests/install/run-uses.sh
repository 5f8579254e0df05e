#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# run-uses.sh OUTDIR LIBDIR - builds each use-*.c here with plain
# `cc $(pkg-config --cflags --libs PKG)`, PKG named in the file's
# "/* pkg-config: PKG" line, into OUTDIR and runs it
# (LD_LIBRARY_PATH=LIBDIR); then once more linked with our static
# libraries (LIBDIR/lib*.a in place of -l, the rest from `pkg-config
# --static --libs`, so a library's private dependencies must come
# through its .pc: liburing by Requires.private), and checks that one
# loads no shared libaioloop.  pkg-config looks where the environment
# says: a temporary prefix (check-install.sh) or the system
# (debian/tests/smoke).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=$1
libdir=$2
n=0
for src in "$here"/use-*.c; do
    pkgs=$(sed -n 's|^/\* pkg-config: ||p' "$src" | head -n 1)  # (below the SPDX line)
    [ -n "$pkgs" ] || { echo "run-uses: $(basename "$src") names no pkg-config package"; exit 1; }
    exe=$out/$(basename "$src" .c)
    # shellcheck disable=SC2046 # (word splitting wanted)
    cc -std=c11 -Wall -Wextra -Werror -o "$exe" "$src" \
        $(pkg-config --cflags --libs $pkgs) ||
        { echo "run-uses: $(basename "$src") does not build against $pkgs"; exit 1; }
    LD_LIBRARY_PATH=$libdir "$exe" ||
        { echo "run-uses: $(basename "$src") failed"; exit 1; }
    # shellcheck disable=SC2046,SC2086 # (word splitting wanted)
    static_libs=$(pkg-config --static --libs $pkgs |
                  sed -E "s|-l(aioloop[a-z-]*)|$libdir/lib\\1.a|g")
    # shellcheck disable=SC2046,SC2086
    cc -std=c11 -Wall -Wextra -Werror -o "$exe-static" "$src" \
        $(pkg-config --cflags $pkgs) $static_libs ||
        { echo "run-uses: $(basename "$src") does not link static with $static_libs"; exit 1; }
    ! ldd "$exe-static" | grep -q libaioloop ||
        { echo "run-uses: $(basename "$src")-static loads a shared libaioloop"; exit 1; }
    "$exe-static" ||
        { echo "run-uses: $(basename "$src") (static) failed"; exit 1; }
    n=$((n + 1))
done
echo "run-uses: $n programs built with pkg-config, shared and static, and ran"
