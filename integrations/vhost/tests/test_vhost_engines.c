/* SPDX-License-Identifier: MIT */
/*
 * test_vhost_engines.c - where the vhost-user-blk device's I/O runs
 * (aioloop/vhost-blk.h, aiol_vhost_blk_aio): every engine moves the data
 * and says so in its counters; one request stalled in the kernel keeps
 * neither another queue of its device nor another device on the same loop
 * from completing; an O_DIRECT image is served with O_DIRECT, through a
 * bounce buffer where the guest's buffers are not aligned and through the
 * buffered descriptor where the offset is not (a 4096-byte-sector loop
 * device, where one can be set up).
 *
 * The stall: this executable wraps preadv (link-time, -Wl,--wrap), and a
 * read of the gated file at the gated offset waits until the test opens
 * the gate, as a read from a slow disk would (and the page cache has not
 * got it: preadv2 with RWF_NOWAIT misses there).  It also wraps
 * fallocate, to refuse it as a file system without it would.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <linux/virtio_blk.h>

#include "aioloop/vhost-blk.h"
#include "fixture.h"
#include "vblk.h"

#define IMG_BYTES (1u << 20)
#define NQ 2

/* ----------------------------------------------------- the preadv gate */

static pthread_mutex_t gate_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cond = PTHREAD_COND_INITIALIZER;
static int gate_fd = -1;       /* gate_lock */
static off_t gate_off = -1;    /* gate_lock */
static int gate_held;          /* reads waiting at the gate; gate_lock */

ssize_t __real_preadv64(int fd, const struct iovec *iov, int n, off_t off);
ssize_t __wrap_preadv64(int fd, const struct iovec *iov, int n, off_t off);

ssize_t __wrap_preadv64(int fd, const struct iovec *iov, int n, off_t off)
{
    pthread_mutex_lock(&gate_lock);
    if (fd == gate_fd && off == gate_off) {
        gate_held++;
        pthread_cond_broadcast(&gate_cond);
        while (gate_fd == fd && gate_off == off) {
            pthread_cond_wait(&gate_cond, &gate_lock);
        }
        gate_held--;
    }
    pthread_mutex_unlock(&gate_lock);
    return __real_preadv64(fd, iov, n, off);
}

/* The page cache's answer to a read without blocking (RWF_NOWAIT): at
 * the gate a miss, as a slow disk's block would be; with nowait_refused
 * always a miss.  Counts the tries. */
static int nowait_refused; /* (atomic) */
static int nowait_tries;   /* (atomic) */

ssize_t __real_preadv64v2(int fd, const struct iovec *iov, int n, off_t off,
                          int flags);
ssize_t __wrap_preadv64v2(int fd, const struct iovec *iov, int n, off_t off,
                          int flags);

ssize_t __wrap_preadv64v2(int fd, const struct iovec *iov, int n, off_t off,
                          int flags)
{
    bool gated;

    __atomic_fetch_add(&nowait_tries, 1, __ATOMIC_RELAXED);
    pthread_mutex_lock(&gate_lock);
    gated = fd == gate_fd && off == gate_off;
    pthread_mutex_unlock(&gate_lock);
    if ((flags & RWF_NOWAIT) &&
        (gated || __atomic_load_n(&nowait_refused, __ATOMIC_RELAXED))) {
        errno = EAGAIN;
        return -1;
    }
    return __real_preadv64v2(fd, iov, n, off, flags);
}

static void gate_close(int fd, off_t off)
{
    pthread_mutex_lock(&gate_lock);
    gate_fd = fd;
    gate_off = off;
    pthread_mutex_unlock(&gate_lock);
}

static void gate_open(void)
{
    pthread_mutex_lock(&gate_lock);
    gate_fd = -1;
    gate_off = -1;
    pthread_cond_broadcast(&gate_cond);
    pthread_mutex_unlock(&gate_lock);
}

