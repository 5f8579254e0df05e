/* SPDX-License-Identifier: MIT */
/*
 * threads.c - aioloop-vhost-blk's loop threads (cli.h).
 *
 * Every --object iothread, and for --threads N the N - 1 threads beyond
 * the main one, is an aiol_iothread on the daemon's fd monitor.  An
 * export's queues are placed on them: with iothread= (or its list
 * iothread.0=...), queue q on the (q mod count)th; else with --threads N,
 * queue q on thread q mod N, thread 0 being the main loop, which also
 * reads every frontend's messages.  Each thread that serves queues of an
 * export gets the export's engine of its own (vhost-blk.h).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdio.h>
#include <string.h>

#include "aioloop/bh.h"
#include "aioloop/iothread.h"
#include "cli.h"

#define PROG "aioloop-vhost-blk"

/* A loop and the busy-poll window to give it (poll_set()). */
typedef struct poll_arg {
    aiol_loop *loop;
    unsigned poll_max_ns;
    int ret;
} poll_arg;

/* On the iothread: its busy-poll window (the poller's own setting). */
static void poll_set_here(void *opaque)
{
    poll_arg *a = opaque;

    a->ret = aiol_loop_poll_params_set(a->loop, (int64_t)a->poll_max_ns, 0,
                                       0);
}

/* Sets @loop's busy-poll window on its thread; 0 or -errno. */
static int poll_set(aiol_loop *loop, unsigned poll_max_ns)
{
    poll_arg a = { .loop = loop, .poll_max_ns = poll_max_ns };
    int r = aiol_bh_schedule_wait(loop, poll_set_here, &a);

    return r < 0 ? r : a.ret;
}

static int start_one(vd_config *c, vd_iothread *t)
{
    int r = aiol_iothread_new(c->fdmon, &t->thread);

    if (r == 0) {
        r = poll_set(aiol_iothread_loop_get(t->thread),
                     t->poll_set ? t->poll_max_ns : c->poll_max_ns);
    }
    if (r < 0) {
        fprintf(stderr, PROG ": error: iothread %s: %s\n",
                t->id != NULL ? t->id : "of --threads", strerror(-r));
        return -1;
    }
    return 0;
}

int vd_threads_start(vd_config *c)
{
    for (unsigned i = 0; i < c->niothreads; i++) {
        if (start_one(c, &c->iothreads[i]) < 0) {
            return -1;
        }
    }
    for (unsigned i = 0; i + 1 < c->threads; i++) {
        if (start_one(c, &c->extra[i]) < 0) {
            return -1;
        }
    }
    return 0;
}

aiol_loop *vd_queue_loop(vd_config *c, const vd_export *e, unsigned q,
                         aiol_loop *main)
{
    if (e->niothreads > 0) {
        return aiol_iothread_loop_get(e->iothreads[q % e->niothreads]->thread);
    }
    if (q % c->threads == 0) {
        return main;
    }
    return aiol_iothread_loop_get(c->extra[q % c->threads - 1].thread);
}

void vd_threads_stop(vd_config *c)
{
    for (unsigned i = 0; i < c->niothreads; i++) {
        aiol_iothread_free(c->iothreads[i].thread);
        c->iothreads[i].thread = NULL;
    }
    for (unsigned i = 0; i < VD_MAX_THREADS; i++) {
        aiol_iothread_free(c->extra[i].thread);
        c->extra[i].thread = NULL;
    }
}
