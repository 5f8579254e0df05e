/* SPDX-License-Identifier: MIT */
/*
 * test_uring.c - the io_uring monitor and its request API (aioloop/uring.h).
 *
 * Runs once, not per fd monitor: every test asks for "io_uring" by name (and
 * one also for "epoll" and "poll").  When the machine cannot start an
 * io_uring loop the program exits 77 before any test runs.
 *
 * Requests are recorded in a struct ur_req (uringreq.h).  A watchdog
 * timer turns a blocking poll that should have returned but hangs into a
 * failure; no test looks at a clock otherwise.
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
#include <liburing.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "aioloop/aioloop.h"
#include "aioloop/uring.h"
#include "testutil.h"
#include "testhandler.h"
#include "loopwatch.h"
#include "uringreq.h"

#define WATCHDOG_NS UR_WATCHDOG_NS

/* --------------------------------------------- read, write + fsync chain */

static void then_fsync(ur_req *w)
{
    ur_req *fs = w->peer;

    ur_req_init(fs, w->loop, UR_FSYNC, w->fd, NULL, 0, 0);
    ur_submit(fs);
    assert_true(aiol_uring_pending_get(w->loop) >= 1);
}

static void test_read_write_fsync(void **state)
{
    aiol_loop *loop = ur_loop_new();
    char path[] = "/tmp/aiol-uring-XXXXXX";
    static char content[4096], buf[4096], wbuf[512], check[512];
    ur_req rd, wr, fs, many[8];
    lw_watchdog wd;
    int fd = mkstemp(path);

    (void)state;
    assert_true(fd >= 0);
    unlink(path);
    for (size_t i = 0; i < sizeof(content); i++) {
        content[i] = (char)('a' + i % 23);
    }
    assert_int_equal(pwrite(fd, content, sizeof(content), 0), sizeof(content));
    lw_watchdog_arm(&wd, loop, WATCHDOG_NS);
    assert_int_equal(aiol_uring_pending_get(loop), 0);

    /* a read */
    ur_req_init(&rd, loop, UR_READ, fd, buf, sizeof(buf), 0);
    ur_submit(&rd);
    assert_int_equal(aiol_uring_pending_get(loop), 1);
    ur_poll_until(loop, &rd.ndone, 1, &wd);
    assert_int_equal(rd.res, (int)sizeof(content));
    assert_memory_equal(buf, content, sizeof(content));
    assert_int_equal(aiol_uring_pending_get(loop), 0);

    /* a write, then an fsync submitted from the write's done callback */
    memset(wbuf, 'W', sizeof(wbuf));
    ur_req_init(&wr, loop, UR_WRITE, fd, wbuf, sizeof(wbuf), 8192);
    memset(&fs, 0, sizeof(fs));
    wr.then = then_fsync;
    wr.peer = &fs;
    ur_submit(&wr);
    assert_int_equal(aiol_uring_pending_get(loop), 1);
    ur_poll_until(loop, &fs.ndone, 1, &wd);
    assert_int_equal(wr.ndone, 1);
    assert_int_equal(wr.res, (int)sizeof(wbuf));
    assert_int_equal(fs.res, 0);
    assert_true(fs.seq > wr.seq);
    assert_int_equal(aiol_uring_pending_get(loop), 0);
    assert_int_equal(pread(fd, check, sizeof(check), 8192), sizeof(check));
    assert_memory_equal(check, wbuf, sizeof(wbuf));

    /* several at once: pending counts them all, each completes once */
    for (int i = 0; i < 8; i++) {
        ur_req_init(&many[i], loop, UR_READ, fd, buf + i * 512, 512,
                    (uint64_t)i * 512);
        ur_submit(&many[i]);
        assert_int_equal(aiol_uring_pending_get(loop), (unsigned)i + 1);
    }
    for (int i = 0; i < 8; i++) {
        ur_poll_until(loop, &many[i].ndone, 1, &wd);
    }
    assert_int_equal(aiol_uring_pending_get(loop), 0);
    for (int i = 0; i < 8; i++) {
        assert_int_equal(many[i].res, 512);
    }
    assert_memory_equal(buf, content, sizeof(content));

    /* nothing runs twice */
    ur_poll_idle(loop, 3);
    assert_int_equal(rd.ndone + wr.ndone + fs.ndone, 3);
    for (int i = 0; i < 8; i++) {
        assert_int_equal(many[i].ndone, 1);
        assert_int_equal(many[i].preps, 1);
    }
    assert_int_equal(lw_watchdog_free(&wd), 0);
    aiol_loop_free(loop);
    close(fd);
}

/* --------------------------------------------------------------- cancel */

static void then_cancel_peer(ur_req *r)
{
    assert_int_equal(aiol_uring_cancel(r->peer->h), 0);
}

