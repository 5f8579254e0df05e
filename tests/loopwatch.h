/* SPDX-License-Identifier: MIT */
/*
 * loopwatch.h - watching a loop under test (lw_): time units and sleeps,
 * a stats snapshot, the syscalls an idle poll makes, and a watchdog; small
 * inline helpers for the bh, timer, notify, busy-poll, embed, iothread and
 * stress suites (on top of testutil.h).
 *
 * The watchdog turns "a blocking poll that should have returned hangs"
 * into a test failure instead of a meson timeout: it is a timer on the
 * loop's monotonic clock, far enough ahead that it only fires when the
 * loop missed the wakeup under test, and the test asserts it never fired.
 */
#ifndef AIOLOOP_TESTS_LOOPWATCH_H
#define AIOLOOP_TESTS_LOOPWATCH_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "aioloop/aioloop.h"

#define LW_MS(x) ((int64_t)(x) * 1000000)
#define LW_US(x) ((int64_t)(x) * 1000)

/* Sleeps @p ns nanoseconds (relative), retrying EINTR. */
static inline void lw_sleep_ns(int64_t ns)
{
    struct timespec ts = { .tv_sec = ns / 1000000000,
                           .tv_nsec = ns % 1000000000 };

    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* Stats snapshot; polling thread or idle loop only. */
static inline aiol_loop_stats lw_stats(aiol_loop *loop)
{
    aiol_loop_stats s;

    aiol_loop_stats_get(loop, &s);
    return s;
}

typedef struct lw_watchdog {
    aiol_timer *timer;
    int fired;
} lw_watchdog;

static inline void lw_watchdog_cb(void *opaque)
{
    ((lw_watchdog *)opaque)->fired++;
}

/* Arms a watchdog @p ns ahead on @p loop's monotonic clock. */
static inline void lw_watchdog_arm(lw_watchdog *w, aiol_loop *loop, int64_t ns)
{
    aiol_clock *c = aiol_loop_clock_get(loop);

    w->fired = 0;
    if (aiol_timer_new(c, lw_watchdog_cb, w, &w->timer) != 0 ||
        aiol_timer_mod(w->timer, aiol_clock_time_get(c) + ns) != 0) {
        fprintf(stderr, "loopwatch: cannot arm the watchdog\n");
        abort();
    }
}

/* Frees the watchdog; returns how many times it fired (tests expect 0). */
static inline int lw_watchdog_free(lw_watchdog *w)
{
    aiol_timer_free(w->timer);
    w->timer = NULL;
    return w->fired;
}

/*
 * Syscalls an idle non-blocking poll makes: io_uring reads its completion
 * ring from shared memory and needs none; epoll and poll make one wait.
 */
static inline uint64_t lw_idle_look_waits(aiol_loop *loop)
{
    return strcmp(aiol_loop_fdmon_get(loop), "io_uring") == 0 ? 0 : 1;
}

static inline void lw_count_cb(void *opaque)
{
    (*(int *)opaque)++;
}

/*
 * Arms a timer @p ns ahead and runs blocking polls until it fired.
 * Returns the number of polls.
 */
static inline int lw_wait_timer(aiol_loop *loop, int64_t ns)
{
    aiol_clock *c = aiol_loop_clock_get(loop);
    aiol_timer *t;
    int fired = 0, polls = 0;

    if (aiol_timer_new(c, lw_count_cb, &fired, &t) != 0 ||
        aiol_timer_mod(t, aiol_clock_time_get(c) + ns) != 0) {
        fprintf(stderr, "loopwatch: cannot arm a timer\n");
        abort();
    }
    while (!fired) {
        aiol_loop_poll(loop, true);
        if (++polls >= 1000000) {
            fprintf(stderr, "loopwatch: the timer never fired\n");
            abort();
        }
    }
    aiol_timer_free(t);
    return polls;
}

/* True when a non-blocking poll does a busy-poll round (window open). */
static inline bool lw_window_open(aiol_loop *loop)
{
    uint64_t before = lw_stats(loop).poll_rounds;

    aiol_loop_poll(loop, false);
    return lw_stats(loop).poll_rounds > before;
}

/*
 * Opens the busy-poll window (busy polling enabled, a polled handler set)
 * with short waits; a few tries, in case the machine was too slow to wake
 * within the window's max once.  False if it never opened.
 */
static inline bool lw_window_open_try(aiol_loop *loop)
{
    for (int i = 0; i < 20; i++) {
        lw_wait_timer(loop, LW_US(100));
        if (lw_window_open(loop)) {
            return true;
        }
    }
    return false;
}

#endif /* AIOLOOP_TESTS_LOOPWATCH_H */
