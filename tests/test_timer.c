/* SPDX-License-Identifier: MIT */
/*
 * test_timer.c - clock and timer tests, run once per fd monitor.
 *
 * Ordering tests use deadlines already in the past on the loop's monotonic
 * clock (or a fake clock the test moves by hand), so a single non-blocking
 * poll fires everything due and no test waits on wall-clock time.  Tests
 * about blocking polls arm timers a little ahead and assert on what fired
 * and on how many iterations it took, never on elapsed time.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "aioloop/aioloop.h"
#include "testutil.h"
#include "loopwatch.h"

#define MAX_ORDER 128

typedef struct trec trec;
struct trec {
    aiol_clock *clock;
    aiol_timer *t;
    int id;
    int runs;
    bool armed_in_cb;      /* aiol_timer_is_armed() inside the callback */
    int64_t rearm_to;      /* cb_rearm: new deadline (-1: "now") */
    int rearm_limit;       /* cb_rearm: stop re-arming after this many runs */
    trec *victim;          /* cb_free_peer / cb_arm_peer: the other timer */
};

static int g_order[MAX_ORDER];
static int g_norder;

static int reset(void **state)
{
    (void)state;
    g_norder = 0;
    return 0;
}

static void note(trec *r)
{
    r->runs++;
    r->armed_in_cb = r->t != NULL && aiol_timer_is_armed(r->t);
    assert_true(g_norder < MAX_ORDER);
    g_order[g_norder++] = r->id;
}

static void cb_count(void *opaque)
{
    note(opaque);
}

static void trec_init(trec *r, aiol_clock *c, int id, aiol_handler_fn *cb)
{
    memset(r, 0, sizeof(*r));
    r->clock = c;
    r->id = id;
    assert_int_equal(aiol_timer_new(c, cb, r, &r->t), 0);
    assert_non_null(r->t);
    assert_false(aiol_timer_is_armed(r->t));
    assert_int_equal(aiol_timer_deadline_get(r->t), -1);
}

static void arm(trec *r, int64_t when)
{
    assert_int_equal(aiol_timer_mod(r->t, when), 0);
    assert_true(aiol_timer_is_armed(r->t));
    assert_int_equal(aiol_timer_deadline_get(r->t), when);
}

static void assert_order(const int *expect, int n)
{
    assert_int_equal(g_norder, n);
    for (int i = 0; i < n; i++) {
        assert_int_equal(g_order[i], expect[i]);
    }
}

/* Far enough in the past to be due, far enough apart to sort clearly. */
#define PAST(x) ((int64_t)1000 + (x))
#define HOUR ((int64_t)3600 * 1000000000)

/* ---------------------------------------------------------- ordering */

static void test_timer_deadline_order(void **state)
{
    aiol_loop *loop = tu_loop_new();
    aiol_clock *c = aiol_loop_clock_get(loop);
    static const int64_t off[5] = { 500, 100, 400, 200, 300 };
    static const int expect[5] = { 1, 3, 4, 2, 0 };
    trec r[5];
    int64_t now;
    int polls = 0;

    (void)state;
    /* already due: one poll fires all of them, earliest first */
    for (int i = 0; i < 5; i++) {
        trec_init(&r[i], c, i, cb_count);
        arm(&r[i], PAST(off[i]));
    }
    assert_true(aiol_loop_poll(loop, false));
    assert_order(expect, 5);
    assert_int_equal(lw_stats(loop).timer_runs, 5);

    /* ahead of now: blocking polls wake for them in deadline order */
    g_norder = 0;
    now = aiol_clock_time_get(c);
    for (int i = 0; i < 5; i++) {
        arm(&r[i], now + LW_US(off[i] * 5));    /* 0.5 ms .. 2.5 ms */
    }
    while (g_norder < 5 && polls < 1000) {
        aiol_loop_poll(loop, true);
        polls++;
    }
    assert_order(expect, 5);
    assert_int_equal(lw_stats(loop).timer_runs, 10);
    for (int i = 0; i < 5; i++) {
        assert_false(aiol_timer_is_armed(r[i].t));
        aiol_timer_free(r[i].t);
    }
    aiol_loop_free(loop);
}

