# SPDX-License-Identifier: MIT
"""Loop scenarios written in Python, run on every fd monitor.

Each test is also an example of scripting a loop test: make fds ready,
schedule work, poll, and assert on what ran and how often.  Run with
    PYTHONPATH=<build>/bindings/python /usr/bin/python3 -m pytest bindings/python/tests
(meson test --suite python does exactly that).
"""
import errno
import gc
import os
import signal
import sys
import threading
import time
import weakref

import pytest

import aioloop


def _available(fdmon):
    try:
        aioloop.Loop(fdmon).close()
        return True
    except (OSError, ValueError):
        return False


FDMONS = [pytest.param(b, marks=pytest.mark.skipif(
    not _available(b), reason="fd monitor %s cannot start here" % b))
    for b in aioloop.FDMONS]


@pytest.fixture(params=FDMONS)
def loop(request):
    with aioloop.Loop(request.param) as lp:
        assert lp.fdmon == request.param
        yield lp


@pytest.fixture
def pipe():
    r, w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    yield r, w
    for fd in (r, w):
        try:
            os.close(fd)
        except OSError:
            pass


def drain(fd):
    try:
        while os.read(fd, 4096):
            pass
    except BlockingIOError:
        pass


# ------------------------------------------------------------- readers

def test_reader_is_level_triggered(loop, pipe):
    r, w = pipe
    calls = []
    loop.add_reader(r, calls.append, "r")
    os.write(w, b"x")
    assert loop.poll(blocking=False) is True
    assert loop.poll(blocking=False) is True   # still readable: again
    assert calls == ["r", "r"]
    drain(r)
    assert loop.poll(blocking=False) is False
    assert calls == ["r", "r"]


def test_reader_accepts_fileno_objects(loop):
    import socket
    a, b = socket.socketpair()
    with a, b:
        got = []
        loop.add_reader(a, lambda: got.append(a.recv(8)))
        b.send(b"hi")
        loop.poll(timeout=5)
        assert got == [b"hi"]
        assert loop.remove_reader(a) is True
        assert loop.remove_reader(a) is False


def test_removed_in_callback_never_runs_again(loop, pipe):
    r, w = pipe
    r2, w2 = os.pipe2(os.O_NONBLOCK)
    calls = []

    def first():
        calls.append("first")
        loop.remove_reader(r2)      # ready in the same iteration
        loop.remove_reader(r)

    loop.add_reader(r, first)
    loop.add_reader(r2, calls.append, "second")
    os.write(w, b"x")
    os.write(w2, b"x")
    for _ in range(3):
        loop.poll(blocking=False)
    # whichever ran first, a removed handler did not run after the remove
    assert calls.count("first") == 1
    assert calls.count("second") <= 1
    os.close(r2)
    os.close(w2)


def test_writer_and_reader_on_one_fd(loop):
    import socket
    a, b = socket.socketpair()
    with a, b:
        a.setblocking(False)
        events = []
        loop.add_writer(a, events.append, "w")
        loop.add_reader(a, events.append, "r")
        loop.poll(timeout=5)
        assert events == ["w"]
        loop.remove_writer(a)
        b.send(b"x")
        loop.poll(timeout=5)
        assert events == ["w", "r"]


def test_closed_fd_under_handler_is_not_called(loop, pipe):
    r, w = pipe
    calls = []
    loop.add_reader(r, calls.append, 1)
    os.write(w, b"x")
    os.close(r)
    for _ in range(3):
        loop.poll(blocking=False)
    assert calls == []
    assert loop.stats()["bad_fds"] >= 1


# ------------------------------------------- bottom halves and timers

def test_call_soon_runs_fifo_once(loop):
    order = []
    for i in range(5):
        loop.call_soon(order.append, i)
    assert loop.poll(blocking=False) is True
    assert order == [0, 1, 2, 3, 4]
    assert loop.poll(blocking=False) is False


def test_call_soon_cancel(loop):
    ran = []
    h = loop.call_soon(ran.append, 1)
    h.cancel()
    assert h.cancelled()
    loop.poll(blocking=False)
    assert ran == []


def test_call_soon_threadsafe_wakes_blocked_poll(loop):
    ran = []
    t = threading.Timer(0.05, lambda: loop.call_soon_threadsafe(ran.append, "x"))
    t.start()
    assert loop.run_until(lambda: ran, timeout=10)
    t.join()
    assert ran == ["x"]


