/* SPDX-License-Identifier: MIT */
/*
 * test_iothread.c - a loop on a thread of its own (aiol_iothread), run once
 * per fd monitor.
 *
 * The test threads hand the iothread work through the cross-thread calls
 * (bottom halves, fd handler changes) and wait for it with C11 atomics,
 * spinning with sched_yield() under a generous cap so that lost work fails
 * the test instead of hanging it.  Callbacks record the thread they ran on.
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
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "aioloop/aioloop.h"
#include "testutil.h"
#include "loopwatch.h"

/* Waits up to 10 s for *@p v >= @p want; false on timeout. */
static bool wait_for(atomic_long *v, long want)
{
    int64_t end = aiol_mono_time_get() + LW_MS(10000);

    while (atomic_load(v) < want) {
        if (aiol_mono_time_get() > end) {
            return false;
        }
        sched_yield();
    }
    return true;
}

static aiol_iothread *iothread_new_or_skip(void)
{
    aiol_iothread *t = NULL;
    int rc = aiol_iothread_new(tu_fdmon_requested(), &t);

    if (rc == -ENOSYS || rc == -EPERM || rc == -EOPNOTSUPP) {
        skip();
    }
    assert_int_equal(rc, 0);
    assert_non_null(t);
    assert_non_null(aiol_iothread_loop_get(t));
    if (tu_fdmon_requested() != NULL) {
        assert_string_equal(aiol_loop_fdmon_get(aiol_iothread_loop_get(t)),
                            tu_fdmon_requested());
    }
    return t;
}

/* ------------------------------------------------------------ lifetime */

static void test_iothread_new_free(void **state)
{
    (void)state;
    /* freed right after creation: the thread may not have polled yet */
    for (int i = 0; i < 50; i++) {
        aiol_iothread_free(iothread_new_or_skip());
    }
    /* freed while it sleeps in a blocking poll */
    for (int i = 0; i < 5; i++) {
        aiol_iothread *t = iothread_new_or_skip();

        lw_sleep_ns(LW_MS(5));
        aiol_iothread_free(t);
    }
    aiol_iothread_free(NULL);
}

/* --------------------------------------------------- BHs from threads */

#define NPRODUCERS 3
#define NBH 10000              /* in total, over the producers */

typedef struct bhctx {
    aiol_loop *loop;
    pthread_t main;
    atomic_long runs[NPRODUCERS];
    atomic_long total;
    atomic_long on_main;        /* callbacks run on the main thread: bugs */
    atomic_bool seen_thread;
    pthread_t iothread;         /* first thread a callback ran on */
    atomic_long other_thread;   /* callbacks on a different thread: bugs */
} bhctx;

typedef struct bhjob {
    bhctx *ctx;
    int producer;
    long count;
} bhjob;

static bhctx g_ctx;
static bhjob g_jobs[NPRODUCERS];

static void note_thread(bhctx *ctx)
{
    if (pthread_equal(pthread_self(), ctx->main)) {
        atomic_fetch_add(&ctx->on_main, 1);
    }
    /* only the iothread writes ctx->iothread: no race */
    if (!atomic_load_explicit(&ctx->seen_thread, memory_order_relaxed)) {
        ctx->iothread = pthread_self();
        atomic_store_explicit(&ctx->seen_thread, true, memory_order_relaxed);
    } else if (!pthread_equal(pthread_self(), ctx->iothread)) {
        atomic_fetch_add(&ctx->other_thread, 1);
    }
}

static void cb_oneshot(void *opaque)
{
    bhjob *job = opaque;

    note_thread(job->ctx);
    atomic_fetch_add(&job->ctx->runs[job->producer], 1);
    atomic_fetch_add(&job->ctx->total, 1);
}

static void *producer(void *opaque)
{
    bhjob *job = opaque;

    for (long i = 0; i < job->count; i++) {
        if (aiol_bh_schedule_oneshot(job->ctx->loop, cb_oneshot, job) != 0) {
            abort();
        }
        if (i % 64 == 0) {
            sched_yield();
        }
    }
    return NULL;
}

