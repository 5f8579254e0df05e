/* SPDX-License-Identifier: MIT */
/*
 * workloads.c - the workloads every library runs, written once (bench.h).
 *
 * A library's file supplies the operations in its own API; the shapes,
 * the timing and the checks that every expected callback ran are here, so
 * all libraries do exactly the same work.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bench.h"

static long hits;

void bench_hit(void)
{
    hits++;
}

long bench_hits(void)
{
    return hits;
}

int bench_wakeup_result(bench_metric *out, int64_t t0, long rounds,
                        long target)
{
    BENCH_CHECK(rounds == target);
    out[0] = (bench_metric){ "ns_per_roundtrip", "ns",
                             (double)(bench_now_ns() - t0) / (double)target };
    return 1;
}

/* ------------------------------------------------------------- fd work */

static void (*ready_fn)(int idx);

void bench_fd_ready(int idx)
{
    ready_fn(idx);
}

static void count_ready(int idx)
{
    (void)idx;
    hits++;
}

/*
 * chain: libevent's test/bench.c.  n socketpairs, each read side watched.
 * Per iteration: re-arm all n handlers (event_del + event_add there), one
 * non-blocking poll, write one byte into @active pairs spread over the n,
 * then poll until every byte written was read.  Each read callback reads
 * its byte and, while writes are left, writes one into the next pair.
 * "event" times the polls after the first writes; "total" also the
 * re-arm.  Re-arm is each library's way to register again a handler that
 * is registered already: its replacing call where it has one
 * (aiol_fd_set, uv_poll_start, g_source_modify_unix_fd), else remove +
 * add (ev_io_stop + ev_io_start, event_del + event_add as in bench.c).
 */
static struct {
    int n;
    int *fds; /* fds[2i] read side (watched), fds[2i + 1] write side */
    long count, writes, fired;
} chain;

enum { CHAIN_ITERS = 25 };

static void chain_ready(int idx)
{
    int widx = idx + 1;
    char ch;

    if (recv(chain.fds[2 * idx], &ch, 1, 0) == 1) {
        chain.count++;
    }
    if (chain.writes > 0) {
        if (widx >= chain.n) {
            widx -= chain.n;
        }
        BENCH_CHECK(send(chain.fds[2 * widx + 1], "e", 1, 0) == 1);
        chain.writes--;
        chain.fired++;
    }
}

int bench_chain(const bench_fd_ops *ops, const bench_args *args,
                bench_metric *out, int active, long writes)
{
    int n = (int)args->n, space = n / active * 2;
    void *loop = ops->loop_new(args, n);
    double event_us = 0, total_us = 0;
    uint64_t sys0 = 0, events = 0;

    BENCH_CHECK(n >= active);
    chain.n = n;
    chain.fds = malloc(2 * sizeof(int) * (size_t)n);
    ready_fn = chain_ready;
    for (int i = 0; i < n; i++) {
        BENCH_CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0,
                               &chain.fds[2 * i]) == 0);
        ops->prepare(loop, i, chain.fds[2 * i]);
    }
    /* First registration, outside the measurement (bench.c does it too). */
    for (int i = 0; i < n; i++) {
        ops->watch(loop, i, chain.fds[2 * i]);
    }
    ops->poll(loop);
    if (ops->syscalls) {
        sys0 = ops->syscalls(loop);
    }
    for (int it = 0; it < CHAIN_ITERS; it++) {
        int64_t t0 = bench_now_ns(), t1;

        for (int i = 0; i < n; i++) {
            ops->watch(loop, i, chain.fds[2 * i]);
        }
        ops->poll(loop);
        chain.fired = 0;
        for (int i = 0; i < active; i++, chain.fired++) {
            BENCH_CHECK(send(chain.fds[i * space + 1], "e", 1, 0) == 1);
        }
        chain.count = 0;
        chain.writes = writes;
        t1 = bench_now_ns();
        do {
            ops->poll(loop);
        } while (chain.count != chain.fired);
        event_us += (double)(bench_now_ns() - t1) / 1e3;
        total_us += (double)(bench_now_ns() - t0) / 1e3;
        /* Every write was made, and read by a callback. */
        BENCH_CHECK(chain.writes == 0 && chain.count == active + writes);
        events += (uint64_t)chain.fired;
    }
    out[0] = (bench_metric){ "event_us", "us", event_us / CHAIN_ITERS };
    out[1] = (bench_metric){ "total_us", "us", total_us / CHAIN_ITERS };
    if (ops->syscalls) {
        out[2] = (bench_metric){ "syscalls_per_event", "",
                                 (double)(ops->syscalls(loop) - sys0) /
                                     (double)events };
    }
    ops->loop_free(loop);
    for (int i = 0; i < 2 * n; i++) {
        close(chain.fds[i]);
    }
    free(chain.fds);
    return ops->syscalls ? 3 : 2;
}

