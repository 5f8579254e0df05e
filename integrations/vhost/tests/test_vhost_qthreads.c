/* SPDX-License-Identifier: MIT */
/*
 * test_vhost_qthreads.c - a device's queues on other threads' loops
 * (aiol_vhost_dev_queue_loop_set()).
 *
 * The toy device declares AIOL_VHOST_DEV_QUEUE_THREADS (toydev_mt_ops);
 * queues 1 and 2 are served on two aiol_iothreads while queue 0 and the
 * messages stay on the device's loop, which the test frontend pumps.
 * The toy records which thread ran each queue's handler and its
 * queue_stop; the frontend's acquire of a used element orders those
 * records before the test reads them.  Run under TSan in CI, which checks
 * the parking of the queue threads around every message.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "aioloop/bh.h"
#include "aioloop/iothread.h"
#include "fixture.h"

typedef struct qt {
    fx t;
    aiol_iothread *io[2];
} qt;

static int setup(void **state)
{
    static qt q;

    memset(&q, 0, sizeof(q));
    if (fx_init_ops(&q.t, &toydev_mt_ops) < 0 ||
        aiol_iothread_new(NULL, &q.io[0]) < 0 ||
        aiol_iothread_new(NULL, &q.io[1]) < 0) {
        return -1;
    }
    *state = &q;
    return 0;
}

static int teardown(void **state)
{
    qt *q = *state;

    fx_fini(&q->t); /* (the device first: its queues leave the threads) */
    aiol_iothread_free(q->io[0]);
    aiol_iothread_free(q->io[1]);
    return 0;
}

static aiol_loop *io_loop(qt *q, int i)
{
    return aiol_iothread_loop_get(q->io[i]);
}

static void who_am_i(void *opaque)
{
    *(pthread_t *)opaque = pthread_self();
}

/* The thread that polls @loop. */
static pthread_t thread_of(aiol_loop *loop)
{
    pthread_t t;

    assert_int_equal(aiol_bh_schedule_wait(loop, who_am_i, &t), 0);
    return t;
}

/* Queue 1 on io[0], queue 2 on io[1]; a session with queues 0..2. */
static void spread(qt *q)
{
    fx *t = &q->t;

    assert_int_equal(aiol_vhost_dev_queue_loop_set(t->dev, 1, io_loop(q, 0)),
                     0);
    assert_int_equal(aiol_vhost_dev_queue_loop_set(t->dev, 2, io_loop(q, 1)),
                     0);
    assert_ptr_equal(aiol_vhost_vq_loop_get(aiol_vhost_dev_vq_get(t->dev, 1)),
                     io_loop(q, 0));
    assert_int_equal(fx_session(t, FX_ALL_FEATURES, FX_ALL_PROTOCOL), 0);
    assert_int_equal(vfe_vq_setup(&t->f, 1, FX_RING, false), 0);
    assert_int_equal(vfe_vq_setup(&t->f, 2, FX_RING, false), 0);
}

static void test_queues_served_on_their_threads(void **state)
{
    qt *q = *state;
    fx *t = &q->t;
    pthread_t self = pthread_self();

    spread(q);
    for (int i = 0; i < 10; i++) {
        for (unsigned k = 0; k < 3; k++) {
            assert_int_equal(fx_request(t, k, i % 2 == 1), 0);
        }
    }
    assert_true(pthread_equal(__atomic_load_n(&t->toy.thread[0], __ATOMIC_RELAXED), self));
    assert_true(pthread_equal(__atomic_load_n(&t->toy.thread[1], __ATOMIC_RELAXED), thread_of(io_loop(q, 0))));
    assert_true(pthread_equal(__atomic_load_n(&t->toy.thread[2], __ATOMIC_RELAXED), thread_of(io_loop(q, 1))));
    for (unsigned k = 0; k < 3; k++) {
        aiol_vhost_vq_stats st;

        aiol_vhost_vq_stats_get(aiol_vhost_dev_vq_get(t->dev, k), &st);
        assert_int_equal(st.popped, 10);
        assert_int_equal(st.broken, 0);
    }
}

/*
 * What a message does to a queue on another thread runs there: a ring
 * stop (GET_VRING_BASE) calls queue_stop on the queue's thread; a new
 * memory table, the ring set up again and a reconnection leave every
 * queue served where it was.
 */
