/* SPDX-License-Identifier: MIT */
/*
 * fdmon-epoll.c - the epoll(7) fd monitor.
 *
 * Design.  Every handler that watches events is registered level-triggered
 * with its fd and the registration's generation in data.u64; the
 * fd-indexed table maps an event back to the handler that is current when
 * the event is harvested, so replacing a handler's callbacks never needs
 * the kernel.  Consequences:
 *
 *   - at most one epoll_ctl per real change; re-arming a handler with the
 *     same events makes no syscall;
 *   - dispatch cost is O(ready): epoll_wait returns only ready fds;
 *   - a bounded wait has nanosecond precision through epoll_pwait2 (Linux
 *     5.11); where that is missing, epoll_wait rounds the timeout up to the
 *     next millisecond so we never wake before the deadline.  A look
 *     (timeout 0) and an unbounded wait use plain epoll_wait: cheaper.
 *
 * Deferred adds.  A new registration (ADD) or a change of events (MOD)
 * only marks the fd dirty; the polling thread hands dirty fds to the
 * kernel right before it waits (and in aiol_loop_prepare(), for a host
 * loop sleeping on the epoll fd).  An fd added and removed in between
 * never reaches the kernel: handler churn costs no syscall.  Setting a
 * handler makes no syscall at all, so a closed fd is only found out when
 * its ADD fails (below).
 *
 * Lazy removal (epoll-removal.c).  A removal on the polling thread makes
 * no syscall: the registration is kept until the fd is set again, it
 * reports an event, or its file turns out to outlive the fd; a removal
 * on any other thread DELs at once.
 *
 * Kernel quirks.  epoll watches (file, fd) pairs and drops a registration
 * by itself only when the last reference to the file goes away.  DEL of an
 * fd that was closed before its handler was removed fails with EBADF or
 * ENOENT; that is the state we wanted, so it is not an error.  MOD on an
 * fd number now held by a new file fails with ENOENT: we ADD instead.
 * Regular files, directories and other files without a poll method
 * cannot be watched (ADD fails with EPERM): those are reported ready at
 * every wait, for the events their handler wants, which is what poll(2)
 * reports for them and what the poll and io_uring monitors do.  An fd
 * that is closed when its ADD reaches the kernel (EBADF) is not watched
 * (no callback) until its handler changes, as on io_uring and poll, and
 * counted in stats.bad_fds.  An ADD or MOD the kernel refuses for now
 * (ENOMEM; ENOSPC, max_user_watches reached) stays dirty and is retried
 * by the next flush, and a wait sleeps at most RETRY_NS meanwhile, so
 * such a handler is late, never lost.
 *
 * Threading: update() runs under loop->lock; the dirty and always-ready
 * lists are only touched under it.  A change made while the polling thread
 * sleeps wakes it (handler.c notifies when notify_me says it may sleep).
 * wait() flushes under the lock, sleeps without it and takes it once to
 * map the harvested events to handlers.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include "fdmon.h"
#include "epoll-priv.h"

#define EVENTS_MIN 64
#define EVENTS_MAX 1024
/* A registration the kernel refused for now (ENOMEM, ENOSPC) is retried
 * by the next flush; a wait lasts at most this long meanwhile. */
#define RETRY_NS (1000 * 1000)


static int epoll_init(aiol_loop *loop)
{
    aiol__epoll_state *s = calloc(1, sizeof(*s));

    if (s == NULL) {
        return -ENOMEM;
    }
    s->nevents = EVENTS_MIN;
    s->events = calloc((size_t)s->nevents, sizeof(*s->events));
    s->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (s->events == NULL || s->epfd < 0) {
        int ret = s->events == NULL ? -ENOMEM : -errno;

        if (s->epfd >= 0) {
            close(s->epfd);
        }
        free(s->events);
        free(s);
        return ret;
    }
    loop->fdmon_state = s;
    return 0;
}

static void epoll_fini(aiol_loop *loop)
{
    aiol__epoll_state *s = loop->fdmon_state;

    close(s->epfd);
    free(s->events);
    free(s->fds);
    free(s->dirty);
    free(s->always);
    free(s);
    loop->fdmon_state = NULL;
}

