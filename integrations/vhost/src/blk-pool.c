/* SPDX-License-Identifier: MIT */
/*
 * blk-pool.c - the vhost-user-blk device's worker threads (blk.h), as
 * qemu-storage-daemon's aio=threads: each request runs preadv(),
 * pwritev(), fdatasync() or fallocate() on a worker, and a bottom half
 * hands the finished ones back to the context's loop thread, one schedule
 * per batch.  Each context has its own pool.  Workers start on demand, up
 * to the device's maximum per pool, and stay until the context goes; they
 * block every signal, which stay the loops'.
 *
 * Threads: the context's loop thread submits, collects and drains; a
 * worker owns a request from taking it off the queue until it is on the
 * done list.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>

#include "blk.h"
#include "internal.h"

#define MAX_WORKERS_DEFAULT 64u

struct blk_pool {
    blk_ctx *c;                 /* set at creation */
    aiol_bh *done_bh;           /* collects the done list; the context's
                                   loop thread */
    pthread_mutex_t lock;
    pthread_cond_t work;        /* the queue gained a request or stop; lock */
    pthread_cond_t idle;        /* pending dropped to 0; lock */
    blk_req *queue, **queue_tail; /* to run, oldest first; lock */
    blk_req *done, **done_tail;   /* run, not collected; lock */
    unsigned pending;           /* queued or running; lock */
    unsigned waiting;           /* workers waiting for work; lock */
    unsigned nthreads;          /* started; lock (written: the context's
                                   loop thread) */
    unsigned max;               /* set at creation */
    bool stop;                  /* lock */
    pthread_t *threads;         /* max of them; the context's loop thread */
};

static void *worker(void *opaque)
{
    blk_pool *p = opaque;

    pthread_mutex_lock(&p->lock);
    for (;;) {
        blk_req *r;
        bool first;

        while (p->queue == NULL && !p->stop) {
            p->waiting++;
            pthread_cond_wait(&p->work, &p->lock);
            p->waiting--;
        }
        if (p->queue == NULL) {
            break; /* stopping, nothing left */
        }
        r = p->queue;
        p->queue = r->next;
        if (p->queue == NULL) {
            p->queue_tail = &p->queue;
        }
        pthread_mutex_unlock(&p->lock);

        r->res = aiol__vblk_io_run(r);

        pthread_mutex_lock(&p->lock);
        r->next = NULL;
        first = p->done == NULL;
        *p->done_tail = r;
        p->done_tail = &r->next;
        if (--p->pending == 0) {
            pthread_cond_broadcast(&p->idle);
        }
        if (first) {
            aiol_bh_schedule(p->done_bh); /* (any thread) */
        }
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

/* The context's loop thread: completes every request on the done list. */
static void collect(void *opaque)
{
    blk_pool *p = opaque;
    blk_req *r;

    pthread_mutex_lock(&p->lock);
    r = p->done;
    p->done = NULL;
    p->done_tail = &p->done;
    pthread_mutex_unlock(&p->lock);
    aiol__vblk_batch_begin(p->c);
    while (r != NULL) {
        blk_req *next = r->next;

        aiol__vblk_io_done(r, r->res);
        r = next;
    }
    aiol__vblk_batch_end(p->c);
}

/* Starts one more worker, all signals blocked in it; 0 or -errno.
 * Called with the lock held. */
static int spawn(blk_pool *p)
{
    sigset_t all, old;
    int ret;

    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    ret = pthread_create(&p->threads[p->nthreads], NULL, worker, p);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (ret == 0) {
        p->nthreads++;
    }
    return -ret;
}

int aiol__vblk_pool_new(blk_ctx *c, unsigned max_workers, blk_pool **out)
{
    blk_pool *p = calloc(1, sizeof(*p));
    int ret;

    if (p == NULL) {
        return -ENOMEM;
    }
    p->c = c;
    p->max = max_workers != 0 ? max_workers : MAX_WORKERS_DEFAULT;
    p->queue_tail = &p->queue;
    p->done_tail = &p->done;
    p->threads = calloc(p->max, sizeof(*p->threads));
    ret = p->threads == NULL ? -ENOMEM
                             : aiol_bh_new(c->loop, collect, p, &p->done_bh);
    if (ret < 0) {
        free(p->threads);
        free(p);
        return ret;
    }
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->work, NULL);
    pthread_cond_init(&p->idle, NULL);
    /* One worker from the start, so that the pool always has one. */
    pthread_mutex_lock(&p->lock);
    ret = spawn(p);
    pthread_mutex_unlock(&p->lock);
    if (ret < 0) {
        aiol__vblk_pool_free(p);
        return ret;
    }
    *out = p;
    return 0;
}

void aiol__vblk_pool_submit(blk_pool *p, blk_req *r)
{
    pthread_mutex_lock(&p->lock);
    r->next = NULL;
    *p->queue_tail = r;
    p->queue_tail = &r->next;
    p->pending++;
    if (p->waiting == 0 && p->nthreads < p->max) {
        (void)spawn(p); /* (none: the workers there are take it) */
    }
    pthread_cond_signal(&p->work);
    pthread_mutex_unlock(&p->lock);
}

void aiol__vblk_pool_drain(blk_pool *p)
{
    pthread_mutex_lock(&p->lock);
    while (p->pending > 0) {
        pthread_cond_wait(&p->idle, &p->lock);
    }
    pthread_mutex_unlock(&p->lock);
    collect(p);
}

void aiol__vblk_pool_free(blk_pool *p)
{
    if (p == NULL) {
        return;
    }
    pthread_mutex_lock(&p->lock);
    aiol__vhost_check(p->pending == 0 && p->done == NULL,
                      "the worker pool freed with requests in it");
    p->stop = true;
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->lock);
    for (unsigned i = 0; i < p->nthreads; i++) {
        pthread_join(p->threads[i], NULL);
    }
    aiol_bh_free(p->done_bh);
    pthread_cond_destroy(&p->idle);
    pthread_cond_destroy(&p->work);
    pthread_mutex_destroy(&p->lock);
    free(p->threads);
    free(p);
}
