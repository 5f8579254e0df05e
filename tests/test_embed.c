/* SPDX-License-Identifier: MIT */
/*
 * test_embed.c - driving a loop from a host loop (get_fd, prepare, check,
 * dispatch) and embedder phases, run once per fd monitor.
 *
 * Every fd monitor has a loop fd (the poll fd monitor's is an epoll mirror of
 * its fds, made on demand).  The host's poll(2) on the loop fd uses a
 * zero timeout wherever the answer must already be known, so no test
 * waits on wall-clock time except for a deadline the test itself set.
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
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "aioloop/aioloop.h"
#include "testutil.h"
#include "loopwatch.h"

#define HOUR ((int64_t)3600 * 1000000000)

static char g_log[64];
static int g_nlog;

static void log_event(char c)
{
    assert_true(g_nlog < (int)sizeof(g_log) - 1);
    g_log[g_nlog++] = c;
    g_log[g_nlog] = '\0';
}

static int reset(void **state)
{
    (void)state;
    g_nlog = 0;
    g_log[0] = '\0';
    return 0;
}

static aiol_loop *settled_loop(void)
{
    aiol_loop *loop = tu_loop_new();

    aiol_loop_poll(loop, false);
    return loop;
}

/* The loop fd, or skip the test on an fd monitor without one. */
static int loop_fd(aiol_loop *loop)
{
    int fd = aiol_loop_fd_get(loop);

    assert_true(fd >= 0);
    return fd;
}

/* poll(2) on @p fd for input, @p timeout_ms; true when readable. */
static bool fd_readable(int fd, int timeout_ms)
{
    struct pollfd p = { .fd = fd, .events = POLLIN };
    int n;

    do {
        n = poll(&p, 1, timeout_ms);
    } while (n < 0 && errno == EINTR);
    assert_true(n >= 0);
    return n == 1 && (p.revents & POLLIN);
}

static void cb_count(void *opaque)
{
    (*(int *)opaque)++;
    log_event('B');
}

static void cb_timer(void *opaque)
{
    (*(int *)opaque)++;
    log_event('T');
}

typedef struct efd_h {
    int fd;
    int reads;
} efd_h;

static void cb_efd_read(void *opaque)
{
    efd_h *h = opaque;

    h->reads++;
    tu_eventfd_drain(h->fd);
    log_event('F');
}

/* ------------------------------------------------------------ loop fd */

/*
 * One host round as far as input goes: prepare (which hands pending
 * registrations to the kernel), poll the loop fd without sleeping, check.
 */
static bool host_sees_input(aiol_loop *loop, int lfd)
{
    bool readable;

    aiol_loop_prepare(loop);
    readable = fd_readable(lfd, 0);
    aiol_loop_check(loop);
    return readable;
}

static void test_embed_get_fd_readable(void **state)
{
    aiol_loop *loop = settled_loop();
    int lfd = loop_fd(loop);
    efd_h h = { .fd = tu_eventfd() };

    (void)state;
    assert_int_equal(aiol_loop_fd_get(loop), lfd);   /* stable */
    assert_false(host_sees_input(loop, lfd));
    assert_int_equal(aiol_fd_set(loop, h.fd, cb_efd_read, NULL, NULL, &h),
                     0);
    assert_false(host_sees_input(loop, lfd));
    for (int i = 1; i <= 3; i++) {
        tu_eventfd_signal(h.fd);
        assert_true(host_sees_input(loop, lfd));
        assert_true(aiol_loop_dispatch(loop));
        assert_int_equal(h.reads, i);
        assert_false(host_sees_input(loop, lfd));           /* drained */
    }
    assert_int_equal(aiol_fd_remove(loop, h.fd), 0);
    tu_eventfd_signal(h.fd);
    if (host_sees_input(loop, lfd)) {
        /*
         * io_uring only: the poll re-armed before the removal completed
         * as it was being cancelled; that one completion wakes the host,
         * and dispatching it runs nothing.
         */
        assert_string_equal(aiol_loop_fdmon_get(loop), "io_uring");
        assert_false(aiol_loop_dispatch(loop));
        assert_false(host_sees_input(loop, lfd));
    }
    assert_int_equal(h.reads, 3);                           /* not watched */
    close(h.fd);
    aiol_loop_free(loop);
}

