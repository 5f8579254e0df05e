/* SPDX-License-Identifier: MIT */
/*
 * hostpoll.h - what the host-loop adapters (glib.c, ev.c) share: one
 * embedded iteration's bookkeeping on top of aioloop/embed.h.  Each
 * prepare picks what the host must poll: the handlers' own fds while
 * there are at most AIOL__HOSTPOLL_MAX (direct embedding), else the loop
 * fd; the adapter only mirrors that set into its host's watchers.  All
 * of it belongs to the thread running the host loop.
 */
#ifndef AIOLOOP_ADAPTERS_HOSTPOLL_H
#define AIOLOOP_ADAPTERS_HOSTPOLL_H

#include <poll.h>
#include <stdbool.h>
#include <stdint.h>

#include "aioloop/embed.h"
#include "aioloop/loop.h"

#define AIOL__HOSTPOLL_MAX AIOL_EMBED_DIRECT_MAX /* (aioloop/embed.h) */

typedef struct aiol__hostpoll {
    aiol_loop *loop;
    bool prepared;       /* aiol_loop_prepare() awaits its check */
    int ndirect;         /* fds[] the host polls; -1: the loop fd */
    struct pollfd fds[AIOL__HOSTPOLL_MAX]; /* revents: the host fills */
    int loop_fd;         /* with ndirect -1: the fd to poll, -1: none */
} aiol__hostpoll;

void aiol__hostpoll_init(aiol__hostpoll *hp, aiol_loop *loop);

/*
 * The prepare step: pairs off an unchecked earlier prepare (hosts skip
 * check for some sources), aiol_loop_prepare(), then the poll set.
 * Returns true when the set changed: the host drops what it polled and
 * polls fds[0 .. ndirect) or, with ndirect -1, loop_fd (none if -1).
 * *timeout_ns: how long the host may sleep, -1 without limit, 0 not at
 * all (work due, or no fd to poll).
 */
bool aiol__hostpoll_prepare(aiol__hostpoll *hp, int64_t *timeout_ns);

/* Pairs a pending prepare (aiol_loop_check()); true when work is due. */
bool aiol__hostpoll_unprepare(aiol__hostpoll *hp);

/* One non-blocking iteration, with fds[].revents in direct mode. */
void aiol__hostpoll_dispatch(aiol__hostpoll *hp);

#endif
