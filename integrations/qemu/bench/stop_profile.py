#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Where a device stop's time goes: stock QEMU against the fork, on KVM.

    stop_profile.py [--rounds N] [--cases NAMES] STOCK_QEMU FORK_QEMU

The cases and the guest driver are notifier_bench.py's: a fresh QEMU per
run, the device started, then the timed stop (status 0).  Here the stop
runs under `perf record` of the scheduler's and the syscalls' tracepoints
on the QEMU process (CLOCK_MONOTONIC timestamps), and the main thread's
time from sending the write to QEMU's OK is split into:

  kvm       the KVM_IOEVENTFD and KVM_IRQFD ioctls (and any other KVM
            ioctl), kernel work that is the same for both builds;
  wait      the event loop's waits (io_uring_enter, ppoll, poll,
            epoll_wait, futex): for a virtio-blk on an iothread, the
            iothread's run of each queue's detach bottom half;
  read      read and recvmsg (vhost-user's replies, qtest's socket);
  other     every other syscall;
  user      outside syscalls: QEMU's own work.

Tracing adds a few microseconds per event, the same for both builds.
Prints one row per case and build, the medians over N rounds (default 5;
the builds alternate, the other one first every other round).  Needs
root for perf (exits 77 without /dev/kvm).
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import notifier_bench as nb  # noqa: E402
from qtest_virtio import Qtest, VirtioPci  # noqa: E402

KVM_IOCTL_TYPE = 0xAE  # _IOC_TYPE of every KVM ioctl
SYS_IOCTL = 16
WAITS = {426, 271, 7, 232, 281, 441, 202}  # io_uring_enter ... futex
READS = {0, 47}                            # read, recvmsg
PARTS = ("kvm", "wait", "read", "other", "user")
EVENT = re.compile(r"\s*\S+\s+(\d+)\s+\[\d+\]\s+([\d.]+):\s+raw_syscalls:"
                   r"(sys_enter|sys_exit):\s+NR (\d+)(?: \(([0-9a-f]+), "
                   r"([0-9a-f]+))?")


def part_of(nr, arg1):
    if nr == SYS_IOCTL and arg1 is not None and \
            (int(arg1, 16) >> 8) & 0xFF == KVM_IOCTL_TYPE:
        return "kvm"
    if nr in WAITS:
        return "wait"
    if nr in READS:
        return "read"
    return "other"


def split_stop(script, tid, t0, t1):
    """{part: seconds} of thread @tid between monotonic times t0 and t1,
    from `perf script` output @script."""
    parts = dict.fromkeys(PARTS, 0.0)
    entered = None  # (time, part) of the syscall @tid is in
    for line in script.splitlines():
        m = EVENT.match(line)
        if not m or int(m.group(1)) != tid:
            continue
        t = float(m.group(2))
        if m.group(3) == "sys_enter":
            entered = (t, part_of(int(m.group(4)), m.group(6)))
        elif entered is not None:
            s, part = entered
            entered = None
            lo, hi = max(s, t0), min(t, t1)
            if hi > lo:
                parts[part] += hi - lo
    if entered is not None and entered[0] < t1:
        parts[entered[1]] += t1 - max(entered[0], t0)
    parts["user"] = max(0.0, (t1 - t0) - sum(parts.values()))
    return parts


def profile_stop(qemu, case, tmpdir):
    """One fresh QEMU: start the case's devices, then a traced stop.
    Returns (stop seconds, {part: seconds})."""
    daemon = nb.StorageDaemon(tmpdir, case.devices, case.queues) \
        if case.vhost else None
    q = perf = None
    data = os.path.join(tmpdir, "perf.data")
    try:
        q = Qtest.launch(qemu, nb.qemu_args(case, daemon.paths if daemon
                                            else []),
                         env=nb.qemu_env(), running=case.vhost)
        devs = [VirtioPci(q, 4 + i) for i in range(case.devices)]
        for d in devs:
            d.setup(case.queues)
        for d in devs:
            d.driver_ok()
        perf = subprocess.Popen(
            ["perf", "record", "-q", "-k", "CLOCK_MONOTONIC", "-o", data,
             "-e", "raw_syscalls:sys_enter", "-e", "raw_syscalls:sys_exit",
             "-p", str(q.proc.pid)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1.0)  # (perf attaches to every thread first)
        t0 = time.clock_gettime(time.CLOCK_MONOTONIC)
        stop = sum(d.reset() for d in devs)
        t1 = time.clock_gettime(time.CLOCK_MONOTONIC)
        perf.send_signal(2)
        perf.wait(timeout=60)
        perf = None
        script = subprocess.run(["perf", "script", "-i", data], check=True,
                                capture_output=True, text=True).stdout
        return stop, split_stop(script, q.proc.pid, t0, t1)
    finally:
        if perf is not None:
            perf.kill()
            perf.wait()
        if q is not None:
            q.close()
        if daemon is not None:
            daemon.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--cases", default="virtio-blk 64q,vhost-user-blk 64q",
                    help="comma-separated case names of notifier_bench.py")
    ap.add_argument("stock")
    ap.add_argument("fork")
    a = ap.parse_args()
    why = nb.kvm_usable()
    if why is not None:
        print("stop_profile: skipped: needs a usable /dev/kvm (%s)" % why)
        return 77
    if shutil.which("perf") is None:
        print("stop_profile: perf is missing (apt-get install linux-perf)")
        return 1
    want = a.cases.split(",")
    cases = [c for c in nb.CASES if c.name in want and not c.machine]
    if not cases:
        sys.exit("stop_profile: no such case: %s" % a.cases)
    qemus = [("stock", a.stock), ("fork", a.fork)]
    print("| case | QEMU | stop (ms) | KVM ioctls | loop waits | reads | "
          "other syscalls | QEMU's own |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for case in cases:
        runs = {v: [] for v, _ in qemus}
        for n in range(a.rounds):
            for v, qemu in qemus[::-1] if n % 2 else qemus:
                tmpdir = tempfile.mkdtemp(prefix="stopprof-")
                try:
                    runs[v].append(profile_stop(qemu, case, tmpdir))
                finally:
                    shutil.rmtree(tmpdir, ignore_errors=True)
        for v, _ in qemus:
            stop = statistics.median(s for s, _ in runs[v]) * 1e3
            med = {p: statistics.median(r[p] for _, r in runs[v]) * 1e3
                   for p in PARTS}
            lo = min(r["kvm"] for _, r in runs[v]) * 1e3
            hi = max(r["kvm"] for _, r in runs[v]) * 1e3
            print("| %s | %s | %.2f | %.2f (%.2f–%.2f) | %s |" % (
                case.name, v, stop, med["kvm"], lo, hi,
                " | ".join("%.2f" % med[p] for p in PARTS[1:])))
    print()
    print("Medians over %d rounds, ms of the main thread; KVM ioctls with "
          "their range over the rounds." % a.rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
