/* SPDX-License-Identifier: MIT */
/*
 * test_confined.c - thread-confined loops (AIOL_LOOP_CONFINED, loop.h).
 *
 * What a confined loop promises, checked by counting and by running the
 * cross-thread entries it keeps:
 *   - its own thread's handler changes, bottom halves, timers and polls
 *     take no lock: the loop's own lock counts its takes (lock_takes,
 *     libaioloop/internal.h), and pthread_mutex_lock() is wrapped
 *     at link time and counted (fault.h), so no other lock creeps in; a
 *     shared loop's count shows the check can fail;
 *   - a loop made on one thread and polled on another is that thread's
 *     from its first poll or its aiol_loop_owner_set(), and any thread
 *     frees it after a join;
 *   - aiol_loop_notify(), aiol_bh_schedule_oneshot(),
 *     aiol_bh_schedule_wait() and bottom halves of aiol_bh_new_shared()
 *     work from other threads (also under TSan);
 *   - an unknown creation flag is refused.
 * The other suites run on confined loops too (AIOLOOP_TEST_CONFINED=1,
 * tests/meson.build); test_contracts.c checks that misuse aborts.
 * Once per fd monitor.
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
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include "../libaioloop/internal.h"
#include "fault.h"
#include "loopwatch.h"
#include "testutil.h"

static aiol_loop *loop_new(unsigned flags)
{
    aiol_loop *loop = NULL;

    assert_int_equal(aiol_loop_new_flags(&loop, tu_fdmon_requested(), flags),
                     0);
    return loop;
}

static void on_count(void *opaque)
{
    atomic_fetch_add((atomic_int *)opaque, 1);
}

/*
 * What an embedder does on its own loop: handlers set, re-set and
 * removed, a bottom half scheduled and run, a timer armed and fired.
 * Returns the locks it took: the loop's own and pthread mutexes.
 */
static long own_thread_work(aiol_loop *loop)
{
    uint64_t takes0;
    aiol_clock *c = aiol_loop_clock_get(loop);
    atomic_int bh_runs = 0, timer_runs = 0;
    int fds[16];
    aiol_timer *t;
    aiol_bh *bh;
    long locks;

    for (int i = 0; i < 16; i++) {
        fds[i] = tu_eventfd();
    }
    assert_int_equal(aiol_bh_new(loop, on_count, &bh_runs, &bh), 0);
    assert_int_equal(aiol_timer_new(c, on_count, &timer_runs, &t), 0);
    takes0 = loop->lock_takes;
    tf_fail_at(TF_MUTEX_LOCK, LONG_MAX, 0); /* (counts, never fails) */
    for (int round = 0; round < 4; round++) {
        for (int i = 0; i < 16; i++) {
            assert_int_equal(aiol_fd_set(loop, fds[i], on_count, NULL, NULL,
                                         &bh_runs), 0);
        }
        assert_true(aiol_fd_is_set(loop, fds[3]));
        aiol_bh_schedule(bh);
        assert_int_equal(aiol_timer_mod(t, aiol_clock_time_get(c)), 0);
        while (atomic_load(&timer_runs) <= round) {
            aiol_loop_poll(loop, true);
        }
        for (int i = 0; i < 16; i++) {
            assert_int_equal(aiol_fd_remove(loop, fds[i]), 0);
        }
        aiol_loop_poll(loop, false);
    }
    locks = tf_count(TF_MUTEX_LOCK);
    tf_disarm();
    locks += (long)(loop->lock_takes - takes0);
    assert_int_equal(atomic_load(&bh_runs), 4);
    aiol_timer_free(t);
    aiol_bh_free(bh);
    aiol_loop_poll(loop, false);
    for (int i = 0; i < 16; i++) {
        close(fds[i]);
    }
    return locks;
}

static void test_own_thread_takes_no_lock(void **state)
{
    aiol_loop *confined = loop_new(AIOL_LOOP_CONFINED);
    aiol_loop *shared = loop_new(0);

    (void)state;
    assert_true(aiol_loop_is_confined(confined));
    assert_false(aiol_loop_is_confined(shared));
    assert_int_equal(own_thread_work(confined), 0);
    assert_true(own_thread_work(shared) > 0); /* the count can fail */
    aiol_loop_free(confined);
    aiol_loop_free(shared);
}

/* ------------------------------------------------------------ handover */

typedef struct handover {
    aiol_loop *loop;
    int fd;
    bool by_owner_set;
    atomic_int reads;
} handover;

static void on_read_drain(void *opaque)
{
    handover *h = opaque;

    tu_eventfd_drain(h->fd);
    atomic_fetch_add(&h->reads, 1);
}

/*
 * The second thread: takes the loop (by a poll, or aiol_loop_owner_set()
 * before any poll), then changes it.
 */
