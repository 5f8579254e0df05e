/*
 * aiol.c - libaioloop's side of the shared workloads (see bench.h).
 *
 *   bh_single   schedule one bottom half, run it with a non-blocking poll
 *   bh_burst    schedule n bottom halves, run them with one poll (ns per BH)
 *   wakeup      cross-thread ping-pong: a bottom half on the other loop's
 *               thread answers with a bottom half on ours (ns per round trip)
 *   timers      libuv's million_timers shape: n timers, deadlines 1..n/1000
 *               ms; ns per timer to arm, CPU ns per timer to fire, ns per
 *               timer to free
 */
#define _GNU_SOURCE
#include <stdatomic.h>
#include <stdlib.h>

#include "aioloop/aioloop.h"
#include "bench.h"

static aiol_loop *loop_new(const bench_args *args)
{
    aiol_loop *loop;

    BENCH_CHECK(aiol_loop_new(&loop, args->backend) == 0);
    return loop;
}

static void count_cb(void *opaque)
{
    (*(long *)opaque)++;
}

enum { BH_SINGLE_ITERS = 200000 };

static int bh_single(const bench_args *args, bench_metric *out)
{
    aiol_loop *loop = loop_new(args);
    long ran = 0;
    aiol_bh *bh;
    int64_t t0;

    BENCH_CHECK(aiol_bh_new(loop, count_cb, &ran, &bh) == 0);
    t0 = bench_now_ns();
    for (int i = 0; i < BH_SINGLE_ITERS; i++) {
        aiol_bh_schedule(bh);
        aiol_loop_poll(loop, false);
    }
    out[0] = (bench_metric){ "ns_per_bh", "ns",
                             (double)(bench_now_ns() - t0) / BH_SINGLE_ITERS };
    BENCH_CHECK(ran == BH_SINGLE_ITERS);
    aiol_bh_delete(bh);
    aiol_loop_free(loop);
    return 1;
}

static int bh_burst(const bench_args *args, bench_metric *out)
{
    enum { ROUNDS = 200 };
    aiol_loop *loop = loop_new(args);
    aiol_bh **bhs = calloc((size_t)args->n, sizeof(*bhs));
    long ran = 0;
    int64_t t0;

    for (long i = 0; i < args->n; i++) {
        BENCH_CHECK(aiol_bh_new(loop, count_cb, &ran, &bhs[i]) == 0);
    }
    t0 = bench_now_ns();
    for (int r = 0; r < ROUNDS; r++) {
        for (long i = 0; i < args->n; i++) {
            aiol_bh_schedule(bhs[i]);
        }
        aiol_loop_poll(loop, false);
    }
    out[0] = (bench_metric){ "ns_per_bh", "ns",
                             (double)(bench_now_ns() - t0) / (ROUNDS * args->n) };
    BENCH_CHECK(ran == ROUNDS * args->n);
    for (long i = 0; i < args->n; i++) {
        aiol_bh_delete(bhs[i]);
    }
    aiol_loop_poll(loop, false);
    free(bhs);
    aiol_loop_free(loop);
    return 1;
}

typedef struct pingpong {
    aiol_bh *ping; /* runs on the iothread */
    aiol_bh *pong; /* runs on the main loop */
    long rounds, target;
} pingpong;

static void ping_cb(void *opaque)
{
    aiol_bh_schedule(((pingpong *)opaque)->pong);
}

static void pong_cb(void *opaque)
{
    pingpong *pp = opaque;

    if (++pp->rounds < pp->target) {
        aiol_bh_schedule(pp->ping);
    }
}

static int wakeup(const bench_args *args, bench_metric *out)
{
    aiol_loop *loop = loop_new(args);
    pingpong pp = { .target = args->n };
    aiol_iothread *thread;
    int64_t t0;

    BENCH_CHECK(aiol_iothread_new(args->backend, &thread) == 0);
    BENCH_CHECK(aiol_bh_new(aiol_iothread_loop(thread), ping_cb, &pp,
                            &pp.ping) == 0);
    BENCH_CHECK(aiol_bh_new(loop, pong_cb, &pp, &pp.pong) == 0);
    t0 = bench_now_ns();
    aiol_bh_schedule(pp.ping);
    while (pp.rounds < pp.target) {
        aiol_loop_poll(loop, true);
    }
    out[0] = (bench_metric){ "ns_per_roundtrip", "ns",
                             (double)(bench_now_ns() - t0) / (double)pp.target };
    aiol_bh_delete(pp.ping);
    aiol_bh_delete(pp.pong);
    aiol_iothread_free(thread);
    aiol_loop_poll(loop, false);
    aiol_loop_free(loop);
    return 1;
}

static int timers(const bench_args *args, bench_metric *out)
{
    aiol_loop *loop = loop_new(args);
    aiol_clock *clock = aiol_loop_clock(loop);
    aiol_timer **t = malloc((size_t)args->n * sizeof(*t));
    long fired = 0, timeout_ms = 0;
    int64_t t0, t1, c1, c2, t3;
    double n = (double)args->n;

    t0 = bench_now_ns();
    for (long i = 0; i < args->n; i++) {
        if (i % 1000 == 0) {
            timeout_ms++;
        }
        BENCH_CHECK(aiol_timer_new(clock, count_cb, &fired, &t[i]) == 0);
        BENCH_CHECK(aiol_timer_mod(t[i], t0 + timeout_ms * 1000000) == 0);
    }
    t1 = bench_now_ns();
    c1 = bench_cpu_ns();
    while (fired < args->n) {
        aiol_loop_poll(loop, true);
    }
    c2 = bench_cpu_ns();
    t3 = bench_now_ns();
    for (long i = 0; i < args->n; i++) {
        aiol_timer_free(t[i]);
    }
    out[0] = (bench_metric){ "arm_ns_per_timer", "ns", (double)(t1 - t0) / n };
    out[1] = (bench_metric){ "fire_cpu_ns_per_timer", "ns", (double)(c2 - c1) / n };
    out[2] = (bench_metric){ "free_ns_per_timer", "ns",
                             (double)(bench_now_ns() - t3) / n };
    free(t);
    aiol_loop_free(loop);
    return 3;
}

int main(int argc, char **argv)
{
    static const bench_workload workloads[] = {
        { "bh_single", bh_single, 1 },
        { "bh_burst", bh_burst, 1000 },
        { "wakeup", wakeup, 100000 },
        { "timers", timers, 1000000 },
    };

    return bench_main("aioloop", argc, argv, workloads,
                      sizeof(workloads) / sizeof(workloads[0]));
}
