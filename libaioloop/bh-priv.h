/* SPDX-License-Identifier: MIT */
/*
 * bh-priv.h - bottom halves' per-iteration entry points (bh.c), for the
 * loop's iteration (loop.c).
 */
#ifndef AIOLOOP_BH_PRIV_H
#define AIOLOOP_BH_PRIV_H

#include "internal.h"

/*
 * The per-iteration entry points of bottom halves, timers and phases are
 * inline checks on the hot fields of struct aiol_loop in front of the
 * out-of-line work: an iteration with nothing of the kind makes no call.
 */

/*
 * Polling thread.  False when no bottom half can be pending: nothing on
 * the list, no slice a nested poll left.  seq_cst: a push is its own
 * notify (F2b in notify.c); after F1's fence or prepare()'s seq_cst store
 * of host_armed this load sees it, or the pusher sees the announcement.
 */
static inline bool aiol__bh_any(aiol_loop *loop)
{
    return atomic_load_explicit(&loop->bh_list, memory_order_seq_cst) != NULL ||
           loop->bh_local_head != NULL || !AIOL_TAILQ_EMPTY(&loop->bh_slices);
}
bool aiol__bh_poll_run(aiol_loop *loop);
/* Runs due bottom halves (polling thread).  Returns progress. */
static inline bool aiol__bh_poll(aiol_loop *loop)
{
    return aiol__bh_any(loop) && aiol__bh_poll_run(loop);
}
int64_t aiol__bh_deadline_scan(aiol_loop *loop, aiol__now *now);
/* Earliest bottom-half deadline: 0, now + idle delay, or none. */
static inline int64_t aiol__bh_deadline(aiol_loop *loop, aiol__now *now)
{
    return aiol__bh_any(loop) ? aiol__bh_deadline_scan(loop, now)
                              : AIOL_DEADLINE_NONE;
}
/* Frees what the loop owns among bottom halves (teardown). */
void aiol__bh_free_all(aiol_loop *loop);

#endif /* AIOLOOP_BH_PRIV_H */
