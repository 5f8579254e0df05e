/* SPDX-License-Identifier: MIT */
/* refuse.c - refuse.h's seccomp filter. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>

#include "refuse.h"

#if defined(__x86_64__)
#define TEST_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define TEST_AUDIT_ARCH AUDIT_ARCH_AARCH64
#endif

#ifdef TEST_AUDIT_ARCH
/* Appends to @f: syscall @nr fails with @err. */
static void refuse_nr(struct sock_filter *f, unsigned *n, unsigned nr,
                      int err)
{
    f[(*n)++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, nr,
                                             0, 1);
    f[(*n)++] = (struct sock_filter)BPF_STMT(
        BPF_RET | BPF_K,
        SECCOMP_RET_ERRNO | ((unsigned)err & SECCOMP_RET_DATA));
}
#endif

int tu_refuse(const tu_refusals *r)
{
#ifdef TEST_AUDIT_ARCH
    struct sock_filter f[16];
    unsigned n = 0;
    struct sock_fprog prog;

    /* another architecture's syscall numbers mean something else: allow */
    f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
                                          offsetof(struct seccomp_data, arch));
    f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K,
                                          TEST_AUDIT_ARCH, 1, 0);
    f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
    f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
                                          offsetof(struct seccomp_data, nr));
    if (r->uring_errno != 0) {
        refuse_nr(f, &n, __NR_io_uring_setup, r->uring_errno);
    }
    if (r->epoll_errno != 0) {
        refuse_nr(f, &n, __NR_epoll_create1, r->epoll_errno);
#ifdef __NR_epoll_create
        refuse_nr(f, &n, __NR_epoll_create, r->epoll_errno);
#endif
    }
    f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);

    prog.len = (unsigned short)n;
    prog.filter = f;
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
        prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
        return -errno;
    }
    return 0;
#else
    (void)r;
    return -ENOSYS;
#endif
}
