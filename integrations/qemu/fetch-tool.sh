#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# fetch-tool.sh WORKDIR PACKAGE SUITE - a build tool newer than this
# release's, for this build alone: downloads Debian's binary package
# PACKAGE of SUITE (meson of bookworm-backports for QEMU 10.2, which needs
# meson >= 1.5) through a private apt configuration (apt-lib.sh) and
# unpacks it with dpkg-deb -x into WORKDIR/tools, never installing it.
# Prints the directory to put first on PATH; with PYTHONPATH set to the
# directory after it (a Python tool's modules), the tool runs from there.
# A second run reuses what is there.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/apt-lib.sh"
work=$(realpath -m "${1:?usage: fetch-tool.sh WORKDIR PACKAGE SUITE}")
pkg=${2:?usage: fetch-tool.sh WORKDIR PACKAGE SUITE}
suite=${3:?usage: fetch-tool.sh WORKDIR PACKAGE SUITE}
tools=$work/tools
stamp=$tools/.$pkg-$suite

if [ ! -f "$stamp" ]; then
    mkdir -p "$work/dl-tools"
    apt_private "$work/apt-$suite" deb "$suite" >&2
    (cd "$work/dl-tools" && rm -f "${pkg}"_*.deb &&
     apt-get "${apt_opts[@]}" download -qq "$pkg/$suite" >&2)
    deb=$(ls "$work/dl-tools/${pkg}"_*.deb)
    mkdir -p "$tools"
    dpkg-deb -x "$deb" "$tools"
    basename "$deb" > "$stamp"
    echo "fetch-tool: $(cat "$stamp") unpacked into $tools" >&2
fi
echo "$tools/usr/bin"
echo "$tools/usr/lib/python3/dist-packages"
