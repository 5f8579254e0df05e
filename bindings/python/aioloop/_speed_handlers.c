/* SPDX-License-Identifier: MIT */
/*
 * _speed_handlers.c - the binding's timers (aioloop.TimerHandle) and fd
 * handlers (aioloop._speed.Fd) in C, and the Core methods that arm and
 * register them.  Their C callbacks run on the polling thread with the
 * GIL held (see _speed.c).
 */
#include "_speed.h"

#include <structmember.h>

/* -------------------------------------------------------- TimerHandle */



/* Disarms @p t (the caller holds a reference: the set's may be the last). */
static void timer_drop(TimerHandle *t)
{
    Core *c = t->core;

    if (t->timer != NULL) {
        aiol_timer_free(t->timer); /* (also from its own callback) */
        t->timer = NULL;
    }
    if (c != NULL) {
        t->core = NULL;
        if (c->timers != NULL && PySet_Discard(c->timers, (PyObject *)t) < 0) {
            PyErr_WriteUnraisable((PyObject *)t);
        }
        Py_DECREF(c);
    }
}

/*
 * Whether @p t goes to the end of the call_soon FIFO instead of running
 * now: an asyncio loop's timer (after_queued) that came due while the
 * FIFO's last run went on, when that run queued callbacks.  asyncio takes
 * the timers due when its select() returns, before it runs the callbacks
 * queued by then; one that comes due later runs after those callbacks
 * (they are already on its ready queue), however long they took.  Here
 * the poll runs timers after its bottom halves, so without this a
 * wait_for() whose timeout is shorter than the batch that armed it would
 * cancel a task before its first step.  A timer due before that run
 * began runs now, as asyncio runs it before them.
 */
static bool timer_after_queued(const TimerHandle *t)
{
    const Core *c = t->core;

    return t->after_queued && c->batch_left && c->len > 0 &&
           t->ns > c->batch_ns;
}

static void timer_fire(void *opaque)
{
    TimerHandle *t = opaque;
    PyObject *cb = t->h.cb, *args = t->h.args, *errs = t->core->errs;

    Py_INCREF(t);
    if (cb != NULL && timer_after_queued(t)) {
        Core *c = (Core *)Py_NewRef(t->core);

        timer_drop(t); /* (cancel() now clears the queued handle) */
        if (aiol__py_core_push(c, (PyObject *)t) == 0) {
            Py_DECREF(c);
            Py_DECREF(t);
            return;
        }
        PyErr_Clear(); /* (no memory to queue it: it runs now) */
        Py_DECREF(c);
    }
    Py_INCREF(errs);
    t->h.cb = t->h.args = NULL;
    timer_drop(t);
    if (cb != NULL) {
        aiol__py_run(cb, args, errs);
        Py_DECREF(cb);
        Py_DECREF(args);
    }
    Py_DECREF(errs);
    Py_DECREF(t);
}

/* Disarms every armed timer of @p c (close()); -1 on MemoryError. */
int aiol__py_timers_drop_all(Core *c)
{
    PyObject *all = c->timers != NULL ? PySequence_List(c->timers) : NULL;

    if (all == NULL) {
        return c->timers != NULL ? -1 : 0;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(all); i++) {
        TimerHandle *t = (TimerHandle *)PyList_GET_ITEM(all, i);

        timer_drop(t);
        aiol__py_handle_clear(&t->h);
    }
    Py_DECREF(all);
    return 0;
}

static int timer_traverse(TimerHandle *t, visitproc visit, void *arg)
{
    Py_VISIT(t->core);
    return aiol__py_handle_traverse(&t->h, visit, arg);
}

static int timer_clear(TimerHandle *t)
{
    /* (only when its loop is unreachable too: no poll can fire it) */
    Py_CLEAR(t->core);
    return aiol__py_handle_clear(&t->h);
}

static void timer_dealloc(TimerHandle *t)
{
    PyObject_GC_UnTrack(t);
    if (t->timer != NULL && t->core != NULL && t->core->loop != NULL) {
        aiol_timer_free(t->timer);
    }
    t->timer = NULL;
    timer_clear(t);
    if (t->h.weakrefs != NULL) {
        PyObject_ClearWeakRefs((PyObject *)t);
    }
    Py_TYPE(t)->tp_free((PyObject *)t);
}

static PyObject *timer_cancel(TimerHandle *t, PyObject *unused)
{
    (void)unused;
    if (t->timer != NULL) {
        if (aiol__py_core_owned(t->core, "TimerHandle.cancel") < 0) {
            return NULL;
        }
        timer_drop(t);
    }
    aiol__py_handle_clear(&t->h);
    Py_RETURN_NONE;
}

