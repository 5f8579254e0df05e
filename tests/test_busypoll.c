/* SPDX-License-Identifier: MIT */
/*
 * test_busypoll.c - adaptive busy polling, run once per fd monitor.
 *
 * The busy-poll window is not visible through the API, so tests observe it
 * through what it causes: poll_rounds (a round over the poll callbacks
 * happens only while the window is open), and calls to the handlers' poll,
 * poll_ready, poll_begin and poll_end callbacks.  The window opens after a
 * blocking poll that waited less than max_ns (a timer 100 us ahead) and
 * closes after one that waited longer (a timer 10 ms ahead, max 2 ms).
 * The idle test runs for about 25 ms of real time because the 7 ms idle
 * limit is what it checks; it still asserts only on counts.
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "aioloop/aioloop.h"
#include "testutil.h"
#include "loopwatch.h"

/* A handler with every busy-poll callback, counting its calls. */
typedef struct ph {
    aiol_loop *loop;
    int fd;
    bool work;           /* what poll() reports */
    bool always;         /* poll() always reports work */
    bool drain;          /* read() drains the eventfd */
    int polls, readies, reads;
    int begins, ends;
    int polls_before_begin; /* poll() calls before the first poll_begin */
    int notify_at;       /* > 0: the poll() call that notifies the loop */
} ph;

static bool cb_poll(void *opaque)
{
    ph *h = opaque;

    h->polls++;
    if (h->begins == 0) {
        h->polls_before_begin++;
    }
    if (h->polls == h->notify_at) {
        aiol_loop_notify(h->loop); /* (as another thread would) */
    }
    return h->always || h->work;
}

static void cb_ready(void *opaque)
{
    ph *h = opaque;

    h->readies++;
    h->work = false;     /* consumes the work */
}

static void cb_read(void *opaque)
{
    ph *h = opaque;

    h->reads++;
    if (h->drain) {
        tu_eventfd_drain(h->fd);
    }
}

static void cb_begin(void *opaque)
{
    ((ph *)opaque)->begins++;
}

static void cb_end(void *opaque)
{
    ((ph *)opaque)->ends++;
}

/* Sets a handler on a fresh, never-signalled eventfd. */
static void ph_add(ph *h, aiol_loop *loop, bool with_read)
{
    aiol_fd_ops ops = {
        .read = with_read ? cb_read : NULL,
        .poll = cb_poll,
        .poll_ready = cb_ready,
        .poll_begin = cb_begin,
        .poll_end = cb_end,
    };

    memset(h, 0, sizeof(*h));
    h->loop = loop;
    h->fd = tu_eventfd();
    assert_int_equal(aiol_fd_set_ops(loop, h->fd, &ops, h), 0);
}

static void ph_del(ph *h)
{
    assert_int_equal(aiol_fd_remove(h->loop, h->fd), 0);
    close(h->fd);
}

/*
 * The window's max in these tests, and a wait longer than it.  Generous,
 * so that a test thread preempted for a few ms on a loaded machine does
 * not close the window behind the test's back.
 */
#define MAX_NS LW_MS(20)
#define LONG_WAIT_NS LW_MS(50)

static uint64_t rounds(aiol_loop *loop)
{
    return lw_stats(loop).poll_rounds;
}

static void open_window(aiol_loop *loop)
{
    if (!lw_window_open_try(loop)) {
        fail_msg("the busy-poll window never opened");
    }
}

/*
 * About 20 ms of 1 ms waits, well past the 7 ms a polled handler may go
 * without progress; then one more wait, whose round starts past it even if
 * this thread was descheduled for all 20 ms (the loop's rounds judge
 * idleness by the time their iteration started).
 */
static void wait_past_idle_allowance(aiol_loop *loop)
{
    int64_t end = aiol_mono_time_get() + LW_MS(20);

    while (aiol_mono_time_get() < end) {
        lw_wait_timer(loop, LW_MS(1));
    }
    lw_wait_timer(loop, LW_MS(1));
}

static aiol_loop *settled_loop(void)
{
    aiol_loop *loop = tu_loop_new();

    aiol_loop_poll(loop, false);
    return loop;
}

/* ----------------------------------------- dispatch through poll_ready */