static void test_iothread_bh_from_threads(void **state)
{
    aiol_iothread *t = iothread_new_or_skip();
    pthread_t th[NPRODUCERS];
    long want = 0;

    (void)state;
    memset(&g_ctx, 0, sizeof(g_ctx));
    g_ctx.loop = aiol_iothread_loop_get(t);
    g_ctx.main = pthread_self();
    for (int p = 0; p < NPRODUCERS; p++) {
        long n = NBH / NPRODUCERS + (p == 0 ? NBH % NPRODUCERS : 0);

        g_jobs[p] = (bhjob){ .ctx = &g_ctx, .producer = p, .count = n };
        want += g_jobs[p].count;
    }
    assert_int_equal(want, NBH);
    /* producer 0 runs on the main thread, the others on their own */
    for (int p = 1; p < NPRODUCERS; p++) {
        assert_int_equal(pthread_create(&th[p], NULL, producer, &g_jobs[p]),
                         0);
    }
    producer(&g_jobs[0]);
    for (int p = 1; p < NPRODUCERS; p++) {
        pthread_join(th[p], NULL);
    }
    assert_true(wait_for(&g_ctx.total, NBH));
    for (int p = 0; p < NPRODUCERS; p++) {
        assert_int_equal(atomic_load(&g_ctx.runs[p]), g_jobs[p].count);
    }
    assert_int_equal(atomic_load(&g_ctx.on_main), 0);
    assert_int_equal(atomic_load(&g_ctx.other_thread), 0);
    /* all one-shots ran and were freed: free does not abort */
    aiol_iothread_free(t);
    assert_int_equal(atomic_load(&g_ctx.total), NBH);
}

/* One bottom half, rescheduled by the main thread after each run. */
typedef struct pingbh {
    aiol_bh *bh;
    atomic_long runs;
} pingbh;

static void cb_ping(void *opaque)
{
    atomic_fetch_add(&((pingbh *)opaque)->runs, 1);
}

static void test_iothread_bh_reschedule_roundtrips(void **state)
{
    aiol_iothread *t = iothread_new_or_skip();
    static pingbh p;

    (void)state;
    atomic_store(&p.runs, 0);
    assert_int_equal(aiol_bh_new(aiol_iothread_loop_get(t), cb_ping, &p, &p.bh),
                     0);
    for (long i = 1; i <= NBH; i++) {
        aiol_bh_schedule(p.bh);
        assert_true(wait_for(&p.runs, i));
    }
    assert_int_equal(atomic_load(&p.runs), NBH);
    aiol_bh_free(p.bh);
    aiol_iothread_free(t);
}

/* ------------------------------------------- fd handler from outside */

typedef struct fdctx {
    int fd;
    pthread_t main;
    atomic_long reads;
    atomic_long on_main;
} fdctx;

static void cb_fd_read(void *opaque)
{
    fdctx *c = opaque;

    if (pthread_equal(pthread_self(), c->main)) {
        atomic_fetch_add(&c->on_main, 1);
    }
    tu_eventfd_drain(c->fd);
    atomic_fetch_add(&c->reads, 1);
}

static void cb_flag(void *opaque)
{
    atomic_fetch_add((atomic_long *)opaque, 1);
}

/* Waits until the iothread has finished an iteration started after now. */
static void iothread_sync(aiol_loop *loop)
{
    static atomic_long done;
    long before = atomic_load(&done);

    assert_int_equal(aiol_bh_schedule_oneshot(loop, cb_flag, &done), 0);
    assert_true(wait_for(&done, before + 1));
}

static void test_iothread_fd_handler_from_other_thread(void **state)
{
    aiol_iothread *t = iothread_new_or_skip();
    aiol_loop *loop = aiol_iothread_loop_get(t);
    static fdctx c;

    (void)state;
    c.fd = tu_eventfd();
    c.main = pthread_self();
    atomic_store(&c.reads, 0);
    atomic_store(&c.on_main, 0);
    for (long round = 1; round <= 100; round++) {
        /*
         * Let the iothread fall asleep in its blocking poll (ppoll on a
         * copy of the fd array for the poll fd monitor) before the handler
         * appears; sometimes signal first, sometimes after.
         */
        if (round % 10 == 1) {
            lw_sleep_ns(LW_MS(2));
        }
        if (round % 2) {
            tu_eventfd_signal(c.fd);
        }
        assert_int_equal(aiol_fd_set(loop, c.fd, cb_fd_read, NULL, NULL, &c),
                         0);
        if (!(round % 2)) {
            tu_eventfd_signal(c.fd);
        }
        assert_true(wait_for(&c.reads, round));
        assert_int_equal(aiol_fd_remove(loop, c.fd), 0);
        /* after a full iteration, the removed handler is gone for good */
        iothread_sync(loop);
        tu_eventfd_signal(c.fd);
        iothread_sync(loop);
        iothread_sync(loop);
        assert_int_equal(atomic_load(&c.reads), round);
        tu_eventfd_drain(c.fd);
    }
    assert_int_equal(atomic_load(&c.on_main), 0);
    aiol_iothread_free(t);
    close(c.fd);
}

