/* SPDX-License-Identifier: MIT */
/*
 * park.c - a device's queues on other loops than its own.
 *
 * A queue may be served on another thread's loop (vq->loop), which then
 * runs its kick handler, busy polling and the device's callbacks for it.
 * The frontend's messages are still handled on the device's loop thread,
 * and most of them change what the queue threads read: the memory table,
 * the features, a ring's fds and addresses.  So before handling one, the
 * device thread parks every other loop serving its queues: each gets a
 * bottom half in which its thread waits on the device's condition
 * variable until the message is done.  While parked, a loop's thread
 * does what the message asks of its queues (aiol__vhost_run_on(): stop a
 * ring and complete what its device popped, complete what guest memory
 * still holds) on its own thread, where the queue's I/O engine lives.
 * The mutex hand-over orders what either side wrote before: a queue
 * thread sees the message's effects when it resumes.
 *
 * Each such loop has a slot with its own bottom half, made when the first
 * queue moves there, so parking never allocates and cannot fail.  A slot
 * whose last queue left is freed after the park it left in ends.
 *
 * A loop whose thread stops polling it while it serves queues would
 * never park: the device's loop thread would wait for it for good.
 */
#include <errno.h>
#include <stdlib.h>

#include "internal.h"

void aiol__vhost_park_init(aiol_vhost_dev *dev)
{
    aiol__vhost_check(pthread_mutex_init(&dev->park.lock, NULL) == 0 &&
                      pthread_cond_init(&dev->park.cond, NULL) == 0,
                      "cannot create the device's mutex");
}

static void slot_free(vu_park_slot *sl)
{
    aiol_bh_free(sl->bh);
    free(sl);
}

void aiol__vhost_park_fini(aiol_vhost_dev *dev)
{
    vu_park *p = &dev->park;

    for (unsigned i = 0; i < p->nslots; i++) {
        slot_free(p->slot[i]);
    }
    p->nslots = 0;
    pthread_cond_destroy(&p->cond);
    pthread_mutex_destroy(&p->lock);
}

/* The bottom half on a parked loop: waits, doing the work handed to it,
 * until the park it came for ends. */
static void park_bh(void *opaque)
{
    vu_park_slot *sl = opaque;
    vu_park *p = sl->park;
    unsigned gen;

    pthread_mutex_lock(&p->lock);
    gen = p->gen;
    sl->parked = true;
    pthread_cond_broadcast(&p->cond);
    while (p->released != gen) {
        if (sl->fn != NULL) {
            aiol_handler_fn *fn = sl->fn;

            pthread_mutex_unlock(&p->lock);
            fn(sl->arg);
            pthread_mutex_lock(&p->lock);
            sl->fn = NULL;
            pthread_cond_broadcast(&p->cond);
            continue;
        }
        pthread_cond_wait(&p->cond, &p->lock);
    }
    sl->parked = false;
    pthread_cond_broadcast(&p->cond);
    pthread_mutex_unlock(&p->lock);
}

void aiol__vhost_park(aiol_vhost_dev *dev)
{
    vu_park *p = &dev->park;
    bool all;

    if (p->depth++ > 0 || p->nslots == 0) {
        return;
    }
    pthread_mutex_lock(&p->lock);
    p->gen++;
    for (unsigned i = 0; i < p->nslots; i++) {
        aiol_bh_schedule(p->slot[i]->bh);
    }
    do {
        all = true;
        for (unsigned i = 0; i < p->nslots; i++) {
            all = all && p->slot[i]->parked;
        }
        if (!all) {
            pthread_cond_wait(&p->cond, &p->lock);
        }
    } while (!all);
    pthread_mutex_unlock(&p->lock);
}

/* Device thread, nothing parked: frees the slots no queue uses. */
static void slots_trim(vu_park *p)
{
    unsigned n = 0;

    for (unsigned i = 0; i < p->nslots; i++) {
        if (p->slot[i]->nqueues == 0) {
            slot_free(p->slot[i]);
        } else {
            p->slot[n++] = p->slot[i];
        }
    }
    p->nslots = n;
}

void aiol__vhost_unpark(aiol_vhost_dev *dev)
{
    vu_park *p = &dev->park;
    bool any;

    aiol__vhost_check(p->depth > 0, "unpark without park");
    if (--p->depth > 0 || p->released == p->gen) {
        return; /* (nothing was parked) */
    }
    pthread_mutex_lock(&p->lock);
    p->released = p->gen;
    pthread_cond_broadcast(&p->cond);
    do {
        any = false;
        for (unsigned i = 0; i < p->nslots; i++) {
            any = any || p->slot[i]->parked;
        }
        if (any) {
            pthread_cond_wait(&p->cond, &p->lock);
        }
    } while (any);
    pthread_mutex_unlock(&p->lock);
    slots_trim(p);
}

