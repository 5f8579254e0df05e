/* SPDX-License-Identifier: MIT */
/*
 * internal.h - what every runtime file of libaioloop needs: the handler
 * record and struct aiol_loop, with util-priv.h (small helpers) before
 * them and lock-priv.h (the loop's lock and the debug contracts) after.
 *
 * Nothing here is API.  Internal non-static names start with aiol__.
 * What only one subsystem and its direct callers need lives in that
 * subsystem's private header (loop-priv.h, bh-priv.h, timer-priv.h,
 * notify-priv.h, busypoll-priv.h, embed-priv.h, and the monitors'
 * epoll-priv.h and uring-priv.h); fdmon.h is the fd-monitor interface,
 * and with this file an fd monitor's whole world.
 */
#ifndef AIOLOOP_INTERNAL_H
#define AIOLOOP_INTERNAL_H

#include <poll.h>
#include <stdatomic.h>
#include <sys/types.h>

#include "util-priv.h" /* (and aioloop/aioloop.h) */

/* Readiness bits, monitor-neutral.  Each monitor translates its own. */
enum {
    AIOL__EV_IN = 1u << 0,
    AIOL__EV_OUT = 1u << 1,
    AIOL__EV_ERR = 1u << 2,
    AIOL__EV_HUP = 1u << 3,
};

typedef struct aiol__handler aiol__handler;

/* A ready list: owned by one poll call (a local variable of that call). */
typedef AIOL_LIST_HEAD(aiol__ready_list, aiol__handler) aiol__ready_list;

/*
 * The fields an event touches (the monitor's lookup and ready list, then
 * dispatch) and those a re-arm with the same callbacks compares come
 * first and fill one cache line; handlers are carved from cache-aligned
 * slabs (handler.c).  With thousands of handlers an event or a re-arm
 * then costs one miss on its handler, and re-arming them all does not
 * push the rest of the program out of the cache.  A handler is two
 * lines, both of which a set and a removal touch; busy polling's fields,
 * at the end of the second, are set up only for a handler with a poll
 * callback.
 */
struct aiol__handler {
    /* Immutable from creation until the handler is freed. */
    int fd;
    uint8_t events;    /* AIOL__EV_IN and/or AIOL__EV_OUT to watch; may be 0 */

    /* Owner: the polling thread.  Set when queued on a ready list. */
    uint8_t revents;

    /* Immutable, as fd. */
    bool internal;     /* not progress: the loop's notifier, AIOL_FD_NO_PROGRESS */
    bool plain;        /* ops has only read, write and poll (no flags) */

    /*
     * Set once, under loop->lock, by whoever removes or replaces the
     * handler while a walker is active; read without the lock by the
     * polling thread before each callback.  Relaxed would do for the
     * polling thread's own removals; acquire/release pairs a removal on
     * another thread with the polling thread's check in dispatch.
     */
    atomic_bool deleted;

    /* Immutable, as fd: AIOL__KIND_*, what count_locked() counts it as. */
    uint8_t kind;

    /* Owner: the polling thread.  poll_begin called, poll_end not yet. */
    bool poll_started;
    /*
     * Owner: the polling thread.  Its poll_ready callback is running: a
     * nested poll does not poll it (busypoll.c), so a poll_ready that
     * polls the loop before it clears its condition is not re-entered.
     */
    bool in_poll_ready;

    /* Private to the fd monitor; protected by loop->lock. */
    int fdmon_slot;

    void *opaque;      /* immutable, as fd */

    /* Owner: the polling thread, as revents. */
    AIOL_LIST_ENTRY(aiol__handler) node_ready;

    /* Immutable, as fd; read, write and poll are in the first line. */
    aiol_fd_ops ops;

    /*
     * Protected by loop->lock.  A handler is on loop->live while it is set
     * and on loop->deleted (or the spare stack) only after it was taken
     * off loop->live, so the two links share their storage.
     */
    union {
        AIOL_LIST_ENTRY(aiol__handler) node_live; /* on loop->live */
        AIOL_LIST_ENTRY(aiol__handler) node_deleted;
    };

