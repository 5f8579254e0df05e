#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# guest-test.sh [--qemu BINARY] [--case NAME]... [WORKDIR]
#
# Boots a real Linux guest on the fork's qemu-system-x86_64 (-accel tcg)
# and has it write a pattern to a virtio-blk disk with O_DIRECT, read it
# back and compare; the host then checks the disk image holds the pattern.
# This is how a user meets the fork: a guest whose virtqueue handler is
# busy-polled on an iothread (default poll-max-ns), which is what hung when
# the loop slept between poll_begin and poll_end.
#
# Cases (all by default):
#   iothread-threads   virtio-blk-pci on an iothread, aio=threads
#   iothread-native    on an iothread, aio=native (cache.direct=on)
#   iothread-io_uring  on an iothread, aio=io_uring
#   mainloop-threads   on the main loop, aio=threads
# Each runs once per AIOLOOP_FDMON in $GUEST_FDMONS (default: epoll
# io_uring poll).  Every QEMU runs under `timeout` and is killed by its
# saved PID whatever happens.
#
# The guest: Debian's cloud kernel (linux-image-cloud-amd64, fetched with
# `apt-get download`) and an initramfs built here from busybox-static and
# the kernel's virtio modules.  Firmware: Debian's seabios and
# qemu-system-data.  WORKDIR defaults to <repo>/build-qemu; the binary to
# WORKDIR/fork-build/qemu-system-x86_64 (build.sh --fork --all).
#
# Prints one line per case and a closing "guest: N passed, N failed" line;
# exits non-zero if any case failed.
#
# Environment: GUEST_TIMEOUT (seconds per boot, default 150),
# GUEST_FDMONS, GUEST_IMGDIR (where the 64 MiB disk images go, default
# /dev/shm), KEEP=1 keeps each case's directory.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/guest-lib.sh"

qemu='' cases=()
while [ $# -gt 0 ]; do
    case $1 in
        --qemu) qemu=$2; shift ;;
        --case) cases+=("$2"); shift ;;
        *) guest_arg guest-test.sh "$1" ;;
    esac
    shift
done
work=$(guest_workdir "$guest_work")
qemu=${qemu:-$work/fork-build/qemu-system-x86_64}
[ ${#cases[@]} -gt 0 ] ||
    cases=(iothread-threads iothread-native iothread-io_uring mainloop-threads)
read -r -a fdmons <<< "${GUEST_FDMONS:-epoll io_uring poll}"
boot_timeout=${GUEST_TIMEOUT:-150}
[ -x "$qemu" ] || { echo "guest-test.sh: no $qemu; run build.sh --fork --all" >&2; exit 1; }

gdir=$work/guest

# ---------------------------------------------------------------------------
# 1. Packages: firmware for the fork's binary, and the guest's parts.
pkgs_install guest-test.sh seabios qemu-system-data
guest_parts "$gdir"

# ---------------------------------------------------------------------------
# 2. Cases.

# run_case NAME FDMON: boots the guest, checks console and image.
run_case() {
    local name=$1 fdmon=$2 dir img drive dev ms
    dir=$gdir/run-$name-$fdmon
    # The image on tmpfs: host I/O completes in microseconds, inside the
    # busy-poll window, so the window opens as it does on fast storage.
    img=$guest_imgdir/disk-$name-$fdmon.img
    guest_case_start "$dir" "$img"
    case $name in
        *-threads) drive="aio=threads,cache.direct=on" ;;
        *-native) drive="aio=native,cache.direct=on" ;;
        *-io_uring) drive="aio=io_uring,cache.direct=on" ;;
    esac
    dev=virtio-blk-pci,drive=d0
    case $name in
        iothread-*) dev+=",iothread=io0" ;;
    esac
    AIOLOOP_FDMON=$fdmon guest_spawn "$boot_timeout" "$dir/qemu.log" \
        "$qemu" "${guest_qemu_args[@]}" -m 512 -smp 2 \
        -initrd "$guest_initrd" -append "$guest_append" \
        -serial "file:$dir/console.log" \
        -object iothread,id=io0 \
        -drive "file=$img,format=raw,if=none,id=d0,$drive" \
        -device "$dev"
    guest_wait "$guest_pid"
    ms=$(guest_case_ms)
    guest_case_end guest "$name [$fdmon]" "$ms" \
        "$(guest_verdict "$guest_rc" "$dir" "$img" "$boot_timeout")" '' \
        console.log qemu.log
}

for b in "${fdmons[@]}"; do
    for c in "${cases[@]}"; do
        guest_tally run_case "$c" "$b"
    done
done
guest_summary guest
