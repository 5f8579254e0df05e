/* SPDX-License-Identifier: MIT */
/*
 * test_fd.c - fd handler tests, run once per fd monitor ($AIOLOOP_FDMON).
 *
 * Only the public API is used.  Every test makes its own loop with
 * tu_loop_new().  Callbacks record what happened in a struct th; a callback
 * that runs on a handler the test already removed or replaced bumps
 * th.after_remove, which every test expects to stay 0.  Tests count calls
 * and the loop's own work counters; none of them looks at a clock.
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
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "aioloop/aioloop.h"
#include "testutil.h"
#include "testhandler.h"

/* ------------------------------------------------ add, replace, remove */

static void test_add_replace_remove(void **state)
{
    aiol_loop *loop = tu_loop_new();
    int fd = tu_eventfd();
    th a, b, c;

    (void)state;
    assert_false(aiol_fd_is_set(loop, fd));
    assert_int_equal(aiol_fd_remove(loop, fd), -ENOENT);
    assert_int_equal(aiol_fd_set(loop, fd, NULL, NULL, NULL, NULL), 0);
    assert_false(aiol_fd_is_set(loop, fd));
    /* beyond anything the table has grown to: still just "no handler" */
    assert_false(aiol_fd_is_set(loop, 19000));
    assert_int_equal(aiol_fd_remove(loop, 19000), -ENOENT);

    th_add(&a, loop, fd, th_cb_read, NULL);
    a.drain = true;
    tu_eventfd_signal(fd);
    assert_true(aiol_loop_poll(loop, false));
    assert_int_equal(a.reads, 1);

    /* replace: the new callback and opaque run, the old ones never again */
    th_add(&b, loop, fd, th_cb_read_other, NULL);
    b.drain = true;
    a.removed = true;
    tu_eventfd_signal(fd);
    assert_true(aiol_loop_poll(loop, false));
    assert_int_equal(a.reads, 1);
    assert_int_equal(b.reads, 1);

    /* replace while the fd is already readable */
    tu_eventfd_signal(fd);
    th_add(&c, loop, fd, th_cb_read, NULL);
    c.drain = true;
    b.removed = true;
    assert_true(aiol_loop_poll(loop, false));
    assert_int_equal(b.reads, 1);
    assert_int_equal(c.reads, 1);

    /* remove: no more callbacks even though the fd is readable */
    tu_eventfd_signal(fd);
    th_remove(&c);
    th_poll_n(loop, 3, false);
    assert_int_equal(c.reads, 1);
    assert_int_equal(aiol_fd_remove(loop, fd), -ENOENT);
    assert_int_equal(a.after_remove + b.after_remove + c.after_remove, 0);

    /* set with all-NULL callbacks removes an existing handler */
    th_add(&a, loop, fd, th_cb_read, NULL);
    assert_int_equal(aiol_fd_set(loop, fd, NULL, NULL, NULL, &a), 0);
    assert_false(aiol_fd_is_set(loop, fd));
    assert_false(aiol_loop_poll(loop, false));
    assert_int_equal(a.reads, 0);

    aiol_loop_free(loop);
    close(fd);
}

/* ------------------------------------------------------- remove itself */

static void cb_remove_self(void *opaque)
{
    th *h = opaque;

    th_note(h);
    h->reads++;
    th_remove(h);
}

static void cb_write_remove_self(void *opaque)
{
    th *h = opaque;

    th_note(h);
    h->writes++;
    th_remove(h);
}

