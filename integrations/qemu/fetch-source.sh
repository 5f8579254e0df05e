#!/usr/bin/env bash
# fetch-source.sh WORKDIR - downloads and unpacks Debian's qemu source
# package into WORKDIR/src (Debian's own patches applied by dpkg-source),
# through a private apt configuration: a deb-src entry and package lists
# that live in WORKDIR/apt, passed to apt with -o options.  The system's
# apt sources are never edited.  A second run reuses what is there.
set -euo pipefail

work=$(realpath -m "${1:?usage: fetch-source.sh WORKDIR}")
apt_dir=$work/apt
mkdir -p "$apt_dir/sources.list.d" "$apt_dir/lists/partial" "$work/dl"

if [ -f "$work/src/.unpacked" ]; then
    echo "fetch-source: reusing $work/src ($(cat "$work/src/.unpacked"))"
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
echo "fetch-source: apt-get source --download-only qemu"
apt-get "${apt_opts[@]}" source --download-only -qq qemu
dsc=$(ls -t qemu_*.dsc | head -n 1)
rm -rf "$work/src.tmp"
dpkg-source -x "$dsc" "$work/src.tmp" >/dev/null
mv "$work/src.tmp" "$work/src"
echo "${dsc%.dsc}" > "$work/src/.unpacked"
echo "fetch-source: unpacked ${dsc%.dsc} into $work/src"
