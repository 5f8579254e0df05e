#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""echo-test.py ECHO_SERVER - 1000 concurrent clients against the example
TCP echo server, every byte checked.

Each client opens its own connection and sends a pseudo-random stream
(64 KiB, or 1 MiB for every 20th client, which has a 4 KiB receive
buffer and sends its whole stream before reading anything for 0.3 s, so
the server's writes back stall, its buffer fills and it must stop
reading from that client: backpressure), reading the echo back concurrently and
comparing it byte for byte.  Then SIGTERM: the server must exit 0 and
report every client, every byte, write stalls (its write handlers at
work), backpressure pauses and no client still open.  The server runs
with --sndbuf 16384, so a client that does not read stalls it soon.
Runs on the fd monitor in AIOLOOP_FDMON (the meson test sets each);
arguments after ECHO_SERVER go to the server (--ring).
"""
import asyncio
import os
import random
import re
import signal
import socket
import subprocess
import sys

CLIENTS = 1000


async def client(port, i, sem):
    rng = random.Random(i)
    size = (1 << 20) if i % 20 == 0 else (64 << 10)
    data = rng.randbytes(size)
    async with sem:
        if i % 20 == 0:
            # a small receive buffer, and no reading for a while: the
            # server's writes back stall, its buffer fills, it pauses
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.setblocking(False)
            await asyncio.get_running_loop().sock_connect(
                sock, ("127.0.0.1", port))
            reader, writer = await asyncio.open_connection(sock=sock)
        else:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
    got = bytearray()

    async def read_all():
        while len(got) < size:
            chunk = await reader.read(65536)
            if not chunk:
                raise RuntimeError("client %d: connection closed after %d "
                                   "of %d bytes" % (i, len(got), size))
            got.extend(chunk)

    if i % 20 == 0:
        # everything first: the server runs out of buffer and pauses
        writer.write(data)
        await asyncio.sleep(0.3)
        await asyncio.gather(writer.drain(), read_all())
    else:
        rd = asyncio.ensure_future(read_all())
        for off in range(0, size, 4096):
            writer.write(data[off:off + 4096])
            await writer.drain()
        await rd
    writer.close()
    await writer.wait_closed()
    if bytes(got) != data:
        raise RuntimeError("client %d: echo differs" % i)
    return size


async def run(port):
    sem = asyncio.Semaphore(200)  # (connects in waves; all stay open)
    sizes = await asyncio.gather(*(client(port, i, sem)
                                   for i in range(CLIENTS)))
    return sum(sizes)


def main():
    # (--foreground: timeout passes the SIGTERM to the server alone, not to
    # its process group, where LeakSanitizer's tracer runs at exit)
    server = subprocess.Popen(["timeout", "--foreground", "-k", "5", "300",
                               sys.argv[1],
                               "--sndbuf", "16384"] + sys.argv[2:],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
    try:
        line = server.stdout.readline()
        m = re.search(r"listening on 127\.0\.0\.1:(\d+)", line)
        if not m:
            print("echo-test: the server said: %r" % line)
            return 1
        total = asyncio.run(run(int(m.group(1))))
        server.send_signal(signal.SIGTERM)
        out, err = server.communicate(timeout=30)
    finally:
        if server.poll() is None:
            server.kill()
    print(line.strip())
    print(out.strip())
    if err.strip() or server.returncode != 0:
        print("echo-test: the server exited with %d:\n%s"
              % (server.returncode, err.strip()[-3000:]))
    m = re.search(r"(\d+) clients, (\d+) bytes echoed, (\d+) write stalls, "
                  r"(\d+) backpressure pauses, (\d+) still open", out)
    ok = (server.returncode == 0 and m is not None and
          int(m.group(1)) == CLIENTS and int(m.group(2)) == total and
          int(m.group(3)) > 0 and int(m.group(4)) > 0 and
          int(m.group(5)) == 0)
    print("echo-test: %d clients, %d bytes, every byte checked: %s"
          % (CLIENTS, total, "ok" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
