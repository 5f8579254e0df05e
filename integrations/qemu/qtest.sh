#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# qtest.sh [--daemon BINARY] [WORKDIR]  QEMU's own qtests for the devices
# the series changes, and for our vhost-user-blk daemon
#
# Runs, on WORKDIR/fork-build (build.sh --fork --all builds qos-test), the
# libqos tests of virtio-blk-pci (with the series' multiqueue and
# multiqueue-kvm tests: vectors retargeted while the device runs, a
# masked vector's pending bit, stop and restart, unplug; the -kvm one
# under -accel kvm -S, skipped where KVM is not usable), vhost-user-blk-pci
# (against the qemu-storage-daemon of the same build, else Debian's) and
# vhost-user-net (QEMU's
# in-process vhost-user server).  With --daemon, the vhost-user-blk-pci
# tests run a second time with aioloop-vhost-blk as the storage daemon
# (QTEST_QEMU_STORAGE_DAEMON_BINARY: the test starts it with qsd's
# --blockdev/--export command line, an fd export, and ends it with
# SIGTERM, expecting exit status 0).  Installs the firmware the pc
# machine loads and links it where the build tree's QEMU looks for it.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
daemon=''
if [ "${1:-}" = --daemon ]; then
    daemon=$(realpath "$2")
    shift 2
    [ -x "$daemon" ] || { echo "qtest.sh: $daemon is not executable" >&2; exit 1; }
fi
work=$(realpath -m "${1:-$here/../../build-qemu10}")
bld=$work/fork-build

. "$here/pkgs.sh"
pkgs_install qtest.sh seabios qemu-system-data ipxe-qemu qemu-system-common

[ -x "$bld/tests/qtest/qos-test" ] || {
    echo "qtest.sh: $bld/tests/qtest/qos-test is missing (build.sh --fork --all)" >&2
    exit 1
}
firmware_link qtest.sh "$bld"

cd "$bld"
export QTEST_QEMU_BINARY=./qemu-system-x86_64 QTEST_QEMU_IMG=./qemu-img
# The storage daemon built with this QEMU (same version), else Debian's.
# (10.2 registers the vhost-user-blk tests only when one is named.)
qsd=$bld/storage-daemon/qemu-storage-daemon
[ -x "$qsd" ] || qsd=/usr/bin/qemu-storage-daemon
mapfile -t tests < <(QTEST_QEMU_STORAGE_DAEMON_BINARY=$qsd tests/qtest/qos-test -l |
    grep -E '/(virtio-blk-pci|vhost-user-blk-pci)/|/vhost-user/')
[ ${#tests[@]} -ge 20 ] || { echo "qtest.sh: only ${#tests[@]} tests listed" >&2; exit 1; }
for t in multiqueue multiqueue-kvm; do
    printf '%s\n' "${tests[@]}" | grep -q "virtio-blk-pci-tests/$t\$" ||
        { echo "qtest.sh: the series' $t test is missing" >&2; exit 1; }
done
# run LABEL STORAGE_DAEMON EXPECTED TEST...: one qos-test run
run() {
    local label=$1 qsd=$2 want=$3 log=$bld/qtest-$1.log rc=0 t
    shift 3
    local args=()
    for t in "$@"; do args+=(-p "$t"); done
    QTEST_QEMU_STORAGE_DAEMON_BINARY=$qsd \
        timeout -k 10 600 tests/qtest/qos-test --tap "${args[@]}" > "$log" 2>&1 || rc=$?
    grep -E '^(not )?ok ' "$log" | sed 's/^/  /'
    pass=$(grep -cE '^ok ' "$log" || true)
    skip=$(grep -cE '^ok .*# SKIP' "$log" || true)
    fail=$(grep -cE '^not ok ' "$log" || true)
    echo "qtest.sh: $label: $want tests, $((pass - skip)) passed, $skip skipped, $fail failed (log: $log)"
    # (the tests that need a storage daemon say which one they started)
    if ! grep -q "starting vhost-user backend: exec $qsd " "$log"; then
        echo "qtest.sh: $label: no test started $qsd" >&2
        return 1
    fi
    if [ "$rc" != 0 ] || [ "$fail" != 0 ] || [ "$pass" != "$want" ]; then
        grep -E 'ERROR|Bail out' "$log" | head -n 20 >&2 || true
        return 1
    fi
}

status=0
run qemu-storage-daemon "$qsd" ${#tests[@]} "${tests[@]}" || status=1
if [ -n "$daemon" ]; then
    mapfile -t ours < <(printf '%s\n' "${tests[@]}" | grep '/vhost-user-blk-pci/')
    [ ${#ours[@]} -ge 6 ] || { echo "qtest.sh: only ${#ours[@]} vhost-user-blk tests" >&2; exit 1; }
    run aioloop-vhost-blk "$daemon" ${#ours[@]} "${ours[@]}" || status=1
fi
exit $status
