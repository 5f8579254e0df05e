/* SPDX-License-Identifier: MIT */
/*
 * vq.c - virtqueues (virtio 1.x): kick/call/err fds, the public pop, push
 * and notify calls, busy polling, and what both ring layouts share: the
 * checks of a chain's buffers and indirect tables.  The layouts
 * themselves are vq-split.c and vq-packed.c, behind vu_ring_ops.
 *
 * The guest writes the rings concurrently and is hostile.  Every
 * descriptor is copied out of guest memory once (memcpy) and then only
 * the copy is used, so a guest changing it meanwhile cannot make a
 * checked value unchecked.  A chain is accepted only when:
 *   - it has at most as many descriptors as its ring or table (this bounds
 *     loops), and each index it follows is inside its table;
 *   - an indirect descriptor is alone (no NEXT, not inside a chain),
 *     negotiated, not inside an indirect table, its table a non-empty
 *     multiple of 16 bytes, at most 32768 entries, inside guest RAM;
 *   - no device-readable descriptor follows a device-writable one;
 *   - every buffer lies in guest RAM (it may span adjacent regions) and
 *     the lengths sum to at most 4 GiB - 1 (the used element's u32);
 *   - what each layout checks of its own (its file says).
 * Anything else breaks the ring: pop returns -EIO until the frontend sets
 * it up again (a new kick), the err eventfd is signalled.
 *
 * Busy polling (aiol_loop_poll_params_set() on the device's loop): the
 * kick fd's handler also polls the ring, so a driver's new request is
 * seen without a kick.  While the loop polls a ring it asks for no kicks;
 * when it stops it asks again, with a full fence before the loop's last
 * look at the ring (pairing with the driver's full barrier between
 * publishing a chain and reading whether to kick), so a request published
 * meanwhile is either seen or kicked.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "aioloop/fd.h"
#include "internal.h"

#define IND_MAX AIOL__VHOST_MAX_RING

static void on_kick(void *opaque);
static void signal_fd(int fd);

/*
 * A queue's counters have one writer, the thread serving the queue (or
 * the device's while that is parked), and may be read from the device's
 * loop thread at any time (aiol_vhost_vq_stats_get()): relaxed atomic
 * stores and loads, no read-modify-write.
 */
static void count(uint64_t *c, uint64_t n)
{
    __atomic_store_n(c, *c + n, __ATOMIC_RELAXED);
}
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

/* The device's queue handler (on the queue's loop thread). */
static void queue_run(void *opaque)
{
    aiol_vhost_vq *vq = opaque;

    vq->dev->ops.queue(vq->dev->opaque, vq);
}

void aiol__vhost_vq_kick_if_running(aiol_vhost_vq *vq, bool was_running)
{
    /* A ring that just started running may hold chains whose kick came
     * while it was not (the kick fd is read and forgotten then): the
     * queue handler looks once, as a kick would make it. */
    if (!was_running && running(vq)) {
        aiol__vhost_run_on(vq, queue_run, vq);
    }
}

void aiol__vhost_vq_init(aiol_vhost_vq *vq, aiol_vhost_dev *dev,
                         unsigned index)
{
    aiol_vhost_vq_stats st = vq->st;
    aiol_loop *loop = vq->loop != NULL ? vq->loop : dev->loop;

    memset(vq, 0, sizeof(*vq));
    vq->st = st;
    vq->loop = loop; /* (a reset queue stays where it is served) */
    vq->dev = dev;
    vq->ring = aiol__vhost_vq_layout(dev);
    vq->index = index;
    vq->kick_fd = vq->call_fd = vq->err_fd = -1;
}

/* On the queue's loop thread: the device's queue_stop. */
static void stop_here(void *opaque)
{
    aiol_vhost_vq *vq = opaque;

    vq->dev->ops.queue_stop(vq->dev->opaque, vq);
}

void aiol__vhost_vq_stop(aiol_vhost_vq *vq)
{
    /* Removed here, on the device's thread: on a parked queue loop the
     * removal is then done when this returns (fd.h), and closing the fd
     * below cannot race that loop's thread. */
    if (vq->kick_fd >= 0) {
        aiol_fd_remove(vq->loop, vq->kick_fd);
    }
    if (vq->started && vq->dev->ops.queue_stop != NULL) {
        aiol__vhost_run_on(vq, stop_here, vq);
    }
    vq->started = false;
    vq->inflight = 0;
    if (vq->kick_fd >= 0) {
        close(vq->kick_fd);
        vq->kick_fd = -1;
    }
}

int aiol__vhost_vq_kick_watch(aiol_vhost_vq *vq)
{
    return aiol_fd_set_ops(vq->loop, vq->kick_fd, &kick_ops, vq);
}