static void test_remove_self_in_callback(void **state)
{
    aiol_loop *loop = tu_loop_new();
    int efd = tu_eventfd();
    int p[2];
    th h, hp;

    (void)state;
    /*
     * An eventfd is always writable, so once signalled both callbacks are
     * ready in the same dispatch.  Whichever runs first removes the handler;
     * the other must not run.
     */
    th_add(&h, loop, efd, cb_remove_self, cb_write_remove_self);
    tu_eventfd_signal(efd);
    assert_true(aiol_loop_poll(loop, false));
    assert_int_equal(h.reads + h.writes, 1);
    th_poll_n(loop, 3, false);
    assert_int_equal(h.reads + h.writes, 1);
    assert_int_equal(h.after_remove, 0);

    /* read-only handler on a pipe that stays readable */
    tu_pipe(p);
    th_add(&hp, loop, p[0], cb_remove_self, NULL);
    tu_pipe_signal(p[1]);
    assert_true(aiol_loop_poll(loop, false));
    th_poll_n(loop, 3, false);
    assert_int_equal(hp.reads, 1);
    assert_int_equal(hp.after_remove, 0);

    aiol_loop_free(loop);
    close(efd);
    close(p[0]);
    close(p[1]);
}

/* ------------------------------------- remove a peer in the same batch */

static void cb_remove_peers(void *opaque)
{
    th *h = opaque;

    th_note(h);
    h->reads++;
    for (th **p = h->peers; *p != NULL; p++) {
        if (*p != h && !(*p)->removed) {
            th_remove(*p);
        }
    }
}

#define NPEERS 4

static void test_remove_peer_in_same_batch(void **state)
{
    aiol_loop *loop = tu_loop_new();
    th h[NPEERS];
    th *peers[NPEERS + 1] = { NULL };
    th *survivor = NULL;
    int total = 0;

    (void)state;
    for (int i = 0; i < NPEERS; i++) {
        th_add(&h[i], loop, tu_eventfd(), cb_remove_peers, NULL);
        h[i].peers = peers;
        peers[i] = &h[i];
        tu_eventfd_signal(h[i].fd);  /* all ready; none drains */
    }
    /* whichever runs first removes all the others: exactly one call */
    assert_true(aiol_loop_poll(loop, false));
    for (int i = 0; i < NPEERS; i++) {
        total += h[i].reads;
        if (!h[i].removed) {
            assert_null(survivor);
            survivor = &h[i];
        }
    }
    assert_int_equal(total, 1);
    assert_non_null(survivor);
    assert_int_equal(survivor->reads, 1);

    /* level-triggered: only the survivor keeps running */
    th_poll_n(loop, 2, true);
    assert_int_equal(survivor->reads, 3);
    for (int i = 0; i < NPEERS; i++) {
        assert_int_equal(h[i].after_remove, 0);
        assert_int_equal(h[i].reads, &h[i] == survivor ? 3 : 0);
    }

    aiol_loop_free(loop);
    for (int i = 0; i < NPEERS; i++) {
        close(h[i].fd);
    }
}

/* ------------------------------------------------- level-triggered */

static void test_level_triggered_redelivery(void **state)
{
    aiol_loop *loop = tu_loop_new();
    int efd = tu_eventfd();
    int p[2];
    th r, w;

    (void)state;
    th_add(&r, loop, efd, th_cb_read, NULL);           /* never drains */
    tu_eventfd_signal(efd);
    th_poll_n(loop, 5, true);
    assert_int_equal(r.reads, 5);
    th_remove(&r);

    tu_pipe(p);                                     /* stays writable */
    th_add(&w, loop, p[1], NULL, th_cb_write);
    th_poll_n(loop, 5, true);
    assert_int_equal(w.writes, 5);
    assert_int_equal(w.reads, 0);
    th_remove(&w);
    assert_false(aiol_loop_poll(loop, false));
    assert_int_equal(r.after_remove + w.after_remove, 0);

    aiol_loop_free(loop);
    close(efd);
    close(p[0]);
    close(p[1]);
}

/* ---------------------------------------------------- return value */

