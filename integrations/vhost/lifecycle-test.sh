#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# lifecycle-test.sh --daemon BINARY [--qemu BINARY]... [--case NAME]... [WORKDIR]
#
# aioloop-vhost-blk outliving its frontends, as qemu-storage-daemon does
# (its vhost-user-blk export keeps listening when a frontend goes): a real
# Linux guest (guest-lib.sh, -accel tcg, lifecycle-init.sh as /init) on
# each QEMU, its disk a vhost-user-blk-pci served by one daemon started
# with qsd's --blockdev/--export command line, in three cases:
#
#   kill       the guest writes 64 KiB blocks one at a time, each fsync'ed
#              and then announced (AIOL-ACK i); QEMU is SIGKILLed mid-run.
#              A second QEMU boots on the same socket, served by the same
#              daemon, and reads back every block the first guest saw
#              acknowledged.
#   reconnect  QEMU's chardev reconnects after 1 s (reconnect=1, or
#              reconnect-ms=1000 from QEMU 10.0); while the guest writes, the
#              daemon is stopped with SIGTERM (exit status 0) and a new
#              one started on the same socket and image.  QEMU reconnects,
#              the guest's writes carry on and it reads back every block.
#   hotplug    the guest writes, the disk is unplugged (QMP device_del,
#              DEVICE_DELETED) and plugged again (device_add) on the same
#              chardev; the guest sees /dev/vda go and come back and reads
#              its data back through the new device.
#
# In every case the daemon must still be serving at the end, and SIGTERM
# then ends it with exit status 0.  QEMUs: Debian's qemu-system-x86 7.2
# (installed if missing) and WORKDIR/fork-build/qemu-system-x86_64 when it
# exists.  Prints one line per case and "vhost-lifecycle: N passed, N
# failed".  --case runs only the named cases (kill, reconnect, hotplug;
# repeat it to run one several times).  Environment: GUEST_TIMEOUT (seconds per boot, default 150),
# GUEST_IMGDIR, KEEP=1 (guest-lib.sh).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/../qemu/guest-lib.sh"

cases=() runs=0

while [ $# -gt 0 ]; do
    case $1 in
        --daemon|--qemu) guest_vhost_opt "$1" "$2"; shift ;;
        --case)
            case $2 in
                kill|reconnect|hotplug) cases+=("$2") ;;
                *) echo "vhost-lifecycle: unknown case $2" >&2; exit 2 ;;
            esac
            shift ;;
        *) guest_arg vhost-lifecycle "$1" ;;
    esac
    shift