/*
 * Every fd monitor is embeddable (poll through an epoll mirror), and handlers
 * set before and after the first aiol_loop_fd_get() both wake the host.
 */
static void test_embed_get_fd_every_fdmon(void **state)
{
    aiol_loop *loop = settled_loop();
    efd_h before = { .fd = tu_eventfd() }, after = { .fd = tu_eventfd() };
    int lfd;

    (void)state;
    assert_int_equal(aiol_fd_set(loop, before.fd, cb_efd_read, NULL, NULL,
                                 &before), 0);
    lfd = loop_fd(loop);
    assert_int_equal(aiol_loop_fd_get(loop), lfd);
    assert_int_equal(aiol_fd_set(loop, after.fd, cb_efd_read, NULL, NULL,
                                 &after), 0);
    tu_eventfd_signal(before.fd);
    assert_true(host_sees_input(loop, lfd));
    assert_true(aiol_loop_dispatch(loop));
    assert_int_equal(before.reads, 1);
    tu_eventfd_signal(after.fd);
    assert_true(host_sees_input(loop, lfd));
    assert_true(aiol_loop_dispatch(loop));
    assert_int_equal(after.reads, 1);
    assert_int_equal(aiol_fd_remove(loop, before.fd), 0);
    assert_int_equal(aiol_fd_remove(loop, after.fd), 0);
    close(before.fd);
    close(after.fd);
    aiol_loop_free(loop);
}

/* ------------------------------------------------- prepare deadlines */

static void test_embed_prepare_deadlines(void **state)
{
    aiol_loop *loop = settled_loop();
    aiol_clock *c = aiol_loop_clock_get(loop);
    aiol_timer *t;
    aiol_bh *bh;
    int64_t d, now, far;
    int runs = 0, fired = 0;

    (void)state;
    assert_int_equal(aiol_bh_new(loop, cb_count, &runs, &bh), 0);
    assert_int_equal(aiol_timer_new(c, cb_count, &fired, &t), 0);

    /* idle: nothing but fds or a notify can create work */
    assert_int_equal(aiol_loop_prepare(loop), AIOL_DEADLINE_NONE);
    assert_false(aiol_loop_check(loop));

    /* a scheduled bottom half: due now */
    aiol_bh_schedule(bh);
    assert_int_equal(aiol_loop_prepare(loop), 0);
    assert_true(aiol_loop_check(loop));
    assert_true(aiol_loop_dispatch(loop));
    assert_int_equal(runs, 1);
    assert_int_equal(aiol_loop_prepare(loop), AIOL_DEADLINE_NONE);
    assert_false(aiol_loop_check(loop));

    /* an armed timer: its deadline */
    far = aiol_clock_time_get(c) + HOUR;
    assert_int_equal(aiol_timer_mod(t, far), 0);
    assert_int_equal(aiol_loop_prepare(loop), far);
    assert_false(aiol_loop_check(loop));
    assert_false(aiol_loop_dispatch(loop));
    assert_int_equal(fired, 0);

    /* a bottom half beats the timer */
    aiol_bh_schedule(bh);
    assert_int_equal(aiol_loop_prepare(loop), 0);
    assert_true(aiol_loop_check(loop));
    assert_true(aiol_loop_dispatch(loop));
    assert_int_equal(runs, 2);

    /* an idle bottom half: some time within 10 ms, not now */
    aiol_bh_schedule_idle(bh);
    now = aiol_mono_time_get();
    d = aiol_loop_prepare(loop);
    assert_true(d > now);
    assert_true(d <= aiol_mono_time_get() + LW_MS(10));
    aiol_loop_check(loop);
    assert_false(aiol_loop_dispatch(loop));          /* idle: no progress */
    assert_int_equal(runs, 3);

    /* a pending notify: due now */
    aiol_loop_notify(loop);
    assert_int_equal(aiol_loop_prepare(loop), 0);
    assert_true(aiol_loop_check(loop));
    assert_false(aiol_loop_dispatch(loop));
    assert_int_equal(aiol_loop_prepare(loop), far);
    aiol_loop_check(loop);

    aiol_timer_free(t);
    aiol_bh_free(bh);
    aiol_loop_free(loop);
}

