/* SPDX-License-Identifier: MIT */
/* toydev.c - the toy checksum/echo device (toydev.h). */
#define _GNU_SOURCE /* (POLLRDHUP) */
#include <errno.h>
#include <poll.h>
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

static void bump(unsigned *c)
{
    __atomic_fetch_add(c, 1, __ATOMIC_RELAXED);
}

/* Keeps @e popped if its queue was told to (toydev.hold). */
static bool hold(toydev *t, aiol_vhost_vq *vq, const aiol_vhost_elem *e)
{
    unsigned q = aiol_vhost_vq_index_get(vq);

    /* (hold[q] is set by a test thread: relaxed atomics) */
    if (q >= TOYDEV_QUEUES || !__atomic_load_n(&t->hold[q], __ATOMIC_RELAXED) ||
        t->held[q].vq != NULL) {
        return false;
    }
    __atomic_store_n(&t->hold[q], false, __ATOMIC_RELAXED);
    t->held[q].t = t;
    t->held[q].e = *e;
    memcpy(t->held[q].iov, e->iov, sizeof(t->held[q].iov));
    t->held[q].e.iov = t->held[q].iov;
    /* Release: the record before a test thread sees it held. */
    __atomic_store_n(&t->held[q].vq, vq, __ATOMIC_RELEASE);
    return true;
}

static void toydev_queue(void *opaque, aiol_vhost_vq *vq)
{
    toydev *t = opaque;
    struct iovec iov[64];
    uint8_t data[4096];
    unsigned q = aiol_vhost_vq_index_get(vq);

    bump(&t->queue_calls);
    if (q < TOYDEV_QUEUES) {
        __atomic_store_n(&t->thread[q], pthread_self(), __ATOMIC_RELAXED);
    }
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
        if (hold(t, vq, &e)) {
            continue;
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
        bump(&t->handled);
        aiol_vhost_vq_push(vq, &e, wrote);
    }
    aiol_vhost_vq_notify(vq);
}

void toydev_release(void *held)
{
    toydev_held *h = held;
    aiol_vhost_vq *vq = h->vq;

    if (vq != NULL) {
        h->vq = NULL;
        bump(&h->t->handled);
        aiol_vhost_vq_push(vq, &h->e, 0);
        aiol_vhost_vq_notify(vq);
    }
}

static void toydev_stop(void *opaque, aiol_vhost_vq *vq)
{
    toydev *t = opaque;
    unsigned q = aiol_vhost_vq_index_get(vq);

    bump(&t->stops);
    if (t->peer_fd1 > 0) {
        struct pollfd p = { .fd = t->peer_fd1 - 1, .events = POLLRDHUP };

        if (poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP))) {
            bump(&t->stops_after_close);
        }
    }
    if (q < TOYDEV_QUEUES) {
        toydev_release(&t->held[q]);
        __atomic_store_n(&t->stop_thread[q], pthread_self(), __ATOMIC_RELAXED);
    }
}

static void toydev_drain_queue(void *opaque, aiol_vhost_vq *vq)
{
    unsigned q = aiol_vhost_vq_index_get(vq);

    if (q < TOYDEV_QUEUES) {
        toydev_release(&((toydev *)opaque)->held[q]);
    }
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

/* (the callbacks both ops tables share) */
#define TOYDEV_CALLBACKS                                                     \
    .get_features = toydev_features, .get_config = toydev_get_config,        \
    .set_config = toydev_set_config, .queue = toydev_queue,                  \
    .queue_stop = toydev_stop, .connection = toydev_connection,              \
    .drain_queue = toydev_drain_queue

const aiol_vhost_dev_ops toydev_ops = { TOYDEV_CALLBACKS };

const aiol_vhost_dev_ops toydev_mt_ops = {
    TOYDEV_CALLBACKS,
    .flags = AIOL_VHOST_DEV_QUEUE_THREADS,
};
