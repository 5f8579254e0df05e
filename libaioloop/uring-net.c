/* SPDX-License-Identifier: MIT */
/*
 * uring-net.c - completion-based socket I/O on the loop's ring
 * (aioloop/uring.h): provided-buffer groups, multishot receives and whole
 * sends, built on the request engine (uring-req.c), which is all it
 * calls.  uring.c binds the ring before each public call.
 *
 * Buffer groups.  A group is COUNT buffers of SIZE bytes in one block,
 * and a buffer ring (io_uring_buf_ring, page-aligned memory of our own)
 * through which the kernel takes them, registered under a group id on the
 * loop's ring.  A buffer the kernel filled goes back to the ring right
 * after the receive callback that was given it returns, so a callback
 * never owns one past its return.  When the ring is rebuilt (shared, for
 * a new polling thread) no receive is in flight, so every buffer is back:
 * each group's ring is reset and registered on the new ring
 * (aiol__uring_bufs_move()).
 *
 * Receives.  One multishot IORING_OP_RECV with IOSQE_BUFFER_SELECT per
 * started receive: each CQE carries a buffer and its byte count.  The
 * kernel ends a multishot on its own now and then (no buffer free:
 * -ENOBUFS; a CQ overflow): as long as the receive is not stopped and
 * the result was data or -ENOBUFS, it is armed again after its buffers
 * went back, so the caller sees one stream of data and a single final
 * callback: 0 at end of stream, -ECANCELED once stopped, or the error.
 *
 * Sends.  aiol_uring_send_submit() submits the rest again after a short send,
 * and completes once, with the whole length or the error.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>

#include "fdmon.h"
#include "uring-priv.h"

#define BUFS_MAX_COUNT 32768u /* the kernel's limit on a buffer ring */

struct aiol_uring_bufs {
    aiol_loop *loop;             /* immutable */
    struct io_uring_buf_ring *br; /* mmap'd, count entries; polling thread */
    size_t br_bytes;             /* immutable */
    unsigned char *mem;          /* count * size bytes; immutable */
    unsigned count, size;        /* immutable */
    uint16_t bgid;               /* group id on the loop's ring; immutable */
    unsigned users;              /* receives started on it; polling thread */
    AIOL_LIST_ENTRY(aiol_uring_bufs) link; /* s->bufs; polling thread */
};

struct aiol_uring_recv {
    aiol_loop *loop;        /* immutable */
    int fd;                 /* immutable */
    aiol_uring_bufs *bufs;  /* immutable */
    aiol_recv_fn *cb;       /* immutable */
    void *opaque;           /* immutable */
    aiol_uring_req *req;    /* the multishot in flight; polling thread */
    bool stopping;          /* aiol_uring_recv_cancel() ran; polling thread */
};

/* One send: the rest is submitted again after a short send. */
typedef struct send_op {
    int fd;
    const unsigned char *buf;
    size_t len, done;
    aiol_cqe_fn *cb;
    void *opaque;
    aiol_loop *loop;
} send_op;

static aiol__uring_state *state_of(aiol_loop *loop)
{
    return loop->fdmon_state;
}

/* Puts every buffer of @b on its (reset) ring. */
static void bufs_fill(aiol_uring_bufs *b)
{
    int mask = io_uring_buf_ring_mask(b->count);

    io_uring_buf_ring_init(b->br);
    for (unsigned i = 0; i < b->count; i++) {
        io_uring_buf_ring_add(b->br, b->mem + (size_t)i * b->size, b->size,
                              (unsigned short)i, mask, (int)i);
    }
    io_uring_buf_ring_advance(b->br, (int)b->count);
}

static int bufs_register(aiol_uring_bufs *b, struct io_uring *ring)
{
    struct io_uring_buf_reg reg;

    memset(&reg, 0, sizeof(reg));
    reg.ring_addr = (uint64_t)(uintptr_t)b->br;
    reg.ring_entries = b->count;
    reg.bgid = b->bgid;
    return io_uring_register_buf_ring(ring, &reg, 0);
}

