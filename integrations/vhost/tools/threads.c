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
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "aioloop/bh.h"
#include "aioloop/iothread.h"
#include "cli.h"

#define PROG "aioloop-vhost-blk"

/* A call run on a loop's thread, waited for (poll_set()). */
typedef struct call {
    aiol_loop *loop;
    unsigned poll_max_ns;
    int ret;
    bool done;
    pthread_mutex_t lock;
    pthread_cond_t cond;
} call;

/* On the iothread: its busy-poll window (the poller's own setting). */
static void poll_set_here(void *opaque)
{
    call *k = opaque;
    int ret = aiol_loop_poll_params_set(k->loop, (int64_t)k->poll_max_ns, 0,
                                        0);

    pthread_mutex_lock(&k->lock);
    k->ret = ret;
    k->done = true;
    pthread_cond_signal(&k->cond);
    pthread_mutex_unlock(&k->lock);
}

/* Sets @loop's busy-poll window on its thread; 0 or -errno. */
static int poll_set(aiol_loop *loop, unsigned poll_max_ns)
{
    call k = { .loop = loop, .poll_max_ns = poll_max_ns };
    int r;

    pthread_mutex_init(&k.lock, NULL);
    pthread_cond_init(&k.cond, NULL);
    r = aiol_bh_schedule_oneshot(loop, poll_set_here, &k);
    pthread_mutex_lock(&k.lock);
    while (r == 0 && !k.done) {
        pthread_cond_wait(&k.cond, &k.lock);
    }
    pthread_mutex_unlock(&k.lock);
    pthread_cond_destroy(&k.cond);
    pthread_mutex_destroy(&k.lock);
    return r < 0 ? r : k.ret;
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
