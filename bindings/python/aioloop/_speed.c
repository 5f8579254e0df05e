/* SPDX-License-Identifier: MIT */
/*
 * _speed.c - the Python binding's hot path, in C: the call_soon FIFO,
 * dispatch into Python callbacks, timers and poll().
 *
 * Why C.  Through cffi alone every callback pays for a cffi trampoline
 * (an extern "Python" function: argument conversion and a GIL round
 * trip) and every poll() for a Python prologue plus a second GIL round
 * trip; uvloop pays for neither.  Here the GIL is held for the whole of
 * an iteration and released only while the loop sleeps, through
 * aiol_loop_block_hooks_set(), and the callbacks are called with the
 * vectorcall protocol.  cffi still carries the rest of the API
 * (__init__.py).
 *
 * This file, with _speed_handlers.c (timers and fd handlers), is compiled
 * into the cffi extension aioloop._ffi (one copy of libaioloop per
 * process) and registers the module aioloop._speed when
 * aiol_py_speed_register() is called (_build_ffi.py declares it).
 *
 * Threads and the GIL.  Every field below is guarded by the GIL.  The
 * polling thread holds it through dispatch, so the C callbacks here run
 * with it held; it gives it up only between the block hooks, where no
 * callback runs.  A thread other than the loop's releases the GIL around
 * the fd calls (which take the loop's lock): holding it there could
 * deadlock against a poller that waits for the GIL in its after-hook.
 *
 * Exceptions a callback raises are appended to the loop's error list
 * (errs), and the poll() that ran the callback raises the first of them.
 */
#include "_speed.h"

#include <structmember.h>

#include <errno.h>
#include <string.h>
#include <unistd.h>

int aiol_py_speed_register(void);

/* ------------------------------------------------------------ helpers */

PyObject *aiol__py_raise_errno(int err, const char *what)
{
    PyObject *args = Py_BuildValue("(is)", err, what);

    if (args != NULL) {
        PyErr_SetObject(PyExc_OSError, args); /* (OSError picks the subclass) */
        Py_DECREF(args);
    }
    return NULL;
}

/* Moves the exception being raised onto @p errs, traceback and all. */
void aiol__py_keep_error(PyObject *errs)
{
    PyObject *type, *value, *tb;

    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    if (tb != NULL && value != NULL) {
        PyException_SetTraceback(value, tb);
    }
    if (value == NULL || PyList_Append(errs, value) < 0) {
        PyErr_WriteUnraisable(errs);
    }
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
}

/* Calls cb(*args), args a tuple; an exception goes onto @p errs. */
void aiol__py_run(PyObject *cb, PyObject *args, PyObject *errs)
{
    PyObject *res = PyObject_Vectorcall(cb, &PyTuple_GET_ITEM(args, 0),
                                        (size_t)PyTuple_GET_SIZE(args), NULL);

    if (res == NULL) {
        aiol__py_keep_error(errs);
    } else {
        Py_DECREF(res);
    }
}

/* args[1:] as a tuple (the callback's arguments). */
static PyObject *tail_tuple(PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *t = PyTuple_New(nargs - 1);

    if (t == NULL) {
        return NULL;
    }
    for (Py_ssize_t i = 1; i < nargs; i++) {
        Py_INCREF(args[i]);
        PyTuple_SET_ITEM(t, i - 1, args[i]);
    }
    return t;
}

