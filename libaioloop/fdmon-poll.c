/* SPDX-License-Identifier: MIT */
/*
 * fdmon-poll.c - the poll(2) fd monitor: portable baseline and the
 * reference for correctness.
 *
 * Design.  A persistent pollfd array holds one entry per handler that
 * watches events; handler->fdmon_slot is its index.  Add appends, remove
 * moves the last entry into the hole, replace rewrites the entry in place:
 * all O(1) and free of syscalls.  The wait itself is O(n) because poll(2)
 * is; dispatch stays O(ready).
 *
 * Threading: the array is protected by loop->lock.  Since other threads may
 * change handlers while the polling thread sleeps, wait() copies the array
 * under the lock and sleeps on the copy, then maps results back through
 * the fd table, so a handler replaced during the sleep gets the event and a
 * removed one gets nothing.
 *
 * Kernel quirks.  An fd closed while watched (or before it was set: set
 * makes no syscall) comes back as POLLNVAL on every call.  We stop
 * watching that entry (fd set negative, which poll ignores) instead of
 * spinning, and count it in stats.bad_fds; setting the handler again
 * re-enables it.  Regular files are always readable and writable to
 * poll(2).  ppoll gives the wait nanosecond precision.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>
#include <time.h>

#include "fdmon.h"

typedef struct poll_state {
    struct pollfd *pfds; /* lock */
    size_t n, cap;       /* lock */
    /*
     * The wait sleeps on copy, without the lock, so only the polling
     * thread may replace it, and the wait must not allocate (it could not
     * report ENOMEM).  So update() keeps spare, an unused array, big
     * enough for cap whenever copy is not, and the wait swaps it in.
     */
    struct pollfd *copy; /* polling thread; replaced under lock */
    size_t copy_cap;     /* polling thread; written under lock */
    struct pollfd *spare; /* lock */
    size_t spare_cap;     /* lock */
    int embed_epfd;      /* epoll mirror for a host loop, or -1; lock;
                            kept empty while direct (fdmon.h) */
    /*
     * Entries the mirror refused (EPERM: regular files and other files
     * without a poll method), by slot, like pfds; and their count.  While
     * there are any, a host sleeping on the mirror would never hear of
     * them, so pending() says "do not sleep" (as epoll's always-ready
     * list does).  lock; has_unmirrored is read without it.
     */
    bool *unmirrored;       /* lock; by slot */
    size_t unmirrored_cap;  /* lock */
    size_t nunmirrored;     /* lock */
    atomic_bool has_unmirrored; /* mirror in use, not direct, nunmirrored */
    /*
     * lock.  A set since the wait last copied pfds returned 0, so its
     * caller wakes the poller if it may sleep; later sets return
     * AIOL__UPDATE_OWED until the next copy (fdmon.h).  Only without a
     * mirror: a host sleeping on the mirror is woken by every set.
     */
    bool owed;
} poll_state;

static int poll_init(aiol_loop *loop)
{
    poll_state *s = calloc(1, sizeof(*s));

    if (s == NULL) {
        return -ENOMEM;
    }
    s->embed_epfd = -1;
    loop->fdmon_state = s;
    return 0;
}

static void poll_fini(aiol_loop *loop)
{
    poll_state *s = loop->fdmon_state;

    if (s->embed_epfd >= 0) {
        close(s->embed_epfd);
    }
    free(s->pfds);
    free(s->copy);
    free(s->spare);
    free(s->unmirrored);
    free(s);
    loop->fdmon_state = NULL;
}

/*
 * Under loop->lock.  Room for @more more entries, in the array and for
 * the wait's copy of it (see poll_state.spare).  0 or -ENOMEM.
 */
static int reserve_slots(poll_state *s, size_t more)
{
    int ret = aiol__reserve(&s->pfds, &s->cap, s->n + more, sizeof(*s->pfds));

    if (ret == 0) {
        ret = aiol__reserve(&s->unmirrored, &s->unmirrored_cap, s->n + more,
                            sizeof(*s->unmirrored));
    }
    if (ret == 0 && s->copy_cap < s->cap) {
        ret = aiol__reserve(&s->spare, &s->spare_cap, s->cap,
                            sizeof(*s->spare));
    }
    return ret;
}

/* Under loop->lock.  Slots for @more handlers; no fd-indexed array here. */
static int poll_reserve(aiol_loop *loop, size_t more, int max_fd)
{
    aiol__assert_locked(loop);
    (void)max_fd;
    return reserve_slots(loop->fdmon_state, more);
}

