/* SPDX-License-Identifier: MIT */
/*
 * msg.c - the vhost-user requests: checks and effects of each message.
 *
 * Every handler validates its message before changing anything.  Three
 * outcomes:
 *   - malformed (wrong payload size or fd count for the request, unknown
 *     request without need_reply): -EPROTO, the connection is dropped;
 *   - refused (a bad queue index, size, region, address): a negative
 *     errno; with REPLY_ACK negotiated and need_reply set, the frontend
 *     gets a failure ack (the errno) and the state is unchanged;
 *     otherwise it could not learn of the failure, so the connection is
 *     dropped too;
 *   - done: 0, with an ack when asked for.
 * Requests with a reply of their own (GET_*) answer with it.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

#define BIT(n) (1ull << (n))

/* Result of a handler that replied itself. */
#define REPLIED 1

static int bad(aiol_vhost_dev *dev, const char *reason)
{
    dev->why = reason;
    return -EPROTO;
}

static int refuse(aiol_vhost_dev *dev, int err, const char *reason)
{
    dev->why = reason;
    return err;
}

static uint64_t offered_features(aiol_vhost_dev *dev)
{
    uint64_t f = BIT(AIOL__VHOST_F_VERSION_1) |
                 BIT(AIOL__VHOST_F_RING_PACKED) |
                 BIT(AIOL__VHOST_F_RING_INDIRECT_DESC) |
                 BIT(AIOL__VHOST_F_RING_EVENT_IDX) |
                 BIT(AIOL__VHOST_F_PROTOCOL_FEATURES);

    if (dev->ops.get_features != NULL) {
        f |= dev->ops.get_features(dev->opaque);
    }
    return f;
}

static uint64_t offered_protocol(aiol_vhost_dev *dev)
{
    uint64_t f = BIT(AIOL__VHOST_PROTOCOL_F_MQ) |
                 BIT(AIOL__VHOST_PROTOCOL_F_REPLY_ACK);

    if (dev->ops.get_config != NULL) {
        f |= BIT(AIOL__VHOST_PROTOCOL_F_CONFIG);
    }
    return f;
}

static int reply_u64(aiol_vhost_dev *dev, uint64_t v)
{
    int r = aiol__vhost_send_reply(dev, dev->req, &v, sizeof(v));

    return r < 0 ? r : REPLIED;
}

/* Checks the payload size and fd count of the current message. */
static int want(aiol_vhost_dev *dev, uint32_t size, unsigned nfds)
{
    if (dev->size != size) {
        return bad(dev, "payload size wrong for the request");
    }
    if (dev->nfds != nfds) {
        return bad(dev, "wrong fd count for the request");
    }
    return 0;
}

static uint64_t payload_u64(aiol_vhost_dev *dev)
{
    uint64_t v;

    memcpy(&v, dev->payload, sizeof(v));
    return v;
}

/* The queue a u32 index at the start of the payload names, or NULL. */
static aiol_vhost_vq *payload_vq(aiol_vhost_dev *dev, uint32_t idx)
{
    return idx < dev->num_queues ? &dev->vqs[idx] : NULL;
}

static int set_features(aiol_vhost_dev *dev)
{
    uint64_t f = payload_u64(dev);
    bool relayout;
    int r;

    if ((f & ~offered_features(dev)) != 0) {
        return refuse(dev, -EINVAL, "SET_FEATURES: bits that were not offered");
    }
    relayout = ((f ^ dev->features) & BIT(AIOL__VHOST_F_RING_PACKED)) != 0;
    for (unsigned i = 0; relayout && i < dev->num_queues; i++) {
        if (dev->vqs[i].started) {
            return refuse(dev, -EBUSY, "SET_FEATURES: ring layout changed "
                          "while a ring runs");
        }
    }
    if (dev->ops.set_features != NULL &&
        (r = dev->ops.set_features(dev->opaque, f)) < 0) {
        return refuse(dev, r, "SET_FEATURES: refused by the device");
    }
    dev->features = f;
    /* Without PROTOCOL_FEATURES, rings start enabled (vhost-user spec). */
    for (unsigned i = 0; i < dev->num_queues; i++) {
        if (relayout) {
            /* (stopped rings: their addresses mean another layout now,
               so they need SET_VRING_NUM and ADDR again) */
            dev->vqs[i].ring = aiol__vhost_vq_layout(dev);
            dev->vqs[i].num = 0;
            dev->vqs[i].have_uva = dev->vqs[i].addr_set = false;
        }
        if (!(f & BIT(AIOL__VHOST_F_PROTOCOL_FEATURES))) {
            dev->vqs[i].enabled = true;
        }
    }
    return 0;
}

