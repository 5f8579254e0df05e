/* SPDX-License-Identifier: MIT */
/* kvm_model.c - see kvm_model.h. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "kvm_model.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Per-GSI bits of set_routing's scratch. */
#define SEEN_OTHER 0x80 /* a non-irqchip entry; chips are bits 0-2 */

void aiol__kvm_model_init(aiol__kvm_model *m, aiol__kvm_irqchip irqchip)
{
    memset(m, 0, sizeof(*m));
    m->limit = AIOL__KVM_MODEL_MAX_ROUTES;
    m->irqchip = irqchip;
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

int aiol__kvm_model_check_eventfd(int fd)
{
    if (fd < 0 || fcntl(fd, F_GETFD) < 0) {
        return -EBADF;
    }
    return fd_is_eventfd(fd) ? 0 : -EINVAL;
}

/* The identity of eventfd @fd: its eventfd-id, or the number. */
static uint64_t eventfd_id(int fd)
{
    static const char key[] = "eventfd-id:";
    char path[64], buf[512];
    const char *p;
    ssize_t n;
    int f;

    snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
    f = open(path, O_RDONLY | O_CLOEXEC);
    if (f < 0) {
        return (uint64_t)fd;
    }
    n = read(f, buf, sizeof(buf) - 1);
    close(f);
    buf[n > 0 ? n : 0] = '\0';
    p = strstr(buf, key);
    return p != NULL ? strtoull(p + sizeof(key) - 1, NULL, 10) : (uint64_t)fd;
}

static bool ioev_collides(const aiol__kvm_ioev *a, const aiol__kvm_ioev *b)
{
    return a->pio == b->pio && a->addr == b->addr &&
           (a->len == 0 || b->len == 0 ||
            (a->len == b->len &&
             (a->wildcard || b->wildcard || a->datamatch == b->datamatch)));
}

static int ioev_deassign(aiol__kvm_model *m, const aiol__kvm_ioev *e)
{
    for (size_t i = 0; i < m->nioev; i++) {
        aiol__kvm_ioev *p = &m->ioev[i];

        if (!p->closed && p->efd == e->efd && p->pio == e->pio &&
            p->addr == e->addr && p->len == e->len &&
            p->wildcard == e->wildcard &&
            (p->wildcard || p->datamatch == e->datamatch)) {
            *p = m->ioev[--m->nioev];
            return 0;
        }
    }
    return -ENOENT;
}

int aiol__kvm_model_ioeventfd(aiol__kvm_model *m,
                              const struct kvm_ioeventfd *a)
{
    const uint32_t valid = KVM_IOEVENTFD_FLAG_DATAMATCH |
                           KVM_IOEVENTFD_FLAG_PIO |
                           KVM_IOEVENTFD_FLAG_DEASSIGN;
    aiol__kvm_ioev e = { .fd = a->fd,
                         .pio = (a->flags & KVM_IOEVENTFD_FLAG_PIO) != 0,
                         .wildcard = !(a->flags & KVM_IOEVENTFD_FLAG_DATAMATCH),
                         .addr = a->addr,
                         .datamatch = a->datamatch,
                         .len = a->len };
    int r;

    if (a->flags & KVM_IOEVENTFD_FLAG_DEASSIGN) {
        r = aiol__kvm_model_check_eventfd(a->fd);
        if (r < 0) {
            return r;
        }
        e.efd = eventfd_id(a->fd);
        return ioev_deassign(m, &e);
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
    r = aiol__kvm_model_check_eventfd(a->fd);
    if (r < 0) {
        return r;
    }
    e.efd = eventfd_id(a->fd);
    for (size_t i = 0; i < m->nioev; i++) {
        if (ioev_collides(&m->ioev[i], &e)) {
            return -EEXIST;
        }
    }
    if (m->nioev == AIOL__KVM_MODEL_MAX_IOEV) {
        return -ENOSPC;
    }
    m->ioev[m->nioev++] = e;
    return 0;
}

/* KVM's setup_routing_entry() and x86 kvm_set_routing_entry() for one
 * entry; @seen holds what the table gave each GSI so far. */
static int check_route(const aiol__kvm_model *m, uint8_t *seen,
                       const struct kvm_irq_routing_entry *e)
{
    uint8_t bit;

    if (e->gsi >= m->limit || e->flags != 0) {
        return -EINVAL;
    }
    switch (e->type) {
    case KVM_IRQ_ROUTING_IRQCHIP:
        if (m->irqchip != AIOL__KVM_IRQCHIP_KERNEL ||
            e->u.irqchip.irqchip > KVM_IRQCHIP_IOAPIC ||
            e->u.irqchip.pin >= (e->u.irqchip.irqchip == KVM_IRQCHIP_IOAPIC
                                 ? 24u : 8u)) {
            return -EINVAL;
        }
        bit = (uint8_t)(1u << e->u.irqchip.irqchip);
        break;
    case KVM_IRQ_ROUTING_MSI:
        bit = SEEN_OTHER;
        break;
    default:
        return -EINVAL;
    }
    /* One GSI: irqchip pins of different chips, or one other entry. */
    if ((seen[e->gsi] & (SEEN_OTHER | bit)) ||
        (bit == SEEN_OTHER && seen[e->gsi])) {
        return -EINVAL;
    }
    seen[e->gsi] |= bit;
    return 0;
}

int aiol__kvm_model_set_routing(aiol__kvm_model *m,
                                const struct kvm_irq_routing *rt)
{
    if (m->irqchip == AIOL__KVM_IRQCHIP_NONE || rt->nr > m->limit ||
        rt->flags != 0) {
        return -EINVAL;
    }
    memset(m->seen, 0, sizeof(m->seen));
    for (uint32_t i = 0; i < rt->nr; i++) {
        int r = check_route(m, m->seen, &rt->entries[i]);

        if (r < 0) {
            return r;
        }
    }
    memset(m->msi_on, 0, sizeof(m->msi_on));
    for (uint32_t i = 0; i < rt->nr; i++) {
        const struct kvm_irq_routing_entry *e = &rt->entries[i];

        if (e->type == KVM_IRQ_ROUTING_MSI) {
            m->msi_on[e->gsi] = true;
            m->msi[e->gsi] = (aiol__kvm_msi){ e->u.msi.address_lo,
                                              e->u.msi.address_hi,
                                              e->u.msi.data };
        }
    }
    m->nroutes = rt->nr;
    return 0;
}

int aiol__kvm_model_irqfd(aiol__kvm_model *m, const struct kvm_irqfd *a)
{
    bool deassign = a->flags & KVM_IRQFD_FLAG_DEASSIGN;
    bool resample = a->flags & KVM_IRQFD_FLAG_RESAMPLE;
    int fd = (int)a->fd, r;
    uint64_t efd;

    if (a->flags & ~(uint32_t)(KVM_IRQFD_FLAG_DEASSIGN |
                               KVM_IRQFD_FLAG_RESAMPLE)) {
        return -EINVAL;
    }
    if (!deassign && (m->irqchip == AIOL__KVM_IRQCHIP_NONE ||
                      (resample && m->irqchip != AIOL__KVM_IRQCHIP_KERNEL))) {
        return -EINVAL;
    }
    r = aiol__kvm_model_check_eventfd(fd);
    if (r < 0) {
        return r;
    }
    efd = eventfd_id(fd);
    for (size_t i = 0; i < m->nirqfd; i++) {
        if (m->irqfd[i].closed || m->irqfd[i].efd != efd) {
            continue;
        }
        if (!deassign) {
            return -EBUSY;
        }
        if (m->irqfd[i].gsi == a->gsi) {
            m->irqfd[i] = m->irqfd[--m->nirqfd];
            return 0;
        }
    }
    if (deassign) {
        return 0;  /* KVM: nothing matched is not an error */
    }
    if (m->nirqfd == AIOL__KVM_MODEL_MAX_IRQFD) {
        return -ENOSPC;
    }
    m->irqfd[m->nirqfd++] = (aiol__kvm_irqfd){ fd, false, efd, a->gsi };
    return 0;
}

void aiol__kvm_model_fd_closed(aiol__kvm_model *m, int fd)
{
    for (size_t i = 0; i < m->nioev; i++) {
        if (m->ioev[i].fd == fd) {
            m->ioev[i].closed = true;
        }
    }
    for (size_t i = 0; i < m->nirqfd; i++) {
        if (m->irqfd[i].fd == fd) {
            m->irqfd[i].closed = true;
        }
    }
}
