/* SPDX-License-Identifier: MIT */
/*
 * uv.c - libuv's side of the shared workloads (bench.h, workloads.c).
 * A poll is uv_run(UV_RUN_NOWAIT).
 *
 *   chain_a1, chain_a100, churn, idle_poll
 *               one uv_poll_t per handler (uv_poll_init untimed); watch =
 *               uv_poll_start, libuv's replacing call (as aiol_fd_set is
 *               libaioloop's), which libuv implements as stop + start:
 *               an EPOLL_CTL_DEL at once, an ADD at the next poll;
 *               unwatch = uv_poll_stop (an EPOLL_CTL_DEL at once)
 *   bh_single, bh_burst   "run this soon" is a uv_idle_t: uv_idle_start
 *               to schedule, uv_idle_stop in its callback
 *   wakeup      uv_async ping-pong between two loops on two threads
 *   timers      libuv's own million_timers shape: uv_timer_init +
 *               uv_timer_start, uv_run until all fired, uv_close to free
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <uv.h>

#include "bench.h"

/* Closes every handle left on @loop, runs the closes, frees the loop. */
static void uv_loop_free_all(uv_loop_t *loop)
{
    BENCH_CHECK(uv_run(loop, UV_RUN_NOWAIT) >= 0);
    BENCH_CHECK(uv_loop_close(loop) == 0);
    free(loop);
}

static uv_loop_t *uv_new(void)
{
    uv_loop_t *loop = malloc(sizeof(*loop));

    BENCH_CHECK(uv_loop_init(loop) == 0);
    return loop;
}

/* ------------------------------------------------------------ fd ops */

typedef struct uv_fd_loop {
    uv_loop_t *loop;
    uv_poll_t *p;
    long n;
} uv_fd_loop;

static void *fd_loop_new(const bench_args *args, long nhandlers)
{
    uv_fd_loop *l = malloc(sizeof(*l));

    (void)args;
    l->loop = uv_new();
    l->p = calloc((size_t)nhandlers, sizeof(*l->p));
    l->n = nhandlers;
    return l;
}

static void fd_loop_free(void *opaque)
{
    uv_fd_loop *l = opaque;

    for (long i = 0; i < l->n; i++) {
        if (l->p[i].loop) {
            uv_close((uv_handle_t *)&l->p[i], NULL);
        }
    }
    uv_loop_free_all(l->loop);
    free(l->p);
    free(l);
}

static void poll_cb(uv_poll_t *h, int status, int events)
{
    (void)status, (void)events;
    bench_fd_ready((int)(intptr_t)h->data);
}

static void fd_prepare(void *opaque, int idx, int fd)
{
    uv_fd_loop *l = opaque;

    BENCH_CHECK(uv_poll_init(l->loop, &l->p[idx], fd) == 0);
    l->p[idx].data = (void *)(intptr_t)idx;
}

static void fd_watch(void *opaque, int idx, int fd)
{
    (void)fd;
    BENCH_CHECK(uv_poll_start(&((uv_fd_loop *)opaque)->p[idx], UV_READABLE,
                              poll_cb) == 0);
}

static void fd_unwatch(void *opaque, int idx, int fd)
{
    (void)fd;
    BENCH_CHECK(uv_poll_stop(&((uv_fd_loop *)opaque)->p[idx]) == 0);
}

static void fd_poll(void *opaque)
{
    uv_run(((uv_fd_loop *)opaque)->loop, UV_RUN_NOWAIT);
}

static const bench_fd_ops fd_ops = {
    fd_loop_new, fd_loop_free, fd_prepare, fd_watch, fd_unwatch, fd_poll,
    NULL,
};

/* --------------------------------------------------------- defer ops */

static void *defer_loop_new(const bench_args *args)
{
    (void)args;
    return uv_new();
}

static void defer_loop_free(void *loop)
{
    uv_loop_free_all(loop);
}

static void idle_cb(uv_idle_t *h)
{
    uv_idle_stop(h);
    bench_hit();
}

static void *defer_new(void *loop)
{
    uv_idle_t *h = malloc(sizeof(*h));

    BENCH_CHECK(uv_idle_init(loop, h) == 0);
    return h;
}

static void free_on_close(uv_handle_t *h)
{
    free(h);
}

static void defer_free(void *loop, void *h)
{
    (void)loop;
    uv_close(h, free_on_close);
}

