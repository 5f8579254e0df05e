/* SPDX-License-Identifier: MIT */
/* fake_kvm.c - see fake_kvm.h. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "fake_kvm.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_IOEV 8192
#define MAX_IRQFD 8192
#define MAX_ROUTES 4096 /* KVM_MAX_IRQ_ROUTES on x86 */
#define MAX_DELIV 8192
#define FAKE_VM_FD 1000000 /* never a real fd */
#define MAX_LOG 65536

typedef struct fk_ioev {
    int fd;
    bool pio, wildcard;
    uint64_t addr, datamatch;
    uint32_t len;
} fk_ioev;

typedef struct fk_irqfd {
    int fd;
    uint32_t gsi;
} fk_irqfd;

struct fake_kvm {
    pthread_mutex_t lock; /* everything below */
    uint32_t limit;
    long counts[FK_NCALLS];
    int fail_kind;        /* -1: disarmed */
    long fail_left;
    int fail_err;
    fk_ioev ioev[MAX_IOEV];
    size_t nioev;
    fk_irqfd irqfd[MAX_IRQFD];
    size_t nirqfd;
    bool msi_on[MAX_ROUTES];
    aiol_vmm_msi_msg msi[MAX_ROUTES];
    size_t nroutes;       /* entries of the last table, any type */
    fk_delivery deliv[MAX_DELIV];
    size_t ndeliv;
    bool seen[MAX_ROUTES]; /* do_routing's scratch */
    uint8_t log[MAX_LOG];  /* kinds of the calls, in order */
    size_t nlog;
};

static bool fd_open(int fd)
{
    return fd >= 0 && fcntl(fd, F_GETFD) >= 0;
}

static bool fd_is_eventfd(int fd)
{
    char path[64], buf[64];
    ssize_t n;

    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    n = readlink(path, buf, sizeof(buf) - 1);
    if (n < 0) {
        return false;
    }
    buf[n] = '\0';
    return strcmp(buf, "anon_inode:[eventfd]") == 0;
}

/* EBADF / EINVAL as eventfd_ctx_fdget() gives them, or 0. */
static int check_eventfd(int fd)
{
    if (!fd_open(fd)) {
        return -EBADF;
    }
    return fd_is_eventfd(fd) ? 0 : -EINVAL;
}

/* Counts a call; true when the armed fault fails it. */
static bool count_call(fake_kvm *fk, fk_call kind)
{
    fk->counts[kind]++;
    if (kind != FK_CHECK_EXTENSION && fk->nlog < MAX_LOG) {
        fk->log[fk->nlog++] = (uint8_t)kind;
    }
    if (fk->fail_kind < 0 || kind == FK_CHECK_EXTENSION ||
        (fk->fail_kind != FK_ANY && fk->fail_kind != (int)kind)) {
        return false;
    }
    if (--fk->fail_left == 0) {
        fk->fail_kind = -1;
        return true;
    }
    return false;
}

static bool ioev_collides(const fk_ioev *a, const fk_ioev *b)
{
    return a->pio == b->pio && a->addr == b->addr &&
           (a->len == 0 || b->len == 0 ||
            (a->len == b->len &&
             (a->wildcard || b->wildcard || a->datamatch == b->datamatch)));
}

