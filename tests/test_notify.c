/* SPDX-License-Identifier: MIT */
/*
 * test_notify.c - aiol_loop_notify() and the notify_me protocol, run once
 * per fd monitor.
 *
 * The loop's counters tell what a notify cost: notify_kicks counts writes
 * to the wakeup eventfd, fdmon_waits the waits on the fd monitor.  A
 * blocking poll that should end carries a watchdog timer, so a lost wakeup
 * fails the test (the poll would return true, from the watchdog) instead
 * of hanging it.
 *
 * A fresh loop may have a wakeup pending (the poll fd monitor notifies itself
 * when a handler is set, its own notifier included), so tests that count
 * start with one non-blocking poll.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "aioloop/aioloop.h"
#include "testutil.h"
#include "loopwatch.h"

static aiol_loop *settled_loop(void)
{
    aiol_loop *loop = tu_loop_new();

    assert_false(aiol_loop_poll(loop, false));
    return loop;
}

/* ------------------------------------------------- not blocked: free */

static void test_notify_unblocked_costs_no_syscall(void **state)
{
    aiol_loop *loop = settled_loop();
    aiol_loop_stats before, after;
    lw_watchdog w;

    (void)state;
    before = lw_stats(loop);
    aiol_loop_notify(loop);
    aiol_loop_notify(loop);
    aiol_loop_notify(loop);
    assert_int_equal(lw_stats(loop).notify_kicks, before.notify_kicks);

    /*
     * The next blocking poll does not sleep: exactly one iteration, no
     * progress (only internal work), and still no eventfd write.  Its
     * zero-timeout look is skipped: the loop has no fd but its notifier.
     */
    lw_watchdog_arm(&w, loop, LW_MS(5000));
    assert_false(aiol_loop_poll(loop, true));
    assert_int_equal(lw_watchdog_free(&w), 0);
    after = lw_stats(loop);
    assert_int_equal(after.iterations - before.iterations, 1);
    assert_int_equal(after.fdmon_waits - before.fdmon_waits, 0);
    assert_int_equal(after.notify_kicks, before.notify_kicks);
    assert_int_equal(after.timer_runs, before.timer_runs);
    aiol_loop_free(loop);
}

static void test_notify_consumed_once(void **state)
{
    aiol_loop *loop = settled_loop();
    aiol_loop_stats before;
    lw_watchdog w;

    (void)state;
    /*
     * One pending notify ends one blocking poll; the one after it sleeps
     * again, here until a timer 50 ms ahead (the first poll returns long
     * before it: the watchdog would make the poll return true).
     */
    aiol_loop_notify(loop);
    before = lw_stats(loop);
    lw_watchdog_arm(&w, loop, LW_MS(50));
    assert_false(aiol_loop_poll(loop, true));
    assert_int_equal(w.fired, 0);
    assert_true(aiol_loop_poll(loop, true));
    assert_int_equal(w.fired, 1);
    assert_int_equal(lw_stats(loop).iterations - before.iterations, 2);
    assert_int_equal(lw_stats(loop).notify_kicks, before.notify_kicks);
    lw_watchdog_free(&w);
    aiol_loop_free(loop);
}

/* ------------------------------------------- non-blocking: one wait */

static void on_never(void *opaque)
{
    (void)opaque;
    fail_msg("a handler of an fd never made readable ran");
}

/*
 * A non-blocking poll looks at the fds once (epoll, poll: one wait; io_uring
 * reads its completion ring) while the loop has a handler of its user, and
 * not at all while it has only wakeup fds (its notifier): nothing there
 * could be reported.
 */
