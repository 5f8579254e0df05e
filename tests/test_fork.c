/* SPDX-License-Identifier: MIT */
/*
 * test_fork.c - a loop inherited through fork(): aiol_loop_after_fork()
 * in the child, aiol_loop_free() in a child that did not call it, and the
 * parent's loop carrying on unaffected.  Run once per fd monitor.
 *
 * Each case sets up a loop in the test process, forks a child
 * (tu_run_child()) that works on its copy, and checks the parent's loop
 * once the child is gone, so whatever the child did to the kernel objects
 * the two share (an epoll set, an io_uring ring, an eventfd) has already
 * happened.  A child reports by exit status: CHILD_CHECK prints the failed
 * condition to the stderr the parent captures and exits 1 (cmocka's
 * asserts would unwind into the child's copy of the test runner).
 * Waits are bounded by deadlines; no test relies on timing otherwise.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "aioloop/aioloop.h"
#include "testutil.h"
#include "loopwatch.h"
#ifdef AIOL_HAVE_IO_URING
#include <liburing.h>
#include "aioloop/uring.h"
#endif

#define CHILD_CHECK(cond)                                                    \
    do {                                                                     \
        if (!(cond)) {                                                       \
            fprintf(stderr, "child: %s:%d: %s\n", __FILE__, __LINE__,        \
                    #cond);                                                  \
            _exit(1);                                                        \
        }                                                                    \
    } while (0)

/* How long a wait for an event that must come may take at most. */
#define EVENT_NS LW_MS(5000)

#define NPIPES 3

/* A read handler that counts its calls and drains its pipe. */
typedef struct counter {
    int fd;
    int reads;
} counter;

static void on_read(void *opaque)
{
    counter *c = opaque;

    c->reads++;
    tu_pipe_drain(c->fd);
}

/* What the parent set up; the child works on its copy. */
typedef struct fork_case {
    aiol_loop *loop;
    int p[NPIPES][2];
    counter c[NPIPES];
} fork_case;

static void case_setup(fork_case *fc, bool settle)
{
    fc->loop = tu_loop_new();
    for (int i = 0; i < NPIPES; i++) {
        tu_pipe(fc->p[i]);
        fc->c[i] = (counter){ .fd = fc->p[i][0], .reads = 0 };
        assert_int_equal(aiol_fd_set(fc->loop, fc->p[i][0], on_read, NULL,
                                     NULL, &fc->c[i]), 0);
    }
    if (settle) {
        /* (io_uring: also binds the ring to this thread) */
        assert_false(aiol_loop_poll(fc->loop, false));
    }
}

static void case_teardown(fork_case *fc)
{
    for (int i = 0; i < NPIPES; i++) {
        assert_int_equal(aiol_fd_remove(fc->loop, fc->p[i][0]), 0);
        close(fc->p[i][0]);
        close(fc->p[i][1]);
    }
    aiol_loop_free(fc->loop);
}

/* True once each of the @n counters saw at least @want reads. */
static bool all_read(const counter *c, int n, int want)
{
    for (int i = 0; i < n; i++) {
        if (c[i].reads < want) {
            return false;
        }
    }
    return true;
}

/* Polls until all_read() or EVENT_NS passed; returns all_read(). */
static bool poll_until_read(aiol_loop *loop, const counter *c, int n,
                            int want)
{
    int64_t end = aiol_mono_time_get() + EVENT_NS;

    while (!all_read(c, n, want) && aiol_mono_time_get() < end) {
        aiol_loop_poll_deadline(loop, end);
    }
    return all_read(c, n, want);
}

/* Runs @fn in a child and asserts that it exited 0. */
static void run_child(void (*fn)(void *), void *arg)
{
    char err[4096];
    int status = tu_run_child(fn, arg, err, sizeof(err));

    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "child failed (status 0x%x): %s\n", status, err);
    }
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

/*
 * The parent's side after the child is gone: every handler still gets its
 * events, twice over (the registrations are still there after one).
 */
static void parent_gets_every_event(fork_case *fc)
{
    for (int round = 1; round <= 2; round++) {
        for (int i = 0; i < NPIPES; i++) {
            tu_pipe_signal(fc->p[i][1]);
        }
        assert_true(poll_until_read(fc->loop, fc->c, NPIPES, round));
        for (int i = 0; i < NPIPES; i++) {
            assert_int_equal(fc->c[i].reads, round);
        }
    }
}

/* ------------------------- 1: the child changes its handlers and polls */

