# SPDX-License-Identifier: MIT
"""bench/report.py - the table, the performance target checks and the gnuplot
plots from one run of bench/run.py (results as a list of dicts).

Run alone, it redoes them from a run's results.json, without measuring:
    report.py RESULTS_JSON OUT_DIR
"""
import json
import os
import shutil
import subprocess
import sys

NAMES = {"aiol": "aioloop", "ev": "libev", "uv": "libuv", "event": "libevent",
         "glib": "glib", "epoll": "epoll (hand-written)",
         "before": "aioloop before"}  # (run.py --before: an earlier build)
REF = "aioloop:epoll"
CONFINED = "aioloop:epoll+confined"  # a thread-confined loop (loop.h)
CHAIN_PEERS = ("libev", "libuv", "libevent")  # the chain target's "best peer"
FLOOR = "epoll (hand-written)"


def label(variant):
    lib, fdmon = variant
    return NAMES.get(lib, lib) + (f":{fdmon}" if fdmon else "")


def fmt(v):
    if v is None:
        return "-"
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    if abs(v) >= 10:
        return f"{v:.1f}"
    if abs(v) >= 0.005:
        return f"{v:.3g}"
    return "0"


class Results:
    def __init__(self, results):
        self.by = {(r["workload"], r["n"], r["lib"], r["metric"]): r["median"]
                   for r in results}
        self.rows = []
        for r in results:
            key = (r["workload"], r["n"], r["metric"])
            if key not in self.rows:
                self.rows.append(key)
        # Keep each workload's rows together (the strace pass comes last).
        first = {}
        for i, (w, _, _) in enumerate(self.rows):
            first.setdefault(w, i)
        self.rows.sort(key=lambda k: first[k[0]])

    def get(self, w, n, lib, metric):
        return self.by.get((w, n, lib, metric))

    def ns(self, w):
        return sorted({n for (ww, n, _) in self.rows if ww == w})


def header(info):
    m, v = info["machine"], info["versions"]
    return (f"Run {info['date']}, {info['mode']} mode ({info['rounds']} "
            f"interleaved rounds, {info['seconds']} s), `{info['command']}`.  "
            f"Machine: {m['cpu']}, {m['cpus']} CPUs, Linux {m['kernel']}, "
            f"load average {m['load_start']:.2f} at start, "
            f"{m['load_end']:.2f} at end.  Peers: libev {v['libev']}, "
            f"libuv {v['libuv']}, libevent {v['libevent']}, glib "
            f"{v['glib']}; liburing {v['liburing']}.\n")