void aiol__vhost_vq_kick_self(aiol_vhost_vq *vq)
{
    if (vq->kick_fd >= 0) {
        signal_fd(vq->kick_fd);
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

const vu_ring_ops *aiol__vhost_vq_layout(const aiol_vhost_dev *dev)
{
    return (dev->features >> AIOL__VHOST_F_RING_PACKED) & 1
               ? &aiol__vhost_packed : &aiol__vhost_split;
}

int aiol__vhost_vq_map(aiol_vhost_vq *vq, const vu_mem *m, bool commit)
{
    int r;

    if (!vq->have_uva) {
        return 0;
    }
    r = vq->ring->map(vq, m, commit);
    if (r == 0 && commit) {
        vq->addr_set = true;
    }
    return r;
}

int aiol__vhost_vq_base_set(aiol_vhost_vq *vq, uint32_t num)
{
    if (vq->ring == &aiol__vhost_packed) {
        /* Low half: the next descriptor, bit 15 its wrap counter; QEMU
         * sends its used position in the high half.  No request is in
         * flight across a stop, so the two are equal: used = avail. */
        uint16_t idx = num & 0x7fff;

        if (vq->num == 0 || idx >= vq->num) {
            return -EINVAL;
        }
        vq->last_avail = vq->used_idx = idx;
        vq->avail_wrap = vq->used_wrap = (num & 0x8000) != 0;
        return 0;
    }
    if (num > 0xffff) {
        return -EINVAL;
    }
    vq->last_avail = (uint16_t)num;
    return 0;
}

uint32_t aiol__vhost_vq_base_get(const aiol_vhost_vq *vq)
{
    if (vq->ring == &aiol__vhost_packed) {
        uint32_t avail = vq->last_avail | (uint32_t)vq->avail_wrap << 15;
        uint32_t used = vq->used_idx | (uint32_t)vq->used_wrap << 15;

        return avail | used << 16;
    }
    return vq->last_avail;
}

int aiol__vhost_vq_set_kick(aiol_vhost_vq *vq, int fd)
{
    bool was = running(vq);

    if (fd >= 0) {
        /* (the queue's loop is parked or ours: its handler is idle) */
        int r = aiol_fd_set_ops(vq->loop, fd, &kick_ops, vq);

        if (r < 0) {
            return r;
        }
    }
    if (vq->kick_fd >= 0) {
        aiol_fd_remove(vq->loop, vq->kick_fd);
        close(vq->kick_fd);
    }
    vq->kick_fd = fd;
    count(&vq->st.starts, 1);
    count(&vq->st.starts_packed, vq->ring == &aiol__vhost_packed);
    /* A kick fd starts the ring (vhost-user spec, "Starting and stopping
     * rings"); a "no fd" kick starts it for a device that polls. */
    vq->started = true;
    vq->broken = false;
    vq->signalled_valid = false;
    if (vq->addr_set) {
        vq->ring->start(vq);
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
        aiol_fd_remove(vq->loop, vq->kick_fd);
        return;
    }
    count(&vq->st.kicks, 1);
    if (running(vq)) {
        dev->ops.queue(dev->opaque, vq);
    }
}

/* Busy polling: a request the driver published, kicked or not. */
static bool kick_poll(void *opaque)
{
    aiol_vhost_vq *vq = opaque;

    return running(vq) && !vq->broken && vq->ring->avail_pending(vq);
}

static void kick_poll_ready(void *opaque)
{
    aiol_vhost_vq *vq = opaque;

    if (running(vq)) {
        vq->dev->ops.queue(vq->dev->opaque, vq);
    }
}

/* The loop polls this ring: the driver need not kick. */
static void kick_poll_begin(void *opaque)
{
    aiol_vhost_vq *vq = opaque;

    vq->polling = true;
    if (vq->addr_set) {
        vq->ring->kicks_want(vq, false);
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
    vq->ring->kicks_want(vq, true);
    /* Pairs with the driver's full barrier between publishing a chain and
     * loading whether to kick (virtio 1.x, 2.7.10; 1.1, 2.8.21.3). */
    atomic_thread_fence(memory_order_seq_cst);
}

int aiol__vhost_vq_broken(aiol_vhost_vq *vq, const char *why)
{
    aiol__vhost_err_set(vq->dev, "queue %u broken: %s", vq->index, why);
    __atomic_store_n(&vq->broken, true, __ATOMIC_RELAXED); /* (as count()) */
    count(&vq->st.broken, 1);
    if (vq->err_fd >= 0) {
        signal_fd(vq->err_fd);
    }
    return -EIO;
}

bool aiol__vhost_vq_has(const aiol_vhost_vq *vq, unsigned bit)
{
    return (vq->dev->features >> bit) & 1;
}

int aiol__vhost_elem_add(aiol_vhost_vq *vq, aiol_vhost_elem *e,
                         uint64_t addr, uint32_t len, bool write)
{
    const vu_mem *m = &vq->dev->mem;
    unsigned n = e->out_num + e->in_num;
    uint64_t left;

    if (!write && e->in_num > 0) {
        return aiol__vhost_vq_broken(vq, "readable descriptor after a "
                                     "writable one");
    }
    if (e->out_len + e->in_len + len > UINT32_MAX) {
        return aiol__vhost_vq_broken(vq, "chain length over 4 GiB");
    }
    for (left = len; left > 0;) {
        uint64_t avail, take;
        void *p = aiol__vhost_gpa_chunk(m, addr, &avail);

        if (p == NULL) {
            return aiol__vhost_vq_broken(vq, "buffer outside guest RAM");
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
        if (write) {
            e->in_num++;
        } else {
            e->out_num++;
        }
    }
    if (write) {
        e->in_len += len;
    } else {
        e->out_len += len;
    }
    return 0;
}

const uint8_t *aiol__vhost_ind_table(aiol_vhost_vq *vq, uint64_t addr,
                                     uint32_t len, uint32_t *count)
{
    const uint8_t *table;

    if (!aiol__vhost_vq_has(vq, AIOL__VHOST_F_RING_INDIRECT_DESC)) {
        aiol__vhost_vq_broken(vq, "indirect descriptor not negotiated");
        return NULL;
    }
    if (len == 0 || len % 16 != 0 || len / 16 > IND_MAX) {
        aiol__vhost_vq_broken(vq, "bad indirect table length");
        return NULL;
    }
    table = aiol__vhost_gpa(&vq->dev->mem, addr, len);
    if (table == NULL) {
        aiol__vhost_vq_broken(vq, "indirect table outside guest RAM");
        return NULL;
    }
    *count = len / 16;
    return table;
}

int aiol_vhost_vq_pop(aiol_vhost_vq *vq, aiol_vhost_elem *e)
{
    int r;

    aiol__vhost_check(vq != NULL && e != NULL, "NULL argument");
    aiol__vhost_check(e->iov != NULL || e->iov_cap == 0, "NULL iov array");
    if (vq->broken) {
        return -EIO;
    }
    if (!running(vq)) {
        return 0;
    }
    e->out_num = e->in_num = 0;
    e->out_len = e->in_len = 0;
    r = vq->ring->pop(vq, e);
    if (r > 0) {
        vq->inflight++;
        count(&vq->st.popped, 1);
    }
    return r;
}

void aiol_vhost_vq_push(aiol_vhost_vq *vq, const aiol_vhost_elem *e,
                        uint32_t len)
{
    aiol__vhost_check(vq != NULL && e != NULL, "NULL argument");
    aiol__vhost_check(len <= e->in_len, "len over the element's writable "
                      "bytes");
    if (!vq->addr_set || vq->inflight == 0) {
        return; /* the ring was reset since the pop: dropped */
    }
    aiol__vhost_check(e->ndescs >= 1 && e->ndescs <= vq->num,
                      "element not popped from this ring");
    vq->ring->push(vq, e, len);
    vq->inflight--;
    vq->pushed = true;
}

bool aiol_vhost_vq_notify(aiol_vhost_vq *vq)
{
    aiol__vhost_check(vq != NULL, "NULL queue");
    if (!vq->addr_set || !vq->pushed) {
        return false; /* nothing new for the driver */
    }
    vq->pushed = false;
    /* Full fence: the pushes before reading the driver's suppression;
     * pairs with the driver's full barrier between writing it and
     * re-reading the used ring, so a call is never missed. */
    atomic_thread_fence(memory_order_seq_cst);
    if (!vq->ring->call_wanted(vq)) {
        count(&vq->st.suppressed, 1);
        return false;
    }
    if (vq->call_fd < 0) {
        count(&vq->st.skipped, 1); /* a polling driver: never signalled */
        return false;
    }
    signal_fd(vq->call_fd);
    count(&vq->st.calls, 1);
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
    return __atomic_load_n(&vq->broken, __ATOMIC_RELAXED);
}

void aiol_vhost_vq_stats_get(const aiol_vhost_vq *vq,
                             aiol_vhost_vq_stats *out)
{
    const uint64_t *in = (const uint64_t *)&vq->st;
    uint64_t *to = (uint64_t *)out;

    aiol__vhost_check(vq != NULL && out != NULL, "NULL argument");
    /* (counters only: see count()) */
    for (size_t i = 0; i < sizeof(*out) / sizeof(uint64_t); i++) {
        to[i] = __atomic_load_n(&in[i], __ATOMIC_RELAXED);
    }
}
