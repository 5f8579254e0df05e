/* SPDX-License-Identifier: MIT */
/*
 * _speed_selector.c - the asyncio loop's selector table in C.
 *
 * asyncio's selector loop registers every reader and writer, transports'
 * and sock_*()'s included, as a SelectorKey(fileobj, fd, events, (reader
 * Handle, writer Handle)) in its selector; a sock_recv() that waits adds
 * and removes one per message.  In _asyncio.py that table is a dict whose
 * changes set the fd's libaioloop handler (Sched._io() for either
 * direction).  Here both steps are one C call:
 *
 * - _fd_slot(fd, slot, on): sets or removes fd's reader (slot 0) or
 *   writer (1) entry in the Loop's Fd record (aioloop.Loop._fds) and
 *   applies it with one aiol_fd_set() or aiol_fd_remove();
 * - _io_set(fd, slot, handle): what asyncio's _add_reader() and the like
 *   do through the selector's register(), modify() and unregister(), for
 *   an int fd, returning the handle it replaced.
 *
 * A fd gets the checks of the public add_reader() (open, not the loop's
 * own) when its record is created.  Every field is guarded by the GIL.
 */
#include "_speed.h"

#include <sys/stat.h>

/* The (callback, args) entry of fd's slot: (Sched._io, (fd, slot)). */
static PyObject *io_entry(Sched *s, PyObject *fd, int slot)
{
    return Py_BuildValue("(O(Oi))", s->io, fd, slot);
}

/* A new Fd record for @p fd, after the checks of the public calls. */
static Fd *fd_record_new(Sched *s, int fd)
{
    Core *c = s->core;
    struct stat st;

    if (aiol__py_core_open(c) < 0) {
        return NULL;
    }
    if (fd < 0 || fstat(fd, &st) < 0) {
        return (Fd *)aiol__py_raise_errno(EBADF, "fd is not open");
    }
    return (Fd *)PyObject_CallFunction((PyObject *)&aiol__py_fd_type, "iO",
                                       fd, c->errs);
}

/* Sets (on) or clears fd's slot and registers the change; 0 or -1. */
static int fd_slot(Sched *s, PyObject *fdobj, int fd, int slot, int on)
{
    PyObject *got = PyDict_GetItemWithError(s->fds, fdobj), *entry = NULL;
    PyObject **slotp, *old_entry, *old_poll, *res;
    Fd *r;
    int rc = -1;

    if (got == NULL) {
        if (PyErr_Occurred() || !on) {
            return PyErr_Occurred() ? -1 : 0;
        }
        r = fd_record_new(s, fd);
    } else {
        r = (Fd *)Py_NewRef(got);
    }
    if (r == NULL || (on && (entry = io_entry(s, fdobj, slot)) == NULL)) {
        Py_XDECREF(r);
        return -1;
    }
    slotp = slot == 0 ? &r->reader : &r->writer;
    old_entry = *slotp; /* (references moved to these two) */
    old_poll = r->poll;
    *slotp = entry;
    if (slot == 0 && !on) {
        r->poll = NULL;
    } else {
        Py_XINCREF(old_poll);
    }
    res = aiol__py_fd_update(s->core, (PyObject *)r);
    if (res == NULL) {
        Py_XSETREF(*slotp, old_entry);
        Py_XSETREF(r->poll, old_poll);
        Py_DECREF(r);
        return -1;
    }
    Py_XDECREF(old_entry);
    Py_XDECREF(old_poll);
    if (res == Py_True && got == NULL) {
        rc = PyDict_SetItem(s->fds, fdobj, (PyObject *)r);
        if (rc < 0) {
            /* (MemoryError: take the registration back) */
            Py_CLEAR(r->reader);
            Py_CLEAR(r->writer);
            Py_CLEAR(r->poll);
            Py_XDECREF(aiol__py_fd_update(s->core, (PyObject *)r));
        }
    } else if (res == Py_False && got != NULL) {
        rc = PyDict_DelItem(s->fds, fdobj);
    } else {
        rc = 0;
    }
    Py_DECREF(res);
    Py_DECREF(r);
    return rc;
}

/* fd as an exact int in range, and slot 0 or 1; -1 with TypeError. */
static int io_args(PyObject *const *args, Py_ssize_t nargs, int *fd,
                   int *slot, const char *usage)
{
    long f, sl;

    if (nargs != 3 || !PyLong_CheckExact(args[0]) ||
        !PyLong_CheckExact(args[1])) {
        PyErr_SetString(PyExc_TypeError, usage);
        return -1;
    }
    f = PyLong_AsLong(args[0]);
    sl = PyLong_AsLong(args[1]);
    if (PyErr_Occurred()) {
        return -1;
    }
    if (f < INT_MIN || f > INT_MAX || (sl != 0 && sl != 1)) {
        PyErr_SetString(PyExc_ValueError, usage);
        return -1;
    }
    *fd = (int)f;
    *slot = (int)sl;
    return 0;
}

