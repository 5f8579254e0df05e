#!/usr/bin/env bash
# guest-test.sh [--qemu BINARY] [--case NAME]... [WORKDIR]
#
# Boots a real Linux guest on the fork's qemu-system-x86_64 (-accel tcg)
# and has it write a pattern to a virtio-blk disk with O_DIRECT, read it
# back and compare; the host then checks the disk image holds the pattern.
# This is how a user meets the fork: a guest whose virtqueue handler is
# busy-polled on an iothread (default poll-max-ns), which is what hung when
# the loop slept between poll_begin and poll_end.
#
# Cases (all by default):
#   iothread-threads   virtio-blk-pci on an iothread, aio=threads
#   iothread-native    on an iothread, aio=native (cache.direct=on)
#   iothread-io_uring  on an iothread, aio=io_uring
#   mainloop-threads   on the main loop, aio=threads
# Each runs once per AIOLOOP_BACKEND in $GUEST_BACKENDS (default: epoll
# io_uring poll).  Every QEMU runs under `timeout` and is killed by its
# saved PID whatever happens.
#
# The guest: Debian's cloud kernel (linux-image-cloud-amd64, fetched with
# `apt-get download`) and an initramfs built here from busybox-static and
# the kernel's virtio modules.  Firmware: Debian's seabios and
# qemu-system-data.  WORKDIR defaults to <repo>/build-qemu; the binary to
# WORKDIR/fork-build/qemu-system-x86_64 (build.sh --fork --all).
#
# Prints one line per case and a closing "guest: N passed, N failed" line;
# exits non-zero if any case failed.
#
# Environment: GUEST_TIMEOUT (seconds per boot, default 150),
# GUEST_BACKENDS, GUEST_IMGDIR (where the 64 MiB disk images go, default
# /dev/shm), KEEP=1 keeps each case's directory.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)

qemu='' work='' cases=()
while [ $# -gt 0 ]; do
    case $1 in
        --qemu) qemu=$2; shift ;;
        --case) cases+=("$2"); shift ;;
        -h|--help) sed -n '2,/^set -e/{/^set -e/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
        -*) echo "guest-test.sh: unknown option $1" >&2; exit 2 ;;
        *) work=$1 ;;
    esac
    shift
