/*
 * internal.h - libaioloop's private structures, shared by the runtime files.
 *
 * Nothing here is API.  Internal non-static names start with aiol__.
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
#include "aioloop/heap.h"
#include "aioloop/bh.h"
#include "aioloop/embed.h"
#include "aioloop/timer.h"
#include "aioloop/uring.h"

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
        now->ns = aiol_clock_now_ns();
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

/*
 * Grows a monitor's fd-indexed array *@arrp (*@cap entries of @esize
 * bytes) to hold @fd, then its two fd lists *@l1 and *@l2 (capacities
 * *@c1, *@c2) to hold every fd number the array covers.  For lists that
 * hold each fd at most once (aiol__fd_list_mark()), a push then never
 * fails, so the monitor can list fds where it could not report ENOMEM (a
 * wait, a completion).  0 or -ENOMEM (arrays may have grown; no entry
 * changed).
 */
int aiol__fd_reserve(void *arrp, size_t *cap, size_t esize, int fd, int **l1,
                     size_t *c1, int **l2, size_t *c2);

/* Appends @fd to the list *@v of *@n fds (capacity *@cap).  0 or -ENOMEM. */
int aiol__fd_list_push(int **v, size_t *n, size_t *cap, int fd);

/*
 * aiol__fd_list_push() unless *@listed says @fd is on the list already;
 * sets *@listed.  0 or -ENOMEM (then nothing changed).
 */
int aiol__fd_list_mark(int **v, size_t *n, size_t *cap, bool *listed, int fd);

/*
 * A number naming the calling thread, never reused in the process (unlike
 * pthread_t values and TIDs, which a new thread may inherit from a dead
 * one).  Never 0.
 */
uint64_t aiol__thread_id(void);

/* Readiness bits, monitor-neutral.  Each monitor translates its own. */
enum {
    AIOL__EV_IN = 1u << 0,
    AIOL__EV_OUT = 1u << 1,
    AIOL__EV_ERR = 1u << 2,
    AIOL__EV_HUP = 1u << 3,
};

/*
 * AIOL__EV_* <-> poll(2) bits, shared by every monitor: io_uring's
 * POLL_ADD takes poll bits, and epoll's EPOLL* bits have the same values
 * (fdmon-epoll.c asserts it).  Input also asks for POLLRDHUP, so a peer's
 * shutdown runs the read callback on every backend.
 */
static inline unsigned aiol__events_to_poll(unsigned events)
{
    return (events & AIOL__EV_IN ? POLLIN | POLLRDHUP : 0u) |
           (events & AIOL__EV_OUT ? POLLOUT : 0u);
}

static inline unsigned aiol__events_from_poll(unsigned ev)
{
    return (ev & POLLIN ? AIOL__EV_IN : 0u) | (ev & POLLOUT ? AIOL__EV_OUT : 0u) |
           (ev & POLLERR ? AIOL__EV_ERR : 0u) |
           (ev & (POLLHUP | POLLRDHUP) ? AIOL__EV_HUP : 0u);
}

typedef struct aiol__handler aiol__handler;

/* A ready list: owned by one poll call (a local variable of that call). */
typedef AIOL_LIST_HEAD(aiol__ready_list, aiol__handler) aiol__ready_list;

struct aiol__handler {
    /* Immutable from creation until the handler is freed. */
    int fd;
    unsigned events;   /* AIOL__EV_IN and/or AIOL__EV_OUT to watch; may be 0 */
    aiol_fd_ops ops;
    void *opaque;
    bool internal;     /* not progress: the loop's notifier, AIOL_FD_NO_PROGRESS */

    /*
     * Set once, under loop->lock, by whoever removes or replaces the
     * handler while a walker is active; read without the lock by the
     * polling thread before each callback.  Relaxed would do for the
     * polling thread's own removals; acquire/release pairs a removal on
     * another thread with the polling thread's check in dispatch.
     */
    atomic_bool deleted;

