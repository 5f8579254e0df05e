/* SPDX-License-Identifier: MIT */
/*
 * test_vhost_proto.c - the vhost-user backend with a well-behaved
 * frontend: negotiation, REPLY_ACK, MQ, config, a 2-region mem table,
 * requests through direct and indirect chains, event idx, NO_INTERRUPT,
 * a NOFD call fd, GET_VRING_BASE stopping a ring, disconnect/reconnect.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fixture.h"

#define BIT(n) (1ull << (n))

static int setup(void **state)
{
    static fx t;

    if (fx_init(&t) < 0) {
        return -1;
    }
    *state = &t;
    return 0;
}

static int teardown(void **state)
{
    fx_fini(*state);
    return 0;
}

static void test_negotiate(void **state)
{
    fx *t = *state;
    vfe *f = &t->f;
    uint64_t v;

    assert_int_equal(vfe_connect(f, t->path, fx_pump, t), 0);
    assert_int_equal(vfe_get_u64(f, AIOL__VHOST_GET_FEATURES, &v), 0);
    assert_true(v & BIT(AIOL__VHOST_F_VERSION_1));
    assert_true(v & BIT(AIOL__VHOST_F_RING_INDIRECT_DESC));
    assert_true(v & BIT(AIOL__VHOST_F_RING_EVENT_IDX));
    assert_true(v & BIT(AIOL__VHOST_F_PROTOCOL_FEATURES));
    assert_true(v & BIT(TOYDEV_F_ECHO));
    assert_int_equal(vfe_get_u64(f, AIOL__VHOST_GET_PROTOCOL_FEATURES, &v), 0);
    assert_int_equal(v, BIT(AIOL__VHOST_PROTOCOL_F_MQ) |
                        BIT(AIOL__VHOST_PROTOCOL_F_REPLY_ACK) |
                        BIT(AIOL__VHOST_PROTOCOL_F_CONFIG));
    assert_true(aiol_vhost_dev_is_connected(t->dev));
    vfe_close(f);
    assert_int_equal(vfe_connect(f, t->path, fx_pump, t), 0);
    assert_int_equal(vfe_negotiate(f, BIT(AIOL__VHOST_F_VERSION_1) |
                                   BIT(AIOL__VHOST_F_PROTOCOL_FEATURES),
                                   BIT(AIOL__VHOST_PROTOCOL_F_MQ)), 0);
    vfe_pump(f, 5);
    assert_int_equal(aiol_vhost_dev_features_get(t->dev),
                     BIT(AIOL__VHOST_F_VERSION_1) |
                     BIT(AIOL__VHOST_F_PROTOCOL_FEATURES));
    assert_int_equal(aiol_vhost_dev_protocol_features_get(t->dev),
                     BIT(AIOL__VHOST_PROTOCOL_F_MQ));
    /* MQ: the queue count. */
    assert_int_equal(vfe_get_u64(f, AIOL__VHOST_GET_QUEUE_NUM, &v), 0);
    assert_int_equal(v, FX_QUEUES);
    /* Features that were not offered: refused, and without REPLY_ACK the
     * frontend cannot learn it, so the connection goes. */
    assert_int_equal(vfe_set_u64(f, AIOL__VHOST_SET_FEATURES, BIT(45), false),
                     0);
    assert_true(vfe_dropped(f));
    fx_assert_serves_next(t);
}

