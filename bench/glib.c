/* SPDX-License-Identifier: MIT */
/*
 * glib.c - GLib's GMainContext on the shared workloads (bench.h,
 * workloads.c).  Each run has a fresh context of its own; a poll is
 * g_main_context_iteration(ctx, FALSE).
 *
 *   chain_a1, chain_a100, churn, idle_poll
 *               one GSource per handler, attached once, watching its fd
 *               with g_source_add_unix_fd (check: the fd's revents);
 *               watch = g_source_add_unix_fd, or on a watched handler
 *               g_source_modify_unix_fd (re-arm: remove + add would
 *               re-sort the context's poll list, O(n) each); unwatch =
 *               g_source_remove_unix_fd
 *   bh_single, bh_burst   "run this soon" is a GSource made once, at
 *               G_PRIORITY_HIGH, scheduled with g_source_set_ready_time(0)
 *               and disarmed (-1) by its dispatch; unlike g_idle_add it
 *               allocates nothing per call, like the other libraries
 *   wakeup      two contexts on two threads; each side arms the other's
 *               source with g_source_set_ready_time, which is
 *               thread-safe and wakes the owning context
 *   timers      g_timeout_source_new + attach, one-shot (dispatch returns
 *               G_SOURCE_REMOVE); iterate until all fired
 */
#define _GNU_SOURCE
#include <glib.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>

#include "bench.h"

/* ------------------------------------------------------------ fd ops */

typedef struct gl_fd_source {
    GSource src;
    int idx;
    gpointer tag; /* NULL while not watching */
} gl_fd_source;

typedef struct gl_fd_loop {
    GMainContext *ctx;
    gl_fd_source **src;
    long n;
} gl_fd_loop;

static gboolean fd_dispatch(GSource *s, GSourceFunc cb, gpointer data)
{
    (void)cb, (void)data;
    bench_fd_ready(((gl_fd_source *)s)->idx);
    return G_SOURCE_CONTINUE;
}

static GSourceFuncs fd_funcs = { .dispatch = fd_dispatch };

static void *fd_loop_new(const bench_args *args, long nhandlers)
{
    gl_fd_loop *l = malloc(sizeof(*l));

    (void)args;
    l->ctx = g_main_context_new();
    l->src = calloc((size_t)nhandlers, sizeof(*l->src));
    l->n = nhandlers;
    return l;
}

static void fd_loop_free(void *opaque)
{
    gl_fd_loop *l = opaque;

    for (long i = 0; i < l->n; i++) {
        if (l->src[i]) {
            g_source_destroy(&l->src[i]->src);
            g_source_unref(&l->src[i]->src);
        }
    }
    g_main_context_unref(l->ctx);
    free(l->src);
    free(l);
}

static void fd_prepare(void *opaque, int idx, int fd)
{
    gl_fd_loop *l = opaque;
    gl_fd_source *s = (gl_fd_source *)g_source_new(&fd_funcs, sizeof(*s));

    (void)fd;
    s->idx = idx;
    s->tag = NULL;
    g_source_attach(&s->src, l->ctx);
    l->src[idx] = s;
}

static void fd_watch(void *opaque, int idx, int fd)
{
    gl_fd_source *s = ((gl_fd_loop *)opaque)->src[idx];

    if (s->tag) {
        g_source_modify_unix_fd(&s->src, s->tag, G_IO_IN);
    } else {
        s->tag = g_source_add_unix_fd(&s->src, fd, G_IO_IN);
    }
}

static void fd_unwatch(void *opaque, int idx, int fd)
{
    gl_fd_source *s = ((gl_fd_loop *)opaque)->src[idx];

    (void)fd;
    g_source_remove_unix_fd(&s->src, s->tag);
    s->tag = NULL;
}

static void fd_poll(void *opaque)
{
    g_main_context_iteration(((gl_fd_loop *)opaque)->ctx, FALSE);
}

static const bench_fd_ops fd_ops = {
    fd_loop_new, fd_loop_free, fd_prepare, fd_watch, fd_unwatch, fd_poll,
    NULL,
};

/* --------------------------------------------------------- defer ops */

/* Runs @cb's work once per g_source_set_ready_time(s, 0). */
static gboolean soon_dispatch(GSource *s, GSourceFunc cb, gpointer data)
{
    g_source_set_ready_time(s, -1);
    return cb ? cb(data) : (bench_hit(), G_SOURCE_CONTINUE);
}

static GSourceFuncs soon_funcs = { .dispatch = soon_dispatch };

static GSource *soon_new(GMainContext *ctx, GSourceFunc cb, gpointer data)
{
    GSource *s = g_source_new(&soon_funcs, sizeof(GSource));

    g_source_set_priority(s, G_PRIORITY_HIGH);
    if (cb) {
        g_source_set_callback(s, cb, data, NULL);
    }
    g_source_attach(s, ctx);
    return s;
}

