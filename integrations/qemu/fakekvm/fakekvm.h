/* SPDX-License-Identifier: MIT */
/*
 * fakekvm.h - what the files of the LD_PRELOAD fake /dev/kvm share (what
 * it models, and what not: fakekvm.c): the host's limits, the state of
 * its fds, VMs and vCPUs, and the few calls from file to file.  Calls go
 * one way, down this list:
 *   fakekvm.c  the interposed open*, ioctl and close, and the log; an
 *              ioctl on one of its fds goes to host.c, vm.c or vcpu.c by
 *              the fd's kind
 *   vcpu.c     vCPU fds' ioctls
 *   vm.c       VM fds' ioctls, KVM_CREATE_VCPU (asks host.c for the
 *              capabilities)
 *   host.c     /dev/kvm's ioctls: what the host's KVM answers, and
 *              KVM_CREATE_VM
 *   fds.c      under them all: libc's functions, the table of its fds,
 *              the VMs close() tells of closed notifiers, new fds
 */
#ifndef AIOLOOP_FAKEKVM_H
#define AIOLOOP_FAKEKVM_H

#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <linux/kvm.h>

#include "kvm_model.h"

#define FK_MAX_FD 65536     /* fds of ours must be below this */
#define FK_API_VERSION 12
#define FK_MMAP_SIZE 12288  /* kvm_run, PIO data, coalesced-MMIO ring */
#define FK_MAX_VCPUS 1024   /* KVM_CAP_MAX_VCPUS, KVM_CAP_MAX_VCPU_ID */
#define FK_NR_MEMSLOTS 32764
#define FK_MAX_MSRS 512     /* MSR values a vCPU keeps */
#define FK_MAX_IO_MSRS 256  /* KVM's MAX_IO_MSRS */
#define FK_MAX_CPUID 256    /* KVM_MAX_CPUID_ENTRIES */
#define FK_TSC_KHZ 2599998
#define FK_XCOMP_GUEST_SUPP 0xe7
#define FK_MCE_CAP 0x1000100ULL /* MCG_SER_P | MCG_CTL_P */
#define FK_STATE_MAX 4096   /* the largest state struct (kvm_xsave) */
#define FK_STATS_NAME_SIZE 48 /* KVM_STATS_NAME_SIZE (a kernel-internal name) */

/* ---- the fds ------------------------------------------------------------ */

typedef enum fk_kind { FK_SYSTEM, FK_VM, FK_VCPU } fk_kind;

typedef struct fk_slot {
    bool used;
    uint32_t flags;
    uint64_t gpa, size, uaddr;
} fk_slot;

/* VM state kept for KVM_GET_x: the PIT and the three irqchips. */
enum { VM_PIT, VM_PIC_MASTER, VM_PIC_SLAVE, VM_IOAPIC, VM_NSTATE };

typedef struct fk_vm {
    pthread_mutex_t lock;    /* guards every field below */
    aiol__kvm_model model;   /* notifier ioctls and the irqchip mode */
    bool pit;
    bool dirty_manual;       /* KVM_CAP_MANUAL_DIRTY_LOG_PROTECT2 on */
    int64_t clock_offset;    /* kvmclock - CLOCK_MONOTONIC, ns */
    int nvcpus;
    bool vcpu_id[FK_MAX_VCPUS];
    fk_slot slot[FK_NR_MEMSLOTS];
    unsigned char state[VM_NSTATE][sizeof(struct kvm_irqchip)];
} fk_vm;

/* vCPU state kept for KVM_GET_x, in the order of vcpu.c's vcpu_state[]. */
#define VCPU_NSTATE 10

typedef struct fk_vcpu {
    /* vm and run: set before KVM_CREATE_VCPU returns its fd, constant
     * after (run's contents are QEMU's and KVM_RUN's, as in KVM). */
    fk_vm *vm;
    struct kvm_run *run;     /* our own mapping of the vCPU's memfd */
    pthread_mutex_t lock;    /* guards every field below */
    bool has_sigmask;
    sigset_t sigmask;        /* KVM_SET_SIGNAL_MASK's */
    uint32_t tsc_khz;
    size_t nmsrs;
    struct kvm_msr_entry msr[FK_MAX_MSRS];
    unsigned char state[VCPU_NSTATE][FK_STATE_MAX];
} fk_vcpu;

