/* SPDX-License-Identifier: MIT */
/* toydev.c - the toy checksum/echo device (toydev.h). */
#include <errno.h>
#include <string.h>

#include "toydev.h"

uint32_t toydev_hash(const void *p, size_t len)
{
    const uint8_t *b = p;
    uint32_t h = 2166136261u;

    for (size_t i = 0; i < len; i++) {
        h = (h ^ b[i]) * 16777619u;
    }
    return h;
}

static uint64_t toydev_features(void *opaque)
{
    (void)opaque;
    return 1ull << TOYDEV_F_ECHO;
}

static int toydev_get_config(void *opaque, uint8_t *buf, uint32_t off,
                             uint32_t len)
{
    toydev *t = opaque;

    if (off > sizeof(t->config) || len > sizeof(t->config) - off) {
        return -EINVAL;
    }
    memcpy(buf, t->config + off, len);
    return 0;
}

static int toydev_set_config(void *opaque, const uint8_t *buf,
                             uint32_t off, uint32_t len, uint32_t flags)
{
    toydev *t = opaque;

    (void)flags;
    if (off < 8 || off > sizeof(t->config) || len > sizeof(t->config) - off) {
        return -EPERM;
    }
    memcpy(t->config + off, buf, len);
    return 0;
}

/* Writes @len bytes of @src into the writable iovecs from byte @at. */
static void put(aiol_vhost_elem *e, uint64_t at, const void *src, size_t len)
{
    const uint8_t *s = src;

    for (unsigned i = e->out_num; i < e->out_num + e->in_num && len > 0;
         i++) {
        size_t l = e->iov[i].iov_len;

        if (at >= l) {
            at -= l;
            continue;
        }
        size_t n = l - at < len ? l - at : len;

        memcpy((uint8_t *)e->iov[i].iov_base + at, s, n);
        s += n;
        len -= n;
        at = 0;
    }
}

static void toydev_queue(void *opaque, aiol_vhost_vq *vq)
{
    toydev *t = opaque;
    struct iovec iov[64];
    uint8_t data[4096];

    t->queue_calls++;
    for (;;) {
        aiol_vhost_elem e = { .iov = iov, .iov_cap = 64 };
        size_t n = 0;
        uint32_t h, wrote;
        int r = aiol_vhost_vq_pop(vq, &e);

        if (r <= 0) {
            if (r < 0) {
                t->last_err = r;
            }
            break;
        }
        for (unsigned i = 0; i < e.out_num; i++) {
            size_t l = iov[i].iov_len;

            if (l > sizeof(data) - n) {
                l = sizeof(data) - n;
            }
            memcpy(data + n, iov[i].iov_base, l);
            n += l;
        }
        h = toydev_hash(data, n);
        wrote = 0;
        if (e.in_len >= 4) {
            uint64_t room = e.in_len - 4;

            put(&e, 0, &h, 4);
            wrote = 4;
            if (room > n) {
                room = n;
            }
            put(&e, 4, data, (size_t)room);
            wrote += (uint32_t)room;
        }
        aiol_vhost_vq_push(vq, &e, wrote);
        t->handled++;
    }
    aiol_vhost_vq_notify(vq);
}

static void toydev_stop(void *opaque, aiol_vhost_vq *vq)
{
    toydev *t = opaque;

    (void)vq;
    t->stops++;
}

static void toydev_connection(void *opaque, bool up)
{
    toydev *t = opaque;

    if (up) {
        t->connects++;
    } else {
        t->disconnects++;
    }
}

const aiol_vhost_dev_ops toydev_ops = {
    .get_features = toydev_features,
    .get_config = toydev_get_config,
    .set_config = toydev_set_config,
    .queue = toydev_queue,
    .queue_stop = toydev_stop,
    .connection = toydev_connection,
};
