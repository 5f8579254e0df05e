/* SPDX-License-Identifier: MIT */
/*
 * _speed_asyncio.c - the hot path of the asyncio loop (_asyncio.py's
 * EventLoop) in C: call_soon(), the handles it returns, and the dispatch
 * of fd readiness into asyncio's reader and writer handles.
 *
 * Why.  In asyncio every await that resumes a task, every future's done
 * callback and every transport's read goes through call_soon() or a
 * reader's Handle.  In Python each of those is an asyncio Handle built by
 * a Python constructor, a Python trampoline that runs it, and
 * Context.run(); uvloop does all of it in compiled code.  Here:
 *
 * - Sched.call_soon() and call_soon_threadsafe() (the EventLoop's, bound
 *   on it while it is not in debug mode) make an AsyncHandle and queue it
 *   on the Core's call_soon FIFO, the same FIFO (one bottom half) as the
 *   classic Loop API's call_soon(), so both keep one order;
 * - the FIFO runs an AsyncHandle as asyncio's Handle._run() does: the
 *   callback in the handle's context, SystemExit and KeyboardInterrupt out
 *   of the poll, any other exception to the loop's exception handler;
 * - Sched._io(fd, which) is every fd's libaioloop read (which = 0) or
 *   write (1) callback: it finds the fd's asyncio Handle in the selector
 *   table and runs it the same way, or drops a cancelled one's
 *   registration as asyncio's _process_events() does.
 *
 * In debug mode the EventLoop goes back to asyncio's Python path (its
 * Handles, source tracebacks and slow-callback warnings); _io then hands
 * each handle to the loop's _run_handle().
 *
 * Threads: every field here is guarded by the GIL (see _speed.c).
 */
#include "_speed.h"

#include <structmember.h>

#include <errno.h>
#include <limits.h>
#include <string.h>

/* A callback call_soon() scheduled: asyncio's Handle, in C. */
typedef struct {
    Handle h;           /* cb, args: NULL once cancelled */
    PyObject *context;  /* the contextvars.Context it runs in */
    Sched *sched;
    char cancelled;
} AsyncHandle;

/*
 * The EventLoop (a new reference), or NULL once it is gone.  Never
 * raises: the weak reference is ours and always one.  (3.13 deprecated
 * PyWeakref_GetObject(), whose borrowed reference a callback could drop.)
 */
static PyObject *sched_evloop(Sched *s)
{
    PyObject *e = NULL;

    if (s->evloop == NULL) {
        return NULL;
    }
#if PY_VERSION_HEX >= 0x030D0000
    if (PyWeakref_GetRef(s->evloop, &e) < 0) {
        PyErr_Clear(); /* (not reached: evloop is a weak reference) */
    }
#else
    e = PyWeakref_GetObject(s->evloop);
    e = e != Py_None ? Py_XNewRef(e) : NULL;
#endif
    return e;
}

static PyObject *str_handle_error, *str_run_handle, *str_remove_reader,
    *str_remove_writer, *str_cancelled, *str_callback, *str_args,
    *str_context;

/*
 * What asyncio's Handle._run() does with the exception being raised:
 * SystemExit and KeyboardInterrupt stay raised (-1); anything else goes
 * to the EventLoop's exception handler, with @p handle (0).
 */
static int handle_error(Sched *s, PyObject *handle)
{
    PyObject *type, *value, *tb, *res, *evloop = sched_evloop(s);

    if (PyErr_ExceptionMatches(PyExc_SystemExit) ||
        PyErr_ExceptionMatches(PyExc_KeyboardInterrupt) || evloop == NULL) {
        Py_XDECREF(evloop);
        return -1;
    }
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    if (tb != NULL && value != NULL) {
        PyException_SetTraceback(value, tb);
    }
    res = PyObject_CallMethodObjArgs(evloop, str_handle_error, handle,
                                     value != NULL ? value : Py_None, NULL);
    Py_DECREF(evloop);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
    if (res == NULL) {
        return -1;
    }
    Py_DECREF(res);
    return 0;
}

