/* SPDX-License-Identifier: MIT */
/*
 * vq.c - split virtqueues (virtio 1.x): ring mapping, kick/call/err fds,
 * popping descriptor chains, pushing used elements, notification.
 *
 * The guest writes the rings concurrently and is hostile.  Every
 * descriptor is copied out of guest memory once (memcpy) and then only
 * the copy is used, so a guest changing it meanwhile cannot make a
 * checked value unchecked.  A chain is accepted only when:
 *   - its head and every next index are inside their table;
 *   - it has at most as many descriptors as its table (this bounds loops);
 *   - an indirect descriptor is alone (no NEXT), negotiated, not inside an
 *     indirect table, its table a non-empty multiple of 16 bytes, at most
 *     32768 entries, inside guest RAM;
 *   - no device-readable descriptor follows a device-writable one;
 *   - every buffer lies in guest RAM (it may span adjacent regions) and
 *     the lengths sum to at most 4 GiB - 1 (the used element's u32);
 *   - the avail index is at most the queue size ahead of ours.
 * Anything else breaks the ring: pop returns -EIO until the frontend sets
 * it up again (a new kick), the err eventfd is signalled.
 *
 * Memory ordering with the driver (virtio 1.x, 2.7.7 and 2.7.10): we load
 * avail->idx with acquire (pairs with the driver's write barrier before
 * its idx store) before reading ring entries; we store used->idx with
 * release (pairs with the driver's read barrier after its idx load) after
 * the used element; and a full fence sits between our used->idx store and
 * the load of used_event / avail flags in notify, and between our
 * avail_event store and the re-check of avail->idx in pop (each pairs with
 * the driver's full barrier in the mirror-image sequence).
 *
 * Busy polling (aiol_loop_poll_params_set() on the device's loop): the
 * kick fd's handler also polls avail->idx, so a driver's new request is
 * seen without a kick.  While the loop polls a ring it asks for no kicks
 * (VRING_USED_F_NO_NOTIFY, or with event idx no new avail_event); when it
 * stops it asks again, with a full fence before the loop's last look at
 * avail->idx (pairing with the driver's full barrier between its
 * avail->idx store and its flags / avail_event load), so a request
 * published meanwhile is either seen or kicked.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "aioloop/fd.h"
#include "internal.h"

#define IND_MAX AIOL_VHOST_MAX_RING

static void on_kick(void *opaque);
static bool running(const aiol_vhost_vq *vq);
static bool kick_poll(void *opaque);
static void kick_poll_ready(void *opaque);
static void kick_poll_begin(void *opaque);
static void kick_poll_end(void *opaque);

/* The kick fd's handler: a kick, or busy polling's look at the ring. */
static const aiol_fd_ops kick_ops = {
    .read = on_kick,
    .poll = kick_poll,
    .poll_ready = kick_poll_ready,
    .poll_begin = kick_poll_begin,
    .poll_end = kick_poll_end,
};

void aiol__vhost_vq_kick_if_running(aiol_vhost_vq *vq, bool was_running)
{
    /* A ring that just started running may hold chains whose kick came
     * while it was not (the kick fd is read and forgotten then): the
     * queue handler looks once, as a kick would make it. */
    if (!was_running && running(vq)) {
        vq->dev->ops.queue(vq->dev->opaque, vq);
    }
}

void aiol__vhost_vq_init(aiol_vhost_vq *vq, aiol_vhost_dev *dev,
                         unsigned index)
{
    aiol_vhost_vq_stats st = vq->st;

    memset(vq, 0, sizeof(*vq));
    vq->st = st;
    vq->dev = dev;
    vq->index = index;
    vq->kick_fd = vq->call_fd = vq->err_fd = -1;
}

