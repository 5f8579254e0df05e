#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# check-install.sh - installs this tree into a temporary prefix (its own
# build: meson setup --prefix, ninja, meson install) and builds each
# use-*.c here against the installed headers and libraries with plain
# `cc $(pkg-config --cflags --libs PKG)`, PKG named in the file's
# "/* pkg-config: PKG" line, then runs it; then once more linked with
# our static libraries (lib*.a in place of -l, the rest from `pkg-config
# --static --libs`, so a library's private dependencies must come
# through its .pc: liburing by Requires.private).  Also checks every
# public header got installed, the generated aioloop/version.h too, and
# that aioloop.pc names liburing by Requires.private, never as a raw
# -luring.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
tmp=$(mktemp -d /tmp/aiol-install-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix

echo "check-install: building and installing into $prefix"
meson setup "$tmp/build" "$repo" --prefix="$prefix" -Dtests=false \
    -Dpython=disabled -Dglib=enabled -Dlibev=enabled > "$tmp/setup.log" ||
    { cat "$tmp/setup.log"; exit 1; }
ninja -C "$tmp/build" > "$tmp/build.log" || { tail -30 "$tmp/build.log"; exit 1; }
meson install -C "$tmp/build" --quiet > "$tmp/install.log" ||
    { tail -30 "$tmp/install.log"; exit 1; }

pcdir=$(dirname "$(find "$prefix" -name aioloop.pc)")
libdir=$(dirname "$pcdir")
export PKG_CONFIG_PATH=$pcdir
for h in "$repo"/include/aioloop/*.h "$repo"/integrations/vhost/include/aioloop/*.h \
         "$repo"/integrations/vmm/include/aioloop/*.h version.h; do
    [ -f "$prefix/include/aioloop/${h##*/}" ] ||
        { echo "check-install: ${h##*/} was not installed"; exit 1; }
done
if grep -q -- '-luring' "$pcdir/aioloop.pc" ||
   { pkg-config --exists liburing &&
     ! grep -q '^Requires.private:.*liburing' "$pcdir/aioloop.pc"; }; then
    echo "check-install: aioloop.pc must name liburing in Requires.private, not as -luring:"
    cat "$pcdir/aioloop.pc"; exit 1
fi
n=0
for src in "$here"/use-*.c; do
    pkgs=$(sed -n 's|^/\* pkg-config: ||p' "$src" | head -n 1)  # (below the SPDX line)
    exe=$tmp/$(basename "$src" .c)
    # shellcheck disable=SC2046 # (word splitting wanted)
    cc -std=c11 -Wall -Wextra -Werror -o "$exe" "$src" \
        $(pkg-config --cflags --libs $pkgs) ||
        { echo "check-install: $(basename "$src") does not build against $pkgs"; exit 1; }
    LD_LIBRARY_PATH=$libdir "$exe" ||
        { echo "check-install: $(basename "$src") failed"; exit 1; }
    # shellcheck disable=SC2046,SC2086 # (word splitting wanted)
    static_libs=$(pkg-config --static --libs $pkgs |
                  sed -E "s|-l(aioloop[a-z-]*)|$libdir/lib\\1.a|g")
    # shellcheck disable=SC2046,SC2086
    cc -std=c11 -Wall -Wextra -Werror -o "$exe-static" "$src" \
        $(pkg-config --cflags $pkgs) $static_libs ||
        { echo "check-install: $(basename "$src") does not link static with $static_libs"; exit 1; }
    ! ldd "$exe-static" | grep -q libaioloop ||
        { echo "check-install: $(basename "$src")-static loads a shared libaioloop"; exit 1; }
    "$exe-static" ||
        { echo "check-install: $(basename "$src") (static) failed"; exit 1; }
    n=$((n + 1))
done
echo "check-install: $n programs built with pkg-config against the installed tree, shared and static, and ran"
