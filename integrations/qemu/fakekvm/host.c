/* SPDX-License-Identifier: MIT */
/*
 * host.c - /dev/kvm's ioctls for the fake /dev/kvm (fakekvm.c): what this
 * project's host KVM (Linux 6.18, x86_64) answers QEMU 10.2 (the
 * capabilities, the supported CPUID, the MSR and feature-MSR lists, the
 * feature MSRs' values, XCOMP_GUEST_SUPP, the MCE capabilities), and
 * KVM_CREATE_VM.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include <linux/kvm.h>

#include "fakekvm.h"
#include "kvm_model.h"

/* ---- what the host's KVM answers QEMU 10.2 ---------------------------- */

static const struct {
    unsigned cap;
    int value;
} caps[] = {
    { KVM_CAP_IMMEDIATE_EXIT, 1 },       { KVM_CAP_NR_MEMSLOTS, FK_NR_MEMSLOTS },
    { KVM_CAP_NR_VCPUS, 2 },             { KVM_CAP_MAX_VCPUS, FK_MAX_VCPUS },
    { KVM_CAP_MAX_VCPU_ID, FK_MAX_VCPUS },
    { KVM_CAP_USER_MEMORY, 1 },          { KVM_CAP_DESTROY_MEMORY_REGION_WORKS, 1 },
    { KVM_CAP_JOIN_MEMORY_REGIONS_WORKS, 1 },
    { KVM_CAP_INTERNAL_ERROR_DATA, 1 },  { KVM_CAP_IOEVENTFD, 1 },
    { KVM_CAP_IOEVENTFD_ANY_LENGTH, 1 }, { KVM_CAP_SET_TSS_ADDR, 1 },
    { KVM_CAP_EXT_CPUID, 1 },            { KVM_CAP_MP_STATE, 1 },
    { KVM_CAP_SIGNAL_MSI, 1 },
    { KVM_CAP_IRQ_ROUTING, AIOL__KVM_MODEL_MAX_ROUTES },
    { KVM_CAP_DEBUGREGS, 1 },            { KVM_CAP_XSAVE, 1 },
    { KVM_CAP_VCPU_EVENTS, 1 },          { KVM_CAP_X86_ROBUST_SINGLESTEP, 1 },
    { KVM_CAP_MCE, 32 },                 { KVM_CAP_ADJUST_CLOCK, 14 },
    { KVM_CAP_SET_IDENTITY_MAP_ADDR, 1 }, { KVM_CAP_COALESCED_MMIO, 2 },
    { KVM_CAP_COALESCED_PIO, 1 },        { KVM_CAP_MANUAL_DIRTY_LOG_PROTECT2, 3 },
    { KVM_CAP_IRQ_INJECT_STATUS, 1 },    { KVM_CAP_READONLY_MEM, 1 },
    { KVM_CAP_IRQFD_RESAMPLE, 1 },       { KVM_CAP_SET_GUEST_DEBUG, 1 },
    { KVM_CAP_SET_GUEST_DEBUG2, 2031619 }, { KVM_CAP_XCRS, 1 },
    { KVM_CAP_SREGS2, 1 },               { KVM_CAP_EXCEPTION_PAYLOAD, 1 },
    { KVM_CAP_X86_TRIPLE_FAULT_EVENT, 1 }, { KVM_CAP_GET_MSR_FEATURES, 1 },
    { KVM_CAP_X86_USER_SPACE_MSR, 1 },   { KVM_CAP_IRQCHIP, 1 },
    { KVM_CAP_IRQFD, 1 },                { KVM_CAP_SPLIT_IRQCHIP, 1 },
    { KVM_CAP_SYNC_MMU, 1 },             { KVM_CAP_BINARY_STATS_FD, 1 },
    { KVM_CAP_SYS_ATTRIBUTES, 1 },       { KVM_CAP_TSC_DEADLINE_TIMER, 1 },
    { KVM_CAP_XSAVE2, FK_STATE_MAX },    { KVM_CAP_GET_TSC_KHZ, 1 },
    { KVM_CAP_KVMCLOCK_CTRL, 1 },        { KVM_CAP_PIT_STATE2, 1 },
    { KVM_CAP_PIT2, 1 },
};

