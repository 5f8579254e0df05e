# SPDX-License-Identifier: MIT
"""The asyncio loop's C path (_speed_asyncio.c): call_soon() and readiness
dispatch out of debug mode.  (The suite runs with -X dev, which turns
asyncio's debug mode on, so every test here turns it off first; CPython's
asyncio suite, asyncio_suite.py, runs without it.)"""
import asyncio
import contextvars
import os
import socket
import threading

import pytest

import aioloop
from test_loop import FDMONS

VAR = contextvars.ContextVar("VAR", default="unset")


@pytest.fixture(params=FDMONS)
def loop(request):
    ev = aioloop.new_event_loop(request.param)
    ev.set_debug(False)
    yield ev
    ev.close()


def run_soon(loop):
    """Runs the loop until what is queued now has run."""
    loop.run_until_complete(asyncio.sleep(0))


def test_call_soon_runs_in_c_in_order(loop):
    seen = []
    h = loop.call_soon(seen.append, 1)
    assert type(h) is aioloop._speed.AsyncHandle
    assert loop.call_soon_threadsafe(seen.append, 2) is not None
    loop.aioloop.call_soon(seen.append, 3)  # the raw Loop's: same FIFO
    loop.call_soon(seen.append, 4)
    run_soon(loop)
    assert seen == [1, 2, 3, 4]
    assert not h.cancelled()
    assert h._callback == seen.append and h._args == (1,)
    assert h._loop is loop


def test_cancel_before_it_runs(loop):
    seen = []
    h = loop.call_soon(seen.append, "no")
    h.cancel()
    assert h.cancelled() and h._cancelled
    assert h._callback is None and h._args is None
    assert "cancelled" in repr(h)
    run_soon(loop)
    assert seen == []


def test_context_is_the_callers_or_the_given_one(loop):
    seen = []
    VAR.set("caller")
    loop.call_soon(lambda: seen.append(VAR.get()))
    ctx = contextvars.Context()
    ctx.run(VAR.set, "given")
    h = loop.call_soon(lambda: seen.append(VAR.get()), context=ctx)
    assert h.get_context() is ctx
    loop.call_soon(lambda: VAR.set("changed inside"))  # (its own copy)
    run_soon(loop)
    assert seen == ["caller", "given"]
    assert VAR.get() == "caller"
    with pytest.raises(TypeError):
        loop.call_soon(print, nonsense=1)
    with pytest.raises(TypeError):
        loop.call_soon()


def test_exception_goes_to_the_handler(loop):
    got = []
    loop.set_exception_handler(lambda lp, ctx: got.append(ctx))

    def broken():
        raise ValueError("in a callback")

    h = loop.call_soon(broken)
    after = []
    loop.call_soon(after.append, "still runs")
    run_soon(loop)
    assert after == ["still runs"]
    assert len(got) == 1 and got[0]["handle"] is h
    assert isinstance(got[0]["exception"], ValueError)
    assert got[0]["message"].startswith("Exception in callback")


def test_system_exit_leaves_the_run(loop):
    def leave():
        raise SystemExit(3)

    loop.call_soon(leave)
    with pytest.raises(SystemExit):
        run_soon(loop)
    seen = []
    loop.call_soon(seen.append, "after")
    run_soon(loop)
    assert seen == ["after"]


def test_debug_mode_is_asyncios_path(loop):
    loop.set_debug(True)
    h = loop.call_soon(lambda: None)
    assert isinstance(h, asyncio.Handle)
    run_soon(loop)
    loop.set_debug(False)
    assert type(loop.call_soon(lambda: None)) is aioloop._speed.AsyncHandle
    run_soon(loop)


def test_closed_loop_refuses(loop):
    loop.close()
    with pytest.raises(RuntimeError, match="closed"):
        loop.call_soon(print)
    with pytest.raises(RuntimeError, match="closed"):
        loop.call_soon_threadsafe(print)


def test_threadsafe_wakes_a_blocked_run(loop):
    fut = loop.create_future()

    def other():
        loop.call_soon_threadsafe(fut.set_result, "woken")

    t = threading.Timer(0.05, other)
    t.start()
    try:
        assert loop.run_until_complete(asyncio.wait_for(fut, 10)) == "woken"
    finally:
        t.join()


