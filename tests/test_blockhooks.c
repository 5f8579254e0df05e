/* SPDX-License-Identifier: MIT */
/*
 * test_blockhooks.c - aiol_loop_block_hooks_set(), run once per fd monitor.
 *
 * The hooks bracket exactly the waits that may sleep: a binding releases
 * its interpreter lock in before() and takes it back in after(), so a
 * callback running between the two, a missing after(), or a hook around a
 * wait that cannot sleep would each break it.  The hooks here record what
 * a binding would trip over.
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
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "aioloop/aioloop.h"
#include "testutil.h"
#include "loopwatch.h"

typedef struct hooks {
    int before, after;
    bool inside;        /* between before() and after() */
    int misplaced;      /* callbacks that ran inside, hooks out of pairs */
} hooks;

static void hook_before(void *opaque)
{
    hooks *h = opaque;

    h->misplaced += h->inside;
    h->inside = true;
    h->before++;
}

static void hook_after(void *opaque)
{
    hooks *h = opaque;

    h->misplaced += !h->inside;
    h->inside = false;
    h->after++;
}

typedef struct target {
    hooks *h;
    int fd;
    int runs;
} target;

static void on_event(void *opaque)
{
    target *t = opaque;

    t->h->misplaced += t->h->inside;
    t->runs++;
    if (t->fd >= 0) {
        tu_eventfd_drain(t->fd);
    }
}

static aiol_loop *hooked_loop(hooks *h)
{
    aiol_loop *loop = tu_loop_new();

    while (aiol_loop_poll(loop, false)) {
        /* settle: a fresh loop may have a wakeup pending */
    }
    aiol_loop_block_hooks_set(loop, hook_before, hook_after, h);
    return loop;
}

/* Waits that cannot sleep never call the hooks. */
static void test_block_hooks_not_for_waits_that_cannot_sleep(void **state)
{
    hooks h = {0};
    aiol_loop *loop = hooked_loop(&h);
    target t = {&h, -1, 0};
    aiol_bh *bh;

    (void)state;
    assert_false(aiol_loop_poll(loop, false));
    assert_int_equal(aiol_bh_new(loop, on_event, &t, &bh), 0);
    aiol_bh_schedule(bh);
    assert_true(aiol_loop_poll(loop, true)); /* a pending BH: deadline 0 */
    assert_int_equal(t.runs, 1);
    assert_false(aiol_loop_poll_deadline(loop, 0));
    assert_int_equal(h.before, 0);
    assert_int_equal(h.after, 0);
    aiol_bh_free(bh);
    aiol_loop_free(loop);
}

/* Every wait that may sleep is bracketed; no callback runs inside. */
static void test_block_hooks_bracket_each_blocking_wait(void **state)
{
    hooks h = {0};
    aiol_loop *loop = hooked_loop(&h);
    target ev = {&h, tu_eventfd(), 0};
    lw_watchdog w;

    (void)state;
    assert_int_equal(aiol_fd_set(loop, ev.fd, on_event, NULL, NULL, &ev), 0);
    aiol_loop_poll(loop, false); /* (a registration may leave a wakeup) */
    h.before = h.after = 0;

    /* readiness already there: the wait is still one that may sleep */
    tu_eventfd_signal(ev.fd);
    assert_true(aiol_loop_poll(loop, true));
    assert_int_equal(ev.runs, 1);
    assert_int_equal(h.before, 1);
    assert_int_equal(h.after, 1);

    /*
     * A timer ends the wait: one pair, the timer runs after it.  The
     * timeouts here leave room for a loaded machine (sanitizers, tests in
     * parallel): one already due when the poll starts makes a wait that
     * cannot sleep, which no hook brackets.
     */
    lw_watchdog_arm(&w, loop, LW_MS(50));
    assert_true(aiol_loop_poll(loop, true));
    assert_int_equal(lw_watchdog_free(&w), 1);
    assert_int_equal(h.before, 2);
    assert_int_equal(h.after, 2);

    /* a bounded deadline that passes */
    assert_false(aiol_loop_poll_deadline(loop, aiol_mono_time_get() + LW_MS(20)));
    assert_int_equal(h.before, 3);
    assert_int_equal(h.after, 3);
    assert_false(h.inside);
    assert_int_equal(h.misplaced, 0);

    /* removed: no more calls */
    aiol_loop_block_hooks_set(loop, NULL, NULL, NULL);
    assert_false(aiol_loop_poll_deadline(loop, aiol_mono_time_get() + LW_MS(1)));
    assert_int_equal(h.before, 3);
    assert_int_equal(aiol_fd_remove(loop, ev.fd), 0);
    aiol_loop_free(loop);
    close(ev.fd);
}

