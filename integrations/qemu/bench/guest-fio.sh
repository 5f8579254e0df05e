#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# guest-fio.sh [--rounds R] [--runtime S] [--depths "1 8 32"]
#              [--disk-dir DIR] [--json OUT] [WORKDIR]
#
# fio inside a TCG guest (4 KiB random reads, libaio, O_DIRECT, at each
# iodepth of --depths) on a virtio-blk-pci disk on an iothread, with
# aio=io_uring,cache.direct=on, on two QEMUs: stock 10.2
# (WORKDIR/stock-build, upstream's io_uring AioContext) and the fork on
# libaioloop's io_uring fd monitor (WORKDIR/fork-build).  On both,
# block/io_uring.c submits with aio_add_sqe() on the iothread's own ring
# (neither offers aio=io_uring on a context without one).  The disk is a 2 GiB image of
# random bytes on a real filesystem (--disk-dir, default /var/tmp), the
# page cache dropped before every boot (root).  Interleaved, R rounds
# (default 3, every other one in reverse order), medians.  With each:
# the iothread's io_uring_enter calls, epoll and poll waits (epoll_wait,
# epoll_pwait, epoll_pwait2, ppoll, poll) and syscalls, the main thread's
# syscalls and all of QEMU's, per request: counted per thread by `perf
# stat --per-thread` on the syscall tracepoints while fio runs (between
# the guest's AIOL-FIO-BEGIN and AIOL-FIO-END lines) and divided by the
# requests fio made (its IOPS times ramp + runtime).  The absolute numbers are TCG's (this machine's KVM
# runs no guest): read the ratios.
#
# The guest is guest-lib.sh's kernel and an initramfs with the static fio
# (guest_fio_static) and integrations/vhost/bench/guest-fio-init.sh.
# Builds: build.sh --both --all WORKDIR.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/../guest-lib.sh"
depths="1 8 32"
while [ $# -gt 0 ]; do
    case $1 in
        --depths) depths=$2; shift ;;
        --*) guest_fio_opt "$1" "${2:-}" && shift || guest_arg guest-fio "$1" ;;
        *) guest_arg guest-fio "$1" ;;
    esac
    shift
done
work=$(guest_workdir "$guest_work")
[ "$(id -u)" = 0 ] ||
    { echo "guest-fio: dropping the page cache needs root" >&2; exit 1; }
declare -A qemu=([stock]=$work/stock-build/qemu-system-x86_64
                 [fork]=$work/fork-build/qemu-system-x86_64)
for v in "${!qemu[@]}"; do
    [ -x "${qemu[$v]}" ] ||
        { echo "guest-fio: no ${qemu[$v]}; run build.sh --both --all" >&2; exit 1; }
done

pkgs_install guest-fio seabios qemu-system-data qemu-system-common \
    linux-perf python3
guest_fio_bench guest-fio "$work" disk.img 2048

# What perf counts: io_uring_enter, the fd waits of epoll and poll, and
# every syscall.
perf_events=syscalls:sys_enter_io_uring_enter,syscalls:sys_enter_epoll_wait
perf_events+=,syscalls:sys_enter_epoll_pwait,syscalls:sys_enter_epoll_pwait2
perf_events+=,syscalls:sys_enter_ppoll,syscalls:sys_enter_poll,raw_syscalls:sys_enter

