/* SPDX-License-Identifier: MIT */
/*
 * test_uring_mt.c - io_uring loops whose polling thread changes, and
 * io_uring loops freed by another thread than the one that polled them.
 *
 * A loop is polled by one thread at a time, not by one thread for life
 * (aioloop/loop.h), and aiol_iothread_free() frees the iothread's loop on
 * the caller's thread.  The io_uring monitor binds its ring to the first
 * thread that polls it, so these are the cases where that binding has to
 * give way.
 *
 * The last test drives the loop from a host loop (aioloop/embed.h) while
 * another thread notifies it.
 *
 * The first scenarios run in a forked child, so that a library abort fails
 * the one test instead of killing the suite.  The child checks with CHECK()
 * (cmocka's asserts would longjmp into the child's copy of the runner) and
 * exits 0 when all held; the parent asserts that.  A watchdog timer far
 * ahead (or, for the host's poll(2), a watchdog pipe) turns a wakeup the
 * loop missed into a failure instead of a hang; nothing asserts a duration.
 */
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
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "aioloop/aioloop.h"
#include "aioloop/uring.h"
#include "testutil.h"
#include "testhandler.h"
#include "loopwatch.h"
#include "uringreq.h"

static int child_failures;

#define CHECK(cond)                                                          \
    do {                                                                     \
        if (!(cond)) {                                                       \
            fprintf(stderr, "child %s:%d: check failed: %s\n", __FILE__,     \
                    __LINE__, #cond);                                        \
            child_failures++;                                                \
        }                                                                    \
    } while (0)

/*
 * Blocking polls until *count reaches @p want.  False if a watchdog timer
 * far ahead had to end the wait, even if the count got there then.
 */
static bool child_poll_until(aiol_loop *loop, const int *count, int want)
{
    lw_watchdog wd;

    lw_watchdog_arm(&wd, loop, UR_WATCHDOG_NS);
    while (*count < want && wd.fired == 0) {
        (void)aiol_loop_poll(loop, true);
    }
    return lw_watchdog_free(&wd) == 0 && *count == want;
}

/* Runs @p fn in a forked child; asserts it returned 0 failures. */
typedef struct child_fn {
    void (*fn)(void);
} child_fn;

static void child_entry(void *arg)
{
    ((child_fn *)arg)->fn();
    fflush(stderr);
    exit(child_failures == 0 ? 0 : 1);
}

static void run_in_child(void (*fn)(void))
{
    child_fn c = { fn };
    char err[8192];
    int status = tu_run_child(child_entry, &c, err, sizeof(err));

    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fail_msg("child %s %d: %s",
                 WIFEXITED(status) ? "exited" : "killed by signal",
                 WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status),
                 err);
    }
}

static aiol_loop *child_loop_new(void)
{
    aiol_loop *l = NULL;
    int rc = aiol_loop_new(&l, "io_uring");

    CHECK(rc == 0);
    if (rc != 0) {
        fflush(stderr);
        exit(1);
    }
    return l;
}

static void count_drain(void *opaque)
{
    th *h = opaque;

    h->reads++;
    tu_eventfd_drain(h->fd);
}

/* ------------------------------- free an iothread with a request queued */

typedef struct io_ctx {
    aiol_loop *loop;
    ur_req r;
    char buf[8];
    int rc;
    atomic_int submitted;
} io_ctx;

static void bh_submit(void *opaque)
{
    io_ctx *c = opaque;

    c->rc = aiol_uring_submit(c->loop, ur_prep, ur_done, &c->r, &c->r.h);
    atomic_store(&c->submitted, 1);
}

/*
 * The iothread submits a pipe read that never completes; then
 * aiol_iothread_free() joins it and frees the loop on this thread.  The
 * loop must cancel the read and run its callback (aiol_loop_free()).
 */
static void child_free_iothread_in_flight(void)
{
    static io_ctx c;
    aiol_iothread *t = NULL;
    int p[2];
    char got;

    CHECK(aiol_iothread_new("io_uring", &t) == 0);
    if (t == NULL) {
        return;
    }
    CHECK(pipe2(p, O_CLOEXEC) == 0);
    c.loop = aiol_iothread_loop_get(t);
    ur_req_init(&c.r, c.loop, UR_READ, p[0], c.buf, sizeof(c.buf), 0);
    CHECK(aiol_bh_schedule_oneshot(c.loop, bh_submit, &c) == 0);
    for (int i = 0; i < 10000 && !atomic_load(&c.submitted); i++) {
        lw_sleep_ns(LW_MS(1));
    }
    CHECK(atomic_load(&c.submitted));
    CHECK(c.rc == 0);

    ur_in_free = true;
    aiol_iothread_free(t);
    ur_in_free = false;

    CHECK(c.r.ndone == 1);
    CHECK(c.r.res == -ECANCELED);
    CHECK(c.r.in_free);
    tu_pipe_signal(p[1]);               /* no read left to eat it */
    CHECK(ur_readable(p[0], 0));
    CHECK(read(p[0], &got, 1) == 1);
    close(p[0]);
    close(p[1]);
}

