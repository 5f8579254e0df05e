/* SPDX-License-Identifier: MIT */
/**
 * @file
 * aioloop/fd.h - fd handlers.
 *
 * A loop holds at most one handler per fd.  A handler has read, write and
 * busy-poll callbacks plus one opaque pointer that every callback receives.
 * Events are level-triggered on every fd monitor: while the fd stays readable
 * the read callback runs on every iteration (unless the handler promises
 * to drain the fd, AIOL_FD_DRAINS).
 *
 * Lookup, add, replace and remove are O(1) in the number of handlers.
 *
 * Removal is safe anywhere: once aiol_fd_remove() (or a replacing
 * aiol_fd_set()) returns on the polling thread, the old callbacks are never
 * called again, even when the removal happens deep inside a nested poll and
 * the handler was already collected as ready by an outer poll.
 *
 * Thread safety: handlers may be set and removed from any thread.  A
 * removal from another thread stops callbacks that have not started yet by
 * the time the polling thread sees it; one already running is not waited
 * for.  Remove a handler before closing its fd: the kernel forgets a closed
 * fd by itself under epoll, but a number reused by a new file is only
 * watched once its handler is set again with different events, or removed
 * and added.
 */
#ifndef AIOLOOP_FD_H
#define AIOLOOP_FD_H

#include <stdbool.h>

#include "aioloop/loop.h"