#define NEQ 50

static void test_timer_equal_deadlines_arming_order(void **state)
{
    aiol_loop *loop = tu_loop_new();
    aiol_clock *c = aiol_loop_clock_get(loop);
    static trec r[NEQ + 2];
    int expect[NEQ + 2];
    int n = 0;

    (void)state;
    /* fill the heap with scattered deadlines first */
    for (int i = 0; i < NEQ + 2; i++) {
        trec_init(&r[i], c, i, cb_count);
        arm(&r[i], PAST(100 + (i * 7919) % 500));
    }
    /* then move every one to the same deadline in a scrambled order */
    for (int k = 0; k < NEQ; k++) {
        int i = (k * 13 + 5) % NEQ;
        arm(&r[i], PAST(50));
    }
    /* re-arming to the same deadline makes it the latest armed */
    for (int k = 0; k < NEQ; k += 10) {
        arm(&r[(k * 13 + 5) % NEQ], PAST(50));
    }
    /* neighbours on both sides of the tie */
    arm(&r[NEQ], PAST(49));
    arm(&r[NEQ + 1], PAST(51));

    expect[n++] = NEQ;
    for (int k = 0; k < NEQ; k++) {
        if (k % 10 != 0) {
            expect[n++] = (k * 13 + 5) % NEQ;
        }
    }
    for (int k = 0; k < NEQ; k += 10) {
        expect[n++] = (k * 13 + 5) % NEQ;
    }
    expect[n++] = NEQ + 1;

    assert_true(aiol_loop_poll(loop, false));
    assert_order(expect, n);
    for (int i = 0; i < NEQ + 2; i++) {
        assert_int_equal(r[i].runs, 1);
        aiol_timer_free(r[i].t);
    }
    aiol_loop_free(loop);
}

static void test_timer_mod_reorders(void **state)
{
    aiol_loop *loop = tu_loop_new();
    aiol_clock *c = aiol_loop_clock_get(loop);
    trec a, b, d;
    int64_t far;

    (void)state;
    trec_init(&a, c, 'A', cb_count);
    trec_init(&b, c, 'B', cb_count);
    trec_init(&d, c, 'D', cb_count);

    arm(&a, PAST(100));
    arm(&b, PAST(200));
    arm(&d, PAST(300));
    arm(&a, PAST(250));           /* later: B, A, D */
    assert_true(aiol_loop_poll(loop, false));
    assert_order((const int[]){ 'B', 'A', 'D' }, 3);

    g_norder = 0;
    arm(&a, PAST(100));
    arm(&b, PAST(200));
    arm(&d, PAST(300));
    arm(&d, PAST(50));            /* earlier: D, A, B */
    assert_true(aiol_loop_poll(loop, false));
    assert_order((const int[]){ 'D', 'A', 'B' }, 3);

    /* to the future: it stays armed and does not fire */
    g_norder = 0;
    far = aiol_clock_time_get(c) + HOUR;
    arm(&a, PAST(100));
    arm(&b, PAST(200));
    arm(&a, far - 7);
    arm(&a, far);                 /* re-armed: the last deadline counts */
    assert_true(aiol_loop_poll(loop, false));
    assert_order((const int[]){ 'B' }, 1);
    assert_true(aiol_timer_is_armed(a.t));
    assert_int_equal(aiol_timer_deadline_get(a.t), far);
    assert_false(aiol_loop_poll(loop, false));

    /* and back into the past: fires at the next poll */
    arm(&a, PAST(1));
    assert_true(aiol_loop_poll(loop, false));
    assert_order((const int[]){ 'B', 'A' }, 2);
    assert_int_equal(lw_stats(loop).timer_runs, 8);

    aiol_timer_free(a.t);
    aiol_timer_free(b.t);
    aiol_timer_free(d.t);
    aiol_loop_free(loop);
}

