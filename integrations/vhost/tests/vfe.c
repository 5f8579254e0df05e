/* SPDX-License-Identifier: MIT */
/*
 * vfe.c - the host-side vhost-user test frontend (see vfe.h).  Written
 * from the vhost-user and virtio 1.x specifications; its wire layouts are
 * its own, not shared with the backend, so a layout bug on either side
 * shows up as a failing test.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "aioloop/vhost.h"
#include "vfe.h"

#define WAIT_ROUNDS 4000

void vfe_pump(vfe *f, int n)
{
    for (int i = 0; i < n; i++) {
        f->pump(f->pump_opaque);
    }
}

static bool wait_readable(vfe *f, int fd)
{
    for (int i = 0; i < WAIT_ROUNDS; i++) {
        struct pollfd p = { .fd = fd, .events = POLLIN };

        if (poll(&p, 1, 0) > 0) {
            return true;
        }
        f->pump(f->pump_opaque);
        if (i > 200) {
            usleep(100);
        }
    }
    return false;
}

int vfe_connect(vfe *f, const char *path, vfe_pump_fn *pump, void *opaque)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };

    memset(f, 0, sizeof(*f));
    f->memfd = -1;
    for (unsigned i = 0; i < VFE_MAX_VQ; i++) {
        f->vq[i].kick = f->vq[i].call = f->vq[i].err = -1;
    }
    f->pump = pump;
    f->pump_opaque = opaque;
    f->want_packed = getenv("VFE_RING") != NULL &&
                     strcmp(getenv("VFE_RING"), "packed") == 0;
    strncpy(sa.sun_path, path, sizeof(sa.sun_path) - 1);
    f->sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (f->sock < 0) {
        return -errno;
    }
    if (connect(f->sock, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        int e = errno;

        close(f->sock);
        f->sock = -1;
        return -e;
    }
    return 0;
}

static void close_fd(int *fd)
{
    if (*fd >= 0) {
        close(*fd);
        *fd = -1;
    }
}

void vfe_close(vfe *f)
{
    close_fd(&f->sock);
    for (unsigned i = 0; i < VFE_MAX_VQ; i++) {
        close_fd(&f->vq[i].kick);
        close_fd(&f->vq[i].call);
        close_fd(&f->vq[i].err);
    }
    if (f->mem != NULL) {
        munmap(f->mem, f->mem_size);
        f->mem = NULL;
    }
    close_fd(&f->memfd);
}

int vfe_send_raw(vfe *f, const void *buf, size_t len, const int *fds,
                 unsigned nfds)
{
    union {
        char b[CMSG_SPACE(16 * sizeof(int))];
        struct cmsghdr align;
    } ctl;
    struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
    struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
    ssize_t n;

    if (nfds > 16) {
        return -EINVAL;
    }
    if (nfds > 0) {
        struct cmsghdr *c;

        memset(&ctl, 0, sizeof(ctl));
        mh.msg_control = ctl.b;
        mh.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
        c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(nfds * sizeof(int));
        memcpy(CMSG_DATA(c), fds, nfds * sizeof(int));
    }
    n = sendmsg(f->sock, &mh, MSG_NOSIGNAL);
    if (n < 0) {
        return -errno;
    }
    return (size_t)n == len ? 0 : -EIO;
}

int vfe_send(vfe *f, uint32_t req, uint32_t flags, const void *payload,
             uint32_t size, const int *fds, unsigned nfds)
{
    uint8_t buf[12 + 4096];
    uint32_t h[3] = { req, flags | AIOL__VHOST_FLAG_VERSION, size };

    if (size > 4096) {
        return -EINVAL;
    }
    memcpy(buf, h, 12);
    if (size > 0) {
        memcpy(buf + 12, payload, size);
    }
    return vfe_send_raw(f, buf, 12 + size, fds, nfds);
}

static int read_full(vfe *f, void *p, size_t len)
{
    size_t got = 0;

    while (got < len) {
        ssize_t n;

        if (!wait_readable(f, f->sock)) {
            return -ETIMEDOUT;
        }
        n = recv(f->sock, (uint8_t *)p + got, len - got, MSG_DONTWAIT);
        if (n == 0) {
            return -EPIPE;
        }
        if (n < 0) {
            if (errno == EAGAIN || errno == EINTR) {
                continue;
            }
            return -errno;
        }
        got += (size_t)n;
    }
    return 0;
}

int vfe_recv(vfe *f, uint32_t req, void *payload, uint32_t cap)
{
    uint32_t h[3];
    uint8_t junk[4096];
    int r = read_full(f, h, sizeof(h));

    if (r < 0) {
        return r;
    }
    if (h[0] != req || (h[1] & AIOL__VHOST_FLAG_REPLY) == 0 ||
        (h[1] & 3) != 1 || h[2] > sizeof(junk)) {
        return -EPROTO;
    }
    if ((r = read_full(f, junk, h[2])) < 0) {
        return r;
    }
    memcpy(payload, junk, h[2] < cap ? h[2] : cap);
    return (int)h[2];
}

int vfe_get_u64(vfe *f, uint32_t req, uint64_t *out)
{
    int r = vfe_send(f, req, 0, NULL, 0, NULL, 0);

    if (r < 0) {
        return r;
    }
    r = vfe_recv(f, req, out, sizeof(*out));
    return r < 0 ? r : r == 8 ? 0 : -EPROTO;
}

int vfe_request_ack(vfe *f, uint32_t req, const void *payload,
                    uint32_t size, const int *fds, unsigned nfds)
{
    uint64_t v;
    int r = vfe_send(f, req, AIOL__VHOST_FLAG_NEED_REPLY, payload, size, fds,
                     nfds);

    if (r < 0) {
        return r;
    }
    if ((r = vfe_recv(f, req, &v, sizeof(v))) < 0) {
        return r;
    }
    return r != 8 ? -EPROTO : -(int)v;
}

int vfe_set_u64(vfe *f, uint32_t req, uint64_t v, bool ack)
{
    return ack ? vfe_request_ack(f, req, &v, 8, NULL, 0)
               : vfe_send(f, req, 0, &v, 8, NULL, 0);
}

int vfe_vring_state(vfe *f, uint32_t req, uint32_t idx, uint32_t num,
                    bool ack)
{
    uint32_t s[2] = { idx, num };

    return ack ? vfe_request_ack(f, req, s, 8, NULL, 0)
               : vfe_send(f, req, 0, s, 8, NULL, 0);
}

bool vfe_dropped(vfe *f)
{
    for (int i = 0; i < 200; i++) {
        char c;
        ssize_t n = recv(f->sock, &c, 1, MSG_DONTWAIT | MSG_PEEK);

        if (n == 0 || (n < 0 && errno == ECONNRESET)) {
            return true;
        }
        f->pump(f->pump_opaque);
    }
    return false;
}

int vfe_negotiate(vfe *f, uint64_t features, uint64_t protocol)
{
    uint64_t v;
    int r;

    if ((r = vfe_get_u64(f, AIOL__VHOST_GET_FEATURES, &v)) < 0) {
        return r;
    }
    f->features = v & features;
    if (!f->want_packed) {
        f->features &= ~(1ull << AIOL__VHOST_F_RING_PACKED);
    }
    if ((r = vfe_set_u64(f, AIOL__VHOST_SET_FEATURES, f->features,
                         false)) < 0) {
        return r;
    }
    if (f->features & (1ull << AIOL__VHOST_F_PROTOCOL_FEATURES)) {
        if ((r = vfe_get_u64(f, AIOL__VHOST_GET_PROTOCOL_FEATURES, &v)) < 0) {
            return r;
        }
        f->protocol = v & protocol;
        if ((r = vfe_set_u64(f, AIOL__VHOST_SET_PROTOCOL_FEATURES,
                             f->protocol, false)) < 0) {
            return r;
        }
    }
    return vfe_send(f, AIOL__VHOST_SET_OWNER, 0, NULL, 0, NULL, 0);
}

int vfe_mem_create(vfe *f, size_t size, unsigned nregions)
{
    size_t per = size / nregions;

    f->memfd = memfd_create("vfe-guest-ram", MFD_CLOEXEC);
    if (f->memfd < 0 || ftruncate(f->memfd, (off_t)size) != 0) {
        return -errno;
    }
    f->mem = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, f->memfd,
                  0);
    if (f->mem == MAP_FAILED) {
        f->mem = NULL;
        return -errno;
    }
    f->mem_size = size;
    f->nregions = nregions;
    for (unsigned i = 0; i < nregions; i++) {
        f->reg[i].gpa = (uint64_t)i << 32;
        f->reg[i].size = per;
        f->reg[i].off = per * i;
        f->reg[i].uva = (uint64_t)(uintptr_t)(f->mem + per * i);
        f->reg[i].brk = 0;
    }
    return 0;
}

int vfe_set_mem_table(vfe *f, bool ack)
{
    uint8_t p[8 + 32 * VFE_MAX_REGIONS];
    int fds[VFE_MAX_REGIONS];
    uint32_t n = f->nregions;

    memset(p, 0, sizeof(p));
    memcpy(p, &n, 4);
    for (unsigned i = 0; i < n; i++) {
        uint64_t v[4] = { f->reg[i].gpa, f->reg[i].size, f->reg[i].uva,
                          f->reg[i].off };

        memcpy(p + 8 + 32 * i, v, 32);
        fds[i] = f->memfd;
    }
    return ack ? vfe_request_ack(f, AIOL__VHOST_SET_MEM_TABLE, p, 8 + 32 * n,
                                 fds, n)
               : vfe_send(f, AIOL__VHOST_SET_MEM_TABLE, 0, p, 8 + 32 * n, fds,
                          n);
}

void *vfe_gpa(vfe *f, uint64_t gpa)
{
    for (unsigned i = 0; i < f->nregions; i++) {
        if (gpa >= f->reg[i].gpa && gpa - f->reg[i].gpa < f->reg[i].size) {
            return f->mem + f->reg[i].off + (gpa - f->reg[i].gpa);
        }
    }
    return NULL;
}

uint64_t vfe_alloc(vfe *f, unsigned r, size_t len, size_t align)
{
    vfe_region *g = &f->reg[r];
    uint64_t at = (g->brk + align - 1) / align * align;

    if (at + len > g->size) {
        return UINT64_MAX;
    }
    g->brk = at + len;
    return g->gpa + at;
}

static uint64_t uva_of(vfe *f, uint64_t gpa)
{
    return (uint64_t)(uintptr_t)vfe_gpa(f, gpa);
}

static uint64_t read_efd(int fd)
{
    uint64_t v = 0;

    if (fd < 0 || read(fd, &v, 8) != 8) {
        return 0;
    }
    return v;
}

bool vfe_packed(const vfe *f)
{
    return (f->features >> AIOL__VHOST_F_RING_PACKED) & 1;
}

unsigned vfe_ring_units(const vfe *f, unsigned chains, unsigned per)
{
    return vfe_packed(f) ? chains * per : chains;
}

int vfe_vq_setup(vfe *f, unsigned idx, uint16_t num, bool call_nofd)
{
    vfe_vq *q = &f->vq[idx];
    uint8_t a[40];
    uint32_t h[2] = { idx, 0 };
    uint64_t v[4], arg;
    bool packed = vfe_packed(f);
    size_t alen = packed ? 4 : 6u + 2u * num;
    size_t ulen = packed ? 4 : 6u + 8u * num;
    int r;

    if (packed && num > VFE_PACKED_MAX) {
        return -E2BIG;
    }
    q->num = num;
    q->packed = packed;
    q->desc_gpa = vfe_alloc(f, 0, 16u * num, 16);
    q->avail_gpa = vfe_alloc(f, 0, alen, packed ? 4 : 2);
    q->used_gpa = vfe_alloc(f, 0, ulen, 4);
    q->desc = vfe_gpa(f, q->desc_gpa);
    q->avail = vfe_gpa(f, q->avail_gpa);
    q->used = vfe_gpa(f, q->used_gpa);
    memset(q->desc, 0, 16u * num);
    memset(q->avail, 0, alen);
    memset(q->used, 0, ulen);
    q->avail_idx = q->last_used = q->next_desc = 0;
    vfe_packed_reset(q);
    /* (packed: next descriptor 0 on lap 1, used position the same) */
    if ((r = vfe_vring_state(f, AIOL__VHOST_SET_VRING_NUM, idx, num,
                             false)) < 0 ||
        (r = vfe_vring_state(f, AIOL__VHOST_SET_VRING_BASE, idx,
                             packed ? 0x80008000u : 0, false)) < 0) {
        return r;
    }
    v[0] = uva_of(f, q->desc_gpa);
    v[1] = uva_of(f, q->used_gpa);
    v[2] = uva_of(f, q->avail_gpa);
    v[3] = 0;
    memcpy(a, h, 8);
    memcpy(a + 8, v, 32);
    if ((r = vfe_send(f, AIOL__VHOST_SET_VRING_ADDR, 0, a, 40, NULL, 0)) < 0) {
        return r;
    }
    close_fd(&q->kick);
    close_fd(&q->call);
    close_fd(&q->err);
    q->kick = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    q->err = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    q->call = call_nofd ? -1 : eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    arg = idx;
    if ((r = vfe_send(f, AIOL__VHOST_SET_VRING_ERR, 0, &arg, 8, &q->err,
                      1)) < 0) {
        return r;
    }
    if (call_nofd) {
        arg = idx | AIOL__VHOST_VRING_NOFD_MASK;
        r = vfe_send(f, AIOL__VHOST_SET_VRING_CALL, 0, &arg, 8, NULL, 0);
    } else {
        r = vfe_send(f, AIOL__VHOST_SET_VRING_CALL, 0, &arg, 8, &q->call, 1);
    }
    if (r < 0) {
        return r;
    }
    if (!call_nofd) {
        /* (a reply: the backend has handled SET_VRING_CALL; the signal
           a new call fd gets is read away so that counts start at 0) */
        uint64_t feat;

        if ((r = vfe_get_u64(f, AIOL__VHOST_GET_FEATURES, &feat)) < 0) {
            return r;
        }
        q->call_on_set = read_efd(q->call);
    }
    arg = idx;
    if ((r = vfe_send(f, AIOL__VHOST_SET_VRING_KICK, 0, &arg, 8, &q->kick,
                      1)) < 0) {
        return r;
    }
    if (f->features & (1ull << AIOL__VHOST_F_PROTOCOL_FEATURES)) {
        r = vfe_vring_state(f, AIOL__VHOST_SET_VRING_ENABLE, idx, 1, false);
    }
    return r;
}

