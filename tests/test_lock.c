/* SPDX-License-Identifier: MIT */
/*
 * test_lock.c - the futex lock behind loop->lock (aiol__mutex_take() and
 * aiol__mutex_give(), libaioloop/internal.h).
 *
 *   - mutual exclusion: threads increment a plain counter under the lock
 *     and no increment is lost (under TSan a broken lock is also a race
 *     report);
 *   - a taker that finds the lock held long enough marks it contended
 *     and sleeps, and the holder's release wakes it (a lost wakeup hangs,
 *     and meson's timeout fails the test);
 *   - a contended take keeps the caller's errno.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "../libaioloop/internal.h"

enum { THREADS = 4, ROUNDS = 100000 };

static atomic_uint word;
static long counter; /* under word */

static void *hammer(void *arg)
{
    (void)arg;
    for (int i = 0; i < ROUNDS; i++) {
        aiol__mutex_take(&word);
        counter++;
        aiol__mutex_give(&word);
    }
    return NULL;
}

static void test_lock_excludes(void **state)
{
    pthread_t t[THREADS];

    (void)state;
    counter = 0;
    for (int i = 0; i < THREADS; i++) {
        assert_int_equal(pthread_create(&t[i], NULL, hammer, NULL), 0);
    }
    for (int i = 0; i < THREADS; i++) {
        assert_int_equal(pthread_join(t[i], NULL), 0);
    }
    assert_int_equal(counter, (long)THREADS * ROUNDS);
    assert_int_equal(atomic_load(&word), 0);
}

static atomic_bool taken;
static atomic_int waiter_errno;

static void *waiter(void *arg)
{
    (void)arg;
    errno = EXDEV;
    aiol__mutex_take(&word);
    atomic_store(&waiter_errno, errno);
    atomic_store(&taken, true);
    aiol__mutex_give(&word);
    return NULL;
}

static void sleep_ms(long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

    nanosleep(&ts, NULL);
}

static void test_lock_sleeper_woken(void **state)
{
    pthread_t t;
    int waited = 0;

    (void)state;
    atomic_store(&taken, false);
    aiol__mutex_take(&word);
    assert_int_equal(atomic_load(&word), 1); /* uncontended: no sleeper */
    assert_int_equal(pthread_create(&t, NULL, waiter, NULL), 0);
    /* Its spins run out and it sleeps, having marked the word. */
    while (atomic_load(&word) != 2) {
        assert_true(waited++ < 10000); /* 10 s */
        sleep_ms(1);
    }
    sleep_ms(20);
    assert_false(atomic_load(&taken));
    aiol__mutex_give(&word); /* must wake it */
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_true(atomic_load(&taken));
    assert_int_equal(atomic_load(&waiter_errno), EXDEV);
    assert_int_equal(atomic_load(&word), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lock_excludes),
        cmocka_unit_test(test_lock_sleeper_woken),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
