/* SPDX-License-Identifier: MIT */
/*
 * busypoll.c - adaptive busy polling.
 *
 * Before the loop sleeps it may spin on the poll callbacks of its handlers
 * (a virtqueue's ring index, a completion ring) for a window of
 * loop->poll_ns nanoseconds.  When one finds work it is queued with
 * AIOL__EV_POLL and dispatch calls its poll_ready callback (or read), and
 * the iteration does not sleep.  The window adapts after each iteration to
 * how long the loop blocked, with QEMU's poll-max-ns / poll-grow /
 * poll-shrink rules (see aiol_loop_poll_params_set()).
 *
 * The fd monitor may take part (its spin_begin and spin_check ops): the
 * io_uring monitor submits queued requests before the window opens, and
 * a request's completion, or readiness of a handler that is not being
 * polled, ends the window, as work would (uring-spin.c).
 *
 * Fairness: the window never runs past the iteration's deadline (a due
 * timer or bottom half ends it), a notify from another thread (a bottom
 * half scheduled there, aiol_loop_notify()) ends it at the next round,
 * and when polling keeps finding work the
 * fd wait is skipped at most AIOL__POLL_MAX_SKIPS iterations in a row, so
 * fd handlers are never starved.  A handler whose poll callback found no
 * work for AIOL__POLL_IDLE_NS stops being polled (its poll_end runs) until
 * its fd fires again.  It also leaves the part of the snapshot rounds walk
 * (loop->npollers_active), so a round costs O(handlers still polled), not
 * O(handlers with a poll callback): a hundred idle virtqueues on an
 * iothread cost nothing per round.
 *
 * The set of polled handlers is loop->pollers, changed under loop->lock
 * from any thread.  The polling thread spins over a private snapshot that
 * it refreshes when loop->pollers_gen moves; handlers removed since are
 * still valid memory (the walking counter) and are skipped by their
 * deleted flag.
 */
#include <errno.h>
#include <stdlib.h>

#include "busypoll-priv.h"
#include "fdmon.h"

/* A polled handler without progress for this long stops being polled. */
#define AIOL__POLL_IDLE_NS (7 * 1000 * 1000)
/* The first window after polling was off (QEMU's first step too). */
#define AIOL__POLL_FIRST_NS 4000

int aiol_loop_poll_params_set(aiol_loop *loop, int64_t max_ns, int64_t grow,
                              int64_t shrink)
{
    aiol__check(loop != NULL, "loop is NULL");
    aiol__assert_poller(loop);
    if (max_ns < 0 || grow < 0 || shrink < 0) {
        return -EINVAL;
    }
    loop->poll_max_ns = max_ns;
    loop->poll_grow = grow;
    loop->poll_shrink = shrink;
    if (loop->poll_ns > max_ns) {
        loop->poll_ns = max_ns;
    }
    return 0;
}

static bool handler_alive(const aiol__handler *node)
{
    /* Acquire pairs with the release store in retire_locked(). */
    return !atomic_load_explicit(&node->deleted, memory_order_acquire);
}

int aiol__busy_poll_reserve(aiol_loop *loop, size_t n)
{
    int ret;

    aiol__assert_locked(loop);
    if (n >= AIOL__NO_SLOT) {
        return -ENOMEM; /* (indexes are 32 bits; the fd limit is far below) */
    }
    ret = aiol__reserve(&loop->pollers, &loop->pollers_cap, n,
                        sizeof(*loop->pollers));
    if (ret < 0 || loop->pollers_snap_cap >= n) {
        return ret;
    }
    return aiol__reserve(&loop->pollers_spare, &loop->pollers_spare_cap, n,
                         sizeof(*loop->pollers_spare));
}

/*
 * Polling thread, between rounds.  Brings the snapshot up to date with
 * loop->pollers; never allocates (aiol__busy_poll_reserve()).
 */