static void test_reply_ack(void **state)
{
    fx *t = *state;
    vfe *f = &t->f;
    aiol_vhost_stats st;

    assert_int_equal(fx_session(t, FX_ALL_FEATURES, FX_ALL_PROTOCOL), 0);
    assert_int_equal(vfe_vring_state(f, AIOL__VHOST_SET_VRING_NUM, 1, 64,
                                     true), 0);
    /* A refused request with need_reply: a failure ack, still connected. */
    assert_int_equal(vfe_vring_state(f, AIOL__VHOST_SET_VRING_NUM, 1, 0,
                                     true), -EINVAL);
    /* (a size that is not a power of 2: packed rings only) */
    assert_int_equal(vfe_vring_state(f, AIOL__VHOST_SET_VRING_NUM, 1, 3,
                                     true), vfe_packed(f) ? 0 : -EINVAL);
    assert_int_equal(vfe_vring_state(f, AIOL__VHOST_SET_VRING_NUM, 9, 8,
                                     true), -ERANGE);
    assert_int_equal(vfe_set_u64(f, 99 /* unknown */, 0, true), -ENOSYS);
    assert_int_equal(vfe_set_u64(f, AIOL__VHOST_SET_FEATURES, BIT(45), true),
                     -EINVAL);
    assert_int_equal(vfe_set_mem_table(f, true), 0);
    aiol_vhost_dev_stats_get(t->dev, &st);
    assert_int_equal(st.nacks, vfe_packed(f) ? 4 : 5);
    assert_int_equal(st.drops, 0);
    assert_int_equal(fx_request(t, 0, false), 0);
    /* The same refusal without need_reply drops the connection. */
    assert_int_equal(vfe_vring_state(f, AIOL__VHOST_SET_VRING_NUM, 1, 0,
                                     false), 0);
    assert_true(vfe_dropped(f));
    fx_assert_serves_next(t);
}

static void test_config(void **state)
{
    fx *t = *state;
    vfe *f = &t->f;
    uint8_t p[12 + 16];
    uint32_t c[3] = { 0, 16, 0 };

    assert_int_equal(fx_session(t, FX_ALL_FEATURES, FX_ALL_PROTOCOL), 0);
    memset(p, 0, sizeof(p));
    memcpy(p, c, 12);
    assert_int_equal(vfe_send(f, AIOL__VHOST_GET_CONFIG, 0, p, 28, NULL, 0),
                     0);
    assert_int_equal(vfe_recv(f, AIOL__VHOST_GET_CONFIG, p, sizeof(p)), 28);
    assert_memory_equal(p + 12, "TOYCONF-abcdefgh", 16);
    c[0] = 8;
    c[1] = 4;
    memcpy(p, c, 12);
    memcpy(p + 12, "WXYZ", 4);
    assert_int_equal(vfe_request_ack(f, AIOL__VHOST_SET_CONFIG, p, 16, NULL,
                                     0), 0);
    assert_memory_equal(t->toy.config, "TOYCONF-WXYZefgh", 16);
    c[0] = 0; /* read-only part */
    memcpy(p, c, 12);
    assert_int_equal(vfe_request_ack(f, AIOL__VHOST_SET_CONFIG, p, 16, NULL,
                                     0), -EPERM);
    /* Size field not matching the payload: malformed. */
    c[1] = 8;
    memcpy(p, c, 12);
    assert_int_equal(vfe_send(f, AIOL__VHOST_SET_CONFIG, 0, p, 16, NULL, 0),
                     0);
    assert_true(vfe_dropped(f));
    fx_assert_serves_next(t);
}

static void test_direct_two_regions(void **state)
{
    fx *t = *state;
    aiol_vhost_vq_stats st;

    assert_int_equal(fx_session(t, FX_NO_EVENT_IDX, FX_ALL_PROTOCOL), 0);
    for (int i = 0; i < 3 * FX_RING; i++) { /* wraps the ring 3 times */
        assert_int_equal(fx_request(t, 0, false), 0);
        assert_int_equal(vfe_vq_calls(&t->f, 0), 1);
    }
    aiol_vhost_vq_stats_get(aiol_vhost_dev_vq_get(t->dev, 0), &st);
    assert_int_equal(st.popped, 3 * FX_RING);
    assert_int_equal(st.calls, 3 * FX_RING);
    assert_int_equal(t->toy.handled, 3 * FX_RING);
}

static void test_indirect(void **state)
{
    fx *t = *state;

    assert_int_equal(fx_session(t, FX_ALL_FEATURES, FX_ALL_PROTOCOL), 0);
    for (int i = 0; i < 20; i++) {
        assert_int_equal(fx_request(t, 0, i % 2 == 0), 0);
    }
    assert_int_equal(t->toy.handled, 20);
}

