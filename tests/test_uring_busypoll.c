/* SPDX-License-Identifier: MIT */
/*
 * test_uring_busypoll.c - io_uring requests while the loop busy-polls.
 *
 * A storage backend on an iothread busy-polls its virtqueues and does its
 * I/O on the loop's ring.  Two things make that fast, and these tests
 * check each by what it causes, never by time:
 *   - requests queued since the last wait reach the kernel before the
 *     window opens (a write to a pipe is visible to the poll callbacks
 *     while the loop spins), not at the wait after the window;
 *   - a request's completion ends the window within a round, as work a
 *     poll callback found would (counted in poll callback calls after the
 *     completion became possible; the window is milliseconds long, so a
 *     loop that ignored the ring would spin thousands of rounds more);
 *     so does readiness of a handler that is not being polled;
 *   - readiness of the polled handler's own fd does not end the window:
 *     its poll callback sees the same work, and epoll would keep spinning.
 *     Its read callback runs after the window, as on epoll.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "aioloop/aioloop.h"
#include "testhandler.h"
#include "testutil.h"
#include "uringreq.h"

/* A window this long is thousands of rounds. */
#define MAX_NS LW_MS(50)

/* A busy-polled handler on a silent eventfd that watches a pipe. */
typedef struct spinner {
    aiol_loop *loop;
    int efd;
    int watch_rfd;        /* >= 0: poll() reports work once it has data */
    int write_at;         /* > 0: the poll() call that writes to write_wfd */
    int write_wfd;        /* the spinner's eventfd: signalled */
    int kick_at;          /* > 0: the poll() call that reports work */
    int reads;            /* read callbacks */
    int polls;            /* poll() calls */
    int polls_at_write;   /* polls when the write was made */
    int saw_data;         /* poll() calls that found watch_rfd readable */
    bool kick;            /* the next poll() reports work, once */
} spinner;

static bool spin_poll(void *opaque)
{
    spinner *sp = opaque;
    int avail = 0;

    sp->polls++;
    if (sp->kick) {
        sp->kick = false;
        return true;
    }
    if (sp->write_at > 0 && sp->polls == sp->write_at) {
        if (sp->write_wfd == sp->efd) {
            tu_eventfd_signal(sp->efd);
        } else {
            assert_int_equal(write(sp->write_wfd, "x", 1), 1);
        }
        sp->polls_at_write = sp->polls;
    }
    if (sp->kick_at > 0 && sp->polls == sp->kick_at) {
        return true;
    }
    if (sp->watch_rfd >= 0) {
        assert_int_equal(ioctl(sp->watch_rfd, FIONREAD, &avail), 0);
        if (avail > 0) {
            sp->saw_data++;
            return true;
        }
    }
    return false;
}

static void spin_ready(void *opaque)
{
    spinner *sp = opaque;

    if (sp->watch_rfd >= 0) {
        tu_pipe_drain(sp->watch_rfd);
    }
}

static void spin_read(void *opaque)
{
    spinner *sp = opaque;

    sp->reads++;
    tu_eventfd_drain(sp->efd);
}

/*
 * An io_uring loop busy-polling @p sp with the window open and @p grow
 * large, so that it is milliseconds long after two short waits.
 */
static aiol_loop *spinning_loop(spinner *sp)
{
    aiol_loop *loop = ur_loop_new();
    aiol_fd_ops ops = {
        .read = spin_read,
        .poll = spin_poll,
        .poll_ready = spin_ready,
    };

    memset(sp, 0, sizeof(*sp));
    sp->loop = loop;
    sp->efd = tu_eventfd();
    sp->watch_rfd = -1;
    assert_int_equal(aiol_fd_set_ops(loop, sp->efd, &ops, sp), 0);
    assert_int_equal(aiol_loop_poll_params_set(loop, MAX_NS, 1000, 0), 0);
    if (!lw_window_open_try(loop)) {
        fail_msg("the busy-poll window never opened");
    }
    for (int i = 0; i < 3; i++) {
        lw_wait_timer(loop, LW_US(200)); /* grows the window */
    }
    /*
     * Progress now: a polled handler that finds nothing for 7 ms stops
     * being polled, and the test that follows needs it polled.
     */
    sp->kick = true;
    assert_true(aiol_loop_poll(loop, true));
    assert_false(sp->kick);
    return loop;
}

static void spinning_loop_free(spinner *sp)
{
    assert_int_equal(aiol_fd_remove(sp->loop, sp->efd), 0);
    close(sp->efd);
    aiol_loop_free(sp->loop);
}

