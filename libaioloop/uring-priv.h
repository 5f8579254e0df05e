/* SPDX-License-Identifier: MIT */
/*
 * uring-priv.h - what the io_uring monitor's files share.  Each calls
 * only those listed after it:
 *   - uring.c, the public calls of aioloop/uring.h;
 *   - fdmon-io_uring.c, the fd monitor's ops: waits, binding the ring to
 *     its thread (or rebuilding it shared), embedding and fork;
 *   - uring-net.c, buffer groups, multishot receives and sends;
 *   - uring-req.c, the request engine behind aioloop/uring.h;
 *   - uring-reap.c, draining the completion ring, and what a busy-poll
 *     window may see of it;
 *   - uring-poll.c, the polls of the watched fds;
 *   - uring-ring.c, the ring itself: creating, enabling, entering the
 *     kernel, closing.
 * Every function here runs on the polling thread unless it says more.
 */
#ifndef AIOLOOP_URING_PRIV_H
#define AIOLOOP_URING_PRIV_H

#include "internal.h"

#ifdef AIOL_HAVE_IO_URING
#include <liburing.h>

/*
 * user_data layout: [generation:31][fd:31][tag:2] for an fd's poll; a
 * request's is the pointer to its aiol_uring_req (8-byte aligned: tag
 * AIOL__UD_REQ); AIOL__UD_IGNORE marks cancels, whose completions carry
 * nothing.
 */
enum { AIOL__UD_REQ = 0, AIOL__UD_POLL = 1, AIOL__UD_IGNORE = 2 };

typedef struct aiol__uring_fd aiol__uring_fd; /* uring-poll.c */

struct aiol_uring_req {
    aiol_loop *loop;                      /* immutable */
    aiol_cqe_fn *done;                    /* immutable */
    void *opaque;                         /* immutable */
    AIOL_LIST_ENTRY(aiol_uring_req) link; /* s->inflight; polling thread */
};

/* A request's completion waiting to be dispatched (uring-reap.c). */
typedef struct aiol__uring_done {
    aiol_uring_req *req;
    int res;
    uint32_t flags;
} aiol__uring_done;

typedef struct aiol__uring_state {
    struct io_uring ring;      /* SQ: polling thread */
    bool shared;               /* any thread may poll; polling thread */
    bool bound;                /* bound ring enabled; polling thread */
    uint64_t owner;            /* the bound ring's thread (aiol__thread_id) */
    bool registered;           /* ring fd registered for owner */
    aiol__uring_fd *fds;       /* fd-indexed; lock */
    size_t nfds;               /* lock */
    int *dirty, *fired;        /* fds to (re)arm or cancel; lock */
    size_t ndirty, dirty_cap, nfired, fired_cap; /* lock */
    /*
     * lock.  A set since the last flush_changes() returned 0, so its
     * caller wakes the poller if it may sleep; later sets return
     * AIOL__UPDATE_OWED until the next flush (fdmon.h).  Removals never
     * raise it: their callers wake nobody.
     */
    bool owed;
    bool no_multishot;         /* the kernel refused a multishot poll; lock */
    /*
     * Set (under the lock) when a removal leaves a poll to cancel, cleared
     * by flush_changes(); read by the polling thread without the lock
     * (look_owed), where a stale false only delays the cancel to the next
     * wait and a stale true costs one look.
     */
    atomic_bool cancel_owed;
    /*
     * Set under the lock when an fd joins the dirty or the fired list,
     * cleared by aiol__uring_polls_flush(); read by the polling thread
     * without the lock, to skip it when there is nothing to flush.  As
     * epoll's has_dirty: the seq_cst fences F1 (the poller, after
     * announcing that it may sleep) and F4 (handler.c, after a deferred
     * change) pair so that either the poller sees the flag or the changer
     * sees the announcement and wakes it.
     */
    atomic_bool listed;
    /* Requests; polling thread. */
    AIOL_LIST_HEAD(, aiol_uring_req) inflight; /* submitted, not completed */
    unsigned npending;         /* submitted, callback not yet run */
    bool closing;              /* aiol_loop_free() began: no submissions */
    bool host_bound;           /* get_fd() gave a host the bound ring
                                  (requests pinned it): keep it bound */
    int host_efd;              /* host_bound: the host's fd, an eventfd
                                  registered on the ring; else -1 */
    aiol__uring_done *done;    /* completions to dispatch, done[head..n) */
    size_t done_head, ndone, done_cap;
    /* Buffer groups (uring-net.c); polling thread. */
    AIOL_LIST_HEAD(, aiol_uring_bufs) bufs;
    uint16_t next_bgid;        /* the next group id to try */
    /* Busy polling (uring-reap.c); polling thread.  The CQ index up to
       which this window's completions were found not to end it. */
    unsigned spin_seen;
} aiol__uring_state;

