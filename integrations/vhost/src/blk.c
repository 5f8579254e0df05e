/* SPDX-License-Identifier: MIT */
/*
 * blk.c - the vhost-user-blk device (aioloop/vhost-blk.h).
 *
 * A request is one descriptor chain (virtio 1.x, 5.2.6): a 16-byte
 * struct virtio_blk_outhdr at the start of the device-readable part, the
 * data (readable for writes, discards and write zeroes, writable for
 * reads and get-id), and one status byte at the very end of the writable
 * part.
 * Any of these may be split across descriptors at any byte, so the
 * header is gathered and the data sliced out of the chain's iovecs.
 *
 * A queue is served by its context (blk.h), on that context's loop.  A
 * kick pops every available chain and parses it into a blk_req, and
 * blk-io.c starts its I/O on the context's engines; each completion
 * pushes its chain, a bottom half notifying once per batch.  Requests
 * come from the context's free list, which starts with one per queue;
 * without memory for another, a queue stops popping until a completion
 * frees one (there is one in flight, since the list is empty), so
 * nothing waits for memory on a loop's thread.  Before a ring stops, its
 * context is drained; before guest memory is replaced or the device
 * goes, every context is: no request outlives the memory it points at.
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <linux/fs.h>
#include <linux/virtio_blk.h>

#include "blk.h"
#include "internal.h"

#define SECTOR BLK_SECTOR
#define HDR_LEN BLK_HDR_LEN
#define ID_LEN BLK_ID_LEN
#define SEG_MAX BLK_SEG_MAX

/* ------------------------------------------------------------ iovecs */

/* Copies @len bytes at byte @off of iov[0..n) into @dst; false if short. */
static bool iov_read(const struct iovec *iov, unsigned n, uint64_t off,
                     void *dst, size_t len)
{
    uint8_t *d = dst;

    for (unsigned i = 0; i < n && len > 0; i++) {
        size_t l = iov[i].iov_len, c;

        if (off >= l) {
            off -= l;
            continue;
        }
        c = l - off < len ? l - off : len;
        memcpy(d, (uint8_t *)iov[i].iov_base + off, c);
        d += c;
        len -= c;
        off = 0;
    }
    return len == 0;
}

/*
 * Puts bytes [@off, @off + @len) of iov[0..n) in dst[0..cap) as iovecs;
 * returns their number, or -1 if they need more than @cap entries.
 */
static int iov_slice(const struct iovec *iov, unsigned n, uint64_t off,
                     uint64_t len, struct iovec *dst, unsigned cap)
{
    unsigned k = 0;

    for (unsigned i = 0; i < n && len > 0; i++) {
        size_t l = iov[i].iov_len, c;

        if (off >= l) {
            off -= l;
            continue;
        }
        if (k == cap) {
            return -1;
        }
        c = l - off < len ? l - off : (size_t)len;
        dst[k].iov_base = (uint8_t *)iov[i].iov_base + off;
        dst[k].iov_len = c;
        k++;
        len -= c;
        off = 0;
    }
    return (int)k;
}

/* ---------------------------------------------------------- requests */

/* Whether sectors [sector, sector + nsect) are in the image and aligned
 * to the logical block size. */
static bool in_range(const aiol_vhost_blk *b, uint64_t sector,
                     uint64_t nsect)
{
    uint64_t per_block = b->block_size / SECTOR;

    return sector <= b->sectors && nsect <= b->sectors - sector &&
           sector % per_block == 0 && nsect % per_block == 0;
}

/* Plans a read or write; the status if it cannot run (else op set). */
static uint8_t plan_rw(aiol_vhost_blk *b, const aiol_vhost_elem *e,
                       uint64_t sector, bool write, blk_req *r)
{
    uint64_t len = write ? e->out_len - HDR_LEN : e->in_len - 1;
    const struct iovec *base = write ? e->iov : e->iov + e->out_num;
    unsigned n = write ? e->out_num : e->in_num;
    int k;

    if (write && b->read_only) {
        return VIRTIO_BLK_S_IOERR;
    }
    if (len % SECTOR != 0 || !in_range(b, sector, len / SECTOR)) {
        return VIRTIO_BLK_S_IOERR;
    }
    k = iov_slice(base, n, write ? HDR_LEN : 0, len, r->iov, SEG_MAX + 2);
    if (k < 0) {
        return VIRTIO_BLK_S_IOERR;
    }
    if (len == 0) {
        return VIRTIO_BLK_S_OK;
    }
    r->op = write ? BLK_OP_WRITE : BLK_OP_READ;
    r->niov = k;
    r->off = sector * SECTOR;
    r->len = len;
    r->written = write ? 0 : (uint32_t)len;
    return VIRTIO_BLK_S_OK;
}