void aiol__vhost_vq_stop(aiol_vhost_vq *vq)
{
    aiol_vhost_dev *dev = vq->dev;

    if (vq->started && dev->ops.queue_stop != NULL) {
        dev->ops.queue_stop(dev->opaque, vq);
    }
    vq->started = false;
    vq->inflight = 0;
    if (vq->kick_fd >= 0) {
        aiol_fd_remove(dev->loop, vq->kick_fd);
        close(vq->kick_fd);
        vq->kick_fd = -1;
    }
}

void aiol__vhost_vq_reset(aiol_vhost_vq *vq)
{
    aiol__vhost_vq_stop(vq);
    if (vq->call_fd >= 0) {
        close(vq->call_fd);
    }
    if (vq->err_fd >= 0) {
        close(vq->err_fd);
    }
    aiol__vhost_vq_init(vq, vq->dev, vq->index);
}

static void *ring_ptr(const vu_mem *m, uint64_t uva, uint64_t len,
                      uintptr_t align)
{
    void *p = aiol__vhost_uva(m, uva, len);

    return p != NULL && (uintptr_t)p % align == 0 ? p : NULL;
}

int aiol__vhost_vq_map(aiol_vhost_vq *vq, const vu_mem *m, bool commit)
{
    uint64_t n = vq->num;
    void *d, *a, *u;

    if (!vq->have_uva) {
        return 0;
    }
    d = ring_ptr(m, vq->desc_uva, 16 * n, 16);
    a = ring_ptr(m, vq->avail_uva, 6 + 2 * n, 2);
    u = ring_ptr(m, vq->used_uva, 6 + 8 * n, 4);
    if (d == NULL || a == NULL || u == NULL) {
        return -EFAULT;
    }
    if (commit) {
        vq->desc = d;
        vq->avail = a;
        vq->used = u;
        vq->addr_set = true;
    }
    return 0;
}

int aiol__vhost_vq_set_kick(aiol_vhost_vq *vq, int fd)
{
    aiol_vhost_dev *dev = vq->dev;
    bool was = running(vq);

    if (fd >= 0) {
        int r = aiol_fd_set_ops(dev->loop, fd, &kick_ops, vq);

        if (r < 0) {
            return r;
        }
    }
    if (vq->kick_fd >= 0) {
        aiol_fd_remove(dev->loop, vq->kick_fd);
        close(vq->kick_fd);
    }
    vq->kick_fd = fd;
    /* A kick fd starts the ring (vhost-user spec, "Starting and stopping
     * rings"); a "no fd" kick starts it for a device that polls. */
    vq->started = true;
    vq->broken = false;
    vq->signalled_valid = false;
    if (vq->addr_set) {
        vq->used_idx = __atomic_load_n(&vq->used[1], __ATOMIC_ACQUIRE);
    }
    aiol__vhost_vq_kick_if_running(vq, was);
    return 0;
}

void aiol__vhost_vq_set_err(aiol_vhost_vq *vq, int fd)
{
    if (vq->err_fd >= 0) {
        close(vq->err_fd);
    }
    vq->err_fd = fd;
}

static void signal_fd(int fd)
{
    uint64_t one = 1;
    ssize_t n;

    do {
        n = write(fd, &one, sizeof(one));
    } while (n < 0 && errno == EINTR);
    /* EAGAIN: the counter is saturated, the peer is signalled anyway. */
}

void aiol__vhost_vq_set_call(aiol_vhost_vq *vq, int fd)
{
    if (vq->call_fd >= 0) {
        close(vq->call_fd);
    }
    vq->call_fd = fd;
    /* A new call fd is signalled once: a frontend that reconnects (or
     * replaces the fd) may have missed a notify for buffers already used,
     * and a driver takes a spurious interrupt in its stride.  QEMU's
     * qtests wait for this signal from qemu-storage-daemon (libvhost-user
     * does the same). */
    if (fd >= 0) {
        signal_fd(fd);
    }
}

static bool running(const aiol_vhost_vq *vq)
{
    return vq->started && vq->enabled && vq->addr_set;
}

