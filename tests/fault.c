/* SPDX-License-Identifier: MIT */
/*
 * fault.c - the link-time wrappers behind fault.h.
 *
 * Each __wrap_X counts the call when its kind is armed, fails it when the
 * count reaches the armed one, and otherwise calls __real_X, the symbol
 * the linker keeps for the original.  See fault.h for how it is linked.
 */
#include "fault.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>

struct io_uring;
struct io_uring_params;

void *__real_malloc(size_t size);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t size);
void *__real_aligned_alloc(size_t align, size_t size);
int __real_epoll_create1(int flags);
int __real_epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev);
int __real_eventfd(unsigned int initval, int flags);
int __real_io_uring_queue_init_params(unsigned entries, struct io_uring *ring,
                                      struct io_uring_params *p);
int __real_pthread_mutex_lock(pthread_mutex_t *m);
int __wrap_pthread_mutex_lock(pthread_mutex_t *m);

void *__wrap_malloc(size_t size);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t size);
void *__wrap_aligned_alloc(size_t align, size_t size);
int __wrap_epoll_create1(int flags);
int __wrap_epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev);
int __wrap_eventfd(unsigned int initval, int flags);
int __wrap_io_uring_queue_init_params(unsigned entries, struct io_uring *ring,
                                      struct io_uring_params *p);

/* One armed fault per kind; any thread may count. */
typedef struct tf_slot {
    atomic_bool armed;
    atomic_bool sticky;  /* fail every call from the k-th on */
    atomic_long at;      /* the call number that fails */
    atomic_long count;   /* calls seen since armed */
    atomic_long failed;  /* calls failed since armed */
    atomic_int err;
} tf_slot;

static tf_slot slots[TF_CALL_KINDS];

static void arm(tf_call kind, long k, int err, bool sticky)
{
    tf_slot *s = &slots[kind];

    atomic_store(&s->armed, false);
    atomic_store(&s->count, 0);
    atomic_store(&s->failed, 0);
    atomic_store(&s->at, k);
    atomic_store(&s->err, err);
    atomic_store(&s->sticky, sticky);
    atomic_store(&s->armed, true);
}

void tf_fail_at(tf_call kind, long k, int err)
{
    arm(kind, k, err, false);
}

void tf_fail_from(tf_call kind, long k, int err)
{
    arm(kind, k, err, true);
}

void tf_disarm(void)
{
    for (int i = 0; i < TF_CALL_KINDS; i++) {
        atomic_store(&slots[i].armed, false);
    }
}

long tf_count(tf_call kind)
{
    return atomic_load(&slots[kind].count);
}

long tf_failed(tf_call kind)
{
    return atomic_load(&slots[kind].failed);
}

/* Counts a call of @kind; true (errno set) when it must fail. */
static bool should_fail(tf_call kind)
{
    tf_slot *s = &slots[kind];
    long n, at;

    if (!atomic_load_explicit(&s->armed, memory_order_relaxed)) {
        return false;
    }
    n = atomic_fetch_add(&s->count, 1) + 1;
    at = atomic_load(&s->at);
    if (n == at || (n > at && atomic_load(&s->sticky))) {
        atomic_fetch_add(&s->failed, 1);
        errno = kind == TF_ALLOC ? ENOMEM : atomic_load(&s->err);
        return true;
    }
    return false;
}

void *__wrap_malloc(size_t size)
{
    return should_fail(TF_ALLOC) ? NULL : __real_malloc(size);
}

void *__wrap_calloc(size_t n, size_t size)
{
    return should_fail(TF_ALLOC) ? NULL : __real_calloc(n, size);
}

void *__wrap_realloc(void *p, size_t size)
{
    return should_fail(TF_ALLOC) ? NULL : __real_realloc(p, size);
}

void *__wrap_aligned_alloc(size_t align, size_t size)
{
    return should_fail(TF_ALLOC) ? NULL : __real_aligned_alloc(align, size);
}

int __wrap_epoll_create1(int flags)
{
    return should_fail(TF_EPOLL_CREATE) ? -1 : __real_epoll_create1(flags);
}

int __wrap_epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
    return should_fail(TF_EPOLL_CTL) ? -1 : __real_epoll_ctl(epfd, op, fd, ev);
}

int __wrap_eventfd(unsigned int initval, int flags)
{
    return should_fail(TF_EVENTFD) ? -1 : __real_eventfd(initval, flags);
}

#ifdef AIOL_HAVE_IO_URING
/* liburing returns -errno instead of setting errno. */
int __wrap_io_uring_queue_init_params(unsigned entries, struct io_uring *ring,
                                      struct io_uring_params *p)
{
    if (should_fail(TF_URING_INIT)) {
        return -errno;
    }
    return __real_io_uring_queue_init_params(entries, ring, p);
}
#endif

/* Counted only: a lock that failed would leave its caller unprotected. */
int __wrap_pthread_mutex_lock(pthread_mutex_t *m)
{
    tf_slot *s = &slots[TF_MUTEX_LOCK];

    if (atomic_load_explicit(&s->armed, memory_order_relaxed)) {
        atomic_fetch_add(&s->count, 1);
    }
    return __real_pthread_mutex_lock(m);
}
