/* SPDX-License-Identifier: MIT */
/*
 * test_stress.c - multi-threaded stress of the cross-thread operations:
 * notify, bottom-half scheduling and fd handler changes.  Run once per
 * fd monitor (suite 'stress'), also under TSan, so the test itself shares
 * data between threads only through C11 atomics or across pthread_join.
 *
 * A lost wakeup makes a blocking poll sleep forever: these tests hang
 * then, and meson's timeout turns that into a failure.
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
#include <poll.h>
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
#include "prng.h"

/*
 * Spins until *@p v >= @p want: a short while without yielding (so the next
 * request often lands while the loop thread is between two polls, the
 * racy moment for a wakeup), then yielding the CPU.
 */
static void spin_until(atomic_long *v, long want)
{
    for (int i = 0; atomic_load_explicit(v, memory_order_acquire) < want;
         i++) {
        if (i >= 200) {
            sched_yield();
        }
    }
}

/* ----------------------------------------- (a) notify ping-pong */

#define PP_SIDES 2
#define PP_TOTAL 1000000L       /* round trips, over both sides */
#define PP_ONESHOT_TOTAL 100000L

typedef struct pp_side {
    aiol_loop *loop;
    long n;              /* round trips this side makes */
    bool oneshot;        /* wake with a one-shot BH that acks by itself */
    atomic_long req;     /* last request published by the side */
    atomic_long ack;     /* last request the loop thread acknowledged */
} pp_side;

static pp_side g_pp[PP_SIDES];

static void cb_pp_ack(void *opaque)
{
    pp_side *s = opaque;

    /* the loop thread acknowledges from inside the bottom half */
    atomic_store_explicit(&s->ack,
                          atomic_load_explicit(&s->req, memory_order_acquire),
                          memory_order_release);
}

static void *pp_thread(void *opaque)
{
    pp_side *s = opaque;

    for (long i = 1; i <= s->n; i++) {
        /* state first, then the wakeup that announces it */
        atomic_store_explicit(&s->req, i, memory_order_release);
        if (s->oneshot) {
            if (aiol_bh_schedule_oneshot(s->loop, cb_pp_ack, s) != 0) {
                abort();
            }
        } else {
            aiol_loop_notify(s->loop);
        }
        spin_until(&s->ack, i);
    }
    return NULL;
}

static void ping_pong(bool oneshot, long total)
{
    aiol_loop *loop = tu_loop_new();
    pthread_t th[PP_SIDES];
    long acked = 0, polls = 0;

    for (int i = 0; i < PP_SIDES; i++) {
        g_pp[i].loop = loop;
        g_pp[i].n = total / PP_SIDES;
        g_pp[i].oneshot = oneshot;
        atomic_store(&g_pp[i].req, 0);
        atomic_store(&g_pp[i].ack, 0);
    }
    for (int i = 0; i < PP_SIDES; i++) {
        assert_int_equal(pthread_create(&th[i], NULL, pp_thread, &g_pp[i]),
                         0);
    }
    while (acked < total) {
        aiol_loop_poll(loop, true);
        polls++;
        acked = 0;
        for (int i = 0; i < PP_SIDES; i++) {
            pp_side *s = &g_pp[i];
            long r = atomic_load_explicit(&s->req, memory_order_acquire);

            if (!oneshot &&
                r > atomic_load_explicit(&s->ack, memory_order_relaxed)) {
                atomic_store_explicit(&s->ack, r, memory_order_release);
            }
            acked += atomic_load_explicit(&s->ack, memory_order_relaxed);
        }
    }
    for (int i = 0; i < PP_SIDES; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(atomic_load(&g_pp[i].ack), g_pp[i].n);
    }
    print_message("ping-pong (%s): %ld round trips, %ld polls\n",
                  oneshot ? "one-shot BHs" : "notify", total, polls);
    /* every round trip needed a wakeup; polls can only be fewer by batching */
    assert_true(polls >= total / PP_SIDES);
    if (oneshot) {
        assert_int_equal(lw_stats(loop).bh_runs, (uint64_t)total);
    }
    aiol_loop_free(loop);    /* aborts if a one-shot was never run/freed */
}

static void test_stress_notify_ping_pong(void **state)
{
    (void)state;
    ping_pong(false, PP_TOTAL);
}

static void test_stress_oneshot_ping_pong(void **state)
{
    (void)state;
    ping_pong(true, PP_ONESHOT_TOTAL);
}

/* -------------------------------------------- (b) BH schedule storms */

#define STORM_THREADS 2
#define STORM_N 100000L