static void test_cancel(void **state)
{
    aiol_loop *loop = ur_loop_new();
    char buf[16], got;
    ur_req r, a, b;
    lw_watchdog wd;
    int p[2];

    (void)state;
    ur_blocking_pipe(p);
    lw_watchdog_arm(&wd, loop, WATCHDOG_NS);

    /* cancel a read the kernel already holds */
    ur_req_init(&r, loop, UR_READ, p[0], buf, sizeof(buf), 0);
    ur_submit(&r);
    assert_true(aiol_uring_flush(loop) >= 1);
    assert_false(aiol_loop_poll(loop, false));
    assert_int_equal(r.ndone, 0);
    assert_int_equal(aiol_uring_pending_get(loop), 1);
    assert_int_equal(aiol_uring_cancel(r.h), 0);
    ur_poll_until(loop, &r.ndone, 1, &wd);
    assert_int_equal(r.res, -ECANCELED);
    assert_int_equal(aiol_uring_pending_get(loop), 0);
    /* the cancelled read consumes nothing and never completes again */
    tu_pipe_signal(p[1]);
    ur_poll_idle(loop, 3);
    assert_int_equal(r.ndone, 1);
    assert_true(ur_readable(p[0], 0));
    assert_int_equal(read(p[0], &got, 1), 1);

    /* cancel a request that is still only queued on our side */
    ur_req_init(&r, loop, UR_READ, p[0], buf, sizeof(buf), 0);
    ur_submit(&r);
    assert_int_equal(aiol_uring_cancel(r.h), 0);
    ur_poll_until(loop, &r.ndone, 1, &wd);
    assert_int_equal(r.res, -ECANCELED);
    tu_pipe_signal(p[1]);
    ur_poll_idle(loop, 3);
    assert_int_equal(r.ndone, 1);
    assert_int_equal(read(p[0], &got, 1), 1);

    /*
     * Cancel a request that has finished but whose callback has not run
     * yet: it still runs exactly once, with its own result.
     */
    ur_req_init(&a, loop, UR_NOP, -1, NULL, 0, 0);
    ur_req_init(&b, loop, UR_NOP, -1, NULL, 0, 0);
    a.then = then_cancel_peer;
    a.peer = &b;
    ur_submit(&a);
    ur_submit(&b);
    ur_poll_until(loop, &b.ndone, 1, &wd);
    assert_int_equal(a.ndone, 1);
    assert_int_equal(a.res, 0);
    assert_true(b.res == 0 || b.res == -ECANCELED);
    ur_poll_idle(loop, 3);
    assert_int_equal(a.ndone + b.ndone, 2);
    assert_int_equal(aiol_uring_pending_get(loop), 0);

    assert_int_equal(lw_watchdog_free(&wd), 0);
    aiol_loop_free(loop);
    close(p[0]);
    close(p[1]);
}

/* -------------------------------------------------------- nested polls */

typedef struct nest_ctx {
    th h;
    ur_req req;
    lw_watchdog *wd;
} nest_ctx;

/* fd read callback: submits a request and polls until it completed */
static void cb_read_submit_nested(void *opaque)
{
    nest_ctx *c = opaque;

    th_note(&c->h);
    c->h.reads++;
    tu_eventfd_drain(c->h.fd);
    ur_req_init(&c->req, c->h.loop, UR_NOP, -1, NULL, 0, 0);
    ur_submit(&c->req);
    th_depth++;
    ur_poll_until(c->h.loop, &c->req.ndone, 1, c->wd);
    th_depth--;
    c->h.nested_done = true;
}

/* done callback: submits its peer and polls until the peer completed */
static void then_submit_peer_nested(ur_req *r)
{
    ur_submit(r->peer);
    th_depth++;
    ur_poll_until(r->loop, &r->peer->ndone, 1, r->wd);
    th_depth--;
}

/* done callback: polls until the already-submitted peer completed */
static void then_wait_peer_nested(ur_req *r)
{
    th_depth++;
    ur_poll_until(r->loop, &r->peer->ndone, 1, r->wd);
    th_depth--;
}

static void test_nested(void **state)
{
    aiol_loop *loop = ur_loop_new();
    nest_ctx c;
    ur_req a, b, q[4];
    lw_watchdog wd;

    (void)state;
    lw_watchdog_arm(&wd, loop, WATCHDOG_NS);

    /* submitted and completed from inside an fd handler's nested poll */
    th_add(&c.h, loop, tu_eventfd(), cb_read_submit_nested, NULL);
    c.wd = &wd;
    tu_eventfd_signal(c.h.fd);
    assert_true(aiol_loop_poll(loop, true));
    assert_int_equal(c.h.reads, 1);
    assert_true(c.h.nested_done);
    assert_int_equal(c.req.ndone, 1);
    assert_int_equal(c.req.depth, 1);
    assert_int_equal(c.req.res, 0);
    ur_poll_idle(loop, 2);
    assert_int_equal(c.h.reads, 1);
    assert_int_equal(c.req.ndone, 1);
    th_remove(&c.h);
    close(c.h.fd);

    /* a done callback submits another request and polls until it is done */
    ur_req_init(&a, loop, UR_NOP, -1, NULL, 0, 0);
    a.then = then_submit_peer_nested;
    a.peer = &b;
    a.wd = &wd;
    ur_req_init(&b, loop, UR_NOP, -1, NULL, 0, 0);
    ur_submit(&a);
    ur_poll_until(loop, &a.ndone, 1, &wd);
    assert_int_equal(b.ndone, 1);
    assert_int_equal(b.depth, 1);
    assert_true(b.seq > a.seq);
    ur_poll_idle(loop, 2);
    assert_int_equal(a.ndone + b.ndone, 2);
    assert_int_equal(aiol_uring_pending_get(loop), 0);

    /*
     * Queue continuation: all four complete in the same wait (NOPs
     * complete at submission).  The first one's done callback polls until
     * the last one ran: the nested poll must continue the queue of
     * completions already collected, without blocking for new ones, and
     * nothing may run twice.
     */
    for (int i = 0; i < 4; i++) {
        ur_req_init(&q[i], loop, UR_NOP, -1, NULL, 0, 0);
        q[i].wd = &wd;
    }
    q[0].then = then_wait_peer_nested;
    q[0].peer = &q[3];
    for (int i = 0; i < 4; i++) {
        ur_submit(&q[i]);
    }
    ur_poll_until(loop, &q[0].ndone, 1, &wd);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(q[i].ndone, 1);
        assert_int_equal(q[i].res, 0);
    }
    assert_int_equal(q[0].depth, 0);
    assert_int_equal(q[3].depth, 1);
    assert_true(q[3].seq > q[0].seq);
    ur_poll_idle(loop, 2);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(q[i].ndone, 1);
    }
    assert_int_equal(aiol_uring_pending_get(loop), 0);

    assert_int_equal(lw_watchdog_free(&wd), 0);
    assert_int_equal(c.h.after_remove, 0);
    aiol_loop_free(loop);
}