/* n non-blocking eventfds, each prepared as handler i on @loop. */
static int *eventfds(const bench_fd_ops *ops, void *loop, long n)
{
    int *fds = malloc(sizeof(int) * (size_t)n);

    for (long i = 0; i < n; i++) {
        fds[i] = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        BENCH_CHECK(fds[i] >= 0);
        ops->prepare(loop, (int)i, fds[i]);
    }
    return fds;
}

static void eventfds_free(int *fds, long n)
{
    for (long i = 0; i < n; i++) {
        close(fds[i]);
    }
    free(fds);
}

int bench_churn(const bench_fd_ops *ops, const bench_args *args,
                bench_metric *out)
{
    long n = args->n, rounds = bench_iters(args, n >= 10000 ? 2 : 20000 / n);
    void *loop = ops->loop_new(args, n);
    int *fds = eventfds(ops, loop, n);
    int64_t t0, t1;

    hits = 0;
    ready_fn = count_ready;
    t0 = bench_now_ns();
    for (long r = 0; r < rounds; r++) {
        for (long i = 0; i < n; i++) {
            ops->watch(loop, (int)i, fds[i]);
        }
        for (long i = 0; i < n; i++) {
            ops->unwatch(loop, (int)i, fds[i]);
        }
    }
    t1 = bench_now_ns();
    ops->poll(loop); /* lets lazy libraries settle, untimed */
    out[0] = (bench_metric){ "ns_per_pair", "ns",
                             (double)(t1 - t0) / (double)(rounds * n) };
    t0 = bench_now_ns();
    for (long r = 0; r < rounds; r++) {
        for (long i = 0; i < n; i++) {
            ops->watch(loop, (int)i, fds[i]);
        }
        ops->poll(loop);
        for (long i = 0; i < n; i++) {
            ops->unwatch(loop, (int)i, fds[i]);
        }
        ops->poll(loop);
    }
    out[1] = (bench_metric){ "ns_per_pair_polled", "ns",
                             (double)(bench_now_ns() - t0) /
                                 (double)(rounds * n) };
    BENCH_CHECK(hits == 0); /* nothing was readable */
    ops->loop_free(loop);
    eventfds_free(fds, n);
    return 2;
}

/*
 * rearm: n eventfds, every one watched.  Per round: stop every watcher
 * and start it again (unwatch + watch: ev_io_stop + ev_io_start, what a
 * service does when it pauses and resumes its connections), then the
 * event phase: signal 100 eventfds spread over the n and poll until each
 * one's callback has read its eventfd.  "event" times the event phase,
 * "total" also the stop and start: a library that defers registration
 * changes pays for them in the event phase, one that does not in the
 * start.
 */
static int *rearm_fds;

static void rearm_ready(int idx)
{
    uint64_t v;

    if (read(rearm_fds[idx], &v, sizeof(v)) == sizeof(v)) {
        hits++;
    }
}

enum { REARM_SIGNALLED = 100 };

