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
 *   chain_a1, chain_a100
 *               libevent's bench.c shape: n socketpairs with read handlers,
 *               1 (100) made readable, each read callback writes to the
 *               next pair until 100 (1000) writes are done; us per run for
 *               the events alone and in total with the re-arm of all n
 *               handlers, and fd-monitor syscalls per event
 *   ready1      one eventfd of n made readable per iteration, one
 *               non-blocking poll dispatches it; ns and syscalls per event
 *   churn       add and remove one handler with n registered: ns per pair
 *   idle_poll   an empty non-blocking poll with n registered: ns and
 *               syscalls per poll
 */
#define _GNU_SOURCE
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

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

/* Fd-monitor syscalls the loop made: waits that entered the kernel plus
 * registration calls. */
static uint64_t mon_syscalls(aiol_loop *loop)
{
    aiol_loop_stats st;

    aiol_loop_stats_get(loop, &st);
    return st.monitor_waits + st.monitor_ctls;
}

/* ------------------------------------------------------------- chain */

typedef struct chain {
    aiol_loop *loop;
    int n;
    int *fds;        /* fds[2i] read side, fds[2i+1] write side */
    long count;      /* bytes read */
    long writes;     /* writes left */
    long fired;      /* writes made */
} chain;

typedef struct chain_slot {
    chain *c;
    int idx;
} chain_slot;

static chain_slot *chain_slots;

static void chain_read(void *opaque)
{
    chain_slot *slot = opaque;
    chain *c = slot->c;
    int widx = slot->idx + 1;
    char ch;

    if (recv(c->fds[2 * slot->idx], &ch, 1, 0) == 1) {
        c->count++;
    }
    if (c->writes > 0) {
        if (widx >= c->n) {
            widx -= c->n;
        }
        BENCH_CHECK(send(c->fds[2 * widx + 1], "e", 1, 0) == 1);
        c->writes--;
        c->fired++;
    }
}

enum { CHAIN_ITERS = 25 };

static int chain_run(const bench_args *args, bench_metric *out, int active,
                     long writes)
{
    chain c = { .loop = loop_new(args), .n = (int)args->n };
    double event_us = 0, total_us = 0;
    uint64_t sys0, events = 0;
    int space;

    c.fds = malloc(2 * sizeof(int) * (size_t)c.n);
    chain_slots = malloc(sizeof(*chain_slots) * (size_t)c.n);
    for (int i = 0; i < c.n; i++) {
        BENCH_CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0,
                               &c.fds[2 * i]) == 0);
        chain_slots[i] = (chain_slot){ &c, i };
    }
    space = c.n / active * 2;
    /* First registration, outside the measurement (bench.c does it too). */
    for (int i = 0; i < c.n; i++) {
        BENCH_CHECK(aiol_fd_set(c.loop, c.fds[2 * i], chain_read, NULL, NULL,
                                &chain_slots[i]) == 0);
    }
    aiol_loop_poll(c.loop, false);
    sys0 = mon_syscalls(c.loop);
    for (int it = 0; it < CHAIN_ITERS; it++) {
        int64_t t0 = bench_now_ns(), t1;

        /* Re-arm every handler, as bench.c's event_del + event_add. */
        for (int i = 0; i < c.n; i++) {
            BENCH_CHECK(aiol_fd_set(c.loop, c.fds[2 * i], chain_read, NULL,
                                    NULL, &chain_slots[i]) == 0);
        }
        aiol_loop_poll(c.loop, false);
        c.fired = 0;
        for (int i = 0; i < active; i++, c.fired++) {
            BENCH_CHECK(send(c.fds[i * space + 1], "e", 1, 0) == 1);
        }
        c.count = 0;
        c.writes = writes;
        t1 = bench_now_ns();
        do {
            aiol_loop_poll(c.loop, false);
        } while (c.count != c.fired);
        events += (uint64_t)c.fired;
        event_us += (double)(bench_now_ns() - t1) / 1e3;
        total_us += (double)(bench_now_ns() - t0) / 1e3;
    }
    out[0] = (bench_metric){ "event_us", "us", event_us / CHAIN_ITERS };
    out[1] = (bench_metric){ "total_us", "us", total_us / CHAIN_ITERS };
    out[2] = (bench_metric){ "syscalls_per_event", "",
                             (double)(mon_syscalls(c.loop) - sys0) / (double)events };
    aiol_loop_free(c.loop);
    for (int i = 0; i < 2 * c.n; i++) {
        close(c.fds[i]);
    }
    free(c.fds);
    free(chain_slots);
    return 3;
}

