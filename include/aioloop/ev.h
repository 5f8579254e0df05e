/* SPDX-License-Identifier: MIT */
/**
 * @file
 * aioloop/ev.h - running a libaioloop loop inside a libev loop.
 *
 * Library aioloop-ev (pkg-config aioloop-ev), built when libev is found.
 * A service that runs ev_run() attaches an aiol_loop to its struct
 * ev_loop, and the loop's fd handlers, bottom halves (any thread's),
 * timers and nested aiol_loop_poll() calls work as under aiol_loop_poll():
 *
 *   aiol_ev *e;
 *   aiol_ev_attach(loop, EV_DEFAULT, &e);
 *   ...ev_run(EV_DEFAULT, 0)...
 *   aiol_ev_detach(e);
 *   aiol_loop_free(loop);
 *
 * The adapter's watchers, libev's own embedding recipe:
 *   - an ev_prepare (priority EV_MAXPRI) takes the loop's deadline
 *     (aiol_loop_prepare()) into an ev_timer, or an ev_idle when work is
 *     already due, and chooses what libev polls: ev_io watchers on the
 *     handlers' own fds while there are at most AIOL_EMBED_DIRECT_MAX of them
 *     (direct embedding, aiol_loop_embed_fds()), else one on the loop fd;
 *   - an ev_check (priority EV_MAXPRI) collects what those watchers saw
 *     (ev_clear_pending()), pairs the prepare (aiol_loop_check()) and runs
 *     one non-blocking iteration of the loop when something is due.
 *
 * The adapter's watchers are active, so ev_run() keeps running while a
 * loop is attached: end it with ev_break().
 * Threads: the thread running the ev_loop is the loop's polling thread.
 * Lifetimes: detach before aiol_loop_free() and before ev_loop_destroy().
 */
#ifndef AIOLOOP_EV_H
#define AIOLOOP_EV_H

#include "aioloop/embed.h"
#include "aioloop/loop.h"

#ifdef __cplusplus
extern "C" {
#endif

/* (exported from the shared library; everything else is hidden) */
#pragma GCC visibility push(default)

struct ev_loop;


/** A loop attached to an ev_loop.  Opaque. */
typedef struct aiol_ev aiol_ev;

/**
 * Attaches @p loop to @p evl: from the next ev_run() iteration on, libev
 * drives it.  Call on the thread that runs @p evl.
 * @return 0; -ENOMEM (nothing attached).  NULL arguments are misuse.
 */
int aiol_ev_attach(aiol_loop *loop, struct ev_loop *evl, aiol_ev **out);

/** Stops the adapter's watchers and frees it.  NULL is a no-op.  Not from
 *  inside the loop's own callbacks. */
void aiol_ev_detach(aiol_ev *e);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif

#endif /* AIOLOOP_EV_H */