static void desc_at(uint8_t *p, uint64_t addr, uint32_t len, uint16_t flags,
                    uint16_t next)
{
    memcpy(p, &addr, 8);
    memcpy(p + 8, &len, 4);
    memcpy(p + 12, &flags, 2);
    memcpy(p + 14, &next, 2);
}

void vfe_desc_write(vfe *f, unsigned idx, uint16_t i, uint64_t addr,
                    uint32_t len, uint16_t flags, uint16_t next)
{
    desc_at(f->vq[idx].desc + 16u * i, addr, len, flags, next);
}

void vfe_ind_write(vfe *f, uint64_t table_gpa, uint16_t i, uint64_t addr,
                   uint32_t len, uint16_t flags, uint16_t next)
{
    desc_at((uint8_t *)vfe_gpa(f, table_gpa) + 16u * i, addr, len, flags,
            next);
}

void vfe_vq_publish(vfe *f, unsigned idx, uint16_t head)
{
    vfe_vq *q = &f->vq[idx];
    uint16_t *ring = (uint16_t *)q->avail;

    ring[2 + q->avail_idx % q->num] = head;
    q->avail_idx++;
    __atomic_store_n(&ring[1], q->avail_idx, __ATOMIC_RELEASE);
}

uint16_t vfe_vq_add(vfe *f, unsigned idx, const vfe_buf *bufs, unsigned n,
                    bool indirect)
{
    vfe_vq *q = &f->vq[idx];
    uint16_t head = q->next_desc % q->num;

    if (q->packed) {
        return vfe_packed_add(f, q, bufs, n, indirect);
    }
    if (indirect) {
        uint64_t t = vfe_alloc(f, 0, 16u * n, 16);

        for (unsigned i = 0; i < n; i++) {
            vfe_ind_write(f, t, (uint16_t)i, bufs[i].gpa, bufs[i].len,
                          (uint16_t)((bufs[i].write ? 2 : 0) |
                                     (i + 1 < n ? 1 : 0)),
                          (uint16_t)(i + 1));
        }
        vfe_desc_write(f, idx, head, t, 16u * n, 4, 0);
        q->next_desc++;
    } else {
        for (unsigned i = 0; i < n; i++) {
            uint16_t d = q->next_desc++ % q->num;

            vfe_desc_write(f, idx, d, bufs[i].gpa, bufs[i].len,
                           (uint16_t)((bufs[i].write ? 2 : 0) |
                                      (i + 1 < n ? 1 : 0)),
                           (uint16_t)(q->next_desc % q->num));
        }
    }
    vfe_vq_publish(f, idx, head);
    return head;
}

