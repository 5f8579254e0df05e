# SPDX-License-Identifier: MIT
"""aioloop: libaioloop from Python, with asyncio's vocabulary.

    import aioloop

    with aioloop.Loop() as loop:              # fdmon=None: the default
        loop.add_reader(sock, on_readable)    # fds or objects with fileno()
        loop.call_soon(print, "soon")         # a bottom half
        loop.call_later(0.5, print, "later")  # a timer
        while loop.poll():                    # one iteration, blocking
            ...

An exception raised in a callback ends the poll() that ran it, with its
traceback; the loop stays as it was (the handler stays registered unless
the callback removed it).  Bad input raises OSError (with the errno),
TypeError, ValueError or RuntimeError, never crashes the process.

Threads: a loop belongs to the thread that created it.  From any other
thread only call_soon_threadsafe() and notify() are allowed, and on a
Loop(threadsafe=True) also the reader/writer calls (as in libaioloop);
the rest raise RuntimeError.  A Loop is thread-confined unless made with
threadsafe=True (AIOL_LOOP_CONFINED: no lock on its own thread's calls).
The GIL is released while a poll blocks.
"""
import errno as _errno
import os as _os
import threading as _threading

from . import _ffi

ffi = _ffi.ffi
lib = _ffi.lib
if lib.aiol_py_speed_register() != 0:
    raise ImportError("aioloop: cannot set up aioloop._speed")
from . import _speed  # (the C hot path: _speed.c)

__all__ = ["Loop", "IOThread", "Handle", "TimerHandle", "FDMONS",
           "EventLoop", "EventLoopPolicy", "new_event_loop", "install", "run"]


def _fdmon_names():
    names = []
    while True:
        name = lib.aiol_fdmon_name_get(len(names))
        if name == ffi.NULL:
            return tuple(names)
        names.append(ffi.string(name).decode("ascii"))


#: The fd monitors the library has, in the order its default choice tries
#: them (aiol_fdmon_name_get(): io_uring only where built with liburing).
FDMONS = _fdmon_names()

#: The version of the libaioloop the binding runs on, "MAJOR.MINOR.PATCH"
#: (aiol_version_string(); the binding is built with the library).
__version__ = ffi.string(lib.aiol_version_string()).decode("ascii")

_NS = 1000000000

def _check(rc, what):
    """Raises OSError for a negative errno returned by a C call."""
    if rc < 0:
        raise OSError(-rc, "%s: %s" % (what, _os.strerror(-rc)))
    return rc


def _fileno(fd):
    """An int fd from an int or an object with fileno(), validated."""
    if not isinstance(fd, int):
        try:
            fd = fd.fileno()
        except AttributeError:
            raise TypeError("fd must be an int or have fileno(), not %r"
                            % type(fd).__name__) from None
        if not isinstance(fd, int):
            raise TypeError("fileno() returned %r, not an int" % (fd,))
    if fd < 0:
        raise OSError(_errno.EBADF, "invalid fd %d" % fd)
    _os.fstat(fd)  # OSError(EBADF) for an fd that is not open
    return fd


def _callable(cb, what):
    if not callable(cb):
        raise TypeError("%s must be callable, not %r" % (what, type(cb).__name__))


#: A callback scheduled with call_soon(): cancel() unschedules it.
Handle = _speed.Handle
#: A callback scheduled with call_later()/call_at(); when() is its time.
TimerHandle = _speed.TimerHandle