/* On the queue's loop thread: completes what the device popped. */
static void drain_here(void *opaque)
{
    aiol_vhost_vq *vq = opaque;

    vq->dev->ops.drain_queue(vq->dev->opaque, vq);
}

static int set_mem_table(aiol_vhost_dev *dev)
{
    vu_mem m;
    int r;

    r = aiol__vhost_mem_map(&m, dev->payload, dev->size, dev->fds, dev->nfds,
                            &dev->why);
    if (r < 0) {
        return (dev->size != 8 + dev->nfds * 32u) ? -EPROTO : r;
    }
    /* Every ring set up must translate in the new table, or it is
     * refused as a whole; then the rings switch and the old maps go.
     * Chains still popped point into the old maps: the device finishes
     * them first, or the table is refused. */
    for (unsigned i = 0; i < dev->num_queues; i++) {
        if (dev->vqs[i].inflight > 0 && dev->ops.drain_queue != NULL) {
            aiol__vhost_run_on(&dev->vqs[i], drain_here, &dev->vqs[i]);
        } else if (dev->vqs[i].inflight > 0 && dev->ops.drain != NULL) {
            dev->ops.drain(dev->opaque);
        }
        if (dev->vqs[i].inflight > 0) {
            aiol__vhost_mem_unmap(&m);
            return refuse(dev, -EBUSY, "SET_MEM_TABLE: requests in flight");
        }
        if ((r = aiol__vhost_vq_map(&dev->vqs[i], &m, false)) < 0) {
            aiol__vhost_mem_unmap(&m);
            return refuse(dev, r, "SET_MEM_TABLE: a ring is outside the table");
        }
    }
    for (unsigned i = 0; i < dev->num_queues; i++) {
        (void)aiol__vhost_vq_map(&dev->vqs[i], &m, true);
    }
    aiol__vhost_mem_unmap(&dev->mem);
    dev->mem = m;
    return 0;
}

static int vring_state(aiol_vhost_dev *dev, aiol_vhost_vq **vq,
                       uint32_t *num)
{
    uint32_t s[2];
    int r = want(dev, 8, 0);

    if (r < 0) {
        return r;
    }
    memcpy(s, dev->payload, sizeof(s));
    *vq = payload_vq(dev, s[0]);
    *num = s[1];
    return *vq != NULL ? 0 : refuse(dev, -ERANGE, "vring index out of range");
}

static int set_vring_num(aiol_vhost_dev *dev)
{
    aiol_vhost_vq *vq;
    uint32_t num;
    int r = vring_state(dev, &vq, &num);

    if (r < 0) {
        return r;
    }
    if (num == 0 || num > AIOL__VHOST_MAX_RING ||
        (vq->ring == &aiol__vhost_split && (num & (num - 1)) != 0)) {
        return refuse(dev, -EINVAL, "SET_VRING_NUM: not in 1..32768, or "
                      "(split) not a power of 2");
    }
    if (vq->started) {
        return refuse(dev, -EBUSY, "SET_VRING_NUM: ring is running");
    }
    vq->num = (uint16_t)num; /* 32768 fits */
    vq->addr_set = false;
    vq->have_uva = false;
    return 0;
}

static int set_vring_base(aiol_vhost_dev *dev)
{
    aiol_vhost_vq *vq;
    uint32_t num;
    int r = vring_state(dev, &vq, &num);

    if (r < 0) {
        return r;
    }
    if (vq->started) {
        return refuse(dev, -EBUSY, "SET_VRING_BASE: ring is running");
    }
    if (aiol__vhost_vq_base_set(vq, num) < 0) {
        return refuse(dev, -EINVAL, "SET_VRING_BASE: index over 16 bits, "
                      "or (packed) not inside the ring");
    }
    return 0;
}

static int get_vring_base(aiol_vhost_dev *dev)
{
    aiol_vhost_vq *vq;
    uint32_t num, s[2];
    int r = vring_state(dev, &vq, &num);

    if (r < 0) {
        return r;
    }
    aiol__vhost_vq_stop(vq);
    s[0] = vq->index;
    s[1] = aiol__vhost_vq_base_get(vq);
    r = aiol__vhost_send_reply(dev, dev->req, s, sizeof(s));
    return r < 0 ? r : REPLIED;
}