/* Plans a discard (@zeroes false) or a write zeroes, each of one
 * segment (max_discard_seg, max_write_zeroes_seg 1): more segments,
 * unknown flags and unmap on a discard are VIRTIO_BLK_S_UNSUPP (virtio
 * 1.1, 5.2.6.2, as QEMU answers); a range past the end or longer than
 * the config's maximum is VIRTIO_BLK_S_IOERR. */
static uint8_t plan_dz(aiol_vhost_blk *b, const aiol_vhost_elem *e,
                       bool zeroes, blk_req *r)
{
    struct virtio_blk_discard_write_zeroes seg;
    uint64_t sector, nsect;
    uint32_t flags, allowed = zeroes ? VIRTIO_BLK_WRITE_ZEROES_FLAG_UNMAP : 0;

    if (b->read_only) {
        return VIRTIO_BLK_S_IOERR;
    }
    if ((e->out_len - HDR_LEN) % sizeof(seg) != 0 ||
        e->out_len - HDR_LEN == 0 ||
        !iov_read(e->iov, e->out_num, HDR_LEN, &seg, sizeof(seg))) {
        return VIRTIO_BLK_S_IOERR;
    }
    if (e->out_len - HDR_LEN != sizeof(seg)) {
        return VIRTIO_BLK_S_UNSUPP;
    }
    sector = le64toh(seg.sector);
    nsect = le32toh(seg.num_sectors);
    flags = le32toh(seg.flags);
    if ((flags & ~allowed) != 0) {
        return VIRTIO_BLK_S_UNSUPP;
    }
    if (nsect > BLK_MAX_DZ_SECTORS || !in_range(b, sector, nsect)) {
        return VIRTIO_BLK_S_IOERR;
    }
    r->op = zeroes ? BLK_OP_WRITE_ZEROES : BLK_OP_DISCARD;
    r->unmap = (flags & VIRTIO_BLK_WRITE_ZEROES_FLAG_UNMAP) != 0;
    r->off = sector * SECTOR;
    r->len = nsect * SECTOR;
    return VIRTIO_BLK_S_OK;
}

static uint8_t get_id(aiol_vhost_blk *b, const aiol_vhost_elem *e,
                      blk_req *r)
{
    uint64_t room = e->in_len - 1;
    size_t n = room < ID_LEN ? (size_t)room : ID_LEN, at = 0;
    int k = iov_slice(e->iov + e->out_num, e->in_num, 0, n, r->iov,
                      SEG_MAX + 2);

    for (int i = 0; i < k; i++) {
        memcpy(r->iov[i].iov_base, b->serial + at, r->iov[i].iov_len);
        at += r->iov[i].iov_len;
    }
    r->written = (uint32_t)at;
    return k < 0 ? VIRTIO_BLK_S_IOERR : VIRTIO_BLK_S_OK;
}

/*
 * Parses the popped chain @e into @r, a request of @c: either an I/O to
 * run (r->op) or a status decided now (op NONE, r->status).  Counts the
 * request.
 */