static void test_timer_cancel(void **state)
{
    aiol_loop *loop = tu_loop_new();
    aiol_clock *c = aiol_loop_clock_get(loop);
    trec r[10];

    (void)state;
    for (int i = 0; i < 10; i++) {
        trec_init(&r[i], c, i, cb_count);
        arm(&r[i], PAST(10 * (10 - i)));     /* r[9] earliest: heap root */
    }
    aiol_timer_cancel(r[9].t);                /* the root */
    aiol_timer_cancel(r[0].t);                /* the latest */
    aiol_timer_cancel(r[4].t);                /* somewhere inside */
    aiol_timer_cancel(r[4].t);                /* twice: no-op */
    assert_false(aiol_timer_is_armed(r[9].t));
    assert_false(aiol_timer_is_armed(r[4].t));
    assert_int_equal(aiol_timer_deadline_get(r[4].t), -1);
    assert_true(aiol_timer_is_armed(r[5].t));
    assert_int_equal(aiol_timer_deadline_get(r[5].t), PAST(50));
    assert_true(aiol_loop_poll(loop, false));
    assert_order((const int[]){ 8, 7, 6, 5, 3, 2, 1 }, 7);
    assert_int_equal(lw_stats(loop).timer_runs, 7);

    /* cancelling a disarmed timer is a no-op; a cancelled one re-arms */
    aiol_timer_cancel(r[9].t);
    assert_false(aiol_loop_poll(loop, false));
    arm(&r[9], PAST(0));
    assert_true(aiol_loop_poll(loop, false));
    assert_int_equal(r[9].runs, 1);
    assert_int_equal(r[0].runs + r[4].runs, 0);
    for (int i = 0; i < 10; i++) {
        aiol_timer_free(r[i].t);
    }
    aiol_loop_free(loop);
}

/* -------------------------------------------- callbacks on own timer */

static void cb_rearm(void *opaque)
{
    trec *r = opaque;

    note(r);
    if (r->rearm_limit == 0 || r->runs < r->rearm_limit) {
        int64_t when = r->rearm_to >= 0 ? r->rearm_to
                                        : aiol_clock_time_get(r->clock);
        assert_int_equal(aiol_timer_mod(r->t, when), 0);
        assert_true(aiol_timer_is_armed(r->t));
    }
}

static void test_timer_rearm_from_callback(void **state)
{
    aiol_loop *loop = tu_loop_new();
    aiol_clock *c = aiol_loop_clock_get(loop);
    int64_t far = aiol_clock_time_get(c) + HOUR;
    trec r;

    (void)state;
    trec_init(&r, c, 1, cb_rearm);
    r.rearm_to = far;
    arm(&r, PAST(0));
    assert_true(aiol_loop_poll(loop, false));
    assert_int_equal(r.runs, 1);
    assert_false(r.armed_in_cb);        /* disarmed while its callback runs */
    assert_true(aiol_timer_is_armed(r.t));
    assert_int_equal(aiol_timer_deadline_get(r.t), far);
    assert_false(aiol_loop_poll(loop, false));
    assert_int_equal(r.runs, 1);
    aiol_timer_free(r.t);
    aiol_loop_free(loop);
}

static void test_timer_rearm_now_once_per_iteration(void **state)
{
    aiol_loop *loop = tu_loop_new();
    aiol_clock *c = aiol_loop_clock_get(loop);
    lw_watchdog w;
    trec r;

    (void)state;
    trec_init(&r, c, 1, cb_rearm);
    r.rearm_to = -1;                    /* "now": always already due */
    r.rearm_limit = 25;                 /* a broken loop fails, not hangs */
    arm(&r, PAST(0));
    for (int i = 1; i <= 10; i++) {
        assert_true(aiol_loop_poll(loop, false));
        assert_int_equal(r.runs, i);
        assert_int_equal(lw_stats(loop).timer_runs, (uint64_t)i);
    }
    /* blocking polls do not sleep on a due timer, and fire it once each */
    lw_watchdog_arm(&w, loop, LW_MS(5000));
    for (int i = 11; i <= 20; i++) {
        assert_true(aiol_loop_poll(loop, true));
        assert_int_equal(r.runs, i);
    }
    assert_int_equal(lw_watchdog_free(&w), 0);
    assert_int_equal(lw_stats(loop).iterations, 20);
    aiol_timer_free(r.t);
    aiol_loop_free(loop);
}

