# SPDX-License-Identifier: MIT
# pkgs.sh - sourced by the scripts here: pkgs_install WHO PACKAGE...
# installs the Debian packages that are missing (as root, with apt-get);
# as non-root it prints the apt-get command and exits 1.  WHO names the
# calling script in messages.  firmware_link BUILD links Debian's firmware
# where BUILD's own QEMU looks for it.
pkgs_install() {
    local who=$1 p need=()
    shift
    for p in "$@"; do
        dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed' ||
            need+=("$p")
    done
    [ ${#need[@]} -gt 0 ] || return 0
    if [ "$(id -u)" != 0 ]; then
        echo "$who: missing packages; run as root: apt-get install -y ${need[*]}" >&2
        exit 1
    fi
    echo "$who: installing ${need[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
}

# firmware_link WHO BUILD: a build tree's QEMU looks for firmware in
# BUILD/qemu-bundle/<datadir>; the +dfsg source ships none, Debian's
# packages (installed here) do: links them there.
firmware_link() {
    local who=$1 bld=$2 datadir f
    pkgs_install "$who" seabios qemu-system-data ipxe-qemu
    datadir=$(find "$bld/qemu-bundle" -maxdepth 4 -type d -path '*/share/qemu' | head -n 1)
    [ -n "$datadir" ] || { datadir=$bld/qemu-bundle/usr/local/share/qemu; mkdir -p "$datadir"; }
    for f in /usr/share/seabios/* /usr/share/qemu/* /usr/lib/ipxe/qemu/*; do
        [ -e "$datadir/${f##*/}" ] || [ -L "$datadir/${f##*/}" ] || ln -s "$f" "$datadir/"
    done
}

# qemu_version BINARY: MAJOR.MINOR of a QEMU binary (qemu-img, qemu-system-*)
qemu_version() {
    "$1" --version | sed -n '1s/.*version \([0-9]*\.[0-9]*\).*/\1/p'
}