static int gate_waiting(void)
{
    int n;

    pthread_mutex_lock(&gate_lock);
    n = gate_held;
    pthread_mutex_unlock(&gate_lock);
    return n;
}

/* ------------------------------------------ fallocate, refused at will */

static int fallocate_refused; /* (atomic: workers read it) */

int __real_fallocate64(int fd, int mode, off_t off, off_t len);
int __wrap_fallocate64(int fd, int mode, off_t off, off_t len);

int __wrap_fallocate64(int fd, int mode, off_t off, off_t len)
{
    if (__atomic_load_n(&fallocate_refused, __ATOMIC_RELAXED)) {
        errno = EOPNOTSUPP;
        return -1;
    }
    return __real_fallocate64(fd, mode, off, len);
}

/* ------------------------------------------------------------ devices */

typedef struct dev {
    aiol_vhost_blk *blk;
    vfe f;
    int fd;
    char sock[96], img[128];
} dev;

typedef struct et {
    aiol_loop *loop;
    char dir[64];
    dev d[2];
} et;

static void et_pump(void *opaque)
{
    aiol_loop_poll(((et *)opaque)->loop, false);
}

static void et_init(et *t)
{
    memset(t, 0, sizeof(*t));
    snprintf(t->dir, sizeof(t->dir), "/tmp/aiol-veng-XXXXXX");
    assert_non_null(mkdtemp(t->dir));
    assert_int_equal(aiol_loop_new(&t->loop, NULL), 0);
}

/* An image on a real filesystem (O_DIRECT: not tmpfs), @flags extra. */
static int image_open(dev *d, const char *dir, unsigned i, int flags)
{
    int fd;

    snprintf(d->img, sizeof(d->img), "%s/aiol-veng-img-%d-%u", dir,
             (int)getpid(), i);
    fd = open(d->img, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | flags, 0600);
    if (fd >= 0) {
        assert_int_equal(ftruncate(fd, IMG_BYTES), 0);
    }
    return fd;
}

/* Device @i of @t on the open image @fd with @aio; connects a frontend
 * with NQ queues.  Returns aiol_vhost_blk_new()'s result. */
static int dev_start(et *t, unsigned i, int fd, aiol_vhost_blk_aio aio)
{
    dev *d = &t->d[i];
    aiol_vhost_blk_opts o = { .num_queues = NQ, .aio = aio,
                              .max_workers = 4 };
    int ret;

    d->f.sock = -1;
    d->fd = fd;
    ret = aiol_vhost_blk_new(t->loop, fd, &o, &d->blk);
    if (ret < 0) {
        return ret;
    }
    snprintf(d->sock, sizeof(d->sock), "%s/sock%u", t->dir, i);
    assert_int_equal(aiol_vhost_dev_listen(aiol_vhost_blk_dev_get(d->blk),
                                           d->sock), 0);
    assert_int_equal(vfe_connect(&d->f, d->sock, et_pump, t), 0);
    assert_int_equal(vfe_negotiate(&d->f, FX_ALL_FEATURES, FX_ALL_PROTOCOL),
                     0);
    assert_int_equal(vfe_mem_create(&d->f, FX_RAM, 2), 0);
    assert_int_equal(vfe_set_mem_table(&d->f, false), 0);
    for (unsigned q = 0; q < NQ; q++) {
        assert_int_equal(vfe_vq_setup(&d->f, q, FX_RING, false), 0);
    }
    return 0;
}

static void et_fini(et *t)
{
    for (unsigned i = 0; i < 2; i++) {
        dev *d = &t->d[i];

        if (d->blk != NULL) {
            vfe_close(&d->f);
            aiol_vhost_blk_free(d->blk);
            unlink(d->sock);
        }
        if (d->fd > 0) {
            close(d->fd);
        }
        if (d->img[0] != '\0') {
            unlink(d->img);
        }
    }
    aiol_loop_free(t->loop);
    rmdir(t->dir);
}

static aiol_vhost_blk_stats stats(dev *d)
{
    aiol_vhost_blk_stats st;

    aiol_vhost_blk_stats_get(d->blk, &st);
    return st;
}

