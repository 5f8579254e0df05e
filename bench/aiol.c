/* SPDX-License-Identifier: MIT */
/*
 * aiol.c - libaioloop's side of the shared workloads (bench.h,
 * workloads.c), on the fd monitor named by --fdmon (epoll, io_uring, poll),
 * on thread-confined loops with --loop confined (AIOL_LOOP_CONFINED: the
 * bottom halves of bh_single and bh_burst are then local ones).
 *
 *   bh_single, bh_burst   aiol_bh_schedule() + aiol_loop_poll(false)
 *   wakeup      cross-thread ping-pong: a bottom half on the other loop's
 *               thread answers with a bottom half on ours (ns per round trip)
 *   timers      aiol_timer_new() + aiol_timer_mod() on the loop's clock
 *   chain_a1, chain_a100, churn, idle_poll
 *               aiol_fd_set() / aiol_fd_remove(); re-arming is
 *               aiol_fd_set() again with the same callbacks.  Also reports
 *               fd-monitor syscalls from the loop's own stats.
 *   ready1      libaioloop only: one eventfd of n made readable per
 *               iteration, one non-blocking poll dispatches it; ns and
 *               syscalls per event
 *   ready1_drains
 *               ready1 with the handlers flagged AIOL_FD_DRAINS (their
 *               read resets the eventfd): on io_uring, a multishot poll
 *               each, never re-armed
 *   bh_local_single, bh_local_burst
 *               libaioloop only: bh_single and bh_burst with local bottom
 *               halves (aiol_bh_new_local(): the polling thread's alone,
 *               no atomics), the kind libuv's single-threaded handles are
 *   churn_reserved
 *               libaioloop only: churn on a loop that reserved its n
 *               handlers first (aiol_fd_reserve(), untimed, as libev's
 *               side allocates its n watchers untimed): the first round of
 *               adds then takes no page fault
 *   chain_ring_a1, chain_ring_a100
 *               libaioloop on io_uring only: the chain's bytes as
 *               completions (aioloop/uring.h), no readiness: a multishot
 *               receive per pair into one buffer group, each next byte
 *               sent with aiol_uring_send_submit(); event_us as chain's
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "aioloop/aioloop.h"
#include "aioloop/uring.h"
#include "bench.h"

static aiol_loop *loop_new(const bench_args *args)
{
    aiol_loop *loop;

    BENCH_CHECK(aiol_loop_new_flags(&loop, args->fdmon,
                                    args->confined ? AIOL_LOOP_CONFINED : 0) ==
                0);
    return loop;
}

static void hit_cb(void *opaque)
{
    (void)opaque;
    bench_hit();
}

/* ------------------------------------------------------------ fd ops */

static void *fd_loop_new(const bench_args *args, long nhandlers)
{
    (void)nhandlers;
    return loop_new(args);
}

static void fd_loop_free(void *loop)
{
    aiol_loop_free(loop);
}

static void fd_prepare(void *loop, int idx, int fd)
{
    (void)loop, (void)idx, (void)fd;
}

static void fd_read(void *opaque)
{
    bench_fd_ready((int)(intptr_t)opaque);
}

static void fd_watch(void *loop, int idx, int fd)
{
    BENCH_CHECK(aiol_fd_set(loop, fd, fd_read, NULL, NULL,
                            (void *)(intptr_t)idx) == 0);
}

static void fd_unwatch(void *loop, int idx, int fd)
{
    (void)idx;
    BENCH_CHECK(aiol_fd_remove(loop, fd) == 0);
}

static void fd_poll(void *loop)
{
    aiol_loop_poll(loop, false);
}

/* Fd-monitor syscalls the loop made: waits that entered the kernel plus
 * registration calls. */
static uint64_t fd_syscalls(void *loop)
{
    aiol_loop_stats st;

    aiol_loop_stats_get(loop, &st);
    return st.fdmon_waits + st.fdmon_ctls;
}

