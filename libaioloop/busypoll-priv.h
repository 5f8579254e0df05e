/* SPDX-License-Identifier: MIT */
/*
 * busypoll-priv.h - adaptive busy polling (busypoll.c), for the loop's
 * iteration, handler changes and a host's prepare step.
 */
#ifndef AIOLOOP_BUSYPOLL_PRIV_H
#define AIOLOOP_BUSYPOLL_PRIV_H

#include "internal.h"

/* Busy polling may skip the fd wait this many iterations in a row at most. */
#define AIOL__POLL_MAX_SKIPS 8

/*
 * Busy-polls handlers with a poll callback until one has work, the window
 * (loop->poll_ns, capped at @deadline_ns) ends, or (blocking false) after
 * one round.  Queues those with work on @ready.  Returns whether any had.
 */
bool aiol__busy_poll(aiol_loop *loop, aiol__ready_list *ready,
                     int64_t now_ns, int64_t deadline_ns);
/* Adapts the window to how long the iteration blocked. */
void aiol__busy_poll_adjust(aiol_loop *loop, int64_t block_ns);
/*
 * Ends busy polling (before a wait that may block, or polling was
 * disabled): calls poll_end of every polled handler and polls it once
 * more, since work may have come before its notifications were back on;
 * that work goes on @ready.  Returns whether there was any.
 */
bool aiol__busy_poll_stop(aiol_loop *loop, aiol__ready_list *ready);
/*
 * The same for a host about to sleep (aiol_loop_prepare()): work the last
 * poll finds is not queued but leaves loop->poll_recheck set, so the next
 * iteration polls once.  Returns whether there was any.
 */
bool aiol__busy_poll_stop_for_host(aiol_loop *loop);
/*
 * Under loop->lock.  Makes room for a snapshot of @n polled handlers, so
 * the next refresh cannot fail.  0 or -ENOMEM.
 */
int aiol__busy_poll_reserve(aiol_loop *loop, size_t n);
/* Marks @node as having made progress through its fd. */
void aiol__busy_poll_progress(aiol_loop *loop, aiol__handler *node);
void aiol__busy_poll_fini(aiol_loop *loop);

#endif /* AIOLOOP_BUSYPOLL_PRIV_H */
