#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# chroot.sh make SUITE DIR PACKAGE...
#     Makes DIR/root a Debian SUITE (trixie, sid...) system with PACKAGEs,
#     with mmdebstrap from this machine's own Debian mirror (mirror.sh),
#     unless DIR/root is already one made with the same suite and packages
#     (DIR/stamp): made once, reused by every later run.  In a package's
#     name @PY3@ stands for the suite's Python version (3.13, 3.14...:
#     libpython@PY3@-testsuite).  Sid's index may be past its Valid-Until
#     date: the chroot's apt is told not to check.
# chroot.sh run DIR COMMAND...
#     Runs COMMAND as root in DIR/root, with a clean environment, in a
#     mount and PID namespace of its own (unshare): /proc and /dev are
#     mounted into the chroot there, and nowhere else, so the mounts and
#     every process left go with the namespace whatever way COMMAND ends
#     (an error, a signal, a kill of this script), and nothing stays
#     mounted under DIR for a later `rm -rf` to walk into.
# As root (mmdebstrap, chroot and mount need it).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
[ "$(id -u)" = 0 ] || { echo "chroot.sh: needs root" >&2; exit 1; }

make_root() {
    local suite=$1 dir=$2
    shift 2
    local want have mirror
    # (what the chroot is made of: a change makes a new one)
    want=$(printf '%s\n' "suite=$suite" "mmdebstrap=--variant=apt" \
               $(printf '%s\n' "$@" | sort -u) | sha256sum | cut -c1-16)
    have=$(cat "$dir/stamp" 2>/dev/null || true)
    if [ "$want" = "$have" ] && [ -x "$dir/root/usr/bin/apt-get" ]; then
        echo "chroot: reusing $dir/root ($suite)"
        return 0
    fi
    command -v mmdebstrap >/dev/null ||
        { echo "chroot: mmdebstrap missing (apt-get install mmdebstrap)" >&2; exit 1; }
    mirror=$("$here/mirror.sh")
    rm -rf "$dir"
    mkdir -p "$dir"
    local p plain=() versioned=()
    for p in "$@"; do
        case $p in *@PY3@*) versioned+=("$p") ;; *) plain+=("$p") ;; esac
    done
    echo "chroot: mmdebstrap $suite from $mirror into $dir/root ($# packages)"
    local t0=$SECONDS
    # (the hook runs before mmdebstrap's cleanup: the package lists are
    # there; mmdebstrap's own mounts in the target are in a namespace of
    # their own, as run_in()'s: gone with it, however mmdebstrap ends)
    unshare --mount --propagation private -- mmdebstrap --quiet --variant=apt \
        --aptopt='Acquire::Check-Valid-Until "false"' \
        --include="$(IFS=,; echo "${plain[*]}")" \
        --customize-hook='chroot "$1" sh -c '"'"'v=$(py3versions -dv) &&
            apt-get install -y -qq $(echo "$0" | sed "s/@PY3@/$v/g")'"'"' "'"${versioned[*]:-}"'"' \
        "$suite" "$dir/root.tmp" "$mirror" > "$dir/mmdebstrap.log" 2>&1 ||
        { tail -n 30 "$dir/mmdebstrap.log"; echo "chroot: mmdebstrap failed" >&2; exit 1; }
    mv "$dir/root.tmp" "$dir/root"
    echo "$want" > "$dir/stamp"
    echo "chroot: $suite made in $((SECONDS - t0)) s"
}

run_in() {
    local dir=$1
    shift
    local root=$dir/root
    [ -x "$root/usr/bin/apt-get" ] || { echo "chroot: no chroot in $dir" >&2; exit 1; }
    # (the namespace's own mounts; its PID 1 is the sh: when it ends, the
    # kernel ends every process of the namespace and drops its mounts;
    # --kill-child: and it ends when unshare, this process, is killed)
    exec unshare --mount --propagation private --pid --fork --kill-child -- /bin/sh -c '
        set -e
        root=$1; shift
        mount -t proc proc "$root/proc"
        mount --rbind /dev "$root/dev"
        exec chroot "$root" /usr/bin/env -i HOME=/root LANG=C.UTF-8 \
            PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
            DEBIAN_FRONTEND=noninteractive TERM=dumb "$@"' sh "$root" "$@"
}

case ${1:-} in
make) shift; [ $# -ge 2 ] || { echo "usage: chroot.sh make SUITE DIR PACKAGE..." >&2; exit 2; }
      make_root "$@" ;;
run)  shift; [ $# -ge 2 ] || { echo "usage: chroot.sh run DIR COMMAND..." >&2; exit 2; }
      run_in "$@" ;;
*)    echo "usage: chroot.sh make SUITE DIR PACKAGE... | run DIR COMMAND..." >&2; exit 2 ;;
esac
