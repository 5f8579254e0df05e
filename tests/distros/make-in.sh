#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# make-in.sh SUITE DIR TARGET... - runs `make TARGET...` of this tree on
# Debian SUITE (trixie, sid), as a user of that distribution would: in its
# chroot (chroot.sh, made in DIR once, with DISTRO_PKGS, and reused), on a
# fresh copy of the tree's files (tracked and untracked, not ignored:
# what is there now) in /src.  What the targets leave in /src/build-deb
# (packages) and /src/build-bench/bench-results comes back to DIR/out.
# Fails when a target does.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
suite=${1:?usage: make-in.sh SUITE DIR TARGET...}
dir=$(realpath -m "${2:?usage: make-in.sh SUITE DIR TARGET...}")
shift 2
[ $# -gt 0 ] || { echo "usage: make-in.sh SUITE DIR TARGET..." >&2; exit 2; }
chroot_sh=$repo/tests/distros/chroot.sh

# shellcheck disable=SC2086 # (one word a package)
"$chroot_sh" make "$suite" "$dir" ${DISTRO_PKGS:?DISTRO_PKGS: the packages of the chroot}
root=$dir/root

rm -rf "$root/src"
mkdir -p "$root/src"
# (a tracked file deleted in the checkout is left out)
git -C "$repo" ls-files -z --cached --others --exclude-standard |
    (cd "$repo" && while IFS= read -r -d '' f; do
         [ -e "$f" ] && printf '%s\0' "$f"; done) |
    tar -C "$repo" --null -T - -cf - | tar -C "$root/src" -xf -

echo "== $suite: make $* ($(sed -n 's/^PRETTY_NAME="\(.*\)"/\1/p' "$root/etc/os-release"), $(chroot "$root" python3 -V))"
t0=$SECONDS
rc=0
# (IN_DISTRO: the Makefile then reaches no further chroot)
"$chroot_sh" run "$dir" make -C /src --no-print-directory IN_DISTRO="$suite" "$@" || rc=$?
rm -rf "$dir/out"
mkdir -p "$dir/out"
for d in build-deb build-bench/bench-results; do
    [ -d "$root/src/$d" ] && cp -a "$root/src/$d" "$dir/out/"
done
echo "== $suite: make $* $([ $rc = 0 ] && echo passed || echo "FAILED ($rc)") in $((SECONDS - t0)) s"
exit $rc