static int chain_a1(const bench_args *args, bench_metric *out)
{
    return chain_run(args, out, 1, 100);
}

static int chain_a100(const bench_args *args, bench_metric *out)
{
    return chain_run(args, out, 100, 1000);
}

/* ---------------------------------------------- ready1, churn, idle_poll */

static void drain_eventfd(void *opaque)
{
    eventfd_t v;

    (void)eventfd_read(*(int *)opaque, &v);
}

/* A loop with n eventfd read handlers; fds returned in *fdsp. */
static aiol_loop *eventfd_loop(const bench_args *args, int **fdsp)
{
    aiol_loop *loop = loop_new(args);
    int *fds = malloc(sizeof(int) * (size_t)args->n);

    for (long i = 0; i < args->n; i++) {
        fds[i] = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        BENCH_CHECK(fds[i] >= 0);
        BENCH_CHECK(aiol_fd_set(loop, fds[i], drain_eventfd, NULL, NULL,
                                &fds[i]) == 0);
    }
    aiol_loop_poll(loop, false);
    *fdsp = fds;
    return loop;
}

static void eventfd_loop_free(aiol_loop *loop, int *fds, long n)
{
    aiol_loop_free(loop);
    for (long i = 0; i < n; i++) {
        close(fds[i]);
    }
    free(fds);
}

enum { READY1_ITERS = 20000 };

static int ready1(const bench_args *args, bench_metric *out)
{
    int *fds;
    aiol_loop *loop = eventfd_loop(args, &fds);
    uint64_t sys0 = mon_syscalls(loop);
    int64_t t0 = bench_now_ns();

    for (int it = 0; it < READY1_ITERS; it++) {
        BENCH_CHECK(eventfd_write(fds[(it * 7919L) % args->n], 1) == 0);
        BENCH_CHECK(aiol_loop_poll(loop, false));
    }
    out[0] = (bench_metric){ "ns_per_event", "ns",
                             (double)(bench_now_ns() - t0) / READY1_ITERS };
    out[1] = (bench_metric){ "syscalls_per_event", "",
                             (double)(mon_syscalls(loop) - sys0) / READY1_ITERS };
    eventfd_loop_free(loop, fds, args->n);
    return 2;
}

enum { CHURN_ITERS = 20000 };

static int churn(const bench_args *args, bench_metric *out)
{
    int *fds;
    aiol_loop *loop = eventfd_loop(args, &fds);
    int spare = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    int64_t t0 = bench_now_ns();

    for (int it = 0; it < CHURN_ITERS; it++) {
        BENCH_CHECK(aiol_fd_set(loop, spare, drain_eventfd, NULL, NULL,
                                &spare) == 0);
        BENCH_CHECK(aiol_fd_remove(loop, spare) == 0);
    }
    out[0] = (bench_metric){ "ns_per_add_remove", "ns",
                             (double)(bench_now_ns() - t0) / CHURN_ITERS };
    close(spare);
    eventfd_loop_free(loop, fds, args->n);
    return 1;
}

static int idle_poll(const bench_args *args, bench_metric *out)
{
    int *fds;
    aiol_loop *loop = eventfd_loop(args, &fds);
    uint64_t sys0 = mon_syscalls(loop);
    int64_t t0 = bench_now_ns();

    for (int it = 0; it < READY1_ITERS; it++) {
        BENCH_CHECK(!aiol_loop_poll(loop, false));
    }
    out[0] = (bench_metric){ "ns_per_poll", "ns",
                             (double)(bench_now_ns() - t0) / READY1_ITERS };
    out[1] = (bench_metric){ "syscalls_per_poll", "",
                             (double)(mon_syscalls(loop) - sys0) / READY1_ITERS };
    eventfd_loop_free(loop, fds, args->n);
    return 2;
}

int main(int argc, char **argv)
{
    static const bench_workload workloads[] = {
        { "bh_single", bh_single, 1 },
        { "bh_burst", bh_burst, 1000 },
        { "wakeup", wakeup, 100000 },
        { "timers", timers, 1000000 },
        { "chain_a1", chain_a1, 1000 },
        { "chain_a100", chain_a100, 1000 },
        { "ready1", ready1, 1000 },
        { "churn", churn, 1000 },
        { "idle_poll", idle_poll, 1000 },
    };

    return bench_main("aioloop", argc, argv, workloads,
                      sizeof(workloads) / sizeof(workloads[0]));
}
