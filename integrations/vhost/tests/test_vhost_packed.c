/* SPDX-License-Identifier: MIT */
/*
 * test_vhost_packed.c - packed rings (virtio 1.1) as a hostile driver
 * writes them, and as a long-running one wraps them.
 *
 * The other vhost suites run on packed rings too (VFE_RING=packed); this
 * one forges what only a packed ring can carry wrong:
 *   - a chain whose later descriptor is not marked available for the
 *     ring's lap (the driver marks every descriptor, 2.8.6), an indirect
 *     descriptor inside a chain, a chain longer than the ring: each
 *     breaks the queue, and the connection, other queues, the queue set
 *     up again and the next frontend are served (fx_assert_broken());
 *   - a first descriptor whose flags say "used" or belong to another lap:
 *     not available, so nothing happens until the driver makes it so;
 *   - a frontend that switches layouts while a ring runs (refused; after
 *     stopping its rings it may), or whose ring base lies outside the
 *     ring.
 * It also checks chains that straddle the end of the ring over many
 * laps, with event idx, and completions out of order.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"

#define F_NEXT 1u
#define F_WRITE 2u
#define F_INDIRECT 4u
#define F_AVAIL (1u << 7)
#define F_USED (1u << 15)

static int packed_setup(void **state)
{
    setenv("VFE_RING", "packed", 1);
    return fx_checked_setup(state);
}

static fx *session(void **state, uint64_t features)
{
    fx *t = &((fx_checked *)*state)->t;

    assert_int_equal(fx_session(t, features, FX_ALL_PROTOCOL), 0);
    assert_true(vfe_packed(&t->f));
    return t;
}

static uint64_t wbuf(fx *t)
{
    return vfe_alloc(&t->f, 0, 64, 8);
}

/* Descriptor @i of queue 0, flags as given (raw). */
static void put(fx *t, uint16_t i, uint64_t addr, uint32_t len, uint16_t id,
                uint16_t flags)
{
    vfe_pdesc_put(t->f.vq[0].desc + 16u * i, addr, len, id, flags);
}

static uint16_t avail_flags(fx *t)
{
    return vfe_packed_avail_flags(&t->f.vq[0]);
}

static void test_chain_descriptor_off_lap(void **state)
{
    fx *t = session(state, FX_ALL_FEATURES);

    /* the second descriptor says "used" on this lap */
    put(t, 1, wbuf(t), 64, 0, (uint16_t)(F_WRITE | F_AVAIL | F_USED));
    put(t, 0, wbuf(t), 16, 0, (uint16_t)(F_NEXT | avail_flags(t)));
    fx_assert_broken(t, "not available under the ring's wrap counter");
}

static void test_indirect_inside_chain(void **state)
{
    fx *t = session(state, FX_ALL_FEATURES);
    uint64_t tab = vfe_alloc(&t->f, 0, 16, 16);

    vfe_pdesc_put(vfe_gpa(&t->f, tab), wbuf(t), 64, 0, F_WRITE);
    put(t, 1, tab, 16, 0, (uint16_t)(F_INDIRECT | avail_flags(t)));
    put(t, 0, wbuf(t), 16, 0, (uint16_t)(F_NEXT | avail_flags(t)));
    fx_assert_broken(t, "indirect descriptor inside a chain");
}

static void test_indirect_not_negotiated(void **state)
{
    fx *t = session(state,
                    ~(1ull << AIOL__VHOST_F_RING_INDIRECT_DESC));
    uint64_t tab = vfe_alloc(&t->f, 0, 16, 16);

    vfe_pdesc_put(vfe_gpa(&t->f, tab), wbuf(t), 64, 0, F_WRITE);
    put(t, 0, tab, 16, 0, (uint16_t)(F_INDIRECT | avail_flags(t)));
    vfe_vq_kick(&t->f, 0);
    vfe_pump(&t->f, 20);
    assert_true(aiol_vhost_vq_is_broken(aiol_vhost_dev_vq_get(t->dev, 0)));
    assert_int_equal(vfe_vq_errs(&t->f, 0), 1);
    assert_non_null(strstr(aiol_vhost_dev_last_error_get(t->dev),
                           "indirect descriptor not negotiated"));
    fx_assert_serves_next(t);
}

/* Every descriptor of the ring, NEXT on all: the chain never ends. */
static void test_chain_longer_than_ring(void **state)
{
    fx *t = session(state, FX_ALL_FEATURES);

    for (uint16_t i = FX_RING; i-- > 0;) {
        put(t, i, wbuf(t), 16, 0, (uint16_t)(F_NEXT | avail_flags(t)));
    }
    fx_assert_broken(t, "chain longer than the ring");
}

/*
 * A first descriptor marked used, or marked for the next lap: the device
 * must not take it (2.8.1), and the queue is not broken by it.  Once the
 * driver marks it available, it is served.
 */
