/* SPDX-License-Identifier: MIT */
/*
 * test_removal.c - what a removed handler leaves behind, run once per
 * fd monitor.
 *
 * The epoll monitor removes lazily (fdmon-epoll.c, "Lazy removal"): it
 * keeps the registration and finds out later whether the fd was set again
 * (an ADD that fails with EEXIST), reported an event (one DEL then) or
 * belonged to a file that outlived the fd (a dup here; an eventfd KVM or a
 * vhost-user frontend holds, in real use), which it drops by rebuilding its
 * epoll instance.  Whatever the fd monitor, a removed handler is never called
 * back, a ready fd nobody watches does not keep the loop spinning, and the
 * handlers still set keep working.  Spinning is told by counted work: the
 * monitor waits a blocking poll makes until a timer ends it.  On epoll the
 * registration syscalls are counted too.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "aioloop/aioloop.h"
#include "testutil.h"
#include "testhandler.h"
#include "loopwatch.h"

static aiol_loop_stats stats(aiol_loop *loop)
{
    aiol_loop_stats s;

    aiol_loop_stats_get(loop, &s);
    return s;
}

static bool is_epoll(aiol_loop *loop)
{
    return strcmp(aiol_loop_fdmon_get(loop), "epoll") == 0;
}

static void cb_fired(void *opaque)
{
    *(bool *)opaque = true;
}

/*
 * Blocking polls until a timer 20 ms away fires; returns the monitor
 * waits they took.  A handful when nothing is ready; one per pass, in
 * the thousands, when a registration keeps reporting a ready fd.
 */
static uint64_t waits_until_timer(aiol_loop *loop)
{
    uint64_t w0 = stats(loop).fdmon_waits;
    bool fired = false;
    aiol_timer *t;

    assert_int_equal(aiol_timer_new(aiol_loop_clock_get(loop), cb_fired, &fired,
                                    &t), 0);
    assert_int_equal(aiol_timer_mod(t, aiol_mono_time_get() + LW_MS(20)), 0);
    while (!fired) {
        aiol_loop_poll(loop, true);
    }
    aiol_timer_free(t);
    return stats(loop).fdmon_waits - w0;
}

/*
 * Removed, the fd left open and ready: no callback, no spinning.  Other
 * handlers stay set, so that on epoll the one DEL this costs cannot be
 * mistaken for a rebuild (an ADD per live handler).
 */
static void test_removed_ready_fd(void **state)
{
    enum { NOTHER = 4 };
    aiol_loop *loop = tu_loop_new();
    int efd = tu_eventfd(), others[NOTHER];
    uint64_t c0;
    th h, ho[NOTHER];

    (void)state;
    for (int i = 0; i < NOTHER; i++) {
        others[i] = tu_eventfd();
        th_add(&ho[i], loop, others[i], th_cb_read, NULL);
    }
    th_add(&h, loop, efd, th_cb_read, NULL);
    th_poll_n(loop, 1, false);                 /* the registration is made */
    th_remove(&h);
    tu_eventfd_signal(efd);                 /* stays readable: nobody reads */
    c0 = stats(loop).fdmon_ctls;
    th_poll_n(loop, 3, false);
    if (is_epoll(loop)) {
        assert_int_equal(stats(loop).fdmon_ctls - c0, 1); /* one DEL */
    }
    assert_true(waits_until_timer(loop) <= 5);
    assert_int_equal(h.reads, 0);
    assert_int_equal(h.after_remove, 0);
    aiol_loop_free(loop);
    close(efd);
    for (int i = 0; i < NOTHER; i++) {
        assert_int_equal(ho[i].reads, 0);
        close(others[i]);
    }
}