class Loop(_speed.Core):
    """A libaioloop loop: fd handlers, bottom halves, timers, nested polls.

    fdmon: "epoll", "io_uring", "poll" or None (AIOLOOP_FDMON, else the
    default).  threadsafe: other threads may add and remove readers and
    writers too; by default the loop is thread-confined (AIOL_LOOP_CONFINED)
    and only call_soon_threadsafe() and notify() come from elsewhere.  A
    context manager: leaving the block closes the loop.

    call_soon(), call_soon_threadsafe() and poll() are in C (_speed.c),
    as is the dispatch into every callback.
    """

    def __init__(self, fdmon=None, threadsafe=False):
        if fdmon is not None and not isinstance(fdmon, str):
            raise TypeError("fdmon must be a str or None")
        if not isinstance(threadsafe, bool):
            raise TypeError("threadsafe must be a bool")
        self._loop = None
        self._owner = _threading.get_ident()
        self._fds = {}          # fd -> _speed.Fd
        self._handles = set()   # armed TimerHandles (they own C timers)
        self._errs = []         # exceptions callbacks raised, for poll()
        try:
            self._start(fdmon, threadsafe)
        except BaseException:
            if self._loop is not None:
                lib.aiol_loop_free(self._loop)  # (nothing registered yet)
                self._loop = None
            raise

    def _start(self, fdmon, threadsafe):
        out = ffi.new("aiol_loop **")
        name = fdmon.encode() if fdmon is not None else ffi.NULL
        # (interruptible: a signal, Ctrl-C, ends a blocking poll's wait,
        # as it ends select(), and poll() runs Python's handler)
        flags = lib.AIOL_LOOP_INTERRUPTIBLE
        if not threadsafe:
            flags |= lib.AIOL_LOOP_CONFINED
        rc = lib.aiol_loop_new_flags(out, name, flags)
        if rc == -_errno.EINVAL and fdmon is not None:
            raise ValueError("unknown or unavailable fd monitor %r" % fdmon)
        _check(rc, "aiol_loop_new_flags(%r)" % (fdmon,))
        self._loop = out[0]
        # Immutable for the loop's life: kept here, so reading them (a
        # repr() in another thread's log line) never races close().
        self._fdmon = ffi.string(lib.aiol_loop_fdmon_get(self._loop)).decode()
        self._threadsafe = not lib.aiol_loop_is_confined(self._loop)
        # The C side: the call_soon FIFO's bottom half, the block hooks
        # that release the GIL.
        self._attach(int(ffi.cast("uintptr_t", self._loop)), self._errs,
                     self._handles)

    # ------------------------------------------------------------ basics

    @property
    def fdmon(self):
        """The fd monitor the loop runs on: "epoll", "io_uring" or "poll"."""
        self._open_check()
        return self._fdmon

    @property
    def closed(self):
        return self._loop is None

    @property
    def threadsafe(self):
        """True when other threads may change its readers and writers
        (Loop(threadsafe=True)); False for a thread-confined loop."""
        self._open_check()
        return self._threadsafe

    def close(self):
        """Removes every handler, cancels every callback, frees the loop."""
        if self._loop is None:
            return
        if self._depth:
            raise RuntimeError("close() from inside the loop's own poll")
        self._owner_check("close")
        for rec in list(self._fds.values()):
            rec.reader = rec.writer = rec.poll = None
            self._fd_update(rec)
        self._fds.clear()
        self._detach()  # (timers, call_soon()s)
        lib.aiol_loop_free(self._loop)
        self._loop = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        if getattr(self, "_loop", None) is not None and \
                _threading.get_ident() == self._owner and not self._depth:
            self.close()

    def _take(self):
        """Makes the calling thread the loop's, between polls (an asyncio
        loop runs on the thread that calls run_forever())."""
        self._own()
        self._owner = _threading.get_ident()

    def time(self):
        """The loop's clock (CLOCK_MONOTONIC) in seconds."""
        return lib.aiol_mono_time_get() / _NS

    def _open_check(self):
        if self._loop is None:
            raise RuntimeError("the loop is closed")

    def _owner_check(self, what):
        self._open_check()
        if _threading.get_ident() != self._owner:
            raise RuntimeError("%s from a thread other than the loop's "
                               "(use call_soon_threadsafe)" % what)

    # ------------------------------------------------- readers, writers

    def _fd_add(self, fd, slot, cb, args, poll=None):
        self._open_check()
        _callable(cb, "callback")
        if poll is not None:
            _callable(poll, "poll")
        fd = _fileno(fd)
        rec = self._fds.get(fd)
        new = rec is None
        if new:
            rec = _speed.Fd(fd, self._errs)
        old = (rec.reader, rec.writer, rec.poll)
        setattr(rec, slot, (cb, args))
        if poll is not None:
            rec.poll = poll
        try:
            if new:
                self._fds[fd] = rec
            self._fd_update(rec)
        except BaseException:
            rec.reader, rec.writer, rec.poll = old
            if new:
                del self._fds[fd]
            raise

    def _fd_remove(self, fd, slot):
        self._open_check()
        if not isinstance(fd, int):
            fd = _fileno(fd)
        rec = self._fds.get(fd)
        if rec is None or getattr(rec, slot) is None:
            return False
        setattr(rec, slot, None)
        if slot == "reader":
            rec.poll = None
        if not self._fd_update(rec):
            del self._fds[fd]
        return True

    def add_reader(self, fd, callback, *args, poll=None):
        """Calls callback(*args) while fd is readable (level-triggered).

        poll: optional busy-poll check, a callable returning True when
        there is work (see set_poll_params()); it then runs callback.
        Replaces any reader of fd.  The loop's thread, or any thread on
        a Loop(threadsafe=True).
        """
        self._fd_add(fd, "reader", callback, args, poll)

    def add_writer(self, fd, callback, *args):
        """Calls callback(*args) while fd is writable.  The loop's thread,
        or any thread on a Loop(threadsafe=True)."""
        self._fd_add(fd, "writer", callback, args)

    def remove_reader(self, fd):
        """Removes fd's reader; True if there was one.  It never runs
        again once this returns, even from inside a callback."""
        return self._fd_remove(fd, "reader")

    def remove_writer(self, fd):
        """Removes fd's writer; True if there was one."""
        return self._fd_remove(fd, "writer")

    # ----------------------------------------------------------- timers

    def call_later(self, delay, callback, *args):
        """Runs callback(*args) delay seconds from now.  TimerHandle."""
        return self.call_at(self.time() + delay, callback, *args)

    def call_at(self, when, callback, *args):
        """Runs callback(*args) at loop time when (seconds)."""
        return self._call_at(when, callback, args, False)

    def _call_at(self, when, callback, args, after_queued):
        # after_queued: an asyncio loop's timer, which runs after the
        # callbacks queued before it came due (_speed_handlers.c).
        self._owner_check("call_at")
        _callable(callback, "callback")
        if not isinstance(when, (int, float)) or when != when:
            raise TypeError("when must be a number of seconds")
        # (clamped before int(): float("inf") is a timer that never fires)
        ns = int(max(min(when * _NS, lib.AIOL_DEADLINE_NONE - 1), -2**62))
        return self._call_at_ns(ns, float(when), callback, args, after_queued)

    # --------------------------------------------------------- polling

    def run_until(self, predicate, timeout=None):
        """Polls until predicate() is true; False if timeout ran out."""
        _callable(predicate, "predicate")
        end = None if timeout is None else self.time() + timeout
        while not predicate():
            if end is None:
                self.poll()
            else:
                left = end - self.time()
                if left <= 0:
                    return bool(predicate())
                self.poll(timeout=left)
        return True

    def notify(self):
        """Wakes a blocked poll.  Any thread."""
        self._open_check()
        lib.aiol_loop_notify(self._loop)

    def set_poll_params(self, max_ns, grow=0, shrink=0):
        """Adaptive busy polling, as QEMU's poll-max-ns/-grow/-shrink
        (0: double, reset).  max_ns 0 turns it off."""
        self._owner_check("set_poll_params")
        rc = lib.aiol_loop_poll_params_set(self._loop, max_ns, grow, shrink)
        if rc == -_errno.EINVAL:
            raise ValueError("poll parameters must be >= 0")
        _check(rc, "aiol_loop_poll_params_set")

    def stats(self):
        """libaioloop's counters (aiol_loop_stats) as a dict."""
        self._open_check()
        st = ffi.new("aiol_loop_stats *")
        lib.aiol_loop_stats_get(self._loop, st)
        return {f: getattr(st, f) for f, _ in ffi.typeof(st[0]).fields}