static void cb_arm_peer(void *opaque)
{
    trec *r = opaque;

    note(r);
    arm(r->victim, PAST(0));            /* due, but armed during the run */
}

static void test_timer_armed_during_run_fires_next_iteration(void **state)
{
    aiol_loop *loop = tu_loop_new();
    aiol_clock *c = aiol_loop_clock_get(loop);
    trec a, b;

    (void)state;
    trec_init(&a, c, 'A', cb_arm_peer);
    trec_init(&b, c, 'B', cb_count);
    a.victim = &b;
    arm(&a, PAST(5));
    assert_true(aiol_loop_poll(loop, false));
    assert_order((const int[]){ 'A' }, 1);
    assert_true(aiol_timer_is_armed(b.t));
    assert_true(aiol_loop_poll(loop, false));
    assert_order((const int[]){ 'A', 'B' }, 2);
    aiol_timer_free(a.t);
    aiol_timer_free(b.t);
    aiol_loop_free(loop);
}

static void cb_free_self(void *opaque)
{
    trec *r = opaque;

    note(r);
    aiol_timer_free(r->t);
    r->t = NULL;
}

static void cb_free_peer(void *opaque)
{
    trec *r = opaque;

    note(r);
    aiol_timer_free(r->victim->t);
    r->victim->t = NULL;
}

static void test_timer_free_from_callback(void **state)
{
    aiol_loop *loop = tu_loop_new();
    aiol_clock *c = aiol_loop_clock_get(loop);
    trec a, b, d, e;

    (void)state;
    trec_init(&a, c, 'A', cb_free_self);
    trec_init(&b, c, 'B', cb_free_peer);
    trec_init(&d, c, 'D', cb_count);
    trec_init(&e, c, 'E', cb_count);
    b.victim = &d;                     /* due in the same run, after B */
    arm(&a, PAST(10));
    arm(&b, PAST(20));
    arm(&d, PAST(30));
    arm(&e, PAST(40));
    assert_true(aiol_loop_poll(loop, false));
    assert_order((const int[]){ 'A', 'B', 'E' }, 3);
    assert_null(a.t);
    assert_null(d.t);
    assert_false(aiol_loop_poll(loop, false));
    assert_int_equal(lw_stats(loop).timer_runs, 3);
    aiol_timer_free(b.t);
    aiol_timer_free(e.t);
    aiol_timer_free(NULL);             /* no-op */
    aiol_loop_free(loop);              /* aborts if anything stayed armed */
}

/* -------------------------------------------------- blocking polls */

static void test_timer_blocking_poll_fires(void **state)
{
    aiol_loop *loop = tu_loop_new();
    aiol_clock *c = aiol_loop_clock_get(loop);
    aiol_loop_stats before;
    lw_watchdog w;
    trec r;

    (void)state;
    trec_init(&r, c, 1, cb_count);
    assert_false(aiol_loop_poll(loop, false));  /* consume a start-up wakeup */
    lw_watchdog_arm(&w, loop, LW_MS(5000));
    before = lw_stats(loop);
    arm(&r, aiol_clock_time_get(c) + LW_MS(2));
    /* the one blocking poll sleeps until the timer and fires it */
    assert_true(aiol_loop_poll(loop, true));
    assert_int_equal(r.runs, 1);
    assert_int_equal(lw_stats(loop).timer_runs - before.timer_runs, 1);
    assert_int_equal(lw_stats(loop).iterations - before.iterations, 1);
    assert_int_equal(lw_watchdog_free(&w), 0);
    aiol_timer_free(r.t);
    aiol_loop_free(loop);
}

