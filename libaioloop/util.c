/* SPDX-License-Identifier: MIT */
/* util.c - small helpers shared by the runtime files. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/futex.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "fdmon.h"

_Noreturn void aiol__fail(const char *func, const char *msg)
{
    aiol__fail_in("aioloop", func, msg);
}

_Thread_local uint64_t aiol__tid;

uint64_t aiol__thread_id_assign(void)
{
    static atomic_uint_fast64_t next = 1;

    aiol__tid = atomic_fetch_add_explicit(&next, 1, memory_order_relaxed);
    return aiol__tid;
}

/* Rounds of aiol__lock_slow() that look for a release before sleeping. */
#define LOCK_SPINS 100

static void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield" ::: "memory");
#endif
}

void aiol__lock_slow(atomic_uint *word)
{
    int saved = errno; /* (a caller may take the lock between a call and
                          its errno) */
    unsigned expected;

    /* The holder is likely running and about to release: look a while. */
    for (int i = 0; i < LOCK_SPINS; i++) {
        expected = 0;
        if (atomic_load_explicit(word, memory_order_relaxed) == 0 &&
            atomic_compare_exchange_weak_explicit(word, &expected, 1,
                                                  memory_order_acquire,
                                                  memory_order_relaxed)) {
            return;
        }
        cpu_relax();
    }
    /*
     * Take it marked contended (2): we cannot know whether others sleep,
     * so our release must wake one.  Acquire pairs with the release
     * exchange in aiol__mutex_give(); sleep only while the word still says 2,
     * so a release between the exchange and the wait is not missed.
     */
    while (atomic_exchange_explicit(word, 2, memory_order_acquire) != 0) {
        syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, 2, NULL, NULL, 0);
    }
    errno = saved;
}

void aiol__unlock_wake(atomic_uint *word)
{
    int saved = errno;

    syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
    errno = saved;
}

int aiol__reserve_grow(void *arrp, size_t *cap, size_t want, size_t esize)
{
    size_t size = *cap ? *cap : 64;
    char *arr, *bigger;

    while (size < want) {
        size *= 2;
    }
    memcpy(&arr, arrp, sizeof(arr));
    bigger = realloc(arr, size * esize);
    if (bigger == NULL) {
        return -ENOMEM;
    }
    memset(bigger + *cap * esize, 0, (size - *cap) * esize);
    memcpy(arrp, &bigger, sizeof(bigger));
    *cap = size;
    return 0;
}

int aiol__fd_reserve(void *arrp, size_t *cap, size_t esize, int fd, int **l1,
                     size_t *c1, int **l2, size_t *c2)
{
    int ret = aiol__reserve(arrp, cap, (size_t)fd + 1, esize);

    if (ret == 0) {
        ret = aiol__reserve(l1, c1, *cap, sizeof(**l1));
    }
    if (ret == 0) {
        ret = aiol__reserve(l2, c2, *cap, sizeof(**l2));
    }
    return ret;
}

int aiol__fd_list_push(int **v, size_t *n, size_t *cap, int fd)
{
    int ret = aiol__reserve(v, cap, *n + 1, sizeof(**v));

    if (ret == 0) {
        (*v)[(*n)++] = fd;
    }
    return ret;
}

int aiol__fd_list_mark(int **v, size_t *n, size_t *cap, bool *listed, int fd)
{
    int ret = *listed ? 0 : aiol__fd_list_push(v, n, cap, fd);

    *listed = *listed || ret == 0;
    return ret;
}

/* The shared AIOL__EV_* <-> poll bit mapping holds for epoll's bits too. */
_Static_assert(EPOLLIN == POLLIN && EPOLLOUT == POLLOUT &&
               EPOLLERR == POLLERR && EPOLLHUP == POLLHUP &&
               EPOLLRDHUP == POLLRDHUP, "epoll and poll bits differ");

int aiol__epoll_change(aiol_loop *loop, int epfd, int fd, unsigned oev,
                       unsigned nev)
{
    struct epoll_event ev = { .events = aiol__events_to_poll(nev),
                              .data.fd = fd };
    int op;

    if (oev == nev) {
        return 0; /* unchanged re-arm: nothing for the kernel */
    }
    op = oev == 0 ? EPOLL_CTL_ADD : nev == 0 ? EPOLL_CTL_DEL : EPOLL_CTL_MOD;
    loop->stats.fdmon_ctls++;
    if (epoll_ctl(epfd, op, fd, &ev) == 0) {
        return 0;
    }
    if (op == EPOLL_CTL_DEL && (errno == EBADF || errno == ENOENT)) {
        return 0;
    }
    if (op == EPOLL_CTL_MOD && errno == ENOENT) {
        loop->stats.fdmon_ctls++;
        if (epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) == 0) {
            return 0;
        }
    }
    return -errno;
}