def test_notify_from_another_thread_ends_a_blocking_poll(loop):
    t = threading.Timer(0.05, loop.notify)
    start = loop.stats()["iterations"]
    t.start()
    # no timeout: a lost wakeup hangs here until the suite's timeout
    assert loop.poll() is False              # woken, nothing else to do
    t.join()
    assert loop.stats()["iterations"] == start + 1
    assert loop.stats()["notify_kicks"] >= 1


def test_timers_fire_in_deadline_then_arming_order(loop):
    order = []
    now = loop.time()
    loop.call_at(now + 0.02, order.append, "b")
    loop.call_at(now + 0.01, order.append, "a")
    loop.call_at(now + 0.02, order.append, "c")
    cancelled = loop.call_at(now + 0.01, order.append, "never")
    cancelled.cancel()
    assert loop.run_until(lambda: len(order) == 3, timeout=10)
    assert order == ["a", "b", "c"]
    assert loop.time() >= now + 0.02


def test_timer_far_future_does_not_spin(loop):
    loop.call_later(10 ** 12, lambda: None)   # saturates, never due
    start = loop.stats()["iterations"]
    loop.poll(timeout=0.02)
    assert loop.stats()["iterations"] == start + 1


# ------------------------------------------------------------- nesting

def test_nested_poll_dispatches_once(loop, pipe):
    r, w = pipe
    r2, w2 = os.pipe2(os.O_NONBLOCK)
    calls = []

    def outer():
        calls.append("outer")
        drain(r)
        loop.poll(blocking=False)        # nested: runs inner once

    def inner():
        calls.append("inner")
        drain(r2)

    loop.add_reader(r, outer)
    loop.add_reader(r2, inner)
    os.write(w, b"x")
    os.write(w2, b"x")
    loop.poll(blocking=False)
    assert sorted(calls) == ["inner", "outer"]
    os.close(r2)
    os.close(w2)


# ---------------------------------------------------------- exceptions

def test_exception_reaches_poll_and_loop_stays_consistent(loop, pipe):
    r, w = pipe
    calls = []

    def bad():
        calls.append("bad")
        raise KeyError("from a callback")

    loop.add_reader(r, bad)
    loop.call_soon(calls.append, "bh")
    os.write(w, b"x")
    with pytest.raises(KeyError) as info:
        loop.poll(blocking=False)
    assert info.value.__traceback__ is not None
    assert "bad" in calls and "bh" in calls   # the rest of the iteration ran
    with pytest.raises(KeyError):
        loop.poll(blocking=False)            # still registered, still ready
    assert calls.count("bad") == 2


def test_keyboard_interrupt_ends_blocking_poll(loop, sigint_raises):
    """Ctrl-C (SIGINT at the main thread, as a terminal sends it) ends a
    blocking poll's wait, as it ends select(): Python runs the handler,
    and its KeyboardInterrupt comes out of poll() before anything else
    wakes the loop.  (The signal is sent until the poll returns: one that
    lands just before the wait begins is handled only after it, as with
    select(); the handler raises once.)"""
    raised = []

    def handler(signum, frame):
        if not raised:
            raised.append(signum)
            raise KeyboardInterrupt

    signal.signal(signal.SIGINT, handler)  # (the fixture puts back its own)
    done = threading.Event()
    woken = []
    main = threading.main_thread().ident

    def send():
        done.wait(0.1)  # (the main thread is in its poll by then)
        while not done.wait(0.01):
            signal.pthread_kill(main, signal.SIGINT)

    def watchdog():  # (a signal that did not end the wait)
        woken.append(True)
        loop.notify()

    t = threading.Thread(target=send)
    w = threading.Timer(10, watchdog)
    t.start()
    w.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            while not woken:  # (a blocking poll may also end with no work)
                loop.poll()
    finally:
        done.set()
        t.join()
        w.cancel()
    assert not woken


# ----------------------------------------------------------- bad input