    /* Owner: the polling thread.  Set when queued on a ready list. */
    unsigned revents;
    AIOL_LIST_ENTRY(aiol__handler) node_ready;

    /* Protected by loop->lock. */
    AIOL_LIST_ENTRY(aiol__handler) node_deleted;
    AIOL_LIST_ENTRY(aiol__handler) node_live; /* on loop->live while set */

    /* Private to the fd monitor; protected by loop->lock. */
    long mon_slot;

    /* Busy polling.  node_poll: loop->lock; the rest: polling thread. */
    AIOL_LIST_ENTRY(aiol__handler) node_poll; /* on loop->pollers */
    int64_t poll_progress_ns; /* last poll() with work or fd event; 0: never
                                 polled (idle clock not started) */
    bool poll_started;        /* poll_begin called, poll_end not yet */
};

/* Readiness from busy polling: dispatch calls poll_ready (or read). */
#define AIOL__EV_POLL (1u << 4)

/* Idle bottom halves run at most this late. */
#define AIOL__BH_IDLE_NS (10 * 1000 * 1000)
/* A polled handler without progress for this long stops being polled. */
#define AIOL__POLL_IDLE_NS (7 * 1000 * 1000)
/* Busy polling may skip the fd wait this many iterations in a row at most. */
#define AIOL__POLL_MAX_SKIPS 8
/* The first window after polling was off (QEMU's first step too). */
#define AIOL__POLL_FIRST_NS 4000

/* A run of bottom halves taken by one poll call; see bh.c. */
typedef struct aiol__bh_slice {
    struct aiol_bh *head;
    AIOL_TAILQ_ENTRY(aiol__bh_slice) link;
} aiol__bh_slice;

/* A clock's armed timers, keyed by (deadline, arming order); see timer.c. */
typedef struct aiol__timer_key {
    int64_t expire;
    uint64_t seq;
} aiol__timer_key;
AIOL_HEAP_KEYED_HEAD(aiol__timer_heap, aiol_timer, aiol__timer_key);

struct aiol_clock {
    aiol_loop *loop;                /* immutable */
    aiol_clock_now_fn *now;         /* immutable; NULL: CLOCK_MONOTONIC */
    void *opaque;                   /* immutable */
    struct aiol__timer_heap heap;   /* polling thread */
    uint64_t seq;                   /* arming counter; polling thread */
    /*
     * Timer runs over this clock on the stack (nested polls); polling
     * thread.  aiol_clock_free() while one is sets freed instead and
     * leaves the clock linked; the last run to end frees it (timer.c).
     */
    unsigned running;
    bool freed;
    AIOL_LIST_ENTRY(aiol_clock) link; /* loop->clocks; polling thread */
};

struct aiol_phase {
    aiol_loop *loop;
    aiol_phase_ops ops;
    void *opaque;
    AIOL_LIST_ENTRY(aiol_phase) link; /* loop->phases; polling thread */
};

struct aiol__fdmon_ops;

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
    const struct aiol__fdmon_ops *mon; /* immutable after creation */
    void *mon_state;                   /* monitor private, see its file */
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
    aiol_loop_stats stats; /* polling thread; monitor_ctls under lock */

    /* Cold from here on. */
    /* aiol_loop_set_block_hooks(); polling thread. */
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
    pid_t pid;          /* process whose kernel objects the loop holds
                           (getpid() at creation, or of the child after
                           aiol_loop_after_fork()); fork.c */

    /*
     * loop->lock protects the fd table, the deleted list and the monitor's
     * registration state.  Never held while a callback runs or while the
     * polling thread sleeps.
     */
    pthread_mutex_t lock;
    aiol__handler **table; /* fd-indexed; lock */
    size_t table_size;     /* entries in table; lock */
    size_t nhandlers;      /* non-NULL entries; lock */
    AIOL_LIST_HEAD(, aiol__handler) deleted; /* removed while walked; lock */
    AIOL_LIST_HEAD(, aiol__handler) live;    /* every handler in table; lock */
    /*
     * Freed handlers kept for the next set (handler.c), linked through
     * node_deleted: churn then costs no malloc/free.  At most the peak
     * number of handlers the loop had at once, freed with the loop.  lock.
     */
    AIOL_LIST_HEAD(, aiol__handler) spare;
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
    AIOL_LIST_HEAD(, aiol__handler) pollers; /* handlers with poll(); lock */
    size_t npollers;           /* on pollers; lock */
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
    size_t pollers_snap_cap;   /* polling thread; written under lock */
    int64_t poll_grow, poll_shrink; /* polling thread */
    int64_t bh_idle_seen_ns;   /* when an idle BH was first seen pending, 0:
                                  none; polling thread */
    unsigned poll_skipped_waits; /* polling thread */
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