int bench_rearm(const bench_fd_ops *ops, const bench_args *args,
                bench_metric *out)
{
    long n = args->n, rounds = bench_iters(args, n >= 10000 ? 5 : 20);
    long step = n > REARM_SIGNALLED ? n / REARM_SIGNALLED : 1;
    long signalled = n < REARM_SIGNALLED ? n : REARM_SIGNALLED;
    void *loop = ops->loop_new(args, n);
    int *fds = eventfds(ops, loop, n);
    double event_us = 0, total_us = 0;

    rearm_fds = fds;
    ready_fn = rearm_ready;
    for (long i = 0; i < n; i++) {
        ops->watch(loop, (int)i, fds[i]);
    }
    ops->poll(loop);
    for (long r = 0; r < rounds; r++) {
        int64_t t0 = bench_now_ns(), t1;

        for (long i = 0; i < n; i++) {
            ops->unwatch(loop, (int)i, fds[i]);
        }
        for (long i = 0; i < n; i++) {
            ops->watch(loop, (int)i, fds[i]);
        }
        t1 = bench_now_ns();
        hits = 0;
        for (long k = 0; k < signalled; k++) {
            BENCH_CHECK(eventfd_write(fds[k * step], 1) == 0);
        }
        do {
            ops->poll(loop);
        } while (hits < signalled);
        event_us += (double)(bench_now_ns() - t1) / 1e3;
        total_us += (double)(bench_now_ns() - t0) / 1e3;
        BENCH_CHECK(hits == signalled);
    }
    out[0] = (bench_metric){ "event_us", "us", event_us / (double)rounds };
    out[1] = (bench_metric){ "total_us", "us", total_us / (double)rounds };
    ops->loop_free(loop);
    eventfds_free(fds, n);
    return 2;
}

int bench_idle_poll(const bench_fd_ops *ops, const bench_args *args,
                    bench_metric *out)
{
    long n = args->n, iters = bench_iters(args, 20000);
    void *loop = ops->loop_new(args, n);
    int *fds = eventfds(ops, loop, n);
    uint64_t sys0 = 0;
    int64_t t0;

    hits = 0;
    ready_fn = count_ready;
    for (long i = 0; i < n; i++) {
        ops->watch(loop, (int)i, fds[i]);
    }
    ops->poll(loop);
    if (ops->syscalls) {
        sys0 = ops->syscalls(loop);
    }
    t0 = bench_now_ns();
    for (long it = 0; it < iters; it++) {
        ops->poll(loop);
    }
    out[0] = (bench_metric){ "ns_per_poll", "ns",
                             (double)(bench_now_ns() - t0) / (double)iters };
    if (ops->syscalls) {
        out[1] = (bench_metric){ "syscalls_per_poll", "",
                                 (double)(ops->syscalls(loop) - sys0) /
                                     (double)iters };
    }
    BENCH_CHECK(hits == 0);
    ops->loop_free(loop);
    eventfds_free(fds, n);
    return ops->syscalls ? 2 : 1;
}

/* ------------------------------------------------------- deferred work */

int bench_bh_single(const bench_defer_ops *ops, const bench_args *args,
                    bench_metric *out)
{
    long iters = bench_iters(args, 200000);
    void *loop = ops->loop_new(args);
    void *d = ops->defer_new(loop);
    int64_t t0;

    hits = 0;
    t0 = bench_now_ns();
    for (long i = 0; i < iters; i++) {
        ops->schedule(d);
        ops->poll(loop);
    }
    out[0] = (bench_metric){ "ns_per_bh", "ns",
                             (double)(bench_now_ns() - t0) / (double)iters };
    BENCH_CHECK(hits == iters); /* one poll ran each one */
    ops->defer_free(loop, d);
    ops->loop_free(loop);
    return 1;
}

int bench_bh_burst(const bench_defer_ops *ops, const bench_args *args,
                   bench_metric *out)
{
    long n = args->n, rounds = bench_iters(args, 200), polls = 0;
    void *loop = ops->loop_new(args);
    void **d = malloc(sizeof(*d) * (size_t)n);
    int64_t t0;

    for (long i = 0; i < n; i++) {
        d[i] = ops->defer_new(loop);
    }
    hits = 0;
    t0 = bench_now_ns();
    for (long r = 0; r < rounds; r++) {
        for (long i = 0; i < n; i++) {
            ops->schedule(d[i]);
        }
        do {
            ops->poll(loop);
            polls++;
        } while (hits < (r + 1) * n);
    }
    out[0] = (bench_metric){ "ns_per_bh", "ns",
                             (double)(bench_now_ns() - t0) /
                                 (double)(rounds * n) };
    out[1] = (bench_metric){ "polls_per_burst", "",
                             (double)polls / (double)rounds };
    BENCH_CHECK(hits == rounds * n);
    for (long i = 0; i < n; i++) {
        ops->defer_free(loop, d[i]);
    }
    free(d);
    ops->loop_free(loop);
    return 2;
}

