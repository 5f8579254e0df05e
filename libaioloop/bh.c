/* SPDX-License-Identifier: MIT */
/*
 * bh.c - bottom halves.
 *
 * Scheduling pushes the bottom half on loop->bh_list, a lock-free stack
 * (compare-and-swap on its head), unless its PENDING flag says it is
 * already on some list; then it notifies the loop (only a sleeping one: the
 * push is the notify, see F2b in notify.c).  PENDING is the only
 * thing that decides list membership, so two schedules before a run push
 * once and run once.
 *
 * Running (aiol__bh_poll, once per poll call) detaches the whole stack with
 * one exchange, reverses it into first-scheduled-first order and appends it
 * as this call's *slice* to loop->bh_slices.  It then runs slices from the
 * oldest: a nested poll started by a callback first finishes its parent's
 * slice, so order holds across nesting and no bottom half runs twice.  A
 * bottom half is unlinked and its flags cleared before its callback runs,
 * so the callback may schedule it again (next iteration) or free it.
 *
 * Freeing is a schedule with the DELETED flag: the loop frees the bottom
 * half when it next takes it off a list, which makes a free safe from any
 * thread and from the bottom half's own callback.
 *
 * Local bottom halves (aiol_bh_new_local()) belong to the polling thread:
 * their flags are only ever touched by it, so plain loads and stores do,
 * and they queue on loop->bh_local_head, a FIFO with no atomics.  A poll
 * call appends that FIFO to the slice it takes, after the thread-safe ones,
 * and from there both kinds run alike.  No locked instruction and no
 * notify: the thread that schedules is the one that will poll.  On a
 * thread-confined loop every bottom half is local but those of
 * aiol_bh_new_shared() and the one-shot ones, the cross-thread entries.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "internal.h"
#include "bh-priv.h"
#include "notify-priv.h"

/* Idle bottom halves run at most this late. */
#define AIOL__BH_IDLE_NS (10 * 1000 * 1000)

/* A run of bottom halves taken by one poll call; see bh.c. */
typedef struct aiol__bh_slice {
    struct aiol_bh *head;
    AIOL_TAILQ_ENTRY(aiol__bh_slice) link;
} aiol__bh_slice;

enum {
    BH_PENDING = 1u << 0,   /* on loop->bh_list or a slice */
    BH_SCHEDULED = 1u << 1, /* run when dequeued */
    BH_DELETED = 1u << 2,   /* free when dequeued, do not run */
    BH_ONESHOT = 1u << 3,   /* free after running */
    BH_IDLE = 1u << 4,      /* does not wake the loop nor count as progress */
};

struct aiol_bh {
    aiol_loop *loop;     /* immutable */
    aiol_handler_fn *cb; /* immutable */
    void *opaque;        /* immutable */
    bool local;          /* immutable: aiol_bh_new_local() */
    atomic_uint flags;   /* BH_*; any thread (a local one: polling thread) */
    /*
     * Link in loop->bh_list or in a slice.  Written only by the thread that
     * set PENDING, before the release CAS that publishes the bottom half;
     * read by the polling thread after its acquire exchange.
     */
    aiol_bh *next;
};

static int bh_new(aiol_loop *loop, aiol_handler_fn *cb, void *opaque,
                  bool local, aiol_bh **out)
{
    aiol_bh *bh;

    aiol__check(loop != NULL, "loop is NULL");
    aiol__check(cb != NULL && out != NULL, "cb or out is NULL");
    bh = calloc(1, sizeof(*bh));
    if (bh == NULL) {
        return -ENOMEM;
    }
    bh->loop = loop;
    bh->cb = cb;
    bh->opaque = opaque;
    bh->local = local;
    atomic_fetch_add_explicit(&loop->bh_live, 1, memory_order_relaxed);
    *out = bh;
    return 0;
}

int aiol_bh_new(aiol_loop *loop, aiol_handler_fn *cb, void *opaque,
                aiol_bh **out)
{
    aiol__check(loop != NULL, "loop is NULL");
    return bh_new(loop, cb, opaque, loop->confined, out);
}

