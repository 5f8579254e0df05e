/* SPDX-License-Identifier: MIT */
/*
 * util-priv.h - the small helpers of every file of libaioloop: the misuse
 * check, the hot/cold function attributes, a lazily read clock, array
 * growth and a thread's number (util.c implements what is not inline).
 * Needs nothing of the loop; internal.h includes it.
 */
#ifndef AIOLOOP_UTIL_PRIV_H
#define AIOLOOP_UTIL_PRIV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "aioloop/aioloop.h"
#include "check-priv.h"

/* Misuse check that survives NDEBUG: prints "aioloop: <func>: <msg>" and aborts. */
#define aiol__check(cond, msg) AIOL__CHECK_IN(aiol__fail, cond, msg)

_Noreturn void aiol__fail(const char *func, const char *msg);

/*
 * Functions on the path of every iteration.  GCC and clang put them in
 * .text.hot, which the linker groups: an iteration then runs from a few
 * code pages, which matters where each syscall costs TLB misses: a host
 * loop's iteration runs between syscalls that evict much of the TLB.
 */
#define AIOL__HOT __attribute__((hot))

/*
 * A path a hot function takes rarely or on its own (a growth, a removal),
 * kept out of line so the hot path saves no registers for it: gcc does
 * not shrink-wrap a function's prologue around its calls.
 */
#define AIOL__NOINLINE __attribute__((noinline))
/* Its converse: a hot helper inlined even where gcc would not. */
#define AIOL__INLINE inline __attribute__((always_inline))

/*
 * The current time, read at most once and only if needed: computing a
 * deadline with no timer or idle bottom half armed reads no clock (a
 * clock read is a visible share of a host loop's iteration).  Local to
 * one call; AIOL__NOW_LAZY starts one, AIOL__NOW_AT(ns) one already read.
 */
typedef struct aiol__now {
    bool read;
    int64_t ns;
} aiol__now;
#define AIOL__NOW_LAZY ((aiol__now){ .read = false, .ns = 0 })
#define AIOL__NOW_AT(t) ((aiol__now){ .read = true, .ns = (t) })

static inline int64_t aiol__now_get(aiol__now *now)
{
    if (!now->read) {
        now->ns = aiol_mono_time_get();
        now->read = true;
    }
    return now->ns;
}

/*
 * Grows the array *@arrp (a pointer to any element pointer) of *@cap
 * elements of @esize bytes so it holds at least @want, doubling from 64;
 * new elements are zeroed.  0 or -ENOMEM, leaving the array as it was.
 */
int aiol__reserve_grow(void *arrp, size_t *cap, size_t want, size_t esize);

/* aiol__reserve_grow() behind an inline check: most calls need no growth. */
static inline int aiol__reserve(void *arrp, size_t *cap, size_t want,
                                size_t esize)
{
    return want <= *cap ? 0 : aiol__reserve_grow(arrp, cap, want, esize);
}

/* The calling thread's aiol__thread_id(), 0 before its first (util.c). */
extern _Thread_local uint64_t aiol__tid;
/* Gives the calling thread its aiol__tid and returns it (util.c). */
uint64_t aiol__thread_id_assign(void);

/*
 * A number naming the calling thread, never reused in the process (unlike
 * pthread_t values and TIDs, which a new thread may inherit from a dead
 * one).  Never 0.  Inline: the debug contracts ask on every lock and
 * poll, and a thread-local read is all it costs after the first.
 */
static inline uint64_t aiol__thread_id(void)
{
    uint64_t id = aiol__tid;

    return id != 0 ? id : aiol__thread_id_assign();
}

#endif /* AIOLOOP_UTIL_PRIV_H */