#ifdef __cplusplus
extern "C" {
#endif

/* (exported from the shared library; everything else is hidden) */
#pragma GCC visibility push(default)

/** A read, write or notification callback. */
typedef void aiol_handler_fn(void *opaque);

/** A busy-poll callback: returns true when there is work to do. */
typedef bool aiol_poll_fn(void *opaque);

/**
 * aiol_fd_ops.flags: this handler's callbacks are not progress, so a poll
 * that ran only them returns false.  For wakeup fds (an embedder's own
 * event notifier) whose only job is to end a blocking poll.  While every
 * handler of a loop is such a wakeup fd (no write callback), a poll that
 * does not block makes no wait (nothing it could report is progress): the
 * next blocking poll, or a host's aiol_loop_dispatch(), runs them.  On
 * io_uring it still looks while a request of aioloop/uring.h is in flight
 * or a removed handler's poll is still to be cancelled.
 */
#define AIOL_FD_NO_PROGRESS (1u << 0)

/**
 * aiol_fd_ops.flags: the read callback always empties the fd of what it
 * has to read (reads until EAGAIN; an eventfd's read, which resets it;
 * accepts until EAGAIN), so the handler needs to hear of new arrivals
 * only, not of data it left.  A promise that lets an fd monitor report
 * such a read-only handler's readiness once per arrival instead of
 * re-arming its registration after every event: the io_uring fd monitor
 * keeps one multishot poll armed for it.  Epoll and poll ignore the flag.
 * A handler with the flag that leaves data unread may not be called again
 * until more arrives.  Has no effect on handlers that watch writes.
 */
#define AIOL_FD_DRAINS (1u << 1)

/**
 * The full set of callbacks of a handler.  Any member may be NULL; a handler
 * with all of read, write and poll NULL does not exist.
 */
typedef struct aiol_fd_ops {
    aiol_handler_fn *read;       /**< fd readable, hung up or in error */
    aiol_handler_fn *write;      /**< fd writable or in error */
    aiol_poll_fn *poll;          /**< busy-poll check, see docs/design.md */
    aiol_handler_fn *poll_ready; /**< runs when poll returned true (NULL: read) */
    aiol_handler_fn *poll_begin; /**< the loop starts busy-polling this handler */
    aiol_handler_fn *poll_end;   /**< the loop stops busy-polling this handler */
    unsigned flags;              /**< AIOL_FD_* flags */
} aiol_fd_ops;

/**
 * Sets, replaces or removes the handler of @p fd.
 *
 * With at least one of @p ops->read, write or poll non-NULL the handler is
 * set, replacing any previous one (whose callbacks never run again).  With
 * all three NULL (or @p ops NULL) any handler is removed and 0 returned.
 * @p ops is copied.  Replacing a handler with one that watches the same
 * events makes no syscall.  Setting exactly the same ops and @p opaque
 * again (re-arming, libevent style) is a no-op: the handler stays, with
 * any readiness already collected for it, and nothing is allocated.
 *
 * An fd without a poll method (a regular file) is accepted on every
 * fd monitor and reported ready at every iteration, as poll(2) reports it.
 *
 * Setting a handler makes no syscall: every fd monitor hands new
 * registrations to the kernel at its next wait (or aiol_loop_prepare()).
 * (One exception: the poll fd monitor, once aiol_loop_fd_get() made its
 * epoll mirror, changes the mirror at once, and reports its errors.)
 * So an fd that is closed by then, or was already closed when it was set,
 * is not refused here: the monitor finds it out, never runs the handler's
 * callbacks and stops watching it until the handler is set again with
 * other events, or removed and set again;
 * aiol_loop_stats.bad_fds counts such cases.  Close an fd only after
 * removing its handler.
 *
 * @return 0; -EBADF for a negative fd or one at or above the hard
 *         RLIMIT_NOFILE (no open fd can have that number; the check keeps
 *         a stray number from growing the fd-indexed tables to its size);
 *         -ENOMEM; on the poll fd monitor with an embedding mirror, what
 *         epoll_ctl gives (-ENOSPC: max_user_watches).  On error the loop
 *         is unchanged: a previous handler stays.
 */
int aiol_fd_set_ops(aiol_loop *loop, int fd, const aiol_fd_ops *ops,
                    void *opaque);

/**
 * Shorthand for aiol_fd_set_ops() with only read, write and poll callbacks.
 *
 * @return what aiol_fd_set_ops() returns: 0; -EBADF for a negative fd or
 *         one at or above the hard RLIMIT_NOFILE; -ENOMEM; on the poll fd
 *         monitor with an embedding mirror, what epoll_ctl gives.  On
 *         error the loop is unchanged: a previous handler stays.
 */
int aiol_fd_set(aiol_loop *loop, int fd, aiol_handler_fn *read,
                aiol_handler_fn *write, aiol_poll_fn *poll, void *opaque);

/**
 * Removes the handler of @p fd.  The fd may be closed, and its number
 * reused, as soon as this returns, and its callbacks are never called
 * again (one the polling thread already began runs on: a remover on
 * another thread that closes the fd must not race it).
 *
 * Removed on another thread, the loop makes no syscall on the fd number
 * after this returns: epoll DELs here, under the loop lock.  Only a wait
 * already handed to the kernel may still hold the fd (ppoll's set, an
 * io_uring poll submitted with it) and wake once for it, running nothing.
 *
 * Removed on the polling thread, epoll makes no syscall here: it keeps
 * the registration until the fd is set again (then an ADD that fails
 * with EEXIST reuses it) or reports an event (then that thread DELs it at
 * its next wait), and a registration whose file outlived the closed fd
 * (a dup, an eventfd another process or KVM holds) is dropped at its
 * first event by rebuilding the epoll set (docs/fdmon-epoll.md).  Once
 * aiol_loop_fd_get() has handed the epoll fd out, epoll DELs here from
 * any thread.  io_uring cancels its poll at the next wait.  Either way a
 * removed fd may wake one wait that then runs nothing.
 * @return 0, -EBADF for a negative fd, -ENOENT when @p fd has no handler.
 */
int aiol_fd_remove(aiol_loop *loop, int fd);

/**
 * Reserves memory for @p handlers more handlers than @p loop holds now, on
 * fds up to @p max_fd: until that many more are set, aiol_fd_set() and
 * aiol_fd_set_ops() of such an fd allocate nothing, so they cannot fail
 * with -ENOMEM and take no page fault on memory the loop grows.  For a
 * service that knows its scale (a VMM's devices, a server's connection
 * limit) and wants its first events as fast as its later ones, or no
 * allocation failure after start-up.  Handlers removed meanwhile give
 * their memory back to the reserve.  O(@p handlers); the memory is freed
 * with the loop.  Any thread on a shared loop; the loop's own thread on
 * a confined one.
 * @return 0; -EBADF when @p max_fd is negative or at or above the hard
 *         RLIMIT_NOFILE; -ENOMEM, with part of the room reserved and the
 *         loop unchanged otherwise.
 */
int aiol_fd_reserve(aiol_loop *loop, size_t handlers, int max_fd);

/**
 * True when @p fd has a handler on @p loop.
 * @return true when set, false when not (or @p fd is negative).
 */
bool aiol_fd_is_set(aiol_loop *loop, int fd);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif

#endif /* AIOLOOP_FD_H */
