/* SPDX-License-Identifier: MIT */
/*
 * internal.h - what every runtime file of libaioloop needs: misuse checks,
 * small helpers, the handler record, struct aiol_loop and the debug
 * contracts on its lock and thread.
 *
 * Nothing here is API.  Internal non-static names start with aiol__.
 * What only one subsystem and its direct callers need lives in that
 * subsystem's private header: loop-priv.h (iteration, walking counter,
 * teardown), bh-priv.h, timer-priv.h, notify-priv.h, busypoll-priv.h,
 * embed-priv.h, uring-priv.h; fdmon.h is the fd-monitor interface, and
 * with this file an fd monitor's whole world.
 */
#ifndef AIOLOOP_INTERNAL_H
#define AIOLOOP_INTERNAL_H

#include <assert.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "aioloop/aioloop.h"

/* Misuse check that survives NDEBUG: prints "aioloop: <func>: <msg>" and aborts. */
#define aiol__check(cond, msg)                                               \
    do {                                                                     \
        if (__builtin_expect(!(cond), 0)) {                                  \
            aiol__fail(__func__, (msg));                                     \
        }                                                                    \
    } while (0)

_Noreturn void aiol__fail(const char *func, const char *msg);

/*
 * Functions on the path of every iteration.  GCC and clang put them in
 * .text.hot, which the linker groups: an iteration then runs from a few
 * code pages, which matters where each syscall costs TLB misses: a host
 * loop's iteration runs between syscalls that evict much of the TLB.
 */
#define AIOL__HOT __attribute__((hot))

/*
 * A path a hot function takes rarely or on its own (a growth, a removal),
 * kept out of line so the hot path saves no registers for it: gcc does
 * not shrink-wrap a function's prologue around its calls.
 */
#define AIOL__NOINLINE __attribute__((noinline))
/* Its converse: a hot helper inlined even where gcc would not. */
#define AIOL__INLINE inline __attribute__((always_inline))

/*
 * The current time, read at most once and only if needed: computing a
 * deadline with no timer or idle bottom half armed reads no clock (a
 * clock read is a visible share of a host loop's iteration).  Local to
 * one call; AIOL__NOW_LAZY starts one, AIOL__NOW_AT(ns) one already read.
 */
typedef struct aiol__now {
    bool read;
    int64_t ns;
} aiol__now;
#define AIOL__NOW_LAZY ((aiol__now){ .read = false, .ns = 0 })
#define AIOL__NOW_AT(t) ((aiol__now){ .read = true, .ns = (t) })

static inline int64_t aiol__now_get(aiol__now *now)
{
    if (!now->read) {
        now->ns = aiol_mono_time_get();
        now->read = true;
    }
    return now->ns;
}

/*
 * Grows the array *@arrp (a pointer to any element pointer) of *@cap
 * elements of @esize bytes so it holds at least @want, doubling from 64;
 * new elements are zeroed.  0 or -ENOMEM, leaving the array as it was.
 */
int aiol__reserve_grow(void *arrp, size_t *cap, size_t want, size_t esize);

/* aiol__reserve_grow() behind an inline check: most calls need no growth. */
static inline int aiol__reserve(void *arrp, size_t *cap, size_t want,
                                size_t esize)
{
    return want <= *cap ? 0 : aiol__reserve_grow(arrp, cap, want, esize);
}

/* The calling thread's aiol__thread_id(), 0 before its first (util.c). */
extern _Thread_local uint64_t aiol__tid;
/* Gives the calling thread its aiol__tid and returns it (util.c). */
uint64_t aiol__thread_id_assign(void);

/*
 * A number naming the calling thread, never reused in the process (unlike
 * pthread_t values and TIDs, which a new thread may inherit from a dead
 * one).  Never 0.  Inline: the debug contracts ask on every lock and
 * poll, and a thread-local read is all it costs after the first.
 */