# one VARIANT DEPTH ROUND: boots the guest on VARIANT's QEMU, counts its
# syscalls per thread with perf stat between the guest's AIOL-FIO-BEGIN
# and AIOL-FIO-END lines (TAG.perf), and leaves fio's JSON in TAG.json.
one() {
    local v=$1 depth=$2 round=$3 tag qpid perf_pid= i
    tag=$v.$depth.$round
    sync
    echo 3 > /proc/sys/vm/drop_caches
    AIOLOOP_FDMON=io_uring guest_spawn $((runtime + 150)) "$run/$tag.qemu.log" \
        "${qemu[$v]}" "${guest_qemu_args[@]}" -smp 2 -m 512 \
        -initrd "$initrd" \
        -append "$guest_append fio_runtime=$runtime fio_depth=$depth" \
        -name fio,debug-threads=on -object iothread,id=io0 \
        -drive "file=$run/disk.img,format=raw,if=none,id=d0,aio=io_uring,cache.direct=on" \
        -device virtio-blk-pci,drive=d0,iothread=io0 \
        -serial "file:$run/$tag.console"
    guest_until 30 pgrep -P "$guest_pid" > /dev/null ||
        { echo "guest-fio: $v did not start" >&2; exit 1; }
    qpid=$(pgrep -P "$guest_pid")
    for ((i = 0; i < (runtime + 140) * 20; i++)); do
        if [ -z "$perf_pid" ] && grep -q AIOL-FIO-BEGIN "$run/$tag.console" 2>/dev/null; then
            perf stat --per-thread -x, -o "$run/$tag.perf" -e "$perf_events" \
                -p "$qpid" > /dev/null 2>&1 &
            perf_pid=$!
        fi
        if [ -n "$perf_pid" ] && grep -q AIOL-FIO-END "$run/$tag.console" 2>/dev/null; then
            break
        fi
        kill -0 "$qpid" 2>/dev/null || break
        sleep 0.05
    done
    if [ -n "$perf_pid" ]; then
        kill -INT "$perf_pid" 2>/dev/null || true
        wait "$perf_pid" || true
    fi
    guest_wait "$guest_pid"
    [ "$guest_rc" = 0 ] && [ -s "$run/$tag.perf" ] ||
        { echo "guest-fio: $v failed" >&2; tail "$run/$tag.qemu.log" "$run/$tag.console" >&2; exit 1; }
    sed -n '/^AIOL-FIO-BEGIN/,/^AIOL-FIO-END/p' "$run/$tag.console" |
        sed '1d;$d' | tr -d '\r' > "$run/$tag.json"
    echo "guest-fio: round $round, depth $depth, $v done" >&2
}

variants=(stock fork)
for ((r = 1; r <= rounds; r++)); do
    for d in $depths; do
        order=("${variants[@]}")
        (( r % 2 == 0 )) && order=(fork stock)
        for v in "${order[@]}"; do
            one "$v" "$d" "$r"
        done
    done
done

/usr/bin/python3 - "$run" "$rounds" "$runtime" "$depths" "$json" "${variants[@]}" <<'PY'
import json, statistics, sys
run, rounds, runtime = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
depths, out, variants = [int(d) for d in sys.argv[4].split()], sys.argv[5], sys.argv[6:]
res = {}
for d in depths:
    res[d] = {}
    for v in variants:
        runs = []
        for r in range(1, rounds + 1):
            tag = "%s/%s.%d.%d" % (run, v, d, r)
            text = open(tag + ".json").read()
            j = json.loads(text[text.index("{"):])["jobs"][0]["read"]
            # per thread: "comm-tid,count,unit,event,..." (qemu's threads
            # named with debug-threads=on: "IO io0" is the iothread; the
            # main thread keeps the process's name)
            per = {}
            for line in open(tag + ".perf"):
                f = line.split(",")
                if len(f) < 4 or not f[1].strip().isdigit():
                    continue
                comm = f[0].rsplit("-", 1)[0]
                who = ("iothread" if comm == "IO io0" else
                       "main" if comm.startswith("qemu-system") else "other")
                ev = f[3].split(":")[-1]
                for w in (who, "all"):
                    per.setdefault(w, {}).setdefault(ev, 0)
                    per[w][ev] += int(f[1])
            reqs = j["iops"] * (runtime + 2)
            def rate(who, events):
                return sum(per.get(who, {}).get(e, 0) for e in events) / reqs
            waits = ["sys_enter_epoll_wait", "sys_enter_epoll_pwait",
                     "sys_enter_epoll_pwait2", "sys_enter_ppoll", "sys_enter_poll"]
            runs.append({"iops": j["iops"],
                         "p50_us": j["clat_ns"]["percentile"]["50.000000"] / 1000,
                         "io_enters": rate("iothread", ["sys_enter_io_uring_enter"]),
                         "io_waits": rate("iothread", waits),
                         "io_syscalls": rate("iothread", ["sys_enter"]),
                         "main_syscalls": rate("main", ["sys_enter"]),
                         "all_syscalls": rate("all", ["sys_enter"])})
        res[d][v] = {k: statistics.median(x[k] for x in runs) for k in runs[0]}
        res[d][v]["runs"] = runs
print("| iodepth | QEMU | IOPS in the guest | clat p50 (us) | iothread: io_uring_enter | iothread: epoll/poll waits | iothread: syscalls | main thread: syscalls | QEMU: syscalls | / stock |")
print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
for d in depths:
    rows = res[d]
    for v in variants:
        r = rows[v]
        print("| %d | %s | %.0f | %.0f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f |" % (
            d, v, r["iops"], r["p50_us"], r["io_enters"], r["io_waits"],
            r["io_syscalls"], r["main_syscalls"], r["all_syscalls"],
            r["iops"] / rows["stock"]["iops"]))
print()
print("Syscalls are counted per request fio made, over fio's run only.")
if out:
    json.dump(res, open(out, "w"), indent=1)
PY
