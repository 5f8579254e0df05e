#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# guest-fio.sh [--rounds R] [--runtime S] [--storage shm,disk]
#              [--disks "1 2"] [--set engines|rings] [--disk-dir DIR]
#              [--json OUT] [WORKDIR]
#
# fio inside a Linux guest (4 KiB random reads at iodepth 32, O_DIRECT,
# libaio) on one vhost-user-blk-pci disk, and on two at once, served by
# one backend process: aioloop-vhost-blk against qemu-storage-daemon,
# both started with qsd's --blockdev/--export command line, each with
# the engines qsd has for the cache mode (buffered: aio=threads and
# io_uring; cache.direct=on: native and io_uring).  Storage: "shm", 256
# MiB images on /dev/shm (the page cache serves every read); "disk", 2
# GiB images on a real filesystem (--disk-dir, default /var/tmp), the
# page cache dropped before every run (as root).  The same guest and
# images in the same run, interleaved, R rounds (default 3), medians;
# with each, the backend's CPU time (user + system, all its threads) per
# I/O, over fio's ramp and run (2 s + S of I/O at the measured rate).
#
# --set rings compares instead, on io_uring, one disk: ours on split and
# on packed rings (packed=on), and with 2 queues (fio runs a job per
# vCPU, so each queue carries I/O) on one loop thread and on two
# (--threads 2), against qsd with 2 queues on its main loop and on an
# iothread.
# The guest runs on Debian's qemu-system-x86 7.2 with -accel tcg (this
# machine's KVM runs no guest), which bounds the absolute numbers: read
# the ratios.
#
# fio is Debian's fio source, built static once into WORKDIR/fio-static/fio
# (guest-lib.sh, guest_fio_static); the guest is guest-lib.sh's kernel and an
# initramfs with fio and guest-fio-init.sh.  The daemon comes from
# DAEMON (default build/integrations/vhost/aioloop-vhost-blk).  Every
# process runs under timeout and is killed by its PID.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/../../qemu/guest-lib.sh"
storage=shm,disk ndisks="1 2" set=engines
while [ $# -gt 0 ]; do
    case $1 in
        --storage) storage=$2; shift ;;
        --disks) ndisks=$2; shift ;;
        --set) set=$2; shift ;;
        --*) guest_fio_opt "$1" "${2:-}" && shift || guest_arg guest-fio "$1" ;;
        *) guest_arg guest-fio "$1" ;;
    esac
    shift
done
work=$(guest_workdir "$guest_work")
daemon=$(realpath "${DAEMON:-$guest_repo/build/integrations/vhost/aioloop-vhost-blk}")
[ -x "$daemon" ] || { echo "guest-fio: no daemon at $daemon (make)" >&2; exit 1; }

pkgs_install guest-fio seabios qemu-system-data qemu-system-x86 \
    qemu-system-common

guest_fio_static "$work"
fio=$guest_fio

gdir=$work/guest
guest_parts "$gdir"
initrd=$gdir/initrd-fio.cpio.gz
guest_build_initrd "$initrd" "$here/guest-fio-init.sh" "$fio"

run=$(mktemp -d "$guest_imgdir/guest-fio-XXXXXX")
declare -A imgdir=()
cleanup() {
    guest_kill_all
    [ -z "${imgdir[disk]:-}" ] || rm -rf "${imgdir[disk]}"
    if [ -n "${KEEP:-}" ]; then echo "guest-fio: kept $run" >&2; else rm -rf "$run"; fi
}
trap cleanup EXIT

# make_images DIR MIB: disk0.img and disk1.img of MIB MiB of random
# bytes in DIR, synced.
make_images() {
    /usr/bin/python3 -c '
import os, sys
c = os.urandom(1 << 20)
for i in range(2):
    with open("%s/disk%d.img" % (sys.argv[1], i), "wb") as f:
        for _ in range(int(sys.argv[2])):
            f.write(c)
        os.fsync(f.fileno())' "$1" "$2"
}

