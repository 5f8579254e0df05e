/*
 * glib.c - aioloop-glib: a GSource that drives an aiol_loop
 * (aioloop/glib.h), on the embedding API of aioloop/embed.h.
 *
 * prepare: pairs off an unchecked earlier prepare (glib skips check for
 *   a source that was ready in prepare, or above the priority it chose to
 *   dispatch), then aiol_loop_prepare() for the deadline, and chooses what
 *   glib polls: the handlers' fds themselves while aiol_loop_embed_fds()
 *   gives at most AIOL_GLIB_DIRECT_MAX, else the loop fd.
 * check: aiol_loop_check(), and whether a polled fd came back with events.
 * dispatch: one non-blocking loop iteration, with the revents glib saw in
 *   direct mode (aiol_loop_dispatch_fds()).
 *
 * All of it runs on the thread iterating the context, the loop's polling
 * thread; the GSource's fields belong to that thread.
 */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stddef.h>
#include <string.h>

#include "aioloop/embed.h"
#include "aioloop/glib.h"
#include "aioloop/timer.h"

/* glib's GPollFD is struct pollfd on Linux: direct mode hands it over. */
_Static_assert(sizeof(GPollFD) == sizeof(struct pollfd) &&
               offsetof(GPollFD, fd) == offsetof(struct pollfd, fd) &&
               offsetof(GPollFD, events) == offsetof(struct pollfd, events) &&
               offsetof(GPollFD, revents) ==
                   offsetof(struct pollfd, revents),
               "GPollFD is not laid out as struct pollfd");

typedef struct aiol_gsource {
    GSource base;
    aiol_loop *loop;
    bool prepared;             /* aiol_loop_prepare() awaits its check */
    int ndirect;               /* fds glib polls for us; -1: the loop fd */
    GPollFD direct[AIOL_GLIB_DIRECT_MAX];
    int loop_fd;               /* polled through loop_tag, -1: none */
    gpointer loop_tag;
} aiol_gsource;

static GSourceFuncs aiol_gsource_funcs;

/* Pairs an aiol_loop_prepare() that glib left unchecked. */
static bool unprepare(aiol_gsource *s)
{
    if (!s->prepared) {
        return false;
    }
    s->prepared = false;
    return aiol_loop_check(s->loop);
}

static void drop_direct(aiol_gsource *s)
{
    for (int i = 0; i < s->ndirect; i++) {
        g_source_remove_poll(&s->base, &s->direct[i]);
    }
    s->ndirect = -1;
}

static void drop_loop_fd(aiol_gsource *s)
{
    if (s->loop_tag != NULL) {
        g_source_remove_unix_fd(&s->base, s->loop_tag);
        s->loop_tag = NULL;
    }
    s->loop_fd = -1;
}

/* glib polls these @n fds from now on (same set: nothing changes). */
static void use_direct(aiol_gsource *s, const struct pollfd *fds, int n)
{
    bool same = s->ndirect == n;

    for (int i = 0; same && i < n; i++) {
        same = s->direct[i].fd == fds[i].fd &&
               s->direct[i].events == (gushort)fds[i].events;
    }
    if (same) {
        return;
    }
    drop_loop_fd(s);
    drop_direct(s);
    for (int i = 0; i < n; i++) {
        s->direct[i] = (GPollFD){ .fd = fds[i].fd,
                                  .events = (gushort)fds[i].events };
        g_source_add_poll(&s->base, &s->direct[i]);
    }
    s->ndirect = n;
}

/*
 * glib polls the loop fd from now on.  Asked again on every switch back
 * from direct mode (that puts the handlers behind it again), and its
 * number may change (io_uring rebuilds a bound ring as a shared one).
 * False when the loop has no fd to give right now (-ENOMEM, -EMFILE):
 * then nothing is polled and prepare returns at once.
 */
static bool use_loop_fd(aiol_gsource *s)
{
    int fd;

    if (s->ndirect < 0 && s->loop_tag != NULL) {
        return true;
    }
    drop_direct(s);
    fd = aiol_loop_get_fd(s->loop);
    if (fd < 0) {
        drop_loop_fd(s);
        return false;
    }
    if (fd != s->loop_fd) {
        drop_loop_fd(s);
        s->loop_tag = g_source_add_unix_fd(&s->base, fd, G_IO_IN);
        s->loop_fd = fd;
    }
    return true;
}

static gboolean gs_prepare(GSource *src, gint *timeout)
{
    aiol_gsource *s = (aiol_gsource *)src;
    struct pollfd fds[AIOL_GLIB_DIRECT_MAX];
    int64_t deadline, now;
    bool polled = true;
    int n;

    (void)unprepare(s);
    deadline = aiol_loop_prepare(s->loop);
    s->prepared = true;
    n = aiol_loop_embed_fds(s->loop, fds, AIOL_GLIB_DIRECT_MAX);
    if (n >= 0) {
        use_direct(s, fds, n);
    } else {
        polled = use_loop_fd(s);
    }
    if (deadline == AIOL_DEADLINE_NONE && polled) {
        *timeout = -1;
        return FALSE;
    }
    now = aiol_clock_get_ns(aiol_loop_clock(s->loop));
    if (deadline <= now || !polled) {
        *timeout = 0;
        return deadline <= now;
    }
    /* (rounded up: waking early would only find nothing due) */
    *timeout = deadline - now >= (int64_t)INT_MAX * 1000000
                   ? INT_MAX
                   : (gint)((deadline - now + 999999) / 1000000);
    return FALSE;
}

static gboolean gs_check(GSource *src)
{
    aiol_gsource *s = (aiol_gsource *)src;
    bool ready = unprepare(s);

    if (s->ndirect >= 0) {
        for (int i = 0; i < s->ndirect && !ready; i++) {
            ready = s->direct[i].revents != 0;
        }
    } else if (s->loop_tag != NULL) {
        ready = ready || g_source_query_unix_fd(src, s->loop_tag) != 0;
    } else {
        ready = true; /* no fd to poll: look each iteration */
    }
    return ready;
}

static gboolean gs_dispatch(GSource *src, GSourceFunc cb, gpointer data)
{
    aiol_gsource *s = (aiol_gsource *)src;

    (void)cb;
    (void)data;
    (void)unprepare(s);
    if (s->ndirect >= 0) {
        aiol_loop_dispatch_fds(s->loop, (const struct pollfd *)s->direct,
                               (size_t)s->ndirect);
    } else {
        aiol_loop_dispatch(s->loop);
    }
    return G_SOURCE_CONTINUE;
}

static void gs_finalize(GSource *src)
{
    aiol_gsource *s = (aiol_gsource *)src;

    (void)unprepare(s);
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
    s->loop = loop;
    s->ndirect = -1;
    s->loop_fd = -1;
    g_source_set_name(src, "aioloop");
    return src;
}

aiol_loop *aiol_glib_source_loop(GSource *source)
{
    if (source == NULL || source->source_funcs != &aiol_gsource_funcs) {
        g_error("aiol_glib_source_loop: not a source of "
                "aiol_glib_source_new()");
    }
    return ((aiol_gsource *)source)->loop;
}
