# SPDX-License-Identifier: MIT
"""bench/headline.py - the answer `make bench` prints: is libaioloop faster
than libev, libuv and libevent, and by how much.

One row per workload: libaioloop's median, the best median among the peers
its performance target names (docs/benchmarks.md), their ratio and whether
the target is met (every headline target is "at or below": times, lower is
better).  Then the same ratios as bars, in the terminal and as a PNG.
run.py measures the rows (`run.py BUILD --headline`); the full table of
every workload and variant is `make bench-loop`.
"""
import os
import shutil
import subprocess
import sys
from collections import namedtuple

import report

# run.py's variants: (library, fd monitor or None)
OURS = ("aiol", "epoll")
CONFINED = ("aiol", "epoll+confined")
EV, UV, EVENT = ("ev", None), ("uv", None), ("event", None)
PEERS = (EV, UV, EVENT)

# label: what the row measures (with its unit); ours: libaioloop's variant
# and workload; peers: the variants the target compares with, on
# peer_workload (None: the same workload).
Row = namedtuple("Row", "label workload n metric unit ours peers peer_workload")
ROWS = [
    Row("chain: 1 of 1,000 fds active", "chain_a1", 1000, "event_us", "µs",
        OURS, PEERS, None),
    Row("chain: 1 of 9,900 fds active", "chain_a1", 9900, "event_us", "µs",
        OURS, PEERS, None),
    Row("chain: 100 of 1,000 fds active", "chain_a100", 1000, "event_us",
        "µs", OURS, PEERS, None),
    Row("chain: 100 of 9,900 fds active", "chain_a100", 9900, "event_us",
        "µs", OURS, PEERS, None),
    Row("fd add+remove, poll per batch", "churn", 1000,
        "ns_per_pair_polled", "ns", OURS, (EV,), None),
    Row("fd add+remove, poll per batch, confined", "churn", 1000,
        "ns_per_pair_polled", "ns", CONFINED, (EV,), None),
    Row("fd add+remove, back to back, confined", "churn", 1000,
        "ns_per_pair", "ns", CONFINED, (EV,), None),
    Row("bottom half, one at a time", "bh_single", 1, "ns_per_bh", "ns",
        OURS, PEERS, None),
    Row("bottom halves in bursts (local)", "bh_local_burst", 1000,
        "ns_per_bh", "ns", OURS, (UV,), "bh_burst"),
    Row("cross-thread wakeup round trip", "wakeup", 10000,
        "ns_per_roundtrip", "ns", OURS, PEERS, None),
    Row("1M timers: arm", "timers", 1000000, "arm_ns_per_timer", "ns",
        OURS, (EV,), None),
    Row("1M timers: fire (CPU)", "timers", 1000000, "fire_cpu_ns_per_timer",
        "ns", OURS, (EV,), None),
    Row("1M timers, scrambled: fire (CPU)", "timers_rand", 1000000,
        "fire_cpu_ns_per_timer", "ns", OURS, (EV,), None),
]


def todo():
    """(workload, n, variants) for run.py: what the rows need measured."""
    need = {}
    for r in ROWS:
        need.setdefault((r.workload, r.n), []).append(r.ours)
        need.setdefault((r.peer_workload or r.workload, r.n), []).extend(
            r.peers)
    return [(w, n, list(dict.fromkeys(vs))) for (w, n), vs in need.items()]


def rows(get):
    """The measured rows: get(workload, n, variant, metric) -> median or
    None.  Yields (row, ours, (peer name, peer's median) or None, ratio)."""
    for r in ROWS:
        ours = get(r.workload, r.n, r.ours, r.metric)
        peers = [(get(r.peer_workload or r.workload, r.n, p, r.metric),
                  report.label(p)) for p in r.peers]
        peers = [p for p in peers if p[0] is not None]
        best = min(peers) if peers else None
        ratio = ours / best[0] if ours is not None and best else None
        yield r, ours, best, ratio


def _num(v):
    if v is None:
        return "-"
    return f"{v:,.0f}" if v >= 1000 else f"{v:.1f}" if v >= 10 else f"{v:.2f}"


