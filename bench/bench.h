/*
 * bench.h - the harness every benchmark binary shares.
 *
 * A binary (bench-aiol, bench-uv, ...) implements workloads for one
 * library.  Each workload run returns one or more named metrics; the
 * harness repeats the run, and prints one line per metric:
 *
 *   lib=<lib> workload=<w> backend=<b> n=<n> metric=<m> unit=<u>
 *   median=<x> samples=<x1,x2,...>
 *
 * bench/run.py drives the binaries, interleaving libraries, and builds the
 * tables.  Usage of a binary:  bench-<lib> --list
 *                              bench-<lib> <workload> [--n N] [--runs R]
 *                                          [--backend B]
 */
#ifndef AIOLOOP_BENCH_H
#define AIOLOOP_BENCH_H

#include <stddef.h>
#include <stdint.h>

#define BENCH_MAX_METRICS 4

typedef struct bench_args {
    const char *backend; /* libaioloop backend, or NULL */
    long n;              /* workload size (pipes, timers...) */
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

#endif