static void on_kick(void *opaque)
{
    aiol_vhost_vq *vq = opaque;
    aiol_vhost_dev *dev = vq->dev;
    uint64_t v;
    ssize_t n;

    do {
        n = read(vq->kick_fd, &v, sizeof(v));
    } while (n < 0 && errno == EINTR);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
        /* Not an eventfd (EOF, error): stop watching, or we would spin. */
        aiol_fd_remove(dev->loop, vq->kick_fd);
        return;
    }
    vq->st.kicks++;
    if (running(vq)) {
        dev->ops.queue(dev->opaque, vq);
    }
}

static bool has(const aiol_vhost_vq *vq, unsigned bit);

/* Busy polling: a request the driver published, kicked or not. */
static bool kick_poll(void *opaque)
{
    aiol_vhost_vq *vq = opaque;

    /* Acquire: as pop's load of avail->idx. */
    return running(vq) && !vq->broken &&
           __atomic_load_n(&vq->avail[1], __ATOMIC_ACQUIRE) != vq->last_avail;
}

static void kick_poll_ready(void *opaque)
{
    aiol_vhost_vq *vq = opaque;

    if (running(vq)) {
        vq->dev->ops.queue(vq->dev->opaque, vq);
    }
}

/* used->flags, which only the device writes. */
static void used_flags_set(aiol_vhost_vq *vq, uint16_t flags)
{
    __atomic_store_n(&vq->used[0], flags, __ATOMIC_RELAXED);
}

/* The loop polls this ring: the driver need not kick. */
static void kick_poll_begin(void *opaque)
{
    aiol_vhost_vq *vq = opaque;

    vq->polling = true;
    if (vq->addr_set && !has(vq, AIOL_VHOST_F_RING_EVENT_IDX)) {
        used_flags_set(vq, VRING_USED_F_NO_NOTIFY);
    }
}

/* The loop stops polling: kicks are wanted again; the loop looks at the
 * ring once more after this (kick_poll). */
static void kick_poll_end(void *opaque)
{
    aiol_vhost_vq *vq = opaque;

    vq->polling = false;
    if (!vq->addr_set) {
        return;
    }
    if (has(vq, AIOL_VHOST_F_RING_EVENT_IDX)) {
        __atomic_store_n(&vq->used[2 + 4 * vq->num], vq->last_avail,
                         __ATOMIC_RELAXED);
    } else {
        used_flags_set(vq, 0);
    }
    /* Pairs with the driver's full barrier between its avail->idx store
     * and its load of used->flags / avail_event (virtio 1.x, 2.7.10). */
    atomic_thread_fence(memory_order_seq_cst);
}

static int broken(aiol_vhost_vq *vq, const char *why)
{
    snprintf(vq->dev->err, sizeof(vq->dev->err), "queue %u broken: %s",
             vq->index, why);
    vq->broken = true;
    vq->st.broken++;
    if (vq->err_fd >= 0) {
        signal_fd(vq->err_fd);
    }
    return -EIO;
}

static bool has(const aiol_vhost_vq *vq, unsigned bit)
{
    return (vq->dev->features >> bit) & 1;
}