class IOThread:
    """A Loop polled by a thread of its own until stop().

    Other threads hand it work with iothread.loop.call_soon_threadsafe(),
    add_reader()/add_writer() and notify(): its loop is a
    Loop(threadsafe=True) unless threadsafe=False asks for a thread-confined
    one (then only call_soon_threadsafe() and notify()).  An exception a
    callback raises on the thread is kept and raised again by stop().  A
    context manager: leaving the block stops the thread.
    """

    def __init__(self, fdmon=None, name="aioloop-iothread", threadsafe=True):
        self.loop = None
        self._error = None
        self._stopping = False
        self._started = _threading.Event()
        self._thread = _threading.Thread(target=self._run,
                                         args=(fdmon, threadsafe),
                                         name=name, daemon=True)
        self._thread.start()
        self._started.wait()
        if self.loop is None:
            self._thread.join()
            raise self._error

    def _run(self, fdmon, threadsafe):
        try:
            self.loop = Loop(fdmon, threadsafe=threadsafe)
        except BaseException as e:
            self._error = e
            self._started.set()
            return
        self._started.set()
        try:
            while not self._stopping:
                try:
                    self.loop.poll()
                except BaseException as e:
                    if self._error is None:
                        self._error = e
        finally:
            self.loop.close()

    def _stop_flag(self):
        self._stopping = True

    def stop(self):
        """Stops the thread after its current iteration and joins it; the
        loop is closed.  Raises the first exception a callback raised."""
        if self._thread.is_alive():
            if _threading.get_ident() == self._thread.ident:
                raise RuntimeError("an IOThread cannot stop itself")
            self.loop.call_soon_threadsafe(self._stop_flag)
            self._thread.join()
        err, self._error = self._error, None
        if err is not None:
            raise err

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


# asyncio on libaioloop (_asyncio.py), with uvloop's entry points.
from ._asyncio import (EventLoop, EventLoopPolicy, new_event_loop,  # noqa: E402
                       install, run)