static void test_notify_nonblocking_poll_one_wait(void **state)
{
    aiol_loop *loop = settled_loop();
    aiol_loop_stats before, after;
    int efd = tu_eventfd();

    (void)state;
    for (int i = 0; i < 20; i++) {
        if (i == 10) {
            assert_int_equal(aiol_fd_set(loop, efd, on_never, NULL, NULL,
                                         NULL), 0);
            aiol_loop_poll(loop, false); /* (its registration) */
        }
        before = lw_stats(loop);
        if (i % 2) {
            aiol_loop_notify(loop);    /* a pending notify changes nothing */
        }
        assert_false(aiol_loop_poll(loop, false));
        after = lw_stats(loop);
        assert_int_equal(after.iterations - before.iterations, 1);
        assert_int_equal(after.fdmon_waits - before.fdmon_waits,
                         i < 10 ? 0 : lw_idle_look_waits(loop));
        assert_int_equal(after.notify_kicks, before.notify_kicks);
        assert_int_equal(after.callbacks - before.callbacks, 0);
    }
    assert_int_equal(aiol_fd_remove(loop, efd), 0);
    aiol_loop_free(loop);
    close(efd);
}

/* ------------------------------------------------------ cross-thread */

typedef struct notifier {
    aiol_loop *loop;
    int64_t delay_ns;
    int count;               /* notifies to send after the delay */
    atomic_bool done;
} notifier;

static void *thread_notify(void *opaque)
{
    notifier *n = opaque;

    lw_sleep_ns(n->delay_ns);
    for (int i = 0; i < n->count; i++) {
        aiol_loop_notify(n->loop);
    }
    /*
     * State first, then the notify that announces it: a notify only
     * promises that the poll in progress (or the next one) returns, so the
     * loop may consume the burst and miss a flag stored after it.
     */
    atomic_store(&n->done, true);
    aiol_loop_notify(n->loop);
    return NULL;
}

static void test_notify_cross_thread_wakes_blocking_poll(void **state)
{
    aiol_loop *loop = settled_loop();
    static notifier n;
    aiol_loop_stats before;
    lw_watchdog w;
    pthread_t t;

    (void)state;
    n.loop = loop;
    n.delay_ns = LW_MS(5);
    n.count = 0;        /* just the final notify */
    for (int round = 0; round < 5; round++) {
        atomic_store(&n.done, false);
        before = lw_stats(loop);
        lw_watchdog_arm(&w, loop, LW_MS(5000));
        assert_int_equal(pthread_create(&t, NULL, thread_notify, &n), 0);
        assert_false(aiol_loop_poll(loop, true));
        pthread_join(t, NULL);
        assert_int_equal(lw_watchdog_free(&w), 0);
        /* one eventfd write if the loop was asleep, none if not yet */
        assert_true(lw_stats(loop).notify_kicks - before.notify_kicks <= 1);
        assert_int_equal(lw_stats(loop).iterations - before.iterations, 1);
    }
    aiol_loop_free(loop);
}

/*
 * A bottom half that polls, blocking, inside the iteration whose wait a
 * kick ended: bottom halves run before the fd handlers, so the wakeup
 * fd's own handler has not drained it yet.  A notify from another thread
 * must still wake that nested poll (on io_uring, whose poll of the
 * wakeup fd reports only new writes, a kick left undrained made later
 * notifies skip their write, and the poll slept on).
 */
typedef struct nested_bh {
    aiol_loop *loop;
    aiol_bh *bh;
    atomic_int stage; /* 1: the nested poll began; 2: the thread notifies */
} nested_bh;

static void bh_polls_blocking(void *opaque)
{
    nested_bh *nb = opaque;

    atomic_store(&nb->stage, 1);
    while (atomic_load(&nb->stage) < 2) {
        aiol_loop_poll(nb->loop, true);
    }
}

static void *thread_kicks_then_notifies(void *opaque)
{
    nested_bh *nb = opaque;

    lw_sleep_ns(LW_MS(20)); /* the loop sleeps */
    aiol_bh_schedule(nb->bh); /* a kick ends its wait */
    while (atomic_load(&nb->stage) < 1) {
        sched_yield();
    }
    lw_sleep_ns(LW_MS(20)); /* the nested poll sleeps */
    atomic_store(&nb->stage, 2);
    aiol_loop_notify(nb->loop);
    return NULL;
}

