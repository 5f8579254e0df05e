/* SPDX-License-Identifier: MIT */
/*
 * loop-priv.h - the loop's iteration, walking counter and teardown steps,
 * shared by loop.c, handler.c, embed.c, fork.c, notify.c and iothread.c.
 */
#ifndef AIOLOOP_LOOP_PRIV_H
#define AIOLOOP_LOOP_PRIV_H

#include "internal.h"

/*
 * One iteration (aiol_loop_poll_deadline()), or with @from_host one
 * non-blocking iteration that takes readiness from the @nhost entries of
 * @host instead of the fd monitor's wait.  @for_host: a host's dispatch
 * (aiol_loop_dispatch(), aiol_loop_dispatch_fds()), which always looks at
 * the fds, wakeup fds included, so the loop fd it polls is drained.
 */
bool aiol__loop_iterate(aiol_loop *loop, int64_t deadline_ns, bool from_host,
                        bool for_host, const struct pollfd *host,
                        size_t nhost);

/*
 * Registers the loop's own internal handler (notifier), whose @read drains
 * its fd (AIOL_FD_DRAINS).  0 or -errno.
 */
int aiol__fd_set_internal(aiol_loop *loop, int fd, aiol_handler_fn *read,
                          void *opaque);

/*
 * The walking counter, struct aiol_loop.walkers: each iteration is a walk,
 * and a handler removed during one is parked, not freed (handler.c).
 * Polling thread.  Inline: every iteration, however empty, passes here.
 */
static inline void aiol__walk_begin(aiol_loop *loop)
{
    unsigned outer;

    if (loop->confined) {
        /* No remover on another thread: a plain increment does. */
        outer = atomic_load_explicit(&loop->walkers, memory_order_relaxed);
        atomic_store_explicit(&loop->walkers, outer + 1, memory_order_relaxed);
        outer = outer == 0;
    } else {
        /* seq_cst: pairs with the load in retire_locked(). */
        outer = atomic_fetch_add_explicit(&loop->walkers, 1,
                                          memory_order_seq_cst) == 0;
    }
#ifdef AIOL__CONTRACTS
    if (outer) {
        atomic_store_explicit(&loop->poller, aiol__thread_id(),
                              memory_order_relaxed);
        aiol__owner_take(loop);
    }
    assert(atomic_load_explicit(&loop->poller, memory_order_relaxed) ==
               aiol__thread_id() &&
           "a loop is polled by one thread at a time");
#else
    (void)outer;
#endif
}

/* aiol__walk_end() when a retired handler may wait (handler.c). */
void aiol__walk_end_slow(aiol_loop *loop);

/* Ends aiol__walk_begin()'s walk; the outermost frees parked handlers. */
static inline void aiol__walk_end(aiol_loop *loop)
{
#ifdef AIOL__CONTRACTS
    assert(atomic_load_explicit(&loop->poller, memory_order_relaxed) ==
               aiol__thread_id() &&
           "a poll ends on another thread than it began");
    if (atomic_load_explicit(&loop->walkers, memory_order_relaxed) == 1) {
        atomic_store_explicit(&loop->poller, 0, memory_order_relaxed);
    }
#endif
    /* Acquire pairs with the release store in retire_locked(). */
    if (!atomic_load_explicit(&loop->deleted_pending, memory_order_acquire)) {
        /*
         * Nothing to free.  A handler parked after this load stays parked
         * until the next walk ends or a removal finds no walker.  Only the
         * polling thread writes walkers, so a plain store does: release
         * pairs with the seq_cst load in retire_locked(), which frees only
         * after our dispatch is done with the handler.
         */
        atomic_store_explicit(&loop->walkers,
                              atomic_load_explicit(&loop->walkers,
                                                   memory_order_relaxed) - 1,
                              memory_order_release);
        return;
    }
    aiol__walk_end_slow(loop);
}

/*
 * Earliest deadline among notify (0 if pending), bottom halves, timers and
 * phases, on the monotonic clock; AIOL_DEADLINE_NONE if none.
 */
int64_t aiol__loop_deadline(aiol_loop *loop, aiol__now *now);

/* Finishes the monitor's own outstanding work (first step of teardown). */
void aiol__loop_quiesce(aiol_loop *loop);

/*
 * fork.c.  True when @loop was created (or last adopted by
 * aiol_loop_after_fork()) in another process: this is a fork child.
 */
bool aiol__loop_forked(const aiol_loop *loop);
/*
 * aiol_loop_free() in a fork child that did not call
 * aiol_loop_after_fork(): drops the parent's monitor state without a
 * syscall on it and swaps in a monitor whose ops touch nothing, so the
 * rest of the teardown frees memory and closes only the child's fds.
 */
void aiol__loop_forget_forked(aiol_loop *loop);

/* Frees every handler in the table and on the deleted list (loop teardown). */
void aiol__handlers_free_all(aiol_loop *loop);

#endif /* AIOLOOP_LOOP_PRIV_H */