    /*
     * Busy polling, set up only when ops.poll is set.  poll_idx:
     * loop->lock; the rest: the polling thread.
     */
    uint32_t poll_idx;        /* loop->pollers[poll_idx] is this handler, or
                                 AIOL__NO_SLOT: not in loop->pollers */
    uint32_t poll_slot;       /* its index in loop->pollers_snap, or
                                 AIOL__NO_SLOT: in no snapshot yet */
    int64_t poll_progress_ns; /* last poll() with work or fd event; 0: never
                                 polled (idle clock not started) */
};

/* aiol__handler.poll_idx and poll_slot of a handler in no array. */
#define AIOL__NO_SLOT UINT32_MAX

/* aiol__handler.kind values (handler.c); loop->nkind counts each. */
#define AIOL__KIND_POLLED 0u   /* busy-polled, not a wakeup fd */
#define AIOL__KIND_WAKEUP 1u   /* a wakeup fd */
#define AIOL__KIND_UNPOLLED 2u /* neither a wakeup fd nor busy-polled */
#define AIOL__KINDS 3

/* Readiness from busy polling: dispatch calls poll_ready (or read). */
#define AIOL__EV_POLL (1u << 4)

typedef struct aiol__bh_slice aiol__bh_slice; /* bh.c */
struct aiol__fdmon_ops;                        /* fdmon.h */

/* What the last successful aiol_loop_embed_fds() listed (embed.c). */
typedef struct aiol__embed_entry {
    struct pollfd pfd;
    aiol__handler *node;
} aiol__embed_entry;

typedef struct aiol__embed_cache {
    bool valid;
    /*
     * The table had more than n listable fds: n was the max asked, and
     * a call asking at most n gets -ENOSPC without a walk.
     */
    bool over;
    uint_fast64_t gen;        /* loop->embed_gen it is current for */
    size_t n, cap;
    aiol__embed_entry *ent;
} aiol__embed_cache;

struct aiol_loop {
    /*
     * Hot: what every iteration reads, an embedded one above all, kept in
     * the first cache lines (a host's iteration runs between syscalls that
     * evict much of L1).  Each field's owner is given further down with
     * its group, or here.
     */
    const struct aiol__fdmon_ops *fdmon; /* immutable after creation */
    void *fdmon_state;   /* the fd monitor's, see its file */
    /*
     * AIOL_LOOP_CONFINED: only the owner thread touches the loop, so
     * loop->lock is not taken (aiol__lock()) and the walking counter is
     * not a locked instruction.  Immutable after creation.
     */
    bool confined;
    /*
     * AIOL_LOOP_INTERRUPTIBLE: an fd monitor's wait that EINTR ends
     * returns no events instead of waiting again.  Immutable after
     * creation.
     */
    bool interruptible;
    /*
     * AIOL_LOOP_COMPLETIONS_FIRST: request completions run before the
     * phases' first callbacks, bottom halves and fd handlers.  Immutable
     * after creation.
     */
    bool completions_first;
    /*
     * Walking counter: number of poll calls (nested ones included) in
     * progress.  While it is non-zero, removed handlers go on the deleted
     * list instead of being freed, because some ready list or dispatch may
     * still point at them.  Written only by the polling thread (one poll
     * at a time, nested ones on its stack): incremented without the lock
     * (seq_cst, pairs with the load in retire_locked() made under the lock
     * after the table was updated), decremented with a release store, or
     * under the lock when the deleted list must be freed.
     */
    atomic_uint walkers;
    atomic_bool deleted_pending; /* deleted list may be non-empty */
    /* Notify, see notify.c. */
    atomic_bool host_armed;    /* between aiol_loop_prepare() and check() */
    atomic_bool notified;      /* a wakeup is pending; any thread */
    atomic_bool notify_kicked; /* notify_fd written, not yet drained */
    bool poll_started;         /* some handler had poll_begin; polling thread */
    bool poll_recheck;         /* prepare() ended polling and saw work: the
                                  next iteration polls once; polling thread */
    atomic_uint notify_me;     /* +2 per blocking poll */
    /* Bottom halves, see bh.c. */
    _Atomic(struct aiol_bh *) bh_list; /* lock-free stack; any thread */
    /* local bottom halves (aiol_bh_new_local()), FIFO; polling thread */
    struct aiol_bh *bh_local_head, *bh_local_tail;
    AIOL_TAILQ_HEAD(, aiol__bh_slice) bh_slices; /* polling thread */
    /* Timers, see timer.c.  Polling thread. */
    AIOL_LIST_HEAD(, aiol_clock) clocks;
    size_t timers_armed;       /* over every clock of the loop */
    /* Embedder phases, see embed.c.  Polling thread. */
    AIOL_LIST_HEAD(, aiol_phase) phases;
    unsigned phases_first;     /* of them with a first callback */
    unsigned phases_dispatch;  /* of them with a dispatch callback */
    int64_t poll_ns;           /* busy-poll window; polling thread */
    int64_t poll_max_ns;       /* polling thread */
    /*
     * Direct embedding, see embed.c.  embed_gen is bumped (seq_cst) by
     * every change of the handler table and by the monitor leaving direct
     * mode, under loop->lock, and by io_uring requests on the polling
     * thread (aiol__embed_invalidate()); embed is the polling thread's.
     */
    atomic_uint_fast64_t embed_gen;
    aiol__embed_cache embed;
    /*
     * A host polls the watched fds itself (embed.c, aiol__embed_direct()).
     * Written under loop->lock by the polling thread; read without it.
     */
    atomic_bool direct;
    aiol_loop_stats stats; /* owners: per field, aioloop/loop.h */

