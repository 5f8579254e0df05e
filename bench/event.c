/* SPDX-License-Identifier: MIT */
/*
 * event.c - libevent 2's side of the shared workloads (bench.h,
 * workloads.c), on its epoll backend (the others are avoided, and the
 * method checked).
 *
 *   chain_a1, chain_a100, churn, idle_poll
 *               one EV_READ | EV_PERSIST event per handler; watch =
 *               event_del + event_add (exactly bench.c's re-arm); unwatch
 *               = event_del; a poll is event_base_loop(EVLOOP_ONCE |
 *               EVLOOP_NONBLOCK).  Default flags: no changelist, so
 *               every event_add/event_del is an epoll_ctl.
 *   bh_single, bh_burst   "run this soon" is event_active() on an fd-less
 *               event made once with event_new(base, -1, 0, ...)
 *   wakeup      two bases on two threads (evthread_use_pthreads), each
 *               side event_active()s the other's event
 *   timers      evtimer_new + evtimer_add with a relative timeval,
 *               event_base_dispatch until no event is left; free is
 *               event_free
 */
#define _GNU_SOURCE
#include <event2/event.h>
#include <event2/thread.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

static struct event_base *base_new(void)
{
    struct event_config *cfg = event_config_new();
    struct event_base *base;

    event_config_avoid_method(cfg, "poll");
    event_config_avoid_method(cfg, "select");
    base = event_base_new_with_config(cfg);
    event_config_free(cfg);
    BENCH_CHECK(base && strcmp(event_base_get_method(base), "epoll") == 0);
    return base;
}

/* ------------------------------------------------------------ fd ops */

typedef struct ev_fd_loop {
    struct event_base *base;
    struct event **ev;
    long n;
} ev_fd_loop;

static void *fd_loop_new(const bench_args *args, long nhandlers)
{
    ev_fd_loop *l = malloc(sizeof(*l));

    (void)args;
    l->base = base_new();
    l->ev = calloc((size_t)nhandlers, sizeof(*l->ev));
    l->n = nhandlers;
    return l;
}

static void fd_loop_free(void *opaque)
{
    ev_fd_loop *l = opaque;

    for (long i = 0; i < l->n; i++) {
        if (l->ev[i]) {
            event_free(l->ev[i]);
        }
    }
    event_base_free(l->base);
    free(l->ev);
    free(l);
}

static void read_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    bench_fd_ready((int)(intptr_t)arg);
}

static void fd_prepare(void *opaque, int idx, int fd)
{
    ev_fd_loop *l = opaque;

    l->ev[idx] = event_new(l->base, fd, EV_READ | EV_PERSIST, read_cb,
                           (void *)(intptr_t)idx);
    BENCH_CHECK(l->ev[idx]);
}

static void fd_watch(void *opaque, int idx, int fd)
{
    ev_fd_loop *l = opaque;

    (void)fd;
    event_del(l->ev[idx]);
    BENCH_CHECK(event_add(l->ev[idx], NULL) == 0);
}

static void fd_unwatch(void *opaque, int idx, int fd)
{
    ev_fd_loop *l = opaque;

    (void)fd;
    BENCH_CHECK(event_del(l->ev[idx]) == 0);
}

static void fd_poll(void *opaque)
{
    event_base_loop(((ev_fd_loop *)opaque)->base,
                    EVLOOP_ONCE | EVLOOP_NONBLOCK);
}

static const bench_fd_ops fd_ops = {
    fd_loop_new, fd_loop_free, fd_prepare, fd_watch, fd_unwatch, fd_poll,
    NULL,
};

/* --------------------------------------------------------- defer ops */

static void hit_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what, (void)arg;
    bench_hit();
}

static void *defer_loop_new(const bench_args *args)
{
    (void)args;
    return base_new();
}

static void defer_loop_free(void *base)
{
    event_base_free(base);
}

static void *defer_new(void *base)
{
    struct event *ev = event_new(base, -1, 0, hit_cb, NULL);

    BENCH_CHECK(ev);
    return ev;
}

static void defer_free(void *base, void *ev)
{
    (void)base;
    event_free(ev);
}

