/* SPDX-License-Identifier: MIT */
/*
 * epoll-removal.c - the epoll monitor's lazy removal: registrations kept
 * after their handler went, and how each one ends.
 *
 * A removal on the polling thread (the thread whose waits harvest
 * events) makes no syscall, like a set (fdmon-epoll.c, "Deferred adds"):
 * the registration is kept (aiol__epoll_fd.kept), and the caller may
 * still close the fd at once.
 * Three things can happen to a kept registration:
 *
 *   - the fd is set again.  Its file may have changed meanwhile (closed,
 *     number reused), so the flush probes with ADD: EEXIST proves the
 *     registration is the kept one, of the same file, and only a changed
 *     set of events costs a MOD; success means the old file is gone (the
 *     kernel dropped its registration at its last close) or lives on
 *     elsewhere (below).  Churn on one fd costs one failing ADD a pair,
 *     where ADD + DEL cost two full ones.
 *   - it reports an event.  Nobody wants it: the wait DELs it then, once.
 *   - its file outlives the fd (a dup, an eventfd KVM or a vhost-user
 *     frontend still holds) and reports an event after the fd was closed
 *     or its number reused.  The generation in the event no longer
 *     matches the fd's, or the DEL fails: no fd number reaches that
 *     registration any more, and the only way to drop it is a new epoll
 *     instance.  The wait builds one with every live registration, puts
 *     it at the old one's fd number (dup3, so a host polling the epoll fd
 *     is not lost) and closes the old.  No callback ever runs for such an
 *     event; a rebuild costs one ADD per live handler, and only a file
 *     that outlived both its fd and its handler can cause one.
 *
 * A removal on any other thread DELs at once, under the lock: its caller
 * may close the fd and the number may name another file as soon as the
 * call returns, so the poller must not DEL that number later (that would
 * race the caller's close and could drop a stranger's registration).  A
 * DEL that succeeded marks the fd gone, so an event the poller harvested
 * just before it is dropped quietly instead of taken for a stale
 * registration.  When another thread starts to poll the loop, the kept
 * registrations are its predecessor's removals: the new poller drops them
 * with a rebuild, which touches no fd number of theirs.
 *
 * Once aiol_loop_fd_get() hands the epoll fd to a host, the instance must
 * stay: a host may watch it in an epoll set of its own, where a new file
 * under the same number is not watched.  The first hand-out drops every
 * kept registration (a rebuild, the last one), and from then on removals
 * DEL at once, whatever the thread.
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "fdmon.h"
#include "epoll-priv.h"

/*
 * Under loop->lock.  DELs @fd's registration now; true when the kernel
 * dropped it (the fd still names its file).  Either way the fd has no
 * registration we know of afterwards: one that is left belongs to a file
 * that outlived the fd, and only a rebuild drops it (see the top).
 */
bool aiol__epoll_del(aiol_loop *loop, aiol__epoll_state *s, int fd)
{
    aiol__epoll_fd *st = &s->fds[fd];
    bool ok =
        aiol__epoll_ctl(loop, s->epfd, EPOLL_CTL_DEL, fd, 0, st->gen) == 0;

    st->kernel = 0;
    st->gone = ok;
    aiol__epoll_kept_set(s, fd, false);
    return ok;
}

/*
 * Under loop->lock.  Forgets every kept registration: @gone when the
 * kernel dropped them too (a rebuild replaced the instance), else they are
 * left as registrations no fd reaches, whose events count as stale.
 */
static void kept_forget_all(aiol__epoll_state *s, bool gone)
{
    for (size_t fd = 0; fd < s->nfds && s->nkept != 0; fd++) {
        if (s->fds[fd].kept) {
            aiol__epoll_kept_set(s, (int)fd, false);
            s->fds[fd].kernel = 0;
            s->fds[fd].gone = gone;
        }
    }
}

/*
 * Under loop->lock; polling thread.  A registration fired that no fd
 * number reaches any more (see the top): replaces the epoll instance with
 * one that holds only the live handlers' registrations, at the same fd
 * number.  Kept registrations are dropped with the old instance.  When
 * the kernel refuses (no memory, no fd), nothing changes and the next
 * such event tries again.  True when the instance was replaced.
 */
bool aiol__epoll_rebuild(aiol_loop *loop, aiol__epoll_state *s)
{
    int nfd = epoll_create1(EPOLL_CLOEXEC);

    aiol__assert_locked(loop);
    if (nfd < 0) {
        return false;
    }
    for (size_t fd = 0; fd < s->nfds; fd++) {
        aiol__epoll_fd *st = &s->fds[fd];
        int ret;

        if (st->kernel == 0 || st->kept) {
            continue;
        }
        ret = aiol__epoll_ctl(loop, nfd, EPOLL_CTL_ADD, (int)fd, st->kernel,
                              st->gen);
        if (ret == -ENOMEM || ret == -ENOSPC) {
            close(nfd);
            return false;
        }
        if (ret < 0) {
            st->kernel = 0; /* closed under its handler: not watched */
            st->gone = false;
            loop->stats.bad_fds++;
        }
    }
    if (dup3(nfd, s->epfd, O_CLOEXEC) < 0) {
        close(nfd);
        return false;
    }
    close(nfd);
    kept_forget_all(s, true);
    return true;
}

/*
 * Polling thread, lock not held.  The calling thread @me starts to poll
 * the loop: registrations kept until now are another thread's removals,
 * whose fds it may be closing, so they go with a rebuild, which touches
 * none of their numbers.  If the kernel refuses one, they are left for a
 * later rebuild as registrations no fd reaches (their events are stale).
 */
void aiol__epoll_waiter_set(aiol_loop *loop, aiol__epoll_state *s, uint64_t me)
{
    aiol__lock(loop);
    if (s->nkept != 0 && !aiol__epoll_rebuild(loop, s)) {
        kept_forget_all(s, false);
    }
    s->waiter = me;
    aiol__unlock(loop);
}

