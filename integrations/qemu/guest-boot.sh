# SPDX-License-Identifier: MIT
# guest-boot.sh - sourced by the guests' /init scripts (guest-init.sh,
# integrations/vhost/bench/guest-fio-init.sh); guest_build_initrd puts it
# at /guest-boot.sh.  Sets up busybox, /proc, /sys and /dev, loads the
# virtio modules in /mods/order and waits up to 10 s for /dev/vda.  Sets
# ok=1, or ok=0 after saying what went wrong.  guest_done ends a test.
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev

ok=1
for m in $(cat /mods/order); do
    insmod "/mods/$m" || { echo "guest: insmod $m failed"; ok=0; }
done
i=0
while [ ! -b /dev/vda ] && [ $i -lt 200 ]; do
    usleep 50000
    i=$((i + 1))
done
[ -b /dev/vda ] || { echo "guest: no /dev/vda"; ok=0; }

# guest_done: syncs, prints the verdict on the console (AIOL-GUEST-OK
# with ok=1, else AIOL-GUEST-FAIL) and powers off.
guest_done() {
    sync
    if [ $ok = 1 ]; then
        echo AIOL-GUEST-OK
    else
        echo AIOL-GUEST-FAIL
    fi
    poweroff -f
}