# one STORAGE BACKEND DISKS ROUND: boots the guest on BACKEND (who, aio=
# and ", direct" for O_DIRECT) serving DISKS exports of the images of
# STORAGE (shm: page cache; disk: the page cache dropped first), and
# leaves fio's JSON in $run/STORAGE.BACKEND.DISKS.ROUND.json
one() {
    local storage=$1 backend=$2 disks=$3 round=$4 bpid tag i who aio direct
    local dir=${imgdir[$storage]} cmd=() qargs=() queues=1 props= exopt=
    tag=$storage.${backend//[ ,]/-}.$disks.$round
    who=${backend%% *} aio=${backend#* } aio=${aio%%,*}
    direct=off
    case $backend in *direct) direct=on ;; esac
    case $backend in *", 2 queues"*) queues=2 ;; esac
    case $backend in *", packed"*) props=,packed=on ;; esac
    if [ "$who" = aioloop ]; then
        cmd=("$daemon" --fdmon "$([ "$aio" = io_uring ] && echo io_uring || echo epoll)")
        case $backend in *", 2 threads"*) cmd+=(--threads 2) ;; esac
    else
        cmd=(qemu-storage-daemon)
        case $backend in
            *", iothread"*) cmd+=(--object iothread,id=io0); exopt=,iothread=io0 ;;
        esac
    fi
    for ((i = 0; i < disks; i++)); do
        rm -f "$run/vhost$i.sock"
        cmd+=(--blockdev "driver=file,node-name=f$i,filename=$dir/disk$i.img,aio=$aio,cache.direct=$direct"
              --export "type=vhost-user-blk,id=e$i,node-name=f$i,addr.type=unix,addr.path=$run/vhost$i.sock,writable=on,num-queues=$queues$exopt")
        qargs+=(-chardev "socket,id=vu$i,path=$run/vhost$i.sock"
                -device "vhost-user-blk-pci,chardev=vu$i,num-queues=$queues$props")
    done
    if [ "$storage" = disk ]; then
        sync
        echo 3 > /proc/sys/vm/drop_caches
    fi
    guest_spawn 300 "$run/$tag.backend.log" "${cmd[@]}"
    bpid=$guest_pid
    for ((i = 0; i < disks; i++)); do
        guest_until 10 test -S "$run/vhost$i.sock" ||
            { echo "guest-fio: $backend did not listen" >&2; cat "$run/$tag.backend.log" >&2; exit 1; }
    done
    guest_spawn $((runtime + 120)) "$run/$tag.qemu.log" qemu-system-x86_64 \
        "${guest_qemu_args[@]}" -smp 2 -m 512 \
        -object memory-backend-memfd,id=mem,size=512M,share=on -numa node,memdev=mem \
        -initrd "$initrd" -append "$guest_append fio_runtime=$runtime fio_disks=$disks fio_jobs=$queues" \
        "${qargs[@]}" -serial "file:$run/$tag.console"
    # (the backend's CPU time, read before it exits: fields 14 and 15)
    local qpid=$guest_pid dpid
    dpid=$(pgrep -P "$bpid" | head -1)
    guest_wait "$qpid"
    cut -d')' -f2 "/proc/$dpid/stat" | awk '{print $12 + $13}' > "$run/$tag.cpu"
    [ "$guest_rc" = 0 ] ||
        { echo "guest-fio: QEMU on $backend failed" >&2; tail "$run/$tag.qemu.log" "$run/$tag.console" >&2; exit 1; }
    kill -TERM "$bpid" 2>/dev/null || true
    wait "$bpid" 2>/dev/null || true
    sed -n '/^AIOL-FIO-BEGIN/,/^AIOL-FIO-END/p' "$run/$tag.console" |
        sed '1d;$d' | tr -d '\r' > "$run/$tag.json"
    echo "guest-fio: $storage, round $round, $backend, $disks disk(s) done" >&2
}

# Each side with the engines qsd has for the cache mode: buffered threads
# and io_uring, O_DIRECT native and io_uring (ours: io_uring on the
# loop's ring).
backends=("aioloop threads" "aioloop io_uring" "aioloop native, direct"
          "aioloop io_uring, direct" "qsd threads" "qsd io_uring"
          "qsd native, direct" "qsd io_uring, direct")
case $set in
    engines) ;;
    rings) backends=("aioloop io_uring" "aioloop io_uring, packed"
                     "aioloop io_uring, 2 queues"
                     "aioloop io_uring, 2 queues, 2 threads"
                     "qsd io_uring, 2 queues" "qsd io_uring, 2 queues, iothread")
           ndisks=1 ;;
    *) echo "guest-fio: --set takes engines or rings, not $set" >&2; exit 2 ;;