int aiol_bh_new_shared(aiol_loop *loop, aiol_handler_fn *cb, void *opaque,
                       aiol_bh **out)
{
    return bh_new(loop, cb, opaque, false, out);
}

int aiol_bh_new_local(aiol_loop *loop, aiol_handler_fn *cb, void *opaque,
                      aiol_bh **out)
{
    return bh_new(loop, cb, opaque, true, out);
}

static void bh_free(aiol_bh *bh)
{
    atomic_fetch_sub_explicit(&bh->loop->bh_live, 1, memory_order_relaxed);
    free(bh);
}

/*
 * The flags an enqueue leaves: @set added, and the IDLE bit decided so
 * that a bottom half runs as idle only if every schedule since it last ran
 * was idle (a normal schedule is never demoted by a later idle one).
 */
static unsigned enqueue_flags(unsigned old, unsigned set)
{
    unsigned now = old | BH_PENDING | set;

    if (!(set & BH_SCHEDULED)) {
        return now; /* a free: IDLE is irrelevant */
    }
    if (!(set & BH_IDLE) ||
        ((old & (BH_PENDING | BH_SCHEDULED)) == (BH_PENDING | BH_SCHEDULED) &&
         !(old & BH_IDLE))) {
        now &= ~(unsigned)BH_IDLE;
    }
    return now;
}

/* Polling thread.  bh_enqueue() of a local bottom half. */
static void bh_enqueue_local(aiol_bh *bh, unsigned set_flags)
{
    aiol_loop *loop = bh->loop;
    unsigned old = atomic_load_explicit(&bh->flags, memory_order_relaxed);

    aiol__assert_poller(loop);
    atomic_store_explicit(&bh->flags, enqueue_flags(old, set_flags),
                          memory_order_relaxed);
    if (!(old & BH_PENDING)) {
        bh->next = NULL;
        if (loop->bh_local_tail != NULL) {
            loop->bh_local_tail->next = bh;
        } else {
            loop->bh_local_head = bh;
        }
        loop->bh_local_tail = bh;
    }
}

/* Any thread.  Sets @set_flags and makes sure @bh is on a list. */
static void bh_enqueue(aiol_bh *bh, unsigned set_flags)
{
    aiol_loop *loop = bh->loop;
    unsigned old;

    if (bh->local) {
        bh_enqueue_local(bh, set_flags);
        return;
    }
    old = atomic_load_explicit(&bh->flags, memory_order_relaxed);
    /*
     * acq_rel: the release orders the caller's writes (the data the
     * callback will read) before the flag the polling thread reads with
     * acquire in bh_dequeue(); the acquire pairs with the release in
     * bh_dequeue()'s fetch_and, so bh->next is ours again.
     */
    while (!atomic_compare_exchange_weak_explicit(
               &bh->flags, &old, enqueue_flags(old, set_flags),
               memory_order_acq_rel, memory_order_relaxed)) {
    }
    if (!(old & BH_PENDING)) {
        aiol_bh *head = atomic_load_explicit(&loop->bh_list,
                                             memory_order_relaxed);
        do {
            bh->next = head;
            /*
             * Release pairs with the acquire exchange in bh_take_all().
             * seq_cst makes the push the store of the notify handshake
             * (F2b, see notify.c), so no fence follows it.
             */
        } while (!atomic_compare_exchange_weak_explicit(
                     &loop->bh_list, &head, bh, memory_order_seq_cst,
                     memory_order_relaxed));
        if (!(set_flags & BH_IDLE)) {
            aiol__notify_pushed(loop);
        }
    } else if (!(set_flags & BH_IDLE)) {
        aiol_loop_notify(loop); /* (no push: only the flags changed) */
    }
}

void aiol_bh_schedule(aiol_bh *bh)
{
    aiol__check(bh != NULL, "bh is NULL");
    bh_enqueue(bh, BH_SCHEDULED);
}

void aiol_bh_schedule_idle(aiol_bh *bh)
{
    aiol__check(bh != NULL, "bh is NULL");
    bh_enqueue(bh, BH_SCHEDULED | BH_IDLE);
}