/* Removed and set again, with the same events or more: one probe. */
static void test_set_again_after_removal(void **state)
{
    aiol_loop *loop = tu_loop_new();
    int efd = tu_eventfd();
    uint64_t c0;
    th h;

    (void)state;
    th_add(&h, loop, efd, th_cb_read, NULL);
    h.drain = true;
    th_poll_n(loop, 1, false);
    for (int round = 1; round <= 3; round++) {
        assert_int_equal(aiol_fd_remove(loop, efd), 0);
        c0 = stats(loop).fdmon_ctls;
        assert_int_equal(aiol_fd_set(loop, efd, th_cb_read, NULL, NULL, &h), 0);
        th_poll_n(loop, 1, false);
        if (is_epoll(loop)) {
            /* ADD fails with EEXIST: the kept registration serves */
            assert_int_equal(stats(loop).fdmon_ctls - c0, 1);
        }
        tu_eventfd_signal(efd);
        th_poll_n(loop, 1, true);
        assert_int_equal(h.reads, round);
    }
    /* more events than the kept registration has: the probe, then MOD */
    assert_int_equal(aiol_fd_remove(loop, efd), 0);
    c0 = stats(loop).fdmon_ctls;
    assert_int_equal(aiol_fd_set(loop, efd, th_cb_read, th_cb_write, NULL, &h),
                     0);
    th_poll_n(loop, 1, true);                   /* an eventfd is writable */
    assert_true(h.writes >= 1);
    if (is_epoll(loop)) {
        assert_int_equal(stats(loop).fdmon_ctls - c0, 2);
    }
    assert_int_equal(h.reads, 3);
    aiol_loop_free(loop);
    close(efd);
}

/* Removed, closed, the number reused by a new file: that file is watched. */
static void test_closed_and_reused(void **state)
{
    aiol_loop *loop = tu_loop_new();
    int efd = tu_eventfd(), again;
    uint64_t c0;
    th h, h2;

    (void)state;
    th_add(&h, loop, efd, th_cb_read, NULL);
    th_poll_n(loop, 1, false);
    th_remove(&h);
    close(efd);                              /* the file goes with its fd */
    again = tu_eventfd();
    assert_int_equal(again, efd);
    c0 = stats(loop).fdmon_ctls;
    th_add(&h2, loop, again, th_cb_read, NULL);
    h2.drain = true;
    th_poll_n(loop, 1, false);
    if (is_epoll(loop)) {
        assert_int_equal(stats(loop).fdmon_ctls - c0, 1); /* a plain ADD */
    }
    tu_eventfd_signal(again);
    th_poll_n(loop, 1, true);
    assert_int_equal(h2.reads, 1);
    assert_int_equal(h.reads, 0);
    aiol_loop_free(loop);
    close(again);
}

/*
 * The file outlives the fd (a dup keeps it) and becomes ready after the
 * handler was removed and the fd closed.  @reuse: the fd number is taken
 * by a new file with a handler first.  Either way nothing is called for
 * the old file, the loop does not spin on it, and every handler still
 * set, an unrelated one included, keeps working.
 */
static void outlived(bool reuse)
{
    aiol_loop *loop = tu_loop_new();
    int efd = tu_eventfd(), other = tu_eventfd(), keep = dup(efd), again = -1;
    th h, h2, ho;

    assert_true(keep >= 0);
    th_add(&h, loop, efd, th_cb_read, NULL);
    th_add(&ho, loop, other, th_cb_read, NULL);
    ho.drain = true;
    th_poll_n(loop, 1, false);
    th_remove(&h);
    close(efd);                              /* the file lives on in keep */
    if (reuse) {
        again = tu_eventfd();
        assert_int_equal(again, efd);
        th_add(&h2, loop, again, th_cb_read, NULL);
        h2.drain = true;
        th_poll_n(loop, 1, false);
    }
    tu_eventfd_signal(keep);                 /* ready for good: none reads */
    th_poll_n(loop, 2, false);
    assert_true(waits_until_timer(loop) <= 5);
    assert_int_equal(h.reads, 0);
    if (reuse) {
        assert_int_equal(h2.reads, 0);
        tu_eventfd_signal(again);
        th_poll_n(loop, 1, true);
        assert_int_equal(h2.reads, 1);
    }
    tu_eventfd_signal(other);
    th_poll_n(loop, 1, true);
    assert_int_equal(ho.reads, 1);
    assert_int_equal(h.after_remove, 0);
    aiol_loop_free(loop);
    close(keep);
    close(other);
    if (again >= 0) {
        close(again);
    }
}

