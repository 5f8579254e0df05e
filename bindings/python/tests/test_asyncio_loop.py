# SPDX-License-Identifier: MIT
"""aioloop's asyncio event loop: uvloop's entry points, asyncio's API on
every fd monitor, and that the work is libaioloop's (its counters move).
CPython's own asyncio suite judges the rest (asyncio_suite.py)."""
import asyncio
import logging
import os
import signal
import socket
import sys
import threading
import time
import warnings

import pytest

import aioloop
from test_loop import FDMONS


@pytest.fixture(params=FDMONS)
def fdmon(request, monkeypatch):
    monkeypatch.setenv("AIOLOOP_FDMON", request.param)
    monkeypatch.delenv("AIOLOOP_BACKEND", raising=False)
    return request.param


def stats(loop):
    return loop.aioloop.stats()


def test_entry_points(fdmon):
    async def main():
        loop = asyncio.get_running_loop()
        assert isinstance(loop, aioloop.EventLoop)
        assert isinstance(loop, asyncio.AbstractEventLoop)
        assert loop.aioloop.fdmon == fdmon
        return 42

    assert aioloop.run(main()) == 42
    assert aioloop.run(main(), debug=True) == 42
    with asyncio.Runner(loop_factory=aioloop.new_event_loop) as runner:
        assert runner.run(main()) == 42
    # (3.14 deprecates the public policy calls, not the policies: their
    # private names warn of nothing, there and before)
    get_policy = getattr(asyncio.events, "_get_event_loop_policy",
                         asyncio.get_event_loop_policy)
    old = get_policy()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # install() warns of nothing
            aioloop.install()
        assert isinstance(get_policy(), aioloop.EventLoopPolicy)
        assert asyncio.run(main()) == 42
        loop = asyncio.new_event_loop()
        assert isinstance(loop, aioloop.EventLoop)
        loop.close()
    finally:
        aioloop._asyncio._set_policy(old)


def test_bad_arguments():
    with pytest.raises(ValueError):
        aioloop.new_event_loop("no-such-monitor")
    with pytest.raises(TypeError):
        aioloop.new_event_loop(loop=object())
    raw = aioloop.Loop()
    with pytest.raises(ValueError):
        aioloop.new_event_loop("poll", loop=raw)
    raw.close()
    with pytest.raises(RuntimeError):
        aioloop.new_event_loop(loop=raw)  # closed


def test_call_soon_is_a_bottom_half(fdmon):
    loop = aioloop.new_event_loop()
    try:
        seen = []
        before = stats(loop)["bh_runs"]
        h = loop.call_soon(seen.append, "cancelled")
        for i in range(5):
            loop.call_soon(seen.append, i)
        h.cancel()
        loop.call_soon(loop.stop)
        loop.run_forever()
        assert seen == [0, 1, 2, 3, 4]
        # one bottom half ran the whole FIFO
        assert stats(loop)["bh_runs"] - before >= 1
    finally:
        loop.close()


def test_timers_are_libaioloop_timers(fdmon):
    loop = aioloop.new_event_loop()
    try:
        seen = []
        before = stats(loop)["timer_runs"]
        loop.call_later(0.03, seen.append, "b")
        loop.call_later(0.01, seen.append, "a")
        gone = loop.call_later(0.02, seen.append, "cancelled")
        gone.cancel()
        t = loop.call_at(loop.time() + 0.04, loop.stop)
        assert isinstance(t, asyncio.TimerHandle) and t.when() > loop.time()
        t0 = time.monotonic()
        loop.run_forever()
        assert seen == ["a", "b"]
        assert time.monotonic() - t0 >= 0.04 - 0.005
        assert stats(loop)["timer_runs"] - before == 3
    finally:
        loop.close()


def test_threadsafe_wakes_a_sleeping_loop(fdmon):
    async def main():
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        kicks = stats(loop)["notify_kicks"]
        t = threading.Thread(target=lambda: (time.sleep(0.05),
                             loop.call_soon_threadsafe(fut.set_result, 7)))
        t.start()
        r = await asyncio.wait_for(fut, 10)
        t.join()
        return r, stats(loop)["notify_kicks"] - kicks

    r, kicks = aioloop.run(main())
    assert r == 7 and kicks >= 1