/* Takes loop->lock, noting the holder for aiol__assert_locked(). */
static inline void aiol__lock(aiol_loop *loop)
{
    pthread_mutex_lock(&loop->lock);
#ifdef AIOL__CONTRACTS
    atomic_store_explicit(&loop->lock_owner, aiol__thread_id(),
                          memory_order_relaxed);
#endif
}

/* Checks that the calling thread holds loop->lock. */
#define aiol__assert_locked(loop)                                            \
    assert(atomic_load_explicit(&(loop)->lock_owner, memory_order_relaxed) ==\
               aiol__thread_id() &&                                          \
           "loop->lock must be held here")

static inline void aiol__unlock(aiol_loop *loop)
{
#ifdef AIOL__CONTRACTS
    aiol__assert_locked(loop);
    atomic_store_explicit(&loop->lock_owner, 0, memory_order_relaxed);
#endif
    pthread_mutex_unlock(&loop->lock);
}

/*
 * Checks a polling-thread call: while a poll of @loop runs, only its
 * thread may make it (a timer armed from another thread would race the
 * run).  Between polls any one thread may.
 */
#define aiol__assert_poller(loop)                                            \
    assert((atomic_load_explicit(&(loop)->poller, memory_order_relaxed) ==   \
                0 ||                                                         \
            atomic_load_explicit(&(loop)->poller, memory_order_relaxed) ==   \
                aiol__thread_id()) &&                                        \
           "a polling-thread call from another thread while the loop polls")

/* ------------------------------------------------------- fd monitors */

/* The fd-monitor interface is fdmon.h; a backend includes only that. */

/* --------------------------------------------------------- handlers */

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
    node->revents = revents;
    AIOL_LIST_INSERT_HEAD(ready, node, node_ready);
}

/* Finishes the monitor's own outstanding work (first step of teardown). */
void aiol__loop_quiesce(aiol_loop *loop);

/*
 * fork.c.  True when @loop was created (or last adopted by
 * aiol_loop_after_fork()) in another process: this is a fork child.
 */
bool aiol__loop_forked(const aiol_loop *loop);
/*
 * aiol_loop_free() in a fork child that did not call
 * aiol_loop_after_fork(): drops the parent's monitor state without a
 * syscall on it and swaps in a monitor whose ops touch nothing, so the
 * rest of the teardown frees memory and closes only the child's fds.
 */
void aiol__loop_forget_forked(aiol_loop *loop);

/* Frees every handler in the table and on the deleted list (loop teardown). */
void aiol__handlers_free_all(aiol_loop *loop);

/* The same, inside a walk (after aiol__walk_begin()); embed.c. */
void aiol__embed_ready(aiol_loop *loop, aiol__ready_list *ready,
                       const struct pollfd *fds, size_t n);
/*
 * The table changed, the monitor left direct mode or (io_uring) a request
 * went out: what aiol_loop_embed_fds() listed last is stale.  Under
 * loop->lock, or on the polling thread (which cannot be inside
 * aiol_loop_embed_fds() meanwhile).  seq_cst: see embed.c.
 */