/* Walks the chain at @head into @e.  0, -ENOBUFS, or -EIO (broken). */
static int walk(aiol_vhost_vq *vq, uint16_t head, aiol_vhost_elem *e)
{
    const vu_mem *m = &vq->dev->mem;
    const uint8_t *table = (const uint8_t *)vq->desc;
    uint32_t max = vq->num, count = 0, i = head;
    bool indirect = false, seen_write = false;
    unsigned n = 0;

    e->out_num = e->in_num = 0;
    e->out_len = e->in_len = 0;
    e->head = head;
    for (;;) {
        vring_desc d;
        uint64_t addr, left;

        if (i >= max) {
            return broken(vq, "descriptor index out of range");
        }
        if (++count > max) {
            return broken(vq, "descriptor loop or chain longer than its "
                          "table");
        }
        memcpy(&d, table + 16u * i, sizeof(d));
        if (d.flags & VRING_DESC_F_INDIRECT) {
            if (!has(vq, AIOL_VHOST_F_RING_INDIRECT_DESC)) {
                return broken(vq, "indirect descriptor not negotiated");
            }
            if (indirect) {
                return broken(vq, "nested indirect table");
            }
            if (d.flags & VRING_DESC_F_NEXT) {
                return broken(vq, "indirect descriptor with NEXT");
            }
            if (d.len == 0 || d.len % 16 != 0 || d.len / 16 > IND_MAX) {
                return broken(vq, "bad indirect table length");
            }
            table = aiol__vhost_gpa(m, d.addr, d.len);
            if (table == NULL) {
                return broken(vq, "indirect table outside guest RAM");
            }
            indirect = true;
            max = d.len / 16;
            count = 0;
            i = 0;
            continue;
        }
        if (d.flags & VRING_DESC_F_WRITE) {
            seen_write = true;
        } else if (seen_write) {
            return broken(vq, "readable descriptor after a writable one");
        }
        if (e->out_len + e->in_len + d.len > UINT32_MAX) {
            return broken(vq, "chain length over 4 GiB");
        }
        for (addr = d.addr, left = d.len; left > 0;) {
            uint64_t avail, take;
            void *p = aiol__vhost_gpa_chunk(m, addr, &avail);

            if (p == NULL) {
                return broken(vq, "buffer outside guest RAM");
            }
            if (n == e->iov_cap) {
                return -ENOBUFS;
            }
            take = left < avail ? left : avail;
            e->iov[n].iov_base = p;
            e->iov[n].iov_len = (size_t)take;
            n++;
            addr += take; /* stays inside the region: no overflow */
            left -= take;
            if (seen_write) {
                e->in_num++;
            } else {
                e->out_num++;
            }
        }
        if (seen_write) {
            e->in_len += d.len;
        } else {
            e->out_len += d.len;
        }
        if (!(d.flags & VRING_DESC_F_NEXT)) {
            return 0;
        }
        i = d.next;
    }
}

int aiol_vhost_vq_pop(aiol_vhost_vq *vq, aiol_vhost_elem *e)
{
    bool eidx;
    uint16_t avail_idx, head;
    int r;

    aiol__vhost_check(vq != NULL && e != NULL, "NULL argument");
    aiol__vhost_check(e->iov != NULL || e->iov_cap == 0, "NULL iov array");
    if (vq->broken) {
        return -EIO;
    }
    if (!running(vq)) {
        return 0;
    }
    eidx = has(vq, AIOL_VHOST_F_RING_EVENT_IDX);
    /* Acquire: pairs with the driver's write barrier between filling the
     * ring entry and publishing avail->idx (virtio 1.x, 2.7.13). */
    avail_idx = __atomic_load_n(&vq->avail[1], __ATOMIC_ACQUIRE);
    if (avail_idx == vq->last_avail && eidx && !vq->polling) {
        /* Ask for a kick at the next entry, then look again.  The full
         * fence orders our avail_event store before the re-read of
         * avail->idx; it pairs with the driver's full barrier between its
         * avail->idx store and its avail_event load (2.7.10), so either
         * we see the new entry or the driver sees it must kick. */
        __atomic_store_n(&vq->used[2 + 4 * vq->num], vq->last_avail,
                         __ATOMIC_RELAXED);
        atomic_thread_fence(memory_order_seq_cst);
        avail_idx = __atomic_load_n(&vq->avail[1], __ATOMIC_ACQUIRE);
    }
    if ((uint16_t)(avail_idx - vq->last_avail) > vq->num) {
        return broken(vq, "avail index more than the queue size ahead");
    }
    if (avail_idx == vq->last_avail) {
        return 0;
    }
    head = __atomic_load_n(&vq->avail[2 + vq->last_avail % vq->num],
                           __ATOMIC_RELAXED);
    r = walk(vq, head, e);
    if (r < 0) {
        return r;
    }
    vq->last_avail++;
    if (eidx && !vq->polling) { /* (polled: no kick wanted) */
        __atomic_store_n(&vq->used[2 + 4 * vq->num], vq->last_avail,
                         __ATOMIC_RELAXED);
    }
    vq->inflight++;
    vq->st.popped++;
    return 1;
}

