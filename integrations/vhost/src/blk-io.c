/* SPDX-License-Identifier: MIT */
/*
 * blk-io.c - the vhost-user-blk device's I/O (blk.h): a parsed request's
 * read, write, flush or discard, run synchronously (preadv, pwritev,
 * fdatasync, fallocate) or submitted on the loop's own io_uring ring
 * (aioloop/uring.h: IORING_OP_READV, WRITEV, FSYNC with DATASYNC,
 * FALLOCATE), in the same io_uring_enter as the loop's wait.
 *
 * A short read or write is continued from where it stopped, on the ring
 * or, if the ring refuses, synchronously; no request is ever lost or left
 * half done.  Loop's thread throughout.
 */
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include <linux/virtio_blk.h>

#include "blk.h"
#include "internal.h"

#ifdef AIOL_HAVE_IO_URING
#include <liburing.h>

#include "aioloop/uring.h"
#endif

/* Drops the first @done bytes of r->iov (a partial transfer). */
static void advance(blk_req *r, uint64_t done)
{
    struct iovec *v = r->iov;
    int n = r->niov;

    r->off += done;
    r->len -= done;
    while (n > 0 && done >= v->iov_len) {
        done -= v->iov_len;
        v++;
        n--;
    }
    if (n > 0) {
        v->iov_base = (uint8_t *)v->iov_base + done;
        v->iov_len -= done;
    }
    if (v != r->iov) {
        for (int i = 0; i < n; i++) {
            r->iov[i] = v[i];
        }
    }
    r->niov = n;
}

/* preadv/pwritev until all of r->len moved; 0 or -errno (-EIO if short). */
static int rw_sync(blk_req *r)
{
    while (r->len > 0) {
        ssize_t got = r->op == BLK_OP_WRITE
                          ? pwritev(r->b->fd, r->iov, r->niov, (off_t)r->off)
                          : preadv(r->b->fd, r->iov, r->niov, (off_t)r->off);

        if (got < 0 && errno == EINTR) {
            continue;
        }
        if (got < 0) {
            return -errno;
        }
        if (got == 0) {
            return -EIO; /* the file shrank under us */
        }
        advance(r, (uint64_t)got);
    }
    return 0;
}

/* The status of a discard that returned @err (0 or -errno). */
static uint8_t discard_status(int err)
{
    if (err == 0) {
        return VIRTIO_BLK_S_OK;
    }
    return err == -EOPNOTSUPP ? VIRTIO_BLK_S_UNSUPP : VIRTIO_BLK_S_IOERR;
}

uint8_t aiol__vblk_io_sync(blk_req *r)
{
    int fd = r->b->fd;

    switch (r->op) {
    case BLK_OP_READ:
    case BLK_OP_WRITE:
        return rw_sync(r) == 0 ? VIRTIO_BLK_S_OK : VIRTIO_BLK_S_IOERR;
    case BLK_OP_FLUSH:
        return fdatasync(fd) == 0 ? VIRTIO_BLK_S_OK : VIRTIO_BLK_S_IOERR;
    case BLK_OP_DISCARD:
        if (r->len == 0) {
            return VIRTIO_BLK_S_OK;
        }
        return discard_status(
            fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                      (off_t)r->off, (off_t)r->len) == 0 ? 0 : -errno);
    case BLK_OP_NONE:
        break;
    }
    return r->status;
}

#ifdef AIOL_HAVE_IO_URING

static void prep(struct io_uring_sqe *sqe, void *opaque)
{
    blk_req *r = opaque;
    int fd = r->b->fd;

    switch (r->op) {
    case BLK_OP_READ:
        io_uring_prep_readv(sqe, fd, r->iov, (unsigned)r->niov, r->off);
        break;
    case BLK_OP_WRITE:
        io_uring_prep_writev(sqe, fd, r->iov, (unsigned)r->niov, r->off);
        break;
    case BLK_OP_FLUSH:
        io_uring_prep_fsync(sqe, fd, IORING_FSYNC_DATASYNC);
        break;
    case BLK_OP_DISCARD:
        io_uring_prep_fallocate(sqe, fd,
                                FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                                (off_t)r->off, (off_t)r->len);
        break;
    case BLK_OP_NONE:
        aiol__vhost_check(false, "a request with no I/O was submitted");
    }
}

static void done(void *opaque, int res, uint32_t flags)
{
    blk_req *r = opaque;
    aiol_vhost_blk *b = r->b;
    uint8_t status = VIRTIO_BLK_S_OK;

    (void)flags;
    aiol__vhost_check(b->inflight > 0, "a completion with none in flight");
    b->inflight--;
    switch (r->op) {
    case BLK_OP_READ:
    case BLK_OP_WRITE:
        if (res > 0 && (uint64_t)res >= r->len) {
            break;
        }
        if (res == 0 || (res < 0 && res != -EINTR && res != -EAGAIN)) {
            status = VIRTIO_BLK_S_IOERR; /* (0: the file shrank) */
            break;
        }
        if (res > 0) {
            advance(r, (uint64_t)res); /* short: the rest */
        }
        if (aiol__vblk_io_submit(r) == 0) {
            return; /* on the ring again */
        }
        status = aiol__vblk_io_sync(r);
        break;
    case BLK_OP_FLUSH:
        status = res == 0 ? VIRTIO_BLK_S_OK : VIRTIO_BLK_S_IOERR;
        break;
    case BLK_OP_DISCARD:
        status = discard_status(res);
        break;
    case BLK_OP_NONE:
        break;
    }
    aiol__vblk_finish(r, status);
}

int aiol__vblk_io_submit(blk_req *r)
{
    int ret;

    if (!r->b->uring || (r->op == BLK_OP_DISCARD && r->len == 0)) {
        return -ENOTSUP;
    }
    ret = aiol_uring_submit(r->b->loop, prep, done, r, NULL);
    if (ret == 0) {
        r->b->inflight++;
    }
    return ret;
}

#else /* !AIOL_HAVE_IO_URING */

int aiol__vblk_io_submit(blk_req *r)
{
    (void)r;
    return -ENOTSUP;
}

#endif
