/* SPDX-License-Identifier: MIT */
/*
 * blk-aio.c - Linux AIO for the vhost-user-blk device (blk.h), as
 * qemu-storage-daemon's aio=native: reads and writes of an O_DIRECT image
 * go to io_submit(), and the kernel signals their completions on an
 * eventfd that the loop watches, whose handler reaps them with
 * io_getevents().  (Flushes and discards have no Linux AIO of their own:
 * blk-io.c gives them to the worker pool.)  Loop's thread throughout.
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

struct blk_aio {
    aiol_vhost_blk *b;
    aio_context_t ctx;
    int efd;              /* completions; watched by the loop */
    unsigned inflight;    /* submitted, not reaped */
};

static int sys_result(long ret)
{
    return ret < 0 ? -errno : (int)ret;
}

/* Reaps at least @min completions (0: what is there) and completes them. */
static void reap(blk_aio *a, long min)
{
    struct io_event ev[AIO_BATCH];
    struct timespec zero = { 0, 0 };

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

static void on_eventfd(void *opaque)
{
    blk_aio *a = opaque;
    uint64_t count;

    (void)!read(a->efd, &count, sizeof(count));
    aiol__vblk_batch_begin(a->b);
    reap(a, 0);
    aiol__vblk_batch_end(a->b);
}

int aiol__vblk_aio_new(aiol_vhost_blk *b, blk_aio **out)
{
    blk_aio *a = calloc(1, sizeof(*a));
    int ret;

    if (a == NULL) {
        return -ENOMEM;
    }
    a->b = b;
    a->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (a->efd < 0) {
        ret = -errno;
        free(a);
        return ret;
    }
    ret = sys_result(syscall(SYS_io_setup, AIO_DEPTH, &a->ctx));
    if (ret == 0) {
        ret = aiol_fd_set(b->loop, a->efd, on_eventfd, NULL, NULL, a);
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
    (void)aiol_fd_remove(a->b->loop, a->efd);
    syscall(SYS_io_destroy, a->ctx);
    close(a->efd);
    free(a);
}
