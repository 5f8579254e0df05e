/* SPDX-License-Identifier: MIT */
/*
 * uringreq.h - io_uring request records (ur_) for the uring suites
 * (test_uring.c, test_uring_mt.c), on top of testutil.h, testhandler.h and
 * loopwatch.h.
 *
 * A struct ur_req describes one request (NOP, read, write or fsync).  Its
 * done callback counts calls, keeps the result, takes the next global
 * sequence number (completion order) and may run a continuation.
 */
#ifndef AIOLOOP_TESTS_URINGREQ_H
#define AIOLOOP_TESTS_URINGREQ_H

#include <stdbool.h>
#include <stdint.h>

#include "aioloop/aioloop.h"
#include "loopwatch.h"

/* Far enough that only a missed wakeup makes it fire. */
#define UR_WATCHDOG_NS LW_MS(10000)

enum { UR_NOP, UR_READ, UR_WRITE, UR_FSYNC };

typedef struct ur_req ur_req;
struct ur_req {
    aiol_loop *loop;
    int op, fd;
    void *buf;
    unsigned len;
    uint64_t off;
    int preps;             /* prep callback calls */
    int ndone;             /* done callback calls */
    int res;
    int seq;               /* global completion order, 1-based */
    int depth;             /* th_depth (testhandler.h) at done */
    bool in_free;          /* done ran while ur_in_free was set */
    aiol_uring_req *h;
    void (*then)(ur_req *);  /* continuation, run from done */
    ur_req *peer;            /* what the continuation works on */
    lw_watchdog *wd;
};

extern int ur_seq;        /* completions seen; reset by ur_setup */
extern bool ur_in_free;   /* the test is inside aiol_loop_free() */

/** cmocka setup: resets ur_seq, ur_in_free and testhandler.h's depths. */
int ur_setup(void **state);

/** An io_uring loop, or exit 77 when io_uring cannot start here. */
aiol_loop *ur_loop_new(void);

void ur_req_init(ur_req *r, aiol_loop *loop, int op, int fd, void *buf,
                 unsigned len, uint64_t off);
aiol_sqe_prep_fn ur_prep;
aiol_cqe_fn ur_done;

/** aiol_uring_submit() of @p r, asserting it succeeded and ran prep once. */
void ur_submit(ur_req *r);

/**
 * Blocking polls until *count reaches @p want.  The poll that got it there
 * must report progress; the watchdog must not fire.
 */
void ur_poll_until(aiol_loop *loop, const int *count, int want,
                   lw_watchdog *wd);

/** @p n rounds of a 2 ms deadline poll and a look, each running nothing. */
void ur_poll_idle(aiol_loop *loop, int n);

/** A blocking pipe: an io_uring read on it waits for data (on an
 *  O_NONBLOCK pipe it would fail with -EAGAIN instead). */
void ur_blocking_pipe(int p[2]);

/*
 * Runs a cmocka group of io_uring tests, or exits 77 first (before any
 * test runs) when this machine cannot start an io_uring loop.
 */
#define UR_RUN_GROUP(name, tests)                                          \
    (ur_skip_without_uring(), cmocka_run_group_tests_name(name, tests,       \
                                                          NULL, NULL))
void ur_skip_without_uring(void);

/** poll(2) for POLLIN on @p fd. */
bool ur_readable(int fd, int timeout_ms);

#endif