static void test_poll_return_value(void **state)
{
    aiol_loop *loop = tu_loop_new();
    int efd = tu_eventfd();
    th h;

    (void)state;
    assert_false(aiol_loop_poll(loop, false));      /* no handlers at all */
    th_add(&h, loop, efd, th_cb_read, NULL);
    h.drain = true;
    assert_false(aiol_loop_poll(loop, false));      /* handler, not ready */
    assert_int_equal(h.reads, 0);
    tu_eventfd_signal(efd);
    assert_true(aiol_loop_poll(loop, false));
    assert_int_equal(h.reads, 1);
    assert_false(aiol_loop_poll(loop, false));      /* drained */
    tu_eventfd_signal(efd);                         /* blocking, but ready */
    assert_true(aiol_loop_poll(loop, true));
    assert_int_equal(h.reads, 2);
    th_remove(&h);

    /*
     * AIOL_FD_NO_PROGRESS: the callback runs, the poll reports no progress.
     * Alone on the loop it is a wakeup fd: a poll that does not block does
     * not look at it (fd.h), the next blocking one runs it.
     */
    {
        const aiol_fd_ops quiet = { .read = th_cb_read,
                                    .flags = AIOL_FD_NO_PROGRESS };
        aiol_loop_stats st, st2;
        int other = tu_eventfd(), base;

        th_init(&h, loop, efd);
        h.drain = true;
        assert_int_equal(aiol_fd_set_ops(loop, efd, &quiet, &h), 0);
        aiol_loop_poll(loop, false); /* (settle: arms it) */
        tu_eventfd_signal(efd);
        aiol_loop_stats_get(loop, &st);
        assert_false(aiol_loop_poll(loop, false));
        aiol_loop_stats_get(loop, &st2);
        assert_int_equal(h.reads, 0);
        assert_int_equal(st2.fdmon_waits, st.fdmon_waits);
        assert_false(aiol_loop_poll(loop, true));   /* it ends a sleep */
        assert_int_equal(h.reads, 1);
        /* with another handler the non-blocking poll looks, and runs it */
        base = h.reads;
        assert_int_equal(aiol_fd_set(loop, other, th_cb_read, NULL, NULL, &h),
                         0);
        tu_eventfd_signal(efd);
        assert_false(aiol_loop_poll(loop, false));
        assert_int_equal(h.reads, base + 1);
        assert_int_equal(aiol_fd_remove(loop, other), 0);
        close(other);
        th_remove(&h);
    }
    aiol_loop_free(loop);
    close(efd);
}

/* ------------------------------------------------------ closed fds */

/*
 * Fd numbers no open file can have (at or above the hard RLIMIT_NOFILE)
 * are refused with -EBADF instead of growing the tables to their size
 * (50,000,000 used to cost half a GiB; INT_MAX a 16 GiB attempt).
 */
static void check_fd_bounds(aiol_loop *loop, th *h)
{
    static const int huge[] = { 50000000, INT32_MAX };
    struct rlimit rl;

    assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
    for (size_t i = 0; i < sizeof(huge) / sizeof(huge[0]); i++) {
        if (rl.rlim_max != RLIM_INFINITY && (rlim_t)huge[i] >= rl.rlim_max) {
            assert_int_equal(aiol_fd_set(loop, huge[i], th_cb_read, NULL,
                                         NULL, h), -EBADF);
            assert_false(aiol_fd_is_set(loop, huge[i]));
            assert_int_equal(aiol_fd_remove(loop, huge[i]), -ENOENT);
        }
    }
    if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max <= (1u << 20)) {
        int top = (int)rl.rlim_max - 1; /* a number an open fd may have */

        assert_int_equal(aiol_fd_set(loop, (int)rl.rlim_max, th_cb_read, NULL,
                                     NULL, h), -EBADF);
        assert_int_equal(aiol_fd_set(loop, top, th_cb_read, NULL, NULL, h), 0);
        assert_int_equal(aiol_fd_remove(loop, top), 0);
    }
}