static void other_read(void *opaque)
{
    (void)opaque;
    _exit(3); /* the child's replacement on a parent pipe: never ready */
}

static void child_changes_handlers(void *arg)
{
    fork_case *fc = arg;
    aiol_loop *loop = fc->loop;
    int q[2];
    counter cq;

    CHILD_CHECK(aiol_loop_after_fork(loop) == 0);
    CHILD_CHECK(aiol_loop_after_fork(loop) == 0); /* now a no-op */
    /* remove one, replace one, keep one, add one of the child's own */
    CHILD_CHECK(aiol_fd_remove(loop, fc->p[0][0]) == 0);
    CHILD_CHECK(aiol_fd_set(loop, fc->p[1][0], other_read, NULL, NULL,
                            NULL) == 0);
    tu_pipe(q);
    cq = (counter){ .fd = q[0], .reads = 0 };
    CHILD_CHECK(aiol_fd_set(loop, q[0], on_read, NULL, NULL, &cq) == 0);
    tu_pipe_signal(q[1]);
    CHILD_CHECK(poll_until_read(loop, &cq, 1, 1));
    tu_pipe_signal(q[1]);
    CHILD_CHECK(poll_until_read(loop, &cq, 1, 2));
    CHILD_CHECK(!aiol_loop_poll(loop, false)); /* nothing else is ready */
    for (int i = 0; i < NPIPES; i++) {
        CHILD_CHECK(fc->c[i].reads == 0);
    }
    CHILD_CHECK(aiol_fd_remove(loop, q[0]) == 0);
    CHILD_CHECK(aiol_fd_remove(loop, fc->p[1][0]) == 0);
    CHILD_CHECK(aiol_fd_remove(loop, fc->p[2][0]) == 0);
    aiol_loop_free(loop);
    close(q[0]);
    close(q[1]);
}

static void fork_changes_case(bool settle)
{
    fork_case fc;

    case_setup(&fc, settle);
    run_child(child_changes_handlers, &fc);
    parent_gets_every_event(&fc);
    case_teardown(&fc);
}

static void test_child_after_fork_changes_handlers(void **state)
{
    (void)state;
    fork_changes_case(true);
}

/* The same before the parent's first poll (io_uring: an unbound ring). */
static void test_child_after_fork_before_parent_polled(void **state)
{
    (void)state;
    fork_changes_case(false);
}

/* ---------------------------- 2: the child only frees the loop it got */

static void child_frees(void *arg)
{
    fork_case *fc = arg;

    aiol_loop_free(fc->loop);
}

static void test_child_frees_without_after_fork(void **state)
{
    fork_case fc;

    (void)state;
    case_setup(&fc, true);
    run_child(child_frees, &fc);
    parent_gets_every_event(&fc);
    case_teardown(&fc);
}

/* A child whose after_fork succeeded frees its own objects normally. */
static void child_after_fork_frees(void *arg)
{
    fork_case *fc = arg;

    CHILD_CHECK(aiol_loop_after_fork(fc->loop) == 0);
    aiol_loop_free(fc->loop);
}

static void test_child_after_fork_frees(void **state)
{
    fork_case fc;

    (void)state;
    case_setup(&fc, true);
    run_child(child_after_fork_frees, &fc);
    parent_gets_every_event(&fc);
    case_teardown(&fc);
}

/* ------------------------------------- 3: notify stays in the child */

static void *notify_later(void *opaque)
{
    lw_sleep_ns(LW_MS(20)); /* most likely once the poller sleeps */
    aiol_loop_notify(opaque);
    return NULL;
}

static void notify_from_thread(aiol_loop *loop)
{
    pthread_t t;

    CHILD_CHECK(pthread_create(&t, NULL, notify_later, loop) == 0);
    CHILD_CHECK(pthread_join(t, NULL) == 0);
}

static void child_notifies(void *arg)
{
    fork_case *fc = arg;
    aiol_loop *loop = fc->loop;
    uint64_t kicks;
    lw_watchdog wd;
    pthread_t t;

    CHILD_CHECK(aiol_loop_after_fork(loop) == 0);
    /* A blocking poll ends on another thread's notify. */
    lw_watchdog_arm(&wd, loop, EVENT_NS);
    CHILD_CHECK(pthread_create(&t, NULL, notify_later, loop) == 0);
    aiol_loop_poll(loop, true);
    CHILD_CHECK(pthread_join(t, NULL) == 0);
    CHILD_CHECK(lw_watchdog_free(&wd) == 0);
    /*
     * A notify written to the eventfd and never drained here: a host is
     * "asleep" between prepare and check.  Were the eventfd the parent's,
     * the parent would find it readable below.
     */
    kicks = lw_stats(loop).notify_kicks;
    aiol_loop_prepare(loop);
    notify_from_thread(loop);
    aiol_loop_check(loop);
    CHILD_CHECK(lw_stats(loop).notify_kicks == kicks + 1);
    aiol_loop_free(loop);
}