static inline uint64_t aiol__thread_id(void)
{
    uint64_t id = aiol__tid;

    return id != 0 ? id : aiol__thread_id_assign();
}

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
    aiol_loop_stats stats; /* polling thread; fdmon_ctls under lock */

    /* Cold from here on. */
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

    /* Busy polling, see busypoll.c. */
    /*
     * The handlers with a poll callback, dense (handler.c keeps room for
     * one more before every set: aiol__busy_poll_reserve()).  lock.
     */
    aiol__handler **pollers;
    size_t npollers, pollers_cap; /* lock */
    /*
     * Room for the next snapshot, so refreshing it never allocates (a
     * refresh cut short by ENOMEM would drop handlers whose poll_end is
     * due): handler.c keeps the larger of pollers_snap_cap and
     * pollers_spare_cap at least npollers.  lock.
     */
    aiol__handler **pollers_spare;
    size_t pollers_spare_cap;  /* lock */
    atomic_uint pollers_gen;   /* bumped (release) on pollers changes; lock */
    unsigned pollers_snap_gen; /* gen of pollers_snap; polling thread */
    aiol__handler **pollers_snap; /* polling thread; replaced under lock */
    size_t npollers_snap;      /* polling thread */
    /*
     * The snapshot's first npollers_active entries are the handlers still
     * polled; the rest went idle (busypoll.c).  Polling thread.
     */
    size_t npollers_active;
    size_t pollers_snap_cap;   /* polling thread; written under lock */
    int64_t poll_grow, poll_shrink; /* polling thread */
    int64_t bh_idle_seen_ns;   /* when an idle BH was first seen pending, 0:
                                  none; polling thread */
    unsigned poll_skipped_waits; /* polling thread */
    bool poll_look_owed;       /* the monitor ended the window (spin_check):
                                  the next look is not skipped; polling thread */
};

/* -------------------------------------------------- debug contracts */

/*
 * The thread and lock contracts the comments state ("under loop->lock",
 * "polling thread") as assertions.  On in every build with assertions on
 * (meson's default buildtypes, every test build); a release build
 * (-Db_ndebug=true, buildtype=release) compiles them out entirely.
 */
#ifndef NDEBUG
#define AIOL__CONTRACTS 1
#endif

/*
 * Checks that a call on a confined loop comes from its own thread (the
 * contract of AIOL_LOOP_CONFINED in aioloop/loop.h).  Any loop.
 */
#ifdef AIOL__CONTRACTS
#define aiol__assert_owner(loop)                                             \
    assert((!(loop)->confined ||                                             \
            atomic_load_explicit(&(loop)->owner, memory_order_relaxed) ==    \
                aiol__thread_id()) &&                                        \
           "a confined loop (AIOL_LOOP_CONFINED) used from another thread")
#else
#define aiol__assert_owner(loop) ((void)(loop))
#endif

/*
 * The calling thread becomes a confined loop's own thread: at an
 * outermost poll, aiol_loop_owner_set(), aiol_loop_free() and in a fork
 * child's aiol_loop_after_fork() (the handovers of aioloop/loop.h).
 */
static inline void aiol__owner_take(aiol_loop *loop)
{
#ifdef AIOL__CONTRACTS
    atomic_store_explicit(&loop->owner, aiol__thread_id(),
                          memory_order_relaxed);
#else
    (void)loop;
#endif
}

/*
 * loop->lock's contended paths (util.c).  The lock is a futex word of our
 * own, not a pthread mutex: an uncontended take and release are one
 * locked instruction each and a few others, where glibc's mutex spends
 * some fifty instructions per pair on its type, owner and user counts,
 * and every handler change and every wait that harvests events pays
 * them.  aiol__lock_slow() looks a while for a release (the sections are
 * short), then marks the word contended (2) and sleeps on it;
 * aiol__unlock_wake() wakes one sleeper after a release that found the
 * word contended.
 */
void aiol__lock_slow(atomic_uint *word);
void aiol__unlock_wake(atomic_uint *word);