static void test_closed_fd(void **state)
{
    aiol_loop *loop = tu_loop_new();
    int fd = tu_eventfd();
    th h;

    aiol_loop_stats st;

    (void)state;
    /*
     * Setting makes no syscall, so a closed fd is accepted; the monitor
     * finds it out at its first wait, never calls back, stops watching it
     * (no busy loop on POLLNVAL or EBADF) and counts it.
     */
    th_init(&h, loop, fd);
    close(fd);
    assert_int_equal(aiol_fd_set(loop, fd, th_cb_read, NULL, NULL, &h), 0);
    assert_true(aiol_fd_is_set(loop, fd));
    for (int i = 0; i < 3; i++) {
        assert_false(aiol_loop_poll(loop, false));
    }
    assert_int_equal(h.reads + h.writes, 0);
    aiol_loop_stats_get(loop, &st);
    assert_int_equal(st.bad_fds, 1);
    /* set again (other events): watched again, found out again */
    assert_int_equal(aiol_fd_set(loop, fd, th_cb_read, th_cb_write, NULL, &h),
                     0);
    th_poll_n(loop, 3, false);
    assert_int_equal(h.reads + h.writes, 0);
    aiol_loop_stats_get(loop, &st);
    assert_int_equal(st.bad_fds, 2);
    assert_int_equal(aiol_fd_remove(loop, fd), 0);
    assert_false(aiol_fd_is_set(loop, fd));
    /* set and removed before any wait: the kernel never sees it */
    assert_int_equal(aiol_fd_set(loop, fd, th_cb_read, NULL, NULL, &h), 0);
    assert_int_equal(aiol_fd_remove(loop, fd), 0);
    th_poll_n(loop, 2, false);
    aiol_loop_stats_get(loop, &st);
    assert_int_equal(st.bad_fds, 2);
    assert_int_equal(aiol_fd_set(loop, -1, th_cb_read, NULL, NULL, &h), -EBADF);
    assert_int_equal(aiol_fd_set(loop, -7, NULL, th_cb_write, NULL, &h),
                     -EBADF);
    assert_int_equal(aiol_fd_remove(loop, -1), -EBADF);
    assert_false(aiol_fd_is_set(loop, -1));
    check_fd_bounds(loop, &h);

    /* a readable handler whose fd is closed behind the loop's back */
    fd = tu_eventfd();
    th_add(&h, loop, fd, th_cb_read, NULL);
    tu_eventfd_signal(fd);
    close(fd);
    th_poll_n(loop, 3, false);
    assert_int_equal(h.reads, 0);
    assert_int_equal(aiol_fd_remove(loop, fd), 0);
    assert_false(aiol_fd_is_set(loop, fd));
    assert_false(aiol_loop_poll(loop, false));
    aiol_loop_free(loop);
}

/* ------------------------- an fd without a poll method (a regular file) */

/*
 * Every fd monitor accepts it and reports it ready at every iteration, as
 * poll(2) does (epoll itself refuses such fds; its monitor keeps them on
 * an always-ready list).  Blocking polls must not sleep while one is set.
 */
static void test_refused_fd(void **state)
{
    aiol_loop *loop = tu_loop_new();
    char path[] = "/tmp/aioloop-test-XXXXXX";
    int file = mkstemp(path);
    int efd = tu_eventfd();
    th other, reg;

    (void)state;
    assert_true(file >= 0);
    unlink(path);
    th_add(&other, loop, efd, th_cb_read, NULL);
    other.drain = true;
    th_init(&reg, loop, file);

    assert_int_equal(aiol_fd_set(loop, file, th_cb_read, NULL, NULL, &reg), 0);
    assert_true(aiol_fd_is_set(loop, file));
    /* blocking polls return at once (a hang is the suite's timeout) */
    assert_true(aiol_loop_poll(loop, true));
    assert_true(aiol_loop_poll(loop, true));
    assert_int_equal(reg.reads, 2);
    th_poll_n(loop, 1, true);
    assert_int_equal(reg.reads, 3);
    th_remove(&reg);
    assert_false(aiol_loop_poll(loop, false));
    assert_int_equal(reg.reads, 3);

    /* the other handler is unaffected either way */
    assert_true(aiol_fd_is_set(loop, efd));
    tu_eventfd_signal(efd);
    assert_true(aiol_loop_poll(loop, false));
    assert_int_equal(other.reads, 1);
    assert_false(aiol_loop_poll(loop, false));
    assert_int_equal(reg.after_remove, 0);

    aiol_loop_free(loop);
    close(file);
    close(efd);
}

/* -------------------------------------------------- large fd numbers */

#define BIG_FD 15000