void vfe_vq_kick(vfe *f, unsigned idx)
{
    uint64_t one = 1;

    if (write(f->vq[idx].kick, &one, 8) != 8) {
        /* cannot happen with an eventfd below its maximum */
    }
}

int vfe_vq_stop(vfe *f, unsigned idx)
{
    uint32_t s[2] = { idx, 0 };
    int r = vfe_send(f, AIOL__VHOST_GET_VRING_BASE, 0, s, 8, NULL, 0);

    if (r < 0 || (r = vfe_recv(f, AIOL__VHOST_GET_VRING_BASE, s, 8)) < 0) {
        return r;
    }
    if (r != 8 || s[0] != idx) {
        return -EPROTO;
    }
    if (f->vq[idx].packed) {
        return (int)((s[1] & 0x7fff) + (s[1] & 0x8000 ? 0 : f->vq[idx].num));
    }
    return (int)s[1];
}

static uint16_t used_idx(vfe_vq *q)
{
    return __atomic_load_n((uint16_t *)q->used + 1, __ATOMIC_ACQUIRE);
}

int vfe_vq_wait_used(vfe *f, unsigned idx, uint32_t *id, uint32_t *len)
{
    vfe_vq *q = &f->vq[idx];

    for (int i = 0; i < WAIT_ROUNDS; i++) {
        if (q->packed) {
            if (vfe_packed_take_used(q, id, len)) {
                return 0;
            }
        } else if (used_idx(q) != q->last_used) {
            uint32_t e[2];

            memcpy(e, q->used + 4 + 8u * (q->last_used % q->num), 8);
            q->last_used++;
            *id = e[0];
            *len = e[1];
            return 0;
        }
        f->pump(f->pump_opaque);
        if (i > 200) {
            usleep(100); /* (the backend's I/O may run in the kernel's
                            io-wq threads for a while) */
        }
    }
    return -ETIMEDOUT;
}

