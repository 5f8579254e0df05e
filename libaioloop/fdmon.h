/* SPDX-License-Identifier: MIT */
/*
 * fdmon.h - the fd-monitor interface: what an fd monitor (fdmon-*.c)
 * implements, and the few parts of the loop it may use.
 *
 * A monitor watches the fds of the loop's handlers and, when the loop
 * waits, tells which are ready.  It owns loop->fdmon_state and nothing else.
 * Five ops are required: init and fini around the loop's life, update
 * whenever a handler is set, replaced or removed, reserve to make room
 * ahead of updates, and wait once per iteration (loop.c asserts them when
 * it starts a monitor).  Everything else is optional: pending, forget
 * (fork), spin_begin, spin_check and look_owed (busy polling and the
 * looks it may skip), and the embed and requests parts.
 *
 * A monitor's whole world is this file and internal.h, and of internal.h
 * it uses only what this list names (tests/check-fdmon.py fails the
 * build's checks when a fdmon-*.c, or a file that includes its private
 * header, uses a loop field or an aiol__ name that this file does not
 * name, includes another private header than its own, or when two files
 * of one monitor call each other):
 *   - loop->fdmon_state, its own;
 *   - loop->lock through aiol__lock(), aiol__unlock() and
 *     aiol__assert_locked(): it protects the fd table and every monitor's
 *     registration state; update runs with it held, wait takes it only to
 *     map events to handlers;
 *   - aiol__assert_poller() for calls made on the polling thread, and
 *     aiol__thread_id() to tell that thread from others;
 *   - aiol__handler_lookup() (under the lock) and, of an aiol__handler,
 *     the fields fd, events (AIOL__EV_IN / AIOL__EV_OUT, 0: none) and
 *     fdmon_slot (the monitor's own, -1 when the handler is new);
 *   - aiol__ready_add() to queue a ready handler on the wait's
 *     aiol__ready_list, with AIOL__EV_* readiness;
 *   - loop->live and aiol__handlers_count() (under the lock), to walk every set
 *     handler, which only the direct-embedding hooks below need;
 *   - loop->single_thread: the loop is polled by one thread for life (an
 *     iothread's), set before its first poll; loop->confined: only the
 *     loop's own thread calls it (AIOL_LOOP_CONFINED), immutable;
 *     loop->interruptible: a wait that EINTR ends returns as after a
 *     timeout instead of waiting again (AIOL_LOOP_INTERRUPTIBLE),
 *     immutable;
 *   - loop->stats.fdmon_waits and loop->stats.bad_fds (polling thread),
 *     loop->stats.fdmon_ctls (any thread, under the lock) and
 *     loop->stats.fdmon_arms (polling thread, under the lock);
 *   - aiol__check() for misuse (aiol__fail() where the check is the
 *     build's), AIOL__HOT for functions on the path of every iteration,
 *     AIOL__NOINLINE for a rare path kept out of a hot function, and
 *     aiol__reserve() to grow an array;
 *   - loop->fdmon, the loop's ops, compared with a monitor's own
 *     (uring.c: is this loop on io_uring);
 *   - the helpers declared below: aiol__events_to_poll(),
 *     aiol__events_from_poll(), aiol__deadline_to_timespec(),
 *     aiol__fd_reserve(), aiol__fd_list_push(), aiol__fd_list_mark(),
 *     aiol__epoll_change(), aiol__update_owed(), aiol__embed_is_direct(),
 *     aiol__embed_direct(), aiol__embed_direct_end() and
 *     aiol__embed_invalidate().
 *
 * Semantics every monitor keeps: level-triggered readiness (a monitor may
 * report a read-only AIOL_FD_DRAINS handler once per arrival); a handler
 * replaced or removed is looked up again at event time, so readiness never
 * reaches a removed handler; an fd without a poll method (a regular file)
 * is ready at every wait; an fd found closed (EBADF, POLLNVAL) is not
 * called back, stops being watched and counts in stats.bad_fds; nothing
 * that cannot report an error (wait, a completion) allocates: room is
 * reserved in update, which can fail.
 */