static void test_fd_table_growth(void **state)
{
    aiol_loop *loop;
    int efd, low;
    th big, small;

    (void)state;
    loop = tu_loop_new();
    low = tu_eventfd();
    efd = tu_eventfd();
    assert_int_equal(fcntl(BIG_FD, F_GETFD), -1);   /* not already in use */
    assert_int_equal(dup2(efd, BIG_FD), BIG_FD);

    /* a low handler set before the table grows keeps working after */
    th_add(&small, loop, low, th_cb_read, NULL);
    small.drain = true;
    th_add(&big, loop, BIG_FD, th_cb_read, NULL);
    big.drain = true;
    assert_true(aiol_fd_is_set(loop, low));
    assert_false(aiol_fd_is_set(loop, efd));        /* same file, other fd */
    assert_false(aiol_fd_is_set(loop, BIG_FD - 1));
    assert_false(aiol_fd_is_set(loop, BIG_FD + 1));

    tu_eventfd_signal(efd);
    tu_eventfd_signal(low);
    assert_true(aiol_loop_poll(loop, false));
    assert_int_equal(big.reads, 1);
    assert_int_equal(small.reads, 1);
    assert_false(aiol_loop_poll(loop, false));

    th_remove(&big);
    tu_eventfd_signal(efd);
    assert_false(aiol_loop_poll(loop, false));
    assert_int_equal(big.reads, 1);
    assert_int_equal(big.after_remove, 0);
    th_remove(&small);
    aiol_loop_free(loop);
    close(BIG_FD);
    close(efd);
    close(low);
}

/* ----------------------------------------- dispatch is O(ready) */

#define MANY 10000

static void test_dispatch_visits_only_ready(void **state)
{
    aiol_loop *loop;
    aiol_loop_stats before, after;
    th *hs;
    const int hot = MANY / 2;

    (void)state;
    loop = tu_loop_new();
    hs = calloc(MANY, sizeof(*hs));
    assert_non_null(hs);
    for (int i = 0; i < MANY; i++) {
        th_add(&hs[i], loop, tu_eventfd(), th_cb_read, NULL);
        hs[i].drain = true;
    }
    assert_false(aiol_loop_poll(loop, false));  /* settle deferred work */

    tu_eventfd_signal(hs[hot].fd);
    aiol_loop_stats_get(loop, &before);
    assert_true(aiol_loop_poll(loop, false));
    aiol_loop_stats_get(loop, &after);
    assert_int_equal(after.handler_visits - before.handler_visits, 1);
    assert_int_equal(after.callbacks - before.callbacks, 1);
    assert_int_equal(after.iterations - before.iterations, 1);
    for (int i = 0; i < MANY; i++) {
        assert_int_equal(hs[i].reads, i == hot ? 1 : 0);
    }

    aiol_loop_free(loop);
    for (int i = 0; i < MANY; i++) {
        close(hs[i].fd);
    }
    free(hs);
}

/* -------------------------------------------- free with live handlers */

static void test_free_with_handlers(void **state)
{
    aiol_loop *loop = tu_loop_new();
    th h[3];

    (void)state;
    for (int i = 0; i < 3; i++) {
        th_add(&h[i], loop, tu_eventfd(), th_cb_read, th_cb_write);
        tu_eventfd_signal(h[i].fd);
    }
    aiol_loop_free(loop);
    aiol_loop_free(NULL);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(h[i].reads + h[i].writes, 0);
        assert_true(fcntl(h[i].fd, F_GETFD) >= 0);  /* fds are not closed */
        close(h[i].fd);
    }
}

/* ------------------------------------------------ NULL loop aborts */

enum null_call { NULL_FD_SET, NULL_FD_REMOVE, NULL_FD_IS_SET, NULL_POLL };

static void call_with_null_loop(void *arg)
{
    enum null_call which = *(enum null_call *)arg;

    if (which == NULL_FD_SET) {
        aiol_fd_set(NULL, 0, th_cb_read, NULL, NULL, NULL);
    } else if (which == NULL_FD_REMOVE) {
        aiol_fd_remove(NULL, 0);
    } else if (which == NULL_FD_IS_SET) {
        aiol_fd_is_set(NULL, 0);
    } else {
        aiol_loop_poll(NULL, false);
    }
}

