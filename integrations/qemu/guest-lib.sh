# guest-parts.sh - sourced: guest_parts GDIR
#
# The Linux guest that guest-test.sh and integrations/vhost/guest-test.sh
# boot, built once in GDIR: Debian's cloud kernel (linux-image-cloud-amd64,
# fetched with `apt-get download`, unpacked with dpkg-deb -x) and an
# initramfs of busybox-static, the kernel's virtio_pci and virtio_blk
# modules, a 4 MiB pattern and guest-init.sh as /init (it writes the
# pattern to /dev/vda with O_DIRECT, reads it back, prints AIOL-GUEST-OK or
# AIOL-GUEST-FAIL and powers off).  Sets guest_kernel, guest_initrd,
# guest_pattern, guest_imgdir (for disk images: $GUEST_IMGDIR, default
# /dev/shm), guest_qemu_args (the QEMU arguments every boot shares: TCG,
# q35, no defaults, firmware, kernel; each boot adds -initrd and -append)
# and guest_append (the kernel command line's common part).  PIDs a
# caller adds to guest_pids are SIGKILLed when the script exits.
# guest_build_initrd (below) builds other initramfs images from the same
# parts.
guest_parts_here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

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
    [ -n "$pkg" ] || { echo "guest-parts.sh: no linux-image-cloud-amd64 in apt" >&2; exit 1; }
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
    [ -n "$ko" ] || { echo "guest-parts.sh: module $name not found" >&2; exit 1; }
    for dep in $(strings "$ko" | sed -n 's/^depends=//p' | tr ',' ' '); do
        mod_order "$dep"
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
        for f in "$init" "$guest_parts_here/guest-boot.sh" "$@"; do
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
    moddir=$(echo "$gdir"/parts/lib/modules/*)
    : > "$root/mods/order"
    # (one subshell for both, so mod_seen covers both)
    for ko in $(mod_order virtio_pci && mod_order virtio_blk); do
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
    cp "$guest_parts_here/guest-boot.sh" "$root/guest-boot.sh"
    chmod +x "$root/init"
    (cd "$root" && find . | "$root/bin/busybox" cpio -o -H newc 2>/dev/null) |
        gzip -1 > "$out.tmp"
    mv "$out.tmp" "$out"
    rm -rf "$root"
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
    fetch_parts
    guest_build_initrd "$gdir/initrd.cpio.gz" "$guest_parts_here/guest-init.sh"
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

# guest_show_logs DIR FILE...: the tails of a failed case's logs.
guest_show_logs() {
    local dir=$1 f
    shift
    for f in "$@"; do
        echo "--- $dir/$f (tail)"; tail -n 15 "$dir/$f" 2>/dev/null || true
    done
}
