/* SPDX-License-Identifier: MIT */
/**
 * @file
 * aioloop/embed.h - driving a loop from another main loop (glib, libev...),
 * and adding an embedder's own phases to every iteration.
 *
 * A host loop drives an aiol_loop with one pollable fd and three steps:
 *
 *   deadline = aiol_loop_prepare(loop);     // before the host sleeps
 *   ...host polls aiol_loop_fd_get(loop) for input, until deadline...
 *   if (aiol_loop_check(loop) || fd_was_readable)
 *       aiol_loop_dispatch(loop);           // one non-blocking iteration
 *
 * prepare and check must come in pairs: between them a notify from another
 * thread makes the loop fd readable, so the host wakes up.  All three run
 * on the thread that owns the loop.
 *
 * Phases let an embedder (QEMU's fork with its own bottom halves or timer
 * lists, say) take part in every iteration without patching the core: the
 * loop asks each phase for a deadline before it sleeps and calls its
 * dispatch after fd handlers, bottom halves and timers.
 */
#ifndef AIOLOOP_EMBED_H
#define AIOLOOP_EMBED_H

#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "aioloop/loop.h"

#ifdef __cplusplus
extern "C" {
#endif

/* (exported from the shared library; everything else is hidden) */
#pragma GCC visibility push(default)

/**
 * The fd a host loop polls for input on the loop's behalf: readable while
 * some handler's fd is ready or a notify is pending.
 * epoll: the epoll fd; io_uring: the ring fd (a ring bound to one thread
 * is made shared first, which needs a new ring: see aioloop/uring.h for
 * requests in flight); poll: an epoll instance that mirrors the watched
 * fds, made on the first call.  Call it again when going back to the loop
 * fd after direct embedding (below).  The file behind the fd stays the
 * same for the loop's life (until aiol_loop_after_fork()), so a host may
 * keep it in an epoll set of its own; on epoll this turns lazy removal
 * off (aiol_fd_remove()).  A loop that only runs its own polls need never
 * call it.
 * @return the fd (owned by the loop), or a negative errno when the mirror
 *         or the shared ring cannot be made (-EMFILE, -ENOMEM; the loop
 *         keeps working as before, so a later call may succeed) or, on
 *         io_uring, -EBUSY when requests are in flight on a ring bound to
 *         another thread.
 */
int aiol_loop_fd_get(aiol_loop *loop);

/**
 * First step of an embedded iteration, before the host sleeps.  Arms
 * cross-thread wakeups through the loop fd.
 * @return the CLOCK_MONOTONIC deadline (ns) by which the host must call
 *         aiol_loop_check(): 0 when work is already due, AIOL_DEADLINE_NONE
 *         when only fd events or a notify can create work.
 */
int64_t aiol_loop_prepare(aiol_loop *loop);

/**
 * Second step, after the host's poll returns.  Disarms the wakeups armed
 * by aiol_loop_prepare().
 * @return true when bottom halves, timers or phases are due; the host
 *         should also dispatch when the loop fd polled readable.
 */
bool aiol_loop_check(aiol_loop *loop);

/**
 * Third step: one non-blocking iteration (aiol_loop_poll(loop, false)).
 * @return true when progress was made.
 */
bool aiol_loop_dispatch(aiol_loop *loop);

/**
 * Direct embedding, for few handlers: the host polls the watched fds
 * itself instead of the loop fd, and hands back what it saw.  That saves
 * the wait aiol_loop_dispatch() makes to learn which handler is ready
 * (one syscall per wakeup), which pays while the host's poll over the fds
 * is cheap, i.e. while there are few of them; with many, poll the loop fd.
 * Use: aiol_loop_prepare(), aiol_loop_embed_fds(), the host polls those
 * fds, aiol_loop_check(), aiol_loop_dispatch_fds().
 *
 * Fills @p fds with one entry per watched fd, the loop's own wakeup fd
 * included unless aiol_loop_wakeup_set() replaced it (events POLLIN, with
 * POLLRDHUP, and/or POLLOUT; revents 0), at most @p max.
 * The set changes when handlers do: call it again each iteration, after
 * aiol_loop_prepare().  Polling thread.
 *
 * While the host polls directly, the loop fd is not kept up to date: the
 * fds leave the epoll set behind it (epoll's own, poll's mirror), where
 * each would cost the kernel a callback at every event, and io_uring
 * cancels its polls.  A negative return or a new aiol_loop_fd_get() puts
 * them back, so a host switches to the loop fd after one of those.  The
 * loop's own polls need no care (aiol_loop_poll(), nested ones included,
 * from a dispatched callback).
 * @return the number of entries; -ENOSPC when more than @p max fds are
 *         watched; -EBUSY on io_uring while aioloop/uring.h requests are
 *         in flight, since their completions arrive on the ring, or while
 *         the ring has too little room to cancel every poll; -ENOTSUP on
 *         an fd monitor without direct embedding (none of the built-in ones).  On error, poll
 *         aiol_loop_fd_get() this round.
 */
int aiol_loop_embed_fds(aiol_loop *loop, struct pollfd *fds, size_t max);

/**
 * Most watched fds a host polls directly (aiol_loop_embed_fds()) in the
 * project's own hosts: the glib and libev adapters and the QEMU fork's
 * glib source; beyond it they poll the loop fd.  A host of its own may
 * choose another limit: this one keeps a host's poll set small, where
 * polling fds directly costs each of them a wakeup callback.
 */
#define AIOL_EMBED_DIRECT_MAX 8

/**
 * aiol_loop_dispatch() for direct embedding: one non-blocking iteration
 * that takes fd readiness from the revents of @p fds (as the host's poll
 * filled them in for the entries aiol_loop_embed_fds() gave) instead of
 * waiting on the fd monitor.  Entries whose fd lost its handler meanwhile
 * are ignored; a handler set since runs from the next iteration on.
 * @return true when progress was made.
 */
bool aiol_loop_dispatch_fds(aiol_loop *loop, const struct pollfd *fds,
                            size_t n);

/** An embedder's way to wake the loop's poller; see aiol_loop_wakeup_set(). */
typedef void aiol_wakeup_fn(void *opaque);

/**
 * Replaces the loop's own wakeup fd with the embedder's.  From then on,
 * whenever a notify has to wake a poller that may be asleep
 * (aiol_loop_notify(), a bottom half scheduled or a handler changed from
 * another thread), the loop calls @p fn(@p opaque) instead of writing its
 * eventfd, which it closes.  So a host that already polls a wakeup fd of
 * its own (QEMU's ctx->notifier) polls one fd less in direct embedding,
 * and every wait watches one fd less.
 *
 * @p fn must make a sleeping aiol_loop_poll() and a sleeping host return:
 * typically it writes an eventfd whose handler is set on this loop (set
 * with AIOL_FD_NO_PROGRESS, reading it dry).  It runs on any thread, may
 * run several times per wakeup, and must not call back into the loop.
 * Call it once, on the polling thread, before other threads use the loop
 * and outside its callbacks.
 * @return 0; -EALREADY if a wakeup was set already.
 */
int aiol_loop_wakeup_set(aiol_loop *loop, aiol_wakeup_fn *fn, void *opaque);

/** An embedder's phase.  Opaque. */
typedef struct aiol_phase aiol_phase;

/** What a phase does in each iteration. */
typedef struct aiol_phase_ops {
    /**
     * Returns the CLOCK_MONOTONIC deadline (ns) at which the phase has
     * work (0: now; AIOL_DEADLINE_NONE: none).  Called before the loop
     * sleeps, with the current time.  May be NULL (no deadline).
     */
    int64_t (*deadline)(void *opaque, int64_t now_ns);
    /**
     * Runs the phase's due work; returns true when that was progress.
     * Called once per iteration, after fd handlers, bottom halves and
     * timers.  May be NULL.
     */
    bool (*dispatch)(void *opaque);
    /**
     * Runs the phase's work that goes first: once per iteration, right
     * after the wait and the loop's accepting of notifies, before bottom
     * halves and fd handlers; returns true when that was progress.  For
     * an embedder whose own deferred callbacks run before fd handlers, as
     * QEMU's bottom halves do in aio_poll().  May be NULL.
     */
    bool (*first)(void *opaque);
} aiol_phase_ops;

/**
 * Makes a phase that runs in every iteration of @p loop.  Not from inside
 * the loop's callbacks.  @p ops is copied.
 * @return 0 or -ENOMEM.
 */
int aiol_phase_new(aiol_loop *loop, const aiol_phase_ops *ops, void *opaque,
                   aiol_phase **out);

/**
 * Takes a phase out of its loop's iterations and frees it.  Not from
 * inside the loop's callbacks.  NULL is a no-op.
 */
void aiol_phase_free(aiol_phase *phase);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif

#endif /* AIOLOOP_EMBED_H */