static void test_child_notify_does_not_wake_parent(void **state)
{
    fork_case fc;
    aiol_loop_stats before;

    (void)state;
    case_setup(&fc, true);
    assert_false(aiol_loop_poll(fc.loop, false));
    before = lw_stats(fc.loop);
    run_child(child_notifies, &fc);
    /* Nothing is pending for the parent: not even its notifier runs. */
    assert_false(aiol_loop_poll_deadline(fc.loop,
                                         aiol_mono_time_get() + LW_MS(100)));
    assert_int_equal(lw_stats(fc.loop).callbacks, before.callbacks);
    parent_gets_every_event(&fc);
    case_teardown(&fc);
}

/* A loop with an embedder's wakeup keeps it in the child. */
static int g_wakeups;

static void count_wakeup(void *opaque)
{
    (void)opaque;
    g_wakeups++;
}

static void child_notifies_wakeup_fn(void *arg)
{
    fork_case *fc = arg;

    CHILD_CHECK(aiol_loop_after_fork(fc->loop) == 0);
    g_wakeups = 0;
    aiol_loop_prepare(fc->loop);
    aiol_loop_notify(fc->loop);
    aiol_loop_check(fc->loop);
    CHILD_CHECK(g_wakeups == 1);
    tu_pipe_signal(fc->p[2][1]); /* the parent's pipe: read it here */
    CHILD_CHECK(poll_until_read(fc->loop, &fc->c[2], 1, 1));
    aiol_loop_free(fc->loop);
}

static void test_child_keeps_wakeup_fn(void **state)
{
    fork_case fc;

    (void)state;
    case_setup(&fc, true);
    assert_int_equal(aiol_loop_wakeup_set(fc.loop, count_wakeup, NULL), 0);
    run_child(child_notifies_wakeup_fn, &fc);
    assert_int_equal(fc.c[2].reads, 0); /* the child drained the pipe */
    parent_gets_every_event(&fc);
    case_teardown(&fc);
}

/* --------------------- 4: the embedding fd (poll: its epoll mirror) */

static void test_child_after_fork_keeps_parent_loop_fd(void **state)
{
    fork_case fc;
    struct pollfd pfd = { .events = POLLIN };

    (void)state;
    case_setup(&fc, true);
    pfd.fd = aiol_loop_fd_get(fc.loop);
    assert_true(pfd.fd >= 0);
    run_child(child_changes_handlers, &fc);
    /* The host's view: the loop fd becomes readable for each handler. */
    for (int i = 0; i < NPIPES; i++) {
        assert_int_equal(aiol_loop_fd_get(fc.loop), pfd.fd);
        tu_pipe_signal(fc.p[i][1]);
        aiol_loop_prepare(fc.loop);
        assert_int_equal(poll(&pfd, 1, (int)(EVENT_NS / LW_MS(1))), 1);
        aiol_loop_check(fc.loop);
        aiol_loop_dispatch(fc.loop);
        assert_int_equal(fc.c[i].reads, 1);
    }
    case_teardown(&fc);
}

/* ------------------------- 5: io_uring requests in flight at fork */

#ifdef AIOL_HAVE_IO_URING
typedef struct uread {
    int fd;
    char buf[16];
    int ndone;
    int res;
} uread;

static void uread_prep(struct io_uring_sqe *sqe, void *opaque)
{
    uread *r = opaque;

    io_uring_prep_read(sqe, r->fd, r->buf, sizeof(r->buf), 0);
}

static void uread_done(void *opaque, int res, uint32_t flags)
{
    uread *r = opaque;

    (void)flags;
    r->ndone++;
    r->res = res;
}

typedef struct uring_case {
    fork_case fc;
    int b[2];        /* blocking pipe the parent's read waits on */
    uread rd;
    bool after_fork; /* the child calls aiol_loop_after_fork() first */
} uring_case;