/*
 * A request whose data is one buffer aligned to @align (plus @skew
 * bytes), on queue @q: its status.  Reads copy into @data.
 */
static int areq(dev *d, unsigned q, uint32_t type, uint64_t sector,
                void *data, uint32_t len, size_t align, size_t skew)
{
    struct virtio_blk_outhdr h = { .type = type, .sector = sector };
    bool in = type == VIRTIO_BLK_T_IN;
    uint64_t hg = vfe_alloc(&d->f, 1, sizeof(h), 8);
    uint64_t dg = vfe_alloc(&d->f, in ? 0 : 1, len + skew, align) + skew;
    uint64_t sg = vfe_alloc(&d->f, 0, 1, 1);
    vfe_buf b[3] = { { hg, sizeof(h), false }, { dg, len, in },
                     { sg, 1, true } };
    uint32_t id, used;
    uint8_t *status = vfe_gpa(&d->f, sg);

    memcpy(vfe_gpa(&d->f, hg), &h, sizeof(h));
    if (!in) {
        memcpy(vfe_gpa(&d->f, dg), data, len);
    }
    *status = 0xAA;
    vfe_vq_add(&d->f, q, b, 3, false);
    vfe_vq_kick(&d->f, q);
    assert_int_equal(vfe_vq_wait_used(&d->f, q, &id, &used), 0);
    if (in) {
        memcpy(data, vfe_gpa(&d->f, dg), len);
    }
    return *status;
}

/* Writes then reads back @len bytes at @sector on queue @q. */
static void round_trip(dev *d, unsigned q, uint64_t sector, uint32_t len,
                       size_t align, size_t skew, unsigned seed)
{
    uint8_t *w = malloc(len), *r = malloc(len);

    assert_non_null(w);
    assert_non_null(r);
    vblk_pattern(w, len, seed);
    assert_int_equal(areq(d, q, VIRTIO_BLK_T_OUT, sector, w, len, align,
                          skew), VIRTIO_BLK_S_OK);
    memset(r, 0, len);
    assert_int_equal(areq(d, q, VIRTIO_BLK_T_IN, sector, r, len, align,
                          skew), VIRTIO_BLK_S_OK);
    assert_memory_equal(r, w, len);
    free(w);
    free(r);
}

static bool loop_on_uring(et *t)
{
    return strcmp(aiol_loop_fdmon_get(t->loop), "io_uring") == 0;
}

/* -------------------------------------------------------------- tests */

/* Without O_DIRECT, AUTO is the loop's ring on io_uring, else threads. */
static void test_auto_engine(void **state)
{
    et t;
    aiol_vhost_blk_stats st;

    (void)state;
    et_init(&t);
    assert_int_equal(dev_start(&t, 0, image_open(&t.d[0], t.dir, 0, 0),
                               AIOL_VHOST_BLK_AIO_AUTO), 0);
    round_trip(&t.d[0], 1, 8, 4096, 4096, 0, 1);
    st = stats(&t.d[0]);
    assert_int_equal(st.on_ring, loop_on_uring(&t) ? 2 : 0);
    /* (threads: the page cache may have served some on the loop) */
    assert_int_equal(st.on_pool + st.nowait, loop_on_uring(&t) ? 0 : 2);
    et_fini(&t);
}

static void test_threads_engine(void **state)
{
    et t;
    aiol_vhost_blk_stats st;
    uint32_t used;

    (void)state;
    et_init(&t);
    assert_int_equal(dev_start(&t, 0, image_open(&t.d[0], t.dir, 0, 0),
                               AIOL_VHOST_BLK_AIO_THREADS), 0);
    for (unsigned q = 0; q < NQ; q++) {
        round_trip(&t.d[0], q, 16 * q, 3 * 512, 8, 0, q);
    }
    assert_int_equal(vblk_req(&t.d[0].f, 0, VIRTIO_BLK_T_FLUSH, 0, NULL, 0,
                              false, 1, 16, &used), VIRTIO_BLK_S_OK);
    st = stats(&t.d[0]);
    /* (each read follows its write: the page cache has it) */
    assert_true(st.nowait >= NQ);
    assert_int_equal(st.on_pool + st.nowait, 2 * NQ + 1);
    assert_int_equal(st.on_ring + st.on_aio + st.bounced + st.buffered, 0);
    et_fini(&t);
}