/* MQ: two queues served independently. */
static void test_multiqueue(void **state)
{
    fx *t = *state;

    assert_int_equal(fx_session(t, FX_NO_EVENT_IDX, FX_ALL_PROTOCOL), 0);
    assert_int_equal(vfe_vq_setup(&t->f, 3, 8, false), 0);
    assert_int_equal(fx_request(t, 3, false), 0);
    assert_int_equal(fx_request(t, 0, true), 0);
    assert_int_equal(fx_request(t, 3, true), 0);
    assert_int_equal(vfe_vq_calls(&t->f, 3), 2);
    assert_int_equal(vfe_vq_calls(&t->f, 0), 1);
}

static void test_event_idx(void **state)
{
    fx *t = *state;
    vfe *f = &t->f;
    aiol_vhost_vq_stats st;

    assert_int_equal(fx_session(t, FX_ALL_FEATURES, FX_ALL_PROTOCOL), 0);
    /* First notify always signals. */
    assert_int_equal(fx_request(t, 0, false), 0);
    assert_int_equal(vfe_vq_calls(f, 0), 1);
    /* The backend asks to be kicked at the next avail entry (packed: the
     * next descriptor; a request takes 3). */
    assert_int_equal(vfe_vq_avail_event(f, 0), vfe_ring_units(f, 1, 3));
    /* used_event far ahead: the next completions are not signalled. */
    vfe_vq_set_used_event(f, 0, (uint16_t)vfe_ring_units(f, 10, 3));
    assert_int_equal(fx_request(t, 0, false), 0);
    assert_int_equal(fx_request(t, 0, false), 0);
    assert_int_equal(vfe_vq_calls(f, 0), 0);
    aiol_vhost_vq_stats_get(aiol_vhost_dev_vq_get(t->dev, 0), &st);
    assert_int_equal(st.suppressed, 2);
    /* used_event = 3: signal when used idx passes 3 -> 4. */
    vfe_vq_set_used_event(f, 0, (uint16_t)vfe_ring_units(f, 3, 3));
    assert_int_equal(fx_request(t, 0, false), 0);
    assert_int_equal(vfe_vq_calls(f, 0), 1);
    assert_int_equal(vfe_vq_avail_event(f, 0), vfe_ring_units(f, 4, 3));
    aiol_vhost_vq_stats_get(aiol_vhost_dev_vq_get(t->dev, 0), &st);
    assert_int_equal(st.calls, 2);
}

static void test_no_interrupt(void **state)
{
    fx *t = *state;
    vfe *f = &t->f;
    aiol_vhost_vq_stats st;

    assert_int_equal(fx_session(t, FX_NO_EVENT_IDX, FX_ALL_PROTOCOL), 0);
    vfe_vq_no_interrupt(f, 0, true);
    assert_int_equal(fx_request(t, 0, false), 0);
    assert_int_equal(vfe_vq_calls(f, 0), 0);
    vfe_vq_no_interrupt(f, 0, false);
    assert_int_equal(fx_request(t, 0, false), 0);
    assert_int_equal(vfe_vq_calls(f, 0), 1);
    aiol_vhost_vq_stats_get(aiol_vhost_dev_vq_get(t->dev, 0), &st);
    assert_int_equal(st.suppressed, 1);
    assert_int_equal(st.calls, 1);
}

/* A new call fd is signalled once when it is set (libvhost-user's
 * behaviour, which QEMU's vhost-user-blk qtest waits for): a driver that
 * reconnects misses no notify.  Not counted as a notify; a "none" call fd
 * gets nothing. */
static void test_call_signalled_when_set(void **state)
{
    fx *t = *state;
    vfe *f = &t->f;
    aiol_vhost_vq_stats st;
    uint64_t arg = 0, v;
    int efd;

    assert_int_equal(fx_session(t, FX_NO_EVENT_IDX, FX_ALL_PROTOCOL), 0);
    assert_int_equal(f->vq[0].call_on_set, 1);
    assert_int_equal(fx_request(t, 0, false), 0);
    assert_int_equal(vfe_vq_calls(f, 0), 1);
    /* a new call fd on the running ring */
    efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    assert_true(efd >= 0);
    assert_int_equal(vfe_send(f, AIOL__VHOST_SET_VRING_CALL, 0, &arg, 8,
                              &efd, 1), 0);
    assert_int_equal(vfe_get_u64(f, AIOL__VHOST_GET_FEATURES, &v), 0);
    assert_int_equal(read(efd, &v, 8), 8);
    assert_int_equal(v, 1);
    close(f->vq[0].call);
    f->vq[0].call = efd;
    assert_int_equal(fx_request(t, 0, false), 0);
    assert_int_equal(vfe_vq_calls(f, 0), 1);
    aiol_vhost_vq_stats_get(aiol_vhost_dev_vq_get(t->dev, 0), &st);
    assert_int_equal(st.calls, 2);
    assert_int_equal(vfe_vq_setup(f, 1, 8, true), 0);
    assert_int_equal(f->vq[1].call_on_set, 0);
}

