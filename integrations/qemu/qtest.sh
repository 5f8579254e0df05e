#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# qtest.sh [WORKDIR]  QEMU's own qtests for the devices the series changes
#
# Runs, on WORKDIR/fork-build (build.sh --fork --all builds qos-test), the
# libqos tests of virtio-blk-pci (with the series' multiqueue and
# multiqueue-kvm tests: vectors retargeted while the device runs, a
# masked vector's pending bit, stop and restart, unplug; the -kvm one
# under -accel kvm -S, skipped where KVM is not usable), vhost-user-blk-pci
# (against Debian's qemu-storage-daemon) and vhost-user-net (QEMU's
# in-process vhost-user server).  Installs the firmware the pc machine
# loads and links it where the build tree's QEMU looks for it.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
work=$(realpath -m "${1:-$here/../../build-qemu}")
bld=$work/fork-build

. "$here/pkgs.sh"
pkgs_install qtest.sh seabios qemu-system-data ipxe-qemu qemu-system-common

[ -x "$bld/tests/qtest/qos-test" ] || {
    echo "qtest.sh: $bld/tests/qtest/qos-test is missing (build.sh --fork --all)" >&2
    exit 1
}
# A build tree's QEMU looks for firmware in qemu-bundle/<datadir>; the
# +dfsg source ships none, Debian's packages do.
datadir=$(find "$bld/qemu-bundle" -maxdepth 4 -type d -path '*/share/qemu' | head -n 1)
[ -n "$datadir" ] || { datadir=$bld/qemu-bundle/usr/local/share/qemu; mkdir -p "$datadir"; }
for f in /usr/share/seabios/* /usr/share/qemu/* /usr/lib/ipxe/qemu/*; do
    [ -e "$datadir/${f##*/}" ] || [ -L "$datadir/${f##*/}" ] || ln -s "$f" "$datadir/"
done

cd "$bld"
export QTEST_QEMU_BINARY=./qemu-system-x86_64 QTEST_QEMU_IMG=./qemu-img
export QTEST_QEMU_STORAGE_DAEMON_BINARY=/usr/bin/qemu-storage-daemon
mapfile -t tests < <(tests/qtest/qos-test -l |
    grep -E '/(virtio-blk-pci|vhost-user-blk-pci)/|/vhost-user/')
[ ${#tests[@]} -ge 20 ] || { echo "qtest.sh: only ${#tests[@]} tests listed" >&2; exit 1; }
for t in multiqueue multiqueue-kvm; do
    printf '%s\n' "${tests[@]}" | grep -q "virtio-blk-pci-tests/$t\$" ||
        { echo "qtest.sh: the series' $t test is missing" >&2; exit 1; }
done
args=()
for t in "${tests[@]}"; do args+=(-p "$t"); done
log=$bld/qtest.log
rc=0
timeout -k 10 600 tests/qtest/qos-test --tap "${args[@]}" > "$log" 2>&1 || rc=$?
grep -E '^(not )?ok ' "$log" | sed 's/^/  /'
pass=$(grep -cE '^ok ' "$log" || true)
skip=$(grep -cE '^ok .*# SKIP' "$log" || true)
fail=$(grep -cE '^not ok ' "$log" || true)
echo "qtest.sh: ${#tests[@]} tests, $((pass - skip)) passed, $skip skipped, $fail failed (log: $log)"
if [ "$rc" != 0 ] || [ "$fail" != 0 ] || [ "$pass" != ${#tests[@]} ]; then
    grep -E 'ERROR|Bail out' "$log" | head -n 20 >&2 || true
    exit 1
fi