static void parse(blk_ctx *c, aiol_vhost_vq *vq, const aiol_vhost_elem *e,
                  blk_req *r)
{
    aiol_vhost_blk *b = c->b;
    aiol_vhost_blk_stats *st = &c->st;
    struct virtio_blk_outhdr h;
    const struct iovec *last;

    r->ctx = c;
    r->vq = vq;
    r->elem = *e;
    r->elem.iov = NULL; /* (c->iov is reused by the next pop) */
    r->op = BLK_OP_NONE;
    r->status = VIRTIO_BLK_S_IOERR;
    r->status_p = NULL;
    r->written = 0;
    if (e->in_num == 0 || e->in_len < 1) {
        return; /* no status byte to answer in: nothing to write */
    }
    last = &e->iov[e->out_num + e->in_num - 1];
    if (last->iov_len == 0) {
        return;
    }
    r->status_p = (uint8_t *)last->iov_base + last->iov_len - 1;
    if (e->out_len < HDR_LEN ||
        !iov_read(e->iov, e->out_num, 0, &h, sizeof(h))) {
        return;
    }
    switch (le32toh(h.type)) {
    case VIRTIO_BLK_T_IN:
        st->reads++;
        r->status = plan_rw(b, e, le64toh(h.sector), false, r);
        break;
    case VIRTIO_BLK_T_OUT:
        st->writes++;
        r->status = plan_rw(b, e, le64toh(h.sector), true, r);
        break;
    case VIRTIO_BLK_T_FLUSH:
        st->flushes++;
        r->op = BLK_OP_FLUSH;
        r->status = VIRTIO_BLK_S_OK;
        break;
    case VIRTIO_BLK_T_GET_ID:
        st->get_ids++;
        r->status = get_id(b, e, r);
        break;
    case VIRTIO_BLK_T_DISCARD:
        st->discards++;
        r->status = plan_dz(b, e, false, r);
        break;
    case VIRTIO_BLK_T_WRITE_ZEROES:
        st->write_zeroes++;
        r->status = plan_dz(b, e, true, r);
        break;
    default:
        r->status = VIRTIO_BLK_S_UNSUPP;
        break;
    }
    if (r->status != VIRTIO_BLK_S_OK) {
        r->op = BLK_OP_NONE;
    }
}

static void req_put(blk_ctx *c, blk_req *r)
{
    r->next = c->free_reqs;
    c->free_reqs = r;
}

/* A request of @c: recycled or new; NULL without memory. */
static blk_req *req_get(blk_ctx *c)
{
    blk_req *r = c->free_reqs;

    if (r != NULL) {
        c->free_reqs = r->next;
        return r;
    }
    return malloc(sizeof(*r));
}

/* Writes @status, pushes @r's chain, counts it and recycles @r. */
static void push(blk_req *r, uint8_t status)
{
    blk_ctx *c = r->ctx;

    if (r->status_p == NULL) {
        c->st.ioerr++;
        aiol_vhost_vq_push(r->vq, &r->elem, 0);
    } else {
        c->st.ioerr += status == VIRTIO_BLK_S_IOERR;
        c->st.unsupp += status == VIRTIO_BLK_S_UNSUPP;
        *r->status_p = status;
        aiol_vhost_vq_push(r->vq, &r->elem, r->written + 1);
    }
    req_put(c, r);
}

void aiol__vblk_finish(blk_req *r, uint8_t status)
{
    blk_ctx *c = r->ctx;

    /* notified with the rest of its batch: when the engine's batch ends,
       or by the bottom half for completions that come one by one */
    c->notify_due |= 1ull << aiol_vhost_vq_index_get(r->vq);
    if (c->batch == 0) {
        aiol_bh_schedule(c->notify_bh);
    }
    push(r, status);
}

void aiol__vblk_batch_begin(blk_ctx *c)
{
    c->batch++;
}

static void notify_due(void *opaque);

void aiol__vblk_batch_end(blk_ctx *c)
{
    aiol__vhost_check(c->batch > 0, "a completion batch ended twice");
    if (--c->batch == 0 && (c->notify_due != 0 || c->starved != 0)) {
        notify_due(c);
    }
}

static void blk_queue(void *opaque, aiol_vhost_vq *vq);

/* Notifies every queue of the context @opaque a completion pushed to
 * since it last notified, and pops again on its queues that stopped for
 * want of memory. */
static void notify_due(void *opaque)
{
    blk_ctx *c = opaque;
    aiol_vhost_blk *b = c->b;
    uint64_t starved = c->starved;

    c->starved = 0;
    while (starved != 0) {
        unsigned q = (unsigned)__builtin_ctzll(starved);

        starved &= starved - 1;
        blk_queue(b, aiol_vhost_dev_vq_get(b->dev, q));
    }
    while (c->notify_due != 0) {
        unsigned q = (unsigned)__builtin_ctzll(c->notify_due);

        c->notify_due &= c->notify_due - 1;
        aiol_vhost_vq_notify(aiol_vhost_dev_vq_get(b->dev, q));
    }
}

