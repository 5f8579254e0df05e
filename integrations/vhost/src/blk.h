/* SPDX-License-Identifier: MIT */
/*
 * blk.h - inside the vhost-user-blk device: blk.c parses requests and is
 * the device; blk-io.c starts and completes their I/O on one of the
 * engines: blk-uring.c (io_uring, the loop's ring or the device's),
 * blk-aio.c (Linux AIO) and blk-pool.c (worker threads, which also take
 * whatever another engine cannot).
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

typedef enum blk_op {
    BLK_OP_NONE,      /* nothing to run: the status is decided */
    BLK_OP_READ,
    BLK_OP_WRITE,
    BLK_OP_FLUSH,
    BLK_OP_DISCARD,
    BLK_OP_WRITE_ZEROES,
} blk_op;

typedef struct blk_req blk_req;
typedef struct blk_pool blk_pool;
typedef struct blk_aio blk_aio;
typedef struct blk_ring blk_ring;

/* One request, from its pop to its push.  Loop's thread, except that a
 * worker owns it (and only it) while it runs in the pool. */
struct blk_req {
    aiol_vhost_blk *b;
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

struct aiol_vhost_blk {
    aiol_vhost_dev *dev;
    aiol_loop *loop;
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
    aiol_vhost_blk_stats st;   /* loop's thread */
    struct iovec *iov;         /* a popped chain: AIOL_VHOST_MAX_RING */
    aiol_vhost_blk_aio aio;    /* the engine: never AUTO */
    bool loop_ring;            /* io_uring: the loop's own ring */
    blk_ring *ring;            /* io_uring on a ring of ours, or NULL */
    blk_aio *aioctx;           /* Linux AIO, or NULL */
    blk_pool *pool;            /* worker threads (always) */
    unsigned max_workers;
    unsigned inflight;         /* requests started, not finished; loop's
                                  thread */
    blk_req *free_reqs;        /* finished requests for reuse */
    uint64_t starved;          /* bit i: queue i stopped popping for want
                                  of memory; a completion retries it */
    aiol_bh *notify_bh;        /* notifies what completions pushed */
    unsigned batch;            /* >0: an engine is completing a batch, and
                                  notifies at its end; loop's thread */
    bool nowait_writes;        /* pwritev2(RWF_NOWAIT) may work here */
    unsigned nowait_misses;    /* page-cache tries missed in a row */
    unsigned nowait_pause;     /* requests left before the next try */
    uint64_t notify_due;       /* bit i: queue i pushed since it notified */
};

/* ---------------------------------------------- blk-io.c: the I/O */

/* Chooses @b's engine for @aio and starts it; 0 or -errno. */
int aiol__vblk_io_init(aiol_vhost_blk *b, aiol_vhost_blk_aio aio);

/* Stops the engines (nothing in flight). */
void aiol__vblk_io_fini(aiol_vhost_blk *b);

/* Starts @r's I/O (op READ..DISCARD); aiol__vblk_finish() runs when it
 * completes, from this call at the earliest. */
void aiol__vblk_io_start(blk_req *r);

/* Waits until nothing is in flight, every completion pushed. */
void aiol__vblk_io_drain(aiol_vhost_blk *b);

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
void aiol__vblk_batch_begin(aiol_vhost_blk *b);
void aiol__vblk_batch_end(aiol_vhost_blk *b);

/* ------------------------------------------------- engines (0 or -errno) */

/* blk-pool.c: worker threads; never refuses a request. */
int aiol__vblk_pool_new(aiol_vhost_blk *b, unsigned max_workers,
                        blk_pool **out);
void aiol__vblk_pool_submit(blk_pool *p, blk_req *r);
void aiol__vblk_pool_drain(blk_pool *p);   /* waits; completes on return */
void aiol__vblk_pool_free(blk_pool *p);

/* blk-aio.c: Linux AIO for reads and writes of an O_DIRECT image. */
int aiol__vblk_aio_new(aiol_vhost_blk *b, blk_aio **out);
int aiol__vblk_aio_submit(blk_aio *a, blk_req *r);
void aiol__vblk_aio_drain(blk_aio *a);
void aiol__vblk_aio_free(blk_aio *a);

/* blk-uring.c: io_uring on the loop's ring (aiol__vblk_uring_submit with
 * ring NULL) or on a ring of the device's. */
int aiol__vblk_ring_new(aiol_vhost_blk *b, blk_ring **out);
int aiol__vblk_uring_submit(aiol_vhost_blk *b, blk_ring *ring, blk_req *r);
void aiol__vblk_uring_drain(aiol_vhost_blk *b, blk_ring *ring);
void aiol__vblk_ring_free(blk_ring *ring);

#endif