/* Under loop->lock.  Takes @fd off the always-ready list. */
static void always_drop(aiol__epoll_state *s, int fd)
{
    for (size_t i = 0; i < s->nalways; i++) {
        if (s->always[i] == fd) {
            s->always[i] = s->always[--s->nalways];
            break;
        }
    }
    s->fds[fd].always = 0;
    atomic_store_explicit(&s->has_always, s->nalways != 0,
                          memory_order_relaxed);
}

/*
 * Under loop->lock.  The reserve op (fdmon.h), which a set past the array
 * uses too: makes room for @max_fd in the per-fd array and, since an fd
 * is on the dirty and the always-ready list at most once, room on both
 * lists for every fd number the array covers: pushing onto them later,
 * where a failure could not be reported (a flush, a wait), never
 * allocates.  Nothing here grows with the handler count (@more).  0 or
 * -ENOMEM, the registrations unchanged.
 */
static int epoll_reserve(aiol_loop *loop, size_t more, int max_fd)
{
    aiol__epoll_state *s = loop->fdmon_state;

    aiol__assert_locked(loop);
    (void)more;
    if ((size_t)max_fd < s->nfds) {
        return 0; /* (the lists grew with the array) */
    }
    return aiol__fd_reserve(&s->fds, &s->nfds, sizeof(*s->fds), max_fd,
                            &s->dirty, &s->dirty_cap, &s->always,
                            &s->always_cap);
}

/* Under loop->lock.  Puts @fd on the dirty list (room: epoll_reserve()). */
static inline void mark_dirty(aiol__epoll_state *s, int fd)
{
    if (!s->fds[fd].dirty) {
        aiol__check(s->ndirty < s->dirty_cap,
                    "dirty list full despite epoll_reserve()");
        s->dirty[s->ndirty++] = fd;
        s->fds[fd].dirty = true;
    }
    atomic_store_explicit(&s->has_dirty, true, memory_order_relaxed);
}

/* Under loop->lock.  A new registration of @fd, under the next generation. */
static int add(aiol_loop *loop, aiol__epoll_state *s, int fd, unsigned ev)
{
    aiol__epoll_fd *st = &s->fds[fd];
    int ret =
        aiol__epoll_ctl(loop, s->epfd, EPOLL_CTL_ADD, fd, ev, st->gen + 1);

    if (ret == 0) {
        st->gen++;
        st->kernel = (uint8_t)ev;
        st->gone = false;
        aiol__epoll_kept_set(s, fd, false);
    }
    return ret;
}

/* Under loop->lock.  forget()'s DEL and always-ready cases. */
static AIOL__NOINLINE void forget_slow(aiol_loop *loop, aiol__epoll_state *s,
                                      int fd)
{
    aiol__epoll_fd *st = &s->fds[fd];

    if (st->kept && (s->handed_out || (!loop->confined &&
                                       s->waiter != aiol__thread_id()))) {
        (void)aiol__epoll_del(loop, s, fd); /* (a failure: closed first) */
    }
    if (st->always != 0) {
        always_drop(s, fd);
    }
}

/*
 * Under loop->lock.  @fd, registered, stops being watched.  No DEL on the
 * polling thread: the registration is kept (lazy removal, see the top; a
 * confined loop has no other thread).  Elsewhere, or once handed out, DEL
 * now.  A dirty entry left behind finds nothing to do.
 */
static inline void forget(aiol_loop *loop, aiol__epoll_state *s, int fd)
{
    aiol__epoll_fd *st = &s->fds[fd]; /* (room: the fd got it when added) */

    aiol__epoll_kept_set(s, fd, st->kernel != 0);
    if ((st->kept && (s->handed_out || !loop->confined)) || st->always != 0) {
        forget_slow(loop, s, fd);
    }
}

/* Under loop->lock.  A set's change for the next flush (room: reserved). */
static inline int mark_set(aiol_loop *loop, aiol__epoll_state *s, int fd)
{
    mark_dirty(s, fd);
    return aiol__update_owed(loop, &s->owed, true);
}

