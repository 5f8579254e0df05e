/* SPDX-License-Identifier: MIT */
/*
 * test_vhost_hostile.c - malformed messages from the frontend and
 * malformed descriptor chains from the guest.
 *
 * A malformed message must drop the connection (its fds closed, memory
 * unmapped) and the server must then serve the next frontend; a refused
 * request with need_reply gets a failure ack instead.  A malformed chain
 * must break its ring (pop -EIO, err eventfd signalled, nothing used)
 * while the connection, the other rings and the next frontend are served.
 * No test may leak an fd: each compares /proc/self/fd at start and end.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fixture.h"

#define BIT(n) (1ull << (n))

typedef fx_checked hs;

/* The connection was dropped as malformed; the next frontend is served. */
static void assert_dropped(fx *t, const char *why)
{
    aiol_vhost_stats st;

    assert_true(vfe_dropped(&t->f));
    assert_false(aiol_vhost_dev_is_connected(t->dev));
    aiol_vhost_dev_stats_get(t->dev, &st);
    assert_int_equal(st.malformed, 1);
    assert_non_null(strstr(aiol_vhost_dev_last_error_get(t->dev), why));
    fx_assert_serves_next(t);
}

static void connect_negotiated(fx *t)
{
    assert_int_equal(vfe_connect(&t->f, t->path, fx_pump, t), 0);
    assert_int_equal(vfe_negotiate(&t->f, FX_ALL_FEATURES, FX_ALL_PROTOCOL),
                     0);
}

static void test_short_header(void **state)
{
    fx *t = &((hs *)*state)->t;
    uint32_t h[3] = { AIOL__VHOST_GET_FEATURES, 1, 0 };

    assert_int_equal(vfe_connect(&t->f, t->path, fx_pump, t), 0);
    assert_int_equal(vfe_send_raw(&t->f, h, 6, NULL, 0), 0);
    vfe_pump(&t->f, 10);
    assert_true(aiol_vhost_dev_is_connected(t->dev)); /* waits for the rest */
    shutdown(t->f.sock, SHUT_WR);
    assert_dropped(t, "mid-message");
}

static void test_size_too_large(void **state)
{
    fx *t = &((hs *)*state)->t;
    uint32_t h[3] = { AIOL__VHOST_SET_FEATURES, 1, 0x10000 };

    assert_int_equal(vfe_connect(&t->f, t->path, fx_pump, t), 0);
    assert_int_equal(vfe_send_raw(&t->f, h, 12, NULL, 0), 0);
    assert_dropped(t, "over the maximum");
}

static void test_bad_version(void **state)
{
    fx *t = &((hs *)*state)->t;
    uint32_t h[3] = { AIOL__VHOST_GET_FEATURES, 2, 0 };

    assert_int_equal(vfe_connect(&t->f, t->path, fx_pump, t), 0);
    assert_int_equal(vfe_send_raw(&t->f, h, 12, NULL, 0), 0);
    assert_dropped(t, "version");
}

static void test_wrong_payload_size(void **state)
{
    fx *t = &((hs *)*state)->t;
    uint32_t v = 0;

    connect_negotiated(t);
    assert_int_equal(vfe_send(&t->f, AIOL__VHOST_SET_FEATURES, 0, &v, 4, NULL,
                              0), 0);
    assert_dropped(t, "payload size");
}

static void test_fd_on_fdless_request(void **state)
{
    fx *t = &((hs *)*state)->t;
    uint64_t v = 0;
    int fd = dup(0);

    connect_negotiated(t);
    assert_int_equal(vfe_send(&t->f, AIOL__VHOST_SET_FEATURES, 0, &v, 8, &fd,
                              1), 0);
    close(fd);
    assert_dropped(t, "fd count");
}

static void test_kick_without_fd(void **state)
{
    fx *t = &((hs *)*state)->t;
    uint64_t v = 0; /* index 0, NOFD bit clear, but no fd */

    connect_negotiated(t);
    assert_int_equal(vfe_send(&t->f, AIOL__VHOST_SET_VRING_KICK, 0, &v, 8,
                              NULL, 0), 0);
    assert_dropped(t, "fd count");
}