def test_readiness_runs_handles_in_c(loop):
    a, b = socket.socketpair()
    with a, b:
        a.setblocking(False)
        b.setblocking(False)
        seen = []
        # (an int fd: what transports and sock_*() register)
        loop.add_reader(a.fileno(), lambda: seen.append(a.recv(16)))
        assert type(loop._selector.get_key(a).data[0]) is \
            aioloop._speed.AsyncHandle
        b.send(b"x")
        loop.run_until_complete(asyncio.sleep(0.01))
        assert seen == [b"x"]
        # A cancelled reader handle is dropped at its next readiness, as
        # asyncio's _process_events() does.
        loop._selector.get_key(a).data[0].cancel()
        b.send(b"y")
        loop.run_until_complete(asyncio.sleep(0.01))
        assert seen == [b"x"]
        with pytest.raises(KeyError):
            loop._selector.get_key(a)

        got = []
        loop.set_exception_handler(lambda lp, ctx: got.append(ctx))

        def broken():
            a.recv(16)
            raise OSError("reader")

        # A socket object: registered by its fd, a C handle too, its key
        # keeping the object (the fd stays open while it is registered).
        loop.add_reader(a, broken)
        key = loop._selector.get_key(a.fileno())
        assert key.fileobj is a
        assert type(key.data[0]) is aioloop._speed.AsyncHandle
        b.send(b"z")
        loop.run_until_complete(asyncio.sleep(0.01))
        assert isinstance(got[0]["exception"], OSError)
        assert loop.remove_reader(a)
        # No fileno() or a closed one: asyncio's own checks and errors.
        with pytest.raises(ValueError):
            loop.add_reader(-1, print)
        c, d = socket.socketpair()
        c.close()
        d.close()
        with pytest.raises(ValueError):
            loop.add_reader(c, print)
        with pytest.raises(ValueError):
            loop.add_reader(object(), print)


def test_streams_and_tasks_on_the_c_path(loop):
    async def main():
        async def echo(r, w):
            w.write(await r.read(100))
            await w.drain()
            w.close()

        srv = await asyncio.start_server(echo, "127.0.0.1", 0)
        port = srv.sockets[0].getsockname()[1]
        r, w = await asyncio.open_connection("127.0.0.1", port)
        w.write(b"hello")
        data = await r.read(100)
        w.close()
        srv.close()
        await srv.wait_closed()
        return data

    assert loop.run_until_complete(main()) == b"hello"


def test_handle_outlives_its_loop():
    ev = aioloop.new_event_loop()
    ev.set_debug(False)
    h = ev.call_soon(print)
    ev.close()
    del ev
    assert h._loop is None or isinstance(h._loop, aioloop.EventLoop)
    h.cancel()



def test_run_forever_iterates_in_c_until_stop(loop):
    # stop() before run_forever(): one iteration that does not block, in
    # which what is queued and what is ready runs, then the run ends.
    a, b = socket.socketpair()
    with a, b:
        seen = []
        loop.add_reader(a, lambda: seen.append(a.recv(16)))
        b.send(b"io")
        loop.call_soon(seen.append, "soon")
        loop.stop()
        loop.run_forever()
        assert seen == ["soon", b"io"]
        loop.remove_reader(a)

    # stop() from a callback: that iteration ends the run; what it
    # scheduled runs in the next run.
    def stopper():
        seen.append("stop")
        loop.stop()
        loop.call_soon(seen.append, "next run")

    seen.clear()
    loop.call_later(0.01, stopper)
    loop.run_forever()
    assert seen == ["stop"]
    loop.stop()
    loop.run_forever()
    assert seen == ["stop", "next run"]
    assert not loop.is_running()
    # (outside run_forever _run_once() is one iteration)
    loop.call_soon(seen.append, "once")
    loop._run_once()
    assert seen[-1] == "once"


