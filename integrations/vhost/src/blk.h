/* SPDX-License-Identifier: MIT */
/*
 * blk.h - inside the vhost-user-blk device: blk.c parses requests and is
 * the device; blk-io.c starts and completes their I/O on one of the
 * engines: blk-uring.c (io_uring, the loop's ring or the context's),
 * blk-aio.c (Linux AIO) and blk-pool.c (worker threads, which also take
 * whatever another engine cannot).
 *
 * The device (struct aiol_vhost_blk) holds what every thread reads: the
 * image and the configuration.  The state of serving queues is a blk_ctx,
 * one per loop that serves some of them, with engines of its own on that
 * loop; each queue maps to one context.
 */
#ifndef AIOLOOP_VHOST_BLK_INTERNAL_H
#define AIOLOOP_VHOST_BLK_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include <linux/aio_abi.h>

#include "aioloop/bh.h"
#include "aioloop/vhost-blk.h"

#define BLK_SECTOR 512u
#define BLK_HDR_LEN 16u   /* struct virtio_blk_outhdr */
#define BLK_ID_LEN 20u    /* VIRTIO_BLK_ID_BYTES */
#define BLK_SEG_MAX 126u  /* data segments a request may have (config) */
/* sectors a discard or write-zeroes may cover (config; as much as
   qemu-storage-daemon's vhost-user-blk export allows) */
#define BLK_MAX_DZ_SECTORS 32768u
#define BLK_MAX_QUEUES 64u /* queues, and contexts, a device has at most */

typedef enum blk_op {
    BLK_OP_NONE,      /* nothing to run: the status is decided */
    BLK_OP_READ,
    BLK_OP_WRITE,
    BLK_OP_FLUSH,
    BLK_OP_DISCARD,
    BLK_OP_WRITE_ZEROES,
} blk_op;

typedef struct blk_ctx blk_ctx;
typedef struct blk_req blk_req;
typedef struct blk_pool blk_pool;
typedef struct blk_aio blk_aio;
typedef struct blk_ring blk_ring;

/* One request, from its pop to its push.  Its context's loop thread,
 * except that a worker owns it (and only it) while it runs in the pool. */
struct blk_req {
    blk_ctx *ctx;             /* its queue's context (the device: ctx->b) */
    aiol_vhost_vq *vq;
    aiol_vhost_elem elem;     /* its head and lengths; pushed at the end */
    blk_op op;
    uint8_t status;           /* op NONE: the answer */
    uint8_t *status_p;        /* the chain's last writable byte; NULL: none */
    uint32_t written;         /* bytes written into the chain, status aside */
    uint64_t off, len;        /* bytes: read, write, discard, write
                                 zeroes; advance() moves them past what
                                 is done */
    bool unmap;               /* write zeroes: the range may be deallocated
                                 (VIRTIO_BLK_WRITE_ZEROES_FLAG_UNMAP) */
    int fd;                   /* the descriptor its I/O goes to */
    int niov;                 /* data iovecs (read, write) in iov */
    struct iovec *io;         /* what the I/O moves: iov, or &bounce_iov */
    int nio;                  /* entries of io */
    void *bounce;             /* an aligned copy of the data, or NULL */
    struct iovec bounce_iov;
    int res;                  /* the pool's result: 0 or -errno */
    struct iocb iocb;         /* Linux AIO's control block */
    struct iovec iov[BLK_SEG_MAX + 2];
    blk_req *next;            /* free list, pool queue or completions */
};

/* The device: set up by aiol_vhost_blk_new() on the device's loop
 * thread, then only read, from any context's loop thread, until
 * aiol_vhost_blk_free(). */
struct aiol_vhost_blk {
    aiol_vhost_dev *dev;
    int fd;                    /* the image; not ours to close */
    int fd_buffered;           /* O_DIRECT image: the same file buffered
                                  (ours), else -1 */
    unsigned mem_align;        /* O_DIRECT: buffer alignment, else 1 */
    unsigned off_align;        /* O_DIRECT: offset and length alignment */
    uint64_t sectors;          /* capacity */
    unsigned block_size;       /* logical block size (config blk_size) */
    bool read_only;
    unsigned num_queues;
    char serial[BLK_ID_LEN];
    aiol_vhost_blk_aio aio;    /* the engine: never AUTO */
    unsigned max_workers;      /* of each context's pool; 0: the default */
    blk_ctx *ctx[BLK_MAX_QUEUES]; /* the contexts, one per serving loop */
    unsigned nctx;
    blk_ctx *qctx[BLK_MAX_QUEUES]; /* queue index -> its context */
};

/* One loop's share of the device: the queues it serves, their requests
 * and the engines that run them, on that loop. */
