#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# run.sh [--build] [--compile-only] [--table-only] [--before REV] [WORKDIR]
#
# Benchmarks QEMU's AioContext, stock against the libaioloop fork, in one
# run (aio-bench.c: aio_poll cost, fd handler add+remove and
# add+modify+remove cost, timer_mod cost, bottom halves scheduled and run
# singly, in bursts and from another thread; plain aio_poll() and
# glib-attached), on the QEMU 10.2 builds of WORKDIR.
#
# 1. With --build, first brings both QEMU builds up to date
#    (../build.sh --both WORKDIR, incremental).  Without it the builds are
#    used as they are; run.sh warns if ninja says test-aio is out of date.
# 2. Compiles aio-bench.c once per build, with the exact compile and link
#    commands ninja uses for that build's tests/unit/test-aio (its own
#    objects swapped for aio-bench.o), into WORKDIR/bench-stock/aio-bench
#    and WORKDIR/bench-fork/aio-bench.
#    --compile-only stops here.
# 3. Runs every case as its own process, interleaved by case: stock, then
#    the fork with AIOLOOP_FDMON=epoll, io_uring and poll; ROUNDS times
#    over (a fresh process each, since a process's own layout shifts its
#    timing by a few % on this machine).
#    --table-only skips 2 and 3 and prints the table of the last run.
#    --before REV also builds the fork as it was at this repository's
#    revision REV (before.sh) and runs it on every fd monitor, interleaved
#    with the rest, for a second table: the fork now against the fork at
#    REV.
# 4. Prints a markdown table (rows: workload x n; columns: stock and each
#    fork fd monitor, with fork/stock ratios).  Raw key=value lines go to
#    WORKDIR/bench-results.txt, the table to WORKDIR/bench-table.md.  A
#    cell is the median over rounds of each process's median.
#
# WORKDIR defaults to <repo>/build-qemu10.
# Environment: ROUNDS (processes per case and config; default 3),
# XTHREAD_ROUNDS (the same for bh_xthread; default 3 x ROUNDS),
# RUNS (runs per process, median reported; default 5),
# MS (target ms per run; default 200), NICE (default 10),
# CASE_TIMEOUT (seconds per case; default 120), ONLY (workloads to run,
# space-separated, e.g. "bh_single bh_xthread"; default all).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../../.." && pwd)

build=0
compile_only=0
table_only=0
before=
work=
while [ $# -gt 0 ]; do
    arg=$1
    case $arg in
        --before) before=$2; shift ;;
        --build) build=1 ;;
        --compile-only) compile_only=1 ;;
        --table-only) table_only=1 ;;
        -h|--help) sed -n '2,/^set -e/{/^set -e/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
        -*) echo "run.sh: unknown option $arg" >&2; exit 2 ;;
        *) work=$arg ;;
    esac
    shift
done
work=$(realpath -m "${work:-$repo/build-qemu10}")
runs=${RUNS:-5}
rounds=${ROUNDS:-3}
ms=${MS:-200}
case_timeout=${CASE_TIMEOUT:-120}
nice_cmd=(nice -n "${NICE:-10}")
t_start=$(date +%s)
stamp() { echo "run.sh: [$(( $(date +%s) - t_start ))s] $*" >&2; }

if [ "$build" = 1 ] && [ "$table_only" = 0 ]; then
    stamp "bringing stock and fork builds up to date"
    "$here/../build.sh" --both "$work" >&2
fi