def test_selector_table_in_c(loop):
    a, b = socket.socketpair()
    with a, b:
        fd = a.fileno()
        table = loop._selector._fd_to_key
        rec = loop.aioloop._fds
        loop.add_reader(fd, print)
        loop.add_writer(fd, print)
        key = loop._selector.get_key(fd)
        assert key.events == 3 and key.fileobj == fd
        assert rec[fd].reader is not None and rec[fd].writer is not None
        old = key.data[0]
        loop.add_reader(fd, print, "again")  # replaces (and cancels) it
        assert old.cancelled()
        assert loop.remove_reader(fd)
        assert not loop.remove_reader(fd)
        assert table[fd].events == 2 and table[fd].data[0] is None
        assert rec[fd].reader is None and rec[fd].writer is not None
        assert loop.remove_writer(fd)
        assert fd not in table and fd not in rec

        # Bad fds: a clear error, and neither table changed.
        r, w = os.pipe()
        os.close(r)
        os.close(w)
        with pytest.raises(OSError):
            loop.add_reader(r, print)
        assert r not in table and r not in rec
        with pytest.raises(ValueError):
            loop._add_reader(-1, print)
        with pytest.raises(TypeError):
            loop._sched._io_set("x", 0, None)
        with pytest.raises(ValueError):
            loop._sched._io_set(fd, 2, None)
        assert fd not in table and fd not in rec

        # Registered by object (register() and the like), removed by int.
        loop.add_reader(a, print)
        assert loop.remove_reader(fd)
        assert fd not in table and fd not in rec


def test_transport_reads_a_protocols_data_in_c(loop):
    got = []

    class Proto(asyncio.Protocol):
        def connection_made(self, tr):
            got.append(tr)

        def data_received(self, data):
            got.append(data)

        def eof_received(self):
            got.append("eof")

    async def main():
        c, d = socket.socketpair()
        tr, _ = await loop.connect_accepted_socket(Proto, c)
        d.setblocking(False)
        await loop.sock_sendall(d, b"y" * 300000)  # more than one read
        d.shutdown(socket.SHUT_WR)
        while "eof" not in got:
            await asyncio.sleep(0.01)
        tr.close()
        d.close()

    loop.run_until_complete(main())
    assert type(got[0]).__name__ == "_SocketTransport"
    assert b"".join(x for x in got[1:-1]) == b"y" * 300000


class _Recorder(asyncio.Protocol):
    """What a transport did to its protocol, in order."""

    def __init__(self, fail=None):
        self.events, self.fail = [], fail
        self.lost = None

    def connection_made(self, tr):
        self.tr = tr

    def data_received(self, data):
        self.events.append(bytes(data))
        if self.fail is not None:
            raise self.fail

    def eof_received(self):
        self.events.append("eof")

    def connection_lost(self, exc):
        self.lost = asyncio.get_running_loop().create_future()
        self.lost.set_result(exc)


def _run(loop, coro, timeout=10):
    return loop.run_until_complete(asyncio.wait_for(coro, timeout))


async def _until(cond):
    while not cond():
        await asyncio.sleep(0.001)


_HEAP_CHECK = r"""
import asyncio, ctypes, socket
import aioloop


def mmapped(obj):
    # (glibc: the chunk's size word, before the block, has IS_MMAPPED)
    return bool(ctypes.c_size_t.from_address(id(obj) - 8).value & 2)


# (the probe itself, on a block above glibc's largest threshold, 32 MiB,
# whose free raises no threshold)
big = bytes(64 << 20)
assert mmapped(big)
del big
seen = []


class Proto(asyncio.Protocol):
    def data_received(self, data):
        seen.append(mmapped(data))


async def main():
    c, d = socket.socketpair()
    tr, _ = await loop.connect_accepted_socket(Proto, c)
    tr.max_size = 4 << 20
    for i in range(3):
        d.send(b"x" * 1000)
        while len(seen) == i:
            await asyncio.sleep(0.001)
    tr.close()
    d.close()


loop = aioloop.new_event_loop()
loop.run_until_complete(main())
loop.close()
print(seen)
"""