void aiol_bh_cancel(aiol_bh *bh)
{
    aiol__check(bh != NULL, "bh is NULL");
    if (bh->local) {
        aiol__assert_poller(bh->loop);
        atomic_store_explicit(&bh->flags,
                              atomic_load_explicit(&bh->flags,
                                                   memory_order_relaxed) &
                                  ~(unsigned)BH_SCHEDULED,
                              memory_order_relaxed);
        return;
    }
    atomic_fetch_and_explicit(&bh->flags, ~(unsigned)BH_SCHEDULED,
                              memory_order_relaxed);
}

void aiol_bh_free(aiol_bh *bh)
{
    aiol__check(bh != NULL, "bh is NULL");
    bh_enqueue(bh, BH_DELETED);
}

int aiol_bh_schedule_oneshot(aiol_loop *loop, aiol_handler_fn *cb, void *opaque)
{
    aiol_bh *bh;
    int ret = aiol_bh_new_shared(loop, cb, opaque, &bh); /* (any thread) */

    if (ret == 0) {
        bh_enqueue(bh, BH_SCHEDULED | BH_ONESHOT);
    }
    return ret;
}

/* aiol_bh_schedule_wait()'s call, on the caller's stack until it is done. */
typedef struct bh_call {
    aiol_handler_fn *cb;
    void *opaque;
    bool done;               /* lock */
    pthread_mutex_t lock;
    pthread_cond_t cond;     /* done set */
} bh_call;

/* On the loop's thread: the call, then wakes its caller. */
static void bh_call_run(void *opaque)
{
    bh_call *c = opaque;

    c->cb(c->opaque);
    pthread_mutex_lock(&c->lock);
    c->done = true;
    pthread_cond_signal(&c->cond);
    pthread_mutex_unlock(&c->lock);
}

int aiol_bh_schedule_wait(aiol_loop *loop, aiol_handler_fn *cb, void *opaque)
{
    bh_call c = { .cb = cb, .opaque = opaque };
    int ret;

    aiol__check(loop != NULL && cb != NULL, "loop or callback is NULL");
    pthread_mutex_init(&c.lock, NULL);
    pthread_cond_init(&c.cond, NULL);
    ret = aiol_bh_schedule_oneshot(loop, bh_call_run, &c);
    pthread_mutex_lock(&c.lock);
    while (ret == 0 && !c.done) {
        pthread_cond_wait(&c.cond, &c.lock);
    }
    pthread_mutex_unlock(&c.lock);
    pthread_cond_destroy(&c.cond);
    pthread_mutex_destroy(&c.lock);
    return ret;
}

/*
 * Polling thread.  Takes the first bottom half off @slice and returns it
 * with the flags it had, clearing all but DELETED so that it can be
 * scheduled again at once.
 */
static aiol_bh *bh_dequeue(aiol__bh_slice *slice, unsigned *flags)
{
    aiol_bh *bh = slice->head;

    if (bh != NULL && bh->local) {
        slice->head = bh->next;
        *flags = atomic_load_explicit(&bh->flags, memory_order_relaxed);
        atomic_store_explicit(&bh->flags, *flags & BH_DELETED,
                              memory_order_relaxed);
    } else if (bh != NULL) {
        slice->head = bh->next;
        /*
         * Release: our read of bh->next above happens before an enqueuer
         * that sees PENDING clear rewrites it (pairs with its acquire).
         * Acquire pairs with the enqueuer's release of the data it wrote.
         */
        *flags = atomic_fetch_and_explicit(
            &bh->flags, BH_DELETED, memory_order_acq_rel);
    }
    return bh;
}

/*
 * Polling thread.  Detaches loop->bh_list and returns it oldest first,
 * followed by the local FIFO.
 */
static aiol_bh *bh_take_all(aiol_loop *loop)
{
    /* Acquire pairs with the release CAS in bh_enqueue(). */
    aiol_bh *bh = atomic_exchange_explicit(&loop->bh_list, NULL,
                                           memory_order_acquire);
    aiol_bh *fifo = loop->bh_local_head;

    loop->bh_local_head = loop->bh_local_tail = NULL;
    while (bh != NULL) {
        aiol_bh *next = bh->next;
        bh->next = fifo;
        fifo = bh;
        bh = next;
    }
    return fifo;
}

