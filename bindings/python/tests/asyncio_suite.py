# SPDX-License-Identifier: MIT
"""CPython's own asyncio test suite against aioloop's event loop, and the
same run against uvloop and against asyncio's own loop, side by side.

    asyncio_suite.py [--impls aioloop,uvloop,asyncio] [--json OUT]
                     [--docs docs/python.md] [MODULE...]

Each implementation runs each module of test.test_asyncio (Debian's
libpython3.X-testsuite: 3.11, 3.13, 3.14) in a child interpreter:
- its policy is installed, and made asyncio's default policy too
  (asyncio.DefaultEventLoopPolicy), because every module's
  tearDownModule() resets the policy: so every asyncio.new_event_loop()
  and asyncio.run() in the suite (tasks, futures, locks, queues, streams,
  subprocesses, runners, ...) runs on it;
- the mixin test classes that pick a loop class themselves (test_events'
  EPollEventLoopTests and their like, test_server's
  SelectorStartServerTests) run once, with the implementation's loop as
  the loop under test; their siblings for other selectors are dropped.

The verdict, exit status 1 unless all hold:
- every test that passes on uvloop passes on aioloop;
- every test that fails on aioloop, or that it skips while asyncio's own
  loop runs it, is listed with its reason in the table of DOCS under the
  heading "CPython's asyncio tests: what we skip or fail", and every test
  listed there still fails or is skipped (the list stays exact).

A child arms faulthandler per test: a test that hangs for 30 s dumps the
stacks and ends the child; the hung test counts as failed, and a new
child runs the module's tests that are left.  Also failed: a module that
made no loop of the implementation's (the run would prove nothing),
except those in FAKE_LOOP_ONLY.
"""
import argparse
import faulthandler
import json
import os
import re
import subprocess
import sys
import time
import traceback
import unittest

# (the later ones where the release has them: eager tasks from 3.12,
# call graphs from 3.14)
MODULES = ["test_events", "test_sock_lowlevel", "test_sendfile",
           "test_streams", "test_server", "test_subprocess", "test_tasks",
           "test_futures", "test_futures2", "test_locks", "test_queues",
           "test_timeouts", "test_taskgroups", "test_runners", "test_ssl",
           "test_sslproto", "test_context", "test_pep492", "test_waitfor",
           "test_threads", "test_buffered_proto", "test_protocols",
           "test_eager_task_factory", "test_staggered", "test_graph"]

DOCS_HEADING = "CPython's asyncio tests: what we skip or fail"
PER_TEST_TIMEOUT = 30
# uvloop hangs in a few tests of each release (pipe transports, some
# socket tests) rather than failing them: its hung tests end sooner.  No
# test of the suite takes seconds on any loop, so none it passes is lost.
IMPL_TIMEOUT = {"uvloop": 10}
LOOPS = "(loops made)"
# Modules that test asyncio's own machinery on test_asyncio's fake TestLoop
# (or no loop at all), whatever the policy: they make no loop of ours.
FAKE_LOOP_ONLY = {"test_futures", "test_pep492", "test_buffered_proto",
                  "test_protocols"}

# --------------------------------------------------------------- child


def impl_loop(name):
    """(loop class, policy class) of an implementation."""
    if name == "aioloop":
        import aioloop
        return aioloop.EventLoop, aioloop.EventLoopPolicy
    if name == "uvloop":
        import uvloop

        class UVLoop(uvloop.Loop):
            """(a Python subclass: test_runners sets attributes on it)"""

        class UVPolicy(uvloop.EventLoopPolicy):
            """uvloop's policy has no child watcher (its loop reaps its
            own children); test_events' setUp installs one: kept, unused."""
            _watcher = None

            def _loop_factory(self):
                return UVLoop()

            def get_child_watcher(self):
                return self._watcher

            def set_child_watcher(self, watcher):
                self._watcher = watcher
        return UVLoop, UVPolicy
    if name == "asyncio":
        import asyncio
        return (asyncio.SelectorEventLoop,
                asyncio.unix_events._UnixDefaultEventLoopPolicy)
    raise SystemExit("asyncio_suite: unknown implementation %r" % name)