static void test_busypoll_dispatches_poll_ready(void **state)
{
    aiol_loop *loop = settled_loop();
    aiol_loop_stats before;
    lw_watchdog w;
    ph h;

    (void)state;
    ph_add(&h, loop, true);
    aiol_loop_poll(loop, false);

    /* disabled by default: work is not seen, no rounds at all */
    h.work = true;
    lw_wait_timer(loop, LW_US(100));
    assert_false(aiol_loop_poll(loop, false));
    assert_int_equal(h.polls + h.begins + h.readies, 0);
    assert_int_equal(rounds(loop), 0);

    /* busy polling on: a short wait opens the window */
    h.work = false;
    assert_int_equal(aiol_loop_poll_params_set(loop, MAX_NS, 0, 0), 0);
    open_window(loop);
    assert_int_equal(h.polls_before_begin, 0);
    assert_int_equal(h.readies, 0);

    /*
     * A fresh handler (its 7 ms idle allowance starts now, however long
     * opening the window took) with work pending.  Its fd never becomes
     * readable, yet a blocking poll returns with progress: poll_begin,
     * then the poll callback found the work and poll_ready ran.
     */
    ph_del(&h);
    ph_add(&h, loop, true);
    /* (on the poll fd monitor, setting a handler leaves a wakeup pending) */
    assert_false(aiol_loop_poll(loop, false));
    h.work = true;
    before = lw_stats(loop);
    lw_watchdog_arm(&w, loop, LW_MS(5000));
    assert_true(aiol_loop_poll(loop, true));
    assert_int_equal(lw_watchdog_free(&w), 0);
    assert_int_equal(h.begins, 1);
    assert_int_equal(h.polls_before_begin, 0);
    assert_true(h.polls >= 1);
    assert_int_equal(h.ends, 0);
    assert_int_equal(h.readies, 1);
    assert_int_equal(h.reads, 0);
    assert_false(h.work);
    assert_int_equal(lw_stats(loop).callbacks - before.callbacks, 1);
    assert_int_equal(lw_stats(loop).timer_runs, before.timer_runs);

    /* without poll_ready, read is what runs */
    {
        aiol_fd_ops ops = { .read = cb_read, .poll = cb_poll };

        assert_int_equal(aiol_fd_set_ops(loop, h.fd, &ops, &h), 0);
        h.always = true;
        assert_true(aiol_loop_poll(loop, false));
        assert_true(h.reads >= 1);
        assert_int_equal(h.readies, 1);
        h.always = false;
    }
    ph_del(&h);
    aiol_loop_free(loop);
}

/* ------------------------------------------------- begin, end, window */

static void test_busypoll_begin_end(void **state)
{
    aiol_loop *loop = settled_loop();
    uint64_t r;
    int polls;
    ph h;

    (void)state;
    ph_add(&h, loop, false);   /* no fd events: never idles out */
    assert_int_equal(aiol_loop_poll_params_set(loop, MAX_NS, 0, 0), 0);
    open_window(loop);
    assert_int_equal(h.begins, 1);
    assert_int_equal(h.polls_before_begin, 0);
    assert_int_equal(h.ends, 0);

    /* a wait longer than max: shrink 0 resets the window, polling ends */
    lw_wait_timer(loop, LONG_WAIT_NS);
    assert_int_equal(h.ends, 1);
    assert_int_equal(h.begins, 1);
    r = rounds(loop);
    polls = h.polls;
    for (int i = 0; i < 5; i++) {
        assert_false(aiol_loop_poll(loop, false));
    }
    assert_int_equal(rounds(loop), r);
    assert_int_equal(h.polls, polls);

    /* a short wait opens it again (grow 0: from 0 to the first step) */
    open_window(loop);
    assert_int_equal(h.begins, 2);
    assert_int_equal(h.ends, 1);
    ph_del(&h);
    aiol_loop_free(loop);
}