static void test_embed_check_timer_due(void **state)
{
    aiol_loop *loop = settled_loop();
    aiol_clock *c = aiol_loop_clock_get(loop);
    bool has_fd = aiol_loop_fd_get(loop) >= 0;
    struct timespec ts;
    aiol_timer *t;
    int64_t d;
    int fired = 0;

    (void)state;
    assert_int_equal(aiol_timer_new(c, cb_count, &fired, &t), 0);
    assert_int_equal(aiol_timer_mod(t, aiol_clock_time_get(c) + LW_MS(50)), 0);
    d = aiol_loop_prepare(loop);
    assert_int_equal(d, aiol_timer_deadline_get(t));
    assert_false(aiol_loop_check(loop));
    assert_false(aiol_loop_dispatch(loop));
    assert_int_equal(fired, 0);

    /* the host sleeps until the deadline prepare gave, then checks */
    d = aiol_loop_prepare(loop);
    if (has_fd) {
        assert_false(fd_readable(aiol_loop_fd_get(loop), 0));
    }
    ts.tv_sec = d / 1000000000;
    ts.tv_nsec = d % 1000000000;
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) != 0) {
    }
    assert_true(aiol_loop_check(loop));
    assert_true(aiol_loop_dispatch(loop));
    assert_int_equal(fired, 1);
    assert_int_equal(aiol_loop_prepare(loop), AIOL_DEADLINE_NONE);
    assert_false(aiol_loop_check(loop));
    aiol_timer_free(t);
    aiol_loop_free(loop);
}

/* ------------------------------------------------------ prepare + notify */

typedef struct delayed_notify {
    aiol_loop *loop;
    int64_t delay_ns;
} delayed_notify;

static void *thread_notify(void *opaque)
{
    delayed_notify *n = opaque;

    lw_sleep_ns(n->delay_ns);
    aiol_loop_notify(n->loop);
    return NULL;
}

static void test_embed_prepare_notify_makes_fd_readable(void **state)
{
    aiol_loop *loop = settled_loop();
    int lfd = loop_fd(loop);
    static delayed_notify n;
    uint64_t kicks;
    pthread_t t;

    (void)state;
    /* outside prepare..check a notify costs nothing and wakes no host */
    kicks = lw_stats(loop).notify_kicks;
    aiol_loop_notify(loop);
    assert_false(fd_readable(lfd, 0));
    assert_int_equal(lw_stats(loop).notify_kicks, kicks);
    assert_false(aiol_loop_dispatch(loop));

    /* between prepare and check it makes the loop fd readable */
    assert_int_equal(aiol_loop_prepare(loop), AIOL_DEADLINE_NONE);
    aiol_loop_notify(loop);
    assert_true(fd_readable(lfd, 0));
    assert_int_equal(lw_stats(loop).notify_kicks, kicks + 1);
    assert_true(aiol_loop_check(loop));
    assert_false(aiol_loop_dispatch(loop));          /* internal work only */
    assert_false(fd_readable(lfd, 0));

    /* from another thread while the host sleeps on the fd */
    n.loop = loop;
    n.delay_ns = LW_MS(5);
    for (int round = 0; round < 3; round++) {
        assert_int_equal(aiol_loop_prepare(loop), AIOL_DEADLINE_NONE);
        assert_int_equal(pthread_create(&t, NULL, thread_notify, &n), 0);
        assert_true(fd_readable(lfd, 5000));
        pthread_join(t, NULL);
        aiol_loop_check(loop);
        assert_false(aiol_loop_dispatch(loop));
        assert_false(fd_readable(lfd, 0));
    }
    aiol_loop_free(loop);
}

/* ------------------------------------------------------ direct fds */