int aiol__py_check_callable(PyObject *cb, const char *what)
{
    if (!PyCallable_Check(cb)) {
        PyErr_Format(PyExc_TypeError, "%s must be callable, not %.100s", what,
                     Py_TYPE(cb)->tp_name);
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------- Handle */



PyObject *aiol__py_handle_new(PyTypeObject *type, PyObject *cb, PyObject *args)
{
    Handle *h = PyObject_GC_New(Handle, type);

    if (h == NULL) {
        return NULL;
    }
    if (type->tp_basicsize > (Py_ssize_t)sizeof(Handle)) {
        memset(h + 1, 0, (size_t)type->tp_basicsize - sizeof(Handle));
    }
    Py_INCREF(cb);
    h->cb = cb;
    h->args = args; /* (the reference the caller made) */
    h->weakrefs = NULL;
    PyObject_GC_Track(h);
    return (PyObject *)h;
}

int aiol__py_handle_traverse(Handle *h, visitproc visit, void *arg)
{
    Py_VISIT(h->cb);
    Py_VISIT(h->args);
    return 0;
}

int aiol__py_handle_clear(Handle *h)
{
    Py_CLEAR(h->cb);
    Py_CLEAR(h->args);
    return 0;
}

static void handle_dealloc(Handle *h)
{
    PyObject_GC_UnTrack(h);
    if (h->weakrefs != NULL) {
        PyObject_ClearWeakRefs((PyObject *)h);
    }
    aiol__py_handle_clear(h);
    Py_TYPE(h)->tp_free((PyObject *)h);
}

static PyObject *handle_cancel(Handle *h, PyObject *unused)
{
    (void)unused;
    aiol__py_handle_clear(h);
    Py_RETURN_NONE;
}

static PyObject *handle_cancelled(Handle *h, PyObject *unused)
{
    (void)unused;
    return PyBool_FromLong(h->cb == NULL);
}

static PyMethodDef handle_methods[] = {
    {"cancel", (PyCFunction)handle_cancel, METH_NOARGS,
     "Unschedules the callback if it has not run.  Any thread."},
    {"cancelled", (PyCFunction)handle_cancelled, METH_NOARGS,
     "True once cancel() ran or the callback ran."},
    {NULL, NULL, 0, NULL},
};

PyTypeObject aiol__py_handle_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "aioloop.Handle",
    .tp_doc = "A callback scheduled with call_soon(): cancel() unschedules it.",
    .tp_basicsize = sizeof(Handle),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_BASETYPE,
    .tp_traverse = (traverseproc)aiol__py_handle_traverse,
    .tp_clear = (inquiry)aiol__py_handle_clear,
    .tp_dealloc = (destructor)handle_dealloc,
    .tp_weaklistoffset = offsetof(Handle, weakrefs),
    .tp_methods = handle_methods,
};

/* --------------------------------------------------------------- Core */



int aiol__py_core_open(Core *c)
{
    if (c->loop == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "the loop is closed");
        return -1;
    }
    return 0;
}

int aiol__py_core_owned(Core *c, const char *what)
{
    if (aiol__py_core_open(c) < 0) {
        return -1;
    }
    if (PyThread_get_thread_ident() != c->owner) {
        PyErr_Format(PyExc_RuntimeError, "%s from a thread other than the "
                     "loop's (use call_soon_threadsafe)", what);
        return -1;
    }
    return 0;
}

/* The bottom half: runs the callbacks queued when it started. */
static void core_bh(void *opaque)
{
    Core *c = opaque;
    size_t n = c->len;

    /*
     * (timer_fire() compares armed timers' deadlines with it; a timer armed
     * during the batch is due after it began whatever this holds, so the
     * clock is read only while timers are armed)
     */
    if (c->timers != NULL && PySet_GET_SIZE(c->timers) > 0) {
        c->batch_ns = aiol_mono_time_get();
    }
    if (n > 1) {
        /* A nested poll in one of these callbacks goes on with the batch. */
        aiol_bh_schedule(c->bh);
    }
    while (n > 0 && c->len > 0) {
        Handle *h = (Handle *)c->ring[c->head];
        PyObject *cb = h->cb;

        n--;
        c->ring[c->head] = NULL;
        c->head = (c->head + 1) & (c->cap - 1);
        c->len--;
        if (cb != NULL && Py_IS_TYPE(h, &aiol__py_ahandle_type)) {
            aiol__py_ahandle_run(h, c->errs); /* (an asyncio loop's) */
        } else if (cb != NULL) {
            PyObject *args = h->args;

            h->cb = h->args = NULL;
            aiol__py_run(cb, args, c->errs); /* (the rest still runs) */
            Py_DECREF(cb);
            Py_DECREF(args);
        }
        Py_DECREF(h);
    }
    c->batch_left = c->len > 0;
    if (c->len > 0) {
        aiol_bh_schedule(c->bh); /* queued meanwhile: next iteration */
    } else {
        aiol_bh_cancel(c->bh);
    }
}