/* Waits for every request of @c in flight and notifies what they
 * pushed. */
static void ctx_drain(blk_ctx *c)
{
    c->batch++; /* (what completes is notified below; no queue pops
                   again meanwhile) */
    aiol__vblk_io_drain(c);
    c->batch--;
    c->starved = 0; /* (the rings stop, or their memory changes: the
                       frontend kicks again) */
    notify_due(c);
}

/* The context serving @vq. */
static blk_ctx *ctx_of(aiol_vhost_blk *b, aiol_vhost_vq *vq)
{
    return b->qctx[aiol_vhost_vq_index_get(vq)];
}

/* ------------------------------------------------------- device ops */

static uint64_t blk_features(void *opaque)
{
    aiol_vhost_blk *b = opaque;
    uint64_t f = 1ull << VIRTIO_BLK_F_SEG_MAX | 1ull << VIRTIO_BLK_F_BLK_SIZE |
                 1ull << VIRTIO_BLK_F_FLUSH | 1ull << VIRTIO_BLK_F_MQ;

    if (b->read_only) {
        f |= 1ull << VIRTIO_BLK_F_RO;
    } else {
        f |= 1ull << VIRTIO_BLK_F_DISCARD | 1ull << VIRTIO_BLK_F_WRITE_ZEROES;
    }
    return f;
}

static int blk_get_config(void *opaque, uint8_t *buf, uint32_t off,
                          uint32_t len)
{
    aiol_vhost_blk *b = opaque;
    struct virtio_blk_config c;

    if (off > sizeof(c) || len > sizeof(c) - off) {
        return -EINVAL;
    }
    memset(&c, 0, sizeof(c));
    c.capacity = htole64(b->sectors);
    c.seg_max = htole32(SEG_MAX);
    c.blk_size = htole32(b->block_size);
    c.num_queues = htole16((uint16_t)b->num_queues);
    c.max_discard_sectors = htole32(BLK_MAX_DZ_SECTORS);
    c.max_discard_seg = htole32(1);
    c.discard_sector_alignment = htole32(b->block_size / SECTOR);
    c.max_write_zeroes_sectors = htole32(BLK_MAX_DZ_SECTORS);
    c.max_write_zeroes_seg = htole32(1);
    c.write_zeroes_may_unmap = 1;
    memcpy(buf, (uint8_t *)&c + off, len);
    return 0;
}

static int blk_set_config(void *opaque, const uint8_t *buf, uint32_t off,
                          uint32_t len, uint32_t flags)
{
    (void)opaque;
    (void)buf;
    (void)off;
    (void)len;
    (void)flags;
    return -EPERM; /* (no writable config field: no CONFIG_WCE) */
}

static void blk_queue(void *opaque, aiol_vhost_vq *vq)
{
    blk_ctx *c = ctx_of(opaque, vq);
    aiol_vhost_elem e = { .iov = c->iov, .iov_cap = AIOL__VHOST_MAX_RING };

    for (;;) {
        blk_req *r = req_get(c);

        if (r == NULL) {
            /* (the free list is empty: one is in flight, and its
               completion pops again) */
            c->starved |= 1ull << aiol_vhost_vq_index_get(vq);
            break;
        }
        if (aiol_vhost_vq_pop(vq, &e) != 1) {
            req_put(c, r);
            break;
        }
        parse(c, vq, &e, r);
        if (r->op != BLK_OP_NONE) {
            aiol__vblk_io_start(r); /* its completion pushes it */
        } else {
            push(r, r->status); /* (notified below) */
        }
    }
    aiol_vhost_vq_notify(vq);
}

/* The ring stops: none of its requests may stay in flight (its
 * context's other queues are drained with it). */
static void blk_queue_stop(void *opaque, aiol_vhost_vq *vq)
{
    ctx_drain(ctx_of(opaque, vq));
}

/* Guest memory is about to be replaced: drains @vq's context, on its
 * thread. */
static void blk_drain_queue(void *opaque, aiol_vhost_vq *vq)
{
    ctx_drain(ctx_of(opaque, vq));
}