/* The entry for @p fd in @p fds, or NULL. */
static const struct pollfd *entry_for(const struct pollfd *fds, int n, int fd)
{
    for (int i = 0; i < n; i++) {
        if (fds[i].fd == fd) {
            return &fds[i];
        }
    }
    return NULL;
}

/* Host round in direct mode: prepare, list, poll for @p ms, check. */
static int host_poll_direct(aiol_loop *loop, struct pollfd *fds, int max,
                            int ms)
{
    int n, r;

    aiol_loop_prepare(loop);
    n = aiol_loop_embed_fds(loop, fds, (size_t)max);
    assert_true(n > 0);
    do {
        r = poll(fds, (nfds_t)n, ms);
    } while (r < 0 && errno == EINTR);
    assert_true(r >= 0);
    aiol_loop_check(loop);
    return n;
}

static void test_embed_direct_fds(void **state)
{
    aiol_loop *loop = settled_loop();
    efd_h a = { .fd = tu_eventfd() }, b = { .fd = tu_eventfd() };
    int wfd = tu_eventfd(), writes = 0;
    struct pollfd fds[8];
    const struct pollfd *e;
    uint64_t waits;
    int n;

    (void)state;
    assert_int_equal(aiol_fd_set(loop, a.fd, cb_efd_read, NULL, NULL, &a), 0);
    assert_int_equal(aiol_fd_set(loop, b.fd, cb_efd_read, NULL, NULL, &b), 0);
    assert_int_equal(aiol_fd_set(loop, wfd, NULL, cb_count, NULL, &writes), 0);
    n = aiol_loop_embed_fds(loop, fds, 8);
    /* the three handlers and the loop's own wakeup fd */
    assert_int_equal(n, 4);
    assert_non_null(e = entry_for(fds, n, a.fd));
    assert_int_equal(e->events & (POLLIN | POLLOUT), POLLIN);
    assert_non_null(e = entry_for(fds, n, wfd));
    assert_int_equal(e->events & (POLLIN | POLLOUT), POLLOUT);
    assert_int_equal(aiol_loop_embed_fds(loop, fds, 3), -ENOSPC);
    /* remembered: still too many for as much room or less, not for more */
    assert_int_equal(aiol_loop_embed_fds(loop, fds, 3), -ENOSPC);
    assert_int_equal(aiol_loop_embed_fds(loop, fds, 2), -ENOSPC);
    assert_int_equal(aiol_loop_embed_fds(loop, fds, 4), 4);
    assert_int_equal(aiol_loop_embed_fds(loop, fds, 3), -ENOSPC);
    assert_int_equal(aiol_fd_remove(loop, wfd), 0);
    /* the table changed: what was too many fits now */
    assert_int_equal(aiol_loop_embed_fds(loop, fds, 3), 3);

    /* the host's revents replace the loop's own wait: no monitor wait */
    tu_eventfd_signal(a.fd);
    n = host_poll_direct(loop, fds, 8, 0);
    assert_int_equal(n, 3);
    waits = lw_stats(loop).fdmon_waits;
    assert_true(aiol_loop_dispatch_fds(loop, fds, (size_t)n));
    assert_int_equal(lw_stats(loop).fdmon_waits, waits);
    assert_string_equal(g_log, "F");
    assert_int_equal(a.reads, 1);
    assert_int_equal(b.reads, 0);

    /* a handler removed after the host's poll does not run */
    tu_eventfd_signal(a.fd);
    tu_eventfd_signal(b.fd);
    n = host_poll_direct(loop, fds, 8, 0);
    assert_int_equal(aiol_fd_remove(loop, a.fd), 0);
    assert_true(aiol_loop_dispatch_fds(loop, fds, (size_t)n));
    assert_int_equal(a.reads, 1);
    assert_int_equal(b.reads, 1);

    /* nothing ready: no progress; then a notify wakes a sleeping host */
    n = host_poll_direct(loop, fds, 8, 0);
    assert_int_equal(n, 2);
    assert_false(aiol_loop_dispatch_fds(loop, fds, (size_t)n));
    {
        static delayed_notify dn;
        pthread_t t;

        dn.loop = loop;
        dn.delay_ns = LW_MS(5);
        aiol_loop_prepare(loop);
        n = aiol_loop_embed_fds(loop, fds, 8);
        assert_int_equal(pthread_create(&t, NULL, thread_notify, &dn), 0);
        assert_int_equal(poll(fds, (nfds_t)n, 5000), 1);
        pthread_join(t, NULL);
        assert_true(aiol_loop_check(loop));
        assert_false(aiol_loop_dispatch_fds(loop, fds, (size_t)n));
    }
    assert_int_equal(aiol_fd_remove(loop, b.fd), 0);
    aiol_loop_free(loop);
    close(a.fd);
    close(b.fd);
    close(wfd);
}

