/* SPDX-License-Identifier: MIT */
/*
 * notify-priv.h - cross-thread wakeup (notify.c), for the loop, bottom
 * halves and handler changes made on other threads.
 */
#ifndef AIOLOOP_NOTIFY_PRIV_H
#define AIOLOOP_NOTIFY_PRIV_H

#include "internal.h"

int aiol__notify_init(aiol_loop *loop);
void aiol__notify_fini(aiol_loop *loop);
/* Polling thread, after a wait: consumes a pending notify. */
void aiol__notify_accept(aiol_loop *loop);
/*
 * Polling thread, before a nested poll may block: drains the wakeup fd
 * if a kick is still in it (its handler waits on an outer ready list).
 */
void aiol__notify_drain_nested(aiol_loop *loop);

/*
 * After a change other threads make and the poller must see: true when it
 * may be asleep, so it must be woken.  Called after a seq_cst fence (F2,
 * F4) that pairs with the poller's announcement (see notify.c).
 */
static inline bool aiol__poller_may_sleep(aiol_loop *loop)
{
    return atomic_load_explicit(&loop->notify_me, memory_order_relaxed) != 0 ||
           atomic_load_explicit(&loop->host_armed, memory_order_relaxed);
}

/*
 * Any thread, right after a seq_cst read-modify-write that published
 * work the polling thread finds by itself (a bottom-half push): the
 * notify without its fences and notified = true, F2b in notify.c.  Kicks
 * only a poller that may sleep.
 */
static inline void aiol__notify_pushed(aiol_loop *loop)
{
    if (atomic_load_explicit(&loop->notify_me, memory_order_seq_cst) != 0 ||
        atomic_load_explicit(&loop->host_armed, memory_order_seq_cst)) {
        aiol_loop_notify(loop);
    }
}

#endif /* AIOLOOP_NOTIFY_PRIV_H */