/* ctx.run(cb, *args) for @p handle, as Handle._run(); see handle_error(). */
static int run_in_context(Sched *s, PyObject *handle, PyObject *ctx,
                          PyObject *cb, PyObject *args)
{
    PyObject *res;

    if (!PyTuple_Check(args)) {
        PyErr_Format(PyExc_TypeError, "a handle's arguments must be a "
                     "tuple, not %.100s", Py_TYPE(args)->tp_name);
        return handle_error(s, handle);
    }
    if (PyContext_Enter(ctx) < 0) {
        return handle_error(s, handle);
    }
    res = PyObject_Vectorcall(cb, &PyTuple_GET_ITEM(args, 0),
                              (size_t)PyTuple_GET_SIZE(args), NULL);
    if (PyContext_Exit(ctx) < 0) {
        Py_XDECREF(res);
        res = NULL;
    }
    if (res == NULL) {
        return handle_error(s, handle);
    }
    Py_DECREF(res);
    return 0;
}

/* Runs @p a (it has a callback): 0, or -1 with SystemExit or the like. */
static int ahandle_call(AsyncHandle *a)
{
    PyObject *cb = a->h.cb, *args = a->h.args;
    int rc;

    /* (the callback may cancel its own handle, which drops these) */
    Py_INCREF(cb);
    Py_INCREF(args);
    rc = run_in_context(a->sched, (PyObject *)a, a->context, cb, args);
    Py_DECREF(cb);
    Py_DECREF(args);
    return rc;
}

void aiol__py_ahandle_run(Handle *h, PyObject *errs)
{
    AsyncHandle *a = (AsyncHandle *)h;

    if (!a->sched->closed && ahandle_call(a) < 0) {
        aiol__py_keep_error(errs);
    }
}

/* ------------------------------------------------------- AsyncHandle */

static int ahandle_traverse(AsyncHandle *a, visitproc visit, void *arg)
{
    Py_VISIT(a->context);
    Py_VISIT(a->sched);
    return aiol__py_handle_traverse(&a->h, visit, arg);
}

static int ahandle_clear(AsyncHandle *a)
{
    Py_CLEAR(a->context);
    Py_CLEAR(a->sched);
    return aiol__py_handle_clear(&a->h);
}

static void ahandle_dealloc(AsyncHandle *a)
{
    PyObject_GC_UnTrack(a);
    if (a->h.weakrefs != NULL) {
        PyObject_ClearWeakRefs((PyObject *)a);
    }
    ahandle_clear(a);
    Py_TYPE(a)->tp_free((PyObject *)a);
}

static PyObject *ahandle_cancel(AsyncHandle *a, PyObject *unused)
{
    (void)unused;
    a->cancelled = 1;
    aiol__py_handle_clear(&a->h); /* (the FIFO skips it) */
    Py_RETURN_NONE;
}

static PyObject *ahandle_cancelled(AsyncHandle *a, PyObject *unused)
{
    (void)unused;
    return PyBool_FromLong(a->cancelled);
}

static PyObject *ahandle_get_context(AsyncHandle *a, PyObject *unused)
{
    (void)unused;
    return Py_NewRef(a->context);
}