def table(res, columns):
    cols = [c for c in columns if any(k[2] == c for k in res.by)]
    lines = ["| workload | n | metric | " + " | ".join(cols) + " |",
             "|---|---:|---|" + "---:|" * len(cols)]
    for w, n, metric in res.rows:
        ref = res.get(w, n, REF, metric)
        cells = []
        for c in cols:
            v = res.get(w, n, c, metric)
            cell = fmt(v)
            if v is not None and c != REF and ref and not metric.startswith(
                    ("syscalls", "strace", "polls")):
                cell += f" ({v / ref:.2f}×)"
            cells.append(cell)
        lines.append(f"| {w} | {n} | {metric} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def status(ok):
    if ok is None:
        return "not measured"
    return "**met**" if ok else "**unmet**"


def ratio(a, b):
    return f"{a / b:.2f}×" if a is not None and b else "-"


def targets(res):
    out = ["| performance target | measured (libaioloop epoll unless said; ratio = "
           "libaioloop / other) | status |", "|---|---|---|"]

    def row(target, measured, ok):
        out.append(f"| {target} | {measured} | {status(ok)} |")

    for w in ("chain_a1", "chain_a100"):
        for n in res.ns(w):
            ref = res.get(w, n, REF, "event_us")
            peers = [(res.get(w, n, p, "event_us"), p) for p in CHAIN_PEERS]
            peers = [p for p in peers if p[0] is not None]
            floor = res.get(w, n, FLOOR, "event_us")
            if ref is None:
                continue
            if peers:
                best, who = min(peers)
                row(f"chain event time ≤ best peer ({w}, n={n})",
                    f"{fmt(ref)} µs vs {who} {fmt(best)} µs ({ratio(ref, best)})",
                    ref <= best)
            row(f"chain event time within 5% of hand-written epoll ({w}, n={n})",
                f"{fmt(ref)} µs vs {fmt(floor)} µs ({ratio(ref, floor)})",
                None if floor is None else ref <= 1.05 * floor)
    for w in ("chain_a1", "chain_a100"):
        ring_w = w.replace("chain", "chain_ring")
        for n in res.ns(ring_w):
            ring = res.get(ring_w, n, "aioloop:io_uring", "event_us")
            ref = res.get(w, n, REF, "event_us")
            floor = res.get(w, n, FLOOR, "event_us")
            if ring is None or ref is None:
                continue
            row(f"chain's I/O as io_uring completions ≤ epoll + read/write, "
                f"and < hand-written epoll ({ring_w}, n={n})",
                f"io_uring {fmt(ring)} µs vs epoll {fmt(ref)} µs "
                f"({ratio(ring, ref)}), hand-written {fmt(floor)} µs "
                f"({ratio(ring, floor)})",
                None if floor is None else ring <= ref and ring < floor)
    for n in res.ns("chain_a1"):
        sc = res.get("chain_a1", n, REF, "syscalls_per_event")
        if sc is not None:
            # 101 events per iteration; a syscall per re-armed handler would
            # add n / 101 per event.
            row(f"re-arming an unchanged handler costs no syscall (chain_a1, n={n})",
                f"{sc:.3f} fd-monitor syscalls per event with all {n} handlers "
                f"re-armed every iteration (one per re-arm would add "
                f"{n / 101:.1f})", sc < 1 + n / 101 / 10)
    own = res.get("idle_poll", 1000, REF, "syscalls_per_poll")
    st = res.get("idle_poll", 1000, REF, "strace_syscalls_per_poll")
    if own is not None or st is not None:
        others = ", ".join(
            f"{lib} {res.get('idle_poll', 1000, lib, 'strace_syscalls_per_poll'):.2f}"
            for (w, n, lib, m) in res.by if w == "idle_poll" and
            m == "strace_syscalls_per_poll" and lib != REF)
        row("empty non-blocking poll ≤ 1 syscall",
            f"{fmt(own)} by the loop's count, "
            f"{'-' if st is None else f'{st:.2f}'} by strace (others by strace: "
            f"{others or '-'})",
            (st if st is not None else own) <= 1.01)
    for n in res.ns("churn"):
        a = res.get("churn", n, REF, "ns_per_pair")
        ev = res.get("churn", n, "libev", "ns_per_pair")
        ap = res.get("churn", n, REF, "ns_per_pair_polled")
        evp = res.get("churn", n, "libev", "ns_per_pair_polled")
        if a is not None:
            row(f"handler add+remove at or below libev's, back to back (n={n})",
                f"{fmt(a)} ns vs libev {fmt(ev)} ns ({ratio(a, ev)})",
                None if ev is None else a <= ev)
        if ap is not None:
            row(f"handler add+remove at or below libev's, a poll after each "
                f"batch (n={n})",
                f"{fmt(ap)} ns vs libev {fmt(evp)} ns ({ratio(ap, evp)})",
                None if evp is None else ap <= evp)
    confined_targets(res, row)
    for n in res.ns("bh_local_burst"):
        a = res.get("bh_local_burst", n, REF, "ns_per_bh")
        t = res.get("bh_burst", n, REF, "ns_per_bh")
        uv = res.get("bh_burst", n, "libuv", "ns_per_bh")
        if a is not None:
            row("BH burst at or below libuv's (local bottom halves, as "
                "libuv's handles are single-threaded)",
                f"{fmt(a)} ns per BH vs libuv {fmt(uv)} ns ({ratio(a, uv)}); "
                f"thread-safe ones {fmt(t)} ns ({ratio(t, uv)})",
                None if uv is None else a <= uv)
    for w, limit in (("bh_burst", 50), ("bh_single", 250)):
        for n in res.ns(w):
            v = res.get(w, n, REF, "ns_per_bh")
            u = res.get(w, n, "aioloop:io_uring", "ns_per_bh")
            if v is not None:
                row(f"BH schedule+run < {limit} ns ({w})",
                    f"{fmt(v)} ns (io_uring fd monitor {fmt(u)} ns)", v < limit)
    for n in res.ns("wakeup"):
        a = res.get("wakeup", n, REF, "ns_per_roundtrip")
        uv = res.get("wakeup", n, "libuv", "ns_per_roundtrip")
        if a is not None:
            row("cross-thread wakeup rate ≥ libuv's",
                f"{fmt(a)} ns per round trip vs libuv {fmt(uv)} ns "
                f"({ratio(a, uv)})", None if uv is None else a <= uv)
    for n in res.ns("timers"):
        for m, what in (("arm_ns_per_timer", "arm"),
                        ("fire_cpu_ns_per_timer", "fire (CPU)")):
            a = res.get("timers", n, REF, m)
            uv = res.get("timers", n, "libuv", m)
            if a is not None:
                row(f"million timers faster than libuv: {what} (n={n})",
                    f"{fmt(a)} ns per timer vs libuv {fmt(uv)} ns ({ratio(a, uv)})",
                    None if uv is None else a < uv)
    for w in ("timers", "timers_rand"):
        for n in res.ns(w):
            a = res.get(w, n, REF, "fire_cpu_ns_per_timer")
            ev = res.get(w, n, "libev", "fire_cpu_ns_per_timer")
            late = res.get(w, n, REF, "last_late_ms")
            if a is not None:
                row(f"timer firing at or below libev ({w}, n={n})",
                    f"{fmt(a)} CPU ns per timer vs libev {fmt(ev)} ns "
                    f"({ratio(a, ev)})", None if ev is None else a <= ev)
            if late is not None:
                evl = res.get(w, n, "libev", "last_late_ms")
                row(f"timers on time: the last fires within 1 ms of its "
                    f"deadline ({w}, n={n})",
                    f"{late:.2f} ms after (libev "
                    f"{'-' if evl is None else f'{evl:.2f}'} ms)", late <= 1.0)
    # io_uring's readiness against epoll's, on the same loop: at parity
    # where it waits for readiness alone (the chain), within 10% where it
    # registers and cancels (churn, rearm).
    uring = "aioloop:io_uring"
    for w, m, limit, what in (
            ("chain_a1", "event_us", 1.05, "per-event cost"),
            ("chain_a100", "event_us", 1.05, "per-event cost"),
            ("churn", "ns_per_pair_polled", 1.10,
             "add+remove with a poll after each batch"),
            ("rearm", "total_us", 1.10,
             "stopping and starting every watcher, then the events")):
        for n in res.ns(w):
            e, u = res.get(w, n, REF, m), res.get(w, n, uring, m)
            if e is None:
                continue
            extra = ""
            if w == "rearm":
                ee = res.get(w, n, REF, "event_us")
                ue = res.get(w, n, uring, "event_us")
                extra = (f"; the event phase alone {fmt(ue)} vs {fmt(ee)} µs "
                         f"({ratio(ue, ee)})")
            row(f"io_uring {what} ≤ {limit:.2f}× epoll ({w}, n={n})",
                f"{fmt(u)} vs {fmt(e)} {'µs' if m.endswith('us') else 'ns'} "
                f"({ratio(u, e)}){extra}",
                None if u is None else u <= limit * e)
    for n in res.ns("ready1_drains"):
        e = res.get("ready1_drains", n, REF, "ns_per_event")
        u = res.get("ready1_drains", n, uring, "ns_per_event")
        u1 = res.get("ready1", n, uring, "ns_per_event")
        if e is not None:
            row(f"io_uring with AIOL_FD_DRAINS (multishot polls) ≤ epoll "
                f"(ready1_drains, n={n})",
                f"{fmt(u)} vs {fmt(e)} ns ({ratio(u, e)}); single-shot "
                f"re-arms (ready1) {fmt(u1)} ns",
                None if u is None else u <= e)
    return "\n".join(out) + "\n"


def confined_targets(res, row):
    """The rows of a thread-confined loop (AIOL_LOOP_CONFINED) against the
    peers whose loops are confined by design."""
    for n in res.ns("churn"):
        for m, how in (("ns_per_pair", "back to back"),
                       ("ns_per_pair_polled", "a poll after each batch")):
            c = res.get("churn", n, CONFINED, m)
            ev = res.get("churn", n, "libev", m)
            sh = res.get("churn", n, REF, m)
            if c is not None:
                row(f"confined loop: handler add+remove at or below libev's, "
                    f"{how} (n={n})",
                    f"{fmt(c)} ns vs libev {fmt(ev)} ns ({ratio(c, ev)}); "
                    f"shared loop {fmt(sh)} ns",
                    None if ev is None else c <= ev)
    for w in ("bh_single", "bh_burst"):
        for n in res.ns(w):
            c = res.get(w, n, CONFINED, "ns_per_bh")
            uv = res.get(w, n, "libuv", "ns_per_bh")
            if c is not None:
                row(f"confined loop: BH schedule+run at or below libuv's ({w})",
                    f"{fmt(c)} ns vs libuv {fmt(uv)} ns ({ratio(c, uv)})",
                    None if uv is None else c <= uv)
    for w in ("chain_a1", "chain_a100"):
        for n in res.ns(w):
            c = res.get(w, n, CONFINED, "event_us")
            floor = res.get(w, n, FLOOR, "event_us")
            if c is not None:
                row(f"confined loop: chain event time within 5% of "
                    f"hand-written epoll ({w}, n={n})",
                    f"{fmt(c)} µs vs {fmt(floor)} µs ({ratio(c, floor)})",
                    None if floor is None else c <= 1.05 * floor)
    for w in ("timers", "timers_rand"):
        for n in res.ns(w):
            c = res.get(w, n, CONFINED, "fire_cpu_ns_per_timer")
            ev = res.get(w, n, "libev", "fire_cpu_ns_per_timer")
            if c is not None:
                row(f"confined loop: timer firing at or below libev "
                    f"({w}, n={n})",
                    f"{fmt(c)} CPU ns per timer vs libev {fmt(ev)} ns "
                    f"({ratio(c, ev)})", None if ev is None else c <= ev)


def plots(out_dir, res, columns):
    if not shutil.which("gnuplot"):
        print("report.py: gnuplot not found, no plots", file=sys.stderr)
        return []
    made = []
    for w in ("chain_a1", "chain_a100"):
        ns = res.ns(w)
        cols = [c for c in columns if any(res.get(w, n, c, "event_us") for n in ns)]
        if not ns or not cols:
            continue
        for metric in ("event_us", "total_us"):
            with open(os.path.join(out_dir, f"{w}_{metric}.dat"), "w") as f:
                f.write("n " + " ".join(f'"{c}"' for c in cols) + "\n")
                for n in ns:
                    f.write(f"{n} " + " ".join(
                        str(res.get(w, n, c, metric) or "?") for c in cols) + "\n")
        active = "1 active, 100 writes" if w == "chain_a1" else "100 active, 1000 writes"
        gp = f"""set terminal pngcairo size 1200,480 font ",10" noenhanced
set output "{w}.png"
set datafile missing "?"
set logscale xy
set xlabel "socketpairs (n)"
set ylabel "µs per iteration"
set grid
set multiplot layout 1,2 title "chain ({active}): time per iteration, median"
set title "event loop part"
unset key
plot for [i=2:{len(cols) + 1}] "{w}_event_us.dat" using 1:i with linespoints title columnheader(i)
set title "total, with re-arm of all n handlers"
set key outside right
plot for [i=2:{len(cols) + 1}] "{w}_total_us.dat" using 1:i with linespoints title columnheader(i)
unset multiplot
"""
        made += run_gnuplot(out_dir, w, gp)
    for w, metrics, keys, ylabel, title in (
            ("timers", ("arm_ns_per_timer", "fire_cpu_ns_per_timer"),
             ("arm", "fire (CPU time)"), "ns per timer",
             "million timers: arm and fire per timer"),
            ("timers_rand", ("arm_ns_per_timer", "fire_cpu_ns_per_timer"),
             ("arm", "fire (CPU time)"), "ns per timer",
             "million timers armed in scrambled order: arm and fire"),
            ("wakeup", ("ns_per_roundtrip",), ("round trip",),
             "µs per round trip",
             "cross-thread wakeup ping-pong: round-trip latency")):
        for n in res.ns(w):
            cols = [c for c in columns if res.get(w, n, c, metrics[0]) is not None]
            scale = 1e3 if w == "wakeup" else 1
            with open(os.path.join(out_dir, f"{w}.dat"), "w") as f:
                f.write("# lib " + " ".join(metrics) + "\n")
                for c in cols:
                    f.write(f'"{c}" ' + " ".join(
                        str(res.get(w, n, c, m) / scale) for m in metrics) + "\n")
            plot = ", ".join(
                f'"{w}.dat" using {i + 2}' + (":xtic(1)" if i == 0 else "")
                + f' title "{keys[i]}"' for i in range(len(metrics)))
            gp = f"""set terminal pngcairo size 900,480 font ",10" noenhanced
set output "{w}.png"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set ylabel "{ylabel}"
set title "{title} (n={n}, median)"
set xtics rotate by -30
set yrange [0:*]
set grid ytics
set key top left
plot {plot}
"""
            made += run_gnuplot(out_dir, w, gp)
    return made


def run_gnuplot(out_dir, name, script):
    path = os.path.join(out_dir, name + ".gp")
    with open(path, "w") as f:
        f.write(script)
    r = subprocess.run(["gnuplot", name + ".gp"], cwd=out_dir,
                       capture_output=True, text=True)
    if r.returncode != 0:
        print(f"report.py: gnuplot {name}: {r.stderr}", file=sys.stderr)
        return []
    return [name + ".png"]


def before_after(res):
    """Every row libaioloop on epoll and the earlier build (run.py
    --before) both measured, interleaved in this run: '' when there is no
    earlier build."""
    before = "aioloop before:epoll"
    rows = [(w, n, m) for (w, n, m) in res.rows
            if res.get(w, n, before, m) is not None and
            res.get(w, n, REF, m) is not None]
    if not rows:
        return ""
    out = ["\nBefore and after, interleaved (aioloop:epoll against the "
           "earlier build's; after / before, for times below 1 is faster):\n",
           "| workload | n | metric | before | after | after / before |",
           "|---|---|---|---:|---:|---:|"]
    for w, n, m in rows:
        b, a = res.get(w, n, before, m), res.get(w, n, REF, m)
        out.append(f"| {w} | {n} | {m} | {fmt(b)} | {fmt(a)} | "
                   f"{'-' if not b else f'{a / b:.2f}'} |")
    return "\n".join(out) + "\n"


def write_all(out_dir, info, results, columns):
    res = Results(results)
    tab = header(info) + "\nMedians; (N×) = value / libaioloop epoll's value " \
        "(for times, above 1 means libaioloop is faster).\n\n" + \
        table(res, columns) + before_after(res)
    tgt = targets(res)
    made = plots(out_dir, res, columns)
    with open(os.path.join(out_dir, "table.md"), "w") as f:
        f.write(tab)
    with open(os.path.join(out_dir, "targets.md"), "w") as f:
        f.write(tgt)
    with open(os.path.join(out_dir, "plots.md"), "w") as f:
        f.write("".join(f"![{p[:-4]}]({p})\n\n" for p in made))
    return tab, tgt


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        run = json.load(f)
    os.makedirs(sys.argv[2], exist_ok=True)
    cols = list(dict.fromkeys(r["lib"] for r in run["results"]))
    cols.sort(key=lambda c: list(NAMES.values()).index(c.split(":")[0]))
    write_all(sys.argv[2], run["info"], run["results"], cols)
