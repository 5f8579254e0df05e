/* SPDX-License-Identifier: MIT */
/*
 * blk-io.c - the vhost-user-blk device's I/O (blk.h): a parsed request's
 * read, write, flush, discard or write zeroes, started on its context's
 * engine and completed on that context's loop thread.
 *
 * Engines, as qemu-storage-daemon's aio= values: io_uring (blk-uring.c:
 * the loop's own ring when the context's loop runs io_uring, in the same
 * io_uring_enter as its wait, or a ring of the context's), native
 * (blk-aio.c: Linux AIO, reads and writes of an O_DIRECT image) and
 * threads (blk-pool.c).  The device chooses the kind once; each context
 * runs its own engine of that kind, and its own worker pool.  What an
 * engine refuses (a full ring, a flush on Linux AIO) goes to the pool,
 * so no request runs on a loop's thread unless no worker thread can be
 * started at all.
 *
 * O_DIRECT: a request whose offset or length is not aligned as the file
 * needs goes to the buffered descriptor of the same file; one whose guest
 * buffers are not aligned goes through an aligned bounce buffer.
 *
 * The page cache first: on the threads engine a buffered read or write is
 * tried on the context's loop thread with RWF_NOWAIT, which never blocks (the
 * kernel answers EAGAIN instead of waiting for the disk, a lock or
 * memory), and only what that does not finish goes to a worker.  A hit
 * costs one syscall instead of two thread hand-offs; a run of misses (a
 * cold cache) stops the tries for a while.
 *
 * A short read or write is continued from where it stopped, on the same
 * engine; no request is ever lost or left half done.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <linux/stat.h>
#include <linux/virtio_blk.h>

#include "blk.h"
#include "internal.h"

/* Writes zeros over @r's range: deallocating it where the guest allows
 * (unmap), else allocated zeros; where the file system or device has
 * neither, ordinary writes of zeros.  0 or -errno. */
static int write_zeroes(blk_req *r)
{
    static const uint8_t zeros[64 * 1024] __attribute__((aligned(4096)));
    const aiol_vhost_blk *b = r->ctx->b;
    int fd = r->fd;

    if (r->unmap && fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                              (off_t)r->off, (off_t)r->len) == 0) {
        return 0;
    }
    if (fallocate(fd, FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE,
                  (off_t)r->off, (off_t)r->len) == 0) {
        return 0;
    }
    if (errno != EOPNOTSUPP && errno != EINVAL && errno != ENODEV) {
        return -errno;
    }
    /* (an O_DIRECT image: zeros aligned as the buffer is, else through
       the buffered descriptor) */
    if (b->fd_buffered >= 0 &&
        (r->off % b->off_align != 0 || r->len % b->off_align != 0 ||
         b->mem_align > 4096 || b->off_align > sizeof(zeros))) {
        fd = b->fd_buffered;
    }
    while (r->len > 0) {
        size_t n = r->len < sizeof(zeros) ? (size_t)r->len : sizeof(zeros);
        ssize_t got = pwrite(fd, zeros, n, (off_t)r->off);

        if (got < 0 && errno == EINTR) {
            continue;
        }
        if (got <= 0) {
            return got < 0 ? -errno : -EIO;
        }
        r->off += (uint64_t)got;
        r->len -= (uint64_t)got;
    }
    return 0;
}

/* Moves @r past the first @done bytes of its I/O (a partial transfer). */
static void advance(blk_req *r, uint64_t done)
{
    struct iovec *v = r->io;
    int n = r->nio;

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
    r->io = v;
    r->nio = n;
}