static void test_busypoll_grow_shrink(void **state)
{
    aiol_loop *loop = settled_loop();
    int begins;
    ph h;

    (void)state;
    ph_add(&h, loop, false);   /* no fd events: never idles out */

    /* shrink 2 halves the window after a long wait: it stays open */
    assert_int_equal(aiol_loop_poll_params_set(loop, MAX_NS, 0, 2), 0);
    open_window(loop);
    lw_wait_timer(loop, LONG_WAIT_NS);
    /* polling ended before the loop slept: notifications were back on */
    assert_int_equal(h.ends, h.begins);
    assert_true(lw_window_open(loop));

    /* shrink 0 resets it: closed, and poll_end ran */
    assert_int_equal(aiol_loop_poll_params_set(loop, MAX_NS, 0, 0), 0);
    lw_wait_timer(loop, LONG_WAIT_NS);
    assert_false(lw_window_open(loop));
    assert_int_equal(h.ends, h.begins);

    /* an explicit grow factor opens it as well */
    begins = h.begins;
    assert_int_equal(aiol_loop_poll_params_set(loop, MAX_NS, 3, 0), 0);
    open_window(loop);
    assert_true(h.begins > begins);

    /* max 0 disables polling at once */
    assert_int_equal(aiol_loop_poll_params_set(loop, 0, 0, 0), 0);
    assert_false(lw_window_open(loop));
    lw_wait_timer(loop, LW_US(100));
    assert_false(lw_window_open(loop));
    ph_del(&h);
    aiol_loop_free(loop);
}

static void test_busypoll_params_invalid(void **state)
{
    aiol_loop *loop = settled_loop();
    ph h;

    (void)state;
    ph_add(&h, loop, false);   /* no fd events: never idles out */
    assert_int_equal(aiol_loop_poll_params_set(loop, -1, 0, 0), -EINVAL);
    assert_int_equal(aiol_loop_poll_params_set(loop, LW_MS(1), -1, 0),
                     -EINVAL);
    assert_int_equal(aiol_loop_poll_params_set(loop, LW_MS(1), 0, -1),
                     -EINVAL);
    /* rejected calls left polling disabled */
    lw_wait_timer(loop, LW_US(100));
    assert_false(lw_window_open(loop));
    assert_int_equal(rounds(loop), 0);

    /* and leave an enabled configuration alone */
    assert_int_equal(aiol_loop_poll_params_set(loop, MAX_NS, 0, 0), 0);
    open_window(loop);
    assert_int_equal(aiol_loop_poll_params_set(loop, -5, 0, 0), -EINVAL);
    assert_true(lw_window_open(loop));
    ph_del(&h);
    aiol_loop_free(loop);
}

/*
 * Parameters whose growth overflows int64_t (max * grow, now + window) are
 * accepted and saturate: the window grows to max and stays open, and a
 * blocking poll still ends at its deadline (UBSan checks the arithmetic).
 */
static void test_busypoll_params_saturate(void **state)
{
    aiol_loop *loop = settled_loop();
    ph h;

    (void)state;
    ph_add(&h, loop, false);   /* no fd events: never idles out */
    assert_int_equal(aiol_loop_poll_params_set(loop, INT64_MAX, INT64_MAX,
                                               INT64_MAX), 0);
    open_window(loop);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(lw_wait_timer(loop, LW_US(200)), 1);
        assert_true(lw_window_open(loop));
    }
    ph_del(&h);
    aiol_loop_free(loop);
}

/* ----------------------------------------------------------- fairness */

static void test_busypoll_never_starves_fds(void **state)
{
    aiol_loop *loop = settled_loop();
    aiol_loop_stats before, after;
    lw_watchdog w;
    int efd = tu_eventfd();
    int reads = 0, first = 0;
    ph a;

    (void)state;
    ph_add(&a, loop, false);
    a.always = true;                     /* work on every single poll */
    assert_int_equal(aiol_fd_set(loop, efd, lw_count_cb, NULL, NULL, &reads), 0);
    /* a max far above any wait here: the window stays open */
    assert_int_equal(aiol_loop_poll_params_set(loop, LW_MS(50), 0, 0), 0);
    open_window(loop);
    assert_true(a.readies >= 1);

    /* the plain handler's fd is readable (never drained) from now on */
    tu_eventfd_signal(efd);
    lw_watchdog_arm(&w, loop, LW_MS(5000));
    before = lw_stats(loop);
    for (int i = 1; i <= 9 && first == 0; i++) {
        assert_true(aiol_loop_poll(loop, true));
        if (reads > 0) {
            first = i;
        }
    }
    assert_true(first >= 1 && first <= 9);   /* AIOL__POLL_MAX_SKIPS + 1 */

    /* over many iterations, the fd is looked at least every 9th one */
    before = lw_stats(loop);
    reads = 0;
    a.readies = 0;
    for (int i = 0; i < 90; i++) {
        assert_true(aiol_loop_poll(loop, true));
    }
    after = lw_stats(loop);
    assert_int_equal(a.readies, 90);         /* polling stayed active... */
    assert_true(after.fdmon_waits - before.fdmon_waits >= 10);
    assert_true(reads >= 10);                /* ...and fds got their turn */
    assert_int_equal(lw_watchdog_free(&w), 0);

    assert_int_equal(aiol_fd_remove(loop, efd), 0);
    close(efd);
    ph_del(&a);
    aiol_loop_free(loop);
}

