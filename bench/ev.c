/* SPDX-License-Identifier: MIT */
/*
 * ev.c - libev's side of the shared workloads (bench.h, workloads.c), on
 * its epoll backend (ev_loop_new(EVBACKEND_EPOLL), checked).
 *
 *   chain_a1, chain_a100, churn, idle_poll
 *               one ev_io per handler; watch = ev_io_stop + ev_io_start
 *               (fd and events unchanged, so no ev_io_set, which would
 *               force an epoll_ctl); unwatch = ev_io_stop; a poll is
 *               ev_run(EVRUN_NOWAIT).  libev applies fd changes lazily,
 *               at the next ev_run, and leaves removed fds in the epoll
 *               set until they report an event.
 *   bh_single, bh_burst   "run this soon" is an ev_idle watcher:
 *               ev_idle_start to schedule, ev_idle_stop in its callback
 *   wakeup      two loops on two threads, an ev_async each, ev_async_send
 *   timers      ev_timer_init + ev_timer_start (one-shot), ev_run until no
 *               watcher is left
 */
#define _GNU_SOURCE
#include <ev.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "bench.h"

static struct ev_loop *ev_new(void)
{
    struct ev_loop *loop = ev_loop_new(EVBACKEND_EPOLL);

    BENCH_CHECK(loop && ev_backend(loop) == EVBACKEND_EPOLL);
    return loop;
}

/* ------------------------------------------------------------ fd ops */

typedef struct ev_fd_loop {
    struct ev_loop *loop;
    ev_io *io;
} ev_fd_loop;

static void *fd_loop_new(const bench_args *args, long nhandlers)
{
    ev_fd_loop *l = malloc(sizeof(*l));

    (void)args;
    l->loop = ev_new();
    l->io = calloc((size_t)nhandlers, sizeof(ev_io));
    return l;
}

static void fd_loop_free(void *opaque)
{
    ev_fd_loop *l = opaque;

    ev_loop_destroy(l->loop);
    free(l->io);
    free(l);
}

static void io_cb(struct ev_loop *loop, ev_io *w, int revents)
{
    (void)loop, (void)revents;
    bench_fd_ready((int)(intptr_t)w->data);
}

static void fd_prepare(void *opaque, int idx, int fd)
{
    ev_fd_loop *l = opaque;

    ev_io_init(&l->io[idx], io_cb, fd, EV_READ);
    l->io[idx].data = (void *)(intptr_t)idx;
}

static void fd_watch(void *opaque, int idx, int fd)
{
    ev_fd_loop *l = opaque;

    (void)fd; /* set once by fd_prepare */
    ev_io_stop(l->loop, &l->io[idx]);
    ev_io_start(l->loop, &l->io[idx]);
}

static void fd_unwatch(void *opaque, int idx, int fd)
{
    ev_fd_loop *l = opaque;

    (void)fd;
    ev_io_stop(l->loop, &l->io[idx]);
}

static void fd_poll(void *opaque)
{
    ev_run(((ev_fd_loop *)opaque)->loop, EVRUN_NOWAIT);
}

static const bench_fd_ops fd_ops = {
    fd_loop_new, fd_loop_free, fd_prepare, fd_watch, fd_unwatch, fd_poll,
    NULL,
};

/* --------------------------------------------------------- defer ops */

typedef struct ev_defer {
    ev_idle idle;
    struct ev_loop *loop;
} ev_defer;

static void *defer_loop_new(const bench_args *args)
{
    (void)args;
    return ev_new();
}

static void defer_loop_free(void *loop)
{
    ev_loop_destroy(loop);
}

static void idle_cb(struct ev_loop *loop, ev_idle *w, int revents)
{
    (void)revents;
    ev_idle_stop(loop, w);
    bench_hit();
}

static void *defer_new(void *loop)
{
    ev_defer *d = malloc(sizeof(*d));

    ev_idle_init(&d->idle, idle_cb);
    d->loop = loop;
    return d;
}

static void defer_free(void *loop, void *opaque)
{
    ev_defer *d = opaque;

    ev_idle_stop(loop, &d->idle);
    free(d);
}