#ifndef AIOLOOP_FDMON_H
#define AIOLOOP_FDMON_H

#include "internal.h"

/*
 * AIOL__EV_* <-> poll(2) bits, shared by every monitor: io_uring's
 * POLL_ADD takes poll bits, and epoll's EPOLL* bits have the same values
 * (fdmon-epoll.c asserts it).  Input also asks for POLLRDHUP, so a peer's
 * shutdown runs the read callback on every fd monitor.
 */
static inline unsigned aiol__events_to_poll(unsigned events)
{
    return (events & AIOL__EV_IN ? POLLIN | POLLRDHUP : 0u) |
           (events & AIOL__EV_OUT ? POLLOUT : 0u);
}

static inline unsigned aiol__events_from_poll(unsigned ev)
{
    return (ev & POLLIN ? AIOL__EV_IN : 0u) |
           (ev & POLLOUT ? AIOL__EV_OUT : 0u) |
           (ev & POLLERR ? AIOL__EV_ERR : 0u) |
           (ev & (POLLHUP | POLLRDHUP) ? AIOL__EV_HUP : 0u);
}

/*
 * Converts an absolute deadline into a relative timespec for a wait
 * (clock.c).
 * Returns false for AIOL_DEADLINE_NONE (wait forever).  A deadline in the
 * past gives a zero timeout.
 */
struct timespec;
bool aiol__deadline_to_timespec(int64_t deadline_ns, struct timespec *ts);

/*
 * Embedding (aioloop/embed.h): how a host loop drives the monitor.  The
 * loop switches direct embedding on and off in one place (embed.c,
 * aiol__embed_direct()); the monitor only supplies the two halves of the
 * switch and reads the state with aiol__embed_is_direct().
 */
typedef struct aiol__fdmon_embed_ops {
    /*
     * The monitor's own pollable fd: readable while a watched fd is ready
     * (once flush ran).  Polling thread, lock not held.  Leaves direct
     * embedding first (aiol__embed_direct_end() or, under the lock,
     * aiol__embed_direct(loop, false)).  The fd or -errno.
     */
    int (*get_fd)(aiol_loop *loop);
    /*
     * Optional.  Hands pending registration changes to the kernel without
     * waiting, so a host sleeping on get_fd() sees them (none while
     * direct).  Polling thread, lock not held.
     */
    void (*flush)(aiol_loop *loop);
    /*
     * Optional (NULL: no direct embedding, embed_fds gives -ENOTSUP).
     * A host is about to poll the watched fds itself: drop what the kernel
     * holds for them (it would cost a wakeup callback per event), leaving
     * each dirty for the way back.  Called with aiol__embed_is_direct()
     * already true; returns false to refuse (the loop fd this round: e.g.
     * io_uring with requests on its ring), nothing changed.  Under the
     * lock; polling thread.
     */
    bool (*direct_enter)(aiol_loop *loop);
    /*
     * Optional.  The host goes back to get_fd(): once this returns and
     * flush() ran, the fd reports every watched fd again.  Called with
     * aiol__embed_is_direct() already false.  Under the lock.
     */
    void (*direct_leave)(aiol_loop *loop);
} aiol__fdmon_embed_ops;

/* Completions of the monitor's own requests (io_uring, aioloop/uring.h). */
typedef struct aiol__fdmon_req_ops {
    /* Runs queued completions after fd handlers; returns progress. */
    bool (*dispatch)(aiol_loop *loop);
    /*
     * First step of loop teardown: cancels and waits for every request in
     * flight and runs its completion, while the loop is still whole.
     */
    void (*quiesce)(aiol_loop *loop);
} aiol__fdmon_req_ops;