/*
 * True while the process has one thread (glibc 2.32 and later: it turns
 * false before a second thread starts).  Then nobody can contend for a
 * lock and a take or release needs no locked instruction, as glibc's own
 * mutex does then: a single-threaded embedder (a Python or Lua program,
 * a one-loop service) pays a plain store.  A lock taken that way is
 * released correctly by the exchange should a thread start meanwhile
 * (the holder does not start threads while it holds the lock).
 */
#if defined(__has_include)
#if __has_include(<sys/single_threaded.h>)
#include <sys/single_threaded.h>
#define AIOL__ONE_THREAD() (__libc_single_threaded != 0)
#endif
#endif
#ifndef AIOL__ONE_THREAD
#define AIOL__ONE_THREAD() false
#endif

/* Takes the futex lock @word (see above). */
static inline void aiol__mutex_take(atomic_uint *word)
{
    unsigned expected = 0;

    if (AIOL__ONE_THREAD()) {
        assert(atomic_load_explicit(word, memory_order_relaxed) == 0 &&
               "loop->lock taken twice by its only thread");
        atomic_store_explicit(word, 1, memory_order_relaxed);
        return;
    }
    /* Acquire pairs with the release exchange in aiol__mutex_give(). */
    if (!atomic_compare_exchange_strong_explicit(word, &expected, 1,
                                                 memory_order_acquire,
                                                 memory_order_relaxed)) {
        aiol__lock_slow(word);
    }
}

/* Releases the futex lock @word, which the caller holds. */
static inline void aiol__mutex_give(atomic_uint *word)
{
    if (AIOL__ONE_THREAD()) {
        atomic_store_explicit(word, 0, memory_order_relaxed);
        return;
    }
    /* Release pairs with the acquire in aiol__mutex_take(). */
    if (atomic_exchange_explicit(word, 0, memory_order_release) == 2) {
        aiol__unlock_wake(word);
    }
}

/*
 * Takes loop->lock, noting the holder for aiol__assert_locked().  On a
 * confined loop only its own thread gets here, and nothing is taken.
 */
static inline void aiol__lock(aiol_loop *loop)
{
    aiol__assert_owner(loop);
    if (!loop->confined) {
        aiol__mutex_take(&loop->lock);
        loop->lock_takes++;
    }
#ifdef AIOL__CONTRACTS
    atomic_store_explicit(&loop->lock_owner, aiol__thread_id(),
                          memory_order_relaxed);
#endif
}

/* Checks that the calling thread holds loop->lock. */
#ifdef AIOL__CONTRACTS
#define aiol__assert_locked(loop)                                            \
    assert(atomic_load_explicit(&(loop)->lock_owner, memory_order_relaxed) ==\
               aiol__thread_id() &&                                          \
           "loop->lock must be held here")
#else
#define aiol__assert_locked(loop) ((void)(loop))
#endif

static inline void aiol__unlock(aiol_loop *loop)
{
#ifdef AIOL__CONTRACTS
    aiol__assert_locked(loop);
    atomic_store_explicit(&loop->lock_owner, 0, memory_order_relaxed);
#endif
    if (!loop->confined) {
        aiol__mutex_give(&loop->lock);
    }
}

/*
 * Checks a polling-thread call: while a poll of @loop runs, only its
 * thread may make it (a timer armed from another thread would race the
 * run).  Between polls any one thread may, but on a confined loop only
 * its own.
 */
#ifdef AIOL__CONTRACTS
#define aiol__assert_poller(loop)                                            \
    do {                                                                     \
        assert((atomic_load_explicit(&(loop)->poller,                        \
                                     memory_order_relaxed) == 0 ||           \
                atomic_load_explicit(&(loop)->poller,                        \
                                     memory_order_relaxed) ==                \
                    aiol__thread_id()) &&                                    \
               "a polling-thread call from another thread while the loop polls"); \
        aiol__assert_owner(loop);                                            \
    } while (0)
#else
#define aiol__assert_poller(loop) ((void)(loop))
#endif

/* ---------------------------------------------------------- handlers */

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
