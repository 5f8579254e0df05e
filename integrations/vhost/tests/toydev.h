/* SPDX-License-Identifier: MIT */
/*
 * toydev.h - a toy vhost-user device (toydev_) for the tests: a
 * checksum/echo device.  For each chain its queue handler hashes (FNV-1a 32) the
 * device-readable bytes and writes into the device-writable buffers the
 * hash (4 bytes, little endian) followed by as much of the readable bytes
 * as fits; the used length is what it wrote.  Config space: 16 bytes,
 * bytes 8..15 writable.
 */
#ifndef AIOLOOP_VHOST_TOYDEV_H
#define AIOLOOP_VHOST_TOYDEV_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "aioloop/vhost.h"

#define TOYDEV_F_ECHO 0  /* the toy's own feature bit */

#define TOYDEV_QUEUES 8   /* queues it keeps per-queue records of */

/* A chain the device keeps popped (toydev.hold). */
typedef struct toydev_held {
    struct toydev *t;
    aiol_vhost_vq *vq;    /* NULL: none */
    aiol_vhost_elem e;
    struct iovec iov[64];
} toydev_held;

/*
 * The counters are updated with relaxed atomics: with toydev_mt_ops the
 * queues run on several threads.  Per queue q < TOYDEV_QUEUES, written on
 * the thread serving it before it pushes (so a frontend that saw the
 * push reads them safely): thread[q] ran its handler last, stop_thread[q]
 * its last queue_stop (relaxed atomics too: a handler may run again after
 * the push a test waited for).
 */
typedef struct toydev {
    aiol_vhost_dev *dev;
    uint8_t config[16];
    unsigned handled;     /* chains completed */
    unsigned queue_calls; /* queue handler invocations */
    unsigned stops;       /* queue_stop callbacks */
    int connects, disconnects;
    int last_err;         /* last negative pop result */
    pthread_t thread[TOYDEV_QUEUES];
    pthread_t stop_thread[TOYDEV_QUEUES];
    /* hold[q]: keep queue q's next chain popped, unpushed, until
     * toydev_release() (set it before the kick that brings the chain) */
    bool hold[TOYDEV_QUEUES];
    toydev_held held[TOYDEV_QUEUES];
    /* peer_fd + 1, set by a test (0: none): each queue_stop looks whether
     * that socket, the frontend's end, already sees the device's end
     * closed, and counts it in stops_after_close */
    int peer_fd1;
    unsigned stops_after_close;
} toydev;

extern const aiol_vhost_dev_ops toydev_ops;
/* The same device, declaring AIOL_VHOST_DEV_QUEUE_THREADS (its queues on
 * several loops), with drain_queue. */
extern const aiol_vhost_dev_ops toydev_mt_ops;

/* Pushes (nothing written) and notifies the chain a queue holds, if any:
 * on the queue's loop thread, as an aiol_bh_schedule_oneshot() callback
 * whose opaque is &toy.held[q]. */
void toydev_release(void *held);

uint32_t toydev_hash(const void *p, size_t len);

#endif
