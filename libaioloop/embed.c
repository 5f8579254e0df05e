/* SPDX-License-Identifier: MIT */
/*
 * embed.c - driving the loop from a host main loop, and embedder phases.
 *
 * A host loop sleeps on the fd monitor's own fd (epoll's epfd), which is
 * readable when any handler's fd is ready; the notifier eventfd is one of
 * those fds, so cross-thread wakeups reach the host too.  prepare() plays
 * the part of "about to block" in the notify protocol (notify.c): it sets
 * host_armed, which makes notifiers kick the loop until check() clears
 * it.  Blocking polls count in notify_me instead, so both may overlap (a
 * nested blocking poll inside a host-dispatched callback).
 *
 * prepare() sets host_armed in one seq_cst store (F1 here); the loads that
 * must see other threads' news after it (notified, the monitor's dirty
 * flag) are seq_cst too.  With the
 * remote side's fence (F2 in notify.c, F4 in handler.c) that is the same
 * Dekker pairing as a fence on each side, for one locked instruction
 * instead of two, and check() disarms with a plain release store.
 *
 * Direct embedding caches what aiol_loop_embed_fds() listed, with the
 * handler of each fd, stamped with loop->embed_gen.  While the stamp is
 * current, embed_fds() repeats the list and dispatch maps revents to
 * handlers without loop->lock.  The mapping is safe because the walk has
 * begun (walkers > 0, seq_cst) before embed_gen is read (seq_cst), and a
 * remover bumps embed_gen (seq_cst) before it reads walkers to decide
 * whether to free: either we see the bump and take the lock, or it sees
 * our walk and parks the handler, whose deleted flag dispatch checks.
 * A table with more fds than the host takes is cached too (over): while
 * it is current, embed_fds() answers -ENOSPC without the lock or a walk.
 * A loop never embedded this way (loop->embed_listed false) has no cache
 * to invalidate, and its table changes skip the bump.
 */
#include <errno.h>
#include <stdlib.h>

#include "fdmon.h"
#include "busypoll-priv.h"
#include "embed-priv.h"
#include "loop-priv.h"

struct aiol_phase {
    aiol_loop *loop;
    aiol_phase_ops ops;
    void *opaque;
    AIOL_LIST_ENTRY(aiol_phase) link; /* loop->phases; polling thread */
};

int aiol_loop_fd_get(aiol_loop *loop)
{
    aiol__check(loop != NULL, "loop is NULL");
    return loop->fdmon->embed ? loop->fdmon->embed->get_fd(loop) : -ENOTSUP;
}

/* Hands pending registrations to the kernel, for a host about to sleep. */
static void embed_flush(aiol_loop *loop)
{
    const aiol__fdmon_embed_ops *e = loop->fdmon->embed;

    if (e != NULL && e->flush != NULL) {
        e->flush(loop);
    }
}

bool aiol__embed_direct(aiol_loop *loop, bool direct)
{
    const aiol__fdmon_embed_ops *e = loop->fdmon->embed;

    aiol__assert_locked(loop);
    if (direct == aiol__embed_is_direct(loop)) {
        return direct;
    }
    atomic_store_explicit(&loop->direct, direct, memory_order_relaxed);
    if (direct) {
        if (!e->direct_enter(loop)) {
            atomic_store_explicit(&loop->direct, false, memory_order_relaxed);
            return false; /* the monitor needs its own fd this round */
        }
        return true;
    }
    aiol__embed_invalidate(loop); /* the embed list implied direct mode */
    if (e->direct_leave != NULL) {
        e->direct_leave(loop);
    }
    return false;
}

AIOL__HOT
void aiol__embed_direct_end(aiol_loop *loop)
{
    /* Relaxed is exact here: only the polling thread enters direct mode. */
    if (aiol__embed_is_direct(loop)) {
        aiol__lock(loop);
        (void)aiol__embed_direct(loop, false);
        aiol__unlock(loop);
    }
}

