#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""check-mutants.py [--keep-going] [--only NAME...] [DIR]

Mutation checks: each mutant below is a small change to libaioloop that
breaks what one test is there to catch.  The test must pass on the tree as
it is and fail on the mutant; a mutant the test lets through (it passes or
skips) fails the run.

Everything happens in DIR (default build-mutants/ in the checkout): a copy
of the working tree's files (those git tracks or would track, as they are
now) in DIR/src, its build in DIR/build, both kept between runs.  A run
copies only the files that changed since the last one, builds only what
each test needs, and changes libaioloop/ in that copy only.  A mutant names
its change by text, not by file and line: the text must stand exactly once
under libaioloop/ or include/, wherever it has moved to, or the run fails
("no longer applies") so that the mutant is brought up to date.

Exit: 0 when every test passed as it is and failed on each of its
mutants; 1 otherwise.  A test that skips on the tree as it is (its feature
is missing here) makes its mutants a reported SKIP, not a failure.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time

TOP = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))

# name, the meson test that must kill it, extra ninja targets the test needs
# beyond its own programs, what it breaks, and the change (text -> text).
MUTANTS = [
    {
        "name": "notify-kicks-idle-loop",
        "test": "lua-epoll",
        "build": ["bindings/lua/aioloop.so"],
        "why": "a notify writes the wakeup fd though no poll may sleep",
        "find": "    if (!aiol__poller_may_sleep(loop) ||\n",
        "replace": "    if (false ||\n",
    },
    {
        "name": "notify-forgets-notified",
        "test": "lua-epoll",
        "build": ["bindings/lua/aioloop.so"],
        "why": "a notify no longer ends the next blocking poll",
        "find": "    atomic_store_explicit(&loop->notified, true, "
                "memory_order_relaxed);\n",
        "replace": "",
    },
    {
        "name": "submit-clears-op-flags",
        "test": "faults-io_uring",
        "why": "submit clears the op flags of the caller's SQE, so a "
               "multishot timeout fires once",
        "find": "    prep(sqe, opaque);\n",
        "replace": "    prep(sqe, opaque);\n    sqe->rw_flags = 0;\n",
    },
    {
        "name": "poller-contract-off",
        "test": "contracts-epoll",
        "why": "polling-thread calls from another thread no longer abort "
               "while the loop polls",
        "find": "        assert((atomic_load_explicit(&(loop)->poller,",
        "replace": "        assert((true || "
                   "atomic_load_explicit(&(loop)->poller,",
    },
]

MUTABLE = ("libaioloop/", "include/")


def log(msg):
    print("check-mutants: " + msg, flush=True)


def run(cmd, **kw):
    return subprocess.run(cmd, check=False, text=True, **kw)


def tree_files():
    """The files of the working tree git tracks or would track."""
    out = run(["git", "-C", TOP, "ls-files", "-z", "--cached", "--others",
               "--exclude-standard"], stdout=subprocess.PIPE)
    if out.returncode != 0:
        sys.exit("check-mutants: git ls-files failed")
    return sorted({f for f in out.stdout.split("\0")
                   if f and os.path.lexists(os.path.join(TOP, f))})


def same(a, b):
    try:
        if os.path.getsize(a) != os.path.getsize(b):
            return False
        with open(a, "rb") as fa, open(b, "rb") as fb:
            return fa.read() == fb.read()
    except OSError:
        return False


def sync(src, files):
    """Makes src hold exactly @files as they are in the checkout.  Only the
    changed ones are written (a new mtime, so ninja rebuilds them)."""
    want = set(files)
    copied = 0
    for f in files:
        orig, dst = os.path.join(TOP, f), os.path.join(src, f)
        if os.path.islink(orig):
            if os.path.islink(dst) and os.readlink(dst) == os.readlink(orig):
                continue
            if os.path.lexists(dst):
                os.unlink(dst)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            os.symlink(os.readlink(orig), dst)
        elif os.path.islink(dst) or not same(orig, dst):
            if os.path.lexists(dst):
                os.unlink(dst)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            shutil.copyfile(orig, dst)
            shutil.copymode(orig, dst)
        else:
            continue
        copied += 1
    removed = 0
    for root, _, names in os.walk(src):
        for n in names:
            rel = os.path.relpath(os.path.join(root, n), src)
            if rel not in want:
                os.unlink(os.path.join(root, n))
                removed += 1
    return copied, removed


def locate(src, files, text):
    """The one file under MUTABLE holding @text once, or an error string."""
    hits = []
    for f in files:
        if not f.startswith(MUTABLE) or os.path.islink(os.path.join(src, f)):
            continue
        with open(os.path.join(src, f), encoding="utf-8",
                  errors="replace") as fh:
            n = fh.read().count(text)
        hits += [f] * n
    if len(hits) != 1:
        where = ", ".join(sorted(set(hits))) or "nowhere"
        return None, "its text stands %d times (%s)" % (len(hits), where)
    return hits[0], None


