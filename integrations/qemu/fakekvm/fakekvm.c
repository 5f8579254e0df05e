/* SPDX-License-Identifier: MIT */
/*
 * fakekvm.c - a /dev/kvm in userspace for QEMU (x86_64), loaded with
 * LD_PRELOAD, so that QEMU's whole KVM device path (accel/kvm, the x86
 * KVM code, the in-kernel irqchip's routes, virtio-pci's and vhost's
 * irqfds and ioeventfds) runs where /dev/kvm is missing, and so that the
 * notifier ioctls are checked against KVM's rules and logged.
 *
 * It replaces open/open64/openat/openat64 (and glibc's __open*_2) of
 * "/dev/kvm", ioctl and close; everything else goes to libc.  The system
 * fd, VM fds (KVM_CREATE_VM) and vCPU fds (KVM_CREATE_VCPU) it hands out
 * are memfds of its own: a vCPU's is KVM_GET_VCPU_MMAP_SIZE bytes, so
 * QEMU's mmap() of it is a real mapping holding struct kvm_run (and an
 * empty coalesced-MMIO ring at page 2).  The real /dev/kvm is never
 * opened.
 *
 * What it models:
 *   - the answers this project's host KVM (Linux 6.18, x86_64) gives QEMU
 *     10.2: the capabilities QEMU asks for, the supported CPUID, the MSR
 *     and feature-MSR lists (with KVM's E2BIG size protocol), the feature
 *     MSRs' values, XCOMP_GUEST_SUPP, the MCE capabilities, the TSC rate;
 *   - KVM_IOEVENTFD, KVM_SET_GSI_ROUTING and KVM_IRQFD with the rules of
 *     ../../vmm/tests/kvm_model.h (EEXIST, EBUSY, ENOENT, EINVAL... as
 *     KVM), against the VM's irqchip (KVM_CREATE_IRQCHIP, or
 *     KVM_CAP_SPLIT_IRQCHIP);
 *   - memory slots (KVM_SET_USER_MEMORY_REGION: alignment, flags, EEXIST
 *     for an overlap, what a slot may change), the dirty log (nothing is
 *     ever dirty: no guest code runs), KVM_CREATE_VCPU's EEXIST/EINVAL,
 *     KVM_CREATE_IRQCHIP/PIT2's EEXIST, ENXIO for an irqchip or PIT the
 *     VM does not have;
 *   - vCPU and VM state as storage: each KVM_SET_x (registers, sregs2,
 *     xsave, xcrs, LAPIC, events, MP state, debug registers, MSRs, PIT,
 *     each irqchip) is what the next KVM_GET_x returns, zeroes before;
 *     KVM_GET_CLOCK runs with CLOCK_MONOTONIC from the last KVM_SET_CLOCK;
 *   - irqfds: an eventfd is read (its signal "injected") as it is attached
 *     and detached; in between, QEMU never looks at it;
 *   - KVM_RUN: no guest runs.  It blocks until a signal handler runs
 *     (with the mask of KVM_SET_SIGNAL_MASK if one was set, the thread's
 *     otherwise), or returns at once when kvm_run->immediate_exit is set,
 *     and fails with EINTR and exit_reason KVM_EXIT_INTR, as KVM does when
 *     QEMU kicks a vCPU (a halted vCPU on an in-kernel irqchip blocks the
 *     same way).
 * What it does not model: guest execution and every exit but
 * KVM_EXIT_INTR; interrupt delivery (KVM_IRQ_LINE_STATUS and
 * KVM_SIGNAL_MSI succeed; no irqchip state changes); KVM_CREATE_DEVICE
 * (ENODEV: no VFIO device); dup()s of its fds (a dup is a plain memfd);
 * close_range() or dup2() over its fds or over the eventfds of
 * notifiers (only close() is seen); fds it would hand out at or above
 * FK_MAX_FD (EMFILE); memory encryption, Hyper-V, Xen, SMM, nested
 * state, dirty rings, guest_memfd; other architectures.
 * Unknown ioctls on its fds fail with ENOTTY and show in the log.
 *
 * The log: with AIOL_FAKE_KVM_LOG=PATH, every ioctl on its fds appends one
 * line to PATH as it returns, strace-like ("TID ioctl(FD, KVM_NAME,
 * ARGS) = RET" or "= -1 ERRNO"), in one write() to an O_APPEND file, so
 * the lines of many threads and processes do not mix.  (The file is
 * opened for each line: QEMU's fd numbers stay those of a real run.)
 *
 * This file holds the interposed functions and the log; the ioctls of
 * /dev/kvm, of VM fds and of vCPU fds are host.c's, vm.c's and vcpu.c's,
 * over fds.c's table of fds (fakekvm.h).
 */
#undef _FORTIFY_SOURCE   /* we define open() and friends ourselves */
#undef _FILE_OFFSET_BITS /* and open64() next to open() */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/types.h>
#include <unistd.h>

#include <linux/kvm.h>

#include "fakekvm.h"

#define EXPORT __attribute__((visibility("default")))

