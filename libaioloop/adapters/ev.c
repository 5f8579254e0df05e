/* SPDX-License-Identifier: MIT */
/*
 * ev.c - aioloop-ev: libev watchers that drive an aiol_loop
 * (aioloop/ev.h), on the embedding API of aioloop/embed.h.
 *
 * Every ev_run() iteration the prepare watcher takes the loop's deadline
 * and what libev must poll (hostpoll.h: the handlers' fds, at most
 * AIOL_EMBED_DIRECT_MAX, or the loop fd) into ev_io watchers, sets the
 * ev_timer to the deadline or starts the ev_idle when work is due (so
 * libev does not block).  The check watcher takes those watchers' events
 * off libev (ev_clear_pending(): their callbacks are empty), pairs the
 * prepare and runs one loop iteration if anything is due.  Both run at
 * EV_MAXPRI, before other watchers.
 *
 * The thread running the ev_loop owns all of this.
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include <ev.h>

#include "aioloop/ev.h"
#include "hostpoll.h"

struct aiol_ev {
    aiol__hostpoll hp;
    struct ev_loop *evl;
    ev_prepare prep;
    ev_check chk;
    ev_timer timer;            /* the loop's deadline */
    ev_idle idle;              /* work is due: libev must not block */
    ev_io io[AIOL__HOSTPOLL_MAX]; /* direct mode: hp.fds */
    int nio;                   /* of io[], started */
    ev_io loop_io;             /* the loop fd, when started */
};

#define CONTAINER(ptr, type, member) \
    ((type *)(void *)((char *)(ptr) - offsetof(type, member)))

/* The watchers libev polls for us: their events are taken in check. */
static void nop_io(struct ev_loop *evl, ev_io *w, int revents)
{
    (void)evl, (void)w, (void)revents;
}

static void nop_timer(struct ev_loop *evl, ev_timer *w, int revents)
{
    (void)evl, (void)w, (void)revents;
}

static void nop_idle(struct ev_loop *evl, ev_idle *w, int revents)
{
    (void)evl, (void)w, (void)revents;
}

/* libev polls what hp says from now on. */
static void mirror(aiol_ev *e)
{
    for (int i = 0; i < e->nio; i++) {
        ev_io_stop(e->evl, &e->io[i]);
    }
    e->nio = 0;
    ev_io_stop(e->evl, &e->loop_io);
    for (int i = 0; i < e->hp.ndirect; i++) {
        short ev = e->hp.fds[i].events;

        ev_io_set(&e->io[i], e->hp.fds[i].fd,
                  (ev & (POLLIN | POLLRDHUP) ? EV_READ : 0) |
                      (ev & POLLOUT ? EV_WRITE : 0));
        ev_io_start(e->evl, &e->io[i]);
        e->nio++;
    }
    if (e->hp.ndirect < 0 && e->hp.loop_fd >= 0) {
        ev_io_set(&e->loop_io, e->hp.loop_fd, EV_READ);
        ev_io_start(e->evl, &e->loop_io);
    }
}

static void on_prepare(struct ev_loop *evl, ev_prepare *w, int revents)
{
    aiol_ev *e = CONTAINER(w, aiol_ev, prep);
    int64_t ns;

    (void)revents;
    if (aiol__hostpoll_prepare(&e->hp, &ns)) {
        mirror(e);
    }
    ev_timer_stop(evl, &e->timer);
    ev_idle_stop(evl, &e->idle);
    if (ns == 0) {
        ev_idle_start(evl, &e->idle);
    } else if (ns > 0) {
        /* (relative to ev_now(), no later than the loop's clock: a timer
         *  may fire early, never late; check then finds nothing due) */
        ev_timer_set(&e->timer, (double)ns / 1e9, 0.);
        ev_timer_start(evl, &e->timer);
    }
}

static void on_check(struct ev_loop *evl, ev_check *w, int revents)
{
    aiol_ev *e = CONTAINER(w, aiol_ev, chk);
    bool ready;

    (void)revents;
    ev_idle_stop(evl, &e->idle);
    ready = ev_clear_pending(evl, &e->timer) != 0;
    ready |= ev_clear_pending(evl, &e->idle) != 0;
    ready |= aiol__hostpoll_unprepare(&e->hp);
    for (int i = 0; i < e->nio; i++) {
        int got = ev_clear_pending(evl, &e->io[i]);

        e->hp.fds[i].revents = (short)((got & EV_READ ? POLLIN : 0) |
                                       (got & EV_WRITE ? POLLOUT : 0));
        ready |= got != 0;
    }
    if (e->hp.ndirect < 0) {
        ready |= e->hp.loop_fd < 0 || ev_clear_pending(evl, &e->loop_io) != 0;
    }
    if (ready) {
        aiol__hostpoll_dispatch(&e->hp);
    }
}

int aiol_ev_attach(aiol_loop *loop, struct ev_loop *evl, aiol_ev **out)
{
    aiol_ev *e;

    if (loop == NULL || evl == NULL || out == NULL) {
        fprintf(stderr, "aiol_ev_attach: NULL argument (misuse)\n");
        abort();
    }
    e = calloc(1, sizeof(*e));
    if (e == NULL) {
        return -ENOMEM;
    }
    aiol__hostpoll_init(&e->hp, loop);
    e->evl = evl;
    ev_prepare_init(&e->prep, on_prepare);
    ev_check_init(&e->chk, on_check);
    ev_set_priority(&e->prep, EV_MAXPRI);
    ev_set_priority(&e->chk, EV_MAXPRI);
    ev_timer_init(&e->timer, nop_timer, 0., 0.);
    ev_idle_init(&e->idle, nop_idle);
    ev_init(&e->loop_io, nop_io);
    for (int i = 0; i < AIOL__HOSTPOLL_MAX; i++) {
        ev_init(&e->io[i], nop_io);
    }
    ev_prepare_start(evl, &e->prep);
    ev_check_start(evl, &e->chk);
    *out = e;
    return 0;
}

void aiol_ev_detach(aiol_ev *e)
{
    if (e == NULL) {
        return;
    }
    (void)aiol__hostpoll_unprepare(&e->hp);
    e->hp.ndirect = -1;
    e->hp.loop_fd = -1;
    mirror(e); /* (stops every io watcher) */
    ev_timer_stop(e->evl, &e->timer);
    ev_idle_stop(e->evl, &e->idle);
    ev_prepare_stop(e->evl, &e->prep);
    ev_check_stop(e->evl, &e->chk);
    free(e);
}