static void defer_schedule(void *h)
{
    uv_idle_start(h, idle_cb);
}

static void defer_poll(void *loop)
{
    uv_run(loop, UV_RUN_NOWAIT);
}

static const bench_defer_ops defer_ops = {
    defer_loop_new, defer_loop_free, defer_new, defer_free, defer_schedule,
    defer_poll,
};

/* ------------------------------------------------------------ wakeup */

typedef struct uv_pingpong {
    uv_loop_t worker_loop;
    uv_async_t ping; /* on the worker loop */
    uv_async_t pong; /* on the main loop */
    long rounds, target;
} uv_pingpong;

static void ping_cb(uv_async_t *h)
{
    uv_pingpong *pp = h->data;

    if (pp->rounds >= pp->target) {
        uv_close((uv_handle_t *)&pp->ping, NULL); /* ends the worker loop */
        return;
    }
    uv_async_send(&pp->pong);
}

static void pong_cb(uv_async_t *h)
{
    uv_pingpong *pp = h->data;

    pp->rounds++;
    uv_async_send(&pp->ping);
    if (pp->rounds >= pp->target) {
        uv_close((uv_handle_t *)&pp->pong, NULL);
    }
}

static void worker(void *arg)
{
    uv_pingpong *pp = arg;

    uv_run(&pp->worker_loop, UV_RUN_DEFAULT);
}

static int wakeup(const bench_args *args, bench_metric *out)
{
    uv_pingpong pp = { .target = args->n };
    uv_loop_t loop;
    uv_thread_t tid;
    int64_t t0;

    BENCH_CHECK(uv_loop_init(&loop) == 0);
    BENCH_CHECK(uv_loop_init(&pp.worker_loop) == 0);
    BENCH_CHECK(uv_async_init(&pp.worker_loop, &pp.ping, ping_cb) == 0);
    BENCH_CHECK(uv_async_init(&loop, &pp.pong, pong_cb) == 0);
    pp.ping.data = pp.pong.data = &pp;
    BENCH_CHECK(uv_thread_create(&tid, worker, &pp) == 0);
    t0 = bench_now_ns();
    uv_async_send(&pp.ping);
    uv_run(&loop, UV_RUN_DEFAULT);
    bench_wakeup_result(out, t0, pp.rounds, pp.target);
    uv_thread_join(&tid);
    uv_loop_close(&pp.worker_loop);
    uv_loop_close(&loop);
    return 1;
}

/* ------------------------------------------------------------ timers */

typedef struct uv_timer_loop {
    uv_loop_t *loop;
    uv_timer_t *t;
    long n;
} uv_timer_loop;

static void timer_cb(uv_timer_t *h)
{
    (void)h;
    bench_hit();
}

static void *timer_loop_new(const bench_args *args)
{
    uv_timer_loop *tl = malloc(sizeof(*tl));

    tl->loop = uv_new();
    tl->t = malloc((size_t)args->n * sizeof(*tl->t));
    tl->n = args->n;
    return tl;
}

static void timer_loop_free(void *opaque)
{
    uv_timer_loop *tl = opaque;

    uv_loop_free_all(tl->loop);
    free(tl->t);
    free(tl);
}

static void timer_arm(void *opaque, long i, long timeout_ms)
{
    uv_timer_loop *tl = opaque;

    BENCH_CHECK(uv_timer_init(tl->loop, &tl->t[i]) == 0);
    BENCH_CHECK(uv_timer_start(&tl->t[i], timer_cb, (uint64_t)timeout_ms,
                               0) == 0);
}

static void timer_run(void *opaque)
{
    uv_run(((uv_timer_loop *)opaque)->loop, UV_RUN_DEFAULT);
}

static void timer_free_all(void *opaque)
{
    uv_timer_loop *tl = opaque;

    for (long i = 0; i < tl->n; i++) {
        uv_close((uv_handle_t *)&tl->t[i], NULL);
    }
    uv_run(tl->loop, UV_RUN_DEFAULT);
}

static const bench_timer_ops timer_ops = {
    timer_loop_new, timer_loop_free, timer_arm, timer_run, timer_free_all,
};

int main(int argc, char **argv)
{
    static const bench_lib lib = {
        "libuv", &fd_ops, &defer_ops, &timer_ops, wakeup, NULL, 0,
    };

    return bench_lib_main(&lib, argc, argv);
}
