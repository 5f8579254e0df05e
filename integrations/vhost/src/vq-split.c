/* SPDX-License-Identifier: MIT */
/*
 * vq-split.c - the split ring layout (virtio 1.x, 2.7): a descriptor
 * table, the driver's avail ring and the device's used ring.
 *
 * Its own checks (vq.c has the shared ones): the head and every next
 * index are inside their table, and the avail index is at most the queue
 * size ahead of ours.
 *
 * Memory ordering with the driver (virtio 1.x, 2.7.7 and 2.7.10): we load
 * avail->idx with acquire (pairs with the driver's write barrier before
 * its idx store) before reading ring entries; we store used->idx with
 * release (pairs with the driver's read barrier after its idx load) after
 * the used element; and a full fence sits between our used->idx store and
 * the load of used_event / avail flags (vq.c's notify), and between our
 * avail_event store and the re-check of avail->idx in pop (each pairs
 * with the driver's full barrier in the mirror-image sequence).
 */
#include <errno.h>
#include <stdatomic.h>
#include <string.h>

#include "internal.h"

static int split_map(aiol_vhost_vq *vq, const vu_mem *m, bool commit)
{
    uint64_t n = vq->num;
    void *d = aiol__vhost_uva_aligned(m, vq->desc_uva, 16 * n, 16);
    void *a = aiol__vhost_uva_aligned(m, vq->avail_uva, 6 + 2 * n, 2);
    void *u = aiol__vhost_uva_aligned(m, vq->used_uva, 6 + 8 * n, 4);

    if (d == NULL || a == NULL || u == NULL) {
        return -EFAULT;
    }
    if (commit) {
        vq->desc = d;
        vq->avail = a;
        vq->used = u;
    }
    return 0;
}

static void split_start(aiol_vhost_vq *vq)
{
    vq->used_idx = __atomic_load_n(&vq->used[1], __ATOMIC_ACQUIRE);
}

static bool split_avail_pending(const aiol_vhost_vq *vq)
{
    /* Acquire: as pop's load of avail->idx. */
    return __atomic_load_n(&vq->avail[1], __ATOMIC_ACQUIRE) != vq->last_avail;
}

/* avail_event, the driver's next kick point (event idx). */
static void avail_event_set(aiol_vhost_vq *vq, uint16_t v)
{
    __atomic_store_n(&vq->used[2 + 4 * vq->num], v, __ATOMIC_RELAXED);
}

/* Walks the chain at @head into @e.  0, -ENOBUFS, or -EIO (broken). */
static int walk(aiol_vhost_vq *vq, uint16_t head, aiol_vhost_elem *e)
{
    const uint8_t *table = vq->desc;
    uint32_t max = vq->num, count = 0, i = head;
    bool indirect = false;

    for (;;) {
        vring_desc d;
        int r;

        if (i >= max) {
            return aiol__vhost_vq_broken(vq, "descriptor index out of range");
        }
        if (++count > max) {
            return aiol__vhost_vq_broken(vq, "descriptor loop or chain "
                                         "longer than its table");
        }
        memcpy(&d, table + 16u * i, sizeof(d));
        if (d.flags & VRING_DESC_F_INDIRECT) {
            if (indirect) {
                return aiol__vhost_vq_broken(vq, "nested indirect table");
            }
            if (d.flags & VRING_DESC_F_NEXT) {
                return aiol__vhost_vq_broken(vq, "indirect descriptor with "
                                             "NEXT");
            }
            table = aiol__vhost_ind_table(vq, d.addr, d.len, &max);
            if (table == NULL) {
                return -EIO;
            }
            indirect = true;
            count = 0;
            i = 0;
            continue;
        }
        r = aiol__vhost_elem_add(vq, e, d.addr, d.len,
                                 (d.flags & VRING_DESC_F_WRITE) != 0);
        if (r < 0) {
            return r;
        }
        if (!(d.flags & VRING_DESC_F_NEXT)) {
            return 0;
        }
        i = d.next;
    }
}