/* ------------------------------------------------------ busy polling */

static void cb_count(void *opaque)
{
    (*(int *)opaque)++;
}

/* One blocking poll that ends by @ns from now at the latest. */
static void poll_within(aiol_loop *loop, int64_t ns)
{
    aiol_clock *c = aiol_loop_clock_get(loop);
    aiol_timer *tm;
    int fired = 0;

    assert_int_equal(aiol_timer_new(c, cb_count, &fired, &tm), 0);
    assert_int_equal(aiol_timer_mod(tm, aiol_clock_time_get(c) + ns), 0);
    aiol_loop_poll(loop, true);
    aiol_timer_free(tm);
}

/* Busy polling on, its window wide open (short waits grow it x1000 up
 * to 50 ms), the rings polled. */
static void open_poll_window(aiol_loop *loop)
{
    assert_int_equal(aiol_loop_poll_params_set(loop, 50000000, 1000, 0), 0);
    for (int i = 0; i < 6; i++) {
        poll_within(loop, 100000);
    }
}

/* A toy request published but not kicked; returns its head. */
static uint16_t add_unkicked(vfe *f, unsigned q)
{
    uint64_t a = vfe_alloc(f, 1, 16, 1), w = vfe_alloc(f, 0, 64, 1);
    vfe_buf bufs[2] = { { a, 16, false }, { w, 64, true } };

    memset(vfe_gpa(f, a), 7, 16);
    return vfe_vq_add(f, q, bufs, 2, false);
}

/*
 * With busy polling the loop sees a published request without a kick:
 * while it polls a ring it asks for none (VRING_USED_F_NO_NOTIFY, or
 * with event idx an avail_event left where it was), and when polling
 * stops it asks again.
 */
static void busy_poll_serves_unkicked(fx *t, bool event_idx)
{
    vfe *f = &t->f;
    aiol_vhost_vq_stats st0, st;
    uint16_t event0;
    int handled;

    assert_int_equal(fx_session(t, event_idx ? FX_ALL_FEATURES
                                             : FX_NO_EVENT_IDX,
                                FX_ALL_PROTOCOL), 0);
    assert_int_equal(fx_request(t, 0, false), 0);
    event0 = vfe_vq_avail_event(f, 0);
    open_poll_window(t->loop);
    assert_false(vfe_vq_kicks_off(f, 0)); /* (the loop slept: kicks on) */
    aiol_vhost_vq_stats_get(aiol_vhost_dev_vq_get(t->dev, 0), &st0);
    handled = t->toy.handled;
    for (int i = 0; i < 3; i++) {
        uint16_t head = add_unkicked(f, 0);
        uint32_t id, len;

        poll_within(t->loop, 20000000);
        assert_int_equal(t->toy.handled, handled + i + 1);
        /* found by polling, the loop did not sleep: still polling */
        /* (split with event idx: avail_event stays behind instead) */
        assert_int_equal(vfe_vq_kicks_off(f, 0),
                         vfe_packed(f) || !event_idx);
        assert_int_equal(vfe_vq_wait_used(f, 0, &id, &len), 0);
        assert_int_equal(id, head);
    }
    aiol_vhost_vq_stats_get(aiol_vhost_dev_vq_get(t->dev, 0), &st);
    assert_int_equal(st.kicks, st0.kicks);
    assert_int_equal(st.popped, st0.popped + 3);
    if (event_idx) {
        assert_int_equal(vfe_vq_avail_event(f, 0), event0);
    }
    /* polling off: kicks are asked for again, and served */
    assert_int_equal(aiol_loop_poll_params_set(t->loop, 0, 0, 0), 0);
    aiol_loop_poll(t->loop, false);
    assert_false(vfe_vq_kicks_off(f, 0));
    if (event_idx) {
        assert_int_equal(vfe_vq_avail_event(f, 0),
                         (uint16_t)(event0 + vfe_ring_units(f, 3, 2)));
    }
    assert_int_equal(fx_request(t, 0, false), 0);
    aiol_vhost_vq_stats_get(aiol_vhost_dev_vq_get(t->dev, 0), &st);
    assert_int_equal(st.kicks, st0.kicks + 1);
}