static void test_outlived_fd(void **state)
{
    (void)state;
    outlived(false);
}

static void test_outlived_fd_number_reused(void **state)
{
    (void)state;
    outlived(true);
}

/*
 * A host that watches the loop fd in an epoll set of its own (libev's,
 * libuv's) must keep hearing the loop after a file outlived its removed
 * handler: on epoll, replacing the loop's epoll instance would drop it
 * from the host's set.  Removals before the hand-out are kept, after it
 * they are not (fdmon-epoll.c).
 */
static void test_host_epoll_keeps_loop_fd(void **state)
{
    aiol_loop *loop = tu_loop_new();
    int early = tu_eventfd(), early_keep = dup(early);
    int efd = tu_eventfd(), keep = dup(efd), live = tu_eventfd();
    int host = epoll_create1(EPOLL_CLOEXEC), lfd;
    struct epoll_event ev = { .events = EPOLLIN }, out;
    th he, h, hl;

    (void)state;
    assert_true(host >= 0 && early_keep >= 0 && keep >= 0);
    /* removed and closed before the hand-out, its file alive */
    th_add(&he, loop, early, th_cb_read, NULL);
    th_poll_n(loop, 1, false);
    th_remove(&he);
    close(early);

    th_add(&h, loop, efd, th_cb_read, NULL);
    th_add(&hl, loop, live, th_cb_read, NULL);
    hl.drain = true;
    lfd = aiol_loop_fd_get(loop);
    assert_true(lfd >= 0);
    assert_int_equal(epoll_ctl(host, EPOLL_CTL_ADD, lfd, &ev), 0);
    aiol_loop_prepare(loop);
    aiol_loop_check(loop);
    th_poll_n(loop, 1, false);
    th_remove(&h);
    close(efd);                              /* the file lives on in keep */
    tu_eventfd_signal(keep);
    tu_eventfd_signal(early_keep);
    for (int i = 0; i < 3; i++) {
        aiol_loop_prepare(loop);
        (void)epoll_wait(host, &out, 1, 0);
        aiol_loop_check(loop);
        aiol_loop_dispatch(loop);
    }
    assert_int_equal(aiol_loop_fd_get(loop), lfd);
    aiol_loop_prepare(loop);
    assert_int_equal(epoll_wait(host, &out, 1, 0), 0); /* nothing stale */
    aiol_loop_check(loop);
    tu_eventfd_signal(live);
    aiol_loop_prepare(loop);
    assert_int_equal(epoll_wait(host, &out, 1, 1000), 1); /* still heard */
    aiol_loop_check(loop);
    assert_true(aiol_loop_dispatch(loop));
    assert_int_equal(hl.reads, 1);
    assert_int_equal(h.reads + he.reads, 0);
    aiol_loop_free(loop);
    close(host);
    close(keep);
    close(early_keep);
    close(live);
}

/*
 * True when some epoll instance of this process watches fd number @fd
 * (/proc/self/fdinfo lists each registration as "tfd: N").
 */
