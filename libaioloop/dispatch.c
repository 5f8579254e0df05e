/* SPDX-License-Identifier: MIT */
/*
 * dispatch.c - running the callbacks of the handlers an iteration found
 * ready.  Polling thread; the handlers stay valid while it walks, because
 * the loop's walking counter (handler.c) parks removed ones on the
 * deleted list instead of freeing them, and marks them deleted first.
 */
#include <stdatomic.h>

#include "busypoll-priv.h"
#include "loop-priv.h"

/*
 * Runs the callbacks of one ready handler.  Read runs on input, hang-up or
 * error; write on output or error.  A handler deleted before or between its
 * callbacks is skipped from then on.
 */
AIOL__HOT
static bool dispatch_handler(aiol_loop *loop, aiol__handler *node)
{
    unsigned revents = node->revents;
    bool progress = false;

    loop->stats.handler_visits++;
    /* Acquire pairs with the release store in retire_locked(). */
    if (atomic_load_explicit(&node->deleted, memory_order_acquire)) {
        return false;
    }
    if (revents & AIOL__EV_POLL) {
        aiol_handler_fn *cb = node->ops.poll_ready ? node->ops.poll_ready
                                                   : node->ops.read;
        if (cb != NULL) {
            loop->stats.callbacks++;
            cb(node->opaque);
            progress = true;
        }
        return progress;
    }
    if ((revents & (AIOL__EV_IN | AIOL__EV_HUP | AIOL__EV_ERR)) &&
        node->ops.read != NULL) {
        if (node->ops.poll != NULL) {
            aiol__busy_poll_progress(loop, node);
        }
        loop->stats.callbacks++;
        node->ops.read(node->opaque);
        progress = !node->internal;
    }
    if ((revents & (AIOL__EV_OUT | AIOL__EV_ERR)) && node->ops.write != NULL &&
        !atomic_load_explicit(&node->deleted, memory_order_acquire)) {
        loop->stats.callbacks++;
        node->ops.write(node->opaque);
        progress = true;
    }
    return progress;
}

AIOL__HOT
bool aiol__dispatch_ready(aiol_loop *loop, aiol__ready_list *ready)
{
    aiol__handler *node;
    bool progress = false;

    /*
     * Pop from the head each time: a callback may take any other handler
     * off this list (a nested poll stealing it) and we never hold a
     * pointer to a successor.
     */
    while ((node = AIOL_LIST_FIRST(ready)) != NULL) {
        AIOL_LIST_REMOVE(node, node_ready);
        progress |= dispatch_handler(loop, node);
    }
    return progress;
}