/* --------------------------------------------------- fdmon-io_uring.c */

/*
 * Before anything that may enter the kernel or fill the SQ: enables a
 * bound ring for its first polling thread, or rebuilds it shared when
 * another thread shows up.  Aborts when that cannot be done (requests
 * pin the ring, no fd).
 */
void aiol__uring_bind(aiol_loop *loop);

/* -------------------------------------------------------- uring-net.c */

/*
 * With no receive in flight: every buffer group reset and registered
 * (again) on @ring, a rebuilt one or s->ring.  0, or the kernel's error.
 */
int aiol__uring_bufs_move(aiol__uring_state *s, struct io_uring *ring);
/* Loop teardown or a fork child: frees every group, entering no kernel. */
void aiol__uring_bufs_drop_all(aiol__uring_state *s);
/* The loop of a group (for uring.c, which binds its ring). */
aiol_loop *aiol__uring_bufs_loop_get(const aiol_uring_bufs *b);

/* The socket API of aioloop/uring.h (uring.c checks its arguments). */
int aiol__uring_bufs_new(aiol_loop *loop, unsigned count, unsigned size,
                         aiol_uring_bufs **out);
void aiol__uring_bufs_free(aiol_uring_bufs *bufs);
int aiol__uring_recv_submit(aiol_loop *loop, int fd, aiol_uring_bufs *bufs,
                           aiol_recv_fn *cb, void *opaque,
                           aiol_uring_recv **out);
int aiol__uring_recv_cancel(aiol_uring_recv *r);
int aiol__uring_send_submit(aiol_loop *loop, int fd, const void *buf, size_t len,
                     aiol_cqe_fn *done, void *opaque);
/* -------------------------------------------------------- uring-req.c */

/* Runs queued request completions, oldest first; returns progress. */
bool aiol__uring_reqs_dispatch(aiol_loop *loop);
/* Loop teardown: cancels, waits for and completes every request. */
void aiol__uring_reqs_quiesce(aiol_loop *loop);
/* A fork child: frees the parent's requests without their callbacks. */
void aiol__uring_reqs_forget(aiol__uring_state *s);

/* The request API of aioloop/uring.h (uring.c checks its arguments). */
int aiol__uring_submit(aiol_loop *loop, aiol_sqe_prep_fn *prep,
                       aiol_cqe_fn *done, void *opaque, aiol_uring_req **out);
int aiol__uring_cancel(aiol_uring_req *req);
int aiol__uring_flush(aiol_loop *loop);
int aiol__uring_drain(aiol_loop *loop);
unsigned aiol__uring_pending(aiol_loop *loop);

/* ------------------------------------------------------- uring-reap.c */

/*
 * Under loop->lock.  Drains the CQ ring, queuing ready handlers on @ready
 * and request completions for dispatch; the number of handlers queued, or
 * -1 if it saw no completion at all.
 */
int aiol__uring_cqes_reap(aiol_loop *loop, aiol__uring_state *s,
                          aiol__ready_list *ready);
/*
 * A busy-poll window opens (the ring bound): hands the kernel the queued
 * SQEs and starts looking at completions from the CQ's head.
 */
void aiol__uring_spin_start(aiol_loop *loop, aiol__uring_state *s);
/* The monitor's spin_check op (fdmon.h). */
bool aiol__uring_spin_check(aiol_loop *loop);

/* ------------------------------------------------------- uring-poll.c */