static void test_timer_ns_precision(void **state)
{
    aiol_loop *loop = tu_loop_new();
    aiol_clock *c = aiol_loop_clock_get(loop);
    aiol_loop_stats before;
    lw_watchdog w;
    trec r;

    (void)state;
    trec_init(&r, c, 1, cb_count);
    assert_false(aiol_loop_poll(loop, false));
    lw_watchdog_arm(&w, loop, LW_MS(5000));
    for (int round = 0; round < 5; round++) {
        uint64_t polls;

        before = lw_stats(loop);
        arm(&r, aiol_clock_time_get(c) + LW_US(300));
        while (r.runs == round) {
            aiol_loop_poll(loop, true);
            /* a wait rounded to 0 would spin here for thousands of polls */
            assert_true(lw_stats(loop).iterations - before.iterations <= 3);
        }
        polls = lw_stats(loop).iterations - before.iterations;
        assert_true(polls >= 1 && polls <= 3);
        assert_int_equal(r.runs, round + 1);
    }
    assert_int_equal(lw_watchdog_free(&w), 0);

    /* the same for aiol_loop_poll_deadline() with no timer at all */
    for (int round = 0; round < 5; round++) {
        int64_t deadline = aiol_mono_time_get() + LW_US(300);
        int polls = 0;

        while (aiol_mono_time_get() < deadline) {
            assert_false(aiol_loop_poll_deadline(loop, deadline));
            polls++;
            assert_true(polls <= 3);
        }
        assert_true(polls >= 1);
    }
    aiol_timer_free(r.t);
    aiol_loop_free(loop);
}

/* ------------------------------------------------------ custom clocks */

static int64_t fake_now(void *opaque)
{
    return *(const int64_t *)opaque;
}

static void test_timer_custom_clock_blocking_poll(void **state)
{
    aiol_loop *loop = tu_loop_new();
    static int64_t fake = (int64_t)1 << 40;
    aiol_clock *fc;
    lw_watchdog w;
    trec r;

    (void)state;
    assert_int_equal(aiol_clock_new(loop, fake_now, &fake, &fc), 0);
    assert_int_equal(aiol_clock_time_get(fc), fake);
    trec_init(&r, fc, 1, cb_count);
    arm(&r, fake + LW_MS(1));
    assert_false(aiol_loop_poll(loop, false));
    assert_int_equal(r.runs, 0);

    /*
     * The fake clock is 1 ms behind the timer and does not move: the
     * blocking poll must still come back (the loop sleeps as if the clock
     * ran at real speed) instead of sleeping until the watchdog.
     */
    lw_watchdog_arm(&w, loop, LW_MS(5000));
    assert_false(aiol_loop_poll(loop, true));
    assert_int_equal(r.runs, 0);
    assert_true(aiol_timer_is_armed(r.t));
    assert_int_equal(lw_watchdog_free(&w), 0);

    /* once the fake clock reaches it, it fires without sleeping */
    fake += LW_MS(1);
    lw_watchdog_arm(&w, loop, LW_MS(5000));
    assert_true(aiol_loop_poll(loop, true));
    assert_int_equal(r.runs, 1);
    assert_int_equal(lw_watchdog_free(&w), 0);

    aiol_timer_free(r.t);
    aiol_clock_free(fc);
    aiol_loop_free(loop);
}

/* ------------------------------------------------ extreme deadlines */

/*
 * With only timer @r armed, and not due: prepare() gives @none ? no
 * deadline : one over an hour ahead, and aiol_loop_poll_deadline() to 2 ms
 * ahead waits instead of spinning (a deadline that overflowed to a negative
 * value made every wait return at once).
 */
static void assert_not_due(aiol_loop *loop, trec *r, bool none)
{
    int64_t d = aiol_loop_prepare(loop);
    int64_t deadline = aiol_mono_time_get() + LW_MS(2);
    int polls = 0;

    assert_true(none ? d == AIOL_DEADLINE_NONE
                     : d > deadline + HOUR && d < AIOL_DEADLINE_NONE);
    assert_false(aiol_loop_check(loop));
    while (aiol_mono_time_get() < deadline) {
        assert_false(aiol_loop_poll_deadline(loop, deadline));
        assert_true(++polls <= 3);
    }
    assert_true(aiol_timer_is_armed(r->t));
}

/* With only @r armed and due: prepare() says 0 and it fires. */
static void assert_due(aiol_loop *loop, trec *r)
{
    int runs = r->runs;

    assert_int_equal(aiol_loop_prepare(loop), 0);
    assert_true(aiol_loop_check(loop));
    assert_true(aiol_loop_dispatch(loop));
    assert_int_equal(r->runs, runs + 1);
}

