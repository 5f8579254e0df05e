/* SPDX-License-Identifier: MIT */
/*
 * test_vhost_faults.c - allocation-failure sweep (tests/fault.h).
 *
 * One representative session uses every allocating path of the library:
 * a device created and listening, a frontend accepted (its fd handler),
 * negotiation with REPLY_ACK, a 2-region mem table, rings set up (kick fd
 * handlers) on two queues, one with a NOFD call fd, requests through
 * direct and indirect chains, a ring stopped, a disconnect.  The sweep
 * runs it again and again failing the library's 1st allocation, then its
 * 2nd, ... until a run makes fewer allocations than the armed number.
 * In every run a failure surfaces as an error: -ENOMEM from
 * aiol_vhost_dev_new()/_listen() (retried), or a dropped connection or
 * failure ack, after which the frontend starts over and the session
 * completes; nothing crashes or hangs, and teardown leaves no fd open and
 * (LeakSanitizer in the ASan build) no memory.  The blk device's sweeps
 * run the same way, one of them with a queue moved to an iothread.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <fcntl.h>

#include <linux/virtio_blk.h>

#include "aioloop/vhost-blk.h"
#include "fault.h"
#include "vblk.h"
#include "fixture.h"

/* One session; 0 when everything in it worked, else -errno. */
static int session(fx *t, void *arg)
{
    aiol_vhost_vq_stats st;
    int r;

    (void)arg;
    if ((r = fx_session(t, FX_ALL_FEATURES, FX_ALL_PROTOCOL)) < 0 ||
        (r = vfe_vq_setup(&t->f, 2, 8, true)) < 0 ||
        (r = fx_request(t, 0, false)) < 0 ||
        (r = fx_request(t, 0, true)) < 0 ||
        (r = fx_request(t, 2, true)) < 0) {
        return r;
    }
    aiol_vhost_vq_stats_get(aiol_vhost_dev_vq_get(t->dev, 2), &st);
    if (st.skipped == 0) {
        return -EBADMSG;
    }
    /* (packed: a direct request takes 3 descriptors, an indirect one 1) */
    if ((r = vfe_vq_stop(&t->f, 0)) !=
        (int)(vfe_ring_units(&t->f, 1, 3) + 1)) {
        return r < 0 ? r : -EBADMSG;
    }
    return 0;
}

typedef int session_fn(fx *t, void *arg);

/*
 * Runs @fn until a session completes: a failure drops the connection (or
 * refuses a step), and the next frontend must get a full session.  Ends
 * it, disarms the fault and returns how many allocations failed.
 */
static long sessions(fx *t, session_fn *fn, void *arg, int *tries,
                     long *retried)
{
    long failed;

    while (fn(t, arg) < 0) {
        vfe_close(&t->f);
        vfe_pump(&t->f, 10);
        assert_false(aiol_vhost_dev_is_connected(t->dev));
        (*retried)++;
        assert_true(++*tries < 3);
    }
    vfe_close(&t->f);
    vfe_pump(&t->f, 10);
    failed = tf_failed(TF_ALLOC);
    tf_disarm();
    return failed;
}

static void test_alloc_sweep(void **state)
{
    long k, total_failed = 0, retried = 0;
    int fds0 = fx_nfds_open();

    (void)state;
    for (k = 1; k < 5000; k++) {
        fx t;
        long failed;
        int r, tries = 0;

        memset(&t, 0, sizeof(t));
        t.f.sock = -1;
        snprintf(t.dir, sizeof(t.dir), "/tmp/aiol-vhost-XXXXXX");
        assert_non_null(mkdtemp(t.dir));
        snprintf(t.path, sizeof(t.path), "%s/sock", t.dir);
        assert_int_equal(aiol_loop_new(&t.loop, NULL), 0);
        memcpy(t.toy.config, "TOYCONF-abcdefgh", 16);

        tf_fail_at(TF_ALLOC, k, ENOMEM);
        while ((r = aiol_vhost_dev_new(t.loop, &toydev_ops, &t.toy,
                                       FX_QUEUES, &t.dev)) < 0) {
            assert_int_equal(r, -ENOMEM);
            assert_true(++tries < 3);
        }
        t.toy.dev = t.dev;
        while ((r = aiol_vhost_dev_listen(t.dev, t.path)) < 0) {
            assert_int_equal(r, -ENOMEM);
            assert_true(++tries < 3);
        }
        failed = sessions(&t, session, NULL, &tries, &retried);
        total_failed += failed;
        fx_fini(&t);
        assert_int_equal(fx_nfds_open(), fds0);
        if (failed == 0) {
            break; /* the session made fewer than k allocations */
        }
    }
    assert_true(k < 5000);
    assert_true(k > 3); /* the sweep covered the library's allocations */
    print_message("alloc sweep: %ld allocation points, %ld failed sessions "
                  "retried\n", k - 1, retried);
    assert_int_equal(total_failed, k - 1);
}

