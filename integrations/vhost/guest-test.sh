#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# guest-test.sh --daemon BINARY [--qemu BINARY]... [--queues N]... [WORKDIR]
#
# A real Linux guest on a real QEMU, its disk served by aioloop-vhost-blk:
# QEMU runs with -accel tcg, guest RAM shared with the daemon
# (memory-backend-memfd,share=on and -numa node,memdev=mem) and
# `-device vhost-user-blk-pci,num-queues=N`.  The guest (guest-lib.sh:
# Debian's cloud kernel and a busybox initramfs that insmods the virtio
# modules) writes a 4 MiB pattern to /dev/vda with O_DIRECT, from one and
# from four processes, reads it back and compares, and powers off; the
# daemon sees its frontend go, flushes and exits 0; the host then checks
# the image file holds the pattern.
#
# Every QEMU (default: Debian's qemu-system-x86 7.2, installed if missing,
# and WORKDIR/fork-build/qemu-system-x86_64 when it exists) runs once per
# N (default 1 2 4; the guest gets min(N, 4) vCPUs so every queue
# carries I/O) on split rings, and with packed=on (packed virtqueues) at
# the smallest and the largest N, the daemon's fd monitor rotating
# through epoll, io_uring and poll.  The daemon's exit line must count a
# packed start for every queue with packed=on, and none without.  Every process runs under `timeout` and is killed by its PID
# whatever happens.  WORKDIR defaults to <repo>/build-qemu10 (the guest parts
# are shared with integrations/qemu/guest-test.sh).
#
# Prints one line per case and "vhost-guest: N passed, N failed"; exits
# non-zero if any failed.  Environment: GUEST_TIMEOUT (seconds per boot,
# default 150), GUEST_IMGDIR (default /dev/shm), KEEP=1 keeps each case's
# directory.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/../qemu/guest-lib.sh"

queues=()
while [ $# -gt 0 ]; do
    case $1 in
        --daemon|--qemu) guest_vhost_opt "$1" "$2"; shift ;;
        --queues) queues+=("$2"); shift ;;
        *) guest_arg vhost-guest "$1" ;;
    esac
    shift
done
guest_vhost_init vhost-guest
[ ${#queues[@]} -gt 0 ] || queues=(1 2 4)

gdir=$work/guest
guest_parts "$gdir"

# run_case QEMU N FDMON RING (split or packed)
run_case() {
    local qemu=$1 n=$2 fdmon=$3 ring=$4 name dir img sock dpid drc=0 ms why=
    local cpus=$(( n < 4 ? n : 4 )) props= starts
    name="$(basename "$(dirname "$qemu")")/${qemu##*/} num-queues=$n daemon=$fdmon"
    if [ "$ring" = packed ]; then
        props=packed=on
        name="$name packed=on"
    fi
    dir=$gdir/vhost-run-$n-$fdmon-$ring-$$
    img=$guest_imgdir/vhost-disk-$n-$fdmon-$ring-$$.img
    sock=$dir/vhost.sock
    guest_case_start "$dir" "$img"

    guest_spawn $((boot_timeout + 30)) "$dir/daemon.log" "$daemon" \
        --socket "$sock" --file "$img" --num-queues "$n" --fdmon "$fdmon" \
        --exit-on-disconnect
    dpid=$guest_pid
    guest_rc=0
    if ! guest_until 10 grep -q 'listening on' "$dir/daemon.log"; then
        why="the daemon did not listen"
    else
        guest_vhost_blk "$sock" "$n" "$props"
        guest_spawn "$boot_timeout" "$dir/qemu.log" "$qemu" \
            "${guest_qemu_args[@]}" -smp "$cpus" \
            -initrd "$guest_initrd" -append "$guest_append" \
            "${guest_vhost_args[@]}" -serial "file:$dir/console.log"
        guest_wait "$guest_pid"
        # the frontend is gone: the daemon flushes and exits by itself
        # (--exit-on-disconnect)
        wait "$dpid" || drc=$?
    fi
    kill -KILL "$dpid" 2>/dev/null || true
    ms=$(guest_case_ms)
    [ -n "$why" ] || why=$(guest_verdict "$guest_rc" "$dir" "$img" "$boot_timeout")
    if [ -n "$why" ]; then
        :
    elif [ "$drc" != 0 ]; then
        why="the daemon exited with $drc after the frontend went"
    elif ! grep -q 'frontend disconnected' "$dir/daemon.log"; then
        why="the daemon did not report the disconnect"
    elif grep -q ' 0 flushes' "$dir/daemon.log"; then
        why="the guest's fsync reached the daemon as no flush request"
    else
        # "N ring starts (K packed)": with packed=on the guest's driver
        # starts every queue packed (the firmware reads its boot disk
        # before, on split rings); without it, nothing is packed
        starts=$(sed -n 's/.* ring starts (\([0-9]*\) packed).*/\1/p' \
                 "$dir/daemon.log")
        if [ -z "$starts" ]; then
            why="no ring starts in the daemon's exit line"
        elif [ "$ring" = packed ] && [ "$starts" -lt "$n" ]; then
            why="$starts of $n queues started packed under packed=on"
        elif [ "$ring" = split ] && [ "$starts" != 0 ]; then
            why="$starts rings started packed without packed=on"
        fi
    fi
    guest_case_end vhost-guest "$name" "$ms" "$why" \
        "$(sed -n 's/^aioloop-vhost-blk: frontend disconnected; //p' "$dir/daemon.log")" \
        console.log qemu.log daemon.log
}

fdmons=(epoll io_uring poll)
k=0
packed_queues=("${queues[0]}")
[ ${#queues[@]} -lt 2 ] || packed_queues+=("${queues[-1]}")
for q in "${qemus[@]}"; do
    for ring in split packed; do
        if [ $ring = split ]; then ns=("${queues[@]}"); else ns=("${packed_queues[@]}"); fi
        for n in "${ns[@]}"; do
            b=${fdmons[k % ${#fdmons[@]}]}
            k=$((k + 1))
            guest_tally run_case "$q" "$n" "$b" "$ring"
        done
    done
done
guest_summary vhost-guest
