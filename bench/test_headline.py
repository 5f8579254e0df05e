#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""bench/test_headline.py BENCH_DIR - what `make bench` prints, checked
without measuring: every headline row names a workload the benchmark
binaries in BENCH_DIR have, the best peer is the fastest, a row is met
at a ratio of at most 1.00 as printed, a missing peer leaves a '-', and
every line fits a 100-column terminal."""
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import headline  # noqa: E402
import run  # noqa: E402

build = os.path.dirname(os.path.dirname(os.path.abspath(sys.argv[1])))
assert os.path.exists(run.binary(build, "aiol")), build
for w, n, variants in headline.todo():
    for lib, _ in variants:
        if os.path.exists(run.binary(build, lib)):
            assert w in run.workloads_of(build, lib), (lib, w)

# Made-up medians: ours 1.0; libev 2.0, libuv 0.5 (row 0); libev 0.996
# (row 1: a ratio of 1.004, printed 1.00); no peer at all on row 2.
rows = headline.ROWS


def get(w, n, variant, metric):
    r = [r for r in rows if (r.workload, r.n, r.metric) == (w, n, metric)
         or (r.peer_workload, r.n, r.metric) == (w, n, metric)]
    if variant == r[0].ours and w == r[0].workload:
        return 1.0
    if r[0] is rows[2]:
        return None
    if r[0] is rows[0]:
        return {"ev": 2.0, "uv": 0.5}.get(variant[0])
    return {"ev": 0.996}.get(variant[0])


measured = list(headline.rows(get))
assert measured[0][2] == (0.5, "libuv") and measured[0][3] == 2.0
assert 1.0 < measured[1][3] < 1.005
assert measured[2][2] is None and measured[2][3] is None
info = {"peers": "libev 4.33, libuv 1.44.2, libevent 2.1.12-stable",
        "rounds": 7, "date": "2026-12-07 00:00 UTC",
        "command": "run.py build-bench --headline"}
text, md = headline.table(measured, info)
lines = text.splitlines()
row = {r.label: l for r in rows for l in lines if l.startswith(r.label + ",")}
assert row[rows[0].label].endswith("2.00x  unmet"), row[rows[0].label]
assert row[rows[1].label].endswith("1.00x  met"), row[rows[1].label]
assert row[rows[2].label].split()[-3:] == ["-", "-", "-"], row[rows[2].label]
assert len(row) == len(rows)
bars = headline.bars(measured).splitlines()
for line in lines + bars:
    assert len(line) <= 100, (len(line), line)
with tempfile.TemporaryDirectory() as d:
    headline.write(d, measured, info)
    assert os.path.exists(os.path.join(d, "headline.md"))
print("test_headline: ok")