static int ring_push(Core *c, PyObject *h)
{
    if (c->len == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 64;
        PyObject **ring = PyMem_New(PyObject *, cap);

        if (ring == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        for (size_t i = 0; i < c->len; i++) {
            ring[i] = c->ring[(c->head + i) & (c->cap - 1)];
        }
        PyMem_Free(c->ring);
        c->ring = ring;
        c->cap = cap;
        c->head = 0;
    }
    c->ring[(c->head + c->len) & (c->cap - 1)] = h;
    c->len++;
    return 0;
}

static PyObject *core_schedule(Core *c, PyObject *const *args,
                               Py_ssize_t nargs)
{
    PyObject *tail, *h;

    if (nargs < 1) {
        PyErr_SetString(PyExc_TypeError, "a callback is required");
        return NULL;
    }
    if (aiol__py_check_callable(args[0], "callback") < 0 ||
        (tail = tail_tuple(args, nargs)) == NULL) {
        return NULL;
    }
    h = aiol__py_handle_new(&aiol__py_handle_type, args[0], tail);
    if (h == NULL) {
        Py_DECREF(tail);
        return NULL;
    }
    if (aiol__py_core_push(c, h) < 0) {
        Py_DECREF(h);
        return NULL;
    }
    return h;
}

int aiol__py_core_push(Core *c, PyObject *h)
{
    if (ring_push(c, h) < 0) {
        return -1;
    }
    Py_INCREF(h);
    if (c->len == 1) {
        aiol_bh_schedule(c->bh); /* (lock-free; dedups; wakes a poller) */
    }
    return 0;
}

static PyObject *core_call_soon(Core *c, PyObject *const *args,
                                Py_ssize_t nargs)
{
    if (aiol__py_core_owned(c, "call_soon") < 0) {
        return NULL;
    }
    return core_schedule(c, args, nargs);
}

static PyObject *core_call_soon_threadsafe(Core *c, PyObject *const *args,
                                           Py_ssize_t nargs)
{
    if (aiol__py_core_open(c) < 0) {
        return NULL;
    }
    return core_schedule(c, args, nargs);
}

/*
 * The GIL is given up while the loop sleeps.  A signal (Ctrl-C) during
 * that sleep ends the wait, as it ends select() (the loop is made
 * AIOL_LOOP_INTERRUPTIBLE, __init__.py), and the poll runs Python's
 * handlers before it returns (core_poll_owned()).
 */
static void core_before_block(void *opaque)
{
    Core *c = opaque;

    c->blocked = PyEval_SaveThread();
}

static void core_after_block(void *opaque)
{
    Core *c = opaque;
    PyThreadState *ts = c->blocked;

    c->blocked = NULL;
    PyEval_RestoreThread(ts);
}

static PyObject *str_blocking, *str_timeout;

static int poll_args(PyObject *const *args, Py_ssize_t nargs,
                     PyObject *kwnames, PyObject **blocking,
                     PyObject **timeout)
{
    Py_ssize_t nkw = kwnames != NULL ? PyTuple_GET_SIZE(kwnames) : 0;

    if (nargs > 2) {
        PyErr_SetString(PyExc_TypeError,
                        "poll() takes at most 2 arguments (blocking, timeout)");
        return -1;
    }
    *blocking = nargs > 0 ? args[0] : NULL;
    *timeout = nargs > 1 ? args[1] : NULL;
    for (Py_ssize_t i = 0; i < nkw; i++) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, i);
        PyObject **slot;

        if (name == str_blocking ||
            PyUnicode_Compare(name, str_blocking) == 0) {
            slot = blocking;
        } else if (name == str_timeout ||
                   PyUnicode_Compare(name, str_timeout) == 0) {
            slot = timeout;
        } else {
            PyErr_Format(PyExc_TypeError,
                         "poll() got an unexpected keyword argument '%U'", name);
            return -1;
        }
        if (*slot != NULL) {
            PyErr_Format(PyExc_TypeError, "poll() got multiple values for "
                         "argument '%U'", name);
            return -1;
        }
        *slot = args[nargs + i];
    }
    return 0;
}