static int split_pop(aiol_vhost_vq *vq, aiol_vhost_elem *e)
{
    bool eidx = aiol__vhost_vq_has(vq, AIOL__VHOST_F_RING_EVENT_IDX);
    uint16_t avail_idx, head;
    int r;

    /* Acquire: pairs with the driver's write barrier between filling the
     * ring entry and publishing avail->idx (virtio 1.x, 2.7.13). */
    avail_idx = __atomic_load_n(&vq->avail[1], __ATOMIC_ACQUIRE);
    if (avail_idx == vq->last_avail && eidx && !vq->polling) {
        /* Ask for a kick at the next entry, then look again.  The full
         * fence orders our avail_event store before the re-read of
         * avail->idx; it pairs with the driver's full barrier between its
         * avail->idx store and its avail_event load (2.7.10), so either
         * we see the new entry or the driver sees it must kick. */
        avail_event_set(vq, vq->last_avail);
        atomic_thread_fence(memory_order_seq_cst);
        avail_idx = __atomic_load_n(&vq->avail[1], __ATOMIC_ACQUIRE);
    }
    if ((uint16_t)(avail_idx - vq->last_avail) > vq->num) {
        return aiol__vhost_vq_broken(vq, "avail index more than the queue "
                                     "size ahead");
    }
    if (avail_idx == vq->last_avail) {
        return 0;
    }
    head = __atomic_load_n(&vq->avail[2 + vq->last_avail % vq->num],
                           __ATOMIC_RELAXED);
    e->head = head;
    e->ndescs = 1;
    if ((r = walk(vq, head, e)) < 0) {
        return r;
    }
    vq->last_avail++;
    if (eidx && !vq->polling) { /* (polled: no kick wanted) */
        avail_event_set(vq, vq->last_avail);
    }
    return 1;
}

static void split_push(aiol_vhost_vq *vq, const aiol_vhost_elem *e,
                       uint32_t len)
{
    uint32_t *slot = (uint32_t *)(vq->used + 2 + 4 * (vq->used_idx % vq->num));

    __atomic_store_n(&slot[0], (uint32_t)e->head, __ATOMIC_RELAXED);
    __atomic_store_n(&slot[1], len, __ATOMIC_RELAXED);
    vq->used_idx++;
    /* Release: the used entry before used->idx; pairs with the driver's
     * read barrier after it loads used->idx (2.7.14). */
    __atomic_store_n(&vq->used[1], vq->used_idx, __ATOMIC_RELEASE);
}

static bool split_call_wanted(aiol_vhost_vq *vq)
{
    bool need;

    if (aiol__vhost_vq_has(vq, AIOL__VHOST_F_RING_EVENT_IDX)) {
        uint16_t ev = __atomic_load_n(&vq->avail[2 + vq->num],
                                      __ATOMIC_RELAXED);
        uint16_t old = vq->signalled_used, now = vq->used_idx;

        need = !vq->signalled_valid ||
               (uint16_t)(now - ev - 1) < (uint16_t)(now - old);
        vq->signalled_used = now;
        vq->signalled_valid = true;
        return need;
    }
    return !(__atomic_load_n(&vq->avail[0], __ATOMIC_RELAXED) &
             VRING_AVAIL_F_NO_INTERRUPT);
}

/* used->flags (no kick) or, with event idx, avail_event (kick at next). */
static void split_kicks_want(aiol_vhost_vq *vq, bool want)
{
    if (aiol__vhost_vq_has(vq, AIOL__VHOST_F_RING_EVENT_IDX)) {
        if (want) {
            avail_event_set(vq, vq->last_avail);
        }
        return; /* (not wanted: pop stops moving avail_event) */
    }
    __atomic_store_n(&vq->used[0], want ? 0 : VRING_USED_F_NO_NOTIFY,
                     __ATOMIC_RELAXED);
}

const vu_ring_ops aiol__vhost_split = {
    .map = split_map,
    .start = split_start,
    .avail_pending = split_avail_pending,
    .pop = split_pop,
    .push = split_push,
    .call_wanted = split_call_wanted,
    .kicks_want = split_kicks_want,
};
