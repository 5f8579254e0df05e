#!/bin/busybox sh
# SPDX-License-Identifier: MIT
# guest-fio-init.sh - PID 1 of the guest that guest-fio.sh boots: loads the
# virtio modules, runs fio on /dev/vda (4 KiB random reads, iodepth 32,
# libaio, O_DIRECT; fio_runtime=N seconds from the kernel command line,
# after 2 s of ramp), prints its JSON between AIOL-FIO-BEGIN and
# AIOL-FIO-END on the console, and powers off.
. /guest-boot.sh
runtime=10
for w in $(cat /proc/cmdline); do
    case $w in fio_runtime=*) runtime=${w#fio_runtime=} ;; esac
done
echo AIOL-FIO-BEGIN
fio --name=randread --filename=/dev/vda --rw=randread --bs=4k \
    --iodepth=32 --ioengine=libaio --direct=1 --ramp_time=2 \
    --runtime="$runtime" --time_based --output-format=json 2>&1
echo AIOL-FIO-END
poweroff -f