static PyObject *timer_when(TimerHandle *t, PyObject *unused)
{
    (void)unused;
    return PyFloat_FromDouble(t->when);
}

static PyMethodDef timer_methods[] = {
    {"cancel", (PyCFunction)timer_cancel, METH_NOARGS,
     "Unschedules the callback if it has not run.  The loop's thread."},
    {"when", (PyCFunction)timer_when, METH_NOARGS,
     "The loop time (seconds) the callback is due."},
    {NULL, NULL, 0, NULL},
};

PyTypeObject aiol__py_timer_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "aioloop.TimerHandle",
    .tp_doc = "A callback scheduled with call_later()/call_at().",
    .tp_basicsize = sizeof(TimerHandle),
    .tp_base = &aiol__py_handle_type,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_traverse = (traverseproc)timer_traverse,
    .tp_clear = (inquiry)timer_clear,
    .tp_dealloc = (destructor)timer_dealloc,
    .tp_methods = timer_methods,
};

/*
 * _call_at_ns(ns, when, callback, args[, after_queued]): arms a
 * TimerHandle; after_queued: asyncio's order (timer_after_queued()).
 */
PyObject *aiol__py_call_at_ns(Core *c, PyObject *const *args,
                                 Py_ssize_t nargs)
{
    long long ns;
    double when;
    TimerHandle *t;
    int rc, after_queued = 0;

    if (aiol__py_core_owned(c, "call_at") < 0) {
        return NULL;
    }
    if ((nargs != 4 && nargs != 5) || !PyTuple_Check(args[3])) {
        PyErr_SetString(PyExc_TypeError,
                        "_call_at_ns(ns, when, cb, args[, after_queued])");
        return NULL;
    }
    if (nargs == 5 && (after_queued = PyObject_IsTrue(args[4])) < 0) {
        return NULL;
    }
    ns = PyLong_AsLongLong(args[0]);
    when = PyFloat_AsDouble(args[1]);
    if (PyErr_Occurred() || aiol__py_check_callable(args[2], "callback") < 0) {
        return NULL;
    }
    Py_INCREF(args[3]);
    t = (TimerHandle *)aiol__py_handle_new(&aiol__py_timer_type, args[2], args[3]);
    if (t == NULL) {
        Py_DECREF(args[3]);
        return NULL;
    }
    t->when = when;
    t->ns = ns;
    t->after_queued = after_queued;
    rc = aiol_timer_new(c->clock, timer_fire, t, &t->timer);
    if (rc == 0 && (rc = aiol_timer_mod(t->timer, ns)) < 0) {
        aiol_timer_free(t->timer);
        t->timer = NULL;
    }
    if (rc < 0) {
        Py_DECREF(t);
        return aiol__py_raise_errno(-rc, "aiol_timer_new");
    }
    Py_INCREF(c);
    t->core = c;
    if (PySet_Add(c->timers, (PyObject *)t) < 0) {
        timer_drop(t);
        Py_DECREF(t);
        return NULL;
    }
    return (PyObject *)t;
}

/* ----------------------------------------------------------------- Fd */

static void fd_run(Fd *r, PyObject *entry)
{
    if (!aiol__py_is_set(entry)) {
        return;
    }
    Py_INCREF(r); /* (the callback may remove the handler: our record) */
    Py_INCREF(entry);
    aiol__py_run(PyTuple_GET_ITEM(entry, 0), PyTuple_GET_ITEM(entry, 1),
                 r->errs);
    Py_DECREF(entry);
    Py_DECREF(r);
}

static void fd_read(void *opaque)
{
    fd_run(opaque, ((Fd *)opaque)->reader);
}

static void fd_write(void *opaque)
{
    fd_run(opaque, ((Fd *)opaque)->writer);
}

static bool fd_poll(void *opaque)
{
    Fd *r = opaque;
    PyObject *p = r->poll, *res;
    int work = 0;

    if (!aiol__py_is_set(p)) {
        return false;
    }
    Py_INCREF(r);
    Py_INCREF(p);
    res = PyObject_CallNoArgs(p);
    if (res != NULL) {
        work = PyObject_IsTrue(res);
        Py_DECREF(res);
    }
    if (work < 0 || res == NULL) {
        aiol__py_keep_error(r->errs);
        work = 0;
    }
    Py_DECREF(p);
    Py_DECREF(r);
    return work;
}

static int fd_entry_ok(PyObject *e, const char *what)
{
    if (!aiol__py_is_set(e) || (PyTuple_CheckExact(e) && PyTuple_GET_SIZE(e) == 2 &&
                       PyCallable_Check(PyTuple_GET_ITEM(e, 0)) &&
                       PyTuple_CheckExact(PyTuple_GET_ITEM(e, 1)))) {
        return 0;
    }
    PyErr_Format(PyExc_TypeError, "Fd.%s must be None or (callable, tuple)",
                 what);
    return -1;
}