unsigned vfe_vq_used_pending(vfe *f, unsigned idx)
{
    vfe_pump(f, 20);
    if (f->vq[idx].packed) {
        return vfe_packed_used_pending(&f->vq[idx]);
    }
    return (uint16_t)(used_idx(&f->vq[idx]) - f->vq[idx].last_used);
}

uint64_t vfe_vq_calls(vfe *f, unsigned idx)
{
    return read_efd(f->vq[idx].call);
}

uint64_t vfe_vq_errs(vfe *f, unsigned idx)
{
    return read_efd(f->vq[idx].err);
}

void vfe_vq_set_used_event(vfe *f, unsigned idx, uint16_t v)
{
    vfe_vq *q = &f->vq[idx];

    if (q->packed) {
        vfe_packed_set_used_event(q, v);
        return;
    }
    __atomic_store_n((uint16_t *)q->avail + 2 + q->num, v, __ATOMIC_RELEASE);
}

uint16_t vfe_vq_avail_event(vfe *f, unsigned idx)
{
    vfe_vq *q = &f->vq[idx];

    if (q->packed) {
        return vfe_packed_avail_event(q);
    }
    return __atomic_load_n((uint16_t *)q->used + 2 + 4 * q->num,
                           __ATOMIC_ACQUIRE);
}

void vfe_vq_no_interrupt(vfe *f, unsigned idx, bool on)
{
    uint16_t *flags = (uint16_t *)f->vq[idx].avail;

    if (f->vq[idx].packed) {
        vfe_packed_no_interrupt(&f->vq[idx], on);
        return;
    }
    __atomic_store_n(flags, on ? 1 : 0, __ATOMIC_RELEASE);
}

bool vfe_vq_kicks_off(vfe *f, unsigned idx)
{
    if (f->vq[idx].packed) {
        return !vfe_packed_kicks_wanted(&f->vq[idx]);
    }
    return __atomic_load_n((uint16_t *)f->vq[idx].used, __ATOMIC_ACQUIRE) &
           1;
}
