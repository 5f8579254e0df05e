/* SPDX-License-Identifier: MIT */
/*
 * fixture.h - the fixture (fx_) shared by the vhost suites: a loop, the
 * toy device served on a unix socket in a fresh directory, and a test
 * frontend on the same thread.
 */
#ifndef AIOLOOP_VHOST_FIXTURE_H
#define AIOLOOP_VHOST_FIXTURE_H

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "aioloop/aioloop.h"
#include "aioloop/vhost.h"
#include "toydev.h"
#include "vfe.h"

#define FX_QUEUES 4
#define FX_RAM (2u << 20)
#define FX_RING 16
#define FX_ALL_FEATURES (~0ull)
#define FX_NO_EVENT_IDX (~(1ull << AIOL__VHOST_F_RING_EVENT_IDX))
#define FX_ALL_PROTOCOL (~0ull)

typedef struct fx {
    aiol_loop *loop;
    toydev toy;
    aiol_vhost_dev *dev;
    char dir[64], path[96];
    vfe f;
} fx;

void fx_pump(void *opaque);
/* Loop, device listening, nothing connected.  0 or -errno. */
int fx_init(fx *t);
/* The same with the toy device's ops @ops (toydev_ops or toydev_mt_ops). */
int fx_init_ops(fx *t, const aiol_vhost_dev_ops *ops);
void fx_fini(fx *t);
/* Connects the frontend, negotiates, 2-region RAM, mem table, queue 0. */
int fx_session(fx *t, uint64_t features, uint64_t protocol);
/* One request on queue @q: readable bytes in region 1 over two
 * descriptors, a writable buffer in region 0; checks the device's answer.
 * 0 or -errno (-ETIMEDOUT: no used element). */
int fx_request(fx *t, unsigned q, bool indirect);
/* The frontend goes, a new one connects, sets up and gets a request
 * served: the server survived whatever came before. */
void fx_assert_serves_next(fx *t);

/* How many fds this process has open (a leak check). */
int fx_nfds_open(void);

/* A fixture whose teardown checks that no fd leaked, for the suites that
 * forge input: cmocka setup and teardown, *state the fx_checked. */
typedef struct fx_checked {
    fx t;
    int fds_at_start;
} fx_checked;
int fx_checked_setup(void **state);
int fx_checked_teardown(void **state);

/* Queue 0 is broken with @why in the device's error, its err fd was
 * signalled, nothing used; the other rings, queue 0 set up again and
 * the next frontend are served. */
void fx_assert_broken(fx *t, const char *why);

#endif