static void test_timer_mono_extreme_deadlines(void **state)
{
    aiol_loop *loop = tu_loop_new();
    static const int64_t past[] = { -1, -HOUR, INT64_MIN + 1, INT64_MIN };
    trec r;

    (void)state;
    trec_init(&r, aiol_loop_clock_get(loop), 1, cb_count);
    aiol_loop_poll(loop, false);              /* a start-up wakeup */
    arm(&r, INT64_MAX);                       /* never: no deadline */
    assert_not_due(loop, &r, true);
    arm(&r, INT64_MAX - 1);
    assert_not_due(loop, &r, false);
    for (size_t i = 0; i < sizeof(past) / sizeof(past[0]); i++) {
        arm(&r, past[i]);                     /* negative: in the past */
        assert_int_equal(aiol_timer_deadline_get(r.t), past[i]);
        assert_due(loop, &r);
    }
    aiol_timer_free(r.t);
    aiol_loop_free(loop);
}

static void test_timer_custom_clock_extreme_deadlines(void **state)
{
    aiol_loop *loop = tu_loop_new();
    static int64_t fake;
    /* { clock's now, timer's deadline, 1: no deadline / 0: one / -1: due } */
    static const int64_t cases[][3] = {
        { 0, INT64_MAX, 1 },                  /* mono now + left overflows */
        { 0, INT64_MAX - 1, 1 },
        { 1000, INT64_MAX / 2 + 1000, 0 },    /* 146 years: a deadline */
        { -((int64_t)1 << 62), (int64_t)1 << 62, 1 }, /* expire - now does */
        { INT64_MIN, INT64_MAX, 1 },
        { INT64_MIN, 0, 1 },
        { (int64_t)1 << 62, INT64_MIN, -1 },  /* expire - now underflows */
        { INT64_MAX, INT64_MIN, -1 },
        { INT64_MAX, INT64_MAX, -1 },
        { INT64_MIN, INT64_MIN, -1 },
        { -HOUR, -HOUR - 1, -1 },
    };
    aiol_clock *fc;
    lw_watchdog w;
    int64_t d, mono;
    trec r;

    (void)state;
    assert_int_equal(aiol_clock_new(loop, fake_now, &fake, &fc), 0);
    trec_init(&r, fc, 1, cb_count);
    aiol_loop_poll(loop, false);              /* a start-up wakeup */
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        fake = cases[i][0];
        arm(&r, cases[i][1]);
        if (cases[i][2] < 0) {
            assert_due(loop, &r);
        } else {
            assert_not_due(loop, &r, cases[i][2] == 1);
        }
    }

    /* a clock at a negative time, with ordinary timers */
    fake = -HOUR;
    arm(&r, fake + HOUR / 2);
    mono = aiol_mono_time_get();
    d = aiol_loop_prepare(loop);
    assert_true(d >= mono + HOUR / 2 && d <= aiol_mono_time_get() + HOUR / 2);
    assert_false(aiol_loop_check(loop));
    arm(&r, fake + LW_MS(1));
    lw_watchdog_arm(&w, loop, LW_MS(5000));
    r.runs = 0;
    assert_false(aiol_loop_poll(loop, true)); /* sleeps ~1 ms, not forever */
    fake += LW_MS(1);
    assert_true(aiol_loop_poll(loop, true));
    assert_int_equal(r.runs, 1);
    assert_int_equal(lw_watchdog_free(&w), 0);
    aiol_timer_free(r.t);
    aiol_clock_free(fc);
    aiol_loop_free(loop);
}

/* ------------------------------------- freeing clocks from callbacks */

typedef struct clock_rec {
    trec *self;
    aiol_clock *clock;     /* cb_free_clock: freed after... */
    trec *timers[2];       /* ...these timers (its own among them) */
    aiol_loop *loop;       /* cb_nest: polled from the callback */
} clock_rec;

static int64_t g_fake;