/* The deadline of poll(blocking, timeout), or -1 with an exception set. */
static int64_t poll_deadline(PyObject *blocking, PyObject *timeout)
{
    int b = blocking == NULL ? 1 : PyObject_IsTrue(blocking);
    double t;

    if (b <= 0) {
        return b; /* 0: non-blocking; -1: the exception */
    }
    if (timeout == NULL || timeout == Py_None) {
        return AIOL_DEADLINE_NONE;
    }
    t = PyFloat_AsDouble(timeout);
    if (t == -1.0 && PyErr_Occurred()) {
        return -1;
    }
    if (t != t) {
        PyErr_SetString(PyExc_ValueError, "timeout is NaN");
        return -1;
    }
    t = t > 0 ? t * 1e9 : 0;
    if (t >= (double)(AIOL_DEADLINE_NONE / 2)) {
        return AIOL_DEADLINE_NONE - 1;
    }
    return aiol_mono_time_get() + (int64_t)t;
}

/*
 * After a run of callbacks: raises the first exception they kept on errs
 * (dropping the rest) and returns -1, or returns 0 if they raised none.
 */
static int raise_kept_error(Core *c)
{
    PyObject *e;

    if (PyList_GET_SIZE(c->errs) == 0) {
        return 0;
    }
    e = Py_NewRef(PyList_GET_ITEM(c->errs, 0));
    if (PyList_SetSlice(c->errs, 0, PyList_GET_SIZE(c->errs), NULL) < 0) {
        Py_DECREF(e);
        return -1;
    }
    Py_INCREF(Py_TYPE(e));
    PyErr_Restore((PyObject *)Py_TYPE(e), e, PyException_GetTraceback(e));
    return -1;
}

/* aiol__py_core_poll() once the caller checked the loop and the thread. */
static int core_poll_owned(Core *c, int64_t deadline)
{
    bool progress;
    int rc;

    Py_INCREF(c);
    c->depth++;
    progress = aiol_loop_poll_deadline(c->loop, deadline);
    c->depth--;
    rc = raise_kept_error(c);
    Py_DECREF(c);
    if (rc < 0 || (deadline != 0 && PyErr_CheckSignals() < 0)) {
        return -1; /* (or Ctrl-C during the wait: KeyboardInterrupt) */
    }
    return progress;
}

int aiol__py_core_poll(Core *c, int64_t deadline)
{
    if ((c->loop == NULL || PyThread_get_thread_ident() != c->owner) &&
        aiol__py_core_owned(c, "poll") < 0) {
        return -1;
    }
    return core_poll_owned(c, deadline);
}

int aiol__py_core_run_soon(Core *c)
{
    int rc;

    if (c->len == 0) {
        return 0;
    }
    Py_INCREF(c);
    c->depth++; /* (as in a poll: close() from a callback is refused) */
    core_bh(c);
    c->depth--;
    rc = raise_kept_error(c);
    Py_DECREF(c);
    return rc < 0 ? -1 : 1;
}

static PyObject *core_poll(Core *c, PyObject *const *args, Py_ssize_t nargs,
                           PyObject *kwnames)
{
    PyObject *blocking, *timeout;
    int64_t deadline;
    int progress;

    if ((c->loop == NULL || PyThread_get_thread_ident() != c->owner) &&
        aiol__py_core_owned(c, "poll") < 0) {
        return NULL;
    }
    if (poll_args(args, nargs, kwnames, &blocking, &timeout) < 0) {
        return NULL;
    }
    deadline = poll_deadline(blocking, timeout);
    if (deadline < 0) {
        return NULL;
    }
    progress = core_poll_owned(c, deadline);
    return progress < 0 ? NULL : PyBool_FromLong(progress);
}


/* ---------------------------------------------------- attach, detach */

static PyObject *core_attach(Core *c, PyObject *args)
{
    unsigned long long addr;
    PyObject *errs, *timers;
    int rc;
    aiol_loop *loop;

    if (!PyArg_ParseTuple(args, "KO!O!:_attach", &addr, &PyList_Type,
                          &errs, &PySet_Type, &timers)) {
        return NULL;
    }
    if (c->loop != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "already attached");
        return NULL;
    }
    loop = (aiol_loop *)(uintptr_t)addr;
    /* (thread-safe: call_soon_threadsafe() schedules it from anywhere) */
    rc = aiol_bh_new_shared(loop, core_bh, c, &c->bh);
    if (rc < 0) {
        return aiol__py_raise_errno(-rc, "aiol_bh_new_shared");
    }
    aiol_loop_block_hooks_set(loop, core_before_block, core_after_block, c);
    c->loop = loop;
    c->clock = aiol_loop_clock_get(loop);
    c->owner = PyThread_get_thread_ident();
    c->confined = aiol_loop_is_confined(loop);
    Py_INCREF(errs);
    Py_XSETREF(c->errs, errs);
    Py_INCREF(timers);
    Py_XSETREF(c->timers, timers);
    Py_RETURN_NONE;
}