static void test_too_many_fds(void **state)
{
    fx *t = &((hs *)*state)->t;
    int fds[12];
    uint64_t v = 0;

    for (int i = 0; i < 12; i++) {
        fds[i] = dup(0);
    }
    connect_negotiated(t);
    assert_int_equal(vfe_send(&t->f, AIOL__VHOST_SET_VRING_CALL, 0, &v, 8, fds,
                              12), 0);
    for (int i = 0; i < 12; i++) {
        close(fds[i]);
    }
    assert_dropped(t, "fds in one message");
}

static void test_mem_table_fd_count(void **state)
{
    fx *t = &((hs *)*state)->t;

    connect_negotiated(t);
    assert_int_equal(vfe_mem_create(&t->f, FX_RAM, 2), 0);
    {
        uint8_t p[8 + 64] = { 2 };
        int fds[1] = { t->f.memfd };

        for (int i = 0; i < 2; i++) {
            uint64_t r[4] = { t->f.reg[i].gpa, t->f.reg[i].size,
                              t->f.reg[i].uva, t->f.reg[i].off };

            memcpy(p + 8 + 32 * i, r, 32);
        }
        assert_int_equal(vfe_send(&t->f, AIOL__VHOST_SET_MEM_TABLE, 0, p,
                                  sizeof(p), fds, 1), 0);
    }
    assert_dropped(t, "fd count");
}

/* Sends a mem table made of @f's regions after @edit changed region 1. */
static int send_edited_table(fx *t, uint64_t gpa, uint64_t size,
                             uint64_t off, bool ack)
{
    t->f.reg[1].gpa = gpa;
    t->f.reg[1].size = size;
    t->f.reg[1].off = off;
    return vfe_set_mem_table(&t->f, ack);
}

static void test_region_overlap(void **state)
{
    fx *t = &((hs *)*state)->t;
    vfe_region saved;

    connect_negotiated(t);
    assert_int_equal(vfe_mem_create(&t->f, FX_RAM, 2), 0);
    saved = t->f.reg[1];
    /* With need_reply: refused with a failure ack, still connected. */
    assert_int_equal(send_edited_table(t, 0x1000, saved.size, saved.off,
                                       true), -EINVAL);
    assert_non_null(strstr(aiol_vhost_dev_last_error_get(t->dev), "overlap"));
    assert_int_equal(send_edited_table(t, UINT64_MAX - 0xfff, saved.size,
                                       saved.off, true), -EINVAL);
    assert_non_null(strstr(aiol_vhost_dev_last_error_get(t->dev), "overflow"));
    assert_int_equal(send_edited_table(t, saved.gpa, saved.size,
                                       saved.off + 4096, true), -EINVAL);
    assert_non_null(strstr(aiol_vhost_dev_last_error_get(t->dev), "large"));
    assert_true(aiol_vhost_dev_is_connected(t->dev));
    /* Without: dropped. */
    assert_int_equal(send_edited_table(t, 0x1000, saved.size, saved.off,
                                       false), 0);
    assert_dropped(t, "overlap");
}

static void test_region_overflow(void **state)
{
    fx *t = &((hs *)*state)->t;

    connect_negotiated(t);
    assert_int_equal(vfe_mem_create(&t->f, FX_RAM, 2), 0);
    assert_int_equal(send_edited_table(t, UINT64_MAX - 0xfff, 0x2000,
                                       t->f.reg[1].off, false), 0);
    assert_dropped(t, "overflow");
}

static void send_vring_addr(fx *t, unsigned q, uint64_t desc, uint64_t used,
                            uint64_t avail, int expect_ack)
{
    uint8_t a[40];
    uint32_t h[2] = { q, 0 };
    uint64_t v[4] = { desc, used, avail, 0 };

    memcpy(a, h, 8);
    memcpy(a + 8, v, 32);
    if (expect_ack <= 0) {
        assert_int_equal(vfe_request_ack(&t->f, AIOL__VHOST_SET_VRING_ADDR, a,
                                         40, NULL, 0), expect_ack);
    } else {
        assert_int_equal(vfe_send(&t->f, AIOL__VHOST_SET_VRING_ADDR, 0, a, 40,
                                  NULL, 0), 0);
    }
}

