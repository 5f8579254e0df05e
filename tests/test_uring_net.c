/* SPDX-License-Identifier: MIT */
/*
 * test_uring_net.c - completion-based socket I/O on the loop's ring:
 * buffer groups, multishot receives and whole sends (aioloop/uring.h).
 *
 * The streams are AF_UNIX socketpairs.  A receive's chunks are checked
 * for order and size against what was written; its final callback must
 * come exactly once, with 0 at end of stream, -ECANCELED after a cancel
 * or at aiol_loop_free(), or the socket's error.  Buffer exhaustion is
 * forced with groups of a few tiny buffers: more data is written than
 * they hold before the loop runs, so the kernel ends the multishot with
 * -ENOBUFS and the loop must start it again, losing nothing.
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "aioloop/aioloop.h"
#include "aioloop/uring.h"
#include "loopwatch.h"
#include "testutil.h"
#include "uringreq.h"

/* What a receive got. */
typedef struct sink {
    unsigned char *buf;
    size_t cap, len;
    int chunks;
    size_t max_chunk;
    int finals;
    int final_res;
    const void *final_data;
    aiol_uring_recv *recv;
    bool cancel_in_cb;   /* cancel from the first chunk's callback */
} sink;

static void sink_cb(void *opaque, int res, const void *data)
{
    sink *k = opaque;

    if (res > 0) {
        assert_int_equal(k->finals, 0); /* nothing after the final */
        assert_non_null(data);
        assert_true(k->len + (size_t)res <= k->cap);
        memcpy(k->buf + k->len, data, (size_t)res);
        k->len += (size_t)res;
        k->chunks++;
        if ((size_t)res > k->max_chunk) {
            k->max_chunk = (size_t)res;
        }
        if (k->cancel_in_cb) {
            k->cancel_in_cb = false;
            assert_int_equal(aiol_uring_recv_cancel(k->recv), 0);
        }
        return;
    }
    k->finals++;
    k->final_res = res;
    k->final_data = data;
}

static void sink_init(sink *k, size_t cap)
{
    memset(k, 0, sizeof(*k));
    k->buf = malloc(cap);
    assert_non_null(k->buf);
    k->cap = cap;
}

static void pattern(unsigned char *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++) {
        p[i] = (unsigned char)(i * 31 + seed);
    }
}

static void write_all(int fd, const unsigned char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);

        assert_true(w > 0);
        p += w;
        n -= (size_t)w;
    }
}

/* Polls until @p done says so, with a watchdog against a missed wakeup. */
static void poll_until(aiol_loop *loop, bool (*done)(void *), void *arg)
{
    lw_watchdog wd;

    lw_watchdog_arm(&wd, loop, UR_WATCHDOG_NS);
    while (!done(arg) && wd.fired == 0) {
        aiol_loop_poll(loop, true);
    }
    assert_int_equal(lw_watchdog_free(&wd), 0);
}

static size_t want_len;
static bool got_want(void *arg)
{
    return ((sink *)arg)->len >= want_len;
}

static bool got_final(void *arg)
{
    return ((sink *)arg)->finals > 0;
}

static void pair(int sv[2])
{
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv),
                     0);
}

/* 4 buffers of 16 bytes, 1000 bytes waiting: -ENOBUFS, then all of it. */
static void test_recv_survives_buffer_exhaustion(void **state)
{
    aiol_loop *loop = ur_loop_new();
    unsigned char out[1000];
    aiol_uring_bufs *bufs;
    int sv[2];
    sink k;

    (void)state;
    pair(sv);
    sink_init(&k, sizeof(out));
    pattern(out, sizeof(out), 7);
    assert_int_equal(aiol_uring_bufs_new(loop, 4, 16, &bufs), 0);
    write_all(sv[1], out, sizeof(out));
    assert_int_equal(aiol_uring_recv_submit(loop, sv[0], bufs, sink_cb, &k,
                                            &k.recv), 0);
    want_len = sizeof(out);
    poll_until(loop, got_want, &k);
    assert_int_equal(k.len, sizeof(out));
    assert_memory_equal(k.buf, out, sizeof(out));
    assert_true(k.max_chunk <= 16);
    assert_true(k.chunks >= 63);
    assert_int_equal(k.finals, 0); /* -ENOBUFS is not the end */

    /* end of stream: one final callback, 0, no data */
    close(sv[1]);
    poll_until(loop, got_final, &k);
    assert_int_equal(k.final_res, 0);
    assert_null(k.final_data);
    aiol_loop_poll(loop, false);
    assert_int_equal(k.finals, 1);
    assert_int_equal(aiol_uring_pending_get(loop), 0);

    aiol_uring_bufs_free(bufs);
    aiol_loop_free(loop);
    close(sv[0]);
    free(k.buf);
}