typedef struct aiol__fdmon_ops {
    const char *name; /* AIOLOOP_FDMON and aiol_loop_new() name it so */
    /*
     * Allocates loop->fdmon_state and the kernel objects.  0 or -errno
     * (ENOSYS, EPERM, EMFILE, ENOMEM...), leaving nothing behind; the
     * default choice then tries the next monitor.
     */
    int (*init)(aiol_loop *loop);
    /* Frees loop->fdmon_state; the handlers are gone from the table. */
    void (*fini)(aiol_loop *loop);
    /*
     * Moves the registration of one fd from handler @old (NULL: none) to
     * handler @new_ (NULL: none); either may watch no events.  Under the
     * lock, from any thread: a change the kernel sees only at the next
     * wait is fine (the loop wakes a sleeping poller after every update).
     * A removal (@new_ NULL or watching nothing) must not fail.  0 or
     * -errno, nothing changed on error; or AIOL__UPDATE_OWED: the change
     * joined deferred ones that an earlier update returned 0 for and that
     * no wait has taken yet, so that update's wake (or its finding the
     * poller awake, through F4) covers this one too and the caller skips
     * its fence.
     */
    int (*update)(aiol_loop *loop, aiol__handler *old, aiol__handler *new_);
#define AIOL__UPDATE_OWED 1
    /*
     * Under the lock, from any thread: makes room for @more handlers
     * beyond those set now, on fds up to @max_fd, so that an update()
     * adding one of them allocates nothing (aiol_fd_reserve()).  0 or
     * -ENOMEM, what was reserved kept.
     */
    int (*reserve)(aiol_loop *loop, size_t more, int max_fd);
    /*
     * Waits until @deadline_ns (0: only look; AIOL_DEADLINE_NONE: no
     * limit), retrying EINTR (on an interruptible loop EINTR ends it as a
     * timeout would), and queues every ready handler with
     * aiol__ready_add() and its readiness.  Polling thread, lock not held.
     * The number queued, or -errno for a failure the loop cannot survive
     * (it aborts: so a wait must not fail on memory or a passing error).
     */
    int (*wait)(aiol_loop *loop, aiol__ready_list *ready, int64_t deadline_ns);
    /*
     * Optional.  True when a wait must not sleep: the monitor already
     * knows of work (always-ready fds, queued completions).  Polling
     * thread, lock not held.
     */
    bool (*pending)(aiol_loop *loop);
    /*
     * Optional.  The child of a fork (fork.c), its only thread: frees
     * loop->fdmon_state (setting it NULL) and closes the child's copies of
     * the monitor's fds, with no syscall on the kernel objects shared
     * with the parent (no epoll_ctl, no io_uring_enter or register, no
     * write into a shared ring).  NULL: aiol_loop_after_fork() gives
     * -ENOTSUP.
     */
    void (*forget)(aiol_loop *loop);
    /*
     * Optional.  Busy polling is about to spin (busypoll.c): hands the
     * kernel work queued for the next wait (io_uring requests), so that
     * it runs while the loop spins instead of after.  Polling thread,
     * lock not held.
     */
    void (*spin_begin)(aiol_loop *loop);
    /*
     * Optional.  True when the monitor holds work the poll callbacks
     * cannot see (a request's completion, readiness of a handler not
     * being polled) for the next wait to reap; busy polling then ends its
     * window and the iteration looks instead.  Called every round: no
     * syscall unless the kernel holds new work.  Polling thread, lock not
     * held.
     */
    bool (*spin_check)(aiol_loop *loop);
    /*
     * Optional.  True when a look (a wait with deadline 0) has work of
     * the monitor's own to do even while every handler is a wakeup fd:
     * a request in flight, a poll whose cancel releases a closed file.
     * NULL: never; the loop then skips such looks (loop.c).  Polling
     * thread, lock not held.
     */
    bool (*look_owed)(aiol_loop *loop);
    const aiol__fdmon_embed_ops *embed; /* optional: NULL, no host loop */
    const aiol__fdmon_req_ops *requests; /* optional: NULL, no requests */
} aiol__fdmon_ops;

