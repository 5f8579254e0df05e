/* SPDX-License-Identifier: MIT */
/*
 * test_bh.c - bottom-half tests, run once per fd monitor ($AIOLOOP_FDMON).
 *
 * Every test makes its own loop.  Bottom halves record their runs (and the
 * global order of runs) in a struct rec; tests assert on those records and
 * on the loop's counters (bh_runs, iterations), never on elapsed time.
 * The single-threaded tests run twice: with thread-safe bottom halves and,
 * as "local_*", with local ones (aiol_bh_new_local()).
 * Blocking polls that must return carry a watchdog timer (loopwatch.h), so a
 * missed wakeup fails the test instead of hanging it.
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
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "aioloop/aioloop.h"
#include "testutil.h"
#include "loopwatch.h"

#define MAX_ORDER 256

typedef struct rec rec;
struct rec {
    aiol_loop *loop;
    aiol_bh *bh;
    int id;
    int runs;
    int nested_runs;     /* runs while g_depth > 0 */
    rec *sched_before_nest; /* cb_nest: scheduled before its nested poll */
    int limit;           /* cb_resched_self: stop after this many runs */
    bool nest_blocking;  /* cb_nest: the nested poll blocks */
    bool nested_progress;
};

static int g_order[MAX_ORDER];
static int g_norder;
static int g_depth;
static bool g_local;    /* rec_init() makes local bottom halves */
static bool g_shared;   /* ... else thread-safe ones on any loop */

static int reset(void **state)
{
    (void)state;
    g_norder = 0;
    g_depth = 0;
    g_local = false;
    g_shared = false;
    return 0;
}

static int reset_local(void **state)
{
    reset(state);
    g_local = true;
    return 0;
}

static void rec_init(rec *r, aiol_loop *loop, int id, aiol_handler_fn *cb)
{
    memset(r, 0, sizeof(*r));
    r->loop = loop;
    r->id = id;
    if (cb != NULL) {
        assert_int_equal((g_local    ? aiol_bh_new_local
                          : g_shared ? aiol_bh_new_shared
                                     : aiol_bh_new)(loop, cb, r, &r->bh),
                         0);
        assert_non_null(r->bh);
    }
}

static void note(rec *r)
{
    r->runs++;
    if (g_depth > 0) {
        r->nested_runs++;
    }
    assert_true(g_norder < MAX_ORDER);
    g_order[g_norder++] = r->id;
}

static void cb_count(void *opaque)
{
    note(opaque);
}

static void cb_resched_self(void *opaque)
{
    rec *r = opaque;

    note(r);
    /* the limit keeps a broken loop from spinning here forever */
    if (r->runs < r->limit) {
        aiol_bh_schedule(r->bh);
    }
}

static void cb_delete_self(void *opaque)
{
    rec *r = opaque;

    note(r);
    aiol_bh_free(r->bh);
    r->bh = NULL;
}

/* Reschedules itself, then deletes itself: the pending run must not happen. */
static void cb_resched_then_delete(void *opaque)
{
    rec *r = opaque;

    note(r);
    aiol_bh_schedule(r->bh);
    aiol_bh_free(r->bh);
    r->bh = NULL;
}

static uint64_t bh_runs(aiol_loop *loop)
{
    return lw_stats(loop).bh_runs;
}

/* ------------------------------------------------------ basic running */

static void test_bh_schedule_runs_once(void **state)
{
    aiol_loop *loop = tu_loop_new();
    rec r;

    (void)state;
    rec_init(&r, loop, 1, cb_count);
    /* created, not scheduled: nothing runs */
    assert_false(aiol_loop_poll(loop, false));
    assert_int_equal(r.runs, 0);
    assert_int_equal(bh_runs(loop), 0);

    aiol_bh_schedule(r.bh);
    assert_true(aiol_loop_poll(loop, false));
    assert_int_equal(r.runs, 1);
    assert_int_equal(bh_runs(loop), 1);

    /* a run consumes the schedule */
    assert_false(aiol_loop_poll(loop, false));
    assert_int_equal(r.runs, 1);

    /* and the bottom half can be scheduled again */
    aiol_bh_schedule(r.bh);
    assert_true(aiol_loop_poll(loop, false));
    assert_int_equal(r.runs, 2);
    assert_int_equal(bh_runs(loop), 2);

    aiol_bh_free(r.bh);
    aiol_loop_free(loop);
}

