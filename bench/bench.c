/* SPDX-License-Identifier: MIT */
/* bench.c - the shared benchmark harness, see bench.h. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "bench.h"

#define MAX_RUNS 101

int64_t bench_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t bench_cpu_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void bench_raise_nofile(void)
{
    struct rlimit rl;

    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

_Noreturn void bench_fail(const char *file, int line, const char *what)
{
    fprintf(stderr, "bench: %s:%d: check failed: %s\n", file, line, what);
    exit(2);
}

long bench_iters(const bench_args *args, long def)
{
    return args->iters > 0 ? args->iters : def;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void usage(const char *lib, const bench_workload *w, size_t n)
{
    fprintf(stderr, "usage: bench-%s <workload> [--n N] [--runs R] "
            "[--fdmon F] [--loop shared|confined] [--iters K]\n"
            "       bench-%s --list\nworkloads:", lib, lib);
    for (size_t i = 0; i < n; i++) {
        fprintf(stderr, " %s", w[i].name);
    }
    fprintf(stderr, "\n");
}

int bench_main(const char *lib, int argc, char **argv,
               const bench_workload *workloads, size_t nworkloads)
{
    static double samples[BENCH_MAX_METRICS][MAX_RUNS];
    bench_metric metrics[BENCH_MAX_METRICS];
    const bench_workload *w = NULL;
    bench_args args = { .fdmon = NULL, .n = 0, .iters = 0 };
    int runs = 5, nmetrics = 0;

    if (argc >= 2 && strcmp(argv[1], "--list") == 0) {
        for (size_t i = 0; i < nworkloads; i++) {
            printf("%s\n", workloads[i].name);
        }
        return 0;
    }
    for (size_t i = 0; argc >= 2 && i < nworkloads; i++) {
        if (strcmp(argv[1], workloads[i].name) == 0) {
            w = &workloads[i];
        }
    }
    if (w == NULL) {
        usage(lib, workloads, nworkloads);
        return 2;
    }
    args.n = w->default_n;
    for (int i = 2; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--n") == 0) {
            args.n = atol(argv[i + 1]);
        } else if (strcmp(argv[i], "--runs") == 0) {
            runs = atoi(argv[i + 1]);
        } else if (strcmp(argv[i], "--iters") == 0) {
            args.iters = atol(argv[i + 1]);
        } else if (strcmp(argv[i], "--fdmon") == 0) {
            args.fdmon = argv[i + 1];
        } else if (strcmp(argv[i], "--loop") == 0 &&
                   (strcmp(argv[i + 1], "shared") == 0 ||
                    strcmp(argv[i + 1], "confined") == 0)) {
            args.confined = strcmp(argv[i + 1], "confined") == 0;
        } else {
            usage(lib, workloads, nworkloads);
            return 2;
        }
    }
    if (runs < 1 || runs > MAX_RUNS) {
        fprintf(stderr, "bench: --runs must be 1..%d\n", MAX_RUNS);
        return 2;
    }
    bench_raise_nofile();
    w->run(&args, metrics); /* warm-up, not recorded */
    for (int r = 0; r < runs; r++) {
        nmetrics = w->run(&args, metrics);
        for (int m = 0; m < nmetrics; m++) {
            samples[m][r] = metrics[m].value;
        }
    }
    for (int m = 0; m < nmetrics; m++) {
        double sorted[MAX_RUNS];

        memcpy(sorted, samples[m], (size_t)runs * sizeof(double));
        qsort(sorted, (size_t)runs, sizeof(double), cmp_double);
        printf("lib=%s workload=%s fdmon=%s n=%ld metric=%s unit=%s "
               "median=%.3f samples=", lib, w->name,
               args.fdmon ? args.fdmon : "-", args.n, metrics[m].name,
               metrics[m].unit, sorted[runs / 2]);
        for (int r = 0; r < runs; r++) {
            printf("%s%.3f", r ? "," : "", samples[m][r]);
        }
        printf("\n");
    }
    return 0;
}
