/* SPDX-License-Identifier: MIT */
/**
 * @file
 * aioloop/vhost-blk.h - a vhost-user-blk device on libaioloop-vhost.
 *
 * Serves a raw image file to a vhost-user frontend (QEMU's
 * vhost-user-blk-pci): read, write, flush, discard and get-id, in
 * 512-byte sectors, on the loop's thread.  When the loop runs on
 * io_uring, reads, writes, flushes and discards are submitted on the
 * loop's own ring (aioloop/uring.h) and complete asynchronously, a bottom
 * half notifying once per batch of completions; on the other fd monitors
 * (or without memory for a request) they run with preadv()/pwritev(),
 * fdatasync() and fallocate(), a kick's batch notified once.  Before a
 * ring stops, guest memory is replaced or the device is freed, every
 * request in flight completes.
 *
 * A guest is untrusted: a request whose header or status byte is
 * missing, whose data is not a whole number of sectors or runs past the
 * end of the image, or that writes to a read-only device completes with
 * VIRTIO_BLK_S_IOERR (an unknown type with VIRTIO_BLK_S_UNSUPP), and the
 * device goes on serving.  A chain too malformed to pop breaks its ring
 * (aioloop/vhost.h).
 */
#ifndef AIOLOOP_VHOST_BLK_H
#define AIOLOOP_VHOST_BLK_H

#include <stdbool.h>
#include <stdint.h>

#include "aioloop/loop.h"
#include "aioloop/vhost.h"

#ifdef __cplusplus
extern "C" {
#endif

/* (exported from the shared library; everything else is hidden) */
#pragma GCC visibility push(default)

/** A vhost-user-blk device serving one image file. */
typedef struct aiol_vhost_blk aiol_vhost_blk;

/** Options of aiol_vhost_blk_new(). */
typedef struct aiol_vhost_blk_opts {
    unsigned num_queues; /**< 1..64 */
    bool read_only;      /**< offer VIRTIO_BLK_F_RO, refuse writes */
    const char *serial;  /**< GET_ID answer (at most 20 bytes kept);
                              NULL: "aioloop" */
} aiol_vhost_blk_opts;

/** What the device did (loop's thread). */
typedef struct aiol_vhost_blk_stats {
    /** @{ */
    /** requests served, by type (in, out, flush, discard, get_id) */
    uint64_t reads, writes, flushes, discards, get_ids;
    /** @} */
    uint64_t ioerr;   /**< requests completed with VIRTIO_BLK_S_IOERR */
    uint64_t unsupp;  /**< requests completed with VIRTIO_BLK_S_UNSUPP */
    uint64_t on_ring; /**< requests whose I/O went to the loop's io_uring
                           ring (the rest ran synchronously) */
} aiol_vhost_blk_stats;

/**
 * Creates a device on @p loop serving the open file @p fd (not closed by
 * the device; its size, rounded down to 512 bytes, is the capacity).
 * Listen or adopt a frontend through aiol_vhost_blk_dev_get().
 * @return 0; -EINVAL for bad options; fstat() errors; -ENOMEM.
 */
int aiol_vhost_blk_new(aiol_loop *loop, int fd,
                       const aiol_vhost_blk_opts *opts,
                       aiol_vhost_blk **out);

/**
 * The vhost-user device underneath (to listen, adopt, read stats).
 * @return the device, owned by @p blk; never NULL.
 */
aiol_vhost_dev *aiol_vhost_blk_dev_get(aiol_vhost_blk *blk);

/** Copies the device's counters into @p out. */
void aiol_vhost_blk_stats_get(const aiol_vhost_blk *blk,
                              aiol_vhost_blk_stats *out);

/** Frees the device (disconnecting the frontend).  Loop's thread. */
void aiol_vhost_blk_free(aiol_vhost_blk *blk);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif

#endif /* AIOLOOP_VHOST_BLK_H */
