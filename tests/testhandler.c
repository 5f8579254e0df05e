/* SPDX-License-Identifier: MIT */
/* testhandler.c - the test handler of testhandler.h. */
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
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "aioloop/aioloop.h"
#include "testutil.h"
#include "testhandler.h"

int th_depth;      /* nested aiol_loop_poll calls made by callbacks */
int th_max_depth;

int th_reset(void **state)
{
    (void)state;
    th_depth = 0;
    th_max_depth = 0;
    return 0;
}

void th_init(th *h, aiol_loop *loop, int fd)
{
    memset(h, 0, sizeof(*h));
    h->loop = loop;
    h->fd = fd;
}

/* th_init() plus a successful aiol_fd_set() with @p h as opaque. */
void th_add(th *h, aiol_loop *loop, int fd, aiol_handler_fn *rd,
            aiol_handler_fn *wr)
{
    th_init(h, loop, fd);
    assert_int_equal(aiol_fd_set(loop, fd, rd, wr, NULL, h), 0);
    assert_true(aiol_fd_is_set(loop, fd));
}

void th_note(th *h)
{
    if (h->removed) {
        h->after_remove++;
    }
    if (th_depth > 0) {
        h->nested_calls++;
    }
}

void th_remove(th *h)
{
    assert_int_equal(aiol_fd_remove(h->loop, h->fd), 0);
    assert_false(aiol_fd_is_set(h->loop, h->fd));
    h->removed = true;
}

/* @p n non-blocking polls, each expected to return @p progress. */
void th_poll_n(aiol_loop *loop, int n, bool progress)
{
    for (int i = 0; i < n; i++) {
        assert_int_equal(aiol_loop_poll(loop, false), progress);
    }
}

/* Nested non-blocking poll from inside a callback. */
bool th_nested_poll(aiol_loop *loop)
{
    bool progress;

    if (++th_depth > th_max_depth) {
        th_max_depth = th_depth;
    }
    progress = aiol_loop_poll(loop, false);
    th_depth--;
    return progress;
}

void th_cb_read(void *opaque)
{
    th *h = opaque;

    th_note(h);
    h->reads++;
    if (h->drain) {
        tu_eventfd_drain(h->fd);
    }
}

/* Same as th_cb_read, but a different function pointer. */
void th_cb_read_other(void *opaque)
{
    th_cb_read(opaque);
}

void th_cb_write(void *opaque)
{
    th *h = opaque;

    th_note(h);
    h->writes++;
}