/* ---- the log ---------------------------------------------------------- */

/* Appends @len bytes to the log.  The file is opened for each line, so
 * QEMU's fd numbers and fd table stay what they are on real KVM (under
 * strace, whose log is not QEMU's). */
static void log_write(const char *line, size_t len)
{
    int fd = aiol__fk_real.open(aiol__fk_real.log,
                                O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC,
                                0644);

    if (fd < 0 || write(fd, line, len) != (ssize_t)len) {
        fprintf(stderr, "fakekvm: %s: %s\n", aiol__fk_real.log,
                strerror(errno));
    }
    if (fd >= 0) {
        aiol__fk_real.close(fd);
    }
}

#define NAME(x) { x, #x }
static const struct {
    unsigned long req;
    const char *name;
} names[] = {
    NAME(KVM_GET_API_VERSION), NAME(KVM_CREATE_VM), NAME(KVM_CHECK_EXTENSION),
    NAME(KVM_GET_VCPU_MMAP_SIZE), NAME(KVM_GET_MSR_INDEX_LIST),
    NAME(KVM_GET_MSR_FEATURE_INDEX_LIST), NAME(KVM_GET_SUPPORTED_CPUID),
    NAME(KVM_GET_DEVICE_ATTR), NAME(KVM_HAS_DEVICE_ATTR),
    NAME(KVM_X86_GET_MCE_CAP_SUPPORTED), NAME(KVM_CREATE_VCPU),
    NAME(KVM_CREATE_IRQCHIP), NAME(KVM_ENABLE_CAP), NAME(KVM_SET_TSS_ADDR),
    NAME(KVM_SET_IDENTITY_MAP_ADDR), NAME(KVM_X86_SET_MSR_FILTER),
    NAME(KVM_REGISTER_COALESCED_MMIO), NAME(KVM_UNREGISTER_COALESCED_MMIO),
    NAME(KVM_SET_USER_MEMORY_REGION), NAME(KVM_GET_DIRTY_LOG),
    NAME(KVM_CLEAR_DIRTY_LOG), NAME(KVM_CREATE_PIT2), NAME(KVM_GET_PIT2),
    NAME(KVM_SET_PIT2), NAME(KVM_GET_IRQCHIP), NAME(KVM_SET_IRQCHIP),
    NAME(KVM_IRQ_LINE), NAME(KVM_IRQ_LINE_STATUS), NAME(KVM_SIGNAL_MSI),
    NAME(KVM_IOEVENTFD), NAME(KVM_IRQFD), NAME(KVM_SET_GSI_ROUTING),
    NAME(KVM_GET_CLOCK), NAME(KVM_SET_CLOCK), NAME(KVM_GET_STATS_FD),
    NAME(KVM_CREATE_DEVICE), NAME(KVM_RUN), NAME(KVM_SET_SIGNAL_MASK),
    NAME(KVM_GET_REGS), NAME(KVM_SET_REGS), NAME(KVM_GET_SREGS),
    NAME(KVM_SET_SREGS), NAME(KVM_GET_SREGS2), NAME(KVM_SET_SREGS2),
    NAME(KVM_GET_FPU), NAME(KVM_SET_FPU), NAME(KVM_GET_XSAVE),
    NAME(KVM_GET_XSAVE2), NAME(KVM_SET_XSAVE), NAME(KVM_GET_XCRS),
    NAME(KVM_SET_XCRS), NAME(KVM_GET_LAPIC), NAME(KVM_SET_LAPIC),
    NAME(KVM_GET_VCPU_EVENTS), NAME(KVM_SET_VCPU_EVENTS),
    NAME(KVM_GET_MP_STATE), NAME(KVM_SET_MP_STATE), NAME(KVM_GET_DEBUGREGS),
    NAME(KVM_SET_DEBUGREGS), NAME(KVM_GET_MSRS), NAME(KVM_SET_MSRS),
    NAME(KVM_SET_CPUID2), NAME(KVM_GET_TSC_KHZ), NAME(KVM_SET_TSC_KHZ),
    NAME(KVM_X86_SETUP_MCE), NAME(KVM_X86_SET_MCE),
    NAME(KVM_TPR_ACCESS_REPORTING), NAME(KVM_SET_VAPIC_ADDR),
    NAME(KVM_KVMCLOCK_CTRL), NAME(KVM_SET_GUEST_DEBUG), NAME(KVM_NMI),
    NAME(KVM_INTERRUPT), NAME(KVM_SMI),
};

