# SPDX-License-Identifier: MIT
"""A qtest client that plays a virtio-pci (modern) guest driver.

Enough of a driver to bring a virtio-blk-pci or vhost-user-blk-pci device
to DRIVER_OK the way Linux does (MSI-X vectors programmed and unmasked
first, one vector per queue plus one for config), without a guest: QEMU
runs with -qtest and -S, so no vCPU ever executes (which PVM's nested KVM
requires) and the only thing QEMU does is what these register writes ask
for.  Used by notifier_bench.py and ../notifier-test.py; usable on its own:

    q = Qtest.launch(qemu, args)       # spawns QEMU with -qtest
    dev = VirtioPci(q, slot=4)
    dev.setup(queues=64)               # up to just before DRIVER_OK
    seconds = dev.driver_ok()          # the timed write
    dev.reset()
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

# PCI configuration space
PCI_COMMAND, PCI_STATUS, PCI_CAP_PTR = 0x04, 0x06, 0x34
PCI_CAP_VNDR, PCI_CAP_MSIX = 0x09, 0x11
# virtio_pci_cap.cfg_type
COMMON_CFG, NOTIFY_CFG, ISR_CFG, DEVICE_CFG = 1, 2, 3, 4
# struct virtio_pci_common_cfg
DFSELECT, DF, GFSELECT, GF = 0x00, 0x04, 0x08, 0x0C
MSIX_CONFIG, NUM_QUEUES, STATUS = 0x10, 0x12, 0x14
Q_SELECT, Q_SIZE, Q_MSIX, Q_ENABLE = 0x16, 0x18, 0x1A, 0x1C
Q_DESC, Q_AVAIL, Q_USED = 0x20, 0x28, 0x30
# device status bits
ACK, DRIVER, DRIVER_OK, FEATURES_OK = 1, 2, 4, 8
NO_VECTOR = 0xFFFF
VIRTIO_F_VERSION_1 = 32

RING_BASE = 0x100000   # guest-physical rings: 16 KiB per queue from here
MMIO_BASE = 0xE0000000  # BARs: 16 MiB per slot from here


class QtestError(RuntimeError):
    pass


class Qtest:
    """One QEMU process driven over its qtest socket."""

    def __init__(self, proc, sock, tmpdir):
        self.proc, self.sock, self.tmpdir = proc, sock, tmpdir
        self.buf = b""

    @classmethod
    def launch(cls, qemu, args, env=None, wrapper=(), timeout=60,
               running=False, hlt_bios=None, qmp=False):
        """Starts `wrapper... qemu -qtest unix:... -S args...` and waits
        for it to connect.

        running: no -S, so the VM runs (what devices that start only in a
        running VM, such as vhost-user-blk, need), on a firmware of HLT
        instructions: the one vCPU halts at the reset vector with
        interrupts off, so no guest code touches the devices.
        hlt_bios: that firmware without running (a VM to migrate).
        qmp: also a QMP monitor (Qtest.qmp())."""
        tmpdir = tempfile.mkdtemp(prefix="qtest-")
        if hlt_bios is None:
            hlt_bios = running
        if hlt_bios:
            bios = os.path.join(tmpdir, "hlt.bin")
            with open(bios, "wb") as f:
                f.write(b"\xf4" * 65536)         # hlt, everywhere
            args = ["-bios", bios] + list(args)
        path = os.path.join(tmpdir, "qtest.sock")
        lsock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        lsock.bind(path)
        lsock.listen(1)
        lsock.settimeout(timeout)
        if qmp:
            args = ["-qmp", "unix:%s/qmp.sock,server=on,wait=off" % tmpdir] + \
                list(args)
        pidfile = os.path.join(tmpdir, "qemu.pid")
        args = ["-pidfile", pidfile] + list(args)
        cmd = list(wrapper) + [qemu, "-qtest", "unix:" + path,
                               "-qtest-log", "/dev/null",
                               "-display", "none", "-nodefaults",
                               "-monitor", "none", "-serial", "none"] + \
            ([] if running else ["-S"]) + args
        log = open(os.path.join(tmpdir, "qemu.log"), "w+")
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                env=env)
        try:
            conn, _ = lsock.accept()
        except socket.timeout:
            proc.kill()
            log.seek(0)
            raise QtestError("QEMU did not connect: %s" % log.read()[-2000:])
        finally:
            lsock.close()
        conn.settimeout(timeout)
        q = cls(proc, conn, tmpdir)
        q.log = log
        q.pidfile = pidfile
        q.qmp_sock = None
        if qmp:
            q.qmp_sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            q.qmp_sock.connect(os.path.join(tmpdir, "qmp.sock"))
            q.qmp_file = q.qmp_sock.makefile("rw")
            json.loads(q.qmp_file.readline())          # the greeting
            q.qmp("qmp_capabilities")
        return q

    def qmp(self, command, **arguments):
        """Runs one QMP command; returns its "return" (events skipped)."""
        msg = {"execute": command}
        if arguments:
            msg["arguments"] = arguments
        self.qmp_file.write(json.dumps(msg) + "\n")
        self.qmp_file.flush()
        while True:
            reply = json.loads(self.qmp_file.readline())
            if "return" in reply:
                return reply["return"]
            if "error" in reply:
                raise QtestError("%s: %s" % (command, reply["error"]))

    def cmd(self, line):
        """Sends one qtest command, returns the words after OK."""
        self.sock.sendall(line.encode() + b"\n")
        while True:
            while b"\n" not in self.buf:
                chunk = self.sock.recv(65536)
                if not chunk:
                    self.log.seek(0)
                    raise QtestError("QEMU went away after %r: %s"
                                     % (line, self.log.read()[-2000:]))
                self.buf += chunk
            reply, self.buf = self.buf.split(b"\n", 1)
            words = reply.decode().split()
            if words and words[0] == "IRQ":
                continue  # (asynchronous; only with irq_intercept)
            if not words or words[0] != "OK":
                raise QtestError("%r: %s" % (line, reply.decode()))
            return words[1:]

    def pipeline(self, lines):
        """Sends @lines in one write (QEMU handles them in one main loop
        iteration, as a guest's back-to-back MMIO would run before any
        bottom half) and waits for every reply."""
        self.sock.sendall("".join(l + "\n" for l in lines).encode())
        for line in lines:
            while b"\n" not in self.buf:
                chunk = self.sock.recv(65536)
                if not chunk:
                    raise QtestError("QEMU went away in a pipeline")
                self.buf += chunk
            reply, self.buf = self.buf.split(b"\n", 1)
            if not reply.startswith(b"OK"):
                raise QtestError("%r: %s" % (line, reply.decode()))

    def read(self, size, addr):
        return int(self.cmd("read%s 0x%x" % ("bwlq"[size.bit_length() - 1],
                                               addr))[0], 16)

    def write(self, size, addr, val):
        self.cmd("write%s 0x%x 0x%x" % ("bwlq"[size.bit_length() - 1],
                                         addr, val))

    # PCI configuration space through 0xcf8/0xcfc
    def cfg_read(self, devfn, reg, size=4):
        self.cmd("outl 0xcf8 0x%x" % (0x80000000 | devfn << 8 | reg & 0xFC))
        port = 0xCFC + (reg & 3)
        op = {1: "inb", 2: "inw", 4: "inl"}[size]
        return int(self.cmd("%s 0x%x" % (op, port))[0], 16)

    def cfg_write(self, devfn, reg, val, size=4):
        self.cmd("outl 0xcf8 0x%x" % (0x80000000 | devfn << 8 | reg & 0xFC))
        port = 0xCFC + (reg & 3)
        op = {1: "outb", 2: "outw", 4: "outl"}[size]
        self.cmd("%s 0x%x 0x%x" % (op, port, val))

    def close(self):
        """Ends QEMU (SIGTERM, as libqtest does: a closed qtest socket does
        not end it), itself and not a wrapper such as strace, which would
        leave it running."""
        try:
            if self.qmp_sock is not None:
                self.qmp_sock.close()
            self.sock.close()
        finally:
            try:
                with open(self.pidfile) as f:
                    os.kill(int(f.read()), signal.SIGTERM)
            except (OSError, ValueError):
                self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                try:
                    with open(self.pidfile) as f:
                        os.kill(int(f.read()), signal.SIGKILL)
                except (OSError, ValueError):
                    pass
                self.proc.kill()
                self.proc.wait()
            self.log.close()
            shutil.rmtree(self.tmpdir, ignore_errors=True)


class VirtioPci:
    """A modern virtio-pci function at bus 0, slot @slot."""

    def __init__(self, q, slot):
        self.q, self.devfn, self.slot = q, slot << 3, slot
        vendor = q.cfg_read(self.devfn, 0) & 0xFFFF
        if vendor != 0x1AF4:
            raise QtestError("no virtio device at slot %d" % slot)
        self.bars = {}
        self.caps = {}
        self.msix = None

    def _map_bars(self):
        q, d = self.q, self.devfn
        base = MMIO_BASE + self.slot * 0x1000000
        next_addr = base
        bar = 0
        while bar < 6:
            reg = 0x10 + 4 * bar
            orig = q.cfg_read(d, reg)
            if orig & 1:                  # I/O BAR: unused here
                bar += 1
                continue
            is64 = (orig >> 1) & 3 == 2
            q.cfg_write(d, reg, 0xFFFFFFFF)
            lo = q.cfg_read(d, reg)
            if is64:
                q.cfg_write(d, reg + 4, 0xFFFFFFFF)
                hi = q.cfg_read(d, reg + 4)
                mask = (hi << 32 | lo) & ~0xF
                size = (~mask + 1) & 0xFFFFFFFFFFFFFFFF
            else:
                mask = lo & ~0xF
                size = (~mask + 1) & 0xFFFFFFFF
            if size:
                addr = (next_addr + size - 1) & ~(size - 1)
                q.cfg_write(d, reg, addr & 0xFFFFFFFF)
                if is64:
                    q.cfg_write(d, reg + 4, addr >> 32)
                self.bars[bar] = addr
                next_addr = addr + size
            bar += 2 if is64 else 1
        q.cfg_write(d, PCI_COMMAND, q.cfg_read(d, PCI_COMMAND, 2) | 0x6, 2)

    def _find_caps(self):
        q, d = self.q, self.devfn
        ptr = q.cfg_read(d, PCI_CAP_PTR, 1)
        while ptr:
            cap_id = q.cfg_read(d, ptr, 1)
            if cap_id == PCI_CAP_VNDR:
                cfg_type = q.cfg_read(d, ptr + 3, 1)
                bar = q.cfg_read(d, ptr + 4, 1)
                off = q.cfg_read(d, ptr + 8)
                if cfg_type not in self.caps and bar in self.bars:
                    self.caps[cfg_type] = self.bars[bar] + off
                if cfg_type == NOTIFY_CFG:
                    self.notify_mult = q.cfg_read(d, ptr + 16)
            elif cap_id == PCI_CAP_MSIX:
                self.msix = ptr
            ptr = q.cfg_read(d, ptr + 1, 1)
        if COMMON_CFG not in self.caps or self.msix is None:
            raise QtestError("slot %d: no common cfg or no MSI-X" % self.slot)

    def _program_msix(self, vectors):
        q, d = self.q, self.devfn
        ctrl = q.cfg_read(d, self.msix + 2, 2)
        if (ctrl & 0x7FF) + 1 < vectors:
            raise QtestError("only %d MSI-X vectors" % ((ctrl & 0x7FF) + 1))
        table = q.cfg_read(d, self.msix + 4)
        base = self.msix_table = self.bars[table & 7] + (table & ~7)
        q.cfg_write(d, self.msix + 2, ctrl | 0x8000 | 0x4000, 2)  # on, masked
        for v in range(vectors):
            e = base + 16 * v
            q.write(4, e, 0xFEE00000)          # to the local APIC
            q.write(4, e + 4, 0)
            q.write(4, e + 8, 0x30 + (v % 200))
            q.write(4, e + 12, 0)              # unmasked
        q.cfg_write(d, self.msix + 2, (ctrl | 0x8000) & ~0x4000, 2)

    def setup(self, queues):
        """Resets the device and configures it up to FEATURES_OK with
        @queues queues, each with its own MSI-X vector (config: vector 0)."""
        self._map_bars()
        self._find_caps()
        q, c = self.q, self.caps[COMMON_CFG]
        self._program_msix(queues + 1)
        q.write(1, c + STATUS, 0)
        q.write(1, c + STATUS, ACK)
        q.write(1, c + STATUS, ACK | DRIVER)
        q.write(4, c + GFSELECT, 1)
        q.write(4, c + DFSELECT, 1)
        q.write(4, c + GF, q.read(4, c + DF) & (1 << (VIRTIO_F_VERSION_1 - 32)))
        q.write(4, c + GFSELECT, 0)
        q.write(4, c + GF, 0)
        q.write(1, c + STATUS, ACK | DRIVER | FEATURES_OK)
        if not q.read(1, c + STATUS) & FEATURES_OK:
            raise QtestError("FEATURES_OK refused")
        q.write(2, c + MSIX_CONFIG, 0)
        n = q.read(2, c + NUM_QUEUES)
        if n < queues:
            raise QtestError("device has %d queues, not %d" % (n, queues))
        # The driver writes its rings before it hands them over: guest RAM
        # that QEMU then maps is already there (and not a first-touch
        # page fault inside the timed start).
        q.cmd("memset 0x%x 0x%x 0" % (RING_BASE + self.slot * 256 * 0x4000,
                                      queues * 0x4000))
        for i in range(queues):
            ring = RING_BASE + (self.slot * 256 + i) * 0x4000
            q.write(2, c + Q_SELECT, i)
            q.write(2, c + Q_SIZE, 128)
            q.write(2, c + Q_MSIX, i + 1)
            if q.read(2, c + Q_MSIX) != i + 1:
                raise QtestError("queue %d: vector refused" % i)
            for reg, addr in ((Q_DESC, ring), (Q_AVAIL, ring + 0x1000),
                              (Q_USED, ring + 0x2000)):
                q.write(4, c + reg, addr & 0xFFFFFFFF)   # (32-bit halves:
                q.write(4, c + reg + 4, addr >> 32)      # the common cfg's)
            q.write(2, c + Q_ENABLE, 1)
        self.queues = queues

    def retarget(self, vectors, data_base):
        """A guest moving interrupts: for each vector, mask it, write a new
        message data, unmask it; all back to back, then one more round
        trip, so QEMU's next iteration (its bottom halves) ran too.
        Returns the seconds that took."""
        lines = []
        for v in vectors:
            e = self.msix_table + 16 * v
            lines += ["writel 0x%x 0x1" % (e + 12),
                      "writel 0x%x 0x%x" % (e + 8, data_base + v % 200),
                      "writel 0x%x 0x0" % (e + 12)]
        t0 = time.perf_counter()
        self.q.pipeline(lines)
        self.q.read(4, self.msix_table)
        return time.perf_counter() - t0

    def driver_ok(self):
        """The timed write: DRIVER_OK, which starts the device's notifiers.
        Returns seconds from sending the write to QEMU's OK."""
        c = self.caps[COMMON_CFG]
        t0 = time.perf_counter()
        self.q.write(1, c + STATUS, ACK | DRIVER | FEATURES_OK | DRIVER_OK)
        return time.perf_counter() - t0

    def reset(self):
        """The timed stop: status 0 (the device's notifiers stop)."""
        t0 = time.perf_counter()
        self.q.write(1, self.caps[COMMON_CFG] + STATUS, 0)
        return time.perf_counter() - t0