static void child_with_parent_request(void *arg)
{
    uring_case *uc = arg;
    aiol_loop *loop = uc->fc.loop;
    int64_t end = aiol_mono_time_get() + EVENT_NS;
    uread mine;
    int q[2];

    if (!uc->after_fork) {
        aiol_loop_free(loop);
        CHILD_CHECK(uc->rd.ndone == 0);
        return;
    }
    CHILD_CHECK(aiol_loop_after_fork(loop) == 0);
    CHILD_CHECK(aiol_uring_pending_get(loop) == 0); /* dropped: the parent's */
    /* the child's own ring takes requests */
    CHILD_CHECK(pipe2(q, O_CLOEXEC) == 0);
    mine = (uread){ .fd = q[0] };
    CHILD_CHECK(write(q[1], "kid", 3) == 3);
    CHILD_CHECK(aiol_uring_submit(loop, uread_prep, uread_done, &mine,
                                  NULL) == 0);
    while (mine.ndone == 0 && aiol_mono_time_get() < end) {
        aiol_loop_poll_deadline(loop, end);
    }
    CHILD_CHECK(mine.ndone == 1 && mine.res == 3);
    CHILD_CHECK(memcmp(mine.buf, "kid", 3) == 0);
    aiol_loop_free(loop);
    CHILD_CHECK(uc->rd.ndone == 0); /* never called back in the child */
    close(q[0]);
    close(q[1]);
}

static void uring_in_flight_case(bool after_fork)
{
    int64_t end;
    uring_case uc;

    case_setup(&uc.fc, true);
    if (strcmp(aiol_loop_fdmon_get(uc.fc.loop), "io_uring") != 0) {
        case_teardown(&uc.fc);
        skip();
    }
    uc.after_fork = after_fork;
    assert_int_equal(pipe2(uc.b, O_CLOEXEC), 0);
    uc.rd = (uread){ .fd = uc.b[0] };
    assert_int_equal(aiol_uring_submit(uc.fc.loop, uread_prep, uread_done,
                                       &uc.rd, NULL), 0);
    assert_true(aiol_uring_flush(uc.fc.loop) >= 0); /* in the kernel now */
    assert_false(aiol_loop_poll(uc.fc.loop, false)); /* the pipe is empty */
    assert_int_equal(aiol_uring_pending_get(uc.fc.loop), 1);

    run_child(child_with_parent_request, &uc);

    assert_int_equal(uc.rd.ndone, 0);
    assert_int_equal(aiol_uring_pending_get(uc.fc.loop), 1);
    assert_int_equal(write(uc.b[1], "hello", 5), 5);
    end = aiol_mono_time_get() + EVENT_NS;
    while (uc.rd.ndone == 0 && aiol_mono_time_get() < end) {
        aiol_loop_poll_deadline(uc.fc.loop, end);
    }
    assert_int_equal(uc.rd.ndone, 1);
    assert_int_equal(uc.rd.res, 5);
    assert_memory_equal(uc.rd.buf, "hello", 5);
    assert_int_equal(aiol_uring_pending_get(uc.fc.loop), 0);
    assert_false(aiol_loop_poll(uc.fc.loop, false));
    assert_int_equal(uc.rd.ndone, 1);
    parent_gets_every_event(&uc.fc);
    case_teardown(&uc.fc);
    close(uc.b[0]);
    close(uc.b[1]);
}
#else
static void uring_in_flight_case(bool after_fork)
{
    (void)after_fork;
    skip();
}
#endif

static void test_uring_request_in_flight_child_after_fork(void **state)
{
    (void)state;
    uring_in_flight_case(true);
}

static void test_uring_request_in_flight_child_frees(void **state)
{
    (void)state;
    uring_in_flight_case(false);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_child_after_fork_changes_handlers),
        cmocka_unit_test(test_child_after_fork_before_parent_polled),
        cmocka_unit_test(test_child_frees_without_after_fork),
        cmocka_unit_test(test_child_after_fork_frees),
        cmocka_unit_test(test_child_notify_does_not_wake_parent),
        cmocka_unit_test(test_child_keeps_wakeup_fn),
        cmocka_unit_test(test_child_after_fork_keeps_parent_loop_fd),
        cmocka_unit_test(test_uring_request_in_flight_child_after_fork),
        cmocka_unit_test(test_uring_request_in_flight_child_frees),
    };
    char name[64];

    aiol_loop_free(tu_loop_new()); /* exits 77 if the fd monitor cannot run */
    snprintf(name, sizeof(name), "fork-%s",
             tu_fdmon_requested() ? tu_fdmon_requested() : "default");
    return cmocka_run_group_tests_name(name, tests, NULL, NULL);
}
