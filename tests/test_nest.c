/* SPDX-License-Identifier: MIT */
/*
 * test_nest.c - nested poll tests, run once per fd monitor ($AIOLOOP_FDMON):
 * removal inside nested polls, no double dispatch across nesting, and deep
 * nesting with handlers added and removed at every level.  Public API only;
 * see testhandler.h for the bookkeeping every test checks.
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
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "aioloop/aioloop.h"
#include "testutil.h"
#include "testhandler.h"

/* ---------------------------------------- removal inside a nested poll */

/*
 * The nesting tests use a pair of readable handlers.  The first one the
 * outer poll dispatches (X, either of them: dispatch order must not matter)
 * drains its own fd, optionally drains its peer's (Y) or signals a trigger
 * handler, then polls nested.  When Y runs nested it does g_nest.action.
 */
enum nested_action {
    NESTED_DRAIN,        /* Y drains its fd */
    NESTED_KEEP,         /* Y leaves its fd readable */
    NESTED_REMOVE_SELF,  /* Y removes itself, fd left readable */
};

static struct {
    bool armed;                 /* the next depth-0 callback nests, once */
    enum nested_action action;
    bool drain_peer;            /* X drains Y's fd before nesting */
    th *trigger;                /* X signals it before nesting, or NULL */
    th *victim;                 /* the trigger removes it: X's peer */
    bool progress;              /* what the nested poll returned */
} g_nest;

static void cb_nest_once(void *opaque)
{
    th *h = opaque;

    th_note(h);
    h->reads++;
    if (th_depth == 0 && g_nest.armed) {
        g_nest.armed = false;
        h->nested_done = true;
        tu_eventfd_drain(h->fd);
        if (g_nest.drain_peer) {
            tu_eventfd_drain(h->peer->fd);
        }
        if (g_nest.trigger != NULL) {
            g_nest.victim = h->peer;
            tu_eventfd_signal(g_nest.trigger->fd);
        }
        g_nest.progress = th_nested_poll(h->loop);
        return;
    }
    if (g_nest.action == NESTED_DRAIN) {
        tu_eventfd_drain(h->fd);
    } else if (g_nest.action == NESTED_REMOVE_SELF) {
        th_remove(h);
    }
}

/* Trigger handler: drains itself and removes X's peer. */
static void cb_trigger_remove_victim(void *opaque)
{
    th *h = opaque;

    th_note(h);
    h->reads++;
    tu_eventfd_drain(h->fd);
    th_remove(g_nest.victim);
}

typedef struct nest_pair {
    aiol_loop *loop;
    th h[2];
    th *x, *y;   /* x: ran the nested poll; y: its peer */
} nest_pair;

static void nest_pair_setup(nest_pair *np, enum nested_action action)
{
    memset(&g_nest, 0, sizeof(g_nest));
    g_nest.armed = true;
    g_nest.action = action;
    np->loop = tu_loop_new();
    for (int i = 0; i < 2; i++) {
        th_add(&np->h[i], np->loop, tu_eventfd(), cb_nest_once, NULL);
        np->h[i].peer = &np->h[1 - i];
        tu_eventfd_signal(np->h[i].fd);
    }
}

/* After the outer poll: exactly one handler nested; tells x from y. */
static void nest_pair_identify(nest_pair *np)
{
    assert_int_equal(th_depth, 0);
    assert_int_equal(th_max_depth, 1);
    assert_true(np->h[0].nested_done != np->h[1].nested_done);
    np->x = np->h[0].nested_done ? &np->h[0] : &np->h[1];
    np->y = np->x->peer;
    assert_int_equal(np->x->reads, 1);
    assert_int_equal(np->x->nested_calls, 0);
    assert_true(g_nest.progress);
}

static void nest_pair_teardown(nest_pair *np)
{
    aiol_loop_free(np->loop);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(np->h[i].after_remove, 0);
        close(np->h[i].fd);
    }
}

static void test_remove_in_nested_poll(void **state)
{
    nest_pair np;

    (void)state;
    /* Y, collected by the outer poll, removes itself inside the nested one */
    nest_pair_setup(&np, NESTED_REMOVE_SELF);
    assert_true(aiol_loop_poll(np.loop, false));
    nest_pair_identify(&np);
    assert_true(np.y->removed);
    assert_int_equal(np.y->reads, 1);
    assert_int_equal(np.y->nested_calls, 1);
    assert_false(aiol_loop_poll(np.loop, false));   /* y's fd still readable */
    assert_int_equal(np.y->reads, 1);
    nest_pair_teardown(&np);
}

/*
 * A third handler, made ready by X just before nesting, removes Y from
 * inside the nested dispatch.  With @p drain_peer X first makes Y not ready,
 * so the nested poll cannot collect Y and Y is still on the outer poll's
 * ready list when it is removed: the outer poll must skip it (and must not
 * touch freed memory).  Without, Y may run once nested, before the removal.
 */
