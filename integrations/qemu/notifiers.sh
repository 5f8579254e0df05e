#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# notifiers.sh test [WORKDIR] [--fake-kvm SHIM]
#                                      the fork's notifier batching on KVM
# notifiers.sh bench [WORKDIR] [ARGS]  device start/stop: stock vs fork
#
# Installs what the scripts need (strace for the ioctl counts,
# qemu-system-common for qemu-storage-daemon, the firmware), then runs
# notifier-test.py on WORKDIR/fork-build, or bench/notifier_bench.py on
# WORKDIR/stock-build and WORKDIR/fork-build (build them first:
# build.sh --both --all).  Without a usable /dev/kvm both say so: test
# exits 77, a skip (make check-notifiers reports it as one), and bench
# exits 0 (make bench-notifiers has nothing to compare, not a failure).
# With --fake-kvm SHIM (build/integrations/qemu/fakekvm/libfakekvm.so,
# built by ninja -C build) QEMU runs on that LD_PRELOAD fake /dev/kvm
# instead, which also logs the ioctls for the counts: no /dev/kvm, no
# strace needed.  (bench takes the option as well, after WORKDIR.)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mode=${1:?usage: notifiers.sh test|bench [WORKDIR] [ARGS...]}
work=${2:-$here/../../build-qemu10}
shift $(( $# >= 2 ? 2 : 1 ))

. "$here/pkgs.sh"
pkgs_install notifiers.sh strace qemu-system-common seabios qemu-system-data

rc=0
case $mode in
    test)
        /usr/bin/python3 "$here/notifier-test.py" "$@" "$work/fork-build/qemu-system-x86_64" || rc=$?
        ;;
    bench)
        /usr/bin/python3 "$here/bench/notifier_bench.py" --out "$work/bench-results" "$@" \
            "$work/stock-build/qemu-system-x86_64" "$work/fork-build/qemu-system-x86_64" || rc=$?
        ;;
    *)
        echo "notifiers.sh: unknown mode $mode" >&2; exit 2 ;;
esac
if [ "$rc" = 77 ]; then
    echo "notifiers.sh: $mode skipped (no usable /dev/kvm on this machine)"
    [ "$mode" = test ] && exit 77
    exit 0
fi
exit "$rc"