/* Under loop->lock.  mark_set() of an fd past the array, which grows. */
static AIOL__NOINLINE int mark_set_grow(aiol_loop *loop,
                                        aiol__epoll_state *s, int fd)
{
    int ret = epoll_reserve(loop, 0, fd);

    return ret < 0 ? ret : mark_set(loop, s, fd);
}

/*
 * Under loop->lock.  Records the change for the next flush.  A removal
 * needs no room, so it cannot fail, and its DEL always reaches the
 * kernel; an add or a change of events only marks the fd dirty.
 */
static int epoll_update(aiol_loop *loop, aiol__handler *old,
                        aiol__handler *new_)
{
    aiol__epoll_state *s = loop->fdmon_state;

    aiol__assert_locked(loop);
    if (new_ == NULL || new_->events == 0) {
        if (old != NULL && old->events != 0) {
            forget(loop, s, old->fd);
        }
        return 0;
    }
    if (old != NULL && old->events == new_->events) {
        return 0; /* unchanged re-arm: nothing for the kernel */
    }
    if ((size_t)new_->fd >= s->nfds) {
        return mark_set_grow(loop, s, new_->fd);
    }
    return mark_set(loop, s, new_->fd);
}

/*
 * Under loop->lock.  Brings @fd's registration in line with its handler.
 * Returns true when the kernel refused it for now (out of memory or of
 * max_user_watches): the fd must be tried again.
 */
static bool sync_fd(aiol_loop *loop, aiol__epoll_state *s, int fd)
{
    aiol__handler *node = aiol__handler_lookup(loop, fd);
    unsigned want = node ? node->events : 0u;
    aiol__epoll_fd *st = &s->fds[fd];
    int ret;

    aiol__assert_locked(loop);
    st->dirty = false;
    if (st->always != 0) {
        st->always = (uint8_t)want; /* still unpollable; 0 cannot happen */
        return false;
    }
    if (st->kept) {
        if (want == 0) {
            return false; /* still nobody's: stays kept */
        }
        ret = add(loop, s, fd, want); /* the probe (see the top) */
        if (ret == -EEXIST) {
            /* the kept registration, same file */
            aiol__epoll_kept_set(s, fd, false);
            ret = want == st->kernel
                      ? 0
                      : aiol__epoll_ctl(loop, s->epfd, EPOLL_CTL_MOD, fd,
                                        want, st->gen);
        } else if (ret < 0 && ret != -ENOMEM && ret != -ENOSPC) {
            /* another file or none: its own case below */
            aiol__epoll_kept_set(s, fd, false);
            st->kernel = 0;
            st->gone = false;
        }
    } else if (want == st->kernel) {
        return false;
    } else if (st->kernel == 0) {
        ret = add(loop, s, fd, want);
    } else {
        ret = aiol__epoll_ctl(loop, s->epfd,
                              want ? EPOLL_CTL_MOD : EPOLL_CTL_DEL, fd, want,
                              st->gen);
        if (ret == -ENOENT || ret == -EBADF) {
            st->kernel = 0; /* closed under its handler, maybe reused */
            ret = want ? add(loop, s, fd, want) : 0;
        }
    }
    if (ret == 0) {
        st->kernel = (uint8_t)want;
    } else if (ret == -EPERM) {
        /* No poll method: always ready.  (Room: epoll_reserve().) */
        aiol__check(aiol__fd_list_push(&s->always, &s->nalways,
                                       &s->always_cap, fd) == 0,
                    "always-ready list full despite epoll_reserve()");
        st->always = (uint8_t)want;
        atomic_store_explicit(&s->has_always, true, memory_order_relaxed);
    } else if (ret == -EBADF) {
        loop->stats.bad_fds++; /* closed before it reached the kernel */
    } else if (ret == -ENOMEM || ret == -ENOSPC) {
        return true;
    }
    /* (any other refusal: not watched until its handler changes) */
    return false;
}