/*
 * Polls that do not block until the handler's fd is read; at most 9.
 * Signals the handler's fd first.
 */
static int polls_until_read(ph *h)
{
    h->reads = 0;
    tu_eventfd_signal(h->fd);
    for (int i = 1; i <= 9; i++) {
        aiol_loop_poll(h->loop, false);
        if (h->reads > 0) {
            return i;
        }
    }
    return 0;
}

/*
 * With busy polling on and every handler polled, a poll that does not
 * block makes no look (as QEMU's aio-posix.c): the window's round of poll callbacks,
 * when it is open, or the next blocking poll stands for it.  A readable fd
 * whose poll callback reports nothing waits, though no more polls in a row
 * than busy polling may skip waits.  With polling off, or with one handler
 * that has no poll callback, every such poll looks.
 */
static void test_busypoll_round_replaces_look(void **state)
{
    aiol_loop *loop = settled_loop();
    int plain = tu_eventfd(), reads = 0, first;
    ph a;

    (void)state;
    ph_add(&a, loop, true);
    a.drain = true;                          /* its poll reports nothing */
    assert_int_equal(aiol_loop_poll_params_set(loop, LW_MS(50), 0, 0), 0);

    /* polling on, the window not open yet: no look, and no round */
    first = polls_until_read(&a);
    assert_true(first >= 2 && first <= 9);   /* AIOL__POLL_MAX_SKIPS + 1 */
    assert_int_equal(rounds(loop), 0);

    /* the window open: a round each, no look */
    open_window(loop);
    first = polls_until_read(&a);
    assert_true(first >= 2 && first <= 9);

    /* polling off: the first poll looks */
    assert_int_equal(aiol_loop_poll_params_set(loop, 0, 0, 0), 0);
    assert_int_equal(polls_until_read(&a), 1);

    /* polling on, with a handler no round covers: the first poll looks */
    assert_int_equal(aiol_loop_poll_params_set(loop, LW_MS(50), 0, 0), 0);
    assert_int_equal(aiol_fd_set(loop, plain, lw_count_cb, NULL, NULL, &reads),
                     0);
    open_window(loop);
    assert_int_equal(polls_until_read(&a), 1);
    assert_int_equal(reads, 0);

    assert_int_equal(aiol_fd_remove(loop, plain), 0);
    close(plain);
    ph_del(&a);
    aiol_loop_free(loop);
}

static void test_busypoll_due_timer_fires(void **state)
{
    aiol_loop *loop = settled_loop();
    aiol_clock *c = aiol_loop_clock_get(loop);
    aiol_timer *t;
    int64_t deadline;
    int fired = 0, polls = 0, readies;
    ph a;

    (void)state;
    ph_add(&a, loop, false);
    a.always = true;
    /* a max far above any wait here: the window stays open */
    assert_int_equal(aiol_loop_poll_params_set(loop, LW_MS(50), 0, 0), 0);
    open_window(loop);

    /*
     * Polling finds work on every iteration, so the loop never sleeps; a
     * timer must still fire in the first iteration that starts once it is
     * due.
     */
    assert_int_equal(aiol_timer_new(c, lw_count_cb, &fired, &t), 0);
    for (int round = 0; round < 3; round++) {
        readies = a.readies;
        deadline = aiol_clock_time_get(c) + LW_MS(1);
        assert_int_equal(aiol_timer_mod(t, deadline), 0);
        while (fired == round) {
            bool due = aiol_clock_time_get(c) >= deadline;

            aiol_loop_poll(loop, true);
            assert_true(!due || fired == round + 1);
            assert_true(++polls < 100000000);
        }
        assert_int_equal(fired, round + 1);
        assert_true(a.readies > readies);   /* polling was going on */
    }
    aiol_timer_free(t);
    ph_del(&a);
    aiol_loop_free(loop);
}

/*
 * A notify (a bottom half scheduled from another thread) is work the poll
 * callbacks cannot see: it ends a wide-open window at the next round
 * instead of waiting out its 50 ms.
 */