typedef struct waker {
    aiol_loop *loop;
    target *t;
} waker;

static void *thread_wake(void *opaque)
{
    waker *k = opaque;

    lw_sleep_ns(LW_MS(5));
    tu_eventfd_signal(k->t->fd);
    return NULL;
}

/* A nested blocking poll inside a callback gets its own pair. */
typedef struct nester {
    hooks *h;
    aiol_loop *loop;
    target *inner;
    int runs;
} nester;

static void on_outer(void *opaque)
{
    nester *n = opaque;
    pthread_t th;
    waker k = {n->loop, n->inner};

    n->h->misplaced += n->h->inside;
    n->runs++;
    assert_int_equal(pthread_create(&th, NULL, thread_wake, &k), 0);
    while (n->inner->runs == 0) {
        aiol_loop_poll(n->loop, true);
    }
    pthread_join(th, NULL);
}

static void test_block_hooks_nested_and_cross_thread(void **state)
{
    hooks h = {0};
    aiol_loop *loop = hooked_loop(&h);
    target inner = {&h, tu_eventfd(), 0};
    nester n = {&h, loop, &inner, 0};
    aiol_bh *bh;
    lw_watchdog w;

    (void)state;
    assert_int_equal(aiol_fd_set(loop, inner.fd, on_event, NULL, NULL,
                                 &inner), 0);
    assert_int_equal(aiol_bh_new(loop, on_outer, &n, &bh), 0);
    aiol_loop_poll(loop, false);
    h.before = h.after = 0;
    aiol_bh_schedule(bh);
    lw_watchdog_arm(&w, loop, LW_MS(5000));
    assert_true(aiol_loop_poll(loop, true));
    assert_int_equal(lw_watchdog_free(&w), 0);
    assert_int_equal(n.runs, 1);
    assert_int_equal(inner.runs, 1);
    /* the outer poll did not sleep (a BH was due); the nested ones did */
    assert_true(h.before >= 1);
    assert_int_equal(h.before, h.after);
    assert_false(h.inside);
    assert_int_equal(h.misplaced, 0);
    aiol_bh_free(bh);
    assert_int_equal(aiol_fd_remove(loop, inner.fd), 0);
    aiol_loop_free(loop);
    close(inner.fd);
}

/* ------------------------------------------------------------ misuse */

static void set_one_hook(void *arg)
{
    aiol_loop *loop = tu_loop_new();

    (void)arg;
    aiol_loop_block_hooks_set(loop, hook_before, NULL, NULL);
}

static void set_hooks_in_poll_cb(void *opaque)
{
    aiol_loop_block_hooks_set(opaque, hook_before, hook_after, NULL);
}

static void set_hooks_in_poll(void *arg)
{
    aiol_loop *loop = tu_loop_new();
    aiol_bh *bh;

    (void)arg;
    if (aiol_bh_new(loop, set_hooks_in_poll_cb, loop, &bh) != 0) {
        abort();
    }
    aiol_bh_schedule(bh);
    aiol_loop_poll(loop, false);
}

static void test_block_hooks_misuse_asserts(void **state)
{
    char err[4096];
    int status;

    (void)state;
    status = tu_run_child(set_one_hook, NULL, err, sizeof(err));
    assert_true(tu_aborted_with(status, err, "both set or both NULL"));
    status = tu_run_child(set_hooks_in_poll, NULL, err, sizeof(err));
    assert_true(tu_aborted_with(status, err, "from inside a poll"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_block_hooks_not_for_waits_that_cannot_sleep),
        cmocka_unit_test(test_block_hooks_bracket_each_blocking_wait),
        cmocka_unit_test(test_block_hooks_nested_and_cross_thread),
        cmocka_unit_test(test_block_hooks_misuse_asserts),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