/* ------------------------------------------ free with requests in flight */

static void test_free_in_flight(void **state)
{
    enum { N = 3 };
    aiol_loop *loop = ur_loop_new();
    int p[N][2];
    char buf[N][8], got;
    ur_req r[N], nop;

    (void)state;
    for (int i = 0; i < N; i++) {
        ur_blocking_pipe(p[i]);
        ur_req_init(&r[i], loop, UR_READ, p[i][0], buf[i], sizeof(buf[i]), 0);
        ur_submit(&r[i]);
        if (i == 0) {
            /* the first one reaches the kernel; the others stay queued */
            assert_false(aiol_loop_poll(loop, false));
        }
    }
    ur_req_init(&nop, loop, UR_NOP, -1, NULL, 0, 0);
    ur_submit(&nop);
    assert_int_equal(aiol_uring_pending_get(loop), N + 1);

    ur_in_free = true;
    aiol_loop_free(loop);
    ur_in_free = false;

    for (int i = 0; i < N; i++) {
        assert_int_equal(r[i].ndone, 1);
        assert_int_equal(r[i].res, -ECANCELED);
        assert_true(r[i].in_free);
        /* no read is left in the kernel to eat the data */
        tu_pipe_signal(p[i][1]);
        assert_true(ur_readable(p[i][0], 0));
        assert_int_equal(read(p[i][0], &got, 1), 1);
        close(p[i][0]);
        close(p[i][1]);
    }
    assert_int_equal(nop.ndone, 1);
    assert_true(nop.in_free);
    assert_true(nop.res == 0 || nop.res == -ECANCELED);
}

/* ---------------------------------------------- other fd monitors refuse */

static void test_not_uring(void **state)
{
    static const char *const names[] = { "epoll", "poll" };

    (void)state;
    for (size_t i = 0; i < 2; i++) {
        aiol_loop *loop = NULL;
        aiol_uring_req *h = NULL;
        ur_req r;

        assert_int_equal(aiol_loop_new(&loop, names[i]), 0);
        ur_req_init(&r, loop, UR_NOP, -1, NULL, 0, 0);
        assert_int_equal(aiol_uring_submit(loop, ur_prep, ur_done, &r, &h),
                         -ENOTSUP);
        assert_null(h);
        assert_int_equal(aiol_uring_flush(loop), -ENOTSUP);
        assert_int_equal(aiol_uring_drain(loop), -ENOTSUP);
        assert_int_equal(aiol_uring_pending_get(loop), 0);
        assert_false(aiol_loop_poll(loop, false));
        assert_int_equal(r.preps + r.ndone, 0);
        aiol_loop_free(loop);
        assert_int_equal(r.ndone, 0);
    }
}

/* ---------------------------------------------------------------- drain */

typedef struct drain_ctx {
    th drainer, other;      /* eventfds: drainer's callback drains */
    ur_req rd, a, b;          /* a's done submits b */
    aiol_bh *bh;
    int bh_runs;
} drain_ctx;

static void cb_bh_count(void *opaque) { (*(int *)opaque)++; }

/* fd read callback: waits for every request, from inside a dispatch */
static void cb_read_wait_requests(void *opaque)
{
    drain_ctx *c = opaque;

    c->drainer.reads++;
    tu_eventfd_drain(c->drainer.fd);
    /* readiness and a bottom half that come while it waits */
    tu_eventfd_signal(c->other.fd);
    aiol_bh_schedule(c->bh);
    assert_int_equal(aiol_uring_drain(c->drainer.loop), 0);
    assert_int_equal(aiol_uring_pending_get(c->drainer.loop), 0);
    assert_int_equal(c->rd.ndone + c->a.ndone + c->b.ndone, 3);
    /* nothing else ran meanwhile */
    assert_int_equal(c->other.reads, 0);
    assert_int_equal(c->bh_runs, 0);
}

static void then_submit_peer(ur_req *r) { ur_submit(r->peer); }

/*
 * aiol_uring_drain() from inside an fd handler: it runs request
 * completions only (a's continuation submits b, which is waited for too),
 * no other handler and no bottom half; their readiness is reported by
 * the next poll.
 */