static void snapshot_refresh(aiol_loop *loop)
{
    size_t n;

    aiol__lock(loop);
    n = loop->npollers;
    if (loop->pollers_snap_cap < loop->npollers) {
        aiol__check(loop->pollers_spare_cap >= loop->npollers,
                    "no room reserved for the busy-poll snapshot");
        free(loop->pollers_snap); /* ours: no round is walking it now */
        loop->pollers_snap = loop->pollers_spare;
        loop->pollers_snap_cap = loop->pollers_spare_cap;
        loop->pollers_spare = NULL;
        loop->pollers_spare_cap = 0;
    }
    for (size_t i = 0; i < n; i++) {
        aiol__handler *node = loop->pollers[i];

        node->poll_slot = (uint32_t)i;
        loop->pollers_snap[i] = node;
    }
    loop->npollers_snap = n;
    loop->npollers_active = n; /* (idle ones leave again at their round) */
    loop->pollers_snap_gen = atomic_load_explicit(&loop->pollers_gen,
                                                  memory_order_relaxed);
    aiol__unlock(loop);
}

/* Polling thread.  Refreshes the snapshot if loop->pollers changed. */
static void snapshot_sync(aiol_loop *loop)
{
    /* Acquire pairs with the release increment under loop->lock. */
    if (atomic_load_explicit(&loop->pollers_gen, memory_order_acquire) !=
        loop->pollers_snap_gen) {
        snapshot_refresh(loop);
    }
}

/*
 * Ends busy polling of @node.  Work may have arrived after its last poll
 * but before poll_end re-enabled its notifications, so poll once more;
 * returns whether that found work (queued on @ready).
 */
static bool node_poll_end(aiol__handler *node, aiol__ready_list *ready)
{
    node->poll_started = false;
    if (node->ops.poll_end != NULL) {
        node->ops.poll_end(node->opaque);
    }
    /* (not one whose poll_ready is running: a nested poll's, see there) */
    if (handler_alive(node) && !node->in_poll_ready &&
        node->ops.poll(node->opaque)) {
        if (ready != NULL) {
            aiol__ready_add(ready, node, AIOL__EV_POLL);
        }
        return true;
    }
    return false;
}

/* What one round over the polled handlers found. */
enum round_result {
    ROUND_IDLE,  /* nothing pollable: every handler is idle or gone */
    ROUND_EMPTY, /* polled some, none had work */
    ROUND_WORK,  /* one had work, queued on the ready list */
};

/*
 * True when @node, which has an fd to fall back to, found no work for
 * AIOL__POLL_IDLE_NS since it was first polled or last made progress.
 * Its idle clock starts at its first poll round (progress 0 until then),
 * not when it was set: a handler set long before polling starts must be
 * polled before it can be judged idle.
 */
static bool node_idle(aiol__handler *node, int64_t now)
{
    if (node->events == 0) {
        return false; /* busy-poll only: nothing else would run it */
    }
    if (node->poll_progress_ns == 0) {
        node->poll_progress_ns = now;
    }
    return now - node->poll_progress_ns > AIOL__POLL_IDLE_NS;
}

/* Polling thread.  Swaps snapshot entries @i and @j. */
static void snap_swap(aiol_loop *loop, size_t i, size_t j)
{
    aiol__handler *a = loop->pollers_snap[i], *b = loop->pollers_snap[j];

    loop->pollers_snap[i] = b;
    b->poll_slot = (uint32_t)i;
    loop->pollers_snap[j] = a;
    a->poll_slot = (uint32_t)j;
}

/* One round over the handlers still polled. */
static enum round_result poll_round(aiol_loop *loop, aiol__ready_list *ready,
                                    int64_t now)
{
    enum round_result res = ROUND_IDLE;

    loop->stats.poll_rounds++;
    for (size_t i = 0; i < loop->npollers_active;) {
        aiol__handler *node = loop->pollers_snap[i];

        loop->stats.poll_visits++;
        /*
         * A handler whose poll_ready is running (this round is a nested
         * poll's) is not polled: its condition is not cleared yet, and
         * polling it would re-enter poll_ready without end.
         */
        if (!handler_alive(node) || node->in_poll_ready) {
            i++;
            continue;
        }
        /*
         * Idle handlers fall back to their fd, and leave the rounds until
         * it fires (aiol__busy_poll_progress()): the last active entry
         * takes their place, and is looked at next.
         */
        if (node_idle(node, now)) {
            if (node->poll_started && node_poll_end(node, ready)) {
                res = ROUND_WORK;
            }
            snap_swap(loop, i, --loop->npollers_active);
            continue;
        }
        i++;
        res = res == ROUND_IDLE ? ROUND_EMPTY : res;
        if (!node->poll_started) {
            node->poll_started = true;
            loop->poll_started = true;
            if (node->ops.poll_begin != NULL) {
                node->ops.poll_begin(node->opaque);
            }
        }
        if (handler_alive(node) && node->ops.poll(node->opaque)) {
            node->poll_progress_ns = now;
            aiol__ready_add(ready, node, AIOL__EV_POLL);
            res = ROUND_WORK;
        }
    }
    return res;
}