static vu_park_slot *slot_of(vu_park *p, const aiol_loop *loop)
{
    for (unsigned i = 0; i < p->nslots; i++) {
        if (p->slot[i]->loop == loop) {
            return p->slot[i];
        }
    }
    return NULL;
}

void aiol__vhost_run_on(aiol_vhost_vq *vq, aiol_handler_fn *fn, void *arg)
{
    vu_park *p = &vq->dev->park;
    vu_park_slot *sl;

    if (vq->loop == vq->dev->loop) {
        fn(arg);
        return;
    }
    sl = slot_of(p, vq->loop);
    aiol__vhost_check(p->depth > 0 && sl != NULL && sl->parked,
                      "work for a queue thread that is not parked");
    pthread_mutex_lock(&p->lock);
    sl->fn = fn;
    sl->arg = arg;
    pthread_cond_broadcast(&p->cond);
    while (sl->fn != NULL) {
        pthread_cond_wait(&p->cond, &p->lock);
    }
    pthread_mutex_unlock(&p->lock);
}

aiol_loop *aiol_vhost_vq_loop_get(const aiol_vhost_vq *vq)
{
    aiol__vhost_check(vq != NULL, "NULL queue");
    return vq->loop;
}

/* Device thread, parked: a slot for @loop, made if none (-ENOMEM). */
static int slot_get(aiol_vhost_dev *dev, aiol_loop *loop, vu_park_slot **out)
{
    vu_park *p = &dev->park;
    vu_park_slot *sl = slot_of(p, loop);

    if (sl == NULL) {
        sl = calloc(1, sizeof(*sl));
        if (sl == NULL) {
            return -ENOMEM;
        }
        sl->park = p;
        sl->loop = loop;
        if (aiol_bh_new(loop, park_bh, sl, &sl->bh) < 0) {
            free(sl);
            return -ENOMEM;
        }
        p->slot[p->nslots++] = sl; /* (at most one per queue) */
    }
    *out = sl;
    return 0;
}

/*
 * Device thread, parked: moves @vq to @loop (slot @to, NULL for the
 * device's loop).  The old loop is parked and the new one does not see
 * the queue until its kick fd is watched there, so no thread touches the
 * queue meanwhile.  0, or the error watching the kick fd (nothing moved:
 * the old loop still watches it).
 */
static int move(aiol_vhost_vq *vq, aiol_loop *loop, vu_park_slot *to)
{
    aiol_loop *old = vq->loop;
    vu_park_slot *from = slot_of(&vq->dev->park, old);

    vq->loop = loop;
    if (vq->kick_fd >= 0) {
        int r = aiol__vhost_vq_kick_watch(vq);

        if (r < 0) {
            vq->loop = old;
            return r;
        }
        /* (from this thread: on the parked old loop the removal is
           done when it returns, fd.h) */
        aiol_fd_remove(old, vq->kick_fd);
    }
    if (from != NULL) {
        from->nqueues--;
    }
    if (to != NULL) {
        to->nqueues++;
    }
    return 0;
}

int aiol_vhost_dev_queue_loop_set(aiol_vhost_dev *dev, unsigned index,
                                  aiol_loop *loop)
{
    aiol_vhost_vq *vq;
    vu_park_slot *to = NULL;
    int r = 0;

    aiol__vhost_check(dev != NULL && loop != NULL, "NULL argument");
    aiol__vhost_check(index < dev->num_queues, "queue index out of range");
    if (!(dev->ops.flags & AIOL_VHOST_DEV_QUEUE_THREADS)) {
        return -ENOTSUP;
    }
    vq = &dev->vqs[index];
    aiol__vhost_park(dev);
    if (loop == vq->loop) {
        goto out;
    }
    if (vq->inflight > 0) {
        r = -EBUSY;
        goto out;
    }
    if (loop != dev->loop && (r = slot_get(dev, loop, &to)) < 0) {
        goto out;
    }
    if (dev->ops.queue_loop != NULL &&
        (r = dev->ops.queue_loop(dev->opaque, vq, loop)) < 0) {
        goto out;
    }
    if ((r = move(vq, loop, to)) < 0) {
        goto out;
    }
    /* A kick may have come to the old loop after its last look: kick the
     * queue once on its new loop (its thread may run already). */
    aiol__vhost_vq_kick_self(vq);
out:
    aiol__vhost_unpark(dev);
    return r;
}