static inline void aiol__embed_invalidate(aiol_loop *loop)
{
    if (loop->embed_listed) {
        atomic_fetch_add_explicit(&loop->embed_gen, 1, memory_order_seq_cst);
    }
}
/* Frees the embed cache (loop teardown). */
void aiol__embed_fini(aiol_loop *loop);
/*
 * After a change other threads make and the poller must see: true when it
 * may be asleep, so it must be woken.  Called after a seq_cst fence (F2,
 * F4) that pairs with the poller's announcement (see notify.c).
 */
static inline bool aiol__poller_may_sleep(aiol_loop *loop)
{
    return atomic_load_explicit(&loop->notify_me, memory_order_relaxed) != 0 ||
           atomic_load_explicit(&loop->host_armed, memory_order_relaxed);
}

/*
 * Any thread, right after a seq_cst read-modify-write that published
 * work the polling thread finds by itself (a bottom-half push): the
 * notify without its fences and notified = true, F2b in notify.c.  Kicks
 * only a poller that may sleep.
 */
static inline void aiol__notify_pushed(aiol_loop *loop)
{
    if (atomic_load_explicit(&loop->notify_me, memory_order_seq_cst) != 0 ||
        atomic_load_explicit(&loop->host_armed, memory_order_seq_cst)) {
        aiol_loop_notify(loop);
    }
}

/*
 * One iteration (aiol_loop_poll_deadline()), or with @from_host one
 * non-blocking iteration that takes readiness from the @nhost entries of
 * @host instead of the fd monitor's wait.
 */
bool aiol__loop_iterate(aiol_loop *loop, int64_t deadline_ns, bool from_host,
                        const struct pollfd *host, size_t nhost);

/* Dispatches and empties @ready.  Returns whether progress was made. */
bool aiol__dispatch_ready(aiol_loop *loop, aiol__ready_list *ready);

/* Registers the loop's own internal handler (notifier).  0 or -errno. */
int aiol__fd_set_internal(aiol_loop *loop, int fd, aiol_handler_fn *read,
                          void *opaque);

/* Walking counter, see struct aiol_loop.walkers. */
void aiol__walk_begin(aiol_loop *loop);
void aiol__walk_end(aiol_loop *loop);

/* ------------------------------------------------------ bottom halves */

/*
 * The per-iteration entry points of bottom halves, timers and phases are
 * inline checks on the hot fields of struct aiol_loop in front of the
 * out-of-line work: an iteration with nothing of the kind makes no call.
 */

/*
 * Polling thread.  False when no bottom half can be pending: nothing on
 * the list, no slice a nested poll left.  seq_cst: a push is its own
 * notify (F2b in notify.c); after F1's fence or prepare()'s seq_cst store
 * of host_armed this load sees it, or the pusher sees the announcement.
 */
static inline bool aiol__bh_any(aiol_loop *loop)
{
    return atomic_load_explicit(&loop->bh_list, memory_order_seq_cst) != NULL ||
           loop->bh_local_head != NULL || !AIOL_TAILQ_EMPTY(&loop->bh_slices);
}
bool aiol__bh_poll_run(aiol_loop *loop);
/* Runs due bottom halves (polling thread).  Returns progress. */
static inline bool aiol__bh_poll(aiol_loop *loop)
{
    return aiol__bh_any(loop) && aiol__bh_poll_run(loop);
}
int64_t aiol__bh_deadline_scan(aiol_loop *loop, aiol__now *now);
/* Earliest bottom-half deadline: 0, now + idle delay, or none. */
static inline int64_t aiol__bh_deadline(aiol_loop *loop, aiol__now *now)
{
    return aiol__bh_any(loop) ? aiol__bh_deadline_scan(loop, now)
                              : AIOL_DEADLINE_NONE;
}
/* Frees what the loop owns among bottom halves (teardown). */
void aiol__bh_free_all(aiol_loop *loop);

/* ------------------------------------------------------------ timers */

