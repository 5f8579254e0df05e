/*
 * tureq.h - io_uring request records for the uring suites (test_uring.c,
 * test_uring_mt.c), on top of testutil.h, th.h and tuplus.h.
 *
 * A struct treq describes one request (NOP, read, write or fsync).  Its
 * done callback counts calls, keeps the result, takes the next global
 * sequence number (completion order) and may run a continuation.
 */
#ifndef AIOLOOP_TUREQ_H
#define AIOLOOP_TUREQ_H

#include <stdbool.h>
#include <stdint.h>

#include "aioloop/aioloop.h"
#include "tuplus.h"

/* Far enough that only a missed wakeup makes it fire. */
#define TUREQ_WATCHDOG_NS TU_MS(10000)

enum { OP_NOP, OP_READ, OP_WRITE, OP_FSYNC };

typedef struct treq treq;
struct treq {
    aiol_loop *loop;
    int op, fd;
    void *buf;
    unsigned len;
    uint64_t off;
    int preps;             /* prep callback calls */
    int ndone;             /* done callback calls */
    int res;
    int seq;               /* global completion order, 1-based */
    int depth;             /* g_depth (th.h) when done ran */
    bool in_free;          /* done ran while g_in_free was set */
    aiol_uring_req *h;
    void (*then)(treq *);  /* continuation, run from done */
    treq *peer;            /* what the continuation works on */
    tu_watchdog *wd;
};

extern int g_seq;        /* completions seen; reset by treq_setup */
extern bool g_in_free;   /* the test is inside aiol_loop_free() */

/** cmocka setup: resets g_seq, g_in_free and th.h's globals. */
int treq_setup(void **state);

/** An io_uring loop, or exit 77 when io_uring cannot start here. */
aiol_loop *uring_loop_new(void);

void treq_init(treq *r, aiol_loop *loop, int op, int fd, void *buf,
               unsigned len, uint64_t off);
aiol_sqe_prep_fn treq_prep;
aiol_cqe_fn treq_done;

/** aiol_uring_submit() of @p r, asserting it succeeded and ran prep once. */
void submit(treq *r);

/**
 * Blocking polls until *count reaches @p want.  The poll that got it there
 * must report progress; the watchdog must not fire.
 */
void poll_until(aiol_loop *loop, const int *count, int want, tu_watchdog *wd);

/** @p n rounds of a 2 ms deadline poll and a look, each running nothing. */
void poll_idle(aiol_loop *loop, int n);

/** A blocking pipe: an io_uring read on it waits for data (on an
 *  O_NONBLOCK pipe it would fail with -EAGAIN instead). */
void blocking_pipe(int p[2]);

/*
 * Runs a cmocka group of io_uring tests, or exits 77 first (before any
 * test runs) when this machine cannot start an io_uring loop.
 */
#define TREQ_RUN_GROUP(name, tests)                                          \
    (treq_skip_without_uring(), cmocka_run_group_tests_name(name, tests,     \
                                                            NULL, NULL))
void treq_skip_without_uring(void);

/** poll(2) for POLLIN on @p fd. */
bool readable(int fd, int timeout_ms);

#endif
