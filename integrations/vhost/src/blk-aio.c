/* SPDX-License-Identifier: MIT */
/*
 * blk-aio.c - Linux AIO for the vhost-user-blk device (blk.h), as
 * qemu-storage-daemon's aio=native: reads and writes of an O_DIRECT image
 * go to io_submit(), and the kernel signals their completions on an
 * eventfd that the loop watches, whose handler reaps them with
 * io_getevents(), or straight from the completion ring the kernel maps at
 * the context's address, as libaio and QEMU do (no syscall; the kernel
 * takes back the slots we consumed from the ring's head).  With busy
 * polling on, the eventfd's handler also polls that ring.  (Flushes and
 * discards have no Linux AIO of their own: blk-io.c gives them to the
 * worker pool.)  Each context has its own; the context's loop thread
 * throughout.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <linux/aio_abi.h>

#include "blk.h"
#include "internal.h"

#define AIO_DEPTH 1024u /* requests in flight at most; more: the pool */
#define AIO_BATCH 64

/* The head of the completion ring at a context's address (the kernel's
 * struct aio_ring, fs/aio.c; its io_events follow header_length bytes
 * in).  The kernel writes the events, then tail; we read them, then
 * write head. */
typedef struct aio_ring_hdr {
    unsigned id, nr, head, tail, magic, compat_features, incompat_features,
        header_length;
} aio_ring_hdr;
#define AIO_RING_MAGIC 0xa10a10a1u

struct blk_aio {
    blk_ctx *c;           /* set at creation */
    aio_context_t ctx;
    aio_ring_hdr *ring;   /* the completion ring, NULL: io_getevents only */
    int efd;              /* completions; watched by the loop */
    unsigned inflight;    /* submitted, not reaped */
};

static int sys_result(long ret)
{
    return ret < 0 ? -errno : (int)ret;
}

/* Completes what the ring holds, without a syscall. */
static void reap_ring(blk_aio *a)
{
    aio_ring_hdr *g = a->ring;
    const struct io_event *ev =
        (const struct io_event *)((const char *)g + g->header_length);
    unsigned head = g->head;
    /* Acquire: pairs with the kernel's write barrier between an event and
     * its tail store. */
    unsigned tail = __atomic_load_n(&g->tail, __ATOMIC_ACQUIRE);

    while (head != tail) {
        blk_req *r = (blk_req *)(uintptr_t)ev[head].data;
        int res = (int)ev[head].res;

        head = head + 1 == g->nr ? 0 : head + 1;
        /* Release: the event is read before the kernel may reuse it. */
        __atomic_store_n(&g->head, head, __ATOMIC_RELEASE);
        a->inflight--;
        aiol__vblk_io_done(r, res);
    }
}

/* Reaps at least @min completions (0: what is there) and completes them. */
static void reap(blk_aio *a, long min)
{
    struct io_event ev[AIO_BATCH];
    struct timespec zero = { 0, 0 };

    if (min == 0 && a->ring != NULL) {
        reap_ring(a);
        return;
    }
    for (;;) {
        long n = syscall(SYS_io_getevents, a->ctx, min, AIO_BATCH, ev,
                         min > 0 ? NULL : &zero);

        if (n < 0 && errno == EINTR) {
            continue;
        }
        aiol__vhost_check(n >= 0, "io_getevents failed on our own context");
        for (long i = 0; i < n; i++) {
            blk_req *r = (blk_req *)(uintptr_t)ev[i].data;

            a->inflight--;
            aiol__vblk_io_done(r, (int)ev[i].res);
        }
        if (n < AIO_BATCH) {
            return;
        }
        min = 0;
    }
}

/* Completes what is there, as one batch. */
static void reap_batch(void *opaque)
{
    blk_aio *a = opaque;

    aiol__vblk_batch_begin(a->c);
    reap(a, 0);
    aiol__vblk_batch_end(a->c);
}

static void on_eventfd(void *opaque)
{
    blk_aio *a = opaque;
    uint64_t count;

    (void)!read(a->efd, &count, sizeof(count));
    reap_batch(a);
}

/* Busy polling: completions on the ring. */
static bool aio_poll(void *opaque)
{
    blk_aio *a = opaque;

    return a->ring != NULL && a->inflight > 0 &&
           __atomic_load_n(&a->ring->tail, __ATOMIC_ACQUIRE) != a->ring->head;
}

static const aiol_fd_ops aio_ops = {
    .read = on_eventfd, .poll = aio_poll, .poll_ready = reap_batch,
};

int aiol__vblk_aio_new(blk_ctx *c, blk_aio **out)
{
    blk_aio *a = calloc(1, sizeof(*a));
    int ret;

    if (a == NULL) {
        return -ENOMEM;
    }
    a->c = c;
    a->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (a->efd < 0) {
        ret = -errno;
        free(a);
        return ret;
    }
    ret = sys_result(syscall(SYS_io_setup, AIO_DEPTH, &a->ctx));
    if (ret == 0) {
        aio_ring_hdr *g = (aio_ring_hdr *)(uintptr_t)a->ctx;

        if (g->magic == AIO_RING_MAGIC && g->incompat_features == 0) {
            a->ring = g;
        }
        ret = aiol_fd_set_ops(c->loop, a->efd, &aio_ops, a);
        if (ret < 0) {
            syscall(SYS_io_destroy, a->ctx);
        }
    }
    if (ret < 0) {
        close(a->efd);
        free(a);
        return ret;
    }
    *out = a;
    return 0;
}

int aiol__vblk_aio_submit(blk_aio *a, blk_req *r)
{
    struct iocb *cb = &r->iocb;
    int ret;

    if (a->inflight >= AIO_DEPTH) {
        return -EAGAIN;
    }
    *cb = (struct iocb){
        .aio_data = (uint64_t)(uintptr_t)r,
        .aio_lio_opcode = r->op == BLK_OP_WRITE ? IOCB_CMD_PWRITEV
                                                : IOCB_CMD_PREADV,
        .aio_fildes = (uint32_t)r->fd,
        .aio_buf = (uint64_t)(uintptr_t)r->io,
        .aio_nbytes = (uint64_t)r->nio,
        .aio_offset = (int64_t)r->off,
        .aio_flags = IOCB_FLAG_RESFD,
        .aio_resfd = (uint32_t)a->efd,
    };
    ret = sys_result(syscall(SYS_io_submit, a->ctx, 1L, &cb));
    if (ret == 1) {
        a->inflight++;
        return 0;
    }
    return ret < 0 ? ret : -EAGAIN;
}

void aiol__vblk_aio_drain(blk_aio *a)
{
    while (a->inflight > 0) {
        reap(a, 1);
    }
}

void aiol__vblk_aio_free(blk_aio *a)
{
    if (a == NULL) {
        return;
    }
    aiol__vhost_check(a->inflight == 0, "Linux AIO freed with I/O in flight");
    (void)aiol_fd_remove(a->c->loop, a->efd);
    syscall(SYS_io_destroy, a->ctx);
    close(a->efd);
    free(a);
}