/* Under loop->lock.  Re-derives has_unmirrored after a change. */
static void unmirrored_sync(aiol_loop *loop, poll_state *s)
{
    atomic_store_explicit(&s->has_unmirrored,
                          s->embed_epfd >= 0 && !aiol__embed_is_direct(loop) &&
                              s->nunmirrored != 0,
                          memory_order_relaxed);
}

/* Under loop->lock.  Records whether the mirror refused slot @slot. */
static void unmirrored_set(aiol_loop *loop, poll_state *s, long slot,
                           bool refused)
{
    s->nunmirrored += (size_t)refused - (size_t)s->unmirrored[slot];
    s->unmirrored[slot] = refused;
    unmirrored_sync(loop, s);
}

/*
 * Under loop->lock.  Everything that can fail comes first (room, then the
 * mirror's epoll_ctl), so a failure leaves no trace, in particular no
 * mirror entry that would make the next set of this fd fail with EEXIST.
 */
static int poll_update(aiol_loop *loop, aiol__handler *old,
                       aiol__handler *new_)
{
    poll_state *s = loop->fdmon_state;
    long slot = old ? old->fdmon_slot : -1;
    unsigned oev = old ? old->events : 0u, nev = new_ ? new_->events : 0u;
    bool refused = slot >= 0 && s->unmirrored[slot]; /* unchanged re-arm */

    aiol__assert_locked(loop);
    if (nev != 0 && slot < 0) {
        int ret = reserve_slots(s, 1);

        if (ret < 0) {
            return ret;
        }
    }
    if (s->embed_epfd >= 0 && !aiol__embed_is_direct(loop) && oev != nev) {
        int ret = aiol__epoll_change(loop, s->embed_epfd,
                                     old ? old->fd : new_->fd, oev, nev);
        /*
         * poll watches regular files (epoll refuses them: EPERM, and
         * pending() keeps a host awake for them); a closed fd (EBADF) is
         * found out by the wait, as POLLNVAL.
         */
        if (ret < 0 && ret != -EPERM && ret != -EBADF) {
            return ret;
        }
        refused = ret == -EPERM;
    }

    if (nev != 0) {
        if (slot < 0) {
            slot = (long)s->n++; /* room: reserve_slots() */
        }
        s->pfds[slot].fd = new_->fd;
        s->pfds[slot].events = (short)aiol__events_to_poll(nev);
        s->pfds[slot].revents = 0;
        new_->fdmon_slot = (int)slot;
        unmirrored_set(loop, s, slot, refused);
        return s->embed_epfd < 0 ? aiol__update_owed(loop, &s->owed, true)
                                 : 0;
    }
    if (slot >= 0) {
        size_t last = s->n - 1;

        unmirrored_set(loop, s, slot, false);
        if ((size_t)slot != last) {
            int last_fd = s->pfds[last].fd < 0 ? -s->pfds[last].fd - 1
                                               : s->pfds[last].fd;

            s->pfds[slot] = s->pfds[last];
            s->unmirrored[slot] = s->unmirrored[last];
            s->unmirrored[last] = false;
            aiol__handler_lookup(loop, last_fd)->fdmon_slot = (int)slot;
        }
        s->n--;
    }
    return 0;
}

static int poll_wait(aiol_loop *loop, aiol__ready_list *ready,
                     int64_t deadline_ns)
{
    poll_state *s = loop->fdmon_state;
    struct timespec ts;
    size_t n;
    int ret, queued = 0;

    loop->stats.fdmon_waits++;
    aiol__lock(loop);
    n = s->n;
    if (s->copy_cap < n) {
        /* reserve_slots() made spare big enough for s->cap >= n */
        aiol__check(s->spare_cap >= n, "no spare copy for the wait");
        free(s->copy);
        s->copy = s->spare;
        s->copy_cap = s->spare_cap;
        s->spare = NULL;
        s->spare_cap = 0;
    }
    if (n > 0) {
        memcpy(s->copy, s->pfds, n * sizeof(*s->copy));
    }
    s->owed = false; /* the copy holds every change so far */
    aiol__unlock(loop);

    do {
        if (deadline_ns == 0 || deadline_ns == AIOL_DEADLINE_NONE) {
            /* no timespec to copy and convert: cheaper (as in epoll) */
            ret = poll(s->copy, n, deadline_ns == 0 ? 0 : -1);
        } else {
            bool finite = aiol__deadline_to_timespec(deadline_ns, &ts);
            ret = ppoll(s->copy, n, finite ? &ts : NULL, NULL);
        }
    } while (ret < 0 && errno == EINTR && !loop->interruptible);
    if (ret < 0 && errno == EINTR) {
        ret = 0; /* (interruptible: as a timeout) */
    }
    if (ret <= 0) {
        return ret < 0 ? -errno : 0;
    }

    aiol__lock(loop);
    for (size_t i = 0; i < n && ret > 0; i++) {
        struct pollfd *p = &s->copy[i];
        aiol__handler *node;

        if (p->revents == 0) {
            continue;
        }
        ret--;
        node = aiol__handler_lookup(loop, p->fd);
        if (node == NULL || node->fdmon_slot < 0) {
            continue;
        }
        if (p->revents & POLLNVAL) {
            struct pollfd *live = &s->pfds[node->fdmon_slot];
            if (live->fd == p->fd) {
                live->fd = -p->fd - 1; /* ignored by poll until set again */
                loop->stats.bad_fds++;
            }
            continue;
        }
        aiol__ready_add(ready, node,
                        aiol__events_from_poll((unsigned short)p->revents));
        queued++;
    }
    aiol__unlock(loop);
    return queued;
}

