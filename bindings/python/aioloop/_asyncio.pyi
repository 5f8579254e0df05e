# SPDX-License-Identifier: MIT
# Type information for aioloop._asyncio: asyncio on libaioloop.
import socket
from asyncio import unix_events
from collections.abc import Coroutine
from typing import Any, TypeVar

from . import Loop

__all__ = ["EventLoop", "EventLoopPolicy", "new_event_loop", "install",
           "run"]

_T = TypeVar("_T")

class EventLoop(unix_events.SelectorEventLoop):
    """An asyncio event loop on a libaioloop loop."""
    def __init__(self, fdmon: str | None = ..., *, loop: Loop | None = ...,
                 reentrant: bool = ...) -> None: ...
    @property
    def aioloop(self) -> Loop: ...
    # (CPython's runtime name, which typeshed spells nbytes)
    async def sock_recv(self, sock: socket.socket, n: int) -> bytes: ...

class EventLoopPolicy(unix_events._UnixDefaultEventLoopPolicy):
    """asyncio's default policy, whose loops are aioloop EventLoops."""

def new_event_loop(fdmon: str | None = ..., *, loop: Loop | None = ...,
                   reentrant: bool = ...) -> EventLoop: ...
def install() -> None: ...
def run(main: Coroutine[Any, Any, _T], *,
        debug: bool | None = ...) -> _T: ...
