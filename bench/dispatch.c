/*
 * bench/dispatch.c - the built-in dispatch benchmark (`make bench` until the
 * peer suite exists).
 *
 * For each backend and n pipes with read handlers, one pipe is made
 * readable per iteration and one non-blocking poll dispatches it (the
 * callback drains the pipe).  Reports the median of RUNS runs of ITERS
 * iterations, plus the add+remove cost per handler pair with n registered,
 * and the syscalls of an empty non-blocking poll from the loop's counters.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "aioloop/aioloop.h"

enum { RUNS = 15, ITERS = 2000, CHURN = 2000 };

static int *fds; /* fds[2*i] read end, fds[2*i+1] write end */

static void on_read(void *opaque)
{
    char buf[64];
    int fd = (int)(intptr_t)opaque;

    while (read(fd, buf, sizeof(buf)) > 0) {
    }
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static double median(int64_t *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), cmp_i64);
    return (double)v[n / 2];
}

static void open_pipes(int n)
{
    fds = calloc(2 * (size_t)n, sizeof(*fds));
    for (int i = 0; i < n; i++) {
        if (pipe2(&fds[2 * i], O_NONBLOCK | O_CLOEXEC) < 0) {
            perror("pipe2");
            exit(1);
        }
    }
}

static void close_pipes(int n)
{
    for (int i = 0; i < 2 * n; i++) {
        close(fds[i]);
    }
    free(fds);
}

static void bench_one(const char *backend, int n)
{
    int64_t samples[RUNS];
    aiol_loop *loop;
    aiol_loop_stats st0, st1;
    double ns_event, ns_churn, syscalls;
    int ret, spare[2];

    ret = aiol_loop_new(&loop, backend);
    if (ret < 0) {
        printf("| %-8s | %5d | unavailable: %s |\n", backend, n, strerror(-ret));
        return;
    }
    open_pipes(n);
    for (int i = 0; i < n; i++) {
        aiol_fd_set(loop, fds[2 * i], on_read, NULL, NULL,
                    (void *)(intptr_t)fds[2 * i]);
    }
    for (int r = 0; r < RUNS; r++) {
        int64_t t0 = aiol_clock_now_ns();
        for (int it = 0; it < ITERS; it++) {
            int p = (it * 7919) % n;
            if (write(fds[2 * p + 1], "e", 1) != 1) {
                abort();
            }
            aiol_loop_poll(loop, false);
        }
        samples[r] = aiol_clock_now_ns() - t0;
    }
    ns_event = median(samples, RUNS) / ITERS;

    if (pipe2(spare, O_NONBLOCK | O_CLOEXEC) < 0) {
        abort();
    }
    for (int r = 0; r < RUNS; r++) {
        int64_t t0 = aiol_clock_now_ns();
        for (int it = 0; it < CHURN; it++) {
            aiol_fd_set(loop, spare[0], on_read, NULL, NULL, NULL);
            aiol_fd_remove(loop, spare[0]);
        }
        samples[r] = aiol_clock_now_ns() - t0;
    }
    ns_churn = median(samples, RUNS) / CHURN;
    close(spare[0]);
    close(spare[1]);

    aiol_loop_stats_get(loop, &st0);
    for (int it = 0; it < ITERS; it++) {
        aiol_loop_poll(loop, false);
    }
    aiol_loop_stats_get(loop, &st1);
    syscalls = (double)(st1.monitor_waits - st0.monitor_waits +
                        st1.monitor_ctls - st0.monitor_ctls) / ITERS;

    printf("| %-8s | %5d | %12.0f | %14.0f | %15.2f |\n", backend, n,
           ns_event, ns_churn, syscalls);
    fflush(stdout);
    aiol_loop_free(loop);
    close_pipes(n);
}

int main(int argc, char **argv)
{
    static const char *const backends[] = { "epoll", "poll" };
    static const int sizes[] = { 100, 1000, 9900 };
    struct rlimit rl;
    int max_n = 9900;

    if (argc > 1 && strcmp(argv[1], "--quick") == 0) {
        max_n = 1000;
    }
    getrlimit(RLIMIT_NOFILE, &rl);
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);

    printf("libaioloop dispatch benchmark: n pipes with read handlers, one "
           "active per iteration, median of %d runs\n\n", RUNS);
    printf("| backend  |     n | ns per event | ns add+remove | syscalls/empty poll |\n");
    printf("|----------|-------|--------------|----------------|---------------------|\n");
    for (size_t b = 0; b < sizeof(backends) / sizeof(backends[0]); b++) {
        for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
            if (sizes[s] > max_n) {
                continue;
            }
            if ((rlim_t)sizes[s] * 2 + 64 > rl.rlim_cur) {
                printf("| %-8s | %5d | skipped: RLIMIT_NOFILE %llu too low |\n",
                       backends[b], sizes[s], (unsigned long long)rl.rlim_cur);
                continue;
            }
            bench_one(backends[b], sizes[s]);
        }
    }
    return 0;
}
