/*
 * test_timer.c - clock and timer tests, run once per backend.
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

#include "aioloop/aioloop.h"
#include "testutil.h"
#include "tuplus.h"

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
    assert_int_equal(aiol_timer_expire_ns(r->t), -1);
}

static void arm(trec *r, int64_t when)
{
    assert_int_equal(aiol_timer_mod(r->t, when), 0);
    assert_true(aiol_timer_is_armed(r->t));
    assert_int_equal(aiol_timer_expire_ns(r->t), when);
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
    aiol_clock *c = aiol_loop_clock(loop);
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
    assert_int_equal(tu_stats(loop).timer_runs, 5);

    /* ahead of now: blocking polls wake for them in deadline order */
    g_norder = 0;
    now = aiol_clock_get_ns(c);
    for (int i = 0; i < 5; i++) {
        arm(&r[i], now + TU_US(off[i] * 5));    /* 0.5 ms .. 2.5 ms */
    }
    while (g_norder < 5 && polls < 1000) {
        aiol_loop_poll(loop, true);
        polls++;
    }
    assert_order(expect, 5);
    assert_int_equal(tu_stats(loop).timer_runs, 10);
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
    aiol_clock *c = aiol_loop_clock(loop);
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
    aiol_clock *c = aiol_loop_clock(loop);
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
    far = aiol_clock_get_ns(c) + HOUR;
    arm(&a, PAST(100));
    arm(&b, PAST(200));
    arm(&a, far - 7);
    arm(&a, far);                 /* re-armed: the last deadline counts */
    assert_true(aiol_loop_poll(loop, false));
    assert_order((const int[]){ 'B' }, 1);
    assert_true(aiol_timer_is_armed(a.t));
    assert_int_equal(aiol_timer_expire_ns(a.t), far);
    assert_false(aiol_loop_poll(loop, false));

    /* and back into the past: fires at the next poll */
    arm(&a, PAST(1));
    assert_true(aiol_loop_poll(loop, false));
    assert_order((const int[]){ 'B', 'A' }, 2);
    assert_int_equal(tu_stats(loop).timer_runs, 8);

    aiol_timer_free(a.t);
    aiol_timer_free(b.t);
    aiol_timer_free(d.t);
    aiol_loop_free(loop);
}

static void test_timer_cancel(void **state)
{
    aiol_loop *loop = tu_loop_new();
    aiol_clock *c = aiol_loop_clock(loop);
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
    assert_int_equal(aiol_timer_expire_ns(r[4].t), -1);
    assert_true(aiol_timer_is_armed(r[5].t));
    assert_int_equal(aiol_timer_expire_ns(r[5].t), PAST(50));
    assert_true(aiol_loop_poll(loop, false));
    assert_order((const int[]){ 8, 7, 6, 5, 3, 2, 1 }, 7);
    assert_int_equal(tu_stats(loop).timer_runs, 7);

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
                                        : aiol_clock_get_ns(r->clock);
        assert_int_equal(aiol_timer_mod(r->t, when), 0);
        assert_true(aiol_timer_is_armed(r->t));
    }
}

static void test_timer_rearm_from_callback(void **state)
{
    aiol_loop *loop = tu_loop_new();
    aiol_clock *c = aiol_loop_clock(loop);
    int64_t far = aiol_clock_get_ns(c) + HOUR;
    trec r;

    (void)state;
    trec_init(&r, c, 1, cb_rearm);
    r.rearm_to = far;
    arm(&r, PAST(0));
    assert_true(aiol_loop_poll(loop, false));
    assert_int_equal(r.runs, 1);
    assert_false(r.armed_in_cb);        /* disarmed while its callback runs */
    assert_true(aiol_timer_is_armed(r.t));
    assert_int_equal(aiol_timer_expire_ns(r.t), far);
    assert_false(aiol_loop_poll(loop, false));
    assert_int_equal(r.runs, 1);
    aiol_timer_free(r.t);
    aiol_loop_free(loop);
}

static void test_timer_rearm_now_once_per_iteration(void **state)
{
    aiol_loop *loop = tu_loop_new();
    aiol_clock *c = aiol_loop_clock(loop);
    tu_watchdog w;
    trec r;

    (void)state;
    trec_init(&r, c, 1, cb_rearm);
    r.rearm_to = -1;                    /* "now": always already due */
    r.rearm_limit = 25;                 /* a broken loop fails, not hangs */
    arm(&r, PAST(0));
    for (int i = 1; i <= 10; i++) {
        assert_true(aiol_loop_poll(loop, false));
        assert_int_equal(r.runs, i);
        assert_int_equal(tu_stats(loop).timer_runs, (uint64_t)i);
    }
    /* blocking polls do not sleep on a due timer, and fire it once each */
    tu_watchdog_arm(&w, loop, TU_MS(5000));
    for (int i = 11; i <= 20; i++) {
        assert_true(aiol_loop_poll(loop, true));
        assert_int_equal(r.runs, i);
    }
    assert_int_equal(tu_watchdog_free(&w), 0);
    assert_int_equal(tu_stats(loop).iterations, 20);
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
    aiol_clock *c = aiol_loop_clock(loop);
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
    aiol_clock *c = aiol_loop_clock(loop);
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
    assert_int_equal(tu_stats(loop).timer_runs, 3);
    aiol_timer_free(b.t);
    aiol_timer_free(e.t);
    aiol_timer_free(NULL);             /* no-op */
    aiol_loop_free(loop);              /* aborts if anything stayed armed */
}