/* -------------------------------------------------------------- timers */

int bench_timers(const bench_timer_ops *ops, const bench_args *args,
                 bench_metric *out, bool scrambled)
{
    void *loop = ops->loop_new(args);
    double n = (double)args->n;
    int64_t t0, t1, t2, c1, c2, t3;

    hits = 0;
    t0 = bench_now_ns();
    for (long i = 0; i < args->n; i++) {
        ops->arm(loop, i, bench_timer_ms(scrambled ? bench_timer_scramble(
                                                     i, args->n) : i));
    }
    t1 = bench_now_ns();
    c1 = bench_cpu_ns();
    ops->run(loop);
    c2 = bench_cpu_ns();
    t2 = bench_now_ns();
    BENCH_CHECK(hits == args->n); /* every timer fired once */
    t3 = bench_now_ns();
    ops->free_all(loop);
    out[0] = (bench_metric){ "arm_ns_per_timer", "ns", (double)(t1 - t0) / n };
    out[1] = (bench_metric){ "fire_cpu_ns_per_timer", "ns",
                             (double)(c2 - c1) / n };
    out[2] = (bench_metric){ "free_ns_per_timer", "ns",
                             (double)(bench_now_ns() - t3) / n };
    /* run() returns at the last timer's fire; its deadline is the
     * longest timeout after arming began (a little less: each library
     * counts from its loop's clock, read before t0) */
    out[3] = (bench_metric){ "last_late_ms", "ms",
                             (double)(t2 - t0) / 1e6 -
                                 (double)bench_timer_ms(args->n - 1) };
    ops->loop_free(loop);
    return 4;
}

/* ------------------------------------------------------ workload table */

static const bench_lib *cur;

static int w_chain_a1(const bench_args *args, bench_metric *out)
{
    return bench_chain(cur->fd, args, out, 1, 100);
}

static int w_chain_a100(const bench_args *args, bench_metric *out)
{
    return bench_chain(cur->fd, args, out, 100, 1000);
}

static int w_churn(const bench_args *args, bench_metric *out)
{
    return bench_churn(cur->fd, args, out);
}

static int w_rearm(const bench_args *args, bench_metric *out)
{
    return bench_rearm(cur->fd, args, out);
}

static int w_idle_poll(const bench_args *args, bench_metric *out)
{
    return bench_idle_poll(cur->fd, args, out);
}

static int w_bh_single(const bench_args *args, bench_metric *out)
{
    return bench_bh_single(cur->defer, args, out);
}

static int w_bh_burst(const bench_args *args, bench_metric *out)
{
    return bench_bh_burst(cur->defer, args, out);
}

static int w_timers(const bench_args *args, bench_metric *out)
{
    return bench_timers(cur->timer, args, out, false);
}

static int w_timers_rand(const bench_args *args, bench_metric *out)
{
    return bench_timers(cur->timer, args, out, true);
}

int bench_lib_main(const bench_lib *lib, int argc, char **argv)
{
    bench_workload w[16];
    size_t n = 0;

    cur = lib;
    if (lib->fd) {
        w[n++] = (bench_workload){ "chain_a1", w_chain_a1, 1000 };
        w[n++] = (bench_workload){ "chain_a100", w_chain_a100, 1000 };
        w[n++] = (bench_workload){ "churn", w_churn, 1000 };
        w[n++] = (bench_workload){ "idle_poll", w_idle_poll, 1000 };
        w[n++] = (bench_workload){ "rearm", w_rearm, 10000 };
    }
    if (lib->defer) {
        w[n++] = (bench_workload){ "bh_single", w_bh_single, 1 };
        w[n++] = (bench_workload){ "bh_burst", w_bh_burst, 1000 };
    }
    if (lib->timer) {
        w[n++] = (bench_workload){ "timers", w_timers, 1000000 };
        w[n++] = (bench_workload){ "timers_rand", w_timers_rand, 1000000 };
    }
    if (lib->wakeup) {
        w[n++] = (bench_workload){ "wakeup", lib->wakeup, 100000 };
    }
    for (size_t i = 0; i < lib->nextra && n < sizeof(w) / sizeof(w[0]); i++) {
        w[n++] = lib->extra[i];
    }
    return bench_main(lib->name, argc, argv, w, n);
}