static const bench_fd_ops fd_ops = {
    fd_loop_new, fd_loop_free, fd_prepare, fd_watch, fd_unwatch, fd_poll,
    fd_syscalls,
};

/* churn_reserved: the fds come in rising order, so the last is the top */
static long reserve_n;

static void fd_prepare_reserve(void *loop, int idx, int fd)
{
    if (idx == reserve_n - 1) {
        BENCH_CHECK(aiol_fd_reserve(loop, (size_t)reserve_n, fd) == 0);
    }
}

static const bench_fd_ops fd_reserved_ops = {
    fd_loop_new, fd_loop_free, fd_prepare_reserve, fd_watch, fd_unwatch,
    fd_poll, fd_syscalls,
};

static int churn_reserved(const bench_args *args, bench_metric *out)
{
    reserve_n = args->n;
    return bench_churn(&fd_reserved_ops, args, out);
}

/* --------------------------------------------------------- defer ops */

static void *defer_loop_new(const bench_args *args)
{
    return loop_new(args);
}

static void defer_loop_free(void *loop)
{
    aiol_loop_poll(loop, false); /* collects deleted bottom halves */
    aiol_loop_free(loop);
}

static void *defer_new(void *loop)
{
    aiol_bh *bh;

    BENCH_CHECK(aiol_bh_new(loop, hit_cb, NULL, &bh) == 0);
    return bh;
}

static void defer_free(void *loop, void *d)
{
    (void)loop;
    aiol_bh_free(d);
}

static void defer_schedule(void *d)
{
    aiol_bh_schedule(d);
}

static const bench_defer_ops defer_ops = {
    defer_loop_new, defer_loop_free, defer_new, defer_free, defer_schedule,
    fd_poll,
};

/* bh_local_*: the same work with local bottom halves (aiol_bh_new_local) */
static void *defer_new_local(void *loop)
{
    aiol_bh *bh;

    BENCH_CHECK(aiol_bh_new_local(loop, hit_cb, NULL, &bh) == 0);
    return bh;
}

static const bench_defer_ops defer_local_ops = {
    defer_loop_new, defer_loop_free, defer_new_local, defer_free,
    defer_schedule, fd_poll,
};

static int bh_local_single(const bench_args *args, bench_metric *out)
{
    return bench_bh_single(&defer_local_ops, args, out);
}

static int bh_local_burst(const bench_args *args, bench_metric *out)
{
    return bench_bh_burst(&defer_local_ops, args, out);
}

/* ------------------------------------------------------------ wakeup */

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

    BENCH_CHECK(aiol_iothread_new(args->fdmon, &thread) == 0);
    BENCH_CHECK(aiol_bh_new_shared(aiol_iothread_loop_get(thread), ping_cb,
                                   &pp, &pp.ping) == 0);
    /* (scheduled by the iothread: thread-safe on a confined loop too) */
    BENCH_CHECK(aiol_bh_new_shared(loop, pong_cb, &pp, &pp.pong) == 0);
    t0 = bench_now_ns();
    aiol_bh_schedule(pp.ping);
    while (pp.rounds < pp.target) {
        aiol_loop_poll(loop, true);
    }
    bench_wakeup_result(out, t0, pp.rounds, pp.target);
    aiol_bh_free(pp.ping);
    aiol_bh_free(pp.pong);
    aiol_iothread_free(thread);
    aiol_loop_poll(loop, false);
    aiol_loop_free(loop);
    return 1;
}

/* ------------------------------------------------------------ timers */

typedef struct timer_loop {
    aiol_loop *loop;
    aiol_timer **t;
    long n;
    int64_t base; /* deadlines are relative to the loop's creation */
} timer_loop;

static void *timer_loop_new(const bench_args *args)
{
    timer_loop *tl = malloc(sizeof(*tl));

    tl->loop = loop_new(args);
    tl->n = args->n;
    tl->t = malloc((size_t)args->n * sizeof(*tl->t));
    tl->base = aiol_mono_time_get();
    return tl;
}