static void test_busy_poll_no_event_idx(void **state)
{
    busy_poll_serves_unkicked(*state, false);
}

static void test_busy_poll_event_idx(void **state)
{
    busy_poll_serves_unkicked(*state, true);
}

/* A queue whose call fd is "none" belongs to a driver that polls: it is
 * never signalled, and the due signals are counted as skipped. */
static void test_call_nofd(void **state)
{
    fx *t = *state;
    vfe *f = &t->f;
    aiol_vhost_vq_stats st;

    assert_int_equal(fx_session(t, FX_NO_EVENT_IDX, FX_ALL_PROTOCOL), 0);
    assert_int_equal(vfe_vq_setup(f, 2, 8, true), 0);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(fx_request(t, 2, false), 0);
    }
    aiol_vhost_vq_stats_get(aiol_vhost_dev_vq_get(t->dev, 2), &st);
    assert_int_equal(st.skipped, 3);
    assert_int_equal(st.calls, 0);
    assert_int_equal(st.popped, 3);
}

static void test_get_vring_base(void **state)
{
    fx *t = *state;
    vfe *f = &t->f;
    uint32_t s[2] = { 0, 0 };

    assert_int_equal(fx_session(t, FX_ALL_FEATURES, FX_ALL_PROTOCOL), 0);
    assert_int_equal(fx_request(t, 0, false), 0);
    assert_int_equal(fx_request(t, 0, true), 0);
    assert_true(aiol_vhost_vq_is_running(aiol_vhost_dev_vq_get(t->dev, 0)));
    assert_int_equal(vfe_send(f, AIOL__VHOST_GET_VRING_BASE, 0, s, 8, NULL, 0),
                     0);
    assert_int_equal(vfe_recv(f, AIOL__VHOST_GET_VRING_BASE, s, 8), 8);
    assert_int_equal(s[0], 0);
    /* (packed: 4 descriptors, with the wrap counter's bit, in both
       halves: the next one to pop and the next one to use) */
    assert_int_equal(s[1], vfe_packed(f) ? 0x80048004u : 2);
    assert_false(aiol_vhost_vq_is_running(aiol_vhost_dev_vq_get(t->dev, 0)));
    assert_int_equal(t->toy.stops, 1);
    /* A chain added now is not served: the ring is stopped. */
    {
        uint64_t w = vfe_alloc(f, 0, 16, 1);
        vfe_buf b = { w, 16, true };

        vfe_vq_add(f, 0, &b, 1, false);
        vfe_vq_kick(f, 0);
        assert_int_equal(vfe_vq_used_pending(f, 0), 0);
    }
    assert_int_equal(t->toy.handled, 2);
}

static void test_reconnect(void **state)
{
    fx *t = *state;
    aiol_vhost_stats st;

    for (int i = 0; i < 3; i++) {
        assert_int_equal(fx_session(t, FX_ALL_FEATURES, FX_ALL_PROTOCOL), 0);
        assert_int_equal(fx_request(t, 0, i == 1), 0);
        vfe_close(&t->f);
        vfe_pump(&t->f, 10);
        assert_false(aiol_vhost_dev_is_connected(t->dev));
    }
    aiol_vhost_dev_stats_get(t->dev, &st);
    assert_int_equal(st.accepts, 3);
    assert_int_equal(st.drops, 3);
    assert_int_equal(st.malformed, 0);
    assert_int_equal(t->toy.connects, 3);
    assert_int_equal(t->toy.disconnects, 3);
    /* A second frontend while one is connected is refused; the first
     * goes on undisturbed. */
    {
        vfe g;

        assert_int_equal(fx_session(t, FX_ALL_FEATURES, FX_ALL_PROTOCOL), 0);
        assert_int_equal(vfe_connect(&g, t->path, fx_pump, t), 0);
        assert_true(vfe_dropped(&g));
        vfe_close(&g);
        assert_int_equal(fx_request(t, 0, false), 0);
        aiol_vhost_dev_stats_get(t->dev, &st);
        assert_int_equal(st.refused, 1);
        assert_int_equal(st.accepts, 4);
    }
}

