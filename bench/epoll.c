/* SPDX-License-Identifier: MIT */
/*
 * epoll.c - the floor: a hand-written epoll loop, no library, on the
 * shared workloads (bench.h, workloads.c).
 *
 * The loop is what a careful C programmer writes by hand: an epoll fd, a
 * handler table indexed like the workload's handlers, and a FIFO of
 * deferred callbacks.  One iteration is epoll_wait(timeout 0), dispatch
 * of the ready fds, then the deferred queue.
 *
 *   chain_a1, chain_a100, churn, idle_poll
 *               watch = EPOLL_CTL_ADD unless the fd is in the epoll set
 *               already (so re-arming an unchanged handler costs no
 *               syscall); unwatch = EPOLL_CTL_DEL
 *   bh_single, bh_burst   push onto the deferred queue (once), run it after
 *               the epoll_wait
 *   wakeup      two threads, each blocked in epoll_wait on its own eventfd;
 *               a round trip is two eventfd writes and two reads
 *   timers      a 4-ary heap of (deadline, arming order) from the public
 *               header aioloop/heap.h (header-only; nothing of the loop),
 *               epoll_pwait2 until the earliest deadline, then every due
 *               timer fired; deadlines on CLOCK_MONOTONIC in ns
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "aioloop/heap.h"
#include "bench.h"

typedef struct ep_defer ep_defer;
struct ep_defer {
    ep_defer *next;
    bool scheduled;
    struct ep_loop *loop;
};

typedef struct ep_loop {
    int epfd;
    bool *in_set; /* per handler index: in the epoll set */
    ep_defer *head, **tail;
} ep_loop;

static ep_loop *ep_new(long nhandlers)
{
    ep_loop *l = calloc(1, sizeof(*l));

    l->epfd = epoll_create1(EPOLL_CLOEXEC);
    BENCH_CHECK(l->epfd >= 0);
    l->in_set = calloc((size_t)(nhandlers > 0 ? nhandlers : 1), sizeof(bool));
    l->tail = &l->head;
    return l;
}

static void ep_free(void *opaque)
{
    ep_loop *l = opaque;

    close(l->epfd);
    free(l->in_set);
    free(l);
}

static void ep_poll(void *opaque)
{
    ep_loop *l = opaque;
    struct epoll_event ev[256];
    int n = epoll_wait(l->epfd, ev, 256, 0);
    ep_defer *d;

    for (int i = 0; i < n; i++) {
        bench_fd_ready((int)ev[i].data.u32);
    }
    d = l->head;
    l->head = NULL;
    l->tail = &l->head;
    while (d) {
        ep_defer *next = d->next;

        d->scheduled = false;
        bench_hit();
        d = next;
    }
}

/* ------------------------------------------------------------ fd ops */

static void *fd_loop_new(const bench_args *args, long nhandlers)
{
    (void)args;
    return ep_new(nhandlers);
}

static void fd_prepare(void *loop, int idx, int fd)
{
    (void)loop, (void)idx, (void)fd;
}

static void fd_watch(void *opaque, int idx, int fd)
{
    ep_loop *l = opaque;
    struct epoll_event ev = { .events = EPOLLIN, .data.u32 = (uint32_t)idx };

    if (!l->in_set[idx]) {
        BENCH_CHECK(epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev) == 0);
        l->in_set[idx] = true;
    }
}

static void fd_unwatch(void *opaque, int idx, int fd)
{
    ep_loop *l = opaque;

    BENCH_CHECK(epoll_ctl(l->epfd, EPOLL_CTL_DEL, fd, NULL) == 0);
    l->in_set[idx] = false;
}

static const bench_fd_ops fd_ops = {
    fd_loop_new, ep_free, fd_prepare, fd_watch, fd_unwatch, ep_poll, NULL,
};

/* --------------------------------------------------------- defer ops */

static void *defer_loop_new(const bench_args *args)
{
    (void)args;
    return ep_new(0);
}

static void *defer_new(void *loop)
{
    ep_defer *d = calloc(1, sizeof(*d));

    d->loop = loop;
    return d;
}

static void defer_free(void *loop, void *d)
{
    (void)loop;
    free(d);
}

static void defer_schedule(void *opaque)
{
    ep_defer *d = opaque;

    if (!d->scheduled) {
        d->scheduled = true;
        d->next = NULL;
        *d->loop->tail = d;
        d->loop->tail = &d->next;
    }
}

static const bench_defer_ops defer_ops = {
    defer_loop_new, ep_free, defer_new, defer_free, defer_schedule, ep_poll,
};

/* ------------------------------------------------------------ timers */

typedef struct ep_timer {
    int64_t deadline;
    uint64_t seq;
    size_t idx;
} ep_timer;