/* A write queued before a blocking poll is in the pipe while it spins. */
static void test_queued_requests_reach_the_kernel_before_the_spin(void **state)
{
    spinner sp;
    aiol_loop *loop = spinning_loop(&sp);
    char byte = 'y';
    int p[2];
    ur_req w;

    (void)state;
    tu_pipe(p);
    sp.watch_rfd = p[0];
    ur_req_init(&w, loop, UR_WRITE, p[1], &byte, 1, 0);
    ur_submit(&w);

    assert_true(aiol_loop_poll(loop, true));
    assert_true(sp.saw_data > 0);  /* the spin saw what the request wrote */
    while (w.ndone == 0) {
        aiol_loop_poll(loop, true);
    }
    assert_int_equal(w.res, 1);

    sp.watch_rfd = -1;
    spinning_loop_free(&sp);
    close(p[0]);
    close(p[1]);
}

/* A completion in the ring ends the window at the next round. */
static void test_completion_in_ring_ends_the_window(void **state)
{
    spinner sp;
    aiol_loop *loop = spinning_loop(&sp);
    ur_req nop;

    (void)state;
    ur_req_init(&nop, loop, UR_NOP, -1, NULL, 0, 0);
    ur_submit(&nop);
    sp.polls = 0;
    while (nop.ndone == 0) {
        aiol_loop_poll(loop, true);
    }
    assert_int_equal(nop.res, 0);
    assert_true(sp.polls <= 3);
    spinning_loop_free(&sp);
}

/*
 * A read of an empty pipe is in flight when the window opens; a poll
 * callback writes the byte it waits for.  The read's completion is work
 * the kernel holds for the ring's thread (deferred task work), seen
 * without a syscall: the spin ends within a round or two of the write.
 */
static void test_deferred_completion_ends_the_window(void **state)
{
    spinner sp;
    aiol_loop *loop = spinning_loop(&sp);
    char buf[4];
    int p[2];
    ur_req r;

    (void)state;
    tu_pipe(p);
    ur_req_init(&r, loop, UR_READ, p[0], buf, sizeof(buf), 0);
    ur_submit(&r);
    aiol_loop_poll(loop, false); /* the read waits in the kernel */
    assert_int_equal(r.ndone, 0);

    sp.polls = 0;
    sp.write_wfd = p[1];
    sp.write_at = 5;
    while (r.ndone == 0) {
        aiol_loop_poll(loop, true);
    }
    assert_int_equal(r.res, 1);
    assert_int_equal(sp.polls_at_write, 5);
    assert_true(sp.polls - sp.polls_at_write <= 3);
    spinning_loop_free(&sp);
    close(p[0]);
    close(p[1]);
}

/*
 * The guest kicks a virtqueue the loop is polling: its ioeventfd fires
 * mid-window.  The spin goes on until the poll callback reports work (a
 * hundred rounds later here), and the read callback runs after it.
 */
static void test_polled_handlers_readiness_keeps_the_window(void **state)
{
    spinner sp;
    aiol_loop *loop = spinning_loop(&sp);

    (void)state;
    sp.polls = 0;
    sp.reads = 0;
    sp.write_wfd = sp.efd;
    sp.write_at = 5;
    sp.kick_at = 105;
    assert_true(aiol_loop_poll(loop, true));
    assert_int_equal(sp.polls_at_write, 5);
    assert_true(sp.polls >= sp.kick_at);
    while (sp.reads == 0) {
        aiol_loop_poll(loop, true);
    }
    sp.kick_at = 0;
    spinning_loop_free(&sp);
}

/*
 * A handler with no poll callback becomes ready mid-window: the window
 * ends within a round or two, and its callback runs.
 */
static void test_unpolled_readiness_ends_the_window(void **state)
{
    spinner sp;
    aiol_loop *loop = spinning_loop(&sp);
    int p[2];
    th other;

    (void)state;
    tu_pipe(p);
    th_add(&other, loop, p[0], th_cb_read, NULL);
    aiol_loop_poll(loop, false); /* its poll is armed */
    other.reads = 0;

    sp.polls = 0;
    sp.write_wfd = p[1];
    sp.write_at = 5;
    while (other.reads == 0) {
        aiol_loop_poll(loop, true);
    }
    assert_int_equal(sp.polls_at_write, 5);
    assert_true(sp.polls - sp.polls_at_write <= 3);
    th_remove(&other);
    spinning_loop_free(&sp);
    close(p[0]);
    close(p[1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(
            test_queued_requests_reach_the_kernel_before_the_spin, ur_setup),
        cmocka_unit_test_setup(test_completion_in_ring_ends_the_window,
                               ur_setup),
        cmocka_unit_test_setup(test_deferred_completion_ends_the_window,
                               ur_setup),
        cmocka_unit_test_setup(test_polled_handlers_readiness_keeps_the_window,
                               ur_setup),
        cmocka_unit_test_setup(test_unpolled_readiness_ends_the_window,
                               ur_setup),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