static void test_bh_schedule_twice_runs_once(void **state)
{
    aiol_loop *loop = tu_loop_new();
    rec r;

    (void)state;
    rec_init(&r, loop, 1, cb_count);
    aiol_bh_schedule(r.bh);
    aiol_bh_schedule(r.bh);
    aiol_bh_schedule(r.bh);
    assert_true(aiol_loop_poll(loop, false));
    assert_int_equal(r.runs, 1);
    assert_false(aiol_loop_poll(loop, false));
    assert_int_equal(r.runs, 1);
    assert_int_equal(bh_runs(loop), 1);
    aiol_bh_free(r.bh);
    aiol_loop_free(loop);
}

#define NFIFO 100

static void test_bh_fifo_order(void **state)
{
    aiol_loop *loop = tu_loop_new();
    static rec r[NFIFO];
    int expect[NFIFO];

    (void)state;
    for (int i = 0; i < NFIFO; i++) {
        rec_init(&r[i], loop, i, cb_count);
    }
    /* a scrambled schedule order (37 is coprime with 100) */
    for (int k = 0; k < NFIFO; k++) {
        int i = (k * 37 + 11) % NFIFO;
        aiol_bh_schedule(r[i].bh);
        expect[k] = i;
    }
    /* scheduling again does not move a bottom half */
    for (int k = 0; k < NFIFO; k += 3) {
        aiol_bh_schedule(r[expect[k]].bh);
    }
    assert_true(aiol_loop_poll(loop, false));
    assert_int_equal(g_norder, NFIFO);
    for (int k = 0; k < NFIFO; k++) {
        assert_int_equal(g_order[k], expect[k]);
        assert_int_equal(r[expect[k]].runs, 1);
    }
    assert_int_equal(bh_runs(loop), NFIFO);
    for (int i = 0; i < NFIFO; i++) {
        aiol_bh_free(r[i].bh);
    }
    aiol_loop_free(loop);
}

/* ----------------------------------------------------- cancel, delete */

static void test_bh_cancel(void **state)
{
    aiol_loop *loop = tu_loop_new();
    rec a, b;

    (void)state;
    rec_init(&a, loop, 1, cb_count);
    rec_init(&b, loop, 2, cb_count);

    /* cancel before the run: no run, no progress */
    aiol_bh_schedule(a.bh);
    aiol_bh_cancel(a.bh);
    assert_false(aiol_loop_poll(loop, false));
    assert_int_equal(a.runs, 0);
    assert_int_equal(bh_runs(loop), 0);

    /* cancelling an unscheduled bottom half is a no-op */
    aiol_bh_cancel(a.bh);
    assert_false(aiol_loop_poll(loop, false));

    /* cancel, then schedule again before the run: runs once */
    aiol_bh_schedule(a.bh);
    aiol_bh_cancel(a.bh);
    aiol_bh_schedule(a.bh);
    assert_true(aiol_loop_poll(loop, false));
    assert_int_equal(a.runs, 1);

    /* cancelling one does not affect another in the same slice */
    aiol_bh_schedule(a.bh);
    aiol_bh_schedule(b.bh);
    aiol_bh_cancel(a.bh);
    assert_true(aiol_loop_poll(loop, false));
    assert_int_equal(a.runs, 1);
    assert_int_equal(b.runs, 1);
    assert_int_equal(bh_runs(loop), 2);

    /* still usable after being cancelled */
    aiol_bh_schedule(a.bh);
    assert_true(aiol_loop_poll(loop, false));
    assert_int_equal(a.runs, 2);

    aiol_bh_free(a.bh);
    aiol_bh_free(b.bh);
    aiol_loop_free(loop);
}