# ---------------------------------------------------------------------------
# Compile and link aio-bench.c the way test-aio is compiled and linked in
# build tree $1, into $2/aio-bench.  The commands come from ninja itself
# (`ninja -t commands -s`), so include dirs, config-host.h, defines, flags,
# libqemuutil.a, the whole-archive libraries, glib, liburing and (fork)
# libaioloop.a are exactly test-aio's.
compile_bench() {
    local variant=$1 bld=$work/$1-build out=$work/bench-$1
    [ -f "$bld/build.ninja" ] && [ -x "$bld/tests/unit/test-aio" ] ||
        { echo "run.sh: $bld is not built; run with --build (or ../build.sh --both)" >&2; exit 1; }
    # (qemu-version.h is regenerated on every run, without effect.)
    if ninja -C "$bld" -n tests/unit/test-aio 2>/dev/null |
       grep '^\[' | grep -qv 'qemu-version\.h'; then
        echo "run.sh: warning: $1-build is out of date (run with --build); measuring it as it is" >&2
    fi
    mkdir -p "$out"
    local cc_cmd ld_cmd
    cc_cmd=$(ninja -C "$bld" -t commands -s tests/unit/test-aio.p/test-aio.c.o)
    ld_cmd=$(ninja -C "$bld" -t commands -s tests/unit/test-aio)
    /usr/bin/python3 - "$bld" "$out" "$here/aio-bench.c" "$variant" \
                       "$cc_cmd" "$ld_cmd" <<'PY'
import os, shlex, subprocess, sys
bld, out, src, variant, cc_cmd, ld_cmd = sys.argv[1:]
obj = os.path.join(out, 'aio-bench.o')
exe = os.path.join(out, 'aio-bench')

def drop_opt(args, opt):
    """Remove every `opt VALUE` pair from args."""
    res, skip = [], False
    for a in args:
        if skip:
            skip = False
        elif a == opt:
            skip = True
        else:
            res.append(a)
    return res

# Compile: test-aio.c's command with our source, object and no depfile.
cc = shlex.split(cc_cmd)
assert '-c' in cc and cc[cc.index('-c') + 1].endswith('tests/unit/test-aio.c'), cc_cmd
cc = drop_opt(drop_opt(drop_opt(drop_opt(cc, '-o'), '-MQ'), '-MF'), '-c')
cc = [a for a in cc if a != '-MD']
cc += ['-DAIO_BENCH_BUILD="%s"' % variant, '-o', obj, '-c', src]

# Link: test-aio's command with its objects replaced by ours.
ld = shlex.split(ld_cmd)
ld = drop_opt(ld, '-o')
test_objs = [a for a in ld if a.startswith('tests/unit/test-aio.p/') and a.endswith('.o')]
assert test_objs, ld_cmd
i = ld.index(test_objs[0])
ld = [a for a in ld if a not in test_objs]
ld[i:i] = [obj]
ld[1:1] = ['-o', exe]

for cmd in (cc, ld):
    r = subprocess.run(['nice', '-n', os.environ.get('NICE', '10')] + cmd, cwd=bld)
    if r.returncode:
        sys.stderr.write('run.sh: failed in %s:\n%s\n' % (bld, shlex.join(cmd)))
        sys.exit(1)
# Keep the commands next to the binary, for the record.
with open(os.path.join(out, 'commands.txt'), 'w') as f:
    f.write('cd %s\n%s\n%s\n' % (bld, shlex.join(cc), shlex.join(ld)))
PY
}

for v in stock fork; do
    [ "$table_only" = 0 ] || break
    stamp "compiling aio-bench against $v-build"
    compile_bench "$v"
done
if [ -n "$before" ] && [ "$table_only" = 0 ]; then
    stamp "building the fork at $before"
    "$here/before.sh" "$before" "$work"
fi
[ "$compile_only" = 0 ] || exit 0

# ---------------------------------------------------------------------------
# Cases: workload variant n...
cases=(
    "aio_poll plain 1 100 1000 10000"
    "aio_poll glib 1 100 1000 10000"
    "addrm plain 1 1000 10000"
    "addrm glib 1 1000 10000"
    "addmodrm plain 1 1000 10000"
    "timer_mod plain 1000 10000 100000"
    "bh_single plain 1"
    "bh_burst plain 1000"
    "bh_xthread plain 1"
    "bh_xthread glib 1"
)
# build[:AIOLOOP_FDMON].  stock-noiou is stock with io_uring_setup(2)
# refused (AIO_BENCH_NO_IO_URING=1), so aio-posix.c runs on fdmon-poll,
# switching to fdmon-epoll from 64 handlers (EPOLL_ENABLE_THRESHOLD),
# with glib attached too: the fork's epoll and poll cells against stock
# on the kernel interfaces it would use without io_uring.
# bh_xthread's wakeups spread most between processes (the hypervisor
# wakes the sleeping thread's vCPU): XTHREAD_ROUNDS processes per config,
# default three times ROUNDS.
configs=(stock stock-noiou fork:epoll fork:io_uring fork:poll)
if [ -n "$before" ]; then
    configs+=(before:epoll before:io_uring before:poll)