LOOP_CLASS = re.compile(r"(EPoll|Poll|Select|Selector|Kqueue|Proactor)"
                        r"\w*(EventLoopTests|StartServerTests)$")


def retarget(module, factory):
    """Keeps one of the module's loop-choosing test classes, on the
    implementation's loop, and drops the others."""
    chosen = None
    for name, cls in list(vars(module).items()):
        if not (isinstance(cls, type) and LOOP_CLASS.match(name)):
            continue
        meth = "create_event_loop" if "create_event_loop" in vars(cls) \
            else "new_loop" if "new_loop" in vars(cls) else None
        if meth is None:
            continue
        delattr(module, name)
        if chosen is None or name.startswith("EPoll"):
            chosen = (name, cls, meth)
    if chosen is not None:
        name, cls, meth = chosen
        sub = type(name, (cls,), {meth: lambda self: factory(),
                                  "__module__": module.__name__})
        setattr(module, name, sub)
    if module.__name__.endswith(".test_runners"):
        # Its tests run asyncio.run() and Runner on a mocked BaseEventLoop
        # that records shutdown_asyncgens(): on the implementation's loop
        # instead, recording the same.
        def new_loop(self):
            loop = factory()
            real = loop.shutdown_asyncgens
            loop.shutdown_ag_run = False

            async def shutdown_asyncgens():
                loop.shutdown_ag_run = True
                await real()
            loop.shutdown_asyncgens = shutdown_asyncgens
            return loop
        module.BaseTest.new_loop = new_loop


class Recorder(unittest.TestResult):
    """Each test's outcome (pass, fail, skip with its reason), appended to
    a JSON-lines file as it happens, the last line of a test winning: a
    test starts as failed ("hung"), so one that faulthandler ends stays
    failed, and a restarted child skips every test already there."""

    def __init__(self, path, created, timeout):
        super().__init__()
        self.f = open(path, "a")
        self.created = created
        self.timeout = timeout
        self.t0 = 0.0
        self.outcome = None

    def record(self, tid, status, why=""):
        self.f.write(json.dumps([tid, status, why]) + "\n")
        self.f.flush()

    def startTest(self, test):
        super().startTest(test)
        self.record(test.id(), "fail", "hung: no result in %d s, the "
                    "module's child was ended" % self.timeout)
        faulthandler.dump_traceback_later(self.timeout, exit=True)
        self.t0 = time.monotonic()
        self.outcome = ["pass", ""]

    def stopTest(self, test):
        faulthandler.cancel_dump_traceback_later()
        super().stopTest(test)
        self.record(test.id(), *self.outcome)
        self.record(LOOPS, self.created[0])
        sys.stderr.write("%-6s %.2fs %s\n" % (self.outcome[0],
                                              time.monotonic() - self.t0,
                                              test.id()))

    def _fail(self, test, err):
        if isinstance(test, unittest.TestCase):
            self.outcome = ["fail", self._exc_info_to_string(err, test)[-2000:]]
        else:  # (a module or class fixture)
            self.record(str(test), "fail",
                        "".join(traceback.format_exception(*err))[-2000:])

    def addError(self, test, err):
        super().addError(test, err)
        self._fail(test, err)

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._fail(test, err)

    def addSubTest(self, test, subtest, err):
        super().addSubTest(test, subtest, err)
        if err is not None:
            self._fail(test, err)

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self.outcome = ["skip", reason]

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self.outcome = ["fail", "unexpected success"]


def read_results(path):
    """{test id: [status, why]} and the loops count from a results file."""
    res = {}
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                try:
                    tid, *rest = json.loads(line)
                except ValueError:
                    continue  # (a line cut short by the end of a child)
                res[tid] = rest
    loops = res.pop(LOOPS, [0])[0]
    return res, loops


