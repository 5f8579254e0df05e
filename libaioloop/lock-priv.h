/* SPDX-License-Identifier: MIT */
/*
 * lock-priv.h - loop->lock, a futex word of our own, and the debug
 * contracts on the loop's lock and threads.  For the files that take the
 * lock or state a thread's contract; internal.h includes it after struct
 * aiol_loop, whose fields (lock, lock_owner, poller, owner, confined) it
 * reads.
 */
#ifndef AIOLOOP_LOCK_PRIV_H
#define AIOLOOP_LOCK_PRIV_H

#ifndef AIOLOOP_INTERNAL_H
#error "lock-priv.h is included through internal.h"
#endif

#include <assert.h>

/*
 * The thread and lock contracts the comments state ("under loop->lock",
 * "polling thread") as assertions.  On in every build with assertions on
 * (meson's default buildtypes, every test build); a release build
 * (-Db_ndebug=true, buildtype=release) compiles them out entirely.
 */
#ifndef NDEBUG
#define AIOL__CONTRACTS 1
#endif

/*
 * Checks that a call on a confined loop comes from its own thread (the
 * contract of AIOL_LOOP_CONFINED in aioloop/loop.h).  Any loop.
 */
#ifdef AIOL__CONTRACTS
#define aiol__assert_owner(loop)                                             \
    assert((!(loop)->confined ||                                             \
            atomic_load_explicit(&(loop)->owner, memory_order_relaxed) ==    \
                aiol__thread_id()) &&                                        \
           "a confined loop (AIOL_LOOP_CONFINED) used from another thread")
#else
#define aiol__assert_owner(loop) ((void)(loop))
#endif

/*
 * The calling thread becomes a confined loop's own thread: at an
 * outermost poll, aiol_loop_owner_set(), aiol_loop_free() and in a fork
 * child's aiol_loop_after_fork() (the handovers of aioloop/loop.h).
 */
static inline void aiol__owner_take(aiol_loop *loop)
{
#ifdef AIOL__CONTRACTS
    atomic_store_explicit(&loop->owner, aiol__thread_id(),
                          memory_order_relaxed);
#else
    (void)loop;
#endif
}

/*
 * loop->lock's contended paths (util.c).  The lock is a futex word of our
 * own, not a pthread mutex: an uncontended take and release are one
 * locked instruction each and a few others, where glibc's mutex spends
 * some fifty instructions per pair on its type, owner and user counts,
 * and every handler change and every wait that harvests events pays
 * them.  aiol__lock_slow() looks a while for a release (the sections are
 * short), then marks the word contended (2) and sleeps on it;
 * aiol__unlock_wake() wakes one sleeper after a release that found the
 * word contended.
 */
void aiol__lock_slow(atomic_uint *word);
void aiol__unlock_wake(atomic_uint *word);

/*
 * True while the process has one thread (glibc 2.32 and later: it turns
 * false before a second thread starts).  Then nobody can contend for a
 * lock and a take or release needs no locked instruction, as glibc's own
 * mutex does then: a single-threaded embedder (a Python or Lua program,
 * a one-loop service) pays a plain store.  A lock taken that way is
 * released correctly by the exchange should a thread start meanwhile
 * (the holder does not start threads while it holds the lock).
 */
#if defined(__has_include)
#if __has_include(<sys/single_threaded.h>)
#include <sys/single_threaded.h>
#define AIOL__ONE_THREAD() (__libc_single_threaded != 0)
#endif
#endif
#ifndef AIOL__ONE_THREAD
#define AIOL__ONE_THREAD() false
#endif

/* Takes the futex lock @word (see above). */
static inline void aiol__mutex_take(atomic_uint *word)
{
    unsigned expected = 0;

    if (AIOL__ONE_THREAD()) {
        assert(atomic_load_explicit(word, memory_order_relaxed) == 0 &&
               "loop->lock taken twice by its only thread");
        atomic_store_explicit(word, 1, memory_order_relaxed);
        return;
    }
    /* Acquire pairs with the release exchange in aiol__mutex_give(). */
    if (!atomic_compare_exchange_strong_explicit(word, &expected, 1,
                                                 memory_order_acquire,
                                                 memory_order_relaxed)) {
        aiol__lock_slow(word);
    }
}

/* Releases the futex lock @word, which the caller holds. */
static inline void aiol__mutex_give(atomic_uint *word)
{
    if (AIOL__ONE_THREAD()) {
        atomic_store_explicit(word, 0, memory_order_relaxed);
        return;
    }
    /* Release pairs with the acquire in aiol__mutex_take(). */
    if (atomic_exchange_explicit(word, 0, memory_order_release) == 2) {
        aiol__unlock_wake(word);
    }
}

/*
 * Takes loop->lock, noting the holder for aiol__assert_locked().  On a
 * confined loop only its own thread gets here, and nothing is taken.
 */
static inline void aiol__lock(aiol_loop *loop)
{
    aiol__assert_owner(loop);
    if (!loop->confined) {
        aiol__mutex_take(&loop->lock);
        loop->lock_takes++;
    }
#ifdef AIOL__CONTRACTS
    atomic_store_explicit(&loop->lock_owner, aiol__thread_id(),
                          memory_order_relaxed);
#endif
}

/* Checks that the calling thread holds loop->lock. */
#ifdef AIOL__CONTRACTS
#define aiol__assert_locked(loop)                                            \
    assert(atomic_load_explicit(&(loop)->lock_owner, memory_order_relaxed) ==\
               aiol__thread_id() &&                                          \
           "loop->lock must be held here")
#else
#define aiol__assert_locked(loop) ((void)(loop))
#endif

static inline void aiol__unlock(aiol_loop *loop)
{
#ifdef AIOL__CONTRACTS
    aiol__assert_locked(loop);
    atomic_store_explicit(&loop->lock_owner, 0, memory_order_relaxed);
#endif
    if (!loop->confined) {
        aiol__mutex_give(&loop->lock);
    }
}

/*
 * Checks a polling-thread call: while a poll of @loop runs, only its
 * thread may make it (a timer armed from another thread would race the
 * run).  Between polls any one thread may, but on a confined loop only
 * its own.
 */
#ifdef AIOL__CONTRACTS
#define aiol__assert_poller(loop)                                            \
    do {                                                                     \
        assert((atomic_load_explicit(&(loop)->poller,                        \
                                     memory_order_relaxed) == 0 ||           \
                atomic_load_explicit(&(loop)->poller,                        \
                                     memory_order_relaxed) ==                \
                    aiol__thread_id()) &&                                    \
               "a polling-thread call from another thread while the loop polls"); \
        aiol__assert_owner(loop);                                            \
    } while (0)
#else
#define aiol__assert_poller(loop) ((void)(loop))
#endif

#endif /* AIOLOOP_LOCK_PRIV_H */