def test_bad_input_raises(loop, pipe):
    r, w = pipe
    with pytest.raises(OSError) as e:
        loop.add_reader(-1, print)
    assert e.value.errno == errno.EBADF
    closed = os.dup(r)
    os.close(closed)
    with pytest.raises(OSError) as e:
        loop.add_reader(closed, print)
    assert e.value.errno == errno.EBADF
    with pytest.raises(TypeError):
        loop.add_reader(r, "not callable")
    with pytest.raises(TypeError):
        loop.add_reader("nope", print)
    with pytest.raises(TypeError):
        loop.call_soon(42)
    with pytest.raises(ValueError):
        loop.set_poll_params(-1)
    with pytest.raises(ValueError):
        aioloop.Loop("no-such-fdmon")


def test_wrong_thread_and_closed_loop_raise(loop):
    errs = []

    def other():
        for call in (lambda: loop.call_later(1, print), lambda: loop.poll(False)):
            try:
                call()
            except RuntimeError as e:
                errs.append(e)

    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert len(errs) == 2
    loop.close()
    with pytest.raises(RuntimeError):
        loop.poll(blocking=False)
    with pytest.raises(RuntimeError):
        loop.call_soon(print)
    loop.close()  # twice is fine


# ------------------------------------------------- thread-confined loops

def test_loop_is_thread_confined_unless_threadsafe(loop, pipe):
    """Loop() is confined (AIOL_LOOP_CONFINED): another thread's reader
    change raises instead of reaching the unlocked handler table, and
    call_soon_threadsafe() still works; Loop(threadsafe=True) takes the
    other thread's add_reader()."""
    r, w = pipe
    assert loop.threadsafe is False
    errs, ran = [], []

    def other():
        try:
            loop.add_reader(r, print)
        except RuntimeError as e:
            errs.append(e)
        loop.call_soon_threadsafe(ran.append, "soon")

    t = threading.Thread(target=other)
    t.start()
    assert loop.run_until(lambda: ran, timeout=10)
    t.join()
    assert len(errs) == 1 and "threadsafe=True" in str(errs[0])
    assert ran == ["soon"]

    with aioloop.Loop(loop.fdmon, threadsafe=True) as shared:
        assert shared.threadsafe is True
        seen = []
        t = threading.Thread(target=lambda: shared.add_reader(
            r, lambda: seen.append(drain(r))))
        t.start()
        t.join()
        os.write(w, b"x")
        assert shared.run_until(lambda: seen, timeout=10)
        assert shared.remove_reader(r)
    with pytest.raises(TypeError):
        aioloop.Loop(loop.fdmon, threadsafe=1)


@pytest.mark.parametrize("fdmon", FDMONS)
def test_confined_loop_made_here_runs_there(fdmon, pipe):
    """asyncio's model: a loop made on one thread and run on another.  The
    running thread takes it over (aioloop's _take(), the library's
    aiol_loop_owner_set()) before it adds a reader and arms a timer."""
    r, w = pipe
    lp = aioloop.Loop(fdmon)
    seen, errs = [], []

    def run():
        try:
            lp._take()
            lp.add_reader(r, lambda: seen.append(drain(r)))
            lp.call_later(0.01, os.write, w, b"x")
            assert lp.run_until(lambda: seen, timeout=10)
            lp.remove_reader(r)
        except BaseException as e:  # (reported on the main thread)
            errs.append(e)

    t = threading.Thread(target=run)
    t.start()
    t.join()
    assert errs == [] and seen
    lp._take()
    lp.close()


# ------------------------------------------------- lifetimes and GIL

def test_callbacks_live_exactly_as_long_as_needed(loop, pipe):
    r, w = pipe

    def cb():
        pass

    before = sys.getrefcount(cb)
    for _ in range(20000):
        loop.add_reader(r, cb)
        loop.remove_reader(r)
    for _ in range(2000):
        loop.call_later(10, cb).cancel()
        loop.call_soon(cb).cancel()
    gc.collect()
    assert sys.getrefcount(cb) == before


def test_loop_is_collectable(pipe):
    r, w = pipe
    lp = aioloop.Loop()
    lp.add_reader(r, lambda: lp)     # a cycle through the callback
    lp.call_later(5, lambda: lp)
    ref = weakref.ref(lp)
    del lp
    gc.collect()
    assert ref() is None


def test_gil_is_released_while_blocking(loop):
    ticks = []
    stop = threading.Event()

    def spin():
        while not stop.is_set():
            ticks.append(1)
            time.sleep(0.001)

    t = threading.Thread(target=spin)
    t.start()
    loop.poll(timeout=0.2)
    stop.set()
    t.join()
    assert len(ticks) > 10