/*
 * Under loop->lock.  Registers every watched fd in epoll instance @epfd
 * (@add) or takes them all out.  Files epoll refuses (EPERM) and closed
 * fds (EBADF) are left to the ppoll that dispatch makes.  0 or -errno.
 */
static int mirror_fill(aiol_loop *loop, poll_state *s, int epfd, bool add)
{
    int ret = 0;

    aiol__assert_locked(loop);
    s->nunmirrored = 0; /* recounted below; the caller syncs the flag */
    if (s->n > 0) {
        memset(s->unmirrored, 0, s->n * sizeof(*s->unmirrored));
    }
    for (size_t i = 0; ret == 0 && i < s->n; i++) {
        aiol__handler *node = aiol__handler_lookup(
            loop, s->pfds[i].fd < 0 ? -s->pfds[i].fd - 1 : s->pfds[i].fd);
        ret = aiol__epoll_change(loop, epfd, node->fd,
                                 add ? 0u : node->events,
                                 add ? node->events : 0u);
        s->nunmirrored += add && ret == -EPERM;
        s->unmirrored[i] = add && ret == -EPERM;
        ret = ret == -EPERM || ret == -EBADF ? 0 : ret;
    }
    return ret;
}

/*
 * Under loop->lock.  Direct embedding (fdmon.h): the mirror would cost the
 * kernel a callback into epoll at every event while the host polls the
 * fds itself, so entering empties it and leaving refills it.
 */
static bool poll_direct_enter(aiol_loop *loop)
{
    poll_state *s = loop->fdmon_state;

    aiol__assert_locked(loop);
    if (s->embed_epfd >= 0) {
        (void)mirror_fill(loop, s, s->embed_epfd, false);
    }
    unmirrored_sync(loop, s);
    return true;
}

static void poll_direct_leave(aiol_loop *loop)
{
    poll_state *s = loop->fdmon_state;

    aiol__assert_locked(loop);
    if (s->embed_epfd >= 0) {
        /* (a failed refill leaves those fds out until they change) */
        (void)mirror_fill(loop, s, s->embed_epfd, true);
    }
    unmirrored_sync(loop, s);
}

/*
 * A host loop needs one fd that is readable when any watched fd is: an
 * epoll instance mirroring the pollfd array, made on first request and
 * kept in step by poll_update().  Dispatch still goes through ppoll.
 */
static int poll_get_fd(aiol_loop *loop)
{
    poll_state *s = loop->fdmon_state;
    int ret = 0;

    aiol__lock(loop);
    (void)aiol__embed_direct(loop, false);
    if (s->embed_epfd < 0) {
        int epfd = epoll_create1(EPOLL_CLOEXEC);

        ret = epfd < 0 ? -errno : mirror_fill(loop, s, epfd, true);
        if (ret == 0) {
            s->embed_epfd = epfd;
            unmirrored_sync(loop, s);
        } else if (epfd >= 0) {
            close(epfd);
        }
    }
    aiol__unlock(loop);
    return ret < 0 ? ret : s->embed_epfd;
}

/* True while a host on the mirror must not sleep (see has_unmirrored). */
static bool poll_pending(aiol_loop *loop)
{
    poll_state *s = loop->fdmon_state;

    return atomic_load_explicit(&s->has_unmirrored, memory_order_relaxed);
}

const aiol__fdmon_ops aiol__fdmon_poll = {
    .name = "poll",
    .init = poll_init,
    .fini = poll_fini,
    .forget = poll_fini, /* it only closes the child's fds and frees: fork.c */
    .update = poll_update,
    .reserve = poll_reserve,
    .wait = poll_wait,
    .pending = poll_pending,
    .embed = &(const aiol__fdmon_embed_ops){
        .get_fd = poll_get_fd, /* an epoll mirror, made on demand */
        .direct_enter = poll_direct_enter,
        .direct_leave = poll_direct_leave,
    },
};
