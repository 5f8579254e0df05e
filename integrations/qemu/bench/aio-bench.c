/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * aio-bench: AioContext micro-benchmarks for QEMU 10.2, stock and the
 * libaioloop fork.
 *
 * Built against a configured QEMU build tree with the compile and link
 * flags of that tree's tests/unit/test-aio (see run.sh), so the same
 * source measures stock util/aio-posix.c and the fork's util/aio-aiol.c.
 * Only QEMU's public AioContext, event notifier, GSource and timer API is
 * used.
 *
 * Usage: aio-bench WORKLOAD VARIANT N [RUNS [MS_PER_RUN]]
 *   WORKLOAD  aio_poll   N eventfd handlers, one signalled per iteration;
 *                        cost of one loop iteration that dispatches it
 *             addrm      N handlers registered; cost of adding and
 *                        removing one more fd handler (one pair)
 *             addmodrm   the same with a change in between: add, modify
 *                        (a write callback added), remove (one triple)
 *             timer_mod  N armed QEMU_CLOCK_REALTIME timers in the
 *                        context's timer list group; cost of re-arming a
 *                        random one to a random future deadline
 *             bh_single  one bottom half (aio_bh_new()); cost of
 *                        qemu_bh_schedule() and the aio_poll() that runs
 *                        it (N ignored)
 *             bh_burst   N bottom halves scheduled, then one aio_poll()
 *                        runs them all; cost per bottom half
 *             bh_xthread another thread schedules the bottom half
 *                        while the context's thread sleeps in blocking
 *                        aio_poll(), and waits until it ran: the wakeup
 *                        latency, from qemu_bh_schedule() to the bottom
 *                        half's run seen by the scheduling thread, the
 *                        notify and the wakeup included (N ignored).
 *                        With two or more CPUs allowed, the context's
 *                        thread runs on the first and the other thread on
 *                        the second (pinned=yes), as a vCPU thread kicks
 *                        an iothread on another core
 *   VARIANT   plain      a private AioContext driven by aio_poll(ctx, false)
 *             glib       the AioContext's GSource attached to a private
 *                        GMainContext, driven by
 *                        g_main_context_iteration(gctx, false), as an
 *                        IOThread (or the main loop) runs it
 *   RUNS      measured runs (default 5); the median is reported
 *   MS_PER_RUN  target length of one run (default 200); iteration counts
 *             are calibrated from a warm-up so every size takes about
 *             the same time
 * Environment: AIOLOOP_FDMON (the fork's fd monitor; echoed as fdmon=),
 * AIO_BENCH_NO_IO_URING=1 (see below).
 *
 * Output: one line of key=value pairs, e.g.
 *   build=stock fdmon=- workload=aio_poll variant=glib n=10000 runs=5
 *   iters=123 median_ns=1612345.6 min_ns=... max_ns=... check=ok
 * median_ns is nanoseconds per iteration (aio_poll), per add+remove pair
 * (addrm), per add+modify+remove triple (addmodrm), per timer_mod call (timer_mod), per bottom half (bh_single,
 * bh_burst) or per wakeup (bh_xthread).
 *
 * Notes on method:
 * - The AioContext is created in, made current for, and polled only from
 *   one thread of its own, as an IOThread's is (aio_poll() asserts this).
 * - aio_poll: the signalled notifier rotates over all N; its handler reads
 *   (clears) the eventfd.  check=missed if the handlers ran fewer times
 *   than notifiers were signalled (each signal is followed by exactly one
 *   loop iteration, which should dispatch it).
 * - addrm: pairs are timed in batches of ADDRM_BATCH; after each batch
 *   the loop runs one untimed non-blocking iteration, as QEMU would between
 *   handler changes, so fd monitors that defer work (io_uring submission,
 *   deferred frees) do not pile it up across a whole run.  The batch is
 *   1024 pairs: with 64, the untimed iterations (500 us each on the poll
 *   monitor at N = 10000) took longer than the 120 s a case may run once a
 *   pair cost 60 ns.
 * - timer_mod: deadlines are 1 to 2 hours ahead, from a fixed-seed PRNG,
 *   so nothing expires.  The initial timers are armed with
 *   timer_mod_anticipate() in descending deadline order, so that setting
 *   up 100,000 timers does not itself take O(n^2) on a sorted list, and in
 *   a random order of the timers themselves, so that list order and memory
 *   order are unrelated (as after a long run).  Each measured timer_mod()
 *   re-arms an armed timer: on a sorted list, a walk to unlink it and a
 *   walk to insert it.
 * - AIO_BENCH_NO_IO_URING=1 refuses io_uring_setup(2) (ENOSYS, through a
 *   seccomp filter installed before any AioContext exists).  Stock then
 *   falls back from fdmon-io_uring to fdmon-poll/fdmon-epoll, as a QEMU
 *   built without io_uring would: a stock baseline on epoll.  Not meant
 *   for the fork.
 *
 * Copyright (c) 2026 libaioloop authors.  Licensed under the GNU GPL,
 * version 2 or later.
 */

#include "qemu/osdep.h"
#include "qapi/error.h"
#include "qemu/main-loop.h"
#include "qemu/timer.h"
#include "qemu/event_notifier.h"
#include "qemu/thread.h"
#include "block/aio.h"

#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>

#ifndef AIO_BENCH_BUILD
#define AIO_BENCH_BUILD "unknown"
#endif

#define ADDRM_BATCH 1024

static AioContext *ctx;
static GMainContext *gctx;      /* NULL for the plain variant */

/* ---------------------------------------------------------------------- */
/* Helpers */

static uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

/* xorshift64*: a fixed-seed generator, so every build sees the same keys */
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rng_next(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545f4914f6cdd1dull;
}

/* One non-blocking turn of the loop, the way the variant drives it. */
static bool loop_step(void)
{
    if (gctx) {
        return g_main_context_iteration(gctx, false);
    }
    return aio_poll(ctx, false);
}

/* Run the loop until it has nothing left to do (bounded). */
static void loop_drain(void)
{
    for (int i = 0; i < 1000 && loop_step(); i++) {
        /* nothing */
    }
}

static void raise_nofile_limit(void)
{
    struct rlimit rl;

    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
            perror("aio-bench: setrlimit(RLIMIT_NOFILE)");
        }
    }
}