/* Immutable once published in fds.c's table; never freed (a vCPU thread
 * may still be in KVM_RUN when its fd is closed: real KVM keeps the vCPU
 * alive as well). */
typedef struct fk_file {
    fk_kind kind;
    fk_vm *vm;
    fk_vcpu *vcpu;
} fk_file;

/* KVM_GET_x / KVM_SET_x of a state kept as bytes. */
static inline long fk_state_io(unsigned char *state, void *arg, size_t size,
                               bool get)
{
    if (get) {
        memcpy(arg, state, size);
    } else {
        memcpy(state, arg, size);
    }
    return 0;
}

/* ---- fds.c: libc ------------------------------------------------------ */

typedef int aiol__fk_open_fn(const char *, int, ...);
typedef int aiol__fk_openat_fn(int, const char *, int, ...);
typedef int aiol__fk_open2_fn(const char *, int);
typedef int aiol__fk_openat2_fn(int, const char *, int);
typedef int aiol__fk_ioctl_fn(int, unsigned long, ...);
typedef int aiol__fk_close_fn(int);

typedef struct aiol__fk_libc {
    aiol__fk_open_fn *open, *open64;
    aiol__fk_openat_fn *openat, *openat64;
    aiol__fk_open2_fn *open_2, *open64_2;
    aiol__fk_openat2_fn *openat_2, *openat64_2;
    aiol__fk_ioctl_fn *ioctl;
    aiol__fk_close_fn *close;
    const char *log;   /* AIOL_FAKE_KVM_LOG, or NULL */
} aiol__fk_libc;

/* Set once by aiol__fk_need_real() (under a pthread_once), read-only
 * after. */
extern aiol__fk_libc aiol__fk_real;

void aiol__fk_need_real(void);

/* ---- fds.c: our fds, the VMs ------------------------------------------ */

/* calloc(), or abort. */
void *aiol__fk_zalloc(size_t size);
fk_file *aiol__fk_new_file(fk_kind kind, fk_vm *vm, fk_vcpu *vcpu);
/* A memfd of @size bytes published as @f; the fd, or -errno. */
int aiol__fk_new_fd(const char *name, size_t size, bool cloexec, fk_file *f);
/* Unpublishes and closes @fd, from aiol__fk_new_fd() just now. */
void aiol__fk_drop_fd(int fd);
/* Our file behind @fd, or NULL. */
fk_file *aiol__fk_lookup(int fd);
/* KVM_GET_STATS_FD: a header with no statistics. */
long aiol__fk_stats_fd(void);

/* Lists @vm for close(); false when the list is full. */
bool aiol__fk_add_vm(fk_vm *vm);
/* Take and drop @vm's lock around a VM ioctl: on this thread in between,
 * close() (of the model's own /proc fds) does not take VMs' locks. */
void aiol__fk_vm_lock(fk_vm *vm);
void aiol__fk_vm_unlock(fk_vm *vm);
/* After a notifier ioctl through fd @fd with result @r: close() of @fd
 * has a model to tell. */
void aiol__fk_mark_notifier(long r, uint32_t fd, bool deassign);
/* close(@fd) is about to run: @fd is no longer ours, and the VMs' models
 * hear of it if a notifier was registered through it. */
void aiol__fk_fd_closed(int fd);

/* ---- the kinds of fd ------------------------------------------------- */

/* host.c */
int aiol__fk_check_extension(unsigned long cap);
long aiol__fk_system_ioctl(unsigned long req, void *arg);
/* vm.c */
long aiol__fk_vm_ioctl(fk_vm *vm, unsigned long req, void *arg);
/* vcpu.c */
long aiol__fk_vcpu_ioctl(fk_vcpu *v, unsigned long req, void *arg);

#endif
