/* SPDX-License-Identifier: MIT */
/*
 * glib.c - aioloop-glib: a GSource that drives an aiol_loop
 * (aioloop/glib.h), on the embedding API of aioloop/embed.h.
 *
 * prepare: the loop's deadline and what glib polls (hostpoll.h: the
 *   handlers' fds, at most AIOL_EMBED_DIRECT_MAX, or the loop fd), mirrored
 *   into the source's polls; an unchecked earlier prepare (glib skips check
 *   for a source that was ready in prepare, or above the priority it chose
 *   to dispatch) is paired first.
 * check: aiol_loop_check(), and whether a polled fd came back with events.
 * dispatch: one non-blocking loop iteration, with the revents glib saw in
 *   direct mode (aiol_loop_dispatch_fds()).
 *
 * All of it runs on the thread iterating the context, the loop's polling
 * thread; the GSource's fields belong to that thread.
 */
#include <limits.h>

#include "aioloop/glib.h"
#include "hostpoll.h"

typedef struct aiol_gsource {
    GSource base;
    aiol__hostpoll hp;
    GPollFD polled[AIOL__HOSTPOLL_MAX]; /* given to g_source_add_poll() */
    int npolled;
    gpointer loop_tag;                  /* the loop fd's, or NULL */
} aiol_gsource;

static GSourceFuncs aiol_gsource_funcs;

/* glib polls what hp says from now on. */
static void mirror(aiol_gsource *s)
{
    for (int i = 0; i < s->npolled; i++) {
        g_source_remove_poll(&s->base, &s->polled[i]);
    }
    s->npolled = 0;
    if (s->loop_tag != NULL) {
        g_source_remove_unix_fd(&s->base, s->loop_tag);
        s->loop_tag = NULL;
    }
    for (int i = 0; i < s->hp.ndirect; i++) {
        s->polled[i] = (GPollFD){ .fd = s->hp.fds[i].fd,
                                  .events = (gushort)s->hp.fds[i].events };
        g_source_add_poll(&s->base, &s->polled[i]);
        s->npolled++;
    }
    if (s->hp.ndirect < 0 && s->hp.loop_fd >= 0) {
        s->loop_tag = g_source_add_unix_fd(&s->base, s->hp.loop_fd,
                                           G_IO_IN);
    }
}

static gboolean gs_prepare(GSource *src, gint *timeout)
{
    aiol_gsource *s = (aiol_gsource *)src;
    int64_t ns;

    if (aiol__hostpoll_prepare(&s->hp, &ns)) {
        mirror(s);
    }
    if (ns < 0) {
        *timeout = -1;
        return FALSE;
    }
    /* (rounded up: waking early would only find nothing due) */
    *timeout = ns >= (int64_t)INT_MAX * 1000000 ? INT_MAX
                                                : (gint)((ns + 999999) / 1000000);
    return ns == 0;
}

static gboolean gs_check(GSource *src)
{
    aiol_gsource *s = (aiol_gsource *)src;
    bool ready = aiol__hostpoll_unprepare(&s->hp);

    for (int i = 0; i < s->npolled; i++) {
        s->hp.fds[i].revents = (short)s->polled[i].revents;
        ready |= s->polled[i].revents != 0;
    }
    if (s->loop_tag != NULL) {
        ready |= g_source_query_unix_fd(src, s->loop_tag) != 0;
    } else if (s->npolled == 0 && s->hp.ndirect < 0) {
        ready = true; /* no fd to poll: look each iteration */
    }
    return ready;
}

static gboolean gs_dispatch(GSource *src, GSourceFunc cb, gpointer data)
{
    aiol_gsource *s = (aiol_gsource *)src;

    (void)cb;
    (void)data;
    for (int i = 0; i < s->npolled; i++) {
        s->hp.fds[i].revents = (short)s->polled[i].revents;
    }
    aiol__hostpoll_dispatch(&s->hp);
    return G_SOURCE_CONTINUE;
}

static void gs_finalize(GSource *src)
{
    aiol_gsource *s = (aiol_gsource *)src;

    (void)aiol__hostpoll_unprepare(&s->hp);
    /* (glib frees the unix fd tags and the polls of a finalized source) */
}

static GSourceFuncs aiol_gsource_funcs = {
    .prepare = gs_prepare,
    .check = gs_check,
    .dispatch = gs_dispatch,
    .finalize = gs_finalize,
};

GSource *aiol_glib_source_new(aiol_loop *loop)
{
    GSource *src;
    aiol_gsource *s;

    if (loop == NULL) {
        g_error("aiol_glib_source_new: loop is NULL");
    }
    src = g_source_new(&aiol_gsource_funcs, sizeof(aiol_gsource));
    s = (aiol_gsource *)src;
    aiol__hostpoll_init(&s->hp, loop);
    g_source_set_name(src, "aioloop");
    return src;
}

aiol_loop *aiol_glib_source_loop_get(GSource *source)
{
    if (source == NULL || source->source_funcs != &aiol_gsource_funcs) {
        g_error("aiol_glib_source_loop_get: not a source of "
                "aiol_glib_source_new()");
    }
    return ((aiol_gsource *)source)->hp.loop;
}
