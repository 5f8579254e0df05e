# SPDX-License-Identifier: MIT
# pkgs.sh - sourced by the scripts here: pkgs_install WHO PACKAGE...
# installs the Debian packages that are missing (as root, with apt-get);
# as non-root it prints the apt-get command and exits 1.  WHO names the
# calling script in messages.
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
