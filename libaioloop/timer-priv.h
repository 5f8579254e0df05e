/* SPDX-License-Identifier: MIT */
/*
 * timer-priv.h - the clocks' life and the timers' per-iteration entry
 * points (timer.c), for the loop (loop.c).
 */
#ifndef AIOLOOP_TIMER_PRIV_H
#define AIOLOOP_TIMER_PRIV_H

#include "internal.h"

int aiol__clocks_init(aiol_loop *loop);
void aiol__clocks_fini(aiol_loop *loop);
int64_t aiol__timers_deadline_scan(aiol_loop *loop, aiol__now *now);
/* Earliest timer deadline on the monotonic clock, or none. */
static inline int64_t aiol__timers_deadline(aiol_loop *loop, aiol__now *now)
{
    return loop->timers_armed != 0 ? aiol__timers_deadline_scan(loop, now)
                                   : AIOL_DEADLINE_NONE;
}
bool aiol__timers_run_due(aiol_loop *loop);
/* Fires due timers (polling thread).  Returns progress. */
static inline bool aiol__timers_run(aiol_loop *loop)
{
    return loop->timers_armed != 0 && aiol__timers_run_due(loop);
}

#endif /* AIOLOOP_TIMER_PRIV_H */
