/* SPDX-License-Identifier: MIT */
/*
 * test_pollmode.c - busy polling against a virtqueue-like peer, run once
 * per fd monitor.
 *
 * A handler's poll_begin may turn off the notifications that would wake
 * the loop (QEMU's virtio host notifier: virtio_queue_set_notification(vq,
 * 0)), and poll_end turns them back on.  A peer that queues work while the
 * handler is busy-polled therefore does not kick its eventfd.  If the loop
 * then sleeps without calling poll_end, nobody wakes it: a guest hangs.
 * The rule these tests check: no wait that may block (a blocking poll's,
 * or a host loop's after aiol_loop_prepare()) starts while a handler is
 * between poll_begin and poll_end, and after poll_end the handler is
 * polled once more before sleeping.
 *
 * The peer runs on its own thread, as a guest's vCPU does; it gives up on
 * a request after 5 s, which is how a hang shows up here (as a lost
 * request, not as the suite's timeout).
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
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "aioloop/aioloop.h"
#include "testutil.h"
#include "loopwatch.h"

/* A virtqueue: the peer adds to avail, the loop serves up to it. */
typedef struct vq {
    aiol_loop *loop;
    int kick;                 /* eventfd the peer writes while notify_on */
    atomic_bool notify_on;    /* off between poll_begin and poll_end */
    atomic_int avail;         /* requests queued; peer writes */
    int used;                 /* requests served; polling thread */
    int begins, ends;         /* polling thread */
    pthread_mutex_t lock;     /* protects used_pub, and cond */
    pthread_cond_t cond;
    int used_pub;             /* used, as the peer sees it; lock */
    atomic_bool done;         /* the peer finished or gave up */
    int lost;                 /* first request never served; 0: none */
    int requests;             /* how many the peer queues */
} vq;

/*
 * seq_cst on both sides: the peer's avail increment then notify_on load
 * pairs with poll_end's notify_on store then the poll's avail load
 * (virtio's "enable notification, then check the ring again").
 */
static bool vq_poll(void *opaque)
{
    vq *v = opaque;

    return atomic_load(&v->avail) != v->used;
}

static void vq_serve(void *opaque)
{
    vq *v = opaque;

    v->used = atomic_load(&v->avail);
    pthread_mutex_lock(&v->lock);
    v->used_pub = v->used;
    pthread_cond_broadcast(&v->cond);
    pthread_mutex_unlock(&v->lock);
}

static void vq_kicked(void *opaque)
{
    vq *v = opaque;

    tu_eventfd_drain(v->kick);
    vq_serve(v);
}

static void vq_begin(void *opaque)
{
    vq *v = opaque;

    v->begins++;
    atomic_store(&v->notify_on, false);
}

static void vq_end(void *opaque)
{
    vq *v = opaque;

    v->ends++;
    atomic_store(&v->notify_on, true);
}

static void vq_init(vq *v, aiol_loop *loop)
{
    aiol_fd_ops ops = {
        .read = vq_kicked,
        .poll = vq_poll,
        .poll_ready = vq_serve,
        .poll_begin = vq_begin,
        .poll_end = vq_end,
    };

    memset(v, 0, sizeof(*v));
    v->loop = loop;
    v->kick = tu_eventfd();
    atomic_init(&v->notify_on, true);
    atomic_init(&v->avail, 0);
    atomic_init(&v->done, false);
    pthread_mutex_init(&v->lock, NULL);
    pthread_cond_init(&v->cond, NULL);
    assert_int_equal(aiol_fd_set_ops(loop, v->kick, &ops, v), 0);
}

static void vq_fini(vq *v)
{
    assert_int_equal(aiol_fd_remove(v->loop, v->kick), 0);
    close(v->kick);
    pthread_cond_destroy(&v->cond);
    pthread_mutex_destroy(&v->lock);
}

/* The peer queues one request, kicking only if notifications are on. */
static void vq_submit(vq *v)
{
    atomic_fetch_add(&v->avail, 1);
    if (atomic_load(&v->notify_on)) {
        tu_eventfd_signal(v->kick);
    }
}

/* Peer thread: waits up to 5 s for request @n to be served. */
static bool vq_wait_served(vq *v, int n)
{
    struct timespec ts;
    bool ok = true;

    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += 5;
    pthread_mutex_lock(&v->lock);
    while (v->used_pub < n && ok) {
        ok = pthread_cond_timedwait(&v->cond, &v->lock, &ts) != ETIMEDOUT ||
             v->used_pub >= n;
    }
    pthread_mutex_unlock(&v->lock);
    return ok;
}