/* Under loop->lock.  Hands every pending change to the kernel. */
static void flush_locked(aiol_loop *loop, aiol__epoll_state *s)
{
    size_t keep = 0;

    aiol__assert_locked(loop);
    for (size_t i = 0; i < s->ndirty; i++) {
        int fd = s->dirty[i];

        if (sync_fd(loop, s, fd)) {
            s->fds[fd].dirty = true; /* refused for now: stays listed */
            s->dirty[keep++] = fd;
        }
    }
    s->ndirty = keep;
    s->owed = false;
    atomic_store_explicit(&s->has_dirty, keep != 0, memory_order_relaxed);
}

/*
 * Under loop->lock.  Direct embedding (fdmon.h): a watched fd that is
 * also in an epoll set costs the kernel a callback into epoll at every
 * wakeup on it, for nothing while the host polls the fds itself.  So
 * entering direct mode takes the fds out of the set (one DEL each, at
 * most the few fds direct mode is for) and leaves them dirty; while
 * direct, flushes leave them so; leaving flushes them back.
 */
static bool epoll_direct_enter(aiol_loop *loop)
{
    aiol__epoll_state *s = loop->fdmon_state;
    aiol__handler *node;

    aiol__assert_locked(loop);
    AIOL_LIST_FOREACH(node, &loop->live, node_live) {
        aiol__epoll_fd *st = &s->fds[node->fd];

        if (st->kernel == 0) {
            continue;
        }
        /* (a failure: the registration is another file's; see the wait) */
        (void)aiol__epoll_del(loop, s, node->fd);
        mark_dirty(s, node->fd);
    }
    return true;
}

static void epoll_direct_leave(aiol_loop *loop)
{
    flush_locked(loop, loop->fdmon_state);
}

/* epoll_flush() when some change is pending. */
static void epoll_flush_dirty(aiol_loop *loop, aiol__epoll_state *s)
{
    aiol__lock(loop);
    if (!aiol__embed_is_direct(loop)) {
        flush_locked(loop, s);
    }
    aiol__unlock(loop);
}

/*
 * Hands every pending change to the kernel.  Polling thread.  Inline in
 * each wait, which pays one load when nothing changed.
 */
static inline void epoll_flush(aiol_loop *loop)
{
    aiol__epoll_state *s = loop->fdmon_state;

    /* seq_cst: pairs with F4 through F1 (see aiol__epoll_state, embed.c). */
    if (atomic_load_explicit(&s->has_dirty, memory_order_seq_cst)) {
        epoll_flush_dirty(loop, s);
    }
}

/* True when a wait must not sleep: some fd is always ready.  Polling thread. */
AIOL__HOT
static bool epoll_pending(aiol_loop *loop)
{
    aiol__epoll_state *s = loop->fdmon_state;

    return atomic_load_explicit(&s->has_always, memory_order_relaxed);
}

AIOL__HOT
static int epoll_wait_once(aiol__epoll_state *s, int64_t deadline_ns)
{
    struct timespec ts;
    bool finite;
    int ms;

    /*
     * A look (deadline 0) or an unbounded wait needs no timespec: plain
     * epoll_wait skips copying and converting one, which is a measurable
     * share of an empty poll.
     */
    if (deadline_ns == 0 || deadline_ns == AIOL_DEADLINE_NONE) {
        return epoll_wait(s->epfd, s->events, s->nevents,
                          deadline_ns == 0 ? 0 : -1);
    }
    finite = aiol__deadline_to_timespec(deadline_ns, &ts);
    if (!s->no_pwait2) {
        int n = epoll_pwait2(s->epfd, s->events, s->nevents,
                             finite ? &ts : NULL, NULL);
        if (n >= 0 || errno != ENOSYS) {
            return n;
        }
        s->no_pwait2 = true;
    }
    if (!finite) {
        ms = -1;
    } else if (ts.tv_sec >= 1000000) {
        ms = 1000000000;
    } else {
        ms = (int)(ts.tv_sec * 1000 + (ts.tv_nsec + 999999) / 1000000);
    }
    return epoll_wait(s->epfd, s->events, s->nevents, ms);
}

