/*
 * th.h - the "test handler" record shared by the fd-handler suites: each
 * callback notes what happened in a struct th, and a callback that runs on a
 * handler the test already removed bumps th.after_remove, which every test
 * expects to stay 0.
 */
#ifndef AIOLOOP_TESTS_TH_H
#define AIOLOOP_TESTS_TH_H

#include <stdbool.h>

#include "aioloop/aioloop.h"

typedef struct th th;
struct th {
    aiol_loop *loop;
    int fd;
    int reads;          /* read callbacks run */
    int writes;         /* write callbacks run */
    int nested_calls;   /* callbacks run at g_depth > 0 */
    int after_remove;   /* callbacks run after the test removed us: a bug */
    bool removed;       /* set right after aiol_fd_remove/replace returns */
    bool drain;         /* cb_read drains the eventfd */
    bool nested_done;   /* this handler ran the nested poll */
    th *peer;           /* nesting tests: the other handler of the pair */
    th **peers;         /* same-batch test: all handlers, NULL-terminated */
};

extern int g_depth;      /* nested aiol_loop_poll calls made by callbacks */
extern int g_max_depth;

int reset_globals(void **state);
void th_init(th *h, aiol_loop *loop, int fd);
void th_add(th *h, aiol_loop *loop, int fd, aiol_handler_fn *rd,
            aiol_handler_fn *wr);
void th_note(th *h);
void th_remove(th *h);
void poll_n(aiol_loop *loop, int n, bool progress);
bool nested_poll(aiol_loop *loop);
void cb_read(void *opaque);
void cb_read_other(void *opaque);
void cb_write(void *opaque);

#endif