static void test_bh_delete(void **state)
{
    aiol_loop *loop = tu_loop_new();
    rec a, b, c, d, e;

    (void)state;
    /* deleted while scheduled: never runs (and is freed: ASan) */
    rec_init(&a, loop, 1, cb_count);
    aiol_bh_schedule(a.bh);
    aiol_bh_free(a.bh);
    assert_false(aiol_loop_poll(loop, false));
    assert_int_equal(a.runs, 0);

    /* deleted without ever being scheduled */
    rec_init(&b, loop, 2, cb_count);
    aiol_bh_free(b.bh);
    assert_false(aiol_loop_poll(loop, false));

    /* deletes itself from its own callback: runs once, then never */
    rec_init(&c, loop, 3, cb_delete_self);
    aiol_bh_schedule(c.bh);
    assert_true(aiol_loop_poll(loop, false));
    assert_int_equal(c.runs, 1);
    assert_null(c.bh);
    assert_false(aiol_loop_poll(loop, false));
    assert_int_equal(c.runs, 1);

    /* reschedules then deletes itself: the new schedule is void */
    rec_init(&d, loop, 4, cb_resched_then_delete);
    aiol_bh_schedule(d.bh);
    assert_true(aiol_loop_poll(loop, false));
    assert_false(aiol_loop_poll(loop, false));
    assert_false(aiol_loop_poll(loop, false));
    assert_int_equal(d.runs, 1);

    /* deleted with no poll in between: the loop frees it at teardown */
    rec_init(&e, loop, 5, cb_count);
    aiol_bh_schedule(e.bh);
    aiol_bh_free(e.bh);

    assert_int_equal(bh_runs(loop), 2);
    /* aborts ("bottom halves still exist") if any of them leaked */
    aiol_loop_free(loop);
    assert_int_equal(e.runs, 0);
}

/* ------------------------------------------------- self-rescheduling */

static void test_bh_reschedule_self_once_per_poll(void **state)
{
    aiol_loop *loop = tu_loop_new();
    lw_watchdog w;
    rec r;

    (void)state;
    rec_init(&r, loop, 1, cb_resched_self);
    r.limit = 25;
    aiol_bh_schedule(r.bh);
    for (int i = 1; i <= 10; i++) {
        assert_true(aiol_loop_poll(loop, false));
        assert_int_equal(r.runs, i);
        assert_int_equal(bh_runs(loop), (uint64_t)i);
    }
    /* a blocking poll does not sleep (it is pending) and runs it once */
    lw_watchdog_arm(&w, loop, LW_MS(5000));
    for (int i = 11; i <= 20; i++) {
        assert_true(aiol_loop_poll(loop, true));
        assert_int_equal(r.runs, i);
    }
    assert_int_equal(lw_watchdog_free(&w), 0);
    assert_int_equal(lw_stats(loop).iterations, 20);

    aiol_bh_cancel(r.bh);
    assert_false(aiol_loop_poll(loop, false));
    assert_int_equal(r.runs, 20);
    aiol_bh_free(r.bh);
    aiol_loop_free(loop);
}

/* ----------------------------------------------------------- oneshot */

static void test_bh_oneshot(void **state)
{
    aiol_loop *loop = tu_loop_new();
    rec a, b, c;

    (void)state;
    rec_init(&a, loop, 1, NULL);
    rec_init(&b, loop, 2, cb_count);
    rec_init(&c, loop, 3, NULL);
    assert_int_equal(aiol_bh_schedule_oneshot(loop, cb_count, &a), 0);
    aiol_bh_schedule(b.bh);
    assert_int_equal(aiol_bh_schedule_oneshot(loop, cb_count, &c), 0);
    assert_true(aiol_loop_poll(loop, false));
    assert_int_equal(g_norder, 3);
    if (tu_confined_requested() || g_local) {
        /* b is local: after the thread-safe one-shots (bh.h) */
        assert_int_equal(g_order[0], 1);
        assert_int_equal(g_order[1], 3);
        assert_int_equal(g_order[2], 2);
    } else {
        assert_int_equal(g_order[0], 1);   /* FIFO with ordinary ones */
        assert_int_equal(g_order[1], 2);
        assert_int_equal(g_order[2], 3);
    }
    assert_false(aiol_loop_poll(loop, false));
    assert_false(aiol_loop_poll(loop, false));
    assert_int_equal(a.runs, 1);
    assert_int_equal(c.runs, 1);
    assert_int_equal(bh_runs(loop), 3);
    aiol_bh_free(b.bh);
    /* aborts if the one-shots were not freed; ASan checks the frees */
    aiol_loop_free(loop);
}