void aiol_vhost_vq_push(aiol_vhost_vq *vq, const aiol_vhost_elem *e,
                        uint32_t len)
{
    uint32_t *slot;

    aiol__vhost_check(vq != NULL && e != NULL, "NULL argument");
    aiol__vhost_check(len <= e->in_len, "len over the element's writable "
                      "bytes");
    if (!vq->addr_set || vq->inflight == 0) {
        return; /* the ring was reset since the pop: dropped */
    }
    slot = (uint32_t *)(vq->used + 2 + 4 * (vq->used_idx % vq->num));
    __atomic_store_n(&slot[0], (uint32_t)e->head, __ATOMIC_RELAXED);
    __atomic_store_n(&slot[1], len, __ATOMIC_RELAXED);
    vq->used_idx++;
    /* Release: the used entry before used->idx; pairs with the driver's
     * read barrier after it loads used->idx (2.7.14). */
    __atomic_store_n(&vq->used[1], vq->used_idx, __ATOMIC_RELEASE);
    vq->inflight--;
    vq->pushed = true;
}

bool aiol_vhost_vq_notify(aiol_vhost_vq *vq)
{
    bool need;

    aiol__vhost_check(vq != NULL, "NULL queue");
    if (!vq->addr_set || !vq->pushed) {
        return false; /* nothing new for the driver */
    }
    vq->pushed = false;
    /* Full fence: used->idx (pushed) before reading used_event or the
     * flags; pairs with the driver's full barrier between writing
     * used_event and re-reading used->idx, so a call is never missed. */
    atomic_thread_fence(memory_order_seq_cst);
    if (has(vq, AIOL_VHOST_F_RING_EVENT_IDX)) {
        uint16_t ev = __atomic_load_n(&vq->avail[2 + vq->num],
                                      __ATOMIC_RELAXED);
        uint16_t old = vq->signalled_used, now = vq->used_idx;

        need = !vq->signalled_valid ||
               (uint16_t)(now - ev - 1) < (uint16_t)(now - old);
        vq->signalled_used = now;
        vq->signalled_valid = true;
    } else {
        need = !(__atomic_load_n(&vq->avail[0], __ATOMIC_RELAXED) &
                 VRING_AVAIL_F_NO_INTERRUPT);
    }
    if (!need) {
        vq->st.suppressed++;
        return false;
    }
    if (vq->call_fd < 0) {
        vq->st.skipped++; /* a polling driver: never signalled */
        return false;
    }
    signal_fd(vq->call_fd);
    vq->st.calls++;
    return true;
}

unsigned aiol_vhost_vq_index_get(const aiol_vhost_vq *vq)
{
    aiol__vhost_check(vq != NULL, "NULL queue");
    return vq->index;
}

unsigned aiol_vhost_vq_size_get(const aiol_vhost_vq *vq)
{
    aiol__vhost_check(vq != NULL, "NULL queue");
    return vq->num;
}

bool aiol_vhost_vq_is_running(const aiol_vhost_vq *vq)
{
    aiol__vhost_check(vq != NULL, "NULL queue");
    return running(vq);
}

bool aiol_vhost_vq_is_broken(const aiol_vhost_vq *vq)
{
    aiol__vhost_check(vq != NULL, "NULL queue");
    return vq->broken;
}

void aiol_vhost_vq_stats_get(const aiol_vhost_vq *vq,
                             aiol_vhost_vq_stats *out)
{
    aiol__vhost_check(vq != NULL && out != NULL, "NULL argument");
    *out = vq->st;
}
