/* SPDX-License-Identifier: MIT */
/*
 * epoll-priv.h - what the epoll monitor's two files share: the monitor
 * (fdmon-epoll.c: registration, flushes, waits, embedding) and its lazy
 * removal (epoll-removal.c: kept registrations, rebuilding the set).
 */
#ifndef AIOLOOP_EPOLL_PRIV_H
#define AIOLOOP_EPOLL_PRIV_H

#include <errno.h>
#include <sys/epoll.h>

#include "fdmon.h"

/* Per fd number; under loop->lock. */
typedef struct aiol__epoll_fd {
    uint8_t kernel; /* AIOL__EV_* the registration under gen holds (0: none) */
    uint8_t always; /* AIOL__EV_* reported at every wait (epoll refused it) */
    bool dirty;     /* on the dirty list */
    bool kept : 1;  /* kernel != 0 but its handler is gone (lazy removal,
                       see the top); the fd may name another file by now */
    bool gone : 1;  /* kernel == 0 because we dropped gen's registration
                       (a DEL that succeeded, a rebuild): an event of gen
                       harvested before that is a leftover, not stale */
    uint32_t gen;   /* of the fd's last successful ADD; in data.u64 >> 32 */
} aiol__epoll_fd;

typedef struct aiol__epoll_state {
    int epfd;
    bool no_pwait2;             /* polling thread: epoll_pwait2 gave ENOSYS */
    int nevents;                /* polling thread */
    struct epoll_event *events; /* polling thread */
    aiol__epoll_fd *fds;              /* loop->lock; indexed by fd */
    size_t nfds;                /* loop->lock */
    int *dirty;                 /* loop->lock: fds flush() must look at */
    size_t ndirty, dirty_cap;   /* loop->lock */
    int *always;                /* loop->lock: fds with always != 0 */
    size_t nalways, always_cap; /* loop->lock */
    /*
     * Set under loop->lock when the dirty list becomes non-empty, read
     * without it by flush() to skip the lock when nothing is dirty.  The
     * seq_cst fences F1 (the poller, after announcing notify_me) and F4
     * (handler.c, after a deferred change) pair so that either the poller
     * sees the flag or the changer sees notify_me and wakes it.
     */
    atomic_bool has_dirty;
    /*
     * loop->lock.  A set since the last flush returned 0, so its caller
     * wakes the poller if it may sleep; later sets return
     * AIOL__UPDATE_OWED until the next flush (fdmon.h).
     */
    bool owed;
    atomic_bool has_always;     /* nalways != 0; written under loop->lock */
    size_t nkept;               /* fds with kept set; loop->lock */
    /*
     * aiol__thread_id() of the thread whose waits harvest events, 0
     * before the first wait: a removal on it may be lazy (see the top).
     * Written under loop->lock by that thread, which reads it without.
     */
    uint64_t waiter;
    /*
     * aiol_loop_fd_get() gave the epoll fd to a host, which may watch it
     * in an epoll set of its own (libev, libuv, a VMM's loop): replacing
     * the instance would silently drop it there.  So from then on a
     * removal DELs at once and nothing rebuilds (see the top).  Written
     * under loop->lock by the polling thread, which may read it without.
     */
    bool handed_out;
} aiol__epoll_state;

/*
 * Under loop->lock.  One epoll_ctl of @fd in @epfd for @ev, stamped with
 * generation @gen.  0 or -errno.  (Inline: both files make them.)
 */
static inline int aiol__epoll_ctl(aiol_loop *loop, int epfd, int op, int fd,
                                  unsigned ev, uint32_t gen)
{
    struct epoll_event e = {
        .events = aiol__events_to_poll(ev),
        .data.u64 = (uint64_t)gen << 32 | (uint32_t)fd,
    };

    aiol__assert_locked(loop);
    loop->stats.fdmon_ctls++;
    return epoll_ctl(epfd, op, fd, &e) == 0 ? 0 : -errno;
}

/*
 * Under loop->lock.  Sets or clears @fd's kept flag, counting it (inline:
 * every removal and probe passes here).
 */
static inline void aiol__epoll_kept_set(aiol__epoll_state *s, int fd,
                                        bool kept)
{
    aiol__epoll_fd *st = &s->fds[fd];

    s->nkept += (size_t)kept - (size_t)st->kept;
    st->kept = kept;
}
/*
 * Under loop->lock.  DELs @fd's registration now; true when the kernel
 * dropped it (the fd still names its file).
 */
bool aiol__epoll_del(aiol_loop *loop, aiol__epoll_state *s, int fd);
/*
 * Under loop->lock; polling thread.  Replaces the epoll instance with
 * one holding only the live handlers' registrations, at the same fd
 * number; true when it did.
 */
bool aiol__epoll_rebuild(aiol_loop *loop, aiol__epoll_state *s);
/*
 * Polling thread, lock not held.  Thread @me starts to poll the loop:
 * the kept registrations are its predecessor's removals, dropped without
 * touching their numbers.
 */
void aiol__epoll_waiter_set(aiol_loop *loop, aiol__epoll_state *s,
                            uint64_t me);

#endif /* AIOLOOP_EPOLL_PRIV_H */
