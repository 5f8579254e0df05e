/* SPDX-License-Identifier: MIT */
/*
 * fault.h - fault injection for test builds: fail the k-th allocation, or
 * the k-th call of a chosen syscall, made by the library.
 *
 * How: the test executables that link tests/fault.c are linked with
 * `-Wl,--wrap=malloc,--wrap=calloc,...` (tests/meson.build, fault_args).
 * The linker then sends every call in the objects of that link, the static
 * libaioloop.a's included, to the __wrap_ functions in fault.c, which count
 * the calls and fail the one a test armed.  Nothing of this is in the
 * library: a release build has no hook and pays nothing.
 *
 * Counting is off until a test arms a fault, and only the armed kind of
 * call is counted.  A fault is one-shot: after the k-th call failed, the
 * ones that follow succeed again (so a caller's retry succeeds), unless
 * the test arms "every call from the k-th on" (tf_fail_from()).
 *
 * Threads: the counters are atomic, so calls from an iothread count too;
 * the sweeps in test_faults.c are single-threaded to stay deterministic.
 */
#ifndef AIOLOOP_TESTS_FAULT_H
#define AIOLOOP_TESTS_FAULT_H

#include <stdbool.h>

/* The kinds of call that can be failed. */
typedef enum tf_call {
    TF_ALLOC,         /* malloc, calloc, realloc, aligned_alloc (fail: NULL,
                         ENOMEM) */
    TF_EPOLL_CREATE,  /* epoll_create1 */
    TF_EPOLL_CTL,     /* epoll_ctl */
    TF_EVENTFD,       /* eventfd */
    TF_URING_INIT,    /* io_uring_queue_init_params (liburing) */
    TF_MUTEX_LOCK,    /* pthread_mutex_lock: counted, never failed (arm it
                         at LONG_MAX to count the locks a call takes) */
    TF_CALL_KINDS,
} tf_call;

/*
 * Arms a fault: the @k-th call of @kind from now (1 = the next one) fails
 * with @err (TF_ALLOC: returns NULL with errno ENOMEM; @err is ignored).
 * Re-arming resets the count.  Disarmed: tf_disarm().
 */
void tf_fail_at(tf_call kind, long k, int err);

/* The same, but the k-th call and every later one fail until disarmed. */
void tf_fail_from(tf_call kind, long k, int err);

/* Disarms every fault and stops counting. */
void tf_disarm(void);

/* Calls of @kind counted since it was armed. */
long tf_count(tf_call kind);

/* How many calls the armed fault of @kind failed since it was armed. */
long tf_failed(tf_call kind);

#endif /* AIOLOOP_TESTS_FAULT_H */