extern const aiol__fdmon_ops aiol__fdmon_epoll;
extern const aiol__fdmon_ops aiol__fdmon_poll;
#ifdef AIOL_HAVE_IO_URING
extern const aiol__fdmon_ops aiol__fdmon_io_uring;
#endif

/*
 * Grows a monitor's fd-indexed array *@arrp (*@cap entries of @esize
 * bytes) to hold @fd, then its two fd lists *@l1 and *@l2 (capacities
 * *@c1, *@c2) to hold every fd number the array covers.  For lists that
 * hold each fd at most once (aiol__fd_list_mark()), a push then never
 * fails, so the monitor can list fds where it could not report ENOMEM (a
 * wait, a completion).  0 or -ENOMEM (arrays may have grown; no entry
 * changed).
 */
int aiol__fd_reserve(void *arrp, size_t *cap, size_t esize, int fd, int **l1,
                     size_t *c1, int **l2, size_t *c2);

/* Appends @fd to the list *@v of *@n fds (capacity *@cap).  0 or -ENOMEM. */
int aiol__fd_list_push(int **v, size_t *n, size_t *cap, int fd);

/*
 * aiol__fd_list_push() unless *@listed says @fd is on the list already;
 * sets *@listed.  0 or -ENOMEM (then nothing changed).
 */
int aiol__fd_list_mark(int **v, size_t *n, size_t *cap, bool *listed, int fd);

/*
 * Moves @fd's registration in epoll instance @epfd from events @oev to
 * @nev (AIOL__EV_*, 0: not registered): one epoll_ctl, none if unchanged;
 * a DEL of an fd already gone and a MOD that needs an ADD are handled.
 * Under the lock (it counts stats.fdmon_ctls).  0 or -errno.  (util.c;
 * the poll monitor's embedding mirror uses it.)
 */
int aiol__epoll_change(aiol_loop *loop, int epfd, int fd, unsigned oev,
                       unsigned nev);

/*
 * The table changed, the monitor left direct mode or (io_uring) a request
 * went out: what aiol_loop_embed_fds() listed last is stale.  Under
 * loop->lock, or on the polling thread (which cannot be inside
 * aiol_loop_embed_fds() meanwhile).  seq_cst: see embed.c.
 */
static inline void aiol__embed_invalidate(aiol_loop *loop)
{
    if (loop->embed_listed) {
        atomic_fetch_add_explicit(&loop->embed_gen, 1, memory_order_seq_cst);
    }
}
/* True while a host polls the watched fds itself (embed.c).  Any thread. */
static inline bool aiol__embed_is_direct(aiol_loop *loop)
{
    return atomic_load_explicit(&loop->direct, memory_order_relaxed);
}

/*
 * Under the lock.  What a monitor's update() returns after it deferred a
 * change to its next flush, with *@owed its "a set since the last flush
 * returned 0" flag, which the flush clears: AIOL__UPDATE_OWED when such a
 * set's wake covers this change too, else 0 (and, for a set, raises the
 * flag).  Removals (@is_set false) never raise it: their callers wake
 * nobody.  In direct mode every change returns 0: flushes leave the dirty
 * list alone there and the host must re-list the fds after each change.
 */
static inline int aiol__update_owed(aiol_loop *loop, bool *owed, bool is_set)
{
    aiol__assert_locked(loop);
    if (*owed && !aiol__embed_is_direct(loop)) {
        return AIOL__UPDATE_OWED;
    }
    if (is_set) {
        *owed = true;
    }
    return 0;
}

/*
 * Under the lock; polling thread.  Enters (@direct) or leaves direct
 * embedding through the monitor's direct_enter / direct_leave, once per
 * change.  Returns whether the loop is in direct mode now.
 */
bool aiol__embed_direct(aiol_loop *loop, bool direct);

/* Polling thread, lock not held: leaves direct embedding if in it. */
void aiol__embed_direct_end(aiol_loop *loop);

#endif /* AIOLOOP_FDMON_H */
