/*
 * blk.c - the vhost-user-blk device (aioloop/vhost-blk.h).
 *
 * A request is one descriptor chain (virtio 1.x, 5.2.6): a 16-byte
 * struct virtio_blk_outhdr at the start of the device-readable part, the
 * data (readable for writes and discards, writable for reads and
 * get-id), and one status byte at the very end of the writable part.
 * Any of these may be split across descriptors at any byte, so the
 * header is gathered and the data sliced out of the chain's iovecs.
 *
 * Everything runs on the loop's thread, synchronously: preadv/pwritev,
 * fdatasync, fallocate.  A kick pops every available chain, completes
 * each, and notifies once.
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <linux/virtio_blk.h>

#include "aioloop/vhost-blk.h"
#include "internal.h"

#define SECTOR 512u
#define HDR_LEN 16u      /* struct virtio_blk_outhdr */
#define ID_LEN 20u       /* VIRTIO_BLK_ID_BYTES */
#define SEG_MAX 126u     /* data segments a request may have (config) */

struct aiol_vhost_blk {
    aiol_vhost_dev *dev;
    int fd;                    /* the image; not ours to close */
    uint64_t sectors;          /* capacity */
    bool read_only;
    unsigned num_queues;
    char serial[ID_LEN];
    aiol_vhost_blk_stats st;   /* loop's thread */
    struct iovec *iov;         /* a popped chain: AIOL_VHOST_MAX_RING */
    struct iovec data[SEG_MAX + 2]; /* the data part of it */
};

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

/* preadv/pwritev until all of @len moved; 0 or -errno (-EIO if short). */
static int do_io(int fd, struct iovec *v, int n, uint64_t off, uint64_t len,
                 bool write)
{
    while (len > 0) {
        ssize_t r = write ? pwritev(fd, v, n, (off_t)off)
                          : preadv(fd, v, n, (off_t)off);

        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r < 0) {
            return -errno;
        }
        if (r == 0) {
            return -EIO; /* the file shrank under us */
        }
        off += (uint64_t)r;
        len -= (uint64_t)r;
        while (n > 0 && (size_t)r >= v->iov_len) {
            r -= (ssize_t)v->iov_len;
            v++;
            n--;
        }
        if (n > 0) {
            v->iov_base = (uint8_t *)v->iov_base + r;
            v->iov_len -= (size_t)r;
        }
    }
    return 0;
}

/* ---------------------------------------------------------- requests */

static bool in_range(const aiol_vhost_blk *b, uint64_t sector,
                     uint64_t nsect)
{
    return sector <= b->sectors && nsect <= b->sectors - sector;
}

/* Runs the data part of a read or write; a VIRTIO_BLK_S_* status. */
static uint8_t rw(aiol_vhost_blk *b, const aiol_vhost_elem *e,
                  uint64_t sector, bool write, uint64_t *written)
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
    k = iov_slice(base, n, write ? HDR_LEN : 0, len, b->data, SEG_MAX + 2);
    if (k < 0 || (len > 0 &&
                  do_io(b->fd, b->data, k, sector * SECTOR, len, write) < 0)) {
        return VIRTIO_BLK_S_IOERR;
    }
    if (!write) {
        *written = len;
    }
    return VIRTIO_BLK_S_OK;
}

static uint8_t discard(aiol_vhost_blk *b, const aiol_vhost_elem *e)
{
    struct virtio_blk_discard_write_zeroes seg;
    uint64_t sector, nsect;

    if (b->read_only) {
        return VIRTIO_BLK_S_IOERR;
    }
    /* one segment (max_discard_seg 1), exactly */
    if (e->out_len - HDR_LEN != sizeof(seg) ||
        !iov_read(e->iov, e->out_num, HDR_LEN, &seg, sizeof(seg))) {
        return VIRTIO_BLK_S_IOERR;
    }
    sector = le64toh(seg.sector);
    nsect = le32toh(seg.num_sectors);
    if (le32toh(seg.flags) & ~VIRTIO_BLK_WRITE_ZEROES_FLAG_UNMAP ||
        !in_range(b, sector, nsect)) {
        return VIRTIO_BLK_S_IOERR;
    }
    if (nsect > 0 &&
        fallocate(b->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                  (off_t)(sector * SECTOR), (off_t)(nsect * SECTOR)) < 0) {
        return errno == EOPNOTSUPP ? VIRTIO_BLK_S_UNSUPP : VIRTIO_BLK_S_IOERR;
    }
    return VIRTIO_BLK_S_OK;
}

