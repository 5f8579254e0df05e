/* SPDX-License-Identifier: MIT */
/*
 * _speed.h - what the two halves of the binding's C hot path share:
 * _speed.c (call_soon, poll, the module) and _speed_handlers.c (timers
 * and fd handlers).  Every field is guarded by the GIL (see _speed.c).
 */
#ifndef AIOLOOP_PY_SPEED_H
#define AIOLOOP_PY_SPEED_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <aioloop/aioloop.h>

/* A callback scheduled with call_soon(). */
typedef struct {
    PyObject_HEAD
    PyObject *cb;   /* NULL once it ran or was cancelled */
    PyObject *args; /* a tuple while cb is set */
    PyObject *weakrefs;
} Handle;

/*
 * The C side of an aioloop.Loop (its base class).  loop is NULL until
 * _attach() and after _detach(): every method then raises RuntimeError.
 */
typedef struct {
    PyObject_HEAD
    aiol_loop *loop;
    aiol_bh *bh;            /* runs the call_soon FIFO */
    aiol_clock *clock;
    PyObject **ring;        /* the FIFO of Handles: ring[head..head+len) */
    size_t head, len, cap;  /* cap: 0 or a power of two */
    PyObject *errs;         /* list: exceptions for poll() to raise */
    PyObject *timers;       /* set: the armed TimerHandles */
    PyThreadState *blocked; /* saved between the block hooks */
    unsigned long owner;    /* PyThread_get_thread_ident() of the loop's */
    bool confined;          /* AIOL_LOOP_CONFINED: only owner changes it */
    int depth;              /* polls on the stack */
    int64_t batch_ns;       /* when the last run of the FIFO began, or
                               earlier if no timer was armed then */
    bool batch_left;        /* that run left callbacks queued */
    PyObject *dict;
    PyObject *weakrefs;
} Core;

/* A callback scheduled with call_later()/call_at(). */
typedef struct {
    Handle h;
    Core *core;        /* while armed (a strong reference), else NULL */
    aiol_timer *timer; /* while armed, else NULL */
    int64_t ns;        /* the deadline (CLOCK_MONOTONIC) */
    double when;
    bool after_queued; /* asyncio's order (timer_fire()) */
} TimerHandle;

/*
 * The Python side of one fd's handler; its address is the C handler's
 * opaque.  aioloop.Loop keeps it (in _fds) while it is registered.
 */
typedef struct {
    PyObject_HEAD
    PyObject *errs;   /* the loop's error list (not the loop: no cycle) */
    PyObject *reader; /* (callback, args) or None */
    PyObject *writer; /* (callback, args) or None */
    PyObject *poll;   /* busy-poll callable or None */
    int fd;
    PyObject *weakrefs;
} Fd;

/*
 * The scheduler of one asyncio EventLoop (_speed_asyncio.c): the loop's
 * Core, the EventLoop (for its exception handler and its reader removal),
 * its selector's fd -> SelectorKey table and the Core's fd -> Fd records
 * (aioloop.Loop._fds), which _speed_selector.c keeps in step.
 */
typedef struct {
    PyObject_HEAD
    Core *core;
    PyObject *evloop;    /* a weak reference (the EventLoop holds us) */
    PyObject *fd_to_key; /* dict: fd -> SelectorKey(fileobj, fd, events, (reader, writer)) */
    PyObject *fds;       /* dict: fd -> Fd, the Loop's registrations */
    PyObject *key_type;  /* selectors.SelectorKey */
    PyObject *io;        /* our bound _io(): every fd's handler */
    char closed;         /* set by _close(): nothing more runs */
    char debug;          /* the EventLoop's debug mode */
    char stopping;       /* the EventLoop's _stopping (a property on it) */
    PyObject *weakrefs;
} Sched;

extern PyTypeObject aiol__py_handle_type; /* aioloop.Handle */
extern PyTypeObject aiol__py_timer_type;  /* aioloop.TimerHandle */
extern PyTypeObject aiol__py_fd_type;     /* aioloop._speed.Fd */
extern PyTypeObject aiol__py_core_type;   /* aioloop._speed.Core */
extern PyTypeObject aiol__py_sched_type;  /* aioloop._speed.Sched */
extern PyTypeObject aiol__py_ahandle_type; /* aioloop._speed.AsyncHandle */