esac
for s in ${storage//,/ }; do
    case $s in
        shm) imgdir[shm]=$run; make_images "$run" 256 ;;
        disk) [ "$(id -u)" = 0 ] ||
                  { echo "guest-fio: dropping the page cache needs root; --storage shm" >&2; exit 1; }
              imgdir[disk]=$(mktemp -d "$disk_dir/guest-fio-XXXXXX")
              make_images "${imgdir[disk]}" 2048 ;;
        *) echo "guest-fio: --storage takes shm and disk, not $s" >&2; exit 2 ;;
    esac
done
for s in ${storage//,/ }; do
    for ((r = 1; r <= rounds; r++)); do
        for disks in $ndisks; do
            order=("${backends[@]}")
            if (( r % 2 == 0 )); then
                order=()
                for ((i = ${#backends[@]} - 1; i >= 0; i--)); do order+=("${backends[i]}"); done
            fi
            for b in "${order[@]}"; do
                one "$s" "$b" "$disks" "$r"
            done
        done
    done
done

/usr/bin/python3 - "$run" "$rounds" "$json" "$storage" "$ndisks" "$runtime" "${backends[@]}" <<'PY'
import json, os, statistics, sys
run, rounds, out, storages = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
ndisks, runtime = [int(d) for d in sys.argv[5].split()], int(sys.argv[6])
backends = sys.argv[7:]
hz = os.sysconf("SC_CLK_TCK")
res = {}
for s in storages.split(","):
    res[s] = {}
    for disks in ndisks:
        rows = res[s]["%d disk%s" % (disks, "s" if disks > 1 else "")] = {}
        for b in backends:
            runs = []
            for r in range(1, rounds + 1):
                tag = "%s.%s.%d.%d" % (s, b.replace(" ", "-").replace(",", "-"), disks, r)
                text = open("%s/%s.json" % (run, tag)).read()
                j = json.loads(text[text.index("{"):])["jobs"][0]["read"]
                ticks = int(open("%s/%s.cpu" % (run, tag)).read())
                runs.append({"iops": j["iops"],
                             "p50_us": j["clat_ns"]["percentile"]["50.000000"] / 1000,
                             "p99_us": j["clat_ns"]["percentile"]["99.000000"] / 1000,
                             "cpu_us_per_io": ticks / hz * 1e6 / (j["iops"] * (runtime + 2))})
            rows[b] = {k: statistics.median(x[k] for x in runs) for k in runs[0]}
            rows[b]["runs"] = runs
    where = {"shm": "256 MiB images on /dev/shm", "disk": "2 GiB images on a real filesystem, cold page cache"}[s]
    print("\n%s (%s):\n" % (s, where))
    print("| disks | backend | IOPS in the guest | clat p50 (us) | clat p99 (us) | backend CPU per I/O (us) | ours / qsd, same engine |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for d, rows in res[s].items():
        for b in backends:
            q = "qsd" + b[len("aioloop"):] if b.startswith("aioloop") else None
            ratio = "%.2f" % (rows[b]["iops"] / rows[q]["iops"]) if q in rows else ""
            print("| %s | %s | %.0f | %.0f | %.0f | %.1f | %s |" % (
                d, b, rows[b]["iops"], rows[b]["p50_us"], rows[b]["p99_us"],
                rows[b]["cpu_us_per_io"], ratio))
    print("\n| disks | cache | ours: best | qsd: best | ours / qsd | at or above |")
    print("|---|---|---|---|---:|---|")
    for d, rows in res[s].items():
        for direct in (False, True):
            if not any(b.endswith("direct") == direct for b in backends):
                continue
            def best(who):
                return max((rows[b]["iops"], b.split(" ", 1)[1].split(",")[0]) for b in backends
                           if b.startswith(who) and b.endswith("direct") == direct)
            (o, ob), (t, tb) = best("aioloop"), best("qsd")
            print("| %s | %s | %.0f (%s) | %.0f (%s) | %.2f | %s |" % (d, "O_DIRECT" if direct else "buffered",
                  o, ob, t, tb, o / t, "yes" if o >= t else "no"))
if out:
    json.dump(res, open(out, "w"), indent=1)
PY