PyObject *aiol__py_sched_fd_slot(Sched *s, PyObject *const *args,
                                 Py_ssize_t nargs)
{
    int fd, slot, on;

    if (io_args(args, nargs, &fd, &slot, "_fd_slot(fd, 0 or 1, on)") < 0 ||
        (on = PyObject_IsTrue(args[2])) < 0 ||
        fd_slot(s, args[0], fd, slot, on) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

/* A new key_type(fileobj, fd, events, data). */
static PyObject *key_new(Sched *s, PyObject *fileobj, PyObject *fd,
                         long events, PyObject *data)
{
    PyObject *items = Py_BuildValue("(OOlO)", fileobj, fd, events, data);
    PyObject *args = items != NULL ? PyTuple_Pack(1, items) : NULL, *key;

    /* (a namedtuple is a tuple subclass: tuple.__new__(key_type, items)) */
    key = args != NULL ? PyTuple_Type.tp_new((PyTypeObject *)s->key_type,
                                             args, NULL)
                       : NULL;
    Py_XDECREF(args);
    Py_XDECREF(items);
    return key;
}

PyObject *aiol__py_sched_io_set(Sched *s, PyObject *const *args,
                                Py_ssize_t nargs)
{
    PyObject *fdobj, *handle, *key, *fileobj, *data, *old, *res = NULL;
    long events = 0, was = 0, bit;
    int fd, slot;

    /* (a fourth argument: the file object a new registration records) */
    if (io_args(args, nargs < 4 ? nargs : 3, &fd, &slot,
                "_io_set(fd, 0 or 1, handle[, fileobj])") < 0) {
        return NULL;
    }
    if (nargs > 4) {
        PyErr_SetString(PyExc_TypeError,
                        "_io_set(fd, 0 or 1, handle[, fileobj])");
        return NULL;
    }
    fdobj = args[0];
    handle = args[2];
    bit = slot == 0 ? 1 : 2; /* (selectors.EVENT_READ, EVENT_WRITE) */
    key = PyDict_GetItemWithError(s->fd_to_key, fdobj);
    if (key == NULL) {
        if (PyErr_Occurred() || handle == Py_None) {
            return PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
        }
        if (fd < 0) {
            return PyErr_Format(PyExc_ValueError,
                                "Invalid file descriptor: %d", fd);
        }
        fileobj = nargs == 4 ? args[3] : fdobj;
        data = NULL;
    } else {
        if (!PyTuple_Check(key) || PyTuple_GET_SIZE(key) != 4 ||
            !PyTuple_Check(data = PyTuple_GET_ITEM(key, 3)) ||
            PyTuple_GET_SIZE(data) != 2 ||
            ((was = PyLong_AsLong(PyTuple_GET_ITEM(key, 2))) == -1 &&
             PyErr_Occurred())) {
            if (!PyErr_Occurred()) {
                PyErr_SetString(PyExc_TypeError, "a broken selector key");
            }
            return NULL;
        }
        fileobj = PyTuple_GET_ITEM(key, 0);
    }
    Py_XINCREF(key); /* (fd_slot may run code that changes the table) */
    events = handle != Py_None ? was | bit : was & ~bit;
    if (events != was && s->core->loop != NULL &&
        fd_slot(s, fdobj, fd, slot, handle != Py_None) < 0) {
        goto out;
    }
    old = data != NULL ? PyTuple_GET_ITEM(data, slot) : Py_None;
    if (events != 0) {
        PyObject *other = data != NULL ? PyTuple_GET_ITEM(data, 1 - slot)
                                       : Py_None;
        PyObject *pair = slot == 0 ? PyTuple_Pack(2, handle, other)
                                   : PyTuple_Pack(2, other, handle);
        PyObject *nkey = pair != NULL ? key_new(s, fileobj, fdobj, events, pair)
                                      : NULL;

        Py_XDECREF(pair);
        if (nkey == NULL || PyDict_SetItem(s->fd_to_key, fdobj, nkey) < 0) {
            Py_XDECREF(nkey);
            goto out;
        }
        Py_DECREF(nkey);
    } else if (key != NULL && PyDict_DelItem(s->fd_to_key, fdobj) < 0) {
        goto out;
    }
    res = Py_NewRef(old);
out:
    Py_XDECREF(key);
    return res;
}