def test_transport_reads_on_mallocs_heap():
    """A read of max_size (here 4 MiB, above glibc's first mmap threshold
    and what Python's start freed) is not an mmap of its own: the transport
    raised malloc's dynamic mmap threshold first (_speed_transport.c).  In
    a child whose objects come from malloc() itself (no debug hooks)."""
    import platform
    import subprocess
    import sys
    if platform.libc_ver()[0] != "glibc":
        pytest.skip("malloc's dynamic mmap threshold is glibc's")
    env = dict(os.environ, PYTHONMALLOC="malloc")
    for name in ("PYTHONDEVMODE", "PYTHONASYNCIODEBUG"):
        env.pop(name, None)
    r = subprocess.run([sys.executable, "-c", _HEAP_CHECK],
                       env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "[False, False, False]\n"


def test_transport_read_bounded_by_max_size(loop):
    c, d = socket.socketpair()
    with d:
        async def main():
            tr, p = await loop.connect_accepted_socket(_Recorder, c)
            assert isinstance(tr, aioloop._speed.SocketIO)
            tr.max_size = 16
            d.send(b"z" * 40)
            await _until(lambda: sum(map(len, p.events)) == 40)
            assert [len(x) for x in p.events] == [16, 16, 8]
            tr.close()
        _run(loop, main())


def test_transport_read_error_and_protocol_error_are_fatal(loop):
    errors = []
    loop.set_exception_handler(lambda lp, ctx: errors.append(ctx))

    async def reset():
        # a reset connection: recv() fails with ECONNRESET
        srv = socket.create_server(("127.0.0.1", 0))
        with srv:
            cl = socket.create_connection(srv.getsockname())
            conn, _ = srv.accept()
        tr, p = await loop.connect_accepted_socket(_Recorder, conn)
        cl.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                      b"\x01\x00\x00\x00\x00\x00\x00\x00")
        cl.close()
        await _until(lambda: p.lost is not None)
        assert isinstance(p.lost.result(), ConnectionResetError)
        assert tr.is_closing()

    async def raising():
        c, d = socket.socketpair()
        with d:
            tr, p = await loop.connect_accepted_socket(
                lambda: _Recorder(fail=ValueError("bad")), c)
            d.send(b"abc")
            await _until(lambda: p.lost is not None)
            assert p.events == [b"abc"]
            assert isinstance(p.lost.result(), ValueError)

    _run(loop, reset())
    _run(loop, raising())
    assert [ctx["message"] for ctx in errors] == [
        "Fatal error: protocol.data_received() call failed."]
    assert isinstance(errors[0]["exception"], ValueError)


def test_transport_write_sends_buffers_and_keeps_order(loop):
    c, d = socket.socketpair()
    c.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    d.setblocking(False)
    with d:
        async def main():
            tr, p = await loop.connect_accepted_socket(_Recorder, c)
            tr.write(b"a" * 10)                  # sent at once
            assert tr.get_write_buffer_size() == 0
            assert await loop.sock_recv(d, 100) == b"a" * 10
            big = bytearray(b"b" * (1 << 20))
            tr.write(big)                        # part sent, the rest kept
            assert 0 < tr.get_write_buffer_size() < len(big)
            big[:] = b"x" * len(big)             # (written: a copy kept)
            tr.write(b"c" * 5)                   # behind the buffered rest
            tr.write(memoryview(b"d" * 3))       # (asyncio's own write())
            got = bytearray()
            while len(got) < (1 << 20) + 8:
                got += await loop.sock_recv(d, 1 << 16)
            assert got == b"b" * (1 << 20) + b"c" * 5 + b"d" * 3
            assert tr.get_write_buffer_size() == 0
            with pytest.raises(TypeError):
                tr.write("text")
            tr.write(b"")                        # nothing
            tr.write_eof()
            with pytest.raises(RuntimeError, match="write_eof"):
                tr.write(b"e")
            assert await loop.sock_recv(d, 10) == b""
            tr.close()
        _run(loop, main())