/* A request on a started device: one poll runs its kick (the I/O goes to
 * the engine), then one blocking poll must see it completed, pushed and
 * signalled: the engine's completion batch notifies in the iteration
 * that reaps it, with no bottom half left for a later one. */
static void assert_completed_in_one_wakeup(dev *d, aiol_loop *loop)
{
    vblk_pending p;
    uint64_t iters;
    aiol_loop_stats ls;

    while (aiol_loop_poll(loop, false)) {
        /* (the set-up's last messages) */
    }
    vblk_add(&d->f, 0, VIRTIO_BLK_T_IN, 3, NULL, 4096, true, 1, 16, &p);
    aiol_loop_poll(loop, false);
    assert_int_equal(*p.status, 0xAA); /* (vfe_vq_used_pending() pumps) */
    aiol_loop_stats_get(loop, &ls);
    iters = ls.iterations;
    aiol_loop_poll(loop, true);
    aiol_loop_stats_get(loop, &ls);
    assert_int_equal(ls.iterations, iters + 1);
    assert_int_equal(*p.status, VIRTIO_BLK_S_OK);
    assert_int_equal(vfe_vq_calls(&d->f, 0), 1);
    assert_int_equal(vfe_vq_used_pending(&d->f, 0), 1);
}

static void test_threads_completion_one_wakeup(void **state)
{
    et t;

    (void)state;
    et_init(&t);
    assert_int_equal(dev_start(&t, 0, image_open(&t.d[0], t.dir, 0, 0),
                               AIOL_VHOST_BLK_AIO_THREADS), 0);
    __atomic_store_n(&nowait_refused, 1, __ATOMIC_RELAXED); /* a worker's */
    assert_completed_in_one_wakeup(&t.d[0], t.loop);
    __atomic_store_n(&nowait_refused, 0, __ATOMIC_RELAXED);
    et_fini(&t);
}

/* io_uring on any fd monitor: the loop's ring or the device's own. */
static void test_io_uring_engine(void **state)
{
    et t;
    aiol_vhost_blk_stats st;
    uint32_t used;
    int ret;

    (void)state;
    et_init(&t);
    ret = dev_start(&t, 0, image_open(&t.d[0], t.dir, 0, 0),
                    AIOL_VHOST_BLK_AIO_IO_URING);
    if (ret == -ENOTSUP || ret == -EPERM || ret == -ENOSYS) {
        et_fini(&t);
        skip(); /* (no io_uring here) */
    }
    assert_int_equal(ret, 0);
    round_trip(&t.d[0], 0, 0, 8 * 512, 8, 0, 3);
    round_trip(&t.d[0], 1, 100, 512, 8, 0, 4);
    assert_int_equal(vblk_req(&t.d[0].f, 1, VIRTIO_BLK_T_FLUSH, 0, NULL, 0,
                              false, 1, 16, &used), VIRTIO_BLK_S_OK);
    st = stats(&t.d[0]);
    assert_int_equal(st.on_ring, 5);
    assert_int_equal(st.on_pool + st.on_aio, 0);
    et_fini(&t);
}

/* A directory on a filesystem with O_DIRECT (/var/tmp, not tmpfs), or
 * NULL. */
static const char *direct_dir(void)
{
    static const char *dirs[] = { "/var/tmp", "." };

    for (unsigned i = 0; i < 2; i++) {
        char p[64];
        int fd;

        snprintf(p, sizeof(p), "%s/aiol-veng-probe-%d", dirs[i],
                 (int)getpid());
        fd = open(p, O_RDWR | O_CREAT | O_DIRECT | O_CLOEXEC, 0600);
        if (fd >= 0) {
            close(fd);
            unlink(p);
            return dirs[i];
        }
    }
    return NULL;
}

