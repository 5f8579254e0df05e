# SPDX-License-Identifier: MIT
"""asyncio servers on three loops: aioloop's EventLoop, asyncio's own
loop and uvloop, in uvloop's own benchmark shape (python_bench.py runs
these workloads next to its call_soon rows).

A server process runs the loop under test; the client, echo-client (C,
one epoll loop, built in bench/ next to the other benchmarks), keeps
CLIENTS connections busy (each sends a message and reads the whole echo
before the next), so the server sees concurrent clients and the server,
not the client, is what the rate measures.

  echo_proto   TCP echo with a Protocol (data_received -> write)
  echo_streams TCP echo with streams (read -> write -> drain)
  unix_proto   the Protocol echo over a Unix socket
  sock_ping    in one process, two coroutines ping-pong a message over a
               socketpair with sock_sendall/sock_recv

each with 1 KiB and 100 KiB messages (sock_ping: 1 KiB).  Metric:
messages echoed per second (round trips for sock_ping).

    python_echo.py --serve LOOP KIND ADDRESS   (the server process)

AIOLOOP_ECHO_CLIENT names the echo-client binary (default: bench/ of
the build tree the aioloop package was imported from).
"""
import asyncio
import os
import socket
import subprocess
import sys
import tempfile
import time

CLIENTS = 16
LOOPS = ("aioloop", "asyncio", "uvloop")


def new_loop(name):
    if name == "aioloop":
        import aioloop
        return aioloop.new_event_loop()
    if name == "uvloop":
        import uvloop
        return uvloop.new_event_loop()
    return asyncio.new_event_loop()


class Echo(asyncio.Protocol):
    def connection_made(self, transport):
        self.transport = transport

    def data_received(self, data):
        self.transport.write(data)


async def echo_stream(reader, writer):
    while True:
        data = await reader.read(102400)
        if not data:
            break
        writer.write(data)
        await writer.drain()
    writer.close()


def serve(name, kind, address):
    """The server process: listens on address, says READY, echoes until
    stdin closes."""
    loop = new_loop(name)
    asyncio.set_event_loop(loop)
    if kind == "unix_proto":
        srv = loop.run_until_complete(loop.create_unix_server(Echo, address))
    elif kind == "echo_streams":
        srv = loop.run_until_complete(
            asyncio.start_server(echo_stream, "127.0.0.1", 0))
    else:
        srv = loop.run_until_complete(
            loop.create_server(Echo, "127.0.0.1", 0))
    port = srv.sockets[0].getsockname()
    print("READY %s" % (port[1] if isinstance(port, tuple) else address),
          flush=True)
    done = loop.create_future()
    loop.add_reader(sys.stdin.fileno(), lambda: done.done() or
                    done.set_result(None))
    loop.run_until_complete(done)
    srv.close()
    loop.close()


def client_path():
    """The echo-client binary of the build tree aioloop comes from."""
    path = os.environ.get("AIOLOOP_ECHO_CLIENT")
    if path is None:
        import aioloop
        # (BUILD/bindings/python/aioloop/__init__.py)
        build = os.path.abspath(aioloop.__file__)
        for _ in range(4):
            build = os.path.dirname(build)
        path = os.path.join(build, "bench", "echo-client")
    if not os.access(path, os.X_OK):
        raise SystemExit("python_echo: no echo-client at %s (build bench/, "
                         "or set AIOLOOP_ECHO_CLIENT)" % path)
    return path


def _client(address, size, clients, n):
    out = subprocess.run([client_path(), address, str(size), str(clients),
                          str(n)], check=True, stdout=subprocess.PIPE,
                         text=True, timeout=300)
    return float(out.stdout)


def server_rate(name, kind, size, n):
    """Messages per second through a fresh server on loop name."""
    tmp = tempfile.mkdtemp(prefix="pyecho-")
    address = os.path.join(tmp, "s")
    p = subprocess.Popen([sys.executable, os.path.abspath(__file__),
                          "--serve", name, kind, address],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         text=True)
    try:
        line = p.stdout.readline().split()
        if not line or line[0] != "READY":
            raise RuntimeError("python_echo: the %s server did not start" % name)
        if kind != "unix_proto":
            address = "127.0.0.1:%d" % int(line[1])
        # (a short warm-up on one connection, then the measured clients)
        _client(address, size, 1, max(n // 20, 1))
        return _client(address, size, CLIENTS, n)
    finally:
        p.stdin.close()
        p.wait(timeout=30)
        if os.path.exists(address):
            os.unlink(address)
        os.rmdir(tmp)


def sock_ping_rate(name, size, n):
    """Round trips per second of a sock_sendall/sock_recv ping-pong."""
    loop = new_loop(name)
    a, b = socket.socketpair()
    a.setblocking(False)
    b.setblocking(False)
    msg = b"x" * size

    async def side(s, first):
        for _ in range(n):
            if first:
                await loop.sock_sendall(s, msg)
            got = 0
            while got < size:
                got += len(await loop.sock_recv(s, 65536))
            if not first:
                await loop.sock_sendall(s, msg)

    async def main():
        t0 = time.perf_counter()
        await asyncio.gather(side(a, True), side(b, False))
        return n / (time.perf_counter() - t0)

    try:
        return loop.run_until_complete(main())
    finally:
        a.close()
        b.close()
        loop.close()


def workloads(quick):
    """(row name, function of the loop name) for python_bench.py."""
    k = 4 if quick else 1
    rows = []
    for kind in ("echo_proto", "echo_streams", "unix_proto"):
        for size, n in ((1024, 4000), (102400, 400)):
            rows.append(("%s %dk" % (kind, size // 1024),
                         lambda name, kind=kind, size=size, n=n:
                         server_rate(name, kind, size, n // k)))
    rows.append(("sock_ping 1k",
                 lambda name: sock_ping_rate(name, 1024, 20000 // k)))
    return rows


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--serve":
        serve(*sys.argv[2:])
    else:
        sys.exit(__doc__)
