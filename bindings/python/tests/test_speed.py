# SPDX-License-Identifier: MIT
"""The C hot path (aioloop/_speed.c): what moving call_soon, dispatch and
poll() into C must not change, run on every fd monitor.

meson runs these with `python3 -X dev`: the interpreter's debug allocator
and runtime checks then stop a test whose callbacks run without the GIL
(dispatch outside the block hooks' window fails this suite).
"""
import gc
import os
import sys
import threading
import traceback
import weakref

import pytest

import aioloop
from test_loop import FDMONS, drain, pipe  # noqa: F401 (fixtures)


@pytest.fixture(params=FDMONS)
def loop(request):
    with aioloop.Loop(request.param) as lp:
        yield lp


def test_handle_types(loop):
    h = loop.call_soon(print)
    t = loop.call_later(3600, print)
    assert type(h) is aioloop.Handle and isinstance(t, aioloop.Handle)
    assert type(t) is aioloop.TimerHandle
    assert not h.cancelled() and not t.cancelled()
    assert t.when() == pytest.approx(loop.time() + 3600, abs=5)
    h.cancel()
    t.cancel()
    assert h.cancelled() and t.cancelled()
    loop.poll(blocking=False)                    # (the bottom half still runs)
    assert not loop.poll(blocking=False)
    t.cancel()                                   # twice: harmless


def test_poll_arguments(loop):
    with pytest.raises(TypeError):
        loop.poll(True, None, 3)
    with pytest.raises(TypeError):
        loop.poll(timeout="soon")
    with pytest.raises(TypeError):
        loop.poll(wait=True)
    with pytest.raises(TypeError):
        loop.poll(False, blocking=True)
    with pytest.raises(ValueError):
        loop.poll(timeout=float("nan"))
    assert loop.poll(True, 0) is False           # positional; no sleep
    assert loop.poll(blocking=True, timeout=-1) is False
    assert loop.poll(timeout=0.001) is False


def test_call_soon_burst_keeps_order_and_nested_poll_goes_on(loop):
    order = []

    def nests():
        order.append("a")
        loop.poll(blocking=False)                # runs b and c here
        order.append("a-end")

    loop.call_soon(nests)
    loop.call_soon(order.append, "b")
    loop.call_soon(order.append, "c")
    loop.poll(blocking=False)
    loop.poll(blocking=False)
    assert order == ["a", "b", "c", "a-end"]


def _raiser(tag):
    def raise_it(*args):
        raise LookupError(tag)
    return raise_it


def test_every_kind_of_callback_raises_into_poll(loop, pipe):
    r, w = pipe
    a, b = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        kinds = {
            "soon": lambda: loop.call_soon(_raiser("soon")),
            "timer": lambda: loop.call_later(0, _raiser("timer")),
            "reader": lambda: (os.write(w, b"x"),
                               loop.add_reader(r, _raiser("reader"))),
            "writer": lambda: loop.add_writer(b, _raiser("writer")),
            "poll": lambda: loop.add_reader(a, lambda: None,
                                            poll=_raiser("poll")),
        }
        # A window limit no iteration here exceeds: the window opens at
        # the first blocking poll and never shrinks, so the poll callback
        # runs however slowly a loaded machine runs each iteration.
        loop.set_poll_params(10 ** 10)
        for tag, arm in kinds.items():
            arm()
            with pytest.raises(LookupError) as info:
                for _ in range(100):
                    loop.poll(timeout=0.05)
            assert info.value.args == (tag,)
            names = [f.name for f in traceback.extract_tb(info.tb)]
            assert "raise_it" in names           # the traceback is intact
            for fd in (r, a, b):
                loop.remove_reader(fd)
                loop.remove_writer(fd)
            drain(r)
            while loop.poll(blocking=False):
                pass
    finally:
        os.close(a)
        os.close(b)


def test_call_soon_threadsafe_from_many_threads(loop):
    per_thread, nthreads = 3000, 4
    got = {i: [] for i in range(nthreads)}

    def producer(i):
        for k in range(per_thread):
            loop.call_soon_threadsafe(got[i].append, k)

    def finished():
        return sum(map(len, got.values())) == per_thread * nthreads

    threads = [threading.Thread(target=producer, args=(i,))
               for i in range(nthreads)]
    for t in threads:
        t.start()
    assert loop.run_until(finished, timeout=60)
    for t in threads:
        t.join()
    while loop.poll(blocking=False):
        pass
    for i in range(nthreads):
        assert got[i] == list(range(per_thread))  # once each, FIFO


def test_call_soon_keeps_nothing(loop):
    def cb(x):
        pass

    arg = object()
    for _ in range(1000):
        loop.call_soon(cb, arg)
    while loop.poll(blocking=False):
        pass
    gc.collect()
    refs = (sys.getrefcount(cb), sys.getrefcount(arg))
    objs = len(gc.get_objects())
    for _ in range(100):
        for _ in range(1000):
            loop.call_soon(cb, arg)
        loop.call_soon(cb, arg).cancel()
        while loop.poll(blocking=False):
            pass
    gc.collect()
    assert (sys.getrefcount(cb), sys.getrefcount(arg)) == refs
    assert len(gc.get_objects()) - objs < 100


def test_close_drops_pending_callbacks_and_timers(loop):
    class Token:
        pass

    tok = Token()
    ref = weakref.ref(tok)
    loop.call_soon(print, tok)
    t = loop.call_later(3600, print, tok)
    del tok
    loop.close()
    gc.collect()
    assert ref() is None                         # released by close()
    assert t.cancelled()
    with pytest.raises(RuntimeError):
        loop.call_soon(print)
    with pytest.raises(RuntimeError):
        loop.poll()