/* direct_dir(), or the test is skipped (no filesystem with O_DIRECT). */
static const char *direct_dir_or_skip(void)
{
    const char *dir = direct_dir();

    if (dir == NULL) {
        skip();
    }
    return dir;
}

/*
 * The threads engine's page-cache path, on a real file system: a read of
 * cached data is served on the loop's thread (RWF_NOWAIT), a miss goes to
 * a worker; after 64 misses in a row the page cache is not tried for the
 * next 256 requests.
 */
static void test_threads_page_cache_first(void **state)
{
    const char *dir = direct_dir_or_skip();
    aiol_vhost_blk_stats st;
    uint8_t w[4096], r[4096];
    int tries = 0;
    et t;

    (void)state;
    et_init(&t);
    assert_int_equal(dev_start(&t, 0, image_open(&t.d[0], dir, 0, 0),
                               AIOL_VHOST_BLK_AIO_THREADS), 0);
    vblk_pattern(w, sizeof(w), 12);
    assert_int_equal(areq(&t.d[0], 0, VIRTIO_BLK_T_OUT, 40, w, 4096, 8, 0),
                     VIRTIO_BLK_S_OK);
    assert_int_equal(fdatasync(t.d[0].fd), 0);
    st = stats(&t.d[0]);
    assert_int_equal(areq(&t.d[0], 0, VIRTIO_BLK_T_IN, 40, r, 4096, 8, 0),
                     VIRTIO_BLK_S_OK);                    /* cached */
    assert_memory_equal(r, w, 4096);
    assert_int_equal(stats(&t.d[0]).nowait, st.nowait + 1);
    assert_int_equal(stats(&t.d[0]).on_pool, st.on_pool);
    /* a miss (the page cache has not got it: the wrap says so; a page
       really dropped may come back at once from a fast disk, the kernel
       starting its read before it answers) goes to a worker */
    __atomic_store_n(&nowait_refused, 1, __ATOMIC_RELAXED);
    memset(r, 0, sizeof(r));
    assert_int_equal(areq(&t.d[0], 1, VIRTIO_BLK_T_IN, 40, r, 4096, 8, 0),
                     VIRTIO_BLK_S_OK);
    assert_memory_equal(r, w, 4096);
    assert_int_equal(stats(&t.d[0]).nowait, st.nowait + 1);
    assert_int_equal(stats(&t.d[0]).on_pool, st.on_pool + 1);
    __atomic_store_n(&nowait_refused, 0, __ATOMIC_RELAXED);
    assert_int_equal(areq(&t.d[0], 1, VIRTIO_BLK_T_IN, 40, r, 4096, 8, 0),
                     VIRTIO_BLK_S_OK);        /* a hit: the misses reset */
    assert_int_equal(stats(&t.d[0]).nowait, st.nowait + 2);

    /* a cold cache: 64 misses, then 256 requests without a try */
    __atomic_store_n(&nowait_refused, 1, __ATOMIC_RELAXED);
    for (int i = 0; i < 64 + 256 + 1; i++) {
        if (i == 64) {
            tries = __atomic_load_n(&nowait_tries, __ATOMIC_RELAXED);
        }
        assert_int_equal(areq(&t.d[0], 0, VIRTIO_BLK_T_IN, i % 64, r, 512,
                              8, 0), VIRTIO_BLK_S_OK);
        if (i == 64 + 255) {
            assert_int_equal(__atomic_load_n(&nowait_tries,
                                             __ATOMIC_RELAXED), tries);
        }
    }
    assert_int_equal(__atomic_load_n(&nowait_tries, __ATOMIC_RELAXED),
                     tries + 1);                          /* tried again */
    __atomic_store_n(&nowait_refused, 0, __ATOMIC_RELAXED);
    et_fini(&t);
}