static void test_vring_addr_outside(void **state)
{
    fx *t = &((hs *)*state)->t;
    uint64_t base;

    assert_int_equal(fx_session(t, FX_ALL_FEATURES, FX_ALL_PROTOCOL), 0);
    base = t->f.reg[0].uva;
    assert_int_equal(vfe_vring_state(&t->f, AIOL__VHOST_SET_VRING_NUM, 1, 16,
                                     true), 0);
    /* Inside: accepted. */
    send_vring_addr(t, 1, base + 0x10000, base + 0x11000, base + 0x12000, 0);
    /* Past the end of region 0 (the used ring would run over it). */
    send_vring_addr(t, 1, base, base + t->f.reg[0].size - 8, base + 0x12000,
                    -EFAULT);
    /* Misaligned descriptor table. */
    send_vring_addr(t, 1, base + 8, base + 0x11000, base + 0x12000, -EFAULT);
    /* Not in any region; then without need_reply: dropped. */
    send_vring_addr(t, 1, 0x1000, base + 0x11000, base + 0x12000, -EFAULT);
    assert_int_equal(fx_request(t, 0, false), 0);
    send_vring_addr(t, 1, 0x1000, base + 0x11000, base + 0x12000, 1);
    assert_dropped(t, "outside the memory table");
}

/* A new table replaces the old one under running rings; one that does
 * not contain a ring is refused and the old one stays. */
static void test_mem_table_replace(void **state)
{
    fx *t = &((hs *)*state)->t;
    vfe_region saved;

    assert_int_equal(fx_session(t, FX_ALL_FEATURES, FX_ALL_PROTOCOL), 0);
    assert_int_equal(fx_request(t, 0, false), 0);
    assert_int_equal(vfe_set_mem_table(&t->f, true), 0);
    assert_int_equal(fx_request(t, 0, true), 0);
    saved = t->f.reg[0];
    t->f.reg[0].size -= 4096; /* the rings lie in the first page */
    t->f.reg[0].uva += 4096;
    t->f.reg[0].off += 4096;
    assert_int_equal(vfe_set_mem_table(&t->f, true), -EFAULT);
    t->f.reg[0] = saved;
    assert_int_equal(fx_request(t, 0, false), 0);
}

static void test_unknown_request(void **state)
{
    fx *t = &((hs *)*state)->t;

    connect_negotiated(t);
    assert_int_equal(vfe_send(&t->f, 77, 0, NULL, 0, NULL, 0), 0);
    assert_dropped(t, "unknown request");
}

/* ---- hostile descriptor chains ---- */

static uint64_t wbuf(fx *t)
{
    return vfe_alloc(&t->f, 0, 64, 1);
}

static void test_desc_loop(void **state)
{
    fx *t = &((hs *)*state)->t;

    assert_int_equal(fx_session(t, FX_ALL_FEATURES, FX_ALL_PROTOCOL), 0);
    vfe_desc_write(&t->f, 0, 0, wbuf(t), 64, 1 | 2, 1);
    vfe_desc_write(&t->f, 0, 1, wbuf(t), 64, 1 | 2, 0);
    vfe_vq_publish(&t->f, 0, 0);
    fx_assert_broken(t, "loop");
}

static void test_indirect_loop(void **state)
{
    fx *t = &((hs *)*state)->t;
    uint64_t tab;

    assert_int_equal(fx_session(t, FX_ALL_FEATURES, FX_ALL_PROTOCOL), 0);
    tab = vfe_alloc(&t->f, 0, 64, 16);
    for (uint16_t i = 0; i < 4; i++) {
        vfe_ind_write(&t->f, tab, i, wbuf(t), 64, 1 | 2, (i + 1) % 4);
    }
    vfe_desc_write(&t->f, 0, 0, tab, 64, 4, 0);
    vfe_vq_publish(&t->f, 0, 0);
    fx_assert_broken(t, "longer than its table");
}

static void test_next_out_of_range(void **state)
{
    fx *t = &((hs *)*state)->t;

    assert_int_equal(fx_session(t, FX_ALL_FEATURES, FX_ALL_PROTOCOL), 0);
    vfe_desc_write(&t->f, 0, 0, wbuf(t), 64, 1 | 2, FX_RING + 3);
    vfe_vq_publish(&t->f, 0, 0);
    fx_assert_broken(t, "index out of range");
}