/* Under loop->lock.  The monitor's update and reserve ops (fdmon.h):
   update only records the change, the next flush applies it. */
int aiol__uring_poll_update(aiol_loop *loop, aiol__handler *old,
                            aiol__handler *new_);
int aiol__uring_poll_reserve(aiol_loop *loop, size_t more, int max_fd);
/* Under loop->lock.  Queues the SQEs for every pending change. */
void aiol__uring_polls_flush(aiol_loop *loop, aiol__uring_state *s);
/*
 * Polling thread, without the lock: whether aiol__uring_polls_flush() has
 * anything to do.  seq_cst: pairs with F4 through F1 (see listed).
 */
static inline bool aiol__uring_polls_listed(aiol__uring_state *s)
{
    return atomic_load_explicit(&s->listed, memory_order_seq_cst);
}
/*
 * Under loop->lock; polling thread.  The embed op direct_enter: queues a
 * POLL_REMOVE per armed fd (the next look submits them: embed.c flushes
 * right after) and leaves the fds dirty, for the flush that follows
 * direct mode (flushes skip them meanwhile).  Refused while requests ride
 * the ring, or with no SQ room to cancel every poll.
 */
bool aiol__uring_polls_direct_enter(aiol_loop *loop);
/*
 * Under loop->lock.  The state of @fd's poll in flight when @ud names it
 * (fd in *@fdp); NULL for a request, a cancel or a cancelled generation.
 */
aiol__uring_fd *aiol__uring_poll_current(aiol__uring_state *s, uint64_t ud,
                                        int *fdp);
/*
 * Under loop->lock.  A poll's completion: the fd is marked for re-arming
 * unless its poll stays armed, and its handler queued on @ready with the
 * events; 1 if a handler was queued.
 */
int aiol__uring_poll_complete(aiol_loop *loop, aiol__uring_state *s,
                              const struct io_uring_cqe *cqe,
                              aiol__ready_list *ready);
/*
 * Under loop->lock.  The ring was replaced: every armed poll is gone, so
 * each watched fd is marked for a new one at the next flush.
 */
void aiol__uring_polls_rearm(aiol_loop *loop, aiol__uring_state *s);
/*
 * Under loop->lock.  @fd's readiness was reaped and will not be
 * dispatched (aiol_uring_drain()): a single-shot poll is re-armed by the
 * next flush anyway; a multishot one is cancelled and armed anew, or its
 * event would never be reported again.
 */
void aiol__uring_poll_redo(aiol_loop *loop, aiol__uring_state *s, int fd);

/* ------------------------------------------------------- uring-ring.c */

/* Creates a ring, bound unless @shared; sets s->shared to what it got. */
int aiol__uring_ring_create(aiol__uring_state *s, struct io_uring *ring,
                            bool shared);
/* The first thread to use a bound ring enables it and becomes its owner. */
void aiol__uring_ring_enable(aiol_loop *loop, aiol__uring_state *s);
/*
 * A look that enters the kernel only if something needs it.  0, or
 * io_uring_submit_and_get_events()'s result.
 */
int aiol__uring_ring_look(aiol_loop *loop, aiol__uring_state *s);
/* A free SQE, submitting what is queued if the SQ is full. */
struct io_uring_sqe *aiol__uring_sqe_get(aiol__uring_state *s);
/*
 * A host is to sleep on a bound ring (host_bound): an eventfd registered
 * on it, s->host_efd.  0, or -errno with nothing changed.
 */
int aiol__uring_host_efd_open(aiol__uring_state *s);
/* Before the host sleeps on s->host_efd: readable iff work is pending. */
void aiol__uring_host_efd_arm(aiol__uring_state *s);
/* Closes s->host_efd, if any (with its ring, or when the ring goes). */
void aiol__uring_host_efd_close(aiol__uring_state *s);
/* Loop teardown: closes the ring, which cancels what is in flight. */
void aiol__uring_ring_close(aiol__uring_state *s);
/* A fork child: drops its view of the parent's ring, entering no kernel. */
void aiol__uring_ring_forget(aiol__uring_state *s);

#endif

#endif /* AIOLOOP_URING_PRIV_H */
