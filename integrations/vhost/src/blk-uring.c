/* SPDX-License-Identifier: MIT */
/*
 * blk-uring.c - io_uring for the vhost-user-blk device (blk.h), as
 * qemu-storage-daemon's aio=io_uring: IORING_OP_READV, WRITEV, FSYNC with
 * DATASYNC and FALLOCATE.  When a context's loop runs io_uring the
 * requests go on the loop's own ring (aioloop/uring.h), in the same
 * io_uring_enter as its wait; on another fd monitor the context has a
 * ring of its own, whose fd its loop watches for completions.  The
 * context's loop thread throughout.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>

#include "blk.h"
#include "internal.h"

#ifdef AIOL_HAVE_IO_URING
#include <liburing.h>

#include "aioloop/uring.h"

#define RING_ENTRIES 256u

struct blk_ring {
    blk_ctx *c;            /* set at creation */
    struct io_uring ring;
    unsigned inflight;     /* submitted, not reaped */
    bool unsent;           /* SQEs io_uring_submit() has not taken yet */
};

static void prep(struct io_uring_sqe *sqe, void *opaque)
{
    blk_req *r = opaque;

    switch (r->op) {
    case BLK_OP_READ:
        io_uring_prep_readv(sqe, r->fd, r->io, (unsigned)r->nio, r->off);
        break;
    case BLK_OP_WRITE:
        io_uring_prep_writev(sqe, r->fd, r->io, (unsigned)r->nio, r->off);
        break;
    case BLK_OP_FLUSH:
        io_uring_prep_fsync(sqe, r->fd, IORING_FSYNC_DATASYNC);
        break;
    case BLK_OP_DISCARD:
        io_uring_prep_fallocate(sqe, r->fd,
                                FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                                (off_t)r->off, (off_t)r->len);
        break;
    case BLK_OP_NONE:
    case BLK_OP_WRITE_ZEROES: /* (blk-io.c gives them to the pool) */
        aiol__vhost_check(false, "a request the ring does not take");
    }
}

/* A completion on the loop's ring. */
static void loop_done(void *opaque, int res, uint32_t flags)
{
    (void)flags;
    aiol__vblk_io_done(opaque, res);
}

/* Completes what the context's ring has; sends what it did not take. */
static void reap(blk_ring *g, unsigned wait)
{
    struct io_uring_cqe *cqe;

    if (g->unsent || wait > 0) {
        int ret = io_uring_submit_and_wait(&g->ring, wait);

        g->unsent = ret < 0 && io_uring_sq_ready(&g->ring) > 0;
    }
    while (io_uring_peek_cqe(&g->ring, &cqe) == 0) {
        blk_req *r = io_uring_cqe_get_data(cqe);
        int res = cqe->res;

        io_uring_cqe_seen(&g->ring, cqe);
        g->inflight--;
        aiol__vblk_io_done(r, res);
    }
}

static void on_ring(void *opaque)
{
    blk_ring *g = opaque;

    aiol__vblk_batch_begin(g->c);
    reap(g, 0);
    aiol__vblk_batch_end(g->c);
}

/* Busy polling: completions on the context's ring. */
static bool ring_poll(void *opaque)
{
    blk_ring *g = opaque;

    return g->inflight > 0 && io_uring_cq_ready(&g->ring) > 0;
}

static const aiol_fd_ops ring_ops = {
    .read = on_ring, .poll = ring_poll, .poll_ready = on_ring,
};

int aiol__vblk_ring_new(blk_ctx *c, blk_ring **out)
{
    blk_ring *g = calloc(1, sizeof(*g));
    int ret;

    if (g == NULL) {
        return -ENOMEM;
    }
    g->c = c;
    ret = io_uring_queue_init(RING_ENTRIES, &g->ring, 0);
    if (ret == 0) {
        ret = aiol_fd_set_ops(c->loop, g->ring.ring_fd, &ring_ops, g);
        if (ret < 0) {
            io_uring_queue_exit(&g->ring);
        }
    }
    if (ret < 0) {
        free(g);
        return ret;
    }
    *out = g;
    return 0;
}

int aiol__vblk_uring_submit(blk_ctx *c, blk_ring *g, blk_req *r)
{
    struct io_uring_sqe *sqe;

    if (g == NULL) {
        return aiol_uring_submit(c->loop, prep, loop_done, r, NULL);
    }
    if (g->inflight >= RING_ENTRIES || !(sqe = io_uring_get_sqe(&g->ring))) {
        return -EBUSY;
    }
    prep(sqe, r);
    io_uring_sqe_set_data(sqe, r);
    g->inflight++;
    /* (refused: still queued, sent by the next reap; it is ours now) */
    g->unsent = io_uring_submit(&g->ring) < 0;
    return 0;
}

void aiol__vblk_uring_drain(blk_ctx *c, blk_ring *g)
{
    if (g == NULL) {
        /* (-EIO, a broken ring: aiol_loop_free() completes the rest) */
        (void)aiol_uring_drain(c->loop);
        return;
    }
    while (g->inflight > 0) {
        reap(g, 1);
    }
}

void aiol__vblk_ring_free(blk_ring *g)
{
    if (g == NULL) {
        return;
    }
    aiol__vhost_check(g->inflight == 0, "io_uring freed with I/O in flight");
    (void)aiol_fd_remove(g->c->loop, g->ring.ring_fd);
    io_uring_queue_exit(&g->ring);
    free(g);
}

#else /* !AIOL_HAVE_IO_URING */

int aiol__vblk_ring_new(blk_ctx *c, blk_ring **out)
{
    (void)c;
    (void)out;
    return -ENOTSUP;
}

int aiol__vblk_uring_submit(blk_ctx *c, blk_ring *g, blk_req *r)
{
    (void)c;
    (void)g;
    (void)r;
    return -ENOTSUP;
}

void aiol__vblk_uring_drain(blk_ctx *c, blk_ring *g)
{
    (void)c;
    (void)g;
}

void aiol__vblk_ring_free(blk_ring *g)
{
    (void)g;
}

#endif
