/* SPDX-License-Identifier: MIT */
/* fake_kvm.c - see fake_kvm.h. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "fake_kvm.h"
#include "kvm_model.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_DELIV 8192
#define FAKE_VM_FD 1000000 /* never a real fd */
#define MAX_LOG 65536

struct fake_kvm {
    pthread_mutex_t lock; /* everything below */
    long counts[FK_NCALLS];
    int fail_kind;        /* -1: disarmed */
    long fail_left;
    int fail_err;
    aiol__kvm_model m;    /* KVM's state and rules */
    fk_delivery deliv[MAX_DELIV];
    size_t ndeliv;
    uint8_t log[MAX_LOG];  /* kinds of the calls, in order */
    size_t nlog;
};

static aiol_vmm_msi_msg msg_of(const aiol__kvm_msi *m)
{
    return (aiol_vmm_msi_msg){ m->address_lo, m->address_hi, m->data };
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

static int do_ioeventfd(fake_kvm *fk, const struct kvm_ioeventfd *a)
{
    if (count_call(fk, a->flags & KVM_IOEVENTFD_FLAG_DEASSIGN
                           ? FK_IOEVENTFD_DEASSIGN : FK_IOEVENTFD_ASSIGN)) {
        return -fk->fail_err;
    }
    return aiol__kvm_model_ioeventfd(&fk->m, a);
}

static int do_routing(fake_kvm *fk, const struct kvm_irq_routing *rt)
{
    if (count_call(fk, FK_SET_GSI_ROUTING)) {
        return -fk->fail_err;
    }
    return aiol__kvm_model_set_routing(&fk->m, rt);
}

static int do_irqfd(fake_kvm *fk, const struct kvm_irqfd *a)
{
    if (count_call(fk, a->flags & KVM_IRQFD_FLAG_DEASSIGN
                           ? FK_IRQFD_DEASSIGN : FK_IRQFD_ASSIGN)) {
        return -fk->fail_err;
    }
    return aiol__kvm_model_irqfd(&fk->m, a);
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
        r = (uintptr_t)arg == KVM_CAP_IRQ_ROUTING ? (int)fk->m.limit : 0;
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
    aiol__kvm_model_init(&fk->m, AIOL__KVM_IRQCHIP_KERNEL);
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
    fk->m.limit = limit < AIOL__KVM_MODEL_MAX_ROUTES ? limit
                                                 : AIOL__KVM_MODEL_MAX_ROUTES;
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
    for (size_t i = 0; i < fk->m.nioev; i++) {
        const aiol__kvm_ioev *p = &fk->m.ioev[i];

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
    for (size_t i = 0; i < fk->m.nirqfd; i++) {
        uint64_t v;
        uint32_t g = fk->m.irqfd[i].gsi;

        if (read(fk->m.irqfd[i].fd, &v, sizeof(v)) == sizeof(v) && v > 0 &&
            fk->ndeliv < MAX_DELIV) {
            fk_delivery *d = &fk->deliv[fk->ndeliv++];

            d->gsi = g;
            d->routed = g < AIOL__KVM_MODEL_MAX_ROUTES && fk->m.msi_on[g];
            d->msg = d->routed ? msg_of(&fk->m.msi[g])
                               : (aiol_vmm_msi_msg){ 0, 0, 0 };
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
    n = fk->m.nioev;
    pthread_mutex_unlock(&fk->lock);
    return n;
}

bool fk_ioeventfd_has(fake_kvm *fk, int fd, const aiol_vmm_ioev_match *m)
{
    bool found = false;

    pthread_mutex_lock(&fk->lock);
    for (size_t i = 0; i < fk->m.nioev && !found; i++) {
        const aiol__kvm_ioev *p = &fk->m.ioev[i];

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
    n = fk->m.nirqfd;
    pthread_mutex_unlock(&fk->lock);
    return n;
}

bool fk_irqfd_has(fake_kvm *fk, int fd, uint32_t gsi)
{
    bool found = false;

    pthread_mutex_lock(&fk->lock);
    for (size_t i = 0; i < fk->m.nirqfd && !found; i++) {
        found = fk->m.irqfd[i].fd == fd && fk->m.irqfd[i].gsi == gsi;
    }
    pthread_mutex_unlock(&fk->lock);
    return found;
}

size_t fk_route_count(fake_kvm *fk)
{
    size_t n;

    pthread_mutex_lock(&fk->lock);
    n = fk->m.nroutes;
    pthread_mutex_unlock(&fk->lock);
    return n;
}

bool fk_route(fake_kvm *fk, uint32_t gsi, aiol_vmm_msi_msg *msg)
{
    bool on;

    pthread_mutex_lock(&fk->lock);
    on = gsi < AIOL__KVM_MODEL_MAX_ROUTES && fk->m.msi_on[gsi];
    if (on && msg != NULL) {
        *msg = msg_of(&fk->m.msi[gsi]);
    }
    pthread_mutex_unlock(&fk->lock);
    return on;
}

size_t fk_stale_fds(fake_kvm *fk)
{
    size_t n = 0;

    pthread_mutex_lock(&fk->lock);
    for (size_t i = 0; i < fk->m.nioev; i++) {
        n += aiol__kvm_model_check_eventfd(fk->m.ioev[i].fd) != 0;
    }
    for (size_t i = 0; i < fk->m.nirqfd; i++) {
        n += aiol__kvm_model_check_eventfd(fk->m.irqfd[i].fd) != 0;
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