static void *handover_thread(void *opaque)
{
    handover *h = opaque;

    if (h->by_owner_set) {
        aiol_loop_owner_set(h->loop);
    } else {
        aiol_loop_poll(h->loop, false);
    }
    assert_int_equal(aiol_fd_set(h->loop, h->fd, on_read_drain, NULL, NULL,
                                 h), 0);
    tu_eventfd_signal(h->fd);
    while (atomic_load(&h->reads) == 0) {
        aiol_loop_poll(h->loop, true);
    }
    assert_int_equal(aiol_fd_remove(h->loop, h->fd), 0);
    return NULL;
}

/*
 * Made here, run there: the poller's first poll makes the loop its own
 * (a debug build would abort its aiol_fd_set() otherwise), and this thread
 * frees it after the join.
 */
static void handover_run(bool by_owner_set)
{
    handover h = { .loop = loop_new(AIOL_LOOP_CONFINED), .fd = tu_eventfd(),
                   .by_owner_set = by_owner_set };
    pthread_t t;

    assert_int_equal(pthread_create(&t, NULL, handover_thread, &h), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(atomic_load(&h.reads), 1);
    aiol_loop_free(h.loop);
    close(h.fd);
}

static void test_handover_to_poller(void **state)
{
    (void)state;
    handover_run(false);
}

/* The same, taken by aiol_loop_owner_set() before the thread polls. */
static void test_handover_by_owner_set(void **state)
{
    (void)state;
    handover_run(true);
}

/* ------------------------------------------------- cross-thread entries */

typedef struct xthread {
    aiol_loop *loop;
    aiol_bh *shared;           /* aiol_bh_new_shared(), kicked from there */
    atomic_int shared_runs, oneshot_runs, waited_runs;
    atomic_bool stop;
} xthread;

static void on_waited(void *opaque)
{
    xthread *x = opaque;

    atomic_fetch_add(&x->waited_runs, 1);
}

/*
 * The other thread: each cross-thread entry in turn, while the loop's
 * thread sits in blocking polls that only these can end.
 */
static void *xthread_main(void *opaque)
{
    xthread *x = opaque;

    for (int i = 0; i < 50; i++) {
        aiol_bh_schedule(x->shared);
        while (atomic_load(&x->shared_runs) <= i) {
            usleep(100);
        }
        assert_int_equal(aiol_bh_schedule_oneshot(x->loop, on_count,
                                                  &x->oneshot_runs), 0);
        assert_int_equal(aiol_bh_schedule_wait(x->loop, on_waited, x), 0);
        assert_int_equal(atomic_load(&x->waited_runs), i + 1);
        aiol_loop_notify(x->loop);
    }
    atomic_store(&x->stop, true);
    aiol_loop_notify(x->loop);
    return NULL;
}

static void test_cross_thread_entries(void **state)
{
    static xthread x; /* static: a failing test must not strand a thread */
    lw_watchdog w;
    pthread_t t;

    (void)state;
    x.loop = loop_new(AIOL_LOOP_CONFINED);
    atomic_init(&x.shared_runs, 0);
    atomic_init(&x.oneshot_runs, 0);
    atomic_init(&x.waited_runs, 0);
    atomic_init(&x.stop, false);
    assert_int_equal(aiol_bh_new_shared(x.loop, on_count, &x.shared_runs,
                                        &x.shared), 0);
    lw_watchdog_arm(&w, x.loop, LW_MS(20000));
    assert_int_equal(pthread_create(&t, NULL, xthread_main, &x), 0);
    while (!atomic_load(&x.stop) && w.fired == 0) {
        aiol_loop_poll(x.loop, true);
    }
    assert_int_equal(w.fired, 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    while (aiol_loop_poll(x.loop, false)) {
    }
    assert_int_equal(atomic_load(&x.shared_runs), 50);
    assert_int_equal(atomic_load(&x.oneshot_runs), 50);
    assert_int_equal(atomic_load(&x.waited_runs), 50);
    assert_int_equal(lw_watchdog_free(&w), 0);
    aiol_bh_free(x.shared);
    aiol_loop_poll(x.loop, false);
    aiol_loop_free(x.loop);
}

static void test_unknown_flag_refused(void **state)
{
    aiol_loop *loop = (aiol_loop *)&loop; /* must stay untouched */

    (void)state;
    assert_int_equal(aiol_loop_new_flags(&loop, tu_fdmon_requested(),
                                         AIOL_LOOP_CONFINED | (1u << 7)),
                     -EINVAL);
    assert_ptr_equal(loop, (aiol_loop *)&loop);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_own_thread_takes_no_lock),
        cmocka_unit_test(test_handover_to_poller),
        cmocka_unit_test(test_handover_by_owner_set),
        cmocka_unit_test(test_cross_thread_entries),
        cmocka_unit_test(test_unknown_flag_refused),
    };

    aiol_loop_free(tu_loop_new()); /* exits 77 if the fd monitor cannot run */
    return cmocka_run_group_tests_name("confined", tests, NULL, NULL);
}
