# SPDX-License-Identifier: MIT
"""asyncio on libaioloop: the event loop behind aioloop.new_event_loop().

EventLoop is asyncio's Unix selector loop (asyncio.SelectorEventLoop)
with its scheduling and its I/O readiness moved onto a libaioloop loop
(an aioloop.Loop):

- call_soon() and call_soon_threadsafe() queue on the Loop's call_soon
  FIFO, one libaioloop bottom half (_speed.c); a schedule from another
  thread wakes the poll through libaioloop's own notify, not a pipe;
- call_later() and call_at() arm libaioloop timers;
- add_reader()/add_writer(), and every transport, register libaioloop fd
  handlers: the selector asyncio's code registers with (_Selector) is a
  table whose every change is an aiol_fd_set(), and which is never
  selected on;
- run_forever() runs libaioloop's poll, one iteration per asyncio
  iteration, with the GIL released while it sleeps.

- a socket transport's write() and reader are C (SocketIO,
  _speed_transport.c) over asyncio's _SelectorSocketTransport.

What stays asyncio's own pure-Python code: the rest of the transports,
protocols (selector_events, unix_events), TLS (sslproto), streams, subprocesses
(and their child watcher where asyncio has one), signal handlers (the
self-pipe is the signal wakeup fd, its reader a libaioloop handler),
executors, getaddrinfo, futures and tasks (their C accelerator,
_asyncio, as with asyncio's own loop).
"""
import asyncio
import selectors
import sys
import threading
from asyncio import (base_events, events, format_helpers, futures,
                     selector_events, tasks, unix_events)
from asyncio.log import logger

from . import Loop, _speed

__all__ = ["EventLoop", "EventLoopPolicy", "new_event_loop", "install",
           "run"]

# What differs between the CPython versions we support (3.11 to 3.14):
# - 3.12 added tasks._swap_current_task(), and 3.14's C tasks keep the
#   current task per thread, no longer in tasks._current_tasks;
# - 3.14 deprecates asyncio.set_event_loop_policy(), the public name of
#   events._set_event_loop_policy(), which it adds.
if hasattr(tasks, "_swap_current_task"):
    _swap_current_task = tasks._swap_current_task
else:
    def _swap_current_task(loop, task):
        """Makes task (None: no task) loop's current one; the previous."""
        prev = tasks._current_tasks.pop(loop, None)
        if task is not None:
            tasks._current_tasks[loop] = task
        return prev
_set_policy = getattr(events, "_set_event_loop_policy",
                      asyncio.set_event_loop_policy)
# - 3.14's call_soon_threadsafe() returns a _ThreadSafeHandle, whose
#   cancel() from another thread waits for a callback already running:
#   there it is asyncio's Python path, its handles asyncio's.
_ThreadSafeHandle = getattr(events, "_ThreadSafeHandle", events.Handle)

_READ = selectors.EVENT_READ
_WRITE = selectors.EVENT_WRITE
_KEY = selectors.SelectorKey