static int set_vring_addr(aiol_vhost_dev *dev)
{
    uint32_t h[2];
    uint64_t a[4];
    aiol_vhost_vq *vq, save;
    int r = want(dev, 40, 0);

    if (r < 0) {
        return r;
    }
    memcpy(h, dev->payload, sizeof(h));
    memcpy(a, dev->payload + 8, sizeof(a));
    if ((vq = payload_vq(dev, h[0])) == NULL) {
        return refuse(dev, -ERANGE, "vring index out of range");
    }
    if (vq->num == 0) {
        return refuse(dev, -EINVAL, "SET_VRING_ADDR: before SET_VRING_NUM");
    }
    save = *vq;
    vq->have_uva = true;
    vq->desc_uva = a[0];
    vq->used_uva = a[1];
    vq->avail_uva = a[2];
    if ((r = aiol__vhost_vq_map(vq, &dev->mem, true)) < 0) {
        *vq = save;
        return refuse(dev, r, "SET_VRING_ADDR: ring outside the memory table");
    }
    return 0;
}

/* SET_VRING_KICK, CALL, ERR: u64 with index and NOFD bit, one fd or none. */
static int set_vring_fd(aiol_vhost_dev *dev)
{
    uint64_t v;
    bool nofd;
    aiol_vhost_vq *vq;
    int r, fd;

    if (dev->size != 8) {
        return bad(dev, "payload size wrong for the request");
    }
    v = payload_u64(dev);
    nofd = (v & AIOL__VHOST_VRING_NOFD_MASK) != 0;
    if (v & ~(uint64_t)(AIOL__VHOST_VRING_IDX_MASK |
                        AIOL__VHOST_VRING_NOFD_MASK)) {
        return bad(dev, "vring fd message: unknown bits");
    }
    if ((r = want(dev, 8, nofd ? 0 : 1)) < 0) {
        return r;
    }
    if ((vq = payload_vq(dev, (uint32_t)(v & AIOL__VHOST_VRING_IDX_MASK))) ==
        NULL) {
        return refuse(dev, -ERANGE, "vring index out of range");
    }
    fd = nofd ? -1 : dev->fds[0];
    switch (dev->req) {
    case AIOL__VHOST_SET_VRING_KICK:
        if ((r = aiol__vhost_vq_set_kick(vq, fd)) < 0) {
            return refuse(dev, r, "SET_VRING_KICK: cannot watch the fd");
        }
        break;
    case AIOL__VHOST_SET_VRING_CALL:
        aiol__vhost_vq_set_call(vq, fd);
        break;
    default:
        aiol__vhost_vq_set_err(vq, fd);
        break;
    }
    if (!nofd) {
        dev->fds[0] = -1; /* taken */
    }
    return 0;
}

static int set_vring_enable(aiol_vhost_dev *dev)
{
    aiol_vhost_vq *vq;
    bool was;
    uint32_t num;
    int r = vring_state(dev, &vq, &num);

    if (r < 0) {
        return r;
    }
    if (num > 1) {
        return refuse(dev, -EINVAL, "SET_VRING_ENABLE: not 0 or 1");
    }
    was = aiol_vhost_vq_is_running(vq);
    vq->enabled = num == 1;
    aiol__vhost_vq_kick_if_running(vq, was);
    return 0;
}

/* GET_CONFIG / SET_CONFIG payload: offset, size, flags, then data. */
static int config(aiol_vhost_dev *dev)
{
    uint32_t c[3];
    uint8_t out[12 + AIOL__VHOST_CONFIG_MAX];
    int r;

    if (dev->size < 12 || dev->nfds != 0) {
        return bad(dev, "config message: short payload or fds");
    }
    memcpy(c, dev->payload, sizeof(c));
    if (c[1] > AIOL__VHOST_CONFIG_MAX || dev->size != 12 + c[1]) {
        return bad(dev, "config message: size field does not match payload");
    }
    if (c[0] > AIOL__VHOST_CONFIG_MAX || c[1] > AIOL__VHOST_CONFIG_MAX - c[0]) {
        return refuse(dev, -EINVAL, "config access out of range");
    }
    if (dev->req == AIOL__VHOST_SET_CONFIG) {
        if (dev->ops.set_config == NULL) {
            return refuse(dev, -ENOTSUP, "SET_CONFIG: device has no config");
        }
        r = dev->ops.set_config(dev->opaque, dev->payload + 12, c[0], c[1],
                                c[2]);
        return r < 0 ? refuse(dev, r, "SET_CONFIG: refused by the device") : 0;
    }
    memcpy(out, c, sizeof(c));
    r = dev->ops.get_config == NULL ? -ENOTSUP
        : dev->ops.get_config(dev->opaque, out + 12, c[0], c[1]);
    if (r < 0) {
        /* Failure: a reply with an empty config region. */
        c[1] = 0;
        memcpy(out, c, sizeof(c));
    }
    r = aiol__vhost_send_reply(dev, dev->req, out, 12 + c[1]);
    return r < 0 ? r : REPLIED;
}