struct blk_ctx {
    aiol_vhost_blk *b;         /* the device; set at creation */
    aiol_loop *loop;           /* the loop whose thread owns the context;
                                  set at creation */
    bool loop_ring;            /* io_uring: the loop's own ring; set at
                                  creation */
    blk_ring *ring;            /* io_uring on a ring of the context's, or
                                  NULL; the context's loop thread */
    blk_aio *aioctx;           /* Linux AIO, or NULL; the context's loop
                                  thread */
    blk_pool *pool;            /* worker threads (always); the context's
                                  loop thread */
    unsigned inflight;         /* requests started, not finished; the
                                  context's loop thread */
    blk_req *free_reqs;        /* finished requests for reuse; the
                                  context's loop thread */
    uint64_t starved;          /* bit i: queue i stopped popping for want
                                  of memory; a completion retries it; the
                                  context's loop thread */
    aiol_bh *notify_bh;        /* notifies what completions pushed; runs
                                  on the context's loop thread */
    unsigned batch;            /* >0: an engine is completing a batch, and
                                  notifies at its end; the context's loop
                                  thread */
    uint64_t notify_due;       /* bit i: queue i pushed since it notified;
                                  the context's loop thread */
    bool nowait_writes;        /* pwritev2(RWF_NOWAIT) may work here; the
                                  context's loop thread */
    unsigned nowait_misses;    /* page-cache tries missed in a row; the
                                  context's loop thread */
    unsigned nowait_pause;     /* requests left before the next try; the
                                  context's loop thread */
    struct iovec *iov;         /* a popped chain: AIOL__VHOST_MAX_RING; the
                                  context's loop thread */
    aiol_vhost_blk_stats st;   /* the context's loop thread */
};

/* ------------------------------------------------- blk.c: contexts */

/* Creates a context serving queues on @loop: its free requests, engines
 * and notify bottom half (the device's image and engine kind set up
 * already).  On @loop's thread; 0 or -errno, having freed what it made. */
int aiol__vblk_ctx_new(aiol_vhost_blk *b, aiol_loop *loop, blk_ctx **out);

/* Waits for @c's requests in flight, then frees it and its engines.  On
 * its loop's thread. */
void aiol__vblk_ctx_free(blk_ctx *c);

/* ---------------------------------------------- blk-io.c: the I/O */

/* Device-wide, once: resolves @aio into b->aio (AUTO: io_uring when
 * @loop runs it, else native for an O_DIRECT image, else threads) and
 * for an O_DIRECT image finds its alignments and opens it buffered.
 * 0; -EINVAL for native without O_DIRECT; -errno. */
int aiol__vblk_image_init(aiol_vhost_blk *b, aiol_loop *loop,
                          aiol_vhost_blk_aio aio);

/* Closes what aiol__vblk_image_init() opened. */
void aiol__vblk_image_fini(aiol_vhost_blk *b);

/* Starts @c's engines for @aio (never AUTO) on its loop; 0 or -errno. */
int aiol__vblk_io_init(blk_ctx *c, aiol_vhost_blk_aio aio);

/* Stops @c's engines (nothing in flight). */
void aiol__vblk_io_fini(blk_ctx *c);

/* Starts @r's I/O (op READ..WRITE_ZEROES); aiol__vblk_finish() runs
 * when it completes, from this call at the earliest. */
void aiol__vblk_io_start(blk_req *r);

/* Waits until nothing of @c is in flight, every completion pushed. */
void aiol__vblk_io_drain(blk_ctx *c);

/* An engine's completion of @r: @res bytes moved (read, write) or 0, or
 * a negative errno.  Continues a short transfer, else finishes @r. */
void aiol__vblk_io_done(blk_req *r, int res);

/* Runs @r's I/O on the calling thread: 0 or -errno. */
int aiol__vblk_io_run(blk_req *r);

/* An I/O's end: writes @status, pushes @r's chain, counts it and
 * recycles @r.  Its queue is notified with the rest of the batch: at
 * aiol__vblk_batch_end() inside one, else by a bottom half. */
void aiol__vblk_finish(blk_req *r, uint8_t status);

/* An engine reaping several completions at once brackets them: the
 * queues they pushed to are notified once, at the end, in the same loop
 * iteration (no bottom half runs for them). */
void aiol__vblk_batch_begin(blk_ctx *c);
void aiol__vblk_batch_end(blk_ctx *c);

/* ------------------------------------------------- engines (0 or -errno) */

/* Each context has its own, on its loop. */

/* blk-pool.c: worker threads; never refuses a request. */
int aiol__vblk_pool_new(blk_ctx *c, unsigned max_workers, blk_pool **out);
void aiol__vblk_pool_submit(blk_pool *p, blk_req *r);
void aiol__vblk_pool_drain(blk_pool *p);   /* waits; completes on return */
void aiol__vblk_pool_free(blk_pool *p);

/* blk-aio.c: Linux AIO for reads and writes of an O_DIRECT image. */
int aiol__vblk_aio_new(blk_ctx *c, blk_aio **out);
int aiol__vblk_aio_submit(blk_aio *a, blk_req *r);
void aiol__vblk_aio_drain(blk_aio *a);
void aiol__vblk_aio_free(blk_aio *a);

/* blk-uring.c: io_uring on the context's loop's ring
 * (aiol__vblk_uring_submit with ring NULL) or on a ring of the context's. */
int aiol__vblk_ring_new(blk_ctx *c, blk_ring **out);
int aiol__vblk_uring_submit(blk_ctx *c, blk_ring *ring, blk_req *r);
void aiol__vblk_uring_drain(blk_ctx *c, blk_ring *ring);
void aiol__vblk_ring_free(blk_ring *ring);

#endif
