/* SPDX-License-Identifier: MIT */
/**
 * @file
 * aioloop/glib.h - running a libaioloop loop inside a glib main loop.
 *
 * Library aioloop-glib (pkg-config aioloop-glib), built when glib-2.0 is
 * found.  A service that already runs g_main_loop_run() attaches one
 * GSource per aiol_loop and the loop's fd handlers, bottom halves (any
 * thread's), timers and nested aiol_loop_poll() calls work as they do
 * under aiol_loop_poll():
 *
 *   GSource *src = aiol_glib_source_new(loop);
 *   g_source_attach(src, ctx);       // NULL: the default context
 *   ...g_main_loop_run()...
 *   g_source_destroy(src);
 *   g_source_unref(src);
 *   aiol_loop_free(loop);
 *
 * Each iteration the source's prepare gives glib the loop's deadline
 * (aiol_loop_prepare()).  glib then polls either the handlers' own fds,
 * while there are at most AIOL_EMBED_DIRECT_MAX of them (direct embedding,
 * aiol_loop_embed_fds(): no extra wait per wakeup, as the QEMU fork does),
 * or the loop fd (aiol_loop_fd_get()); dispatch runs one non-blocking
 * iteration of the loop.  The source calls no GSourceFunc callback
 * (g_source_set_callback() is not used).
 *
 * Threads: the context must be iterated by one thread at a time, which
 * is then the loop's polling thread (as aiol_loop_poll()'s rule).
 * Lifetimes: the source holds no reference on the loop; destroy the
 * source (g_source_destroy(), or its context's last unref) before
 * aiol_loop_free().  A loop has at most one source attached at a time.
 */
#ifndef AIOLOOP_GLIB_H
#define AIOLOOP_GLIB_H

#include <glib.h>

#include "aioloop/embed.h"
#include "aioloop/loop.h"

#ifdef __cplusplus
extern "C" {
#endif

/* (exported from the shared library; everything else is hidden) */
#pragma GCC visibility push(default)


/**
 * Creates a GSource that drives @p loop from whichever GMainContext it is
 * attached to.  Returns a new reference (g_source_unref() it); never NULL
 * (glib aborts when memory runs out).  Priority G_PRIORITY_DEFAULT; change
 * it with g_source_set_priority() before attaching.  A NULL @p loop is
 * misuse: it aborts with a message.
 * @return the new GSource.
 */
GSource *aiol_glib_source_new(aiol_loop *loop);

/** The loop @p source drives; aborts with a message when @p source is not
 *  one of aiol_glib_source_new().
 *  @return the loop, never NULL. */
aiol_loop *aiol_glib_source_loop_get(GSource *source);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif

#endif /* AIOLOOP_GLIB_H */
