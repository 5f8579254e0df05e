#!/bin/busybox sh
# SPDX-License-Identifier: MIT
# guest-init.sh - PID 1 of the guest that guest-test.sh boots.
#
# Loads the virtio modules, writes /pattern (4 MiB) to /dev/vda with
# O_DIRECT, one request at a time and from four processes at once, in
# 4 KiB and 64 KiB requests with
# pauses between passes (so the host's busy-poll window opens and closes
# while requests are in flight), reads it back with O_DIRECT and compares,
# three rounds.  With aiol.eio on the kernel command line it then checks
# that the host's injected I/O errors reach it as I/O errors.  Prints
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

eio=0
grep -q 'aiol\.eio' /proc/cmdline && eio=1
if [ $ok = 1 ] && [ $eio = 0 ]; then
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
# With aiol.eio on the command line the host fails the disk's reads at
# 8 MiB and its writes at 10 MiB with EIO (guest-test.sh, *-eio cases): each
# must reach us as an I/O error, and the disk must keep working after: the
# pattern written and read back in one pass (that disk is a FUSE export,
# which does not keep concurrent O_DIRECT writes and reads apart).
# expect_eio WHAT DD-ARGS...: the dd must fail with an I/O error.
expect_eio() {
    what=$1
    shift
    if dd "$@" 2>/tmp/err; then
        echo "guest: the failing $what succeeded"; ok=0
    elif ! grep -q 'I/O error\|Input/output error' /tmp/err; then
        echo "guest: the failing $what reported:"; cat /tmp/err; ok=0
    fi
}
if [ $ok = 1 ] && [ $eio = 1 ]; then
    dd if=/pattern of=/dev/vda bs=65536 oflag=direct conv=fsync 2>/tmp/err ||
        { echo "guest: dd w failed:"; cat /tmp/err; ok=0; }
    expect_eio read if=/dev/vda of=/dev/null bs=4096 count=1 skip=2048 iflag=direct
    expect_eio write if=/pattern of=/dev/vda bs=4096 count=1 seek=2560 oflag=direct
    dd if=/dev/vda of=/tmp/back bs=65536 count=64 iflag=direct 2>/tmp/err ||
        { echo "guest: dd r after the errors failed:"; cat /tmp/err; ok=0; }
    cmp /pattern /tmp/back || { echo "guest: read-back after the errors differs"; ok=0; }
fi
guest_done
