#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""bench/run.py - runs the benchmark binaries side by side; `make bench`.

Each library's binary (bench-aiol, bench-ev, bench-uv, bench-event,
bench-glib, bench-epoll) runs the shared workloads (bench.h,
workloads.c).  Libraries are run interleaved, round by round, so that
machine noise hits them alike; each round's binary reports the median of
its own runs, and the table shows the median over rounds and each
library's ratio to libaioloop on epoll, the default fd monitor (for times,
above 1 means libaioloop is faster).  A binary that was not built (its
library missing) or that lacks a workload is skipped.

Syscalls per empty poll are counted for every library by a separate short
pass under `strace -f -c`: the idle-poll workload runs with two iteration
counts and the difference in total syscalls, divided by the difference in
polls, is the per-poll count (set-up cancels out).  libaioloop also counts
its own fd-monitor syscalls (loop stats).

usage: run.py BUILD_DIR [--headline] [--quick] [--out DIR] [--docs]
              [--before DIR]
  --headline  only what the headline needs (headline.py: `make bench`):
              libaioloop against libev, libuv and libevent, one row per
              workload; headline.md, headline.json and headline.png
  --out     where table.md, targets.md, results.json and the PNG plots go
            (default BUILD_DIR/bench-results)
  --docs    also copy the plots to docs/bench/ and the tables there
  --before  the build directory of an earlier libaioloop (its
            bench/bench-aiol): run on epoll interleaved with the rest, and
            a before/after table follows the main one
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

import headline
import report

REF = ("aiol", "epoll")
# libaioloop on epoll with a thread-confined loop (AIOL_LOOP_CONFINED)
CONFINED = ("aiol", "epoll+confined")
VARIANTS = [REF, ("aiol", "io_uring"), ("aiol", "poll"), CONFINED,
            ("ev", None), ("uv", None), ("event", None), ("glib", None),
            ("epoll", None)]
AIOL = [v for v in VARIANTS if v[0] == "aiol"]

# (workload, n, runs per invocation, variants or None for all).  Quick
# mode drops the largest n and shrinks the long ones (QUICK_N).  A chain
# run is already 25 iterations; at n = 9900 (glib and poll take seconds
# there) one run per round is enough.
WORKLOADS = (
    [("chain_a1", n, 1 if n > 1000 else 3, None) for n in (100, 1000, 9900)]
    + [("chain_a100", n, 1 if n > 1000 else 3, None) for n in (100, 1000, 9900)]
    + [("churn", n, 3, None) for n in (1000, 10000)]
    # churn after aiol_fd_reserve(), as libev's side allocates its watchers
    + [("churn_reserved", n, 3, [REF, CONFINED]) for n in (1000, 10000)]
    + [("rearm", n, 3 if n <= 1000 else 1, None) for n in (1000, 10000)]
    + [("idle_poll", 1000, 3, None),
       ("bh_single", 1, 3, None),
       ("bh_burst", 1000, 3, None),
       ("wakeup", 10000, 1, None),
       ("timers", 1000000, 1, None),
       ("timers_rand", 1000000, 1, None)]
    + [("ready1", n, 3, AIOL if n <= 1000 else AIOL[:2])  # poll(2) is O(n)
       for n in (1, 1000, 9900)]
    + [("ready1_drains", 1000, 3, AIOL[:2])]  # multishot polls on io_uring
    + [("bh_local_single", 1, 3, AIOL), ("bh_local_burst", 1000, 3, AIOL)]
    # the chain's bytes as completions on the ring (aioloop/uring.h)
    + [(w, n, 1 if n > 1000 else 3, [("aiol", "io_uring")])
       for w in ("chain_ring_a1", "chain_ring_a100") for n in (100, 1000, 9900)]
)
QUICK_SKIP = {("chain_a1", 9900), ("chain_a100", 9900), ("churn", 10000),
              ("churn_reserved", 10000),
              ("rearm", 10000),
              ("ready1", 9900), ("chain_ring_a1", 9900),
              ("chain_ring_a100", 9900)}
QUICK_N = {"wakeup": 2000, "timers": 200000, "timers_rand": 200000}
STRACE_N, STRACE_ITERS = 1000, (1000, 3000)


BEFORE = ("before", "epoll")  # --before: an earlier build's bench-aiol
BEFORE_BUILD = None


def binary(build, lib):
    if lib == "before":
        return os.path.join(BEFORE_BUILD, "bench", "bench-aiol")
    return os.path.join(build, "bench", "bench-" + lib)


