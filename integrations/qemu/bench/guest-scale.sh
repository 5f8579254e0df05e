#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# guest-scale.sh [--rounds R] [--runtime S] [--idle "1 32 100"]
#                [--where "iothread main"] [--poll-max-ns N]
#                [--disk-dir DIR] [--json OUT] [--plot PNG] [WORKDIR]
#
# Does the loop stay O(1) in the number of idle devices?  Many
# virtio-blk devices on one thread, one of them busy.  fio in a TCG guest
# (4 KiB random reads, iodepth 32, libaio, O_DIRECT) on one virtio-blk-pci
# disk, with N idle virtio-blk-pci disks beside it (--idle, default 1, 32
# and 100), every disk on one --object iothread ("iothread") or on QEMU's
# main loop ("main"), on stock 10.2 (WORKDIR/stock-build, upstream's
# io_uring AioContext) and on the fork on its default fd monitor, io_uring
# (WORKDIR/fork-build).  Each idle disk has its ioeventfds and its image's
# handlers registered on the same AioContext as the busy one, so its cost
# is that of the loop's bookkeeping per handler.
#
# The busy disk is a 1 GiB image of random bytes on a real filesystem
# (--disk-dir, default /var/tmp), aio=io_uring,cache.direct=on, the page
# cache dropped before every boot (root); the idle ones are 1 MiB images
# there.  Idle disks sit on PCI multifunction slots (8 per slot).  Host
# CPU per I/O is the CPU time of the thread that serves the disks (the
# iothread, named "IO io0" with -name debug-threads=on, or QEMU's main
# thread), read from /proc between the guest's AIOL-FIO-BEGIN and
# AIOL-FIO-END console lines, divided by the requests fio made (its IOPS
# times ramp + runtime).  R interleaved rounds (default 3, every other one
# in reverse order), medians; the "paired" columns are the median of each
# round's own ratio (stock and the fork of a cell boot back to back).
# TCG's absolute numbers: read the ratios.
#
# --poll-max-ns N sets the iothread's busy-poll window (QEMU's default is
# 32768; 0 turns busy polling off).
#
# Builds: build.sh --both --all WORKDIR.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/../guest-lib.sh"
idle="1 32 100" wheres="iothread main" plot= poll_max=
while [ $# -gt 0 ]; do
    case $1 in
        --idle) idle=$2; shift ;;
        --where) wheres=$2; shift ;;
        --plot) plot=$2; shift ;;
        --poll-max-ns) poll_max=",poll-max-ns=$2"; shift ;;
        --*) guest_fio_opt "$1" "${2:-}" && shift || guest_arg guest-scale "$1" ;;
        *) guest_arg guest-scale "$1" ;;
    esac
    shift
done
work=$(guest_workdir "$guest_work")
[ "$(id -u)" = 0 ] ||
    { echo "guest-scale: dropping the page cache needs root" >&2; exit 1; }
declare -A qemu=([stock]=$work/stock-build/qemu-system-x86_64
                 [fork]=$work/fork-build/qemu-system-x86_64)
for v in "${!qemu[@]}"; do
    [ -x "${qemu[$v]}" ] ||
        { echo "guest-scale: no ${qemu[$v]}; run build.sh --both --all" >&2; exit 1; }
done

pkgs_install guest-scale seabios qemu-system-data qemu-system-common python3 \
    gnuplot-nox
guest_fio_bench guest-scale "$work" busy.img 1024
max_idle=0
for n in $idle; do if (( n > max_idle )); then max_idle=$n; fi; done
for ((i = 0; i < max_idle; i++)); do truncate -s 1M "$run/idle$i.img"; done