static void soon_free(GSource *s)
{
    g_source_destroy(s);
    g_source_unref(s);
}

static void *defer_loop_new(const bench_args *args)
{
    (void)args;
    return g_main_context_new();
}

static void defer_loop_free(void *ctx)
{
    g_main_context_unref(ctx);
}

static void *defer_new(void *ctx)
{
    return soon_new(ctx, NULL, NULL);
}

static void defer_free(void *ctx, void *s)
{
    (void)ctx;
    soon_free(s);
}

static void defer_schedule(void *s)
{
    g_source_set_ready_time(s, 0);
}

static void defer_poll(void *ctx)
{
    g_main_context_iteration(ctx, FALSE);
}

static const bench_defer_ops defer_ops = {
    defer_loop_new, defer_loop_free, defer_new, defer_free, defer_schedule,
    defer_poll,
};

/* ------------------------------------------------------------ timers */

typedef struct gl_timer_loop {
    GMainContext *ctx;
    long n;
} gl_timer_loop;

static gboolean timer_cb(gpointer data)
{
    (void)data;
    bench_hit();
    return G_SOURCE_REMOVE;
}

static void *timer_loop_new(const bench_args *args)
{
    gl_timer_loop *tl = malloc(sizeof(*tl));

    tl->ctx = g_main_context_new();
    tl->n = args->n;
    return tl;
}

static void timer_loop_free(void *opaque)
{
    gl_timer_loop *tl = opaque;

    g_main_context_unref(tl->ctx);
    free(tl);
}

static void timer_arm(void *opaque, long i, long timeout_ms)
{
    gl_timer_loop *tl = opaque;
    GSource *s = g_timeout_source_new((guint)timeout_ms);

    (void)i;
    g_source_set_callback(s, timer_cb, NULL, NULL);
    g_source_attach(s, tl->ctx);
    g_source_unref(s); /* the context holds it until it is removed */
}

static void timer_run(void *opaque)
{
    gl_timer_loop *tl = opaque;

    while (bench_hits() < tl->n) {
        g_main_context_iteration(tl->ctx, TRUE);
    }
}

static void timer_free_all(void *opaque)
{
    (void)opaque; /* fired one-shot sources are gone already */
}

static const bench_timer_ops timer_ops = {
    timer_loop_new, timer_loop_free, timer_arm, timer_run, timer_free_all,
};

/* ------------------------------------------------------------ wakeup */

typedef struct gl_pingpong {
    GMainContext *main, *worker;
    GSource *ping; /* on the worker context */
    GSource *pong; /* on the main context */
    long rounds, target;
    atomic_bool done;
} gl_pingpong;

static gboolean ping_cb(gpointer data)
{
    gl_pingpong *pp = data;

    g_source_set_ready_time(pp->pong, 0);
    return G_SOURCE_CONTINUE;
}

static gboolean pong_cb(gpointer data)
{
    gl_pingpong *pp = data;

    if (++pp->rounds < pp->target) {
        g_source_set_ready_time(pp->ping, 0);
    } else {
        atomic_store(&pp->done, true);
        g_main_context_wakeup(pp->worker);
    }
    return G_SOURCE_CONTINUE;
}

static void *worker(void *opaque)
{
    gl_pingpong *pp = opaque;

    while (!atomic_load(&pp->done)) {
        g_main_context_iteration(pp->worker, TRUE);
    }
    return NULL;
}

static int wakeup(const bench_args *args, bench_metric *out)
{
    gl_pingpong pp = { .main = g_main_context_new(),
                       .worker = g_main_context_new(), .target = args->n };
    pthread_t tid;
    int64_t t0;

    atomic_init(&pp.done, false);
    pp.ping = soon_new(pp.worker, ping_cb, &pp);
    pp.pong = soon_new(pp.main, pong_cb, &pp);
    BENCH_CHECK(pthread_create(&tid, NULL, worker, &pp) == 0);
    t0 = bench_now_ns();
    g_source_set_ready_time(pp.ping, 0);
    while (pp.rounds < pp.target) {
        g_main_context_iteration(pp.main, TRUE);
    }
    bench_wakeup_result(out, t0, pp.rounds, pp.target);
    pthread_join(tid, NULL);
    soon_free(pp.ping);
    soon_free(pp.pong);
    g_main_context_unref(pp.worker);
    g_main_context_unref(pp.main);
    return 1;
}

int main(int argc, char **argv)
{
    static const bench_lib lib = {
        "glib", &fd_ops, &defer_ops, &timer_ops, wakeup, NULL, 0,
    };

    return bench_lib_main(&lib, argc, argv);
}