static void test_busypoll_notify_ends_window(void **state)
{
    aiol_loop *loop = settled_loop();
    ph a;

    (void)state;
    ph_add(&a, loop, false);
    /* (grow x1000: 4 us, 4 ms, then the 50 ms max after a few waits) */
    assert_int_equal(aiol_loop_poll_params_set(loop, LW_MS(50), 1000, 0), 0);
    open_window(loop);
    for (int i = 0; i < 3; i++) {
        lw_wait_timer(loop, LW_US(100));
    }
    a.notify_at = a.polls + 3;
    aiol_loop_poll(loop, true);
    assert_true(a.polls >= a.notify_at);
    assert_true(a.polls <= a.notify_at + 2); /* not a 50 ms spin */
    ph_del(&a);
    aiol_loop_free(loop);
}

/* ---------------------------------------------------------- idle out */

static void test_busypoll_idle_handler_stops_being_polled(void **state)
{
    aiol_loop *loop = settled_loop();
    uint64_t r;
    int polls, begins, iterations;
    ph h;

    (void)state;
    ph_add(&h, loop, true);              /* poll() never finds work */
    h.drain = true;
    assert_int_equal(aiol_loop_poll_params_set(loop, LW_MS(50), 0, 0), 0);
    open_window(loop);
    assert_true(h.begins >= 1);

    wait_past_idle_allowance(loop);
    assert_int_equal(h.ends, h.begins);

    /*
     * No longer polled, and with nothing pollable left the loop does not
     * spin over the idle handler for the window: at most one round per
     * iteration (not one per microsecond of each 1 ms wait).
     */
    r = rounds(loop);
    polls = h.polls;
    begins = h.begins;
    iterations = 0;
    for (int i = 0; i < 5; i++) {
        iterations += lw_wait_timer(loop, LW_MS(1));
    }
    assert_true(rounds(loop) - r <= (uint64_t)iterations + 5);
    assert_int_equal(h.polls, polls);
    assert_int_equal(h.begins, begins);

    /* its fd fires: polled again (a new begin), at the latest soon after */
    tu_eventfd_signal(h.fd);
    for (int i = 0; i < 5 && h.polls == polls; i++) {
        lw_wait_timer(loop, LW_US(500));
    }
    assert_int_equal(h.reads, 1);
    assert_true(h.polls > polls);
    assert_true(h.begins > begins);
    ph_del(&h);
    aiol_loop_free(loop);
}

/*
 * A round looks only at the handlers still polled: once 64 handlers went
 * idle, rounds look at none of them (counted: poll_visits), however many
 * there are; one whose fd fires is looked at again, alone.  Before, every
 * round looked at all 64 to find them idle.
 */
static void test_busypoll_idle_handlers_cost_rounds_nothing(void **state)
{
    enum { N = 64 };
    aiol_loop *loop = settled_loop();
    static ph h[N];
    aiol_loop_stats a, b;
    int polls;

    (void)state;
    for (int i = 0; i < N; i++) {
        ph_add(&h[i], loop, true);       /* poll() never finds work */
        h[i].drain = true;
    }
    assert_int_equal(aiol_loop_poll_params_set(loop, LW_MS(50), 0, 0), 0);
    open_window(loop);
    aiol_loop_stats_get(loop, &a);
    assert_true(a.poll_visits >= N);     /* every one looked at, at first */
    wait_past_idle_allowance(loop);

    aiol_loop_stats_get(loop, &a);
    for (int i = 0; i < 5; i++) {
        lw_wait_timer(loop, LW_MS(1));
    }
    aiol_loop_stats_get(loop, &b);
    assert_true(b.poll_rounds > a.poll_rounds);
    assert_int_equal(b.poll_visits, a.poll_visits);

    /* one fd fires: that handler, and only it, is looked at again */
    polls = h[N / 2].polls;
    tu_eventfd_signal(h[N / 2].fd);
    for (int i = 0; i < 5 && h[N / 2].polls == polls; i++) {
        lw_wait_timer(loop, LW_US(500));
    }
    assert_int_equal(h[N / 2].reads, 1);
    assert_true(h[N / 2].polls > polls);
    aiol_loop_stats_get(loop, &a);
    lw_wait_timer(loop, LW_US(500));
    aiol_loop_stats_get(loop, &b);
    assert_true(b.poll_visits - a.poll_visits <=
                b.poll_rounds - a.poll_rounds);
    for (int i = 0; i < N; i++) {
        ph_del(&h[i]);
    }
    aiol_loop_free(loop);
}

