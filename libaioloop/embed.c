/*
 * embed.c - driving the loop from a host main loop, and embedder phases.
 *
 * A host loop sleeps on the fd monitor's own fd (epoll's epfd), which is
 * readable when any handler's fd is ready; the notifier eventfd is one of
 * those fds, so cross-thread wakeups reach the host too.  prepare() plays
 * the part of "about to block" in the notify protocol (notify.c): it sets
 * bit 0 of notify_me, which makes notifiers write the eventfd until
 * check() clears it.  Blocking polls use notify_me += 2, so both may
 * overlap (a nested blocking poll inside a host-dispatched callback).
 */
#include <errno.h>
#include <stdlib.h>

#include "internal.h"

int aiol_loop_get_fd(aiol_loop *loop)
{
    aiol__check(loop != NULL, "loop is NULL");
    return loop->mon->get_fd ? loop->mon->get_fd(loop) : -ENOTSUP;
}

int64_t aiol__loop_deadline(aiol_loop *loop, int64_t now_ns)
{
    int64_t d, deadline;

    if (atomic_load_explicit(&loop->notified, memory_order_relaxed) ||
        (loop->mon->pending != NULL && loop->mon->pending(loop))) {
        return 0;
    }
    deadline = aiol__bh_deadline(loop, now_ns);
    if (deadline == 0) {
        return 0;
    }
    d = aiol__timers_deadline(loop, now_ns);
    deadline = d < deadline ? d : deadline;
    d = aiol__phases_deadline(loop, now_ns);
    return d < deadline ? d : deadline;
}

int64_t aiol_loop_prepare(aiol_loop *loop)
{
    int64_t deadline;

    aiol__check(loop != NULL, "loop is NULL");
    atomic_fetch_or_explicit(&loop->notify_me, 1, memory_order_relaxed);
    /*
     * F1: pairs with F2 in aiol_loop_notify() and with F4 in handler.c:
     * announcing ourselves before flushing means a change the flush misses
     * is made by a thread that sees notify_me and wakes the host.
     */
    atomic_thread_fence(memory_order_seq_cst);
    if (loop->mon->flush != NULL) {
        loop->mon->flush(loop);
    }
    deadline = aiol__loop_deadline(loop, aiol_clock_now_ns());
    return deadline;
}

bool aiol_loop_check(aiol_loop *loop)
{
    int64_t now;

    aiol__check(loop != NULL, "loop is NULL");
    /* Release: the host's reads of our state stay before the disarm. */
    atomic_fetch_and_explicit(&loop->notify_me, ~1u, memory_order_release);
    now = aiol_clock_now_ns();
    return aiol__loop_deadline(loop, now) <= now;
}

bool aiol_loop_dispatch(aiol_loop *loop)
{
    return aiol_loop_poll(loop, false);
}

int aiol_loop_embed_fds(aiol_loop *loop, struct pollfd *fds, size_t max)
{
    aiol__handler *node;
    size_t n = 0;
    int ret = 0;

    aiol__check(loop != NULL, "loop is NULL");
    aiol__check(fds != NULL || max == 0, "fds is NULL");
    if (!loop->mon->host_may_poll) {
        return -ENOTSUP;
    }
    pthread_mutex_lock(&loop->lock);
    AIOL_LIST_FOREACH(node, &loop->live, node_live) {
        if (node->events == 0) {
            continue; /* busy-poll only: nothing for a host to poll */
        }
        if (n == max) {
            ret = -ENOSPC;
            break;
        }
        fds[n++] = (struct pollfd){
            .fd = node->fd,
            .events = (short)aiol__events_to_poll(node->events),
        };
    }
    if (loop->mon->host_direct != NULL) {
        loop->mon->host_direct(loop, ret == 0);
    }
    pthread_mutex_unlock(&loop->lock);
    return ret < 0 ? ret : (int)n;
}

bool aiol_loop_dispatch_fds(aiol_loop *loop, const struct pollfd *fds,
                            size_t n)
{
    aiol__check(fds != NULL || n == 0, "fds is NULL");
    return aiol__loop_iterate(loop, 0, true, fds, n);
}

int aiol_phase_add(aiol_loop *loop, const aiol_phase_ops *ops, void *opaque,
                   aiol_phase **out)
{
    aiol_phase *phase;

    aiol__check(loop != NULL, "loop is NULL");
    aiol__check(ops != NULL && out != NULL, "ops or out is NULL");
    aiol__check(atomic_load(&loop->walkers) == 0,
                "phases are not added from inside the loop's callbacks");
    phase = calloc(1, sizeof(*phase));
    if (phase == NULL) {
        return -ENOMEM;
    }
    phase->loop = loop;
    phase->ops = *ops;
    phase->opaque = opaque;
    AIOL_LIST_INSERT_HEAD(&loop->phases, phase, link);
    *out = phase;
    return 0;
}

void aiol_phase_remove(aiol_phase *phase)
{
    aiol__check(phase != NULL, "phase is NULL");
    aiol__check(atomic_load(&phase->loop->walkers) == 0,
                "phases are not removed from inside the loop's callbacks");
    AIOL_LIST_REMOVE(phase, link);
    free(phase);
}

int64_t aiol__phases_deadline(aiol_loop *loop, int64_t now_ns)
{
    int64_t deadline = AIOL_DEADLINE_NONE;
    aiol_phase *phase;

    AIOL_LIST_FOREACH(phase, &loop->phases, link) {
        if (phase->ops.deadline != NULL) {
            int64_t d = phase->ops.deadline(phase->opaque, now_ns);
            deadline = d < deadline ? d : deadline;
        }
    }
    return deadline;
}

bool aiol__phases_dispatch(aiol_loop *loop)
{
    bool progress = false;
    aiol_phase *phase;

    AIOL_LIST_FOREACH(phase, &loop->phases, link) {
        if (phase->ops.dispatch != NULL) {
            progress |= phase->ops.dispatch(phase->opaque);
        }
    }
    return progress;
}
