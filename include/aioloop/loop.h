/* SPDX-License-Identifier: MIT */
/**
 * @file
 * aioloop/loop.h - creating, running and destroying a loop.
 *
 * A loop (aiol_loop) is an opaque object polled by one thread at a time.
 * Every call that can fail returns 0 or a negative errno; misuse (a NULL
 * loop, freeing a loop from inside its own poll) aborts with a message.
 */
#ifndef AIOLOOP_LOOP_H
#define AIOLOOP_LOOP_H

#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* (exported from the shared library; everything else is hidden) */
#pragma GCC visibility push(default)

/** An event loop.  Opaque; create with aiol_loop_new(). */
typedef struct aiol_loop aiol_loop;

/** Deadline meaning "no deadline": aiol_loop_poll_deadline() may block forever. */
#define AIOL_DEADLINE_NONE INT64_MAX

/**
 * Counters a loop keeps about its own work.  They exist so tests can assert
 * complexity by counting work instead of timing it.  The polling thread
 * updates them, except fdmon_ctls, which any thread that changes a handler
 * updates under the loop's handler lock, and notify_kicks, which any
 * notifying thread increments atomically.  Read them (aiol_loop_stats_get())
 * from the polling thread or while the loop is idle.  New fields are only
 * ever added at the end.
 */
typedef struct aiol_loop_stats {
    uint64_t iterations;     /**< poll calls, nested ones included */
    uint64_t fdmon_waits;  /**< waits on the fd monitor (epoll_wait, poll...) */
    uint64_t fdmon_ctls;   /**< registration syscalls (epoll_ctl...) */
    uint64_t handler_visits; /**< ready-list entries examined by dispatch */
    uint64_t callbacks;      /**< fd callbacks invoked (read and write) */
    uint64_t bh_runs;        /**< bottom-half callbacks invoked */
    uint64_t timer_runs;     /**< timer callbacks invoked */
    uint64_t notify_kicks;   /**< notifies that had to write the wakeup fd
                                  (any thread; approximate while they race) */
    uint64_t poll_rounds;    /**< busy-poll rounds over the poll callbacks */
    uint64_t bad_fds;        /**< handlers the monitor found with a closed
                                  fd (EBADF, POLLNVAL) and stopped watching */
    uint64_t fdmon_arms;     /**< polls armed without a syscall of their
                                  own (io_uring: POLL_ADD requests, each
                                  single-shot one re-armed after its event);
                                  0 on epoll and poll */
    uint64_t poll_visits;    /**< handlers busy-poll rounds looked at (a
                                  handler that went idle is not looked at
                                  until its fd fires) */
} aiol_loop_stats;

/**
 * Creates a loop.
 *
 * @param out      receives the loop on success; untouched on failure
 * @param fdmon    fd monitor to use: "epoll", "io_uring" (when built with
 *                 liburing) or "poll".  The named fd monitor is used or
 *                 the call fails with its error (-EINVAL for an unknown or
 *                 absent one).  NULL picks the default: the fd monitor
 *                 named by the AIOLOOP_FDMON environment variable (or,
 *                 when that is unset or empty, by its older name
 *                 AIOLOOP_BACKEND) if it starts, else the first of epoll,
 *                 io_uring and poll that starts.  aiol_loop_fdmon_get()
 *                 tells which one runs.
 * @return 0, -EINVAL, -ENOMEM, or the fd monitor's own error (-EMFILE...).
 */
int aiol_loop_new(aiol_loop **out, const char *fdmon);

/**
 * Flag of aiol_loop_new_flags(): a thread-confined loop.  Only its own
 * thread touches it, so handler changes, bottom-half scheduling and timer
 * arming take no lock and no atomic read-modify-write, and a registration
 * change wakes nobody (nobody else can be waiting in its poll).  The
 * model of libuv's and libev's loops, for the common embedder with one
 * loop per thread.
 *
 * Its own thread is the thread that created it, until another thread
 * polls it: from that poll on, the poller's.  A handover (a loop made on
 * one thread and run on another) is therefore just that thread's first
 * poll, and the two threads must order it themselves (pthread_create(),
 * a mutex, a queue).  aiol_loop_owner_set() hands it over before that
 * poll (a binding whose loop starts running on another thread).
 * aiol_loop_free() is the same kind of handover: any thread may free the
 * loop once its polls are over (after a join).
 *
 * What stays available from any thread: aiol_loop_notify(),
 * aiol_bh_schedule_oneshot() and aiol_bh_schedule_wait(), and
 * aiol_bh_schedule() / aiol_bh_free() of a bottom half made with
 * aiol_bh_new_shared().  Any other call from another thread is misuse:
 * a build with assertions on (every buildtype but release) aborts with
 * a message saying so, instead of racing.
 */
#define AIOL_LOOP_CONFINED (1u << 0)

/**
 * Flag of aiol_loop_new_flags(): a signal handled while a poll waits ends
 * the wait, as it ends select() in an interpreter: the wait fails with
 * EINTR, and the poll goes on as after a timeout (it runs what is due,
 * usually nothing, and returns), so that its caller can run its own
 * signal handlers (Python's KeyboardInterrupt).  Without it the wait is
 * retried, as a C service expects.  A signal handled just before the
 * wait begins does not end it (the same race as select()'s); one that a
 * busy-polling window sees ends nothing.
 */