/* ---------------------------------------------------------- idle BHs */

static void test_bh_idle(void **state)
{
    aiol_loop *loop = tu_loop_new();
    lw_watchdog w;
    rec r;

    (void)state;
    rec_init(&r, loop, 1, cb_count);

    /* a non-blocking poll runs it, but that is not progress */
    aiol_bh_schedule_idle(r.bh);
    assert_false(aiol_loop_poll(loop, false));
    assert_int_equal(r.runs, 1);
    assert_false(aiol_loop_poll(loop, false));
    assert_int_equal(r.runs, 1);

    /* an idle schedule does not wake the loop: no eventfd write */
    aiol_bh_schedule_idle(r.bh);
    assert_int_equal(lw_stats(loop).notify_kicks, 0);

    /*
     * A blocking poll with only an idle bottom half pending returns after
     * running it (within 10 ms, not never).  The 5 s watchdog catches the
     * hang: if it fired, the poll would return true.
     */
    lw_watchdog_arm(&w, loop, LW_MS(5000));
    assert_false(aiol_loop_poll(loop, true));
    assert_int_equal(r.runs, 2);
    assert_int_equal(lw_watchdog_free(&w), 0);
    assert_int_equal(lw_stats(loop).timer_runs, 0);
    assert_int_equal(bh_runs(loop), 2);

    aiol_bh_free(r.bh);
    aiol_loop_free(loop);
}

/* ---------------------------------------------------------- progress */

static void test_bh_progress(void **state)
{
    aiol_loop *loop = tu_loop_new();
    rec a, b;

    (void)state;
    rec_init(&a, loop, 1, cb_count);
    rec_init(&b, loop, 2, cb_count);
    assert_false(aiol_loop_poll(loop, false));        /* nothing */
    aiol_bh_schedule(a.bh);
    assert_true(aiol_loop_poll(loop, false));         /* a bottom half */
    aiol_bh_schedule_idle(a.bh);
    assert_false(aiol_loop_poll(loop, false));        /* idle only */
    aiol_bh_schedule_idle(a.bh);
    aiol_bh_schedule(b.bh);
    assert_true(aiol_loop_poll(loop, false));         /* idle + normal */
    aiol_bh_schedule(a.bh);
    aiol_bh_cancel(a.bh);
    assert_false(aiol_loop_poll(loop, false));        /* cancelled */
    /* a normal schedule is not demoted by an idle one, either way round */
    aiol_bh_schedule_idle(a.bh);
    aiol_bh_schedule(a.bh);
    assert_true(aiol_loop_poll(loop, false));         /* idle, then normal */
    aiol_bh_schedule(a.bh);
    aiol_bh_schedule_idle(a.bh);
    assert_true(aiol_loop_poll(loop, false));         /* normal, then idle */
    aiol_bh_schedule(a.bh);
    aiol_bh_cancel(a.bh);
    aiol_bh_schedule_idle(a.bh);
    assert_false(aiol_loop_poll(loop, false));        /* cancelled, idle */
    assert_int_equal(a.runs, 6);
    assert_int_equal(b.runs, 1);
    aiol_bh_free(a.bh);
    aiol_bh_free(b.bh);
    aiol_loop_free(loop);
}

/* ----------------------------------------------------- nested slices */

static void cb_nest(void *opaque)
{
    rec *r = opaque;

    note(r);
    if (r->sched_before_nest != NULL) {
        aiol_bh_schedule(r->sched_before_nest->bh);
    }
    g_depth++;
    r->nested_progress = aiol_loop_poll(r->loop, r->nest_blocking);
    g_depth--;
}

