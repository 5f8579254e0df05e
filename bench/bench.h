/* SPDX-License-Identifier: MIT */
/*
 * bench.h - the harness every benchmark binary shares.
 *
 * A binary (bench-aiol, bench-uv, ...) implements workloads for one
 * library.  Each workload run returns one or more named metrics; the
 * harness repeats the run, and prints one line per metric:
 *
 *   lib=<lib> workload=<w> fdmon=<f> n=<n> metric=<m> unit=<u>
 *   median=<x> samples=<x1,x2,...>
 *
 * bench/run.py drives the binaries, interleaving libraries, and builds the
 * tables.  Usage of a binary:  bench-<lib> --list
 *                              bench-<lib> <workload> [--n N] [--runs R]
 *                                          [--fdmon F] [--iters K]
 *
 * The workloads themselves (their shapes, what they time, the checks that
 * every expected callback ran) are written once, below and in bench.c; a
 * library's file only supplies the operations (bench_fd_ops,
 * bench_defer_ops, bench_timer_ops) in its own API.  Only the cross-thread
 * wakeup is written per library, as threads and loops pair differently.
 */
#ifndef AIOLOOP_BENCH_H
#define AIOLOOP_BENCH_H

#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>

#define BENCH_MAX_METRICS 4

typedef struct bench_args {
    const char *fdmon;   /* libaioloop fd monitor, or NULL */
    bool confined;       /* --loop confined: libaioloop's AIOL_LOOP_CONFINED */
    long n;              /* workload size (pipes, timers...) */
    long iters;          /* --iters: iterations per run, 0 = the default */
} bench_args;

typedef struct bench_metric {
    const char *name; /* e.g. "ns_per_op" */
    const char *unit; /* e.g. "ns" */
    double value;
} bench_metric;

/* Runs the workload once; fills up to BENCH_MAX_METRICS; returns how many. */
typedef int bench_fn(const bench_args *args, bench_metric *out);

typedef struct bench_workload {
    const char *name;
    bench_fn *run;
    long default_n;
} bench_workload;

/* Parses the command line and runs the named workload; returns exit status. */
int bench_main(const char *lib, int argc, char **argv,
               const bench_workload *workloads, size_t nworkloads);

/* CLOCK_MONOTONIC and CLOCK_PROCESS_CPUTIME_ID in ns. */
int64_t bench_now_ns(void);
int64_t bench_cpu_ns(void);

/* Raises RLIMIT_NOFILE to its hard limit. */
void bench_raise_nofile(void);

/* Aborts with a message when @cond is false (benchmarks must not lie). */
#define BENCH_CHECK(cond)                                                    \
    do {                                                                     \
        if (!(cond)) {                                                       \
            bench_fail(__FILE__, __LINE__, #cond);                           \
        }                                                                    \
    } while (0)
_Noreturn void bench_fail(const char *file, int line, const char *what);

/* Iterations per run: args->iters when given, else @def. */
long bench_iters(const bench_args *args, long def);

/* ------------------------------------------------ shared workload shapes */

/*
 * Callback counting: every library's callbacks report here, and each
 * workload BENCH_CHECKs the count it expects.
 */
void bench_hit(void);
long bench_hits(void);

/*
 * Fd workloads (chain, churn, rearm, idle_poll).  A handler is identified by a
 * small index; the library's read callback for index i calls
 * bench_fd_ready(i).
 */
typedef struct bench_fd_ops {
    void *(*loop_new)(const bench_args *args, long nhandlers);
    void (*loop_free)(void *loop);
    /* Untimed: create whatever per-handler object the library needs. */
    void (*prepare)(void *loop, int idx, int fd);
    /* Watch @fd for reading; on an already watched index, re-arm it the
     * library's usual way (libevent's event_del + event_add). */
    void (*watch)(void *loop, int idx, int fd);
    void (*unwatch)(void *loop, int idx, int fd);
    /* One non-blocking loop iteration. */
    void (*poll)(void *loop);
    /* Optional: fd-monitor syscalls so far (the library's own count). */
    uint64_t (*syscalls)(void *loop);
} bench_fd_ops;

void bench_fd_ready(int idx);

/* libevent's bench.c shape, see bench.c; 3 metrics (2 without syscalls). */
int bench_chain(const bench_fd_ops *ops, const bench_args *args,
                bench_metric *out, int active, long writes);
/* Add and remove n handlers: back to back, and with a poll after each
 * batch so that the changes reach the kernel. */
int bench_churn(const bench_fd_ops *ops, const bench_args *args,
                bench_metric *out);
/* Stop and start all n watchers, then an event phase on 100 of them. */
int bench_rearm(const bench_fd_ops *ops, const bench_args *args,
                bench_metric *out);
/* An empty non-blocking poll with n handlers registered. */
int bench_idle_poll(const bench_fd_ops *ops, const bench_args *args,
                    bench_metric *out);

/*
 * Deferred callbacks ("run this soon", libaioloop's bottom halves).  The
 * library's callback calls bench_hit().
 */
typedef struct bench_defer_ops {
    void *(*loop_new)(const bench_args *args);
    void (*loop_free)(void *loop);
    void *(*defer_new)(void *loop);
    void (*defer_free)(void *loop, void *d);
    void (*schedule)(void *d);
    void (*poll)(void *loop); /* one non-blocking iteration */
} bench_defer_ops;

int bench_bh_single(const bench_defer_ops *ops, const bench_args *args,
                    bench_metric *out);
int bench_bh_burst(const bench_defer_ops *ops, const bench_args *args,
                   bench_metric *out);

/*
 * libuv's million_timers shape: n one-shot timers, timer i due
 * bench_timer_ms(i) ms after arming (1000 timers per ms); the callback
 * calls bench_hit().  The timers_rand workload arms the same deadlines in
 * a scrambled order, bench_timer_ms(bench_timer_scramble(i, n)), as
 * timers armed by independent requests are.
 */
typedef struct bench_timer_ops {
    void *(*loop_new)(const bench_args *args);
    void (*loop_free)(void *loop);
    void (*arm)(void *loop, long i, long timeout_ms);
    void (*run)(void *loop); /* until bench_hits() == n */
    void (*free_all)(void *loop);
} bench_timer_ops;

static inline long bench_timer_ms(long i)
{
    return i / 1000 + 1;
}

/* A permutation of [0, n) for n = 2^a 5^b (the multiplier is odd and
 * not a multiple of 5, so it is prime to n). */
static inline long bench_timer_scramble(long i, long n)
{
    return (long)(((unsigned long long)i * 2654435761ull) %
                  (unsigned long long)n);
}

/* @scrambled: the deadlines armed out of order (timers_rand). */
int bench_timers(const bench_timer_ops *ops, const bench_args *args,
                 bench_metric *out, bool scrambled);

/*
 * A library's whole benchmark binary: its operations (NULL where it has
 * none), its wakeup workload and any workloads of its own.  Builds the
 * workload table (chain_a1, chain_a100, churn, idle_poll from @fd;
 * bh_single, bh_burst from @defer; timers; wakeup; then @extra) and runs
 * bench_main().
 */
typedef struct bench_lib {
    const char *name;
    const bench_fd_ops *fd;
    const bench_defer_ops *defer;
    const bench_timer_ops *timer;
    bench_fn *wakeup;
    const bench_workload *extra;
    size_t nextra;
} bench_lib;

int bench_lib_main(const bench_lib *lib, int argc, char **argv);

/* Cross-thread ping-pong result: ns per round trip after checking that
 * every round ran. */
int bench_wakeup_result(bench_metric *out, int64_t t0, long rounds,
                        long target);

#endif
