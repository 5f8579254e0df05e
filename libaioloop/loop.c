/* SPDX-License-Identifier: MIT */
/*
 * loop.c - loop lifetime, fd monitor selection and one poll iteration.
 *
 * One iteration (aiol_loop_poll_deadline):
 *   1. enter the walking counter, so nothing removed from now on is freed
 *      under our feet;
 *   2. if blocking: announce it (notify_me, see notify.c) and shorten the
 *      deadline to the earliest bottom half, timer or phase; busy-poll
 *      the handlers' poll callbacks for the adaptive window, and if that
 *      found nothing, end busy polling (poll_end, one more poll) so that
 *      no handler sleeps with its notifications off;
 *   3. wait on the fd monitor until the deadline (0: just look),
 *      collecting ready handlers on this call's own ready list;
 *   4. accept the notify, adapt the busy-poll window;
 *   5. run embedder phases' first callbacks and bottom halves, dispatch
 *      the ready list, run io_uring request completions (first of all,
 *      with AIOL_LOOP_COMPLETIONS_FIRST), fire due timers, run embedder
 *      phases;
 *   6. leave the walking counter; the outermost call frees removed
 *      handlers.
 * docs/design.md describes the phases, nesting and deletion in full.
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fdmon.h"
#include "bh-priv.h"
#include "busypoll-priv.h"
#include "embed-priv.h"
#include "loop-priv.h"
#include "notify-priv.h"
#include "timer-priv.h"

/* In order of preference for the default choice. */
static const aiol__fdmon_ops *const fdmons[] = {
    &aiol__fdmon_epoll,
#ifdef AIOL_HAVE_IO_URING
    &aiol__fdmon_io_uring,
#endif
    &aiol__fdmon_poll,
};
#define N_FDMONS (sizeof(fdmons) / sizeof(fdmons[0]))

/* Undoes loop_start() whatever stage it reached. */
void aiol__loop_quiesce(aiol_loop *loop)
{
    if (loop->fdmon->requests != NULL) {
        loop->fdmon->requests->quiesce(loop);
    }
}

static void loop_teardown(aiol_loop *loop, bool mon_started)
{
    if (mon_started) {
        aiol__loop_quiesce(loop);
    }
    aiol__notify_fini(loop);
    aiol__bh_free_all(loop);
    aiol__handlers_free_all(loop);
    aiol__embed_fini(loop);
    if (mon_started) {
        loop->fdmon->fini(loop);
    }
    aiol__clocks_fini(loop);
    aiol__busy_poll_fini(loop);
    free(loop);
}

static int loop_start(aiol_loop **out, const aiol__fdmon_ops *mon,
                      unsigned flags)
{
    aiol_loop *loop;
    int ret;

    assert(mon->init && mon->fini && mon->update && mon->reserve &&
           mon->wait && "an fd monitor without a required op (fdmon.h)");
    /* (cache-line aligned: the hot fields fill their lines, internal.h) */
    loop = aligned_alloc(AIOL__LOOP_ALIGN,
                         (sizeof(*loop) + AIOL__LOOP_ALIGN - 1) &
                             ~(size_t)(AIOL__LOOP_ALIGN - 1));
    if (loop == NULL) {
        return -ENOMEM;
    }
    memset(loop, 0, sizeof(*loop));
    atomic_init(&loop->lock, 0);
    AIOL_LIST_INIT(&loop->deleted);
    AIOL_LIST_INIT(&loop->live);
    AIOL_LIST_INIT(&loop->phases);
    AIOL_TAILQ_INIT(&loop->bh_slices);
    loop->notify_fd = -1;
    loop->fdmon = mon;
    loop->confined = (flags & AIOL_LOOP_CONFINED) != 0;
    loop->interruptible = (flags & AIOL_LOOP_INTERRUPTIBLE) != 0;
    loop->completions_first = (flags & AIOL_LOOP_COMPLETIONS_FIRST) != 0;
    for (unsigned k = 0; k < AIOL__KINDS; k++) {
        atomic_init(&loop->nkind[k], 0);
    }
    aiol__owner_take(loop);
    loop->pid = getpid(); /* fork.c */
    ret = aiol__clocks_init(loop);
    if (ret < 0) {
        loop_teardown(loop, false);
        return ret;
    }
    ret = mon->init(loop);
    if (ret < 0) {
        loop_teardown(loop, false);
        return ret;
    }
    ret = aiol__notify_init(loop);
    if (ret < 0) {
        loop_teardown(loop, true);
        return ret;
    }
    *out = loop;
    return 0;
}