def test_readers_writers_are_handlers(fdmon):
    async def main():
        loop = asyncio.get_running_loop()
        r, w = os.pipe2(os.O_NONBLOCK)
        try:
            got = loop.create_future()
            loop.add_reader(r, lambda: got.set_result(os.read(r, 10)))
            cb = stats(loop)["callbacks"]
            os.write(w, b"x")
            assert await got == b"x"
            assert loop.remove_reader(r)
            assert stats(loop)["callbacks"] > cb
            wrote = loop.create_future()
            loop.add_writer(w, lambda: wrote.done() or wrote.set_result(1))
            await wrote
            assert loop.remove_writer(w)
            assert not loop.remove_writer(w)
        finally:
            os.close(r)
            os.close(w)

    aioloop.run(main())


def test_sockets_streams_servers(fdmon):
    async def main():
        loop = asyncio.get_running_loop()
        a, b = socket.socketpair()
        a.setblocking(False)
        b.setblocking(False)
        with a, b:
            async def receive():
                n = 0
                while n < 400000:  # (more than the socket buffers hold)
                    n += len(await loop.sock_recv(b, 65536))
                return n
            sent = loop.sock_sendall(a, b"ping" * 100000)
            assert (await asyncio.gather(sent, receive()))[1] == 400000

        async def echo(reader, writer):
            writer.write(await reader.readline())
            await writer.drain()
            writer.close()
            await writer.wait_closed()

        srv = await asyncio.start_server(echo, "127.0.0.1", 0)
        async with srv:
            port = srv.sockets[0].getsockname()[1]
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"hello\n")
            assert await reader.readline() == b"hello\n"
            assert await reader.read() == b""
            writer.close()
            await writer.wait_closed()
        infos = await loop.getaddrinfo("127.0.0.1", port)
        assert infos

    aioloop.run(main())


def test_datagram_and_unix(fdmon, tmp_path):
    async def main():
        loop = asyncio.get_running_loop()
        got = loop.create_future()

        class Proto(asyncio.DatagramProtocol):
            def datagram_received(self, data, addr):
                got.set_result(data)

        tr, _ = await loop.create_datagram_endpoint(
            Proto, local_addr=("127.0.0.1", 0))
        tx, _ = await loop.create_datagram_endpoint(
            asyncio.DatagramProtocol, remote_addr=tr.get_extra_info("sockname"))
        tx.sendto(b"dgram")
        assert await got == b"dgram"
        tx.close()
        tr.close()
        path = str(tmp_path / "s")
        async def serve(reader, writer):
            writer.write(b"unix\n")
            writer.close()
            await writer.wait_closed()

        srv = await asyncio.start_unix_server(serve, path)
        async with srv:
            r, w = await asyncio.open_unix_connection(path)
            assert await r.readline() == b"unix\n"
            w.close()
            await w.wait_closed()

    aioloop.run(main())


