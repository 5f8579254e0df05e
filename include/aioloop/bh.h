/* SPDX-License-Identifier: MIT */
/**
 * @file
 * aioloop/bh.h - bottom halves: callbacks scheduled to run on the loop's
 * thread at its next iteration.
 *
 * Scheduling is lock-free and may happen from any thread (and from signal
 * handlers' threads, though not from signal handlers).  A bottom half
 * scheduled twice before it runs runs once.  Scheduled bottom halves run in
 * the order they were first scheduled.  Each poll call takes the bottom
 * halves scheduled so far as its own slice; a nested poll continues its
 * parent's slice before starting its own, so nesting never reorders them.
 * A bottom half scheduled while its own callback runs (or while the slice
 * is being run) runs in the next iteration, never twice in one.  A local
 * bottom half (aiol_bh_new_local(), and aiol_bh_new() on a thread-confined
 * loop) is the polling thread's alone and costs no atomic operation.
 */
#ifndef AIOLOOP_BH_H
#define AIOLOOP_BH_H

#include "aioloop/fd.h"
#include "aioloop/loop.h"

#ifdef __cplusplus
extern "C" {
#endif

/* (exported from the shared library; everything else is hidden) */
#pragma GCC visibility push(default)

/** A bottom half.  Opaque. */
typedef struct aiol_bh aiol_bh;

/**
 * Creates a bottom half that calls @p cb(@p opaque) on @p loop's thread
 * each time it is scheduled.  Any thread.  On a thread-confined loop
 * (AIOL_LOOP_CONFINED) it is a local bottom half, as
 * aiol_bh_new_local()'s: only the loop's own thread may schedule, cancel
 * or free it; aiol_bh_new_shared() makes one that other threads may.
 * @return 0 or -ENOMEM.
 */
int aiol_bh_new(aiol_loop *loop, aiol_handler_fn *cb, void *opaque,
                aiol_bh **out);

/**
 * Creates a bottom half that any thread may schedule, cancel and free,
 * on any loop, a thread-confined one included: the cross-thread entry
 * into a confined loop for work that recurs (a completion a worker thread
 * reports, a wakeup of asyncio's call_soon_threadsafe()).  On a loop
 * without AIOL_LOOP_CONFINED it is aiol_bh_new().  Any thread.
 * @return 0 or -ENOMEM.
 */
int aiol_bh_new_shared(aiol_loop *loop, aiol_handler_fn *cb, void *opaque,
                       aiol_bh **out);

/**
 * Creates a local bottom half: like aiol_bh_new(), but scheduled,
 * cancelled and freed only by the loop's polling thread (the thread
 * inside its poll, or between polls the thread that polls it), which a
 * debug build asserts.  In return a schedule costs no locked instruction
 * and no wakeup: it is a plain append to the loop's own list.  Local
 * bottom halves run in the order they were scheduled, after the
 * thread-safe ones the same poll takes; otherwise they behave the same
 * (nesting, idle, free from their own callback).  For work a loop
 * defers to itself, as libuv's idle and check handles are.  Any thread.
 * @return 0 or -ENOMEM.
 */
int aiol_bh_new_local(aiol_loop *loop, aiol_handler_fn *cb, void *opaque,
                      aiol_bh **out);

/**
 * Schedules @p bh to run in the loop's next iteration and wakes the loop.
 * Lock-free; any thread (a local bottom half: the loop's own thread).
 * No effect if it is already scheduled, except that a pending idle
 * schedule becomes a normal one (its run counts as progress).
 */
void aiol_bh_schedule(aiol_bh *bh);

/**
 * Schedules @p bh as an idle bottom half: it does not wake a sleeping loop
 * but runs within 10 ms, and its running does not count as progress.
 * A bottom half already scheduled normally stays a normal run.  Any
 * thread.
 */
void aiol_bh_schedule_idle(aiol_bh *bh);

/**
 * Unschedules @p bh: if it has not started running, it will not.  Any
 * thread.  A cancel that races with the loop starting the callback may
 * lose; cancel from the loop's thread for a strict guarantee.
 */
void aiol_bh_cancel(aiol_bh *bh);

/**
 * Frees @p bh: it will not run again and the loop frees it.  Any thread,
 * including @p bh's own callback.  @p bh must not be used afterwards.
 */
void aiol_bh_free(aiol_bh *bh);

/**
 * Schedules a one-shot callback: @p cb(@p opaque) runs once, in the loop's
 * next iteration, and its bottom half is freed by the loop.  Any thread,
 * on any loop, a thread-confined one included.  Its bottom half is a
 * thread-safe one, so it runs before the local ones a poll takes with it
 * (aiol_bh_new_local()'s, and aiol_bh_new()'s on a confined loop).
 * @return 0 or -ENOMEM.
 */
int aiol_bh_schedule_oneshot(aiol_loop *loop, aiol_handler_fn *cb,
                             void *opaque);

/**
 * Runs @p cb(@p opaque) on @p loop's thread, as a one-shot bottom half,
 * and waits until it has returned: for work that must happen on the
 * thread that polls @p loop (freeing what its handlers use, a setting
 * only its poller may change).  From a thread other than @p loop's
 * polling thread, while that thread goes on polling @p loop (else this
 * waits for good).
 * @return 0 once @p cb ran, or -ENOMEM (it did not run).
 */
int aiol_bh_schedule_wait(aiol_loop *loop, aiol_handler_fn *cb, void *opaque);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif

#endif /* AIOLOOP_BH_H */