int aiol__vblk_io_run(blk_req *r)
{
    switch (r->op) {
    case BLK_OP_READ:
    case BLK_OP_WRITE:
        while (r->len > 0) {
            ssize_t got = r->op == BLK_OP_WRITE
                              ? pwritev(r->fd, r->io, r->nio, (off_t)r->off)
                              : preadv(r->fd, r->io, r->nio, (off_t)r->off);

            if (got < 0 && errno == EINTR) {
                continue;
            }
            if (got <= 0) {
                return got < 0 ? -errno : -EIO; /* (0: the file shrank) */
            }
            advance(r, (uint64_t)got);
        }
        return 0;
    case BLK_OP_FLUSH:
        /* (the inode's: covers writes through either descriptor) */
        return fdatasync(r->fd) == 0 ? 0 : -errno;
    case BLK_OP_DISCARD:
        return fallocate(r->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                         (off_t)r->off, (off_t)r->len) == 0 ? 0 : -errno;
    case BLK_OP_WRITE_ZEROES:
        return write_zeroes(r);
    case BLK_OP_NONE:
        break;
    }
    aiol__vhost_check(false, "a request with no I/O was run");
    return -EINVAL;
}

/* Copies between a bounce buffer and the guest's iovecs (reads: out). */
static void bounce_copy(blk_req *r, bool to_guest)
{
    uint8_t *p = r->bounce;

    for (int i = 0; i < r->niov; i++) {
        if (to_guest) {
            memcpy(r->iov[i].iov_base, p, r->iov[i].iov_len);
        } else {
            memcpy(p, r->iov[i].iov_base, r->iov[i].iov_len);
        }
        p += r->iov[i].iov_len;
    }
}

/* Ends @r's I/O with @err (0 or -errno) and finishes it. */
static void end(blk_req *r, int err)
{
    blk_ctx *c = r->ctx;
    uint8_t status = err == 0 ? VIRTIO_BLK_S_OK : VIRTIO_BLK_S_IOERR;

    if (r->op == BLK_OP_DISCARD && err == -EOPNOTSUPP) {
        status = VIRTIO_BLK_S_UNSUPP;
    }
    if (r->bounce != NULL) {
        if (err == 0 && r->op == BLK_OP_READ) {
            bounce_copy(r, true);
        }
        free(r->bounce);
        r->bounce = NULL;
    }
    aiol__vhost_check(c->inflight > 0, "a completion with none in flight");
    c->inflight--;
    aiol__vblk_finish(r, status);
}

/* Hands @r to its context's engine, or to the context's pool if the
 * engine refuses it. */
static void submit(blk_req *r)
{
    blk_ctx *c = r->ctx;
    const aiol_vhost_blk *b = c->b;
    bool rw = r->op == BLK_OP_READ || r->op == BLK_OP_WRITE;

    /* (a write zeroes may fall back to writes: the pool runs the whole
       sequence; io_uring would run its fallocate on a worker anyway) */
    if (b->aio == AIOL_VHOST_BLK_AIO_IO_URING &&
        r->op != BLK_OP_WRITE_ZEROES &&
        aiol__vblk_uring_submit(c, c->ring, r) == 0) {
        c->st.on_ring++;
        return;
    }
    /* (Linux AIO is asynchronous only on the O_DIRECT descriptor) */
    if (b->aio == AIOL_VHOST_BLK_AIO_NATIVE && rw && r->fd == b->fd &&
        aiol__vblk_aio_submit(c->aioctx, r) == 0) {
        c->st.on_aio++;
        return;
    }
    c->st.on_pool++;
    aiol__vblk_pool_submit(c->pool, r);
}

void aiol__vblk_io_done(blk_req *r, int res)
{
    bool rw = r->op == BLK_OP_READ || r->op == BLK_OP_WRITE;

    if (rw && res >= 0 && (uint64_t)res < r->len) {
        if (res == 0) {
            end(r, -EIO); /* the file shrank under us */
            return;
        }
        advance(r, (uint64_t)res); /* short: the rest */
        submit(r);
        return;
    }
    if (res == -EINTR || res == -EAGAIN) {
        submit(r); /* (nothing was moved) */
        return;
    }
    end(r, res < 0 ? res : 0);
}

