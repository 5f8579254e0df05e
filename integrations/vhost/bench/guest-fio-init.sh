#!/bin/busybox sh
# SPDX-License-Identifier: MIT
# guest-fio-init.sh - PID 1 of the guest that guest-fio.sh (and
# integrations/qemu/bench/guest-fio.sh) boots: loads the
# virtio modules, runs fio (4 KiB random reads, iodepth 32 or fio_depth=N,
# libaio, O_DIRECT; fio_runtime=N seconds from the kernel command line,
# after 2 s of ramp) on /dev/vda, or with fio_disks=2 on /dev/vda and /dev/vdb at
# once (one job each, reported as one group; fio_jobs=N: N jobs per disk,
# one per vCPU, so each of the disk's queues carries I/O), prints its JSON between
# AIOL-FIO-BEGIN and AIOL-FIO-END on the console, and powers off.
. /guest-boot.sh
runtime=10 disks=1 depth=32 njobs=1
for w in $(cat /proc/cmdline); do
    case $w in
        fio_runtime=*) runtime=${w#fio_runtime=} ;;
        fio_disks=*) disks=${w#fio_disks=} ;;
        fio_depth=*) depth=${w#fio_depth=} ;;
        fio_jobs=*) njobs=${w#fio_jobs=} ;;
    esac
done
jobs="--name=vda --filename=/dev/vda"
if [ "$disks" = 2 ]; then
    i=0
    while [ ! -b /dev/vdb ] && [ $i -lt 200 ]; do
        usleep 50000
        i=$((i + 1))
    done
    jobs="$jobs --name=vdb --filename=/dev/vdb"
fi
pin=
if [ "$njobs" -gt 1 ]; then
    pin="--cpus_allowed_policy=split --cpus_allowed=0-$((njobs - 1))"
fi
echo AIOL-FIO-BEGIN
# (the options before the first --name are every job's)
fio --rw=randread --bs=4k --iodepth="$depth" --ioengine=libaio --direct=1 \
    --ramp_time=2 --runtime="$runtime" --time_based --group_reporting \
    --numjobs="$njobs" $pin \
    --output-format=json $jobs 2>&1
echo AIOL-FIO-END
poweroff -f
