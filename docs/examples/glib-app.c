/* SPDX-License-Identifier: MIT */
/*
 * glib-app.c - a glib application with libaioloop inside (an example:
 * docs/guide.md).  The application is ordinary glib: g_main_loop_run(),
 * a g_timeout, a GThread.  libaioloop rides along as a GSource
 * (aioloop/glib.h): a fd handler reads what the glib timeout writes into
 * a pipe, a worker thread schedules bottom halves on the loop, and a
 * libaioloop timer fires once.  Prints a summary and exits 0 when all of
 * it happened.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include <aioloop/aioloop.h>
#include <aioloop/glib.h>

#define TICKS 10
#define BHS 5

typedef struct app {
    GMainLoop *ml;
    aiol_loop *loop;
    aiol_bh *bh;
    int pipe[2];
    int ticks, reads, bhs, timers; /* glib's thread only, but bhs */
} app;

static void maybe_done(app *a)
{
    if (a->reads == TICKS && g_atomic_int_get(&a->bhs) == BHS &&
        a->timers == 1) {
        g_main_loop_quit(a->ml);
    }
}

/* glib: a tick writes a byte into the pipe */
static gboolean on_tick(gpointer data)
{
    app *a = data;

    (void)!write(a->pipe[1], "t", 1);
    return ++a->ticks < TICKS ? G_SOURCE_CONTINUE : G_SOURCE_REMOVE;
}

/* libaioloop: the pipe's handler */
static void on_pipe(void *opaque)
{
    app *a = opaque;
    char buf[16];
    ssize_t n = read(a->pipe[0], buf, sizeof(buf));

    a->reads += n > 0 ? (int)n : 0;
    maybe_done(a);
}

/* libaioloop: a bottom half the worker thread schedules */
static void on_bh(void *opaque)
{
    app *a = opaque;

    g_atomic_int_inc(&a->bhs);
    maybe_done(a);
}

static void on_timer(void *opaque)
{
    app *a = opaque;

    a->timers++;
    maybe_done(a);
}

static gpointer worker(gpointer data)
{
    app *a = data;

    for (int i = 0; i < BHS; i++) {
        g_usleep(15000);
        aiol_bh_schedule(a->bh); /* any thread may */
        while (g_atomic_int_get(&a->bhs) <= i) {
            g_usleep(1000); /* (one at a time: each must run) */
        }
    }
    return NULL;
}

int main(void)
{
    app a = { 0 };
    aiol_timer *t;
    GSource *src;
    GThread *th;

    if (pipe2(a.pipe, O_NONBLOCK | O_CLOEXEC) < 0 ||
        aiol_loop_new(&a.loop, NULL) < 0 ||
        aiol_fd_set(a.loop, a.pipe[0], on_pipe, NULL, NULL, &a) < 0 ||
        aiol_bh_new(a.loop, on_bh, &a, &a.bh) < 0 ||
        aiol_timer_new(aiol_loop_clock_get(a.loop), on_timer, &a, &t) < 0 ||
        aiol_timer_mod(t, aiol_clock_time_get(aiol_loop_clock_get(a.loop)) +
                              50 * 1000000) < 0) {
        fprintf(stderr, "glib-app: cannot set up the loop\n");
        return 1;
    }
    a.ml = g_main_loop_new(NULL, FALSE);
    src = aiol_glib_source_new(a.loop); /* the whole integration */
    g_source_attach(src, NULL);
    g_timeout_add(10, on_tick, &a);
    th = g_thread_new("worker", worker, &a);
    g_main_loop_run(a.ml);
    g_thread_join(th);
    printf("glib-app (%s): %d pipe reads, %d bottom halves from a thread, "
           "%d timer: ok\n", aiol_loop_fdmon_get(a.loop), a.reads,
           g_atomic_int_get(&a.bhs), a.timers);
    g_source_destroy(src);
    g_source_unref(src);
    aiol_timer_free(t);
    aiol_bh_free(a.bh);
    aiol_fd_remove(a.loop, a.pipe[0]);
    aiol_loop_free(a.loop);
    g_main_loop_unref(a.ml);
    close(a.pipe[0]);
    close(a.pipe[1]);
    return 0;
}