/*
 * Switching between direct embedding and the loop fd.  While the host
 * polls the fds itself the loop fd goes stale (the fds leave the epoll set
 * behind it: each would cost the kernel a callback per event); -ENOSPC
 * and a new aiol_loop_fd_get() make it whole again, the loop's own polls
 * work regardless, and nothing is lost either way.
 */
static void test_embed_direct_and_loop_fd(void **state)
{
    aiol_loop *loop = settled_loop();
    efd_h a = { .fd = tu_eventfd() }, c = { .fd = tu_eventfd() };
    struct pollfd fds[8];
    uint64_t ctls;
    int lfd = aiol_loop_fd_get(loop), n;

    (void)state;
    assert_true(lfd >= 0);
    assert_int_equal(aiol_fd_set(loop, a.fd, cb_efd_read, NULL, NULL, &a), 0);
    tu_eventfd_signal(a.fd);
    assert_true(host_sees_input(loop, lfd));

    /* direct: the host's poll finds it; the epoll set no longer has it */
    n = host_poll_direct(loop, fds, 8, 0);
    assert_true(aiol_loop_dispatch_fds(loop, fds, (size_t)n));
    assert_int_equal(a.reads, 1);
    tu_eventfd_signal(a.fd);
    if (strcmp(aiol_loop_fdmon_get(loop), "io_uring") != 0) {
        /* (io_uring: the cancels' own completions make the ring readable) */
        assert_false(fd_readable(lfd, 0));
    }
    /* handler churn while direct reaches no kernel set */
    ctls = lw_stats(loop).fdmon_ctls;
    for (int i = 0; i < 10; i++) {
        assert_int_equal(aiol_fd_set(loop, c.fd, cb_efd_read, NULL, NULL,
                                     &c), 0);
        assert_int_equal(aiol_fd_remove(loop, c.fd), 0);
    }
    n = host_poll_direct(loop, fds, 8, 0);
    assert_int_equal(lw_stats(loop).fdmon_ctls, ctls);
    assert_true(aiol_loop_dispatch_fds(loop, fds, (size_t)n));
    assert_int_equal(a.reads, 2);

    /* -ENOSPC: the host falls back to the loop fd, which is whole again */
    tu_eventfd_signal(a.fd);
    aiol_loop_prepare(loop);
    assert_int_equal(aiol_loop_embed_fds(loop, fds, 1), -ENOSPC);
    assert_true(fd_readable(lfd, 0));
    aiol_loop_check(loop);
    assert_true(aiol_loop_dispatch(loop));
    assert_int_equal(a.reads, 3);

    /* a new aiol_loop_fd_get() after direct rounds */
    (void)host_poll_direct(loop, fds, 8, 0);
    tu_eventfd_signal(a.fd);
    assert_int_equal(aiol_loop_fd_get(loop), lfd);
    assert_true(host_sees_input(loop, lfd));
    assert_true(aiol_loop_dispatch(loop));
    assert_int_equal(a.reads, 4);

    /* the loop's own poll (here right after a direct round) */
    (void)host_poll_direct(loop, fds, 8, 0);
    tu_eventfd_signal(a.fd);
    assert_true(aiol_loop_poll(loop, false));
    assert_int_equal(a.reads, 5);
    assert_int_equal(aiol_fd_remove(loop, a.fd), 0);
    aiol_loop_free(loop);
    close(a.fd);
    close(c.fd);
}