static int do_ioeventfd(fake_kvm *fk, const struct kvm_ioeventfd *a)
{
    const uint32_t valid = KVM_IOEVENTFD_FLAG_DATAMATCH |
                           KVM_IOEVENTFD_FLAG_PIO |
                           KVM_IOEVENTFD_FLAG_DEASSIGN;
    bool deassign = a->flags & KVM_IOEVENTFD_FLAG_DEASSIGN;
    fk_ioev e = { .fd = a->fd,
                  .pio = (a->flags & KVM_IOEVENTFD_FLAG_PIO) != 0,
                  .wildcard = !(a->flags & KVM_IOEVENTFD_FLAG_DATAMATCH),
                  .addr = a->addr,
                  .datamatch = a->datamatch,
                  .len = a->len };
    int r;

    if (count_call(fk, deassign ? FK_IOEVENTFD_DEASSIGN
                                : FK_IOEVENTFD_ASSIGN)) {
        return -fk->fail_err;
    }
    if (deassign) {
        r = check_eventfd(a->fd);
        if (r < 0) {
            return r;
        }
        for (size_t i = 0; i < fk->nioev; i++) {
            fk_ioev *p = &fk->ioev[i];

            if (p->fd == e.fd && p->pio == e.pio && p->addr == e.addr &&
                p->len == e.len && p->wildcard == e.wildcard &&
                (p->wildcard || p->datamatch == e.datamatch)) {
                *p = fk->ioev[--fk->nioev];
                return 0;
            }
        }
        return -ENOENT;
    }
    switch (a->len) {
    case 0: case 1: case 2: case 4: case 8:
        break;
    default:
        return -EINVAL;
    }
    if (a->addr + a->len < a->addr || (a->flags & ~valid) ||
        (a->len == 0 && !e.wildcard)) {
        return -EINVAL;
    }
    r = check_eventfd(a->fd);
    if (r < 0) {
        return r;
    }
    for (size_t i = 0; i < fk->nioev; i++) {
        if (ioev_collides(&fk->ioev[i], &e)) {
            return -EEXIST;
        }
    }
    if (fk->nioev == MAX_IOEV) {
        return -ENOSPC;
    }
    fk->ioev[fk->nioev++] = e;
    return 0;
}

static int do_routing(fake_kvm *fk, const struct kvm_irq_routing *rt)
{
    bool *seen = fk->seen;
    int r = 0;

    if (count_call(fk, FK_SET_GSI_ROUTING)) {
        return -fk->fail_err;
    }
    if (rt->nr > fk->limit || rt->flags != 0) {
        return -EINVAL;
    }
    memset(fk->seen, 0, sizeof(fk->seen));
    for (uint32_t i = 0; i < rt->nr && r == 0; i++) {
        const struct kvm_irq_routing_entry *e = &rt->entries[i];

        if (e->gsi >= fk->limit || e->flags != 0) {
            r = -EINVAL;
        } else if (e->type == KVM_IRQ_ROUTING_MSI) {
            r = seen[e->gsi] ? -EINVAL : 0;
            seen[e->gsi] = true;
        } else if (e->type != KVM_IRQ_ROUTING_IRQCHIP) {
            r = -EINVAL;
        }
    }
    if (r < 0) {
        return r;
    }
    memset(fk->msi_on, 0, sizeof(fk->msi_on));
    for (uint32_t i = 0; i < rt->nr; i++) {
        const struct kvm_irq_routing_entry *e = &rt->entries[i];

        if (e->type == KVM_IRQ_ROUTING_MSI) {
            fk->msi_on[e->gsi] = true;
            fk->msi[e->gsi] = (aiol_vmm_msi_msg){ e->u.msi.address_lo,
                                              e->u.msi.address_hi,
                                              e->u.msi.data };
        }
    }
    fk->nroutes = rt->nr;
    return 0;
}

static int do_irqfd(fake_kvm *fk, const struct kvm_irqfd *a)
{
    bool deassign = a->flags & KVM_IRQFD_FLAG_DEASSIGN;
    int fd = (int)a->fd, r;

    if (count_call(fk, deassign ? FK_IRQFD_DEASSIGN : FK_IRQFD_ASSIGN)) {
        return -fk->fail_err;
    }
    if (a->flags & ~(uint32_t)(KVM_IRQFD_FLAG_DEASSIGN |
                               KVM_IRQFD_FLAG_RESAMPLE)) {
        return -EINVAL;
    }
    r = check_eventfd(fd);
    if (r < 0) {
        return r;
    }
    for (size_t i = 0; i < fk->nirqfd; i++) {
        if (fk->irqfd[i].fd != fd) {
            continue;
        }
        if (!deassign) {
            return -EBUSY;
        }
        if (fk->irqfd[i].gsi == a->gsi) {
            fk->irqfd[i] = fk->irqfd[--fk->nirqfd];
            return 0;
        }
    }
    if (deassign) {
        return 0;  /* KVM: nothing matched is not an error */
    }
    if (fk->nirqfd == MAX_IRQFD) {
        return -ENOSPC;
    }
    fk->irqfd[fk->nirqfd++] = (fk_irqfd){ fd, a->gsi };
    return 0;
}