/* Two receives on one group; a cancel from a chunk's callback. */
static void test_recv_cancel(void **state)
{
    aiol_loop *loop = ur_loop_new();
    unsigned char out[64];
    aiol_uring_bufs *bufs;
    int a[2], b[2];
    sink ka, kb;

    (void)state;
    pair(a);
    pair(b);
    sink_init(&ka, 4096);
    sink_init(&kb, 4096);
    pattern(out, sizeof(out), 1);
    assert_int_equal(aiol_uring_bufs_new(loop, 8, 64, &bufs), 0);
    assert_int_equal(aiol_uring_recv_submit(loop, a[0], bufs, sink_cb, &ka,
                                            &ka.recv), 0);
    assert_int_equal(aiol_uring_recv_submit(loop, b[0], bufs, sink_cb, &kb,
                                            &kb.recv), 0);

    /* a: cancelled from its first chunk's callback */
    ka.cancel_in_cb = true;
    write_all(a[1], out, sizeof(out));
    poll_until(loop, got_final, &ka);
    assert_int_equal(ka.final_res, -ECANCELED);
    assert_int_equal(ka.len, sizeof(out));
    /* later data on a reaches nobody; b still receives */
    write_all(a[1], out, sizeof(out));
    write_all(b[1], out, sizeof(out));
    want_len = sizeof(out);
    poll_until(loop, got_want, &kb);
    assert_memory_equal(kb.buf, out, sizeof(out));
    assert_int_equal(ka.finals, 1);
    assert_int_equal(ka.len, sizeof(out));

    /* b: cancelled from outside, twice (the second is a no-op) */
    assert_int_equal(aiol_uring_recv_cancel(kb.recv), 0);
    assert_int_equal(aiol_uring_recv_cancel(kb.recv), 0);
    poll_until(loop, got_final, &kb);
    assert_int_equal(kb.final_res, -ECANCELED);
    aiol_loop_poll(loop, false);
    assert_int_equal(kb.finals, 1);

    aiol_uring_bufs_free(bufs); /* no receive uses it any more */
    aiol_loop_free(loop);
    for (int i = 0; i < 2; i++) {
        close(a[i]);
        close(b[i]);
    }
    free(ka.buf);
    free(kb.buf);
}

/* aiol_loop_free() ends a receive (-ECANCELED) and frees its group. */
static void test_recv_ends_at_loop_free(void **state)
{
    aiol_loop *loop = ur_loop_new();
    aiol_uring_bufs *bufs;
    int sv[2];
    sink k;

    (void)state;
    pair(sv);
    sink_init(&k, 16);
    assert_int_equal(aiol_uring_bufs_new(loop, 2, 8, &bufs), 0);
    assert_int_equal(aiol_uring_recv_submit(loop, sv[0], bufs, sink_cb, &k,
                                            NULL), 0);
    aiol_loop_poll(loop, false);
    assert_int_equal(k.finals, 0);
    aiol_loop_free(loop);
    assert_int_equal(k.finals, 1);
    assert_int_equal(k.final_res, -ECANCELED);
    close(sv[0]);
    close(sv[1]);
    free(k.buf);
}

/* The socket's error is the final result: a pipe is not a socket. */
static void test_recv_error_is_final(void **state)
{
    aiol_loop *loop = ur_loop_new();
    aiol_uring_bufs *bufs;
    int p[2];
    sink k;

    (void)state;
    tu_pipe(p);
    sink_init(&k, 16);
    assert_int_equal(aiol_uring_bufs_new(loop, 2, 8, &bufs), 0);
    assert_int_equal(aiol_uring_recv_submit(loop, p[0], bufs, sink_cb, &k,
                                            NULL), 0);
    poll_until(loop, got_final, &k);
    assert_int_equal(k.final_res, -ENOTSOCK);
    aiol_uring_bufs_free(bufs);
    aiol_loop_free(loop);
    close(p[0]);
    close(p[1]);
    free(k.buf);
}

typedef struct sent {
    int ndone, res;
} sent;

static void sent_cb(void *opaque, int res, uint32_t flags)
{
    sent *s = opaque;

    (void)flags;
    s->ndone++;
    s->res = res;
}

typedef struct both {
    sink *k;
    sent *s;
    size_t len;
} both;

static bool sent_and_got(void *arg)
{
    both *b = arg;

    return b->s->ndone > 0 && b->k->len >= b->len;
}

/*
 * 4 MiB through a socket whose buffers hold far less: the send completes
 * once, with everything, however the kernel split it; the receiver on the
 * same loop gets every byte in order.
 */
