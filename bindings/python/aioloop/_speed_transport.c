/* SPDX-License-Identifier: MIT */
/*
 * _speed_transport.c - the two hot methods of the asyncio loop's socket
 * transport (_asyncio.py's _SocketTransport) in C: write() and the reader
 * _read_ready().
 *
 * Why.  An echo through asyncio's own transport runs two Python methods
 * per message (the reader's and write()), and socket.send() releases and
 * retakes the GIL around a call that does not block.  uvloop runs both in
 * compiled code.  Here SocketIO is a mixin with no fields of its own,
 * first in _SocketTransport's bases, so its methods shadow asyncio's while
 * everything else (close, flow control, write_eof, sendfile, TLS) stays
 * asyncio's _SelectorSocketTransport:
 *
 * - write(data): for bytes or a bytearray, when nothing is buffered and
 *   the transport is in its ordinary state, one send() with the GIL held;
 *   what it did not send, and every other case, goes to asyncio's write()
 *   (the class's _aiol_slow_write) with the same checks, messages and
 *   buffering;
 * - _read_ready(): asyncio's _read_ready__data_received() for a Protocol
 *   (its reads on malloc()'s heap: read_alloc()); for a BufferedProtocol,
 *   asyncio's _read_ready__get_buffer().
 *
 * The transport's state is read from its attributes, as asyncio keeps it
 * (_buffer, _conn_lost, _eof, _empty_waiter, _sock_fd, _protocol).
 *
 * Threads: heap_read_size is guarded by the GIL (a transport runs on its
 * loop's thread, with the GIL held).
 */
#include "_speed.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/socket.h>

static PyObject *str_buffer, *str_conn_lost, *str_eof, *str_empty_waiter,
    *str_sock_fd, *str_protocol, *str_data_received, *str_fatal_error,
    *str_on_eof, *str_get_buffer, *str_buffered, *str_max_size,
    *str_slow_write;


/*
 * A bytes object of @p max bytes to read into.
 *
 * A read goes straight into the bytes object it becomes, which is then
 * shrunk to the size read, as asyncio's recv(max_size) does: no copy.
 * glibc's malloc() serves a block over its mmap threshold (128 KiB at
 * first; max_size is 256 KiB) with an mmap, its page faults and an munmap
 * each time, unless it raised that threshold, which it does when such a
 * block is freed (mallopt(3), "dynamic mmap threshold"; it raises the
 * heap's trim threshold to twice that with it).  asyncio's loop gets there
 * the first time a read finds nothing and drops its unshrunk buffer; ours
 * reads only what readiness announced, so it frees one block of the read
 * size on purpose, once.  Without the raised trim threshold, a streams echo
 * of 100 KiB messages also grew and trimmed the heap with every message
 * (a brk and about 22 page faults each).
 */
static PyObject *read_alloc(size_t max)
{
#ifdef __GLIBC__
    /* (the largest size malloc() was made to keep on its heap; GIL) */
    static size_t heap_read_size;

    if (max > heap_read_size) {
        void *volatile block = malloc(max); /* (volatile: kept, not elided) */

        free(block);
        heap_read_size = max;
    }
#endif
    return PyBytes_FromStringAndSize(NULL, (Py_ssize_t)max);
}

/* self.<name> as a C truth value; -1 with the exception. */
static int attr_true(PyObject *self, PyObject *name)
{
    PyObject *v = PyObject_GetAttr(self, name);
    int t;

    if (v == NULL) {
        return -1;
    }
    t = PyObject_IsTrue(v);
    Py_DECREF(v);
    return t;
}

/* self.<name> as an int in [0, INT_MAX]; -1 with the exception. */
static int attr_fd(PyObject *self, PyObject *name)
{
    PyObject *v = PyObject_GetAttr(self, name);
    long fd;

    if (v == NULL) {
        return -1;
    }
    fd = PyLong_AsLong(v);
    Py_DECREF(v);
    if (fd == -1 && PyErr_Occurred()) {
        return -1;
    }
    if (fd < 0 || fd > INT_MAX) {
        PyErr_Format(PyExc_ValueError, "bad file descriptor %ld", fd);
        return -1;
    }
    return (int)fd;
}

