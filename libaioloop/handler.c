/* SPDX-License-Identifier: MIT */
/*
 * handler.c - fd handlers: the fd-indexed table, set/replace/remove, the
 * deleted list and the walking counter that decides when a removed handler
 * may be freed.
 *
 * Why a deleted list: a poll call collects ready handlers on its own ready
 * list and then calls them one by one.  Any callback may remove any handler
 * (its own, one later on the same ready list, one on an outer poll's list).
 * Freeing at once would leave those lists pointing at freed memory, so
 * while a poll call is walking (loop->walkers > 0) a removed handler is
 * only marked deleted and parked on loop->deleted.  Dispatch skips marked
 * handlers; the outermost poll call frees the list when it finishes.
 * Everything is O(1) in the number of registered handlers.
 */
#include <assert.h>
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "fdmon.h"
#include "busypoll-priv.h"
#include "loop-priv.h"
#include "notify-priv.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define AIOL__ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) && !defined(AIOL__ASAN)
#define AIOL__ASAN 1
#endif
#ifdef AIOL__ASAN
#include <sanitizer/asan_interface.h>
#endif

/*
 * Spare handlers.  A freed handler goes on loop->spare and the next set
 * takes it back: a handler is too big for glibc's fast bins, so churn
 * (add, remove, add...) paid the arena's free and malloc paths at every
 * pair.  Under ASan a spare is poisoned, but for the link that keeps it
 * on the list, so a use after removal is still caught.
 */
static void spare_poison(aiol__handler *node, bool poison)
{
#ifdef AIOL__ASAN
    char *base = (char *)node, *link = (char *)&node->node_deleted;
    char *after = link + sizeof(node->node_deleted);

    if (poison) {
        ASAN_POISON_MEMORY_REGION(base, (size_t)(link - base));
        ASAN_POISON_MEMORY_REGION(after,
                                  (size_t)(base + sizeof(*node) - after));
    } else {
        ASAN_UNPOISON_MEMORY_REGION(node, sizeof(*node));
    }
#else
    (void)node, (void)poison;
#endif
}

/* Caller holds loop->lock.  Takes the top of the spare stack, or NULL. */
static aiol__handler *spare_pop_locked(aiol_loop *loop)
{
    aiol__handler *node = loop->spare;

    aiol__assert_locked(loop);
    if (node != NULL) {
        loop->spare = node->node_deleted.le_next;
        spare_poison(node, false);
    }
    return node;
}

/*
 * Handlers come from slabs of SLAB_NODES, each a whole number of cache
 * lines on a cache line (internal.h), after a line that links the slab
 * to loop->slabs.  A slab's handlers go on the spare stack lowest first,
 * so handlers set one after another sit next to each other.  Slabs are
 * freed with the loop, as spares were.
 */
#define LINE 64
#define NODE_SIZE ((sizeof(aiol__handler) + LINE - 1) / LINE * LINE)
#define SLAB_NODES 32
#define SLAB_SIZE (LINE + SLAB_NODES * NODE_SIZE)
_Static_assert(offsetof(aiol__handler, ops.poll) + sizeof(aiol_poll_fn *) <=
                   LINE,
               "what an event and a plain re-arm touch is one cache line");
_Static_assert(sizeof(aiol__handler) <= 2 * LINE,
               "a handler is two cache lines");

/* Caller holds loop->lock and is done with @node: it becomes a spare. */
static void node_release_locked(aiol_loop *loop, aiol__handler *node)
{
    aiol__assert_locked(loop);
    node->node_deleted.le_next = loop->spare;
    loop->spare = node;
    spare_poison(node, true);
}

/* Caller holds loop->lock.  Adds a slab's handlers to the spares. */
static int slab_add_locked(aiol_loop *loop)
{
    char *slab = aligned_alloc(LINE, SLAB_SIZE);

    if (slab == NULL) {
        return -ENOMEM;
    }
    *(void **)slab = loop->slabs;
    loop->slabs = slab;
    for (size_t i = SLAB_NODES; i-- > 0;) {
        node_release_locked(loop,
                            (aiol__handler *)(slab + LINE + i * NODE_SIZE));
    }
    return 0;
}