static void test_bh_nested_poll_continues_slice(void **state)
{
    aiol_loop *loop = tu_loop_new();
    rec a, b, c, d;

    (void)state;
    rec_init(&a, loop, 'A', cb_nest);
    rec_init(&b, loop, 'B', cb_count);
    rec_init(&c, loop, 'C', cb_count);
    rec_init(&d, loop, 'D', cb_count);
    a.sched_before_nest = &d;   /* a new bottom half, after the slice */

    aiol_bh_schedule(a.bh);
    aiol_bh_schedule(b.bh);
    aiol_bh_schedule(c.bh);
    assert_true(aiol_loop_poll(loop, false));

    assert_int_equal(g_norder, 4);
    assert_int_equal(g_order[0], 'A');
    assert_int_equal(g_order[1], 'B');
    assert_int_equal(g_order[2], 'C');
    assert_int_equal(g_order[3], 'D');
    assert_int_equal(a.runs, 1);
    assert_int_equal(b.runs, 1);
    assert_int_equal(c.runs, 1);
    assert_int_equal(d.runs, 1);
    /* the nested poll ran the rest of the parent's slice, then its own */
    assert_int_equal(a.nested_runs, 0);
    assert_int_equal(b.nested_runs, 1);
    assert_int_equal(c.nested_runs, 1);
    assert_int_equal(d.nested_runs, 1);
    assert_true(a.nested_progress);
    assert_int_equal(bh_runs(loop), 4);
    assert_int_equal(lw_stats(loop).iterations, 2);

    /* nothing is left over for the next poll */
    assert_false(aiol_loop_poll(loop, false));
    assert_int_equal(g_norder, 4);

    aiol_bh_free(a.bh);
    aiol_bh_free(b.bh);
    aiol_bh_free(c.bh);
    aiol_bh_free(d.bh);
    aiol_loop_free(loop);
}

/*
 * A nested *blocking* poll (BDRV_POLL_WHILE style) with the rest of its
 * parent's slice still pending must not sleep: it runs that rest.
 */
static void test_bh_nested_blocking_poll_runs_parent_slice(void **state)
{
    aiol_loop *loop = tu_loop_new();
    lw_watchdog w;
    rec a, b;

    (void)state;
    assert_false(aiol_loop_poll(loop, false));
    rec_init(&a, loop, 'A', cb_nest);
    rec_init(&b, loop, 'B', cb_count);
    a.nest_blocking = true;
    lw_watchdog_arm(&w, loop, LW_MS(5000));
    aiol_bh_schedule(a.bh);
    aiol_bh_schedule(b.bh);
    assert_true(aiol_loop_poll(loop, false));
    assert_int_equal(lw_watchdog_free(&w), 0);
    assert_int_equal(g_norder, 2);
    assert_int_equal(g_order[0], 'A');
    assert_int_equal(g_order[1], 'B');
    assert_int_equal(b.nested_runs, 1);
    assert_true(a.nested_progress);
    aiol_bh_free(a.bh);
    aiol_bh_free(b.bh);
    aiol_loop_free(loop);
}

/* ------------------------------------------------------ cross-thread */

typedef struct xthread {
    aiol_bh *bh;
    int64_t delay_ns;
    atomic_int runs;
} xthread;

static void cb_xcount(void *opaque)
{
    xthread *x = opaque;

    atomic_fetch_add(&x->runs, 1);
}

static void *thread_schedule(void *opaque)
{
    xthread *x = opaque;

    lw_sleep_ns(x->delay_ns);
    aiol_bh_schedule(x->bh);
    return NULL;
}