static void test_drain(void **state)
{
    aiol_loop *loop = ur_loop_new();
    static char buf[16];
    drain_ctx c;
    lw_watchdog wd;
    int p[2];

    (void)state;
    memset(&c, 0, sizeof(c));
    lw_watchdog_arm(&wd, loop, WATCHDOG_NS);
    assert_int_equal(aiol_uring_drain(loop), 0); /* nothing in flight */
    ur_blocking_pipe(p);
    ur_req_init(&c.rd, loop, UR_READ, p[0], buf, sizeof(buf), 0);
    ur_submit(&c.rd);
    ur_req_init(&c.a, loop, UR_NOP, -1, NULL, 0, 0);
    c.a.then = then_submit_peer;
    c.a.peer = &c.b;
    ur_req_init(&c.b, loop, UR_NOP, -1, NULL, 0, 0);
    ur_submit(&c.a);
    assert_int_equal(write(p[1], "drain", 5), 5);
    th_init(&c.drainer, loop, tu_eventfd()); /* (its opaque: the ctx) */
    assert_int_equal(aiol_fd_set(loop, c.drainer.fd, cb_read_wait_requests,
                                 NULL, NULL, &c), 0);
    th_add(&c.other, loop, tu_eventfd(), th_cb_read, NULL);
    assert_int_equal(aiol_bh_new(loop, cb_bh_count, &c.bh_runs, &c.bh), 0);
    tu_eventfd_signal(c.drainer.fd);
    while (c.drainer.reads == 0) {
        assert_true(aiol_loop_poll(loop, true));
    }
    assert_int_equal(c.rd.res, 5);
    assert_int_equal(c.b.ndone, 1);
    /* what came during the drain is not lost */
    while (c.other.reads == 0 || c.bh_runs == 0) {
        assert_true(aiol_loop_poll(loop, true));
    }
    aiol_bh_free(c.bh);
    th_remove(&c.drainer);
    th_remove(&c.other);
    close(c.drainer.fd);
    close(c.other.fd);
    close(p[0]);
    close(p[1]);
    assert_int_equal(lw_watchdog_free(&wd), 0);
    aiol_loop_free(loop);
}

/* ---------------------------------------------------------------- flush */

static void test_flush(void **state)
{
    aiol_loop *loop = ur_loop_new();
    static char msg[] = "hello";
    char got[sizeof(msg)];
    lw_watchdog wd;
    ur_req w;
    int p[2];

    (void)state;
    ur_blocking_pipe(p);
    lw_watchdog_arm(&wd, loop, WATCHDOG_NS);
    assert_int_equal(aiol_uring_flush(loop), 0);  /* nothing queued */

    ur_req_init(&w, loop, UR_WRITE, p[1], msg, sizeof(msg), 0);
    ur_submit(&w);
    /* queued on our side only: the kernel has not seen it */
    assert_false(ur_readable(p[0], 0));
    assert_true(aiol_uring_flush(loop) >= 1);
    /* now it has, though the loop was never polled */
    assert_true(ur_readable(p[0], 5000));
    assert_int_equal(w.ndone, 0);
    assert_int_equal(aiol_uring_pending_get(loop), 1);
    assert_int_equal(aiol_uring_flush(loop), 0);  /* nothing left */

    ur_poll_until(loop, &w.ndone, 1, &wd);
    assert_int_equal(w.res, (int)sizeof(msg));
    assert_int_equal(read(p[0], got, sizeof(got)), sizeof(got));
    assert_memory_equal(got, msg, sizeof(msg));
    assert_int_equal(aiol_uring_pending_get(loop), 0);

    assert_int_equal(lw_watchdog_free(&wd), 0);
    aiol_loop_free(loop);
    close(p[0]);
    close(p[1]);
}

/* ------------------------------------ remove with a poll still in flight */

static void cb_read_drain(void *opaque)
{
    th *h = opaque;

    th_cb_read(h);
    tu_eventfd_drain(h->fd);
}

static void test_remove_in_flight(void **state)
{
    aiol_loop *loop = ur_loop_new();
    lw_watchdog wd;
    th a, b;
    int fd = tu_eventfd(), fd2;

    (void)state;
    lw_watchdog_arm(&wd, loop, WATCHDOG_NS);
    th_add(&a, loop, fd, th_cb_read, NULL);
    assert_false(aiol_loop_poll(loop, false));  /* POLL_ADD now in flight */
    th_remove(&a);
    tu_eventfd_signal(fd);
    ur_poll_idle(loop, 4);
    assert_int_equal(a.reads, 0);

    close(fd);
    fd2 = tu_eventfd();
    th_add(&b, loop, fd2, cb_read_drain, NULL);
    ur_poll_idle(loop, 2);                         /* not signalled yet */
    tu_eventfd_signal(fd2);
    ur_poll_until(loop, &b.reads, 1, &wd);
    ur_poll_idle(loop, 2);                         /* drained */
    assert_int_equal(b.reads, 1);
    assert_int_equal(a.after_remove + b.after_remove, 0);
    th_remove(&b);
    close(fd2);
    assert_int_equal(lw_watchdog_free(&wd), 0);
    aiol_loop_free(loop);
}

/*
 * The same, 1000 times, in three flavours: re-add on the same fd with
 * other events; close, reopen (same number, most likely) and re-add after
 * the loop saw the removal; and the same without any poll in between, so
 * the stale poll of the old file and the new registration meet in one
 * wait.  A callback after removal, or a read callback for a new eventfd
 * that was never signalled, is a stale completion delivered.
 */