/* Caller holds loop->lock.  Memory for a new handler, or NULL. */
static aiol__handler *node_alloc_locked(aiol_loop *loop)
{
    if (loop->spare == NULL && slab_add_locked(loop) < 0) {
        return NULL;
    }
    return spare_pop_locked(loop);
}

/* Caller holds loop->lock.  Takes slabs until @n handlers are spare. */
static int spares_reserve_locked(aiol_loop *loop, size_t n)
{
    size_t have = 0;

    aiol__assert_locked(loop);
    /* (a spare's link stays unpoisoned under ASan: spare_poison()) */
    for (aiol__handler *h = loop->spare; h != NULL && have < n;
         h = h->node_deleted.le_next) {
        have++;
    }
    for (; have < n; have += SLAB_NODES) {
        int ret = slab_add_locked(loop);

        if (ret < 0) {
            return ret;
        }
    }
    return 0;
}

/* Caller holds loop->lock; every handler is a spare.  Frees the slabs. */
static void slabs_free_locked(aiol_loop *loop)
{
    void *slab;

    aiol__assert_locked(loop);
    while (spare_pop_locked(loop) != NULL) {
        /* (unpoisoned: the slab goes back whole) */
    }
    while ((slab = loop->slabs) != NULL) {
        loop->slabs = *(void **)slab;
        free(slab);
    }
}

/* Caller holds loop->lock.  Frees every parked handler. */
static void free_deleted_locked(aiol_loop *loop)
{
    aiol__handler *node;

    aiol__assert_locked(loop);
    while ((node = AIOL_LIST_FIRST(&loop->deleted)) != NULL) {
        AIOL_LIST_REMOVE(node, node_deleted);
        node_release_locked(loop, node);
    }
    atomic_store_explicit(&loop->deleted_pending, false,
                          memory_order_relaxed);
}

/*
 * Caller holds loop->lock and has already unhooked @node from the table
 * and the monitor.  Frees it now if nobody walks, else parks it.
 */
static AIOL__INLINE void retire_locked(aiol_loop *loop, aiol__handler *node)
{
    aiol__assert_locked(loop);
    /*
     * seq_cst pairs with the increment in aiol__walk_begin(): a walker that
     * started before this load is seen here; one that starts after it can
     * only find handlers through the table (under this lock), where @node
     * no longer is.
     */
    if (atomic_load_explicit(&loop->walkers, memory_order_seq_cst) == 0) {
        node_release_locked(loop, node);
        /* (the flag is written under the lock we hold) */
        if (atomic_load_explicit(&loop->deleted_pending,
                                 memory_order_relaxed)) {
            free_deleted_locked(loop);
        }
        return;
    }
    /* Release pairs with the acquire load in dispatch_handler(). */
    atomic_store_explicit(&node->deleted, true, memory_order_release);
    assert(!AIOL_LIST_IS_INSERTED(node, node_deleted) &&
           "a handler is retired once");
    AIOL_LIST_INSERT_HEAD(&loop->deleted, node, node_deleted);
    atomic_store_explicit(&loop->deleted_pending, true, memory_order_release);
}

/* aiol__walk_end() when a retired handler may wait: frees the parked. */
void aiol__walk_end_slow(aiol_loop *loop)
{
    aiol__lock(loop);
    if (atomic_fetch_sub_explicit(&loop->walkers, 1,
                                  memory_order_seq_cst) == 1) {
        free_deleted_locked(loop);
    }
    aiol__unlock(loop);
}

static unsigned ops_events(const aiol_fd_ops *ops)
{
    return (ops->read ? AIOL__EV_IN : 0u) | (ops->write ? AIOL__EV_OUT : 0u);
}

static bool ops_empty(const aiol_fd_ops *ops)
{
    return ops == NULL || (!ops->read && !ops->write && !ops->poll);
}

/* True when @ops has only read, write and poll: no other callback, no flag. */
static bool ops_plain(const aiol_fd_ops *ops)
{
    return !ops->poll_ready && !ops->poll_begin && !ops->poll_end &&
           ops->flags == 0;
}

/*
 * True when handler @h already is what (@ops, @opaque, @internal) asks
 * for.  For plain ops (aiol_fd_set()'s) it reads the handler's first
 * cache line only.
 */