/*
 * A device that drops its frontend (aiol_vhost_dev_disconnect(), as
 * aiol_vhost_dev_free() does) completes the chain it has in flight before
 * the frontend can see the connection close: QEMU, finding its backend
 * gone, resumes from the used index it reads then, and a chain completed
 * after it would be served by the next backend and completed twice.
 */
static void test_drop_completes_before_close(void **state)
{
    fx *t = *state;
    vfe *f = &t->f;
    uint64_t w;
    vfe_buf b;
    uint32_t id, len;
    uint16_t head;

    assert_int_equal(fx_session(t, FX_ALL_FEATURES, FX_ALL_PROTOCOL), 0);
    assert_int_equal(fx_request(t, 0, false), 0);
    t->toy.hold[0] = true;
    w = vfe_alloc(f, 0, 64, 8);
    b = (vfe_buf){ w, 64, true };
    head = vfe_vq_add(f, 0, &b, 1, false);
    vfe_vq_kick(f, 0);
    for (int i = 0; i < 100 && t->toy.held[0].vq == NULL; i++) {
        vfe_pump(f, 1);
    }
    assert_non_null(t->toy.held[0].vq);
    assert_int_equal(vfe_vq_used_pending(f, 0), 0);
    t->toy.peer_fd1 = f->sock + 1;
    aiol_vhost_dev_disconnect(t->dev);
    t->toy.peer_fd1 = 0;
    assert_false(aiol_vhost_dev_is_connected(t->dev));
    assert_true(vfe_dropped(f));
    assert_int_equal(t->toy.stops, 1);
    assert_int_equal(t->toy.stops_after_close, 0);
    assert_int_equal(vfe_vq_wait_used(f, 0, &id, &len), 0);
    assert_int_equal(id, head);
    assert_int_equal(vfe_vq_used_pending(f, 0), 0);
}

/* Without PROTOCOL_FEATURES a ring is enabled as soon as it starts; with
 * it, only after SET_VRING_ENABLE 1, and SET_VRING_ENABLE 0 disables it. */
static void test_vring_enable(void **state)
{
    fx *t = *state;
    vfe *f = &t->f;
    uint64_t w;
    vfe_buf b;

    assert_int_equal(fx_session(t, ~BIT(AIOL__VHOST_F_PROTOCOL_FEATURES), 0),
                     0);
    assert_int_equal(fx_request(t, 0, false), 0);
    fx_assert_serves_next(t); /* with PROTOCOL_FEATURES: enabled by vfe */
    assert_int_equal(vfe_vring_state(f, AIOL__VHOST_SET_VRING_ENABLE, 0, 0,
                                     true), 0);
    w = vfe_alloc(f, 0, 16, 1);
    b = (vfe_buf){ w, 16, true };
    vfe_vq_add(f, 0, &b, 1, false);
    vfe_vq_kick(f, 0);
    assert_int_equal(vfe_vq_used_pending(f, 0), 0);
    assert_false(aiol_vhost_vq_is_running(aiol_vhost_dev_vq_get(t->dev, 0)));
    /* Enabling serves what was kicked meanwhile. */
    assert_int_equal(vfe_vring_state(f, AIOL__VHOST_SET_VRING_ENABLE, 0, 1,
                                     true), 0);
    assert_int_equal(vfe_vq_used_pending(f, 0), 1);
}

