# SPDX-License-Identifier: MIT
"""aioloop's asyncio loop against asyncio's own on the Python that runs
the suite: each scenario runs on an asyncio SelectorEventLoop and on an
aioloop EventLoop (every fd monitor), and both must end the same way.
What asyncio itself does differs between versions (3.11, 3.13, 3.14):
the reference is always the running one's."""
import asyncio
import contextvars
import logging
import os
import signal
import threading
import time

import pytest

import aioloop
from test_loop import FDMONS

INF = float("inf")


@pytest.fixture(params=FDMONS)
def new_loop(request):
    """Makes asyncio's loop (ref=True) or ours; closes them afterwards."""
    made = []

    def make(ref):
        loop = asyncio.SelectorEventLoop() if ref else \
            aioloop.new_event_loop(request.param)
        made.append(loop)
        return loop

    yield make
    for loop in made:
        loop.close()


def on_both(new_loop, scenario, debug=False):
    """scenario(loop) run on asyncio's loop, then on ours: both results."""
    out = []
    for ref in (True, False):
        loop = new_loop(ref)
        loop.set_debug(debug)
        out.append(scenario(loop))
    return out


def wakeup_fd():
    """The process's signal wakeup fd, left as it was."""
    fd = signal.set_wakeup_fd(-1)
    signal.set_wakeup_fd(fd, warn_on_full_buffer=False)
    return fd


def test_infinite_timeouts(new_loop):
    async def main():
        loop = asyncio.get_running_loop()
        h = loop.call_later(INF, print)
        h.cancel()
        fut = loop.create_future()
        loop.call_soon(fut.set_result, 7)
        got = await asyncio.wait_for(fut, INF)
        async with asyncio.timeout(INF) as cm:
            await asyncio.sleep(0)
        t = loop.call_at(INF, print)
        t.cancel()
        return h.when(), got, cm.when(), t.when()

    ref, ours = on_both(new_loop, lambda lp: lp.run_until_complete(main()))
    assert ref == ours == (INF, 7, INF, INF)


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(),
                    reason="the signal wakeup fd is the main thread's")
def test_the_signal_wakeup_fd_is_left_alone(new_loop):
    """asyncio sets the process's signal wakeup fd only in
    add_signal_handler(); running a loop leaves it as it was: unset, or
    someone else's."""
    r, w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)

    async def main():
        await asyncio.sleep(0.01)  # (a blocking wait: a timer ends it)
        return wakeup_fd()

    def scenario(loop):
        seen = [wakeup_fd(), loop.run_until_complete(main()), wakeup_fd()]
        signal.set_wakeup_fd(w, warn_on_full_buffer=False)
        try:
            seen += [loop.run_until_complete(main()), wakeup_fd()]
        finally:
            signal.set_wakeup_fd(-1)
        return seen

    try:
        ref, ours = on_both(new_loop, scenario)
    finally:
        os.close(r)
        os.close(w)
    assert ref == ours == [-1, -1, -1, w, w]


def test_ctrl_c_with_a_signal_handler_added(new_loop, sigint_raises):
    """With add_signal_handler() the wakeup fd is the loop's self-pipe,
    and Ctrl-C (asyncio handles no SIGINT here) still ends a sleeping run
    with KeyboardInterrupt, the handler still runs."""
    def scenario(loop):
        got = []
        loop.add_signal_handler(signal.SIGUSR1, got.append, "usr1")
        t = threading.Timer(0.05, os.kill, (os.getpid(), signal.SIGUSR1))
        t.start()
        loop.run_until_complete(asyncio.sleep(0.3))
        t.join()
        t = threading.Timer(0.05, os.kill, (os.getpid(), signal.SIGINT))
        t.start()
        try:
            loop.run_until_complete(asyncio.sleep(30))
        except KeyboardInterrupt:
            got.append("interrupted")
        t.join()
        loop.remove_signal_handler(signal.SIGUSR1)
        return got, wakeup_fd()

    ref, ours = on_both(new_loop, scenario)
    assert ref == ours == (["usr1", "interrupted"], -1)


def test_a_kept_call_soon_follows_set_debug(new_loop):
    """A bound call_soon taken before set_debug(True) makes debug-mode
    handles afterwards, with their source traceback (its last frame the
    caller's)."""
    def scenario(loop):
        soon, threadsafe = loop.call_soon, loop.call_soon_threadsafe
        loop.set_debug(True)
        handles = [soon(print), threadsafe(print)]
        loop.set_debug(False)
        handles.append(soon(print))
        for h in handles:
            h.cancel()
        return [h._source_traceback[-1].name if h._source_traceback
                else None for h in handles]

    ref, ours = on_both(new_loop, scenario)
    name = "scenario"
    assert ref == ours == [name, name, None]


def test_timer_handles_are_named_as_asyncios(new_loop, caplog):
    def scenario(loop):
        loop.slow_callback_duration = 0.01
        h = loop.call_later(3600, print)
        kind = repr(h).split()[0]
        h.cancel()
        caplog.clear()
        loop.call_later(0, time.sleep, 0.03)
        with caplog.at_level(logging.WARNING, logger="asyncio"):
            loop.run_until_complete(asyncio.sleep(0.05))
        slow = [r.getMessage().split()[1] for r in caplog.records
                if "took" in r.getMessage()]
        return kind, slow

    ref, ours = on_both(new_loop, scenario, debug=True)
    assert ref == ours == ("<TimerHandle", ["<TimerHandle"])