static void timer_loop_free(void *opaque)
{
    timer_loop *tl = opaque;

    aiol_loop_free(tl->loop);
    free(tl->t);
    free(tl);
}

static void timer_arm(void *opaque, long i, long timeout_ms)
{
    timer_loop *tl = opaque;

    BENCH_CHECK(aiol_timer_new(aiol_loop_clock_get(tl->loop), hit_cb, NULL,
                               &tl->t[i]) == 0);
    BENCH_CHECK(aiol_timer_mod(tl->t[i], tl->base + timeout_ms * 1000000) == 0);
}

static void timer_run(void *opaque)
{
    timer_loop *tl = opaque;

    while (bench_hits() < tl->n) {
        aiol_loop_poll(tl->loop, true);
    }
}

static void timer_free_all(void *opaque)
{
    timer_loop *tl = opaque;

    for (long i = 0; i < tl->n; i++) {
        aiol_timer_free(tl->t[i]);
    }
}

static const bench_timer_ops timer_ops = {
    timer_loop_new, timer_loop_free, timer_arm, timer_run, timer_free_all,
};

/* ------------------------------------------------------------ ready1 */

static void drain_eventfd(void *opaque)
{
    eventfd_t v;

    (void)eventfd_read(*(int *)opaque, &v);
}

static int ready1_flags(const bench_args *args, bench_metric *out,
                       unsigned flags)
{
    const aiol_fd_ops ops = { .read = drain_eventfd, .flags = flags };
    long iters = bench_iters(args, 20000);
    aiol_loop *loop = loop_new(args);
    int *fds = malloc(sizeof(int) * (size_t)args->n);
    uint64_t sys0;
    int64_t t0;

    for (long i = 0; i < args->n; i++) {
        fds[i] = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        BENCH_CHECK(fds[i] >= 0);
        BENCH_CHECK(aiol_fd_set_ops(loop, fds[i], &ops, &fds[i]) == 0);
    }
    aiol_loop_poll(loop, false);
    sys0 = fd_syscalls(loop);
    t0 = bench_now_ns();
    for (long it = 0; it < iters; it++) {
        BENCH_CHECK(eventfd_write(fds[(it * 7919L) % args->n], 1) == 0);
        BENCH_CHECK(aiol_loop_poll(loop, false));
    }
    out[0] = (bench_metric){ "ns_per_event", "ns",
                             (double)(bench_now_ns() - t0) / (double)iters };
    out[1] = (bench_metric){ "syscalls_per_event", "",
                             (double)(fd_syscalls(loop) - sys0) / (double)iters };
    aiol_loop_free(loop);
    for (long i = 0; i < args->n; i++) {
        close(fds[i]);
    }
    free(fds);
    return 2;
}

static int ready1(const bench_args *args, bench_metric *out)
{
    return ready1_flags(args, out, 0);
}

static int ready1_drains(const bench_args *args, bench_metric *out)
{
    return ready1_flags(args, out, AIOL_FD_DRAINS);
}

/* -------------------------------------------------------- chain_ring */

static struct {
    aiol_loop *loop;
    int n;
    int *fds;     /* fds[2i] read side (received on), fds[2i + 1] write side */
    int *idx;     /* idx[i] = i: each receive's opaque */
    long count, writes, fired, sends;
} ring;

static void ring_sent(void *opaque, int res, uint32_t flags)
{
    (void)opaque, (void)flags;
    BENCH_CHECK(res == 1);
    ring.sends--;
}

static void ring_got(void *opaque, int res, const void *data)
{
    int widx = *(int *)opaque + 1;

    (void)data;
    if (res <= 0) {
        return; /* the receive's end: aiol_loop_free(), after the run */
    }
    ring.count += res;
    if (ring.writes > 0) {
        if (widx >= ring.n) {
            widx -= ring.n;
        }
        BENCH_CHECK(aiol_uring_send_submit(ring.loop,
                                           ring.fds[2 * widx + 1], "e", 1,
                                           ring_sent, NULL) == 0);
        ring.sends++;
        ring.writes--;
        ring.fired++;
    }
}

