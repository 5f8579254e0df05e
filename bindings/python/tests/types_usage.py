# SPDX-License-Identifier: MIT
"""Every public name of aioloop, used as a typed program would: checked
with mypy --strict by check_types.py (and run by it, so it stays true)."""
import asyncio
import os

import aioloop
from aioloop import (FDMONS, EventLoop, EventLoopPolicy, Handle, IOThread,
                     Loop, TimerHandle, install, new_event_loop, run)

version: str = aioloop.__version__
monitors: tuple[str, ...] = FDMONS


def classic() -> list[object]:
    seen: list[object] = []
    with Loop(None) as loop:
        name: str = loop.fdmon
        r, w = os.pipe2(os.O_NONBLOCK)
        loop.add_reader(r, lambda: seen.append(os.read(r, 8)),
                        poll=lambda: False)
        loop.add_writer(w, lambda: None)
        removed: bool = loop.remove_writer(w)
        h: Handle = loop.call_soon(seen.append, name)
        t: TimerHandle = loop.call_later(0.001, seen.append, "later")
        u: TimerHandle = loop.call_at(loop.time() + 10, seen.append, "never")
        u.cancel()
        when: float = t.when()
        loop.call_soon_threadsafe(seen.append, removed)
        os.write(w, b"x")
        done: bool = loop.run_until(lambda: len(seen) >= 4, timeout=5)
        progress: bool = loop.poll(blocking=False, timeout=None)
        loop.set_poll_params(0, grow=0, shrink=0)
        counts: dict[str, int] = loop.stats()
        loop.notify()
        loop.remove_reader(r)
        os.close(r)
        os.close(w)
        seen += [h.cancelled(), when > 0, done, progress, counts["iterations"]]
    closed: bool = loop.closed
    seen.append(closed)
    with IOThread() as io:
        inner: Loop = io.loop
        inner.call_soon_threadsafe(seen.append, "iothread")
    io.stop()
    return seen


async def coro(x: int) -> int:
    await asyncio.sleep(0)
    return x * 2


def asyncio_side() -> int:
    total: int = run(coro(1), debug=False)
    ev: EventLoop = new_event_loop("epoll", reentrant=True)
    raw: Loop = ev.aioloop
    total += ev.run_until_complete(coro(2))
    ev.close()
    shared = new_event_loop(loop=Loop())
    total += shared.run_until_complete(coro(3))
    shared.close()
    shared.aioloop.close()
    old = asyncio.get_event_loop_policy()
    install()
    policy: EventLoopPolicy = EventLoopPolicy()
    asyncio.set_event_loop_policy(policy)
    total += asyncio.run(coro(4))
    asyncio.set_event_loop_policy(old)
    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        total += runner.run(coro(5))
    assert raw.closed
    return total


if __name__ == "__main__":
    seen = classic()
    assert "iothread" in seen and "later" in seen and b"x" in seen, seen
    assert asyncio_side() == 30
    print("types_usage: ok")