/* Linux AIO on O_DIRECT: aligned buffers go straight to the disk, others
 * through a bounce buffer; flushes through the pool.  Without O_DIRECT
 * native is refused, as qemu-storage-daemon refuses aio=native without
 * cache.direct=on. */
static void test_native_engine_direct(void **state)
{
    const char *dir = direct_dir_or_skip();
    aiol_vhost_blk_stats st;
    uint32_t used;
    et t;
    int fd;

    (void)state;
    et_init(&t);
    fd = image_open(&t.d[1], dir, 1, 0);
    assert_true(fd >= 0);
    assert_int_equal(dev_start(&t, 1, fd, AIOL_VHOST_BLK_AIO_NATIVE),
                     -EINVAL);
    t.d[1].fd = fd;

    fd = image_open(&t.d[0], dir, 0, O_DIRECT);
    assert_true(fd >= 0);
    assert_int_equal(dev_start(&t, 0, fd, AIOL_VHOST_BLK_AIO_NATIVE), 0);
    round_trip(&t.d[0], 0, 8, 8192, 4096, 0, 5);      /* aligned */
    st = stats(&t.d[0]);
    assert_int_equal(st.on_aio, 2);
    assert_int_equal(st.bounced, 0);
    round_trip(&t.d[0], 1, 64, 4096, 4096, 8, 6);     /* buffers unaligned */
    st = stats(&t.d[0]);
    assert_int_equal(st.on_aio, 4);
    assert_int_equal(st.bounced, 2);
    assert_int_equal(vblk_req(&t.d[0].f, 0, VIRTIO_BLK_T_FLUSH, 0, NULL, 0,
                              false, 1, 16, &used), VIRTIO_BLK_S_OK);
    st = stats(&t.d[0]);
    assert_int_equal(st.on_pool, 1);
    assert_int_equal(st.ioerr, 0);
    et_fini(&t);
}

/* @t with device 0 on Linux AIO, an O_DIRECT image in direct_dir() (the
 * test is skipped where there is none). */
static void native_direct_start(et *t)
{
    const char *dir = direct_dir_or_skip();
    int fd;

    et_init(t);
    fd = image_open(&t->d[0], dir, 0, O_DIRECT);
    assert_true(fd >= 0);
    assert_int_equal(dev_start(t, 0, fd, AIOL_VHOST_BLK_AIO_NATIVE), 0);
}

static void test_native_completion_one_wakeup(void **state)
{
    et t;

    (void)state;
    native_direct_start(&t);
    assert_completed_in_one_wakeup(&t.d[0], t.loop);
    et_fini(&t);
}

/* A discard or write zeroes of @nsect sectors at @sector on queue @q
 * (vblk_req()'s layout): its status. */
static int dz_req(dev *d, unsigned q, uint32_t type, uint64_t sector,
                  uint32_t nsect, bool unmap)
{
    struct virtio_blk_discard_write_zeroes z = {
        .sector = sector, .num_sectors = nsect,
        .flags = unmap ? VIRTIO_BLK_WRITE_ZEROES_FLAG_UNMAP : 0 };
    uint32_t used;

    return vblk_req(&d->f, q, type, 0, &z, sizeof(z), false, 1, 16, &used);
}

/* Whether sectors [@sector, +@nsect) of @d's image are zeros, and the
 * sector before and after still hold @w's pattern (written at @base). */
static void assert_zeroed(dev *d, uint64_t base, const uint8_t *w,
                          uint64_t sector, uint32_t nsect)
{
    size_t len = (size_t)(nsect + 2) * 512;
    uint8_t *r = malloc(len), *zero = calloc(nsect, 512);

    assert_non_null(r);
    assert_non_null(zero);
    assert_int_equal(areq(d, 0, VIRTIO_BLK_T_IN, sector - 1, r,
                          (uint32_t)len, 4096, 0), VIRTIO_BLK_S_OK);
    assert_memory_equal(r, w + (sector - 1 - base) * 512, 512);
    assert_memory_equal(r + 512, zero, (size_t)nsect * 512);
    assert_memory_equal(r + len - 512, w + (sector + nsect - base) * 512,
                        512);
    free(r);
    free(zero);
}