/*
 * @vq moves to @loop (device's loop thread, nothing of @vq in flight):
 * to the context serving @loop, made now if there is none (its engine
 * started on @loop, as the first one's on the device's loop).
 */
static int blk_queue_loop(void *opaque, aiol_vhost_vq *vq, aiol_loop *loop)
{
    aiol_vhost_blk *b = opaque;
    blk_ctx *c = NULL;

    for (unsigned i = 0; i < b->nctx && c == NULL; i++) {
        c = b->ctx[i]->loop == loop ? b->ctx[i] : NULL;
    }
    if (c == NULL) {
        int r;

        if (b->nctx == BLK_MAX_QUEUES) {
            return -ENOSPC; /* (one per loop a queue was ever on) */
        }
        if ((r = aiol__vblk_ctx_new(b, loop, &c)) < 0) {
            return r;
        }
        b->ctx[b->nctx++] = c;
    }
    b->qctx[aiol_vhost_vq_index_get(vq)] = c;
    return 0;
}

static const aiol_vhost_dev_ops blk_ops = {
    .get_features = blk_features,
    .get_config = blk_get_config,
    .set_config = blk_set_config,
    .queue = blk_queue,
    .queue_stop = blk_queue_stop,
    .flags = AIOL_VHOST_DEV_QUEUE_THREADS,
    .drain_queue = blk_drain_queue,
    .queue_loop = blk_queue_loop,
};

/* --------------------------------------------------------- lifetime */

/* Frees @c's free list. */
static void reqs_free(blk_ctx *c)
{
    while (c->free_reqs != NULL) {
        blk_req *r = c->free_reqs;

        c->free_reqs = r->next;
        free(r);
    }
}

int aiol__vblk_ctx_new(aiol_vhost_blk *b, aiol_loop *loop, blk_ctx **out)
{
    blk_ctx *c = calloc(1, sizeof(*c));
    int r = 0;

    if (c == NULL) {
        return -ENOMEM;
    }
    c->b = b;
    c->loop = loop;
    c->nowait_writes = true;
    c->iov = calloc(AIOL__VHOST_MAX_RING, sizeof(*c->iov));
    /* one request per queue from the start: a queue never waits for
       memory with nothing in flight */
    for (unsigned i = 0; c->iov != NULL && i < b->num_queues; i++) {
        blk_req *q = malloc(sizeof(*q));

        if (q == NULL) {
            break;
        }
        req_put(c, q);
    }
    if (c->iov == NULL || c->free_reqs == NULL) {
        r = -ENOMEM;
    }
    if (r == 0) {
        r = aiol__vblk_io_init(c, b->aio);
    }
    if (r == 0) {
        r = aiol_bh_new(loop, notify_due, c, &c->notify_bh);
        if (r < 0) {
            aiol__vblk_io_fini(c);
        }
    }
    if (r < 0) {
        reqs_free(c);
        free(c->iov);
        free(c);
        return r;
    }
    *out = c;
    return 0;
}

void aiol__vblk_ctx_free(blk_ctx *c)
{
    aiol__vblk_io_drain(c); /* (what a broken ring left) */
    aiol__vblk_io_fini(c);
    aiol_bh_free(c->notify_bh);
    reqs_free(c);
    free(c->iov);
    free(c);
}

static void ctx_free_here(void *opaque)
{
    aiol__vblk_ctx_free(opaque);
}

/*
 * The device's contexts, all freed (requests drained).  One on another
 * loop is freed on that loop's thread, where its engine's handlers and
 * poll callbacks run: removing them from here would not stop one that
 * thread already began (aioloop/fd.h).
 */
static void ctxs_free(aiol_vhost_blk *b)
{
    while (b->nctx > 1) {
        blk_ctx *c = b->ctx[--b->nctx];

        if (aiol_bh_schedule_wait(c->loop, ctx_free_here, c) < 0) {
            aiol__vblk_ctx_free(c); /* (no memory for the call: here) */
        }
    }
    if (b->nctx > 0) {
        aiol__vblk_ctx_free(b->ctx[--b->nctx]); /* (the device's loop) */
    }
}

