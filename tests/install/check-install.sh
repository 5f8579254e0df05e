#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# check-install.sh - installs this tree into a temporary prefix (its own
# build: meson setup --prefix, ninja, meson install) and builds each
# use-*.c here against the installed headers and libraries with plain
# `cc $(pkg-config ...)`, shared and static, and runs it (run-uses.sh).
# Also checks every public header got installed, the generated
# aioloop/version.h too, that aioloop.pc names liburing by
# Requires.private, never as a raw -luring, and that the daemon's systemd
# units run the installed daemon.
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
# the daemon's systemd units, their ExecStart the installed daemon
unit=$prefix/lib/systemd/system/aioloop-vhost-blk@.service
[ -f "$prefix/lib/systemd/system/aioloop-vhost-blk@.socket" ] && [ -f "$unit" ] ||
    { echo "check-install: the systemd units were not installed"; exit 1; }
grep -q "^ExecStart=$prefix/bin/aioloop-vhost-blk " "$unit" && [ -x "$prefix/bin/aioloop-vhost-blk" ] ||
    { echo "check-install: $unit does not run $prefix/bin/aioloop-vhost-blk"; exit 1; }
"$here/run-uses.sh" "$tmp" "$libdir"
echo "check-install: the programs built against the installed tree, shared and static, and ran"