/*
 * Write zeroes on an O_DIRECT image where the file system refuses
 * fallocate: the pool writes zeros instead, straight to the disk where
 * the range is aligned and through the buffered descriptor where it is
 * not; with fallocate, unmap punches a hole.  No write zeroes runs on a
 * ring or on Linux AIO; a discard refused by the file system is UNSUPP.
 */
static void test_write_zeroes_fallback(void **state)
{
    aiol_vhost_blk_stats st;
    uint8_t w[64 * 512];
    et t;

    (void)state;
    native_direct_start(&t);
    vblk_pattern(w, sizeof(w), 11);
    assert_int_equal(areq(&t.d[0], 0, VIRTIO_BLK_T_OUT, 64, w, sizeof(w),
                          4096, 0), VIRTIO_BLK_S_OK);
    __atomic_store_n(&fallocate_refused, 1, __ATOMIC_RELAXED);
    assert_int_equal(dz_req(&t.d[0], 1, VIRTIO_BLK_T_WRITE_ZEROES, 72, 16,
                            true), VIRTIO_BLK_S_OK);     /* 4096-aligned */
    assert_zeroed(&t.d[0], 64, w, 72, 16);
    st = stats(&t.d[0]);
    assert_int_equal(st.buffered, 0);
    assert_int_equal(dz_req(&t.d[0], 0, VIRTIO_BLK_T_WRITE_ZEROES, 99, 3,
                            false), VIRTIO_BLK_S_OK);    /* not aligned */
    assert_zeroed(&t.d[0], 64, w, 99, 3);
    assert_int_equal(dz_req(&t.d[0], 0, VIRTIO_BLK_T_DISCARD, 110, 2,
                            false), VIRTIO_BLK_S_UNSUPP);
    __atomic_store_n(&fallocate_refused, 0, __ATOMIC_RELAXED);
    assert_int_equal(dz_req(&t.d[0], 1, VIRTIO_BLK_T_WRITE_ZEROES, 120, 5,
                            true), VIRTIO_BLK_S_OK);
    assert_zeroed(&t.d[0], 64, w, 120, 5);
    st = stats(&t.d[0]);
    assert_int_equal(st.write_zeroes, 3);
    assert_int_equal(st.on_pool, 4);
    assert_int_equal(st.ioerr, 0);
    assert_int_equal(st.unsupp, 1);
    et_fini(&t);
}

/*
 * One read stalls in a worker (a slow disk).  Meanwhile the device's
 * other queue and a second device on the same loop and thread complete
 * their requests; the stalled one completes once the disk answers.
 */
static void test_stall_blocks_nobody_else(void **state)
{
    et t;
    vblk_pending p;
    uint8_t buf[512];

    (void)state;
    et_init(&t);
    for (unsigned i = 0; i < 2; i++) {
        assert_int_equal(dev_start(&t, i, image_open(&t.d[i], t.dir, i, 0),
                                   AIOL_VHOST_BLK_AIO_THREADS), 0);
    }
    gate_close(t.d[0].fd, 7 * 512);
    vblk_add(&t.d[0].f, 0, VIRTIO_BLK_T_IN, 7, NULL, 512, true, 1, 16, &p);
    for (int i = 0; i < 10000 && gate_waiting() == 0; i++) {
        aiol_loop_poll(t.loop, false);
        usleep(100);
    }
    assert_int_equal(gate_waiting(), 1);

    round_trip(&t.d[0], 1, 32, 2048, 8, 0, 7);  /* the other queue */
    round_trip(&t.d[1], 0, 7, 512, 8, 0, 8);    /* the other device */
    round_trip(&t.d[1], 1, 9, 4096, 8, 0, 9);
    assert_int_equal(vfe_vq_used_pending(&t.d[0].f, 0), 0);
    assert_int_equal(*p.status, 0xAA);          /* still on the disk */

    gate_open();
    memset(buf, 0, sizeof(buf));
    {
        uint32_t id, used;

        assert_int_equal(vfe_vq_wait_used(&t.d[0].f, 0, &id, &used), 0);
    }
    assert_int_equal(*p.status, VIRTIO_BLK_S_OK);
    assert_memory_equal(p.data, buf, sizeof(buf)); /* (a hole: zeros) */
    et_fini(&t);
}

