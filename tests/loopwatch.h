/*
 * tuplus.h - small inline helpers for the bh, timer, notify, busy-poll,
 * embed, iothread and stress suites (on top of testutil.h).
 *
 * The watchdog turns "a blocking poll that should have returned hangs"
 * into a test failure instead of a meson timeout: it is a timer on the
 * loop's monotonic clock, far enough ahead that it only fires when the
 * loop missed the wakeup under test, and the test asserts it never fired.
 */
#ifndef AIOLOOP_TUPLUS_H
#define AIOLOOP_TUPLUS_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "aioloop/aioloop.h"

#define TU_MS(x) ((int64_t)(x) * 1000000)
#define TU_US(x) ((int64_t)(x) * 1000)

/* Sleeps @p ns nanoseconds (relative), retrying EINTR. */
static inline void tu_sleep_ns(int64_t ns)
{
    struct timespec ts = { .tv_sec = ns / 1000000000,
                           .tv_nsec = ns % 1000000000 };

    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* Stats snapshot; polling thread or idle loop only. */
static inline aiol_loop_stats tu_stats(aiol_loop *loop)
{
    aiol_loop_stats s;

    aiol_loop_stats_get(loop, &s);
    return s;
}

typedef struct tu_watchdog {
    aiol_timer *timer;
    int fired;
} tu_watchdog;

static inline void tu_watchdog_cb(void *opaque)
{
    ((tu_watchdog *)opaque)->fired++;
}

/* Arms a watchdog @p ns ahead on @p loop's monotonic clock. */
static inline void tu_watchdog_arm(tu_watchdog *w, aiol_loop *loop, int64_t ns)
{
    aiol_clock *c = aiol_loop_clock(loop);

    w->fired = 0;
    if (aiol_timer_new(c, tu_watchdog_cb, w, &w->timer) != 0 ||
        aiol_timer_mod(w->timer, aiol_clock_get_ns(c) + ns) != 0) {
        fprintf(stderr, "tuplus: cannot arm the watchdog\n");
        abort();
    }
}

/* Frees the watchdog; returns how many times it fired (tests expect 0). */
static inline int tu_watchdog_free(tu_watchdog *w)
{
    aiol_timer_free(w->timer);
    w->timer = NULL;
    return w->fired;
}

/*
 * Syscalls an idle non-blocking poll makes: io_uring reads its completion
 * ring from shared memory and needs none; epoll and poll make one wait.
 */
static inline uint64_t tu_idle_look_waits(aiol_loop *loop)
{
    return strcmp(aiol_loop_backend(loop), "io_uring") == 0 ? 0 : 1;
}

/* Deterministic PRNG (xorshift64*), so failures reproduce. */
static inline uint64_t tu_rand(uint64_t *s)
{
    uint64_t x = *s;

    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1DULL;
}

#endif /* AIOLOOP_TUPLUS_H */
