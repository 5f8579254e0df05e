#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""img_bench.py - qemu-img bench with aio=io_uring: stock QEMU 10.2 (its
io_uring AioContext) against the fork on libaioloop's io_uring monitor.

    img_bench.py --stock BIN --fork BIN [--dir DIR] [--loop] [--size-mib N]
                 [--rounds R] [--depths 1,8,32] [--count N] [--json OUT]

Each cell is `qemu-img bench -f raw -i io_uring -t none` (O_DIRECT) of 4
KiB requests, reads or writes (-w), at one queue depth (N requests at
depth 1, default 20000, and 4N deeper), on a raw image of random bytes on
a real filesystem (DIR, default /var/tmp; tmpfs is refused: it has no
O_DIRECT), spread over the whole image (-S, a prime step times 4 KiB, so
no two requests of a run hit the same block).  With --loop (root), the
same again on a loop block device over an image in /dev/shm: a device
whose own latency is small, so that what the process costs per request
shows.  The two
variants run one after another in each cell, in an order that alternates
between rounds, and the page cache is dropped before each round (as root;
O_DIRECT bypasses it, the image's metadata does not).  Reported: median
IOPS over R rounds (default 5), each variant's ratio to stock (also
paired: the median of each round's ratio), the process's CPU time per
request (user and system, from wait4), and io_uring_enter calls per
request, counted with strace -f -c in two more
runs of each cell, of N/4 and N/2 requests, so that start-up's calls
cancel out (strace slows the runs; they are not timed).

Targets (printed met/unmet): the fork at or above stock at every depth,
with no more io_uring_enter calls per request.  (The requests go on the
AioContext's ring, aio_add_sqe(), which only an io_uring monitor has:
there is no epoll variant.)
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

from qemu_version import qemu_version

STEP_BLOCKS = 7919  # prime: the requests of a run walk the whole image


def variants(args):
    """(name, binary, AIOLOOP_FDMON or None), in table order."""
    return [("stock %d.%d" % args.version, args.stock, None),
            ("fork, io_uring", args.fork, "io_uring")]


def bench_cmd(binary, img, rw, depth, count):
    cmd = [binary, "bench", "-f", "raw", "-i", "io_uring", "-t", "none",
           "-d", str(depth), "-c", str(count), "-s", "4096",
           "-S", str(STEP_BLOCKS * 4096)]
    if rw == "write":
        cmd.append("-w")
    return cmd + [img]


def env_for(fdmon):
    env = dict(os.environ)
    env.pop("AIOLOOP_FDMON", None)
    if fdmon:
        env["AIOLOOP_FDMON"] = fdmon
    return env


def run_iops(cmd, fdmon, count):
    """(IOPS, the process's CPU time per request in microseconds)."""
    with tempfile.TemporaryFile("w+") as out:
        proc = subprocess.Popen(cmd, env=env_for(fdmon), stdout=out,
                                stderr=subprocess.STDOUT, text=True)
        _, status, ru = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        text = out.read()
    if proc.returncode != 0:
        sys.exit("img_bench: %s exited with %d:\n%s"
                 % (" ".join(cmd), proc.returncode, text))
    m = re.search(r"Run completed in ([0-9.]+) seconds", text)
    if not m:
        sys.exit("img_bench: no result from %s:\n%s" % (" ".join(cmd), text))
    return count / float(m.group(1)), (ru.ru_utime + ru.ru_stime) * 1e6 / count


def run_enters(cmd, fdmon):
    """io_uring_enter calls of the whole process."""
    with tempfile.NamedTemporaryFile("r", suffix=".strace") as t:
        subprocess.run(["strace", "-f", "-c", "-o", t.name,
                        "-e", "trace=io_uring_enter"] + cmd,
                       env=env_for(fdmon), check=True, timeout=600,
                       capture_output=True)
        for line in t.read().splitlines():
            f = line.split()
            if f and f[-1] == "io_uring_enter":
                return int(f[3])
    return 0


def drop_caches():
    if os.geteuid() == 0:
        subprocess.run(["sync"], check=True)
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")


def loop_attach(path):
    return subprocess.run(["losetup", "-f", "--show", path], check=True,
                          capture_output=True, text=True).stdout.strip()


def make_image(path, mib):
    chunk = os.urandom(1 << 20)
    with open(path, "wb") as f:
        for _ in range(mib):
            f.write(chunk)
        os.fsync(f.fileno())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--stock", required=True, help="stock QEMU's qemu-img")
    ap.add_argument("--fork", required=True, help="the fork's qemu-img")
    ap.add_argument("--dir", default="/var/tmp")
    ap.add_argument("--loop", action="store_true")
    ap.add_argument("--size-mib", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--depths", default="1,8,32")
    ap.add_argument("--count", type=int, default=20000)
    ap.add_argument("--json")
    args = ap.parse_args()
    args.version = qemu_version(args.stock)
    if qemu_version(args.fork) != args.version:
        sys.exit("img_bench: stock %d.%d and the fork differ" % args.version)
    depths = [int(d) for d in args.depths.split(",")]
    # (df names ext4 where stat -f says "ext2/ext3", their shared magic)
    fstype = subprocess.run(["df", "--output=fstype", args.dir], check=True,
                            capture_output=True,
                            text=True).stdout.split()[-1]
    if fstype == "tmpfs":
        sys.exit("img_bench: %s is tmpfs; use a real filesystem" % args.dir)

    targets = [("file", os.path.join(args.dir,
                                     "img-bench-%d.raw" % os.getpid()))]
    if args.loop:
        targets.append(("loop", "/dev/shm/img-bench-%d.raw" % os.getpid()))
    results = {}
    for tname, img in targets:
        make_image(img, args.size_mib)
        dev = None
        try:
            if tname == "loop":
                dev = loop_attach(img)
            results[tname] = measure(args, depths, dev or img)
        finally:
            if dev:
                subprocess.run(["losetup", "-d", dev], check=False)
            os.unlink(img)
    for tname, _ in targets:
        where = {"file": "a %d MiB file on %s (%s)" % (args.size_mib,
                                                      args.dir, fstype),
                 "loop": "a loop device over a %d MiB image in /dev/shm"
                 % args.size_mib}[tname]
        print("\n%s:\n" % where)
        report(results[tname], depths, [v[0] for v in variants(args)])
    if args.json:
        with open(args.json, "w") as f:
            json.dump({t: {k: {"|".join(map(str, c)): v
                               for c, v in r[k].items()}
                           for k in r} for t, r in results.items()},
                      f, indent=1)


def count_for(args, depth):
    return args.count if depth == 1 else 4 * args.count


def measure(args, depths, target):
    vs = variants(args)
    cells = [(rw, d) for rw in ("read", "write") for d in depths]
    iops = {(v[0], rw, d): [] for v in vs for rw, d in cells}
    cpu = {(v[0], rw, d): [] for v in vs for rw, d in cells}
    enters = {}
    for r in range(args.rounds):
        drop_caches()
        for rw, d in cells:
            order = vs if r % 2 == 0 else vs[::-1]
            for name, binary, fdmon in order:
                n = count_for(args, d)
                cmd = bench_cmd(binary, target, rw, d, n)
                rate, us = run_iops(cmd, fdmon, n)
                iops[(name, rw, d)].append(rate)
                cpu[(name, rw, d)].append(us)
        print("img_bench: %s, round %d of %d done" % (target, r + 1,
                                                      args.rounds),
              file=sys.stderr)
    for rw, d in cells:
        for name, binary, fdmon in vs:
            n = max(count_for(args, d) // 4, 1000)
            e1 = run_enters(bench_cmd(binary, target, rw, d,
                                      n), fdmon)
            e2 = run_enters(bench_cmd(binary, target, rw, d,
                                      2 * n), fdmon)
            enters[(name, rw, d)] = (e2 - e1) / n
    return {"iops": iops, "cpu": cpu, "enters": enters}


def report(res, depths, vs):
    """The table and the targets; vs: the variants' names, stock first.
    "paired" is the median over rounds of each round's fork/stock (the
    two ran back to back), so the machine's drift between rounds cancels;
    CPU is the whole process's user and system time per request."""
    med = {k: statistics.median(v) for k, v in res["iops"].items()}
    cpu = {k: statistics.median(v) for k, v in res["cpu"].items()}
    enters = res["enters"]
    print("| op | depth | %s IOPS | %s IOPS | fork / stock | paired | "
          "CPU µs per request (stock / fork) | enters per request "
          "(stock / fork) |" % tuple(vs))
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    met = []
    for rw in ("read", "write"):
        for d in depths:
            s, u = (med[(v, rw, d)] for v in vs)
            paired = statistics.median(
                b / a for a, b in zip(*(res["iops"][(v, rw, d)] for v in vs)))
            cs, cu = (cpu[(v, rw, d)] for v in vs)
            es, eu = (enters[(v, rw, d)] for v in vs)
            print("| %s | %d | %.0f | %.0f | %.2f | %.2f | %.1f / %.1f | "
                  "%.3f / %.3f |" % (rw, d, s, u, u / s, paired, cs, cu,
                                     es, eu))
            met.append(("%s depth %d: fork >= stock" % (rw, d), u >= s))
            # (3 decimals: at depth 8 both make 0.125, which 2 decimals
            # round either way on a single stray call)
            met.append(("%s depth %d: no more enters per request than "
                        "stock" % (rw, d), round(eu, 3) <= round(es, 3)))
    print_targets(met)


def print_targets(met):
    print()
    for what, ok in met:
        print("- %s: %s" % (what, "met" if ok else "unmet"))


if __name__ == "__main__":
    main()
