/* SPDX-License-Identifier: MIT */
/**
 * @file
 * aioloop/timer.h - clocks and timers.
 *
 * Timers live on a clock.  Every loop has a built-in monotonic clock
 * (aiol_loop_clock_get(), CLOCK_MONOTONIC in ns).  An embedder may add clocks
 * of its own (a guest's virtual clock, a fuzzer's fake clock) that tell the
 * time through a callback; the loop assumes such a clock does not run
 * faster than real time when it computes how long it may sleep.
 *
 * Times are int64_t ns on the timer's own clock, any value allowed: an
 * embedder's clock may read negative (a guest clock at a negative offset),
 * and deadlines may be anywhere in the range, INT64_MIN to INT64_MAX.  A
 * deadline at or before the clock's time is due.  The loop turns the
 * earliest deadline into a CLOCK_MONOTONIC one (for its waits and for
 * aiol_loop_prepare()) with saturating arithmetic: a due timer gives 0 or
 * a past time, never a negative value, and one too far ahead to express
 * (an embedder clock's INT64_MAX, say, or the monotonic clock's) gives
 * AIOL_DEADLINE_NONE, so the loop sleeps instead of spinning.
 *
 * Each clock keeps its armed timers in a 4-ary heap: arm, re-arm and cancel
 * cost O(log n), firing the earliest O(log n).  Timers with equal deadlines
 * fire in the order they were armed.  A timer fires once per arming, from
 * the loop's poll, on the loop's thread; its callback may re-arm or free it.
 * A timer re-armed to a deadline that is already due fires in the next
 * iteration, so a callback cannot keep one iteration busy forever.
 *
 * A timer callback (also one deep in a nested poll) may free any timer and
 * any clock made by aiol_clock_new(), its own included: free the clock's
 * timers first, then the clock.  The run goes on with the other clocks'
 * due timers and never reads a freed clock: while a run over it is in
 * progress, aiol_clock_free() only marks it (O(1)) and the run frees it
 * when it ends.  Freeing that clock a second time meanwhile, or making or
 * arming a timer on it, aborts with a message.
 *
 * Threads: clocks and timers belong to the polling thread.
 */
#ifndef AIOLOOP_TIMER_H
#define AIOLOOP_TIMER_H

#include <stdbool.h>
#include <stdint.h>

#include "aioloop/fd.h"
#include "aioloop/loop.h"

#ifdef __cplusplus
extern "C" {
#endif

/* (exported from the shared library; everything else is hidden) */
#pragma GCC visibility push(default)

/** A clock that timers are armed on.  Opaque. */
typedef struct aiol_clock aiol_clock;
/** A timer.  Opaque. */
typedef struct aiol_timer aiol_timer;

/** Returns the current time of an embedder's clock, in ns. */
typedef int64_t aiol_clock_now_fn(void *opaque);

/**
 * The loop's built-in CLOCK_MONOTONIC clock.  Owned by the loop.
 * @return the clock; never NULL.
 */
aiol_clock *aiol_loop_clock_get(aiol_loop *loop);

/**
 * Makes a clock of @p loop whose time is @p now(@p opaque).
 * @return 0 or -ENOMEM.
 */
int aiol_clock_new(aiol_loop *loop, aiol_clock_now_fn *now, void *opaque,
                   aiol_clock **out);

/**
 * Frees a clock made by aiol_clock_new().  Its timers must have been
 * freed (one still armed aborts).  Allowed from any timer callback, that
 * clock's own included (see above); the memory may outlive the call until
 * the run in progress over it ends, but the clock must not be used again.
 * NULL is a no-op.
 */
void aiol_clock_free(aiol_clock *clock);

/**
 * The clock's current time in ns.
 * @return the time, in nanoseconds.
 */
int64_t aiol_clock_time_get(aiol_clock *clock);

/**
 * Creates a disarmed timer on @p clock that calls @p cb(@p opaque).
 * @return 0 or -ENOMEM.
 */
int aiol_timer_new(aiol_clock *clock, aiol_handler_fn *cb, void *opaque,
                   aiol_timer **out);

/**
 * Arms @p timer to fire when its clock reaches @p expire_ns (re-arming it
 * if it was armed).  Any value: one at or before the clock's time (a
 * negative one on the monotonic clock) fires at the next poll, INT64_MAX
 * on the monotonic clock never.  O(log n).
 * @return 0 or -ENOMEM (the heap could not grow; the timer stays as it was).
 */
int aiol_timer_mod(aiol_timer *timer, int64_t expire_ns);

/** Disarms @p timer; no effect if it is not armed.  O(log n). */
void aiol_timer_cancel(aiol_timer *timer);

/**
 * True while @p timer is armed.
 * @return true when armed, false when not (never armed, fired or cancelled).
 */
bool aiol_timer_is_armed(const aiol_timer *timer);

/**
 * The deadline @p timer is armed for, or -1 if it is not armed (a timer
 * armed for -1 gives -1 too: aiol_timer_is_armed() tells them apart).
 * @return the deadline in ns on the timer's clock, or -1.
 */
int64_t aiol_timer_deadline_get(const aiol_timer *timer);

/**
 * Disarms and frees @p timer (also from its own callback).  NULL is a
 * no-op.  A timer that is not armed (never armed, cancelled, or fired)
 * touches nothing of its clock or loop here, so it may be freed after
 * them, from any thread; an armed one must be freed on the loop's
 * polling thread while its loop and clock exist.
 */
void aiol_timer_free(aiol_timer *timer);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif

#endif /* AIOLOOP_TIMER_H */