def table(measured, info):
    """The terminal table (at most 100 columns) and its markdown twin."""
    text = [f"libaioloop (epoll) against {info['peers']}",
            f"{info['date']}: medians of {info['rounds']} interleaved rounds; "
            "times, lower is better",
            "ratio = libaioloop / the best of the peers its target names; met: "
            "at most 1.00", "",
            f"{'workload':<44} {'libaioloop':>11}  {'best peer':<20} "
            f"{'ratio':>6}  target"]
    md = ["| workload | libaioloop | best peer | ratio | target |",
          "|---|---:|---|---:|---|"]
    met = 0
    for r, ours, best, ratio in measured:
        ok = ratio is not None and round(ratio, 2) <= 1.0  # (as shown)
        met += ok
        state = "-" if ratio is None else "met" if ok else "unmet"
        peer = "-" if best is None else f"{best[1]} {_num(best[0])}"
        rt = "-" if ratio is None else f"{ratio:.2f}x"
        text.append(f"{r.label + ', ' + r.unit:<44} {_num(ours):>11}  "
                    f"{peer:<20} {rt:>6}  {state}")
        md.append(f"| {r.label.strip()}, {r.unit} | {_num(ours)} | {peer} | "
                  f"{rt} | {state} |")
    text += ["", f"{met} of {len(ROWS)} targets met."]
    return "\n".join(text) + "\n", "\n".join(md) + "\n"


BAR = 40  # columns for ratios 0..2; 1.0 (parity) at the middle


def bars(measured):
    """The ratios as terminal bars: '|' marks parity, '>' a ratio past 2."""
    out = [f"{'ratio to the best peer':<44} 0{'':{BAR // 2 - 1}}1"
           f"{'':{BAR // 2 - 1}}2"]
    for r, _, _, ratio in measured:
        if ratio is None:
            out.append(f"{r.label:<44} -")
            continue
        cells = min(BAR, round(ratio * BAR / 2))
        line = ["#"] * cells + [" "] * (BAR - cells)
        if line[BAR // 2] == " ":
            line[BAR // 2] = "|"
        tail = ">" if ratio > 2 else ""
        out.append(f"{r.label:<44} {''.join(line)}{tail} {ratio:.2f}")
    return "\n".join(out) + "\n"


def plot(out_dir, measured):
    """headline.png: the ratios as bars with parity marked; the file name,
    or None without gnuplot."""
    if not shutil.which("gnuplot"):
        print("headline.py: gnuplot not found, no plot", file=sys.stderr)
        return None
    with open(os.path.join(out_dir, "headline.dat"), "w") as f:
        for r, _, best, ratio in measured:
            if ratio is not None:
                f.write(f'"{r.label.strip()} (vs {best[1]})" {ratio:.4f}\n')
    n = sum(1 for _, _, _, ratio in measured if ratio is not None)
    script = f"""set terminal pngcairo size 900,{120 + 32 * n} font ",10" noenhanced
set output "headline.png"
set title "libaioloop / the best peer, median time (left of 1: libaioloop is faster)"
set yrange [{n - 0.4}:-0.6]
set xrange [0:*]
set ytics scale 0
set grid xtics
set arrow from 1, graph 0 to 1, graph 1 nohead lw 2 lc rgb "black"
unset key
plot "headline.dat" using ($2/2):0:($2/2):(0.35):ytic(1) with boxxyerror fs solid 0.8 border -1
"""
    with open(os.path.join(out_dir, "headline.gp"), "w") as f:
        f.write(script)
    r = subprocess.run(["gnuplot", "headline.gp"], cwd=out_dir,
                       capture_output=True, text=True)
    if r.returncode != 0:
        print(f"headline.py: gnuplot: {r.stderr}", file=sys.stderr)
        return None
    return "headline.png"


def write(out_dir, measured, info):
    """Prints the table and the bars; writes headline.md (and the PNG)."""
    measured = list(measured)
    text, md = table(measured, info)
    png = plot(out_dir, measured)
    with open(os.path.join(out_dir, "headline.md"), "w") as f:
        f.write(f"Run {info['date']}, `{info['command']}`: libaioloop on "
                f"epoll against {info['peers']}, medians of {info['rounds']} "
                f"interleaved rounds.\n\n" + md +
                (f"\n![ratios](headline.png)\n" if png else ""))
    print(text)
    print(bars(measured))
    if png:
        print(f"plot: {os.path.join(out_dir, png)}")