static int fk_ioctl(void *opaque, int fd, unsigned long request, void *arg)
{
    fake_kvm *fk = opaque;
    int r;

    if (fd != FAKE_VM_FD) {
        return -EBADF;
    }
    pthread_mutex_lock(&fk->lock);
    switch (request) {
    case KVM_IOEVENTFD:
        r = do_ioeventfd(fk, arg);
        break;
    case KVM_SET_GSI_ROUTING:
        r = do_routing(fk, arg);
        break;
    case KVM_IRQFD:
        r = do_irqfd(fk, arg);
        break;
    case KVM_CHECK_EXTENSION:
        count_call(fk, FK_CHECK_EXTENSION);
        r = (uintptr_t)arg == KVM_CAP_IRQ_ROUTING ? (int)fk->limit : 0;
        break;
    default:
        count_call(fk, FK_OTHER);
        r = -ENOTTY;
        break;
    }
    pthread_mutex_unlock(&fk->lock);
    return r;
}

static const aiol_vmm_kvm_ops fk_ops = { .ioctl = fk_ioctl };

fake_kvm *fk_new(void)
{
    fake_kvm *fk = calloc(1, sizeof(*fk));

    if (fk == NULL) {
        fprintf(stderr, "fake_kvm: out of memory\n");
        abort();
    }
    pthread_mutex_init(&fk->lock, NULL);
    fk->limit = MAX_ROUTES;
    fk->fail_kind = -1;
    return fk;
}

void fk_free(fake_kvm *fk)
{
    if (fk != NULL) {
        pthread_mutex_destroy(&fk->lock);
        free(fk);
    }
}

aiol_vmm_kvm fk_kvm(fake_kvm *fk)
{
    return (aiol_vmm_kvm){ .ops = &fk_ops, .opaque = fk, .vm_fd = FAKE_VM_FD };
}

void fk_set_route_limit(fake_kvm *fk, uint32_t limit)
{
    pthread_mutex_lock(&fk->lock);
    fk->limit = limit < MAX_ROUTES ? limit : MAX_ROUTES;
    pthread_mutex_unlock(&fk->lock);
}

long fk_count(fake_kvm *fk, fk_call kind)
{
    long n;

    pthread_mutex_lock(&fk->lock);
    n = fk->counts[kind];
    pthread_mutex_unlock(&fk->lock);
    return n;
}

long fk_total(fake_kvm *fk)
{
    long n = 0;

    for (int k = 0; k < FK_NCALLS; k++) {
        if (k != FK_CHECK_EXTENSION) {
            n += fk_count(fk, (fk_call)k);
        }
    }
    return n;
}

void fk_reset_counts(fake_kvm *fk)
{
    pthread_mutex_lock(&fk->lock);
    memset(fk->counts, 0, sizeof(fk->counts));
    fk->nlog = 0;
    pthread_mutex_unlock(&fk->lock);
}

void fk_fail_at(fake_kvm *fk, fk_call kind, long k, int err)
{
    pthread_mutex_lock(&fk->lock);
    fk->fail_kind = (int)kind;
    fk->fail_left = k;
    fk->fail_err = err;
    pthread_mutex_unlock(&fk->lock);
}

void fk_disarm(fake_kvm *fk)
{
    pthread_mutex_lock(&fk->lock);
    fk->fail_kind = -1;
    pthread_mutex_unlock(&fk->lock);
}

bool fk_guest_write(fake_kvm *fk, bool pio, uint64_t addr, uint32_t len,
                    uint64_t data)
{
    uint64_t one = 1;
    int fd = -1;

    pthread_mutex_lock(&fk->lock);
    for (size_t i = 0; i < fk->nioev; i++) {
        const fk_ioev *p = &fk->ioev[i];

        if (p->pio == pio && p->addr == addr &&
            (p->len == 0 || p->len == len) &&
            (p->wildcard || p->datamatch == data)) {
            fd = p->fd;
            break;
        }
    }
    if (fd >= 0 && write(fd, &one, sizeof(one)) != sizeof(one)) {
        fd = -1;
    }
    pthread_mutex_unlock(&fk->lock);
    return fd >= 0;
}

