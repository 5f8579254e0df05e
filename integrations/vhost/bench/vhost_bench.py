#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""aioloop-vhost-blk against qemu-storage-daemon's vhost-user-blk export,
driven from the host by bench-vhost (our own frontend), on the same image
in the same run.

  vhost_bench.py --daemon BUILD/integrations/vhost/aioloop-vhost-blk \\
                 --bench BUILD/integrations/vhost/bench-vhost
                 [--qsd10 QEMU10_BUILD/storage-daemon/qemu-storage-daemon]
                 [--rounds 3]
                 [--seconds 2] [--storage shm,disk] [--disk-dir DIR]
                 [--engines on|off] [--layouts on|off] [--threads on|off]
                 [--json OUT]

Storage: "shm", a 256 MiB raw image on /dev/shm, prefilled, so the page
cache serves every request and the numbers are the backends' own cost;
"disk", a 2 GiB raw image on a real filesystem (--disk-dir, default
/var/tmp), prefilled, the page cache dropped before every run (echo 3 >
/proc/sys/vm/drop_caches; as root), so reads come from the disk, served
buffered and with O_DIRECT (qsd: cache.direct=on; ours: --direct).
Workloads: 4 KiB random reads at queue depth 32 and at depth 1, random
writes at depth 32, random reads over 4 queues at depth 32, and random
reads at depth 32 on each of two exports of one process at once (two
images, a bench-vhost on each; IOPS summed).  Backends: ours with each
I/O engine (aio=threads and native on epoll, io_uring on the loop's
ring), each also with busy polling (--poll-max-ns, default 32768 as
QEMU's iothreads; 0: not run), against qemu-storage-daemon with the
same aio= and the same cache mode, both started with qsd's
--blockdev/--export command line.  The peers: Debian's
qemu-storage-daemon 7.2 ("qsd", bookworm's qemu-system-common) and,
with --qsd10, qemu-storage-daemon 10.2.2 built from Debian sid's source
("qsd10", the stock build of integrations/qemu/build.sh), each engine
with its export on qsd's main loop and on an --object iothread
(", iothread"); the export's num-queues is the workload's.  The ratio
column and the best-against-best table take the better of the peers'
rows.  Every round runs every backend once per workload,
interleaved; the table gives the medians and ours/qsd ratios.  Every
process runs under timeout and is killed by its PID.

Ring layouts (--layouts, on by default): ours on io_uring, with and
without busy polling, each workload on split and on packed rings
(bench-vhost --packed), interleaved; the table gives packed / split.
qemu-storage-daemon's export offers no packed rings, so it has no row
there.

Loop threads (--threads, on by default): 2 and 4 queues, ours with one
loop thread and with two (--threads 2), against qsd with its export on
its main loop and on an --object iothread (7.2 and 10.2 run all of an
export's queues on one thread), each engine, both peers; the table gives
each row against ours on one thread and against the peers' best.

Both tables run on every storage kind of --storage, on one image: on
"disk" every backend opens it with O_DIRECT (qsd's best mode for a cold
disk) and aio=native joins the engines.  --engines off leaves out the
engine tables above and runs only these two.
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

SIZES = {"shm": 256 << 20, "disk": 2 << 30}
# (name, bench-vhost arguments, queues, exports)
WORKLOADS = [
    ("randread, depth 32", ["--depth", "32"], 1, 1),
    ("randread, depth 1", ["--depth", "1"], 1, 1),
    ("randwrite, depth 32", ["--depth", "32", "--write"], 1, 1),
    ("randread, 4 queues x depth 32", ["--depth", "32", "--queues", "4"], 4,
     1),
    ("randread, 2 exports x depth 32", ["--depth", "32"], 1, 2),
]
MAX_EXPORTS = max(w[3] for w in WORKLOADS)
# (who, aio, direct): ours runs io_uring on the io_uring fd monitor (the
# loop's own ring), the others on epoll.  native needs O_DIRECT.
ENGINES = ["threads", "native", "io_uring"]


PEERS = ("qsd", "qsd10")


def parse(name):
    """(who, aio, direct, polled) of a backend's name (who: "aioloop" or
    one of PEERS)."""
    who, rest = name.split(" ", 1)
    parts = rest.split(", ")
    return who, parts[0], "direct" in parts, "poll" in parts


def backends(args, direct):
    out = []
    for who in ("aioloop",) + peers(args):
        for aio in ENGINES:
            if aio == "native" and not direct:
                continue
            name = "%s %s%s" % (who, aio, ", direct" if direct else "")
            out.append(name)
            if who == "aioloop" and args.poll_max_ns > 0:
                out.append(name + ", poll")
            if who == "qsd10":
                out.append(name + ", iothread")
    return out


def peers(args):
    """The peers this run has: Debian's qsd, and qsd10 with --qsd10."""
    return PEERS if args.qsd10 else PEERS[:1]


def peer_rows(name, rows):
    """The peers' rows with the engine and cache mode of our @name."""
    who, aio, direct, _ = parse(name)
    if who != "aioloop":
        return []
    return [b for b in rows if parse(b)[0] in PEERS and
            parse(b)[1:3] == (aio, direct)]


def wait_socket(path, proc, what, timeout=10):
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("%s did not listen on %s" % (what, path))
        time.sleep(0.02)


def start_backend(name, args, socks, imgs, queues):
    """One process serving an export on each of @socks, image @imgs[i].
    ", 2 threads" in @name: ours with --threads 2; ", iothread": qsd's
    exports on an --object iothread."""
    who, aio, direct, polled = parse(name)
    iothread = ""
    if who == "aioloop":
        cmd = [args.daemon, "--fdmon",
               "io_uring" if aio == "io_uring" else "epoll"]
        cmd += ["--poll-max-ns", str(args.poll_max_ns)] if polled else []
        cmd += ["--threads", "2"] if ", 2 threads" in name else []
    else:
        cmd = [args.qsd10 if who == "qsd10" else
               shutil.which("qemu-storage-daemon")]
        if ", iothread" in name:
            cmd += ["--object", "iothread,id=io0"]
            iothread = ",iothread=io0"
    for i, (sock, img) in enumerate(zip(socks, imgs)):
        cmd += ["--blockdev",
                "driver=file,node-name=f%d,filename=%s,aio=%s,cache.direct=%s"
                % (i, img, aio, "on" if direct else "off"),
                "--export", "type=vhost-user-blk,id=e%d,node-name=f%d,"
                "addr.type=unix,addr.path=%s,writable=on,num-queues=%d%s"
                % (i, i, sock, queues, iothread)]
    proc = subprocess.Popen(["timeout", "-k", "5", "120"] + cmd,
                            stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    for sock in socks:
        wait_socket(sock, proc, name)
    return proc


def drop_caches():
    subprocess.run(["sync"], check=True)
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def stop(proc):
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def run_one(args, tmp, imgs, size, backend, extra, queues, cold):
    """One run of bench-vhost on each export of @backend at once."""
    socks = [os.path.join(tmp, "vhost%d.sock" % i) for i in range(len(imgs))]
    for sock in socks:
        if os.path.exists(sock):
            os.unlink(sock)
    if cold:
        drop_caches()
    proc = start_backend(backend, args, socks, imgs, queues)
    benches = []
    try:
        benches = [subprocess.Popen(
            ["timeout", "-k", "5", "60", args.bench, "--socket", sock,
             "--seconds", str(args.seconds), "--span", str(size)] + extra,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for sock in socks]
        res = []
        for b in benches:
            out, err = b.communicate()
            if b.returncode != 0:
                raise RuntimeError("bench-vhost against %s failed: %s%s"
                                   % (backend, out, err))
            res.append(json.loads(out.strip().splitlines()[-1]))
    finally:
        stop(proc)
        for b in benches:
            if b.poll() is None:
                b.kill()
    if len(res) == 1:
        return res[0]
    return {"iops": sum(r["iops"] for r in res),
            "p50_us": statistics.mean(r["p50_us"] for r in res),
            "p99_us": max(r["p99_us"] for r in res), "exports": res}


def make_image(img, size):
    with open(img, "wb") as f:
        chunk = os.urandom(1 << 20)
        for _ in range(size >> 20):
            f.write(chunk)
        f.flush()
        os.fsync(f.fileno())


def run_storage(args, storage):
    """Every backend on one storage kind: {workload: {backend: runs}}."""
    cold = storage == "disk"
    where = args.disk_dir if cold else "/dev/shm"
    tmp = tempfile.mkdtemp(prefix="vhost-bench-", dir=where)
    imgs = [os.path.join(tmp, "disk%d.img" % i) for i in range(MAX_EXPORTS)]
    size = SIZES[storage]
    names = backends(args, False) + backends(args, True)
    res = {w[0]: {b: [] for b in names} for w in WORKLOADS}
    try:
        for img in imgs:
            make_image(img, size)
        for r in range(args.rounds):
            for name, extra, queues, exports in WORKLOADS:
                order = names if r % 2 == 0 else names[::-1]
                for b in order:
                    res[name][b].append(run_one(args, tmp, imgs[:exports],
                                                size, b, extra, queues,
                                                cold))
            print("vhost_bench: %s: round %d of %d done"
                  % (storage, r + 1, args.rounds), file=sys.stderr)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return res


# (name, bench-vhost arguments, queues) of the layout comparison
LAYOUT_WORKLOADS = [
    ("randread, depth 32", ["--depth", "32"], 1),
    ("randread, depth 1", ["--depth", "1"], 1),
    ("randread, 4 queues x depth 32", ["--depth", "32", "--queues", "4"], 4),
]


def on_storage(args, storage, what, cells):
    """Runs every cell (workload, key, backend, bench-vhost arguments,
    queues) once per round on one image of @storage, in alternating order:
    {(workload, key): runs}.  On "disk" the page cache is dropped before
    every run."""
    cold = storage == "disk"
    tmp = tempfile.mkdtemp(prefix="vhost-bench-",
                           dir=args.disk_dir if cold else "/dev/shm")
    img = os.path.join(tmp, "disk0.img")
    res = {(c[0], c[1]): [] for c in cells}
    try:
        make_image(img, SIZES[storage])
        for r in range(args.rounds):
            for name, key, b, extra, queues in (cells if r % 2 == 0
                                                else cells[::-1]):
                res[(name, key)].append(run_one(args, tmp, [img],
                                                SIZES[storage], b, extra,
                                                queues, cold))
            print("vhost_bench: %s on %s: round %d of %d done"
                  % (what, storage, r + 1, args.rounds), file=sys.stderr)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return res


def where(args, storage):
    """The image a table of @storage ran on, for its heading."""
    if storage == "disk":
        return ("2 GiB image on %s, cold page cache, O_DIRECT"
                % args.disk_dir)
    return "256 MiB image on /dev/shm"


def on_disk(name, storage):
    """A backend's name for @storage: on a real disk every table's
    backends open the image with O_DIRECT, qsd's best mode there."""
    return name + ", direct" if storage == "disk" else name


def summary_row(runs, med):
    return {"iops": med(runs, "iops"), "p50_us": med(runs, "p50_us"),
            "p99_us": med(runs, "p99_us"), "runs": runs}


def run_layouts(args, storage):
    """Ours on split and packed rings: {(workload, (backend, layout)): runs}."""
    names = [on_disk("aioloop io_uring", storage)]
    if args.poll_max_ns > 0:
        names.append(names[0] + ", poll")
    return on_storage(args, storage, "layouts", [
        (name, (b, layout), b,
         extra + (["--packed"] if layout == "packed" else []), queues)
        for name, extra, queues in LAYOUT_WORKLOADS for b in names
        for layout in ("split", "packed")])


def print_layouts(args, storage, res, med):
    """The layout table; returns its summary."""
    print("\nring layouts (%s):\n" % where(args, storage))
    print("| workload | backend | split kIOPS | packed kIOPS | packed / split "
          "| split p50 / p99 (us) | packed p50 / p99 (us) |")
    print("|---|---|---:|---:|---:|---|---|")
    out = {}
    for name, _, _ in LAYOUT_WORKLOADS:
        out[name] = {}
        for b in sorted({k[1][0] for k in res if k[0] == name}):
            row = {lay: summary_row(res[(name, (b, lay))], med)
                   for lay in ("split", "packed")}
            out[name][b] = row
            sp, pk = row["split"], row["packed"]
            print("| %s | %s | %.1f | %.1f | %.2f | %d / %d | %d / %d |"
                  % (name, b, sp["iops"] / 1000, pk["iops"] / 1000,
                     pk["iops"] / sp["iops"], sp["p50_us"], sp["p99_us"],
                     pk["p50_us"], pk["p99_us"]))
    return out


# (name, bench-vhost arguments, queues) of the thread comparison
THREAD_WORKLOADS = [
    ("randread, 2 queues x depth 32", ["--depth", "32", "--queues", "2"], 2),
    ("randread, 4 queues x depth 32", ["--depth", "32", "--queues", "4"], 4),
    ("randwrite, 2 queues x depth 32",
     ["--depth", "32", "--queues", "2", "--write"], 2),
]
THREAD_BACKENDS = ["aioloop io_uring", "aioloop io_uring, 2 threads",
                   "aioloop threads", "aioloop threads, 2 threads"]


def thread_backends(args, storage):
    """The thread table's backends; on a real disk with O_DIRECT also
    aio=native, on both sides."""
    names = list(THREAD_BACKENDS)
    for who in peers(args):
        names += ["%s %s%s" % (who, aio, where_)
                  for aio in ("io_uring", "threads")
                  for where_ in ("", ", iothread")]
    if storage == "disk":
        names += [b.replace("threads", "native", 1) for b in names
                  if parse(b)[1] == "threads"]
    return [on_disk(b, storage) for b in names]


def run_threads(args, storage):
    """Ours on one and two loop threads, qsd on its main loop and on an
    iothread: {(workload, backend): runs}."""
    return on_storage(args, storage, "threads", [
        (name, b, b, extra, queues) for name, extra, queues in THREAD_WORKLOADS
        for b in thread_backends(args, storage)])


def print_threads(args, storage, res, med):
    """The thread table; returns its summary."""
    print("\nloop threads (%s):\n" % where(args, storage))
    print("| workload | backend | kIOPS | p50 / p99 (us) | / its one thread "
          "| / the peers' best |")
    print("|---|---|---:|---|---:|---:|")
    out = {}
    for name, _, _ in THREAD_WORKLOADS:
        rows = {b: summary_row(res[(name, b)], med)
                for b in thread_backends(args, storage)}
        out[name] = rows
        qsd_best = max(r["iops"] for b, r in rows.items()
                       if parse(b)[0] in PEERS)
        for b, row in rows.items():
            one = b.replace(", 2 threads", "")
            ratio = ("%.2f" % (row["iops"] / rows[one]["iops"])
                     if one != b else "")
            print("| %s | %s | %.1f | %d / %d | %s | %.2f |"
                  % (name, b, row["iops"] / 1000, row["p50_us"],
                     row["p99_us"], ratio, row["iops"] / qsd_best))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--daemon", required=True)
    ap.add_argument("--bench", required=True)
    ap.add_argument("--qsd10")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=2)
    ap.add_argument("--storage", default="shm,disk")
    ap.add_argument("--disk-dir", default="/var/tmp")
    ap.add_argument("--poll-max-ns", type=int, default=32768)
    ap.add_argument("--engines", default="on", choices=["on", "off"])
    ap.add_argument("--layouts", default="on", choices=["on", "off"])
    ap.add_argument("--threads", default="on", choices=["on", "off"])
    ap.add_argument("--json")
    args = ap.parse_args()
    if shutil.which("qemu-storage-daemon") is None:
        print("vhost_bench: qemu-storage-daemon is missing "
              "(Debian's qemu-system-common)", file=sys.stderr)
        return 1
    if args.qsd10 and not os.access(args.qsd10, os.X_OK):
        print("vhost_bench: %s is not executable" % args.qsd10,
              file=sys.stderr)
        return 1
    storages = [x for x in args.storage.split(",") if x]
    if "disk" in storages and os.geteuid() != 0:
        print("vhost_bench: dropping the page cache needs root; "
              "--storage shm measures without the disk", file=sys.stderr)
        return 1

    def med(runs, key):
        return statistics.median(x[key] for x in runs)

    summary = {}
    for storage in storages if args.engines == "on" else []:
        res = run_storage(args, storage)
        summary[storage] = {}
        print("\n%s (%s):\n" % (storage, "2 GiB image on %s, cold page "
                                 "cache" % args.disk_dir
                                 if storage == "disk" else
                                 "256 MiB image on /dev/shm"))
        print("| workload | backend | kIOPS | p50 (us) | p99 (us) "
              "| ours / the peers' best, same engine |")
        print("|---|---|---:|---:|---:|---:|")
        for name, _, _, _ in WORKLOADS:
            summary[storage][name] = {}
            for b, runs in res[name].items():
                iops = med(runs, "iops")
                row = {"iops": iops, "p50_us": med(runs, "p50_us"),
                       "p99_us": med(runs, "p99_us"), "runs": runs}
                summary[storage][name][b] = row
                ratio = ""
                theirs = [med(res[name][p], "iops")
                          for p in peer_rows(b, res[name])]
                if theirs:
                    ratio = "%.2f" % (iops / max(theirs))
                print("| %s | %s | %.1f | %d | %d | %s |"
                      % (name, b, iops / 1000, row["p50_us"], row["p99_us"],
                         ratio))
        # the target: our best engine at or above qsd's best, per cache mode
        print("\n%s, best engine against best engine:\n" % storage)
        print("| workload | cache | ours: best | peers: best | ours / peers "
              "| at or above |")
        print("|---|---|---|---|---:|---|")
        for name, _, _, _ in WORKLOADS:
            rows = summary[storage][name]
            for direct in (False, True):
                def best(whos):
                    return max((r["iops"], b) for b, r in rows.items()
                               if parse(b)[0] in whos and
                               parse(b)[2] == direct)

                def engine(b):
                    who, aio, _, polled = parse(b)
                    return ("" if who == "aioloop" else who + " ") + aio + \
                        (", polled" if polled else "") + \
                        (", iothread" if ", iothread" in b else "")
                (ours, ob), (theirs, tb) = best(("aioloop",)), best(PEERS)
                print("| %s | %s | %.1f (%s) | %.1f (%s) | %.2f | %s |"
                      % (name, "O_DIRECT" if direct else "buffered",
                         ours / 1000, engine(ob), theirs / 1000, engine(tb),
                         ours / theirs, "yes" if ours >= theirs else "no"))
    for storage in storages:
        if args.layouts == "on":
            summary.setdefault("layouts", {})[storage] = print_layouts(
                args, storage, run_layouts(args, storage), med)
        if args.threads == "on":
            summary.setdefault("threads", {})[storage] = print_threads(
                args, storage, run_threads(args, storage), med)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
