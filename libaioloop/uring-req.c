/* SPDX-License-Identifier: MIT */
/*
 * uring-req.c - io_uring requests on the loop's own ring (aioloop/uring.h;
 * uring.c checks the public calls' arguments and fd monitor).
 *
 * Requests.  aiol_uring_submit() puts a caller-prepared SQE on the same
 * ring with a pointer to its aiol_uring_req as user_data (8-byte aligned,
 * so tag bits 00).  Completions are queued in CQE order and dispatched by
 * the poll iteration after fd handlers (monitor op dispatch), from the
 * oldest, so a nested poll continues the queue as it does bottom halves.
 * At loop teardown every request still in flight is cancelled and waited
 * for, and its callback runs, before anything else is torn down.
 *
 * Calls uring-reap.c, uring-poll.c and uring-ring.c.  Its callers have
 * bound the ring to the calling thread (aiol__uring_bind()): uring.c's
 * public calls and the monitor's dispatch and quiesce ops.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fdmon.h"
#include "uring-priv.h"

bool aiol__uring_reqs_dispatch(aiol_loop *loop)
{
    aiol__uring_state *s = loop->fdmon_state;
    bool progress = false;

    while (s->done_head < s->ndone) {
        aiol__uring_done d = s->done[s->done_head++]; /* copy: a nested poll may
                                                   grow the array */
        if (!(d.flags & IORING_CQE_F_MORE)) {
            s->npending--;
        }
        d.req->done(d.req->opaque, d.res, d.flags);
        if (!(d.flags & IORING_CQE_F_MORE)) {
            free(d.req);
        }
        progress = true;
    }
    s->done_head = s->ndone = 0;
    return progress;
}

int aiol__uring_submit(aiol_loop *loop, aiol_sqe_prep_fn *prep,
                       aiol_cqe_fn *done, void *opaque, aiol_uring_req **out)
{
    aiol__uring_state *s = loop->fdmon_state;
    aiol_uring_req *req;
    struct io_uring_sqe *sqe;

    if (s->closing) {
        return -ESHUTDOWN; /* from a callback that aiol_loop_free() runs */
    }
    /* Room for its completion now: completing cannot report ENOMEM. */
    if (aiol__reserve(&s->done, &s->done_cap, (size_t)s->npending + 1,
                      sizeof(*s->done)) < 0 ||
        (req = malloc(sizeof(*req))) == NULL) {
        return -ENOMEM;
    }
    req->loop = loop;
    req->done = done;
    req->opaque = opaque;
    sqe = aiol__uring_sqe_get(s);
    prep(sqe, opaque);
    io_uring_sqe_set_data(sqe, req);
    AIOL_LIST_INSERT_HEAD(&s->inflight, req, link);
    s->npending++;
    /* Its completion arrives on the ring: direct embedding ends (top). */
    aiol__embed_direct_end(loop);
    aiol__embed_invalidate(loop);
    if (out != NULL) {
        *out = req;
    }
    return 0;
}

int aiol__uring_cancel(aiol_uring_req *req)
{
    aiol__uring_state *s = req->loop->fdmon_state;
    struct io_uring_sqe *sqe;

    aiol__assert_poller(req->loop);
    sqe = aiol__uring_sqe_get(s);

    io_uring_prep_cancel64(sqe, (uint64_t)(uintptr_t)req, 0);
    io_uring_sqe_set_data64(sqe, (uint64_t)AIOL__UD_IGNORE);
    return 0;
}

unsigned aiol__uring_pending(aiol_loop *loop)
{
    return ((aiol__uring_state *)loop->fdmon_state)->npending;
}

/*
 * Waits until no request is in flight, running only their completion
 * callbacks (which may submit more: waited for too).  Poll completions
 * reaped meanwhile are not dispatched; their fds are re-armed by the next
 * flush and report again: a single-shot poll re-checks the level when it
 * is armed, and a multishot one, which would not, is armed anew
 * (aiol__uring_poll_redo()).  Polling thread.
 */
static void drain_requests(aiol_loop *loop, aiol__uring_state *s)
{
    while (s->npending != 0) {
        aiol__ready_list unused = AIOL_LIST_HEAD_INITIALIZER;

        if (!AIOL_LIST_EMPTY(&s->inflight)) {
            int ret = io_uring_submit_and_wait(&s->ring, 1);

            if (ret < 0 && ret != -EINTR && ret != -EBUSY && ret != -EAGAIN) {
                break; /* the ring is unusable: closing it cancels the rest */
            }
        }
        aiol__lock(loop);
        (void)aiol__uring_cqes_reap(loop, s, &unused);
        while (!AIOL_LIST_EMPTY(&unused)) {
            aiol__handler *node = AIOL_LIST_FIRST(&unused);

            AIOL_LIST_REMOVE(node, node_ready);
            aiol__uring_poll_redo(loop, s, node->fd);
        }
        aiol__unlock(loop);
        aiol__uring_reqs_dispatch(loop); /* (frees room in s->done) */
    }
}

int aiol__uring_drain(aiol_loop *loop)
{
    aiol__uring_state *s = loop->fdmon_state;

    if (s->npending != 0) {
        drain_requests(loop, s);
    }
    return s->npending == 0 ? 0 : -EIO;
}

/*
 * Loop teardown, before anything else goes: cancels every request in
 * flight, waits until the kernel is done with each, and runs their
 * callbacks, so no buffer is written after the loop is gone.  From then
 * on submissions fail (-ESHUTDOWN), so a callback that resubmits cannot
 * leave a request that never completes.
 */
void aiol__uring_reqs_quiesce(aiol_loop *loop)
{
    aiol__uring_state *s = loop->fdmon_state;
    aiol_uring_req *req;

    s->closing = true;
    if (s->npending == 0) {
        return;
    }
    AIOL_LIST_FOREACH(req, &s->inflight, link) {
        aiol__uring_cancel(req);
    }
    drain_requests(loop, s);
}

int aiol__uring_flush(aiol_loop *loop)
{
    aiol__uring_state *s = loop->fdmon_state;

    if (io_uring_sq_ready(&s->ring) == 0) {
        return 0;
    }
    loop->stats.fdmon_waits++;
    return io_uring_submit(&s->ring);
}

void aiol__uring_reqs_forget(aiol__uring_state *s)
{
    aiol_uring_req *req;

    for (size_t i = s->done_head; i < s->ndone; i++) {
        if (!(s->done[i].flags & IORING_CQE_F_MORE)) {
            free(s->done[i].req); /* off s->inflight already */
        }
    }
    while ((req = AIOL_LIST_FIRST(&s->inflight)) != NULL) {
        AIOL_LIST_REMOVE(req, link);
        free(req);
    }
}