/* ------------------------------------------------ the blk device */

#define BLK_FLIGHT 4 /* 4 descriptors each: a 16-entry ring */

/* Chains queue @q of the session's device has popped. */
static uint64_t popped(fx *t, unsigned q)
{
    aiol_vhost_vq_stats st;

    aiol_vhost_vq_stats_get(aiol_vhost_dev_vq_get(t->dev, q), &st);
    return st.popped;
}

/* One blk session: connect, set up queue 0, read and write, writes left
 * in flight across GET_VRING_BASE.  0, or -errno where the library
 * refused a step (the frontend then starts over). */
static int blk_session(fx *t, void *arg)
{
    int img = *(int *)arg;
    uint8_t w[BLK_FLIGHT][512], got[512];
    vblk_pending p[BLK_FLIGHT];
    uint32_t used;
    int r;

    if ((r = vfe_connect(&t->f, t->path, fx_pump, t)) < 0 ||
        (r = vfe_negotiate(&t->f, FX_ALL_FEATURES, FX_ALL_PROTOCOL)) < 0 ||
        (r = vfe_mem_create(&t->f, FX_RAM, 2)) < 0 ||
        (r = vfe_set_mem_table(&t->f, true)) < 0 ||
        (r = vfe_vq_setup(&t->f, 0, FX_RING, false)) < 0) {
        return r;
    }
    if (vfe_dropped(&t->f)) {
        return -EPIPE; /* a ring message (no ack asked) was refused */
    }
    /* the device absorbs its own allocation failures: no request fails */
    vblk_pattern(w[0], 512, 7);
    assert_int_equal(vblk_req(&t->f, 0, VIRTIO_BLK_T_OUT, 3, w[0], 512, false,
                              1, 16, &used), VIRTIO_BLK_S_OK);
    assert_int_equal(vblk_req(&t->f, 0, VIRTIO_BLK_T_IN, 3, got, 512, true, 1,
                              16, &used), VIRTIO_BLK_S_OK);
    assert_memory_equal(got, w[0], 512);
    for (unsigned i = 0; i < BLK_FLIGHT; i++) {
        vblk_pattern(w[i], 512, 30 + i);
        vblk_add(&t->f, 0, VIRTIO_BLK_T_OUT, 10 + i, w[i], 512, false, 1, 16,
                 &p[i]);
    }
    /*
     * Until the device popped them all: a queue served on an iothread
     * pops them there, and GET_VRING_BASE leaves unpopped ones for the
     * next start, which would not be the in-flight case this checks.
     */
    for (int i = 0; popped(t, 0) < BLK_FLIGHT + 2; i++) {
        assert_true(i < 5000);
        aiol_loop_poll(t->loop, false);
        usleep(i == 0 ? 0 : 1000);
    }
    /* (packed: each request took 4 descriptors) */
    if ((r = vfe_vq_stop(&t->f, 0)) !=
        (int)vfe_ring_units(&t->f, BLK_FLIGHT + 2, 4)) {
        return r < 0 ? r : -EBADMSG;
    }
    for (unsigned i = 0; i < BLK_FLIGHT; i++) {
        assert_int_equal(*p[i].status, VIRTIO_BLK_S_OK);
        assert_int_equal(pread(img, got, 512, (10 + i) * 512), 512);
        assert_memory_equal(got, w[i], 512);
    }
    return 0;
}