static AIOL__INLINE bool same_handler(const aiol__handler *h,
                                      const aiol_fd_ops *ops,
                                      void *opaque, bool internal)
{
    const aiol_fd_ops *x = &h->ops, *y = ops;

    if (h->opaque != opaque || h->internal != internal ||
        x->read != y->read || x->write != y->write || x->poll != y->poll) {
        return false;
    }
    if (ops_plain(y)) {
        return h->plain;
    }
    return !h->plain && x->poll_ready == y->poll_ready &&
           x->poll_begin == y->poll_begin && x->poll_end == y->poll_end &&
           x->flags == y->flags;
}

/*
 * What count_locked() counts @node as.  A wakeup fd is read-only and not
 * progress (internal, AIOL_FD_NO_PROGRESS; it may be busy-polled, as
 * QEMU's ctx->notifier is).  Its only job is to end a blocking poll, so a
 * poll that will not block need not look at it (loop.c).
 */
static uint8_t node_kind(const aiol__handler *node)
{
    if (node->internal && node->ops.write == NULL) {
        return AIOL__KIND_WAKEUP;
    }
    return node->ops.poll == NULL ? AIOL__KIND_UNPOLLED : AIOL__KIND_POLLED;
}

/*
 * Fills a fresh handler.  Field by field: zeroing the whole struct first
 * (calloc, a compound literal) costs a string store that shows up in
 * handler churn.
 */
static AIOL__INLINE void node_init(aiol__handler *node, int fd,
                                  const aiol_fd_ops *ops, void *opaque,
                                  bool internal)
{
    node->fd = fd;
    node->events = (uint8_t)ops_events(ops);
    node->ops = *ops;
    node->opaque = opaque;
    node->internal = internal;
    node->plain = ops_plain(ops);
    node->kind = node_kind(node);
    atomic_init(&node->deleted, false);
    node->revents = 0;
    AIOL_LIST_ENTRY_INIT(node, node_ready);
    AIOL_LIST_ENTRY_INIT(node, node_live); /* (and node_deleted) */
    node->fdmon_slot = -1;
    node->poll_started = false;
    node->in_poll_ready = false;
    if (ops->poll != NULL) {
        node->poll_idx = AIOL__NO_SLOT;
        node->poll_progress_ns = 0; /* idle clock starts at its first poll */
        node->poll_slot = AIOL__NO_SLOT; /* in no busy-poll snapshot yet */
    }
}

/* Caller holds loop->lock.  pollers_change_locked() of a polled handler. */
static void pollers_update_locked(aiol_loop *loop, aiol__handler *node,
                                  bool add)
{
    aiol__assert_locked(loop);
    if (add) {
        assert(node->poll_idx == AIOL__NO_SLOT &&
               "a handler is in the busy-poll set once");
        assert(loop->npollers < loop->pollers_cap &&
               "room for the handler was reserved");
        node->poll_idx = (uint32_t)loop->npollers;
        loop->pollers[loop->npollers++] = node;
    } else if (node->poll_idx != AIOL__NO_SLOT) {
        aiol__handler *last = loop->pollers[--loop->npollers];

        loop->pollers[node->poll_idx] = last; /* (itself, if it was last) */
        last->poll_idx = node->poll_idx;
        node->poll_idx = AIOL__NO_SLOT;
    }
    /*
     * Release pairs with the acquire load in aiol__busy_poll().  Writers
     * hold the lock, so a load and a store make the increment.
     */
    atomic_store_explicit(&loop->pollers_gen,
                          atomic_load_explicit(&loop->pollers_gen,
                                               memory_order_relaxed) + 1,
                          memory_order_release);
}

/* Caller holds loop->lock.  Adds or takes @node off the busy-poll set. */
static inline void pollers_change_locked(aiol_loop *loop, aiol__handler *node,
                                         bool add)
{
    if (node->ops.poll != NULL) {
        pollers_update_locked(loop, node, add);
    }
}

/*
 * Caller holds loop->lock.  Counts @node in (@in 1) or out (@in -1) of
 * the handlers, by its kind (node_kind()).
 */
