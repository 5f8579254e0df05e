/* SPDX-License-Identifier: MIT */
/**
 * @file
 * aioloop/vhost-blk.h - a vhost-user-blk device on libaioloop-vhost.
 *
 * Serves a raw image file to a vhost-user frontend (QEMU's
 * vhost-user-blk-pci): read, write, flush, discard, write zeroes and
 * get-id, in 512-byte sectors.  No request runs on the loop's thread: each goes to
 * the device's I/O engine (aiol_vhost_blk_aio, as qemu-storage-daemon's
 * aio= option): the loop's own io_uring ring (aioloop/uring.h) or a ring
 * of the device's, Linux AIO, or a pool of worker threads.  Completions
 * push their chains on the loop's thread, a bottom half notifying once
 * per batch.  Before a ring stops, guest memory is replaced or the device
 * is freed, every request in flight completes.
 *
 * Queues on several threads: the device declares
 * AIOL_VHOST_DEV_QUEUE_THREADS, so aiol_vhost_dev_queue_loop_set() on
 * aiol_vhost_blk_dev_get() may serve each queue on another thread's loop.
 * Each loop that serves queues gets its own engine (its own ring, Linux
 * AIO context or worker pool, started when the first queue moves there)
 * and its requests run and complete on that thread.
 *
 * An image opened with O_DIRECT is served with O_DIRECT: a request whose
 * guest buffers are not aligned as the file needs goes through an
 * aligned bounce buffer, and one whose offset or length is not aligned
 * through a second, buffered descriptor of the same file (the kernel
 * keeps the two coherent).
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

/** Where a device's requests run: qemu-storage-daemon's aio= values. */
typedef enum aiol_vhost_blk_aio {
    /** io_uring on the loop's ring when the loop runs io_uring; else
        native for an O_DIRECT image, threads for a buffered one */
    AIOL_VHOST_BLK_AIO_AUTO,
    /** a pool of worker threads running preadv(), pwritev(),
        fdatasync() and fallocate() (aio=threads); a buffered read or
        write the page cache can serve without blocking (RWF_NOWAIT) is
        served on the loop's thread instead */
    AIOL_VHOST_BLK_AIO_THREADS,
    /** Linux AIO (io_submit(), completions through an eventfd on the
        loop); flushes, discards and write zeroes go to the worker pool.  Needs an
        O_DIRECT image, as aio=native needs cache.direct=on */
    AIOL_VHOST_BLK_AIO_NATIVE,
    /** io_uring: the loop's own ring when the loop runs io_uring, else a
        ring of the device's whose completions the loop watches */
    AIOL_VHOST_BLK_AIO_IO_URING,
} aiol_vhost_blk_aio;

/** Options of aiol_vhost_blk_new(). */
typedef struct aiol_vhost_blk_opts {
    unsigned num_queues; /**< 1..64 */
    bool read_only;      /**< offer VIRTIO_BLK_F_RO, refuse writes */
    const char *serial;  /**< GET_ID answer (at most 20 bytes kept);
                              NULL: "aioloop" */
    aiol_vhost_blk_aio aio; /**< the I/O engine; 0 is AUTO */
    unsigned max_workers;   /**< worker threads at most; 0: 64 */
    unsigned block_size;    /**< the logical block size the guest sees
                                 (config blk_size): a power of two,
                                 512..65536; 0: 512.  Requests not aligned
                                 to it complete with VIRTIO_BLK_S_IOERR */
} aiol_vhost_blk_opts;

/** What the device did. */
typedef struct aiol_vhost_blk_stats {
    /** @{ */
    /** requests served, by type (in, out, flush, discard, get_id) */
    uint64_t reads, writes, flushes, discards, get_ids;
    /** @} */
    uint64_t ioerr;   /**< requests completed with VIRTIO_BLK_S_IOERR */
    uint64_t unsupp;  /**< requests completed with VIRTIO_BLK_S_UNSUPP */
    uint64_t on_ring;   /**< I/Os submitted to an io_uring ring */
    uint64_t on_aio;    /**< I/Os submitted with Linux AIO */
    uint64_t on_pool;   /**< I/Os run by the worker pool */
    uint64_t bounced;   /**< O_DIRECT I/Os through an aligned bounce buffer */
    uint64_t buffered;  /**< O_DIRECT I/Os on the buffered descriptor
                             (offset or length not aligned) */
    uint64_t write_zeroes; /**< write-zeroes requests served */
    uint64_t nowait;    /**< reads and writes the page cache served on the
                             loop's thread without blocking (RWF_NOWAIT;
                             the threads engine, buffered) */
} aiol_vhost_blk_stats;

/**
 * Creates a device on @p loop serving the open file or block device
 * @p fd (not closed by the device; its size, rounded down to 512 bytes,
 * is the capacity).  Open it with O_DIRECT to serve it with O_DIRECT.
 * Listen or adopt a frontend through aiol_vhost_blk_dev_get().
 * @return 0; -EINVAL for bad options (block_size included), or
 *         AIOL_VHOST_BLK_AIO_NATIVE on
 *         an image without O_DIRECT; -ENOTSUP for io_uring where liburing
 *         was not built in; fstat() errors; errors of io_setup(),
 *         io_uring_queue_init(), pthread_create() and reopening an
 *         O_DIRECT image buffered; -ENOMEM.
 */
int aiol_vhost_blk_new(aiol_loop *loop, int fd,
                       const aiol_vhost_blk_opts *opts,
                       aiol_vhost_blk **out);

/**
 * The vhost-user device underneath (to listen, adopt, read stats).
 * @return the device, owned by @p blk; never NULL.
 */
aiol_vhost_dev *aiol_vhost_blk_dev_get(aiol_vhost_blk *blk);

/**
 * Copies the device's counters, summed over the loops serving its queues,
 * into @p out.  The device's loop thread (the other loops are paused
 * while their counters are read), not from the device's callbacks.
 */
void aiol_vhost_blk_stats_get(const aiol_vhost_blk *blk,
                              aiol_vhost_blk_stats *out);

/** Frees the device (disconnecting the frontend).  Loop's thread. */
void aiol_vhost_blk_free(aiol_vhost_blk *blk);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif

#endif /* AIOLOOP_VHOST_BLK_H */