class _Selector(selectors._BaseSelectorImpl):
    """The fd table of an EventLoop: asyncio's selector loop registers
    (reader Handle, writer Handle) pairs here, as with any selector, and
    each change of a registration's events sets or removes the fd's
    libaioloop handler.  Readiness runs the fd's Handle straight from the
    handler, in the iteration that saw it: the handler is the Sched's
    _io() (_speed_asyncio.c), which finds the Handle in this table.  The
    loop's own registrations change it in C (Sched._io_set(),
    _speed_selector.c); register() and the like serve the rest."""

    def __init__(self, aiol):
        super().__init__()
        self._aiol = aiol
        self._sched = None  # (set by the EventLoop)

    def _apply(self, fd, new, old):
        """Moves fd's libaioloop handlers from events old to new."""
        for slot, bit in ((0, _READ), (1, _WRITE)):
            if (new ^ old) & bit:
                self._sched._fd_slot(fd, slot, new & bit)

    def register(self, fileobj, events, data=None):
        key = super().register(fileobj, events, data)
        try:
            self._apply(key.fd, events, 0)
        except BaseException:
            super().unregister(fileobj)
            raise
        return key

    def unregister(self, fileobj):
        key = super().unregister(fileobj)
        if not self._aiol.closed:
            self._apply(key.fd, 0, key.events)
        return key

    def modify(self, fileobj, events, data=None):
        fd = self._fileobj_lookup(fileobj)
        key = self._fd_to_key.get(fd)
        if key is None:
            raise KeyError("{!r} is not registered".format(fileobj))
        if not events or events & ~(_READ | _WRITE):
            raise ValueError("Invalid events: {!r}".format(events))
        if events != key.events:
            self._apply(fd, events, key.events)
        key = key._replace(events=events, data=data)
        self._fd_to_key[fd] = key
        return key

    def select(self, timeout=None):
        raise RuntimeError("an aioloop EventLoop's selector is polled by "
                           "libaioloop, not selected on")

    def close(self):
        if not self._aiol.closed:
            for key in list(self._fd_to_key.values()):
                self._apply(key.fd, 0, key.events)
        super().close()


def _fileobj_fd(fileobj):
    """fileobj's fd, or None where the selector's own lookup must decide
    (no fileno(), a closed object, a bad fd: its errors, as asyncio's)."""
    try:
        return selectors._fileobj_to_fd(fileobj)
    except (AttributeError, TypeError, ValueError):
        return None


class _SocketTransport(_speed.SocketIO,
                       selector_events._SelectorSocketTransport):
    """asyncio's socket transport, whose write() and reader are SocketIO's
    (_speed_transport.c): a send() with the GIL held when nothing is
    buffered, and a Protocol's read straight into its bytes object; the
    rest, and every case those leave, is asyncio's."""

    _aiol_buffered = False
    _aiol_slow_write = selector_events._SelectorSocketTransport.write

    def set_protocol(self, protocol):
        super().set_protocol(protocol)
        self._aiol_buffered = isinstance(protocol, asyncio.BufferedProtocol)


class _TimerHandle(events.TimerHandle):
    """asyncio's TimerHandle, with the libaioloop timer that runs it (its
    repr, and so a slow callback's warning, names it as asyncio's)."""
    __slots__ = ("_aiol",)


_TimerHandle.__name__ = _TimerHandle.__qualname__ = "TimerHandle"