static bool bgid_used(aiol__uring_state *s, uint16_t bgid)
{
    aiol_uring_bufs *b;

    AIOL_LIST_FOREACH(b, &s->bufs, link) {
        if (b->bgid == bgid) {
            return true;
        }
    }
    return false;
}

static void bufs_release(aiol_uring_bufs *b)
{
    munmap(b->br, b->br_bytes);
    free(b->mem);
    free(b);
}

int aiol__uring_bufs_new(aiol_loop *loop, unsigned count, unsigned size,
                         aiol_uring_bufs **out)
{
    aiol__uring_state *s = state_of(loop);
    aiol_uring_bufs *b;
    int ret;

    if (count == 0 || count > BUFS_MAX_COUNT || (count & (count - 1)) != 0 ||
        size == 0 || size > (1u << 30)) {
        return -EINVAL;
    }
    b = calloc(1, sizeof(*b));
    if (b == NULL) {
        return -ENOMEM;
    }
    b->loop = loop;
    b->count = count;
    b->size = size;
    b->br_bytes = count * sizeof(struct io_uring_buf);
    b->br = mmap(NULL, b->br_bytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    b->mem = malloc((size_t)count * size);
    if (b->br == MAP_FAILED || b->mem == NULL) {
        if (b->br == MAP_FAILED) {
            b->br = NULL;
        }
        ret = -ENOMEM;
        goto fail;
    }
    do {
        b->bgid = s->next_bgid++;
    } while (bgid_used(s, b->bgid));
    bufs_fill(b);
    ret = bufs_register(b, &s->ring); /* (a bound ring: its owner's, bound) */
    if (ret < 0) {
        goto fail;
    }
    AIOL_LIST_INSERT_HEAD(&s->bufs, b, link);
    *out = b;
    return 0;
fail:
    if (b->br != NULL) {
        munmap(b->br, b->br_bytes);
    }
    free(b->mem);
    free(b);
    return ret;
}

aiol_loop *aiol__uring_bufs_loop_get(const aiol_uring_bufs *b)
{
    return b->loop;
}

void aiol__uring_bufs_free(aiol_uring_bufs *b)
{
    aiol__uring_state *s = state_of(b->loop);

    aiol__check(b->users == 0,
                "a buffer group freed while a receive still uses it");
    AIOL_LIST_REMOVE(b, link);
    (void)io_uring_unregister_buf_ring(&s->ring, b->bgid);
    bufs_release(b);
}

int aiol__uring_bufs_move(aiol__uring_state *s, struct io_uring *ring)
{
    aiol_uring_bufs *b;

    AIOL_LIST_FOREACH(b, &s->bufs, link) {
        int ret;

        /* (a fresh ring has no such group: the kernel says so, harmlessly) */
        (void)io_uring_unregister_buf_ring(ring, b->bgid);
        bufs_fill(b); /* nothing in flight: every buffer is back */
        ret = bufs_register(b, ring);
        if (ret < 0) {
            return ret;
        }
    }
    return 0;
}

void aiol__uring_bufs_drop_all(aiol__uring_state *s)
{
    aiol_uring_bufs *b;

    while ((b = AIOL_LIST_FIRST(&s->bufs)) != NULL) {
        AIOL_LIST_REMOVE(b, link);
        bufs_release(b);
    }
}

/* ---------------------------------------------------------- receives */

static void recv_prep(struct io_uring_sqe *sqe, void *opaque)
{
    aiol_uring_recv *r = opaque;

    io_uring_prep_recv_multishot(sqe, r->fd, NULL, 0, 0);
    sqe->flags |= IOSQE_BUFFER_SELECT;
    sqe->buf_group = r->bufs->bgid;
}

static void recv_done(void *opaque, int res, uint32_t flags);

static int recv_arm(aiol_uring_recv *r)
{
    return aiol__uring_submit(r->loop, recv_prep, recv_done, r, &r->req);
}

/* The receive is over: its final callback, then it goes. */
static void recv_end(aiol_uring_recv *r, int res)
{
    aiol_recv_fn *cb = r->cb;
    void *opaque = r->opaque;

    r->bufs->users--;
    free(r);
    cb(opaque, res, NULL);
}

static void recv_done(void *opaque, int res, uint32_t flags)
{
    aiol_uring_recv *r = opaque;
    bool more = (flags & IORING_CQE_F_MORE) != 0;

    if (flags & IORING_CQE_F_BUFFER) {
        aiol_uring_bufs *b = r->bufs;
        unsigned bid = flags >> IORING_CQE_BUFFER_SHIFT;

        aiol__check(bid < b->count, "a buffer id outside its group");
        if (res > 0) {
            r->cb(r->opaque, res, b->mem + (size_t)bid * b->size);
        }
        /* back to the kernel once the callback is done with it */
        io_uring_buf_ring_add(b->br, b->mem + (size_t)bid * b->size, b->size,
                              (unsigned short)bid,
                              io_uring_buf_ring_mask(b->count), 0);
        io_uring_buf_ring_advance(b->br, 1);
    } else if (res > 0) {
        res = -EIO; /* data without a buffer: not a receive of ours */
    }
    if (more) {
        return;
    }
    r->req = NULL;
    /* data or no free buffer: the kernel ended it, not the peer */
    if (res > 0 || res == -ENOBUFS) {
        res = r->stopping ? -ECANCELED : recv_arm(r);
        if (res == 0) {
            return;
        }
    }
    recv_end(r, res);
}

int aiol__uring_recv_submit(aiol_loop *loop, int fd, aiol_uring_bufs *bufs,
                           aiol_recv_fn *cb, void *opaque,
                           aiol_uring_recv **out)
{
    aiol_uring_recv *r;
    int ret;

    aiol__check(bufs->loop == loop, "a buffer group of another loop");
    r = calloc(1, sizeof(*r));
    if (r == NULL) {
        return -ENOMEM;
    }
    r->loop = loop;
    r->fd = fd;
    r->bufs = bufs;
    r->cb = cb;
    r->opaque = opaque;
    ret = recv_arm(r);
    if (ret < 0) {
        free(r);
        return ret;
    }
    bufs->users++;
    if (out != NULL) {
        *out = r;
    }
    return 0;
}

int aiol__uring_recv_cancel(aiol_uring_recv *r)
{
    if (r->stopping) {
        return 0;
    }
    r->stopping = true;
    if (r->req != NULL) {
        aiol__uring_cancel(r->req);
    }
    return 0;
}

/* ------------------------------------------------------------- sends */

static void send_prep(struct io_uring_sqe *sqe, void *opaque)
{
    send_op *op = opaque;

    io_uring_prep_send(sqe, op->fd, op->buf + op->done, op->len - op->done,
                       MSG_NOSIGNAL);
}

static void send_done(void *opaque, int res, uint32_t flags)
{
    send_op *op = opaque;
    int ret;

    (void)flags;
    if (res > 0 && (op->done += (size_t)res) < op->len) {
        ret = aiol__uring_submit(op->loop, send_prep, send_done, op, NULL);
        if (ret == 0) {
            return; /* a short send: the rest */
        }
        res = ret;
    } else if (res == 0 && op->len > 0) {
        res = -EPIPE; /* nothing taken: the peer is gone */
    }
    {
        aiol_cqe_fn *cb = op->cb;
        void *cb_opaque = op->opaque;
        int total = res < 0 ? res : (int)op->len;

        free(op);
        cb(cb_opaque, total, 0);
    }
}

int aiol__uring_send_submit(aiol_loop *loop, int fd, const void *buf, size_t len,
                     aiol_cqe_fn *done, void *opaque)
{
    send_op *op;
    int ret;

    if (len > (size_t)INT32_MAX) {
        return -EINVAL;
    }
    op = malloc(sizeof(*op));
    if (op == NULL) {
        return -ENOMEM;
    }
    *op = (send_op){ .fd = fd, .buf = buf, .len = len, .cb = done,
                     .opaque = opaque, .loop = loop };
    ret = aiol__uring_submit(loop, send_prep, send_done, op, NULL);
    if (ret < 0) {
        free(op);
    }
    return ret;
}