def tests_of(suite):
    for t in suite:
        if isinstance(t, unittest.TestSuite):
            yield from tests_of(t)
        else:
            yield t


def shim_close_loop():
    """test_asyncio's TestCase.close_loop() reads the loop's private
    _default_executor, which uvloop's loop does not have (every test
    would fail in its cleanup): without it, the public
    shutdown_default_executor() does the same."""
    from test.test_asyncio import utils
    orig = utils.TestCase.close_loop

    class NoExecutorView:
        _default_executor = None

        def __init__(self, loop):
            self._loop = loop

        def __getattr__(self, name):
            return getattr(self._loop, name)

    def close_loop(loop):
        if not hasattr(loop, "_default_executor"):
            if not loop.is_closed():
                loop.run_until_complete(loop.shutdown_default_executor())
            loop = NoExecutorView(loop)
        orig(loop)
    utils.TestCase.close_loop = staticmethod(close_loop)


def child(impl, modname, out_path):
    import asyncio
    import importlib
    import signal
    # (Python's own SIGINT handler, as in a terminal: a background job
    # starts with SIGINT ignored, and test_runners' Ctrl-C tests need
    # asyncio.Runner to find the default one)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    loop_class, policy = impl_loop(impl)
    shim_close_loop()
    created = [0]  # loops of the implementation the tests made

    class Counted(loop_class):
        def __init__(self, *args, **kwargs):
            created[0] += 1
            super().__init__(*args, **kwargs)
    # (asyncio.EventLoop, 3.13+: the loop_factory of the suite's
    # IsolatedAsyncioTestCases, read when their module is imported)
    asyncio.EventLoop = Counted

    class CountedPolicy(policy):
        def new_event_loop(self):
            created[0] += 1
            return super().new_event_loop()
    # (the default policy a module's tearDownModule() brings back: the
    # asyncio package's DefaultEventLoopPolicy up to 3.13, the private
    # unix_events._DefaultEventLoopPolicy from 3.14, which deprecates
    # the public policy calls)
    if "DefaultEventLoopPolicy" in vars(asyncio):
        asyncio.DefaultEventLoopPolicy = CountedPolicy
    else:
        # (3.14: the public name warns through a module __getattr__,
        # which a test checks; an attribute set here would shadow it)
        asyncio.unix_events._DefaultEventLoopPolicy = CountedPolicy
    getattr(asyncio.events, "_set_event_loop_policy",
            asyncio.set_event_loop_policy)(CountedPolicy())

    done, loops = read_results(out_path)
    created[0] = loops
    module = importlib.import_module("test.test_asyncio." + modname)
    retarget(module, Counted)
    suite = unittest.defaultTestLoader.loadTestsFromModule(module)
    if done:
        # (a restart after a hang: the tests not run yet)
        suite = unittest.TestSuite(t for t in tests_of(suite)
                                   if t.id() not in done)
    suite.run(Recorder(out_path, created,
                       IMPL_TIMEOUT.get(impl, PER_TEST_TIMEOUT)))


# -------------------------------------------------------------- parent


def run_module(impl, modname, tmp, pythonpath):
    """Runs a module in a child, again after each hang for the tests left;
    ({test id: [status, why]}, loops made, seconds)."""
    out = os.path.join(tmp, "%s.%s.jsonl" % (impl, modname))
    log = os.path.join(tmp, "%s.%s.log" % (impl, modname))
    env = dict(os.environ, PYTHONPATH=pythonpath, PYTHONDONTWRITEBYTECODE="1")
    t0 = time.monotonic()
    seen = -1
    with open(log, "w") as f:
        while True:
            rc = subprocess.call([sys.executable, os.path.abspath(__file__),
                                  "--child", impl, modname, out],
                                 stdout=f, stderr=subprocess.STDOUT, env=env,
                                 timeout=3600)
            res, loops = read_results(out)
            if rc == 0 or len(res) == seen:
                break
            seen = len(res)  # (a hang ended the child: go on after it)
    if rc != 0 or (loops == 0 and modname not in FAKE_LOOP_ONLY):
        # (a child that failed without a hang, or a run on no loop of the
        # implementation's: the module failed)
        with open(log) as f:
            tail = f.read()[-3000:]
        res["%s (module ended with status %d, %d loops)" % (modname, rc, loops)] = \
            ["fail", tail]
    return res, loops, time.monotonic() - t0


