#!/usr/bin/python3
"""bench/run.py - runs the benchmark binaries side by side and prints the table.

Each library's binary (bench-aiol, bench-uv, ...) implements the shared
workloads (see bench.h).  Libraries are run interleaved, round by round, so
that machine noise hits them alike; each round's binary reports the median
of its own runs, and the table shows the median over rounds and each peer's
ratio to the row's first column (for times, > 1 means the first column is
faster).

usage: run.py BUILD_DIR [--quick] [--markdown FILE]
"""
import argparse
import os
import platform
import statistics
import subprocess
import sys
import time

# (workload, n, variants): each variant is (binary, backend or None).  The
# first variant is the reference the others' ratios are taken against.
AIOL = [("aiol", "epoll"), ("aiol", "io_uring")]
WORKLOADS = [
    ("bh_single", 1, AIOL),
    ("bh_burst", 1000, AIOL),
    ("wakeup", 20000, AIOL + [("uv", None)]),
    ("timers", 1000000, [("aiol", "epoll"), ("uv", None)]),
    ("idle_poll", 1000, AIOL),
    ("churn", 1000, AIOL + [("aiol", "poll")]),
] + [("ready1", n, AIOL + ([("aiol", "poll")] if n <= 1000 else []))
     for n in (1, 64, 1000, 9900)] \
  + [(w, n, AIOL) for w in ("chain_a1", "chain_a100") for n in (100, 1000, 9900)]
QUICK_SKIP = {("ready1", 9900), ("chain_a1", 9900), ("chain_a100", 9900)}
QUICK_N = {"wakeup": 5000, "timers": 200000}


def label(variant):
    lib, backend = variant
    return {"aiol": "aioloop", "uv": "libuv"}.get(lib, lib) + (f":{backend}" if backend else "")


def run_one(build, variant, workload, n, runs):
    lib, backend = variant
    cmd = [os.path.join(build, "bench", "bench-" + lib), workload,
           "--n", str(n), "--runs", str(runs)]
    if backend:
        cmd += ["--backend", backend]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
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
    present = lambda v: os.path.exists(os.path.join(a.build, "bench", "bench-" + v[0]))
    todo = [(w, QUICK_N.get(w, n) if a.quick else n, [v for v in vs if present(v)])
            for w, n, vs in WORKLOADS if not (a.quick and (w, n) in QUICK_SKIP)]

    rows = []
    t_start = time.time()
    for i, (w, n, variants) in enumerate(todo):
        samples = {v: {} for v in variants}
        for r in range(rounds):
            for v in variants:
                done = i + r / rounds
                eta = (time.time() - t_start) / done * (len(todo) - done) if done else 0
                print(f"[{time.time() - t_start:5.0f}s, ~{eta:4.0f}s left] "
                      f"{i + 1}/{len(todo)} {w} n={n}: {label(v)} round {r + 1}/{rounds}",
                      file=sys.stderr, flush=True)
                for metric, (val, unit) in run_one(a.build, v, w, n, runs).items():
                    samples[v].setdefault(metric, []).append(val)
        for metric in samples[variants[0]]:
            ref = statistics.median(samples[variants[0]][metric])
            cells = [f"{label(variants[0])} {ref:.3g}"]
            for v in variants[1:]:
                val = statistics.median(samples[v][metric])
                ratio = f" ({val / ref:.2f}x)" if ref else ""
                cells.append(f"{label(v)} {val:.3g}{ratio}")
            rows.append([w, str(n), metric] + cells)

    header = (f"libaioloop benchmarks, {time.strftime('%Y-%m-%d')}, "
              f"{platform.node()}, Linux {platform.release()}, "
              f"{os.cpu_count()} CPUs, {'quick' if a.quick else 'full'} mode\n"
              "Medians over interleaved rounds; (Nx) = value / first column's "
              "value.\n")
    lines = ["| workload | n | metric | reference | others |",
             "|---|---|---|---|---|"]
    lines += ["| " + " | ".join(r[:4] + ["; ".join(r[4:]) or "-"]) + " |" for r in rows]
    table = header + "\n" + "\n".join(lines) + "\n"
    print(table)
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write(table)


if __name__ == "__main__":
    main()
