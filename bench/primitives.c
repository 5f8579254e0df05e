/* SPDX-License-Identifier: MIT */
/*
 * primitives.c - the kernel primitives an fd monitor can be built on,
 * timed side by side with no loop around them: what an io_uring monitor
 * waiting on an epoll set would cost at best.  `make bench-primitives`.
 *
 *   wait     one eventfd of N made readable, then one wait that reports it
 *            and a read that drains it, per event:
 *              epoll_wait            on an epoll set of the N eventfds
 *              ring EPOLL_WAIT       IORING_OP_EPOLL_WAIT on the same set,
 *                                    submitted and reaped in one enter
 *              ring POLL_ADD         a single-shot poll of that eventfd
 *                                    (our io_uring fd monitor's re-arm)
 *   register N registrations added and removed again, per pair:
 *              epoll_ctl ADD+DEL     two syscalls per pair
 *              ring EPOLL_CTL        the same two operations as SQEs, N per
 *                                    io_uring_enter
 *              MOD arm+disarm        a registration kept, re-armed and
 *                                    disarmed (EPOLLONESHOT, no events)
 *              ADD that fails EEXIST what a loop that never deletes pays
 *                                    (libev's lazy removal)
 *
 * Rounds alternate the variants; medians.  Rings are DEFER_TASKRUN, as
 * the io_uring fd monitor's.  Exits 77 where the kernel lacks EPOLL_WAIT
 * (6.15+) or io_uring.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <liburing.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "bench.h"

/* liburing 2.3 predates it; the kernel's number since 6.15 */
#define OP_EPOLL_WAIT 59

enum { NFDS = 1000, EVENTS = 50000, ROUNDS = 5, MAXV = 8 };

static int ep, efd[NFDS];
static struct io_uring ring;
static struct epoll_event evs[NFDS];

static void drain(int i)
{
    eventfd_t v;

    BENCH_CHECK(eventfd_read(efd[i], &v) == 0);
}

/* Submits what is queued, waits for @n completions, checks and reaps them. */
static void reap(unsigned n)
{
    struct io_uring_cqe *cqe;
    unsigned head, seen = 0;

    BENCH_CHECK(io_uring_submit_and_wait(&ring, n) >= 0);
    io_uring_for_each_cqe(&ring, head, cqe) {
        BENCH_CHECK(cqe->res >= 0);
        seen++;
    }
    io_uring_cq_advance(&ring, seen);
    BENCH_CHECK(seen == n);
}

static void set_all(int op, uint32_t events)
{
    for (int i = 0; i < NFDS; i++) {
        struct epoll_event ev = { .events = events, .data.u64 = (uint64_t)i };

        BENCH_CHECK(epoll_ctl(ep, op, efd[i], &ev) == 0);
    }
}

static void wait_epoll(void)
{
    struct epoll_event out[4];

    for (long k = 0; k < EVENTS; k++) {
        BENCH_CHECK(eventfd_write(efd[(k * 7919) % NFDS], 1) == 0);
        BENCH_CHECK(epoll_wait(ep, out, 4, -1) == 1);
        drain((int)out[0].data.u64);
    }
}

static void wait_ring_epoll(void)
{
    struct epoll_event out[4];

    for (long k = 0; k < EVENTS; k++) {
        struct io_uring_sqe *sqe;

        BENCH_CHECK(eventfd_write(efd[(k * 7919) % NFDS], 1) == 0);
        sqe = io_uring_get_sqe(&ring);
        io_uring_prep_rw(OP_EPOLL_WAIT, sqe, ep, out, 4, 0);
        reap(1);
        drain((int)out[0].data.u64);
    }
}

static void wait_ring_poll(void)
{
    for (long k = 0; k < EVENTS; k++) {
        int i = (int)((k * 7919) % NFDS);

        BENCH_CHECK(eventfd_write(efd[i], 1) == 0);
        io_uring_prep_poll_add(io_uring_get_sqe(&ring), efd[i], POLLIN);
        reap(1);
        drain(i);
    }
}

static void reg_ctl(void)
{
    set_all(EPOLL_CTL_ADD, EPOLLIN);
    for (int i = 0; i < NFDS; i++) {
        BENCH_CHECK(epoll_ctl(ep, EPOLL_CTL_DEL, efd[i], NULL) == 0);
    }
}

