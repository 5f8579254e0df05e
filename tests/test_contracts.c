/* SPDX-License-Identifier: MIT */
/*
 * test_contracts.c - the debug-build contract assertions fire.
 *
 * The thread contracts of the headers ("polling thread", "one thread
 * polls at a time") are assertions in builds with assertions on (every
 * test build; internal.h, AIOL__CONTRACTS).  Each case breaks one in a
 * forked child, from a second thread while the first is inside a poll
 * (or between polls, for a thread-confined loop's own thread), and
 * checks the child aborted with the assertion's message.  In a
 * build with NDEBUG the assertions are compiled out and the suite skips;
 * under TSan too, which reports the (deliberate) race before the assert.
 * The second thread acts once the first runs a bottom half inside its
 * poll (it parks there), so no sleep decides whether the poll is under
 * way.  Once per fd monitor.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "aioloop/aioloop.h"
#include "testutil.h"

/* Each case races on purpose; TSan would report the race and exit first. */
#if defined(__SANITIZE_THREAD__)
#define TC_UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TC_UNDER_TSAN 1
#endif
#endif

/*
 * A thread parked inside a poll of its loop: a bottom half scheduled
 * before the poll tells the starting thread it runs, then never returns,
 * so the loop stays inside that poll (as the contracts see it: a poll
 * under way on the poller) for as long as the case runs.  The child
 * process ends with it.
 */
typedef struct poller {
    aiol_loop *loop;
    aiol_bh *park;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool inside; /* under mu: the bottom half runs */
} poller;

static void on_noop(void *opaque)
{
    (void)opaque;
}

static void park_in_poll(void *opaque)
{
    poller *p = opaque;

    pthread_mutex_lock(&p->mu);
    p->inside = true;
    pthread_cond_signal(&p->cv);
    for (;;) {
        pthread_cond_wait(&p->cv, &p->mu);
    }
}

static void *poll_parked(void *arg)
{
    poller *p = arg;

    aiol_loop_poll(p->loop, true);
    fprintf(stderr, "the poll returned without running its bottom half\n");
    abort();
}

/*
 * Starts a thread polling a new loop and returns once that thread is
 * inside the poll.
 */
