# SPDX-License-Identifier: MIT
# guest-lib.sh - sourced by the scripts that run QEMU for a test or a
# benchmark: guest-test.sh and run-tests.sh here,
# integrations/vhost/guest-test.sh and integrations/vhost/bench/guest-fio.sh.
# Each sources it by its path relative to its own directory, so it also
# brings pkgs.sh (pkgs_install).
#
# Scaffolding: guest_repo (the repository's root), guest_arg and
# guest_usage (the options every script takes: -h, WORKDIR), guest_workdir (WORKDIR, default <repo>/build-qemu10), guest_spawn and
# guest_wait (a process under `timeout`, killed by its saved PID),
# guest_until (wait for a condition), guest_case_start / guest_case_end
# (a case's directory, disk image, time and PASS/FAIL line), guest_tally
# and guest_summary (the closing "N passed, N failed" line).
#
# The guest (guest_parts GDIR), built once in GDIR: Debian's cloud kernel
# (linux-image-cloud-amd64, fetched with `apt-get download`, unpacked with
# dpkg-deb -x) and an initramfs of busybox-static, the kernel's virtio_pci
# and virtio_blk modules, a 4 MiB pattern and guest-init.sh as /init (it
# writes the pattern to /dev/vda with O_DIRECT, reads it back, prints
# AIOL-GUEST-OK or AIOL-GUEST-FAIL and powers off).  Sets guest_kernel,
# guest_initrd, guest_pattern, guest_imgdir (for disk images:
# $GUEST_IMGDIR, default /dev/shm), guest_qemu_args (the QEMU arguments
# every boot shares: TCG, q35, no defaults, firmware, kernel; each boot
# adds -initrd and -append) and guest_append (the kernel command line's
# common part).  PIDs in guest_pids (guest_spawn adds them) are SIGKILLed
# when the script exits.  guest_build_initrd (below) builds other
# initramfs images from the same parts; guest_vhost_blk gives the
# arguments of a vhost-user-blk disk, and guest_vhost_opt and
# guest_vhost_init take the options of the scripts that run the daemon;
# guest_fio_static builds the fio that benchmarks run in a guest, and
# guest_fio_bench sets up what such a benchmark needs.
guest_lib_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
guest_repo=$(cd "$guest_lib_dir/../.." && pwd)
. "$guest_lib_dir/pkgs.sh"

# guest_usage SCRIPT: prints SCRIPT's usage, its header comment (from line
# 2 to `set -e`).
guest_usage() {
    sed -n '2,/^set -e/{/^set -e/d;s/^# \{0,1\}//;p}' "$1"
}

# guest_arg WHO ARG: what every script's command line takes besides its
# own options: -h or --help prints the usage and exits, any other -option
# is an error (exit 2), anything else is the WORKDIR, kept in guest_work
# (a second one is an error).  WHO names the script in messages.
guest_work=
guest_arg() {
    case $2 in
        -h|--help) guest_usage "$0"; exit 0 ;;
        -*) echo "$1: unknown option $2" >&2; exit 2 ;;
    esac
    [ -z "$guest_work" ] ||
        { echo "$1: bad argument $2 (one WORKDIR only)" >&2; exit 2; }
    guest_work=$2
}

# guest_workdir [DIR]: the absolute path of the work directory DIR,
# default <repo>/build-qemu10 (where build.sh puts the QEMU builds).
guest_workdir() {
    realpath -m "${1:-$guest_repo/build-qemu10}"
}

# The kernel package the cloud metapackage points at today.
guest_kernel_pkg() {
    apt-cache depends linux-image-cloud-amd64 2>/dev/null |
        sed -n 's/^ *Depends: \(linux-image-[0-9].*-cloud-amd64\)$/\1/p' | head -n1
}