/* RESET_OWNER forgets the features, memory and rings of the session. */
static void test_reset_owner(void **state)
{
    fx *t = *state;
    vfe *f = &t->f;

    assert_int_equal(fx_session(t, FX_ALL_FEATURES, FX_ALL_PROTOCOL), 0);
    assert_int_equal(fx_request(t, 0, false), 0);
    assert_int_equal(vfe_send(f, AIOL__VHOST_RESET_OWNER, 0, NULL, 0, NULL, 0),
                     0);
    vfe_pump(f, 5);
    assert_int_equal(aiol_vhost_dev_features_get(t->dev), 0);
    assert_false(aiol_vhost_vq_is_running(aiol_vhost_dev_vq_get(t->dev, 0)));
    assert_int_equal(aiol_vhost_vq_size_get(aiol_vhost_dev_vq_get(t->dev, 0)), 0);
    /* The same connection sets everything up again. */
    f->reg[0].brk = f->reg[1].brk = 0;
    assert_int_equal(vfe_negotiate(f, FX_ALL_FEATURES, FX_ALL_PROTOCOL), 0);
    assert_int_equal(vfe_set_mem_table(f, true), 0);
    assert_int_equal(vfe_vq_setup(f, 0, FX_RING, false), 0);
    assert_int_equal(fx_request(t, 0, true), 0);
}

/* A connected socket handed over with aiol_vhost_dev_adopt(). */
static void test_adopt(void **state)
{
    fx *t = *state;
    vfe *f = &t->f;
    int sv[2];

    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv),
                     0);
    assert_int_equal(vfe_connect(f, t->path, fx_pump, t), 0);
    vfe_pump(f, 5);
    assert_int_equal(aiol_vhost_dev_adopt(t->dev, sv[0]), -EBUSY);
    close(sv[1]);
    vfe_close(f);
    vfe_pump(f, 5);
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv),
                     0);
    assert_int_equal(aiol_vhost_dev_adopt(t->dev, sv[0]), 0);
    f->sock = sv[1];
    assert_int_equal(vfe_negotiate(f, FX_ALL_FEATURES, FX_ALL_PROTOCOL), 0);
    assert_int_equal(vfe_mem_create(f, FX_RAM, 2), 0);
    assert_int_equal(vfe_set_mem_table(f, true), 0);
    assert_int_equal(vfe_vq_setup(f, 0, FX_RING, false), 0);
    assert_int_equal(fx_request(t, 0, false), 0);
}

/* Misuse by the embedding program aborts with a message. */
static void expect_abort(fx *t, int what)
{
    pid_t pid = fork();
    int st;

    assert_true(pid >= 0);
    if (pid == 0) {
        aiol_vhost_elem e = { 0 };

        switch (what) {
        case 0:
            aiol_vhost_dev_vq_get(t->dev, FX_QUEUES);
            break;
        case 1:
            aiol_vhost_vq_push(aiol_vhost_dev_vq_get(t->dev, 0), &e, 1);
            break;
        default:
            aiol_vhost_dev_vq_get(NULL, 0);
            break;
        }
        _exit(0);
    }
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFSIGNALED(st));
    assert_int_equal(WTERMSIG(st), SIGABRT);
}

static void test_misuse_aborts(void **state)
{
    for (int i = 0; i < 3; i++) {
        expect_abort(*state, i);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_negotiate, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reply_ack, setup, teardown),
        cmocka_unit_test_setup_teardown(test_config, setup, teardown),
        cmocka_unit_test_setup_teardown(test_call_signalled_when_set, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_busy_poll_no_event_idx, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_busy_poll_event_idx, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_direct_two_regions, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_indirect, setup, teardown),
        cmocka_unit_test_setup_teardown(test_multiqueue, setup, teardown),
        cmocka_unit_test_setup_teardown(test_event_idx, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_interrupt, setup, teardown),
        cmocka_unit_test_setup_teardown(test_call_nofd, setup, teardown),
        cmocka_unit_test_setup_teardown(test_get_vring_base, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_drop_completes_before_close,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_reconnect, setup, teardown),
        cmocka_unit_test_setup_teardown(test_vring_enable, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reset_owner, setup, teardown),
        cmocka_unit_test_setup_teardown(test_adopt, setup, teardown),
        cmocka_unit_test_setup_teardown(test_misuse_aborts, setup,
                                        teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
