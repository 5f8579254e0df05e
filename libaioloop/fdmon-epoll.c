/*
 * fdmon-epoll.c - the epoll(7) fd monitor.
 *
 * Design.  Every handler that watches events is registered level-triggered
 * with data.fd = its fd; the fd-indexed table maps an event back to the
 * handler that is current when the event is harvested, so replacing a
 * handler's callbacks never needs the kernel.  Consequences:
 *
 *   - one epoll_ctl per real change (ADD, MOD with different events, DEL);
 *     re-arming a handler with the same events makes no syscall;
 *   - dispatch cost is O(ready): epoll_wait returns only ready fds;
 *   - a bounded wait has nanosecond precision through epoll_pwait2 (Linux
 *     5.11); where that is missing, epoll_wait rounds the timeout up to the
 *     next millisecond so we never wake before the deadline.  A look
 *     (timeout 0) and an unbounded wait use plain epoll_wait: cheaper.
 *
 * Kernel quirks.  epoll watches (file, fd) pairs and drops a registration
 * by itself only when the last reference to the file goes away.  DEL of an
 * fd that was closed before its handler was removed fails with EBADF or
 * ENOENT; that is the state we wanted, so it is not an error.  MOD on an
 * fd number now held by a new file fails with ENOENT: we ADD instead.
 * Regular files and directories cannot be watched: ADD fails with EPERM and
 * the handler is not set.
 *
 * Threading: update() runs under loop->lock (epoll_ctl itself is thread
 * safe; the lock orders it with the table).  wait() sleeps without the lock
 * and takes it once to map the harvested events to handlers.
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

#define EVENTS_MIN 64
#define EVENTS_MAX 1024

typedef struct epoll_state {
    int epfd;
    bool no_pwait2;             /* polling thread: epoll_pwait2 gave ENOSYS */
    int nevents;                /* polling thread */
    struct epoll_event *events; /* polling thread */
} epoll_state;

static int epoll_init(aiol_loop *loop)
{
    epoll_state *s = calloc(1, sizeof(*s));

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
    loop->mon_state = s;
    return 0;
}

static void epoll_fini(aiol_loop *loop)
{
    epoll_state *s = loop->mon_state;

    close(s->epfd);
    free(s->events);
    free(s);
    loop->mon_state = NULL;
}

/* The shared AIOL__EV_* <-> poll bit mapping holds for epoll's bits too. */
_Static_assert(EPOLLIN == POLLIN && EPOLLOUT == POLLOUT &&
               EPOLLERR == POLLERR && EPOLLHUP == POLLHUP &&
               EPOLLRDHUP == POLLRDHUP, "epoll and poll bits differ");

int aiol__epoll_change(aiol_loop *loop, int epfd, int fd, unsigned oev,
                       unsigned nev)
{
    struct epoll_event ev = { .events = aiol__events_to_poll(nev),
                              .data.fd = fd };
    int op;

    if (oev == nev) {
        return 0; /* unchanged re-arm: nothing for the kernel */
    }
    op = oev == 0 ? EPOLL_CTL_ADD : nev == 0 ? EPOLL_CTL_DEL : EPOLL_CTL_MOD;
    loop->stats.monitor_ctls++;
    if (epoll_ctl(epfd, op, fd, &ev) == 0) {
        return 0;
    }
    if (op == EPOLL_CTL_DEL && (errno == EBADF || errno == ENOENT)) {
        return 0;
    }
    if (op == EPOLL_CTL_MOD && errno == ENOENT) {
        loop->stats.monitor_ctls++;
        if (epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) == 0) {
            return 0;
        }
    }
    return -errno;
}

static int epoll_update(aiol_loop *loop, aiol__handler *old,
                        aiol__handler *new_)
{
    epoll_state *s = loop->mon_state;

    return aiol__epoll_change(loop, s->epfd, old ? old->fd : new_->fd,
                              old ? old->events : 0u,
                              new_ ? new_->events : 0u);
}

static int epoll_wait_once(epoll_state *s, int64_t deadline_ns)
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

static int epoll_wait_ready(aiol_loop *loop, aiol__ready_list *ready,
                            int64_t deadline_ns)
{
    epoll_state *s = loop->mon_state;
    int n, queued = 0;

    loop->stats.monitor_waits++;
    while ((n = epoll_wait_once(s, deadline_ns)) < 0) {
        if (errno != EINTR) {
            return -errno;
        }
    }
    if (n == 0) {
        return 0;
    }
    pthread_mutex_lock(&loop->lock);
    for (int i = 0; i < n; i++) {
        aiol__handler *node = aiol__handler_lookup(loop, s->events[i].data.fd);

        if (node != NULL && node->events != 0) {
            aiol__ready_add(ready, node,
                            aiol__events_from_poll(s->events[i].events));
            queued++;
        }
    }
    pthread_mutex_unlock(&loop->lock);

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
    return ((epoll_state *)loop->mon_state)->epfd;
}

const aiol__fdmon_ops aiol__fdmon_epoll = {
    .name = "epoll",
    .init = epoll_init,
    .fini = epoll_fini,
    .update = epoll_update,
    .wait = epoll_wait_ready,
    .get_fd = epoll_get_fd,
    .update_needs_notify = false, /* epoll_ctl acts on a sleeping wait */
};