/*
 * Moves queue 0 of @dev to @loop, retrying on -ENOMEM; a refused move
 * leaves the queue where it was.
 */
static void queue_move(aiol_vhost_dev *dev, aiol_loop *home, aiol_loop *loop,
                       int *tries)
{
    int r;

    while ((r = aiol_vhost_dev_queue_loop_set(dev, 0, loop)) < 0) {
        assert_int_equal(r, -ENOMEM);
        assert_ptr_equal(aiol_vhost_vq_loop_get(aiol_vhost_dev_vq_get(dev, 0)),
                         home);
        assert_true(++*tries < 3);
    }
    assert_ptr_equal(aiol_vhost_vq_loop_get(aiol_vhost_dev_vq_get(dev, 0)),
                     loop);
}

/*
 * The sweep over the blk device (aioloop/vhost-blk.h) on top of the
 * library: on io_uring a request that finds no memory, or that the ring
 * refuses, runs synchronously instead, so requests never fail; the
 * device's creation fails cleanly with -ENOMEM and is retried.  With
 * @qthread, queue 0 moves to an iothread's loop under the armed fault
 * (aiol_vhost_dev_queue_loop_set(): the blk device's context for that
 * loop, the park slots) and its requests run there.
 */
static void blk_alloc_sweep(bool qthread)
{
    long k, total_failed = 0, retried = 0;
    int fds0 = fx_nfds_open();

    for (k = 1; k < 5000; k++) {
        char img_path[128];
        aiol_vhost_blk *blk = NULL;
        aiol_vhost_blk_opts o = { .num_queues = 2 };
        aiol_iothread *io = NULL;
        fx t;
        long failed;
        int r, img, tries = 0;

        memset(&t, 0, sizeof(t));
        t.f.sock = -1;
        snprintf(t.dir, sizeof(t.dir), "/tmp/aiol-vhost-XXXXXX");
        assert_non_null(mkdtemp(t.dir));
        snprintf(t.path, sizeof(t.path), "%s/sock", t.dir);
        snprintf(img_path, sizeof(img_path), "%s/img", t.dir);
        img = open(img_path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        assert_true(img >= 0 && ftruncate(img, 64 * 512) == 0);
        assert_int_equal(aiol_loop_new(&t.loop, NULL), 0);
        if (qthread) {
            assert_int_equal(aiol_iothread_new(NULL, &io), 0);
        }

        tf_fail_at(TF_ALLOC, k, ENOMEM);
        while ((r = aiol_vhost_blk_new(t.loop, img, &o, &blk)) < 0) {
            assert_int_equal(r, -ENOMEM);
            assert_true(++tries < 3);
        }
        t.dev = aiol_vhost_blk_dev_get(blk);
        if (qthread) {
            queue_move(t.dev, t.loop, aiol_iothread_loop_get(io), &tries);
        }
        while ((r = aiol_vhost_dev_listen(t.dev, t.path)) < 0) {
            assert_int_equal(r, -ENOMEM);
            assert_true(++tries < 3);
        }
        failed = sessions(&t, blk_session, &img, &tries, &retried);
        total_failed += failed;
        aiol_vhost_blk_free(blk);
        aiol_iothread_free(io); /* (after the device: no queue there now) */
        t.dev = NULL;
        close(img);
        unlink(img_path);
        fx_fini(&t);
        assert_int_equal(fx_nfds_open(), fds0);
        if (failed == 0) {
            break;
        }
    }
    assert_true(k < 5000 && k > 3);
    print_message("blk alloc sweep (%s%s): %ld allocation points\n",
                  getenv("AIOLOOP_FDMON") ? getenv("AIOLOOP_FDMON") : "",
                  qthread ? ", queue 0 on an iothread" : "", k - 1);
    assert_int_equal(total_failed, k - 1);
}

static void test_blk_alloc_sweep(void **state)
{
    (void)state;
    blk_alloc_sweep(false);
}

static void test_blk_alloc_sweep_queue_thread(void **state)
{
    (void)state;
    blk_alloc_sweep(true);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_alloc_sweep),
        cmocka_unit_test(test_blk_alloc_sweep),
        cmocka_unit_test(test_blk_alloc_sweep_queue_thread),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
