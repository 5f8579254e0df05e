/* SPDX-License-Identifier: MIT */
/*
 * uring-reap.c - draining the io_uring monitor's completion ring.  A
 * poll's completion queues its handler (uring-poll.c says what it means
 * for the poll); a request's is queued on the done list, which uring-req.c
 * dispatches after the fd handlers.  Calls uring-poll.c and uring-ring.c;
 * the monitor, uring-req.c and busy polling call it.
 *
 * Busy polling.  While the loop spins (busypoll.c) it must see what its
 * poll callbacks cannot: a request's completion, or readiness of a
 * handler that is not being polled.  The bound ring defers completion
 * work to its thread and says so in IORING_SQ_TASKRUN, read without a
 * syscall; that flag does not say what completed.  Most of it, on a busy
 * iothread, is readiness of the handlers the window polls anyway: a
 * virtqueue's ioeventfd fires when the guest kicks it.  Ending the window
 * for those would cut most windows short, where epoll, which the window
 * does not consult, keeps spinning.  So the check posts the deferred work
 * (one io_uring_enter, only when the flag is up) and looks at the
 * completions that arrived since the last check without reaping them;
 * those that do not end the window stay in the ring for the wait after
 * it to reap.
 */
#include <errno.h>
#include <string.h>

#include "fdmon.h"
#include "uring-priv.h"

/*
 * Under loop->lock.  Queues a request's completion for dispatch; false
 * when a multishot request's extra completion finds no room (the CQE
 * stays in the ring until a dispatch has made some: every request's
 * final completion has room from its submission).
 */
static bool done_add(aiol__uring_state *s, aiol_uring_req *req, int res,
                     uint32_t flags)
{
    if (s->ndone == s->done_cap && s->done_head > 0) {
        /* (dispatch indexes through done_head: safe to move) */
        memmove(s->done, s->done + s->done_head,
                (s->ndone - s->done_head) * sizeof(*s->done));
        s->ndone -= s->done_head;
        s->done_head = 0;
    }
    if (aiol__reserve(&s->done, &s->done_cap, s->ndone + 1,
                      sizeof(*s->done)) < 0) {
        return false;
    }
    if (!(flags & IORING_CQE_F_MORE)) {
        AIOL_LIST_REMOVE(req, link);
    }
    s->done[s->ndone++] = (aiol__uring_done){ req, res, flags };
    return true;
}

/*
 * Under loop->lock.  Handles one completion; returns 1 if it queued a
 * handler, -1 if it must stay in the ring for now (done_add()).
 */
static int reap_one(aiol_loop *loop, aiol__uring_state *s,
                    const struct io_uring_cqe *cqe, aiol__ready_list *ready)
{
    if ((cqe->user_data & 3) == AIOL__UD_REQ) {
        return done_add(s, (aiol_uring_req *)(uintptr_t)cqe->user_data,
                        cqe->res, cqe->flags)
                   ? 0 : -1;
    }
    return aiol__uring_poll_complete(loop, s, cqe, ready);
}

int aiol__uring_cqes_reap(aiol_loop *loop, aiol__uring_state *s,
                          aiol__ready_list *ready)
{
    struct io_uring_cqe *cqe;
    unsigned head, seen = 0;
    int queued = 0;

    aiol__assert_locked(loop);
    io_uring_for_each_cqe(&s->ring, head, cqe) {
        int got = reap_one(loop, s, cqe, ready);

        if (got < 0) {
            break; /* no room to queue it: left for the next reap */
        }
        queued += got;
        seen++;
    }
    io_uring_cq_advance(&s->ring, seen);
    return seen ? queued : -1;
}

void aiol__uring_spin_start(aiol_loop *loop, aiol__uring_state *s)
{
    if (io_uring_sq_ready(&s->ring) != 0) {
        (void)aiol__uring_ring_look(loop, s);
    }
    s->spin_seen = *s->ring.cq.khead; /* (only we move the head) */
}

/*
 * Under loop->lock.  Whether @cqe is work the spin cannot see: a request's
 * completion, or readiness of a handler whose poll callback is not
 * spinning in this window.  Readiness of one that is (a virtqueue's
 * ioeventfd) is not: its poll callback sees the same work, and the
 * completion waits in the ring for the next reap, as epoll's readiness
 * waits for the next epoll_wait().
 */
static bool cqe_ends_spin(aiol_loop *loop, aiol__uring_state *s,
                          const struct io_uring_cqe *cqe)
{
    aiol__handler *node;
    int fd;

    if ((cqe->user_data & 3) == AIOL__UD_REQ) {
        return true;
    }
    if (aiol__uring_poll_current(s, cqe->user_data, &fd) == NULL) {
        return false; /* nothing to dispatch */
    }
    node = aiol__handler_lookup(loop, fd);
    return node != NULL && !node->poll_started;
}

bool aiol__uring_spin_check(aiol_loop *loop)
{
    aiol__uring_state *s = loop->fdmon_state;
    struct io_uring_cq *cq = &s->ring.cq;
    unsigned tail;
    bool ends = false;

    (void)aiol__uring_ring_look(loop, s); /* enters only for held work */
    if (IO_URING_READ_ONCE(*s->ring.sq.kflags) & IORING_SQ_CQ_OVERFLOW) {
        return true; /* a full CQ: the wait's reap makes room */
    }
    /* Acquire pairs with the kernel's release of the tail it posts. */
    tail = io_uring_smp_load_acquire(cq->ktail);
    if (tail == s->spin_seen) {
        return false;
    }
    aiol__lock(loop);
    while (s->spin_seen != tail && !ends) {
        ends = cqe_ends_spin(loop, s,
                             &cq->cqes[s->spin_seen & cq->ring_mask]);
        s->spin_seen++;
    }
    aiol__unlock(loop);
    return ends;
}
