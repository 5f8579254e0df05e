/* SPDX-License-Identifier: MIT */
/*
 * refuse.h - syscalls that fail with a chosen errno, as a machine without
 * them makes them fail: a seccomp filter on the calling process, kept by
 * the processes it forks and the programs it executes (no_new_privs).
 * test_fallback.c refuses io_uring_setup and epoll_create1 to its
 * children; uring-refused runs a program with io_uring_setup refused.
 */
#ifndef AIOLOOP_TEST_REFUSE_H
#define AIOLOOP_TEST_REFUSE_H

#if defined(__x86_64__) || defined(__aarch64__)
/** Defined where tu_refuse() knows the architecture's syscall numbers. */
#define TU_REFUSE_SUPPORTED 1
#endif

/** The errno each syscall fails with; 0 leaves it alone. */
typedef struct tu_refusals {
    int uring_errno; /**< io_uring_setup */
    int epoll_errno; /**< epoll_create1 (and epoll_create) */
} tu_refusals;

/**
 * Installs the filter on the calling thread, for good.  0, or -errno when
 * seccomp is unavailable here (-ENOSYS: no TU_REFUSE_SUPPORTED).
 */
int tu_refuse(const tu_refusals *r);

#endif /* AIOLOOP_TEST_REFUSE_H */