static PyObject *ahandle_run_method(AsyncHandle *a, PyObject *unused)
{
    (void)unused;
    if (a->h.cb != NULL && ahandle_call(a) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *ahandle_repr(AsyncHandle *a)
{
    if (a->h.cb == NULL) {
        return PyUnicode_FromFormat("<Handle %s>",
                                    a->cancelled ? "cancelled" : "done");
    }
    return PyUnicode_FromFormat("<Handle %R%R>", a->h.cb, a->h.args);
}

/* _callback, _args: None once cancelled, as asyncio's Handle. */
static PyObject *ahandle_get_slot(AsyncHandle *a, void *closure)
{
    PyObject *o = closure != NULL ? a->h.args : a->h.cb;

    return Py_NewRef(o != NULL ? o : Py_None);
}

static PyObject *ahandle_get_loop(AsyncHandle *a, void *closure)
{
    (void)closure;
    PyObject *evloop = sched_evloop(a->sched);

    return evloop != NULL ? evloop : Py_NewRef(Py_None);
}

static PyObject *ahandle_get_none(AsyncHandle *a, void *closure)
{
    (void)a;
    (void)closure;
    Py_RETURN_NONE;
}

static PyMethodDef ahandle_methods[] = {
    {"cancel", (PyCFunction)ahandle_cancel, METH_NOARGS,
     "Unschedules the callback if it has not run."},
    {"cancelled", (PyCFunction)ahandle_cancelled, METH_NOARGS,
     "True once cancel() was called."},
    {"get_context", (PyCFunction)ahandle_get_context, METH_NOARGS,
     "The contextvars.Context the callback runs in."},
    {"_run", (PyCFunction)ahandle_run_method, METH_NOARGS,
     "Runs the callback now, as asyncio's Handle._run()."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef ahandle_members[] = {
    {"_cancelled", T_BOOL, offsetof(AsyncHandle, cancelled), READONLY, NULL},
    {"_context", T_OBJECT, offsetof(AsyncHandle, context), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyGetSetDef ahandle_getset[] = {
    {"_callback", (getter)ahandle_get_slot, NULL, NULL, NULL},
    {"_args", (getter)ahandle_get_slot, NULL, NULL, "args"},
    {"_loop", (getter)ahandle_get_loop, NULL, NULL, NULL},
    {"_source_traceback", (getter)ahandle_get_none, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject aiol__py_ahandle_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "aioloop._speed.AsyncHandle",
    .tp_doc = "A callback an aioloop EventLoop's call_soon() scheduled "
              "(asyncio's Handle, in C).",
    .tp_basicsize = sizeof(AsyncHandle),
    .tp_base = &aiol__py_handle_type,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_traverse = (traverseproc)ahandle_traverse,
    .tp_clear = (inquiry)ahandle_clear,
    .tp_dealloc = (destructor)ahandle_dealloc,
    .tp_repr = (reprfunc)ahandle_repr,
    .tp_methods = ahandle_methods,
    .tp_members = ahandle_members,
    .tp_getset = ahandle_getset,
};

/* ------------------------------------------------------------- Sched */

static PyObject *str_context_kw;

/*
 * A new AsyncHandle of @p s for cb(*tail) in @p ctx (NULL or None: a copy
 * of the current context); steals @p tail, even on failure.
 */
static AsyncHandle *ahandle_new(Sched *s, PyObject *cb, PyObject *tail,
                                PyObject *ctx)
{
    AsyncHandle *a;

    ctx = ctx == NULL || ctx == Py_None ? PyContext_CopyCurrent()
                                        : Py_NewRef(ctx);
    if (ctx == NULL) {
        Py_DECREF(tail);
        return NULL;
    }
    a = (AsyncHandle *)aiol__py_handle_new(&aiol__py_ahandle_type, cb, tail);
    if (a == NULL) {
        Py_DECREF(tail);
        Py_DECREF(ctx);
        return NULL;
    }
    a->context = ctx;
    a->sched = (Sched *)Py_NewRef(s);
    return a;
}

static PyObject *str_call_soon, *str_call_soon_threadsafe;

/*
 * In debug mode: asyncio's own method @p name of the EventLoop's class,
 * called on it with the same arguments.  (A bound call_soon taken before
 * set_debug(True) is ours, and must make asyncio's Handles, with their
 * source tracebacks, from then on.)
 */
static PyObject *sched_debug_call(Sched *s, PyObject *name,
                                  PyObject *const *args, Py_ssize_t nargs,
                                  PyObject *kwnames)
{
    Py_ssize_t n = nargs + (kwnames != NULL ? PyTuple_GET_SIZE(kwnames) : 0);
    PyObject *evloop = sched_evloop(s), *fn, *res = NULL, **stack;

    if (evloop == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "Event loop is closed");
        return NULL;
    }
    fn = PyObject_GetAttr((PyObject *)Py_TYPE(evloop), name);
    stack = fn != NULL ? PyMem_New(PyObject *, n + 1) : NULL;
    if (stack != NULL) {
        stack[0] = evloop;
        memcpy(stack + 1, args, (size_t)n * sizeof(*args));
        res = PyObject_Vectorcall(fn, stack, (size_t)nargs + 1, kwnames);
        PyMem_Free(stack);
    } else if (fn != NULL) {
        PyErr_NoMemory();
    }
    Py_XDECREF(fn);
    Py_DECREF(evloop);
    return res;
}

/* call_soon(callback, *args, context=None) -> AsyncHandle; any thread. */
static PyObject *sched_schedule(Sched *s, PyObject *name,
                                PyObject *const *args, Py_ssize_t nargs,
                                PyObject *kwnames)
{
    PyObject *ctx = NULL, *tail;
    AsyncHandle *a;

    if (s->debug) {
        return sched_debug_call(s, name, args, nargs, kwnames);
    }
    if (kwnames != NULL && PyTuple_GET_SIZE(kwnames) > 0) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, 0);

        if (PyTuple_GET_SIZE(kwnames) > 1 ||
            (name != str_context_kw &&
             PyUnicode_Compare(name, str_context_kw) != 0)) {
            PyErr_SetString(PyExc_TypeError,
                            "call_soon() takes only the keyword 'context'");
            return NULL;
        }
        ctx = args[nargs];
    }
    if (nargs < 1) {
        PyErr_SetString(PyExc_TypeError, "call_soon() needs a callback");
        return NULL;
    }
    if (s->closed || s->core->loop == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "Event loop is closed");
        return NULL;
    }
    tail = PyTuple_New(nargs - 1);
    if (tail == NULL) {
        return NULL;
    }
    for (Py_ssize_t i = 1; i < nargs; i++) {
        PyTuple_SET_ITEM(tail, i - 1, Py_NewRef(args[i]));
    }
    a = ahandle_new(s, args[0], tail, ctx);
    if (a == NULL) {
        return NULL;
    }
    if (aiol__py_core_push(s->core, (PyObject *)a) < 0) {
        Py_DECREF(a);
        return NULL;
    }
    return (PyObject *)a;
}

static PyObject *sched_call_soon(Sched *s, PyObject *const *args,
                                 Py_ssize_t nargs, PyObject *kwnames)
{
    return sched_schedule(s, str_call_soon, args, nargs, kwnames);
}

static PyObject *sched_call_soon_threadsafe(Sched *s, PyObject *const *args,
                                            Py_ssize_t nargs,
                                            PyObject *kwnames)
{
    return sched_schedule(s, str_call_soon_threadsafe, args, nargs, kwnames);
}

/*
 * _handle(callback, args) -> AsyncHandle: a reader's or writer's handle
 * (_asyncio.py's _add_reader()), not queued: _io() runs it at each
 * readiness.
 */
static PyObject *sched_handle(Sched *s, PyObject *const *args,
                              Py_ssize_t nargs)
{
    if (nargs != 2 || !PyTuple_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "_handle(callback, args)");
        return NULL;
    }
    return (PyObject *)ahandle_new(s, args[0], Py_NewRef(args[1]), NULL);
}

/* Drops a cancelled handle's registration (asyncio's _process_events). */
static int io_cancelled(Sched *s, PyObject *key, int which)
{
    PyObject *evloop = sched_evloop(s), *res;

    if (evloop == NULL) {
        return 0;
    }
    res = PyObject_CallMethodOneArg(
        evloop, which == 0 ? str_remove_reader : str_remove_writer,
        PyTuple_GET_ITEM(key, 0));
    Py_DECREF(evloop);
    Py_XDECREF(res);
    return res != NULL ? 0 : -1;
}

/* Runs one asyncio Handle of the selector table (Handle._run()). */
static int io_run(Sched *s, PyObject *handle, PyObject *key, int which)
{
    PyObject *flag, *cb = NULL, *args = NULL, *ctx = NULL;
    int cancelled, rc = -1;

    if (Py_IS_TYPE(handle, &aiol__py_ahandle_type) && !s->debug) {
        AsyncHandle *a = (AsyncHandle *)handle;

        /* (ours, from _handle(): its fields, no attribute lookups) */
        return a->h.cb == NULL ? io_cancelled(s, key, which) : ahandle_call(a);
    }
    if (s->debug && (ctx = sched_evloop(s)) != NULL) {
        flag = PyObject_CallMethodOneArg(ctx, str_run_handle, handle);
        Py_DECREF(ctx);
        Py_XDECREF(flag);
        return flag != NULL ? 0 : -1;
    }
    flag = PyObject_GetAttr(handle, str_cancelled);
    cancelled = flag != NULL ? PyObject_IsTrue(flag) : -1;
    Py_XDECREF(flag);
    if (cancelled != 0) {
        return cancelled < 0 ? -1 : io_cancelled(s, key, which);
    }
    if ((cb = PyObject_GetAttr(handle, str_callback)) != NULL &&
        (args = PyObject_GetAttr(handle, str_args)) != NULL &&
        (ctx = PyObject_GetAttr(handle, str_context)) != NULL) {
        rc = run_in_context(s, handle, ctx, cb, args);
    }
    Py_XDECREF(cb);
    Py_XDECREF(args);
    Py_XDECREF(ctx);
    return rc;
}

/*
 * _io(fd, which): fd's libaioloop read (0) or write (1) callback.  An
 * exception it raises (SystemExit, KeyboardInterrupt, a broken table)
 * ends the poll; a handle's other exceptions go to the exception handler.
 */
static PyObject *sched_io(Sched *s, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *key, *data, *handle;
    long which;
    int rc = 0;

    if (nargs != 2 || (which = PyLong_AsLong(args[1])) < 0 || which > 1) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_TypeError, "_io(fd, 0 or 1)");
        }
        return NULL;
    }
    if (s->closed) {
        Py_RETURN_NONE;
    }
    key = PyDict_GetItemWithError(s->fd_to_key, args[0]);
    if (key == NULL) {
        return PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
    }
    if (!PyTuple_Check(key) || PyTuple_GET_SIZE(key) != 4 ||
        !PyTuple_Check(data = PyTuple_GET_ITEM(key, 3)) ||
        PyTuple_GET_SIZE(data) != 2) {
        PyErr_SetString(PyExc_TypeError,
                        "the selector holds no (reader, writer) for the fd");
        return NULL;
    }
    handle = PyTuple_GET_ITEM(data, which);
    if (handle != Py_None) {
        Py_INCREF(key); /* (the handle may unregister the fd) */
        Py_INCREF(handle);
        rc = io_run(s, handle, key, (int)which);
        Py_DECREF(handle);
        Py_DECREF(key);
    }
    return rc < 0 ? NULL : Py_NewRef(Py_None);
}