static void test_head_out_of_range(void **state)
{
    fx *t = &((hs *)*state)->t;

    assert_int_equal(fx_session(t, FX_ALL_FEATURES, FX_ALL_PROTOCOL), 0);
    vfe_vq_publish(&t->f, 0, 0xffff);
    fx_assert_broken(t, "index out of range");
}

static void test_nested_indirect(void **state)
{
    fx *t = &((hs *)*state)->t;
    uint64_t tab, inner;

    assert_int_equal(fx_session(t, FX_ALL_FEATURES, FX_ALL_PROTOCOL), 0);
    tab = vfe_alloc(&t->f, 0, 32, 16);
    inner = vfe_alloc(&t->f, 0, 16, 16);
    vfe_ind_write(&t->f, inner, 0, wbuf(t), 64, 2, 0);
    vfe_ind_write(&t->f, tab, 0, wbuf(t), 64, 1 | 2, 1);
    vfe_ind_write(&t->f, tab, 1, inner, 16, 4, 0);
    vfe_desc_write(&t->f, 0, 0, tab, 32, 4, 0);
    vfe_vq_publish(&t->f, 0, 0);
    fx_assert_broken(t, "nested indirect");
}

static void test_indirect_bad_len(void **state)
{
    fx *t = &((hs *)*state)->t;

    assert_int_equal(fx_session(t, FX_ALL_FEATURES, FX_ALL_PROTOCOL), 0);
    vfe_desc_write(&t->f, 0, 0, vfe_alloc(&t->f, 0, 32, 16), 24, 4, 0);
    vfe_vq_publish(&t->f, 0, 0);
    fx_assert_broken(t, "indirect table length");
}

static void test_indirect_past_region(void **state)
{
    fx *t = &((hs *)*state)->t;
    uint64_t end;

    assert_int_equal(fx_session(t, FX_ALL_FEATURES, FX_ALL_PROTOCOL), 0);
    end = t->f.reg[1].gpa + t->f.reg[1].size;
    vfe_ind_write(&t->f, end - 16, 0, wbuf(t), 64, 2, 0);
    vfe_desc_write(&t->f, 0, 0, end - 16, 64, 4, 0); /* 48 bytes past */
    vfe_vq_publish(&t->f, 0, 0);
    fx_assert_broken(t, "indirect table outside guest RAM");
}

static void test_indirect_not_negotiated(void **state)
{
    fx *t = &((hs *)*state)->t;
    vfe_buf b = { 0, 64, true };

    assert_int_equal(fx_session(t, ~BIT(AIOL__VHOST_F_RING_INDIRECT_DESC),
                                FX_ALL_PROTOCOL), 0);
    b.gpa = wbuf(t);
    vfe_vq_add(&t->f, 0, &b, 1, true);
    vfe_vq_kick(&t->f, 0);
    assert_int_equal(vfe_vq_used_pending(&t->f, 0), 0);
    assert_true(aiol_vhost_vq_is_broken(aiol_vhost_dev_vq_get(t->dev, 0)));
    assert_non_null(strstr(aiol_vhost_dev_last_error_get(t->dev),
                           "not negotiated"));
}

static void test_addr_out_of_range(void **state)
{
    fx *t = &((hs *)*state)->t;

    assert_int_equal(fx_session(t, FX_ALL_FEATURES, FX_ALL_PROTOCOL), 0);
    /* Between the regions (region 0 ends at 1 MiB, region 1 is at 4 GiB). */
    vfe_desc_write(&t->f, 0, 0, 0x80000000ull, 64, 2, 0);
    vfe_vq_publish(&t->f, 0, 0);
    fx_assert_broken(t, "outside guest RAM");
}

static void test_len_past_region(void **state)
{
    fx *t = &((hs *)*state)->t;
    uint64_t end = t->f.reg[1].gpa;

    assert_int_equal(fx_session(t, FX_ALL_FEATURES, FX_ALL_PROTOCOL), 0);
    end = t->f.reg[1].gpa + t->f.reg[1].size;
    vfe_desc_write(&t->f, 0, 0, end - 8, 64, 2, 0);
    vfe_vq_publish(&t->f, 0, 0);
    fx_assert_broken(t, "outside guest RAM");
}