static void remove_by_trigger(bool drain_peer)
{
    nest_pair np;
    th trig;

    nest_pair_setup(&np, NESTED_KEEP);
    th_add(&trig, np.loop, tu_eventfd(), cb_trigger_remove_victim, NULL);
    g_nest.trigger = &trig;
    g_nest.drain_peer = drain_peer;

    assert_true(aiol_loop_poll(np.loop, false));
    nest_pair_identify(&np);
    assert_int_equal(trig.reads, 1);
    assert_int_equal(trig.nested_calls, 1);
    assert_true(np.y->removed);
    assert_false(np.x->removed);
    if (drain_peer) {
        assert_int_equal(np.y->reads, 0);
    } else {
        /* (cmocka 2.0 deprecates assert_in_range; 1.1 has no successor) */
        assert_true(np.y->reads == 0 || np.y->reads == 1);
        assert_int_equal(np.y->reads, np.y->nested_calls);
    }
    th_poll_n(np.loop, 3, false);
    assert_int_equal(np.y->after_remove + trig.after_remove, 0);
    assert_true(aiol_fd_is_set(np.loop, trig.fd));
    nest_pair_teardown(&np);
    close(trig.fd);
}

static void test_remove_by_other_in_nested_poll(void **state)
{
    (void)state;
    remove_by_trigger(true);
    remove_by_trigger(false);
}

/* ------------------------------------- no double dispatch after nesting */

static void test_no_double_dispatch_after_nesting(void **state)
{
    nest_pair np;

    (void)state;
    /* Y drains inside the nested poll: one call for one readiness */
    nest_pair_setup(&np, NESTED_DRAIN);
    assert_true(aiol_loop_poll(np.loop, false));
    nest_pair_identify(&np);
    assert_int_equal(np.y->reads, 1);
    assert_int_equal(np.y->nested_calls, 1);
    assert_false(aiol_loop_poll(np.loop, false));
    assert_int_equal(np.y->reads, 1);
    assert_int_equal(np.x->reads, 1);
    nest_pair_teardown(&np);
}

static void test_no_double_dispatch_level_triggered(void **state)
{
    nest_pair np;

    (void)state;
    /*
     * Y does not drain: the nested poll runs it once and the outer poll,
     * which collected the same readiness, must not run it again.  The
     * next polls do (level-triggered).
     */
    nest_pair_setup(&np, NESTED_KEEP);
    assert_true(aiol_loop_poll(np.loop, false));
    nest_pair_identify(&np);
    assert_int_equal(np.y->reads, 1);
    assert_int_equal(np.y->nested_calls, 1);
    th_poll_n(np.loop, 2, true);
    assert_int_equal(np.y->reads, 3);
    assert_int_equal(np.y->nested_calls, 1);
    assert_int_equal(np.x->reads, 1);               /* x drained */
    nest_pair_teardown(&np);
}

/* ----------------------------------------------------- deep nesting */

#define DEPTH 10

static th g_lvl[DEPTH + 1];
static th g_extra[DEPTH + 1];

/*
 * Level i: drains, removes level i-1 (which is on the stack, inside its
 * nested poll), adds and removes an extra readable handler that must never
 * run, adds level i+1 on a fresh readable eventfd and polls nested.
 */
static void cb_level(void *opaque)
{
    th *h = opaque;
    int i = (int)(h - g_lvl);

    th_note(h);
    h->reads++;
    assert_int_equal(th_depth, i);
    tu_eventfd_drain(h->fd);
    if (i > 0) {
        th_remove(&g_lvl[i - 1]);
    }
    if (i == DEPTH) {
        return;
    }
    th_add(&g_extra[i], h->loop, tu_eventfd(), th_cb_read, NULL);
    tu_eventfd_signal(g_extra[i].fd);
    th_add(&g_lvl[i + 1], h->loop, tu_eventfd(), cb_level, NULL);
    tu_eventfd_signal(g_lvl[i + 1].fd);
    th_remove(&g_extra[i]);
    assert_true(th_nested_poll(h->loop));   /* runs level i + 1 */
}