def docs_table(path):
    """{test id: reason} from the DOCS_HEADING section's table."""
    listed = {}
    with open(path) as f:
        text = f.read()
    at = text.find("## " + DOCS_HEADING)
    if at < 0:
        return listed
    section = text[at:].split("\n## ", 1)[0]
    for line in section.splitlines():
        m = re.match(r"\|\s*`([^`]+)`\s*\|\s*(.*?)\s*\|$", line)
        if m:
            listed[m.group(1)] = m.group(2)
    return listed


def have_module(name):
    import importlib.util
    return importlib.util.find_spec("test.test_asyncio." + name) is not None


def short(tid):
    return tid[len("test.test_asyncio."):] if tid.startswith("test.") else tid


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--child", nargs=3, metavar=("IMPL", "MODULE", "OUT"))
    ap.add_argument("--impls", default="aioloop,uvloop,asyncio")
    ap.add_argument("--json")
    ap.add_argument("--docs")
    ap.add_argument("--jobs", type=int, default=2,
                    help="children at a time (default 2)")
    ap.add_argument("modules", nargs="*")
    a = ap.parse_args()
    if a.child:
        child(*a.child)
        return 0
    import tempfile
    from concurrent.futures import ThreadPoolExecutor
    modules = a.modules or [m for m in MODULES if have_module(m)]
    impls = a.impls.split(",")
    tmp = tempfile.mkdtemp(prefix="asyncio-suite-")
    pythonpath = os.environ.get("PYTHONPATH", "")
    res = {i: {} for i in impls}

    def one(job):
        m, i = job
        r, loops, dt = run_module(i, m, tmp, pythonpath)
        n = {s: sum(1 for v in r.values() if v[0] == s)
             for s in ("pass", "fail", "skip")}
        print("%-20s %-8s %4d passed %4d failed %4d skipped %4d loops"
              "  %5.1fs" % (m, i, n["pass"], n["fail"], n["skip"],
                            loops, dt), flush=True)
        return i, r

    # Children run --jobs at a time (each is a module on one loop, in its
    # own process): a hung uvloop test then holds up one slot, not the run.
    with ThreadPoolExecutor(max_workers=max(1, a.jobs)) as pool:
        for i, r in pool.map(one, [(m, i) for m in modules for i in impls]):
            res[i].update(r)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
    ours = res.get("aioloop", {})
    bad = 0
    if "uvloop" in res:
        for tid, (st, why) in sorted(res["uvloop"].items()):
            if st == "pass" and ours.get(tid, ["missing"])[0] != "pass":
                print("REGRESSION: passes on uvloop, not on aioloop: %s\n%s"
                      % (short(tid), ours.get(tid, ["", ""])[1]))
                bad += 1
    if a.docs and "aioloop" in res:
        listed = docs_table(a.docs)
        stock = res.get("asyncio", {})
        ours_off = {}
        for tid, (st, why) in ours.items():
            if st == "fail" or (st == "skip" and
                                stock.get(tid, ["pass"])[0] != "skip"):
                ours_off[short(tid)] = (st, why)
        for tid, (st, why) in sorted(ours_off.items()):
            if tid not in listed:
                print("UNLISTED: %s %s on aioloop, not in %s:\n%s"
                      % (tid, st, a.docs, why))
                bad += 1
        for tid in sorted(set(listed) - set(ours_off)):
            if any(tid.startswith(m + ".") for m in modules):
                print("STALE: %s is listed in %s but passes" % (tid, a.docs))
                bad += 1
    print("asyncio_suite: %s (%s)" % ("FAIL" if bad else "ok", tmp))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