static void defer_schedule(void *ev)
{
    event_active(ev, EV_TIMEOUT, 0);
}

static void defer_poll(void *base)
{
    event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
}

static const bench_defer_ops defer_ops = {
    defer_loop_new, defer_loop_free, defer_new, defer_free, defer_schedule,
    defer_poll,
};

/* ------------------------------------------------------------ timers */

typedef struct ev_timer_loop {
    struct event_base *base;
    struct event **t;
    long n;
} ev_timer_loop;

static void *timer_loop_new(const bench_args *args)
{
    ev_timer_loop *tl = malloc(sizeof(*tl));

    tl->base = base_new();
    tl->t = malloc((size_t)args->n * sizeof(*tl->t));
    tl->n = args->n;
    return tl;
}

static void timer_loop_free(void *opaque)
{
    ev_timer_loop *tl = opaque;

    event_base_free(tl->base);
    free(tl->t);
    free(tl);
}

static void timer_arm(void *opaque, long i, long timeout_ms)
{
    ev_timer_loop *tl = opaque;
    struct timeval tv = { timeout_ms / 1000, (timeout_ms % 1000) * 1000 };

    tl->t[i] = evtimer_new(tl->base, hit_cb, NULL);
    BENCH_CHECK(tl->t[i] && evtimer_add(tl->t[i], &tv) == 0);
}

static void timer_run(void *opaque)
{
    event_base_dispatch(((ev_timer_loop *)opaque)->base);
}

static void timer_free_all(void *opaque)
{
    ev_timer_loop *tl = opaque;

    for (long i = 0; i < tl->n; i++) {
        event_free(tl->t[i]);
    }
}

static const bench_timer_ops timer_ops = {
    timer_loop_new, timer_loop_free, timer_arm, timer_run, timer_free_all,
};

/* ------------------------------------------------------------ wakeup */

typedef struct ev_pingpong {
    struct event_base *main, *worker;
    struct event *ping; /* on the worker base */
    struct event *pong; /* on the main base */
    long rounds, target;
} ev_pingpong;

static void ping_cb(evutil_socket_t fd, short what, void *arg)
{
    ev_pingpong *pp = arg;

    (void)fd, (void)what;
    event_active(pp->pong, EV_TIMEOUT, 0);
}

static void pong_cb(evutil_socket_t fd, short what, void *arg)
{
    ev_pingpong *pp = arg;

    (void)fd, (void)what;
    if (++pp->rounds < pp->target) {
        event_active(pp->ping, EV_TIMEOUT, 0);
    } else {
        event_base_loopbreak(pp->main);
        event_base_loopbreak(pp->worker);
    }
}

static void *worker(void *opaque)
{
    event_base_loop(((ev_pingpong *)opaque)->worker, EVLOOP_NO_EXIT_ON_EMPTY);
    return NULL;
}

static int wakeup(const bench_args *args, bench_metric *out)
{
    ev_pingpong pp = { .target = args->n };
    pthread_t tid;
    int64_t t0;

    BENCH_CHECK(evthread_use_pthreads() == 0);
    pp.main = base_new();
    pp.worker = base_new();
    pp.ping = event_new(pp.worker, -1, 0, ping_cb, &pp);
    pp.pong = event_new(pp.main, -1, 0, pong_cb, &pp);
    BENCH_CHECK(pp.ping && pp.pong);
    BENCH_CHECK(pthread_create(&tid, NULL, worker, &pp) == 0);
    t0 = bench_now_ns();
    event_active(pp.ping, EV_TIMEOUT, 0);
    event_base_loop(pp.main, EVLOOP_NO_EXIT_ON_EMPTY);
    bench_wakeup_result(out, t0, pp.rounds, pp.target);
    pthread_join(tid, NULL);
    event_free(pp.ping);
    event_free(pp.pong);
    event_base_free(pp.worker);
    event_base_free(pp.main);
    return 1;
}

int main(int argc, char **argv)
{
    static const bench_lib lib = {
        "libevent", &fd_ops, &defer_ops, &timer_ops, wakeup, NULL, 0,
    };

    return bench_lib_main(&lib, argc, argv);
}