static void expect_null_loop_abort(enum null_call which)
{
    char err[4096];
    int status = tu_run_child(call_with_null_loop, &which, err, sizeof(err));

    if (!tu_aborted_with(status, err, "loop")) {
        fail_msg("call %d: no abort naming the loop (status 0x%x): \"%s\"",
                 (int)which, (unsigned)status, err);
    }
}

static void test_null_loop_aborts(void **state)
{
    (void)state;
    expect_null_loop_abort(NULL_FD_SET);
    expect_null_loop_abort(NULL_FD_REMOVE);
    expect_null_loop_abort(NULL_FD_IS_SET);
    expect_null_loop_abort(NULL_POLL);
}

/* ------------------------------------------- re-arm without syscalls */

static void cb_rearm(void *opaque)
{
    th *h = opaque;

    th_note(h);
    h->reads++;
    tu_eventfd_drain(h->fd);
    /* same events (read only), same callback: nothing for the monitor */
    assert_int_equal(aiol_fd_set(h->loop, h->fd, cb_rearm, NULL, NULL, h), 0);
}

static uint64_t ctls(aiol_loop *loop)
{
    aiol_loop_stats s;

    aiol_loop_stats_get(loop, &s);
    return s.fdmon_ctls;
}

static void test_rearm_same_events(void **state)
{
    aiol_loop *loop = tu_loop_new();
    int efd = tu_eventfd();
    uint64_t c0;
    th h, w;

    (void)state;
    th_add(&h, loop, efd, cb_rearm, NULL);
    assert_false(aiol_loop_poll(loop, false));     /* settle the first add */
    c0 = ctls(loop);
    for (int i = 0; i < 5; i++) {
        tu_eventfd_signal(efd);
        assert_true(aiol_loop_poll(loop, false));
    }
    assert_int_equal(h.reads, 5);
    assert_true(aiol_fd_is_set(loop, efd));
    assert_int_equal(ctls(loop) - c0, 0);

    /* replacing from outside with other callbacks, same events: no ctl */
    assert_int_equal(aiol_fd_set(loop, efd, th_cb_read, NULL, NULL, &h), 0);
    assert_int_equal(aiol_fd_set(loop, efd, th_cb_read_other, NULL, NULL, &h),
                     0);
    h.drain = true;
    tu_eventfd_signal(efd);
    assert_true(aiol_loop_poll(loop, false));
    assert_int_equal(h.reads, 6);
    assert_int_equal(ctls(loop) - c0, 0);

    /* same for a read+write handler (an eventfd is always writable) */
    th_add(&w, loop, efd, th_cb_read, th_cb_write);
    assert_true(aiol_loop_poll(loop, false));      /* settle */
    c0 = ctls(loop);
    assert_int_equal(aiol_fd_set(loop, efd, th_cb_read_other, th_cb_write, NULL,
                                 &w), 0);
    assert_int_equal(aiol_fd_set(loop, efd, th_cb_read, th_cb_write, NULL, &w),
                     0);
    assert_true(aiol_loop_poll(loop, false));
    assert_int_equal(w.writes, 2);
    assert_int_equal(ctls(loop) - c0, 0);

    aiol_loop_free(loop);
    close(efd);
}

/* The default fd monitor comes from $AIOLOOP_FDMON, else $AIOLOOP_BACKEND. */
static const char *default_fdmon(void)
{
    static char name[32];
    aiol_loop *l;

    assert_int_equal(aiol_loop_new(&l, NULL), 0);
    snprintf(name, sizeof(name), "%s", aiol_loop_fdmon_get(l));
    aiol_loop_free(l);
    return name;
}

