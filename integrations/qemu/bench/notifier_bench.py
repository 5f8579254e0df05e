#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Device start and stop cost on real KVM: stock QEMU against the fork.

    notifier_bench.py [--rounds N] [--quick] [--out DIR] [--fake-kvm SHIM]
                      STOCK_QEMU FORK_QEMU

Each case is a fresh QEMU (-accel kvm -S -qtest: no vCPU runs, which PVM's
nested KVM needs) with the devices of the case; qtest_virtio.py plays the
guest driver up to the write that starts the device (DRIVER_OK) and the
write that stops it (status 0), and times both (from sending the write to
QEMU's OK).  The two QEMUs take turns within a round, in the other order
every other round, so machine noise hits both alike; a cell is the median over rounds.  One more run per case
and QEMU under `strace -f -e trace=ioctl` counts, for the start alone, the
KVM_SET_GSI_ROUTING, KVM_IOEVENTFD and KVM_IRQFD calls (strace names
them).

Cases (the fork's KVM notifier batching, docs/qemu.md):
  virtio-blk-pci with an iothread and 1, 64 or 256 queues;
  8 virtio-blk-pci devices with 64 queues each (started one after the
    other; times and counts are the sum);
  vhost-user-blk-pci with 1 and 64 queues against qemu-storage-daemon
    (Debian's qemu-system-common).

With --fake-kvm SHIM (the LD_PRELOAD fake /dev/kvm built as
build/integrations/qemu/fakekvm/libfakekvm.so) every QEMU runs on that
fake instead of /dev/kvm, and the counts come from the log it writes
(AIOL_FAKE_KVM_LOG, one strace-like line per ioctl) instead of strace:
the same cases where /dev/kvm is missing (times then measure the fake).

Prints a markdown table; writes DIR/notifier-bench.json and .dat (for
gnuplot) when --out is given.  Exits 77 when /dev/kvm is missing or
cannot create a VM (and no --fake-kvm).
"""
import argparse
import fcntl
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from qtest_virtio import Qtest, QtestError, VirtioPci  # noqa: E402

KVM_CREATE_VM = 0xAE01
FIRMWARE = ["-L", "/usr/share/qemu", "-L", "/usr/share/seabios"]
IOCTLS = ("KVM_SET_GSI_ROUTING", "KVM_IOEVENTFD", "KVM_IRQFD")
STRACE = ["strace", "-f", "-qq", "-e", "trace=ioctl", "-e", "signal=none",
          "-o"]
# On the fake KVM, the wrapper in strace's place: a shell that forks QEMU,
# so that QEMU, as under strace, gets an fd table sized by the fds open
# when it is forked, not by ours (a table an exec inherits keeps its size:
# with one of ours above 63, FDSize would be 256 from the start and the
# fd-table checks of notifier-test.py could not fail).
FORK = ["sh", "-c", '"$@"; exit $?', "sh"]
# The fake /dev/kvm QEMU runs on (use_fake_kvm()), or None: real KVM.
FAKE_KVM = None


def use_fake_kvm(shim):
    """Every QEMU from now on runs with LD_PRELOAD=@shim (the fake KVM),
    which also logs the ioctls that strace would count."""
    global FAKE_KVM
    FAKE_KVM = os.path.abspath(shim)


def qemu_env(log=None):
    """The environment of a QEMU: None (ours) on real KVM; with the fake
    KVM, LD_PRELOAD and (with @log) AIOL_FAKE_KVM_LOG."""
    if FAKE_KVM is None:
        return None
    env = dict(os.environ, LD_PRELOAD=FAKE_KVM)
    if log is not None:
        env["AIOL_FAKE_KVM_LOG"] = log
    return env


def traced(log):
    """(wrapper, env) for Qtest.launch() of a QEMU whose KVM ioctls go to
    @log in strace's format: strace on real KVM, the fake's own log."""
    if FAKE_KVM is None:
        return STRACE + [log], None
    open(log, "a").close()
    return FORK, qemu_env(log)


def kvm_usable():
    """None, or why KVM (or the fake KVM) cannot run these cases here."""
    if FAKE_KVM is not None:
        return None if os.path.isfile(FAKE_KVM) else \
            "%s: no such file (ninja -C build)" % FAKE_KVM
    try:
        fd = os.open("/dev/kvm", os.O_RDWR | os.O_CLOEXEC)
    except OSError as e:
        return "/dev/kvm: %s" % e.strerror
    try:
        vm = fcntl.ioctl(fd, KVM_CREATE_VM, 0)
        os.close(vm)
    except OSError as e:
        return "KVM_CREATE_VM: %s" % e.strerror
    finally:
        os.close(fd)
    return None


class Case:
    def __init__(self, name, devices, queues, vhost=False, burst=False,
                 machine=False):
        self.name, self.devices, self.queues, self.vhost = \
            name, devices, queues, vhost
        self.burst = burst  # also time a guest retargeting every vector
        # start all devices at once: the `cont` of a VM whose devices were
        # started before it migrated (run_machine_start())
        self.machine = machine


CASES = [
    Case("virtio-blk 1q", 1, 1),
    Case("virtio-blk 64q", 1, 64),
    Case("virtio-blk 256q", 1, 256),
    Case("virtio-blk 8x64q", 8, 64),
    Case("virtio-blk 8x64q, machine start", 8, 64, machine=True),
    Case("vhost-user-blk 1q", 1, 1, vhost=True),
    Case("vhost-user-blk 64q", 1, 64, vhost=True),
    Case("MSI burst virtio-blk 64q", 1, 64, burst=True),
    Case("MSI burst vhost-user-blk 64q", 1, 64, vhost=True, burst=True),
]


class StorageDaemon:
    """qemu-storage-daemon exporting one null block device per socket."""

    def __init__(self, tmpdir, devices, queues):
        self.paths = [os.path.join(tmpdir, "vub%d.sock" % i)
                      for i in range(devices)]
        cmd = ["qemu-storage-daemon"]
        for i, p in enumerate(self.paths):
            cmd += ["--blockdev", "driver=null-co,node-name=n%d" % i,
                    "--export", "type=vhost-user-blk,id=e%d,node-name=n%d,"
                    "writable=on,num-queues=%d,addr.type=unix,addr.path=%s"
                    % (i, i, queues, p)]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE)
        deadline = time.monotonic() + 20
        while not all(os.path.exists(p) for p in self.paths):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise QtestError("qemu-storage-daemon did not start: %s"
                                 % self.proc.stderr.read().decode()[-2000:])
            time.sleep(0.01)

    def close(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def qemu_args(case, vub_paths):
    args = ["-machine", "pc,accel=kvm", "-m", "128"]
    if not case.vhost:
        args = FIRMWARE + args   # (the vhost cases run on a HLT firmware)
    if case.vhost:
        args += ["-object", "memory-backend-memfd,id=mem,size=128M,share=on",
                 "-machine", "memory-backend=mem"]
    for i in range(case.devices):
        slot = 4 + i
        if case.vhost:
            args += ["-chardev", "socket,id=c%d,path=%s" % (i, vub_paths[i]),
                     "-device", "vhost-user-blk-pci,chardev=c%d,num-queues=%d,"
                     "addr=0x%x.0,disable-legacy=on" % (i, case.queues, slot)]
        else:
            args += ["-object", "iothread,id=io%d" % i,
                     "-blockdev", "driver=null-co,node-name=d%d" % i,
                     "-device", "virtio-blk-pci,drive=d%d,num-queues=%d,"
                     "iothread=io%d,addr=0x%x.0,disable-legacy=on"
                     % (i, case.queues, i, slot)]
    return args


def ioctl_sequence(path, start, end):
    """The KVM ioctls (of IOCTLS) strace (or the fake KVM) logged between
    byte offsets start and end, in order."""
    seq = []
    with open(path, errors="replace") as f:
        f.seek(start)
        for line in f.read(end - start).splitlines():
            m = re.search(r"ioctl\(\d+, (KVM_[A-Z_]+)", line)
            if m and m.group(1) in IOCTLS:
                seq.append(m.group(1))
    return seq


def count_ioctls(path, start, end):
    """How many of each of IOCTLS strace logged between start and end."""
    counts = dict.fromkeys(IOCTLS, 0)
    for name in ioctl_sequence(path, start, end):
        counts[name] += 1
    return counts


def run_case(qemu, case, strace=False):
    """One fresh QEMU.  Returns {"start", "stop", "burst"} seconds (burst
    None unless case.burst) and, with @strace, {"counts", "burst_counts"}:
    the KVM ioctls of the start and of the burst."""
    tmpdir = tempfile.mkdtemp(prefix="nbench-")
    daemon = StorageDaemon(tmpdir, case.devices, case.queues) \
        if case.vhost else None
    trace = os.path.join(tmpdir, "strace.log")
    wrapper, env = traced(trace) if strace else ([], qemu_env())
    q = None
    res = {"burst": None}

    def mark():
        if strace:
            time.sleep(0.3)  # (strace writes each line as the call returns)
            return os.path.getsize(trace)
        return 0

    try:
        q = Qtest.launch(qemu, qemu_args(case, daemon.paths if daemon else []),
                         wrapper=wrapper, env=env, running=case.vhost)
        devs = [VirtioPci(q, 4 + i) for i in range(case.devices)]
        for d in devs:
            d.setup(case.queues)
        m0 = mark()
        res["start"] = sum(d.driver_ok() for d in devs)
        m1 = mark()
        if strace:
            res["counts"] = count_ioctls(trace, m0, m1)
        if case.burst:
            res["burst"] = sum(d.retarget(range(1, case.queues + 1), 0x40)
                               for d in devs)
            m2 = mark()
            if strace:
                res["burst_counts"] = count_ioctls(trace, m1, m2)
        res["stop"] = sum(d.reset() for d in devs)
        return res
    finally:
        if q is not None:
            q.close()
        if daemon is not None:
            daemon.close()
        shutil.rmtree(tmpdir, ignore_errors=True)


def _wait(q, what, done, timeout=120):
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise QtestError("timed out waiting for %s" % what)
        time.sleep(0.02)


def run_machine_start(qemu, case, strace=False):
    """Devices that start together: a VM whose devices a driver started is
    migrated to a file, loaded by a fresh QEMU (-incoming, paused) and
    continued; `cont` starts every device in one vm_start.  Returns
    {"start": seconds of the cont, "stop": None, "burst": None} and with
    @strace the "counts" of the cont."""
    tmpdir = tempfile.mkdtemp(prefix="nbench-mig-")
    mig = os.path.join(tmpdir, "vm.mig")
    trace = os.path.join(tmpdir, "strace.log")
    args = qemu_args(case, [])
    res = {"stop": None, "burst": None}
    a = b = None
    try:
        a = Qtest.launch(qemu, args, hlt_bios=True, qmp=True, env=qemu_env())
        for i in range(case.devices):
            d = VirtioPci(a, 4 + i)
            d.setup(case.queues)
            d.driver_ok()
        a.qmp("migrate", uri="exec:cat > %s" % mig)
        _wait(a, "the migration", lambda: a.qmp("query-migrate").get(
            "status") in ("completed", "failed"))
        if a.qmp("query-migrate")["status"] != "completed":
            raise QtestError("migration failed")
        a.close()
        a = None
        wrapper, env = traced(trace) if strace else ([], qemu_env())
        b = Qtest.launch(qemu, args + ["-incoming", "defer"], hlt_bios=True,
                         qmp=True, wrapper=wrapper, env=env)
        b.qmp("migrate-incoming", uri="exec:cat %s" % mig)
        _wait(b, "the incoming migration",
              lambda: b.qmp("query-status")["status"] != "inmigrate")
        if strace:
            time.sleep(0.3)
        m0 = os.path.getsize(trace) if strace else 0
        t0 = time.perf_counter()
        b.qmp("cont")
        res["start"] = time.perf_counter() - t0
        if strace:
            time.sleep(0.3)
            end = os.path.getsize(trace)
            res["counts"] = count_ioctls(trace, m0, end)
            res["sequence"] = ioctl_sequence(trace, m0, end)
        b.qmp("stop")
        return res
    finally:
        for q in (a, b):
            if q is not None:
                q.close()
        shutil.rmtree(tmpdir, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="3 rounds")
    ap.add_argument("--out")
    ap.add_argument("--cases", help="comma-separated case names (substrings)")
    ap.add_argument("--fake-kvm", metavar="SHIM",
                    help="run QEMU on this LD_PRELOAD fake /dev/kvm")
    ap.add_argument("stock")
    ap.add_argument("fork")
    a = ap.parse_args()
    if a.fake_kvm:
        use_fake_kvm(a.fake_kvm)
    why = kvm_usable()
    if why is not None:
        print("notifier_bench: skipped: needs a usable /dev/kvm (%s)" % why)
        return 77
    if FAKE_KVM is None and shutil.which("strace") is None:
        print("notifier_bench: strace is missing (make bench-deps)")
        return 1
    rounds = 3 if a.quick else a.rounds
    cases = CASES
    if a.cases:
        want = a.cases.split(",")
        cases = [c for c in CASES if any(w in c.name for w in want)]
    if any(c.vhost for c in cases) and not shutil.which("qemu-storage-daemon"):
        print("notifier_bench: qemu-storage-daemon missing: skipping vhost "
              "cases (apt-get install qemu-system-common)")
        cases = [c for c in cases if not c.vhost]
    qemus = {"stock": a.stock, "fork": a.fork}
    res = {}
    for case in cases:
        times = {v: {"start": [], "stop": [], "burst": []} for v in qemus}
        for n in range(rounds):
            # (every other round the other QEMU first: neither always runs
            # right after the other's exit, whose teardown the kernel
            # finishes in the background)
            order = list(qemus.items())
            for v, qemu in order[::-1] if n % 2 else order:
                r = (run_machine_start if case.machine else run_case)(qemu,
                                                                     case)
                for k in times[v]:
                    if r[k] is not None:
                        times[v][k].append(r[k])
        row = {}
        for v, qemu in qemus.items():
            r = (run_machine_start if case.machine else run_case)(
                qemu, case, strace=True)
            row[v] = {k + "_ms": statistics.median(t) * 1e3
                      for k, t in times[v].items() if t}
            row[v]["counts"] = r["counts"]
            if case.burst:
                row[v]["burst_counts"] = r["burst_counts"]
        res[case.name] = row
        print("  %-30s stock %8.2f ms  fork %8.2f ms" % (
            case.name, row["stock"]["start_ms"], row["fork"]["start_ms"]),
            file=sys.stderr)

    def cnt(row, key):
        return " | ".join("%d / %d" % (row["stock"][key][k],
                                       row["fork"][key][k]) for k in IOCTLS)

    print("| case | start stock (ms) | start fork (ms) | fork/stock | "
          "stop stock (ms) | stop fork (ms) | GSI_ROUTING stock/fork | "
          "IOEVENTFD stock/fork | IRQFD stock/fork |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, row in res.items():
        s, f = row["stock"], row["fork"]
        if "burst_ms" in s:
            continue
        print("| %s | %.2f | %.2f | %.2f | %s | %s | %s |" % (
            name, s["start_ms"], f["start_ms"], f["start_ms"] / s["start_ms"],
            "%.2f" % s["stop_ms"] if "stop_ms" in s else "-",
            "%.2f" % f["stop_ms"] if "stop_ms" in f else "-",
            cnt(row, "counts")))
    bursts = [(n, r) for n, r in res.items() if "burst_ms" in r["stock"]]
    if bursts:
        print()
        print("| guest retargets every vector | stock (ms) | fork (ms) | "
              "fork/stock | GSI_ROUTING stock/fork | IOEVENTFD stock/fork | "
              "IRQFD stock/fork |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        for name, row in bursts:
            s, f = row["stock"], row["fork"]
            print("| %s | %.2f | %.2f | %.2f | %s |" % (
                name, s["burst_ms"], f["burst_ms"],
                f["burst_ms"] / s["burst_ms"], cnt(row, "burst_counts")))
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, "notifier-bench.json"), "w") as fp:
            json.dump(res, fp, indent=1)
        with open(os.path.join(a.out, "notifier-bench.dat"), "w") as fp:
            fp.write("# case start_stock start_fork stop_stock stop_fork\n")
            for name, row in res.items():
                if "burst_ms" not in row["stock"]:
                    fp.write('"%s" %.3f %.3f %.3f %.3f\n' % (
                        name, row["stock"]["start_ms"],
                        row["fork"]["start_ms"],
                        row["stock"].get("stop_ms", float("nan")),
                        row["fork"].get("stop_ms", float("nan"))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