/*
 * _run(): the iterations of run_forever() until stop(), in C: each one
 * polls, blocking unless stop() was called before it, and the run ends
 * after the iteration in which stop() was called (asyncio's loop: a
 * _run_once() and a check of _stopping, over and over).
 */
static PyObject *sched_run(Sched *s, PyObject *unused)
{
    int64_t deadline = s->stopping ? 0 : AIOL_DEADLINE_NONE;

    (void)unused;
    do {
        if (aiol__py_core_poll(s->core, deadline) < 0) {
            return NULL;
        }
        deadline = AIOL_DEADLINE_NONE; /* (stop() was not called) */
        /*
         * What this iteration's readers and timers queued (a task their
         * future woke) runs now, as the next iteration's first step would,
         * without the fd wait of an iteration before it.
         */
        if (!s->stopping && aiol__py_core_run_soon(s->core) < 0) {
            return NULL;
        }
    } while (!s->stopping);
    Py_RETURN_NONE;
}

static PyObject *sched_close(Sched *s, PyObject *unused)
{
    (void)unused;
    s->closed = 1;
    Py_RETURN_NONE;
}

static PyObject *sched_tp_new(PyTypeObject *type, PyObject *args,
                              PyObject *kw)
{
    PyObject *core, *evloop, *fd_to_key, *fds, *key_type;
    Sched *s;

    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!OO!O!O!:Sched",
                                     (char *[]){"core", "evloop", "fd_to_key",
                                                "fds", "key_type", NULL},
                                     &aiol__py_core_type, &core, &evloop,
                                     &PyDict_Type, &fd_to_key, &PyDict_Type,
                                     &fds, &PyType_Type, &key_type)) {
        return NULL;
    }
    if (!PyType_IsSubtype((PyTypeObject *)key_type, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "key_type must be a tuple type");
        return NULL;
    }
    s = (Sched *)type->tp_alloc(type, 0);
    if (s == NULL) {
        return NULL;
    }
    s->core = (Core *)Py_NewRef(core);
    s->fd_to_key = Py_NewRef(fd_to_key);
    s->fds = Py_NewRef(fds);
    s->key_type = Py_NewRef(key_type);
    s->evloop = PyWeakref_NewRef(evloop, NULL);
    s->io = s->evloop != NULL ? PyObject_GetAttrString((PyObject *)s, "_io")
                              : NULL;
    if (s->io == NULL) {
        Py_DECREF(s);
        return NULL;
    }
    return (PyObject *)s;
}