done
guest_vhost_init vhost-lifecycle
[ ${#cases[@]} -gt 0 ] || cases=(kill reconnect hotplug)
qmp=$here/qmp.py

gdir=$work/guest
guest_parts "$gdir"
initrd=$gdir/lifecycle.cpio.gz
guest_build_initrd "$initrd" "$here/lifecycle-init.sh"

# start_daemon LOG: the daemon on $sock and $img, qsd's command line;
# its PID in dpid.  Fails unless it says it listens.
start_daemon() {
    guest_spawn $((3 * boot_timeout)) "$1" "$daemon" --verbose \
        --blockdev "driver=file,node-name=disk0,filename=$img" \
        --export "type=vhost-user-blk,id=e0,node-name=disk0,addr.type=unix,addr.path=$sock,writable=on,num-queues=2"
    dpid=$guest_pid
    guest_until 10 grep -q 'listening on' "$1"
}

# stop_daemon: SIGTERM; fails unless the daemon was still there and exits 0.
stop_daemon() {
    local rc=0
    kill -0 "$dpid" 2>/dev/null || { why="the daemon was gone"; return 1; }
    kill -TERM "$dpid"
    wait "$dpid" || rc=$?
    [ "$rc" = 0 ] || { why="the daemon exited with $rc on SIGTERM"; return 1; }
}

# boot LOG MODE BLOCKS [QEMU-ARG...]: starts QEMU on $qemu in the
# background (its `timeout`'s PID in qpid), console in $dir/LOG, its own
# PID in $dir/LOG.pid.
boot() {
    local log=$1 mode=$2 blocks=$3
    shift 3
    guest_spawn "$boot_timeout" "$dir/qemu-$log" "$qemu" \
        "${guest_qemu_args[@]}" -smp 2 -m 512 \
        -object memory-backend-memfd,id=mem,size=512M,share=on \
        -numa node,memdev=mem \
        -initrd "$initrd" -append "$guest_append aiol.mode=$mode aiol.blocks=$blocks" \
        -serial "file:$dir/$log" -pidfile "$dir/$log.pid" "$@"
    qpid=$guest_pid
}

# kill_qemu LOG: SIGKILL to the QEMU booted with LOG (not to its
# `timeout`, which cannot pass SIGKILL on), and waits for it.
kill_qemu() {
    guest_until 10 test -s "$dir/$1.pid" || true
    kill -KILL "$(cat "$dir/$1.pid")"
    { guest_wait "$qpid"; } 2>/dev/null # (no "Killed" from the shell)
}

# last_ack LOG: the highest block the guest announced in $dir/LOG, or -1.
last_ack() {
    { grep -a '^AIOL-ACK ' "$dir/$1" || true; } | tail -n 1 | awk '{ print $2 + 0 } END { if (NR == 0) print -1 }'
}

acks_at_least() { [ "$(last_ack "$1")" -ge "$2" ]; }

guest_ok() { grep -aq '^AIOL-GUEST-OK' "$dir/$1"; }

# The image holds blocks 0..N-1 as the guest wrote them.
image_holds() {
    local n=$1 i
    for ((i = 0; i < n; i++)); do
        cmp -s <(dd if="$guest_pattern" bs=65536 skip=$((i % 64)) count=1 2>/dev/null) \
               <(dd if="$img" bs=65536 skip=$i count=1 2>/dev/null) || return 1
    done
}

vu_dev() { echo "-device vhost-user-blk-pci,chardev=vu0,num-queues=2${1:+,$1}"; }

case_kill() {
    local acked
    boot console-1 write 1000 -chardev "socket,id=vu0,path=$sock" $(vu_dev)
    if ! guest_until "$boot_timeout" acks_at_least console-1 40; then
        why="the first guest did not get 40 writes acknowledged"; return
    fi
    kill_qemu console-1
    acked=$(last_ack console-1)
    if ! guest_until 10 grep -q "frontend disconnected" "$dir/daemon.log"; then
        why="the daemon did not see QEMU go"; return
    fi
    boot console-2 check $((acked + 1)) -chardev "socket,id=vu0,path=$sock" $(vu_dev)
    guest_wait "$qpid"
    guest_ok console-2 ||
        { why="the second guest did not read back the $((acked + 1)) acknowledged blocks"; return; }
    note="$((acked + 1)) blocks acknowledged before SIGKILL, all read back"
}

case_reconnect() {
    local before n=120 reconnect=reconnect=1
    # reconnect (seconds) became reconnect-ms in QEMU 9.2, and went in 10.0
    [ "$(qemu_version "$qemu" | cut -d. -f1)" -lt 10 ] || reconnect=reconnect-ms=1000
    boot console-1 write $n -chardev "socket,id=vu0,path=$sock,$reconnect" $(vu_dev)
    if ! guest_until "$boot_timeout" acks_at_least console-1 30; then
        why="the guest did not get 30 writes acknowledged"; return
    fi
    stop_daemon || return
    before=$(last_ack console-1)
    mv "$dir/daemon.log" "$dir/daemon-1.log"
    start_daemon "$dir/daemon.log" || { why="the second daemon did not listen"; return; }
    guest_wait "$qpid"
    guest_ok console-1 || { why="the guest did not finish its writes and read-back"; return; }
    grep -q "frontend connected" "$dir/daemon.log" ||
        { why="QEMU did not reconnect to the second daemon"; return; }
    [ "$(last_ack console-1)" = $((n - 1)) ] || { why="writes stopped after the restart"; return; }
    image_holds $n || { why="the image does not hold the $n blocks"; return; }
    note="daemon restarted after block $before; QEMU reconnected, $n blocks read back"
}

case_hotplug() {
    local q=$dir/qmp.sock
    boot console-1 hotplug 0 -chardev "socket,id=vu0,path=$sock" \
        -device pcie-root-port,id=rp1,bus=pcie.0,chassis=1 \
        $(vu_dev id=vblk0,bus=rp1) -qmp "unix:$q,server=on,wait=off"
    if ! guest_until "$boot_timeout" grep -aq '^AIOL-PLUGGED' "$dir/console-1"; then
        why="the guest did not write to the disk"; return
    fi
    /usr/bin/python3 "$qmp" "$q" device_del '{"id": "vblk0"}' --event DEVICE_DELETED \
        > "$dir/qmp.log" 2>&1 || { why="device_del: no DEVICE_DELETED"; return; }
    if ! guest_until 60 grep -aq '^AIOL-UNPLUGGED' "$dir/console-1"; then
        why="the guest did not see the disk go"; return
    fi
    /usr/bin/python3 "$qmp" "$q" device_add \
        '{"driver": "vhost-user-blk-pci", "chardev": "vu0", "id": "vblk0", "bus": "rp1", "num-queues": 2}' \
        >> "$dir/qmp.log" 2>&1 || { why="device_add failed"; return; }
    guest_wait "$qpid"
    guest_ok console-1 || { why="the guest did not read its data back after the replug"; return; }
    note="unplugged and plugged again, data read back"
}

# run_case QEMU CASE
run_case() {
    local name ms why='' note='' dpid qpid
    qemu=$1
    name="$(basename "$(dirname "$qemu")")/${qemu##*/} $2"
    runs=$((runs + 1))
    dir=$gdir/lifecycle-$2-$$-$runs
    img=$guest_imgdir/lifecycle-$2-$$-$runs.img
    sock=$dir/vhost.sock
    guest_case_start "$dir" "$img"
    if start_daemon "$dir/daemon.log"; then
        "case_$2"
        [ -z "$why" ] && stop_daemon || true
    else
        why="the daemon did not listen"
    fi
    kill -KILL "$dpid" "$qpid" 2>/dev/null || true
    ms=$(guest_case_ms)
    guest_case_end vhost-lifecycle "$name" "$ms" "$why" "$note" \
        console-1 console-2 qemu-console-1 qemu-console-2 daemon-1.log daemon.log qmp.log
}

for q in "${qemus[@]}"; do
    for c in "${cases[@]}"; do
        guest_tally run_case "$q" "$c"
    done
done
guest_summary vhost-lifecycle