/*
 * aiol_loop_wakeup_set(): the embedder's eventfd replaces the loop's own,
 * for blocking polls and for a host polling the fds directly.
 */
typedef struct own_wakeup {
    int fd;
    atomic_int calls;
} own_wakeup;

static void own_wakeup_kick(void *opaque)
{
    own_wakeup *w = opaque;

    atomic_fetch_add(&w->calls, 1);
    tu_eventfd_signal(w->fd);
}

static void own_wakeup_drain(void *opaque)
{
    tu_eventfd_drain(((own_wakeup *)opaque)->fd);
}

static void test_embed_own_wakeup(void **state)
{
    aiol_loop *loop = settled_loop();
    static own_wakeup w;
    static delayed_notify dn;
    const aiol_fd_ops ops = { .read = own_wakeup_drain,
                              .flags = AIOL_FD_NO_PROGRESS };
    struct pollfd fds[8];
    pthread_t t;
    int n;

    (void)state;
    w.fd = tu_eventfd();
    atomic_store(&w.calls, 0);
    assert_int_equal(aiol_fd_set_ops(loop, w.fd, &ops, &w), 0);
    assert_int_equal(aiol_loop_wakeup_set(loop, own_wakeup_kick, &w), 0);
    assert_int_equal(aiol_loop_wakeup_set(loop, own_wakeup_kick, &w),
                     -EALREADY);

    /* nobody sleeps: no kick */
    aiol_loop_notify(loop);
    assert_int_equal(atomic_load(&w.calls), 0);
    assert_false(aiol_loop_poll(loop, true));   /* notified: no sleep */

    /* a blocking poll is woken through the embedder's fd */
    dn.loop = loop;
    dn.delay_ns = LW_MS(5);
    assert_int_equal(pthread_create(&t, NULL, thread_notify, &dn), 0);
    assert_false(aiol_loop_poll(loop, true));
    pthread_join(t, NULL);
    assert_true(atomic_load(&w.calls) <= 1);

    /* direct embedding lists the embedder's fd and no fd of the loop's */
    aiol_loop_prepare(loop);
    n = aiol_loop_embed_fds(loop, fds, 8);
    assert_int_equal(n, 1);
    assert_int_equal(fds[0].fd, w.fd);
    assert_int_equal(pthread_create(&t, NULL, thread_notify, &dn), 0);
    assert_int_equal(poll(fds, (nfds_t)n, 5000), 1);
    pthread_join(t, NULL);
    assert_true(aiol_loop_check(loop));
    assert_false(aiol_loop_dispatch_fds(loop, fds, (size_t)n));
    assert_false(fd_readable(w.fd, 0));     /* drained */
    assert_int_equal(aiol_fd_remove(loop, w.fd), 0);
    aiol_loop_free(loop);
    close(w.fd);
}

/* -------------------------------------------------------------- phases */

typedef struct phase_rec {
    int64_t due;         /* deadline of its work; -1: none */
    int dispatches;
    int ran_due;
    int firsts;          /* first callback calls */
    bool first_progress; /* what the first callback returns */
} phase_rec;

static int64_t phase_deadline(void *opaque, int64_t now_ns)
{
    phase_rec *p = opaque;

    (void)now_ns;
    return p->due >= 0 ? p->due : AIOL_DEADLINE_NONE;
}

static bool phase_dispatch(void *opaque)
{
    phase_rec *p = opaque;

    p->dispatches++;
    log_event('P');
    if (p->due >= 0 && aiol_mono_time_get() >= p->due) {
        p->due = -1;
        p->ran_due++;
        return true;
    }
    return false;
}

static const aiol_phase_ops phase_ops = {
    .deadline = phase_deadline,
    .dispatch = phase_dispatch,
};

/* A phase's first callback: logs '1', progress when asked to. */
static bool phase_first(void *opaque)
{
    phase_rec *p = opaque;

    p->firsts++;
    log_event('1');
    return p->first_progress;
}