AIOL__HOT
int64_t aiol_loop_prepare(aiol_loop *loop)
{
    aiol__now now = AIOL__NOW_LAZY;
    int64_t d;

    aiol__check(loop != NULL, "loop is NULL");
    aiol__assert_poller(loop);
    /*
     * F1, a seq_cst store: pairs with F2 in aiol_loop_notify() and with F4
     * in handler.c.  Announcing ourselves before flushing means a change
     * the flush misses is made by a thread that sees host_armed and wakes
     * the host.
     */
    atomic_store_explicit(&loop->host_armed, true, memory_order_seq_cst);
    embed_flush(loop);
    /*
     * The host may sleep next: no handler stays busy-polled with its
     * notifications off (as in prepare_to_block(), loop.c).
     */
    if (loop->poll_started && aiol__busy_poll_stop_for_host(loop)) {
        return 0;
    }
    d = aiol__loop_deadline(loop, &now);
    return d > 0 ? d : 0; /* never negative, whatever a phase returned */
}

AIOL__HOT
bool aiol_loop_check(aiol_loop *loop)
{
    aiol__now now = AIOL__NOW_LAZY;
    int64_t deadline;

    aiol__check(loop != NULL, "loop is NULL");
    /* Release: the host's reads of our state stay before the disarm. */
    atomic_store_explicit(&loop->host_armed, false, memory_order_release);
    deadline = aiol__loop_deadline(loop, &now);
    return deadline == 0 ||
           (deadline != AIOL_DEADLINE_NONE && deadline <= aiol__now_get(&now));
}

bool aiol_loop_dispatch(aiol_loop *loop)
{
    return aiol__loop_iterate(loop, 0, false, true, NULL, 0);
}

/* Polling thread.  True when the cache still describes the table. */
AIOL__HOT
static bool embed_current(aiol_loop *loop)
{
    /* seq_cst: pairs with aiol__embed_invalidate() (see the top). */
    return loop->embed.valid &&
           loop->embed.gen == atomic_load_explicit(&loop->embed_gen,
                                                   memory_order_seq_cst);
}

AIOL__HOT
int aiol_loop_embed_fds(aiol_loop *loop, struct pollfd *fds, size_t max)
{
    aiol__embed_cache *c = &loop->embed;
    aiol__handler *node;
    size_t n = 0;
    int ret = 0;

    aiol__check(loop != NULL, "loop is NULL");
    aiol__check(fds != NULL || max == 0, "fds is NULL");
    aiol__assert_poller(loop);
    if (loop->fdmon->embed == NULL || loop->fdmon->embed->direct_enter == NULL) {
        return -ENOTSUP;
    }
    if (embed_current(loop)) {
        if (c->over) {
            if (max <= c->n) {
                return -ENOSPC; /* still too many: the loop fd, as before */
            }
        } else if (c->n <= max) {
            for (size_t i = 0; i < c->n; i++) {
                fds[i] = c->ent[i].pfd;
            }
            return (int)c->n;
        }
    }
    aiol__lock(loop);
    loop->embed_listed = true; /* from now on table changes bump embed_gen */
    c->valid = true;
    AIOL_LIST_FOREACH(node, &loop->live, node_live) {
        if (node->events == 0) {
            continue; /* busy-poll only: nothing for a host to poll */
        }
        if (n == max) {
            ret = -ENOSPC;
            break;
        }
        fds[n] = (struct pollfd){
            .fd = node->fd,
            .events = (short)aiol__events_to_poll(node->events),
        };
        if (aiol__reserve(&c->ent, &c->cap, n + 1, sizeof(*c->ent)) == 0) {
            c->ent[n] = (aiol__embed_entry){ .pfd = fds[n], .node = node };
        } else {
            c->valid = false; /* no cache: every call takes the lock */
        }
        n++;
    }
    if (!aiol__embed_direct(loop, ret == 0) && ret == 0) {
        ret = -EBUSY; /* the monitor needs the loop fd polled this round */
    }
    c->valid = c->valid && (ret == 0 || ret == -ENOSPC);
    c->over = ret == -ENOSPC;
    c->n = n;
    /* Under the lock, which every bump holds: exact. */
    c->gen = atomic_load_explicit(&loop->embed_gen, memory_order_relaxed);
    aiol__unlock(loop);
    /*
     * Hand what entering or leaving direct mode queued to the kernel now
     * (io_uring's cancels and re-arms): after -ENOSPC or -EBUSY the host
     * sleeps on the loop fd without another prepare.  Only on this path,
     * where the list was rebuilt, never on the cached one.
     */
    embed_flush(loop);
    return ret < 0 ? ret : (int)n;
}

/*
 * Queues @node (may be NULL) with what a host's poll(2) reported for its
 * fd: nothing for no events or POLLNVAL, else its events with hang-up and
 * error.
 */