# disk_args WHERE N: the QEMU arguments of the busy disk (slot 2, so the
# guest names it vda) and N idle ones from slot 3 on, 8 functions a slot.
disk_args() {
    local where=$1 n=$2 i addr mf th=
    if [ "$where" = iothread ]; then th=",iothread=io0"; fi
    disks=(-drive "file=$run/busy.img,format=raw,if=none,id=d0,aio=io_uring,cache.direct=on"
           -device "virtio-blk-pci,drive=d0,bus=pcie.0,addr=02.0$th")
    for ((i = 0; i < n; i++)); do
        addr=$(printf '%02x.%x' $((3 + i / 8)) $((i % 8)))
        mf=
        if ((i % 8 == 0)); then mf=",multifunction=on"; fi
        disks+=(-drive "file=$run/idle$i.img,format=raw,if=none,id=i$i,aio=io_uring,cache.direct=on"
                -device "virtio-blk-pci,drive=i$i,bus=pcie.0,addr=$addr$mf$th")
    done
}

# cpu_ticks PID THREAD: utime + stime (clock ticks) of PID's thread named
# THREAD ("" for the main thread), or nothing if it is gone.
cpu_ticks() {
    local pid=$1 name=$2 t
    for t in /proc/"$pid"/task/*; do
        if { [ -z "$name" ] && [ "${t##*/}" = "$pid" ]; } ||
           { [ -n "$name" ] && [ "$(cat "$t/comm" 2>/dev/null)" = "$name" ]; }; then
            awk '{ print $14 + $15 }' "$t/stat" 2>/dev/null
            return 0
        fi
    done
}

# one VARIANT WHERE N ROUND: a boot; fio's JSON in TAG.json, the serving
# thread's CPU ticks over fio's run in TAG.cpu.
one() {
    local v=$1 where=$2 n=$3 round=$4 tag qpid name= t0= t1= now i th=()
    tag=$v.$where.$n.$round
    if [ "$where" = iothread ]; then th=(-object "iothread,id=io0$poll_max"); name="IO io0"; fi
    disk_args "$where" "$n"
    sync
    echo 3 > /proc/sys/vm/drop_caches
    AIOLOOP_FDMON=io_uring guest_spawn $((runtime + 240)) "$run/$tag.qemu.log" \
        "${qemu[$v]}" "${guest_qemu_args[@]}" -smp 2 -m 512 \
        -initrd "$initrd" \
        -append "$guest_append fio_runtime=$runtime" \
        -name scale,debug-threads=on "${th[@]}" "${disks[@]}" \
        -serial "file:$run/$tag.console"
    guest_until 30 pgrep -P "$guest_pid" > /dev/null ||
        { echo "guest-scale: $v did not start" >&2; exit 1; }
    qpid=$(pgrep -P "$guest_pid")
    # (sampled every 50 ms: the guest powers off right after its END
    # line, and the thread may be gone when we see it)
    for ((i = 0; i < (runtime + 230) * 20; i++)); do
        now=$(cpu_ticks "$qpid" "$name")
        if [ -z "$t0" ] && grep -q AIOL-FIO-BEGIN "$run/$tag.console" 2>/dev/null; then
            t0=$now
        fi
        if [ -n "$t0" ] && grep -q AIOL-FIO-END "$run/$tag.console" 2>/dev/null; then
            break
        fi
        [ -n "$now" ] && t1=$now
        kill -0 "$qpid" 2>/dev/null || break
        sleep 0.05
    done
    # fio's numbers are in once the END line is: a QEMU that then does
    # not exit after the guest's poweroff is stopped after 30 s, not after the
    # whole timeout, and the round kept, with a note.
    if grep -q AIOL-FIO-END "$run/$tag.console" 2>/dev/null &&
       ! guest_until 30 eval '! kill -0 "$qpid"'; then
        echo "guest-scale: $v $where $n: QEMU still running 30 s after the guest's poweroff; stopped it" >&2
        kill -TERM "$qpid" 2>/dev/null || true
        guest_wait "$guest_pid"
        guest_rc=0
    else
        guest_wait "$guest_pid"
    fi
    [ -n "$t0" ] && [ -n "$t1" ] && [ "$guest_rc" = 0 ] ||
        { echo "guest-scale: $v $where $n failed" >&2; tail "$run/$tag.qemu.log" "$run/$tag.console" >&2; exit 1; }
    echo $((t1 - t0)) > "$run/$tag.cpu"
    sed -n '/^AIOL-FIO-BEGIN/,/^AIOL-FIO-END/p' "$run/$tag.console" |
        sed '1d;$d' | tr -d '\r' > "$run/$tag.json"
    echo "guest-scale: round $round, $where, $n idle, $v done" >&2
}