static void test_bh_cross_thread_wakes_blocking_poll(void **state)
{
    aiol_loop *loop = tu_loop_new();
    static xthread x;   /* static: a failing test must not strand the thread */
    lw_watchdog w;
    pthread_t t;

    (void)state;
    x.delay_ns = LW_MS(5);
    atomic_init(&x.runs, 0);
    /*
     * A loop may start with a wakeup pending (the poll fd monitor notifies
     * itself when a handler, here its own notifier, is set): consume it so
     * that only the bottom half can end the blocking polls below.
     */
    assert_false(aiol_loop_poll(loop, false));
    assert_int_equal(aiol_bh_new_shared(loop, cb_xcount, &x, &x.bh), 0);
    for (int round = 0; round < 5; round++) {
        lw_watchdog_arm(&w, loop, LW_MS(5000));
        assert_int_equal(pthread_create(&t, NULL, thread_schedule, &x), 0);
        /* only the bottom half can end this poll (or the watchdog) */
        assert_true(aiol_loop_poll(loop, true));
        assert_int_equal(atomic_load(&x.runs), round + 1);
        assert_int_equal(lw_watchdog_free(&w), 0);
        pthread_join(t, NULL);
    }
    assert_int_equal(bh_runs(loop), 5);
    assert_int_equal(lw_stats(loop).iterations, 6);
    aiol_bh_free(x.bh);
    aiol_loop_free(loop);
}

/*
 * Two loops on two threads play ping-pong with bottom halves, each side
 * in blocking polls: every schedule lands while the other thread is about
 * to sleep, asleep or running, so a push that neither side notices (the
 * F2b handshake in notify.c) shows up as a hang, which the watchdogs turn
 * into a failure.
 */
enum { PINGPONG_ROUNDS = 20000 };

typedef struct side {
    aiol_loop *loop;
    aiol_bh *bh;             /* runs on this side's loop */
    struct side *peer;
    atomic_int runs;
    lw_watchdog w;           /* armed on, and freed by, this side's thread */
    int w_ret;               /* lw_watchdog_free() of the thread's side */
} side;

/* (the volleys go on until both sides stop polling) */
static void cb_volley(void *opaque)
{
    side *s = opaque;

    atomic_fetch_add(&s->runs, 1);
    aiol_bh_schedule(s->peer->bh);
}

static void *run_side(void *opaque)
{
    side *s = opaque;

    while (atomic_load(&s->runs) < PINGPONG_ROUNDS && s->w.fired == 0) {
        aiol_loop_poll(s->loop, true);
    }
    return NULL;
}

/* The other thread's side: its loop (maybe confined) is its own. */
static void *run_side_thread(void *opaque)
{
    side *s = opaque;

    run_side(s);
    s->w_ret = lw_watchdog_free(&s->w);
    return NULL;
}

static void test_bh_cross_thread_pingpong(void **state)
{
    static side a, b;   /* static: a failing test must not strand a thread */
    pthread_t t;

    (void)state;
    a.peer = &b;
    b.peer = &a;
    for (side *s = &a; s != NULL; s = s == &a ? &b : NULL) {
        s->loop = tu_loop_new();
        atomic_init(&s->runs, 0);
        assert_int_equal(aiol_bh_new_shared(s->loop, cb_volley, s, &s->bh), 0);
        lw_watchdog_arm(&s->w, s->loop, LW_MS(20000));
    }
    assert_int_equal(pthread_create(&t, NULL, run_side_thread, &b), 0);
    aiol_bh_schedule(a.bh);
    run_side(&a);
    /* b's last volley may still be on its way: let a take it */
    while (atomic_load(&b.runs) < PINGPONG_ROUNDS && a.w.fired == 0) {
        aiol_loop_poll(a.loop, true);
    }
    pthread_join(t, NULL);
    assert_int_equal(lw_watchdog_free(&a.w), 0);
    assert_int_equal(b.w_ret, 0);
    assert_true(atomic_load(&a.runs) >= PINGPONG_ROUNDS);
    assert_true(atomic_load(&b.runs) >= PINGPONG_ROUNDS);
    aiol_bh_free(a.bh);
    aiol_bh_free(b.bh);
    aiol_loop_free(a.loop);
    aiol_loop_free(b.loop);
}

/* ------------------------------------------------ free with live BHs */

static void free_with_live_bh(void *arg)
{
    aiol_loop *loop;
    aiol_bh *bh;

    (void)arg;
    loop = tu_loop_new();
    if (aiol_bh_new(loop, cb_count, NULL, &bh) != 0) {
        _exit(3);
    }
    aiol_bh_schedule(bh);
    aiol_loop_free(loop);   /* must abort */
}