static void defer_schedule(void *opaque)
{
    ev_defer *d = opaque;

    ev_idle_start(d->loop, &d->idle);
}

static void defer_poll(void *loop)
{
    ev_run(loop, EVRUN_NOWAIT);
}

static const bench_defer_ops defer_ops = {
    defer_loop_new, defer_loop_free, defer_new, defer_free, defer_schedule,
    defer_poll,
};

/* ------------------------------------------------------------ timers */

typedef struct ev_timer_loop {
    struct ev_loop *loop;
    ev_timer *t;
} ev_timer_loop;

static void timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop, (void)w, (void)revents;
    bench_hit();
}

static void *timer_loop_new(const bench_args *args)
{
    ev_timer_loop *tl = malloc(sizeof(*tl));

    tl->loop = ev_new();
    tl->t = malloc((size_t)args->n * sizeof(*tl->t));
    return tl;
}

static void timer_loop_free(void *opaque)
{
    ev_timer_loop *tl = opaque;

    ev_loop_destroy(tl->loop);
    free(tl->t);
    free(tl);
}

static void timer_arm(void *opaque, long i, long timeout_ms)
{
    ev_timer_loop *tl = opaque;

    ev_timer_init(&tl->t[i], timer_cb, (double)timeout_ms / 1e3, 0.);
    ev_timer_start(tl->loop, &tl->t[i]);
}

static void timer_run(void *opaque)
{
    ev_run(((ev_timer_loop *)opaque)->loop, 0);
}

static void timer_free_all(void *opaque)
{
    (void)opaque; /* one-shot ev_timers stop themselves when they fire */
}

static const bench_timer_ops timer_ops = {
    timer_loop_new, timer_loop_free, timer_arm, timer_run, timer_free_all,
};

/* ------------------------------------------------------------ wakeup */

typedef struct ev_pingpong {
    struct ev_loop *main, *worker;
    ev_async ping; /* on the worker loop */
    ev_async pong; /* on the main loop */
    long rounds, target;
    atomic_bool done;
} ev_pingpong;

static void ping_cb(struct ev_loop *loop, ev_async *w, int revents)
{
    ev_pingpong *pp = w->data;

    (void)revents;
    if (atomic_load(&pp->done)) {
        ev_async_stop(loop, w); /* no watcher left: the worker's ev_run ends */
        return;
    }
    ev_async_send(pp->main, &pp->pong);
}

static void pong_cb(struct ev_loop *loop, ev_async *w, int revents)
{
    ev_pingpong *pp = w->data;

    (void)revents;
    if (++pp->rounds >= pp->target) {
        atomic_store(&pp->done, true);
        ev_async_stop(loop, w);
    }
    ev_async_send(pp->worker, &pp->ping);
}

static void *worker(void *opaque)
{
    ev_run(((ev_pingpong *)opaque)->worker, 0);
    return NULL;
}

static int wakeup(const bench_args *args, bench_metric *out)
{
    ev_pingpong pp = { .main = ev_new(), .worker = ev_new(),
                       .target = args->n };
    pthread_t tid;
    int64_t t0;

    atomic_init(&pp.done, false);
    ev_async_init(&pp.ping, ping_cb);
    ev_async_init(&pp.pong, pong_cb);
    pp.ping.data = pp.pong.data = &pp;
    ev_async_start(pp.worker, &pp.ping);
    ev_async_start(pp.main, &pp.pong);
    BENCH_CHECK(pthread_create(&tid, NULL, worker, &pp) == 0);
    t0 = bench_now_ns();
    ev_async_send(pp.worker, &pp.ping);
    ev_run(pp.main, 0);
    bench_wakeup_result(out, t0, pp.rounds, pp.target);
    pthread_join(tid, NULL);
    ev_loop_destroy(pp.worker);
    ev_loop_destroy(pp.main);
    return 1;
}

int main(int argc, char **argv)
{
    static const bench_lib lib = {
        "libev", &fd_ops, &defer_ops, &timer_ops, wakeup, NULL, 0,
    };

    return bench_lib_main(&lib, argc, argv);
}