static void test_free_iothread_in_flight(void **state)
{
    (void)state;
    run_in_child(child_free_iothread_in_flight);
}

/* ------------------------------------- another thread takes over polling */

typedef struct handoff {
    aiol_loop *loop;
    th h;                /* eventfd handler, drains */
    ur_req r;              /* a request after the loop came back */
    bool h_ok;
    int bh_runs;
} handoff;

static void bh_count(void *opaque)
{
    ((handoff *)opaque)->bh_runs++;
}

/* Schedules bh_count from this thread once the loop most likely sleeps. */
static void *schedule_later(void *opaque)
{
    handoff *c = opaque;

    lw_sleep_ns(LW_MS(20));
    CHECK(aiol_bh_schedule_oneshot(c->loop, bh_count, c) == 0);
    return NULL;
}

static void *handoff_thread(void *opaque)
{
    handoff *c = opaque;

    tu_eventfd_signal(c->h.fd);
    c->h_ok = child_poll_until(c->loop, &c->h.reads, c->h.reads + 1);
    /* re-arms the fds that fired from this thread, which then exits */
    (void)aiol_loop_poll(c->loop, false);
    return NULL;
}

/*
 * Polled by this thread, then by another one, then by this one again: fd
 * handlers keep firing across both moves.
 */
static void child_handoff(void)
{
    static handoff c;
    pthread_t thr;

    memset(&c, 0, sizeof(c));
    c.loop = child_loop_new();
    th_init(&c.h, c.loop, tu_eventfd());
    CHECK(aiol_fd_set(c.loop, c.h.fd, count_drain, NULL, NULL, &c.h) == 0);
    tu_eventfd_signal(c.h.fd);
    CHECK(child_poll_until(c.loop, &c.h.reads, 1));

    CHECK(pthread_create(&thr, NULL, handoff_thread, &c) == 0);
    CHECK(pthread_join(thr, NULL) == 0);
    CHECK(c.h_ok);
    CHECK(c.h.reads == 2);

    /*
     * And back, after the other thread exited: cross-thread wakeups,
     * handlers and new requests work on this thread again.
     */
    CHECK(pthread_create(&thr, NULL, schedule_later, &c) == 0);
    CHECK(child_poll_until(c.loop, &c.bh_runs, 1));
    CHECK(pthread_join(thr, NULL) == 0);
    tu_eventfd_signal(c.h.fd);
    CHECK(child_poll_until(c.loop, &c.h.reads, 3));
    ur_req_init(&c.r, c.loop, UR_NOP, -1, NULL, 0, 0);
    CHECK(aiol_uring_submit(c.loop, ur_prep, ur_done, &c.r, &c.r.h) == 0);
    CHECK(child_poll_until(c.loop, &c.r.ndone, 1));
    CHECK(c.r.res == 0);
    CHECK(aiol_uring_pending_get(c.loop) == 0);

    CHECK(aiol_fd_remove(c.loop, c.h.fd) == 0);
    aiol_loop_free(c.loop);
    close(c.h.fd);
}

static void *poll_once(void *opaque)
{
    (void)aiol_loop_poll(opaque, false);
    return NULL;
}

/*
 * aioloop/uring.h: a request in flight cannot move to another thread's
 * ring, so a second thread polling the loop then is refused with a
 * message (the child is expected to abort).
 */
static void child_handoff_in_flight(void)
{
    static ur_req r;
    aiol_loop *loop = child_loop_new();
    char buf[4];
    pthread_t thr;
    int p[2];

    CHECK(pipe2(p, O_CLOEXEC) == 0);
    (void)aiol_loop_poll(loop, false);     /* binds the ring to us */
    ur_req_init(&r, loop, UR_READ, p[0], buf, sizeof(buf), 0);
    CHECK(aiol_uring_submit(loop, ur_prep, ur_done, &r, &r.h) == 0);
    (void)aiol_loop_poll(loop, false);     /* in the kernel now */
    CHECK(pthread_create(&thr, NULL, poll_once, loop) == 0);
    CHECK(pthread_join(thr, NULL) == 0);
    fprintf(stderr, "second thread polled with a request in flight\n");
}

