#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""aioloop-vhost-blk against qemu-storage-daemon's vhost-user-blk export,
driven from the host by bench-vhost (our own frontend), on the same image
in the same run.

  vhost_bench.py --daemon BUILD/integrations/vhost/aioloop-vhost-blk \\
                 --bench BUILD/integrations/vhost/bench-vhost [--rounds 3]
                 [--seconds 2] [--json OUT]

Workloads (4 KiB requests at random offsets in a 256 MiB raw image on
/dev/shm, prefilled, so the page cache serves them and the numbers are
the backends' own cost): random reads at queue depth 32 and at depth 1
(latency), random writes at depth 32, random reads over 4 queues at depth
32.  Backends: ours on epoll (preadv/pwritev) and on io_uring (the loop's
ring), qemu-storage-daemon with aio=threads and aio=io_uring.  Every
round runs every backend once per workload, interleaved; the table gives
the medians and ours/qsd ratios (same I/O engine: epoll against threads,
io_uring against io_uring).  Every process runs under timeout and is
killed by its PID.
"""
import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

IMG_SIZE = 256 << 20
WORKLOADS = [
    ("randread, depth 32", ["--depth", "32"], 1),
    ("randread, depth 1", ["--depth", "1"], 1),
    ("randwrite, depth 32", ["--depth", "32", "--write"], 1),
    ("randread, 4 queues x depth 32", ["--depth", "32", "--queues", "4"], 4),
]
BACKENDS = ["aioloop epoll", "aioloop io_uring", "qsd threads", "qsd io_uring"]
PEER = {"aioloop epoll": "qsd threads", "aioloop io_uring": "qsd io_uring"}


def wait_socket(path, proc, what, timeout=10):
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("%s did not listen on %s" % (what, path))
        time.sleep(0.02)


def start_backend(name, args, sock, img, queues):
    if name.startswith("aioloop"):
        cmd = [args.daemon, "--socket", sock, "--file", img,
               "--num-queues", str(queues), "--fdmon", name.split()[1]]
    else:
        qsd = shutil.which("qemu-storage-daemon")
        aio = name.split()[1]
        cmd = [qsd, "--blockdev",
               "driver=file,node-name=f0,filename=%s,aio=%s" % (img, aio),
               "--export", "type=vhost-user-blk,id=e0,node-name=f0,"
               "addr.type=unix,addr.path=%s,writable=on,num-queues=%d"
               % (sock, queues)]
    proc = subprocess.Popen(["timeout", "-k", "5", "120"] + cmd,
                            stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    wait_socket(sock, proc, name)
    return proc


def stop(proc):
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def run_one(args, tmp, img, backend, extra, queues):
    sock = os.path.join(tmp, "vhost.sock")
    if os.path.exists(sock):
        os.unlink(sock)
    proc = start_backend(backend, args, sock, img, queues)
    try:
        out = subprocess.run(["timeout", "-k", "5", "60", args.bench,
                              "--socket", sock, "--seconds", str(args.seconds),
                              "--span", str(IMG_SIZE)] + extra,
                             capture_output=True, text=True)
        if out.returncode != 0:
            raise RuntimeError("bench-vhost against %s failed: %s%s"
                               % (backend, out.stdout, out.stderr))
        return json.loads(out.stdout.strip().splitlines()[-1])
    finally:
        stop(proc)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--daemon", required=True)
    ap.add_argument("--bench", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=2)
    ap.add_argument("--json")
    args = ap.parse_args()
    if shutil.which("qemu-storage-daemon") is None:
        print("vhost_bench: qemu-storage-daemon is missing "
              "(Debian's qemu-system-common)", file=sys.stderr)
        return 1
    shm = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
    tmp = tempfile.mkdtemp(prefix="vhost-bench-", dir=shm)
    img = os.path.join(tmp, "disk.img")
    try:
        with open(img, "wb") as f:
            chunk = os.urandom(1 << 20)
            for _ in range(IMG_SIZE >> 20):
                f.write(chunk)
        res = {w[0]: {b: [] for b in BACKENDS} for w in WORKLOADS}
        for r in range(args.rounds):
            for name, extra, queues in WORKLOADS:
                order = BACKENDS if r % 2 == 0 else BACKENDS[::-1]
                for b in order:
                    res[name][b].append(run_one(args, tmp, img, b, extra,
                                                queues))
            print("vhost_bench: round %d of %d done" % (r + 1, args.rounds),
                  file=sys.stderr)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    def med(runs, key):
        return statistics.median(x[key] for x in runs)

    print("| workload | backend | kIOPS | p50 (us) | p99 (us) | ours / qsd IOPS |")
    print("|---|---|---:|---:|---:|---:|")
    summary = {}
    for name, _, _ in WORKLOADS:
        summary[name] = {}
        for b in BACKENDS:
            runs = res[name][b]
            iops = med(runs, "iops")
            summary[name][b] = {"iops": iops, "p50_us": med(runs, "p50_us"),
                                "p99_us": med(runs, "p99_us"),
                                "runs": runs}
            ratio = ""
            if b in PEER:
                ratio = "%.2f" % (iops / med(res[name][PEER[b]], "iops"))
            print("| %s | %s | %.1f | %d | %d | %s |"
                  % (name, b, iops / 1000, summary[name][b]["p50_us"],
                     summary[name][b]["p99_us"], ratio))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
