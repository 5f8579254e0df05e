/* SPDX-License-Identifier: MIT */
/*
 * fds.c - what the fake /dev/kvm keeps for the whole process, under the
 * files that answer the ioctls (fakekvm.h): the libc functions it stands
 * in front of, the table of the fds it hands out, the VMs that close()
 * tells of closed notifier fds, and the making of its fds.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fakekvm.h"

/* ---- libc ------------------------------------------------------------- */

aiol__fk_libc aiol__fk_real;   /* set once under real_once, read-only after */
static pthread_once_t real_once = PTHREAD_ONCE_INIT;

static void *next(const char *name)
{
    void *p = dlsym(RTLD_NEXT, name);

    if (p == NULL && strncmp(name, "__", 2) != 0) {
        fprintf(stderr, "fakekvm: no %s in libc\n", name);
        abort();
    }
    return p;
}

#define RESOLVE(field, name)                                        \
    do {                                                            \
        void *p_ = next(name);                                      \
        memcpy(&aiol__fk_real.field, &p_, sizeof(p_));              \
    } while (0)

static void resolve(void)
{
    RESOLVE(open, "open");
    RESOLVE(open64, "open64");
    RESOLVE(openat, "openat");
    RESOLVE(openat64, "openat64");
    RESOLVE(open_2, "__open_2");
    RESOLVE(open64_2, "__open64_2");
    RESOLVE(openat_2, "__openat_2");
    RESOLVE(openat64_2, "__openat64_2");
    RESOLVE(ioctl, "ioctl");
    RESOLVE(close, "close");
    aiol__fk_real.log = getenv("AIOL_FAKE_KVM_LOG");
    if (aiol__fk_real.log != NULL && *aiol__fk_real.log == '\0') {
        aiol__fk_real.log = NULL;
    }
}

void aiol__fk_need_real(void)
{
    pthread_once(&real_once, resolve);
}

/* ---- the fds and the VMs ---------------------------------------------- */

/* fd -> our file, or NULL.  Atomic, no lock: entries are set once per fd
 * we create and cleared by close(). */
static _Atomic(fk_file *) files[FK_MAX_FD];

/* Every VM, for close() (aiol__kvm_model_fd_closed()).  Lock order:
 * vms_lock, then a VM's lock; a vCPU ioctl takes its VM's lock and drops
 * it before it takes the vCPU's. */
#define FK_MAX_VMS 16
static pthread_mutex_t vms_lock = PTHREAD_MUTEX_INITIALIZER;
static fk_vm *vms[FK_MAX_VMS];      /* guarded by vms_lock */
static size_t nvms;                 /* guarded by vms_lock */
/* fd -> some VM's model registered an ioeventfd or irqfd through it
 * (atomic, no lock; a hint that only spares close() the VMs' locks). */
static atomic_bool notifier_fd[FK_MAX_FD];
/* This thread holds a VM's lock (so the close() of the model's own
 * /proc fds must not take it again; they are no notifiers). */
static _Thread_local bool in_vm;

int aiol__fk_new_fd(const char *name, size_t size, bool cloexec, fk_file *f)
{
    int fd = memfd_create(name, cloexec ? MFD_CLOEXEC : 0);

    if (fd < 0) {
        return -errno;
    }
    if (fd >= FK_MAX_FD || (size && ftruncate(fd, (off_t)size) < 0)) {
        aiol__fk_real.close(fd);
        return fd >= FK_MAX_FD ? -EMFILE : -ENOMEM;
    }
    atomic_store(&files[fd], f);
    return fd;
}

void aiol__fk_drop_fd(int fd)
{
    atomic_store(&files[fd], NULL);
    aiol__fk_real.close(fd);
}

fk_file *aiol__fk_lookup(int fd)
{
    return fd >= 0 && fd < FK_MAX_FD ? atomic_load(&files[fd]) : NULL;
}

void *aiol__fk_zalloc(size_t size)
{
    void *p = calloc(1, size);

    if (p == NULL) {
        fprintf(stderr, "fakekvm: out of memory\n");
        abort();
    }
    return p;
}

fk_file *aiol__fk_new_file(fk_kind kind, fk_vm *vm, fk_vcpu *vcpu)
{
    fk_file *f = aiol__fk_zalloc(sizeof(*f));

    *f = (fk_file){ kind, vm, vcpu };
    return f;
}

long aiol__fk_stats_fd(void)
{
    struct kvm_stats_header h = {
        .name_size = FK_STATS_NAME_SIZE,
        .id_offset = sizeof(h),
        .desc_offset = sizeof(h) + FK_STATS_NAME_SIZE,
        .data_offset = sizeof(h) + FK_STATS_NAME_SIZE,
    };
    char id[FK_STATS_NAME_SIZE] = "kvm-fake";
    int fd = memfd_create("fakekvm-stats", MFD_CLOEXEC);

    if (fd < 0) {
        return -errno;
    }
    if (write(fd, &h, sizeof(h)) != sizeof(h) ||
        write(fd, id, sizeof(id)) != sizeof(id)) {
        aiol__fk_real.close(fd);
        return -EIO;
    }
    return fd;
}

bool aiol__fk_add_vm(fk_vm *vm)
{
    pthread_mutex_lock(&vms_lock);
    if (nvms == FK_MAX_VMS) {
        pthread_mutex_unlock(&vms_lock);
        return false;
    }
    vms[nvms++] = vm;
    pthread_mutex_unlock(&vms_lock);
    return true;
}

void aiol__fk_vm_lock(fk_vm *vm)
{
    pthread_mutex_lock(&vm->lock);
    in_vm = true;
}

void aiol__fk_vm_unlock(fk_vm *vm)
{
    in_vm = false;
    pthread_mutex_unlock(&vm->lock);
}

void aiol__fk_mark_notifier(long r, uint32_t fd, bool deassign)
{
    if (r == 0 && !deassign && fd < FK_MAX_FD) {
        atomic_store(&notifier_fd[fd], true);
    }
}

void aiol__fk_fd_closed(int fd)
{
    if (fd >= 0 && fd < FK_MAX_FD) {
        atomic_store(&files[fd], NULL);
        if (!in_vm && atomic_exchange(&notifier_fd[fd], false)) {
            pthread_mutex_lock(&vms_lock);
            for (size_t i = 0; i < nvms; i++) {
                pthread_mutex_lock(&vms[i]->lock);
                aiol__kvm_model_fd_closed(&vms[i]->model, fd);
                pthread_mutex_unlock(&vms[i]->lock);
            }
            pthread_mutex_unlock(&vms_lock);
        }
    }
}