static const aiol__fdmon_ops *fdmon_find(const char *name)
{
    for (size_t i = 0; i < N_FDMONS; i++) {
        if (strcmp(fdmons[i]->name, name) == 0) {
            return fdmons[i];
        }
    }
    return NULL;
}

int aiol_loop_new_flags(aiol_loop **out, const char *fdmon, unsigned flags)
{
    const aiol__fdmon_ops *mon;
    const char *env;
    int ret = -ENOSYS;

    aiol__check(out != NULL, "out is NULL");
    if (flags & ~(unsigned)(AIOL_LOOP_CONFINED | AIOL_LOOP_INTERRUPTIBLE |
                            AIOL_LOOP_COMPLETIONS_FIRST)) {
        return -EINVAL;
    }
    if (fdmon != NULL) {
        mon = fdmon_find(fdmon);
        return mon != NULL ? loop_start(out, mon, flags) : -EINVAL;
    }
    /* AIOLOOP_BACKEND: the variable's name before AIOLOOP_FDMON. */
    env = getenv("AIOLOOP_FDMON");
    if (env == NULL || *env == '\0') {
        env = getenv("AIOLOOP_BACKEND");
    }
    if (env != NULL && *env != '\0' && (mon = fdmon_find(env)) != NULL &&
        loop_start(out, mon, flags) == 0) {
        return 0;
    }
    /*
     * Every failure moves on to the next monitor: io_uring may fail with
     * ENOSYS, EPERM (seccomp, io_uring_disabled) or ENOMEM (locked memory)
     * where epoll works.  The last monitor's error is returned.
     */
    for (size_t i = 0; i < N_FDMONS; i++) {
        ret = loop_start(out, fdmons[i], flags);
        if (ret == 0) {
            break;
        }
    }
    return ret;
}

int aiol_loop_new(aiol_loop **out, const char *fdmon)
{
    return aiol_loop_new_flags(out, fdmon, 0);
}

bool aiol_loop_is_confined(const aiol_loop *loop)
{
    aiol__check(loop != NULL, "loop is NULL");
    return loop->confined;
}

void aiol_loop_owner_set(aiol_loop *loop)
{
    aiol__check(loop != NULL, "loop is NULL");
    aiol__check(atomic_load_explicit(&loop->walkers, memory_order_relaxed) == 0,
                "aiol_loop_owner_set() from inside the loop's poll");
    aiol__owner_take(loop);
}

void aiol_loop_free(aiol_loop *loop)
{
    if (loop == NULL) {
        return;
    }
    aiol__check(atomic_load(&loop->walkers) == 0,
                "loop freed from inside its own poll");
    aiol__owner_take(loop);
    aiol__check(AIOL_LIST_EMPTY(&loop->phases),
                "loop freed while phases still exist (free them first)");
    if (aiol__loop_forked(loop)) {
        aiol__loop_forget_forked(loop); /* a fork child: see fork.c */
    }
    loop_teardown(loop, true);
}

const char *aiol_loop_fdmon_get(const aiol_loop *loop)
{
    aiol__check(loop != NULL, "loop is NULL");
    return loop->fdmon->name;
}

const char *aiol_fdmon_name_get(size_t index)
{
    return index < N_FDMONS ? fdmons[index]->name : NULL;
}