static int handle(aiol_vhost_dev *dev)
{
    int r;

    switch (dev->req) {
    case AIOL__VHOST_GET_FEATURES:
        return (r = want(dev, 0, 0)) < 0 ? r
               : reply_u64(dev, offered_features(dev));
    case AIOL__VHOST_SET_FEATURES:
        return (r = want(dev, 8, 0)) < 0 ? r : set_features(dev);
    case AIOL__VHOST_GET_PROTOCOL_FEATURES:
        return (r = want(dev, 0, 0)) < 0 ? r
               : reply_u64(dev, offered_protocol(dev));
    case AIOL__VHOST_SET_PROTOCOL_FEATURES:
        if ((r = want(dev, 8, 0)) < 0) {
            return r;
        }
        if (payload_u64(dev) & ~offered_protocol(dev)) {
            return refuse(dev, -EINVAL, "SET_PROTOCOL_FEATURES: not offered");
        }
        dev->protocol = payload_u64(dev);
        return 0;
    case AIOL__VHOST_SET_OWNER:
        if ((r = want(dev, 0, 0)) < 0) {
            return r;
        }
        dev->owner = true;
        return 0;
    case AIOL__VHOST_RESET_OWNER:
        if ((r = want(dev, 0, 0)) < 0) {
            return r;
        }
        aiol__vhost_reset(dev);
        return 0;
    case AIOL__VHOST_GET_QUEUE_NUM:
        return (r = want(dev, 0, 0)) < 0 ? r
               : reply_u64(dev, dev->num_queues);
    case AIOL__VHOST_SET_MEM_TABLE:
        return set_mem_table(dev);
    case AIOL__VHOST_SET_VRING_NUM:
        return set_vring_num(dev);
    case AIOL__VHOST_SET_VRING_ADDR:
        return set_vring_addr(dev);
    case AIOL__VHOST_SET_VRING_BASE:
        return set_vring_base(dev);
    case AIOL__VHOST_GET_VRING_BASE:
        return get_vring_base(dev);
    case AIOL__VHOST_SET_VRING_KICK:
    case AIOL__VHOST_SET_VRING_CALL:
    case AIOL__VHOST_SET_VRING_ERR:
        return set_vring_fd(dev);
    case AIOL__VHOST_SET_VRING_ENABLE:
        return set_vring_enable(dev);
    case AIOL__VHOST_GET_CONFIG:
    case AIOL__VHOST_SET_CONFIG:
        return config(dev);
    default:
        if (dev->nfds != 0) {
            return bad(dev, "unknown request carrying fds");
        }
        return refuse(dev, -ENOSYS, "unknown request");
    }
}

void aiol__vhost_dispatch(aiol_vhost_dev *dev)
{
    bool ack = (dev->protocol & BIT(AIOL__VHOST_PROTOCOL_F_REPLY_ACK)) &&
               (dev->flags & AIOL__VHOST_FLAG_NEED_REPLY);
    uint32_t req = dev->req;
    int r;

    dev->why = "reply could not be sent";
    /* (the other loops serving queues wait while the message is handled) */
    aiol__vhost_park(dev);
    r = handle(dev);
    aiol__vhost_unpark(dev);
    if (dev->conn_fd < 0) {
        return;
    }
    if (r == REPLIED) {
        return;
    }
    if (r == -EPROTO || (r < 0 && !ack)) {
        aiol__vhost_drop(dev, true, "request %u: %s (%s)", req, dev->why,
                         strerror(-r));
        return;
    }
    if (r < 0) {
        dev->st.nacks++;
        aiol__vhost_err_set(dev, "request %u refused: %s (%s)", req,
                            dev->why, strerror(-r));
    }
    if (ack && aiol__vhost_send_reply(dev, req, &(uint64_t){ (uint64_t)-r },
                                      8) < 0) {
        aiol__vhost_drop(dev, true, "request %u: ack could not be sent",
                         req);
    }
}

void aiol__vhost_reset(aiol_vhost_dev *dev)
{
    for (unsigned i = 0; i < dev->num_queues; i++) {
        aiol__vhost_vq_reset(&dev->vqs[i]);
    }
    aiol__vhost_mem_unmap(&dev->mem);
    dev->features = 0;
    dev->protocol = 0;
    dev->owner = false;
}