static void test_bh_loop_free_with_live_bh_aborts(void **state)
{
    char err[4096];
    int status = tu_run_child(free_with_live_bh, NULL, err, sizeof(err));

    (void)state;
    if (WIFEXITED(status) && WEXITSTATUS(status) == TU_EXIT_SKIP) {
        skip();
    }
    assert_true(tu_aborted_with(status, err, "bottom halves"));
}

/* ------------------------------------------------------------- local */

/*
 * Both kinds in one poll: the thread-safe ones in their order, then the
 * local ones in theirs; a local schedule never kicks the loop, and one
 * pending keeps a blocking poll from sleeping.
 */
static void test_bh_local_after_threadsafe(void **state)
{
    aiol_loop *loop = tu_loop_new();
    rec a, b, c, d;
    lw_watchdog w;

    (void)state;
    g_shared = true; /* (on a confined loop aiol_bh_new() is local) */
    rec_init(&a, loop, 1, cb_count);
    rec_init(&b, loop, 2, cb_count);
    g_local = true;
    rec_init(&c, loop, 3, cb_count);
    rec_init(&d, loop, 4, cb_count);
    aiol_bh_schedule(d.bh);
    aiol_bh_schedule(a.bh);
    aiol_bh_schedule(c.bh);
    aiol_bh_schedule(b.bh);
    aiol_bh_schedule(d.bh);          /* (already pending: runs once) */
    assert_true(aiol_loop_poll(loop, false));
    assert_int_equal(g_norder, 4);
    assert_int_equal(g_order[0], 1);
    assert_int_equal(g_order[1], 2);
    assert_int_equal(g_order[2], 4);
    assert_int_equal(g_order[3], 3);

    lw_watchdog_arm(&w, loop, LW_MS(5000));
    aiol_bh_schedule(c.bh);
    assert_true(aiol_loop_poll(loop, true));
    assert_int_equal(c.runs, 2);
    assert_int_equal(lw_watchdog_free(&w), 0);
    assert_int_equal(lw_stats(loop).notify_kicks, 0);

    /* pending local ones at teardown are freed with the loop's lists */
    aiol_bh_schedule(d.bh);
    aiol_bh_free(a.bh);
    aiol_bh_free(b.bh);
    aiol_bh_free(c.bh);
    aiol_bh_free(d.bh);
    aiol_loop_free(loop);
}

#define T(f) cmocka_unit_test_setup(f, reset)
/* the same test with local bottom halves */
#define L(f) { "local_" #f, f, reset_local, NULL, NULL }

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_bh_schedule_runs_once),
        T(test_bh_schedule_twice_runs_once),
        T(test_bh_fifo_order),
        T(test_bh_cancel),
        T(test_bh_delete),
        T(test_bh_reschedule_self_once_per_poll),
        T(test_bh_oneshot),
        T(test_bh_idle),
        T(test_bh_progress),
        T(test_bh_nested_poll_continues_slice),
        T(test_bh_nested_blocking_poll_runs_parent_slice),
        T(test_bh_cross_thread_wakes_blocking_poll),
        T(test_bh_cross_thread_pingpong),
        T(test_bh_loop_free_with_live_bh_aborts),
        T(test_bh_local_after_threadsafe),
        L(test_bh_schedule_runs_once),
        L(test_bh_schedule_twice_runs_once),
        L(test_bh_fifo_order),
        L(test_bh_cancel),
        L(test_bh_delete),
        L(test_bh_reschedule_self_once_per_poll),
        L(test_bh_idle),
        L(test_bh_progress),
        L(test_bh_nested_poll_continues_slice),
        L(test_bh_nested_blocking_poll_runs_parent_slice),
    };
    char name[64];

    /* exits 77 here, before any test runs, when the fd monitor is missing */
    aiol_loop_free(tu_loop_new());
    snprintf(name, sizeof(name), "bh-%s",
             tu_fdmon_requested() ? tu_fdmon_requested() : "default");
    return cmocka_run_group_tests_name(name, tests, NULL, NULL);
}