static bool ep_timer_before(const ep_timer *a, const ep_timer *b)
{
    return a->deadline < b->deadline ||
           (a->deadline == b->deadline && a->seq < b->seq);
}

AIOL_HEAP_HEAD(ep_timer_heap, ep_timer);
AIOL_HEAP_GENERATE(ep_timer_heap, ep_timer, idx, ep_timer_before)

typedef struct ep_timer_loop {
    int epfd;
    struct ep_timer_heap heap;
    ep_timer *t;
    uint64_t seq;
} ep_timer_loop;

static void *timer_loop_new(const bench_args *args)
{
    ep_timer_loop *tl = calloc(1, sizeof(*tl));

    tl->epfd = epoll_create1(EPOLL_CLOEXEC);
    BENCH_CHECK(tl->epfd >= 0);
    tl->t = malloc((size_t)args->n * sizeof(*tl->t));
    return tl;
}

static void timer_loop_free(void *opaque)
{
    ep_timer_loop *tl = opaque;

    ep_timer_heap_fini(&tl->heap);
    close(tl->epfd);
    free(tl->t);
    free(tl);
}

static void timer_arm(void *opaque, long i, long timeout_ms)
{
    ep_timer_loop *tl = opaque;

    tl->t[i] = (ep_timer){ .deadline = bench_now_ns() + timeout_ms * 1000000,
                           .seq = tl->seq++, .idx = AIOL_HEAP_NONE };
    BENCH_CHECK(ep_timer_heap_push(&tl->heap, &tl->t[i]) == 0);
}

static void timer_run(void *opaque)
{
    ep_timer_loop *tl = opaque;
    struct epoll_event ev;
    ep_timer *top;

    while ((top = ep_timer_heap_top(&tl->heap)) != NULL) {
        int64_t now = bench_now_ns(), left = top->deadline - now;

        if (left > 0) {
            struct timespec ts = { left / 1000000000, left % 1000000000 };
            BENCH_CHECK(epoll_pwait2(tl->epfd, &ev, 1, &ts, NULL) >= 0);
            now = bench_now_ns();
        }
        while ((top = ep_timer_heap_top(&tl->heap)) != NULL &&
               top->deadline <= now) {
            ep_timer_heap_pop(&tl->heap);
            bench_hit();
        }
    }
}

static void timer_free_all(void *opaque)
{
    (void)opaque; /* fired timers are out of the heap already */
}

static const bench_timer_ops timer_ops = {
    timer_loop_new, timer_loop_free, timer_arm, timer_run, timer_free_all,
};

/* ------------------------------------------------------------ wakeup */

typedef struct ep_side {
    int epfd, efd;
} ep_side;

typedef struct ep_pingpong {
    ep_side main, worker;
    long rounds, target;
} ep_pingpong;

static void side_init(ep_side *s)
{
    struct epoll_event ev = { .events = EPOLLIN };

    s->epfd = epoll_create1(EPOLL_CLOEXEC);
    s->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    BENCH_CHECK(s->epfd >= 0 && s->efd >= 0);
    BENCH_CHECK(epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->efd, &ev) == 0);
}

/* Blocks until @s's eventfd is signalled, and consumes the signal. */
static void side_wait(ep_side *s)
{
    struct epoll_event ev;
    eventfd_t v;

    while (epoll_wait(s->epfd, &ev, 1, -1) != 1) {
    }
    BENCH_CHECK(eventfd_read(s->efd, &v) == 0);
}

static void *worker(void *opaque)
{
    ep_pingpong *pp = opaque;

    for (long i = 0; i < pp->target; i++) {
        side_wait(&pp->worker);
        BENCH_CHECK(eventfd_write(pp->main.efd, 1) == 0);
    }
    return NULL;
}

static int wakeup(const bench_args *args, bench_metric *out)
{
    ep_pingpong pp = { .target = args->n };
    pthread_t tid;
    int64_t t0;

    side_init(&pp.main);
    side_init(&pp.worker);
    BENCH_CHECK(pthread_create(&tid, NULL, worker, &pp) == 0);
    t0 = bench_now_ns();
    while (pp.rounds < pp.target) {
        BENCH_CHECK(eventfd_write(pp.worker.efd, 1) == 0);
        side_wait(&pp.main);
        pp.rounds++;
    }
    bench_wakeup_result(out, t0, pp.rounds, pp.target);
    pthread_join(tid, NULL);
    close(pp.main.epfd), close(pp.main.efd);
    close(pp.worker.epfd), close(pp.worker.efd);
    return 1;
}

int main(int argc, char **argv)
{
    static const bench_lib lib = {
        "epoll", &fd_ops, &defer_ops, &timer_ops, wakeup, NULL, 0,
    };

    return bench_lib_main(&lib, argc, argv);
}