class EventLoop(unix_events.SelectorEventLoop):
    """An asyncio event loop on a libaioloop loop (see the module).

    fdmon: "epoll", "io_uring", "poll" or None (libaioloop's choice:
    AIOLOOP_FDMON, else AIOLOOP_BACKEND, else the default, as for
    aioloop.Loop and C callers).  loop: an aioloop.Loop to
    run on instead of a new one (not closed with this loop), so that raw
    handlers, bottom halves and coroutines share one loop.  reentrant:
    run_until_complete() may be called from inside a callback or a
    coroutine this loop runs (a nested poll, see run_until_complete()).
    """

    def __init__(self, fdmon=None, *, loop=None, reentrant=False):
        self._closed = True  # (until asyncio's __init__: for __del__)
        self._reentrant = bool(reentrant)
        if loop is None:
            loop = Loop(fdmon)
            own = True
        else:
            if not isinstance(loop, Loop):
                raise TypeError("loop must be an aioloop.Loop, not %r"
                                % type(loop).__name__)
            if fdmon is not None:
                raise ValueError("fdmon and loop exclude each other")
            loop._open_check()
            own = False
        self._aiol = loop
        self._aiol_own = own
        selector = _Selector(loop)
        # call_soon() and readiness in C (_speed_asyncio.c); see _fast_path()
        self._sched = selector._sched = _speed.Sched(
            loop, self, selector._fd_to_key, loop._fds, _KEY)
        try:
            super().__init__(selector)
        except BaseException:
            if own:
                loop.close()
            raise

    @property
    def aioloop(self):
        """The aioloop.Loop this event loop runs on."""
        return self._aiol

    def __repr__(self):
        return "<%s fdmon=%s running=%s closed=%s debug=%s>" % (
            self.__class__.__name__,
            self._aiol._fdmon,  # (no C call: any thread, even while closing)
            self.is_running(), self.is_closed(), self.get_debug())

    # ------------------------------------------------------ scheduling

    def _fast_path(self):
        """Out of debug mode call_soon() and call_soon_threadsafe() (but
        where asyncio has thread-safe handles) are the Sched's, in C
        (instance attributes over asyncio's methods); in
        debug mode, and once closed, asyncio's Python ones, with their
        checks, source tracebacks and slow-callback warnings.  (The Sched's
        methods, where a caller kept them, call asyncio's in debug mode.)"""
        sched = self.__dict__.get("_sched")
        if sched is None:
            return
        sched.debug = self._debug
        if self._debug or self._closed:
            self.__dict__.pop("call_soon", None)
            self.__dict__.pop("call_soon_threadsafe", None)
        else:
            self.call_soon = sched.call_soon
            if _ThreadSafeHandle is events.Handle:
                self.call_soon_threadsafe = sched.call_soon_threadsafe

    def set_debug(self, enabled):
        super().set_debug(enabled)
        self._fast_path()

    def _aiol_handle_error(self, handle, exc):
        """An exception a C-run handle's callback raised (not SystemExit
        or KeyboardInterrupt): to the exception handler, as asyncio's
        Handle._run() reports it."""
        cb = asyncio.format_helpers._format_callback_source(
            handle._callback, handle._args)
        self.call_exception_handler({
            "message": "Exception in callback %s" % cb,
            "exception": exc,
            "handle": handle,
        })

    def time(self):
        return self._aiol.time()

    def _run_handle(self, handle):
        """Runs an asyncio Handle from a libaioloop callback.

        Like asyncio's _run_once() it lets go of the handle before it
        returns: a task's exception keeps its traceback, whose frames keep
        their callers' frames, this one among them; holding the handle
        here would keep the task alive in a cycle, and "exception never
        retrieved" would wait for the garbage collector."""
        if handle._cancelled or self._closed:
            return
        if not self._debug:
            handle._run()
            handle = None
            return
        try:
            self._current_handle = handle
            t0 = self.time()
            handle._run()
            dt = self.time() - t0
            if dt >= self.slow_callback_duration:
                logger.warning("Executing %s took %.3f seconds",
                               asyncio.base_events._format_handle(handle), dt)
        finally:
            self._current_handle = None
            handle = None

    def _call_soon(self, callback, args, context, kind=events.Handle):
        handle = kind(callback, args, self, context)
        if handle._source_traceback:
            del handle._source_traceback[-1]
        # (the FIFO's bottom half; any thread may schedule it)
        self._aiol.call_soon_threadsafe(self._run_handle, handle)
        return handle

    def call_soon_threadsafe(self, callback, *args, context=None):
        self._check_closed()
        if self._debug:
            self._check_callback(callback, "call_soon_threadsafe")
        handle = self._call_soon(callback, args, context, _ThreadSafeHandle)
        if handle._source_traceback:
            # (the caller's stack: how many frames of ours and asyncio's
            # the handle's __init__ saw depends on the handle's class)
            handle._source_traceback = format_helpers.extract_stack(
                sys._getframe(1))
        return handle

    def _add_callback(self, handle):
        # (signal handlers, from the self-pipe's reader)
        if not handle._cancelled:
            self._aiol.call_soon_threadsafe(self._run_handle, handle)

    def _write_to_self(self):
        aiol = self._aiol
        if not aiol.closed:
            aiol.notify()

    def call_at(self, when, callback, *args, context=None):
        if when is None:
            raise TypeError("when cannot be None")
        self._check_closed()
        if self._debug:
            self._check_thread()
            self._check_callback(callback, "call_at")
        timer = _TimerHandle(when, callback, args, self, context)
        if timer._source_traceback:
            del timer._source_traceback[-1]
        aiol = self._aiol
        if self._thread_id is None and aiol._owner != threading.get_ident():
            aiol._take()  # (not running: any one thread may arm timers)
        try:
            timer._aiol = aiol._call_at(when, self._run_timer, (timer,), True)
        except RuntimeError:
            # From another thread while the loop runs: refused, as asyncio's
            # debug mode refuses it, in its words.
            self._check_thread()
            raise
        timer._scheduled = True
        return timer

    def _run_timer(self, timer):
        timer._scheduled = False
        timer._aiol = None
        self._run_handle(timer)
        timer = None  # (see _run_handle())

    def _timer_handle_cancelled(self, handle):
        if handle._scheduled:
            handle._scheduled = False
            h, handle._aiol = handle._aiol, None
            try:
                h.cancel()
            except RuntimeError:
                pass  # (from another thread: it fires and is skipped)

    def _make_socket_transport(self, sock, protocol, waiter=None, *,
                               extra=None, server=None):
        return _SocketTransport(self, sock, protocol, waiter, extra, server)

    # ------------------------------------------------- readers, writers
    # (asyncio's, for an int fd without the selector's generic steps: every
    # transport and sock_*() call registers and unregisters through these)

    def _add_reader(self, fd, callback, *args):
        return self._io_add(fd, 0, callback, args)

    def _add_writer(self, fd, callback, *args):
        return self._io_add(fd, 1, callback, args)

    def _remove_reader(self, fd):
        return self._io_remove(fd, 0)

    def _remove_writer(self, fd):
        return self._io_remove(fd, 1)

    def _io_add(self, fileobj, slot, callback, args):
        # (a socket or another file object: registered by its fd, the key
        # keeping the object, as the selector's register() would)
        fd = fileobj if type(fileobj) is int else _fileobj_fd(fileobj)
        if fd is None:
            add = super()._add_reader if slot == 0 else super()._add_writer
            return add(fileobj, callback, *args)
        self._check_closed()
        if self._debug:
            handle = events.Handle(callback, args, self, None)
        else:
            handle = self._sched._handle(callback, args)  # (C: _io() runs it)
        old = self._sched._io_set(fd, slot, handle, fileobj)
        if old is not None:
            old.cancel()
        return handle

    def _io_remove(self, fd, slot):
        if type(fd) is not int:
            remove = super()._remove_reader if slot == 0 \
                else super()._remove_writer
            return remove(fd)
        if self.is_closed():
            return False
        old = self._sched._io_set(fd, slot, None)
        if old is None:
            return False
        old.cancel()
        return True

    # ------------------------------------------------------ sock_*()

    async def sock_recv(self, sock, n):
        """asyncio's sock_recv(); a wait's reader goes when the call ends
        (no done callback on the future, no second callback to run)."""
        if self._debug:
            return await super().sock_recv(sock, n)
        base_events._check_ssl_socket(sock)
        try:
            return sock.recv(n)
        except (BlockingIOError, InterruptedError):
            pass
        return await self._sock_wait(sock, self._sock_recv, n)

    async def sock_recv_into(self, sock, buf):
        """asyncio's sock_recv_into(), its wait as sock_recv()'s."""
        if self._debug:
            return await super().sock_recv_into(sock, buf)
        base_events._check_ssl_socket(sock)
        try:
            return sock.recv_into(buf)
        except (BlockingIOError, InterruptedError):
            pass
        return await self._sock_wait(sock, self._sock_recv_into, buf)

    async def _sock_wait(self, sock, reader, arg):
        """Runs reader(fut, sock, arg) at each readiness of sock until it
        resolves fut, and returns fut's result; the reader goes when this
        returns, raises or is cancelled."""
        fd = sock.fileno()
        self._ensure_fd_no_transport(fd)
        fut = self.create_future()
        handle = self._add_reader(fd, reader, fut, sock, arg)
        try:
            return await fut
        finally:
            if not handle.cancelled():  # (else someone replaced it)
                self._remove_reader(fd)

    # --------------------------------------------------------- running

    def run_forever(self):
        self._check_closed()
        self._check_running()
        self._aiol._take()
        self._run_in_c = True
        try:
            super().run_forever()
        finally:
            self._run_in_c = False

    _run_in_c = False

    # (asyncio's flag, kept in the Sched so that _run() reads it in C)
    @property
    def _stopping(self):
        return self._sched.stopping

    @_stopping.setter
    def _stopping(self, value):
        self._sched.stopping = bool(value)

    def _run_once(self):
        # From asyncio's run_forever(), which checks _stopping after each
        # call, the iterations until stop() go in C (Sched._run: the same
        # loop without a Python frame per iteration); else one iteration.
        if self._run_in_c:
            self._sched._run()
        else:
            self._poll_once()

    def _poll_once(self):
        self._aiol.poll(not self._stopping)

    def run_until_complete(self, future):
        """asyncio's, and on a reentrant loop also from inside a callback
        or a coroutine of its own: the call then polls the loop in place
        (libaioloop's nested poll) until future is done, running every
        other callback, timer, reader and task meanwhile, and returns its
        result or raises its exception.  The task that called it stays
        suspended in the call, not cancelled by what runs meanwhile: a
        cancel() of it lands at its next await.  stop() during the
        nested run ends it with RuntimeError, as the outer run."""
        if not (self._reentrant and self._thread_id is not None and
                self._thread_id == threading.get_ident()):
            return super().run_until_complete(future)
        self._check_closed()
        new_task = not futures.isfuture(future)
        future = tasks.ensure_future(future, loop=self)
        if new_task:
            future._log_destroy_pending = False
        # The task running now (if any) is not the current one while
        # others run in the nested poll; it is again once they stop.
        current = _swap_current_task(self, None)
        try:
            while not future.done() and not self._stopping:
                self._poll_once()
        except BaseException:
            if new_task and future.done() and not future.cancelled():
                future.exception()
            raise
        finally:
            if current is not None:
                _swap_current_task(self, current)
        if not future.done():
            raise RuntimeError("Event loop stopped before Future completed.")
        return future.result()

    def _process_events(self, event_list):
        raise AssertionError("libaioloop runs readiness callbacks itself")

    def close(self):
        if self.is_running():
            raise RuntimeError("Cannot close a running event loop")
        if self._closed:
            return
        super().close()
        self._sched._close()
        self._fast_path()
        if self._aiol_own:
            self._aiol.close()