/** True for a slot holding something (not NULL, not None). */
static inline int aiol__py_is_set(PyObject *o)
{
    return o != NULL && o != Py_None;
}

/** An interned string to make at import: where it goes, its text. */
typedef struct {
    PyObject **str;
    const char *text;
} aiol__py_name;

/** Interns @p n names; 0, or -1 with MemoryError. */
int aiol__py_intern(const aiol__py_name *names, size_t n);
/** Raises OSError(err, what); returns NULL. */
PyObject *aiol__py_raise_errno(int err, const char *what);
/** Moves the exception being raised onto the list @p errs. */
void aiol__py_keep_error(PyObject *errs);
/** Calls cb(*args) (args a tuple); an exception goes onto @p errs. */
void aiol__py_run(PyObject *cb, PyObject *args, PyObject *errs);
/** 0, or -1 with TypeError when @p cb is not callable. */
int aiol__py_check_callable(PyObject *cb, const char *what);
/** 0, or -1 with RuntimeError when the loop is closed. */
int aiol__py_core_open(Core *c);
/** aiol__py_core_open(), and RuntimeError off the loop's thread. */
int aiol__py_core_owned(Core *c, const char *what);
/** A new tracked Handle (or subtype, zeroed); steals @p args. */
PyObject *aiol__py_handle_new(PyTypeObject *type, PyObject *cb,
                              PyObject *args);
int aiol__py_handle_traverse(Handle *h, visitproc visit, void *arg);
int aiol__py_handle_clear(Handle *h);

/**
 * One iteration of the loop (poll()'s body) until @p deadline (0: do not
 * block): 1 if it made progress, 0 if not, -1 with the exception a
 * callback raised (or KeyboardInterrupt from a wait a signal ended).
 * The loop's thread.
 */
int aiol__py_core_poll(Core *c, int64_t deadline);
/**
 * Runs the call_soon FIFO's current slice now, outside a poll (its
 * bottom half is then unscheduled if it emptied): 1 if it ran some, 0 if
 * it was empty, -1 with the exception a callback raised.
 */
int aiol__py_core_run_soon(Core *c);
/** Queues the Handle @p h on the call_soon FIFO (a new reference); 0 or -1. */
int aiol__py_core_push(Core *c, PyObject *h);

/* _speed_asyncio.c: the asyncio loop's scheduling and I/O dispatch. */
/** Readies Sched and AsyncHandle; 0 or -1. */
int aiol__py_asyncio_ready(void);
/** Runs an AsyncHandle from the FIFO, as asyncio's Handle._run(). */
void aiol__py_ahandle_run(Handle *h, PyObject *errs);

/* _speed_transport.c: the socket transport's write() and reader. */
extern PyTypeObject aiol__py_socket_io_type; /* aioloop._speed.SocketIO */
/** Readies SocketIO; 0 or -1. */
int aiol__py_transport_ready(void);

/* _speed_selector.c: the asyncio loop's selector table. */
/** Sched._fd_slot(fd, slot, on): sets or removes fd's reader or writer. */
PyObject *aiol__py_sched_fd_slot(Sched *s, PyObject *const *args,
                                 Py_ssize_t nargs);
/** Sched._io_set(fd, slot, handle[, fileobj]): see _speed_selector.c. */
PyObject *aiol__py_sched_io_set(Sched *s, PyObject *const *args,
                                Py_ssize_t nargs);

/* _speed_handlers.c: the Core methods for timers and fds. */
PyObject *aiol__py_call_at_ns(Core *c, PyObject *const *args,
                              Py_ssize_t nargs);
PyObject *aiol__py_fd_update(Core *c, PyObject *arg);
/** Disarms every armed timer (close()); -1 on MemoryError. */
int aiol__py_timers_drop_all(Core *c);

#endif /* AIOLOOP_PY_SPEED_H */