/* Make io_uring_setup(2) fail with ENOSYS in this process (all threads
 * created from now on inherit the filter). */
static void refuse_io_uring(void)
{
    struct sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (ENOSYS & SECCOMP_RET_DATA)),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {
        .len = ARRAY_SIZE(filter),
        .filter = filter,
    };

    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) ||
        prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog)) {
        perror("aio-bench: seccomp");
        exit(1);
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return x < y ? -1 : x > y;
}

static int cmp_i64_desc(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

    return x > y ? -1 : x < y;
}

/* ---------------------------------------------------------------------- */
/* Registered eventfd handlers (aio_poll and addrm) */

static EventNotifier *notifiers;
static size_t n_notifiers;
static size_t next_active;
static uint64_t n_signalled;
static uint64_t n_fired;

static void notifier_read(EventNotifier *e)
{
    if (event_notifier_test_and_clear(e)) {
        n_fired++;
    }
}

static void register_notifiers(size_t n)
{
    notifiers = g_new0(EventNotifier, n);
    for (size_t i = 0; i < n; i++) {
        int ret = event_notifier_init(&notifiers[i], 0);

        if (ret < 0) {
            fprintf(stderr, "aio-bench: event_notifier_init #%zu: %s\n",
                    i, strerror(-ret));
            exit(1);
        }
        aio_set_event_notifier(ctx, &notifiers[i], notifier_read, NULL, NULL);
    }
    n_notifiers = n;
    loop_drain();
}