# Downloads and unpacks the kernel and busybox once (in $gdir/parts).
guest_fetch_parts() {
    [ -f "$gdir/parts/.done" ] && return 0
    local pkg
    pkg=$(guest_kernel_pkg)
    if [ -z "$pkg" ]; then
        apt-get update -qq
        pkg=$(guest_kernel_pkg)
    fi
    [ -n "$pkg" ] || { echo "guest-lib.sh: no linux-image-cloud-amd64 in apt" >&2; exit 1; }
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
declare -A guest_mod_seen=()
guest_mod_order() {
    local name=$1 ko dep
    [ -n "${guest_mod_seen[$name]:-}" ] && return 0
    guest_mod_seen[$name]=1
    ko=$(find "$guest_moddir" -name "$name.ko" -print -quit)
    [ -n "$ko" ] || { echo "guest-lib.sh: module $name not found" >&2; exit 1; }
    for dep in $(strings "$ko" | sed -n 's/^depends=//p' | tr ',' ' '); do
        guest_mod_order "$dep"
    done
    echo "$ko"
}

# guest_build_initrd OUT INIT [FILE...]: builds the initramfs OUT: busybox, the
# virtio modules (in /mods, load order in /mods/order), the pattern, INIT
# as /init (which sources /guest-boot.sh: guest-boot.sh), and each FILE
# (static binaries) in /bin.  Rebuilt only when
# INIT or a FILE is newer than OUT.
guest_build_initrd() {
    local out=$1 init=$2 root ko f
    shift 2
    root=$out.root
    if [ -f "$out" ]; then
        local stale=0
        for f in "$init" "$guest_lib_dir/guest-boot.sh" "$@"; do
            [ "$f" -nt "$out" ] && stale=1
        done
        [ "$stale" = 0 ] && return 0
    fi
    rm -rf "$root"
    mkdir -p "$root"/{bin,dev,proc,sys,tmp,mods}
    cp "$gdir/parts/bin/busybox" "$root/bin/busybox"
    for f in "$@"; do
        cp "$f" "$root/bin/"
    done
    guest_moddir=$(echo "$gdir"/parts/lib/modules/*)
    : > "$root/mods/order"
    # (one subshell for both, so guest_mod_seen covers both)
    for ko in $(guest_mod_order virtio_pci && guest_mod_order virtio_blk); do
        cp "$ko" "$root/mods/"
        basename "$ko" >> "$root/mods/order"
    done
    if [ ! -f "$gdir/pattern" ]; then
        # 4 MiB of a fixed pseudo-random pattern.
        /usr/bin/python3 -c '
import random, sys
r = random.Random(20261201)
sys.stdout.buffer.write(bytes(r.getrandbits(8) for _ in range(4 << 20)))' > "$gdir/pattern.tmp"
        mv "$gdir/pattern.tmp" "$gdir/pattern"
    fi
    cp "$gdir/pattern" "$root/pattern"
    cp "$init" "$root/init"
    cp "$guest_lib_dir/guest-boot.sh" "$root/guest-boot.sh"
    chmod +x "$root/init"
    (cd "$root" && find . | "$root/bin/busybox" cpio -o -H newc 2>/dev/null) |
        gzip -1 > "$out.tmp"
    mv "$out.tmp" "$out"
    rm -rf "$root"
}

# For the scripts that run fio in a guest: guest_fio_opt OPT VALUE takes
# --rounds, --runtime, --disk-dir and --json (into rounds, runtime,
# disk_dir and json, defaults 3, 10 s, /var/tmp and none) and fails on
# any other OPT.
rounds=3 runtime=10 disk_dir=/var/tmp json=
guest_fio_opt() {
    case $1 in
        --rounds) rounds=$2 ;;
        --runtime) runtime=$2 ;;
        --disk-dir) disk_dir=$2 ;;
        --json) json=$2 ;;
        *) return 1 ;;
    esac
}

# guest_fio_bench WHO WORK IMAGE MIB: what a benchmark that runs fio in a
# guest on QEMU's own disks sets up first: the static fio, the guest parts
# and their fio initramfs (in initrd), a run directory under disk_dir (in
# run; removed when the script exits unless KEEP is set) and there IMAGE,
# MIB MiB of random bytes, synced.
guest_fio_bench() {
    local who=$1 work=$2
    guest_fio_static "$work"
    gdir=$work/guest
    guest_parts "$gdir"
    initrd=$gdir/initrd-fio.cpio.gz
    guest_build_initrd "$initrd" \
        "$guest_repo/integrations/vhost/bench/guest-fio-init.sh" "$guest_fio"
    run=$(mktemp -d "$disk_dir/$who-XXXXXX")
    guest_bench_who=$who
    trap guest_fio_bench_cleanup EXIT
    /usr/bin/python3 -c '
import os, sys
c = os.urandom(1 << 20)
with open(sys.argv[1], "wb") as f:
    for _ in range(int(sys.argv[2])):
        f.write(c)
    os.fsync(f.fileno())' "$run/$3" "$4"
}
guest_fio_bench_cleanup() {
    guest_kill_all
    if [ -n "${KEEP:-}" ]; then
        echo "$guest_bench_who: kept $run" >&2
    else
        rm -rf "$run"
    fi
}

# guest_fio_static WORK: Debian's fio source (fetch-source.sh), built
# static once into WORK/fio-static/fio, for a guest initramfs; its path in
# guest_fio.
guest_fio_static() {
    local work=$1
    guest_fio=$work/fio-static/fio
    [ -x "$guest_fio" ] && return 0
    pkgs_install guest_fio_static gcc make dpkg-dev libaio-dev zlib1g-dev
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
        { echo "guest-lib.sh: building fio failed (see $work/fio-build)" >&2; exit 1; }
    strip -o "$guest_fio.tmp" "$work/fio-build/fio"
    mv "$guest_fio.tmp" "$guest_fio"
}

guest_pids=()
guest_kill_all() {
    local p
    for p in "${guest_pids[@]}"; do
        kill -KILL "$p" 2>/dev/null || true
    done
}

guest_parts() {
    gdir=$1
    mkdir -p "$gdir"
    guest_fetch_parts
    guest_build_initrd "$gdir/initrd.cpio.gz" "$guest_lib_dir/guest-init.sh"
    guest_kernel=$(echo "$gdir"/parts/boot/vmlinuz-*)
    guest_initrd=$gdir/initrd.cpio.gz
    guest_pattern=$gdir/pattern
    guest_imgdir=${GUEST_IMGDIR:-/dev/shm}
    [ -d "$guest_imgdir" ] && [ -w "$guest_imgdir" ] || guest_imgdir=$gdir
    guest_qemu_args=(-accel tcg -machine q35 -nodefaults -no-user-config
                     -display none -no-reboot
                     -L /usr/share/qemu -L /usr/share/seabios
                     -kernel "$guest_kernel")
    guest_append="console=ttyS0 panic=-1 quiet"
    trap guest_kill_all EXIT
}

# guest_vhost_blk SOCKET QUEUES [PROPS]: sets guest_vhost_args, the QEMU
# arguments of a vhost-user-blk-pci disk with QUEUES queues served on the
# unix SOCKET (PROPS: more device properties, such as packed=on), and of
# 512 MiB of guest RAM the backend can map: a shared memfd
# (memory-backend-memfd,share=on, -numa node,memdev=mem).
guest_vhost_blk() {
    guest_vhost_args=(-m 512
                      -object memory-backend-memfd,id=mem,size=512M,share=on
                      -numa node,memdev=mem
                      -chardev "socket,id=vu0,path=$1"
                      -device "vhost-user-blk-pci,chardev=vu0,num-queues=$2${3:+,$3}")
}

# For the scripts that run aioloop-vhost-blk under QEMUs: guest_vhost_opt
# OPT VALUE takes --daemon BINARY (into daemon) and --qemu BINARY (added
# to qemus); after the options, guest_vhost_init WHO checks the daemon
# (made absolute), sets work (WORKDIR) and boot_timeout (GUEST_TIMEOUT,
# default 150 s), installs Debian's QEMU and defaults qemus to it and,
# when it is built, the fork's.
daemon='' qemus=()
guest_vhost_opt() {
    case $1 in
        --daemon) daemon=$2 ;;
        --qemu) qemus+=("$2") ;;
    esac
}
guest_vhost_init() {
    [ -n "$daemon" ] && [ -x "$daemon" ] ||
        { echo "$1: --daemon BINARY (aioloop-vhost-blk) is required" >&2; exit 2; }
    daemon=$(realpath "$daemon")
    work=$(guest_workdir "$guest_work")
    boot_timeout=${GUEST_TIMEOUT:-150}
    pkgs_install "$1" seabios qemu-system-data qemu-system-x86 python3
    if [ ${#qemus[@]} -eq 0 ]; then
        qemus=(/usr/bin/qemu-system-x86_64)
        [ -x "$work/fork-build/qemu-system-x86_64" ] &&
            qemus+=("$work/fork-build/qemu-system-x86_64")
    fi
    local q
    for q in "${qemus[@]}"; do
        [ -x "$q" ] || { echo "$1: no QEMU at $q" >&2; exit 1; }
    done
}

# guest_spawn SECONDS LOG CMD...: starts CMD in the background under
# `timeout` (SIGKILL 5 s after its SIGTERM), stdout and stderr into LOG.
# Its PID goes into guest_pid and guest_pids (killed when the script
# exits).  Environment assignments before guest_spawn reach CMD.
guest_spawn() {
    local secs=$1 log=$2
    shift 2
    timeout --kill-after=5 "$secs" "$@" > "$log" 2>&1 &
    guest_pid=$!
    guest_pids+=("$guest_pid")
    if command -v gdb > /dev/null && [ "$secs" -gt 5 ]; then
        guest_stacks "$((secs - 2))" "$guest_pid" "$log.stacks" &
        guest_pids+=("$!")
    fi
}

# guest_stacks SECONDS PID OUT: when PID (a guest_spawn's `timeout`) is
# still there after SECONDS, writes every thread's backtrace of the
# command it runs to OUT (gdb), so that a hang says where it hung.
# Returns as soon as PID is gone.
guest_stacks() {
    local i child
    for ((i = 0; i < $1; i++)); do
        kill -0 "$2" 2>/dev/null || return 0
        sleep 1
    done
    child=$(pgrep -P "$2" | head -1) || return 0
    gdb -batch -p "$child" -ex 'info threads' -ex 'thread apply all bt' \
        > "$3" 2>&1 < /dev/null || true
}

# guest_wait PID: waits for PID (a guest_spawn), leaves its exit status in
# guest_rc (124 or 137: `timeout` stopped it), then SIGKILLs PID in case
# it is still there.
guest_wait() {
    guest_rc=0
    wait "$1" || guest_rc=$?
    kill -KILL "$1" 2>/dev/null || true
}

# guest_until SECONDS CMD...: runs CMD every 50 ms until it succeeds
# (returns 0) or SECONDS have passed (returns 1).
guest_until() {
    local i secs=$1
    shift
    for ((i = 0; i < secs * 20; i++)); do
        "$@" 2>/dev/null && return 0
        sleep 0.05
    done
    return 1
}

# guest_case_start DIR IMG: a case begins: DIR made afresh (its logs go
# there), IMG a fresh 64 MiB sparse disk image, the clock started.
guest_case_start() {
    guest_case_dir=$1 guest_case_img=$2
    rm -rf "$guest_case_dir"
    mkdir -p "$guest_case_dir"
    rm -f "$guest_case_img"
    truncate -s 64M "$guest_case_img"
    guest_case_t0=$(date +%s%N)
}

# guest_case_ms: milliseconds since guest_case_start.
guest_case_ms() {
    echo $(( ($(date +%s%N) - guest_case_t0) / 1000000 ))
}

# guest_verdict RC DIR IMG TIMEOUT: why a boot failed, or nothing when it
# passed: QEMU's exit status RC (124/137: `timeout` killed it), the
# guest's verdict in DIR/console.log, the pattern in the image IMG.
guest_verdict() {
    if [ "$1" = 124 ] || [ "$1" = 137 ]; then
        echo "QEMU timed out after ${4}s (hung guest)"
    elif ! grep -q '^AIOL-GUEST-OK' "$2/console.log" 2>/dev/null; then
        echo "guest did not report success (qemu exit $1)"
    elif ! cmp -s -n "$(stat -c %s "$guest_pattern")" "$guest_pattern" "$3"; then
        echo "the disk image does not hold the pattern"
    fi
}

# guest_case_end TAG LABEL MS WHY NOTE LOG...: the case guest_case_start
# began is over after MS milliseconds: its image goes.  With WHY empty it
# passed: prints "TAG: PASS LABEL (MS ms)", then ": NOTE" when NOTE is not
# empty, and removes its directory (KEEP=1 keeps it).  Otherwise prints
# "TAG: FAIL LABEL: WHY (MS ms)" and the tails of the directory's LOG
# files, keeps the directory and returns 1.
guest_case_end() {
    local tag=$1 label=$2 ms=$3 why=$4 note=$5 f
    shift 5
    rm -f "$guest_case_img"
    if [ -z "$why" ]; then
        echo "$tag: PASS $label (${ms} ms)${note:+: $note}"
        [ -n "${KEEP:-}" ] || rm -rf "$guest_case_dir"
        return 0
    fi
    echo "$tag: FAIL $label: $why (${ms} ms)"
    guest_failures+=("$tag: FAIL $label: $why (${ms} ms; logs in $guest_case_dir)")
    for f in "$@"; do
        echo "--- $guest_case_dir/$f (tail)"
        tail -n 15 "$guest_case_dir/$f" 2>/dev/null || true
        # a hung process's threads (guest_stacks), whole
        [ ! -s "$guest_case_dir/$f.stacks" ] || {
            echo "--- $guest_case_dir/$f.stacks"
            grep -v '^\[New LWP\|^\[Thread debugging' \
                "$guest_case_dir/$f.stacks" | head -n 300
        }
    done
    return 1
}

# guest_tally CMD...: runs one case, CMD, and counts it in guest_passed or
# guest_failed.
guest_passed=0 guest_failed=0 guest_failures=()
guest_tally() {
    if "$@"; then
        guest_passed=$((guest_passed + 1))
    else
        guest_failed=$((guest_failed + 1))
    fi
}

# guest_summary TAG: prints again the FAIL lines of guest_case_end (the
# logs printed after each one would push it out of a log's tail), then
# "TAG: N passed, N failed"; fails if any did.
guest_summary() {
    local f
    for f in "${guest_failures[@]}"; do
        echo "$f"
    done
    echo "$1: $guest_passed passed, $guest_failed failed"
    [ "$guest_failed" = 0 ]
}
