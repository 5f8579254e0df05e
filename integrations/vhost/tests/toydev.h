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

#include <stddef.h>
#include <stdint.h>

#include "aioloop/vhost.h"

#define TOYDEV_F_ECHO 0  /* the toy's own feature bit */

typedef struct toydev {
    aiol_vhost_dev *dev;
    uint8_t config[16];
    unsigned handled;     /* chains completed */
    unsigned queue_calls; /* queue handler invocations */
    unsigned stops;       /* queue_stop callbacks */
    int connects, disconnects;
    int last_err;         /* last negative pop result */
} toydev;

extern const aiol_vhost_dev_ops toydev_ops;

uint32_t toydev_hash(const void *p, size_t len);

#endif