/*
 * Pauses between requests: some shorter than the busy-poll window, some
 * longer than the window but within max (the window grows, then the loop
 * sleeps after polling), some longer than max (the window resets).
 */
static const int64_t pauses_ns[] = { 0, LW_US(20), LW_US(300), LW_MS(3) };

static void *peer_main(void *arg)
{
    vq *v = arg;

    for (int i = 1; i <= v->requests; i++) {
        vq_submit(v);
        if (!vq_wait_served(v, i)) {
            v->lost = i;
            break;
        }
        lw_sleep_ns(pauses_ns[i % 4]);
    }
    atomic_store(&v->done, true);
    aiol_loop_notify(v->loop);
    return NULL;
}

static void test_pollmode_peer_never_stranded(void **state)
{
    aiol_loop *loop = tu_loop_new();
    pthread_t peer;
    vq v;

    (void)state;
    vq_init(&v, loop);
    v.requests = 200;
    assert_int_equal(aiol_loop_poll_params_set(loop, LW_MS(1), 0, 0), 0);
    assert_int_equal(pthread_create(&peer, NULL, peer_main, &v), 0);
    while (!atomic_load(&v.done)) {
        aiol_loop_poll(loop, true);
    }
    assert_int_equal(pthread_join(peer, NULL), 0);
    if (v.lost != 0) {
        fail_msg("request %d never served: the loop slept with the handler "
                 "busy-polled (%d poll_begin, %d poll_end)", v.lost, v.begins,
                 v.ends);
    }
    assert_int_equal(v.used, v.requests);
    assert_true(v.begins > 0);           /* busy polling did take part */
    assert_true(v.ends == v.begins || v.ends == v.begins - 1);
    vq_fini(&v);
    aiol_loop_free(loop);
}

static void cb_flag(void *opaque)
{
    (*(int *)opaque)++;
}

/* Opens the busy-poll window and gets @v busy-polled (poll_begin). */
static void vq_start_polling(vq *v)
{
    aiol_clock *c = aiol_loop_clock_get(v->loop);
    aiol_timer *t;
    int fired;

    assert_int_equal(aiol_timer_new(c, cb_flag, &fired, &t), 0);
    for (int i = 0; i < 20 && atomic_load(&v->notify_on); i++) {
        fired = 0;
        assert_int_equal(aiol_timer_mod(t, aiol_clock_time_get(c) + LW_US(100)),
                         0);
        while (!fired) {
            aiol_loop_poll(v->loop, true);
        }
        aiol_loop_poll(v->loop, false);  /* one round while the window is open */
    }
    aiol_timer_free(t);
    assert_false(atomic_load(&v->notify_on));
}

/*
 * A host loop sleeps after aiol_loop_prepare(): prepare ends busy polling
 * (poll_end), and work found by the poll after it means no sleep, and the
 * next dispatch serves it.
 */
static void test_pollmode_prepare_ends_polling(void **state)
{
    aiol_loop *loop = tu_loop_new();
    int begins;
    vq v;

    (void)state;
    vq_init(&v, loop);
    assert_int_equal(aiol_loop_poll_params_set(loop, LW_MS(50), 0, 0), 0);

    /* nothing queued: prepare turns notifications on, the host may sleep */
    vq_start_polling(&v);
    assert_int_not_equal(aiol_loop_prepare(loop), 0);
    assert_true(atomic_load(&v.notify_on));
    assert_int_equal(v.ends, v.begins);
    aiol_loop_check(loop);

    /* queued while polled (no kick): prepare sees it, dispatch serves it */
    vq_start_polling(&v);
    begins = v.begins;
    vq_submit(&v);
    assert_int_equal(aiol_loop_prepare(loop), 0);
    assert_true(atomic_load(&v.notify_on));
    assert_true(aiol_loop_check(loop));
    assert_true(aiol_loop_dispatch(loop));
    assert_int_equal(v.used, 1);
    assert_true(v.begins >= begins);

    /* and the host may sleep again afterwards */
    assert_int_not_equal(aiol_loop_prepare(loop), 0);
    assert_true(atomic_load(&v.notify_on));
    aiol_loop_check(loop);
    vq_fini(&v);
    aiol_loop_free(loop);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pollmode_peer_never_stranded),
        cmocka_unit_test(test_pollmode_prepare_ends_polling),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