static inline void count_locked(aiol_loop *loop, const aiol__handler *node,
                                int in)
{
    size_t d = (size_t)(ptrdiff_t)in; /* (wraps to a decrement) */

    aiol__assert_locked(loop);
    atomic_store_explicit(&loop->nkind[node->kind],
                          aiol__kind_count(loop, node->kind) + d,
                          memory_order_relaxed);
}

/* Caller holds loop->lock.  Unhooks and retires the handler of @fd. */
static AIOL__INLINE void remove_locked(aiol_loop *loop, aiol__handler *old)
{
    aiol__assert_locked(loop);
    /* A failure here means the fd is already gone from the kernel's view. */
    (void)loop->fdmon->update(loop, old, NULL);
    loop->table[old->fd] = NULL;
    AIOL_LIST_REMOVE(old, node_live);
    count_locked(loop, old, -1);
    pollers_change_locked(loop, old, false);
    aiol__embed_invalidate(loop); /* before the retire: see embed.c */
    retire_locked(loop, old);
}

/*
 * After a registration change that the monitor applies only at its next
 * wait: wakes a poller that may be asleep without it.  No syscall, not
 * even the notify fences, when nobody may be sleeping (the common case: a
 * change made by the polling thread itself, between waits).
 */
static void wake_sleeper(aiol_loop *loop)
{
    if (loop->confined) {
        return; /* only its poller changes it, and it is not asleep */
    }
    /*
     * F4: pairs with F1 (prepare_to_block() in loop.c, aiol_loop_prepare()
     * in embed.c), which comes after the poller announces itself in
     * notify_me and before its monitor looks for changes: either it sees
     * our change, or we see its notify_me and wake it.
     */
    atomic_thread_fence(memory_order_seq_cst);
    if (aiol__poller_may_sleep(loop)) {
        aiol_loop_notify(loop);
    }
}

/*
 * True when @fd can name an open file: below the hard RLIMIT_NOFILE,
 * which the kernel never hands out fds at or above.  Checked only where
 * the table would grow (rare), so a stray number (50,000,000, INT_MAX)
 * cannot grow every fd-indexed array to its size.  The limit is read each
 * time: a process may raise it at run time.
 */
static bool fd_in_bounds(aiol_loop *loop, int fd)
{
    struct rlimit rl;

    if ((size_t)fd < loop->table_size) {
        return true;
    }
    return getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_max == RLIM_INFINITY ||
           (rlim_t)fd < rl.rlim_max;
}

/*
 * Every set and removal by set.  Inlined into aiol_fd_set() as well, where
 * the ops are known to be plain: their checks and copy fold away.
 */
static AIOL__INLINE int handler_set_inline(aiol_loop *loop, int fd,
                                           const aiol_fd_ops *ops,
                                           void *opaque, bool internal)
{
    aiol__handler *old, *node = NULL;
    bool owed = false; /* the monitor says an earlier change's wake covers it */
    int ret = 0;

    aiol__check(loop != NULL, "loop is NULL");
    if (fd < 0) {
        return -EBADF;
    }
    internal = internal || (ops != NULL && (ops->flags & AIOL_FD_NO_PROGRESS));
    aiol__lock(loop);
    old = aiol__handler_lookup(loop, fd);
    if (!ops_empty(ops)) {
        if (old != NULL && same_handler(old, ops, opaque, internal)) {
            /*
             * Re-arming with the very same callbacks and opaque (what a
             * libevent-style event_add after each event does): keep the
             * current handler; no allocation, no syscall.
             */
            aiol__unlock(loop);
            return 0;
        }
        if (!fd_in_bounds(loop, fd)) {
            aiol__unlock(loop);
            return -EBADF;
        }
        node = node_alloc_locked(loop);
        if (node == NULL) {
            aiol__unlock(loop);
            return -ENOMEM;
        }
        node_init(node, fd, ops, opaque, internal);
    }
    if (node == NULL) {
        if (old != NULL) {
            remove_locked(loop, old);
        }
        goto out;
    }
    ret = aiol__reserve(&loop->table, &loop->table_size, (size_t)fd + 1,
                        sizeof(*loop->table));
    if (ret == 0 && node->ops.poll != NULL) {
        ret = aiol__busy_poll_reserve(loop, loop->npollers + 1);
    }
    if (ret == 0) {
        ret = loop->fdmon->update(loop, old, node);
    }
    if (ret < 0) {
        node_release_locked(loop, node);
        goto out;
    }
    owed = ret == AIOL__UPDATE_OWED;
    ret = 0;
    loop->table[fd] = node;
    assert(!AIOL_LIST_IS_INSERTED(node, node_live) && "a new handler is live once");
    AIOL_LIST_INSERT_HEAD(&loop->live, node, node_live);
    pollers_change_locked(loop, node, true);
    aiol__embed_invalidate(loop); /* before the retire: see embed.c */
    count_locked(loop, node, 1);
    if (old != NULL) {
        AIOL_LIST_REMOVE(old, node_live);
        count_locked(loop, old, -1);
        pollers_change_locked(loop, old, false);
        retire_locked(loop, old);
    }
out:
    aiol__unlock(loop);
    if (ret == 0 && !owed) {
        wake_sleeper(loop); /* the monitor may apply it at its next wait */
    }
    return ret;
}