#define AIOL_LOOP_INTERRUPTIBLE (1u << 1)

/**
 * Flag of aiol_loop_new_flags(): io_uring request completions
 * (aioloop/uring.h) run first in each iteration, right after the wait,
 * before embedder phases' first callbacks, bottom halves and fd handlers,
 * instead of after the fd handlers.  For an embedder whose own loop runs
 * completions first (QEMU 10.2's AioContext: CQE handlers, then bottom
 * halves, then fd handlers), so that what a completion schedules runs in
 * the same iteration.  No effect on other fd monitors.
 */
#define AIOL_LOOP_COMPLETIONS_FIRST (1u << 2)

/**
 * Creates a loop, as aiol_loop_new(), with creation flags.
 *
 * @param out      receives the loop on success; untouched on failure
 * @param fdmon    as aiol_loop_new()
 * @param flags    0 (aiol_loop_new()'s loop, which any thread may change
 *                 while another polls it), or AIOL_LOOP_CONFINED,
 *                 AIOL_LOOP_INTERRUPTIBLE and AIOL_LOOP_COMPLETIONS_FIRST,
 *                 or'ed
 * @return 0; -EINVAL for an unknown flag or fd monitor; as aiol_loop_new()
 */
int aiol_loop_new_flags(aiol_loop **out, const char *fdmon, unsigned flags);

/**
 * Tells how @p loop was made.  Any thread.
 * @return true when it was made with AIOL_LOOP_CONFINED.
 */
bool aiol_loop_is_confined(const aiol_loop *loop);

/**
 * Makes the calling thread a confined loop's own thread, as its first poll
 * there would (AIOL_LOOP_CONFINED): for a thread that changes the loop
 * before it polls it.  The previous thread must be done with the loop,
 * ordered before this call by the two threads.  Not from inside a poll.
 * On a loop without AIOL_LOOP_CONFINED it does nothing.  In a release
 * build no owner is tracked, and this only checks it is not inside a poll.
 */
void aiol_loop_owner_set(aiol_loop *loop);

/**
 * Destroys a loop.  Handlers still registered are dropped without their
 * callbacks being called; their fds are not closed.  io_uring requests
 * still in flight (aioloop/uring.h) are cancelled first and waited for,
 * and their completion callbacks run, so the kernel is done with their
 * buffers when this returns.  NULL is a no-op.  Aborts, as misuse, when
 * called from inside the loop's own poll, while phases are added, bottom
 * halves exist, timers are armed or clocks of its own remain, and on
 * io_uring when another thread's ring still has requests in flight (see
 * aioloop/uring.h).  Timers that are not armed may outlive the loop:
 * aiol_timer_free() of a disarmed timer reads nothing of it.
 *
 * In the child of a fork() that did not call aiol_loop_after_fork(), the
 * loop's kernel objects are the parent's: freeing it there makes no
 * syscall on them (no registration is removed, no request cancelled, no
 * callback run); it frees the child's memory and closes the child's
 * copies of the loop's own fds, and the parent's loop goes on unaffected.
 */
void aiol_loop_free(aiol_loop *loop);

/**
 * Gives a loop inherited through fork() kernel objects of its own.  Call it
 * in the child (while it has one thread) before any other use of the loop:
 * until then the child's fds name the parent's epoll instance, io_uring
 * ring and notify eventfd, and using them would change the parent's loop
 * (a handler removed in the child would vanish from the parent's epoll
 * set, a notify would wake the parent).  A child that only frees the loop
 * need not call it (see aiol_loop_free()).
 *
 * It drops the parent's objects without touching them (the child's copies
 * of their fds are closed), then makes a new epoll instance / io_uring
 * ring (poll: a fresh array; the embedding mirror is made again on
 * demand), a new notify eventfd under the same fd number, and registers
 * every handler still set, with its callbacks and opaque as they were.
 * A loop with an embedder's wakeup (aiol_loop_wakeup_set()) keeps it.
 * Bottom halves, timers and phases are the child's memory and carry on.
 *
 * io_uring requests (aioloop/uring.h) in flight at fork time belong to
 * the parent, which still completes them: in the child they are dropped
 * without their callbacks, and their aiol_uring_req handles are invalid.
 * The loop fd of aiol_loop_fd_get() changes: an embedder must get it
 * again.  An aiol_iothread's thread does not exist in the child; its loop
 * must not be used there.  No other thread may have been inside a call on
 * the loop when fork() ran.
 *
 * In the process that created the loop (or once it succeeded in this
 * child) it does nothing and returns 0.  Must not be called from inside
 * the loop's own poll.
 *
 * @return 0; -ENOTSUP for an fd monitor that cannot do it; or -EMFILE,
 *         -ENOMEM, the fd monitor's own error: the loop is then still the
 *         parent's (its monitor untouched; it may already have its own
 *         notify eventfd), and the child may call this again or only
 *         aiol_loop_free() it, which stays safe for the parent.
 */