    /* Cold from here on (AIOL__LOOP_HOT_LINES before). */
    /* aiol_loop_block_hooks_set(); polling thread. */
    aiol_block_fn *block_before;
    aiol_block_fn *block_after;
    void *block_opaque;
    bool single_thread; /* polled by one thread for life (an iothread's);
                           set before the first poll */
    /*
     * Debug contracts (aiol__assert_locked(), aiol__assert_poller()):
     * aiol__thread_id() of loop->lock's holder and of the thread inside
     * the outermost poll, 0 for none.  Written by that thread, read by any
     * (relaxed: a check, never a synchronization).  Release builds leave
     * them 0.
     */
    atomic_uint_fast64_t lock_owner;
    atomic_uint_fast64_t poller;
    /*
     * A confined loop's own thread (aiol__assert_owner()): its creator,
     * then whoever takes it over (aiol__owner_take(): an outermost poll,
     * aiol_loop_owner_set(), the free, a fork child).  Same rules as above.
     */
    atomic_uint_fast64_t owner;
    pid_t pid;          /* process whose kernel objects the loop holds
                           (getpid() at creation, or of the child after
                           aiol_loop_after_fork()); fork.c */

    /*
     * loop->lock protects the fd table, the deleted list and the monitor's
     * registration state.  Never held while a callback runs or while the
     * polling thread sleeps.  A futex word (aiol__mutex_take()): 0 free,
     * 1 held, 2 held and a thread may sleep on it.
     */
    atomic_uint lock;
    uint64_t lock_takes;   /* lock; what test_confined.c counts */
    aiol__handler **table; /* fd-indexed; lock */
    size_t table_size;     /* entries in table; lock */
    /*
     * The handlers in table by kind (aiol__handler.kind, handler.c): one
     * counter per kind, so a set or removal counts with one add.  Written
     * under the lock (a relaxed load and store: no read-modify-write is
     * needed with the lock held), read by the polling thread without it
     * (relaxed: a handler set meanwhile from another thread races the poll
     * either way); aiol__handlers_count() and friends read them.
     */
    atomic_size_t nkind[AIOL__KINDS];
    AIOL_LIST_HEAD(, aiol__handler) deleted; /* removed while walked; lock */
    AIOL_LIST_HEAD(, aiol__handler) live;    /* every handler in table; lock */
    /*
     * Freed handlers kept for the next set (handler.c), a stack linked
     * through node_deleted.le_next alone (a pop touches no other
     * handler): churn then costs no malloc/free.  At most the peak
     * number of handlers the loop had at once, freed with the loop.  lock.
     */
    aiol__handler *spare;
    void *slabs; /* the memory of every handler, a list (handler.c); lock */
    /*
     * Set, under the lock, by the first aiol_loop_embed_fds() that caches
     * a list; until then no cache can name a handler and table changes
     * skip the embed_gen bump (a locked instruction each).  Written only
     * by the polling thread, so it may read it without the lock.
     */
    bool embed_listed;