bool aiol__busy_poll(aiol_loop *loop, aiol__ready_list *ready,
                     int64_t now_ns, int64_t deadline_ns)
{
    int64_t end;

    snapshot_sync(loop);
    if (loop->npollers_snap == 0) {
        return false;
    }
    /* now + poll_ns, saturated at the deadline (AIOL_DEADLINE_NONE too). */
    end = loop->poll_ns < deadline_ns - now_ns ? now_ns + loop->poll_ns
                                               : deadline_ns;
    if (loop->fdmon->spin_begin != NULL) {
        loop->fdmon->spin_begin(loop);
    }
    for (;;) {
        enum round_result res;

        /* A notify is work the poll callbacks cannot see (relaxed: the
           iteration's wait and aiol__notify_accept() order the rest). */
        if (atomic_load_explicit(&loop->notified, memory_order_relaxed)) {
            return true;
        }
        res = poll_round(loop, ready, now_ns);
        if (res == ROUND_WORK) {
            return true;
        }
        /* Work on the monitor the rounds cannot see: the wait reaps it. */
        if (loop->fdmon->spin_check != NULL && loop->fdmon->spin_check(loop)) {
            loop->poll_look_owed = true;
            return true;
        }
        if (res == ROUND_IDLE || now_ns >= end) {
            return false; /* nothing left to spin on, or the window ended */
        }
        now_ns = aiol_mono_time_get();
    }
}

void aiol__busy_poll_progress(aiol_loop *loop, aiol__handler *node)
{
    size_t slot = node->poll_slot;

    node->poll_progress_ns = aiol_mono_time_get();
    /* Back into the rounds if it had gone idle in the current snapshot. */
    if (slot < loop->npollers_snap && loop->pollers_snap[slot] == node &&
        slot >= loop->npollers_active) {
        snap_swap(loop, slot, loop->npollers_active++);
    }
}

bool aiol__busy_poll_stop(aiol_loop *loop, aiol__ready_list *ready)
{
    bool found = false;

    /* Handlers freed since the last iteration must not be touched. */
    snapshot_sync(loop);
    /* (an idle handler's poll_end ran when it left the rounds) */
    for (size_t i = 0; i < loop->npollers_active; i++) {
        aiol__handler *node = loop->pollers_snap[i];

        if (handler_alive(node) && node->poll_started) {
            found |= node_poll_end(node, ready);
        }
    }
    loop->poll_started = false;
    return found;
}

bool aiol__busy_poll_stop_for_host(aiol_loop *loop)
{
    bool found = aiol__busy_poll_stop(loop, NULL);

    loop->poll_recheck |= found;
    return found;
}

void aiol__busy_poll_adjust(aiol_loop *loop, int64_t block_ns)
{
    if (block_ns <= loop->poll_ns) {
        return; /* the window covered the wait: keep it */
    }
    if (block_ns > loop->poll_max_ns) {
        /* We would have had to poll too long: poll less. */
        loop->poll_ns = loop->poll_shrink ? loop->poll_ns / loop->poll_shrink
                                          : 0;
    } else if (loop->poll_ns < loop->poll_max_ns) {
        /* Room to grow: poll longer, saturating at poll_max_ns. */
        int64_t grow = loop->poll_grow ? loop->poll_grow : 2;

        if (loop->poll_ns == 0) {
            loop->poll_ns = AIOL__POLL_FIRST_NS;
        } else if (loop->poll_ns > loop->poll_max_ns / grow) {
            loop->poll_ns = loop->poll_max_ns;
        } else {
            loop->poll_ns *= grow;
        }
        if (loop->poll_ns > loop->poll_max_ns) {
            loop->poll_ns = loop->poll_max_ns;
        }
    }
}

void aiol__busy_poll_fini(aiol_loop *loop)
{
    free(loop->pollers);
    free(loop->pollers_snap);
    free(loop->pollers_spare);
    loop->pollers = loop->pollers_snap = loop->pollers_spare = NULL;
    loop->npollers = loop->pollers_cap = 0;
    loop->npollers_snap = loop->pollers_snap_cap = loop->pollers_spare_cap = 0;
    loop->npollers_active = 0;
}
