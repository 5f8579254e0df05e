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
 * (LeakSanitizer in the ASan build) no memory.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fault.h"
#include "vhtest.h"

/* One session; 0 when everything in it worked, else -errno. */
static int session(vt *t)
{
    aiol_vhost_vq_stats st;
    int r;

    if ((r = vt_session(t, VT_ALL_FEATURES, VT_ALL_PROTOCOL)) < 0 ||
        (r = vfe_vq_setup(&t->f, 2, 8, true)) < 0 ||
        (r = vt_request(t, 0, false)) < 0 ||
        (r = vt_request(t, 0, true)) < 0 ||
        (r = vt_request(t, 2, true)) < 0) {
        return r;
    }
    aiol_vhost_vq_get_stats(aiol_vhost_dev_vq(t->dev, 2), &st);
    if (st.skipped == 0) {
        return -EBADMSG;
    }
    if ((r = vfe_vq_stop(&t->f, 0)) != 2) {
        return r < 0 ? r : -EBADMSG;
    }
    return 0;
}

static void test_alloc_sweep(void **state)
{
    long k, total_failed = 0, retried = 0;
    int fds0 = vt_nfds_open();

    (void)state;
    for (k = 1; k < 5000; k++) {
        vt t;
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
                                       VT_QUEUES, &t.dev)) < 0) {
            assert_int_equal(r, -ENOMEM);
            assert_true(++tries < 3);
        }
        t.toy.dev = t.dev;
        while ((r = aiol_vhost_dev_listen(t.dev, t.path)) < 0) {
            assert_int_equal(r, -ENOMEM);
            assert_true(++tries < 3);
        }
        while ((r = session(&t)) < 0) {
            /* The failure dropped the connection (or refused a step);
             * the next frontend must get a full session. */
            vfe_close(&t.f);
            vfe_pump(&t.f, 10);
            assert_false(aiol_vhost_dev_connected(t.dev));
            retried++;
            assert_true(++tries < 3);
        }
        vfe_close(&t.f);
        vfe_pump(&t.f, 10);
        failed = tf_failed(TF_ALLOC);
        tf_disarm();
        total_failed += failed;
        vt_fini(&t);
        assert_int_equal(vt_nfds_open(), fds0);
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_alloc_sweep),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