/* Whether every buffer of @r's data is aligned to @a. */
static bool iov_aligned(const blk_req *r, unsigned a)
{
    for (int i = 0; i < r->niov; i++) {
        if ((uintptr_t)r->iov[i].iov_base % a != 0 ||
            r->iov[i].iov_len % a != 0) {
            return false;
        }
    }
    return true;
}

/* For an O_DIRECT image: the descriptor and buffers @r's I/O uses. */
static void direct_plan(blk_req *r)
{
    const aiol_vhost_blk *b = r->ctx->b;
    aiol_vhost_blk_stats *st = &r->ctx->st;

    if (r->off % b->off_align != 0 || r->len % b->off_align != 0) {
        r->fd = b->fd_buffered;
        st->buffered++;
        return;
    }
    if (iov_aligned(r, b->mem_align)) {
        return;
    }
    if (posix_memalign(&r->bounce, b->mem_align, (size_t)r->len) != 0) {
        r->bounce = NULL;
        r->fd = b->fd_buffered; /* (no memory: the path that needs none) */
        st->buffered++;
        return;
    }
    if (r->op == BLK_OP_WRITE) {
        bounce_copy(r, false);
    }
    r->bounce_iov = (struct iovec){ r->bounce, (size_t)r->len };
    r->io = &r->bounce_iov;
    r->nio = 1;
    st->bounced++;
}

/* Misses in a row after which the page cache is not tried for a while,
 * and for how many requests. */
#define NOWAIT_MISSES 64u
#define NOWAIT_PAUSE 256u

/* Tries @r (a buffered read or write) on the page cache, without
 * blocking; true when that finished it. */
static bool try_nowait(blk_req *r)
{
    blk_ctx *c = r->ctx;
    bool write = r->op == BLK_OP_WRITE;
    ssize_t got;

    if (c->nowait_pause > 0) {
        c->nowait_pause--;
        return false;
    }
    if (write && !c->nowait_writes) {
        return false;
    }
    got = write ? pwritev2(r->fd, r->io, r->nio, (off_t)r->off, RWF_NOWAIT)
                : preadv2(r->fd, r->io, r->nio, (off_t)r->off, RWF_NOWAIT);
    if (got < 0 && errno == EOPNOTSUPP && write) {
        c->nowait_writes = false; /* (the file system has no such writes) */
    }
    if (got <= 0) {
        if (++c->nowait_misses >= NOWAIT_MISSES) {
            c->nowait_misses = 0;
            c->nowait_pause = NOWAIT_PAUSE;
        }
        return false; /* (an error too: the worker meets it again) */
    }
    c->nowait_misses = 0;
    c->st.nowait++;
    if ((uint64_t)got == r->len) {
        end(r, 0);
        return true;
    }
    advance(r, (uint64_t)got); /* the rest is not in the cache */
    return false;
}

void aiol__vblk_io_start(blk_req *r)
{
    const aiol_vhost_blk *b = r->ctx->b;

    r->fd = b->fd;
    r->io = r->iov;
    r->nio = r->niov;
    r->bounce = NULL;
    r->ctx->inflight++;
    if ((r->op == BLK_OP_DISCARD || r->op == BLK_OP_WRITE_ZEROES) &&
        r->len == 0) {
        end(r, 0);
        return;
    }
    if (b->fd_buffered >= 0 &&
        (r->op == BLK_OP_READ || r->op == BLK_OP_WRITE)) {
        direct_plan(r);
    }
    if (b->aio == AIOL_VHOST_BLK_AIO_THREADS &&
        (r->op == BLK_OP_READ || r->op == BLK_OP_WRITE) &&
        (b->fd_buffered < 0 || r->fd == b->fd_buffered) && try_nowait(r)) {
        return;
    }
    submit(r);
}

