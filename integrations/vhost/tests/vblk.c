/* SPDX-License-Identifier: MIT */
/*
 * vblk.c - virtio-blk requests over the test frontend (vblk.h).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include <linux/virtio_blk.h>

#include "vblk.h"

void vblk_add(vfe *f, unsigned q, uint32_t type, uint64_t sector,
              const void *data, uint32_t len, bool in, unsigned pieces,
              uint32_t hdr_len, vblk_pending *p)
{
    struct virtio_blk_outhdr h = { .type = type, .sector = sector };
    vfe_buf bufs[12];
    unsigned n = 0;
    uint64_t hg = vfe_alloc(f, 1, sizeof(h), 1), dg = 0, sg;
    uint32_t at = 0;

    assert_true(pieces >= 1 && pieces <= 8);
    memcpy(vfe_gpa(f, hg), &h, sizeof(h));
    if (hdr_len >= 7) {
        bufs[n++] = (vfe_buf){ hg, 7, false };
        bufs[n++] = (vfe_buf){ hg + 7, hdr_len - 7, false };
    } else if (hdr_len > 0) {
        bufs[n++] = (vfe_buf){ hg, hdr_len, false };
    }
    if (len > 0) {
        dg = vfe_alloc(f, in ? 0 : 1, len, 8);
        assert_true(dg != UINT64_MAX);
        if (in) {
            memset(vfe_gpa(f, dg), 0xEE, len);
        } else {
            memcpy(vfe_gpa(f, dg), data, len);
        }
        for (unsigned p = 0; p < pieces; p++) {
            uint32_t l = p + 1 < pieces ? len / pieces : len - at;

            bufs[n++] = (vfe_buf){ dg + at, l, in };
            at += l;
        }
    }
    sg = vfe_alloc(f, 0, 1, 1);
    p->status = vfe_gpa(f, sg);
    *p->status = 0xAA;
    p->data = len > 0 ? vfe_gpa(f, dg) : NULL;
    bufs[n++] = (vfe_buf){ sg, 1, true };
    vfe_vq_add(f, q, bufs, n, false);
    vfe_vq_kick(f, q);
}

int vblk_req(vfe *f, unsigned q, uint32_t type, uint64_t sector, void *data,
             uint32_t len, bool in, unsigned pieces, uint32_t hdr_len,
             uint32_t *used)
{
    vblk_pending p;
    uint32_t id;

    vblk_add(f, q, type, sector, data, len, in, pieces, hdr_len, &p);
    assert_int_equal(vfe_vq_wait_used(f, q, &id, used), 0);
    if (in && len > 0) {
        memcpy(data, p.data, len);
    }
    return *p.status;
}

void vblk_pattern(uint8_t *p, size_t len, unsigned seed)
{
    for (size_t i = 0; i < len; i++) {
        p[i] = (uint8_t)(i * 31 + seed);
    }
}