static uint64_t run_aio_poll(uint64_t iters)
{
    uint64_t t0 = now_ns();

    for (uint64_t i = 0; i < iters; i++) {
        event_notifier_set(&notifiers[next_active]);
        if (++next_active == n_notifiers) {
            next_active = 0;
        }
        loop_step();
    }
    n_signalled += iters;
    return now_ns() - t0;
}

static EventNotifier extra;
static uint64_t extra_reads;

static void extra_read(void *opaque)
{
    if (event_notifier_test_and_clear(opaque)) {
        extra_reads++;
    }
}

/* (an eventfd is always writable: it never runs, nothing polls for it) */
static void extra_write(void *opaque)
{
}

/* add, [modify,] remove @iters times; the time taken */
static uint64_t addrm_loop(uint64_t iters, bool modify)
{
    int fd = event_notifier_get_fd(&extra);
    uint64_t elapsed = 0;

    while (iters > 0) {
        uint64_t batch = MIN(iters, ADDRM_BATCH);
        uint64_t t0 = now_ns();

        for (uint64_t i = 0; i < batch; i++) {
            aio_set_fd_handler(ctx, fd, extra_read, NULL, NULL,
                               NULL, &extra);
            if (modify) {
                aio_set_fd_handler(ctx, fd, extra_read,
                                   extra_write, NULL, NULL, &extra);
            }
            aio_set_fd_handler(ctx, fd, NULL, NULL, NULL, NULL, NULL);
        }
        elapsed += now_ns() - t0;
        iters -= batch;
        loop_step();            /* untimed: let the fd monitor catch up */
    }
    return elapsed;
}

static uint64_t run_addrm(uint64_t iters)
{
    return addrm_loop(iters, false);
}

static uint64_t run_addmodrm(uint64_t iters)
{
    return addrm_loop(iters, true);
}

/* ---------------------------------------------------------------------- */
/* Bottom halves */

static QEMUBH **bhs;
static size_t n_bhs;
static uint64_t bh_runs;        /* bench thread's count */
static uint64_t bh_xruns;       /* bh_xthread: atomic, read by the producer */

static void bh_count(void *opaque)
{
    bh_runs++;
}

static void bh_xcount(void *opaque)
{
    qatomic_set(&bh_xruns, qatomic_read(&bh_xruns) + 1);
}

static void make_bhs(size_t n, QEMUBHFunc *cb)
{
    bhs = g_new(QEMUBH *, n);
    n_bhs = n;
    for (size_t i = 0; i < n; i++) {
        bhs[i] = aio_bh_new(ctx, cb, NULL);
    }
}

static uint64_t run_bh_single(uint64_t iters)
{
    uint64_t t0 = now_ns();

    for (uint64_t i = 0; i < iters; i++) {
        qemu_bh_schedule(bhs[0]);
        loop_step();
    }
    return now_ns() - t0;
}

/* (iters counts bottom halves, in whole bursts of N) */
static uint64_t run_bh_burst(uint64_t iters)
{
    uint64_t bursts = MAX(1, iters / n_bhs), t0 = now_ns();

    for (uint64_t b = 0; b < bursts; b++) {
        for (size_t i = 0; i < n_bhs; i++) {
            qemu_bh_schedule(bhs[i]);
        }
        loop_step();
    }
    return (now_ns() - t0) * iters / (bursts * n_bhs);
}

typedef struct XThread {
    QemuThread thread;
    uint64_t iters;
    uint64_t latency_ns;    /* sum over the iterations */
} XThread;

/*
 * bh_xthread's CPUs: the context's thread on xcpu[0], the other thread on
 * xcpu[1], or both unpinned (xcpus < 2).  Left to the scheduler, the two
 * threads share one core in some runs and not in others, and a spinning
 * thread holds the core of the thread it waits for until its time slice
 * ends, so a process's wakeups depended on where its threads landed.
 */
static int xcpu[2];
static int xcpus;

