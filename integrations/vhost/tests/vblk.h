/* SPDX-License-Identifier: MIT */
/*
 * vblk.h - virtio-blk requests over the test frontend, for the suites
 * that drive aioloop/vhost-blk.h in-process and the daemon out of
 * process (cmocka asserts on frontend errors).
 */
#ifndef AIOLOOP_VHOST_VBLK_H
#define AIOLOOP_VHOST_VBLK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vfe.h"

/* A request added by vblk_add(): where its answer will be. */
typedef struct vblk_pending {
    uint8_t *status;  /* its status byte (0xAA until answered) */
    uint8_t *data;    /* its data buffer, NULL without data */
} vblk_pending;

/* Adds and kicks one request laid out as vblk_req() does; does not wait.
 * (@data is copied in for writes.) */
void vblk_add(vfe *f, unsigned q, uint32_t type, uint64_t sector,
              const void *data, uint32_t len, bool in, unsigned pieces,
              uint32_t hdr_len, vblk_pending *p);

/*
 * One request on queue @q: a header (split 7 + 9 bytes), @len bytes of
 * data in @pieces descriptors (device-writable with @in), a status byte.
 * Returns the status; *used gets the used length.  @hdr_len < 16 sends a
 * short header.
 */
int vblk_req(vfe *f, unsigned q, uint32_t type, uint64_t sector, void *data,
             uint32_t len, bool in, unsigned pieces, uint32_t hdr_len,
             uint32_t *used);

/* Fills @p with a pattern that differs per @seed. */
void vblk_pattern(uint8_t *p, size_t len, unsigned seed);

#endif
