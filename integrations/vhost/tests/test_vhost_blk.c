/* SPDX-License-Identifier: MIT */
/*
 * test_vhost_blk.c - the vhost-user-blk device (aioloop/vhost-blk.h)
 * driven by the test frontend: data round trips through split headers
 * and split data, flush, get-id, discard, write zeroes, and a guest's
 * bad requests, each answered with a status and followed by a request
 * that works.  With VBLK_QUEUE_THREAD=1 in the environment, both queues
 * are served on an aiol_iothread (the device's messages stay on the
 * test's loop), so every test runs with the I/O on another thread, and
 * ring stops, memory tables and disconnects reach it there.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include <linux/virtio_blk.h>

#include "aioloop/iothread.h"
#include "aioloop/vhost-blk.h"
#include "vblk.h"
#include "fixture.h"

#define IMG_SECTORS 64

typedef struct bt {
    aiol_loop *loop;
    aiol_iothread *io;    /* VBLK_QUEUE_THREAD=1: serves the queues */
    aiol_vhost_blk *blk;
    vfe f;
    int fd;
    char dir[64], path[96], img[96];
} bt;

static void bt_pump(void *opaque)
{
    aiol_loop_poll(((bt *)opaque)->loop, false);
}

static void bt_start(bt *t, bool read_only)
{
    aiol_vhost_blk_opts o = { .num_queues = 2, .read_only = read_only,
                              .serial = "serial-0123456789abcdefXX" };

    memset(t, 0, sizeof(*t));
    t->f.sock = -1;
    snprintf(t->dir, sizeof(t->dir), "/tmp/aiol-vblk-XXXXXX");
    assert_non_null(mkdtemp(t->dir));
    snprintf(t->path, sizeof(t->path), "%s/sock", t->dir);
    snprintf(t->img, sizeof(t->img), "%s/img", t->dir);
    t->fd = open(t->img, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    assert_true(t->fd >= 0);
    assert_int_equal(ftruncate(t->fd, IMG_SECTORS * 512 + 100), 0);
    assert_int_equal(aiol_loop_new(&t->loop, NULL), 0);
    assert_int_equal(aiol_vhost_blk_new(t->loop, t->fd, &o, &t->blk), 0);
    if (getenv("VBLK_QUEUE_THREAD") != NULL) {
        aiol_vhost_dev *dev = aiol_vhost_blk_dev_get(t->blk);

        assert_int_equal(aiol_iothread_new(NULL, &t->io), 0);
        for (unsigned q = 0; q < 2; q++) {
            assert_int_equal(aiol_vhost_dev_queue_loop_set(
                                 dev, q, aiol_iothread_loop_get(t->io)), 0);
        }
    }
    assert_int_equal(aiol_vhost_dev_listen(aiol_vhost_blk_dev_get(t->blk),
                                           t->path), 0);
    assert_int_equal(vfe_connect(&t->f, t->path, bt_pump, t), 0);
    assert_int_equal(vfe_negotiate(&t->f, FX_ALL_FEATURES, FX_ALL_PROTOCOL),
                     0);
    assert_int_equal(vfe_mem_create(&t->f, FX_RAM, 2), 0);
    assert_int_equal(vfe_set_mem_table(&t->f, false), 0);
    assert_int_equal(vfe_vq_setup(&t->f, 0, FX_RING, false), 0);
}

static void bt_stop(bt *t)
{
    vfe_close(&t->f);
    aiol_vhost_blk_free(t->blk);
    aiol_iothread_free(t->io); /* (after the device: no queue there now) */
    aiol_loop_free(t->loop);
    close(t->fd);
    unlink(t->img);
    unlink(t->path);
    rmdir(t->dir);
}

/* A request on queue 0 (vblk_req()). */
static int req(bt *t, uint32_t type, uint64_t sector, void *data,
               uint32_t len, bool in, unsigned pieces, uint32_t hdr_len,
               uint32_t *used)
{
    return vblk_req(&t->f, 0, type, sector, data, len, in, pieces, hdr_len,
                    used);
}

static void test_blk_write_read_round_trip(void **state)
{
    bt t;
    uint8_t w[8 * 512], r[8 * 512], file[8 * 512];
    uint32_t used;
    aiol_vhost_blk_stats st;

    (void)state;
    bt_start(&t, false);
    assert_true(t.f.features & (1ull << VIRTIO_BLK_F_FLUSH));
    assert_true(t.f.features & (1ull << VIRTIO_BLK_F_DISCARD));
    vblk_pattern(w, sizeof(w), 5);
    assert_int_equal(req(&t, VIRTIO_BLK_T_OUT, 3, w, sizeof(w), false, 3, 16,
                         &used), VIRTIO_BLK_S_OK);
    assert_int_equal(used, 1);
    assert_int_equal(pread(t.fd, file, sizeof(file), 3 * 512),
                     (ssize_t)sizeof(file));
    assert_memory_equal(file, w, sizeof(w));
    assert_int_equal(req(&t, VIRTIO_BLK_T_IN, 3, r, sizeof(r), true, 5, 16,
                         &used), VIRTIO_BLK_S_OK);
    assert_int_equal(used, sizeof(r) + 1);
    assert_memory_equal(r, w, sizeof(w));
    /* the last whole sector, one 512-byte piece */
    assert_int_equal(req(&t, VIRTIO_BLK_T_IN, IMG_SECTORS - 1, r, 512, true,
                         1, 16, &used), VIRTIO_BLK_S_OK);
    assert_int_equal(req(&t, VIRTIO_BLK_T_FLUSH, 0, NULL, 0, false, 1, 16,
                         &used), VIRTIO_BLK_S_OK);
    aiol_vhost_blk_stats_get(t.blk, &st);
    assert_int_equal(st.writes, 1);
    assert_int_equal(st.reads, 2);
    assert_int_equal(st.flushes, 1);
    assert_int_equal(st.ioerr + st.unsupp, 0);
    /* on io_uring all four ran on the loop's ring, else none */
    assert_int_equal(st.on_ring,
                     strcmp(aiol_loop_fdmon_get(t.loop), "io_uring") ? 0 : 4);
    bt_stop(&t);
}

static void test_blk_get_id_and_discard(void **state)
{
    bt t;
    uint8_t id[32], w[4 * 512], r[4 * 512], zero[2 * 512] = {0};
    uint32_t used;
    int s;

    (void)state;
    bt_start(&t, false);
    assert_int_equal(req(&t, VIRTIO_BLK_T_GET_ID, 0, id, 20, true, 2, 16,
                         &used), VIRTIO_BLK_S_OK);
    assert_int_equal(used, 21);
    assert_memory_equal(id, "serial-0123456789abc", 20); /* 20 bytes kept */

    vblk_pattern(w, sizeof(w), 9);
    assert_int_equal(req(&t, VIRTIO_BLK_T_OUT, 8, w, sizeof(w), false, 1, 16,
                         &used), VIRTIO_BLK_S_OK);
    {
        struct virtio_blk_discard_write_zeroes d = { .sector = 9,
                                                     .num_sectors = 2 };

        s = req(&t, VIRTIO_BLK_T_DISCARD, 0, &d, sizeof(d), false, 1, 16,
                &used);
    }
    assert_true(s == VIRTIO_BLK_S_OK || s == VIRTIO_BLK_S_UNSUPP);
    assert_int_equal(req(&t, VIRTIO_BLK_T_IN, 8, r, sizeof(r), true, 2, 16,
                         &used), VIRTIO_BLK_S_OK);
    assert_memory_equal(r, w, 512);                  /* sector 8 kept */
    if (s == VIRTIO_BLK_S_OK) {
        assert_memory_equal(r + 512, zero, 2 * 512); /* 9, 10 punched */
    }
    assert_memory_equal(r + 3 * 512, w + 3 * 512, 512); /* 11 kept */
    bt_stop(&t);
}

/* The device's config space, as the frontend reads it. */
static void get_config(bt *t, struct virtio_blk_config *c)
{
    uint8_t p[12 + sizeof(*c)];
    uint32_t h[3] = { 0, sizeof(*c), 0 };

    memset(p, 0, sizeof(p));
    memcpy(p, h, 12);
    assert_int_equal(vfe_send(&t->f, AIOL__VHOST_GET_CONFIG, 0, p, sizeof(p),
                              NULL, 0), 0);
    assert_int_equal(vfe_recv(&t->f, AIOL__VHOST_GET_CONFIG, p, sizeof(p)),
                     (int)sizeof(p));
    memcpy(c, p + 12, sizeof(*c));
}

/* A write zeroes (one segment, as the config says), with and without
 * the unmap flag, reads back as zeros and leaves its neighbours; the
 * limits QEMU's vhost-user-blk qtest checks against qemu-storage-daemon
 * answer as it does. */
static void test_blk_write_zeroes(void **state)
{
    bt t;
    uint8_t w[6 * 512], r[6 * 512], zero[2 * 512] = {0};
    struct virtio_blk_config c;
    struct virtio_blk_discard_write_zeroes d = { .sector = 31,
                                                 .num_sectors = 2 };
    aiol_vhost_blk_stats st;
    uint32_t used;

    (void)state;
    bt_start(&t, false);
    assert_true(t.f.features & (1ull << VIRTIO_BLK_F_WRITE_ZEROES));
    get_config(&t, &c);
    assert_int_equal(c.max_write_zeroes_sectors, 32768);
    assert_int_equal(c.max_write_zeroes_seg, 1);
    assert_int_equal(c.write_zeroes_may_unmap, 1);
    assert_int_equal(c.max_discard_sectors, 32768);
    for (int unmap = 0; unmap < 2; unmap++) {
        vblk_pattern(w, sizeof(w), 20 + unmap);
        assert_int_equal(req(&t, VIRTIO_BLK_T_OUT, 30, w, sizeof(w), false,
                             1, 16, &used), VIRTIO_BLK_S_OK);
        d.flags = unmap ? VIRTIO_BLK_WRITE_ZEROES_FLAG_UNMAP : 0;
        assert_int_equal(req(&t, VIRTIO_BLK_T_WRITE_ZEROES, 0, &d, sizeof(d),
                             false, 1, 16, &used), VIRTIO_BLK_S_OK);
        assert_int_equal(req(&t, VIRTIO_BLK_T_IN, 30, r, sizeof(r), true, 2,
                             16, &used), VIRTIO_BLK_S_OK);
        assert_memory_equal(r, w, 512);                    /* 30 kept */
        assert_memory_equal(r + 512, zero, 2 * 512);       /* 31, 32 zero */
        assert_memory_equal(r + 3 * 512, w + 3 * 512, 3 * 512);
    }
    /* more than max_write_zeroes_sectors, or past the end: IOERR */
    d.num_sectors = 32769;
    d.flags = 0;
    assert_int_equal(req(&t, VIRTIO_BLK_T_WRITE_ZEROES, 0, &d, sizeof(d),
                         false, 1, 16, &used), VIRTIO_BLK_S_IOERR);
    d.num_sectors = UINT32_MAX;
    assert_int_equal(req(&t, VIRTIO_BLK_T_WRITE_ZEROES, 0, &d, sizeof(d),
                         false, 1, 16, &used), VIRTIO_BLK_S_IOERR);
    d.sector = IMG_SECTORS + 1;
    d.num_sectors = 1;
    assert_int_equal(req(&t, VIRTIO_BLK_T_WRITE_ZEROES, 0, &d, sizeof(d),
                         false, 1, 16, &used), VIRTIO_BLK_S_IOERR);
    /* flags other than unmap: UNSUPP */
    d.sector = 0;
    d.flags = ~VIRTIO_BLK_WRITE_ZEROES_FLAG_UNMAP;
    assert_int_equal(req(&t, VIRTIO_BLK_T_WRITE_ZEROES, 0, &d, sizeof(d),
                         false, 1, 16, &used), VIRTIO_BLK_S_UNSUPP);
    aiol_vhost_blk_stats_get(t.blk, &st);
    assert_int_equal(st.write_zeroes, 6);
    assert_int_equal(st.ioerr, 3);
    assert_int_equal(st.unsupp, 1);
    bt_stop(&t);
}

static void test_blk_bad_requests_get_a_status(void **state)
{
    bt t;
    uint8_t buf[1024];
    uint32_t used;
    aiol_vhost_blk_stats st;

    (void)state;
    bt_start(&t, false);
    vblk_pattern(buf, sizeof(buf), 1);
    /* past the end (64 sectors; the 100-byte tail is not a sector) */
    assert_int_equal(req(&t, VIRTIO_BLK_T_IN, IMG_SECTORS - 1, buf, 1024,
                         true, 2, 16, &used), VIRTIO_BLK_S_IOERR);
    assert_int_equal(req(&t, VIRTIO_BLK_T_OUT, UINT64_MAX - 1, buf, 512,
                         false, 1, 16, &used), VIRTIO_BLK_S_IOERR);
    /* a write just past the last sector would grow the file */
    assert_int_equal(req(&t, VIRTIO_BLK_T_OUT, IMG_SECTORS, buf, 512,
                         false, 1, 16, &used), VIRTIO_BLK_S_IOERR);
    {
        struct stat sb;

        assert_int_equal(fstat(t.fd, &sb), 0);
        assert_int_equal(sb.st_size, IMG_SECTORS * 512 + 100);
    }
    /* not whole sectors */
    assert_int_equal(req(&t, VIRTIO_BLK_T_OUT, 0, buf, 100, false, 1, 16,
                         &used), VIRTIO_BLK_S_IOERR);
    /* a short header */
    assert_int_equal(req(&t, VIRTIO_BLK_T_IN, 0, buf, 512, true, 1, 12,
                         &used), VIRTIO_BLK_S_IOERR);
    /* no header at all */
    assert_int_equal(req(&t, VIRTIO_BLK_T_IN, 0, buf, 512, true, 1, 0,
                         &used), VIRTIO_BLK_S_IOERR);
    /* an unknown type */
    assert_int_equal(req(&t, 77, 0, NULL, 0, false, 1, 16, &used),
                     VIRTIO_BLK_S_UNSUPP);
    /* a discard of two segments (max_discard_seg is 1), one with the
       unmap flag, one with a reserved flag: UNSUPP (virtio 1.1, 5.2.6.2);
       one of half a segment: IOERR */
    {
        struct virtio_blk_discard_write_zeroes d[2] = {
            { .sector = 0, .num_sectors = 1 }, { .sector = 2, .num_sectors = 1 },
        };

        assert_int_equal(req(&t, VIRTIO_BLK_T_DISCARD, 0, d, sizeof(d),
                             false, 1, 16, &used), VIRTIO_BLK_S_UNSUPP);
        d[0].flags = VIRTIO_BLK_WRITE_ZEROES_FLAG_UNMAP;
        assert_int_equal(req(&t, VIRTIO_BLK_T_DISCARD, 0, d, sizeof(d[0]),
                             false, 1, 16, &used), VIRTIO_BLK_S_UNSUPP);
        d[0].flags = 1u << 5;
        assert_int_equal(req(&t, VIRTIO_BLK_T_DISCARD, 0, d, sizeof(d[0]),
                             false, 1, 16, &used), VIRTIO_BLK_S_UNSUPP);
        assert_int_equal(req(&t, VIRTIO_BLK_T_DISCARD, 0, d, 8, false, 1,
                             16, &used), VIRTIO_BLK_S_IOERR);
    }
    aiol_vhost_blk_stats_get(t.blk, &st);
    assert_int_equal(st.ioerr, 7);
    assert_int_equal(st.unsupp, 4);
    /* and the device goes on serving */
    assert_int_equal(req(&t, VIRTIO_BLK_T_OUT, 1, buf, 512, false, 1, 16,
                         &used), VIRTIO_BLK_S_OK);
    assert_true(aiol_vhost_dev_is_connected(aiol_vhost_blk_dev_get(t.blk)));
    bt_stop(&t);
}

static void test_blk_read_only(void **state)
{
    bt t;
    uint8_t buf[512], file[512];
    uint32_t used;

    (void)state;
    bt_start(&t, true);
    assert_true(t.f.features & (1ull << VIRTIO_BLK_F_RO));
    assert_false(t.f.features & (1ull << VIRTIO_BLK_F_DISCARD));
    assert_false(t.f.features & (1ull << VIRTIO_BLK_F_WRITE_ZEROES));
    assert_int_equal(pread(t.fd, file, 512, 0), 512);
    vblk_pattern(buf, sizeof(buf), 3);
    assert_int_equal(req(&t, VIRTIO_BLK_T_OUT, 0, buf, 512, false, 1, 16,
                         &used), VIRTIO_BLK_S_IOERR);
    assert_int_equal(pread(t.fd, buf, 512, 0), 512);
    assert_memory_equal(buf, file, 512);             /* untouched */
    assert_int_equal(req(&t, VIRTIO_BLK_T_IN, 0, buf, 512, true, 1, 16,
                         &used), VIRTIO_BLK_S_OK);
    bt_stop(&t);
}

/* ------------------------------------------- requests still in flight */

#define NFLIGHT 4 /* (4 descriptors each: the whole 16-entry ring) */

/* NFLIGHT one-sector writes kicked on queue 0, sectors 20..; one
 * non-blocking poll runs the kick handler, which on io_uring puts them on
 * the ring, and does not wait for them. */
static void writes_in_flight(bt *t, uint8_t (*w)[512], vblk_pending *p)
{
    for (unsigned i = 0; i < NFLIGHT; i++) {
        vblk_pattern(w[i], 512, 60 + i);
        vblk_add(&t->f, 0, VIRTIO_BLK_T_OUT, 20 + i, w[i], 512, false, 1, 16,
                 &p[i]);
    }
    aiol_loop_poll(t->loop, false);
}

/* Every write reached the image (and, with @p, was answered OK). */
static void assert_writes_done(bt *t, uint8_t (*w)[512],
                               const vblk_pending *p)
{
    uint8_t got[512];
    aiol_vhost_blk_stats st;

    for (unsigned i = 0; i < NFLIGHT; i++) {
        if (p != NULL) {
            assert_int_equal(*p[i].status, VIRTIO_BLK_S_OK);
        }
        assert_int_equal(pread(t->fd, got, 512, (20 + i) * 512), 512);
        assert_memory_equal(got, w[i], 512);
    }
    aiol_vhost_blk_stats_get(t->blk, &st);
    assert_int_equal(st.writes, NFLIGHT);
}

/*
 * GET_VRING_BASE, SET_MEM_TABLE and a disconnect while requests are on
 * the io_uring ring: each waits for them (they point into guest memory),
 * so the base counts them, every one is answered before the reply, and
 * nothing is written after the memory is gone.  On the other fd monitors
 * the writes are done before the poll returns, and the same holds.
 */
enum { AT_STOP, AT_MEM_TABLE, AT_DISCONNECT };

static void in_flight_at(int what)
{
    uint8_t w[NFLIGHT][512];
    vblk_pending p[NFLIGHT];
    aiol_vhost_dev *dev;
    bt t;

    bt_start(&t, false);
    dev = aiol_vhost_blk_dev_get(t.blk);
    writes_in_flight(&t, w, p);
    switch (what) {
    case AT_STOP:
        /* (a write's chain: a split header, data, status) */
        assert_int_equal(vfe_vq_stop(&t.f, 0),
                         vfe_ring_units(&t.f, NFLIGHT, 4));
        break;
    case AT_MEM_TABLE:
        assert_int_equal(vfe_set_mem_table(&t.f, true), 0); /* not -EBUSY */
        break;
    case AT_DISCONNECT:
        vfe_close(&t.f); /* (its memory goes; the device's maps stay until
                            it has stopped the rings) */
        for (int i = 0; i < 1000 && aiol_vhost_dev_is_connected(dev); i++) {
            aiol_loop_poll(t.loop, false);
            usleep(100);
        }
        assert_false(aiol_vhost_dev_is_connected(dev));
        assert_writes_done(&t, w, NULL);
        bt_stop(&t);
        return;
    }
    assert_int_equal(vfe_vq_used_pending(&t.f, 0), NFLIGHT);
    assert_writes_done(&t, w, p);
    bt_stop(&t);
}

static void test_blk_stop_with_requests_in_flight(void **state)
{
    (void)state;
    in_flight_at(AT_STOP);
}

static void test_blk_mem_table_with_requests_in_flight(void **state)
{
    (void)state;
    in_flight_at(AT_MEM_TABLE);
}

static void test_blk_disconnect_with_requests_in_flight(void **state)
{
    (void)state;
    in_flight_at(AT_DISCONNECT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_blk_write_read_round_trip),
        cmocka_unit_test(test_blk_get_id_and_discard),
        cmocka_unit_test(test_blk_write_zeroes),
        cmocka_unit_test(test_blk_bad_requests_get_a_status),
        cmocka_unit_test(test_blk_read_only),
        cmocka_unit_test(test_blk_stop_with_requests_in_flight),
        cmocka_unit_test(test_blk_mem_table_with_requests_in_flight),
        cmocka_unit_test(test_blk_disconnect_with_requests_in_flight),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