/* KVM_GET_SUPPORTED_CPUID: function, index, flags, eax, ebx, ecx, edx. */
static const uint32_t cpuid[][7] = {
    { 0x0, 0, 0, 0x24, 0x756e6547, 0x6c65746e, 0x49656e69 },
    { 0x1, 0, 0, 0xa0671, 0x1020800, 0x81202000, 0xf8bfbff },
    { 0x2, 0, 0, 0xfeff01, 0xf0, 0, 0 },
    { 0x3, 0, 0, 0, 0, 0, 0 },
    { 0x4, 0, 1, 0x4000121, 0x2c0003f, 0x3f, 0 },
    { 0x4, 1, 1, 0x4000122, 0x3c0003f, 0x3f, 0 },
    { 0x4, 2, 1, 0x4000143, 0x3c0003f, 0x7ff, 0 },
    { 0x4, 3, 1, 0x4004163, 0x3c0003f, 0x77fff, 0 },
    { 0x4, 4, 1, 0, 0, 0, 0 },
    { 0x5, 0, 0, 0, 0, 0, 0 },
    { 0x6, 0, 0, 0x4, 0, 0, 0 },
    { 0x7, 0, 1, 0x2, 0x1802852, 0x1a010104, 0x20010000 },
    { 0x7, 1, 1, 0x1c00, 0, 0, 0x4000 },
    { 0x7, 2, 1, 0, 0, 0, 0x1 },
    { 0x8, 0, 0, 0, 0, 0, 0 },
    { 0x9, 0, 0, 0, 0, 0, 0 },
    { 0xa, 0, 0, 0, 0, 0, 0 },
    { 0xb, 0, 1, 0, 0, 0, 0x1 },
    { 0xc, 0, 0, 0, 0, 0, 0 },
    { 0xd, 0, 1, 0xe7, 0xa80, 0xa80, 0 },
    { 0xd, 1, 1, 0, 0, 0, 0 },
    { 0xd, 2, 1, 0x100, 0x240, 0, 0 },
    { 0xd, 5, 1, 0x40, 0x440, 0, 0 },
    { 0xd, 6, 1, 0x200, 0x480, 0, 0 },
    { 0xd, 7, 1, 0x400, 0x680, 0, 0 },
    { 0xe, 0, 0, 0, 0, 0, 0 },
    { 0xf, 0, 1, 0, 0, 0, 0 },
    { 0x10, 0, 1, 0, 0, 0, 0 },
    { 0x11, 0, 0, 0, 0, 0, 0 },
    { 0x12, 0, 1, 0, 0, 0, 0 },
    { 0x13, 0, 0, 0, 0, 0, 0 },
    { 0x14, 0, 1, 0, 0, 0, 0 },
    { 0x15, 0, 0, 0, 0, 0, 0 },
    { 0x16, 0, 0, 0, 0, 0, 0 },
    { 0x17, 0, 1, 0, 0, 0, 0 },
    { 0x18, 0, 1, 0, 0, 0, 0 },
    { 0x19, 0, 0, 0, 0, 0, 0 },
    { 0x1a, 0, 0, 0, 0, 0, 0 },
    { 0x1b, 0, 0, 0, 0, 0, 0 },
    { 0x1c, 0, 0, 0, 0, 0, 0 },
    { 0x1d, 0, 1, 0, 0, 0, 0 },
    { 0x1e, 0, 1, 0, 0, 0, 0 },
    { 0x1f, 0, 1, 0, 0, 0, 0x1 },
    { 0x20, 0, 0, 0, 0, 0, 0 },
    { 0x21, 0, 0, 0, 0, 0, 0 },
    { 0x22, 0, 0, 0, 0, 0, 0 },
    { 0x23, 0, 0, 0, 0, 0, 0 },
    { 0x24, 0, 1, 0, 0, 0, 0 },
    { 0x80000000, 0, 0, 0x80000008, 0, 0, 0 },
    { 0x80000001, 0, 0, 0, 0, 0x101, 0x20100800 },
    { 0x80000002, 0, 0, 0, 0, 0, 0 },
    { 0x80000003, 0, 0, 0, 0, 0, 0 },
    { 0x80000004, 0, 0, 0, 0, 0, 0 },
    { 0x80000005, 0, 0, 0, 0, 0, 0 },
    { 0x80000006, 0, 0, 0, 0, 0x8007040, 0 },
    { 0x80000007, 0, 0, 0, 0, 0, 0x100 },
    { 0x80000008, 0, 0, 0x3930, 0, 0, 0 },
    { 0x40000000, 0, 0, 0x40000001, 0x4b4d564b, 0x564b4d56, 0x4d },
    { 0x40000001, 0, 0, 0x1007efb, 0, 0, 0 },
};

static const uint32_t msr_index[] = {
    0x174, 0x175, 0x176, 0xc0000081, 0xc0000083, 0xc0000102, 0xc0000084,
    0xc0000082, 0x10, 0x277, 0xc0010117, 0x3a, 0x1d9, 0x1db, 0x1dc, 0x1dd,
    0x1de, 0x12, 0x11, 0x4b564d01, 0x4b564d00, 0x4b564d02, 0x4b564d03,
    0x4b564d04, 0x4b564d06, 0x4b564d07, 0x3b, 0x6e0, 0x10a, 0x345, 0x1a0,
    0x17a, 0x17b, 0x34, 0xce, 0x140, 0xc001011f, 0x1fc, 0x8b, 0xc0010015,
    0x4b564d05,
};

