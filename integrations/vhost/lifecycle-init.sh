#!/bin/busybox sh
# SPDX-License-Identifier: MIT
# lifecycle-init.sh - PID 1 of the guests that lifecycle-test.sh boots.
#
# The kernel command line chooses what it does (aiol.mode=, aiol.blocks=N):
#   write    writes block i (64 KiB: slice i mod 64 of /pattern) at block
#            i of /dev/vda for i = 0..N-1, each with O_DIRECT and an fsync
#            (conv=fsync: a flush request), printing AIOL-ACK i once it is
#            acknowledged; then reads the N blocks back and compares.
#   check    reads blocks 0..N-1 and compares them with what write wrote.
#   hotplug  writes the first MiB of /pattern and says AIOL-PLUGGED; waits
#            for /dev/vda to go (the host unplugs the disk) and come back
#            (plugged again), and reads the MiB back.
# Prints AIOL-GUEST-OK or AIOL-GUEST-FAIL on the console, then powers off.
. /guest-boot.sh

mode=write blocks=1
for w in $(cat /proc/cmdline); do
    case $w in
        aiol.mode=*) mode=${w#aiol.mode=} ;;
        aiol.blocks=*) blocks=${w#aiol.blocks=} ;;
    esac
done

# check N: blocks 0..N-1 hold slices i mod 64 of the pattern.
check() {
    n=$1 left=$1
    : > /tmp/want
    while [ "$left" -gt 0 ]; do
        k=$(( left < 64 ? left : 64 ))
        dd if=/pattern bs=65536 count=$k 2>/dev/null >> /tmp/want
        left=$((left - k))
    done
    dd if=/dev/vda of=/tmp/got bs=65536 count="$n" iflag=direct 2>/tmp/err ||
        { echo "guest: read-back of $n blocks failed:"; cat /tmp/err; ok=0; return; }
    cmp /tmp/want /tmp/got || { echo "guest: $n blocks: read-back differs"; ok=0; }
    rm -f /tmp/want /tmp/got
}

# wait_vda GONE|BACK SECONDS
wait_vda() {
    i=0
    while [ $i -lt $(($2 * 20)) ]; do
        if [ "$1" = GONE ] && [ ! -b /dev/vda ]; then return 0; fi
        if [ "$1" = BACK ] && [ -b /dev/vda ]; then return 0; fi
        usleep 50000
        i=$((i + 1))
    done
    echo "guest: /dev/vda not $1 after $2 s"
    ok=0
    return 1
}

if [ $ok = 1 ]; then
    case $mode in
    write)
        i=0
        while [ $i -lt "$blocks" ]; do
            dd if=/pattern of=/dev/vda bs=65536 count=1 skip=$((i % 64)) \
                seek=$i oflag=direct conv=fsync 2>/tmp/err ||
                { echo "guest: write of block $i failed:"; cat /tmp/err; ok=0; break; }
            echo "AIOL-ACK $i"
            i=$((i + 1))
        done
        [ $ok = 1 ] && check "$blocks"
        ;;
    check)
        check "$blocks"
        ;;
    hotplug)
        dd if=/pattern of=/dev/vda bs=65536 count=16 oflag=direct conv=fsync 2>/tmp/err ||
            { echo "guest: write failed:"; cat /tmp/err; ok=0; }
        if [ $ok = 1 ]; then
            echo AIOL-PLUGGED
            wait_vda GONE 60 && echo AIOL-UNPLUGGED && wait_vda BACK 60 &&
                echo AIOL-REPLUGGED && check 16
        fi
        ;;
    *)
        echo "guest: unknown aiol.mode=$mode"
        ok=0
        ;;
    esac
fi
guest_done