static void test_remove_in_flight_repeated(void **state)
{
    enum { REPS = 1000 };
    aiol_loop *loop = ur_loop_new();
    th *hs = calloc(2 * REPS, sizeof(*hs));
    lw_watchdog wd;
    int after = 0;

    (void)state;
    assert_non_null(hs);
    lw_watchdog_arm(&wd, loop, WATCHDOG_NS * 3);
    for (int i = 0; i < REPS; i++) {
        th *a = &hs[2 * i], *b = &hs[2 * i + 1];
        int fd = tu_eventfd(), flavour = i % 3;

        th_add(a, loop, fd, (i & 4) ? NULL : th_cb_read,
               (i & 4) ? th_cb_write : NULL);
        if (i & 4) {
            /* always writable: the first poll runs the write callback */
            assert_true(aiol_loop_poll(loop, false));
            assert_int_equal(a->writes, 1);
        } else {
            assert_false(aiol_loop_poll(loop, false));
        }
        th_remove(a);
        tu_eventfd_signal(fd);
        if (flavour != 2) {
            assert_false(aiol_loop_poll_deadline(loop, aiol_mono_time_get() +
                                                           LW_MS(1)));
            assert_false(aiol_loop_poll(loop, false));
        }
        if (flavour == 0) {
            /* same file, other events */
            th_add(b, loop, fd, (i & 4) ? cb_read_drain : NULL,
                   (i & 4) ? NULL : th_cb_write);
            if (i & 4) {
                ur_poll_until(loop, &b->reads, 1, &wd);
            } else {
                ur_poll_until(loop, &b->writes, 1, &wd);
            }
        } else {
            close(fd);
            fd = tu_eventfd();
            th_add(b, loop, fd, cb_read_drain, NULL);
            assert_false(aiol_loop_poll(loop, false));
            assert_false(aiol_loop_poll_deadline(loop, aiol_mono_time_get() +
                                                           LW_MS(1)));
            assert_int_equal(b->reads, 0);
            tu_eventfd_signal(fd);
            ur_poll_until(loop, &b->reads, 1, &wd);
        }
        th_remove(b);
        close(fd);
        assert_int_equal(a->after_remove + b->after_remove, 0);
        assert_int_equal(a->reads, 0);
    }
    ur_poll_idle(loop, 2);
    for (int i = 0; i < 2 * REPS; i++) {
        after += hs[i].after_remove;
    }
    assert_int_equal(after, 0);
    assert_int_equal(lw_watchdog_free(&wd), 0);
    aiol_loop_free(loop);
    free(hs);
}

/* ------------------------------------------------------ level-triggered */

static void test_level_triggered(void **state)
{
    aiol_loop *loop = ur_loop_new();
    lw_watchdog wd;
    th r, w;
    int efd = tu_eventfd(), p[2];

    (void)state;
    lw_watchdog_arm(&wd, loop, WATCHDOG_NS);
    th_add(&r, loop, efd, th_cb_read, NULL);      /* never drains */
    tu_eventfd_signal(efd);
    for (int i = 1; i <= 5; i++) {
        assert_true(aiol_loop_poll(loop, true));
        assert_int_equal(r.reads, i);
    }
    th_remove(&r);

    tu_pipe(p);
    th_add(&w, loop, p[1], NULL, th_cb_write);    /* empty pipe: writable */
    for (int i = 1; i <= 5; i++) {
        assert_true(aiol_loop_poll(loop, true));
        assert_int_equal(w.writes, i);
    }
    th_remove(&w);
    ur_poll_idle(loop, 2);
    assert_int_equal(r.after_remove + w.after_remove, 0);
    assert_int_equal(lw_watchdog_free(&wd), 0);
    aiol_loop_free(loop);
    close(efd);
    close(p[0]);
    close(p[1]);
}

/*
 * Direct embedding on io_uring: the host may poll the handlers' fds while
 * no request is in flight; with one, aiol_loop_embed_fds() says -EBUSY
 * and the ring fd must wake the host for the request's completion.
 */
static void test_embed_direct_and_requests(void **state)
{
    aiol_loop *loop = ur_loop_new();
    struct pollfd fds[4];
    int efd = tu_eventfd(), lfd = aiol_loop_fd_get(loop), p[2], n;
    char buf[8];
    ur_req rd;
    th h;

    (void)state;
    assert_true(lfd >= 0);
    th_add(&h, loop, efd, th_cb_read, NULL);
    h.drain = true;
    aiol_loop_prepare(loop);
    n = aiol_loop_embed_fds(loop, fds, 4);
    assert_int_equal(n, 2);                  /* efd and the wakeup fd */
    tu_eventfd_signal(efd);
    assert_int_equal(poll(fds, (nfds_t)n, 5000), 1);
    aiol_loop_check(loop);
    assert_true(aiol_loop_dispatch_fds(loop, fds, (size_t)n));
    assert_int_equal(h.reads, 1);

    /* a read in flight: the host must poll the ring fd */
    tu_pipe(p);
    ur_req_init(&rd, loop, UR_READ, p[0], buf, sizeof(buf), 0);
    ur_submit(&rd);
    aiol_loop_prepare(loop);
    assert_int_equal(aiol_loop_embed_fds(loop, fds, 4), -EBUSY);
    assert_int_equal(write(p[1], "x", 1), 1);
    fds[0] = (struct pollfd){ .fd = lfd, .events = POLLIN };
    assert_int_equal(poll(fds, 1, 5000), 1);
    aiol_loop_check(loop);
    aiol_loop_dispatch(loop);
    assert_int_equal(rd.ndone, 1);
    assert_int_equal(rd.res, 1);

    /* the handler was re-armed for the ring meanwhile, and direct is back */
    tu_eventfd_signal(efd);
    aiol_loop_prepare(loop);
    assert_true(poll(fds, 1, 5000) == 1);    /* the ring fd sees efd */
    aiol_loop_check(loop);
    assert_true(aiol_loop_dispatch(loop));
    assert_int_equal(h.reads, 2);
    aiol_loop_prepare(loop);
    assert_int_equal(aiol_loop_embed_fds(loop, fds, 4), 2);
    aiol_loop_check(loop);
    assert_false(aiol_loop_dispatch_fds(loop, fds, 2));
    th_remove(&h);
    aiol_loop_free(loop);
    close(efd);
    close(p[0]);
    close(p[1]);
}

