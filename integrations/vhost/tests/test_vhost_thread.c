/* SPDX-License-Identifier: MIT */
/*
 * test_vhost_thread.c - the backend on its own thread: the device's loop
 * polls (blocking) in a backend thread while the test frontend drives it
 * from the main thread, as QEMU does from its own process.  Requests on
 * two queues through direct and indirect chains, with call eventfds, then
 * frontends reconnecting.  The device's state is read only after the
 * backend thread was joined (TSan checks the rest).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "fixture.h"

static atomic_bool stop;

static void *backend(void *opaque)
{
    fx *t = opaque;

    while (!atomic_load(&stop)) {
        aiol_loop_poll(t->loop, true);
    }
    return NULL;
}

/* The frontend's pump: the backend runs by itself; just let it. */
static void yield_pump(void *opaque)
{
    (void)opaque;
    usleep(20);
}

static int session(fx *t)
{
    int r;

    if ((r = vfe_connect(&t->f, t->path, yield_pump, t)) < 0 ||
        (r = vfe_negotiate(&t->f, FX_NO_EVENT_IDX, FX_ALL_PROTOCOL)) < 0 ||
        (r = vfe_mem_create(&t->f, FX_RAM, 2)) < 0 ||
        (r = vfe_set_mem_table(&t->f, true)) < 0 ||
        (r = vfe_vq_setup(&t->f, 0, FX_RING, false)) < 0 ||
        (r = vfe_vq_setup(&t->f, 1, 8, false)) < 0) {
        return r;
    }
    return 0;
}

/* Waits (blocking) for a call on queue @q. */
static void wait_call(fx *t, unsigned q)
{
    struct pollfd p = { .fd = t->f.vq[q].call, .events = POLLIN };

    assert_int_equal(poll(&p, 1, 5000), 1);
    assert_true(vfe_vq_calls(&t->f, q) >= 1);
}

static void test_backend_thread(void **state)
{
    static fx t;
    pthread_t th;
    aiol_vhost_stats st;
    int n = 0;

    (void)state;
    assert_int_equal(fx_init(&t), 0);
    atomic_store(&stop, false);
    assert_int_equal(pthread_create(&th, NULL, backend, &t), 0);
    for (int s = 0; s < 4; s++) {
        assert_int_equal(session(&t), 0);
        for (int i = 0; i < 40; i++) {
            unsigned q = (unsigned)i % 2;

            assert_int_equal(fx_request(&t, q, i % 3 == 0), 0);
            wait_call(&t, q);
            n++;
        }
        if (s < 3) {
            vfe_close(&t.f);
        }
    }
    atomic_store(&stop, true);
    aiol_loop_notify(t.loop);
    assert_int_equal(pthread_join(th, NULL), 0);

    aiol_vhost_dev_stats_get(t.dev, &st);
    assert_int_equal(t.toy.handled, n);
    assert_int_equal(st.accepts, 4);
    assert_int_equal(st.malformed, 0);
    assert_true(aiol_vhost_dev_is_connected(t.dev));
    vfe_close(&t.f);
    t.f.pump = fx_pump;
    vfe_pump(&t.f, 10);
    assert_false(aiol_vhost_dev_is_connected(t.dev));
    fx_fini(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_backend_thread),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