def setup(src, bld):
    if os.path.isfile(os.path.join(bld, "build.ninja")):
        return True
    log("meson setup %s" % bld)
    # (only what the tests here need: the Lua binding, no Python, no
    # adapters, benchmarks, programs or docs)
    r = run(["meson", "setup", bld, src, "-Dlua=enabled", "-Dpython=disabled",
             "-Dglib=disabled", "-Dlibev=disabled", "-Dbench=disabled",
             "-Dprograms=disabled", "-Ddocs=disabled"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if r.returncode != 0:
        print(r.stdout[-4000:])
        return False
    return True


def test_targets(bld):
    """meson test name -> the ninja targets it depends on."""
    tests = json.loads(run(["meson", "introspect", "--tests", bld],
                           stdout=subprocess.PIPE).stdout)
    targets = json.loads(run(["meson", "introspect", "--targets", bld],
                             stdout=subprocess.PIPE).stdout)
    files = {t["id"]: [os.path.relpath(f, bld) for f in t["filename"]]
             for t in targets}
    return {t["name"]: [f for d in t["depends"] for f in files.get(d, [])]
            for t in tests}


def build(bld, targets):
    r = run(["ninja", "-C", bld] + targets, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT)
    if r.returncode != 0:
        print(r.stdout[-4000:])
    return r.returncode == 0


def test_result(bld, name, logbase):
    """'OK', 'SKIP', 'FAIL' (or meson's other verdicts) and the log."""
    run(["meson", "test", "-C", bld, "--no-rebuild", "--logbase", logbase,
         name], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    path = os.path.join(bld, "meson-logs", logbase + ".json")
    try:
        with open(path) as fh:
            res = [json.loads(line) for line in fh if line.strip()]
    except OSError:
        return "ERROR", "no test log (%s)" % path
    if len(res) != 1:
        return "ERROR", "%d results for %s" % (len(res), name)
    return res[0]["result"], res[0].get("stdout", "") or ""


def main():
    ap = argparse.ArgumentParser(usage=__doc__)
    ap.add_argument("dir", nargs="?",
                    default=os.path.join(TOP, "build-mutants"))
    ap.add_argument("--only", nargs="+", metavar="NAME",
                    help="run these mutants only")
    ap.add_argument("--keep-going", action="store_true",
                    help="run every mutant even after one survived")
    args = ap.parse_args()
    start = time.monotonic()
    mutants = [m for m in MUTANTS if not args.only or m["name"] in args.only]
    if args.only and len(mutants) != len(args.only):
        sys.exit("check-mutants: no mutant named %s" % ", ".join(
            set(args.only) - {m["name"] for m in MUTANTS}))
    src = os.path.join(os.path.abspath(args.dir), "src")
    bld = os.path.join(os.path.abspath(args.dir), "build")
    os.makedirs(src, exist_ok=True)
    files = tree_files()
    copied, removed = sync(src, files)
    log("%s: %d files copied, %d removed" % (src, copied, removed))
    if not setup(src, bld):
        log("FAILED: meson setup of the copy")
        return 1
    needs = test_targets(bld)
    for m in mutants:
        if m["test"] not in needs:
            log("FAILED: mutant %s: no test %s in the build" % (
                m["name"], m["test"]))
            return 1
    tests = sorted({m["test"] for m in mutants})
    targets = sorted({t for m in mutants
                      for t in needs[m["test"]] + m.get("build", [])})
    if not build(bld, targets):
        log("FAILED: the copy as it is does not build")
        return 1

    # The tests as they are: each must pass, or its mutants prove nothing.
    baseline = {}
    for t in tests:
        verdict, out = test_result(bld, t, "mutants-baseline")
        baseline[t] = verdict
        if verdict not in ("OK", "SKIP"):
            print(out[-4000:])
            log("FAILED: %s fails on the tree as it is (%s)" % (t, verdict))
            return 1

    survivors, skipped = [], []
    for m in mutants:
        name, test = m["name"], m["test"]
        if baseline[test] == "SKIP":
            log("SKIP: %s: %s skips on this machine" % (name, test))
            skipped.append(name)
            continue
        path, err = locate(src, files, m["find"])
        if path is None:
            log("FAILED: mutant %s no longer applies: %s" % (name, err))
            return 1
        full = os.path.join(src, path)
        with open(full, encoding="utf-8") as fh:
            text = fh.read()
        t0 = time.monotonic()
        try:
            with open(full, "w", encoding="utf-8") as fh:
                fh.write(text.replace(m["find"], m["replace"], 1))
            if not build(bld, needs[test] + m.get("build", [])):
                log("FAILED: mutant %s does not build (%s)" % (name, path))
                return 1
            verdict, out = test_result(bld, test, "mutants-" + name)
        finally:
            # (written again: a new mtime, so the next build compiles the
            # file as it is)
            with open(full, "w", encoding="utf-8") as fh:
                fh.write(text)
        took = time.monotonic() - t0
        if verdict in ("FAIL", "TIMEOUT"):
            log("killed: %s (%s, %s) by %s: %s, %.0f s" % (
                name, m["why"], path, test, verdict, took))
        elif verdict in ("OK", "SKIP"):
            print(out[-2000:])
            log("SURVIVED: %s (%s, %s): %s still %s" % (
                name, m["why"], path, test, verdict))
            survivors.append(name)
            if not args.keep_going:
                break
        else:
            print(out[-2000:])
            log("FAILED: mutant %s: %s did not run (%s)" % (
                name, test, verdict))
            return 1
    took = time.monotonic() - start
    if survivors:
        log("FAILED: %d mutant(s) survived: %s (%.0f s)" % (
            len(survivors), ", ".join(survivors), took))
        return 1
    log("%d mutant(s) killed, %d skipped, in %.0f s" % (
        len(mutants) - len(skipped), len(skipped), took))
    return 0


if __name__ == "__main__":
    sys.exit(main())