static void test_notify_wakes_poll_nested_in_bottom_half(void **state)
{
    aiol_loop *loop = settled_loop();
    static nested_bh nb;
    lw_watchdog w;
    pthread_t t;

    (void)state;
    nb.loop = loop;
    assert_int_equal(aiol_bh_new_shared(loop, bh_polls_blocking, &nb, &nb.bh),
                     0);
    for (int round = 0; round < 3; round++) {
        atomic_store(&nb.stage, 0);
        lw_watchdog_arm(&w, loop, LW_MS(5000));
        assert_int_equal(pthread_create(&t, NULL, thread_kicks_then_notifies,
                                        &nb), 0);
        while (atomic_load(&nb.stage) < 2) {
            aiol_loop_poll(loop, true);
        }
        pthread_join(t, NULL);
        assert_int_equal(lw_watchdog_free(&w), 0); /* it never slept on */
    }
    aiol_bh_free(nb.bh);
    aiol_loop_free(loop);
}

static void test_notify_many_while_blocked_few_kicks(void **state)
{
    aiol_loop *loop = settled_loop();
    static notifier n;
    aiol_loop_stats before, after;
    pthread_t t;

    (void)state;
    /* a burst while the loop sleeps: the first write wakes it, the rest
     * ride along until the loop blocks again */
    n.loop = loop;
    n.delay_ns = LW_MS(5);
    n.count = 1000;
    for (int round = 0; round < 3; round++) {
        lw_watchdog w;

        atomic_store(&n.done, false);
        before = lw_stats(loop);
        lw_watchdog_arm(&w, loop, LW_MS(5000));
        assert_int_equal(pthread_create(&t, NULL, thread_notify, &n), 0);
        while (!atomic_load(&n.done)) {
            assert_false(aiol_loop_poll(loop, true));
        }
        pthread_join(t, NULL);
        assert_int_equal(lw_watchdog_free(&w), 0);
        after = lw_stats(loop);
        /*
         * At most one write per wakeup: a write needs the loop to drain
         * the eventfd before the next one.  (When the loop gets to run
         * during the burst it may block again and earn another write; when
         * it does not, the 1001 notifies cost at most 2 writes.)
         */
        assert_true(after.notify_kicks - before.notify_kicks <=
                    after.iterations - before.iterations + 1);
        assert_true(after.notify_kicks - before.notify_kicks < 1001);
        /* consume what the burst left pending */
        aiol_loop_poll(loop, false);
    }

    /*
     * A notifier hammering while the loop keeps blocking: each write needs
     * a drain in between, so kicks never exceed iterations + 1.
     */
    n.delay_ns = 0;
    n.count = 200000;
    atomic_store(&n.done, false);
    before = lw_stats(loop);
    assert_int_equal(pthread_create(&t, NULL, thread_notify, &n), 0);
    while (!atomic_load(&n.done)) {
        aiol_loop_poll(loop, true);
    }
    pthread_join(t, NULL);
    after = lw_stats(loop);
    assert_true(after.notify_kicks - before.notify_kicks <=
                after.iterations - before.iterations + 1);
    assert_true(after.notify_kicks - before.notify_kicks < 200000 / 2);
    aiol_loop_free(loop);
}

/* Notifies from a thread while the owner polls non-blocking: no write. */
static void test_notify_never_kicks_nonblocking_poller(void **state)
{
    aiol_loop *loop = settled_loop();
    static notifier n;
    pthread_t t;
    aiol_loop_stats before;

    (void)state;
    n.loop = loop;
    n.delay_ns = 0;
    n.count = 100000;
    atomic_store(&n.done, false);
    before = lw_stats(loop);
    assert_int_equal(pthread_create(&t, NULL, thread_notify, &n), 0);
    while (!atomic_load(&n.done)) {
        aiol_loop_poll(loop, false);
        sched_yield();
    }
    pthread_join(t, NULL);
    assert_int_equal(lw_stats(loop).notify_kicks, before.notify_kicks);
    aiol_loop_free(loop);
}

