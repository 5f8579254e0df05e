/* tureq.c - see tureq.h. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"
#include "th.h"
#include "tureq.h"

int g_seq;
bool g_in_free;

int treq_setup(void **state)
{
    g_seq = 0;
    g_in_free = false;
    return reset_globals(state);
}

aiol_loop *uring_loop_new(void)
{
    aiol_loop *l = NULL;
    int rc = aiol_loop_new(&l, "io_uring");

    if (rc == -ENOSYS || rc == -EPERM || rc == -EINVAL) {
        printf("SKIP: io_uring loop unavailable: %s\n", strerror(-rc));
        fflush(stdout);
        exit(TU_EXIT_SKIP);
    }
    assert_int_equal(rc, 0);
    assert_non_null(l);
    assert_string_equal(aiol_loop_backend(l), "io_uring");
    return l;
}

void treq_init(treq *r, aiol_loop *loop, int op, int fd, void *buf,
               unsigned len, uint64_t off)
{
    memset(r, 0, sizeof(*r));
    r->loop = loop;
    r->op = op;
    r->fd = fd;
    r->buf = buf;
    r->len = len;
    r->off = off;
}

void treq_prep(struct io_uring_sqe *sqe, void *opaque)
{
    treq *r = opaque;

    r->preps++;
    switch (r->op) {
    case OP_NOP:
        io_uring_prep_nop(sqe);
        break;
    case OP_READ:
        io_uring_prep_read(sqe, r->fd, r->buf, r->len, r->off);
        break;
    case OP_WRITE:
        io_uring_prep_write(sqe, r->fd, r->buf, r->len, r->off);
        break;
    default:
        io_uring_prep_fsync(sqe, r->fd, 0);
        break;
    }
}

void treq_done(void *opaque, int res, uint32_t flags)
{
    treq *r = opaque;

    (void)flags;
    r->ndone++;
    r->res = res;
    r->seq = ++g_seq;
    r->depth = g_depth;
    r->in_free = g_in_free;
    if (r->then != NULL) {
        r->then(r);
    }
}

void submit(treq *r)
{
    int before = r->preps;

    assert_int_equal(aiol_uring_submit(r->loop, treq_prep, treq_done, r,
                                       &r->h), 0);
    assert_non_null(r->h);
    assert_int_equal(r->preps, before + 1);  /* prepared synchronously */
    assert_int_equal(r->ndone, 0);           /* done only from a later poll */
}

void poll_until(aiol_loop *loop, const int *count, int want, tu_watchdog *wd)
{
    int n = 0;

    while (*count < want && wd->fired == 0) {
        bool progress = aiol_loop_poll(loop, true);

        if (*count >= want) {
            assert_true(progress);
        }
        assert_true(++n < 1000);
    }
    assert_int_equal(wd->fired, 0);
    assert_int_equal(*count, want);
}

void poll_idle(aiol_loop *loop, int n)
{
    for (int i = 0; i < n; i++) {
        assert_false(aiol_loop_poll_deadline(loop,
                                             aiol_clock_now_ns() + TU_MS(2)));
        assert_false(aiol_loop_poll(loop, false));
    }
}

void blocking_pipe(int p[2])
{
    assert_int_equal(pipe2(p, O_CLOEXEC), 0);
}

bool readable(int fd, int timeout_ms)
{
    struct pollfd pfd = { .fd = fd, .events = POLLIN };

    return poll(&pfd, 1, timeout_ms) == 1 && (pfd.revents & POLLIN);
}

void treq_skip_without_uring(void)
{
    aiol_loop *l = NULL;
    int rc = aiol_loop_new(&l, "io_uring");

    if (rc == -ENOSYS || rc == -EPERM || rc == -EINVAL) {
        printf("SKIP: io_uring loop unavailable: %s\n", strerror(-rc));
        exit(TU_EXIT_SKIP);
    }
    aiol_loop_free(l);
}
