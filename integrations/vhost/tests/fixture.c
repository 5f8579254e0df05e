/* SPDX-License-Identifier: MIT */
/* fixture.c - the shared vhost test fixture (fixture.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fixture.h"

void fx_pump(void *opaque)
{
    fx *t = opaque;

    aiol_loop_poll(t->loop, false);
}

int fx_init(fx *t)
{
    return fx_init_ops(t, &toydev_ops);
}

int fx_init_ops(fx *t, const aiol_vhost_dev_ops *ops)
{
    int r;

    memset(t, 0, sizeof(*t));
    t->f.sock = -1;
    snprintf(t->dir, sizeof(t->dir), "/tmp/aiol-vhost-XXXXXX");
    if (mkdtemp(t->dir) == NULL) {
        return -errno;
    }
    snprintf(t->path, sizeof(t->path), "%s/sock", t->dir);
    if ((r = aiol_loop_new(&t->loop, NULL)) < 0) {
        return r;
    }
    if ((r = aiol_vhost_dev_new(t->loop, ops, &t->toy, FX_QUEUES,
                                &t->dev)) < 0) {
        return r;
    }
    t->toy.dev = t->dev;
    memcpy(t->toy.config, "TOYCONF-abcdefgh", 16);
    return aiol_vhost_dev_listen(t->dev, t->path);
}

void fx_fini(fx *t)
{
    if (t->f.sock >= 0 || t->f.mem != NULL) {
        vfe_close(&t->f);
    }
    aiol_vhost_dev_free(t->dev);
    t->dev = NULL;
    if (t->loop != NULL) {
        aiol_loop_free(t->loop);
        t->loop = NULL;
    }
    unlink(t->path);
    rmdir(t->dir);
}

int fx_session(fx *t, uint64_t features, uint64_t protocol)
{
    int r;

    if ((r = vfe_connect(&t->f, t->path, fx_pump, t)) < 0 ||
        (r = vfe_negotiate(&t->f, features, protocol)) < 0 ||
        (r = vfe_mem_create(&t->f, FX_RAM, 2)) < 0 ||
        (r = vfe_set_mem_table(&t->f, false)) < 0 ||
        (r = vfe_vq_setup(&t->f, 0, FX_RING, false)) < 0) {
        return r;
    }
    return 0;
}

int fx_request(fx *t, unsigned q, bool indirect)
{
    vfe *f = &t->f;
    uint64_t a = vfe_alloc(f, 1, 100, 1), b = vfe_alloc(f, 1, 60, 1);
    uint64_t w = vfe_alloc(f, 0, 300, 1);
    vfe_buf bufs[3] = {
        { a, 100, false }, { b, 60, false }, { w, 300, true },
    };
    uint8_t expect[160], *wp;
    uint32_t id, len, h;
    uint16_t head;
    int r;

    if (a == UINT64_MAX || b == UINT64_MAX || w == UINT64_MAX) {
        return -ENOSPC;
    }
    for (int i = 0; i < 160; i++) {
        expect[i] = (uint8_t)(i * 7 + q);
    }
    memcpy(vfe_gpa(f, a), expect, 100);
    memcpy(vfe_gpa(f, b), expect + 100, 60);
    memset(vfe_gpa(f, w), 0, 300);
    head = vfe_vq_add(f, q, bufs, 3, indirect);
    vfe_vq_kick(f, q);
    if ((r = vfe_vq_wait_used(f, q, &id, &len)) < 0) {
        return r;
    }
    if (id != head || len != 164) {
        return -EBADMSG;
    }
    wp = vfe_gpa(f, w);
    h = toydev_hash(expect, 160);
    if (memcmp(wp, &h, 4) != 0 || memcmp(wp + 4, expect, 160) != 0) {
        return -EBADMSG;
    }
    return 0;
}

void fx_assert_serves_next(fx *t)
{
    vfe_close(&t->f);
    vfe_pump(&t->f, 20);
    assert_false(aiol_vhost_dev_is_connected(t->dev));
    assert_int_equal(fx_session(t, FX_ALL_FEATURES, FX_ALL_PROTOCOL), 0);
    assert_int_equal(fx_request(t, 0, false), 0);
    assert_true(aiol_vhost_dev_is_connected(t->dev));
}

int fx_nfds_open(void)
{
    DIR *d = opendir("/proc/self/fd");
    int n = 0;

    while (d != NULL && readdir(d) != NULL) {
        n++;
    }
    if (d != NULL) {
        closedir(d);
    }
    return n;
}

int fx_checked_setup(void **state)
{
    static fx_checked h;

    if (fx_init(&h.t) < 0) {
        return -1;
    }
    h.fds_at_start = fx_nfds_open();
    *state = &h;
    return 0;
}

int fx_checked_teardown(void **state)
{
    fx_checked *h = *state;

    vfe_close(&h->t.f);
    vfe_pump(&h->t.f, 10);
    /* The device keeps nothing of a dropped frontend. */
    assert_int_equal(fx_nfds_open(), h->fds_at_start);
    fx_fini(&h->t);
    return 0;
}

void fx_assert_broken(fx *t, const char *why)
{
    aiol_vhost_vq *vq = aiol_vhost_dev_vq_get(t->dev, 0);

    vfe_vq_kick(&t->f, 0);
    assert_int_equal(vfe_vq_used_pending(&t->f, 0), 0);
    assert_true(aiol_vhost_vq_is_broken(vq));
    assert_int_equal(t->toy.last_err, -EIO);
    assert_int_equal(vfe_vq_errs(&t->f, 0), 1);
    assert_non_null(strstr(aiol_vhost_dev_last_error_get(t->dev), why));
    assert_true(aiol_vhost_dev_is_connected(t->dev));
    /* Other rings of the connection still work... */
    assert_int_equal(vfe_vq_setup(&t->f, 1, 8, false), 0);
    assert_int_equal(fx_request(t, 1, false), 0);
    /* ...a ring set up again works... */
    assert_true(vfe_vq_stop(&t->f, 0) >= 0);
    assert_int_equal(vfe_vq_setup(&t->f, 0, FX_RING, false), 0);
    vfe_pump(&t->f, 5);
    assert_false(aiol_vhost_vq_is_broken(vq));
    assert_int_equal(fx_request(t, 0, true), 0);
    /* ...and so does the next frontend. */
    fx_assert_serves_next(t);
}