static bool epoll_watches(int fd)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    bool found = false;

    assert_non_null(d);
    while (!found && (e = readdir(d)) != NULL) {
        char path[300], target[64], line[256];
        ssize_t n;
        FILE *f;

        snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
        n = readlink(path, target, sizeof(target) - 1);
        if (n < 0) {
            continue;
        }
        target[n] = '\0';
        if (strcmp(target, "anon_inode:[eventpoll]") != 0) {
            continue;
        }
        snprintf(path, sizeof(path), "/proc/self/fdinfo/%s", e->d_name);
        f = fopen(path, "r");
        if (f == NULL) {
            continue;
        }
        while (!found && fgets(line, sizeof(line), f) != NULL) {
            int tfd;

            found = sscanf(line, "tfd: %d", &tfd) == 1 && tfd == fd;
        }
        fclose(f);
    }
    closedir(d);
    return found;
}

typedef struct remover {
    aiol_loop *loop;
    int fd;
} remover;

static void *remove_thread(void *arg)
{
    remover *r = arg;

    assert_int_equal(aiol_fd_remove(r->loop, r->fd), 0);
    return NULL;
}

/*
 * fd.h: once aiol_fd_remove() returns the fd is the caller's, from any
 * thread.  Removed on another thread than the one that polls, no
 * registration is left for the poller to DEL later, when the number may
 * name another file; removed on the polling thread, epoll keeps it (lazy
 * removal), which the poller may DEL itself.
 */
