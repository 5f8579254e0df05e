/* SPDX-License-Identifier: MIT */
/*
 * vm.c - VM fds' ioctls for the fake /dev/kvm (fakekvm.c): memory slots
 * and the dirty log, the irqchips and the PIT, the clock, KVM_ENABLE_CAP,
 * KVM_CREATE_VCPU, and the notifier ioctls (KVM_IOEVENTFD, KVM_IRQFD,
 * KVM_SET_GSI_ROUTING) through ../../vmm/tests/kvm_model.h, all under the
 * VM's lock.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <linux/kvm.h>

#include "fakekvm.h"
#include "kvm_model.h"

_Static_assert(sizeof(struct kvm_pit_state2) <=
               sizeof(((fk_vm *)0)->state[0]), "the PIT state does not fit");

static int64_t now_ns(clockid_t clock)
{
    struct timespec ts;

    clock_gettime(clock, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static bool ranges_overlap(uint64_t a, uint64_t alen, uint64_t b,
                           uint64_t blen)
{
    return a < b + blen && b < a + alen;
}

static long set_memory_region(fk_vm *vm,
                              const struct kvm_userspace_memory_region *r)
{
    uint32_t id = r->slot & 0xffff;
    fk_slot *s;

    if ((r->flags & ~(uint32_t)(KVM_MEM_LOG_DIRTY_PAGES | KVM_MEM_READONLY)) ||
        (r->slot >> 16) != 0 || id >= FK_NR_MEMSLOTS ||
        ((r->memory_size | r->guest_phys_addr | r->userspace_addr) & 4095) ||
        r->guest_phys_addr + r->memory_size < r->guest_phys_addr) {
        return -EINVAL;
    }
    s = &vm->slot[id];
    if (r->memory_size == 0) {
        if (!s->used) {
            return -EINVAL;
        }
        s->used = false;
        return 0;
    }
    if (s->used && (s->size != r->memory_size || s->uaddr != r->userspace_addr ||
                    ((s->flags ^ r->flags) & KVM_MEM_READONLY))) {
        return -EINVAL;
    }
    for (uint32_t i = 0; i < FK_NR_MEMSLOTS; i++) {
        if (i != id && vm->slot[i].used &&
            ranges_overlap(vm->slot[i].gpa, vm->slot[i].size,
                           r->guest_phys_addr, r->memory_size)) {
            return -EEXIST;
        }
    }
    *s = (fk_slot){ true, r->flags, r->guest_phys_addr, r->memory_size,
                    r->userspace_addr };
    return 0;
}

/* The slot a dirty-log call names, or NULL (ENOENT). */
static fk_slot *dirty_slot(fk_vm *vm, uint32_t slot)
{
    fk_slot *s = (slot >> 16) == 0 && (slot & 0xffff) < FK_NR_MEMSLOTS
                 ? &vm->slot[slot & 0xffff] : NULL;

    return s && s->used && (s->flags & KVM_MEM_LOG_DIRTY_PAGES) ? s : NULL;
}

static long get_dirty_log(fk_vm *vm, const struct kvm_dirty_log *l)
{
    fk_slot *s = dirty_slot(vm, l->slot);
    uint64_t pages;

    if (s == NULL) {
        return -ENOENT;
    }
    pages = s->size / 4096;
    memset(l->dirty_bitmap, 0, (size_t)((pages + 63) / 64 * 8));
    return 0;
}

static long clear_dirty_log(fk_vm *vm, const struct kvm_clear_dirty_log *l)
{
    fk_slot *s = dirty_slot(vm, l->slot);
    uint64_t pages;

    if (!vm->dirty_manual) {
        return -EINVAL;
    }
    if (s == NULL) {
        return -ENOENT;
    }
    pages = s->size / 4096;
    if ((l->first_page & 63) || l->first_page >= pages ||
        l->num_pages > pages - l->first_page ||
        ((l->num_pages & 63) && l->first_page + l->num_pages != pages)) {
        return -EINVAL;
    }
    return 0;
}