/* -------------------------------------------------- blocking polls */

static void test_timer_blocking_poll_fires(void **state)
{
    aiol_loop *loop = tu_loop_new();
    aiol_clock *c = aiol_loop_clock(loop);
    aiol_loop_stats before;
    tu_watchdog w;
    trec r;

    (void)state;
    trec_init(&r, c, 1, cb_count);
    assert_false(aiol_loop_poll(loop, false));  /* consume a start-up wakeup */
    tu_watchdog_arm(&w, loop, TU_MS(5000));
    before = tu_stats(loop);
    arm(&r, aiol_clock_get_ns(c) + TU_MS(2));
    /* the one blocking poll sleeps until the timer and fires it */
    assert_true(aiol_loop_poll(loop, true));
    assert_int_equal(r.runs, 1);
    assert_int_equal(tu_stats(loop).timer_runs - before.timer_runs, 1);
    assert_int_equal(tu_stats(loop).iterations - before.iterations, 1);
    assert_int_equal(tu_watchdog_free(&w), 0);
    aiol_timer_free(r.t);
    aiol_loop_free(loop);
}

static void test_timer_ns_precision(void **state)
{
    aiol_loop *loop = tu_loop_new();
    aiol_clock *c = aiol_loop_clock(loop);
    aiol_loop_stats before;
    tu_watchdog w;
    trec r;

    (void)state;
    trec_init(&r, c, 1, cb_count);
    assert_false(aiol_loop_poll(loop, false));
    tu_watchdog_arm(&w, loop, TU_MS(5000));
    for (int round = 0; round < 5; round++) {
        uint64_t polls;

        before = tu_stats(loop);
        arm(&r, aiol_clock_get_ns(c) + TU_US(300));
        while (r.runs == round) {
            aiol_loop_poll(loop, true);
            /* a wait rounded to 0 would spin here for thousands of polls */
            assert_true(tu_stats(loop).iterations - before.iterations <= 3);
        }
        polls = tu_stats(loop).iterations - before.iterations;
        assert_true(polls >= 1 && polls <= 3);
        assert_int_equal(r.runs, round + 1);
    }
    assert_int_equal(tu_watchdog_free(&w), 0);

    /* the same for aiol_loop_poll_deadline() with no timer at all */
    for (int round = 0; round < 5; round++) {
        int64_t deadline = aiol_clock_now_ns() + TU_US(300);
        int polls = 0;

        while (aiol_clock_now_ns() < deadline) {
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
    tu_watchdog w;
    trec r;

    (void)state;
    assert_int_equal(aiol_clock_new(loop, fake_now, &fake, &fc), 0);
    assert_int_equal(aiol_clock_get_ns(fc), fake);
    trec_init(&r, fc, 1, cb_count);
    arm(&r, fake + TU_MS(1));
    assert_false(aiol_loop_poll(loop, false));
    assert_int_equal(r.runs, 0);

    /*
     * The fake clock is 1 ms behind the timer and does not move: the
     * blocking poll must still come back (the loop sleeps as if the clock
     * ran at real speed) instead of sleeping until the watchdog.
     */
    tu_watchdog_arm(&w, loop, TU_MS(5000));
    assert_false(aiol_loop_poll(loop, true));
    assert_int_equal(r.runs, 0);
    assert_true(aiol_timer_is_armed(r.t));
    assert_int_equal(tu_watchdog_free(&w), 0);

    /* once the fake clock reaches it, it fires without sleeping */
    fake += TU_MS(1);
    tu_watchdog_arm(&w, loop, TU_MS(5000));
    assert_true(aiol_loop_poll(loop, true));
    assert_int_equal(r.runs, 1);
    assert_int_equal(tu_watchdog_free(&w), 0);

    aiol_timer_free(r.t);
    aiol_clock_free(fc);
    aiol_loop_free(loop);
}

/* --------------------------------------------------- heap stress */

#define NSTRESS 10000
#define SPAN ((int64_t)1000000)

typedef struct mtimer {
    aiol_timer *t;
    int64_t deadline;    /* model: valid while armed */
    uint64_t seq;        /* model: arming order, valid while armed */
    bool armed;
    int fires;
} mtimer;

static struct {
    mtimer m[NSTRESS];
    int64_t now;
    uint64_t seq;
    uint64_t rng;
    int64_t last_deadline;
    uint64_t last_seq;
    bool any_fired;
    long fires, arms, cancels, superseded;
} S;

static void m_arm(mtimer *m, int64_t when)
{
    assert_int_equal(aiol_timer_mod(m->t, when), 0);
    if (m->armed) {
        S.superseded++;
    }
    m->deadline = when;
    m->seq = S.seq++;
    m->armed = true;
    S.arms++;
}

static void m_cancel(mtimer *m)
{
    aiol_timer_cancel(m->t);
    if (m->armed) {
        S.cancels++;
    }
    m->armed = false;
}

/* A deadline strictly after the fake time: never due in the current run. */
static int64_t m_future(void)
{
    return S.now + 1 + (int64_t)(tu_rand(&S.rng) % 2000) * 500;
}

static void cb_stress(void *opaque)
{
    mtimer *m = opaque;
    uint64_t x;

    /* only armed, due timers fire, in (deadline, arming order) order */
    assert_true(m->armed);
    assert_true(m->deadline <= S.now);
    assert_false(aiol_timer_is_armed(m->t));
    if (S.any_fired) {
        assert_true(m->deadline > S.last_deadline ||
                    (m->deadline == S.last_deadline && m->seq > S.last_seq));
    }
    S.any_fired = true;
    S.last_deadline = m->deadline;
    S.last_seq = m->seq;
    m->armed = false;
    m->fires++;
    S.fires++;

    /* shake the heap from inside the run */
    x = tu_rand(&S.rng) % 100;
    if (S.now >= 2 * SPAN) {
        return;          /* wind down: the test ends at 3 * SPAN */
    }
    if (x < 10) {
        m_arm(m, m_future());
    } else if (x < 15) {
        m_cancel(&S.m[tu_rand(&S.rng) % NSTRESS]);
    } else if (x < 20) {
        m_arm(&S.m[tu_rand(&S.rng) % NSTRESS], m_future());
    }
}

static void stress_check_model(void)
{
    for (int i = 0; i < NSTRESS; i++) {
        mtimer *m = &S.m[i];

        assert_int_equal(aiol_timer_is_armed(m->t), m->armed);
        assert_int_equal(aiol_timer_expire_ns(m->t),
                         m->armed ? m->deadline : -1);
        /* everything due has fired */
        assert_true(!m->armed || m->deadline > S.now);
    }
}

static void test_timer_heap_stress(void **state)
{
    aiol_loop *loop = tu_loop_new();
    aiol_clock *fc;
    int step = 0;

    (void)state;
    memset(&S, 0, sizeof(S));
    S.rng = 0x9E3779B97F4A7C15ULL;
    assert_int_equal(aiol_clock_new(loop, fake_now, &S.now, &fc), 0);
    for (int i = 0; i < NSTRESS; i++) {
        assert_int_equal(aiol_timer_new(fc, cb_stress, &S.m[i], &S.m[i].t),
                         0);
    }
    /* 2000 distinct deadlines for 10000 timers: many ties */
    for (int i = 0; i < NSTRESS; i++) {
        m_arm(&S.m[tu_rand(&S.rng) % NSTRESS], m_future());
    }
    for (int i = 0; i < NSTRESS / 10; i++) {
        m_cancel(&S.m[tu_rand(&S.rng) % NSTRESS]);
    }
    while (S.now <= 3 * SPAN) {
        /* between runs: more cancels and re-arms into the future */
        for (int k = 0; k < 20; k++) {
            mtimer *m = &S.m[tu_rand(&S.rng) % NSTRESS];

            if (tu_rand(&S.rng) % 3 == 0) {
                m_cancel(m);
            } else if (S.now < 2 * SPAN) {
                m_arm(m, m_future());
            }
        }
        S.now += (int64_t)(tu_rand(&S.rng) % 20000);
        aiol_loop_poll(loop, false);
        if (++step % 64 == 0) {
            stress_check_model();
        }
    }
    stress_check_model();
    for (int i = 0; i < NSTRESS; i++) {
        assert_false(S.m[i].armed);
    }
    /* every arming either fired once or was cancelled/re-armed over */
    assert_true(S.fires > NSTRESS / 2);
    assert_int_equal(S.fires + S.cancels + S.superseded, S.arms);
    assert_int_equal(tu_stats(loop).timer_runs, (uint64_t)S.fires);
    for (int i = 0; i < NSTRESS; i++) {
        aiol_timer_free(S.m[i].t);
    }
    aiol_clock_free(fc);
    aiol_loop_free(loop);
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
        T(test_timer_heap_stress),
    };
    char name[64];

    aiol_loop_free(tu_loop_new());
    snprintf(name, sizeof(name), "timer-%s",
             tu_backend_requested() ? tu_backend_requested() : "default");
    return cmocka_run_group_tests_name(name, tests, NULL, NULL);
}