int fk_pump(fake_kvm *fk)
{
    int n = 0;

    pthread_mutex_lock(&fk->lock);
    for (size_t i = 0; i < fk->nirqfd; i++) {
        uint64_t v;
        uint32_t g = fk->irqfd[i].gsi;

        if (read(fk->irqfd[i].fd, &v, sizeof(v)) == sizeof(v) && v > 0 &&
            fk->ndeliv < MAX_DELIV) {
            fk_delivery *d = &fk->deliv[fk->ndeliv++];

            d->gsi = g;
            d->routed = g < MAX_ROUTES && fk->msi_on[g];
            d->msg = d->routed ? fk->msi[g] : (aiol_vmm_msi_msg){ 0, 0, 0 };
            n++;
        }
    }
    pthread_mutex_unlock(&fk->lock);
    return n;
}

size_t fk_deliveries(fake_kvm *fk, fk_delivery *out, size_t max)
{
    size_t n;

    pthread_mutex_lock(&fk->lock);
    n = fk->ndeliv;
    if (out != NULL) {
        memcpy(out, fk->deliv, (n < max ? n : max) * sizeof(*out));
    }
    pthread_mutex_unlock(&fk->lock);
    return n;
}

void fk_clear_deliveries(fake_kvm *fk)
{
    pthread_mutex_lock(&fk->lock);
    fk->ndeliv = 0;
    pthread_mutex_unlock(&fk->lock);
}

size_t fk_ioeventfd_count(fake_kvm *fk)
{
    size_t n;

    pthread_mutex_lock(&fk->lock);
    n = fk->nioev;
    pthread_mutex_unlock(&fk->lock);
    return n;
}

bool fk_ioeventfd_has(fake_kvm *fk, int fd, const aiol_vmm_ioev_match *m)
{
    bool found = false;

    pthread_mutex_lock(&fk->lock);
    for (size_t i = 0; i < fk->nioev && !found; i++) {
        const fk_ioev *p = &fk->ioev[i];

        found = p->fd == fd && p->pio == m->pio && p->addr == m->addr &&
                p->len == m->len && p->wildcard == !m->datamatch &&
                (p->wildcard || p->datamatch == m->data);
    }
    pthread_mutex_unlock(&fk->lock);
    return found;
}

size_t fk_irqfd_count(fake_kvm *fk)
{
    size_t n;

    pthread_mutex_lock(&fk->lock);
    n = fk->nirqfd;
    pthread_mutex_unlock(&fk->lock);
    return n;
}

bool fk_irqfd_has(fake_kvm *fk, int fd, uint32_t gsi)
{
    bool found = false;

    pthread_mutex_lock(&fk->lock);
    for (size_t i = 0; i < fk->nirqfd && !found; i++) {
        found = fk->irqfd[i].fd == fd && fk->irqfd[i].gsi == gsi;
    }
    pthread_mutex_unlock(&fk->lock);
    return found;
}

size_t fk_route_count(fake_kvm *fk)
{
    size_t n;

    pthread_mutex_lock(&fk->lock);
    n = fk->nroutes;
    pthread_mutex_unlock(&fk->lock);
    return n;
}

bool fk_route(fake_kvm *fk, uint32_t gsi, aiol_vmm_msi_msg *msg)
{
    bool on;

    pthread_mutex_lock(&fk->lock);
    on = gsi < MAX_ROUTES && fk->msi_on[gsi];
    if (on && msg != NULL) {
        *msg = fk->msi[gsi];
    }
    pthread_mutex_unlock(&fk->lock);
    return on;
}

size_t fk_stale_fds(fake_kvm *fk)
{
    size_t n = 0;

    pthread_mutex_lock(&fk->lock);
    for (size_t i = 0; i < fk->nioev; i++) {
        n += check_eventfd(fk->ioev[i].fd) != 0;
    }
    for (size_t i = 0; i < fk->nirqfd; i++) {
        n += check_eventfd(fk->irqfd[i].fd) != 0;
    }
    pthread_mutex_unlock(&fk->lock);
    return n;
}

size_t fk_log(fake_kvm *fk, fk_call *out, size_t max)
{
    size_t n;

    pthread_mutex_lock(&fk->lock);
    n = fk->nlog;
    for (size_t i = 0; i < n && i < max; i++) {
        out[i] = (fk_call)fk->log[i];
    }
    pthread_mutex_unlock(&fk->lock);
    return n;
}
