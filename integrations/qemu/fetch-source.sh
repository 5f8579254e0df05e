#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# fetch-source.sh WORKDIR [PACKAGE [SUITE]] - downloads and unpacks Debian's
# source package PACKAGE (default qemu; PACKAGE=VERSION for one version)
# of SUITE (default bookworm) into WORKDIR/src, or WORKDIR/src-PACKAGE for another
# package (Debian's own patches applied by dpkg-source), through a
# private apt configuration in WORKDIR/apt (apt-lib.sh: the system's
# mirror, its apt sources never edited).  A second run reuses what is
# there.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/apt-lib.sh"
work=$(realpath -m "${1:?usage: fetch-source.sh WORKDIR [PACKAGE [SUITE]]}")
spec=${2:-qemu}
pkg=${spec%%=*}
suite=${3:-bookworm}
dest=$work/src
[ "$pkg" = qemu ] || dest=$work/src-$pkg
mkdir -p "$work/dl"

if [ -f "$dest/.unpacked" ]; then
    echo "fetch-source: reusing $dest ($(cat "$dest/.unpacked"))"
    exit 0
fi

command -v dpkg-source >/dev/null || { echo "fetch-source: dpkg-dev missing" >&2; exit 1; }

echo "fetch-source: updating the private deb-src lists ($suite)"
apt_private "$work/apt" deb-src "$suite"

cd "$work/dl"
echo "fetch-source: apt-get source --download-only $spec ($suite)"
apt-get "${apt_opts[@]}" source --download-only -qq "$spec"
if [ "$spec" != "$pkg" ]; then
    # (the version without its epoch names the .dsc)
    version=${spec#*=}
    dsc=${pkg}_${version#*:}.dsc
else
    dsc=$(ls -t "${pkg}"_*.dsc | head -n 1)
fi
rm -rf "$dest.tmp"
dpkg-source -x "$dsc" "$dest.tmp" >/dev/null
mv "$dest.tmp" "$dest"
echo "${dsc%.dsc}" > "$dest/.unpacked"
echo "fetch-source: unpacked ${dsc%.dsc} into $dest"