variants=(stock fork)
for ((r = 1; r <= rounds; r++)); do
    for where in $wheres; do
        for n in $idle; do
            order=("${variants[@]}")
            if (( r % 2 == 0 )); then order=(fork stock); fi
            for v in "${order[@]}"; do
                one "$v" "$where" "$n" "$r"
            done
        done
    done
done

/usr/bin/python3 - "$run" "$rounds" "$runtime" "$idle" "$wheres" "$json" \
    "$plot" "$(getconf CLK_TCK)" "${variants[@]}" <<'PY'
import json, os, statistics, subprocess, sys
run, rounds, runtime = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
idle, wheres = [int(n) for n in sys.argv[4].split()], sys.argv[5].split()
out, plot, hz, variants = sys.argv[6], sys.argv[7], int(sys.argv[8]), sys.argv[9:]
res = {}
for where in wheres:
    for v in variants:
        for n in idle:
            runs = []
            for r in range(1, rounds + 1):
                tag = "%s/%s.%s.%d.%d" % (run, v, where, n, r)
                text = open(tag + ".json").read()
                j = json.loads(text[text.index("{"):])["jobs"][0]["read"]
                ticks = int(open(tag + ".cpu").read())
                reqs = j["iops"] * (runtime + 2)
                runs.append({"iops": j["iops"],
                             "p50_us": j["clat_ns"]["percentile"]["50.000000"] / 1000,
                             "cpu_us_per_io": ticks / hz * 1e6 / reqs})
            res.setdefault(where, {}).setdefault(v, {})[n] = dict(
                {k: statistics.median(x[k] for x in runs) for k in runs[0]},
                runs=runs)
# Paired ratios: the median over rounds of one round's ratio.  A cell's
# two QEMUs boot back to back, and a round's cells minutes apart, so a
# ratio within a round cancels the machine's drift between rounds.
def paired(a, b):
    return statistics.median(x["iops"] / y["iops"]
                             for x, y in zip(a["runs"], b["runs"]))
print("| thread | idle disks | QEMU | IOPS in the guest | / its own with %d idle | / stock | paired: / its own with %d idle | paired: / stock | clat p50 (us) | serving thread's CPU per I/O (us) |" % (idle[0], idle[0]))
print("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|")
for where in wheres:
    for n in idle:
        for v in variants:
            c = res[where][v][n]
            own, stock = res[where][v][idle[0]], res[where]["stock"][n]
            c["paired_own"], c["paired_stock"] = paired(c, own), paired(c, stock)
            print("| %s | %d | %s | %.0f | %.2f | %.2f | %.2f | %.2f | %.0f | %.1f |" % (
                where, n, v, c["iops"], c["iops"] / own["iops"],
                c["iops"] / stock["iops"], c["paired_own"],
                c["paired_stock"], c["p50_us"], c["cpu_us_per_io"]))
if out:
    json.dump(res, open(out, "w"), indent=1)
if plot:
    dat = os.path.join(run, "plot.dat")
    with open(dat, "w") as f:
        for n in idle:
            f.write("%d %s\n" % (n, " ".join(
                "%.0f" % res[w][v][n]["iops"] for w in wheres for v in variants)))
    cols = ["%s, %s" % (v, w) for w in wheres for v in variants]
    script = ('set terminal pngcairo size 800,500\nset output "%s"\n'
              'set title "fio 4k randread, depth 32, one busy virtio-blk disk in a TCG guest"\n'
              'set xlabel "idle virtio-blk disks on the same thread"\n'
              'set ylabel "IOPS in the guest"\nset yrange [0:*]\nset key bottom left\n'
              'set xtics (%s)\nplot %s\n') % (
        plot, ", ".join(str(n) for n in idle),
        ", ".join('"%s" using 1:%d with linespoints title "%s"' % (dat, i + 2, c)
                  for i, c in enumerate(cols)))
    subprocess.run(["gnuplot"], input=script, text=True, check=True)
PY