/* Drops the FIFO's Handles (their callbacks never run). */
static void ring_clear(Core *c)
{
    while (c->len > 0) {
        PyObject *h = c->ring[c->head];

        c->ring[c->head] = NULL;
        c->head = (c->head + 1) & (c->cap - 1);
        c->len--;
        Py_DECREF(h); /* (may run code that schedules more: the loop goes on) */
    }
}

static PyObject *core_detach(Core *c, PyObject *unused)
{
    (void)unused;
    if (aiol__py_core_owned(c, "close") < 0) {
        return NULL;
    }
    if (c->depth > 0) {
        PyErr_SetString(PyExc_RuntimeError,
                        "close() from inside the loop's own poll");
        return NULL;
    }
    if (aiol__py_timers_drop_all(c) < 0) {
        return NULL;
    }
    ring_clear(c);
    aiol_bh_free(c->bh);
    c->bh = NULL;
    aiol_loop_block_hooks_set(c->loop, NULL, NULL, NULL);
    c->loop = NULL;
    c->clock = NULL;
    Py_RETURN_NONE;
}

/* Makes the calling thread the loop's; refused while another polls it. */
static PyObject *core_own(Core *c, PyObject *unused)
{
    unsigned long me = PyThread_get_thread_ident();

    (void)unused;
    if (aiol__py_core_open(c) < 0) {
        return NULL;
    }
    if (c->owner != me && c->depth > 0) {
        PyErr_SetString(PyExc_RuntimeError,
                        "the loop is polling on another thread");
        return NULL;
    }
    if (c->owner != me && c->confined) {
        aiol_loop_owner_set(c->loop); /* (the GIL orders the handover) */
    }
    c->owner = me;
    Py_RETURN_NONE;
}

static PyObject *core_get_depth(Core *c, void *closure)
{
    (void)closure;
    return PyLong_FromLong(c->depth);
}

static int core_traverse(Core *c, visitproc visit, void *arg)
{
    for (size_t i = 0; i < c->len; i++) {
        Py_VISIT(c->ring[(c->head + i) & (c->cap - 1)]);
    }
    Py_VISIT(c->errs);
    Py_VISIT(c->timers);
    Py_VISIT(c->dict);
    return 0;
}

static int core_clear(Core *c)
{
    /*
     * Only a loop nobody can reach any more is cleared; if it was not
     * closed (it died on another thread or inside its own poll) its C
     * side cannot be freed safely here and is left as it is.
     */
    if (c->loop != NULL && c->depth == 0 &&
        PyThread_get_thread_ident() == c->owner) {
        aiol__py_timers_drop_all(c);
        PyErr_Clear();
    }
    ring_clear(c);
    Py_CLEAR(c->errs);
    Py_CLEAR(c->timers);
    Py_CLEAR(c->dict);
    return 0;
}

static void core_dealloc(Core *c)
{
    PyObject_GC_UnTrack(c);
    if (c->weakrefs != NULL) {
        PyObject_ClearWeakRefs((PyObject *)c);
    }
    core_clear(c);
    PyMem_Free(c->ring);
    Py_TYPE(c)->tp_free((PyObject *)c);
}

static PyObject *core_tp_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    Core *c = (Core *)type->tp_alloc(type, 0);

    (void)args;
    (void)kw;
    return (PyObject *)c;
}

