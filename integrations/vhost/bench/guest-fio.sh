#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# guest-fio.sh [--rounds R] [--runtime S] [--json OUT] [WORKDIR]
#
# fio inside a Linux guest (4 KiB random reads at iodepth 32, O_DIRECT,
# libaio) on a vhost-user-blk-pci disk, its backend aioloop-vhost-blk
# (epoll and io_uring) against qemu-storage-daemon (aio=threads and
# aio=io_uring), the same guest and image in the same run, interleaved,
# R rounds (default 3), medians.  The guest runs on Debian's
# qemu-system-x86 7.2 with -accel tcg (this machine's KVM runs no guest),
# which bounds the absolute numbers: read the ratios.
#
# fio is Debian's fio source (fetch-source.sh), built static once into
# WORKDIR/fio-static/fio; the guest is guest-lib.sh's kernel and an
# initramfs with fio and guest-fio-init.sh.  The daemon comes from
# DAEMON (default build/integrations/vhost/aioloop-vhost-blk).  Every
# process runs under timeout and is killed by its PID.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/../../qemu/guest-lib.sh"
rounds=3 runtime=10 json=
while [ $# -gt 0 ]; do
    case $1 in
        --rounds) rounds=$2; shift ;;
        --runtime) runtime=$2; shift ;;
        --json) json=$2; shift ;;
        *) guest_arg guest-fio "$1" ;;
    esac
    shift
done
work=$(guest_workdir "$guest_work")
daemon=$(realpath "${DAEMON:-$guest_repo/build/integrations/vhost/aioloop-vhost-blk}")
[ -x "$daemon" ] || { echo "guest-fio: no daemon at $daemon (make)" >&2; exit 1; }

pkgs_install guest-fio seabios qemu-system-data qemu-system-x86 \
    qemu-system-common gcc make dpkg-dev libaio-dev zlib1g-dev

# fio, static, from Debian's source
fio=$work/fio-static/fio
if [ ! -x "$fio" ]; then
    mkdir -p "$work/fio-static"
    "$guest_lib_dir/fetch-source.sh" "$work" fio
    rm -rf "$work/fio-build"
    cp -a "$work/src-fio" "$work/fio-build"
    (cd "$work/fio-build" &&
     ./configure --build-static --disable-native --disable-numa \
         --disable-rdma --disable-rados --disable-rbd --disable-http \
         --disable-gfapi --disable-libnfs --disable-pmem --disable-xnvme \
         --disable-libzbc --disable-tcmalloc --disable-dfs > configure.log &&
     nice make -j"$(nproc)" fio > make.log 2>&1) ||
        { echo "guest-fio: building fio failed (see $work/fio-build)" >&2; exit 1; }
    strip -o "$fio.tmp" "$work/fio-build/fio"
    mv "$fio.tmp" "$fio"
fi

gdir=$work/guest
guest_parts "$gdir"
initrd=$gdir/initrd-fio.cpio.gz
guest_build_initrd "$initrd" "$here/guest-fio-init.sh" "$fio"

run=$(mktemp -d "$guest_imgdir/guest-fio-XXXXXX")
img=$run/disk.img
/usr/bin/python3 -c '
import os, sys
c = os.urandom(1 << 20)
with open(sys.argv[1], "wb") as f:
    for _ in range(256):
        f.write(c)' "$img"
trap 'guest_kill_all; [ -n "${KEEP:-}" ] && echo "guest-fio: kept $run" >&2 || rm -rf "$run"' EXIT

# one BACKEND ROUND: boots the guest on BACKEND, leaves fio's JSON in
# $run/BACKEND.ROUND.json
one() {
    local backend=$1 round=$2 sock=$run/vhost.sock bpid tag
    tag=${backend// /-}.$round
    rm -f "$sock"
    case $backend in
        aioloop*)
            guest_spawn 300 "$run/$tag.backend.log" "$daemon" \
                --socket "$sock" --file "$img" --fdmon "${backend#aioloop }" ;;
        qsd*)
            guest_spawn 300 "$run/$tag.backend.log" qemu-storage-daemon --blockdev \
                "driver=file,node-name=f0,filename=$img,aio=${backend#qsd }" \
                --export "type=vhost-user-blk,id=e0,node-name=f0,addr.type=unix,addr.path=$sock,writable=on" ;;
    esac
    bpid=$guest_pid
    guest_until 10 test -S "$sock" ||
        { echo "guest-fio: $backend did not listen" >&2; cat "$run/$tag.backend.log" >&2; exit 1; }
    guest_vhost_blk "$sock" 1
    guest_spawn $((runtime + 120)) "$run/$tag.qemu.log" qemu-system-x86_64 \
        "${guest_qemu_args[@]}" -smp 2 \
        -initrd "$initrd" -append "$guest_append fio_runtime=$runtime" \
        "${guest_vhost_args[@]}" -serial "file:$run/$tag.console"
    guest_wait "$guest_pid"
    [ "$guest_rc" = 0 ] ||
        { echo "guest-fio: QEMU on $backend failed" >&2; tail "$run/$tag.qemu.log" "$run/$tag.console" >&2; exit 1; }
    kill -TERM "$bpid" 2>/dev/null || true
    wait "$bpid" 2>/dev/null || true
    sed -n '/^AIOL-FIO-BEGIN/,/^AIOL-FIO-END/p' "$run/$tag.console" |
        sed '1d;$d' | tr -d '\r' > "$run/$tag.json"
    echo "guest-fio: round $round, $backend done" >&2
}

backends=("aioloop epoll" "aioloop io_uring" "qsd threads" "qsd io_uring")
for ((r = 1; r <= rounds; r++)); do
    order=("${backends[@]}")
    if (( r % 2 == 0 )); then
        order=("qsd io_uring" "qsd threads" "aioloop io_uring" "aioloop epoll")
    fi
    for b in "${order[@]}"; do
        one "$b" "$r"
    done
done

/usr/bin/python3 - "$run" "$rounds" "$json" <<'PY'
import json, statistics, sys
run, rounds, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
backends = ["aioloop epoll", "aioloop io_uring", "qsd threads", "qsd io_uring"]
peer = {"aioloop epoll": "qsd threads", "aioloop io_uring": "qsd io_uring"}
res = {}
for b in backends:
    runs = []
    for r in range(1, rounds + 1):
        text = open("%s/%s.%d.json" % (run, b.replace(" ", "-"), r)).read()
        j = json.loads(text[text.index("{"):])["jobs"][0]["read"]
        runs.append({"iops": j["iops"],
                     "p50_us": j["clat_ns"]["percentile"]["50.000000"] / 1000,
                     "p99_us": j["clat_ns"]["percentile"]["99.000000"] / 1000})
    res[b] = {k: statistics.median(x[k] for x in runs) for k in runs[0]}
    res[b]["runs"] = runs
print("| backend | IOPS in the guest | clat p50 (us) | clat p99 (us) | ours / qsd |")
print("|---|---:|---:|---:|---:|")
for b in backends:
    ratio = "%.2f" % (res[b]["iops"] / res[peer[b]]["iops"]) if b in peer else ""
    print("| %s | %.0f | %.0f | %.0f | %s |" % (b, res[b]["iops"], res[b]["p50_us"],
                                               res[b]["p99_us"], ratio))
if out:
    json.dump(res, open(out, "w"), indent=1)
PY