/* ------------------------------------- signals (AIOL_LOOP_INTERRUPTIBLE) */

static atomic_int sig_seen;

static void on_sigusr1(int sig)
{
    (void)sig;
    atomic_fetch_add(&sig_seen, 1);
}

typedef struct signaller {
    aiol_loop *loop;
    pthread_t target;
    atomic_int returned; /* the poll came back */
    atomic_int notified; /* the thread's notify was sent */
} signaller;

/*
 * Signals the polling thread every 2 ms (a signal handled just before the
 * wait begins does not end it) until its poll returns or 200 ms passed,
 * then notifies it.
 */
static void *thread_signals(void *opaque)
{
    signaller *sg = opaque;

    for (int i = 0; i < 100 && !atomic_load(&sg->returned); i++) {
        pthread_kill(sg->target, SIGUSR1);
        lw_sleep_ns(LW_MS(2));
    }
    atomic_store(&sg->notified, 1);
    aiol_loop_notify(sg->loop);
    return NULL;
}

/* Polls blocking while another thread signals; true if a signal ended it. */
static bool poll_under_signals(unsigned flags)
{
    aiol_loop *loop = tu_loop_new_flags(flags);
    struct sigaction sa = {.sa_handler = on_sigusr1}, old;
    signaller sg = {.loop = loop, .target = pthread_self()};
    lw_watchdog w;
    pthread_t t;
    bool ended_by_signal;

    assert_false(aiol_loop_poll(loop, false));
    sigemptyset(&sa.sa_mask); /* (no SA_RESTART: as an interpreter's) */
    assert_int_equal(sigaction(SIGUSR1, &sa, &old), 0);
    atomic_store(&sig_seen, 0);
    lw_watchdog_arm(&w, loop, LW_MS(5000));
    assert_int_equal(pthread_create(&t, NULL, thread_signals, &sg), 0);
    while (!atomic_load(&sg.notified) && atomic_load(&sig_seen) == 0) {
        sched_yield(); /* (the first signal has not come: no wait yet) */
    }
    aiol_loop_poll(loop, true);
    ended_by_signal = !atomic_load(&sg.notified);
    atomic_store(&sg.returned, 1);
    pthread_join(t, NULL);
    assert_int_equal(lw_watchdog_free(&w), 0);
    assert_true(atomic_load(&sig_seen) > 0);
    assert_int_equal(sigaction(SIGUSR1, &old, NULL), 0);
    aiol_loop_free(loop);
    return ended_by_signal;
}

/* A signal handled during the wait ends it on an interruptible loop. */
static void test_signal_ends_wait_of_interruptible_loop(void **state)
{
    (void)state;
    assert_true(poll_under_signals(AIOL_LOOP_INTERRUPTIBLE));
}

/* Elsewhere EINTR is retried: only the notify ends the wait. */
static void test_signal_does_not_end_wait_otherwise(void **state)
{
    (void)state;
    assert_false(poll_under_signals(0));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_notify_unblocked_costs_no_syscall),
        cmocka_unit_test(test_notify_consumed_once),
        cmocka_unit_test(test_notify_nonblocking_poll_one_wait),
        cmocka_unit_test(test_notify_cross_thread_wakes_blocking_poll),
        cmocka_unit_test(test_notify_wakes_poll_nested_in_bottom_half),
        cmocka_unit_test(test_notify_many_while_blocked_few_kicks),
        cmocka_unit_test(test_notify_never_kicks_nonblocking_poller),
        cmocka_unit_test(test_signal_ends_wait_of_interruptible_loop),
        cmocka_unit_test(test_signal_does_not_end_wait_otherwise),
    };
    char name[64];

    aiol_loop_free(tu_loop_new());
    snprintf(name, sizeof(name), "notify-%s",
             tu_fdmon_requested() ? tu_fdmon_requested() : "default");
    return cmocka_run_group_tests_name(name, tests, NULL, NULL);
}
