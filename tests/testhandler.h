/* SPDX-License-Identifier: MIT */
/*
 * testhandler.h - the test handler (th_), the fd handler record shared by
 * the fd-handler suites (fd, nest, removal, uring): each callback notes
 * what happened in a struct th, and a callback that runs on a handler the
 * test already removed bumps th.after_remove, which every test expects to
 * stay 0.  Also the callbacks themselves, non-blocking polls, and a nested
 * poll that counts its depth.
 */
#ifndef AIOLOOP_TESTS_TESTHANDLER_H
#define AIOLOOP_TESTS_TESTHANDLER_H

#include <stdbool.h>

#include "aioloop/aioloop.h"

typedef struct th th;
struct th {
    aiol_loop *loop;
    int fd;
    int reads;          /* read callbacks run */
    int writes;         /* write callbacks run */
    int nested_calls;   /* callbacks run at th_depth > 0 */
    int after_remove;   /* callbacks run after the test removed us: a bug */
    bool removed;       /* set right after aiol_fd_remove/replace returns */
    bool drain;         /* th_cb_read drains the eventfd */
    bool nested_done;   /* this handler ran the nested poll */
    th *peer;           /* nesting tests: the other handler of the pair */
    th **peers;         /* same-batch test: all handlers, NULL-terminated */
};

extern int th_depth;      /* nested aiol_loop_poll calls made by callbacks */
extern int th_max_depth;

/* cmocka setup: resets th_depth and th_max_depth. */
int th_reset(void **state);
void th_init(th *h, aiol_loop *loop, int fd);
void th_add(th *h, aiol_loop *loop, int fd, aiol_handler_fn *rd,
            aiol_handler_fn *wr);
void th_note(th *h);
void th_remove(th *h);
void th_poll_n(aiol_loop *loop, int n, bool progress);
bool th_nested_poll(aiol_loop *loop);
void th_cb_read(void *opaque);
void th_cb_read_other(void *opaque);
void th_cb_write(void *opaque);

#endif
