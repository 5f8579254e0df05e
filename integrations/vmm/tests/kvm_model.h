/* SPDX-License-Identifier: MIT */
/*
 * kvm_model.h - the rules of KVM's notifier ioctls on one VM (x86, Linux
 * 6.x), as a plain state machine shared by the two fakes that need them:
 * fake_kvm.c (the VMM library's tests) and the LD_PRELOAD fake KVM of
 * ../../qemu/fakekvm (QEMU without /dev/kvm).  Each call takes the ioctl's
 * argument and returns 0 or -errno as KVM would, changing the state only
 * on success.
 *
 *   KVM_IOEVENTFD   assign: EINVAL for a bad length, a datamatch with
 *                   length 0, a wrapping range or unknown flags; EBADF for
 *                   a closed fd, EINVAL for one that is not an eventfd;
 *                   EEXIST when the write would also match a registration
 *                   already there (same bus and address, and a length 0 on
 *                   either side, or equal lengths with either side a
 *                   wildcard or equal data).  deassign: EBADF/EINVAL for
 *                   the fd, ENOENT when no registration of that eventfd
 *                   has exactly that address, length and data.
 *   KVM_SET_GSI_ROUTING  EINVAL without an in-kernel irqchip, for nr over
 *                   the limit (4096, like KVM_MAX_IRQ_ROUTES), flags, an
 *                   entry's GSI at or past the limit, an entry's flags, an
 *                   unknown type, an irqchip entry with a split irqchip or
 *                   a bad chip or pin (PIC pins 0-7, IOAPIC 0-23), a GSI
 *                   given twice unless both entries are irqchip pins of
 *                   different chips; otherwise replaces the table.
 *   KVM_IRQFD       EINVAL for unknown flags.  assign: EINVAL without an
 *                   in-kernel irqchip (a resampler wants a full one) or
 *                   for a non-eventfd, EBADF, EBUSY when that eventfd
 *                   already is an irqfd (on any GSI).  deassign: EBADF/
 *                   EINVAL for the fd; 0 even when nothing matched.
 *
 * Eventfds are told apart as KVM does, by the eventfd and not by the fd
 * number: by /proc/self/fdinfo's eventfd-id where the kernel has it (the
 * same eventfd through two numbers), by the number elsewhere; and a
 * caller that sees its fds closed says so (aiol__kvm_model_fd_closed()):
 * a registration made through a number since closed matches no eventfd
 * that number (or the freed eventfd-id) is reused for.  KVM holds the
 * eventfd itself, so such a registration stays, and the model keeps it:
 * an ioeventfd's address stays taken (EEXIST), as in KVM.  Not modelled:
 * KVM dropping an irqfd whose eventfd's last reference is closed, other
 * buses, x2APIC-format MSI checks, HV/Xen routes.
 *
 * No locking and no allocation: the owner embeds the struct and holds its
 * own lock around every call.
 */
#ifndef AIOLOOP_KVM_MODEL_H
#define AIOLOOP_KVM_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <linux/kvm.h>

#define AIOL__KVM_MODEL_MAX_IOEV 8192
#define AIOL__KVM_MODEL_MAX_IRQFD 8192
#define AIOL__KVM_MODEL_MAX_ROUTES 4096 /* KVM_MAX_IRQ_ROUTES on x86 */

typedef enum aiol__kvm_irqchip {
    AIOL__KVM_IRQCHIP_NONE,   /* no KVM_CREATE_IRQCHIP yet */
    AIOL__KVM_IRQCHIP_SPLIT,  /* KVM_CAP_SPLIT_IRQCHIP: LAPIC only */
    AIOL__KVM_IRQCHIP_KERNEL, /* PIC, IOAPIC and LAPIC in the kernel */
} aiol__kvm_irqchip;

typedef struct aiol__kvm_ioev {
    int fd;
    bool closed;    /* @fd was closed since: @efd identifies nothing */
    uint64_t efd;   /* the eventfd's identity */
    bool pio, wildcard;
    uint64_t addr, datamatch;
    uint32_t len;
} aiol__kvm_ioev;

typedef struct aiol__kvm_irqfd {
    int fd;
    bool closed;    /* as aiol__kvm_ioev's */
    uint64_t efd;
    uint32_t gsi;
} aiol__kvm_irqfd;

typedef struct aiol__kvm_msi {
    uint32_t address_lo, address_hi, data;
} aiol__kvm_msi;

/* One VM's state.  Callers read the fields directly (under their lock). */
typedef struct aiol__kvm_model {
    uint32_t limit;              /* routes: nr and GSI bound */
    aiol__kvm_irqchip irqchip;
    aiol__kvm_ioev ioev[AIOL__KVM_MODEL_MAX_IOEV];
    size_t nioev;
    aiol__kvm_irqfd irqfd[AIOL__KVM_MODEL_MAX_IRQFD];
    size_t nirqfd;
    bool msi_on[AIOL__KVM_MODEL_MAX_ROUTES]; /* GSI has an MSI route */
    aiol__kvm_msi msi[AIOL__KVM_MODEL_MAX_ROUTES];
    size_t nroutes;              /* entries of the last table, any type */
    uint8_t seen[AIOL__KVM_MODEL_MAX_ROUTES]; /* set_routing's scratch */
} aiol__kvm_model;

/* Empty, with the default limit and @irqchip. */
void aiol__kvm_model_init(aiol__kvm_model *m, aiol__kvm_irqchip irqchip);

int aiol__kvm_model_ioeventfd(aiol__kvm_model *m,
                              const struct kvm_ioeventfd *a);
int aiol__kvm_model_set_routing(aiol__kvm_model *m,
                                const struct kvm_irq_routing *rt);
int aiol__kvm_model_irqfd(aiol__kvm_model *m, const struct kvm_irqfd *a);

/* The caller closed fd @fd: see the top of this file. */
void aiol__kvm_model_fd_closed(aiol__kvm_model *m, int fd);

/* 0, or -EBADF / -EINVAL as KVM's eventfd_ctx_fdget() gives them. */
int aiol__kvm_model_check_eventfd(int fd);

#endif /* AIOLOOP_KVM_MODEL_H */