AIOL__HOT
int64_t aiol__loop_deadline(aiol_loop *loop, aiol__now *now)
{
    int64_t d, deadline;

    /* seq_cst: pairs with F2 in aiol_loop_notify() (see the top). */
    if (atomic_load_explicit(&loop->notified, memory_order_seq_cst) ||
        loop->poll_recheck ||
        (loop->fdmon->pending != NULL && loop->fdmon->pending(loop))) {
        return 0;
    }
    /* (inline checks skip each source that has nothing: internal.h) */
    deadline = aiol__bh_deadline(loop, now);
    if (deadline == 0) {
        return 0;
    }
    d = aiol__timers_deadline(loop, now);
    deadline = d < deadline ? d : deadline;
    d = aiol__phases_deadline(loop, now);
    return d < deadline ? d : deadline;
}

/*
 * Step 2 of an iteration that may block: announces it, then returns the
 * deadline to wait for (0: do not block), having busy-polled if enabled.
 */
AIOL__HOT
static int64_t prepare_to_block(aiol_loop *loop, aiol__ready_list *ready,
                                int64_t deadline_ns, aiol__now *now)
{
    int64_t d;

    if (atomic_load_explicit(&loop->walkers, memory_order_relaxed) > 1) {
        aiol__notify_drain_nested(loop); /* (see there) */
    }
    atomic_fetch_add_explicit(&loop->notify_me, 2, memory_order_relaxed);
    /*
     * F1: pairs with F2 in aiol_loop_notify(), and with F4 in handler.c
     * for registration changes the monitor applies at its next wait.
     */
    atomic_thread_fence(memory_order_seq_cst);
    d = aiol__loop_deadline(loop, now);
    deadline_ns = d < deadline_ns ? d : deadline_ns;
    /* (no clock read for a wait with no deadline and no busy polling) */
    if (deadline_ns != AIOL_DEADLINE_NONE && deadline_ns <= aiol__now_get(now)) {
        return 0;
    }
    if (loop->poll_ns > 0 &&
        aiol__busy_poll(loop, ready, aiol__now_get(now), deadline_ns)) {
        return 0;
    }
    /*
     * No wait that may block starts while a handler is busy-polled: its
     * poll_begin may have turned off the notifications (a virtqueue's
     * kick) that would end the wait.  poll_end turns them back on and
     * polls once more (after F1, so a notify that misses our poll sees
     * notify_me); work found there means no sleep.
     */
    if (loop->poll_started && aiol__busy_poll_stop(loop, ready)) {
        return 0;
    }
    return deadline_ns;
}

/*
 * Polling thread.  Whether a look (a wait with deadline 0) can be skipped:
 * every handler is a wakeup fd, or busy polling is on (poll_max_ns) and
 * every other handler has a poll callback, which a round of the window
 * (when it is open) or the next blocking poll consults; QEMU 7.2 skips
 * the look then too.  The second counts toward the waits busy polling may
 * skip in a row, so an fd whose poll callback misses its readiness is
 * still looked at.  Never while the monitor owes a look (a request's
 * completion) or holds what ended the busy-poll window (spin_check).
 */
static inline bool look_needless(aiol_loop *loop)
{
    size_t unpolled = aiol__kind_count(loop, AIOL__KIND_UNPOLLED);
    bool polled = false;

    if (loop->poll_look_owed) {
        return false; /* the monitor holds what ended the window */
    }
    if (unpolled != 0 || aiol__kind_count(loop, AIOL__KIND_POLLED) != 0) {
        polled = loop->poll_max_ns > 0 &&
                 loop->poll_skipped_waits < AIOL__POLL_MAX_SKIPS &&
                 unpolled == 0;
        if (!polled) {
            return false;
        }
    }
    /* (the monitor is asked only when the look would be skipped) */
    if (loop->fdmon->look_owed != NULL && loop->fdmon->look_owed(loop)) {
        return false;
    }
    loop->poll_skipped_waits += polled;
    return true;
}

/*
 * Step 5's dispatch: the callbacks of the handlers the wait found ready.
 * The handlers stay valid while it walks, because the walking counter
 * parks removed ones on the deleted list instead of freeing them, and
 * marks them deleted first.
 */
/*
 * Runs the callbacks of one ready handler.  Read runs on input, hang-up or
 * error; write on output or error.  A handler deleted before or between its
 * callbacks is skipped from then on.
 */