static int handler_set(aiol_loop *loop, int fd, const aiol_fd_ops *ops,
                       void *opaque, bool internal)
{
    return handler_set_inline(loop, fd, ops, opaque, internal);
}

int aiol_fd_set_ops(aiol_loop *loop, int fd, const aiol_fd_ops *ops,
                    void *opaque)
{
    return handler_set(loop, fd, ops, opaque, false);
}

int aiol__fd_set_internal(aiol_loop *loop, int fd, aiol_handler_fn *read,
                          void *opaque)
{
    const aiol_fd_ops ops = { .read = read, .flags = AIOL_FD_DRAINS };

    return handler_set(loop, fd, &ops, opaque, true);
}

int aiol_fd_set(aiol_loop *loop, int fd, aiol_handler_fn *read,
                aiol_handler_fn *write, aiol_poll_fn *poll, void *opaque)
{
    const aiol_fd_ops ops = { .read = read, .write = write, .poll = poll };

    return handler_set_inline(loop, fd, &ops, opaque, false);
}

int aiol_fd_remove(aiol_loop *loop, int fd)
{
    aiol__handler *old;

    aiol__check(loop != NULL, "loop is NULL");
    if (fd < 0) {
        return -EBADF;
    }
    aiol__lock(loop);
    old = aiol__handler_lookup(loop, fd);
    if (old != NULL) {
        remove_locked(loop, old);
    }
    aiol__unlock(loop);
    return old != NULL ? 0 : -ENOENT;
}

int aiol_fd_reserve(aiol_loop *loop, size_t handlers, int max_fd)
{
    int ret;

    aiol__check(loop != NULL, "loop is NULL");
    if (max_fd < 0) {
        return -EBADF;
    }
    aiol__lock(loop);
    ret = fd_in_bounds(loop, max_fd) ? 0 : -EBADF;
    if (ret == 0) {
        ret = aiol__reserve(&loop->table, &loop->table_size,
                            (size_t)max_fd + 1, sizeof(*loop->table));
    }
    if (ret == 0) {
        ret = aiol__busy_poll_reserve(loop, loop->npollers + handlers);
    }
    if (ret == 0) {
        ret = loop->fdmon->reserve(loop, handlers, max_fd);
    }
    if (ret == 0) {
        ret = spares_reserve_locked(loop, handlers);
    }
    aiol__unlock(loop);
    return ret;
}

bool aiol_fd_is_set(aiol_loop *loop, int fd)
{
    bool set;

    aiol__check(loop != NULL, "loop is NULL");
    if (fd < 0) {
        return false;
    }
    aiol__lock(loop);
    set = aiol__handler_lookup(loop, fd) != NULL;
    aiol__unlock(loop);
    return set;
}

void aiol__handlers_free_all(aiol_loop *loop)
{
    aiol__lock(loop);
    for (size_t fd = 0; fd < loop->table_size; fd++) {
        if (loop->table[fd] != NULL) {
            remove_locked(loop, loop->table[fd]);
        }
    }
    free_deleted_locked(loop);
    slabs_free_locked(loop);
    aiol__unlock(loop);
    free(loop->table);
    loop->table = NULL;
    loop->table_size = 0;
}