/*
 * The idle clock starts when the handler is first polled, not when it was
 * set: a handler set long before busy polling starts is polled (and gets
 * poll_begin) like a fresh one.
 */
static void test_busypoll_idle_clock_starts_at_first_poll(void **state)
{
    aiol_loop *loop = settled_loop();
    ph h;

    (void)state;
    ph_add(&h, loop, true);
    h.drain = true;
    lw_wait_timer(loop, LW_MS(10));         /* longer than the 7 ms limit */
    assert_int_equal(h.polls, 0);
    assert_int_equal(aiol_loop_poll_params_set(loop, LW_MS(50), 0, 0), 0);
    open_window(loop);
    assert_true(h.begins >= 1);
    assert_true(h.polls >= 1);
    ph_del(&h);
    aiol_loop_free(loop);
}

/* ------------------------------------------- known bugs (see report) */

/*
 * Disabling busy polling (max_ns 0) stops polling the handlers, so each
 * handler that got poll_begin must get poll_end: a virtqueue handler
 * re-enables its notifications there, and without it never hears again.
 */
static void test_busypoll_disable_calls_poll_end(void **state)
{
    aiol_loop *loop;
    int polls;
    ph h;

    (void)state;
    loop = settled_loop();
    ph_add(&h, loop, false);
    assert_int_equal(aiol_loop_poll_params_set(loop, MAX_NS, 0, 0), 0);
    open_window(loop);
    assert_int_equal(h.begins, 1);
    assert_int_equal(h.ends, 0);

    assert_int_equal(aiol_loop_poll_params_set(loop, 0, 0, 0), 0);
    for (int i = 0; i < 3; i++) {
        lw_wait_timer(loop, LW_MS(2));
        aiol_loop_poll(loop, false);
    }
    polls = h.polls;
    assert_false(lw_window_open(loop));
    assert_int_equal(h.polls, polls);          /* no longer polled... */
    assert_int_equal(h.ends, 1);               /* ...so it was told so */
    ph_del(&h);
    aiol_loop_free(loop);
}

static void cb_nop(void *opaque)
{
    (void)opaque;
}

/*
 * A polled handler removed outside any poll call is freed at once.  When a
 * later iteration skips busy polling (work already due) and the window
 * then closes, the loop walks its stale snapshot of polled handlers: it
 * reads the freed handler and calls its poll_end and poll after
 * aiol_fd_remove() returned.  ASan reports a heap-use-after-free.
 */
static void test_busypoll_removed_handler_untouched_when_window_closes(
    void **state)
{
    aiol_loop *loop;
    aiol_bh *bh;
    int ends, polls;
    ph h;

    (void)state;
    loop = settled_loop();
    ph_add(&h, loop, false);
    assert_int_equal(aiol_loop_poll_params_set(loop, MAX_NS, 0, 0), 0);
    open_window(loop);
    assert_int_equal(h.begins, 1);

    assert_int_equal(aiol_fd_remove(loop, h.fd), 0);   /* freed now */
    ends = h.ends;
    polls = h.polls;
    /* a max below any real wait: the next blocking iteration closes it */
    assert_int_equal(aiol_loop_poll_params_set(loop, 1, 0, 0), 0);
    assert_int_equal(aiol_bh_new(loop, cb_nop, NULL, &bh), 0);
    aiol_bh_schedule(bh);              /* due: busy polling is skipped */
    assert_true(aiol_loop_poll(loop, true));
    assert_false(lw_window_open(loop));
    assert_int_equal(h.ends, ends);
    assert_int_equal(h.polls, polls);
    aiol_bh_free(bh);
    close(h.fd);
    aiol_loop_free(loop);
}

/*
 * Removing polled handlers from the first, a middle and the last place
 * of the loop's set of polled handlers leaves every other one polled:
 * each of them, given work, has it found by a round, and no round calls
 * a removed one (under ASan, freed memory).
 */
