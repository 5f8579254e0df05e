/* SPDX-License-Identifier: MIT */
/* uringreq.c - the io_uring request records of uringreq.h. */
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
#include "testhandler.h"
#include "uringreq.h"

int ur_seq;
bool ur_in_free;

int ur_setup(void **state)
{
    ur_seq = 0;
    ur_in_free = false;
    return th_reset(state);
}

aiol_loop *ur_loop_new(void)
{
    aiol_loop *l = NULL;
    int rc = aiol_loop_new_flags(&l, "io_uring",
                                 tu_confined_requested() ? AIOL_LOOP_CONFINED
                                                         : 0);

    if (rc == -ENOSYS || rc == -EPERM || rc == -EINVAL) {
        printf("SKIP: io_uring loop unavailable: %s\n", strerror(-rc));
        fflush(stdout);
        exit(TU_EXIT_SKIP);
    }
    assert_int_equal(rc, 0);
    assert_non_null(l);
    assert_string_equal(aiol_loop_fdmon_get(l), "io_uring");
    return l;
}

void ur_req_init(ur_req *r, aiol_loop *loop, int op, int fd, void *buf,
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

void ur_prep(struct io_uring_sqe *sqe, void *opaque)
{
    ur_req *r = opaque;

    r->preps++;
    switch (r->op) {
    case UR_NOP:
        io_uring_prep_nop(sqe);
        break;
    case UR_READ:
        io_uring_prep_read(sqe, r->fd, r->buf, r->len, r->off);
        break;
    case UR_WRITE:
        io_uring_prep_write(sqe, r->fd, r->buf, r->len, r->off);
        break;
    default:
        io_uring_prep_fsync(sqe, r->fd, 0);
        break;
    }
}

void ur_done(void *opaque, int res, uint32_t flags)
{
    ur_req *r = opaque;

    (void)flags;
    r->ndone++;
    r->res = res;
    r->seq = ++ur_seq;
    r->depth = th_depth;
    r->in_free = ur_in_free;
    if (r->then != NULL) {
        r->then(r);
    }
}

void ur_submit(ur_req *r)
{
    int before = r->preps;

    assert_int_equal(aiol_uring_submit(r->loop, ur_prep, ur_done, r,
                                       &r->h), 0);
    assert_non_null(r->h);
    assert_int_equal(r->preps, before + 1);  /* prepared synchronously */
    assert_int_equal(r->ndone, 0);           /* done only from a later poll */
}

void ur_poll_until(aiol_loop *loop, const int *count, int want,
                   lw_watchdog *wd)
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

void ur_poll_idle(aiol_loop *loop, int n)
{
    for (int i = 0; i < n; i++) {
        assert_false(aiol_loop_poll_deadline(loop,
                                             aiol_mono_time_get() + LW_MS(2)));
        assert_false(aiol_loop_poll(loop, false));
    }
}

void ur_blocking_pipe(int p[2])
{
    assert_int_equal(pipe2(p, O_CLOEXEC), 0);
}

bool ur_readable(int fd, int timeout_ms)
{
    struct pollfd pfd = { .fd = fd, .events = POLLIN };

    return poll(&pfd, 1, timeout_ms) == 1 && (pfd.revents & POLLIN);
}

void ur_skip_without_uring(void)
{
    aiol_loop *l = NULL;
    int rc = aiol_loop_new(&l, "io_uring");

    if (rc == -ENOSYS || rc == -EPERM || rc == -EINVAL) {
        printf("SKIP: io_uring loop unavailable: %s\n", strerror(-rc));
        exit(TU_EXIT_SKIP);
    }
    aiol_loop_free(l);
}