/* _fd_update(rec): registers rec's callbacks; False once it has none. */
PyObject *aiol__py_fd_update(Core *c, PyObject *arg)
{
    Fd *r = (Fd *)arg;
    aiol_handler_fn *read, *write;
    aiol_poll_fn *poll;
    PyThreadState *ts = NULL;
    int rc;

    if (!PyObject_TypeCheck(arg, &aiol__py_fd_type)) {
        PyErr_SetString(PyExc_TypeError, "_fd_update takes an Fd");
        return NULL;
    }
    if (aiol__py_core_open(c) < 0 || fd_entry_ok(r->reader, "reader") < 0 ||
        fd_entry_ok(r->writer, "writer") < 0) {
        return NULL;
    }
    if (aiol__py_is_set(r->poll) && aiol__py_check_callable(r->poll, "poll") < 0) {
        return NULL;
    }
    if (c->confined && PyThread_get_thread_ident() != c->owner) {
        PyErr_SetString(PyExc_RuntimeError,
                        "a reader or writer changed from a thread other "
                        "than the loop's on a thread-confined loop (make "
                        "it with Loop(threadsafe=True) for that)");
        return NULL;
    }
    read = aiol__py_is_set(r->reader) ? fd_read : NULL;
    write = aiol__py_is_set(r->writer) ? fd_write : NULL;
    poll = aiol__py_is_set(r->poll) ? fd_poll : NULL;
    if (PyThread_get_thread_ident() != c->owner) {
        ts = PyEval_SaveThread(); /* (see the top of the file) */
    }
    if (read != NULL || write != NULL || poll != NULL) {
        rc = aiol_fd_set(c->loop, r->fd, read, write, poll, r);
    } else {
        rc = aiol_fd_remove(c->loop, r->fd);
    }
    if (ts != NULL) {
        PyEval_RestoreThread(ts);
    }
    if (rc < 0) {
        return aiol__py_raise_errno(-rc, read || write || poll ? "aiol_fd_set"
                                                      : "aiol_fd_remove");
    }
    return PyBool_FromLong(read != NULL || write != NULL || poll != NULL);
}

static PyObject *fd_tp_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    int fd;
    PyObject *errs;
    Fd *r;

    if (!PyArg_ParseTupleAndKeywords(args, kw, "iO!:Fd",
                                     (char *[]){"fd", "errs", NULL}, &fd,
                                     &PyList_Type, &errs)) {
        return NULL;
    }
    r = (Fd *)type->tp_alloc(type, 0);
    if (r != NULL) {
        r->fd = fd;
        Py_INCREF(errs);
        r->errs = errs;
    }
    return (PyObject *)r;
}

static int fd_traverse(Fd *r, visitproc visit, void *arg)
{
    Py_VISIT(r->errs);
    Py_VISIT(r->reader);
    Py_VISIT(r->writer);
    Py_VISIT(r->poll);
    return 0;
}

static int fd_clear(Fd *r)
{
    Py_CLEAR(r->errs);
    Py_CLEAR(r->reader);
    Py_CLEAR(r->writer);
    Py_CLEAR(r->poll);
    return 0;
}

static void fd_dealloc(Fd *r)
{
    PyObject_GC_UnTrack(r);
    if (r->weakrefs != NULL) {
        PyObject_ClearWeakRefs((PyObject *)r);
    }
    fd_clear(r);
    Py_TYPE(r)->tp_free((PyObject *)r);
}

static PyMemberDef fd_members[] = {
    {"fd", T_INT, offsetof(Fd, fd), READONLY, NULL},
    {"reader", T_OBJECT, offsetof(Fd, reader), 0, NULL},
    {"writer", T_OBJECT, offsetof(Fd, writer), 0, NULL},
    {"poll", T_OBJECT, offsetof(Fd, poll), 0, NULL},
    {NULL, 0, 0, 0, NULL},
};

PyTypeObject aiol__py_fd_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "aioloop._speed.Fd",
    .tp_doc = "Fd(fd, errs): the Python side of one fd's handler.",
    .tp_basicsize = sizeof(Fd),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = fd_tp_new,
    .tp_traverse = (traverseproc)fd_traverse,
    .tp_clear = (inquiry)fd_clear,
    .tp_dealloc = (destructor)fd_dealloc,
    .tp_weaklistoffset = offsetof(Fd, weakrefs),
    .tp_members = fd_members,
};

