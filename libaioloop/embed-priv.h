/* SPDX-License-Identifier: MIT */
/*
 * embed-priv.h - a host's readiness and embedder phases (embed.c), for the
 * loop's iteration and teardown.  What fd monitors use of embedding is in
 * fdmon.h.
 */
#ifndef AIOLOOP_EMBED_PRIV_H
#define AIOLOOP_EMBED_PRIV_H

#include "internal.h"

/*
 * Inside a walk (after aiol__walk_begin()): queues on @ready the handlers
 * whose fds a host found ready, from the @n entries of @fds it polled.
 */
void aiol__embed_ready(aiol_loop *loop, aiol__ready_list *ready,
                       const struct pollfd *fds, size_t n);

/* Frees the embed cache (loop teardown). */
void aiol__embed_fini(aiol_loop *loop);

int64_t aiol__phases_deadline_scan(aiol_loop *loop, aiol__now *now);
/* Earliest deadline of the embedder phases, or none. */
static inline int64_t aiol__phases_deadline(aiol_loop *loop, aiol__now *now)
{
    if (AIOL_LIST_EMPTY(&loop->phases)) {
        return AIOL_DEADLINE_NONE;
    }
    return aiol__phases_deadline_scan(loop, now);
}
bool aiol__phases_dispatch_run(aiol_loop *loop, bool first);
/*
 * Runs the embedder phases' first (@first) or dispatch callbacks.
 * Returns progress.  Inline, a counter's check when no phase has one.
 */
static inline bool aiol__phases_dispatch(aiol_loop *loop, bool first)
{
    return (first ? loop->phases_first : loop->phases_dispatch) != 0 &&
           aiol__phases_dispatch_run(loop, first);
}

#endif /* AIOLOOP_EMBED_PRIV_H */