static long enable_cap(fk_vm *vm, const struct kvm_enable_cap *c)
{
    if (c->flags != 0 || aiol__fk_check_extension(c->cap) == 0) {
        return -EINVAL;
    }
    switch (c->cap) {
    case KVM_CAP_SPLIT_IRQCHIP:
        if (vm->model.irqchip != AIOL__KVM_IRQCHIP_NONE) {
            return -EEXIST;
        }
        if (vm->nvcpus > 0 || c->args[0] > 256) {
            return -EINVAL;
        }
        vm->model.irqchip = AIOL__KVM_IRQCHIP_SPLIT;
        return 0;
    case KVM_CAP_MANUAL_DIRTY_LOG_PROTECT2:
        if (c->args[0] & ~(uint64_t)aiol__fk_check_extension(c->cap)) {
            return -EINVAL;
        }
        vm->dirty_manual = c->args[0] != 0;
        return 0;
    case KVM_CAP_MAX_VCPU_ID:
        return c->args[0] > FK_MAX_VCPUS || vm->nvcpus > 0 ? -EINVAL : 0;
    default:
        return 0;
    }
}

static long create_vcpu(fk_vm *vm, unsigned long id)
{
    fk_vcpu *v;
    long fd;

    if (id >= FK_MAX_VCPUS) {
        return -EINVAL;
    }
    if (vm->vcpu_id[id]) {
        return -EEXIST;
    }
    v = aiol__fk_zalloc(sizeof(*v));
    v->vm = vm;
    v->tsc_khz = FK_TSC_KHZ;
    pthread_mutex_init(&v->lock, NULL);
    fd = aiol__fk_new_fd("fakekvm-vcpu", FK_MMAP_SIZE, true,
                aiol__fk_new_file(FK_VCPU, vm, v));
    if (fd < 0) {
        return fd;
    }
    v->run = mmap(NULL, FK_MMAP_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED,
                  (int)fd, 0);
    if (v->run == MAP_FAILED) {
        aiol__fk_drop_fd((int)fd);
        return -ENOMEM;
    }
    vm->vcpu_id[id] = true;
    vm->nvcpus++;
    return fd;
}

static long vm_clock(fk_vm *vm, struct kvm_clock_data *c, bool get)
{
    int64_t mono = now_ns(CLOCK_MONOTONIC);

    if (!get) {
        vm->clock_offset = (int64_t)c->clock - mono;
        return 0;
    }
    memset(c, 0, sizeof(*c));
    c->clock = (uint64_t)(mono + vm->clock_offset);
    c->flags = KVM_CLOCK_TSC_STABLE | KVM_CLOCK_REALTIME | KVM_CLOCK_HOST_TSC;
    c->realtime = (uint64_t)now_ns(CLOCK_REALTIME);
    c->host_tsc = __builtin_ia32_rdtsc();
    return 0;
}

static long vm_irqchip(fk_vm *vm, struct kvm_irqchip *c, bool get)
{
    if (vm->model.irqchip != AIOL__KVM_IRQCHIP_KERNEL) {
        return -ENXIO;
    }
    if (c->chip_id > KVM_IRQCHIP_IOAPIC) {
        return -EINVAL;
    }
    return fk_state_io(vm->state[VM_PIC_MASTER + c->chip_id], &c->chip,
                    sizeof(c->chip), get);
}

static long ioeventfd(fk_vm *vm, const struct kvm_ioeventfd *a)
{
    long r = aiol__kvm_model_ioeventfd(&vm->model, a);

    aiol__fk_mark_notifier(r, (uint32_t)a->fd,
                           a->flags & KVM_IOEVENTFD_FLAG_DEASSIGN);
    return r;
}

/* KVM reads an irqfd's eventfd whenever it is signalled (to inject the
 * interrupt), and once more as it detaches it.  The fake reads it at
 * attach and detach only, which QEMU cannot tell apart: while attached
 * only KVM looks at it, and after the detach QEMU finds no stale signal. */