/*
 * Polled only by short-lived threads, one after the other.  A new thread
 * often gets the pthread_t (and stack) of the one that just exited, so the
 * ring must not mistake it for its owner.
 */
static void *poll_one_event(void *opaque)
{
    handoff *c = opaque;

    tu_eventfd_signal(c->h.fd);
    c->h_ok = child_poll_until(c->loop, &c->h.reads, c->h.reads + 1);
    return NULL;
}

static void child_sequential_threads(void)
{
    static handoff c;

    memset(&c, 0, sizeof(c));
    c.loop = child_loop_new();
    th_init(&c.h, c.loop, tu_eventfd());
    CHECK(aiol_fd_set(c.loop, c.h.fd, count_drain, NULL, NULL, &c.h) == 0);
    for (int i = 0; i < 4; i++) {
        pthread_t thr;

        CHECK(pthread_create(&thr, NULL, poll_one_event, &c) == 0);
        CHECK(pthread_join(thr, NULL) == 0);
        CHECK(c.h_ok);
        CHECK(c.h.reads == i + 1);
    }
    CHECK(aiol_fd_remove(c.loop, c.h.fd) == 0);
    aiol_loop_free(c.loop);
    close(c.h.fd);
}

static void test_sequential_threads(void **state)
{
    (void)state;
    run_in_child(child_sequential_threads);
}

static void test_handoff(void **state)
{
    (void)state;
    run_in_child(child_handoff);
}

static void handoff_in_flight_child(void *arg)
{
    (void)arg;
    child_handoff_in_flight();
}

static void test_handoff_in_flight(void **state)
{
    char err[1024];
    int status = tu_run_child(handoff_in_flight_child, NULL, err, sizeof(err));

    (void)state;
    assert_true(tu_aborted_with(status, err, "in flight"));
}

/* ----------------------------------- embedded: a host sleeping on get_fd */

typedef struct host_wake {
    aiol_loop *loop;
    int wd_wfd;           /* written only if the host is still asleep */
    atomic_int host_woke;
} host_wake;

static void *notify_then_watch(void *opaque)
{
    host_wake *w = opaque;

    lw_sleep_ns(LW_MS(20));    /* most likely, the host sleeps by now */
    aiol_loop_notify(w->loop);
    for (int i = 0; i < 10000 && !atomic_load(&w->host_woke); i++) {
        lw_sleep_ns(LW_MS(1));
    }
    if (!atomic_load(&w->host_woke)) {
        tu_pipe_signal(w->wd_wfd); /* the notify did not wake it: end it */
    }
    return NULL;
}

/*
 * aioloop/embed.h: between prepare and check, a notify from another thread
 * makes the loop fd readable, so a host sleeping on it wakes up.  The host
 * sleeps with no timeout on the loop fd and a watchdog pipe; it must wake
 * for the loop fd, not the watchdog.
 */
static void test_embed_notify_wakes_host(void **state)
{
    aiol_loop *loop = ur_loop_new();
    static host_wake w;
    int wd[2];
    pthread_t thr;

    (void)state;
    tu_pipe(wd);
    for (int i = 0; i < 3; i++) {
        assert_false(aiol_loop_poll(loop, false));
    }
    for (int round = 0; round < 3; round++) {
        struct pollfd pfd[2] = {
            { .fd = aiol_loop_fd_get(loop), .events = POLLIN },
            { .fd = wd[0], .events = POLLIN },
        };
        int n;

        w.loop = loop;
        w.wd_wfd = wd[1];
        atomic_store(&w.host_woke, 0);
        assert_true(pfd[0].fd >= 0);
        assert_int_equal(aiol_loop_prepare(loop), AIOL_DEADLINE_NONE);
        assert_int_equal(pthread_create(&thr, NULL, notify_then_watch, &w), 0);
        do {
            n = poll(pfd, 2, -1);
        } while (n < 0 && errno == EINTR);
        atomic_store(&w.host_woke, 1);
        assert_int_equal(pthread_join(thr, NULL), 0);
        (void)aiol_loop_check(loop);
        (void)aiol_loop_dispatch(loop);
        assert_false(pfd[1].revents & POLLIN);  /* the watchdog ended it */
        assert_true(pfd[0].revents & POLLIN);
    }
    aiol_loop_free(loop);
    close(wd[0]);
    close(wd[1]);
}

#define T(f) cmocka_unit_test_setup(f, ur_setup)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_handoff),
        T(test_sequential_threads),
        T(test_handoff_in_flight),
        T(test_free_iothread_in_flight),
        T(test_embed_notify_wakes_host),
    };
    return UR_RUN_GROUP("uring-mt", tests);
}