/*
 * Requests in flight pin a ring to its thread, yet the documented fallback
 * after embed_fds() says -EBUSY is the loop fd: on the owner thread
 * aiol_loop_fd_get() keeps the bound ring and its fd wakes the host for
 * the request's completion (it used to abort).
 */
static void test_get_fd_with_requests_in_flight(void **state)
{
    aiol_loop *loop = ur_loop_new();
    struct pollfd fds[4];
    char buf[8];
    int p[2], lfd;
    ur_req rd;

    (void)state;
    tu_pipe(p);
    ur_req_init(&rd, loop, UR_READ, p[0], buf, sizeof(buf), 0);
    ur_submit(&rd);
    assert_false(aiol_loop_poll(loop, false)); /* in the kernel now */
    aiol_loop_prepare(loop);
    assert_int_equal(aiol_loop_embed_fds(loop, fds, 4), -EBUSY);
    lfd = aiol_loop_fd_get(loop);
    assert_true(lfd >= 0);
    fds[0] = (struct pollfd){ .fd = lfd, .events = POLLIN };
    assert_int_equal(poll(fds, 1, 0), 0);      /* nothing yet */
    assert_int_equal(write(p[1], "x", 1), 1);
    assert_int_equal(poll(fds, 1, 5000), 1);
    aiol_loop_check(loop);
    assert_true(aiol_loop_dispatch(loop));
    assert_int_equal(rd.ndone, 1);
    assert_int_equal(rd.res, 1);
    /* the host keeps its fd: the ring stays the same */
    assert_int_equal(aiol_loop_fd_get(loop), lfd);
    aiol_loop_free(loop);
    close(p[0]);
    close(p[1]);
}

/*
 * A host's sleep on the loop fd @lfd until it is readable.  A watchdog
 * timerfd @tfd (poll() checks the fds once more when it gives up, so its
 * result alone cannot tell a missed wakeup) fires only when the loop
 * missed the wakeup.
 */
static void host_sleep(int lfd, int tfd)
{
    static const struct itimerspec watchdog = { .it_value = { .tv_sec = 10 } };
    struct pollfd pfd[2] = {
        { .fd = lfd, .events = POLLIN },
        { .fd = tfd, .events = POLLIN },
    };

    assert_int_equal(timerfd_settime(tfd, 0, &watchdog, NULL), 0);
    assert_true(poll(pfd, 2, -1) >= 1);
    assert_int_equal(pfd[1].revents, 0);
    assert_true(pfd[0].revents & POLLIN);
}

/* A thread that writes to a pipe once @tid sleeps in poll(2). */
typedef struct late_writer {
    pid_t tid;
    int wfd;
} late_writer;

static void *write_once_asleep(void *arg)
{
    late_writer *w = arg;
    char path[64], wchan[64];

    snprintf(path, sizeof(path), "/proc/self/task/%d/wchan", (int)w->tid);
    for (;;) {
        FILE *f = fopen(path, "r");
        size_t n;

        assert_non_null(f);
        n = fread(wchan, 1, sizeof(wchan) - 1, f);
        fclose(f);
        wchan[n] = '\0';
        if (strstr(wchan, "poll") != NULL) {
            break; /* asleep in poll_schedule_timeout(), or about to be */
        }
        usleep(1000);
    }
    assert_int_equal(write(w->wfd, "x", 1), 1);
    return NULL;
}

/*
 * The same host, asleep in poll(2) when a poll-driven request (a pipe
 * read) completes: the fd the host gets wakes it, round after round, and
 * reads empty once nothing is pending.  (The kernel wakes a bound ring's
 * owner for this kind of completion even outside io_uring_enter; for
 * direct reads it does not: the next test.)
 */
static void test_get_fd_host_asleep_when_a_request_completes(void **state)
{
    aiol_loop *loop = ur_loop_new();
    late_writer w = { .tid = (pid_t)syscall(SYS_gettid) };
    struct pollfd pfd;
    int tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
    pthread_t t;
    char buf[3][8];
    int p[2];
    ur_req rd[3];

    (void)state;
    tu_pipe(p);
    w.wfd = p[1];
    for (int i = 0; i < 3; i++) {
        ur_req_init(&rd[i], loop, UR_READ, p[0], buf[i], sizeof(buf[i]), 0);
    }
    ur_submit(&rd[0]);
    assert_false(aiol_loop_poll(loop, false)); /* in the kernel now */
    pfd = (struct pollfd){ .fd = aiol_loop_fd_get(loop), .events = POLLIN };
    assert_true(pfd.fd >= 0);
    assert_true(tfd >= 0);
    for (int round = 0; round < 3; round++) {
        aiol_loop_prepare(loop);
        assert_int_equal(pthread_create(&t, NULL, write_once_asleep, &w), 0);
        host_sleep(pfd.fd, tfd);
        assert_int_equal(pthread_join(t, NULL), 0);
        aiol_loop_check(loop);
        assert_true(aiol_loop_dispatch(loop));
        assert_int_equal(rd[round].ndone, 1);
        assert_int_equal(rd[round].res, 1);
        if (round < 2) {
            ur_submit(&rd[round + 1]); /* the next one, on the same ring */
        }
        /* nothing pending: the host would sleep */
        aiol_loop_prepare(loop);
        assert_int_equal(poll(&pfd, 1, 0), 0);
        aiol_loop_check(loop);
    }
    assert_int_equal(aiol_loop_fd_get(loop), pfd.fd);
    aiol_loop_free(loop);
    close(tfd);
    close(p[0]);
    close(p[1]);
}

