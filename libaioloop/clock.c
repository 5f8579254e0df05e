/* SPDX-License-Identifier: MIT */
/*
 * clock.c - the monotonic clock every part of the loop reads, and the
 * conversion of an absolute deadline into the relative timeout a wait
 * takes.  Nothing else: timers live in timer.c.
 */
#include <time.h>

#include "fdmon.h"

int64_t aiol_mono_time_get(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

bool aiol__deadline_to_timespec(int64_t deadline_ns, struct timespec *ts)
{
    int64_t rel = 0;

    if (deadline_ns == AIOL_DEADLINE_NONE) {
        return false;
    }
    if (deadline_ns > 0) {
        rel = deadline_ns - aiol_mono_time_get();
        if (rel < 0) {
            rel = 0;
        }
    }
    ts->tv_sec = rel / 1000000000;
    ts->tv_nsec = rel % 1000000000;
    return true;
}