static void test_messages_reach_queue_threads(void **state)
{
    qt *q = *state;
    fx *t = &q->t;
    pthread_t served;

    spread(q);
    assert_int_equal(fx_request(t, 2, false), 0);
    served = __atomic_load_n(&t->toy.thread[2], __ATOMIC_RELAXED);
    assert_int_equal(vfe_vq_stop(&t->f, 2), (int)vfe_ring_units(&t->f, 1, 3));
    assert_true(pthread_equal(__atomic_load_n(&t->toy.stop_thread[2], __ATOMIC_RELAXED), served));
    assert_false(aiol_vhost_vq_is_running(aiol_vhost_dev_vq_get(t->dev, 2)));
    assert_int_equal(vfe_set_mem_table(&t->f, true), 0);
    assert_int_equal(vfe_vq_setup(&t->f, 2, FX_RING, false), 0);
    for (unsigned k = 0; k < 3; k++) {
        assert_int_equal(fx_request(t, k, true), 0);
    }
    assert_true(pthread_equal(__atomic_load_n(&t->toy.thread[2], __ATOMIC_RELAXED), served));
    fx_assert_serves_next(t); /* (queue 0 there; the others stay put) */
    assert_ptr_equal(aiol_vhost_vq_loop_get(aiol_vhost_dev_vq_get(t->dev, 2)),
                     io_loop(q, 1));
}

/*
 * A queue moves between two of its chains, running: from io[0] to io[1],
 * then back to the device's loop; each move serves its next request on
 * the new thread.  With a chain popped and not pushed it may not move.
 */
static void test_move(void **state)
{
    qt *q = *state;
    fx *t = &q->t;
    uint64_t w = 0;
    vfe_buf b;
    uint32_t id, len;

    spread(q);
    assert_int_equal(fx_request(t, 1, false), 0);
    assert_int_equal(aiol_vhost_dev_queue_loop_set(t->dev, 1, io_loop(q, 1)),
                     0);
    assert_int_equal(fx_request(t, 1, false), 0);
    assert_true(pthread_equal(__atomic_load_n(&t->toy.thread[1], __ATOMIC_RELAXED), thread_of(io_loop(q, 1))));
    /* one chain held in flight on io[1] */
    __atomic_store_n(&t->toy.hold[1], true, __ATOMIC_RELAXED);
    w = vfe_alloc(&t->f, 0, 64, 8);
    b = (vfe_buf){ w, 64, true };
    vfe_vq_add(&t->f, 1, &b, 1, false);
    vfe_vq_kick(&t->f, 1);
    for (int i = 0; i < 2000 &&
         __atomic_load_n(&t->toy.held[1].vq, __ATOMIC_ACQUIRE) == NULL; i++) {
        vfe_pump(&t->f, 1);
        usleep(100);
    }
    assert_int_equal(aiol_vhost_dev_queue_loop_set(t->dev, 1, t->loop),
                     -EBUSY);
    assert_ptr_equal(aiol_vhost_vq_loop_get(aiol_vhost_dev_vq_get(t->dev, 1)),
                     io_loop(q, 1));
    assert_int_equal(aiol_bh_schedule_oneshot(io_loop(q, 1), toydev_release,
                                              &t->toy.held[1]), 0);
    assert_int_equal(vfe_vq_wait_used(&t->f, 1, &id, &len), 0);
    assert_int_equal(len, 0);
    assert_int_equal(aiol_vhost_dev_queue_loop_set(t->dev, 1, t->loop), 0);
    assert_int_equal(fx_request(t, 1, true), 0);
    assert_true(pthread_equal(__atomic_load_n(&t->toy.thread[1], __ATOMIC_RELAXED), pthread_self()));
    assert_int_equal(fx_request(t, 2, true), 0);
}

/* A device that did not declare it keeps its queues on its loop. */
static void test_not_declared(void **state)
{
    fx t;

    (void)state;
    assert_int_equal(fx_init(&t), 0);
    assert_int_equal(aiol_vhost_dev_queue_loop_set(t.dev, 1, t.loop),
                     -ENOTSUP);
    fx_fini(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_queues_served_on_their_threads,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_messages_reach_queue_threads,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_move, setup, teardown),
        cmocka_unit_test(test_not_declared),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