static void test_send_whole_and_receive(void **state)
{
    enum { LEN = 4 << 20 };
    aiol_loop *loop = ur_loop_new();
    unsigned char *out = malloc(LEN);
    aiol_uring_bufs *bufs;
    int sv[2], small = 16384;
    sent s = { 0, 0 };
    sink k;
    both b = { &k, &s, LEN };

    (void)state;
    assert_non_null(out);
    pair(sv);
    assert_int_equal(setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &small,
                                sizeof(small)), 0);
    sink_init(&k, LEN);
    pattern(out, LEN, 3);
    assert_int_equal(aiol_uring_bufs_new(loop, 16, 4096, &bufs), 0);
    assert_int_equal(aiol_uring_recv_submit(loop, sv[0], bufs, sink_cb, &k,
                                            &k.recv), 0);
    assert_int_equal(aiol_uring_send_submit(loop, sv[1], out, LEN, sent_cb,
                                            &s), 0);
    poll_until(loop, sent_and_got, &b);
    assert_int_equal(s.ndone, 1);
    assert_int_equal(s.res, LEN);
    assert_int_equal(k.len, (size_t)LEN);
    assert_memory_equal(k.buf, out, LEN);

    assert_int_equal(aiol_uring_recv_cancel(k.recv), 0);
    poll_until(loop, got_final, &k);
    aiol_uring_bufs_free(bufs);

    /* the peer gone: -EPIPE, no SIGPIPE */
    close(sv[0]);
    s.ndone = 0;
    assert_int_equal(aiol_uring_send_submit(loop, sv[1], out, 100, sent_cb,
                                            &s), 0);
    while (s.ndone == 0) {
        aiol_loop_poll(loop, true);
    }
    assert_int_equal(s.res, -EPIPE);
    aiol_loop_free(loop);
    close(sv[1]);
    free(out);
    free(k.buf);
}

static void *poll_once(void *arg)
{
    aiol_loop_poll(arg, false);
    return NULL;
}

/*
 * Another thread polls: the ring is rebuilt shared, and the group moves
 * with it (registered on the new ring, every buffer back on its ring).
 */
static void test_group_moves_with_rebuilt_ring(void **state)
{
    aiol_loop *loop = ur_loop_new();
    unsigned char out[200];
    aiol_uring_bufs *bufs;
    pthread_t t;
    int sv[2];
    sink k;

    (void)state;
    pair(sv);
    sink_init(&k, sizeof(out));
    pattern(out, sizeof(out), 9);
    assert_int_equal(aiol_uring_bufs_new(loop, 4, 32, &bufs), 0);
    aiol_loop_poll(loop, false); /* bound to this thread */
    assert_int_equal(pthread_create(&t, NULL, poll_once, loop), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    aiol_loop_owner_set(loop); /* (a confined loop is back with us) */

    write_all(sv[1], out, sizeof(out));
    assert_int_equal(aiol_uring_recv_submit(loop, sv[0], bufs, sink_cb, &k,
                                            &k.recv), 0);
    want_len = sizeof(out);
    poll_until(loop, got_want, &k);
    assert_memory_equal(k.buf, out, sizeof(out));
    assert_int_equal(aiol_uring_recv_cancel(k.recv), 0);
    poll_until(loop, got_final, &k);
    aiol_uring_bufs_free(bufs);
    aiol_loop_free(loop);
    close(sv[0]);
    close(sv[1]);
    free(k.buf);
}

static void free_group_in_use(void *arg)
{
    aiol_loop *loop = ur_loop_new();
    aiol_uring_bufs *bufs;
    int *sv = arg;
    sink k;

    sink_init(&k, 16);
    if (aiol_uring_bufs_new(loop, 2, 8, &bufs) != 0 ||
        aiol_uring_recv_submit(loop, sv[0], bufs, sink_cb, &k, NULL) != 0) {
        exit(3);
    }
    aiol_uring_bufs_free(bufs); /* aborts */
    exit(0);
}

/* Misuse and refusals. */
static void test_misuse_and_refusals(void **state)
{
    aiol_loop *loop = ur_loop_new(), *ep;
    aiol_uring_bufs *bufs = NULL;
    char err[512];
    int sv[2], st;

    (void)state;
    assert_int_equal(aiol_uring_bufs_new(loop, 3, 16, &bufs), -EINVAL);
    assert_int_equal(aiol_uring_bufs_new(loop, 0, 16, &bufs), -EINVAL);
    assert_int_equal(aiol_uring_bufs_new(loop, 65536, 16, &bufs), -EINVAL);
    assert_int_equal(aiol_uring_bufs_new(loop, 4, 0, &bufs), -EINVAL);
    assert_null(bufs);
    aiol_uring_bufs_free(NULL);
    aiol_loop_free(loop);

    assert_int_equal(aiol_loop_new(&ep, "epoll"), 0);
    assert_int_equal(aiol_uring_bufs_new(ep, 4, 16, &bufs), -ENOTSUP);
    pair(sv);
    assert_int_equal(aiol_uring_send_submit(ep, sv[1], "x", 1, sent_cb, NULL),
                     -ENOTSUP);
    aiol_loop_free(ep);

    st = tu_run_child(free_group_in_use, sv, err, sizeof(err));
    assert_true(tu_aborted_with(st, err, "a buffer group freed while"));
    close(sv[0]);
    close(sv[1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_recv_survives_buffer_exhaustion),
        cmocka_unit_test(test_recv_cancel),
        cmocka_unit_test(test_recv_ends_at_loop_free),
        cmocka_unit_test(test_recv_error_is_final),
        cmocka_unit_test(test_send_whole_and_receive),
        cmocka_unit_test(test_group_moves_with_rebuilt_ring),
        cmocka_unit_test(test_misuse_and_refusals),
    };

    return cmocka_run_group_tests(tests, ur_setup, NULL);
}
