/* SPDX-License-Identifier: MIT */
/*
 * coalesce.c - guest-driven MSI route updates, one commit per burst.
 *
 * Only the newest message of each route matters, and KVM replaces the
 * whole routing table in one call whose cost (a grace period) does not
 * depend on its size, so a burst is applied as one table: updates are
 * only queued, and a bottom half on the table's loop applies everything
 * queued at the time it runs with one aiol_vmm_msi_table_commit(), i.e. at
 * most one KVM_SET_GSI_ROUTING per burst however many vectors the guest
 * touched.
 *
 * Queue.  A slot per GSI holds the newest queued message, and an array
 * lists the GSIs queued (each once), so a burst of any length over k
 * routes costs O(k) to apply and no allocation; "last one wins" is just
 * the slot being overwritten.  Completion records (only for updates that
 * asked for one) form a FIFO.  All of it is under c->lock, held for a few
 * stores by updaters and for a copy by the bottom half.
 *
 * Ordering.  An update queued after the bottom half took the queue goes
 * into the next burst: the bottom half is scheduled again by that update
 * (aiol_bh_schedule() after unlocking; a schedule that finds the bottom
 * half already pending is a no-op, one that finds it running runs it
 * again next iteration).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

typedef struct done_rec done_rec;
struct done_rec {
    aiol_vmm_msi_done_fn *fn;
    void *opaque;
    uint32_t gsi;
    done_rec *next;
};

typedef struct pend {
    aiol_vmm_msi_msg msg; /* newest queued message */
    bool queued;          /* gsi is in c->queue */
} pend;

struct aiol_vmm_msi_coalescer {
    aiol_loop *loop;
    aiol_vmm_msi_table *table; /* the loop's thread */
    aiol_bh *bh;
    uint32_t limit;        /* the table's; immutable */

    pthread_mutex_t lock;
    /* Under lock: */
    pend *pend;            /* [limit] */
    uint32_t *queue;       /* [limit]: GSIs queued, in first-queued order */
    uint32_t nqueue;
    done_rec *done_head, **done_tail;
    uint64_t next_seq;     /* last sequence number handed out */
    bool has_runner;       /* runner is valid */
    pthread_t runner;      /* the thread the bottom half last ran on */

    /* The loop's thread only: */
    uint32_t *batch;       /* [limit]: the GSIs of the burst being applied */
    aiol_vmm_msi_msg *batch_msg; /* [limit] */
    int *result;           /* [limit], by GSI: the burst's result per route */
    uint64_t commits;

    /* Any thread (release by the loop's thread after a burst): */
    _Atomic uint64_t applied;
};

static void run_burst(void *opaque);

/* Frees @p c and its arrays (any of them may still be NULL). */
static void free_arrays(aiol_vmm_msi_coalescer *c)
{
    free(c->result);
    free(c->batch_msg);
    free(c->batch);
    free(c->queue);
    free(c->pend);
    free(c);
}

int aiol_vmm_msi_coalescer_new(aiol_loop *loop, aiol_vmm_msi_table *t,
                               aiol_vmm_msi_coalescer **out)
{
    aiol_vmm_msi_coalescer *c;
    uint32_t lim;
    int r;

    aiol__vmm_check(loop != NULL && t != NULL && out != NULL,
                    "NULL argument");
    lim = aiol_vmm_msi_table_limit_get(t);
    c = calloc(1, sizeof(*c));
    if (c == NULL) {
        return -ENOMEM;
    }
    c->loop = loop;
    c->table = t;
    c->limit = lim;
    c->pend = calloc(lim, sizeof(*c->pend));
    c->queue = calloc(lim, sizeof(*c->queue));
    c->batch = calloc(lim, sizeof(*c->batch));
    c->batch_msg = calloc(lim, sizeof(*c->batch_msg));
    c->result = calloc(lim, sizeof(*c->result));
    r = -ENOMEM;
    if (c->pend == NULL || c->queue == NULL || c->batch == NULL ||
        c->batch_msg == NULL || c->result == NULL) {
        goto fail;
    }
    r = -pthread_mutex_init(&c->lock, NULL);
    if (r != 0) {
        goto fail;
    }
    r = aiol_bh_new(loop, run_burst, c, &c->bh);
    if (r < 0) {
        pthread_mutex_destroy(&c->lock);
        goto fail;
    }
    c->done_tail = &c->done_head;
    atomic_init(&c->applied, 0);
    *out = c;
    return 0;

fail:
    free_arrays(c);
    return r;
}

/* Takes the queue (caller holds c->lock); returns its length. */
static uint32_t take_queue(aiol_vmm_msi_coalescer *c, done_rec **dones)
{
    uint32_t n = c->nqueue;

    for (uint32_t i = 0; i < n; i++) {
        uint32_t g = c->queue[i];

        c->batch[i] = g;
        c->batch_msg[i] = c->pend[g].msg;
        c->pend[g].queued = false;
    }
    c->nqueue = 0;
    *dones = c->done_head;
    c->done_head = NULL;
    c->done_tail = &c->done_head;
    return n;
}

static void run_dones(done_rec *d, const int *result, int all)
{
    while (d != NULL) {
        done_rec *next = d->next;

        d->fn(d->opaque, result != NULL ? result[d->gsi] : all);
        free(d);
        d = next;
    }
}