int aiol__clocks_init(aiol_loop *loop);
void aiol__clocks_fini(aiol_loop *loop);
int64_t aiol__timers_deadline_scan(aiol_loop *loop, aiol__now *now);
/* Earliest timer deadline on the monotonic clock, or none. */
static inline int64_t aiol__timers_deadline(aiol_loop *loop, aiol__now *now)
{
    return loop->timers_armed != 0 ? aiol__timers_deadline_scan(loop, now)
                                   : AIOL_DEADLINE_NONE;
}
bool aiol__timers_run_due(aiol_loop *loop);
/* Fires due timers (polling thread).  Returns progress. */
static inline bool aiol__timers_run(aiol_loop *loop)
{
    return loop->timers_armed != 0 && aiol__timers_run_due(loop);
}

/* ------------------------------------------------------------ notify */

int aiol__notify_init(aiol_loop *loop);
void aiol__notify_fini(aiol_loop *loop);
/* Polling thread, after a wait: consumes a pending notify. */
void aiol__notify_accept(aiol_loop *loop);

/* ------------------------------------------------------ busy polling */

/*
 * Busy-polls handlers with a poll callback until one has work, the window
 * (loop->poll_ns, capped at @deadline_ns) ends, or (blocking false) after
 * one round.  Queues those with work on @ready.  Returns whether any had.
 */
bool aiol__busy_poll(aiol_loop *loop, aiol__ready_list *ready,
                     int64_t now_ns, int64_t deadline_ns);
/* Adapts the window to how long the iteration blocked. */
void aiol__busy_poll_adjust(aiol_loop *loop, int64_t block_ns);
/*
 * Ends busy polling (before a wait that may block, or polling was
 * disabled): calls poll_end of every polled handler and polls it once
 * more, since work may have come before its notifications were back on;
 * that work goes on @ready.  Returns whether there was any.
 */
bool aiol__busy_poll_stop(aiol_loop *loop, aiol__ready_list *ready);
/*
 * The same for a host about to sleep (aiol_loop_prepare()): work the last
 * poll finds is not queued but leaves loop->poll_recheck set, so the next
 * iteration polls once.  Returns whether there was any.
 */
bool aiol__busy_poll_stop_for_host(aiol_loop *loop);
/*
 * Under loop->lock.  Makes room for a snapshot of @n polled handlers, so
 * the next refresh cannot fail.  0 or -ENOMEM.
 */
int aiol__busy_poll_reserve(aiol_loop *loop, size_t n);
/* Marks @node as having made progress through its fd. */
void aiol__busy_poll_progress(aiol_loop *loop, aiol__handler *node);
void aiol__busy_poll_fini(aiol_loop *loop);

/* ------------------------------------------------------ embedder phases */

/*
 * Earliest deadline among notify (0 if pending), bottom halves, timers and
 * phases, on the monotonic clock; AIOL_DEADLINE_NONE if none.
 */
int64_t aiol__loop_deadline(aiol_loop *loop, aiol__now *now);

int64_t aiol__phases_deadline_scan(aiol_loop *loop, aiol__now *now);
/* Earliest deadline of the embedder phases, or none. */
static inline int64_t aiol__phases_deadline(aiol_loop *loop, aiol__now *now)
{
    if (AIOL_LIST_EMPTY(&loop->phases)) {
        return AIOL_DEADLINE_NONE;
    }
    return aiol__phases_deadline_scan(loop, now);
}
bool aiol__phases_dispatch_run(aiol_loop *loop);
/* Runs the embedder phases' dispatch callbacks.  Returns progress. */
static inline bool aiol__phases_dispatch(aiol_loop *loop)
{
    return !AIOL_LIST_EMPTY(&loop->phases) && aiol__phases_dispatch_run(loop);
}

/* ------------------------------------------------------------ time */

/*
 * Converts an absolute deadline into a relative timespec for a wait.
 * Returns false for AIOL_DEADLINE_NONE (wait forever).  A deadline in the
 * past gives a zero timeout.
 */
struct timespec;
bool aiol__deadline_to_timespec(int64_t deadline_ns, struct timespec *ts);

#endif /* AIOLOOP_INTERNAL_H */