static const aiol_phase_ops phase_first_ops = {
    .dispatch = phase_dispatch,
    .first = phase_first,
};

static void test_embed_phase_deadline_and_progress(void **state)
{
    aiol_loop *loop = settled_loop();
    aiol_loop_stats before;
    phase_rec p = { .due = -1 };
    aiol_phase *ph;
    lw_watchdog w;

    (void)state;
    assert_int_equal(aiol_phase_new(loop, &phase_ops, &p, &ph), 0);

    /* dispatched once per iteration; no work, no progress */
    for (int i = 1; i <= 5; i++) {
        assert_false(aiol_loop_poll(loop, false));
        assert_int_equal(p.dispatches, i);
    }
    assert_int_equal(aiol_loop_prepare(loop), AIOL_DEADLINE_NONE);
    aiol_loop_check(loop);

    /* its deadline ends a blocking poll, and its work is progress */
    lw_watchdog_arm(&w, loop, LW_MS(5000));
    for (int round = 0; round < 3; round++) {
        before = lw_stats(loop);
        p.due = aiol_mono_time_get() + LW_MS(1);
        assert_int_equal(aiol_loop_prepare(loop), p.due);
        aiol_loop_check(loop);
        assert_true(aiol_loop_poll(loop, true));
        assert_int_equal(p.ran_due, round + 1);
        assert_int_equal(lw_stats(loop).iterations - before.iterations, 1);
    }
    assert_int_equal(lw_watchdog_free(&w), 0);

    /* deadline 0: a blocking poll does not sleep */
    p.due = 0;
    lw_watchdog_arm(&w, loop, LW_MS(5000));
    assert_true(aiol_loop_poll(loop, true));
    assert_int_equal(p.ran_due, 4);
    assert_int_equal(lw_watchdog_free(&w), 0);

    /* removed: no more dispatches, and its deadline no longer counts */
    aiol_phase_free(ph);
    p.due = 0;
    assert_int_equal(aiol_loop_prepare(loop), AIOL_DEADLINE_NONE);
    assert_false(aiol_loop_check(loop));
    assert_false(aiol_loop_poll(loop, false));
    assert_int_equal(p.dispatches, 5 + 3 + 1);
    assert_int_equal(p.ran_due, 4);
    aiol_loop_free(loop);      /* would abort with a phase still added */
}

static void test_embed_phase_runs_after_other_work(void **state)
{
    aiol_loop *loop = settled_loop();
    aiol_clock *c = aiol_loop_clock_get(loop);
    phase_rec p = { .due = -1 }, q = { .due = -1 };
    phase_rec f = { .due = -1 };
    aiol_phase *ph, *qh, *fh;
    efd_h h = { .fd = tu_eventfd() };
    aiol_timer *t;
    aiol_bh *bh;
    int runs = 0, fired = 0;

    (void)state;
    assert_int_equal(aiol_phase_new(loop, &phase_ops, &p, &ph), 0);
    assert_int_equal(aiol_phase_new(loop, &phase_ops, &q, &qh), 0);
    assert_int_equal(aiol_phase_new(loop, &phase_first_ops, &f, &fh), 0);
    assert_int_equal(aiol_bh_new(loop, cb_count, &runs, &bh), 0);
    assert_int_equal(aiol_timer_new(c, cb_timer, &fired, &t), 0);
    assert_int_equal(aiol_fd_set(loop, h.fd, cb_efd_read, NULL, NULL, &h),
                     0);
    aiol_loop_poll(loop, false);
    g_nlog = 0;

    aiol_bh_schedule(bh);
    tu_eventfd_signal(h.fd);
    assert_int_equal(aiol_timer_mod(t, 1), 0);     /* long due */
    assert_true(aiol_loop_poll(loop, true));
    /* first callbacks, bottom halves, fd handlers, timers, then phases */
    assert_string_equal(g_log, "1BFTPPP");
    assert_int_equal(runs, 1);
    assert_int_equal(fired, 1);
    assert_int_equal(h.reads, 1);
    assert_int_equal(f.firsts, 2); /* (the settling poll ran it too) */

    /* a first callback's progress is the poll's */
    assert_false(aiol_loop_poll(loop, false));
    f.first_progress = true;
    assert_true(aiol_loop_poll(loop, false));
    assert_int_equal(f.firsts, 4);

    aiol_phase_free(fh);
    aiol_phase_free(qh);
    aiol_phase_free(ph);
    assert_int_equal(aiol_fd_remove(loop, h.fd), 0);
    close(h.fd);
    aiol_timer_free(t);
    aiol_bh_free(bh);
    aiol_loop_free(loop);
}

