#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# check.sh [OUT] - builds the Debian packages (build.sh OUT, with
# DEB_BUILD_OPTIONS=nocheck), installs them on this machine with apt-get
# (as root), runs debian/tests/smoke against the installed system and
# purges them again, whatever happened (docs/packaging.md).  Fails when
# the build, lintian, the installation, the smoke test or the purge does.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
out=${1:-$repo/build-deb}
[ "$(id -u)" = 0 ] || { echo "check-deb: installs packages: run as root"; exit 1; }

DEB_BUILD_OPTIONS="nocheck${DEB_BUILD_OPTIONS:+ $DEB_BUILD_OPTIONS}" "$repo/tests/deb/build.sh" "$out"
out=$(cd "$out" && pwd)

mapfile -t pkgs < <(sed -n 's/^Package: *//p' "$repo/debian/control")
version=$(dpkg-parsechangelog -l "$repo/debian/changelog" -S Version)
debs=()
for p in "${pkgs[@]}"; do
    # (_ARCH.deb or _all.deb)
    deb=$(ls "$out/${p}_${version}"_*.deb 2>/dev/null) ||
        { echo "check-deb: no $p package in $out"; exit 1; }
    debs+=("$deb")
done

export DEBIAN_FRONTEND=noninteractive
# (dpkg-query fails when one of them is not known at all)
installed() {
    { dpkg-query -W -f='${Package} ${Status}\n' "${pkgs[@]}" 2>/dev/null || true; } |
        awk '$NF == "installed" || $NF == "config-files" { print $1 }'
}
purge() {
    local left
    left=$(installed)
    [ -z "$left" ] && return 0
    # shellcheck disable=SC2086 # (one word a package)
    apt-get purge -y -qq $left > /dev/null
}
cleanup() {
    local rc=$?
    echo "check-deb: purging ${pkgs[*]}"
    purge || rc=1
    left=$(installed)
    [ -z "$left" ] || { echo "check-deb: still installed after the purge:" $left; rc=1; }
    exit $rc
}
# (a copy from an earlier run would make apt keep its files)
purge
trap cleanup EXIT
echo "check-deb: installing ${pkgs[*]}"
apt-get install -y -qq "${debs[@]}" > "$out/install.log" 2>&1 ||
    { apt-get update -qq && apt-get install -y -qq "${debs[@]}" > "$out/install.log" 2>&1; } ||
    { cat "$out/install.log"; echo "check-deb: installation failed"; exit 1; }
for p in "${pkgs[@]}"; do
    [ "$(dpkg-query -W -f='${Version}' "$p")" = "$version" ] ||
        { echo "check-deb: $p $version is not what got installed"; exit 1; }
done
"$repo/debian/tests/smoke"
echo "check-deb: the installed packages work"