static void test_first_descriptor_not_available(void **state)
{
    fx *t = session(state, FX_ALL_FEATURES);
    static const uint16_t wrong[] = { F_AVAIL | F_USED, 0, F_USED };
    aiol_vhost_vq *vq = aiol_vhost_dev_vq_get(t->dev, 0);
    uint64_t w = wbuf(t);
    uint32_t id, len;

    for (unsigned k = 0; k < sizeof(wrong) / sizeof(wrong[0]); k++) {
        aiol_vhost_vq_stats st;

        put(t, 0, w, 64, 5, (uint16_t)(F_WRITE | wrong[k]));
        vfe_vq_kick(&t->f, 0);
        vfe_pump(&t->f, 20);
        aiol_vhost_vq_stats_get(vq, &st);
        assert_int_equal(st.popped, 0);
        assert_int_equal(t->toy.handled, 0);
        assert_false(aiol_vhost_vq_is_broken(vq));
    }
    /* (the toy device answers a chain with no readable bytes at once) */
    put(t, 0, w, 64, 5, (uint16_t)(F_WRITE | avail_flags(t)));
    t->f.vq[0].id_ndescs[5] = 1;
    vfe_vq_kick(&t->f, 0);
    assert_int_equal(vfe_vq_wait_used(&t->f, 0, &id, &len), 0);
    assert_int_equal(id, 5);
    assert_false(aiol_vhost_vq_is_broken(vq));
}

/* SET_FEATURES that drops VIRTIO_F_RING_PACKED while queue 0 runs. */
static void test_layout_switch_while_running(void **state)
{
    fx *t = session(state, FX_ALL_FEATURES);
    uint64_t split = t->f.features & ~(1ull << AIOL__VHOST_F_RING_PACKED);
    aiol_vhost_stats st;

    assert_int_equal(fx_request(t, 0, false), 0);
    assert_int_equal(vfe_set_u64(&t->f, AIOL__VHOST_SET_FEATURES, split, true),
                     -EBUSY);
    assert_non_null(strstr(aiol_vhost_dev_last_error_get(t->dev),
                           "ring layout changed while a ring runs"));
    assert_int_equal(fx_request(t, 0, true), 0); /* still packed, served */
    /* without need_reply the frontend cannot learn of it: dropped */
    assert_int_equal(vfe_set_u64(&t->f, AIOL__VHOST_SET_FEATURES, split,
                                 false), 0);
    assert_true(vfe_dropped(&t->f));
    aiol_vhost_dev_stats_get(t->dev, &st);
    assert_int_equal(st.nacks, 1);
    fx_assert_serves_next(t);
}

/*
 * A guest that reboots into a driver without packed rings: QEMU stops the
 * rings, sets the new features and sets the rings up again.
 */
static void test_layout_switch_after_stop(void **state)
{
    fx *t = session(state, FX_ALL_FEATURES);
    uint64_t split = t->f.features & ~(1ull << AIOL__VHOST_F_RING_PACKED);

    assert_int_equal(fx_request(t, 0, false), 0);
    assert_int_equal(vfe_vq_stop(&t->f, 0), 3);
    assert_int_equal(vfe_set_u64(&t->f, AIOL__VHOST_SET_FEATURES, split, true),
                     0);
    t->f.features = split;
    assert_false(vfe_packed(&t->f));
    assert_int_equal(vfe_vq_setup(&t->f, 0, FX_RING, false), 0);
    assert_int_equal(fx_request(t, 0, false), 0);
    assert_int_equal(fx_request(t, 0, true), 0);
}

static void test_base_outside_ring(void **state)
{
    fx *t = session(state, FX_ALL_FEATURES);

    assert_true(vfe_vq_stop(&t->f, 0) >= 0);
    assert_int_equal(vfe_vring_state(&t->f, AIOL__VHOST_SET_VRING_BASE, 0,
                                     0x8000u | FX_RING, true), -EINVAL);
    assert_int_equal(vfe_vring_state(&t->f, AIOL__VHOST_SET_VRING_BASE, 0,
                                     0x8000u | (FX_RING - 1), true), 0);
    assert_true(aiol_vhost_dev_is_connected(t->dev));
}

/*
 * Requests of 3 descriptors on a ring of 16: chains straddle the end of
 * the ring, and 40 of them run over 7 laps, alternating direct and
 * indirect ones, with event idx asking for a call at each.
 */
static void test_many_laps(void **state)
{
    fx *t = session(state, FX_ALL_FEATURES);
    aiol_vhost_vq_stats st;
    int base;

    for (int i = 0; i < 40; i++) {
        assert_int_equal(fx_request(t, 0, i % 3 == 2), 0);
        assert_int_equal(vfe_vq_calls(&t->f, 0), 1);
    }
    aiol_vhost_vq_stats_get(aiol_vhost_dev_vq_get(t->dev, 0), &st);
    assert_int_equal(st.popped, 40);
    assert_int_equal(st.broken, 0);
    /* 27 direct chains of 3 and 13 indirect ones of 1: 94 descriptors,
     * 5 laps and 14 in, so the sixth lap (odd: + the size) */
    base = vfe_vq_stop(&t->f, 0);
    assert_int_equal(base, 94 % FX_RING + FX_RING);
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, packed_setup, \
                                              fx_checked_teardown)
    const struct CMUnitTest tests[] = {
        T(test_chain_descriptor_off_lap),
        T(test_indirect_inside_chain),
        T(test_indirect_not_negotiated),
        T(test_chain_longer_than_ring),
        T(test_first_descriptor_not_available),
        T(test_layout_switch_while_running),
        T(test_layout_switch_after_stop),
        T(test_base_outside_ring),
        T(test_many_laps),
    };
#undef T

    return cmocka_run_group_tests(tests, NULL, NULL);
}