AIOL__HOT
static bool dispatch_handler(aiol_loop *loop, aiol__handler *node)
{
    unsigned revents = node->revents;
    bool progress = false;

    loop->stats.handler_visits++;
    /* Acquire pairs with the release store in retire_locked(). */
    if (atomic_load_explicit(&node->deleted, memory_order_acquire)) {
        return false;
    }
    if (revents & AIOL__EV_POLL) {
        aiol_handler_fn *cb = node->ops.poll_ready ? node->ops.poll_ready
                                                   : node->ops.read;
        if (cb != NULL) {
            loop->stats.callbacks++;
            /* (the node stays valid memory: the walking counter) */
            node->in_poll_ready = true;
            cb(node->opaque);
            node->in_poll_ready = false;
            progress = true;
        }
        return progress;
    }
    if ((revents & (AIOL__EV_IN | AIOL__EV_HUP | AIOL__EV_ERR)) &&
        node->ops.read != NULL) {
        if (node->ops.poll != NULL) {
            aiol__busy_poll_progress(loop, node);
        }
        loop->stats.callbacks++;
        node->ops.read(node->opaque);
        progress = !node->internal;
    }
    if ((revents & (AIOL__EV_OUT | AIOL__EV_ERR)) && node->ops.write != NULL &&
        !atomic_load_explicit(&node->deleted, memory_order_acquire)) {
        loop->stats.callbacks++;
        node->ops.write(node->opaque);
        progress = true;
    }
    return progress;
}

AIOL__HOT
static bool dispatch_ready(aiol_loop *loop, aiol__ready_list *ready)
{
    aiol__handler *node;
    bool progress = false;

    /*
     * Pop from the head each time: a callback may take any other handler
     * off this list (a nested poll stealing it) and we never hold a
     * pointer to a successor.
     */
    while ((node = AIOL_LIST_FIRST(ready)) != NULL) {
        AIOL_LIST_REMOVE(node, node_ready);
        progress |= dispatch_handler(loop, node);
    }
    return progress;
}

