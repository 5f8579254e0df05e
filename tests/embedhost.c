/* SPDX-License-Identifier: MIT */
/*
 * embedhost.c - the host-adapter scenarios (embedhost.h): a loop driven
 * only by its host's run(), once per fd monitor (AIOLOOP_FDMON).
 *
 * fd handlers in direct mode (dispatching asks the fd monitor nothing)
 * and, past the adapter's direct maximum, through the loop fd; bottom
 * halves from the loop's thread and from other threads while the host
 * sleeps; timers, never early; a nested aiol_loop_poll() from a callback;
 * two loops in one host.
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
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "embedhost.h"
#include "loopwatch.h"

typedef struct gt gt;

typedef struct reader {
    gt *t;
    int i;
} reader;

struct gt {
    eh_host *h;
    int slot;
    aiol_loop *loop;
    int pipes[EH_NFDS][2];
    int reads[EH_NFDS];
    int bh_runs, timer_runs, nested_ok;
    aiol_bh *bh;
    reader rd[EH_NFDS];
};

static void run(gt *t)
{
    t->h->ops->run(t->h);
}

static void quit(gt *t)
{
    t->h->ops->quit(t->h);
}

static void gt_init(gt *t, eh_host *h, int slot)
{
    memset(t, 0, sizeof(*t));
    t->h = h;
    t->slot = slot;
    /* (AIOLOOP_TEST_CONFINED=1: the suite's second run, tests/meson.build) */
    assert_int_equal(aiol_loop_new_flags(&t->loop, NULL,
                                         getenv("AIOLOOP_TEST_CONFINED")
                                             ? AIOL_LOOP_CONFINED
                                             : 0),
                     0);
    h->ops->attach(h, t->loop, slot);
    for (int i = 0; i < EH_NFDS; i++) {
        assert_int_equal(pipe2(t->pipes[i], O_NONBLOCK | O_CLOEXEC), 0);
    }
}

static void gt_fini(gt *t)
{
    for (int i = 0; i < EH_NFDS; i++) {
        aiol_fd_remove(t->loop, t->pipes[i][0]);
        close(t->pipes[i][0]);
        close(t->pipes[i][1]);
    }
    if (t->bh != NULL) {
        aiol_bh_free(t->bh);
    }
    t->h->ops->detach(t->h, t->slot);
    aiol_loop_free(t->loop);
}

/* Reads its pipe dry and quits the host. */
static void on_read(void *opaque)
{
    reader *r = opaque;
    char buf[64];

    while (read(r->t->pipes[r->i][0], buf, sizeof(buf)) > 0) {
    }
    r->t->reads[r->i]++;
    quit(r->t);
}

static void add_reader(gt *t, int i)
{
    t->rd[i] = (reader){ t, i };
    assert_int_equal(aiol_fd_set(t->loop, t->pipes[i][0], on_read, NULL,
                                 NULL, &t->rd[i]), 0);
}

/* Makes pipe @i readable and runs the host until its handler ran. */
static void expect_read(gt *t, int i)
{
    int before = t->reads[i];

    assert_int_equal(write(t->pipes[i][1], "x", 1), 1);
    while (t->reads[i] == before) {
        run(t);
    }
    assert_int_equal(t->reads[i], before + 1);
}

void eh_fd_handlers(void **state)
{
    eh_host *h = *state;
    uint64_t waits;
    gt t;

    assert_true(h->direct_max + 2 < EH_NFDS);
    gt_init(&t, h, 0);
    /* few handlers: the host polls their fds directly, so dispatching
     * asks the fd monitor nothing */
    add_reader(&t, 0);
    add_reader(&t, 1);
    expect_read(&t, 1);
    waits = lw_stats(t.loop).fdmon_waits;
    expect_read(&t, 0);
    expect_read(&t, 1);
    assert_int_equal(lw_stats(t.loop).fdmon_waits, waits);
    /* more than direct_max: the host polls the loop fd, and each
     * dispatch asks the monitor which handler is ready */
    for (int i = 2; i < EH_NFDS; i++) {
        add_reader(&t, i);
    }
    waits = lw_stats(t.loop).fdmon_waits;
    for (int i = EH_NFDS - 1; i >= 0; i -= 3) {
        expect_read(&t, i);
    }
    assert_true(lw_stats(t.loop).fdmon_waits > waits);
    /* and back to few */
    for (int i = 2; i < EH_NFDS; i++) {
        assert_int_equal(aiol_fd_remove(t.loop, t.pipes[i][0]), 0);
    }
    expect_read(&t, 0);
    expect_read(&t, 1);
    for (int i = 0; i < EH_NFDS; i++) {
        assert_true(t.reads[i] <= 3);
    }
    gt_fini(&t);
}

