/* SPDX-License-Identifier: MIT */
/*
 * blk.h - inside the vhost-user-blk device: blk.c parses requests and is
 * the device; blk-io.c runs their I/O, synchronously or on the loop's
 * io_uring ring.
 */
#ifndef AIOLOOP_VHOST_BLK_INTERNAL_H
#define AIOLOOP_VHOST_BLK_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "aioloop/bh.h"
#include "aioloop/vhost-blk.h"

#define BLK_SECTOR 512u
#define BLK_HDR_LEN 16u   /* struct virtio_blk_outhdr */
#define BLK_ID_LEN 20u    /* VIRTIO_BLK_ID_BYTES */
#define BLK_SEG_MAX 126u  /* data segments a request may have (config) */

typedef enum blk_op {
    BLK_OP_NONE,      /* nothing to run: the status is decided */
    BLK_OP_READ,
    BLK_OP_WRITE,
    BLK_OP_FLUSH,
    BLK_OP_DISCARD,
} blk_op;

typedef struct blk_req blk_req;

/* One request, from its pop to its push.  Loop's thread. */
struct blk_req {
    aiol_vhost_blk *b;
    aiol_vhost_vq *vq;
    aiol_vhost_elem elem;     /* its head and lengths; pushed at the end */
    blk_op op;
    uint8_t status;           /* op NONE: the answer */
    uint8_t *status_p;        /* the chain's last writable byte; NULL: none */
    uint32_t written;         /* bytes written into the chain, status aside */
    uint64_t off, len;        /* bytes: read, write, discard */
    int niov;                 /* data iovecs (read, write) */
    struct iovec iov[BLK_SEG_MAX + 2];
    blk_req *next_free;
};

struct aiol_vhost_blk {
    aiol_vhost_dev *dev;
    aiol_loop *loop;
    int fd;                    /* the image; not ours to close */
    uint64_t sectors;          /* capacity */
    bool read_only;
    unsigned num_queues;
    char serial[BLK_ID_LEN];
    aiol_vhost_blk_stats st;   /* loop's thread */
    struct iovec *iov;         /* a popped chain: AIOL_VHOST_MAX_RING */
    blk_req sync_req;          /* the request run synchronously */
    bool uring;                /* I/O on the loop's ring (io_uring fd monitor) */
    unsigned inflight;         /* requests on the ring; loop's thread */
    blk_req *free_reqs;        /* finished requests for reuse */
    aiol_bh *notify_bh;        /* notifies what completions pushed */
    uint64_t notify_due;       /* bit i: queue i pushed since it notified */
};

/* Runs @r's I/O now; its VIRTIO_BLK_S_* status. */
uint8_t aiol__vblk_io_sync(blk_req *r);

/*
 * Submits @r's I/O on the loop's ring; aiol__vblk_finish() runs when it
 * completes.  0, or a negative errno (nothing submitted: run it with
 * aiol__vblk_io_sync()).
 */
int aiol__vblk_io_submit(blk_req *r);

/* Writes @status, pushes @r's chain, counts it and recycles @r. */
void aiol__vblk_finish(blk_req *r, uint8_t status);

#endif
