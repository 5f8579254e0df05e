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
#   mainloop-io_uring  on the main loop, aio=io_uring
#   iothread-io_uring-eio, mainloop-io_uring-eio
#                      aio=io_uring on a disk whose reads at 8 MiB and
#                      writes at 10 MiB fail with EIO: the image served
#                      through a FUSE export of qemu-storage-daemon (Debian's)
#                      with blkdebug injecting the errors; the guest must
#                      see each as an I/O error and go on working
# On the io_uring fd monitor, aio=io_uring requests go on the AioContext's
# own ring; on the others it is not offered, as upstream (aio_add_sqe()
# needs a ring): those cases are listed as not run.
# Each runs once per AIOLOOP_FDMON in $GUEST_FDMONS (default: epoll
# io_uring poll).  Every QEMU runs under `timeout` and is killed by its
# saved PID whatever happens.
#
# The guest: Debian's cloud kernel (linux-image-cloud-amd64, fetched with
# `apt-get download`) and an initramfs built here from busybox-static and
# the kernel's virtio modules.  Firmware: Debian's seabios and
# qemu-system-data.  WORKDIR defaults to <repo>/build-qemu10; the binary to
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
    cases=(iothread-threads iothread-native iothread-io_uring mainloop-threads
           mainloop-io_uring iothread-io_uring-eio mainloop-io_uring-eio)
read -r -a fdmons <<< "${GUEST_FDMONS:-epoll io_uring poll}"
boot_timeout=${GUEST_TIMEOUT:-150}
[ -x "$qemu" ] || { echo "guest-test.sh: no $qemu; run build.sh --fork --all" >&2; exit 1; }

gdir=$work/guest

# ---------------------------------------------------------------------------
# 1. Packages: firmware for the fork's binary, and the guest's parts.
pkgs_install guest-test.sh seabios qemu-system-data qemu-system-common
guest_parts "$gdir"

# ---------------------------------------------------------------------------
# 2. Cases.

# eio_start DIR IMG: serves IMG at DIR/disk, a FUSE export of
# qemu-storage-daemon through blkdebug, which fails reads of the sector at
# 8 MiB and writes of the one at 10 MiB with EIO; its PID in eio_pid.
eio_start() {
    local dir=$1 img=$2
    cat > "$dir/blkdebug.conf" <<'EOF2'
[inject-error]
event = "read_aio"
errno = "5"
sector = "16384"
[inject-error]
event = "write_aio"
errno = "5"
sector = "20480"
EOF2
    touch "$dir/disk"
    guest_spawn "$boot_timeout" "$dir/qsd.log" qemu-storage-daemon \
        --blockdev "driver=blkdebug,node-name=bd,config=$dir/blkdebug.conf,image.driver=file,image.filename=$img" \
        --blockdev driver=raw,node-name=disk,file=bd \
        --export "type=fuse,id=e0,node-name=disk,mountpoint=$dir/disk,writable=on"
    eio_pid=$guest_pid
    guest_until 10 grep -q " $dir/disk fuse" /proc/mounts ||
        echo "guest-test.sh: the FUSE export did not come up" >&2
}

# eio_stop DIR: stops the export eio_start started.
eio_stop() {
    kill -TERM "$eio_pid" 2>/dev/null || true
    guest_wait "$eio_pid"
    umount "$1/disk" 2>/dev/null || true
}

# run_case NAME FDMON: boots the guest, checks console and image.
run_case() {
    local name=$1 fdmon=$2 dir img file drive dev ms append=$guest_append
    local why
    dir=$gdir/run-$name-$fdmon
    # The image on tmpfs: host I/O completes in microseconds, inside the
    # busy-poll window, so the window opens as it does on fast storage.
    img=$guest_imgdir/disk-$name-$fdmon.img
    guest_case_start "$dir" "$img"
    case $name in
        *-threads) drive="aio=threads,cache.direct=on" ;;
        *-native) drive="aio=native,cache.direct=on" ;;
        *-io_uring|*-io_uring-eio) drive="aio=io_uring,cache.direct=on" ;;
    esac
    file=$img
    if [[ $name == *-eio ]]; then
        eio_start "$dir" "$img"
        file=$dir/disk append+=" aiol.eio"
    fi
    dev=virtio-blk-pci,drive=d0
    case $name in
        iothread-*) dev+=",iothread=io0" ;;
    esac
    AIOLOOP_FDMON=$fdmon guest_spawn "$boot_timeout" "$dir/qemu.log" \
        "$qemu" "${guest_qemu_args[@]}" -m 512 -smp 2 \
        -initrd "$guest_initrd" -append "$append" \
        -serial "file:$dir/console.log" \
        -object iothread,id=io0 \
        -drive "file=$file,format=raw,if=none,id=d0,$drive" \
        -device "$dev"
    guest_wait "$guest_pid"
    ms=$(guest_case_ms)
    why=$(guest_verdict "$guest_rc" "$dir" "$img" "$boot_timeout")
    if [[ $name == *-eio ]]; then
        eio_stop "$dir"
        # the guest kernel names the failed requests
        [ -n "$why" ] ||
            grep -q 'I/O error, dev vda, sector 16384' "$dir/console.log" ||
            why="the guest did not log the read error at sector 16384"
    fi
    guest_case_end guest "$name [$fdmon]" "$ms" "$why" '' \
        console.log qemu.log qsd.log
}

# aio=io_uring needs an AioContext with a ring (aio_add_sqe()): on the
# other fd monitors it is not offered, as upstream.
for b in "${fdmons[@]}"; do
    for c in "${cases[@]}"; do
        if [[ $c == *io_uring* && $b != io_uring ]]; then
            echo "guest: $c [$b]: not run: QEMU offers aio=io_uring only on an io_uring AioContext"
            continue
        fi
        guest_tally run_case "$c" "$b"
    done
done
guest_summary guest
