/* SPDX-License-Identifier: MIT */
/*
 * fake_kvm.h - a model of the KVM VM ioctls the VMM library uses, behind
 * an aiol_vmm_kvm_ops table, for tests on machines with or without /dev/kvm.
 *
 * What it models: KVM_IOEVENTFD, KVM_SET_GSI_ROUTING and KVM_IRQFD with
 * the rules of kvm_model.h (shared with the LD_PRELOAD fake KVM of
 * ../../qemu/fakekvm; see the real-KVM test for checks of the same rules
 * against the kernel), on a VM with a full in-kernel irqchip; and
 *   KVM_CHECK_EXTENSION(KVM_CAP_IRQ_ROUTING)  the limit.
 *
 * Guest side: fk_guest_write() is a guest write that KVM would turn into
 * an eventfd signal; fk_pump() reads every irqfd like KVM's wakeup and
 * records one delivery per signalled irqfd through the CURRENT route
 * table, so a delivery through a stale or missing route shows.
 *
 * It counts calls by kind and can fail the k-th call of a kind.  It does
 * no allocation after fk_new(), so allocation-failure sweeps only fail the
 * library's own allocations.  Thread-safe (one mutex).
 */
#ifndef AIOLOOP_FAKE_KVM_H
#define AIOLOOP_FAKE_KVM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "aioloop/vmm.h"

typedef enum fk_call {
    FK_IOEVENTFD_ASSIGN,
    FK_IOEVENTFD_DEASSIGN,
    FK_SET_GSI_ROUTING,
    FK_IRQFD_ASSIGN,
    FK_IRQFD_DEASSIGN,
    FK_CHECK_EXTENSION,
    FK_OTHER,
    FK_NCALLS,
    FK_ANY = FK_NCALLS, /* fk_fail_at(): any kind but CHECK_EXTENSION */
} fk_call;

typedef struct fake_kvm fake_kvm;

/** One MSI the fake "delivered" when an irqfd fired. */
typedef struct fk_delivery {
    uint32_t gsi;
    bool routed;          /* false: no route at that GSI, nothing injected */
    aiol_vmm_msi_msg msg; /* the route's message at the time of delivery */
} fk_delivery;

/* A fresh fake VM (aborts if it cannot allocate: test infrastructure). */
fake_kvm *fk_new(void);
void fk_free(fake_kvm *fk);

/* The aiol_vmm_kvm that reaches this fake. */
aiol_vmm_kvm fk_kvm(fake_kvm *fk);

/* The route limit it reports and enforces (default 4096). */
void fk_set_route_limit(fake_kvm *fk, uint32_t limit);

/* Calls of @kind since creation or the last fk_reset_counts(). */
long fk_count(fake_kvm *fk, fk_call kind);
/* Every call but CHECK_EXTENSION. */
long fk_total(fake_kvm *fk);
/* Zeroes the counts and the call log. */
void fk_reset_counts(fake_kvm *fk);
/* The kinds of the calls since the last reset, in order (not CHECK_EXTENSION). */
size_t fk_log(fake_kvm *fk, fk_call *out, size_t max);

/* The @k-th call of @kind from now (1: the next) fails with -@err; once. */
void fk_fail_at(fake_kvm *fk, fk_call kind, long k, int err);
void fk_disarm(fake_kvm *fk);

/* A guest write; true when an ioeventfd caught it (its eventfd is signalled). */
bool fk_guest_write(fake_kvm *fk, bool pio, uint64_t addr, uint32_t len,
                    uint64_t data);

/* Reads every irqfd; records a delivery for each signalled one. */
int fk_pump(fake_kvm *fk);
/* Copies up to @max deliveries recorded so far; returns how many exist. */
size_t fk_deliveries(fake_kvm *fk, fk_delivery *out, size_t max);
void fk_clear_deliveries(fake_kvm *fk);

/* State, as KVM would hold it. */
size_t fk_ioeventfd_count(fake_kvm *fk);
bool fk_ioeventfd_has(fake_kvm *fk, int fd, const aiol_vmm_ioev_match *m);
size_t fk_irqfd_count(fake_kvm *fk);
bool fk_irqfd_has(fake_kvm *fk, int fd, uint32_t gsi);
size_t fk_route_count(fake_kvm *fk);
bool fk_route(fake_kvm *fk, uint32_t gsi, aiol_vmm_msi_msg *msg);
/* Registrations whose fd is no longer an open eventfd (leaked in KVM). */
size_t fk_stale_fds(fake_kvm *fk);

#endif /* AIOLOOP_FAKE_KVM_H */