/* ------------------------------------------- known bugs (see report) */

/*
 * An idle bottom half runs within 10 ms, also when a host loop drives the
 * loop: prepare() gives a deadline at most 10 ms ahead, and once the host
 * has slept until it, check() must report the bottom half due.
 */
static void test_embed_idle_bh_becomes_due(void **state)
{
    aiol_loop *loop;
    struct timespec ts;
    aiol_bh *bh;
    int runs = 0, rounds = 0;

    (void)state;
    loop = settled_loop();
    assert_int_equal(aiol_bh_new(loop, cb_count, &runs, &bh), 0);
    aiol_bh_schedule_idle(bh);
    while (runs == 0 && rounds < 5) {
        int64_t d = aiol_loop_prepare(loop);

        assert_true(d != AIOL_DEADLINE_NONE);
        ts.tv_sec = d / 1000000000;
        ts.tv_nsec = d % 1000000000;
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts,
                               NULL) != 0) {
        }
        if (aiol_loop_check(loop)) {
            aiol_loop_dispatch(loop);
        }
        rounds++;
    }
    assert_int_equal(runs, 1);
    assert_int_equal(rounds, 1);
    aiol_bh_free(bh);
    aiol_loop_free(loop);
}

/*
 * A regular file is always ready (fd.h), also for a host sleeping on the
 * loop fd: epoll refuses regular files, so on epoll and on the poll
 * fd monitor's mirror prepare() must say "do not sleep" (on the poll
 * fd monitor the host used to sleep to its timeout and never dispatch).
 */
static void test_embed_regular_file_wakes_host(void **state)
{
    aiol_loop *loop = settled_loop();
    char path[] = "/tmp/aiol-embed-XXXXXX";
    int lfd = loop_fd(loop), file = mkstemp(path), calls = 0;

    (void)state;
    assert_true(file >= 0);
    unlink(path);
    assert_int_equal(aiol_fd_set(loop, file, cb_count, NULL, NULL, &calls), 0);
    for (int round = 0; round < 3; round++) {
        int64_t d = aiol_loop_prepare(loop);
        bool readable = fd_readable(lfd, d == 0 ? 0 : 2000);

        if (aiol_loop_check(loop) || readable) {
            aiol_loop_dispatch(loop);
        }
        assert_int_equal(calls, round + 1);
    }
    assert_int_equal(aiol_fd_remove(loop, file), 0);
    /* without the file the host may sleep again */
    assert_int_equal(aiol_loop_prepare(loop), AIOL_DEADLINE_NONE);
    aiol_loop_check(loop);
    close(file);
    aiol_loop_free(loop);
}

#define T(f) cmocka_unit_test_setup(f, reset)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_embed_get_fd_readable),
        T(test_embed_get_fd_every_fdmon),
        T(test_embed_prepare_deadlines),
        T(test_embed_check_timer_due),
        T(test_embed_prepare_notify_makes_fd_readable),
        T(test_embed_direct_fds),
        T(test_embed_direct_and_loop_fd),
        T(test_embed_own_wakeup),
        T(test_embed_phase_deadline_and_progress),
        T(test_embed_phase_runs_after_other_work),
        T(test_embed_idle_bh_becomes_due),
        T(test_embed_regular_file_wakes_host),
    };
    char name[64];

    aiol_loop_free(tu_loop_new());
    snprintf(name, sizeof(name), "embed-%s",
             tu_fdmon_requested() ? tu_fdmon_requested() : "default");
    return cmocka_run_group_tests_name(name, tests, NULL, NULL);
}