fi

results=$work/bench-results.txt
if [ "$table_only" = 0 ]; then
: > "$results"
stamp "running (ROUNDS=$rounds, RUNS=$runs, MS=$ms per run)"
for c in "${cases[@]}"; do
    read -r workload variant sizes <<< "$c"
    if [ -n "${ONLY:-}" ] && [[ " $ONLY " != *" $workload "* ]]; then
        continue
    fi
    case_rounds=$rounds
    [ "$workload" != bh_xthread ] || case_rounds=${XTHREAD_ROUNDS:-$((rounds * 3))}
    for n in $sizes; do
      for _round in $(seq "$case_rounds"); do
        for cfg in "${configs[@]}"; do
            b=${cfg%%:*}
            be=
            [ "$cfg" = "$b" ] || be=${cfg#*:}
            noiou=
            [ "$b" = stock-noiou ] && { b=stock; noiou=1; be=no-io_uring; }
            line=
            rc=0
            line=$(env ${be:+AIOLOOP_FDMON=$be} ${noiou:+AIO_BENCH_NO_IO_URING=1} "${nice_cmd[@]}" \
                   timeout "$case_timeout" "$work/bench-$b/aio-bench" \
                   "$workload" "$variant" "$n" "$runs" "$ms" 2>"$work/bench-$b/last-stderr.txt") || rc=$?
            if [ $rc -ne 0 ] || [ -z "$line" ]; then
                why="exit $rc"
                [ $rc -gt 128 ] && why="signal $(kill -l $((rc - 128)) 2>/dev/null || echo $((rc - 128)))"
                [ $rc -eq 124 ] && why="timeout ${case_timeout}s"
                line="build=$b fdmon=${be:--} workload=$workload variant=$variant n=$n status=failed:${why// /-}"
                sed 's/^/    /' "$work/bench-$b/last-stderr.txt" | tail -n 5 >&2
            fi
            echo "$line" | tee -a "$results" >&2
        done
      done
    done
done
stamp "done"
fi

# ---------------------------------------------------------------------------
# Table.
XTHREAD_ROUNDS=${XTHREAD_ROUNDS:-$((rounds * 3))} \
/usr/bin/python3 - "$results" "$runs" "$ms" "$rounds" <<'PY' | tee "$work/bench-table.md"
import os
import statistics
import sys
path, runs, ms, rounds = sys.argv[1:]
rows = {}
order = []
for line in open(path):
    kv = dict(f.split('=', 1) for f in line.split() if '=' in f)
    key = (kv['workload'], kv['variant'], int(kv['n']))
    if key not in rows:
        rows[key] = {}
        order.append(key)
    if kv['build'] == 'stock':
        col = 'stock-noiou' if kv['fdmon'] == 'no-io_uring' else 'stock'
    else:
        col = kv['build'] + '-' + kv['fdmon']
    rows[key].setdefault(col, []).append(kv)

# One record per cell: the median of the rounds' medians; a cell fails
# only if every round failed, and a failed check in any round shows.
for cells in rows.values():
    for col, kvs in cells.items():
        good = [kv for kv in kvs if 'median_ns' in kv]
        if not good:
            cells[col] = kvs[0]
            continue
        kv = dict(good[0])
        failed = [k.get('status', 'failed') for k in kvs if 'median_ns' not in k]
        if failed:
            kv['failed'] = '%d of %d rounds %s' % (len(failed), len(kvs),
                                                   failed[0])
        kv['median_ns'] = statistics.median(float(k['median_ns']) for k in good)
        bad = [k for k in good if k.get('check', 'ok') != 'ok']
        if bad:
            kv.update({k: bad[0][k] for k in ('check', 'signalled', 'fired') if k in bad[0]})
        cells[col] = kv

def fmt(ns):
    if ns < 1e3:
        return '%.0f ns' % ns
    if ns < 1e6:
        return '%.2f µs' % (ns / 1e3) if ns < 1e4 else '%.1f µs' % (ns / 1e3)
    return '%.2f ms' % (ns / 1e6)

label = {
    ('aio_poll', 'plain'): 'aio_poll, plain (per iteration)',
    ('aio_poll', 'glib'): 'aio_poll, glib-attached (per iteration)',
    ('addrm', 'plain'): 'add+remove, plain (per pair)',
    ('addrm', 'glib'): 'add+remove, glib-attached (per pair)',
    ('timer_mod', 'plain'): 'timer_mod (per call)',
}
cols = ['stock', 'stock-noiou', 'fork-epoll', 'fork-io_uring', 'fork-poll']
heads = ['stock', 'stock, no io_uring', 'fork-epoll', 'fork-io_uring', 'fork-poll']
notes = []
dagger = False
print('| workload | n | ' + ' | '.join(heads) + ' |')
print('|---|---:|' + '---:|' * len(cols))
for key in order:
    w, v, n = key
    def med(c):
        kv = rows[key].get(c)
        return float(kv['median_ns']) if kv and 'median_ns' in kv else None
    sv, mark = med('stock'), ''
    if sv is None and med('stock-noiou') is not None:
        sv, mark, dagger = med('stock-noiou'), '†', True
    cells = []
    for c in cols:
        kv = rows[key].get(c)
        if not kv:
            cells.append('-')
            continue
        if 'median_ns' not in kv:
            cells.append(kv.get('status', 'failed'))
            continue
        x = float(kv['median_ns'])
        cell = fmt(x)
        if c.startswith('fork') and sv:
            r = x / sv
            cell += ' (%s×%s' % ('%.2f' % r if r >= 0.1 else '%.2g' % r, mark)
            ev = med('stock-noiou')
            if c in ('fork-epoll', 'fork-poll') and ev and not mark:
                cell += '; %.2f× no io_uring' % (x / ev)
            cell += ')'
        if kv.get('failed'):
            cell += ' [%s]' % kv['failed']
        if kv.get('check', 'ok') != 'ok':
            cell += ' [%s]' % kv['check']
            notes.append('%s %s n=%d %s: check=%s (signalled=%s fired=%s)' % (
                w, v, n, c, kv['check'], kv.get('signalled', '?'), kv.get('fired', '?')))
        cells.append(cell)
    print('| %s | %d | %s |' % (label.get((w, v), w + ' ' + v), n, ' | '.join(cells)))
print()
print('Median over %s processes (bh_xthread: %s) of each one\'s median of '
      '%s runs of ~%s ms; (×) is fork/stock; "× no io_uring", the fork\'s '
      'epoll or poll cell over stock without io_uring (its fdmon-poll below '
      '64 handlers, fdmon-epoll from 64).'
      % (rounds, os.environ.get('XTHREAD_ROUNDS', int(rounds) * 3), runs, ms))
if dagger:
    print('† stock failed here; ratio against stock without io_uring.')
for note in notes:
    print('- ' + note)

# The fork against itself at the --before revision, when that ran.
if any(c.startswith('before-') for cells in rows.values() for c in cells):
    fdmons = ['epoll', 'io_uring', 'poll']
    print()
    print('| workload | n | ' + ' | '.join('fork-%s now / before' % f for f in fdmons) + ' |')
    print('|---|---:|' + '---:|' * len(fdmons))
    for key in order:
        w, v, n = key
        cells = []
        for f in fdmons:
            now, was = rows[key].get('fork-' + f), rows[key].get('before-' + f)
            if not (now and was and 'median_ns' in now and 'median_ns' in was):
                cells.append('-')
                continue
            x, y = float(now['median_ns']), float(was['median_ns'])
            cells.append('%s / %s (%.2f×)' % (fmt(x), fmt(y), x / y))
        print('| %s | %d | %s |' % (label.get((w, v), w + ' ' + v), n, ' | '.join(cells)))
    print()
    print('(×) is now/before: below 1 is faster now.')
PY