AIOL__HOT
bool aiol__loop_iterate(aiol_loop *loop, int64_t deadline_ns, bool from_host,
                        bool for_host, const struct pollfd *host, size_t nhost)
{
    aiol__ready_list ready = AIOL_LIST_HEAD_INITIALIZER;
    bool blocking = deadline_ns > 0 && !from_host;
    bool progress;
    aiol__now start = AIOL__NOW_LAZY; /* (when a blocking wait began) */

    aiol__check(loop != NULL, "loop is NULL");
    aiol__walk_begin(loop);
    loop->stats.iterations++;

    if (from_host) {
        /* The host polled the fds itself: its revents are our wait. */
        aiol__embed_ready(loop, &ready, host, nhost);
    } else {
        if (blocking) {
            if (loop->poll_max_ns > 0) {
                aiol__now_get(&start); /* (the window adapts to the wait) */
            }
            deadline_ns = prepare_to_block(loop, &ready, deadline_ns, &start);
        }
        /*
         * A wait that will not block looks at the poll callbacks once
         * while the window is open, or when prepare() saw work as it
         * ended polling for the host.
         */
        if (deadline_ns == 0 && AIOL_LIST_EMPTY(&ready) &&
            (loop->poll_ns > 0 || loop->poll_recheck)) {
            loop->poll_recheck = false;
            aiol__busy_poll(loop, &ready, aiol_mono_time_get(), 0); /* 1 round */
        }
        /* Busy-polled work skips the wait, but not many times in a row. */
        if (!AIOL_LIST_EMPTY(&ready) &&
            loop->poll_skipped_waits < AIOL__POLL_MAX_SKIPS) {
            loop->poll_skipped_waits++;
        } else if (deadline_ns == 0 && !for_host &&
                   look_needless(loop)) {
            /*
             * Nothing a look could report: wakeup fds only end blocking
             * waits, and the next one drains them (a bottom-half run
             * after one aiol_bh_schedule() makes no syscall); or busy
             * polling is on and every other handler's poll callback sees
             * what its fd would say.  Not for a host's dispatch: the
             * host polls the loop fd, which stays readable until a wait
             * drains them.
             */
        } else {
            int ret;

            assert(!(deadline_ns != 0 && loop->poll_started) &&
                   "a wait that may block with handlers still busy-polled");
            if (deadline_ns != 0 && loop->block_before != NULL) {
                loop->block_before(loop->block_opaque);
                ret = loop->fdmon->wait(loop, &ready, deadline_ns);
                loop->block_after(loop->block_opaque);
            } else {
                ret = loop->fdmon->wait(loop, &ready, deadline_ns);
            }

            aiol__check(ret >= 0, "fd monitor wait failed");
            loop->poll_skipped_waits = 0;
            loop->poll_look_owed = false;
        }
    }

    if (blocking) {
        atomic_fetch_sub_explicit(&loop->notify_me, 2, memory_order_release);
    }
    aiol__notify_accept(loop);
    if (blocking && loop->poll_max_ns > 0 && start.read) {
        aiol__busy_poll_adjust(loop, aiol_mono_time_get() - start.ns);
    }
    if (loop->poll_ns == 0 && loop->poll_started) {
        aiol__busy_poll_stop(loop, &ready);
    }

    /* (inline checks skip each one that has nothing: internal.h) */
    progress = false;
    if (loop->fdmon->requests != NULL && loop->completions_first) {
        progress = loop->fdmon->requests->dispatch(loop);
    }
    progress |= aiol__phases_dispatch(loop, true);
    progress |= aiol__bh_poll(loop);
    if (!AIOL_LIST_EMPTY(&ready)) {
        progress |= dispatch_ready(loop, &ready);
    }
    if (loop->fdmon->requests != NULL && !loop->completions_first) {
        progress |= loop->fdmon->requests->dispatch(loop);
    }
    progress |= aiol__timers_run(loop);
    progress |= aiol__phases_dispatch(loop, false);
    aiol__walk_end(loop);
    return progress;
}

AIOL__HOT
bool aiol_loop_poll_deadline(aiol_loop *loop, int64_t deadline_ns)
{
    return aiol__loop_iterate(loop, deadline_ns, false, false, NULL, 0);
}

AIOL__HOT
bool aiol_loop_poll(aiol_loop *loop, bool blocking)
{
    /* (not through aiol_loop_poll_deadline(): one call less per poll) */
    return aiol__loop_iterate(loop, blocking ? AIOL_DEADLINE_NONE : 0, false,
                              false, NULL, 0);
}

void aiol_loop_block_hooks_set(aiol_loop *loop, aiol_block_fn *before,
                               aiol_block_fn *after, void *opaque)
{
    aiol__check(loop != NULL, "loop is NULL");
    aiol__check((before == NULL) == (after == NULL),
                "block hooks come in pairs: both set or both NULL");
    aiol__check(atomic_load_explicit(&loop->walkers, memory_order_relaxed) == 0,
                "block hooks changed from inside a poll");
    aiol__assert_poller(loop);
    loop->block_before = before;
    loop->block_after = after;
    loop->block_opaque = opaque;
}

void aiol_loop_stats_get(const aiol_loop *loop, aiol_loop_stats *out)
{
    aiol__check(loop != NULL, "loop is NULL");
    aiol__check(out != NULL, "out is NULL");
    /* notify_kicks, which any notifying thread increments, is read
     * atomically; the rest is copied (the polling thread's, and
     * fdmon_ctls, written under the lock: the caller is the polling
     * thread or the loop is idle, as loop.h asks). */
    const size_t at = offsetof(aiol_loop_stats, notify_kicks);
    const size_t end = at + sizeof(out->notify_kicks);

    memcpy(out, &loop->stats, at);
    out->notify_kicks = __atomic_load_n(&loop->stats.notify_kicks,
                                        __ATOMIC_RELAXED);
    memcpy((char *)out + end, (const char *)&loop->stats + end,
           sizeof(*out) - end);
}