/* The bottom half: applies one burst. */
static void run_burst(void *opaque)
{
    aiol_vmm_msi_coalescer *c = opaque;
    done_rec *dones;
    uint64_t last;
    uint32_t n;
    int ret;

    pthread_mutex_lock(&c->lock);
    c->runner = pthread_self();
    c->has_runner = true;
    n = take_queue(c, &dones);
    last = c->next_seq;
    pthread_mutex_unlock(&c->lock);
    if (n == 0 && dones == NULL) {
        return;
    }

    for (uint32_t i = 0; i < n; i++) {
        c->result[c->batch[i]] =
            aiol_vmm_msi_msg_set(c->table, c->batch[i], &c->batch_msg[i]);
    }
    ret = aiol_vmm_msi_table_commit(c->table);
    c->commits++;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t g = c->batch[i];

        if (ret < 0 && c->result[g] == 0) {
            aiol_vmm_msi_route_abort(c->table, g);  /* keep the old route */
            c->result[g] = ret;
        }
    }
    /* Pairs with the acquire load in aiol_vmm_msi_coalescer_applied_get(). */
    atomic_store_explicit(&c->applied, last, memory_order_release);
    run_dones(dones, c->result, 0);
}

void aiol_vmm_msi_coalescer_free(aiol_vmm_msi_coalescer *c)
{
    done_rec *dones;

    if (c == NULL) {
        return;
    }
    pthread_mutex_lock(&c->lock);
    (void)take_queue(c, &dones);
    pthread_mutex_unlock(&c->lock);
    run_dones(dones, NULL, -ECANCELED);
    aiol_bh_free(c->bh);
    pthread_mutex_destroy(&c->lock);
    free_arrays(c);
}

int aiol_vmm_msi_coalescer_set(aiol_vmm_msi_coalescer *c, uint32_t gsi,
                               const aiol_vmm_msi_msg *msg,
                               aiol_vmm_msi_done_fn *done, void *opaque,
                               uint64_t *seq)
{
    done_rec *d = NULL;
    uint64_t s;

    aiol__vmm_check(c != NULL && msg != NULL, "NULL argument");
    if (gsi >= c->limit) {
        return -EINVAL;
    }
    if (done != NULL) {
        d = malloc(sizeof(*d));
        if (d == NULL) {
            return -ENOMEM;
        }
        d->fn = done;
        d->opaque = opaque;
        d->gsi = gsi;
        d->next = NULL;
    }
    pthread_mutex_lock(&c->lock);
    if (!c->pend[gsi].queued) {
        c->pend[gsi].queued = true;
        c->queue[c->nqueue++] = gsi;
    }
    c->pend[gsi].msg = *msg;
    s = ++c->next_seq;
    if (d != NULL) {
        *c->done_tail = d;
        c->done_tail = &d->next;
    }
    pthread_mutex_unlock(&c->lock);
    aiol_bh_schedule(c->bh);
    if (seq != NULL) {
        *seq = s;
    }
    return 0;
}

/* A thread blocked in aiol_vmm_msi_coalescer_set_wait(). */
typedef struct waiter {
    aiol_vmm_msi_coalescer *c;
    pthread_cond_t cond; /* signalled under c->lock */
    bool done;           /* under c->lock */
    int result;          /* under c->lock */
} waiter;

static void wake_waiter(void *opaque, int result)
{
    waiter *w = opaque;

    pthread_mutex_lock(&w->c->lock);
    w->result = result;
    w->done = true;
    pthread_cond_signal(&w->cond);
    pthread_mutex_unlock(&w->c->lock);
}

int aiol_vmm_msi_coalescer_set_wait(aiol_vmm_msi_coalescer *c, uint32_t gsi,
                                    const aiol_vmm_msi_msg *msg)
{
    waiter w = { .c = c, .done = false, .result = 0 };
    bool on_loop;
    int r;

    aiol__vmm_check(c != NULL && msg != NULL, "NULL argument");
    pthread_mutex_lock(&c->lock);
    on_loop = c->has_runner && pthread_equal(c->runner, pthread_self());
    pthread_mutex_unlock(&c->lock);
    aiol__vmm_check(!on_loop, "called on the coalescer's loop thread: "
                              "it would wait for itself");
    r = -pthread_cond_init(&w.cond, NULL);
    if (r != 0) {
        return r;
    }
    r = aiol_vmm_msi_coalescer_set(c, gsi, msg, wake_waiter, &w, NULL);
    if (r == 0) {
        pthread_mutex_lock(&c->lock);
        while (!w.done) {
            pthread_cond_wait(&w.cond, &c->lock);
        }
        r = w.result;
        pthread_mutex_unlock(&c->lock);
    }
    pthread_cond_destroy(&w.cond);
    return r;
}

uint64_t aiol_vmm_msi_coalescer_applied_get(const aiol_vmm_msi_coalescer *c)
{
    /* Pairs with the release store at the end of run_burst(). */
    return atomic_load_explicit(&((aiol_vmm_msi_coalescer *)c)->applied,
                                memory_order_acquire);
}

uint64_t aiol_vmm_msi_coalescer_commits_get(const aiol_vmm_msi_coalescer *c)
{
    return c->commits;
}
