/* SPDX-License-Identifier: MIT */
/*
 * kvm.c - the ioctl layer: the real aiol_vmm_kvm_ops, the call helper every
 * other file goes through, and a VM-creation convenience.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "internal.h"

_Noreturn void aiol__vmm_fail(const char *func, const char *msg)
{
    aiol__fail_in("aioloop-vmm", func, msg);
}

static int sys_ioctl(void *opaque, int fd, unsigned long request, void *arg)
{
    int r;

    (void)opaque;
    do {
        r = ioctl(fd, request, arg);
    } while (r < 0 && errno == EINTR);
    return r < 0 ? -errno : r;
}

const aiol_vmm_kvm_ops aiol_vmm_kvm_sys_ops = { .ioctl = sys_ioctl };

int aiol__vmm_kvm_ioctl(const aiol_vmm_kvm *kvm, unsigned long request,
                        void *arg)
{
    const aiol_vmm_kvm_ops *ops =
        kvm->ops != NULL ? kvm->ops : &aiol_vmm_kvm_sys_ops;

    return ops->ioctl(kvm->opaque, kvm->vm_fd, request, arg);
}

int aiol__vmm_eventfd_new(void)
{
    int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);

    return fd < 0 ? -errno : fd;
}

int aiol_vmm_vm_new(bool irqchip, int *vm_fd)
{
    int kvm, vm, r;

    aiol__vmm_check(vm_fd != NULL, "vm_fd is NULL");
    kvm = open("/dev/kvm", O_RDWR | O_CLOEXEC);
    if (kvm < 0) {
        return -errno;
    }
    do {
        vm = ioctl(kvm, KVM_CREATE_VM, 0);
    } while (vm < 0 && errno == EINTR);
    r = vm < 0 ? -errno : 0;
    close(kvm);
    if (r != 0) {
        return r;
    }
    if (irqchip && ioctl(vm, KVM_CREATE_IRQCHIP, 0) < 0) {
        r = -errno;
        close(vm);
        return r;
    }
    *vm_fd = vm;
    return 0;
}