static void test_fdmon_environment_names(void **state)
{
    char *fdmon = getenv("AIOLOOP_FDMON");
    char *old = getenv("AIOLOOP_BACKEND");
    char *saved_fdmon = fdmon ? strdup(fdmon) : NULL;
    char *saved_old = old ? strdup(old) : NULL;

    (void)state;
    setenv("AIOLOOP_FDMON", "poll", 1);
    setenv("AIOLOOP_BACKEND", "epoll", 1);
    assert_string_equal(default_fdmon(), "poll");  /* the new name wins */
    unsetenv("AIOLOOP_FDMON");
    assert_string_equal(default_fdmon(), "epoll"); /* the old one still read */
    setenv("AIOLOOP_FDMON", "", 1);
    setenv("AIOLOOP_BACKEND", "poll", 1);
    assert_string_equal(default_fdmon(), "poll");  /* empty: as unset */
    if (saved_fdmon) {
        setenv("AIOLOOP_FDMON", saved_fdmon, 1);
    } else {
        unsetenv("AIOLOOP_FDMON");
    }
    if (saved_old) {
        setenv("AIOLOOP_BACKEND", saved_old, 1);
    } else {
        unsetenv("AIOLOOP_BACKEND");
    }
    free(saved_fdmon);
    free(saved_old);
}

#define T(f) cmocka_unit_test_setup(f, th_reset)

/*
 * The cases that need more fds than a soft RLIMIT_NOFILE of 1024 allows
 * run alone, `test-fd NAME` (meson: fd-NAME-*), after raising the soft
 * limit to the hard one; a hard limit too low as well makes the run a
 * skip (77) that says so.
 */
static const struct {
    const char *name;
    struct CMUnitTest test;
    rlim_t need;
} nofile_cases[] = {
    { "many", T(test_dispatch_visits_only_ready), MANY + 100 },
    { "big", T(test_fd_table_growth), BIG_FD + 1 },
};

static int run_nofile_case(const char *name)
{
    struct CMUnitTest one[1];
    struct rlimit rl;
    char group[64];

    for (size_t i = 0; i < sizeof(nofile_cases) / sizeof(nofile_cases[0]);
         i++) {
        if (strcmp(nofile_cases[i].name, name) != 0) {
            continue;
        }
        if (getrlimit(RLIMIT_NOFILE, &rl) != 0) {
            fprintf(stderr, "getrlimit: %s\n", strerror(errno));
            return 1;
        }
        if (rl.rlim_max < nofile_cases[i].need) {
            printf("SKIP: %s needs RLIMIT_NOFILE %llu; the hard limit is "
                   "%llu\n", nofile_cases[i].test.name,
                   (unsigned long long)nofile_cases[i].need,
                   (unsigned long long)rl.rlim_max);
            return TU_EXIT_SKIP;
        }
        if (rl.rlim_cur < nofile_cases[i].need) {
            printf("RLIMIT_NOFILE: soft %llu raised to the hard %llu\n",
                   (unsigned long long)rl.rlim_cur,
                   (unsigned long long)rl.rlim_max);
            rl.rlim_cur = rl.rlim_max;
            if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
                fprintf(stderr, "setrlimit: %s\n", strerror(errno));
                return 1;
            }
        }
        fflush(stdout);
        snprintf(group, sizeof(group), "fd-%s-%s", name,
                 tu_fdmon_requested() ? tu_fdmon_requested() : "default");
        one[0] = nofile_cases[i].test;
        return cmocka_run_group_tests_name(group, one, NULL, NULL);
    }
    fprintf(stderr, "test-fd: no case %s\n", name);
    return 2;
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        T(test_add_replace_remove),
        T(test_remove_self_in_callback),
        T(test_remove_peer_in_same_batch),
        T(test_level_triggered_redelivery),
        T(test_poll_return_value),
        T(test_closed_fd),
        T(test_refused_fd),
        T(test_free_with_handlers),
        T(test_null_loop_aborts),
        T(test_rearm_same_events),
        T(test_fdmon_environment_names),
    };
    char name[64];

    /* exits 77 here, before any test runs, when the fd monitor is missing */
    aiol_loop_free(tu_loop_new());
    if (argc == 2) {
        return run_nofile_case(argv[1]);
    }
    snprintf(name, sizeof(name), "fd-%s",
             tu_fdmon_requested() ? tu_fdmon_requested() : "default");
    return cmocka_run_group_tests_name(name, tests, NULL, NULL);
}