static void test_len_overflow(void **state)
{
    fx *t = &((hs *)*state)->t;
    uint64_t big = 3ull << 30;

    /* Sparse 6 GiB of guest RAM, two regions of 3 GiB: two readable
     * buffers of 3 GiB each are in RAM, but their sum passes 4 GiB. */
    connect_negotiated(t);
    assert_int_equal(vfe_mem_create(&t->f, 2 * big, 2), 0);
    assert_int_equal(vfe_set_mem_table(&t->f, true), 0);
    assert_int_equal(vfe_vq_setup(&t->f, 0, FX_RING, false), 0);
    vfe_desc_write(&t->f, 0, 0, t->f.reg[0].gpa, (uint32_t)big, 1, 1);
    vfe_desc_write(&t->f, 0, 1, t->f.reg[1].gpa, (uint32_t)big, 0, 0);
    vfe_vq_publish(&t->f, 0, 0);
    fx_assert_broken(t, "over 4 GiB");
}

/* A chain needing more segments than the device's iovec array: -ENOBUFS,
 * nothing consumed, the ring not broken. */
static void test_chain_too_many_segments(void **state)
{
    fx *t = &((hs *)*state)->t;
    uint64_t tab;

    assert_int_equal(fx_session(t, FX_ALL_FEATURES, FX_ALL_PROTOCOL), 0);
    tab = vfe_alloc(&t->f, 0, 16 * 70, 16);
    for (uint16_t i = 0; i < 70; i++) {
        vfe_ind_write(&t->f, tab, i, wbuf(t), 8, 2 | (i < 69 ? 1 : 0),
                      i + 1);
    }
    vfe_desc_write(&t->f, 0, 0, tab, 16 * 70, 4, 0);
    vfe_vq_publish(&t->f, 0, 0);
    vfe_vq_kick(&t->f, 0);
    assert_int_equal(vfe_vq_used_pending(&t->f, 0), 0);
    assert_int_equal(t->toy.last_err, -ENOBUFS);
    assert_false(aiol_vhost_vq_is_broken(aiol_vhost_dev_vq_get(t->dev, 0)));
}

static void test_write_then_read(void **state)
{
    fx *t = &((hs *)*state)->t;

    assert_int_equal(fx_session(t, FX_ALL_FEATURES, FX_ALL_PROTOCOL), 0);
    vfe_desc_write(&t->f, 0, 0, wbuf(t), 64, 1 | 2, 1);
    vfe_desc_write(&t->f, 0, 1, wbuf(t), 64, 0, 0);
    vfe_vq_publish(&t->f, 0, 0);
    fx_assert_broken(t, "readable descriptor after a writable");
}

static void test_avail_idx_ahead(void **state)
{
    fx *t = &((hs *)*state)->t;
    uint16_t *avail;

    assert_int_equal(fx_session(t, FX_ALL_FEATURES, FX_ALL_PROTOCOL), 0);
    avail = (uint16_t *)t->f.vq[0].avail;
    __atomic_store_n(&avail[1], FX_RING + 1, __ATOMIC_RELEASE);
    fx_assert_broken(t, "avail index");
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, fx_checked_setup, \
                                                 fx_checked_teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_short_header),
        T(test_size_too_large),
        T(test_bad_version),
        T(test_wrong_payload_size),
        T(test_fd_on_fdless_request),
        T(test_kick_without_fd),
        T(test_too_many_fds),
        T(test_mem_table_fd_count),
        T(test_region_overlap),
        T(test_region_overflow),
        T(test_vring_addr_outside),
        T(test_mem_table_replace),
        T(test_unknown_request),
        T(test_desc_loop),
        T(test_indirect_loop),
        T(test_next_out_of_range),
        T(test_head_out_of_range),
        T(test_nested_indirect),
        T(test_indirect_bad_len),
        T(test_indirect_past_region),
        T(test_indirect_not_negotiated),
        T(test_addr_out_of_range),
        T(test_len_past_region),
        T(test_len_overflow),
        T(test_chain_too_many_segments),
        T(test_write_then_read),
        T(test_avail_idx_ahead),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