def test_subprocess_signals_executor(fdmon):
    async def main():
        loop = asyncio.get_running_loop()
        p = await asyncio.create_subprocess_exec(
            sys.executable, "-c", "import sys; print(sys.stdin.read()[::-1])",
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
        out, _ = await p.communicate(b"abc")
        assert out == b"cba\n" and p.returncode == 0
        p = await asyncio.create_subprocess_shell("exit 3")
        assert await p.wait() == 3
        hit = loop.create_future()
        loop.add_signal_handler(signal.SIGUSR1, hit.set_result, "usr1")
        os.kill(os.getpid(), signal.SIGUSR1)
        assert await asyncio.wait_for(hit, 10) == "usr1"
        assert loop.remove_signal_handler(signal.SIGUSR1)
        assert await loop.run_in_executor(None, sum, [1, 2, 3]) == 6

    aioloop.run(main())


def test_ctrl_c_ends_a_sleeping_run(fdmon, sigint_raises):
    async def main():
        await asyncio.sleep(30)

    # (at the main thread, as a terminal's Ctrl-C)
    t = threading.Timer(0.2, signal.pthread_kill,
                        (threading.main_thread().ident, signal.SIGINT))
    t.start()
    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        aioloop.run(main())
    t.join()
    assert time.monotonic() - t0 < 20


def test_exception_handler_and_slow_callbacks(fdmon, caplog):
    loop = aioloop.new_event_loop()
    try:
        seen = []
        loop.set_exception_handler(lambda lp, ctx: seen.append(ctx["exception"]))
        loop.call_soon(lambda: 1 / 0)
        loop.set_debug(True)
        loop.slow_callback_duration = 0.01
        loop.call_soon(time.sleep, 0.03)
        loop.call_soon(loop.stop)
        with caplog.at_level(logging.WARNING, logger="asyncio"):
            loop.run_forever()
        assert len(seen) == 1 and isinstance(seen[0], ZeroDivisionError)
        assert any("took" in r.getMessage() for r in caplog.records)
    finally:
        loop.close()


def test_runs_on_another_thread(fdmon):
    loop = aioloop.new_event_loop()
    out = []

    async def work():
        await asyncio.sleep(0.01)
        return threading.get_ident()

    t = threading.Thread(target=lambda: out.append(loop.run_until_complete(work())))
    t.start()
    t.join()
    assert out == [t.ident]
    assert loop.run_until_complete(work()) == threading.get_ident()
    loop.close()


def test_shares_a_loop_with_raw_handlers(fdmon):
    raw = aioloop.Loop(fdmon)
    r, w = os.pipe2(os.O_NONBLOCK)
    try:
        ev = aioloop.new_event_loop(loop=raw)
        assert ev.aioloop is raw
        seen = []
        raw.add_reader(r, lambda: seen.append(os.read(r, 10)))
        raw.call_soon(seen.append, "raw bh")

        async def main():
            os.write(w, b"io")
            while len(seen) < 2:
                await asyncio.sleep(0.001)
            return "coro"

        assert ev.run_until_complete(main()) == "coro"
        assert sorted(seen, key=str) == [b"io", "raw bh"]
        ev.close()
        assert not raw.closed  # not the event loop's to close
        raw.remove_reader(r)
    finally:
        os.close(r)
        os.close(w)
        raw.close()


def test_close_releases_everything(fdmon):
    loop = aioloop.new_event_loop()
    loop.call_later(10, lambda: None)
    loop.call_soon(lambda: None)
    raw = loop.aioloop
    loop.close()
    assert loop.is_closed() and raw.closed
    with pytest.raises(RuntimeError):
        loop.call_soon(lambda: None)
    loop.close()  # twice is fine


# ---------------------------------------------------------- reentrant


def test_not_reentrant_by_default(fdmon):
    async def main():
        loop = asyncio.get_running_loop()
        with pytest.raises(RuntimeError, match="already running"):
            loop.run_until_complete(loop.create_future())

    aioloop.run(main())


def test_nested_waits_on_futures_tasks_and_io(fdmon):
    loop = aioloop.new_event_loop(reentrant=True)
    a, b = socket.socketpair()
    a.setblocking(False)
    b.setblocking(False)
    depth = []

    async def deepest():
        await asyncio.sleep(0.005)
        return "deep"

    async def inner():
        me = asyncio.current_task()
        # two levels: a nested run inside a nested run
        r = loop.run_until_complete(deepest())
        assert asyncio.current_task() is me
        depth.append(loop.aioloop._depth)
        return r

    async def outer():
        me = asyncio.current_task()
        fut = loop.create_future()
        loop.call_later(0.005, fut.set_result, 1)
        assert loop.run_until_complete(fut) == 1           # a future
        assert loop.run_until_complete(inner()) == "deep"  # a task
        loop.call_later(0.005, a.send, b"io")
        assert loop.run_until_complete(loop.sock_recv(b, 10)) == b"io"
        assert asyncio.current_task() is me
        await asyncio.sleep(0)  # still a task that can await
        return "outer"

    try:
        assert loop.run_until_complete(outer()) == "outer"
        assert depth and depth[0] >= 2
    finally:
        a.close()
        b.close()
        loop.close()


def test_nested_from_a_plain_callback(fdmon):
    loop = aioloop.new_event_loop(reentrant=True)
    got = []

    def callback():
        got.append(loop.run_until_complete(asyncio.sleep(0.005, "slept")))
        loop.stop()

    loop.call_soon(callback)
    loop.run_forever()
    loop.close()
    assert got == ["slept"]


def test_exceptions_cross_levels(fdmon):
    loop = aioloop.new_event_loop(reentrant=True)

    async def fails():
        await asyncio.sleep(0)
        raise ValueError("inner")

    async def outer():
        with pytest.raises(ValueError, match="inner"):
            loop.run_until_complete(fails())
        # a BaseException from a callback run by the nested poll leaves
        # both levels
        loop.call_soon(lambda: (_ for _ in ()).throw(KeyboardInterrupt))
        loop.run_until_complete(asyncio.sleep(1))

    try:
        with pytest.raises(KeyboardInterrupt):
            loop.run_until_complete(outer())
        # the loop is still usable
        assert loop.run_until_complete(asyncio.sleep(0, "again")) == "again"
    finally:
        loop.close()


def test_outer_task_cancelled_while_nested(fdmon):
    loop = aioloop.new_event_loop(reentrant=True)
    steps = []

    async def outer():
        me = asyncio.current_task()
        loop.call_later(0.002, me.cancel)
        # the cancel arrives while this task sits in the nested run
        r = loop.run_until_complete(asyncio.sleep(0.02, "nested done"))
        steps.append(r)
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            steps.append("cancelled at the next await")
            raise

    try:
        task = loop.create_task(outer())
        with pytest.raises(asyncio.CancelledError):
            loop.run_until_complete(task)
        assert steps == ["nested done", "cancelled at the next await"]
        assert loop.run_until_complete(asyncio.sleep(0, 3)) == 3
    finally:
        loop.close()


def test_stop_ends_a_nested_run(fdmon):
    loop = aioloop.new_event_loop(reentrant=True)

    async def outer():
        loop.call_soon(loop.stop)
        with pytest.raises(RuntimeError, match="stopped before"):
            loop.run_until_complete(asyncio.sleep(10))

    try:
        task = loop.create_task(outer())
        loop.run_forever()  # (the stop() ends the outer run too)
        loop.run_until_complete(task)
    finally:
        loop.close()


def test_repr_from_another_thread_while_closing(fdmon):
    """A thread may repr() the loop while its owner closes it (asyncio's
    child watcher thread logs a warning naming the loop): repr() reads
    nothing of the C loop, which close() frees.  Reading it there was a
    use after free that crashed CPython's subprocess tests now and then."""
    stop = threading.Event()
    current = [aioloop.new_event_loop()]
    seen = []

    def reader():
        while not stop.is_set():
            seen.append(repr(current[0]))

    t = threading.Thread(target=reader)
    t.start()
    try:
        for _ in range(100):
            loop = current[0]
            loop.close()
            assert fdmon in repr(loop) and "closed=True" in repr(loop)
            current[0] = aioloop.new_event_loop()
    finally:
        stop.set()
        t.join()
        current[0].close()
    assert seen and all("fdmon=" + fdmon in r for r in seen)


def test_fdmon_from_the_environment_as_the_c_library_reads_it(monkeypatch):
    # AIOLOOP_FDMON first, AIOLOOP_BACKEND (its older name) when unset:
    # raw loops and asyncio loops of one program on the same monitor
    monkeypatch.setenv("AIOLOOP_FDMON", "poll")
    monkeypatch.setenv("AIOLOOP_BACKEND", "epoll")
    for want in ("poll", "epoll"):
        loop = aioloop.new_event_loop()
        try:
            with aioloop.Loop() as raw:
                assert (loop.aioloop.fdmon, raw.fdmon) == (want, want)
        finally:
            loop.close()
        monkeypatch.delenv("AIOLOOP_FDMON", raising=False)