static void test_busypoll_removals_keep_the_others_polled(void **state)
{
    enum { N = 8 };
    static const int gone[] = { 0, 3, N - 1, 4 };
    aiol_loop *loop = settled_loop();
    bool removed[N] = { false };
    int polls[N];
    lw_watchdog w;
    ph hs[N];

    (void)state;
    ph_add(&hs[0], loop, false);
    assert_int_equal(aiol_loop_poll_params_set(loop, MAX_NS, 0, 0), 0);
    open_window(loop);
    ph_del(&hs[0]);
    for (int i = 0; i < N; i++) {
        ph_add(&hs[i], loop, true);
        hs[i].drain = true;
    }
    for (size_t g = 0; g < sizeof(gone) / sizeof(gone[0]); g++) {
        ph_del(&hs[gone[g]]);
        removed[gone[g]] = true;
        for (int i = 0; i < N; i++) {
            polls[i] = hs[i].polls;
            hs[i].work = !removed[i];
            if (hs[i].work) {
                /* (a handler idle too long is polled again after an event) */
                tu_eventfd_signal(hs[i].fd);
            }
        }
        lw_watchdog_arm(&w, loop, LW_MS(5000));
        for (int i = 0; i < N; i++) {
            while (!removed[i] && hs[i].work && w.fired == 0) {
                aiol_loop_poll(loop, true);
            }
        }
        assert_int_equal(lw_watchdog_free(&w), 0); /* every one was found */
        for (int i = 0; i < N; i++) {
            if (removed[i]) {
                assert_int_equal(hs[i].polls, polls[i]);
            } else {
                assert_true(hs[i].polls > polls[i]);
            }
        }
    }
    for (int i = 0; i < N; i++) {
        if (!removed[i]) {
            ph_del(&hs[i]);
        }
    }
    aiol_loop_free(loop);
}

/*
 * A polled handler whose poll callback finds nothing while its fd is
 * readable: the next blocking poll consults the fd monitor and runs read()
 * (loop.h), on every fd monitor, once, not after a few empty returns.
 * Busy polling grows the window on a dozen short waits first, as an
 * iothread does when idle.
 */
static void test_busypoll_ready_fd_dispatched_on_first_blocking_poll(
    void **state)
{
    aiol_loop *loop = settled_loop();
    aiol_loop_stats before;
    lw_watchdog w;
    ph h;

    (void)state;
    ph_add(&h, loop, true);
    h.drain = true;
    assert_int_equal(aiol_loop_poll_params_set(loop, LW_MS(50), 100, 0), 0);
    for (int i = 0; i < 12; i++) {
        lw_wait_timer(loop, LW_MS(1));
    }
    assert_int_equal(h.reads, 0);

    tu_eventfd_signal(h.fd);
    before = lw_stats(loop);
    lw_watchdog_arm(&w, loop, LW_MS(5));
    assert_true(aiol_loop_poll(loop, true));
    assert_int_equal(h.reads, 1);
    assert_int_equal(lw_stats(loop).iterations - before.iterations, 1);
    assert_int_equal(lw_watchdog_free(&w), 0);
    ph_del(&h);
    aiol_loop_free(loop);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_busypoll_dispatches_poll_ready),
        cmocka_unit_test(test_busypoll_begin_end),
        cmocka_unit_test(test_busypoll_grow_shrink),
        cmocka_unit_test(test_busypoll_params_invalid),
        cmocka_unit_test(test_busypoll_params_saturate),
        cmocka_unit_test(test_busypoll_never_starves_fds),
        cmocka_unit_test(test_busypoll_round_replaces_look),
        cmocka_unit_test(test_busypoll_due_timer_fires),
        cmocka_unit_test(test_busypoll_idle_handlers_cost_rounds_nothing),
        cmocka_unit_test(test_busypoll_notify_ends_window),
        cmocka_unit_test(test_busypoll_idle_handler_stops_being_polled),
        cmocka_unit_test(test_busypoll_idle_clock_starts_at_first_poll),
        cmocka_unit_test(test_busypoll_disable_calls_poll_end),
        cmocka_unit_test(
            test_busypoll_removed_handler_untouched_when_window_closes),
        cmocka_unit_test(test_busypoll_removals_keep_the_others_polled),
        cmocka_unit_test(
            test_busypoll_ready_fd_dispatched_on_first_blocking_poll),
    };
    char name[64];

    aiol_loop_free(tu_loop_new());
    snprintf(name, sizeof(name), "busypoll-%s",
             tu_fdmon_requested() ? tu_fdmon_requested() : "default");
    return cmocka_run_group_tests_name(name, tests, NULL, NULL);
}