static void log_call(int fd, unsigned long req, void *arg, long r)
{
    char line[256], name[32];
    const char *n = NULL;
    int len;

    if (aiol__fk_real.log == NULL) {
        return;
    }
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]) && !n; i++) {
        n = names[i].req == req ? names[i].name : NULL;
    }
    if (n == NULL) {
        snprintf(name, sizeof(name), "%#lx /* unknown */", req);
        n = name;
    }
    len = snprintf(line, sizeof(line), "%d ioctl(%d, %s, ", gettid(), fd, n);
    if (req == KVM_IRQFD) {
        const struct kvm_irqfd *a = arg;

        len += snprintf(line + len, sizeof(line) - (size_t)len,
                        "{fd=%u, gsi=%u, flags=%#x}", a->fd, a->gsi, a->flags);
    } else if (req == KVM_IOEVENTFD) {
        const struct kvm_ioeventfd *a = arg;

        len += snprintf(line + len, sizeof(line) - (size_t)len,
                        "{datamatch=%#llx, addr=%#llx, len=%u, fd=%d, "
                        "flags=%#x}", (unsigned long long)a->datamatch,
                        (unsigned long long)a->addr, a->len, a->fd, a->flags);
    } else if (req == KVM_SET_GSI_ROUTING) {
        len += snprintf(line + len, sizeof(line) - (size_t)len, "{nr=%u}",
                        ((const struct kvm_irq_routing *)arg)->nr);
    } else {
        len += snprintf(line + len, sizeof(line) - (size_t)len, "%#lx",
                        (unsigned long)(uintptr_t)arg);
    }
    if (r >= 0) {
        len += snprintf(line + len, sizeof(line) - (size_t)len, ") = %ld\n", r);
    } else {
        len += snprintf(line + len, sizeof(line) - (size_t)len,
                        ") = -1 %s (%s)\n", strerrorname_np((int)-r),
                        strerror((int)-r));
    }
    if (len > (int)sizeof(line) - 1) {
        len = (int)sizeof(line) - 1;
        line[len - 1] = '\n';
    }
    log_write(line, (size_t)len);
}

/* ---- the interposed functions ------------------------------------------- */

static bool is_kvm(const char *path)
{
    return path != NULL && strcmp(path, "/dev/kvm") == 0;
}

static int open_kvm(int flags)
{
    static fk_file system = { FK_SYSTEM, NULL, NULL };
    int fd = aiol__fk_new_fd("fakekvm-dev", 0, flags & O_CLOEXEC, &system);

    if (fd < 0) {
        errno = -fd;
        return -1;
    }
    return fd;
}

static mode_t mode_arg(int flags, va_list ap)
{
    return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE
           ? (mode_t)va_arg(ap, unsigned) : 0;
}

/* An interposed open: @params its parameters (path and flags among
 * them), @args the real one's arguments. */
#define OPEN(fn, field, params, args)                                     \
    EXPORT int fn params                                                  \
    {                                                                     \
        va_list ap;                                                       \
        mode_t mode;                                                      \
                                                                          \
        aiol__fk_need_real();                                             \
        if (is_kvm(path)) {                                               \
            return open_kvm(flags);                                       \
        }                                                                 \
        va_start(ap, flags);                                              \
        mode = mode_arg(flags, ap);                                       \
        va_end(ap);                                                       \
        return aiol__fk_real.field args;                                  \
    }

/* glibc's checking variants (_FORTIFY_SOURCE callers): no mode. */
#define OPEN_2(fn, field, params, args)                                   \
    EXPORT int fn params;                                                 \
    EXPORT int fn params                                                  \
    {                                                                     \
        aiol__fk_need_real();                                             \
        return is_kvm(path) ? open_kvm(flags)                             \
                            : aiol__fk_real.field args;                   \
    }

OPEN(open, open, (const char *path, int flags, ...), (path, flags, mode))
OPEN(open64, open64, (const char *path, int flags, ...),
     (path, flags, mode))
OPEN(openat, openat, (int dirfd, const char *path, int flags, ...),
     (dirfd, path, flags, mode))
OPEN(openat64, openat64, (int dirfd, const char *path, int flags, ...),
     (dirfd, path, flags, mode))
OPEN_2(__open_2, open_2, (const char *path, int flags), (path, flags))
OPEN_2(__open64_2, open64_2, (const char *path, int flags), (path, flags))
OPEN_2(__openat_2, openat_2, (int dirfd, const char *path, int flags),
       (dirfd, path, flags))
OPEN_2(__openat64_2, openat64_2, (int dirfd, const char *path, int flags),
       (dirfd, path, flags))

EXPORT int ioctl(int fd, unsigned long req, ...)
{
    fk_file *f = aiol__fk_lookup(fd);
    va_list ap;
    void *arg;
    long r;

    va_start(ap, req);
    arg = va_arg(ap, void *);
    va_end(ap);
    aiol__fk_need_real();
    if (f == NULL) {
        return aiol__fk_real.ioctl(fd, req, arg);
    }
    switch (f->kind) {
    case FK_SYSTEM:
        r = aiol__fk_system_ioctl(req, arg);
        break;
    case FK_VM:
        r = aiol__fk_vm_ioctl(f->vm, req, arg);
        break;
    default:
        r = aiol__fk_vcpu_ioctl(f->vcpu, req, arg);
        break;
    }
    log_call(fd, req, arg, r);
    if (r < 0) {
        errno = (int)-r;
        return -1;
    }
    return (int)r;
}

EXPORT int close(int fd)
{
    aiol__fk_need_real();
    aiol__fk_fd_closed(fd);
    return aiol__fk_real.close(fd);
}