int aiol_vhost_blk_new(aiol_loop *loop, int fd,
                       const aiol_vhost_blk_opts *opts, aiol_vhost_blk **out)
{
    aiol_vhost_blk *b;
    struct stat st;
    int r = 0;

    aiol__vhost_check(loop != NULL && opts != NULL && out != NULL,
                      "NULL argument");
    unsigned bs = opts->block_size != 0 ? opts->block_size : SECTOR;

    if (opts->num_queues < 1 || opts->num_queues > BLK_MAX_QUEUES ||
        fd < 0 || opts->aio > AIOL_VHOST_BLK_AIO_IO_URING || bs < SECTOR ||
        bs > 65536 || (bs & (bs - 1)) != 0) {
        return -EINVAL;
    }
    if (fstat(fd, &st) < 0) {
        return -errno;
    }
    b = calloc(1, sizeof(*b));
    if (b == NULL) {
        return -ENOMEM;
    }
    b->fd = fd;
    b->sectors = (uint64_t)st.st_size / SECTOR;
    b->block_size = bs;
    if (S_ISBLK(st.st_mode)) {
        uint64_t bytes;

        if (ioctl(fd, BLKGETSIZE64, &bytes) < 0) {
            r = -errno;
            free(b);
            return r;
        }
        b->sectors = bytes / SECTOR;
    }
    b->read_only = opts->read_only;
    b->num_queues = opts->num_queues;
    b->max_workers = opts->max_workers;
    {
        const char *id = opts->serial != NULL ? opts->serial : "aioloop";

        memcpy(b->serial, id, strnlen(id, ID_LEN)); /* (zero-padded) */
    }
    r = aiol__vblk_image_init(b, loop, opts->aio);
    /* one context, on the device's loop, serving every queue */
    if (r == 0) {
        r = aiol__vblk_ctx_new(b, loop, &b->ctx[0]);
    }
    if (r == 0) {
        b->nctx = 1;
        for (unsigned i = 0; i < b->num_queues; i++) {
            b->qctx[i] = b->ctx[0];
        }
        r = aiol_vhost_dev_new(loop, &blk_ops, b, opts->num_queues, &b->dev);
    }
    if (r < 0) {
        ctxs_free(b);
        aiol__vblk_image_fini(b);
        free(b);
        return r;
    }
    *out = b;
    return 0;
}

aiol_vhost_dev *aiol_vhost_blk_dev_get(aiol_vhost_blk *blk)
{
    aiol__vhost_check(blk != NULL, "NULL device");
    return blk->dev;
}

/* Adds the counters of @a to those of @sum. */
static void stats_add(aiol_vhost_blk_stats *sum, const aiol_vhost_blk_stats *a)
{
    _Static_assert(sizeof(*a) == 14 * sizeof(uint64_t),
                   "every counter is summed below");
    sum->reads += a->reads;
    sum->writes += a->writes;
    sum->flushes += a->flushes;
    sum->discards += a->discards;
    sum->get_ids += a->get_ids;
    sum->ioerr += a->ioerr;
    sum->unsupp += a->unsupp;
    sum->on_ring += a->on_ring;
    sum->on_aio += a->on_aio;
    sum->on_pool += a->on_pool;
    sum->bounced += a->bounced;
    sum->buffered += a->buffered;
    sum->write_zeroes += a->write_zeroes;
    sum->nowait += a->nowait;
}

void aiol_vhost_blk_stats_get(const aiol_vhost_blk *blk,
                              aiol_vhost_blk_stats *out)
{
    aiol__vhost_check(blk != NULL && out != NULL, "NULL argument");
    memset(out, 0, sizeof(*out));
    /* (the loops serving queues wait while their counters are read; a
       context that serves none has nothing in flight) */
    aiol__vhost_park(blk->dev);
    for (unsigned i = 0; i < blk->nctx; i++) {
        stats_add(out, &blk->ctx[i]->st);
    }
    aiol__vhost_unpark(blk->dev);
}

void aiol_vhost_blk_free(aiol_vhost_blk *blk)
{
    if (blk == NULL) {
        return;
    }
    aiol_vhost_dev_free(blk->dev); /* (its queues stop: drained) */
    ctxs_free(blk);
    aiol__vblk_image_fini(blk);
    free(blk);
}