static void test_nested_poll_depth(void **state)
{
    aiol_loop *loop = tu_loop_new();

    (void)state;
    memset(g_lvl, 0, sizeof(g_lvl));
    memset(g_extra, 0, sizeof(g_extra));
    th_add(&g_lvl[0], loop, tu_eventfd(), cb_level, NULL);
    tu_eventfd_signal(g_lvl[0].fd);

    assert_true(aiol_loop_poll(loop, false));
    assert_int_equal(th_depth, 0);
    assert_int_equal(th_max_depth, DEPTH);
    for (int i = 0; i <= DEPTH; i++) {
        assert_int_equal(g_lvl[i].reads, 1);
        assert_int_equal(g_lvl[i].after_remove, 0);
        /* every level but the last was removed by the next one */
        assert_int_equal(g_lvl[i].removed, i < DEPTH);
        assert_int_equal(aiol_fd_is_set(loop, g_lvl[i].fd), i == DEPTH);
        if (i < DEPTH) {
            assert_int_equal(g_extra[i].reads, 0);
        }
    }
    /* everything drained; the extras stay readable but are gone */
    assert_false(aiol_loop_poll(loop, false));
    th_remove(&g_lvl[DEPTH]);
    aiol_loop_free(loop);
    for (int i = 0; i <= DEPTH; i++) {
        assert_int_equal(g_lvl[i].reads, 1);
        close(g_lvl[i].fd);
        if (i < DEPTH) {
            close(g_extra[i].fd);
        }
    }
}

/* ------------------------------- poll_ready is not re-entered by nesting */

/*
 * QEMU's test-nested-aio-poll, on the public API: a handler whose poll
 * always reports work polls the loop from its poll_ready before clearing
 * anything; the nested poll must not poll it (that would recurse without
 * end), and returns through another handler's read.
 */
static struct {
    aiol_loop *loop;
    int busy_fd, wake_fd;
    int busy_ready, busy_reads, wake_reads;
    bool nested;
} g_pr;

static bool pr_poll_true(void *opaque)
{
    (void)opaque;
    return true;
}

static bool pr_poll_false(void *opaque)
{
    (void)opaque;
    return false;
}

static void pr_busy_read(void *opaque)
{
    (void)opaque;
    tu_eventfd_drain(g_pr.busy_fd);
    g_pr.busy_reads++;
}

static void pr_busy_ready(void *opaque)
{
    (void)opaque;
    assert_false(g_pr.nested);
    g_pr.nested = true;
    g_pr.busy_ready++;
    tu_eventfd_signal(g_pr.wake_fd); /* (wakes the nested poll) */
    assert_true(aiol_loop_poll(g_pr.loop, true));
    g_pr.nested = false;
}

static void pr_wake_read(void *opaque)
{
    (void)opaque;
    tu_eventfd_drain(g_pr.wake_fd);
    g_pr.wake_reads++;
}

static void pr_never(void *opaque)
{
    (void)opaque;
    fail_msg("the wakeup handler's poll never reports work");
}

static void test_poll_ready_not_reentered(void **state)
{
    const aiol_fd_ops busy = { .read = pr_busy_read, .poll = pr_poll_true,
                               .poll_ready = pr_busy_ready };
    const aiol_fd_ops wake = { .read = pr_wake_read, .poll = pr_poll_false,
                               .poll_ready = pr_never };

    (void)state;
    memset(&g_pr, 0, sizeof(g_pr));
    g_pr.loop = tu_loop_new();
    g_pr.busy_fd = tu_eventfd();
    g_pr.wake_fd = tu_eventfd();
    assert_int_equal(aiol_loop_poll_params_set(g_pr.loop, 1000000, 2, 2), 0);
    tu_eventfd_signal(g_pr.busy_fd); /* (its read runs first) */
    assert_int_equal(aiol_fd_set_ops(g_pr.loop, g_pr.busy_fd, &busy, NULL),
                     0);
    assert_int_equal(aiol_fd_set_ops(g_pr.loop, g_pr.wake_fd, &wake, NULL),
                     0);
    assert_true(aiol_loop_poll(g_pr.loop, true)); /* the read */
    assert_int_equal(g_pr.busy_reads, 1);
    for (int i = 1; i <= 3; i++) {
        assert_true(aiol_loop_poll(g_pr.loop, true));
        assert_int_equal(g_pr.busy_ready, i);
        assert_int_equal(g_pr.wake_reads, i);
    }
    assert_int_equal(aiol_fd_remove(g_pr.loop, g_pr.busy_fd), 0);
    assert_int_equal(aiol_fd_remove(g_pr.loop, g_pr.wake_fd), 0);
    aiol_loop_free(g_pr.loop);
    close(g_pr.busy_fd);
    close(g_pr.wake_fd);
}

#define T(f) cmocka_unit_test_setup(f, th_reset)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_remove_in_nested_poll),
        T(test_remove_by_other_in_nested_poll),
        T(test_no_double_dispatch_after_nesting),
        T(test_no_double_dispatch_level_triggered),
        T(test_nested_poll_depth),
        T(test_poll_ready_not_reentered),
    };
    char name[64];

    /* exits 77 here, before any test runs, when the fd monitor is missing */
    aiol_loop_free(tu_loop_new());
    snprintf(name, sizeof(name), "nest-%s",
             tu_fdmon_requested() ? tu_fdmon_requested() : "default");
    return cmocka_run_group_tests_name(name, tests, NULL, NULL);
}