static void reg_ring_ctl(void)
{
    for (int op = 0; op < 2; op++) {
        for (int i = 0; i < NFDS; i++) {
            evs[i] = (struct epoll_event){ .events = EPOLLIN,
                                           .data.u64 = (uint64_t)i };
            io_uring_prep_epoll_ctl(io_uring_get_sqe(&ring), ep, efd[i],
                                    op ? EPOLL_CTL_DEL : EPOLL_CTL_ADD,
                                    &evs[i]);
        }
        reap(NFDS);
    }
}

static void reg_mod(void)
{
    set_all(EPOLL_CTL_MOD, EPOLLIN);
    set_all(EPOLL_CTL_MOD, EPOLLONESHOT);
}

static void reg_eexist(void)
{
    for (int i = 0; i < NFDS; i++) {
        struct epoll_event ev = { .events = EPOLLIN, .data.u64 = (uint64_t)i };

        BENCH_CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, efd[i], &ev) < 0 &&
                    errno == EEXIST);
    }
}

typedef struct variant {
    const char *name;
    void (*run)(void);
    long per_run;       /* events or pairs in one run */
    int setup;          /* registrations the run expects: 0 none, 1 armed,
                           2 kept disarmed (EPOLLONESHOT) */
    double v[ROUNDS];
} variant;

static void prepare(int setup)
{
    static int now = -1;

    if (now == setup) {
        return;
    }
    if (now > 0) {
        for (int i = 0; i < NFDS; i++) {
            BENCH_CHECK(epoll_ctl(ep, EPOLL_CTL_DEL, efd[i], NULL) == 0);
        }
    }
    if (setup > 0) {
        set_all(EPOLL_CTL_ADD, setup == 1 ? EPOLLIN : EPOLLONESHOT);
    }
    now = setup;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

static double median(double *v)
{
    qsort(v, ROUNDS, sizeof(*v), cmp);
    return v[ROUNDS / 2];
}

int main(void)
{
    variant vs[] = {
        { "wait: epoll_wait", wait_epoll, EVENTS, 1, { 0 } },
        { "wait: ring EPOLL_WAIT", wait_ring_epoll, EVENTS, 1, { 0 } },
        { "wait: ring POLL_ADD", wait_ring_poll, EVENTS, 0, { 0 } },
        { "register: epoll_ctl ADD+DEL", reg_ctl, NFDS, 0, { 0 } },
        { "register: ring EPOLL_CTL ADD+DEL", reg_ring_ctl, NFDS, 0, { 0 } },
        { "register: MOD arm+disarm", reg_mod, NFDS, 2, { 0 } },
        { "register: ADD failing EEXIST", reg_eexist, NFDS, 1, { 0 } },
    };
    size_t nv = sizeof(vs) / sizeof(vs[0]);
    struct io_uring_params p = { .flags = IORING_SETUP_SINGLE_ISSUER |
                                          IORING_SETUP_DEFER_TASKRUN };
    struct io_uring_probe *probe;

    bench_raise_nofile();
    if (io_uring_queue_init_params(2 * NFDS, &ring, &p) < 0) {
        printf("SKIP: no io_uring ring with DEFER_TASKRUN here\n");
        return 77;
    }
    probe = io_uring_get_probe_ring(&ring);
    if (probe == NULL || !io_uring_opcode_supported(probe, OP_EPOLL_WAIT)) {
        printf("SKIP: the kernel has no IORING_OP_EPOLL_WAIT (6.15+)\n");
        return 77;
    }
    io_uring_free_probe(probe);
    ep = epoll_create1(EPOLL_CLOEXEC);
    BENCH_CHECK(ep >= 0);
    for (int i = 0; i < NFDS; i++) {
        efd[i] = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        BENCH_CHECK(efd[i] >= 0);
    }
    for (int r = 0; r < ROUNDS; r++) {
        for (size_t k = 0; k < nv; k++) {
            variant *x = &vs[(k + (size_t)r) % nv];
            int64_t t0;

            prepare(x->setup);
            t0 = bench_now_ns();
            x->run();
            x->v[r] = (double)(bench_now_ns() - t0) / (double)x->per_run;
        }
    }
    printf("| primitive (%d eventfds, medians of %d rounds) | ns per event "
           "or pair | vs first of its group |\n|---|---:|---:|\n",
           NFDS, ROUNDS);
    for (size_t k = 0; k < nv; k++) {
        double m = median(vs[k].v);
        double base = median(vs[k < 3 ? 0 : 3].v);

        printf("| %s | %.0f | %.2f |\n", vs[k].name, m, m / base);
    }
    io_uring_queue_exit(&ring);
    return 0;
}