class EventLoopPolicy(unix_events._UnixDefaultEventLoopPolicy):
    """asyncio's default policy, whose loops are aioloop EventLoops.
    (asyncio deprecates policies from 3.14 and drops them in 3.16:
    asyncio.run(main, loop_factory=aioloop.new_event_loop) and
    asyncio.Runner(loop_factory=...) need none.)"""

    def _loop_factory(self):
        return EventLoop()


def new_event_loop(fdmon=None, *, loop=None, reentrant=False):
    """A new asyncio event loop on libaioloop (an EventLoop, which see)."""
    return EventLoop(fdmon, loop=loop, reentrant=reentrant)


def install():
    """Makes EventLoopPolicy asyncio's policy: asyncio.new_event_loop()
    and asyncio.run() then run on libaioloop.  For Python 3.11 to 3.15,
    where asyncio has policies; the way that lasts is a loop factory:
    asyncio.run(main, loop_factory=aioloop.new_event_loop) or
    asyncio.Runner(loop_factory=aioloop.new_event_loop).  (No deprecation
    warning on 3.14 and 3.15: this is the supported way to install a
    policy there.)"""
    _set_policy(EventLoopPolicy())


def run(main, *, debug=None):
    """asyncio.run(main, debug=debug) on a new aioloop EventLoop."""
    with asyncio.Runner(loop_factory=new_event_loop, debug=debug) as runner:
        return runner.run(main)