typedef struct storm {
    aiol_loop *loop;
    aiol_bh *bh;
    atomic_long last;      /* number of the latest schedule, stored first */
    atomic_bool done;
    long runs;             /* loop thread only */
    long seen;             /* loop thread only: 'last' at the latest run */
    long went_back;        /* loop thread only: 'last' decreased (bug) */
} storm;

static storm g_storm[STORM_THREADS];
static void nest_sometimes(void);

static void cb_storm(void *opaque)
{
    storm *s = opaque;
    long last = atomic_load_explicit(&s->last, memory_order_acquire);

    if (last < s->seen) {
        s->went_back++;
    }
    s->seen = last;
    s->runs++;
    nest_sometimes(); /* only in the mixed test */
}

static void *storm_thread(void *opaque)
{
    storm *s = opaque;

    for (long k = 1; k <= STORM_N; k++) {
        atomic_store_explicit(&s->last, k, memory_order_release);
        aiol_bh_schedule(s->bh);
        if (k % 4096 == 0) {
            sched_yield();
        }
    }
    atomic_store(&s->done, true);
    aiol_loop_notify(s->loop);
    return NULL;
}

static void storms_start(aiol_loop *loop, pthread_t *th)
{
    for (int i = 0; i < STORM_THREADS; i++) {
        storm *s = &g_storm[i];

        memset(s, 0, sizeof(*s));
        s->loop = loop;
        atomic_init(&s->last, 0);
        atomic_init(&s->done, false);
        assert_int_equal(aiol_bh_new(loop, cb_storm, s, &s->bh), 0);
    }
    for (int i = 0; i < STORM_THREADS; i++) {
        assert_int_equal(
            pthread_create(&th[i], NULL, storm_thread, &g_storm[i]), 0);
    }
}

static bool storms_done(void)
{
    int ndone = 0;

    for (int i = 0; i < STORM_THREADS; i++) {
        ndone += atomic_load(&g_storm[i].done);
    }
    return ndone == STORM_THREADS;
}

/* After the threads are joined and the loop drained: checks, deletes. */
static void storms_check(aiol_loop *loop)
{
    for (int i = 0; i < STORM_THREADS; i++) {
        storm *s = &g_storm[i];
        long runs = s->runs;

        print_message("storm thread %d: %ld schedules, %ld runs\n", i,
                      STORM_N, s->runs);
        assert_true(s->runs >= 1);
        assert_true(s->runs <= STORM_N);          /* coalesced, never more */
        assert_int_equal(s->went_back, 0);
        /* the last schedule was followed by a run that saw it */
        assert_int_equal(s->seen, STORM_N);
        /* and no bottom half was left stuck "pending" by a race */
        aiol_bh_schedule(s->bh);
        assert_true(aiol_loop_poll(loop, false));
        assert_int_equal(s->runs, runs + 1);
        aiol_bh_free(s->bh);
    }
}

static void test_stress_bh_schedule_storm(void **state)
{
    aiol_loop *loop = tu_loop_new();
    pthread_t th[STORM_THREADS];

    (void)state;
    storms_start(loop, th);
    while (!storms_done()) {
        aiol_loop_poll(loop, true);
    }
    for (int i = 0; i < STORM_THREADS; i++) {
        pthread_join(th[i], NULL);
    }
    /* drain: whatever is still scheduled runs now, once */
    aiol_loop_poll(loop, false);
    aiol_loop_poll(loop, false);
    assert_false(aiol_loop_poll(loop, false));
    storms_check(loop);
    assert_int_equal(lw_stats(loop).bh_runs,
                     (uint64_t)(g_storm[0].runs + g_storm[1].runs));
    aiol_loop_free(loop);
}

/* ------------------------------- (c) fd handlers changed from threads */

#define CH_THREADS 2
#define CH_FDS 4
#define CH_ROUNDS 20000
#define CH_MAX_DEPTH 2

typedef struct inst {
    atomic_long calls;
    long max_iter;         /* loop thread: latest outer iteration it ran in */
    long dead_after;       /* changer thread: 'completed' once removed */
    bool removed;          /* changer thread */
} inst;

typedef struct changer {
    aiol_loop *loop;
    int fds[CH_FDS];
    inst insts[CH_ROUNDS * 2];
    int id;
} changer;

static changer g_ch[CH_THREADS];
static atomic_long g_completed;   /* outer iterations finished by the owner */
static atomic_int g_ch_done;
static long g_cur;                /* loop thread: current outer iteration */
static int g_depth;               /* loop thread */
static long g_nested_calls;       /* loop thread */
static long g_cb_count;           /* loop thread */
static aiol_loop *g_ch_loop;      /* set before the threads start */
static bool g_mixed;              /* set before the threads start */

static void cb_inst(void *opaque);