static int sched_traverse(Sched *s, visitproc visit, void *arg)
{
    Py_VISIT(s->core);
    Py_VISIT(s->evloop);
    Py_VISIT(s->fd_to_key);
    Py_VISIT(s->fds);
    Py_VISIT(s->key_type);
    Py_VISIT(s->io);
    return 0;
}

static int sched_clear(Sched *s)
{
    s->closed = 1;
    Py_CLEAR(s->core);
    Py_CLEAR(s->evloop);
    Py_CLEAR(s->fd_to_key);
    Py_CLEAR(s->fds);
    Py_CLEAR(s->key_type);
    Py_CLEAR(s->io);
    return 0;
}

static void sched_dealloc(Sched *s)
{
    PyObject_GC_UnTrack(s);
    if (s->weakrefs != NULL) {
        PyObject_ClearWeakRefs((PyObject *)s);
    }
    sched_clear(s);
    Py_TYPE(s)->tp_free((PyObject *)s);
}

static PyMethodDef sched_methods[] = {
    {"call_soon", (PyCFunction)(void (*)(void))sched_call_soon,
     METH_FASTCALL | METH_KEYWORDS,
     "call_soon(callback, *args, context=None) -> AsyncHandle\n\nasyncio's "
     "call_soon() (any thread; a schedule from another thread wakes the "
     "poll); in debug mode the EventLoop class's own."},
    {"call_soon_threadsafe",
     (PyCFunction)(void (*)(void))sched_call_soon_threadsafe,
     METH_FASTCALL | METH_KEYWORDS,
     "call_soon_threadsafe(callback, *args, context=None) -> AsyncHandle\n\n"
     "call_soon(); in debug mode the EventLoop class's own."},
    {"_handle", (PyCFunction)(void (*)(void))sched_handle, METH_FASTCALL,
     "_handle(callback, args) -> AsyncHandle\n\nA reader's or writer's "
     "handle, not queued."},
    {"_io", (PyCFunction)(void (*)(void))sched_io, METH_FASTCALL,
     "_io(fd, which)\n\nRuns fd's reader (0) or writer (1) Handle."},
    {"_fd_slot", (PyCFunction)(void (*)(void))aiol__py_sched_fd_slot,
     METH_FASTCALL,
     "_fd_slot(fd, slot, on)\n\nMakes _io() fd's libaioloop reader (slot "
     "0) or writer (1), or removes it."},
    {"_io_set", (PyCFunction)(void (*)(void))aiol__py_sched_io_set,
     METH_FASTCALL,
     "_io_set(fd, slot, handle[, fileobj]) -> the handle replaced\n\n"
     "Makes handle fd's reader or writer (None: removes it), in the "
     "selector table (a new key records fileobj, by default fd) and in "
     "libaioloop."},
    {"_run", (PyCFunction)sched_run, METH_NOARGS,
     "_run()\n\nIterates until the EventLoop's stop() (run_forever())."},
    {"_close", (PyCFunction)sched_close, METH_NOARGS,
     "_close()\n\nThe EventLoop closed: nothing queued runs any more."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef sched_members[] = {
    {"debug", T_BOOL, offsetof(Sched, debug), 0,
     "The EventLoop's debug mode: readiness runs through its _run_handle()."},
    {"closed", T_BOOL, offsetof(Sched, closed), READONLY, NULL},
    {"stopping", T_BOOL, offsetof(Sched, stopping), 0,
     "The EventLoop's _stopping: _run() ends after the iteration that "
     "sets it."},
    {NULL, 0, 0, 0, NULL},
};

PyTypeObject aiol__py_sched_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "aioloop._speed.Sched",
    .tp_doc = "Sched(core, evloop, fd_to_key, fds, key_type): an aioloop "
              "EventLoop's "
              "call_soon() and readiness dispatch in C.",
    .tp_basicsize = sizeof(Sched),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = sched_tp_new,
    .tp_traverse = (traverseproc)sched_traverse,
    .tp_clear = (inquiry)sched_clear,
    .tp_dealloc = (destructor)sched_dealloc,
    .tp_weaklistoffset = offsetof(Sched, weakrefs),
    .tp_methods = sched_methods,
    .tp_members = sched_members,
};

int aiol__py_asyncio_ready(void)
{
    static const aiol__py_name names[] = {
        {&str_handle_error, "_aiol_handle_error"},
        {&str_run_handle, "_run_handle"},
        {&str_remove_reader, "_remove_reader"},
        {&str_remove_writer, "_remove_writer"},
        {&str_cancelled, "_cancelled"},
        {&str_callback, "_callback"},
        {&str_args, "_args"},
        {&str_context, "_context"},
        {&str_context_kw, "context"},
        {&str_call_soon, "call_soon"},
        {&str_call_soon_threadsafe, "call_soon_threadsafe"},
    };

    if (aiol__py_intern(names, sizeof(names) / sizeof(names[0])) < 0 ||
        PyType_Ready(&aiol__py_ahandle_type) < 0 ||
        PyType_Ready(&aiol__py_sched_type) < 0) {
        return -1;
    }
    return 0;
}
