/* SPDX-License-Identifier: MIT */
/*
 * hostpoll.c - the embedded iteration the host-loop adapters share
 * (hostpoll.h).
 */
#include <string.h>

#include "aioloop/embed.h"
#include "aioloop/timer.h"
#include "hostpoll.h"

void aiol__hostpoll_init(aiol__hostpoll *hp, aiol_loop *loop)
{
    memset(hp, 0, sizeof(*hp));
    hp->loop = loop;
    hp->ndirect = -1;
    hp->loop_fd = -1;
}

bool aiol__hostpoll_unprepare(aiol__hostpoll *hp)
{
    if (!hp->prepared) {
        return false;
    }
    hp->prepared = false;
    return aiol_loop_check(hp->loop);
}

/* Direct mode on these @n fds; true if that is a change. */
static bool set_direct(aiol__hostpoll *hp, const struct pollfd *fds, int n)
{
    bool same = hp->ndirect == n;

    for (int i = 0; same && i < n; i++) {
        same = hp->fds[i].fd == fds[i].fd &&
               hp->fds[i].events == fds[i].events;
    }
    if (same) {
        return false;
    }
    for (int i = 0; i < n; i++) {
        hp->fds[i] = (struct pollfd){ .fd = fds[i].fd,
                                      .events = fds[i].events };
    }
    hp->ndirect = n;
    hp->loop_fd = -1;
    return true;
}

/*
 * The loop fd; true if that is a change.  Asked again on every switch
 * back from direct mode (that puts the handlers behind it again); its
 * number may change (io_uring rebuilds a bound ring as a shared one),
 * and it may be missing for now (-ENOMEM, -EMFILE: loop_fd -1).
 */
static bool set_loop_fd(aiol__hostpoll *hp)
{
    int fd;

    if (hp->ndirect < 0 && hp->loop_fd >= 0) {
        return false;
    }
    fd = aiol_loop_fd_get(hp->loop);
    if (fd < 0) {
        fd = -1;
    }
    if (hp->ndirect < 0 && fd == hp->loop_fd) {
        return false;
    }
    hp->ndirect = -1;
    hp->loop_fd = fd;
    return true;
}

bool aiol__hostpoll_prepare(aiol__hostpoll *hp, int64_t *timeout_ns)
{
    struct pollfd fds[AIOL__HOSTPOLL_MAX];
    int64_t deadline, now;
    bool changed;
    int n;

    (void)aiol__hostpoll_unprepare(hp);
    deadline = aiol_loop_prepare(hp->loop);
    hp->prepared = true;
    n = aiol_loop_embed_fds(hp->loop, fds, AIOL__HOSTPOLL_MAX);
    changed = n >= 0 ? set_direct(hp, fds, n) : set_loop_fd(hp);
    if (hp->ndirect < 0 && hp->loop_fd < 0) {
        *timeout_ns = 0; /* nothing to poll: look again at once */
    } else if (deadline == AIOL_DEADLINE_NONE) {
        *timeout_ns = -1;
    } else {
        now = aiol_clock_time_get(aiol_loop_clock_get(hp->loop));
        *timeout_ns = deadline <= now ? 0 : deadline - now;
    }
    return changed;
}

void aiol__hostpoll_dispatch(aiol__hostpoll *hp)
{
    (void)aiol__hostpoll_unprepare(hp);
    if (hp->ndirect >= 0) {
        aiol_loop_dispatch_fds(hp->loop, hp->fds, (size_t)hp->ndirect);
    } else {
        aiol_loop_dispatch(hp->loop);
    }
}