AIOL__HOT
bool aiol__bh_poll_run(aiol_loop *loop)
{
    aiol__bh_slice slice = { .head = NULL };
    aiol__bh_slice *s;
    bool progress = false;

    slice.head = bh_take_all(loop);
    AIOL_TAILQ_INSERT_TAIL(&loop->bh_slices, &slice, link);
    loop->bh_idle_seen_ns = 0; /* every pending idle BH runs below */

    while ((s = AIOL_TAILQ_FIRST(&loop->bh_slices)) != NULL) {
        unsigned flags;
        aiol_bh *bh = bh_dequeue(s, &flags);

        if (bh == NULL) {
            AIOL_TAILQ_REMOVE(&loop->bh_slices, s, link);
            continue;
        }
        if ((flags & (BH_SCHEDULED | BH_DELETED)) == BH_SCHEDULED) {
            if (!(flags & BH_IDLE)) {
                progress = true;
            }
            loop->stats.bh_runs++;
            bh->cb(bh->opaque);
        }
        if (flags & (BH_DELETED | BH_ONESHOT)) {
            bh_free(bh);
        }
    }
    return progress;
}

/* What a chain of pending bottom halves waits for, most urgent last. */
enum { CHAIN_NONE, CHAIN_IDLE, CHAIN_NOW };

/*
 * Scans a chain: CHAIN_NOW if one must run now, CHAIN_IDLE if only idle
 * ones wait, CHAIN_NONE if none does.
 */
static int chain_state(const aiol_bh *bh)
{
    int state = CHAIN_NONE;

    for (; bh != NULL; bh = bh->next) {
        unsigned flags = atomic_load_explicit(&bh->flags, memory_order_relaxed);

        if ((flags & (BH_SCHEDULED | BH_DELETED)) == BH_SCHEDULED) {
            if (!(flags & BH_IDLE)) {
                return CHAIN_NOW;
            }
            state = CHAIN_IDLE;
        }
    }
    return state;
}

AIOL__HOT
int64_t aiol__bh_deadline_scan(aiol_loop *loop, aiol__now *now)
{
    /*
     * Acquire pairs with the release CAS in bh_enqueue(); seq_cst, since
     * a push is a notify of its own (F2b in notify.c).
     */
    const aiol_bh *head = atomic_load_explicit(&loop->bh_list,
                                               memory_order_seq_cst);
    int state = chain_state(head);
    const aiol__bh_slice *s;

    if (state != CHAIN_NOW) {
        int st = chain_state(loop->bh_local_head);
        state = st > state ? st : state;
    }
    /* Slices a nested poll's parents have not finished yet. */
    AIOL_TAILQ_FOREACH(s, &loop->bh_slices, link) {
        int st = chain_state(s->head);
        state = st > state ? st : state;
    }
    if (state == CHAIN_NOW) {
        return 0;
    }
    if (state == CHAIN_NONE) {
        return AIOL_DEADLINE_NONE;
    }
    /* Idle ones are due 10 ms after the loop first saw one pending. */
    if (loop->bh_idle_seen_ns == 0) {
        loop->bh_idle_seen_ns = aiol__now_get(now);
    }
    return loop->bh_idle_seen_ns + AIOL__BH_IDLE_NS;
}

void aiol__bh_free_all(aiol_loop *loop)
{
    aiol_bh *bh = bh_take_all(loop);

    while (bh != NULL) {
        aiol_bh *next = bh->next;
        unsigned flags = atomic_load_explicit(&bh->flags, memory_order_relaxed);

        if (flags & (BH_DELETED | BH_ONESHOT)) {
            bh_free(bh);
        } else {
            atomic_store_explicit(&bh->flags, 0, memory_order_relaxed);
        }
        bh = next;
    }
    aiol__check(atomic_load(&loop->bh_live) == 0,
                "loop freed while bottom halves still exist (free them first)");
}