def fdmon_args(fdmon):
    """bench-aiol's arguments for a variant's fd monitor ("epoll",
    "epoll+confined": --fdmon epoll --loop confined)."""
    if not fdmon:
        return []
    base, _, loop = fdmon.partition("+")
    return ["--fdmon", base] + (["--loop", loop] if loop else [])


def run_one(build, variant, workload, n, runs, iters=None):
    lib, fdmon = variant
    cmd = [binary(build, lib), workload, "--n", str(n), "--runs", str(runs)]
    cmd += fdmon_args(fdmon)
    if iters:
        cmd += ["--iters", str(iters)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    res = {}
    for line in out.splitlines():
        kv = dict(f.split("=", 1) for f in line.split())
        res[kv["metric"]] = float(kv["median"])
    return res


def strace_calls(build, variant, iters):
    """Total syscalls of one idle_poll invocation (warm-up + 1 run)."""
    lib, fdmon = variant
    out = os.path.join("/tmp", f"bench-strace-{os.getpid()}")
    cmd = ["strace", "-f", "-c", "-q", "-o", out, binary(build, lib),
           "idle_poll", "--n", str(STRACE_N), "--runs", "1", "--iters",
           str(iters)] + fdmon_args(fdmon)
    subprocess.run(cmd, check=True, capture_output=True)
    with open(out) as f:
        text = f.read()
    os.unlink(out)
    total = [l for l in text.splitlines() if l.rstrip().endswith(" total")]
    return int(total[-1].split()[3])


def strace_pass(build, variants):
    """Syscalls per empty poll for each variant, or {} without strace."""
    if not shutil.which("strace"):
        print("run.py: strace not found, skipping the syscall pass",
              file=sys.stderr)
        return {}
    res = {}
    lo, hi = STRACE_ITERS
    for v in variants:
        print(f"  strace pass: idle_poll n={STRACE_N}: {report.label(v)}",
              file=sys.stderr, flush=True)
        calls = [strace_calls(build, v, k) for k in (lo, hi)]
        res[v] = (calls[1] - calls[0]) / (2 * (hi - lo))  # warm-up + 1 run
    return res


def workloads_of(build, lib):
    out = subprocess.run([binary(build, lib), "--list"], check=True,
                         capture_output=True, text=True).stdout
    return set(out.split())


def versions():
    def pkg(name):
        r = subprocess.run(["pkg-config", "--modversion", name],
                           capture_output=True, text=True)
        return r.stdout.strip() or "-"

    def deb(name):
        r = subprocess.run(["dpkg-query", "-W", "-f=${Version}", name],
                           capture_output=True, text=True)
        return r.stdout.strip() or "-"

    return {"libev": deb("libev-dev"), "libuv": pkg("libuv"),
            "libevent": pkg("libevent"), "glib": pkg("glib-2.0"),
            "liburing": pkg("liburing")}


def machine():
    cpu = "-"
    with open("/proc/cpuinfo") as f:
        m = re.search(r"model name\s*:\s*(.*)", f.read())
        cpu = m.group(1).strip() if m else cpu
    return {"cpu": cpu, "cpus": os.cpu_count(), "kernel": os.uname().release,
            "host": os.uname().nodename,
            "load_start": os.getloadavg()[0]}


def measure(build, todo, rounds):
    """Runs todo [(workload, n, runs, variants)], rounds interleaved;
    returns [{workload, n, lib (variant label), metric, median, samples}]."""
    results = []
    t_start = time.time()
    for i, (w, n, runs, variants) in enumerate(todo):
        samples = {v: {} for v in variants}
        for r in range(rounds):
            for v in variants:
                done = i + r / rounds
                eta = (time.time() - t_start) / done * (len(todo) - done) if done else 0
                print(f"[{time.time() - t_start:5.0f}s, ~{eta:4.0f}s left] "
                      f"{i + 1}/{len(todo)} {w} n={n}: {report.label(v)} "
                      f"round {r + 1}/{rounds}", file=sys.stderr, flush=True)
                for metric, val in run_one(build, v, w, n, runs).items():
                    samples[v].setdefault(metric, []).append(val)
        for v in variants:
            for metric, vals in samples[v].items():
                results.append({"workload": w, "n": n, "lib": report.label(v),
                                "metric": metric,
                                "median": statistics.median(vals),
                                "samples": vals})
    return results


def finish_headline(a, out_dir, info, results):
    """Writes headline.json and headline.py's table, bars and plot."""
    v = info["versions"]
    info["peers"] = (f"libev {v['libev']}, libuv {v['libuv']}, "
                     f"libevent {v['libevent']}")
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "headline.json"), "w") as f:
        json.dump({"info": info, "results": results}, f, indent=1)
    by = {(r["workload"], r["n"], r["lib"], r["metric"]): r["median"]
          for r in results}
    headline.write(out_dir, headline.rows(
        lambda w, n, var, m: by.get((w, n, report.label(var), m))), info)
    if a.docs:
        docs = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                            "docs", "bench")
        for name in ("headline.md", "headline.png"):
            if os.path.exists(os.path.join(out_dir, name)):
                shutil.copy(os.path.join(out_dir, name), docs)
    print(f"run.py: the headline took {info['seconds']} s; results in "
          f"{out_dir}; every workload and variant: make bench-loop",
          file=sys.stderr)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out")
    ap.add_argument("--docs", action="store_true")
    ap.add_argument("--only", metavar="W,W,...",
                    help="run only these workloads (and no strace pass)")
    ap.add_argument("--before", metavar="BUILD_DIR",
                    help="also run an earlier build's bench-aiol on epoll, "
                    "interleaved, for a before/after table")
    ap.add_argument("--headline", action="store_true",
                    help="only the headline's rows (headline.py)")
    a = ap.parse_args()
    global BEFORE_BUILD
    if a.before:
        BEFORE_BUILD = a.before
        VARIANTS.insert(VARIANTS.index(CONFINED) + 1, BEFORE)
    only = set(a.only.split(",")) if a.only else None
    if only and a.docs:
        ap.error("--docs publishes a whole run; --only measures a part")
    if only and not only <= {w for w, _, _, _ in WORKLOADS}:
        ap.error(f"unknown workloads: {', '.join(sorted(only - {w for w, _, _, _ in WORKLOADS}))}")
    if a.headline and (only or a.before):
        ap.error("--headline measures its own rows: no --only or --before")
    out_dir = a.out or os.path.join(a.build, "bench-results")
    # (the headline's rows take a few seconds a round: more rounds, steadier
    # medians, still in minutes)
    rounds = 3 if a.quick else 7 if a.headline else 5
    lists = {lib: workloads_of(a.build, lib)
             for lib in {v[0] for v in VARIANTS}
             if os.path.exists(binary(a.build, lib))}
    todo = []
    runs_of = {(w, n): runs for w, n, runs, _ in WORKLOADS}
    for w, n, runs, vs in (
            [(w, n, runs_of.get((w, n), 3), vs)
             for w, n, vs in headline.todo()] if a.headline else WORKLOADS):
        if (a.quick and (w, n) in QUICK_SKIP) or (only and w not in only):
            continue
        vs = [v for v in (vs or VARIANTS) if w in lists.get(v[0], ())]
        todo.append((w, QUICK_N.get(w, n) if a.quick else n, runs, vs))

    info = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "mode": ("headline " if a.headline else "") +
                    ("quick" if a.quick else "full") + (" partial" if only else ""),
            "command": " ".join(["run.py"] + sys.argv[1:]),
            "machine": machine(), "versions": versions(), "rounds": rounds}
    t_start = time.time()
    results = measure(a.build, todo, rounds)
    if a.headline:
        info["seconds"] = round(time.time() - t_start)
        finish_headline(a, out_dir, info, results)
        return
    for v, calls in ({} if only else strace_pass(
            a.build, [v for v in VARIANTS
                      if "idle_poll" in lists.get(v[0], ())])).items():
        results.append({"workload": "idle_poll", "n": STRACE_N,
                        "lib": report.label(v), "metric": "strace_syscalls_per_poll",
                        "median": calls, "samples": [calls]})
    info["seconds"] = round(time.time() - t_start)
    info["machine"]["load_end"] = os.getloadavg()[0]

    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "results.json"), "w") as f:
        json.dump({"info": info, "results": results}, f, indent=1)
    table, targets = report.write_all(out_dir, info, results,
                                      [report.label(v) for v in VARIANTS])
    print(table)
    print(targets)
    if a.docs:
        docs = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                            "docs", "bench")
        os.makedirs(docs, exist_ok=True)
        for name in os.listdir(out_dir):
            if name.endswith((".png", ".md", ".json")):
                shutil.copy(os.path.join(out_dir, name), docs)
        print(f"run.py: copied results to {os.path.normpath(docs)}",
              file=sys.stderr)
    print(f"run.py: {info['mode']} run took {info['seconds']} s; results in "
          f"{out_dir}", file=sys.stderr)


if __name__ == "__main__":
    main()