static void xcpus_find(void)
{
    cpu_set_t set;

    if (sched_getaffinity(0, sizeof(set), &set) < 0) {
        return;
    }
    for (int c = 0; c < CPU_SETSIZE && xcpus < 2; c++) {
        if (CPU_ISSET(c, &set)) {
            xcpu[xcpus++] = c;
        }
    }
}

/* Pins the calling thread to xcpu[i], when there are two to choose. */
static void xcpu_pin(int i)
{
    cpu_set_t set;
    int err;

    if (xcpus < 2) {
        return;
    }
    CPU_ZERO(&set);
    CPU_SET(xcpu[i], &set);
    err = pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
    if (err) {
        fprintf(stderr, "aio-bench: pinning to CPU %d: %s\n", xcpu[i],
                strerror(err));
        exit(1);
    }
}

/*
 * Before each schedule the other thread waits this long after the last
 * run, so the context's thread has finished that iteration and gone to
 * sleep in the next (it needs a few microseconds): every iteration times
 * a wakeup.  Scheduling again right away would race that thread's next
 * timeout computation instead, and a loop that finishes its iteration
 * sooner would sleep, and pay for a wakeup, more often.
 */
#define XTHREAD_GAP_NS 30000

/* The wall time of the last run_bh_xthread(), gaps included. */
static uint64_t xthread_wall_ns;

/* The other thread: one schedule per round, waiting for its run. */
static void *bh_producer(void *opaque)
{
    XThread *x = opaque;
    uint64_t t_run = now_ns();

    xcpu_pin(1);
    for (uint64_t i = 0; i < x->iters; i++) {
        uint64_t t_sched;

        while ((t_sched = now_ns()) - t_run < XTHREAD_GAP_NS) {
            /* spin: the context's thread goes to sleep meanwhile */
        }
        qemu_bh_schedule(bhs[0]);
        while (qatomic_read(&bh_xruns) <= i) {
            /* spin: the wakeup is what is measured */
        }
        t_run = now_ns();
        x->latency_ns += t_run - t_sched;
    }
    return NULL;
}

/* Returns the summed wakeup latency; the wall time goes to xthread_wall_ns. */
static uint64_t run_bh_xthread(uint64_t iters)
{
    XThread x = { .iters = iters };
    uint64_t t0;

    xcpu_pin(0);
    qatomic_set(&bh_xruns, 0);
    t0 = now_ns();
    qemu_thread_create(&x.thread, "bh-producer", bh_producer, &x,
                       QEMU_THREAD_JOINABLE);
    while (qatomic_read(&bh_xruns) < iters) {
        if (gctx) {
            g_main_context_iteration(gctx, true);
        } else {
            aio_poll(ctx, true);
        }
    }
    qemu_thread_join(&x.thread);
    xthread_wall_ns = now_ns() - t0;
    return x.latency_ns;
}

/* ---------------------------------------------------------------------- */
/* Timers */

#define TIMER_MIN_AHEAD  (3600ll * NANOSECONDS_PER_SECOND)
#define TIMER_SPREAD     (3600ll * NANOSECONDS_PER_SECOND)

static QEMUTimer **timers;
static size_t n_timers;
static int64_t timer_base;
static uint64_t timers_expired;

static void timer_cb(void *opaque)
{
    timers_expired++;
}

static int64_t random_deadline(void)
{
    return timer_base + (int64_t)(rng_next() % (uint64_t)TIMER_SPREAD);
}