    atomic_size_t bh_live; /* bottom halves not yet freed; any thread */
    aiol_clock *mono;      /* the monotonic clock; polling thread */

    int notify_fd;             /* eventfd, -1 with wakeup_fn; set before
                                  other threads use the loop */
    aiol_wakeup_fn *wakeup_fn; /* embedder's wakeup instead of notify_fd */
    void *wakeup_opaque;       /* (both set before other threads use it) */

    /*
     * Busy polling, see busypoll.c.  The handlers with a poll callback,
     * dense (handler.c keeps room for one more before every set:
     * aiol__busy_poll_reserve()).  lock.
     */
    aiol__handler **pollers;
    size_t npollers, pollers_cap; /* lock */
    /* Room for the next snapshot, so a refresh never allocates (ENOMEM
       would drop handlers whose poll_end is due): handler.c keeps
       max(pollers_snap_cap, pollers_spare_cap) >= npollers.  lock. */
    aiol__handler **pollers_spare;
    size_t pollers_spare_cap;  /* lock */
    atomic_uint pollers_gen;   /* bumped (release) on pollers changes; lock */
    unsigned pollers_snap_gen; /* gen of pollers_snap; polling thread */
    aiol__handler **pollers_snap; /* polling thread; replaced under lock */
    size_t npollers_snap;      /* polling thread */
    /* The snapshot's first npollers_active entries are the handlers still
       polled; the rest went idle (busypoll.c).  Polling thread. */
    size_t npollers_active;
    size_t pollers_snap_cap;   /* polling thread; written under lock */
    int64_t poll_grow, poll_shrink; /* polling thread */
    int64_t bh_idle_seen_ns;   /* when an idle BH was first seen pending, 0:
                                  none; polling thread */
    unsigned poll_skipped_waits; /* polling thread */
    bool poll_look_owed;       /* the monitor ended the window (spin_check):
                                  the next look is not skipped; polling thread */
};

/* Allocated on a cache line (loop.c); an iteration touches the hot fields
   alone, which fill AIOL__LOOP_HOT_LINES lines (up to block_before). */
#define AIOL__LOOP_ALIGN 64
#define AIOL__LOOP_HOT_LINES 5
_Static_assert(offsetof(struct aiol_loop, block_before) <=
                   AIOL__LOOP_HOT_LINES * AIOL__LOOP_ALIGN,
               "the hot fields of struct aiol_loop outgrew their cache lines");

#include "lock-priv.h"

/* Handlers of @kind (AIOL__KIND_*) in the table; any thread (relaxed). */
static inline size_t aiol__kind_count(aiol_loop *loop, unsigned kind)
{
    return atomic_load_explicit(&loop->nkind[kind], memory_order_relaxed);
}

/* Handlers in the table; caller holds loop->lock. */
static inline size_t aiol__handlers_count(aiol_loop *loop)
{
    aiol__assert_locked(loop);
    return aiol__kind_count(loop, AIOL__KIND_POLLED) +
           aiol__kind_count(loop, AIOL__KIND_WAKEUP) +
           aiol__kind_count(loop, AIOL__KIND_UNPOLLED);
}

/* Looks up the handler of @fd; caller holds loop->lock. */
static inline aiol__handler *aiol__handler_lookup(aiol_loop *loop, int fd)
{
    aiol__assert_locked(loop);
    return (size_t)fd < loop->table_size ? loop->table[fd] : NULL;
}

/*
 * Queues @node on @ready with readiness @revents; called by monitors, from
 * the polling thread, with loop->lock held.  A handler sits on at most one
 * ready list: a nested poll that sees it again takes it from its parent's
 * list, so the parent does not dispatch it a second time.
 */
static inline void aiol__ready_add(aiol__ready_list *ready,
                                   aiol__handler *node, unsigned revents)
{
    AIOL_LIST_SAFE_REMOVE(node, node_ready);
    node->revents = (uint8_t)revents; /* (AIOL__EV_* bits) */
    AIOL_LIST_INSERT_HEAD(ready, node, node_ready);
}

#endif /* AIOLOOP_INTERNAL_H */