/* trec_init() for a timer that calls @cb(@opaque) instead of cb(r). */
static void trec_init_with(trec *r, aiol_clock *c, int id, aiol_handler_fn *cb,
                           void *opaque)
{
    memset(r, 0, sizeof(*r));
    r->clock = c;
    r->id = id;
    assert_int_equal(aiol_timer_new(c, cb, opaque, &r->t), 0);
}

static void cb_free_clock(void *opaque)
{
    clock_rec *cr = opaque;

    note(cr->self);
    for (int i = 0; i < 2 && cr->timers[i] != NULL; i++) {
        aiol_timer_free(cr->timers[i]->t);
        cr->timers[i]->t = NULL;
    }
    aiol_clock_free(cr->clock);
}

static void test_timer_callback_frees_own_clock(void **state)
{
    aiol_loop *loop = tu_loop_new();
    aiol_clock *fnext, *fself;
    clock_rec cr;
    trec a, b, n, m;

    (void)state;
    /* clocks run newest first: fself's timers run before fnext's */
    assert_int_equal(aiol_clock_new(loop, fake_now, &g_fake, &fnext), 0);
    assert_int_equal(aiol_clock_new(loop, fake_now, &g_fake, &fself), 0);
    trec_init_with(&a, fself, 'A', cb_free_clock, &cr);
    trec_init(&b, fself, 'B', cb_count);
    trec_init(&n, fnext, 'N', cb_count);
    trec_init(&m, aiol_loop_clock_get(loop), 'M', cb_count);
    cr = (clock_rec){ .self = &a, .clock = fself, .timers = { &a, &b } };
    arm(&a, -10);
    arm(&b, -5);            /* due in the same run, freed before it runs */
    arm(&n, 0);
    arm(&m, PAST(0));
    /* the run goes on with the other clocks, never reading fself again */
    assert_true(aiol_loop_poll(loop, false));
    assert_order((const int[]){ 'A', 'N', 'M' }, 3);
    assert_false(aiol_loop_poll(loop, false));

    /* or it frees another, idle clock: the one that runs next */
    g_norder = 0;
    assert_int_equal(aiol_clock_new(loop, fake_now, &g_fake, &fself), 0);
    trec_init_with(&a, fself, 'A', cb_free_clock, &cr);
    cr = (clock_rec){ .self = &a, .clock = fnext, .timers = { &n } };
    arm(&a, 0);
    arm(&n, 0);
    arm(&m, PAST(0));
    assert_true(aiol_loop_poll(loop, false));
    assert_order((const int[]){ 'A', 'M' }, 2);
    aiol_timer_free(a.t);
    aiol_timer_free(m.t);
    aiol_clock_free(fself);
    aiol_loop_free(loop);   /* aborts if a clock or timer was left behind */
}

static void cb_nest(void *opaque)
{
    clock_rec *cr = opaque;

    note(cr->self);
    aiol_loop_poll(cr->loop, false);
}

static void test_timer_nested_poll_frees_running_clock(void **state)
{
    aiol_loop *loop = tu_loop_new();
    clock_rec outer, inner;
    aiol_clock *fc;
    trec t1, t2, m;

    (void)state;
    assert_int_equal(aiol_clock_new(loop, fake_now, &g_fake, &fc), 0);
    trec_init_with(&t1, fc, 1, cb_nest, &outer);
    trec_init_with(&t2, fc, 2, cb_free_clock, &inner);
    trec_init(&m, aiol_loop_clock_get(loop), 'M', cb_count);
    outer = (clock_rec){ .self = &t1, .loop = loop };
    inner = (clock_rec){ .self = &t2, .clock = fc, .timers = { &t2, &t1 } };
    /*
     * t1's callback polls; that nested run fires t2, which frees t2, t1
     * (its callback still running) and their clock, then goes on to the
     * monotonic clock.  Neither run reads fc afterwards.
     */
    arm(&t1, -2);
    arm(&t2, -1);
    arm(&m, PAST(0));
    assert_true(aiol_loop_poll(loop, false));
    assert_order((const int[]){ 1, 2, 'M' }, 3);
    assert_false(aiol_loop_poll(loop, false));
    aiol_timer_free(m.t);
    aiol_loop_free(loop);
}