int aiol_loop_after_fork(aiol_loop *loop);

/**
 * Name of the fd monitor the loop runs on.
 * @return "epoll", "io_uring" or "poll" (a static string).
 */
const char *aiol_loop_fdmon_get(const aiol_loop *loop);

/**
 * The fd monitors this build of the library has, in the order the default
 * choice tries them (aiol_loop_new() with NULL): "epoll", then "io_uring"
 * when built with liburing, then "poll".  Whether one starts on this
 * machine is aiol_loop_new()'s answer.
 * @param index    0 for the first
 * @return the name (a static string), or NULL when @p index is past the
 *         last
 */
const char *aiol_fdmon_name_get(size_t index);

/**
 * Runs one iteration: waits for events (if @p blocking), then dispatches
 * what this call collected.  May be called from inside a callback of the
 * same loop (nested poll); see docs/design.md for the nesting rules.
 * Without @p blocking it only looks at the fds, and not even that while
 * every handler is a wakeup fd (AIOL_FD_NO_PROGRESS), or while busy
 * polling is on and every other handler has a poll callback (the window's
 * round, when it is open, or the next blocking poll consults them), at
 * most 8 polls in a row.
 *
 * @return true when progress was made: a callback other than the loop's
 *         internal ones ran.
 */
bool aiol_loop_poll(aiol_loop *loop, bool blocking);

/**
 * Like aiol_loop_poll() but waits at most until @p deadline_ns on the
 * CLOCK_MONOTONIC clock of aiol_mono_time_get().  A deadline in the past
 * (0, say) never blocks; AIOL_DEADLINE_NONE blocks as long as needed.
 * The wait has nanosecond precision on every fd monitor.  Meant for embedders
 * that own the outer deadline.
 * @return true when progress was made, as aiol_loop_poll().
 */
bool aiol_loop_poll_deadline(aiol_loop *loop, int64_t deadline_ns);

/**
 * Wakes the loop: a blocking poll in progress returns, and the next
 * blocking poll does not sleep.  Any thread.  Costs no syscall unless the
 * loop is blocked or about to block, and then one write to an eventfd
 * (several notifies before the loop runs share it).
 */
void aiol_loop_notify(aiol_loop *loop);

/**
 * Tunes adaptive busy polling, with QEMU's poll-max-ns, poll-grow and
 * poll-shrink semantics.  Before sleeping, the loop calls the poll
 * callbacks of its handlers for up to a window that starts at 0, grows
 * when a wait ended within @p max_ns (multiplied by @p grow; 0 doubles,
 * starting at 4 us) and shrinks when it did not (divided by @p shrink;
 * 0 resets it to 0).  @p max_ns 0 (the default) disables busy polling.
 * Polling never delays a due timer or a notify (aiol_loop_notify(), a
 * bottom half scheduled from another thread), and at most a few
 * iterations in a row skip checking fds.  A handler whose poll callback finds no work for
 * 7 ms from its first poll is no longer polled until its fd fires; with
 * no polled handler left, the loop does not spin.  Before any wait that
 * may block (and in aiol_loop_prepare()) the loop ends busy polling: it
 * calls each polled handler's poll_end, then its poll callback once more,
 * and does not sleep if that found work, so a handler never sleeps with
 * the notifications its poll_begin turned off.  Values whose growth would
 * overflow saturate at @p max_ns.  Polling thread.
 * @return 0, or -EINVAL for negative values.
 */
int aiol_loop_poll_params_set(aiol_loop *loop, int64_t max_ns, int64_t grow,
                              int64_t shrink);

/** A function the polling thread calls around a wait, see below. */
typedef void aiol_block_fn(void *opaque);

/**
 * Has the polling thread call @p before(@p opaque) right before each wait
 * of aiol_loop_poll() or aiol_loop_poll_deadline() that may sleep (one
 * with a deadline other than 0, after busy polling), and @p after(@p
 * opaque) as soon as that wait returns.  They come in pairs, with no loop
 * callback and no loop lock in between, so that a language binding can
 * give up its interpreter lock for exactly the time the loop sleeps (the
 * Python binding releases the GIL there, as PyGObject does through glib's
 * g_main_context_set_poll_func()).  A hook may call only the any-thread
 * functions: aiol_loop_notify(), aiol_bh_schedule() and the fd handler
 * calls.  Non-blocking polls and a host's aiol_loop_prepare()/check()
 * never call them.  @p before and @p after are both set or both NULL (no
 * hooks, the default).  Polling thread, outside any poll.
 */
void aiol_loop_block_hooks_set(aiol_loop *loop, aiol_block_fn *before,
                               aiol_block_fn *after, void *opaque);

/** Copies the loop's counters into @p out. */
void aiol_loop_stats_get(const aiol_loop *loop, aiol_loop_stats *out);

/**
 * Current CLOCK_MONOTONIC time in nanoseconds.
 * @return the time, in nanoseconds.
 */
int64_t aiol_mono_time_get(void);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif

#endif /* AIOLOOP_LOOP_H */