void aiol__vblk_io_drain(blk_ctx *c)
{
    /* A short transfer resubmits, possibly on another engine: repeat,
     * while that helps (a broken loop ring: aiol_loop_free() completes
     * the rest). */
    for (unsigned before = 0; c->inflight > 0 && c->inflight != before;) {
        before = c->inflight;
        if (c->b->aio == AIOL_VHOST_BLK_AIO_IO_URING) {
            aiol__vblk_uring_drain(c, c->ring);
        }
        if (c->aioctx != NULL) {
            aiol__vblk_aio_drain(c->aioctx);
        }
        aiol__vblk_pool_drain(c->pool);
    }
}

/* ------------------------------------------------------------ set-up */

/*
 * An O_DIRECT image's alignments (statx STATX_DIOALIGN, else 4096) and
 * its buffered twin, opened through /proc/self/fd.
 */
static int direct_init(aiol_vhost_blk *b, int flags)
{
    struct statx stx;
    char path[64];

    memset(&stx, 0, sizeof(stx));
    b->mem_align = b->off_align = 4096;
    if (syscall(SYS_statx, b->fd, "", AT_EMPTY_PATH, STATX_DIOALIGN,
                &stx) == 0 &&
        (stx.stx_mask & STATX_DIOALIGN) && stx.stx_dio_mem_align != 0) {
        b->mem_align = stx.stx_dio_mem_align;
        b->off_align = stx.stx_dio_offset_align;
    }
    /* (the guest sees 512-byte sectors: a larger alignment still works,
       through the buffered descriptor) */
    snprintf(path, sizeof(path), "/proc/self/fd/%d", b->fd);
    b->fd_buffered = open(path, (flags & O_ACCMODE) | O_CLOEXEC);
    return b->fd_buffered < 0 ? -errno : 0;
}

/* Whether @loop waits on io_uring (whose ring takes I/O too). */
static bool runs_io_uring(const aiol_loop *loop)
{
    return strcmp(aiol_loop_fdmon_get(loop), "io_uring") == 0;
}

int aiol__vblk_image_init(aiol_vhost_blk *b, aiol_loop *loop,
                          aiol_vhost_blk_aio aio)
{
    int flags = fcntl(b->fd, F_GETFL);
    bool direct = flags >= 0 && (flags & O_DIRECT);

    b->fd_buffered = -1;
    b->mem_align = b->off_align = 1;
    if (aio == AIOL_VHOST_BLK_AIO_AUTO) {
        aio = runs_io_uring(loop) ? AIOL_VHOST_BLK_AIO_IO_URING
              : direct            ? AIOL_VHOST_BLK_AIO_NATIVE
                                  : AIOL_VHOST_BLK_AIO_THREADS;
    }
    if (aio == AIOL_VHOST_BLK_AIO_NATIVE && !direct) {
        return -EINVAL; /* (aio=native needs cache.direct=on) */
    }
    b->aio = aio;
    return direct ? direct_init(b, flags) : 0;
}

void aiol__vblk_image_fini(aiol_vhost_blk *b)
{
    if (b->fd_buffered >= 0) {
        close(b->fd_buffered);
        b->fd_buffered = -1;
    }
}

int aiol__vblk_io_init(blk_ctx *c, aiol_vhost_blk_aio aio)
{
    int r = aiol__vblk_pool_new(c, c->b->max_workers, &c->pool);

    if (r == 0 && aio == AIOL_VHOST_BLK_AIO_NATIVE) {
        r = aiol__vblk_aio_new(c, &c->aioctx);
    }
    if (r == 0 && aio == AIOL_VHOST_BLK_AIO_IO_URING) {
        c->loop_ring = runs_io_uring(c->loop);
        r = c->loop_ring ? 0 : aiol__vblk_ring_new(c, &c->ring);
    }
    if (r < 0) {
        aiol__vblk_io_fini(c);
    }
    return r;
}

void aiol__vblk_io_fini(blk_ctx *c)
{
    aiol__vhost_check(c->inflight == 0, "requests outlive their context");
    aiol__vblk_ring_free(c->ring);
    c->ring = NULL;
    aiol__vblk_aio_free(c->aioctx);
    c->aioctx = NULL;
    aiol__vblk_pool_free(c->pool);
    c->pool = NULL;
}