def test_another_threads_call_later_is_refused_in_asyncios_words(new_loop):
    """asyncio's debug mode refuses call_later() from a thread other than
    the running loop's; ours refuses it always (the loop is confined), in
    the same words."""
    def scenario(loop):
        errs = []

        def other():
            try:
                loop.call_later(1, print)
            except RuntimeError as e:
                errs.append(str(e))

        async def main():
            t = threading.Thread(target=other)
            t.start()
            while t.is_alive():
                await asyncio.sleep(0.001)

        loop.run_until_complete(main())
        return errs

    ref, ours = on_both(new_loop, scenario, debug=True)
    assert ref == ours and len(ref) == 1
    loop = new_loop(False)
    loop.set_debug(False)
    assert scenario(loop) == ref


def test_a_context_entered_twice(new_loop, caplog):
    """A handle run in a context its own callback runs in: the error
    reaches the exception handler (3.11), or the handler itself cannot
    enter the context and asyncio logs it (3.13)."""
    def scenario(loop):
        got = []
        loop.set_exception_handler(
            lambda lp, ctx: got.append(type(ctx["exception"]).__name__))
        ctx = contextvars.copy_context()

        def enter_again():
            loop.call_soon(lambda: None, context=ctx)._run()

        loop.call_soon(enter_again, context=ctx)
        caplog.clear()
        with caplog.at_level(logging.ERROR, logger="asyncio"):
            loop.run_until_complete(asyncio.sleep(0))
        return got, [r.getMessage().splitlines()[0] for r in caplog.records]

    ref, ours = on_both(new_loop, scenario)
    assert ref == ours
    ref, ours = on_both(new_loop, scenario, debug=True)
    assert ref == ours


@pytest.mark.parametrize("debug", [False, True])
def test_a_dropped_tasks_exception_is_reported_at_once(new_loop, debug):
    """A task that nobody keeps dies as soon as it fails, and "exception
    never retrieved" reaches the exception handler, in the task's context,
    before the next callback runs (no garbage collection needed: the
    loop's frames hold no handle a traceback could keep alive)."""
    name = contextvars.ContextVar("name", default="unset")

    async def failing():
        name.set("the task's")
        1 / 0

    async def main():
        got = []
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(
            lambda lp, ctx: got.append((name.get(),
                                        type(ctx["exception"]).__name__)))
        asyncio.ensure_future(failing())
        await asyncio.sleep(0)
        return got

    ref, ours = on_both(new_loop, lambda lp: lp.run_until_complete(main()),
                        debug=debug)
    # (the handler runs in the task's context from 3.12 on)
    assert ref == ours and [e for _, e in ours] == ["ZeroDivisionError"]


def test_a_threadsafe_handles_cancel_waits_as_asyncios(new_loop):
    """A cancel() from another thread of a call_soon_threadsafe() handle
    whose callback is running returns at once up to 3.13, and waits for
    the callback from 3.14 on (its _ThreadSafeHandle)."""
    def scenario(loop):
        started, finished = threading.Event(), threading.Event()
        seen = []

        def callback():
            started.set()
            time.sleep(0.5)
            finished.set()

        def other():
            h = loop.call_soon_threadsafe(callback)
            started.wait(10)
            h.cancel()
            seen.append(finished.is_set())
            loop.call_soon_threadsafe(loop.stop)

        t = threading.Thread(target=other)
        t.start()
        loop.run_forever()
        t.join()
        return seen

    ref, ours = on_both(new_loop, scenario)
    assert ref == ours and len(ref) == 1


@pytest.mark.parametrize("debug", [False, True])
def test_timers_run_in_asyncios_order_with_queued_callbacks(new_loop, debug):
    """asyncio takes the timers due when its wait ends and runs them after
    the callbacks queued before then: one that comes due while a callback
    runs goes after what that callback queued, one due before goes ahead
    of it, and a cancel() from a callback ahead of a due timer stops it."""
    def scenario(loop):
        seen = []

        def first():
            seen.append("first")
            loop.call_soon(seen.append, "soon")
            loop.call_at(loop.time(), seen.append, "due-now")
            loop.call_later(0, seen.append, "later-0")
            h = loop.call_at(loop.time(), seen.append, "cancelled")
            loop.call_soon(h.cancel)  # (queued ahead of h: h never runs)
            time.sleep(0.002)

        loop.call_at(loop.time() + 0.001, seen.append, "due-before")
        time.sleep(0.005)
        loop.call_soon(first)
        loop.call_later(0.05, loop.stop)
        loop.run_forever()
        return seen

    for ref, ours in [on_both(new_loop, scenario, debug) for _ in range(3)]:
        assert ours == ref == ["first", "due-before", "soon", "due-now",
                               "later-0"]


def test_a_timeout_shorter_than_its_step_lets_the_task_start(new_loop):
    """The step that arms a timeout outlasts it: the task it created still
    takes its first step before the timeout cancels it, as in asyncio
    (CPython's test_wait_for_waits_for_task_cancellation under load)."""
    async def main():
        done = []

        async def inner():
            try:
                await asyncio.sleep(10)
            except asyncio.CancelledError:
                await asyncio.sleep(0)
                raise
            finally:
                done.append(True)

        task = asyncio.create_task(inner())
        try:
            async with asyncio.timeout(0.0001):
                time.sleep(0.002)  # (this step outlasts the timeout)
                await task
        except TimeoutError:
            pass
        return done, task.cancelled()

    ref, ours = on_both(new_loop, lambda lp: lp.run_until_complete(main()))
    assert ref == ours == ([True], True)