static void on_bh(void *opaque)
{
    gt *t = opaque;

    t->bh_runs++;
    quit(t);
}

static void *schedule_from_thread(void *opaque)
{
    gt *t = opaque;

    usleep(20000); /* (the host is asleep by now, most likely) */
    aiol_bh_schedule(t->bh);
    return NULL;
}

void eh_bottom_halves(void **state)
{
    eh_host *h = *state;
    pthread_t th;
    gt t;

    gt_init(&t, h, 0);
    /* (scheduled from another thread below: thread-safe on any loop) */
    assert_int_equal(aiol_bh_new_shared(t.loop, on_bh, &t, &t.bh), 0);
    aiol_bh_schedule(t.bh); /* from the loop's thread */
    run(&t);
    assert_int_equal(t.bh_runs, 1);
    for (int k = 0; k < 3; k++) { /* from another thread, the host asleep */
        assert_int_equal(pthread_create(&th, NULL, schedule_from_thread, &t),
                         0);
        run(&t);
        assert_int_equal(pthread_join(th, NULL), 0);
        assert_int_equal(t.bh_runs, 2 + k);
    }
    /* with many handlers, through the loop fd */
    for (int i = 0; i < EH_NFDS; i++) {
        add_reader(&t, i);
    }
    assert_int_equal(pthread_create(&th, NULL, schedule_from_thread, &t), 0);
    run(&t);
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_int_equal(t.bh_runs, 5);
    gt_fini(&t);
}

static void on_timer(void *opaque)
{
    gt *t = opaque;

    t->timer_runs++;
    quit(t);
}

void eh_timers(void **state)
{
    eh_host *h = *state;
    aiol_clock *c;
    aiol_timer *tm;
    int64_t armed, deadline;
    gt t;

    gt_init(&t, h, 0);
    c = aiol_loop_clock_get(t.loop);
    assert_int_equal(aiol_timer_new(c, on_timer, &t, &tm), 0);
    for (int k = 0; k < 3; k++) {
        armed = aiol_clock_time_get(c);
        deadline = armed + 30 * 1000000;
        assert_int_equal(aiol_timer_mod(tm, deadline), 0);
        run(&t);
        assert_int_equal(t.timer_runs, k + 1);
        assert_true(aiol_clock_time_get(c) >= deadline); /* never early */
    }
    aiol_timer_free(tm);
    gt_fini(&t);
}

/* fd callback: polls the loop nested until its bottom half ran */
static void on_read_nested(void *opaque)
{
    gt *t = opaque;
    char buf[8];

    (void)!read(t->pipes[0][0], buf, sizeof(buf));
    aiol_bh_schedule(t->bh);
    while (t->bh_runs == 0) {
        aiol_loop_poll(t->loop, true);
    }
    t->nested_ok++;
    quit(t);
}

static void on_bh_count(void *opaque)
{
    ((gt *)opaque)->bh_runs++;
}

void eh_nested_poll(void **state)
{
    eh_host *h = *state;
    gt t;

    gt_init(&t, h, 0);
    assert_int_equal(aiol_bh_new(t.loop, on_bh_count, &t, &t.bh), 0);
    assert_int_equal(aiol_fd_set(t.loop, t.pipes[0][0], on_read_nested, NULL,
                                 NULL, &t), 0);
    assert_int_equal(write(t.pipes[0][1], "x", 1), 1);
    run(&t);
    assert_int_equal(t.nested_ok, 1);
    assert_int_equal(t.bh_runs, 1);
    gt_fini(&t);
}

/* Two loops in one host. */
void eh_two_loops(void **state)
{
    eh_host *h = *state;
    gt a, b;

    gt_init(&a, h, 0);
    gt_init(&b, h, 1);
    add_reader(&a, 0);
    add_reader(&b, 0);
    for (int k = 0; k < 3; k++) {
        expect_read(&a, 0);
        expect_read(&b, 0);
    }
    assert_int_equal(a.reads[0], 3);
    assert_int_equal(b.reads[0], 3);
    gt_fini(&b);
    gt_fini(&a);
}