static void ready_add_host(aiol__ready_list *ready, aiol__handler *node,
                           short revents)
{
    if (node != NULL && node->events != 0 && revents != 0 &&
        !(revents & POLLNVAL)) {
        aiol__ready_add(ready, node,
                        aiol__events_from_poll((unsigned short)revents) &
                            (node->events | AIOL__EV_HUP | AIOL__EV_ERR));
    }
}

/*
 * Under no lock; polling thread.  Queues on @ready the handlers of the
 * @n fds whose revents a host's poll filled in, looking each up in the
 * table (aiol__embed_ready() without its lock-free fast path).
 */
AIOL__HOT
static void ready_from_host(aiol_loop *loop, aiol__ready_list *ready,
                            const struct pollfd *fds, size_t n)
{
    aiol__lock(loop);
    for (size_t i = 0; i < n; i++) {
        if (fds[i].revents != 0) {
            ready_add_host(ready, aiol__handler_lookup(loop, fds[i].fd),
                                 fds[i].revents);
        }
    }
    aiol__unlock(loop);
}

AIOL__HOT
void aiol__embed_ready(aiol_loop *loop, aiol__ready_list *ready,
                       const struct pollfd *fds, size_t n)
{
    const aiol__embed_cache *c = &loop->embed;
    size_t i;

    if (n != c->n || c->over || !embed_current(loop)) {
        ready_from_host(loop, ready, fds, n);
        return;
    }
    for (i = 0; i < n && fds[i].fd == c->ent[i].pfd.fd; i++) {
    }
    if (i < n) {
        ready_from_host(loop, ready, fds, n); /* not our list */
        return;
    }
    for (i = 0; i < n; i++) {
        ready_add_host(ready, c->ent[i].node, fds[i].revents);
    }
}

void aiol__embed_fini(aiol_loop *loop)
{
    free(loop->embed.ent);
    loop->embed = (aiol__embed_cache){ .valid = false };
}

AIOL__HOT
bool aiol_loop_dispatch_fds(aiol_loop *loop, const struct pollfd *fds,
                            size_t n)
{
    aiol__check(fds != NULL || n == 0, "fds is NULL");
    return aiol__loop_iterate(loop, 0, true, true, fds, n);
}

int aiol_phase_new(aiol_loop *loop, const aiol_phase_ops *ops, void *opaque,
                   aiol_phase **out)
{
    aiol_phase *phase;

    aiol__check(loop != NULL, "loop is NULL");
    aiol__check(ops != NULL && out != NULL, "ops or out is NULL");
    aiol__assert_poller(loop);
    aiol__check(atomic_load(&loop->walkers) == 0,
                "phases are not made from inside the loop's callbacks");
    phase = calloc(1, sizeof(*phase));
    if (phase == NULL) {
        return -ENOMEM;
    }
    phase->loop = loop;
    phase->ops = *ops;
    phase->opaque = opaque;
    AIOL_LIST_INSERT_HEAD(&loop->phases, phase, link);
    loop->phases_first += ops->first != NULL;
    loop->phases_dispatch += ops->dispatch != NULL;
    *out = phase;
    return 0;
}

void aiol_phase_free(aiol_phase *phase)
{
    if (phase == NULL) {
        return;
    }
    aiol__check(atomic_load(&phase->loop->walkers) == 0,
                "phases are not freed from inside the loop's callbacks");
    phase->loop->phases_first -= phase->ops.first != NULL;
    phase->loop->phases_dispatch -= phase->ops.dispatch != NULL;
    AIOL_LIST_REMOVE(phase, link);
    free(phase);
}

int64_t aiol__phases_deadline_scan(aiol_loop *loop, aiol__now *now)
{
    int64_t deadline = AIOL_DEADLINE_NONE;
    aiol_phase *phase;

    AIOL_LIST_FOREACH(phase, &loop->phases, link) {
        if (phase->ops.deadline != NULL) {
            int64_t d = phase->ops.deadline(phase->opaque,
                                            aiol__now_get(now));
            deadline = d < deadline ? d : deadline;
        }
    }
    return deadline;
}

bool aiol__phases_dispatch_run(aiol_loop *loop, bool first)
{
    bool progress = false;
    aiol_phase *phase;

    AIOL_LIST_FOREACH(phase, &loop->phases, link) {
        bool (*fn)(void *) = first ? phase->ops.first : phase->ops.dispatch;

        if (fn != NULL) {
            progress |= fn(phase->opaque);
        }
    }
    return progress;
}