/* Changer threads must not use cmocka's asserts (they longjmp). */
#define CH_CHECK(cond)                                                       \
    do {                                                                     \
        if (!(cond)) {                                                       \
            fprintf(stderr, "test_stress: %s:%d: %s\n", __FILE__, __LINE__,  \
                    #cond);                                                  \
            abort();                                                         \
        }                                                                    \
    } while (0)

static void ch_set(changer *c, int fd, inst *in)
{
    CH_CHECK(aiol_fd_set(c->loop, fd, cb_inst, NULL, NULL, in) == 0);
}

/* @p in stopped being the handler (removed or replaced) just now. */
static void ch_retired(inst *in)
{
    in->dead_after = atomic_load_explicit(&g_completed, memory_order_acquire);
    in->removed = true;
}

static void cb_inst(void *opaque)
{
    inst *in = opaque;

    atomic_fetch_add_explicit(&in->calls, 1, memory_order_release);
    if (g_cur > in->max_iter) {
        in->max_iter = g_cur;
    }
    if (g_depth > 0) {
        g_nested_calls++;
    }
    /* now and then, poll again from inside the callback */
    if (g_depth < CH_MAX_DEPTH && ++g_cb_count % 7 == 0) {
        g_depth++;
        aiol_loop_poll(g_ch_loop, false);
        g_depth--;
    }
}

/*
 * Mixed test: a bottom half's callback nests now and then, blocking too.
 * A blocking nested poll is safe only while some thread still runs: each
 * one notifies the loop after it marks itself done, which that poll sees
 * even if the notify comes before it blocks.  With every thread gone it
 * could sleep forever.
 */
static void nest_sometimes(void)
{
    if (g_mixed && g_depth < CH_MAX_DEPTH && ++g_cb_count % 5 == 0) {
        bool blocking = g_cb_count % 3 == 0 &&
                        (atomic_load(&g_ch_done) < CH_THREADS || !storms_done());

        g_depth++;
        aiol_loop_poll(g_ch_loop, blocking);
        g_depth--;
    }
}

static void *changer_thread(void *opaque)
{
    changer *c = opaque;
    uint64_t rng = 0x1234567ULL + (uint64_t)c->id;
    int n = 0;

    for (int k = 0; k < CH_ROUNDS; k++) {
        int fd = c->fds[k % CH_FDS];
        inst *a = &c->insts[n++];
        uint64_t x = prng_next(&rng) % 4;

        ch_set(c, fd, a);
        if (x == 0) {
            /* wait until it actually ran, so removals hit live handlers */
            for (int spins = 0; spins < 100000 &&
                 atomic_load_explicit(&a->calls, memory_order_acquire) == 0;
                 spins++) {
                sched_yield();
            }
        } else if (x == 1) {
            sched_yield();
        }
        if (x == 2) {
            /* replace: the old handler is retired when set returns */
            inst *b = &c->insts[n++];

            ch_set(c, fd, b);
            ch_retired(a);
            a = b;
        }
        CH_CHECK(aiol_fd_remove(c->loop, fd) == 0);
        ch_retired(a);
    }
    atomic_fetch_add(&g_ch_done, 1);
    aiol_loop_notify(c->loop);
    return NULL;
}

/*
 * One blocking iteration of a host loop (the owner, in the embedded test): the
 * handlers' own fds when the fd monitor allows it (direct embedding, where
 * dispatch maps readiness to handlers without the loop's lock while other
 * threads remove them), else the loop fd.  Sleeps in poll(2) until the
 * deadline; only the loop's wakeups end an idle sleep.
 */
static void host_iteration(aiol_loop *loop)
{
    struct pollfd fds[CH_THREADS * CH_FDS + 1];
    int64_t deadline = aiol_loop_prepare(loop), now;
    int n = aiol_loop_embed_fds(loop, fds, CH_THREADS * CH_FDS + 1);
    int timeout = -1, r;

    if (n < 0) {
        fds[0] = (struct pollfd){ .fd = aiol_loop_fd_get(loop),
                                  .events = POLLIN };
    }
    if (deadline != AIOL_DEADLINE_NONE) {
        now = aiol_mono_time_get();
        timeout = deadline <= now ? 0 : (int)((deadline - now) / 1000000 + 1);
    }
    do {
        r = poll(fds, n < 0 ? 1 : (nfds_t)n, timeout);
    } while (r < 0 && errno == EINTR);
    assert_true(r >= 0);
    aiol_loop_check(loop);
    if (n < 0) {
        aiol_loop_dispatch(loop);
    } else {
        aiol_loop_dispatch_fds(loop, fds, (size_t)n);
    }
}

/*
 * Changer threads set, replace and remove handlers while the owner polls
 * and nests (@embedded: as a host loop, see host_iteration()).  @mixed: bottom-half storm threads (schedules and notifies)
 * run at the same time, and their callbacks nest polls too.
 */
static void fd_changes(bool mixed, bool embedded)
{
    aiol_loop *loop = tu_loop_new();
    pthread_t th[CH_THREADS], sth[STORM_THREADS];
    long total_calls = 0, used = 0;

    g_mixed = mixed;
    atomic_store(&g_completed, 0);
    atomic_store(&g_ch_done, 0);
    g_cur = 0;
    g_depth = 0;
    g_nested_calls = 0;
    g_cb_count = 0;
    g_ch_loop = loop;
    for (int i = 0; i < CH_THREADS; i++) {
        changer *c = &g_ch[i];

        memset(c, 0, sizeof(*c));
        c->loop = loop;
        c->id = i;
        for (int f = 0; f < CH_FDS; f++) {
            c->fds[f] = tu_eventfd();
            tu_eventfd_signal(c->fds[f]);     /* readable for good */
        }
        for (int k = 0; k < CH_ROUNDS * 2; k++) {
            atomic_init(&c->insts[k].calls, 0);
            c->insts[k].max_iter = -1;
        }
    }
    for (int i = 0; i < CH_THREADS; i++) {
        assert_int_equal(pthread_create(&th[i], NULL, changer_thread,
                                        &g_ch[i]), 0);
    }
    if (mixed) {
        storms_start(loop, sth);
    }
    while (atomic_load(&g_ch_done) < CH_THREADS || (mixed && !storms_done())) {
        if (embedded) {
            host_iteration(loop);
        } else {
            aiol_loop_poll(loop, true);
        }
        g_cur++;
        atomic_store_explicit(&g_completed, g_cur, memory_order_release);
    }
    for (int i = 0; i < CH_THREADS; i++) {
        pthread_join(th[i], NULL);
    }
    if (mixed) {
        for (int i = 0; i < STORM_THREADS; i++) {
            pthread_join(sth[i], NULL);
        }
        g_mixed = false; /* no more nesting: the checks below count runs */
        aiol_loop_poll(loop, false); /* the last schedules run */
        aiol_loop_poll(loop, false);
    }
    /* everything is removed: nothing runs any more */
    for (int i = 0; i < 3; i++) {
        assert_false(aiol_loop_poll(loop, false));
    }
    if (mixed) {
        storms_check(loop);
    }

    for (int i = 0; i < CH_THREADS; i++) {
        changer *c = &g_ch[i];

        for (int k = 0; k < CH_ROUNDS * 2; k++) {
            inst *in = &c->insts[k];
            long calls = atomic_load(&in->calls);

            if (!in->removed) {
                assert_int_equal(calls, 0);    /* never set */
                continue;
            }
            used++;
            total_calls += calls;
            /*
             * Conservative: no call in an outer iteration that started
             * after the changer saw its remove (or replace) return.
             */
            if (calls > 0 && in->max_iter > in->dead_after) {
                fail_msg("handler %d/%d called in iteration %ld, after its "
                         "removal returned during iteration %ld",
                         i, k, in->max_iter, in->dead_after);
            }
        }
        for (int f = 0; f < CH_FDS; f++) {
            assert_false(aiol_fd_is_set(loop, c->fds[f]));
            close(c->fds[f]);
        }
    }
    print_message("fd changes: %ld handlers, %ld calls (%ld nested), "
                  "%ld outer iterations\n", used, total_calls, g_nested_calls,
                  g_cur);
    assert_true(used >= CH_THREADS * CH_ROUNDS);
    assert_true(total_calls > 0);
    assert_true(g_nested_calls > 0);
    aiol_loop_free(loop);
}

static void test_stress_fd_set_remove_from_threads(void **state)
{
    (void)state;
    fd_changes(false, false);
}

static void test_stress_mixed(void **state)
{
    (void)state;
    fd_changes(true, false);
}

static void test_stress_fd_changes_embedded(void **state)
{
    (void)state;
    fd_changes(false, true);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stress_notify_ping_pong),
        cmocka_unit_test(test_stress_oneshot_ping_pong),
        cmocka_unit_test(test_stress_bh_schedule_storm),
        cmocka_unit_test(test_stress_fd_set_remove_from_threads),
        cmocka_unit_test(test_stress_mixed),
        cmocka_unit_test(test_stress_fd_changes_embedded),
    };
    char name[64];

    aiol_loop_free(tu_loop_new());
    snprintf(name, sizeof(name), "stress-%s",
             tu_fdmon_requested() ? tu_fdmon_requested() : "default");
    return cmocka_run_group_tests_name(name, tests, NULL, NULL);
}
