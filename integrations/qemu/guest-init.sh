#!/bin/busybox sh
# SPDX-License-Identifier: MIT
# guest-init.sh - PID 1 of the guest that guest-test.sh boots.
#
# Loads the virtio modules, writes /pattern (4 MiB) to /dev/vda with
# O_DIRECT, one request at a time and from four processes at once, in
# 4 KiB and 64 KiB requests with
# pauses between passes (so the host's busy-poll window opens and closes
# while requests are in flight), reads it back with O_DIRECT and compares,
# three rounds.  Prints
# AIOL-GUEST-OK or AIOL-GUEST-FAIL on the console, then powers off.
. /guest-boot.sh

# run CMD...: runs a dd, reports its error output on failure.
run() {
    "$@" 2>/tmp/err || { echo "guest: $* failed:"; cat /tmp/err; ok=0; }
}

# par BS COUNT_PER_MIB DIR: four dd processes at once, one per MiB of the
# pattern, so several requests are in flight together (a guest queues the
# next one while the host still works on the last: the case that needs a
# kick while the host polls).  DIR w writes /pattern to the disk, r reads
# the disk into /tmp/back.N.
par() {
    bs=$1 count=$2 dir=$3 pids=''
    for n in 0 1 2 3; do
        if [ "$dir" = w ]; then
            dd if=/pattern of=/dev/vda bs="$bs" count="$count" \
                skip=$((n * count)) seek=$((n * count)) oflag=direct \
                2>/tmp/err.$n &
        else
            dd if=/dev/vda of=/tmp/back.$n bs="$bs" count="$count" \
                skip=$((n * count)) iflag=direct 2>/tmp/err.$n &
        fi
        pids="$pids $!"
    done
    for p in $pids; do
        wait "$p" || { echo "guest: dd $dir bs=$bs failed:"; cat /tmp/err.*; ok=0; }
    done
}

if [ $ok = 1 ]; then
    # Rounds of writes (4 KiB, then 64 KiB requests) and reads, with
    # pauses of 0-60 ms so the host's busy-poll window opens and closes
    # while requests are in flight.
    for round in 0 1 2; do
        # one request at a time: the host's window grows on fast
        # completions and the guest's next request comes as it closes
        # (conv=fsync: the device sees a flush request too)
        dd if=/pattern of=/dev/vda bs=4096 count=1024 oflag=direct conv=fsync 2>/tmp/err ||
            { echo "guest: dd w bs=4096 failed:"; cat /tmp/err; ok=0; }
        usleep $((round * 20000))
        par 65536 16 w
        usleep $((round * 30000))
        par 4096 256 r
        cat /tmp/back.0 /tmp/back.1 /tmp/back.2 /tmp/back.3 > /tmp/back
        cmp /pattern /tmp/back || { echo "guest: read-back differs"; ok=0; }
        rm -f /tmp/back /tmp/back.?
        [ $ok = 1 ] || break
    done
fi
guest_done