static long irqfd(fk_vm *vm, const struct kvm_irqfd *a)
{
    long r = aiol__kvm_model_irqfd(&vm->model, a);
    struct pollfd p = { .fd = (int)a->fd, .events = POLLIN };
    uint64_t v;

    aiol__fk_mark_notifier(r, a->fd, a->flags & KVM_IRQFD_FLAG_DEASSIGN);
    if (r == 0 && poll(&p, 1, 0) == 1 && (p.revents & POLLIN) &&
        read(p.fd, &v, sizeof(v)) < 0) {
        /* not readable after all: nothing was pending */
    }
    return r;
}

static long vm_ioctl_locked(fk_vm *vm, unsigned long req, void *arg)
{
    switch (req) {
    case KVM_CHECK_EXTENSION:
        return aiol__fk_check_extension((uintptr_t)arg);
    case KVM_CREATE_VCPU:
        return create_vcpu(vm, (uintptr_t)arg);
    case KVM_CREATE_IRQCHIP:
        if (vm->model.irqchip != AIOL__KVM_IRQCHIP_NONE) {
            return -EEXIST;
        }
        if (vm->nvcpus > 0) {
            return -EINVAL;
        }
        vm->model.irqchip = AIOL__KVM_IRQCHIP_KERNEL;
        return 0;
    case KVM_ENABLE_CAP:
        return enable_cap(vm, arg);
    case KVM_SET_TSS_ADDR:
    case KVM_SET_IDENTITY_MAP_ADDR:
    case KVM_X86_SET_MSR_FILTER:
    case KVM_REGISTER_COALESCED_MMIO:
    case KVM_UNREGISTER_COALESCED_MMIO:
        return 0;
    case KVM_SET_USER_MEMORY_REGION:
        return set_memory_region(vm, arg);
    case KVM_GET_DIRTY_LOG:
        return get_dirty_log(vm, arg);
    case KVM_CLEAR_DIRTY_LOG:
        return clear_dirty_log(vm, arg);
    case KVM_CREATE_PIT2:
        if (vm->pit) {
            return -EEXIST;
        }
        vm->pit = true;
        return 0;
    case KVM_GET_PIT2:
    case KVM_SET_PIT2:
        return vm->pit ? fk_state_io(vm->state[VM_PIT], arg,
                                  sizeof(struct kvm_pit_state2),
                                  req == KVM_GET_PIT2)
                       : -ENXIO;
    case KVM_GET_IRQCHIP:
    case KVM_SET_IRQCHIP:
        return vm_irqchip(vm, arg, req == KVM_GET_IRQCHIP);
    case KVM_IRQ_LINE:
    case KVM_IRQ_LINE_STATUS:
        if (vm->model.irqchip == AIOL__KVM_IRQCHIP_NONE) {
            return -ENXIO;
        }
        ((struct kvm_irq_level *)arg)->status = 1;  /* delivered */
        return 0;
    case KVM_SIGNAL_MSI:
        if (((const struct kvm_msi *)arg)->flags != 0) {
            return -EINVAL;
        }
        return vm->model.irqchip == AIOL__KVM_IRQCHIP_NONE ? -EPERM : 1;
    case KVM_IOEVENTFD:
        return ioeventfd(vm, arg);
    case KVM_IRQFD:
        return irqfd(vm, arg);
    case KVM_SET_GSI_ROUTING:
        return aiol__kvm_model_set_routing(&vm->model, arg);
    case KVM_GET_CLOCK:
    case KVM_SET_CLOCK:
        return vm_clock(vm, arg, req == KVM_GET_CLOCK);
    case KVM_GET_STATS_FD:
        return aiol__fk_stats_fd();
    case KVM_CREATE_DEVICE:
        return -ENODEV;
    default:
        return -ENOTTY;
    }
}

long aiol__fk_vm_ioctl(fk_vm *vm, unsigned long req, void *arg)
{
    long r;

    aiol__fk_vm_lock(vm);
    r = vm_ioctl_locked(vm, req, arg);
    aiol__fk_vm_unlock(vm);
    return r;
}
