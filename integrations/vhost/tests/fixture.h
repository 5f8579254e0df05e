/*
 * vhtest.h - the fixture shared by the vhost suites: a loop, the toy
 * device served on a unix socket in a fresh directory, and a test
 * frontend on the same thread.
 */
#ifndef AIOLOOP_VHTEST_H
#define AIOLOOP_VHTEST_H

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "aioloop/aioloop.h"
#include "aioloop/vhost.h"
#include "toydev.h"
#include "vfe.h"

#define VT_QUEUES 4
#define VT_RAM (2u << 20)
#define VT_RING 16
#define VT_ALL_FEATURES (~0ull)
#define VT_NO_EVENT_IDX (~(1ull << AIOL_VHOST_F_RING_EVENT_IDX))
#define VT_ALL_PROTOCOL (~0ull)

typedef struct vt {
    aiol_loop *loop;
    toydev toy;
    aiol_vhost_dev *dev;
    char dir[64], path[96];
    vfe f;
} vt;

void vt_pump(void *opaque);
/* Loop, device listening, nothing connected.  0 or -errno. */
int vt_init(vt *t);
void vt_fini(vt *t);
/* Connects the frontend, negotiates, 2-region RAM, mem table, queue 0. */
int vt_session(vt *t, uint64_t features, uint64_t protocol);
/* One request on queue @q: readable bytes in region 1 over two
 * descriptors, a writable buffer in region 0; checks the device's answer.
 * 0 or -errno (-ETIMEDOUT: no used element). */
int vt_request(vt *t, unsigned q, bool indirect);
/* The frontend goes, a new one connects, sets up and gets a request
 * served: the server survived whatever came before. */
void vt_assert_serves_next(vt *t);

/* How many fds this process has open (a leak check). */
int vt_nfds_open(void);

#endif