static void cb_free_clock_twice(void *opaque)
{
    cb_free_clock(opaque);
    aiol_clock_free(((clock_rec *)opaque)->clock); /* must abort */
}

static void free_clock_twice(void *arg)
{
    aiol_loop *loop = tu_loop_new();
    aiol_clock *fc;
    clock_rec cr;
    trec a;

    (void)arg;
    if (aiol_clock_new(loop, fake_now, &g_fake, &fc) != 0) {
        _exit(3);
    }
    trec_init_with(&a, fc, 1, cb_free_clock_twice, &cr);
    cr = (clock_rec){ .self = &a, .clock = fc, .timers = { &a } };
    arm(&a, 0);
    aiol_loop_poll(loop, false);
    _exit(4);
}

static void test_timer_clock_freed_twice_in_callback_aborts(void **state)
{
    char err[4096];
    int status = tu_run_child(free_clock_twice, NULL, err, sizeof(err));

    (void)state;
    if (WIFEXITED(status) && WEXITSTATUS(status) == TU_EXIT_SKIP) {
        skip();
    }
    assert_true(tu_aborted_with(status, err, "clock freed twice"));
}

/*
 * A disarmed timer (never armed, cancelled, or fired) may outlive its
 * loop and clock: freeing it reads neither (ASan reports the read).
 */
static void test_timer_disarmed_freed_after_loop(void **state)
{
    aiol_loop *loop = tu_loop_new();
    aiol_timer *never, *cancelled, *fired, *on_clock;
    aiol_clock *fc;
    trec r;

    (void)state;
    assert_int_equal(aiol_clock_new(loop, fake_now, &g_fake, &fc), 0);
    assert_int_equal(aiol_timer_new(aiol_loop_clock_get(loop), cb_count, &r,
                                    &never), 0);
    assert_int_equal(aiol_timer_new(aiol_loop_clock_get(loop), cb_count, &r,
                                    &cancelled), 0);
    assert_int_equal(aiol_timer_new(aiol_loop_clock_get(loop), cb_count, &r,
                                    &fired), 0);
    assert_int_equal(aiol_timer_new(fc, cb_count, &r, &on_clock), 0);
    r = (trec){ .t = fired, .id = 1 };
    assert_int_equal(aiol_timer_mod(cancelled, 0), 0);
    aiol_timer_cancel(cancelled);
    assert_int_equal(aiol_timer_mod(fired, 0), 0);
    assert_int_equal(aiol_timer_mod(on_clock, g_fake + 1000000), 0);
    aiol_timer_cancel(on_clock);
    aiol_loop_poll(loop, false);
    assert_int_equal(r.runs, 1);
    assert_false(aiol_timer_is_armed(fired));
    aiol_clock_free(fc);
    aiol_loop_free(loop);
    aiol_timer_free(never);
    aiol_timer_free(cancelled);
    aiol_timer_free(fired);
    aiol_timer_free(on_clock);
}

#define T(f) cmocka_unit_test_setup(f, reset)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_timer_deadline_order),
        T(test_timer_equal_deadlines_arming_order),
        T(test_timer_mod_reorders),
        T(test_timer_cancel),
        T(test_timer_rearm_from_callback),
        T(test_timer_rearm_now_once_per_iteration),
        T(test_timer_armed_during_run_fires_next_iteration),
        T(test_timer_free_from_callback),
        T(test_timer_blocking_poll_fires),
        T(test_timer_ns_precision),
        T(test_timer_custom_clock_blocking_poll),
        T(test_timer_mono_extreme_deadlines),
        T(test_timer_custom_clock_extreme_deadlines),
        T(test_timer_callback_frees_own_clock),
        T(test_timer_nested_poll_frees_running_clock),
        T(test_timer_clock_freed_twice_in_callback_aborts),
        T(test_timer_disarmed_freed_after_loop),
    };
    char name[64];

    aiol_loop_free(tu_loop_new());
    snprintf(name, sizeof(name), "timer-%s",
             tu_fdmon_requested() ? tu_fdmon_requested() : "default");
    return cmocka_run_group_tests_name(name, tests, NULL, NULL);
}