/*
 * 1 when a write may try send() here: nothing buffered, no EOF written,
 * no sendfile running, the connection not lost.  0 for asyncio's write()
 * (which raises, counts or buffers as it does), -1 with an exception.
 */
static int write_direct(PyObject *self)
{
    PyObject *w;
    int t;

    if ((t = attr_true(self, str_buffer)) != 0 ||
        (t = attr_true(self, str_eof)) != 0 ||
        (t = attr_true(self, str_conn_lost)) != 0) {
        return t < 0 ? -1 : 0;
    }
    w = PyObject_GetAttr(self, str_empty_waiter);
    if (w == NULL) {
        return -1;
    }
    t = w == Py_None;
    Py_DECREF(w);
    return t;
}

/* asyncio's write() with @p data. */
static PyObject *slow_write(PyObject *self, PyObject *data)
{
    return PyObject_CallMethodOneArg(self, str_slow_write, data);
}

/* self._fatal_error(<the exception being raised>, msg); NULL if it raised. */
static PyObject *fatal(PyObject *self, const char *msg)
{
    PyObject *type, *value, *tb, *text, *res;

    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    if (tb != NULL && value != NULL) {
        PyException_SetTraceback(value, tb);
    }
    text = PyUnicode_FromString(msg);
    res = text == NULL ? NULL
                       : PyObject_CallMethodObjArgs(self, str_fatal_error,
                                                    value, text, NULL);
    Py_XDECREF(text);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
    return res;
}

/* SystemExit and KeyboardInterrupt go up; asyncio reports the rest. */
static int passes_up(void)
{
    return PyErr_ExceptionMatches(PyExc_SystemExit) ||
           PyErr_ExceptionMatches(PyExc_KeyboardInterrupt);
}

static PyObject *sio_write(PyObject *self, PyObject *data)
{
    const char *buf;
    Py_ssize_t len;
    ssize_t n;
    PyObject *rest, *res;
    int fd, ok;

    if (PyBytes_CheckExact(data)) {
        buf = PyBytes_AS_STRING(data);
        len = PyBytes_GET_SIZE(data);
    } else if (PyByteArray_CheckExact(data)) {
        buf = PyByteArray_AS_STRING(data);
        len = PyByteArray_GET_SIZE(data);
    } else {
        return slow_write(self, data); /* (memoryviews, and its TypeError) */
    }
    if (len == 0 || (ok = write_direct(self)) == 0) {
        return slow_write(self, data);
    }
    if (ok < 0 || (fd = attr_fd(self, str_sock_fd)) < 0) {
        return NULL;
    }
    n = send(fd, buf, (size_t)len, MSG_NOSIGNAL);
    if (n == len) {
        Py_RETURN_NONE;
    }
    if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
            return slow_write(self, data); /* (it buffers and waits) */
        }
        PyErr_SetFromErrno(PyExc_OSError);
        res = fatal(self, "Fatal write error on socket transport");
        if (res == NULL) {
            return NULL;
        }
        Py_DECREF(res);
        Py_RETURN_NONE;
    }
    /* (a copy: the caller may change a bytearray once write() returned) */
    rest = PyBytes_FromStringAndSize(buf + n, len - n);
    if (rest == NULL) {
        return NULL;
    }
    res = slow_write(self, rest);
    Py_DECREF(rest);
    return res;
}

