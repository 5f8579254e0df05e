/*
 * internal.h - libaioloop's private structures, shared by the runtime files.
 *
 * Nothing here is API.  Internal non-static names start with aiol__.
 */
#ifndef AIOLOOP_INTERNAL_H
#define AIOLOOP_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "aioloop/aioloop.h"

/* Misuse check that survives NDEBUG: prints "aioloop: <func>: <msg>" and aborts. */
#define aiol__check(cond, msg)                                               \
    do {                                                                     \
        if (__builtin_expect(!(cond), 0)) {                                  \
            aiol__fail(__func__, (msg));                                     \
        }                                                                    \
    } while (0)

_Noreturn void aiol__fail(const char *func, const char *msg);

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

struct aiol__handler {
    /* Immutable from creation until the handler is freed. */
    int fd;
    unsigned events;   /* AIOL__EV_IN and/or AIOL__EV_OUT to watch; may be 0 */
    aiol_fd_ops ops;
    void *opaque;

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

    /* Private to the fd monitor; protected by loop->lock. */
    long mon_slot;
};

struct aiol__fdmon_ops;

struct aiol_loop {
    const struct aiol__fdmon_ops *mon; /* immutable after creation */
    void *mon_state;                   /* monitor private, see its file */

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

    /*
     * Walking counter: number of poll calls (nested ones included) in
     * progress.  While it is non-zero, removed handlers go on the deleted
     * list instead of being freed, because some ready list or dispatch may
     * still point at them.  Incremented without the lock (seq_cst, pairs
     * with the load in aiol__handler_retire() made under the lock after
     * the table was updated); the decrement to zero frees the list under
     * the lock.
     */
    atomic_uint walkers;
    atomic_bool deleted_pending; /* deleted list may be non-empty */

    aiol_loop_stats stats; /* polling thread; monitor_ctls under lock */
};

/* ------------------------------------------------------- fd monitors */

/*
 * The ops every fd monitor implements, one file each (fdmon-*.c).
 * Threading: update() is called with loop->lock held; wait() from the
 * polling thread without it (the monitor takes it while it maps events to
 * handlers).
 */
typedef struct aiol__fdmon_ops {
    const char *name;
    /* Allocates loop->mon_state.  0 or -errno, leaving nothing behind. */
    int (*init)(aiol_loop *loop);
    /* Frees loop->mon_state; handlers are already gone from the table. */
    void (*fini)(aiol_loop *loop);
    /*
     * Moves the registration of an fd from handler @old (NULL: none) to
     * handler @new_ (NULL: none).  Either may watch no events.  Returns 0
     * or -errno; on error nothing changed.
     */
    int (*update)(aiol_loop *loop, aiol__handler *old, aiol__handler *new_);
    /*
     * Waits until @deadline_ns (0: do not block; AIOL_DEADLINE_NONE:
     * forever), retrying EINTR, and queues ready handlers with
     * aiol__ready_add().  Returns the number queued or a negative errno
     * for an unexpected failure.
     */
    int (*wait)(aiol_loop *loop, aiol__ready_list *ready, int64_t deadline_ns);
} aiol__fdmon_ops;

extern const aiol__fdmon_ops aiol__fdmon_epoll;
extern const aiol__fdmon_ops aiol__fdmon_poll;

/* --------------------------------------------------------- handlers */

/* Looks up the handler of @fd; caller holds loop->lock. */
static inline aiol__handler *aiol__handler_lookup(aiol_loop *loop, int fd)
{
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

/* Frees every handler in the table and on the deleted list (loop teardown). */
void aiol__handlers_free_all(aiol_loop *loop);

/* Dispatches and empties @ready.  Returns whether progress was made. */
bool aiol__dispatch_ready(aiol_loop *loop, aiol__ready_list *ready);

/* Walking counter, see struct aiol_loop.walkers. */
void aiol__walk_begin(aiol_loop *loop);
void aiol__walk_end(aiol_loop *loop);

/* ------------------------------------------------------------ time */

/*
 * Converts an absolute deadline into a relative timespec for a wait.
 * Returns false for AIOL_DEADLINE_NONE (wait forever).  A deadline in the
 * past gives a zero timeout.
 */
struct timespec;
bool aiol__deadline_to_timespec(int64_t deadline_ns, struct timespec *ts);

#endif /* AIOLOOP_INTERNAL_H */