/*
 * A file opened O_DIRECT on a filesystem that completes direct reads
 * from the block layer's interrupt (not tmpfs, which completes them
 * inline), or -1 with the reason printed.
 */
static int direct_file_open(char *path, size_t len)
{
    static const char *dirs[] = { "/var/tmp", "." };
    static char block[4096] __attribute__((aligned(4096)));

    for (size_t i = 0; i < sizeof(dirs) / sizeof(*dirs); i++) {
        struct statfs sf;
        int fd;

        if (statfs(dirs[i], &sf) != 0 || sf.f_type == 0x01021994 /* tmpfs */) {
            continue;
        }
        snprintf(path, len, "%s/test-uring-direct-XXXXXX", dirs[i]);
        fd = mkstemp(path);
        if (fd < 0) {
            continue;
        }
        if (pwrite(fd, block, sizeof(block), 0) == (ssize_t)sizeof(block) &&
            fsync(fd) == 0) {
            int dfd = open(path, O_RDONLY | O_DIRECT);

            close(fd);
            if (dfd >= 0) {
                return dfd;
            }
        } else {
            close(fd);
        }
        unlink(path);
    }
    printf("SKIP: no directory here takes O_DIRECT reads on a block "
           "device (tried /var/tmp and .)\n");
    return -1;
}

/*
 * The same for direct reads, whose completions the kernel queues lazily:
 * a bound ring wakes its owner for them only while it waits in
 * io_uring_enter, not a host asleep in poll(2) on the ring fd (a
 * poll-driven completion, like the pipe read above, does wake it).
 */
static void test_get_fd_host_asleep_on_direct_reads(void **state)
{
    static char buf[4096] __attribute__((aligned(4096)));
    char path[256];
    aiol_loop *loop = ur_loop_new();
    int fd = direct_file_open(path, sizeof(path));
    int lfd, tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
    ur_req rd[8];

    (void)state;
    if (fd < 0) {
        aiol_loop_free(loop);
        skip();
    }
    ur_req_init(&rd[0], loop, UR_READ, fd, buf, sizeof(buf), 0);
    ur_submit(&rd[0]);
    (void)aiol_loop_poll(loop, false); /* in the kernel now, or done */
    lfd = aiol_loop_fd_get(loop);
    assert_true(lfd >= 0);
    assert_true(tfd >= 0);
    for (int i = 0; i < 8; i++) {
        if (i > 0) {
            ur_req_init(&rd[i], loop, UR_READ, fd, buf, sizeof(buf), 0);
            ur_submit(&rd[i]);
        }
        while (rd[i].ndone == 0) {
            aiol_loop_prepare(loop); /* submits the read */
            host_sleep(lfd, tfd);
            aiol_loop_check(loop);
            aiol_loop_dispatch(loop);
        }
        assert_int_equal(rd[i].res, (int)sizeof(buf));
    }
    aiol_loop_free(loop);
    close(tfd);
    close(fd);
    unlink(path);
}

typedef struct resub {
    aiol_loop *loop;
    int ndone, resubmit_ret;
} resub;

static void nop_prep(struct io_uring_sqe *sqe, void *opaque)
{
    (void)opaque;
    io_uring_prep_nop(sqe);
}

/* Resubmits itself once, from whatever poll (or free) ran it. */
static void resub_done(void *opaque, int res, uint32_t flags)
{
    resub *r = opaque;

    (void)res;
    (void)flags;
    if (r->ndone++ == 0) {
        r->resubmit_ret = aiol_uring_submit(r->loop, nop_prep, resub_done, r,
                                            NULL);
    }
}

/*
 * A completion callback that aiol_loop_free() runs and that submits again
 * is refused (-ESHUTDOWN) instead of being accepted and never completing.
 */
static void test_resubmit_during_free(void **state)
{
    aiol_loop *loop = ur_loop_new();
    resub r = { .loop = loop };

    (void)state;
    assert_int_equal(aiol_uring_submit(loop, nop_prep, resub_done, &r, NULL), 0);
    aiol_loop_free(loop);
    assert_int_equal(r.ndone, 1);
    assert_int_equal(r.resubmit_ret, -ESHUTDOWN);
}

/* ------------------------------------------- looks of a wakeup-only loop */

/*
 * A poll that does not block makes no look while every handler is a
 * wakeup fd (fd.h, AIOL_FD_NO_PROGRESS), on io_uring too, unless the
 * monitor owes one: a request whose completion may be due, or the cancel
 * of a removed handler's poll, which holds the file its caller closed.
 */