/* chain's iterations (workloads.c), the bytes moved on the ring. */
static int chain_ring(const bench_args *args, bench_metric *out, int active,
                      long writes)
{
    enum { ITERS = 25 };
    int n = (int)args->n, space = n / active * 2;
    unsigned count = 64;
    aiol_uring_bufs *bufs;
    aiol_uring_recv **recvs;
    double event_us = 0;
    uint64_t sys0, events = 0;

    BENCH_CHECK(n >= active);
    ring.loop = loop_new(args);
    BENCH_CHECK(strcmp(aiol_loop_fdmon_get(ring.loop), "io_uring") == 0);
    ring.n = n;
    ring.fds = malloc(2 * sizeof(int) * (size_t)n);
    ring.idx = malloc(sizeof(int) * (size_t)n);
    recvs = malloc(sizeof(*recvs) * (size_t)n);
    while (count < 2u * (unsigned)n && count < 32768) {
        count *= 2; /* room for every pair's byte in flight */
    }
    BENCH_CHECK(aiol_uring_bufs_new(ring.loop, count, 64, &bufs) == 0);
    for (int i = 0; i < n; i++) {
        /* blocking: io_uring waits on them */
        BENCH_CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, &ring.fds[2 * i]) ==
                    0);
        ring.idx[i] = i;
        BENCH_CHECK(aiol_uring_recv_submit(ring.loop, ring.fds[2 * i], bufs,
                                           ring_got, &ring.idx[i],
                                           &recvs[i]) == 0);
    }
    aiol_loop_poll(ring.loop, false);
    sys0 = fd_syscalls(ring.loop);
    for (int it = 0; it < ITERS; it++) {
        int64_t t1;

        aiol_loop_poll(ring.loop, false);
        ring.fired = 0;
        for (int i = 0; i < active; i++, ring.fired++) {
            BENCH_CHECK(send(ring.fds[i * space + 1], "e", 1, 0) == 1);
        }
        ring.count = 0;
        ring.writes = writes;
        t1 = bench_now_ns();
        do {
            aiol_loop_poll(ring.loop, true);
        } while (ring.count != ring.fired || ring.sends != 0);
        event_us += (double)(bench_now_ns() - t1) / 1e3;
        BENCH_CHECK(ring.writes == 0 && ring.count == active + writes);
        events += (uint64_t)ring.fired;
    }
    out[0] = (bench_metric){ "event_us", "us", event_us / ITERS };
    out[1] = (bench_metric){ "syscalls_per_event", "",
                             (double)(fd_syscalls(ring.loop) - sys0) /
                                 (double)events };
    for (int i = 0; i < n; i++) {
        aiol_uring_recv_cancel(recvs[i]);
    }
    aiol_loop_free(ring.loop); /* (runs the receives' final callbacks) */
    for (int i = 0; i < 2 * n; i++) {
        close(ring.fds[i]);
    }
    free(ring.fds);
    free(ring.idx);
    free(recvs);
    return 2;
}

static int chain_ring_a1(const bench_args *args, bench_metric *out)
{
    return chain_ring(args, out, 1, 100);
}

static int chain_ring_a100(const bench_args *args, bench_metric *out)
{
    return chain_ring(args, out, 100, 1000);
}

int main(int argc, char **argv)
{
    static const bench_workload extra[] = {
        { "ready1", ready1, 1000 },
        { "ready1_drains", ready1_drains, 1000 },
        { "bh_local_single", bh_local_single, 1 },
        { "bh_local_burst", bh_local_burst, 1000 },
        { "churn_reserved", churn_reserved, 1000 },
        { "chain_ring_a1", chain_ring_a1, 1000 },
        { "chain_ring_a100", chain_ring_a100, 1000 },
    };
    static const bench_lib lib = {
        "aioloop", &fd_ops, &defer_ops, &timer_ops, wakeup,
        extra, sizeof(extra) / sizeof(extra[0]),
    };

    return bench_lib_main(&lib, argc, argv);
}
