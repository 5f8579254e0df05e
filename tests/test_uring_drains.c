/* SPDX-License-Identifier: MIT */
/*
 * test_uring_drains.c - multishot polls on the io_uring monitor.
 *
 * A read-only handler flagged AIOL_FD_DRAINS, and the loop's own notifier,
 * keep one poll armed across their events; every other handler re-arms a
 * single-shot poll after each event.  Counted through
 * aiol_loop_stats.fdmon_arms (POLL_ADD requests), never timed.  Exits 77
 * where io_uring cannot start.
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
#include <stdatomic.h>
#include <unistd.h>

#include "aioloop/aioloop.h"
#include "testutil.h"
#include "testhandler.h"
#include "loopwatch.h"
#include "uringreq.h"

enum { EVENTS = 50 };

static uint64_t arms(aiol_loop *loop)
{
    return lw_stats(loop).fdmon_arms;
}

/* th_add() with @flags in the handler's ops. */
static void add_flagged(th *h, aiol_loop *loop, int fd, unsigned flags)
{
    const aiol_fd_ops ops = { .read = th_cb_read, .flags = flags };

    th_init(h, loop, fd);
    assert_int_equal(aiol_fd_set_ops(loop, fd, &ops, h), 0);
}

/* EVENTS arrivals on a handler that drains; the arms they cost. */
static uint64_t arms_for_events(unsigned flags)
{
    aiol_loop *loop = ur_loop_new();
    int efd = tu_eventfd();
    uint64_t before;
    th h;

    add_flagged(&h, loop, efd, flags);
    h.drain = true;
    assert_false(aiol_loop_poll(loop, false)); /* arms it */
    before = arms(loop);
    for (int i = 1; i <= EVENTS; i++) {
        tu_eventfd_signal(efd);
        assert_true(aiol_loop_poll(loop, true));
        assert_int_equal(h.reads, i);
        assert_false(aiol_loop_poll(loop, false)); /* drained: nothing */
    }
    before = arms(loop) - before;
    th_remove(&h);
    assert_int_equal(h.after_remove, 0);
    aiol_loop_free(loop);
    close(efd);
    return before;
}

/* Every arrival reaches a draining handler; its poll is armed once. */
static void test_drains_arms_once(void **state)
{
    (void)state;
    assert_int_equal(arms_for_events(AIOL_FD_DRAINS), 0);
    /* the same handler without the promise re-arms after each event */
    assert_true(arms_for_events(0) >= EVENTS);
}

/*
 * The promise is what makes it work: a flagged handler that leaves its
 * eventfd readable hears nothing more until the next arrival (edge), and
 * the same handler replaced without the flag is level-triggered again at
 * once, with the data it left.
 */
static void test_drains_edge_and_back(void **state)
{
    aiol_loop *loop = ur_loop_new();
    int efd = tu_eventfd();
    th h, l;

    (void)state;
    add_flagged(&h, loop, efd, AIOL_FD_DRAINS); /* h.drain false: leaves it */
    tu_eventfd_signal(efd);
    assert_true(aiol_loop_poll(loop, true));
    assert_int_equal(h.reads, 1);
    for (int i = 0; i < 3; i++) {
        assert_false(aiol_loop_poll(loop, false));
    }
    assert_int_equal(h.reads, 1);
    tu_eventfd_signal(efd);                      /* a new arrival */
    assert_true(aiol_loop_poll(loop, true));
    assert_int_equal(h.reads, 2);

    add_flagged(&l, loop, efd, 0);               /* replaces h */
    h.removed = true;
    for (int i = 1; i <= 3; i++) {
        assert_true(aiol_loop_poll(loop, true));
        assert_int_equal(l.reads, i);
    }
    add_flagged(&h, loop, efd, AIOL_FD_DRAINS);  /* and back */
    l.removed = true;
    h.drain = true;
    assert_true(aiol_loop_poll(loop, true));     /* still readable: armed */
    assert_int_equal(h.reads, 1);
    assert_false(aiol_loop_poll(loop, false));
    th_remove(&h);
    assert_int_equal(h.after_remove + l.after_remove, 0);
    aiol_loop_free(loop);
    close(efd);
}

/* Removal cancels the multishot poll: no callback after it, and a
 * handler added again hears the next arrival. */
