/* SPDX-License-Identifier: MIT */
/*
 * test_ev.c - aioloop-ev (aioloop/ev.h): the host scenarios of
 * embedhost.c with the loop driven only by ev_run(), once per fd monitor,
 * and attach/detach in every order, including a detach between the
 * adapter's prepare and its check (the ASan build checks that nothing
 * leaks).  An ev_timer ends any ev_run() that would otherwise hang, and
 * fails.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <ev.h>

#include "aioloop/aioloop.h"
#include "aioloop/ev.h"
#include "embedhost.h"

typedef struct ev_host {
    struct ev_loop *evl;
    aiol_ev *e[2];
    ev_timer watchdog;
    bool timed_out;
} ev_host;

static void e_attach(eh_host *h, aiol_loop *loop, int slot)
{
    ev_host *x = h->impl;

    assert_int_equal(aiol_ev_attach(loop, x->evl, &x->e[slot]), 0);
}

static void e_detach(eh_host *h, int slot)
{
    ev_host *x = h->impl;

    aiol_ev_detach(x->e[slot]);
    x->e[slot] = NULL;
}

static void on_watchdog(struct ev_loop *evl, ev_timer *w, int revents)
{
    ev_host *x = w->data;

    (void)revents;
    x->timed_out = true;
    ev_break(evl, EVBREAK_ALL);
}

static void e_run(eh_host *h)
{
    ev_host *x = h->impl;

    ev_timer_init(&x->watchdog, on_watchdog, 10., 0.);
    x->watchdog.data = x;
    ev_now_update(x->evl);
    ev_timer_start(x->evl, &x->watchdog);
    ev_run(x->evl, 0);
    ev_timer_stop(x->evl, &x->watchdog);
    assert_false(x->timed_out);
}

static void e_quit(eh_host *h)
{
    ev_break(((ev_host *)h->impl)->evl, EVBREAK_ALL);
}

static const eh_ops ev_ops = { e_attach, e_detach, e_run, e_quit };

static int host_setup(void **state)
{
    static ev_host x;
    static eh_host h = { &ev_ops, &x, AIOL_EMBED_DIRECT_MAX };

    x = (ev_host){ .evl = ev_loop_new(EVFLAG_AUTO) };
    assert_non_null(x.evl);
    *state = &h;
    return 0;
}

static int host_teardown(void **state)
{
    ev_loop_destroy(((ev_host *)((eh_host *)*state)->impl)->evl);
    return 0;
}

typedef struct detacher {
    ev_prepare w;
    aiol_ev *victim;
} detacher;

/* A prepare watcher after the adapter's: detaches it before its check. */
static void on_prepare_detach(struct ev_loop *evl, ev_prepare *w, int revents)
{
    detacher *d = (detacher *)w;

    (void)revents;
    aiol_ev_detach(d->victim);
    ev_prepare_stop(evl, w);
    ev_break(evl, EVBREAK_ALL);
}

static void test_ev_lifetimes(void **state)
{
    struct ev_loop *evl = ev_loop_new(EVFLAG_AUTO);
    aiol_loop *a, *b;
    aiol_ev *ea, *eb;
    detacher d;

    (void)state;
    assert_int_equal(aiol_loop_new(&a, NULL), 0);
    assert_int_equal(aiol_loop_new(&b, NULL), 0);
    /* attached and detached without running */
    assert_int_equal(aiol_ev_attach(a, evl, &ea), 0);
    aiol_ev_detach(ea);
    aiol_ev_detach(NULL);
    /* two, one iteration, detached in the order they came */
    assert_int_equal(aiol_ev_attach(a, evl, &ea), 0);
    assert_int_equal(aiol_ev_attach(b, evl, &eb), 0);
    ev_run(evl, EVRUN_NOWAIT);
    aiol_ev_detach(ea);
    ev_run(evl, EVRUN_NOWAIT);
    aiol_ev_detach(eb);
    /* detached between its prepare and its check */
    assert_int_equal(aiol_ev_attach(a, evl, &ea), 0);
    ev_prepare_init(&d.w, on_prepare_detach);
    d.victim = ea;
    ev_prepare_start(evl, &d.w);
    ev_run(evl, 0);
    /* nothing left active: ev_run returns at once */
    ev_run(evl, 0);
    /* the loops still work on their own */
    assert_false(aiol_loop_poll(a, false));
    aiol_loop_free(a);
    aiol_loop_free(b);
    ev_loop_destroy(evl);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        EH_TESTS(host_setup, host_teardown),
        cmocka_unit_test(test_ev_lifetimes),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
