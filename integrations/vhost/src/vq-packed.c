/* SPDX-License-Identifier: MIT */
/*
 * vq-packed.c - the packed ring layout (virtio 1.1, 2.8): one ring of
 * descriptors that the driver makes available and the device writes back
 * used, in place, plus an event suppression area for each side.
 *
 * Positions.  The device keeps two: the next descriptor to pop
 * (last_avail, with its wrap counter avail_wrap) and the next one to
 * write used (used_idx, used_wrap).  Both counters start at 1 and flip
 * each time their position passes the end of the ring.  A descriptor is
 * available when its AVAIL flag equals avail_wrap and its USED flag does
 * not.  A chain takes consecutive descriptors; its buffer id is in its
 * last one.  A used element is one descriptor written at used_idx, which
 * then moves on by as many descriptors as the chain took (elem->ndescs),
 * so elements may be pushed in any order.
 *
 * Its own checks (vq.c has the shared ones): every descriptor of a chain
 * is available under the ring's wrap counter (the driver marks each one,
 * not only the first: 2.8.6), a chain takes at most the ring's size, and
 * an indirect descriptor stands alone (2.8.21.2).
 *
 * Memory ordering with the driver (2.8.21): we load the flags of the
 * chain's first descriptor with acquire (pairs with the driver's write
 * barrier before it stores them, after writing the rest of the chain)
 * before reading the chain; we store a used descriptor's flags with
 * release after its id and len (pairs with the driver's read barrier
 * after it sees them).  A full fence sits between our event store and
 * the re-check in pop, and between our used stores and the load of the
 * driver's event area in notify (vq.c), each pairing with the driver's
 * full barrier in the mirror-image sequence.
 */
#include <errno.h>
#include <stdatomic.h>
#include <string.h>

#include "internal.h"

/* Offsets in a 16-byte packed descriptor: addr, len, id, flags. */
#define PD_LEN 8
#define PD_ID 12
#define PD_FLAGS 14
/* used_since saturates here: past any event's distance (under 2 laps). */
#define USED_SINCE_MAX 0x10000u

static int packed_map(aiol_vhost_vq *vq, const vu_mem *m, bool commit)
{
    void *d = aiol__vhost_uva_aligned(m, vq->desc_uva, 16 * (uint64_t)vq->num, 16);
    void *drv = aiol__vhost_uva_aligned(m, vq->avail_uva, 4, 4);
    void *dev = aiol__vhost_uva_aligned(m, vq->used_uva, 4, 4);

    if (d == NULL || drv == NULL || dev == NULL) {
        return -EFAULT;
    }
    if (commit) {
        vq->desc = d;
        vq->avail = drv;
        vq->used = dev;
    }
    return 0;
}

static void packed_start(aiol_vhost_vq *vq)
{
    vq->used_since = 0; /* (signalled_valid is false: the next call goes) */
}

static uint16_t *flags_at(const aiol_vhost_vq *vq, uint16_t i)
{
    return (uint16_t *)((uint8_t *)vq->desc + 16u * i + PD_FLAGS);
}

static bool is_avail(uint16_t flags, bool wrap)
{
    return ((flags & VRING_PACKED_F_AVAIL) != 0) == wrap &&
           ((flags & VRING_PACKED_F_USED) != 0) != wrap;
}

/* Acquire: pairs with the driver's write barrier before it stores the
 * flags of a chain's first descriptor (2.8.21). */
static bool head_avail(const aiol_vhost_vq *vq)
{
    return is_avail(__atomic_load_n(flags_at(vq, vq->last_avail),
                                    __ATOMIC_ACQUIRE),
                    vq->avail_wrap);
}

static bool packed_avail_pending(const aiol_vhost_vq *vq)
{
    return head_avail(vq);
}

/* The device event area: the driver's kicks (flags, or with event idx
 * the descriptor whose making available wants one). */
static void kick_event_set(aiol_vhost_vq *vq, uint16_t flags)
{
    if (flags == VRING_EVENT_F_DESC) {
        __atomic_store_n(&vq->used[0],
                         (uint16_t)(vq->last_avail | vq->avail_wrap << 15),
                         __ATOMIC_RELAXED);
    }
    __atomic_store_n(&vq->used[1], flags, __ATOMIC_RELAXED);
}

/* The flags that ask for a kick at the next descriptor. */
static uint16_t kick_flags(const aiol_vhost_vq *vq)
{
    return aiol__vhost_vq_has(vq, AIOL__VHOST_F_RING_EVENT_IDX)
               ? VRING_EVENT_F_DESC : VRING_EVENT_F_ENABLE;
}

/* Steps position (*i, *wrap) one descriptor on. */
static void step(const aiol_vhost_vq *vq, uint16_t *i, bool *wrap)
{
    if (++*i == vq->num) {
        *i = 0;
        *wrap = !*wrap;
    }
}

/* An indirect table's buffers into @e (only WRITE counts in its flags). */
static int walk_indirect(aiol_vhost_vq *vq, uint64_t addr, uint32_t len,
                         aiol_vhost_elem *e)
{
    uint32_t count;
    const uint8_t *t = aiol__vhost_ind_table(vq, addr, len, &count);

    if (t == NULL) {
        return -EIO;
    }
    for (uint32_t k = 0; k < count; k++) {
        uint64_t a;
        uint32_t l;
        uint16_t f;
        int r;

        memcpy(&a, t + 16u * k, 8);
        memcpy(&l, t + 16u * k + PD_LEN, 4);
        memcpy(&f, t + 16u * k + PD_FLAGS, 2);
        r = aiol__vhost_elem_add(vq, e, a, l, (f & VRING_DESC_F_WRITE) != 0);
        if (r < 0) {
            return r;
        }
    }
    return 0;
}

