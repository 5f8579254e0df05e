/* SPDX-License-Identifier: MIT */
/*
 * vcpu.c - vCPU fds' ioctls for the fake /dev/kvm (fakekvm.c): KVM_RUN
 * (no guest runs: it waits for a signal) and its signal mask, the vCPU's
 * state and MSRs kept as storage, and the rest of what QEMU asks a vCPU.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>

#include <linux/kvm.h>

#include "fakekvm.h"
#include "kvm_model.h"

/* The state a vCPU keeps: KVM_GET_x (and a second name), KVM_SET_x (its
 * size is the state's), and whether it needs an in-kernel LAPIC. */
static const struct {
    unsigned long get, get2, set;
    bool lapic;
} vcpu_state[VCPU_NSTATE] = {
    { KVM_GET_REGS, 0, KVM_SET_REGS, false },
    { KVM_GET_SREGS, 0, KVM_SET_SREGS, false },
    { KVM_GET_SREGS2, 0, KVM_SET_SREGS2, false },
    { KVM_GET_FPU, 0, KVM_SET_FPU, false },
    { KVM_GET_XSAVE, KVM_GET_XSAVE2, KVM_SET_XSAVE, false },
    { KVM_GET_XCRS, 0, KVM_SET_XCRS, false },
    { KVM_GET_LAPIC, 0, KVM_SET_LAPIC, true },
    { KVM_GET_VCPU_EVENTS, 0, KVM_SET_VCPU_EVENTS, false },
    { KVM_GET_MP_STATE, 0, KVM_SET_MP_STATE, false },
    { KVM_GET_DEBUGREGS, 0, KVM_SET_DEBUGREGS, false },
};

_Static_assert(sizeof(struct kvm_xsave) <= FK_STATE_MAX &&
               sizeof(struct kvm_lapic_state) <= FK_STATE_MAX &&
               sizeof(struct kvm_sregs2) <= FK_STATE_MAX,
               "a vCPU state is larger than FK_STATE_MAX");

/* KVM_RUN: see fakekvm.c's header comment. */
static long vcpu_run(fk_vcpu *v)
{
    sigset_t all, old, wait;
    bool has;

    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_mutex_lock(&v->lock);
    has = v->has_sigmask;
    wait = has ? v->sigmask : old;
    pthread_mutex_unlock(&v->lock);
    /* A kick before this point left immediate_exit set (its handler ran)
     * or a signal pending (blocked above): sigsuspend() takes it. */
    if (!__atomic_load_n(&v->run->immediate_exit, __ATOMIC_ACQUIRE)) {
        sigsuspend(&wait);
    }
    v->run->exit_reason = KVM_EXIT_INTR;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return -EINTR;
}

static long set_signal_mask(fk_vcpu *v, const struct kvm_signal_mask *m)
{
    uint64_t bits;

    if (m != NULL && m->len != sizeof(bits)) {
        return -EINVAL;
    }
    v->has_sigmask = m != NULL;
    sigemptyset(&v->sigmask);
    if (m != NULL) {
        memcpy(&bits, m->sigset, sizeof(bits));
        for (int s = 1; s <= 64; s++) {
            if (bits & (1ULL << (s - 1))) {
                sigaddset(&v->sigmask, s);
            }
        }
    }
    return 0;
}

static struct kvm_msr_entry *vcpu_msr(fk_vcpu *v, uint32_t index, bool add)
{
    for (size_t i = 0; i < v->nmsrs; i++) {
        if (v->msr[i].index == index) {
            return &v->msr[i];
        }
    }
    if (!add || v->nmsrs == FK_MAX_MSRS) {
        return NULL;
    }
    v->msr[v->nmsrs] = (struct kvm_msr_entry){ .index = index };
    return &v->msr[v->nmsrs++];
}

/* KVM_GET_MSRS / KVM_SET_MSRS: every MSR, as many as asked. */
static long vcpu_msrs(fk_vcpu *v, struct kvm_msrs *m, bool get)
{
    if (m->nmsrs >= FK_MAX_IO_MSRS) {
        return -E2BIG;
    }
    for (uint32_t i = 0; i < m->nmsrs; i++) {
        struct kvm_msr_entry *e = vcpu_msr(v, m->entries[i].index, !get);

        if (get) {
            m->entries[i].data = e != NULL ? e->data : 0;
        } else if (e != NULL) {
            e->data = m->entries[i].data;
        }
    }
    return m->nmsrs;
}

/* @chip: the VM's irqchip. */
static long vcpu_ioctl_locked(fk_vcpu *v, aiol__kvm_irqchip chip,
                              unsigned long req, void *arg)
{
    for (int i = 0; i < VCPU_NSTATE; i++) {
        if (req == vcpu_state[i].get || req == vcpu_state[i].set ||
            (vcpu_state[i].get2 && req == vcpu_state[i].get2)) {
            if (vcpu_state[i].lapic && chip == AIOL__KVM_IRQCHIP_NONE) {
                return -ENXIO;
            }
            return fk_state_io(v->state[i], arg, _IOC_SIZE(vcpu_state[i].set),
                            req != vcpu_state[i].set);
        }
    }
    switch (req) {
    case KVM_SET_SIGNAL_MASK:
        return set_signal_mask(v, arg);
    case KVM_GET_MSRS:
    case KVM_SET_MSRS:
        return vcpu_msrs(v, arg, req == KVM_GET_MSRS);
    case KVM_SET_CPUID2:
        return ((const struct kvm_cpuid2 *)arg)->nent > FK_MAX_CPUID ? -E2BIG
                                                                     : 0;
    case KVM_GET_TSC_KHZ:
        return v->tsc_khz;
    case KVM_SET_TSC_KHZ:
        if ((uintptr_t)arg != 0) {
            v->tsc_khz = (uint32_t)(uintptr_t)arg;
        }
        return 0;
    case KVM_X86_SETUP_MCE: {
        uint64_t mcg_cap;

        memcpy(&mcg_cap, arg, sizeof(mcg_cap));
        return (mcg_cap & 0xff) == 0 || (mcg_cap & 0xff) > 32 ||
               (mcg_cap & ~(FK_MCE_CAP | 0xff)) ? -EINVAL : 0;
    }
    case KVM_X86_SET_MCE:
    case KVM_SET_GUEST_DEBUG:
    case KVM_NMI:
    case KVM_SMI:
        return 0;
    case KVM_TPR_ACCESS_REPORTING:
    case KVM_SET_VAPIC_ADDR:
        return chip == AIOL__KVM_IRQCHIP_NONE ? -EINVAL : 0;
    case KVM_INTERRUPT:
        return chip == AIOL__KVM_IRQCHIP_KERNEL ? -ENXIO : 0;
    case KVM_KVMCLOCK_CTRL:
        return -EINVAL;  /* the guest never enabled kvmclock */
    case KVM_GET_STATS_FD:
        return aiol__fk_stats_fd();
    default:
        return -ENOTTY;
    }
}

long aiol__fk_vcpu_ioctl(fk_vcpu *v, unsigned long req, void *arg)
{
    aiol__kvm_irqchip chip;
    long r;

    if (req == KVM_RUN) {
        return vcpu_run(v);
    }
    pthread_mutex_lock(&v->vm->lock);
    chip = v->vm->model.irqchip;
    pthread_mutex_unlock(&v->vm->lock);
    pthread_mutex_lock(&v->lock);
    r = vcpu_ioctl_locked(v, chip, req, arg);
    pthread_mutex_unlock(&v->lock);
    return r;
}