static void test_removed_on_another_thread(void **state)
{
    aiol_loop *loop = tu_loop_new_shared();
    int mine = tu_eventfd(), theirs = tu_eventfd();
    remover r = { .loop = loop, .fd = theirs };
    pthread_t t;
    th hm, ht;

    (void)state;
    th_add(&hm, loop, mine, th_cb_read, NULL);
    th_add(&ht, loop, theirs, th_cb_read, NULL);
    /* this thread polls: the registrations are made */
    th_poll_n(loop, 1, false);
    if (is_epoll(loop)) {
        assert_true(epoll_watches(mine) && epoll_watches(theirs));
    }
    assert_int_equal(pthread_create(&t, NULL, remove_thread, &r), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    ht.removed = true;
    th_remove(&hm);
    if (is_epoll(loop)) {
        assert_false(epoll_watches(theirs));
        assert_true(epoll_watches(mine)); /* kept: the poller's own */
    }
    tu_eventfd_signal(mine);
    tu_eventfd_signal(theirs);
    assert_true(waits_until_timer(loop) <= 5);
    assert_int_equal(hm.reads + ht.reads, 0);
    if (is_epoll(loop)) {
        assert_false(epoll_watches(mine)); /* its event DELed it */
    }
    aiol_loop_free(loop);
    close(mine);
    close(theirs);
}

static void *poll_once_thread(void *arg)
{
    aiol_loop_poll(arg, false);
    return NULL;
}

/*
 * The polling thread's removal is kept; when another thread takes over
 * polling, that registration is its predecessor's, whose fd it may be
 * closing: the new poller drops it without an epoll_ctl on its number
 * (a rebuild ADDs the live registrations, nothing else).
 */
static void test_kept_removal_dropped_when_poller_changes(void **state)
{
    aiol_loop *loop = tu_loop_new();
    int gone = tu_eventfd(), live = tu_eventfd();
    uint64_t c0;
    pthread_t t;
    th hg, hl;

    (void)state;
    th_add(&hg, loop, gone, th_cb_read, NULL);
    th_add(&hl, loop, live, th_cb_read, NULL);
    hl.drain = true;
    th_poll_n(loop, 1, false);
    th_remove(&hg);
    c0 = stats(loop).fdmon_ctls;
    assert_int_equal(pthread_create(&t, NULL, poll_once_thread, loop), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    if (is_epoll(loop)) {
        assert_false(epoll_watches(gone));
        assert_true(epoll_watches(live));
        /* the rebuild: ADDs of live and of the loop's notifier */
        assert_int_equal(stats(loop).fdmon_ctls - c0, 2);
    }
    tu_eventfd_signal(gone);
    tu_eventfd_signal(live);
    assert_true(aiol_loop_poll(loop, true));
    assert_int_equal(hl.reads, 1);
    assert_int_equal(hg.reads, 0);
    aiol_loop_free(loop);
    close(gone);
    close(live);
}

/*
 * Threads set, remove, close and reuse fd numbers while another thread
 * dispatches.  Each fd's file outlives it (a dup), and is made ready
 * after the fd is closed, so a registration the removal left behind
 * reports an event while the number is being closed or reused: anything
 * the poller then did to the number would be a race TSan reports.  The
 * callback only counts (it does not read the fd: one that began before a
 * removal on another thread may still run while the fd is closed).
 */
enum { CHURN_THREADS = 2, CHURN_ROUNDS = 300 };

typedef struct churn churn;
typedef struct churn_worker_arg {
    churn *ch;
    atomic_int calls;
} churn_worker_arg;

struct churn {
    aiol_loop *loop;
    atomic_bool stop;
    atomic_int ended;
    churn_worker_arg w[CHURN_THREADS];
};

static void churn_read(void *opaque)
{
    atomic_fetch_add(&((churn_worker_arg *)opaque)->calls, 1);
}

static void *churn_worker(void *arg)
{
    churn_worker_arg *w = arg;
    churn *ch = w->ch;

    for (int i = 0; i < CHURN_ROUNDS; i++) {
        int fd = tu_eventfd(), keep = dup(fd), reuse;
        int before = atomic_load(&w->calls);

        assert_true(keep >= 0);
        assert_int_equal(aiol_fd_set(ch->loop, fd, churn_read, NULL, NULL, w),
                         0);
        tu_eventfd_signal(fd);
        for (int spin = 0; atomic_load(&w->calls) == before && spin < 100000;
             spin++) {
            sched_yield();
        }
        assert_int_equal(aiol_fd_remove(ch->loop, fd), 0);
        close(fd);
        tu_eventfd_signal(keep); /* the old file is ready for good */
        reuse = tu_eventfd();    /* most often the same number */
        tu_eventfd_signal(reuse);
        close(reuse);
        close(keep);
    }
    if (atomic_fetch_add(&ch->ended, 1) + 1 == CHURN_THREADS) {
        atomic_store(&ch->stop, true);
        aiol_loop_notify(ch->loop);
    }
    return NULL;
}

static void test_cross_thread_remove_close_reuse(void **state)
{
    churn ch = { .loop = tu_loop_new_shared() };
    pthread_t t[CHURN_THREADS];
    int calls = 0;

    (void)state;
    for (int i = 0; i < CHURN_THREADS; i++) {
        ch.w[i].ch = &ch;
        assert_int_equal(pthread_create(&t[i], NULL, churn_worker, &ch.w[i]),
                         0);
    }
    while (!atomic_load(&ch.stop)) {
        aiol_loop_poll(ch.loop, true);
    }
    for (int i = 0; i < CHURN_THREADS; i++) {
        assert_int_equal(pthread_join(t[i], NULL), 0);
        calls += atomic_load(&ch.w[i].calls);
    }
    assert_true(calls >= CHURN_THREADS); /* the handlers did run */
    assert_true(waits_until_timer(ch.loop) <= 5); /* nothing left fires */
    aiol_loop_free(ch.loop);
}

#define T(f) cmocka_unit_test_setup(f, th_reset)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_removed_ready_fd),
        T(test_set_again_after_removal),
        T(test_closed_and_reused),
        T(test_outlived_fd),
        T(test_outlived_fd_number_reused),
        T(test_host_epoll_keeps_loop_fd),
        T(test_removed_on_another_thread),
        T(test_kept_removal_dropped_when_poller_changes),
        T(test_cross_thread_remove_close_reuse),
    };
    char name[64];

    aiol_loop_free(tu_loop_new());
    snprintf(name, sizeof(name), "removal-%s",
             tu_fdmon_requested() ? tu_fdmon_requested() : "default");
    return cmocka_run_group_tests_name(name, tests, NULL, NULL);
}