static void test_wakeup_only_look(void **state)
{
    aiol_loop *loop = ur_loop_new();
    const aiol_fd_ops quiet = { .read = th_cb_read,
                                .flags = AIOL_FD_NO_PROGRESS };
    th h, other;
    ur_req nop;
    lw_watchdog wd;
    int efd = tu_eventfd(), p[2];

    (void)state;
    lw_watchdog_arm(&wd, loop, WATCHDOG_NS);
    th_init(&h, loop, efd);
    h.drain = true;
    assert_int_equal(aiol_fd_set_ops(loop, efd, &quiet, &h), 0);
    aiol_loop_poll(loop, false); /* (arms it) */

    /* nothing owed: the signalled wakeup fd waits for a blocking poll */
    tu_eventfd_signal(efd);
    assert_false(aiol_loop_poll(loop, false));
    assert_int_equal(h.reads, 0);
    assert_false(aiol_loop_poll(loop, true));
    assert_int_equal(h.reads, 1);

    /* a request in flight: the look completes it (and sees the fd) */
    ur_req_init(&nop, loop, UR_NOP, -1, NULL, 0, 0);
    ur_submit(&nop);
    tu_eventfd_signal(efd);
    for (int i = 0; i < 1000 && nop.ndone == 0; i++) {
        aiol_loop_poll(loop, false);
    }
    assert_int_equal(nop.ndone, 1);
    assert_int_equal(h.reads, 2);

    /* a removed handler's poll: the look cancels it and frees the pipe */
    assert_int_equal(pipe(p), 0);
    th_init(&other, loop, p[0]);
    assert_int_equal(aiol_fd_set(loop, p[0], th_cb_read, NULL, NULL, &other),
                     0);
    aiol_loop_poll(loop, false); /* (arms it) */
    assert_int_equal(aiol_fd_remove(loop, p[0]), 0);
    close(p[0]);
    signal(SIGPIPE, SIG_IGN);
    aiol_loop_poll(loop, false); /* submits the cancel */
    aiol_loop_poll(loop, false); /* (runs what the cancel left) */
    assert_int_equal(write(p[1], "x", 1), -1);
    assert_int_equal(errno, EPIPE);
    close(p[1]);

    th_remove(&h);
    lw_watchdog_free(&wd);
    aiol_loop_free(loop);
}

/* ------------------------------------ AIOL_LOOP_COMPLETIONS_FIRST order */

/* When each callback ran, in ur_seq's order (1-based; 0: not yet). */
static int order_bh, order_fd;

static void order_bh_cb(void *opaque)
{
    (void)opaque;
    order_bh = ++ur_seq;
}

static void order_fd_cb(void *opaque)
{
    tu_eventfd_drain(*(int *)opaque);
    order_fd = ++ur_seq;
}

/*
 * One iteration with a completion in the ring, a bottom half scheduled
 * and an fd ready: the order the three run in, as "c" (completion), "b"
 * and "f", on a loop made with @p flags.
 */
static void three_in_one(unsigned flags, char out[4])
{
    aiol_loop *loop;
    aiol_bh *bh;
    ur_req nop;
    int efd = tu_eventfd();

    assert_int_equal(aiol_loop_new_flags(&loop, "io_uring", flags), 0);
    assert_int_equal(aiol_bh_new(loop, order_bh_cb, NULL, &bh), 0);
    assert_int_equal(aiol_fd_set(loop, efd, order_fd_cb, NULL, NULL, &efd),
                     0);
    aiol_loop_poll(loop, false); /* (arms the fd) */
    ur_seq = order_bh = order_fd = 0;
    ur_req_init(&nop, loop, UR_NOP, -1, NULL, 0, 0);
    ur_submit(&nop);
    assert_true(aiol_uring_flush(loop) >= 1); /* (done by the kernel now) */
    aiol_bh_schedule(bh);
    tu_eventfd_signal(efd);
    assert_true(aiol_loop_poll(loop, true));
    assert_int_equal(nop.ndone, 1);
    assert_true(order_bh > 0 && order_fd > 0);
    for (int i = 1; i <= 3; i++) {
        out[i - 1] = nop.seq == i ? 'c' : order_bh == i ? 'b' : 'f';
    }
    out[3] = '\0';
    assert_int_equal(aiol_fd_remove(loop, efd), 0);
    close(efd);
    aiol_bh_free(bh);
    aiol_loop_free(loop);
}

static void test_completions_first(void **state)
{
    char order[4];

    (void)state;
    three_in_one(0, order);
    assert_string_equal(order, "bfc");
    three_in_one(AIOL_LOOP_COMPLETIONS_FIRST, order);
    assert_string_equal(order, "cbf");
    /* (a flag the epoll monitor accepts, and ignores: it has no requests) */
    aiol_loop *loop;
    assert_int_equal(aiol_loop_new_flags(&loop, "epoll",
                                         AIOL_LOOP_COMPLETIONS_FIRST), 0);
    assert_false(aiol_loop_poll(loop, false));
    aiol_loop_free(loop);
}

#define T(f) cmocka_unit_test_setup(f, ur_setup)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_read_write_fsync),
        T(test_cancel),
        T(test_nested),
        T(test_free_in_flight),
        T(test_not_uring),
        T(test_drain),
        T(test_flush),
        T(test_remove_in_flight),
        T(test_remove_in_flight_repeated),
        T(test_level_triggered),
        T(test_embed_direct_and_requests),
        T(test_get_fd_with_requests_in_flight),
        T(test_get_fd_host_asleep_when_a_request_completes),
        T(test_get_fd_host_asleep_on_direct_reads),
        T(test_resubmit_during_free),
        T(test_wakeup_only_look),
        T(test_completions_first),
    };
    return UR_RUN_GROUP("uring", tests);
}