AIOL__HOT
static int epoll_wait_ready(aiol_loop *loop, aiol__ready_list *ready,
                            int64_t deadline_ns)
{
    aiol__epoll_state *s = loop->fdmon_state;
    uint64_t me = aiol__thread_id();
    bool always, stale = false;
    int n, queued = 0;

    loop->stats.fdmon_waits++;
    if (me != s->waiter) {
        aiol__epoll_waiter_set(loop, s, me); /* kept removals: not ours */
    }
    aiol__embed_direct_end(loop); /* our own wait: the set must be whole */
    epoll_flush(loop);
    if (deadline_ns != 0 &&
        atomic_load_explicit(&s->has_dirty, memory_order_relaxed)) {
        /* a registration the kernel refused: do not sleep long on it */
        int64_t retry = aiol_mono_time_get() + RETRY_NS;

        deadline_ns = deadline_ns < retry ? deadline_ns : retry;
    }
    always = atomic_load_explicit(&s->has_always, memory_order_relaxed);
    while ((n = epoll_wait_once(s, always ? 0 : deadline_ns)) < 0) {
        if (errno != EINTR) {
            return -errno;
        }
        if (loop->interruptible) {
            return 0; /* (as a timeout: the caller runs its handlers) */
        }
    }
    if (n == 0 && !always) {
        return 0;
    }
    aiol__lock(loop);
    for (int i = 0; i < n; i++) {
        int fd = (int)(uint32_t)s->events[i].data.u64;
        aiol__epoll_fd *st = &s->fds[fd];
        aiol__handler *node;

        if (st->gen != (uint32_t)(s->events[i].data.u64 >> 32) ||
            (st->kernel == 0 && !st->gone)) {
            stale = true; /* a registration no fd reaches (see the top) */
            continue;
        }
        if (st->kernel == 0) {
            continue; /* harvested before a removal DELed it */
        }
        if (st->kept) {
            /* nobody's any more: DEL it now, or it is another file's */
            stale = stale || !aiol__epoll_del(loop, s, fd);
            continue;
        }
        node = aiol__handler_lookup(loop, fd);
        if (node != NULL && node->events != 0) {
            aiol__ready_add(ready, node,
                            aiol__events_from_poll(s->events[i].events));
            queued++;
        }
    }
    if (stale && !s->handed_out) {
        aiol__epoll_rebuild(loop, s);
    }
    for (size_t i = 0; i < s->nalways; i++) {
        aiol__handler *node = aiol__handler_lookup(loop, s->always[i]);

        if (node != NULL && node->events != 0) {
            aiol__ready_add(ready, node, node->events);
            queued++;
        }
    }
    aiol__unlock(loop);

    /* A full array means more may be ready: grow for next time. */
    if (n == s->nevents && s->nevents < EVENTS_MAX) {
        struct epoll_event *bigger =
            realloc(s->events, 2 * (size_t)s->nevents * sizeof(*bigger));
        if (bigger != NULL) {
            s->events = bigger;
            s->nevents *= 2;
        }
    }
    return queued;
}

static int epoll_get_fd(aiol_loop *loop)
{
    aiol__epoll_state *s = loop->fdmon_state;

    aiol__embed_direct_end(loop);
    if (!s->handed_out) {
        /*
         * The last moment the instance may be replaced: drop the kept
         * registrations with it, so none can turn stale behind a host.
         * If the kernel refuses, DEL them one by one.
         */
        aiol__lock(loop);
        if (s->nkept != 0) {
            (void)aiol__epoll_rebuild(loop, s);
        }
        for (size_t fd = 0; fd < s->nfds; fd++) {
            if (s->fds[fd].kept) {
                (void)aiol__epoll_del(loop, s, (int)fd);
            }
        }
        s->handed_out = true;
        aiol__unlock(loop);
    }
    return s->epfd;
}

const aiol__fdmon_ops aiol__fdmon_epoll = {
    .name = "epoll",
    .init = epoll_init,
    .fini = epoll_fini,
    .update = epoll_update,
    .reserve = epoll_reserve,
    .wait = epoll_wait_ready,
    .pending = epoll_pending,
    .forget = epoll_fini, /* it only closes the child's fds and frees: fork.c */
    .embed = &(const aiol__fdmon_embed_ops){
        .get_fd = epoll_get_fd,
        .flush = epoll_flush,
        .direct_enter = epoll_direct_enter,
        .direct_leave = epoll_direct_leave,
    },
};