static PyMethodDef core_methods[] = {
    {"call_soon", (PyCFunction)(void (*)(void))core_call_soon, METH_FASTCALL,
     "call_soon(callback, *args) -> Handle\n\nRuns callback(*args) in the "
     "next iteration, FIFO with other call_soon()s (one bottom half).  The "
     "loop's thread."},
    {"call_soon_threadsafe",
     (PyCFunction)(void (*)(void))core_call_soon_threadsafe, METH_FASTCALL,
     "call_soon_threadsafe(callback, *args) -> Handle\n\ncall_soon() from "
     "any thread: wakes a blocked poll."},
    {"poll", (PyCFunction)(void (*)(void))core_poll,
     METH_FASTCALL | METH_KEYWORDS,
     "poll(blocking=True, timeout=None) -> bool\n\nOne iteration; True when "
     "some callback made progress.  blocking: sleep until there is work (or "
     "timeout seconds pass).  May be called from inside a callback (a nested "
     "poll).  Raises the first exception a callback raised during it.  The "
     "GIL is released while it sleeps."},
    {"_attach", (PyCFunction)core_attach, METH_VARARGS, NULL},
    {"_detach", (PyCFunction)core_detach, METH_NOARGS, NULL},
    {"_own", (PyCFunction)core_own, METH_NOARGS,
     "_own()\n\nMakes the calling thread the loop's (between polls)."},
    {"_call_at_ns", (PyCFunction)(void (*)(void))aiol__py_call_at_ns,
     METH_FASTCALL, NULL},
    {"_fd_update", (PyCFunction)aiol__py_fd_update, METH_O, NULL},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef core_getset[] = {
    {"_depth", (getter)core_get_depth, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject aiol__py_core_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "aioloop._speed.Core",
    .tp_doc = "The C side of aioloop.Loop.",
    .tp_basicsize = sizeof(Core),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_BASETYPE,
    .tp_new = core_tp_new,
    .tp_traverse = (traverseproc)core_traverse,
    .tp_clear = (inquiry)core_clear,
    .tp_dealloc = (destructor)core_dealloc,
    .tp_dictoffset = offsetof(Core, dict),
    .tp_weaklistoffset = offsetof(Core, weakrefs),
    .tp_methods = core_methods,
    .tp_getset = core_getset,
};

/* ------------------------------------------------------------- module */

int aiol__py_intern(const aiol__py_name *names, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        *names[i].str = PyUnicode_InternFromString(names[i].text);
        if (*names[i].str == NULL) {
            return -1;
        }
    }
    return 0;
}

static struct PyModuleDef speed_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "aioloop._speed",
    .m_doc = "The C hot path of the aioloop binding (see _speed.c).",
    .m_size = -1,
};

static int speed_init(void)
{
    PyObject *m, *modules;
    int rc = -1;

    if (PyType_Ready(&aiol__py_handle_type) < 0 || PyType_Ready(&aiol__py_timer_type) < 0 ||
        PyType_Ready(&aiol__py_fd_type) < 0 || PyType_Ready(&aiol__py_core_type) < 0 ||
        aiol__py_asyncio_ready() < 0 || aiol__py_transport_ready() < 0) {
        return -1;
    }
    str_blocking = PyUnicode_InternFromString("blocking");
    str_timeout = PyUnicode_InternFromString("timeout");
    m = PyModule_Create(&speed_module);
    if (m == NULL || str_blocking == NULL || str_timeout == NULL) {
        Py_XDECREF(m);
        return -1;
    }
    if (PyModule_AddObjectRef(m, "Handle", (PyObject *)&aiol__py_handle_type) == 0 &&
        PyModule_AddObjectRef(m, "TimerHandle",
                              (PyObject *)&aiol__py_timer_type) == 0 &&
        PyModule_AddObjectRef(m, "Fd", (PyObject *)&aiol__py_fd_type) == 0 &&
        PyModule_AddObjectRef(m, "Core", (PyObject *)&aiol__py_core_type) == 0 &&
        PyModule_AddObjectRef(m, "Sched", (PyObject *)&aiol__py_sched_type) == 0 &&
        PyModule_AddObjectRef(m, "AsyncHandle",
                              (PyObject *)&aiol__py_ahandle_type) == 0 &&
        PyModule_AddObjectRef(m, "SocketIO",
                              (PyObject *)&aiol__py_socket_io_type) == 0 &&
        (modules = PyImport_GetModuleDict()) != NULL &&
        PyDict_SetItemString(modules, "aioloop._speed", m) == 0) {
        rc = 0;
    }
    Py_DECREF(m);
    return rc;
}

/*
 * Registers aioloop._speed in sys.modules.  Called through cffi (which
 * released the GIL); 0, or -1 with the exception printed.
 */
int aiol_py_speed_register(void)
{
    PyGILState_STATE g = PyGILState_Ensure();
    int rc = speed_init();

    if (rc < 0) {
        PyErr_Print();
    }
    PyGILState_Release(g);
    return rc;
}