/*
 * Several handlers set back to back from another thread: the monitor may
 * skip the wake of a change that joins deferred ones an earlier change
 * already woke the poller for (AIOL__UPDATE_OWED).  Each round lets the
 * iothread fall asleep first, then sets NFD already-readable fds, with a
 * pause between them in some rounds so that the iothread flushes the
 * first change and sleeps again before the next one arrives: that one
 * must wake it anew.  A lost wake leaves an fd unread and fails the wait.
 */
static void test_iothread_fd_handlers_in_a_row(void **state)
{
    enum { NFD = 4 };
    aiol_iothread *t = iothread_new_or_skip();
    aiol_loop *loop = aiol_iothread_loop_get(t);
    static fdctx c[NFD];

    (void)state;
    for (int i = 0; i < NFD; i++) {
        c[i].fd = tu_eventfd();
        c[i].main = pthread_self();
        atomic_store(&c[i].reads, 0);
        atomic_store(&c[i].on_main, 0);
    }
    for (long round = 1; round <= 60; round++) {
        lw_sleep_ns(LW_MS(1)); /* the iothread sleeps in its wait */
        for (int i = 0; i < NFD; i++) {
            tu_eventfd_signal(c[i].fd);
            assert_int_equal(aiol_fd_set(loop, c[i].fd, cb_fd_read, NULL,
                                         NULL, &c[i]), 0);
            if (round % 3 == 0) {
                lw_sleep_ns(LW_MS(1)); /* it flushes, then sleeps again */
            }
        }
        for (int i = 0; i < NFD; i++) {
            assert_true(wait_for(&c[i].reads, round));
        }
        for (int i = 0; i < NFD; i++) {
            assert_int_equal(aiol_fd_remove(loop, c[i].fd), 0);
        }
        iothread_sync(loop);
    }
    for (int i = 0; i < NFD; i++) {
        assert_int_equal(atomic_load(&c[i].on_main), 0);
    }
    aiol_iothread_free(t);
    for (int i = 0; i < NFD; i++) {
        close(c[i].fd);
    }
}

typedef struct on_thread {
    pthread_t thread;
    int runs;
} on_thread;

static void record_thread(void *opaque)
{
    on_thread *o = opaque;

    o->thread = pthread_self();
    o->runs++;
}

/*
 * aiol_bh_schedule_wait() runs its callback on the iothread, and has when
 * it returns: what the callback wrote is read here with no other sync
 * (TSan checks the hand-over).
 */
static void test_iothread_schedule_wait(void **state)
{
    aiol_iothread *it;
    on_thread o = { .runs = 0 };

    (void)state;
    assert_int_equal(aiol_iothread_new(tu_fdmon_requested(), &it), 0);
    for (int i = 1; i <= 20; i++) {
        assert_int_equal(aiol_bh_schedule_wait(aiol_iothread_loop_get(it),
                                               record_thread, &o), 0);
        assert_int_equal(o.runs, i);
        assert_false(pthread_equal(o.thread, pthread_self()));
    }
    aiol_iothread_free(it);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_iothread_new_free),
        cmocka_unit_test(test_iothread_bh_from_threads),
        cmocka_unit_test(test_iothread_bh_reschedule_roundtrips),
        cmocka_unit_test(test_iothread_fd_handler_from_other_thread),
        cmocka_unit_test(test_iothread_fd_handlers_in_a_row),
        cmocka_unit_test(test_iothread_schedule_wait),
    };
    char name[64];

    aiol_loop_free(tu_loop_new());
    snprintf(name, sizeof(name), "iothread-%s",
             tu_fdmon_requested() ? tu_fdmon_requested() : "default");
    return cmocka_run_group_tests_name(name, tests, NULL, NULL);
}
