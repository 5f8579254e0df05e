#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# fetch-source.sh WORKDIR [PACKAGE] - downloads and unpacks Debian's source
# package PACKAGE (default qemu) into WORKDIR/src, or WORKDIR/src-PACKAGE
# for another package (Debian's own patches applied by dpkg-source),
# through a private apt configuration: a deb-src entry and package lists
# that live in WORKDIR/apt, passed to apt with -o options.  The system's
# apt sources are never edited.  A second run reuses what is there.
set -euo pipefail

work=$(realpath -m "${1:?usage: fetch-source.sh WORKDIR [PACKAGE]}")
pkg=${2:-qemu}
dest=$work/src
[ "$pkg" = qemu ] || dest=$work/src-$pkg
apt_dir=$work/apt
mkdir -p "$apt_dir/sources.list.d" "$apt_dir/lists/partial" "$work/dl"

if [ -f "$dest/.unpacked" ]; then
    echo "fetch-source: reusing $dest ($(cat "$dest/.unpacked"))"
    exit 0
fi

command -v dpkg-source >/dev/null || { echo "fetch-source: dpkg-dev missing" >&2; exit 1; }

cat > "$apt_dir/sources.list.d/qemu-src.sources" <<SRC
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb-src
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC

apt_opts=(
    -o "Dir::Etc::SourceList=/dev/null"
    -o "Dir::Etc::SourceParts=$apt_dir/sources.list.d"
    -o "Dir::State::Lists=$apt_dir/lists"
    -o "Dir::Cache=$apt_dir/cache"
    -o "APT::Sandbox::User=root"
)
mkdir -p "$apt_dir/cache/archives/partial"
echo "fetch-source: updating the private deb-src lists"
apt-get "${apt_opts[@]}" update -qq

cd "$work/dl"
echo "fetch-source: apt-get source --download-only $pkg"
apt-get "${apt_opts[@]}" source --download-only -qq "$pkg"
dsc=$(ls -t "${pkg}"_*.dsc | head -n 1)
rm -rf "$dest.tmp"
dpkg-source -x "$dsc" "$dest.tmp" >/dev/null
mv "$dest.tmp" "$dest"
echo "${dsc%.dsc}" > "$dest/.unpacked"
echo "fetch-source: unpacked ${dsc%.dsc} into $dest"