/* The feature MSRs (KVM_GET_MSR_FEATURE_INDEX_LIST) and their values. */
static const struct {
    uint32_t index;
    uint64_t value;
} feature_msrs[] = {
    { 0x8b, 0x100000000ULL }, { 0x10a, 0xc00e16d },
    { 0x345, 0 },             { 0xce, 0x80000000 },
};

/* ---- /dev/kvm ----------------------------------------------------------- */

int aiol__fk_check_extension(unsigned long cap)
{
    for (size_t i = 0; i < sizeof(caps) / sizeof(caps[0]); i++) {
        if (caps[i].cap == cap) {
            return caps[i].value;
        }
    }
    return 0;
}

/* KVM_GET_MSR_INDEX_LIST and _FEATURE_: E2BIG, with the size, when the
 * caller's array is short. */
static long msr_list(struct kvm_msr_list *l, bool features)
{
    uint32_t n = features ? sizeof(feature_msrs) / sizeof(feature_msrs[0])
                          : sizeof(msr_index) / sizeof(msr_index[0]);
    uint32_t room = l->nmsrs;

    l->nmsrs = n;
    if (room < n) {
        return -E2BIG;
    }
    for (uint32_t i = 0; i < n; i++) {
        l->indices[i] = features ? feature_msrs[i].index : msr_index[i];
    }
    return 0;
}

static long supported_cpuid(struct kvm_cpuid2 *c)
{
    uint32_t n = sizeof(cpuid) / sizeof(cpuid[0]);

    if (c->nent < n) {
        return -E2BIG;
    }
    for (uint32_t i = 0; i < n; i++) {
        c->entries[i] = (struct kvm_cpuid_entry2){
            .function = cpuid[i][0], .index = cpuid[i][1],
            .flags = cpuid[i][2], .eax = cpuid[i][3], .ebx = cpuid[i][4],
            .ecx = cpuid[i][5], .edx = cpuid[i][6] };
    }
    c->nent = n;
    return 0;
}

/* KVM_GET_MSRS on /dev/kvm: feature MSRs; how many were read. */
static long feature_msr_values(struct kvm_msrs *m)
{
    if (m->nmsrs >= FK_MAX_IO_MSRS) {
        return -E2BIG;
    }
    for (uint32_t i = 0; i < m->nmsrs; i++) {
        size_t k = 0;

        while (k < sizeof(feature_msrs) / sizeof(feature_msrs[0]) &&
               feature_msrs[k].index != m->entries[i].index) {
            k++;
        }
        if (k == sizeof(feature_msrs) / sizeof(feature_msrs[0])) {
            return i;
        }
        m->entries[i].data = feature_msrs[k].value;
    }
    return m->nmsrs;
}

static long system_attr(const struct kvm_device_attr *a, bool get)
{
    uint64_t v = FK_XCOMP_GUEST_SUPP;

    if (a->group != 0 || a->attr != KVM_X86_XCOMP_GUEST_SUPP) {
        return -ENXIO;
    }
    if (get) {
        memcpy((void *)(uintptr_t)a->addr, &v, sizeof(v));
    }
    return 0;
}

static long create_vm(unsigned long type, bool cloexec)
{
    fk_vm *vm;
    long fd;

    if (type != 0) {
        return -EINVAL;
    }
    vm = aiol__fk_zalloc(sizeof(*vm));
    pthread_mutex_init(&vm->lock, NULL);
    aiol__kvm_model_init(&vm->model, AIOL__KVM_IRQCHIP_NONE);
    if (!aiol__fk_add_vm(vm)) {
        return -ENOMEM;
    }
    fd = aiol__fk_new_fd("fakekvm-vm", 0, cloexec,
                         aiol__fk_new_file(FK_VM, vm, NULL));
    return fd;
}

long aiol__fk_system_ioctl(unsigned long req, void *arg)
{
    uint64_t v;

    switch (req) {
    case KVM_GET_API_VERSION:
        return FK_API_VERSION;
    case KVM_CHECK_EXTENSION:
        return aiol__fk_check_extension((uintptr_t)arg);
    case KVM_CREATE_VM:
        return create_vm((uintptr_t)arg, true);
    case KVM_GET_VCPU_MMAP_SIZE:
        return FK_MMAP_SIZE;
    case KVM_GET_MSR_INDEX_LIST:
        return msr_list(arg, false);
    case KVM_GET_MSR_FEATURE_INDEX_LIST:
        return msr_list(arg, true);
    case KVM_GET_SUPPORTED_CPUID:
        return supported_cpuid(arg);
    case KVM_GET_MSRS:
        return feature_msr_values(arg);
    case KVM_GET_DEVICE_ATTR:
    case KVM_HAS_DEVICE_ATTR:
        return system_attr(arg, req == KVM_GET_DEVICE_ATTR);
    case KVM_X86_GET_MCE_CAP_SUPPORTED:
        v = FK_MCE_CAP;
        memcpy(arg, &v, sizeof(v));
        return 0;
    default:
        return -ENOTTY;
    }
}
