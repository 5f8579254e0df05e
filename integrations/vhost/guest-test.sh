#!/usr/bin/env bash
# guest-test.sh --daemon BINARY [--qemu BINARY]... [--queues N]... [WORKDIR]
#
# A real Linux guest on a real QEMU, its disk served by aioloop-vhost-blk:
# QEMU runs with -accel tcg, guest RAM shared with the daemon
# (memory-backend-memfd,share=on and -numa node,memdev=mem) and
# `-device vhost-user-blk-pci,num-queues=N`.  The guest (guest-parts.sh:
# Debian's cloud kernel and a busybox initramfs that insmods the virtio
# modules) writes a 4 MiB pattern to /dev/vda with O_DIRECT, from one and
# from four processes, reads it back and compares, and powers off; the
# daemon sees its frontend go, flushes and exits 0; the host then checks
# the image file holds the pattern.
#
# Every QEMU (default: Debian's qemu-system-x86 7.2, installed if missing,
# and WORKDIR/fork-build/qemu-system-x86_64 when it exists) runs once per
# N (default 1 2 4; the guest gets min(N, 4) vCPUs so every queue
# carries I/O), the daemon's loop backend rotating through epoll, io_uring
# and poll.  Every process runs under `timeout` and is killed by its PID
# whatever happens.  WORKDIR defaults to <repo>/build-qemu (the guest parts
# are shared with integrations/qemu/guest-test.sh).
#
# Prints one line per case and "vhost-guest: N passed, N failed"; exits
# non-zero if any failed.  Environment: GUEST_TIMEOUT (seconds per boot,
# default 150), GUEST_IMGDIR (default /dev/shm), KEEP=1 keeps each case's
# directory.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
qdir=$repo/integrations/qemu

daemon='' work='' qemus=() queues=()
while [ $# -gt 0 ]; do
    case $1 in
        --daemon) daemon=$2; shift ;;
        --qemu) qemus+=("$2"); shift ;;
        --queues) queues+=("$2"); shift ;;
        -h|--help) sed -n '2,/^set -e/{/^set -e/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
        -*) echo "vhost-guest: unknown option $1" >&2; exit 2 ;;
        *) work=$1 ;;
    esac
    shift
done
[ -n "$daemon" ] && [ -x "$daemon" ] ||
    { echo "vhost-guest: --daemon BINARY (aioloop-vhost-blk) is required" >&2; exit 2; }
daemon=$(realpath "$daemon")
work=$(realpath -m "${work:-$repo/build-qemu}")
[ ${#queues[@]} -gt 0 ] || queues=(1 2 4)
boot_timeout=${GUEST_TIMEOUT:-150}

. "$qdir/pkgs.sh"
pkgs_install vhost-guest seabios qemu-system-data qemu-system-x86
if [ ${#qemus[@]} -eq 0 ]; then
    qemus=(/usr/bin/qemu-system-x86_64)
    [ -x "$work/fork-build/qemu-system-x86_64" ] &&
        qemus+=("$work/fork-build/qemu-system-x86_64")
fi

. "$qdir/guest-parts.sh"
gdir=$work/guest
guest_parts "$gdir"

# wait_for FILE TEXT SECONDS: until FILE contains TEXT.
wait_for() {
    local i
    for ((i = 0; i < $3 * 20; i++)); do
        grep -q "$2" "$1" 2>/dev/null && return 0
        sleep 0.05
    done
    return 1
}

# run_case QEMU N BACKEND
run_case() {
    local qemu=$1 n=$2 backend=$3 name dir img sock dpid qpid rc=0 drc=0
    local cpus=$(( n < 4 ? n : 4 )) t0 why=
    name="$(basename "$(dirname "$qemu")")/${qemu##*/} num-queues=$n daemon=$backend"
    dir=$gdir/vhost-run-$n-$backend-$$
    rm -rf "$dir"
    mkdir -p "$dir"
    img=$guest_imgdir/vhost-disk-$n-$backend-$$.img
    sock=$dir/vhost.sock
    rm -f "$img"
    truncate -s 64M "$img"
    t0=$(date +%s%N)

    timeout --kill-after=5 $((boot_timeout + 30)) "$daemon" --socket "$sock" \
        --file "$img" --num-queues "$n" --backend "$backend" \
        > "$dir/daemon.log" 2>&1 &
    dpid=$!
    guest_pids+=("$dpid")
    if ! wait_for "$dir/daemon.log" 'listening on' 10; then
        why="the daemon did not listen"
    else
        timeout --kill-after=5 "$boot_timeout" "$qemu" \
            "${guest_qemu_args[@]}" -m 512 -smp "$cpus" \
            -initrd "$guest_initrd" -append "$guest_append" \
            -object memory-backend-memfd,id=mem,size=512M,share=on \
            -numa node,memdev=mem \
            -serial "file:$dir/console.log" \
            -chardev "socket,id=vu0,path=$sock" \
            -device "vhost-user-blk-pci,chardev=vu0,num-queues=$n" \
            > "$dir/qemu.log" 2>&1 &
        qpid=$!
        guest_pids+=("$qpid")
        wait "$qpid" || rc=$?
        kill -KILL "$qpid" 2>/dev/null || true
        # the frontend is gone: the daemon flushes and exits by itself
        wait "$dpid" || drc=$?
    fi
    kill -KILL "$dpid" 2>/dev/null || true
    local ms=$(( ($(date +%s%N) - t0) / 1000000 ))
    [ -n "$why" ] || why=$(guest_verdict "$rc" "$dir" "$img" "$boot_timeout")
    if [ -n "$why" ]; then
        :
    elif [ "$drc" != 0 ]; then
        why="the daemon exited with $drc after the frontend went"
    elif ! grep -q 'frontend disconnected' "$dir/daemon.log"; then
        why="the daemon did not report the disconnect"
    elif grep -q ' 0 flushes' "$dir/daemon.log"; then
        why="the guest's fsync reached the daemon as no flush request"
    fi
    rm -f "$img"
    if [ -z "$why" ]; then
        echo "vhost-guest: PASS $name (${ms} ms): $(sed -n 's/^aioloop-vhost-blk: frontend disconnected; //p' "$dir/daemon.log")"
        [ -n "${KEEP:-}" ] || rm -rf "$dir"
        return 0
    fi
    echo "vhost-guest: FAIL $name: $why (${ms} ms)"
    guest_show_logs "$dir" console.log qemu.log daemon.log
    return 1
}

backends=(epoll io_uring poll)
passed=0 failed=0 k=0
for q in "${qemus[@]}"; do
    [ -x "$q" ] || { echo "vhost-guest: no QEMU at $q" >&2; exit 1; }
    for n in "${queues[@]}"; do
        b=${backends[k % ${#backends[@]}]}
        k=$((k + 1))
        if run_case "$q" "$n" "$b"; then
            passed=$((passed + 1))
        else
            failed=$((failed + 1))
        fi
    done
done
echo "vhost-guest: $passed passed, $failed failed"
[ "$failed" = 0 ]