static void poller_start_flags(poller *p, unsigned flags)
{
    if (aiol_loop_new_flags(&p->loop, tu_fdmon_requested(), flags) != 0 ||
        aiol_bh_new(p->loop, park_in_poll, p, &p->park) != 0) {
        _exit(3);
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    p->inside = false;
    aiol_bh_schedule(p->park); /* (this thread makes the loop: its owner) */
    if (pthread_create(&p->thread, NULL, poll_parked, p) != 0) {
        fprintf(stderr, "pthread_create failed\n");
        abort();
    }
    pthread_mutex_lock(&p->mu);
    while (!p->inside) {
        pthread_cond_wait(&p->cv, &p->mu);
    }
    pthread_mutex_unlock(&p->mu);
}

static void poller_start(poller *p)
{
    poller_start_flags(p, 0);
}

/*
 * A confined loop polled by its thread; this one sets a handler: it is
 * not the loop's own thread, and must abort (not race on the unlocked
 * handler table).
 */
static void fd_set_on_confined_while_polled(void *arg)
{
    poller p;
    int fd = tu_eventfd();

    (void)arg;
    poller_start_flags(&p, AIOL_LOOP_CONFINED);
    (void)aiol_fd_set(p.loop, fd, on_noop, NULL, NULL, NULL);
    fprintf(stderr, "no abort\n");
}

static void *make_confined(void *arg)
{
    if (aiol_loop_new_flags(arg, tu_fdmon_requested(), AIOL_LOOP_CONFINED) !=
        0) {
        _exit(3);
    }
    return NULL;
}

/*
 * Between polls too: a confined loop belongs to the thread that made it
 * until another one polls it, so a third party's aiol_fd_remove() aborts
 * even with nobody inside a poll.
 */
static void fd_remove_on_confined_between_polls(void *arg)
{
    aiol_loop *loop;
    pthread_t t;

    (void)arg;
    if (pthread_create(&t, NULL, make_confined, &loop) != 0 ||
        pthread_join(t, NULL) != 0) {
        _exit(3);
    }
    (void)aiol_fd_remove(loop, 0);
    fprintf(stderr, "no abort\n");
}

/* The thread-safe bottom halves are the only ones other threads schedule. */
static void plain_bh_on_confined_from_other_thread(void *arg)
{
    poller p;
    aiol_bh *bh;

    (void)arg;
    poller_start_flags(&p, AIOL_LOOP_CONFINED);
    if (aiol_bh_new(p.loop, on_noop, NULL, &bh) != 0) {
        _exit(3);
    }
    aiol_bh_schedule(bh);
    fprintf(stderr, "no abort\n");
}

static void arm_timer_from_other_thread(void *arg)
{
    poller p;
    aiol_timer *t;

    (void)arg;
    poller_start(&p);
    /* aiol_timer_new() is a polling-thread call too: it must abort here */
    (void)aiol_timer_new(aiol_loop_clock_get(p.loop), on_noop, NULL, &t);
    fprintf(stderr, "no abort\n");
}

static void schedule_local_bh_from_other_thread(void *arg)
{
    poller p;
    aiol_bh *bh;

    (void)arg;
    poller_start(&p);
    if (aiol_bh_new_local(p.loop, on_noop, NULL, &bh) != 0) {
        _exit(3);
    }
    /* a local bottom half is the polling thread's: this must abort */
    aiol_bh_schedule(bh);
    fprintf(stderr, "no abort\n");
}

static void poll_from_two_threads(void *arg)
{
    poller p;

    (void)arg;
    poller_start(&p);
    aiol_loop_poll(p.loop, false);
    fprintf(stderr, "no abort\n");
}

static void check_child(void (*fn)(void *), const char *needle)
{
    char err[4096];
    int status = tu_run_child(fn, NULL, err, sizeof(err));

    if (WIFEXITED(status) && WEXITSTATUS(status) == TU_EXIT_SKIP) {
        skip();
    }
    if (!tu_aborted_with(status, err, needle)) {
        fail_msg("child status %d, stderr: %s", status, err);
    }
}

static void test_polling_thread_call_from_other_thread(void **state)
{
    (void)state;
    check_child(arm_timer_from_other_thread,
                "a polling-thread call from another thread while the loop polls");
}

static void test_local_bh_from_other_thread(void **state)
{
    (void)state;
    check_child(schedule_local_bh_from_other_thread,
                "a polling-thread call from another thread while the loop polls");
}

static void test_confined_fd_set_from_other_thread(void **state)
{
    (void)state;
    check_child(fd_set_on_confined_while_polled,
                "a confined loop (AIOL_LOOP_CONFINED) used from another thread");
}

static void test_confined_between_polls(void **state)
{
    (void)state;
    check_child(fd_remove_on_confined_between_polls,
                "a confined loop (AIOL_LOOP_CONFINED) used from another thread");
}

static void test_confined_plain_bh_from_other_thread(void **state)
{
    (void)state;
    check_child(plain_bh_on_confined_from_other_thread,
                "a polling-thread call from another thread while the loop polls");
}

static void test_two_threads_poll(void **state)
{
    (void)state;
    check_child(poll_from_two_threads, "a loop is polled by one thread at a time");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_polling_thread_call_from_other_thread),
        cmocka_unit_test(test_two_threads_poll),
        cmocka_unit_test(test_local_bh_from_other_thread),
        cmocka_unit_test(test_confined_fd_set_from_other_thread),
        cmocka_unit_test(test_confined_between_polls),
        cmocka_unit_test(test_confined_plain_bh_from_other_thread),
    };

#ifdef NDEBUG
    printf("SKIP: assertions are compiled out (NDEBUG)\n");
    return TU_EXIT_SKIP;
#endif
#ifdef TC_UNDER_TSAN
    printf("SKIP: under TSan (the cases race on purpose)\n");
    return TU_EXIT_SKIP;
#endif
    aiol_loop_free(tu_loop_new()); /* exits 77 if the fd monitor cannot run */
    return cmocka_run_group_tests_name("contracts", tests, NULL, NULL);
}