done
work=$(realpath -m "${work:-$repo/build-qemu}")
qemu=${qemu:-$work/fork-build/qemu-system-x86_64}
[ ${#cases[@]} -gt 0 ] ||
    cases=(iothread-threads iothread-native iothread-io_uring mainloop-threads)
read -r -a backends <<< "${GUEST_BACKENDS:-epoll io_uring poll}"
boot_timeout=${GUEST_TIMEOUT:-150}
[ -x "$qemu" ] || { echo "guest-test.sh: no $qemu; run build.sh --fork --all" >&2; exit 1; }

gdir=$work/guest
mkdir -p "$gdir"
imgdir=${GUEST_IMGDIR:-/dev/shm}
[ -d "$imgdir" ] && [ -w "$imgdir" ] || imgdir=$gdir

# ---------------------------------------------------------------------------
# 1. Packages: firmware for the fork's binary, and the guest's parts.
. "$here/pkgs.sh"
pkgs_install guest-test.sh seabios qemu-system-data

# The kernel package the cloud metapackage points at today.
kernel_pkg() {
    apt-cache depends linux-image-cloud-amd64 2>/dev/null |
        sed -n 's/^ *Depends: \(linux-image-[0-9].*-cloud-amd64\)$/\1/p' | head -n1
}

# Downloads and unpacks the kernel and busybox once (in $gdir/parts).
fetch_parts() {
    [ -f "$gdir/parts/.done" ] && return 0
    local pkg
    pkg=$(kernel_pkg)
    if [ -z "$pkg" ]; then
        apt-get update -qq
        pkg=$(kernel_pkg)
    fi
    [ -n "$pkg" ] || { echo "guest-test.sh: no linux-image-cloud-amd64 in apt" >&2; exit 1; }
    rm -rf "$gdir/parts" "$gdir/debs"
    mkdir -p "$gdir/debs" "$gdir/parts"
    # _apt cannot write into a root-owned directory: download as root.
    (cd "$gdir/debs" && apt-get download -qq -o APT::Sandbox::User=root \
        "$pkg" busybox-static >/dev/null)
    local d
    for d in "$gdir"/debs/*.deb; do
        dpkg-deb -x "$d" "$gdir/parts"
    done
    touch "$gdir/parts/.done"
}

# Prints the modules @1 needs, dependencies first (from each .ko's
# depends= field), each once.
declare -A mod_seen=()
mod_order() {
    local name=$1 ko dep
    [ -n "${mod_seen[$name]:-}" ] && return 0
    mod_seen[$name]=1
    ko=$(find "$moddir" -name "$name.ko" -print -quit)
    [ -n "$ko" ] || { echo "guest-test.sh: module $name not found" >&2; exit 1; }
    for dep in $(strings "$ko" | sed -n 's/^depends=//p' | tr ',' ' '); do
        mod_order "$dep"
    done
    echo "$ko"
}

# Builds $gdir/initrd.cpio.gz: busybox, the virtio modules, the pattern
# and an init that runs the check.
build_initrd() {
    local root=$gdir/initrd-root ko
    [ -f "$gdir/initrd.cpio.gz" ] && return 0
    rm -rf "$root"
    mkdir -p "$root"/{bin,dev,proc,sys,tmp,mods}
    cp "$gdir/parts/bin/busybox" "$root/bin/busybox"
    moddir=$(echo "$gdir"/parts/lib/modules/*)
    : > "$root/mods/order"
    # (one subshell for both, so mod_seen covers both)
    for ko in $(mod_order virtio_pci && mod_order virtio_blk); do
        cp "$ko" "$root/mods/"
        basename "$ko" >> "$root/mods/order"
    done
    # 4 MiB of a fixed pseudo-random pattern.
    /usr/bin/python3 -c '
import random, sys
r = random.Random(20261201)
sys.stdout.buffer.write(bytes(r.getrandbits(8) for _ in range(4 << 20)))' > "$gdir/pattern"
    cp "$gdir/pattern" "$root/pattern"
    cp "$here/guest-init.sh" "$root/init"
    chmod +x "$root/init"
    (cd "$root" && find . | "$root/bin/busybox" cpio -o -H newc 2>/dev/null) |
        gzip -1 > "$gdir/initrd.cpio.gz.tmp"
    mv "$gdir/initrd.cpio.gz.tmp" "$gdir/initrd.cpio.gz"
}

fetch_parts
build_initrd
kernel=$(echo "$gdir"/parts/boot/vmlinuz-*)

# ---------------------------------------------------------------------------
# 2. Cases.
pids=()
cleanup() {
    local p
    for p in "${pids[@]}"; do
        kill -KILL "$p" 2>/dev/null || true
    done
}
trap cleanup EXIT

# run_case NAME BACKEND: boots the guest, checks console and image.
run_case() {
    local name=$1 backend=$2 dir img drive dev rc=0 pid t0
    dir=$gdir/run-$name-$backend
    rm -rf "$dir"
    mkdir -p "$dir"
    # The image on tmpfs: host I/O completes in microseconds, inside the
    # busy-poll window, so the window opens as it does on fast storage.
    img=$imgdir/disk-$name-$backend.img
    rm -f "$img"
    truncate -s 64M "$img"
    case $name in
        *-threads) drive="aio=threads,cache.direct=on" ;;
        *-native) drive="aio=native,cache.direct=on" ;;
        *-io_uring) drive="aio=io_uring,cache.direct=on" ;;
    esac
    dev=virtio-blk-pci,drive=d0
    case $name in
        iothread-*) dev+=",iothread=io0" ;;
    esac
    t0=$(date +%s%N)
    AIOLOOP_BACKEND=$backend timeout --kill-after=5 "$boot_timeout" "$qemu" \
        -accel tcg -machine q35 -m 512 -smp 2 \
        -nodefaults -no-user-config -display none -no-reboot \
        -L /usr/share/qemu -L /usr/share/seabios \
        -serial "file:$dir/console.log" \
        -kernel "$kernel" -initrd "$gdir/initrd.cpio.gz" \
        -append "console=ttyS0 panic=-1 quiet" \
        -object iothread,id=io0 \
        -drive "file=$img,format=raw,if=none,id=d0,$drive" \
        -device "$dev" \
        > "$dir/qemu.log" 2>&1 &
    pid=$!
    pids+=("$pid")
    wait "$pid" || rc=$?
    kill -KILL "$pid" 2>/dev/null || true
    local ms=$(( ($(date +%s%N) - t0) / 1000000 ))
    local why=
    if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
        why="timed out after ${boot_timeout}s (hung guest)"
    elif ! grep -q '^AIOL-GUEST-OK' "$dir/console.log" 2>/dev/null; then
        why="guest did not report success (qemu exit $rc)"
    elif ! cmp -s -n "$(stat -c %s "$gdir/pattern")" "$gdir/pattern" "$img"; then
        why="disk image does not hold the pattern"
    fi
    rm -f "$img"
    if [ -z "$why" ]; then
        echo "guest: PASS $name [$backend] (${ms} ms)"
        [ -n "${KEEP:-}" ] || rm -rf "$dir"
        return 0
    fi
    echo "guest: FAIL $name [$backend]: $why (${ms} ms)"
    echo "--- $dir/console.log (tail)"; tail -n 15 "$dir/console.log" 2>/dev/null || true
    echo "--- $dir/qemu.log (tail)"; tail -n 15 "$dir/qemu.log" 2>/dev/null || true
    return 1
}

passed=0 failed=0
for b in "${backends[@]}"; do
    for c in "${cases[@]}"; do
        if run_case "$c" "$b"; then
            passed=$((passed + 1))
        else
            failed=$((failed + 1))
        fi
    done
done
echo "guest: $passed passed, $failed failed"
[ "$failed" = 0 ]