def test_transport_write_error_is_fatal_then_counted(loop):
    errors = []
    loop.set_exception_handler(lambda lp, ctx: errors.append(ctx))
    c, d = socket.socketpair()

    async def main():
        tr, p = await loop.connect_accepted_socket(_Recorder, c)
        d.close()
        tr.write(b"x")                           # EPIPE: fatal
        await _until(lambda: p.lost is not None)
        assert isinstance(p.lost.result(), BrokenPipeError)
        lost = tr._conn_lost
        tr.write(b"y")                           # counted, not sent
        assert tr._conn_lost == lost + 1

    _run(loop, main())
    # (a broken pipe is a connection error: asyncio logs it at debug level,
    # without the exception handler)
    assert errors == []


def test_sock_recv_wait_leaves_no_reader(loop):
    a, b = socket.socketpair()
    with a, b:
        a.setblocking(False)
        fd = a.fileno()

        async def main():
            # waits, then data
            t = loop.create_task(loop.sock_recv(a, 10))
            await asyncio.sleep(0.01)
            assert fd in loop._selector._fd_to_key
            b.send(b"abc")
            assert await t == b"abc"
            assert fd not in loop._selector._fd_to_key
            # recv_into, waiting too
            buf = bytearray(8)
            t = loop.create_task(loop.sock_recv_into(a, buf))
            await asyncio.sleep(0.01)
            b.send(b"de")
            assert await t == 2 and buf[:2] == b"de"
            assert fd not in loop._selector._fd_to_key
            # cancelled while waiting: the reader goes
            t = loop.create_task(loop.sock_recv(a, 10))
            await asyncio.sleep(0.01)
            t.cancel()
            with pytest.raises(asyncio.CancelledError):
                await t
            assert fd not in loop._selector._fd_to_key
            # the peer goes while it waits: EOF
            t = loop.create_task(loop.sock_recv(a, 10))
            await asyncio.sleep(0.01)
            b.close()
            assert await t == b""
            assert fd not in loop._selector._fd_to_key

        loop.run_until_complete(main())


def test_what_an_iteration_queues_runs_before_the_next_wait(loop):
    # A chain of call_soon()s, each queued by the one before: run_forever
    # runs what an iteration queued right after it, then waits once more
    # (never an endless chain without looking at fds): an iteration, with
    # its fd wait, for every two links, not for every link (counted by
    # libaioloop; io_uring makes no syscall for a wait that cannot block,
    # so the count is of iterations).
    left = [1000]

    def link():
        left[0] -= 1
        if left[0]:
            loop.call_soon(link)
        else:
            loop.stop()

    loop.call_soon(link)
    before = loop.aioloop.stats()
    loop.run_forever()
    after = loop.aioloop.stats()
    assert left[0] == 0
    assert after["iterations"] - before["iterations"] <= 500 + 2
    # A reader that wakes a task: the task runs before the next wait too.
    a, b = socket.socketpair()
    with a, b:
        a.setblocking(False)

        async def ping(n):
            for _ in range(n):
                b.send(b"x")
                assert await loop.sock_recv(a, 1) == b"x"

        loop.run_until_complete(ping(10))   # (warm-up)
        before = loop.aioloop.stats()
        loop.run_until_complete(ping(100))
        after = loop.aioloop.stats()
        # (one iteration per message: the one that sees the byte; none
        # for running the woken task)
        assert after["iterations"] - before["iterations"] <= 100 + 5


def test_transport_switches_to_a_buffered_protocol(loop):
    got = []

    class Plain(asyncio.Protocol):
        def data_received(self, data):
            got.append(("plain", data))

    class Buffered(asyncio.BufferedProtocol):
        buf = bytearray(64)

        def get_buffer(self, sizehint):
            return self.buf

        def buffer_updated(self, n):
            got.append(("buffered", bytes(self.buf[:n])))

    async def main():
        c, d = socket.socketpair()
        d.setblocking(False)
        tr, _ = await loop.connect_accepted_socket(Plain, c)
        await loop.sock_sendall(d, b"one")
        while not got:
            await asyncio.sleep(0.01)
        tr.set_protocol(Buffered())
        await loop.sock_sendall(d, b"two")
        while len(got) < 2:
            await asyncio.sleep(0.01)
        tr.close()
        d.close()

    loop.run_until_complete(main())
    assert got == [("plain", b"one"), ("buffered", b"two")]
