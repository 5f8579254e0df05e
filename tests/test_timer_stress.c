/* SPDX-License-Identifier: MIT */
/*
 * test_timer_stress.c - the timer heap against a model: 10,000 timers on
 * a fake clock armed, re-armed, cancelled and fired at random, checking
 * after each step that exactly the due ones fired, in (deadline, arming)
 * order.  Once per fd monitor.  (Split from test_timer.c for length.)
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
#include "loopwatch.h"
#include "prng.h"

static int64_t fake_now(void *opaque)
{
    return *(const int64_t *)opaque;
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
    return S.now + 1 + (int64_t)(prng_next(&S.rng) % 2000) * 500;
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
    x = prng_next(&S.rng) % 100;
    if (S.now >= 2 * SPAN) {
        return;          /* wind down: the test ends at 3 * SPAN */
    }
    if (x < 10) {
        m_arm(m, m_future());
    } else if (x < 15) {
        m_cancel(&S.m[prng_next(&S.rng) % NSTRESS]);
    } else if (x < 20) {
        m_arm(&S.m[prng_next(&S.rng) % NSTRESS], m_future());
    }
}

static void stress_check_model(void)
{
    for (int i = 0; i < NSTRESS; i++) {
        mtimer *m = &S.m[i];

        assert_int_equal(aiol_timer_is_armed(m->t), m->armed);
        assert_int_equal(aiol_timer_deadline_get(m->t),
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
        m_arm(&S.m[prng_next(&S.rng) % NSTRESS], m_future());
    }
    for (int i = 0; i < NSTRESS / 10; i++) {
        m_cancel(&S.m[prng_next(&S.rng) % NSTRESS]);
    }
    while (S.now <= 3 * SPAN) {
        /* between runs: more cancels and re-arms into the future */
        for (int k = 0; k < 20; k++) {
            mtimer *m = &S.m[prng_next(&S.rng) % NSTRESS];

            if (prng_next(&S.rng) % 3 == 0) {
                m_cancel(m);
            } else if (S.now < 2 * SPAN) {
                m_arm(m, m_future());
            }
        }
        S.now += (int64_t)(prng_next(&S.rng) % 20000);
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
    assert_int_equal(lw_stats(loop).timer_runs, (uint64_t)S.fires);
    for (int i = 0; i < NSTRESS; i++) {
        aiol_timer_free(S.m[i].t);
    }
    aiol_clock_free(fc);
    aiol_loop_free(loop);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_timer_heap_stress),
    };
    char name[64];

    aiol_loop_free(tu_loop_new());
    snprintf(name, sizeof(name), "timer-stress-%s",
             tu_fdmon_requested() ? tu_fdmon_requested() : "default");
    return cmocka_run_group_tests_name(name, tests, NULL, NULL);
}
