/*
 * uv.c - libuv's side of the shared workloads (see bench.h, aiol.c).
 *
 *   wakeup   uv_async ping-pong between two loops on two threads
 *   timers   libuv's own million_timers shape
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <uv.h>

#include "bench.h"

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
    out[0] = (bench_metric){ "ns_per_roundtrip", "ns",
                             (double)(bench_now_ns() - t0) / (double)pp.target };
    uv_thread_join(&tid);
    uv_loop_close(&pp.worker_loop);
    uv_loop_close(&loop);
    return 1;
}

static long fired;

static void timer_cb(uv_timer_t *h)
{
    (void)h;
    fired++;
}

static int timers(const bench_args *args, bench_metric *out)
{
    uv_timer_t *t = malloc((size_t)args->n * sizeof(*t));
    uv_loop_t loop;
    long timeout_ms = 0;
    int64_t t0, t1, c1, c2, t3;
    double n = (double)args->n;

    BENCH_CHECK(uv_loop_init(&loop) == 0);
    fired = 0;
    t0 = bench_now_ns();
    for (long i = 0; i < args->n; i++) {
        if (i % 1000 == 0) {
            timeout_ms++;
        }
        BENCH_CHECK(uv_timer_init(&loop, &t[i]) == 0);
        BENCH_CHECK(uv_timer_start(&t[i], timer_cb, (uint64_t)timeout_ms, 0) == 0);
    }
    t1 = bench_now_ns();
    c1 = bench_cpu_ns();
    uv_run(&loop, UV_RUN_DEFAULT);
    c2 = bench_cpu_ns();
    BENCH_CHECK(fired == args->n);
    t3 = bench_now_ns();
    for (long i = 0; i < args->n; i++) {
        uv_close((uv_handle_t *)&t[i], NULL);
    }
    uv_run(&loop, UV_RUN_DEFAULT);
    out[0] = (bench_metric){ "arm_ns_per_timer", "ns", (double)(t1 - t0) / n };
    out[1] = (bench_metric){ "fire_cpu_ns_per_timer", "ns", (double)(c2 - c1) / n };
    out[2] = (bench_metric){ "free_ns_per_timer", "ns",
                             (double)(bench_now_ns() - t3) / n };
    uv_loop_close(&loop);
    free(t);
    return 3;
}

int main(int argc, char **argv)
{
    static const bench_workload workloads[] = {
        { "wakeup", wakeup, 100000 },
        { "timers", timers, 1000000 },
    };

    return bench_main("libuv", argc, argv, workloads,
                      sizeof(workloads) / sizeof(workloads[0]));
}
