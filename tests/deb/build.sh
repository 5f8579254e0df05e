#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# build.sh [OUT] - builds the Debian binary packages (debian/) from a copy
# of this tree and runs lintian on them (docs/packaging.md).
#
# The copy is every tracked and untracked, not ignored, file of the
# checkout as it is now, in OUT/libaioloop-VERSION (OUT: build-deb), so
# dpkg-buildpackage writes the .debs, .buildinfo and .changes into OUT
# (its parent) and nothing outside the checkout; the build runs in that
# copy's obj-* directory.  DEB_BUILD_OPTIONS (nocheck, parallel=N) passes
# through; parallel defaults to 2.  Fails on a build failure or on a
# lintian error; lintian's warnings are printed (the kept ones are listed
# in docs/packaging.md).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
out=${1:-$repo/build-deb}
mkdir -p "$out"
out=$(cd "$out" && pwd)

version=$(dpkg-parsechangelog -l "$repo/debian/changelog" -S Version)
upstream=${version%-*}
src=$out/libaioloop-$upstream
rm -rf "$src" "$out"/*.deb "$out"/*.ddeb "$out"/*.buildinfo "$out"/*.changes
mkdir -p "$src"
# (a tracked file deleted in the checkout is left out; outside a git
# checkout, a copy of one made by tests/distros/make-in.sh, every file but
# the build directories)
if git -C "$repo" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git -C "$repo" ls-files -z --cached --others --exclude-standard
else
    (cd "$repo" && find . \( -path './build*' -o -path './.mesonpy-*' \) -prune -o \( -type f -o -type l \) -print0)
fi |
    (cd "$repo" && while IFS= read -r -d '' f; do
         [ -e "$f" ] && printf '%s\0' "$f"; done) |
    tar -C "$repo" --null -T - -cf - | tar -C "$src" -xf -

case " ${DEB_BUILD_OPTIONS:-} " in
*" parallel="*) ;;
*) export DEB_BUILD_OPTIONS="${DEB_BUILD_OPTIONS:+$DEB_BUILD_OPTIONS }parallel=2" ;;
esac
echo "deb: dpkg-buildpackage in $src (DEB_BUILD_OPTIONS=$DEB_BUILD_OPTIONS)"
(cd "$src" && dpkg-buildpackage -us -uc -b) > "$out/build.log" 2>&1 ||
    { tail -n 60 "$out/build.log"; echo "deb: build failed, log in $out/build.log"; exit 1; }
rm -rf "$src"

changes=$(ls "$out"/libaioloop_"${version}"_*.changes)
echo "deb: built in $out:"
(cd "$out" && ls -1 ./*.deb)
echo "deb: lintian $changes"
lintian --fail-on error --display-info "$changes" ||
    { echo "deb: lintian found errors"; exit 1; }
echo "deb: lintian: no errors"