static void arm_timers(size_t n)
{
    int64_t *deadlines = g_new(int64_t, n);
    size_t *perm = g_new(size_t, n);

    timer_base = qemu_clock_get_ns(QEMU_CLOCK_REALTIME) + TIMER_MIN_AHEAD;
    for (size_t i = 0; i < n; i++) {
        deadlines[i] = random_deadline();
    }
    qsort(deadlines, n, sizeof(*deadlines), cmp_i64_desc);
    timers = g_new(QEMUTimer *, n);
    for (size_t i = 0; i < n; i++) {
        timers[i] = aio_timer_new(ctx, QEMU_CLOCK_REALTIME, SCALE_NS,
                                  timer_cb, NULL);
        perm[i] = i;
    }
    /* Deadlines go to the timers in a random order, so that the order of
     * the armed timers is unrelated to their order in memory, as after a
     * long run (a list built in allocation order would be walked with the
     * help of the hardware prefetcher). */
    for (size_t i = n - 1; i > 0; i--) {
        size_t j = rng_next() % (i + 1), t = perm[i];

        perm[i] = perm[j];
        perm[j] = t;
    }
    /* timer_mod() would first walk the whole list looking for the (not
     * yet armed) timer; timer_mod_anticipate() of an idle timer does not,
     * and inserting at the head (descending deadlines) is O(1). */
    for (size_t i = 0; i < n; i++) {
        timer_mod_anticipate(timers[perm[i]], deadlines[i]);
    }
    n_timers = n;
    g_free(perm);
    g_free(deadlines);
    loop_drain();
}

static uint64_t run_timer_mod(uint64_t iters)
{
    uint64_t t0 = now_ns();

    for (uint64_t i = 0; i < iters; i++) {
        QEMUTimer *t = timers[rng_next() % n_timers];

        timer_mod(t, random_deadline());
    }
    return now_ns() - t0;
}

/* ---------------------------------------------------------------------- */

static void usage(void)
{
    fprintf(stderr,
            "usage: aio-bench aio_poll|addrm|addmodrm|timer_mod|bh_single|"
            "bh_burst|bh_xthread plain|glib N "
            "[RUNS [MS_PER_RUN]]\n");
    exit(2);
}

typedef struct Bench {
    uint64_t (*run)(uint64_t iters);
    bool glib;
    long n, runs, ms;
    uint64_t iters;         /* per measured run */
    double *per_iter;       /* sorted ns per iteration, one per run */
} Bench;

/*
 * The measuring thread.  Like an IOThread, it creates the AioContext, makes
 * it the thread's current context (aio_poll() asserts it runs in the
 * context's home thread) and is the only thread that polls it.
 */
static void *bench_thread(void *opaque)
{
    Bench *b = opaque;
    uint64_t target_ns, iters, elapsed;

    ctx = aio_context_new(&error_fatal);
    qemu_set_current_aio_context(ctx);
    if (b->glib) {
        GSource *src = aio_get_g_source(ctx);

        gctx = g_main_context_new();
        g_source_attach(src, gctx);
        g_source_unref(src);
    }
    loop_drain();

    if (b->run == run_timer_mod) {
        arm_timers(b->n);
    } else if (b->run == run_bh_single || b->run == run_bh_xthread) {
        make_bhs(1, b->run == run_bh_single ? bh_count : bh_xcount);
    } else if (b->run == run_bh_burst) {
        make_bhs(b->n, bh_count);
    } else {
        register_notifiers(b->n);
        if ((b->run == run_addrm || b->run == run_addmodrm) &&
            event_notifier_init(&extra, 0) < 0) {
            fprintf(stderr, "aio-bench: event_notifier_init failed\n");
            exit(1);
        }
    }

    /* Calibrate: double the iteration count until a batch takes 1/10 of
     * a run (at least 20 ms), then size each run from that rate. */
    target_ns = (uint64_t)b->ms * 1000000ull;
    iters = 1;
    for (;;) {
        elapsed = b->run(iters);
        if (b->run == run_bh_xthread) {
            elapsed = xthread_wall_ns; /* (the run's length, gaps included) */
        }
        if (elapsed >= MAX(target_ns / 10, 20000000ull) ||
            iters >= (1ull << 40)) {
            break;
        }
        iters *= 2;
    }
    iters = MAX(1, (uint64_t)((double)iters * target_ns / MAX(elapsed, 1)));

    loop_drain();               /* nothing left over from calibration */
    n_signalled = n_fired = 0;
    b->per_iter = g_new(double, b->runs);
    for (long r = 0; r < b->runs; r++) {
        b->per_iter[r] = (double)b->run(iters) / iters;
    }
    qsort(b->per_iter, b->runs, sizeof(*b->per_iter), cmp_double);
    b->iters = iters;
    return NULL;
}

