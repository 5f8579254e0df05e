# SPDX-License-Identifier: MIT
"""Python-level loop costs: aioloop against asyncio and uvloop, interleaved.

    PYTHONPATH=<build>/bindings/python /usr/bin/python3 bench/python_bench.py
        [--rounds N] [--quick] [--json FILE]

Workloads, the same Python work on every loop:
  call_soon   a burst of N callbacks scheduled with call_soon, then run
              (ns per callback, scheduling included);
  chain       each callback schedules the next with call_soon (ns per
              callback: one iteration each);
  pingpong    two socketpair ends; each reader reads a byte and writes
              one to the other side (ns per readiness dispatch).
"aioloop" is the classic Loop API; "aioloop-asyncio" the same asyncio
code as the asyncio and uvloop columns, on aioloop's asyncio loop
(aioloop.new_event_loop()).  Then python_echo.py's asyncio servers on
the three asyncio loops (messages per second; target: aioloop-asyncio
at or above uvloop).
Each cell is the median of ROUNDS rounds; the loops take turns within a
round, so machine noise hits all of them alike.  Ratios are against
asyncio's default loop measured in the same run.
"""
import argparse
import asyncio
import json
import os
import socket
import statistics
import sys
import time

import aioloop
import python_echo

try:
    import uvloop
except ImportError:  # (python3-uvloop; make bench-deps installs it)
    uvloop = None


# ------------------------------------------------------------ aioloop

def aio_call_soon(n):
    with aioloop.Loop() as loop:
        left = [n]

        def cb():
            left[0] -= 1

        t0 = time.perf_counter_ns()
        for _ in range(n):
            loop.call_soon(cb)
        while left[0]:
            loop.poll(blocking=False)
        return (time.perf_counter_ns() - t0) / n


def aio_chain(n):
    with aioloop.Loop() as loop:
        left = [n]

        def cb():
            left[0] -= 1
            if left[0]:
                loop.call_soon(cb)

        t0 = time.perf_counter_ns()
        loop.call_soon(cb)
        while left[0]:
            loop.poll(blocking=False)
        return (time.perf_counter_ns() - t0) / n


def _pingpong_pair(n, done=None):
    """A non-blocking socketpair and the reader both ends run: read a
    byte, write one to the other end until n bytes went round, then
    done()."""
    a, b = socket.socketpair()
    a.setblocking(False)
    b.setblocking(False)
    left = [n]

    def bounce(src, dst):
        src.recv(1)
        left[0] -= 1
        if left[0] > 0:
            dst.send(b"x")
        elif done is not None:
            done()

    return a, b, left, bounce


def aio_pingpong(n):
    a, b, left, bounce = _pingpong_pair(n)
    with aioloop.Loop() as loop, a, b:
        loop.add_reader(a, bounce, a, b)
        loop.add_reader(b, bounce, b, a)
        t0 = time.perf_counter_ns()
        a.send(b"x")
        while left[0] > 0:
            loop.poll()
        dt = time.perf_counter_ns() - t0
        loop.remove_reader(a)
        loop.remove_reader(b)
        return dt / n


# ------------------------------------------------- asyncio and uvloop

def _asyncio_run(make_loop, body, n):
    loop = make_loop()
    try:
        return body(loop, n)
    finally:
        loop.close()


def _a_call_soon(loop, n):
    fut = loop.create_future()
    left = [n]

    def cb():
        left[0] -= 1
        if not left[0]:
            fut.set_result(None)

    t0 = time.perf_counter_ns()
    for _ in range(n):
        loop.call_soon(cb)
    loop.run_until_complete(fut)
    return (time.perf_counter_ns() - t0) / n


def _a_chain(loop, n):
    fut = loop.create_future()
    left = [n]

    def cb():
        left[0] -= 1
        if left[0]:
            loop.call_soon(cb)
        else:
            fut.set_result(None)

    t0 = time.perf_counter_ns()
    loop.call_soon(cb)
    loop.run_until_complete(fut)
    return (time.perf_counter_ns() - t0) / n


def _a_pingpong(loop, n):
    fut = loop.create_future()
    a, b, left, bounce = _pingpong_pair(
        n, lambda: fut.done() or fut.set_result(None))
    with a, b:
        loop.add_reader(a, bounce, a, b)
        loop.add_reader(b, bounce, b, a)
        t0 = time.perf_counter_ns()
        a.send(b"x")
        loop.run_until_complete(fut)
        dt = time.perf_counter_ns() - t0
        loop.remove_reader(a)
        loop.remove_reader(b)
    return dt / n


WORKLOADS = {
    "call_soon": (aio_call_soon, _a_call_soon),
    "chain": (aio_chain, _a_chain),
    "pingpong": (aio_pingpong, _a_pingpong),
}


def loops():
    out = [("aioloop", None), ("aioloop-asyncio", aioloop.new_event_loop),
           ("asyncio", asyncio.new_event_loop)]
    if uvloop is not None:
        out.append(("uvloop", uvloop.new_event_loop))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json")
    a = ap.parse_args()
    rounds = 3 if a.quick else a.rounds
    sizes = {"call_soon": 20000, "chain": 20000, "pingpong": 10000}
    if a.quick:
        sizes = {k: v // 4 for k, v in sizes.items()}
    results = {}
    for w, (aio_fn, a_fn) in WORKLOADS.items():
        cells = {name: [] for name, _ in loops()}
        for _ in range(rounds):
            for name, make in loops():
                if make is None:
                    cells[name].append(aio_fn(sizes[w]))
                else:
                    cells[name].append(_asyncio_run(make, a_fn, sizes[w]))
        results[w] = {k: statistics.median(v) for k, v in cells.items()}
    names = [n for n, _ in loops()]
    print("Python loops, ns per callback (median of %d rounds), ratio to asyncio"
          % rounds)
    uv = "uvloop" in names
    print("%-10s" % "workload" + "".join("%22s" % n for n in names) +
          ("  aioloop-asyncio / uvloop" if uv else ""))
    for w, row in results.items():
        base = row["asyncio"]
        mark = ""
        if uv:
            r = row["aioloop-asyncio"] / row["uvloop"]
            mark = "  %5.2fx %s" % (r, "met" if r <= 1.0 else "unmet")
        print("%-10s" % w + "".join("%13.0f (%5.2fx)" % (row[n], row[n] / base)
                                   for n in names) + mark)
    if uvloop is None:
        print("(uvloop not installed: apt-get install python3-uvloop)")
        return 1
    servers = echo_table(rounds, a.quick)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"rounds": rounds, "sizes": sizes, "ns": results,
                       "messages_per_s": servers}, f, indent=1)
    return 0


def echo_table(rounds, quick):
    """python_echo.py's rows: messages/s, median of rounds, interleaved."""
    names = python_echo.LOOPS
    out = {}
    for row, fn in python_echo.workloads(quick):
        cells = {n: [] for n in names}
        for r in range(rounds):
            for n in (names if r % 2 == 0 else names[::-1]):
                cells[n].append(fn(n))
        out[row] = {n: statistics.median(v) for n, v in cells.items()}
    print("\nasyncio servers, messages per second (median of %d rounds), "
          "ratio to uvloop" % rounds)
    print("%-18s" % "workload" + "".join("%22s" % n for n in names) +
          "  aioloop at or above uvloop")
    for row, cell in out.items():
        base = cell["uvloop"]
        print("%-18s" % row + "".join("%13.0f (%5.2fx)" % (cell[n], cell[n] / base)
                                     for n in names) +
              "  %s" % ("met" if cell["aioloop"] >= base else "unmet"))
    return out


if __name__ == "__main__":
    sys.exit(main())