static void test_drains_remove(void **state)
{
    aiol_loop *loop = ur_loop_new();
    int efd = tu_eventfd();
    th h;

    (void)state;
    add_flagged(&h, loop, efd, AIOL_FD_DRAINS);
    h.drain = true;
    tu_eventfd_signal(efd);
    assert_true(aiol_loop_poll(loop, true));
    th_remove(&h);
    tu_eventfd_signal(efd);
    ur_poll_idle(loop, 2);
    assert_int_equal(h.after_remove, 0);
    add_flagged(&h, loop, efd, AIOL_FD_DRAINS);
    h.drain = true;
    assert_true(aiol_loop_poll(loop, true));     /* the left arrival */
    assert_int_equal(h.reads, 1);
    tu_eventfd_signal(efd);
    assert_true(aiol_loop_poll(loop, true));
    assert_int_equal(h.reads, 2);
    th_remove(&h);
    assert_int_equal(h.after_remove, 0);
    aiol_loop_free(loop);
    close(efd);
}

/* ---------------------------------------------------- the notifier */

typedef struct kicker {
    aiol_loop *loop;
    atomic_bool stop;
} kicker;

static void *kick_thread(void *opaque)
{
    kicker *k = opaque;

    while (!atomic_load(&k->stop)) {
        aiol_loop_notify(k->loop);
        sched_yield();
    }
    return NULL;
}

/* Wakeups from another thread cost the notifier no re-arm. */
static void test_notifier_arms_once(void **state)
{
    aiol_loop *loop = ur_loop_new();
    kicker k = { .loop = loop };
    uint64_t a0, kicks0;
    lw_watchdog wd;
    pthread_t t;

    (void)state;
    lw_watchdog_arm(&wd, loop, UR_WATCHDOG_NS);
    /* a wait arms the notifier (a look would be skipped: loop.h) */
    (void)aiol_loop_poll_deadline(loop, aiol_mono_time_get() + LW_MS(1));
    a0 = arms(loop);
    kicks0 = lw_stats(loop).notify_kicks;
    assert_int_equal(pthread_create(&t, NULL, kick_thread, &k), 0);
    for (int i = 0; i < EVENTS; i++) {
        (void)aiol_loop_poll(loop, true);
    }
    atomic_store(&k.stop, true);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_true(lw_stats(loop).notify_kicks > kicks0);
    assert_int_equal(arms(loop) - a0, 0);
    assert_int_equal(lw_watchdog_free(&wd), 0);
    aiol_loop_free(loop);
}

/*
 * aiol_uring_drain() reaps everything while it waits for its requests,
 * polls included, and dispatches only requests.  A handler that drains
 * must still hear of the event it reaped: its multishot poll would not
 * report the same edge again.
 */
static void test_drains_event_reaped_by_uring_drain(void **state)
{
    aiol_loop *loop = ur_loop_new();
    int efd = tu_eventfd(), p[2];
    char buf[4];
    ur_req r;
    th h;

    (void)state;
    tu_pipe(p);
    add_flagged(&h, loop, efd, AIOL_FD_DRAINS);
    h.drain = true;
    assert_false(aiol_loop_poll(loop, false)); /* arms it */
    ur_req_init(&r, loop, UR_READ, p[0], buf, sizeof(buf), 0);
    ur_submit(&r);
    assert_false(aiol_loop_poll(loop, false)); /* the read waits */
    tu_eventfd_signal(efd);
    assert_int_equal(write(p[1], "x", 1), 1);
    assert_int_equal(aiol_uring_drain(loop), 0);
    assert_int_equal(r.ndone, 1);
    assert_int_equal(h.reads, 0);
    for (int i = 0; i < 3 && h.reads == 0; i++) {
        (void)aiol_loop_poll(loop, false);
    }
    assert_int_equal(h.reads, 1);
    th_remove(&h);
    close(efd);
    close(p[0]);
    close(p[1]);
    aiol_loop_free(loop);
}

#define T(f) cmocka_unit_test_setup(f, ur_setup)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_drains_arms_once),
        T(test_drains_edge_and_back),
        T(test_drains_remove),
        T(test_notifier_arms_once),
        T(test_drains_event_reaped_by_uring_drain),
    };
    return UR_RUN_GROUP("uring-drains", tests);
}