int main(int argc, char **argv)
{
    Bench b = { 0 };
    QemuThread thread;
    const char *workload, *variant, *fdmon;
    const char *check = "ok";
    bool no_io_uring;
    double median;
    char *end;

    b.runs = 5;
    b.ms = 200;
    if (argc < 4 || argc > 6) {
        usage();
    }
    workload = argv[1];
    variant = argv[2];
    b.n = strtol(argv[3], &end, 10);
    if (*end || b.n < 1) {
        usage();
    }
    if (argc > 4 && ((b.runs = strtol(argv[4], &end, 10)) < 1 || *end)) {
        usage();
    }
    if (argc > 5 && ((b.ms = strtol(argv[5], &end, 10)) < 1 || *end)) {
        usage();
    }
    if (!strcmp(workload, "aio_poll")) {
        b.run = run_aio_poll;
    } else if (!strcmp(workload, "addrm")) {
        b.run = run_addrm;
    } else if (!strcmp(workload, "addmodrm")) {
        b.run = run_addmodrm;
    } else if (!strcmp(workload, "timer_mod")) {
        b.run = run_timer_mod;
    } else if (!strcmp(workload, "bh_single")) {
        b.run = run_bh_single;
    } else if (!strcmp(workload, "bh_burst")) {
        b.run = run_bh_burst;
    } else if (!strcmp(workload, "bh_xthread")) {
        b.run = run_bh_xthread;
    } else {
        usage();
    }
    if (!strcmp(variant, "glib")) {
        b.glib = true;
    } else if (strcmp(variant, "plain")) {
        usage();
    }

    raise_nofile_limit();
    xcpus_find();
    no_io_uring = getenv("AIO_BENCH_NO_IO_URING") &&
                  strcmp(getenv("AIO_BENCH_NO_IO_URING"), "0");
    if (no_io_uring) {
        refuse_io_uring();
    }
    qemu_init_main_loop(&error_fatal);
    qemu_thread_create(&thread, "aio-bench", bench_thread, &b,
                       QEMU_THREAD_JOINABLE);
    qemu_thread_join(&thread);

    median = b.runs % 2 ? b.per_iter[b.runs / 2]
                        : (b.per_iter[b.runs / 2 - 1] +
                           b.per_iter[b.runs / 2]) / 2;
    if (b.run == run_aio_poll && n_fired != n_signalled) {
        check = "missed";
    } else if ((b.run == run_addrm || b.run == run_addmodrm) && extra_reads) {
        check = "spurious";
    } else if (b.run == run_timer_mod && timers_expired) {
        check = "expired";
    } else if ((b.run == run_bh_single || b.run == run_bh_burst) &&
               bh_runs == 0) {
        check = "no-runs";
    }

    fdmon = getenv("AIOLOOP_FDMON");
    if (!strcmp(AIO_BENCH_BUILD, "stock")) {
        fdmon = no_io_uring ? "no-io_uring" : "-";
    }
    printf("build=%s fdmon=%s workload=%s variant=%s n=%ld runs=%ld "
           "iters=%" PRIu64 " median_ns=%.1f min_ns=%.1f max_ns=%.1f "
           "check=%s",
           AIO_BENCH_BUILD, fdmon ? fdmon : "default", workload, variant,
           b.n, b.runs, b.iters, median, b.per_iter[0],
           b.per_iter[b.runs - 1], check);
    if (b.run == run_aio_poll) {
        printf(" signalled=%" PRIu64 " fired=%" PRIu64, n_signalled, n_fired);
    }
    if (b.run == run_bh_xthread) {
        printf(" pinned=%s", xcpus < 2 ? "no" : "yes");
    }
    printf("\n");
    fflush(stdout);
    /* Skip tearing down thousands of handlers or timers. */
    _exit(0);
}