/*
 * An O_DIRECT block device with 4096-byte sectors (a loop device): the
 * guest still sees 512-byte sectors; a request not aligned to 4096 goes
 * to the buffered descriptor, an aligned one straight to the device, and
 * each reads back what the other wrote.  The capacity is the device's.
 */
static void test_block_device_4k_sectors(void **state)
{
    const char *dir = direct_dir();
    char cmd[256], loopdev[64] = "";
    aiol_vhost_blk_stats st;
    uint8_t w[512], r[4096];
    FILE *out;
    et t;
    int fd;

    (void)state;
    if (dir == NULL || geteuid() != 0) {
        skip();
    }
    et_init(&t);
    fd = image_open(&t.d[0], dir, 0, 0);
    assert_true(fd >= 0);
    close(fd);
    snprintf(cmd, sizeof(cmd),
             "losetup --find --show --sector-size 4096 %s 2>/dev/null",
             t.d[0].img);
    out = popen(cmd, "r");
    if (out == NULL || fgets(loopdev, sizeof(loopdev), out) == NULL) {
        if (out != NULL) {
            pclose(out);
        }
        et_fini(&t);
        skip(); /* (no loop devices here) */
    }
    pclose(out);
    loopdev[strcspn(loopdev, "\n")] = '\0';
    fd = open(loopdev, O_RDWR | O_DIRECT | O_CLOEXEC);
    assert_true(fd >= 0);
    assert_int_equal(dev_start(&t, 0, fd, AIOL_VHOST_BLK_AIO_AUTO), 0);

    vblk_pattern(w, sizeof(w), 10);
    assert_int_equal(areq(&t.d[0], 0, VIRTIO_BLK_T_OUT, 9, w, 512, 4096, 0),
                     VIRTIO_BLK_S_OK);                 /* 512 at 4608 */
    st = stats(&t.d[0]);
    assert_int_equal(st.buffered, 1);
    assert_int_equal(areq(&t.d[0], 1, VIRTIO_BLK_T_IN, 8, r, 4096, 4096, 0),
                     VIRTIO_BLK_S_OK);                 /* aligned */
    assert_memory_equal(r + 512, w, 512);
    st = stats(&t.d[0]);
    assert_int_equal(st.buffered, 1);
    /* the last sector is in range, the one after it is not */
    assert_int_equal(areq(&t.d[0], 0, VIRTIO_BLK_T_IN, IMG_BYTES / 512 - 8,
                          r, 4096, 4096, 0), VIRTIO_BLK_S_OK);
    assert_int_equal(areq(&t.d[0], 0, VIRTIO_BLK_T_IN, IMG_BYTES / 512, r,
                          512, 4096, 0), VIRTIO_BLK_S_IOERR);
    et_fini(&t);
    snprintf(cmd, sizeof(cmd), "losetup -d %s", loopdev);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_auto_engine),
        cmocka_unit_test(test_threads_engine),
        cmocka_unit_test(test_threads_completion_one_wakeup),
        cmocka_unit_test(test_threads_page_cache_first),
        cmocka_unit_test(test_io_uring_engine),
        cmocka_unit_test(test_native_engine_direct),
        cmocka_unit_test(test_native_completion_one_wakeup),
        cmocka_unit_test(test_write_zeroes_fallback),
        cmocka_unit_test(test_stall_blocks_nobody_else),
        cmocka_unit_test(test_block_device_4k_sectors),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