/* Serves one popped chain; returns the bytes written into it. */
static uint32_t serve(aiol_vhost_blk *b, const aiol_vhost_elem *e)
{
    struct virtio_blk_outhdr h;
    const struct iovec *last;
    uint64_t written = 0;
    uint8_t status, *status_p;

    if (e->in_num == 0 || e->in_len < 1) {
        /* no status byte to answer in: nothing to write */
        b->st.ioerr++;
        return 0;
    }
    last = &e->iov[e->out_num + e->in_num - 1];
    if (last->iov_len == 0) {
        b->st.ioerr++;
        return 0;
    }
    status_p = (uint8_t *)last->iov_base + last->iov_len - 1;
    if (e->out_len < HDR_LEN ||
        !iov_read(e->iov, e->out_num, 0, &h, sizeof(h))) {
        status = VIRTIO_BLK_S_IOERR;
    } else {
        switch (le32toh(h.type)) {
        case VIRTIO_BLK_T_IN:
            b->st.reads++;
            status = rw(b, e, le64toh(h.sector), false, &written);
            break;
        case VIRTIO_BLK_T_OUT:
            b->st.writes++;
            status = rw(b, e, le64toh(h.sector), true, &written);
            break;
        case VIRTIO_BLK_T_FLUSH:
            b->st.flushes++;
            status = fdatasync(b->fd) == 0 ? VIRTIO_BLK_S_OK
                                           : VIRTIO_BLK_S_IOERR;
            break;
        case VIRTIO_BLK_T_GET_ID: {
            uint64_t room = e->in_len - 1;
            size_t n = room < ID_LEN ? (size_t)room : ID_LEN;
            int k = iov_slice(e->iov + e->out_num, e->in_num, 0, n, b->data,
                              SEG_MAX + 2);
            size_t at = 0;

            b->st.get_ids++;
            for (int i = 0; i < k; i++) {
                memcpy(b->data[i].iov_base, b->serial + at,
                       b->data[i].iov_len);
                at += b->data[i].iov_len;
            }
            written = at;
            status = k < 0 ? VIRTIO_BLK_S_IOERR : VIRTIO_BLK_S_OK;
            break;
        }
        case VIRTIO_BLK_T_DISCARD:
            b->st.discards++;
            status = discard(b, e);
            break;
        default:
            status = VIRTIO_BLK_S_UNSUPP;
            break;
        }
    }
    b->st.ioerr += status == VIRTIO_BLK_S_IOERR;
    b->st.unsupp += status == VIRTIO_BLK_S_UNSUPP;
    *status_p = status;
    return (uint32_t)(written + 1);
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
        f |= 1ull << VIRTIO_BLK_F_DISCARD;
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
    c.blk_size = htole32(SECTOR);
    c.num_queues = htole16((uint16_t)b->num_queues);
    c.max_discard_sectors = htole32(UINT32_MAX);
    c.max_discard_seg = htole32(1);
    c.discard_sector_alignment = htole32(1);
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
    aiol_vhost_blk *b = opaque;
    aiol_vhost_elem e = { .iov = b->iov, .iov_cap = AIOL_VHOST_MAX_RING };

    while (aiol_vhost_vq_pop(vq, &e) == 1) {
        aiol_vhost_vq_push(vq, &e, serve(b, &e));
    }
    aiol_vhost_vq_notify(vq);
}

static const aiol_vhost_dev_ops blk_ops = {
    .get_features = blk_features,
    .get_config = blk_get_config,
    .set_config = blk_set_config,
    .queue = blk_queue,
};

/* --------------------------------------------------------- lifetime */

int aiol_vhost_blk_new(aiol_loop *loop, int fd,
                       const aiol_vhost_blk_opts *opts, aiol_vhost_blk **out)
{
    aiol_vhost_blk *b;
    struct stat st;
    int r;

    aiol__vhost_check(loop != NULL && opts != NULL && out != NULL,
                      "NULL argument");
    if (opts->num_queues < 1 || opts->num_queues > 64 || fd < 0) {
        return -EINVAL;
    }
    if (fstat(fd, &st) < 0) {
        return -errno;
    }
    b = calloc(1, sizeof(*b));
    if (b == NULL) {
        return -ENOMEM;
    }
    b->iov = calloc(AIOL_VHOST_MAX_RING, sizeof(*b->iov));
    if (b->iov == NULL) {
        free(b);
        return -ENOMEM;
    }
    b->fd = fd;
    b->sectors = (uint64_t)st.st_size / SECTOR;
    b->read_only = opts->read_only;
    b->num_queues = opts->num_queues;
    {
        const char *id = opts->serial != NULL ? opts->serial : "aioloop";

        memcpy(b->serial, id, strnlen(id, ID_LEN)); /* (zero-padded) */
    }
    r = aiol_vhost_dev_new(loop, &blk_ops, b, opts->num_queues, &b->dev);
    if (r < 0) {
        free(b->iov);
        free(b);
        return r;
    }
    *out = b;
    return 0;
}

aiol_vhost_dev *aiol_vhost_blk_dev(aiol_vhost_blk *blk)
{
    aiol__vhost_check(blk != NULL, "NULL device");
    return blk->dev;
}

void aiol_vhost_blk_get_stats(const aiol_vhost_blk *blk,
                              aiol_vhost_blk_stats *out)
{
    aiol__vhost_check(blk != NULL && out != NULL, "NULL argument");
    *out = blk->st;
}

void aiol_vhost_blk_free(aiol_vhost_blk *blk)
{
    if (blk == NULL) {
        return;
    }
    aiol_vhost_dev_free(blk->dev);
    free(blk->iov);
    free(blk);
}
