/* SPDX-License-Identifier: MIT */
/*
 * uring-priv.h - what the io_uring monitor's files share:
 *   - fdmon-io_uring.c, the fd monitor: a single-shot poll per watched
 *     fd, waits, embedding and fork;
 *   - uring-ring.c, the ring's lifecycle: bound and shared rings, and
 *     the calls that enter the kernel;
 *   - uring-req.c, the request engine behind aioloop/uring.h, whose
 *     public entry points are in uring.c;
 *   - uring-net.c, buffer groups, multishot receives and sends on it;
 *   - uring-spin.c, the monitor's part in busy polling.
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

typedef struct aiol__uring_fd aiol__uring_fd;     /* fdmon-io_uring.c */
typedef struct aiol__uring_done aiol__uring_done; /* uring-req.c */

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
    /* Requests; polling thread. */
    AIOL_LIST_HEAD(, aiol_uring_req) inflight; /* submitted, not completed */
    unsigned npending;         /* submitted, callback not yet run */
    bool closing;              /* aiol_loop_free() began: no submissions */
    bool host_bound;           /* get_fd() gave a host the bound ring's fd
                                  (requests pinned it): keep it bound */
    aiol__uring_done *done;    /* completions to dispatch, done[head..n) */
    size_t done_head, ndone, done_cap;
    /* Buffer groups (uring-net.c); polling thread. */
    AIOL_LIST_HEAD(, aiol_uring_bufs) bufs;
    uint16_t next_bgid;        /* the next group id to try */
    /* Busy polling (uring-spin.c); polling thread.  The CQ index up to
       which this window's completions were found not to end it. */
    unsigned spin_seen;
} aiol__uring_state;

/* ------------------------------------------------------- uring-ring.c */

/* Creates a ring, bound unless @shared; sets s->shared to what it got. */
int aiol__uring_ring_create(aiol__uring_state *s, struct io_uring *ring,
                            bool shared);
/*
 * Before anything that may enter the kernel: enables a bound ring for its
 * first polling thread, or rebuilds it shared when another thread shows
 * up.  Aborts when that cannot be done (requests pin the ring, no fd).
 */
void aiol__uring_ring_bind(aiol_loop *loop, aiol__uring_state *s);
/*
 * Replaces a bound ring with a shared one and re-arms every watched fd on
 * it.  0; -EBUSY while requests are in flight (they cannot move between
 * rings); or the error creating the ring, the bound ring left as it was.
 */
int aiol__uring_ring_rebuild_shared(aiol_loop *loop, aiol__uring_state *s);
/*
 * A look that enters the kernel only if something needs it.  0, or
 * io_uring_submit_and_get_events()'s result.
 */
int aiol__uring_ring_look(aiol_loop *loop, aiol__uring_state *s);
/* A free SQE, submitting what is queued if the SQ is full. */
struct io_uring_sqe *aiol__uring_sqe_get(aiol__uring_state *s);
/* Loop teardown: closes the ring, which cancels what is in flight. */
void aiol__uring_ring_close(aiol__uring_state *s);
/* A fork child: drops its view of the parent's ring, entering no kernel. */
void aiol__uring_ring_forget(aiol__uring_state *s);

/* --------------------------------------------------- fdmon-io_uring.c */

/*
 * Under loop->lock.  Drains the CQ ring, queuing ready handlers on @ready
 * and request completions for dispatch; the number of handlers queued, or
 * -1 if it saw no completion at all.
 */
int aiol__uring_cqes_reap(aiol_loop *loop, aiol__uring_state *s,
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
/*
 * Under loop->lock; while busy polling.  Whether @cqe is work the spin
 * cannot see: a request's completion, or readiness of a handler whose
 * poll callback is not spinning in this window.  Readiness of one that
 * is (a virtqueue's ioeventfd) is not: its poll callback sees the same
 * work, and the completion waits in the ring for the next reap, as
 * epoll's readiness waits for the next epoll_wait().
 */
bool aiol__uring_cqe_ends_spin(aiol_loop *loop, aiol__uring_state *s,
                               const struct io_uring_cqe *cqe);

/* ------------------------------------------------------- uring-spin.c */

/* The monitor's spin_begin and spin_check ops (fdmon.h). */
void aiol__uring_spin_begin(aiol_loop *loop);
bool aiol__uring_spin_check(aiol_loop *loop);

/* -------------------------------------------------------- uring-req.c */

/*
 * Under loop->lock.  Queues a request's completion for dispatch; false
 * when a multishot request's extra completion finds no room (the CQE
 * stays in the ring until a dispatch has made some).
 */
bool aiol__uring_req_complete(aiol__uring_state *s, aiol_uring_req *req,
                              int res, uint32_t flags);
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

/* -------------------------------------------------------- uring-net.c */

/*
 * With no receive in flight: every buffer group reset and registered
 * (again) on @ring, a rebuilt one or s->ring.  0, or the kernel's error.
 */
int aiol__uring_bufs_move(aiol__uring_state *s, struct io_uring *ring);
/* Loop teardown or a fork child: frees every group, entering no kernel. */
void aiol__uring_bufs_drop_all(aiol__uring_state *s);

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
#endif

#endif /* AIOLOOP_URING_PRIV_H */