# ------------------------------------------------------- busy polling

def test_busy_poll_callback_finds_work(loop, pipe):
    """A producer queues work and kicks the fd, as a guest does a
    virtqueue; with busy polling on, the poll callback is consulted
    before the loop sleeps, and every job runs exactly once."""
    r, w = pipe
    work, ran = [], []
    lock = threading.Lock()

    def consume():
        drain(r)
        with lock:
            while work:
                ran.append(work.pop(0))

    def produce():
        for i in range(20):
            with lock:
                work.append(i)
            os.write(w, b"k")
            time.sleep(0.001)

    loop.set_poll_params(10000000)       # windows up to 10 ms
    loop.add_reader(r, consume, poll=lambda: bool(work))
    t = threading.Thread(target=produce)
    t.start()
    assert loop.run_until(lambda: len(ran) == 20, timeout=30)
    t.join()
    assert ran == list(range(20))
    assert loop.stats()["poll_rounds"] > 0


# ------------------------------------------------------------ IOThread

@pytest.mark.parametrize("fdmon", FDMONS)
def test_iothread_runs_work_from_other_threads(fdmon, pipe):
    r, w = pipe
    done = threading.Event()
    seen = []
    with aioloop.IOThread(fdmon) as io:
        assert io.loop.fdmon == fdmon
        io.loop.call_soon_threadsafe(
            lambda: seen.append(threading.current_thread().name))

        def on_read():
            drain(r)
            seen.append("read")
            done.set()

        io.loop.add_reader(r, on_read)
        os.write(w, b"x")
        assert done.wait(10)
        io.loop.remove_reader(r)
    assert seen == ["aioloop-iothread", "read"]
    assert io.loop.closed


def test_iothread_stop_raises_callback_exception():
    io = aioloop.IOThread()
    ran = threading.Event()

    def bad():
        ran.set()
        raise ZeroDivisionError("on the iothread")

    io.loop.call_soon_threadsafe(bad)
    assert ran.wait(10)
    with pytest.raises(ZeroDivisionError):
        io.stop()
    io.stop()  # stopped: no-op


def test_no_growth_over_100k_cycles(loop, pipe):
    """100k add/remove cycles and 100k timers leave the callback's
    refcount, the gc's object count and the RSS where they were."""
    import resource
    r, w = pipe

    def cb():
        pass

    def rss_kib():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024

    for _ in range(1000):                  # warm up caches and free lists
        loop.add_reader(r, cb)
        loop.remove_reader(r)
        loop.call_later(3600, cb).cancel()
    gc.collect()
    refs, objs, rss = sys.getrefcount(cb), len(gc.get_objects()), rss_kib()
    for _ in range(100000):
        loop.add_reader(r, cb)
        loop.remove_reader(r)
    for _ in range(100000):
        loop.call_later(3600, cb).cancel()
    timers = [loop.call_later(0, cb) for _ in range(1000)]
    loop.run_until(lambda: all(t.cancelled() for t in timers), timeout=30)
    del timers
    gc.collect()
    assert sys.getrefcount(cb) == refs
    assert len(gc.get_objects()) - objs < 100
    assert rss_kib() - rss < 4096          # KiB: nothing kept per cycle
    del resource


@pytest.mark.parametrize("fdmon", FDMONS)
def test_emfile_is_an_oserror(fdmon):
    import subprocess
    code = (
        "import errno, resource, aioloop\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (8, 8))\n"
        "loops = []\n"
        "try:\n"
        "    for _ in range(8):\n"
        "        loops.append(aioloop.Loop(%r))\n"
        "except OSError as e:\n"
        "    assert e.errno == errno.EMFILE, e\n"
        "    print('EMFILE after', len(loops))\n"
        "else:\n"
        "    raise SystemExit('no EMFILE')\n" % fdmon)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "EMFILE after" in out.stdout


def test_fdmons_are_the_librarys_in_its_default_order():
    names = aioloop.FDMONS
    assert names[0] == "epoll" and names[-1] == "poll"
    assert len(set(names)) == len(names) and set(names) <= {
        "epoll", "io_uring", "poll"}
    for name in ("epoll", "io_uring", "poll"):
        if name not in names:  # built without it: refused by name
            with pytest.raises(ValueError):
                aioloop.Loop(name)
