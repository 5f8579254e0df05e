#!/usr/bin/python3
"""bench/run.py - runs the benchmark binaries side by side and prints the table.

Each library's binary (bench-aiol, bench-uv, ...) implements the shared
workloads (see bench.h).  Libraries are run interleaved, round by round, so
that machine noise hits them alike; each round's binary reports the median
of its own runs, and the table shows the median over rounds and each peer's
ratio to libaioloop (ratio > 1: the peer takes longer).

usage: run.py BUILD_DIR [--quick] [--markdown FILE]
"""
import argparse
import os
import platform
import statistics
import subprocess
import sys
import time

# (workload, n, libraries).  The first library is the reference.
WORKLOADS = [
    ("bh_single", 1, ["aiol"]),
    ("bh_burst", 1000, ["aiol"]),
    ("wakeup", 20000, ["aiol", "uv"]),
    ("timers", 1000000, ["aiol", "uv"]),
]
QUICK_N = {"wakeup": 5000, "timers": 200000}


def run_one(build, lib, workload, n, runs):
    exe = os.path.join(build, "bench", "bench-" + lib)
    out = subprocess.run([exe, workload, "--n", str(n), "--runs", str(runs)],
                         check=True, capture_output=True, text=True).stdout
    res = {}
    for line in out.splitlines():
        kv = dict(f.split("=", 1) for f in line.split())
        res[kv["metric"]] = (float(kv["median"]), kv["unit"])
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--markdown")
    a = ap.parse_args()
    rounds, runs = (3, 3) if a.quick else (5, 3)
    libs_present = {lib for _, _, libs in WORKLOADS for lib in libs
                    if os.path.exists(os.path.join(a.build, "bench", "bench-" + lib))}

    rows = []
    t_start = time.time()
    for i, (w, n, libs) in enumerate(WORKLOADS):
        if a.quick:
            n = QUICK_N.get(w, n)
        libs = [lib for lib in libs if lib in libs_present]
        samples = {lib: {} for lib in libs}
        for r in range(rounds):
            for lib in libs:
                print(f"[{time.time() - t_start:5.0f}s] workload {i + 1}/{len(WORKLOADS)} "
                      f"{w} n={n}: {lib} round {r + 1}/{rounds}", file=sys.stderr, flush=True)
                for metric, (v, unit) in run_one(a.build, lib, w, n, runs).items():
                    samples[lib].setdefault(metric, []).append(v)
        for metric in samples[libs[0]]:
            ref = statistics.median(samples[libs[0]][metric])
            row = [w, str(n), metric, f"{ref:.1f}"]
            for lib in libs[1:]:
                peer = statistics.median(samples[lib][metric])
                row.append(f"{lib} {peer:.1f} ({peer / ref:.2f}x)")
            rows.append(row)

    header = (f"libaioloop benchmarks, {time.strftime('%Y-%m-%d')}, "
              f"{platform.node()}, Linux {platform.release()}, "
              f"{os.cpu_count()} CPUs, {'quick' if a.quick else 'full'} mode\n"
              "Medians over interleaved rounds; (Nx) = peer / libaioloop, "
              "above 1 means libaioloop is faster.\n")
    lines = ["| workload | n | metric | libaioloop | peers |",
             "|---|---|---|---|---|"]
    lines += ["| " + " | ".join(r[:4] + ["; ".join(r[4:]) or "-"]) + " |" for r in rows]
    table = header + "\n" + "\n".join(lines) + "\n"
    print(table)
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write(table)


if __name__ == "__main__":
    main()
