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
 *              ring POLL_ADD fixed   the same poll on a registered file
 *                                    (IOSQE_FIXED_FILE: no file reference
 *                                    taken and dropped per poll)
 *   register N registrations added and removed again, per pair:
 *              epoll_ctl ADD+DEL     two syscalls per pair
 *              ring EPOLL_CTL        the same two operations as SQEs, N per
 *                                    io_uring_enter
 *              MOD arm+disarm        a registration kept, re-armed and
 *                                    disarmed (EPOLLONESHOT, no events)
 *              ADD that fails EEXIST what a loop that never deletes pays
 *                                    (libev's lazy removal)
 *              ring POLL_ADD+cancel  a single-shot poll armed and cancelled
 *                                    (POLL_REMOVE), N per enter: our io_uring
 *                                    fd monitor's handler churn
 *              ring fixed POLL_ADD+cancel  the same on registered files,
 *                                    each installed (FILES_UPDATE) before its
 *                                    poll and cleared after its cancel, as a
 *                                    monitor must so as not to keep a closed
 *                                    fd's file open
 *
 *   syscall  getppid(2), the price of a kernel entry on this machine (page
 *            table isolation and nested virtualization raise it): where it
 *            is high, batching changes into one io_uring_enter pays most.
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
#include <sys/syscall.h>
#include <unistd.h>

#include "bench.h"

/* liburing 2.3 predates it; the kernel's number since 6.15 */
#define OP_EPOLL_WAIT 59

enum { NFDS = 1000, EVENTS = 50000, ROUNDS = 5 };

static int ep, efd[NFDS], nofd[NFDS];
static struct io_uring ring;
static struct epoll_event evs[NFDS];

static void drain(int i)
{
    eventfd_t v;

    BENCH_CHECK(eventfd_read(efd[i], &v) == 0);
}

/*
 * Submits what is queued, waits for @n completions, checks and reaps them;
 * a cancelled poll's -ECANCELED counts as success.
 */
static void reap(unsigned n)
{
    struct io_uring_cqe *cqe;
    unsigned head, seen = 0;

    BENCH_CHECK(io_uring_submit_and_wait(&ring, n) >= 0);
    io_uring_for_each_cqe(&ring, head, cqe) {
        BENCH_CHECK(cqe->res >= 0 || cqe->res == -ECANCELED);
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

/* A single-shot poll of eventfd @i, on its registered slot if @fixed. */
static void prep_poll(int i, int fixed)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);

    io_uring_prep_poll_add(sqe, fixed ? i : efd[i], POLLIN);
    io_uring_sqe_set_data64(sqe, (uint64_t)i);
    if (fixed) {
        sqe->flags |= IOSQE_FIXED_FILE;
    }
}

static void wait_poll(int fixed)
{
    for (long k = 0; k < EVENTS; k++) {
        int i = (int)((k * 7919) % NFDS);

        BENCH_CHECK(eventfd_write(efd[i], 1) == 0);
        prep_poll(i, fixed);
        reap(1);
        drain(i);
    }
}

static void wait_ring_poll(void)
{
    wait_poll(0);
}

static void wait_ring_poll_fixed(void)
{
    wait_poll(1);
}

/*
 * Arms a poll on every eventfd and cancels each again, N SQEs per enter;
 * with @fixed, each file is installed in its slot first (linked to its
 * poll) and its slot cleared after the cancel.
 */
static void poll_churn(int fixed)
{
    for (int i = 0; i < NFDS; i++) {
        if (fixed) {
            struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);

            io_uring_prep_files_update(sqe, &efd[i], 1, i);
            io_uring_sqe_set_data64(sqe, ~0ull);
            sqe->flags |= IOSQE_IO_LINK;
        }
        prep_poll(i, fixed);
    }
    reap(fixed ? NFDS : 0);
    for (int i = 0; i < NFDS; i++) {
        io_uring_prep_poll_remove(io_uring_get_sqe(&ring), (uint64_t)i);
        if (fixed) {
            io_uring_prep_files_update(io_uring_get_sqe(&ring), &nofd[i], 1, i);
        }
    }
    reap(fixed ? 3 * NFDS : 2 * NFDS);
}

static void reg_ring_poll(void)
{
    poll_churn(0);
}

static void reg_ring_poll_fixed(void)
{
    poll_churn(1);
}

static void bare_syscall(void)
{
    for (long k = 0; k < EVENTS; k++) {
        BENCH_CHECK(syscall(SYS_getppid) > 0);
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
    int files;          /* 1: every eventfd in its registered slot */
    int group;          /* ratios are against the group's first variant */
    double v[ROUNDS];
} variant;

/* Fills (@want) or clears the ring's registered file slots. */
static void prepare_files(int want)
{
    static int now;

    if (now != want) {
        BENCH_CHECK(io_uring_register_files_update(&ring, 0, want ? efd : nofd,
                                                   NFDS) == NFDS);
        now = want;
    }
}

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
        { "wait: epoll_wait", wait_epoll, EVENTS, 1, 0, 0, { 0 } },
        { "wait: ring EPOLL_WAIT", wait_ring_epoll, EVENTS, 1, 0, 0, { 0 } },
        { "wait: ring POLL_ADD", wait_ring_poll, EVENTS, 0, 0, 0, { 0 } },
        { "wait: ring POLL_ADD fixed", wait_ring_poll_fixed, EVENTS, 0, 1, 0,
          { 0 } },
        { "register: epoll_ctl ADD+DEL", reg_ctl, NFDS, 0, 0, 1, { 0 } },
        { "register: ring EPOLL_CTL ADD+DEL", reg_ring_ctl, NFDS, 0, 0, 1,
          { 0 } },
        { "register: MOD arm+disarm", reg_mod, NFDS, 2, 0, 1, { 0 } },
        { "register: ADD failing EEXIST", reg_eexist, NFDS, 1, 0, 1, { 0 } },
        { "register: ring POLL_ADD+cancel", reg_ring_poll, NFDS, 0, 0, 1,
          { 0 } },
        { "register: ring fixed POLL_ADD+cancel", reg_ring_poll_fixed, NFDS, 0,
          0, 1, { 0 } },
        { "syscall: getppid", bare_syscall, EVENTS, 0, 0, 2, { 0 } },
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
        nofd[i] = -1;
    }
    BENCH_CHECK(io_uring_register_files_sparse(&ring, NFDS) == 0);
    for (int r = 0; r < ROUNDS; r++) {
        for (size_t k = 0; k < nv; k++) {
            variant *x = &vs[(k + (size_t)r) % nv];
            int64_t t0;

            prepare(x->setup);
            prepare_files(x->files);
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
        size_t b = 0;
        double base;

        while (vs[b].group != vs[k].group) {
            b++;
        }
        base = median(vs[b].v);

        printf("| %s | %.0f | %.2f |\n", vs[k].name, m, m / base);
    }
    io_uring_queue_exit(&ring);
    return 0;
}