static int packed_pop(aiol_vhost_vq *vq, aiol_vhost_elem *e)
{
    bool ask = aiol__vhost_vq_has(vq, AIOL__VHOST_F_RING_EVENT_IDX) &&
               !vq->polling;
    uint16_t i = vq->last_avail, n = 0;
    bool wrap = vq->avail_wrap;
    const uint8_t *ring = vq->desc;

    if (!head_avail(vq)) {
        if (!ask) {
            return 0;
        }
        /* Ask for a kick at this descriptor, then look again; the full
         * fence pairs with the driver's full barrier between making it
         * available and reading our event area (2.8.21.3). */
        kick_event_set(vq, VRING_EVENT_F_DESC);
        atomic_thread_fence(memory_order_seq_cst);
        if (!head_avail(vq)) {
            return 0;
        }
    }
    for (;;) {
        uint64_t addr;
        uint32_t len;
        uint16_t id, flags;
        int r;

        if (n == vq->num) {
            return aiol__vhost_vq_broken(vq, "chain longer than the ring");
        }
        memcpy(&addr, ring + 16u * i, 8);
        memcpy(&len, ring + 16u * i + PD_LEN, 4);
        memcpy(&id, ring + 16u * i + PD_ID, 2);
        memcpy(&flags, ring + 16u * i + PD_FLAGS, 2);
        if (n > 0 && !is_avail(flags, wrap)) {
            return aiol__vhost_vq_broken(vq, "descriptor of a chain not "
                                         "available under the ring's wrap "
                                         "counter");
        }
        n++;
        step(vq, &i, &wrap);
        if (flags & VRING_DESC_F_INDIRECT) {
            if (n > 1 || (flags & VRING_DESC_F_NEXT)) {
                return aiol__vhost_vq_broken(vq, "indirect descriptor "
                                             "inside a chain");
            }
            r = walk_indirect(vq, addr, len, e);
        } else {
            r = aiol__vhost_elem_add(vq, e, addr, len,
                                     (flags & VRING_DESC_F_WRITE) != 0);
        }
        if (r < 0) {
            return r;
        }
        if (!(flags & VRING_DESC_F_NEXT) ||
            (flags & VRING_DESC_F_INDIRECT)) {
            e->head = id;
            break;
        }
    }
    e->ndescs = n;
    vq->last_avail = i;
    vq->avail_wrap = wrap;
    if (ask) {
        kick_event_set(vq, VRING_EVENT_F_DESC); /* (polled: no kick wanted) */
    }
    return 1;
}

static void packed_push(aiol_vhost_vq *vq, const aiol_vhost_elem *e,
                        uint32_t len)
{
    uint8_t *d = (uint8_t *)vq->desc + 16u * vq->used_idx;
    uint16_t flags = vq->used_wrap ? VRING_PACKED_F_AVAIL |
                                     VRING_PACKED_F_USED : 0;

    if (len > 0) {
        flags |= VRING_DESC_F_WRITE; /* (len is valid) */
    }
    __atomic_store_n((uint16_t *)(d + PD_ID), e->head, __ATOMIC_RELAXED);
    __atomic_store_n((uint32_t *)(d + PD_LEN), len, __ATOMIC_RELAXED);
    /* Release: id and len before the flags that make it used; pairs with
     * the driver's read barrier after it sees them (2.8.21). */
    __atomic_store_n((uint16_t *)(d + PD_FLAGS), flags, __ATOMIC_RELEASE);
    vq->used_idx += e->ndescs;
    if (vq->used_idx >= vq->num) {
        vq->used_idx -= vq->num;
        vq->used_wrap = !vq->used_wrap;
    }
    if (vq->used_since < USED_SINCE_MAX) {
        vq->used_since += e->ndescs;
    }
}

/*
 * With event idx, the driver asks for a call once the device has used the
 * descriptor at (off, wrap).  It is due when that descriptor lies among
 * the ones used since the last call: the distance back from our used
 * position to it is 1 .. used_since.
 */
static bool event_crossed(const aiol_vhost_vq *vq, uint16_t off_wrap)
{
    int off = off_wrap & 0x7fff;
    int back = (int)vq->used_idx - off;

    if (((off_wrap >> 15) != 0) != vq->used_wrap) {
        back += vq->num; /* (the event is in the previous lap) */
    }
    return back >= 1 && (uint32_t)back <= vq->used_since;
}

static bool packed_call_wanted(aiol_vhost_vq *vq)
{
    uint16_t flags = __atomic_load_n(&vq->avail[1], __ATOMIC_RELAXED) & 3;
    bool need;

    if (flags == VRING_EVENT_F_DESC &&
        aiol__vhost_vq_has(vq, AIOL__VHOST_F_RING_EVENT_IDX)) {
        need = !vq->signalled_valid ||
               event_crossed(vq, __atomic_load_n(&vq->avail[0],
                                                 __ATOMIC_RELAXED));
    } else {
        need = flags != VRING_EVENT_F_DISABLE; /* (3, reserved: a call) */
    }
    vq->signalled_valid = true;
    vq->used_since = 0;
    return need;
}

static void packed_kicks_want(aiol_vhost_vq *vq, bool want)
{
    kick_event_set(vq, want ? kick_flags(vq) : VRING_EVENT_F_DISABLE);
}

const vu_ring_ops aiol__vhost_packed = {
    .map = packed_map,
    .start = packed_start,
    .avail_pending = packed_avail_pending,
    .pop = packed_pop,
    .push = packed_push,
    .call_wanted = packed_call_wanted,
    .kicks_want = packed_kicks_want,
};