/* One read for a Protocol: asyncio's _read_ready__data_received(). */
static PyObject *read_for_protocol(PyObject *self, PyObject *unused)
{
    PyObject *v, *data, *proto, *res;
    long max;
    ssize_t n;
    int fd, t, err;

    (void)unused;
    if ((t = attr_true(self, str_conn_lost)) != 0) {
        return t < 0 ? NULL : Py_NewRef(Py_None);
    }
    if ((fd = attr_fd(self, str_sock_fd)) < 0 ||
        (v = PyObject_GetAttr(self, str_max_size)) == NULL) {
        return NULL;
    }
    max = PyLong_AsLong(v);
    Py_DECREF(v);
    if (max <= 0) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_ValueError, "max_size must be > 0");
        }
        return NULL;
    }
    if ((data = read_alloc((size_t)max)) == NULL) {
        return NULL;
    }
    n = recv(fd, PyBytes_AS_STRING(data), (size_t)max, 0);
    err = errno; /* (before the free below) */
    if (n <= 0) {
        Py_DECREF(data);
    }
    if (n < 0) {
        if (err == EAGAIN || err == EWOULDBLOCK || err == EINTR) {
            Py_RETURN_NONE; /* (level-triggered: called again when readable) */
        }
        errno = err;
        PyErr_SetFromErrno(PyExc_OSError);
        return fatal(self, "Fatal read error on socket transport");
    }
    if (n == 0) {
        return PyObject_CallMethodNoArgs(self, str_on_eof);
    }
    if (n < max && _PyBytes_Resize(&data, n) < 0) {
        return NULL; /* (data was freed) */
    }
    if ((proto = PyObject_GetAttr(self, str_protocol)) == NULL) {
        Py_DECREF(data);
        return NULL;
    }
    res = PyObject_CallMethodOneArg(proto, str_data_received, data);
    Py_DECREF(proto);
    Py_DECREF(data);
    if (res == NULL && !passes_up()) {
        res = fatal(self, "Fatal error: protocol.data_received() call failed.");
    }
    if (res == NULL) {
        return NULL;
    }
    Py_DECREF(res);
    Py_RETURN_NONE;
}

static PyObject *sio_read_ready(PyObject *self, PyObject *unused)
{
    int t;

    (void)unused;
    if ((t = attr_true(self, str_buffered)) != 0) {
        return t < 0 ? NULL : PyObject_CallMethodNoArgs(self, str_get_buffer);
    }
    return read_for_protocol(self, NULL);
}

static PyMethodDef sio_methods[] = {
    {"write", (PyCFunction)sio_write, METH_O,
     "write(data): asyncio's transport write(), with its common case (an "
     "empty buffer, everything sent at once) in C."},
    {"_read_ready", (PyCFunction)sio_read_ready, METH_NOARGS,
     "The transport's reader: one read for its protocol."},
    {"_read_ready__data_received", (PyCFunction)read_for_protocol,
     METH_NOARGS, "One read for a Protocol, as asyncio's."},
    {NULL, NULL, 0, NULL},
};

PyTypeObject aiol__py_socket_io_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "aioloop._speed.SocketIO",
    .tp_doc = "The C write() and reader of the asyncio loop's socket "
              "transport (a mixin with no fields, before asyncio's "
              "_SelectorSocketTransport in its bases).",
    .tp_basicsize = sizeof(PyObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_methods = sio_methods,
};

int aiol__py_transport_ready(void)
{
    static const aiol__py_name names[] = {
        {&str_buffer, "_buffer"},
        {&str_conn_lost, "_conn_lost"},
        {&str_eof, "_eof"},
        {&str_empty_waiter, "_empty_waiter"},
        {&str_sock_fd, "_sock_fd"},
        {&str_protocol, "_protocol"},
        {&str_data_received, "data_received"},
        {&str_fatal_error, "_fatal_error"},
        {&str_on_eof, "_read_ready__on_eof"},
        {&str_get_buffer, "_read_ready__get_buffer"},
        {&str_buffered, "_aiol_buffered"},
        {&str_max_size, "max_size"},
        {&str_slow_write, "_aiol_slow_write"},
    };

    if (aiol__py_intern(names, sizeof(names) / sizeof(names[0])) < 0) {
        return -1;
    }
    return PyType_Ready(&aiol__py_socket_io_type);
}
