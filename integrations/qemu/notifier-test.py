#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""The fork's notifier batching, checked on real KVM the way a guest meets it.

    notifier-test.py [--fake-kvm SHIM] FORK_QEMU

QEMU runs with -accel kvm and -qtest (no vCPU executes; bench/qtest_virtio.py
plays the guest's virtio-pci driver) under strace, which counts the KVM
ioctls of each step.  With --fake-kvm SHIM, QEMU runs instead on that
LD_PRELOAD fake /dev/kvm (fakekvm/, built as
build/integrations/qemu/fakekvm/libfakekvm.so), which checks the notifier
ioctls against KVM's rules and logs them for the counts: the same checks
without /dev/kvm.  Checks, each in a fresh QEMU:

  - a virtio-blk-pci start costs one KVM_SET_GSI_ROUTING (1 and 64
    queues), and so does a second start after a reset;
  - a vhost-user-blk-pci start (qemu-storage-daemon) costs one as well;
  - no start grows QEMU's fd table (FDSize): the series sized it for the
    notifiers when the device was plugged;
  - a guest retargeting every vector costs one route commit per main-loop
    iteration that saw updates (qtest hands QEMU 1 KiB per read), not one
    per vector, and the vectors come back unmasked (the irqfds are
    attached again);
  - a vector masked again before the commit, and a device reset with
    retargeted vectors still queued, leave QEMU running, and the device
    starts again afterwards;
  - a machine start commits once for all its devices: two virtio-blk
    devices started by the `cont` after a migration, two vhost-user-blk
    devices restarted by stop/cont (their irqfds are attached after the
    commit, one per queue).

Every case also checks that QEMU is still alive and printed no assertion.
Exits 77 when /dev/kvm cannot create a VM here (and no --fake-kvm).
"""
import os
import shutil
import sys
import tempfile
import time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "bench"))
import notifier_bench as nb  # noqa: E402
from qtest_virtio import Qtest, VirtioPci  # noqa: E402

FAILED = []

# Irqfds a device start attaches besides one per queue: the config
# vector's (QEMU has given it one since 8.0).
CONFIG_IRQFDS = 1


def check(cond, what):
    print("  %s %s" % ("ok  " if cond else "FAIL", what))
    if not cond:
        FAILED.append(what)


class Traced:
    """A fork QEMU under strace (or on the fake KVM) with the devices of
    @case."""

    def __init__(self, qemu, case, qmp=False):
        self.tmp = tempfile.mkdtemp(prefix="ntest-")
        self.trace = os.path.join(self.tmp, "strace.log")
        self.daemon = nb.StorageDaemon(self.tmp, case.devices, case.queues) \
            if case.vhost else None
        paths = self.daemon.paths if self.daemon else []
        wrapper, env = nb.traced(self.trace)
        self.q = Qtest.launch(qemu, nb.qemu_args(case, paths),
                              wrapper=wrapper, env=env,
                              running=case.vhost, qmp=qmp)
        self.devs = [VirtioPci(self.q, 4 + i) for i in range(case.devices)]
        self.case = case
        self.pos = 0

    def ioctls(self):
        """The KVM ioctls since the last call (counts; self.sequence: the
        same in order)."""
        time.sleep(0.3)  # (strace and the fake write each line as the call
        #                   returns)
        end = os.path.getsize(self.trace)
        counts = nb.count_ioctls(self.trace, self.pos, end)
        self.sequence = nb.ioctl_sequence(self.trace, self.pos, end)
        self.pos = end
        return counts

    def close(self):
        alive = self.q.proc.poll() is None
        self.q.log.seek(0)
        log = self.q.log.read()
        self.q.close()
        if self.daemon:
            self.daemon.close()
        shutil.rmtree(self.tmp, ignore_errors=True)
        check(alive and "assert" not in log.lower(),
              "QEMU ran to the end without an assertion (%s)" % self.case.name)


def fd_table_size(q):
    """The size of QEMU's fd table (FDSize in /proc/PID/status)."""
    with open(q.pidfile) as f:
        pid = int(f.read())
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("FDSize:"):
                return int(line.split()[1])
    raise SystemExit("notifier-test: no FDSize for QEMU (pid %d)" % pid)


def start_costs_one_commit(qemu, name, queues, vhost=False, starts=1):
    t = Traced(qemu, nb.Case(name, 1, queues, vhost=vhost))
    try:
        d = t.devs[0]
        for n in range(starts):
            d.setup(queues)
            t.ioctls()
            fds = fd_table_size(t.q)
            d.driver_ok()
            c = t.ioctls()
            check(fd_table_size(t.q) == fds,
                  "%s start %d: its notifiers fit the fd table sized when "
                  "the device was plugged (%d -> %d)" % (
                      name, n + 1, fds, fd_table_size(t.q)))
            check(c["KVM_SET_GSI_ROUTING"] == 1,
                  "%s start %d: 1 route commit (%d)" % (
                      name, n + 1, c["KVM_SET_GSI_ROUTING"]))
            check(c["KVM_IRQFD"] == queues + CONFIG_IRQFDS and
                  c["KVM_IOEVENTFD"] == queues,
                  "%s start %d: an irqfd and an ioeventfd per queue, %d for "
                  "the config (%d, %d)" % (name, n + 1, CONFIG_IRQFDS,
                                           c["KVM_IRQFD"], c["KVM_IOEVENTFD"]))
            d.reset()
    finally:
        t.close()


def started(qemu, name, queues):
    """A fork QEMU whose one virtio-blk device (@queues queues) a driver
    has started; the start's ioctls are already consumed."""
    t = Traced(qemu, nb.Case(name, 1, queues))
    d = t.devs[0]
    d.setup(queues)
    d.driver_ok()
    t.ioctls()
    return t, d


def retarget_burst(qemu, queues=64):
    t, d = started(qemu, "retarget", queues)
    try:
        lines = 3 * queues
        reads = (lines * len("writel 0xe0000000 0x0\n") + 1023) // 1024 + 1
        d.retarget(range(1, queues + 1), 0x40)
        c = t.ioctls()
        check(1 <= c["KVM_SET_GSI_ROUTING"] <= reads,
              "retargeting %d vectors: %d route commits (at most one per "
              "qtest read, %d)" % (queues, c["KVM_SET_GSI_ROUTING"], reads))
        check(c["KVM_IRQFD"] == 2 * queues,
              "each vector's irqfd detached at the mask and attached again "
              "(%d KVM_IRQFD)" % c["KVM_IRQFD"])
        # the same messages again: nothing to commit
        d.retarget(range(1, queues + 1), 0x40)
        c = t.ioctls()
        check(c["KVM_SET_GSI_ROUTING"] == 0,
              "unchanged messages: no route commit (%d)"
              % c["KVM_SET_GSI_ROUTING"])
        d.reset()
    finally:
        t.close()


def masked_again_and_reset_while_queued(qemu, queues=8):
    t, d = started(qemu, "cancel", queues)
    try:
        e = d.msix_table + 16 * 1
        # vector 1: retargeted, unmasked and masked again in one iteration
        t.q.pipeline(["writel 0x%x 0x1" % (e + 12), "writel 0x%x 0x77" % (e + 8),
                      "writel 0x%x 0x0" % (e + 12), "writel 0x%x 0x1" % (e + 12)])
        t.q.read(4, d.msix_table)
        c = t.ioctls()
        check(c["KVM_SET_GSI_ROUTING"] == 1,
              "masked again before the commit: the route is still committed "
              "(%d)" % c["KVM_SET_GSI_ROUTING"])
        t.q.pipeline(["writel 0x%x 0x0" % (e + 12)])   # unmask, same message
        t.q.read(4, d.msix_table)
        c = t.ioctls()
        check(c["KVM_IRQFD"] == 1 and c["KVM_SET_GSI_ROUTING"] == 0,
              "unmasked later: its irqfd comes back, nothing to commit "
              "(%d, %d)" % (c["KVM_IRQFD"], c["KVM_SET_GSI_ROUTING"]))
        # retarget everything and reset the device before QEMU commits
        lines = []
        for v in range(1, queues + 1):
            ev = d.msix_table + 16 * v
            lines += ["writel 0x%x 0x1" % (ev + 12),
                      "writel 0x%x 0x%x" % (ev + 8, 0x90 + v),
                      "writel 0x%x 0x0" % (ev + 12)]
        lines.append("writeb 0x%x 0x0" % (d.caps[1] + 0x14))  # status 0
        t.q.pipeline(lines)
        t.q.read(4, d.msix_table)
        t.ioctls()
        d.setup(queues)
        d.driver_ok()
        c = t.ioctls()
        want = queues + CONFIG_IRQFDS
        check(c["KVM_SET_GSI_ROUTING"] == 1 and c["KVM_IRQFD"] == want,
              "reset with unmasks queued, then a new start: 1 commit, %d "
              "irqfds (%d, %d)" % (want, c["KVM_SET_GSI_ROUTING"],
                                   c["KVM_IRQFD"]))
        d.reset()
    finally:
        t.close()


def commit_before_irqfds(seq):
    """No KVM_IRQFD before the window's first route commit: an irqfd
    attached earlier could inject through a route KVM does not have."""
    first = seq.index("KVM_SET_GSI_ROUTING") if "KVM_SET_GSI_ROUTING" in seq \
        else len(seq)
    return "KVM_IRQFD" not in seq[:first]


def machine_start(qemu):
    case = nb.Case("2 virtio-blk 8q, migrated", 2, 8)
    r = nb.run_machine_start(qemu, case, strace=True)
    c = r["counts"]
    want = 2 * (8 + CONFIG_IRQFDS)
    check(c["KVM_SET_GSI_ROUTING"] == 1 and c["KVM_IRQFD"] == want,
          "cont after migration starts 2 devices: 1 route commit, %d irqfds "
          "(%d, %d)" % (want, c["KVM_SET_GSI_ROUTING"], c["KVM_IRQFD"]))
    check(commit_before_irqfds(r["sequence"]),
          "every irqfd attached after the route commit")
    if not shutil.which("qemu-storage-daemon"):
        return
    t = Traced(qemu, nb.Case("2 vhost-user-blk 4q, stop/cont", 2, 4,
                             vhost=True), qmp=True)
    try:
        for d in t.devs:
            d.setup(4)
            d.driver_ok()
        t.q.qmp("stop")
        t.ioctls()
        t.q.qmp("cont")
        c = t.ioctls()
        want = 2 * (4 + CONFIG_IRQFDS)
        check(c["KVM_SET_GSI_ROUTING"] == 1 and c["KVM_IRQFD"] == want,
              "cont restarts 2 vhost-user-blk devices: 1 route commit, %d "
              "irqfds (%d, %d)" % (want, c["KVM_SET_GSI_ROUTING"],
                                   c["KVM_IRQFD"]))
        check(commit_before_irqfds(t.sequence),
              "every irqfd attached after the route commit")
        for d in t.devs:
            d.reset()
    finally:
        t.close()


def main():
    args = sys.argv[1:]
    if len(args) == 3 and args[0] == "--fake-kvm":
        nb.use_fake_kvm(args[1])
        args = args[2:]
    if len(args) != 1:
        print(__doc__)
        return 2
    qemu = args[0]
    why = nb.kvm_usable()
    if why is not None:
        print("notifier-test: skipped: needs a usable /dev/kvm (%s)" % why)
        return 77
    print("notifier-test: %s%s" % (qemu, " on the fake KVM %s" % nb.FAKE_KVM
                                   if nb.FAKE_KVM else ""))
    start_costs_one_commit(qemu, "virtio-blk 1q", 1)
    start_costs_one_commit(qemu, "virtio-blk 64q", 64, starts=2)
    if shutil.which("qemu-storage-daemon"):
        start_costs_one_commit(qemu, "vhost-user-blk 4q", 4, vhost=True)
    else:
        check(False, "qemu-storage-daemon is installed (qemu-system-common)")
    retarget_burst(qemu)
    masked_again_and_reset_while_queued(qemu)
    machine_start(qemu)
    if FAILED:
        print("notifier-test: %d check(s) failed" % len(FAILED))
        return 1
    print("notifier-test: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
