/* SPDX-License-Identifier: MIT */
/*
 * uring.c - the public request API of aioloop/uring.h.  The work is done by
 * the io_uring monitor: each call binds its ring to the calling thread
 * (fdmon-io_uring.c), then goes to the requests (uring-req.c) or the socket
 * I/O on them (uring-net.c).  On any other fd monitor, or when built
 * without liburing, these calls report -ENOTSUP.
 */
#include <errno.h>

#include "fdmon.h"
#include "uring-priv.h"

static bool on_uring(aiol_loop *loop)
{
    aiol__check(loop != NULL, "loop is NULL");
#ifdef AIOL_HAVE_IO_URING
    return loop->fdmon == &aiol__fdmon_io_uring;
#else
    return false;
#endif
}

int aiol_uring_submit(aiol_loop *loop, aiol_sqe_prep_fn *prep,
                      aiol_cqe_fn *done, void *opaque, aiol_uring_req **out)
{
    aiol__check(prep != NULL && done != NULL, "prep or done is NULL");
    if (!on_uring(loop)) {
        return -ENOTSUP;
    }
    aiol__assert_poller(loop);
#ifdef AIOL_HAVE_IO_URING
    aiol__uring_bind(loop);
    return aiol__uring_submit(loop, prep, done, opaque, out);
#else
    (void)opaque;
    (void)out;
    return -ENOTSUP;
#endif
}

int aiol_uring_cancel(aiol_uring_req *req)
{
    aiol__check(req != NULL, "req is NULL");
#ifdef AIOL_HAVE_IO_URING
    aiol__uring_bind(req->loop);
    return aiol__uring_cancel(req);
#else
    aiol__fail(__func__, "no io_uring request can exist in this build");
#endif
}

int aiol_uring_flush(aiol_loop *loop)
{
    if (!on_uring(loop)) {
        return -ENOTSUP;
    }
    aiol__assert_poller(loop);
#ifdef AIOL_HAVE_IO_URING
    aiol__uring_bind(loop);
    return aiol__uring_flush(loop);
#else
    return -ENOTSUP;
#endif
}

int aiol_uring_drain(aiol_loop *loop)
{
    if (!on_uring(loop)) {
        return -ENOTSUP;
    }
    aiol__assert_poller(loop);
#ifdef AIOL_HAVE_IO_URING
    aiol__uring_bind(loop);
    return aiol__uring_drain(loop);
#else
    return -ENOTSUP;
#endif
}

unsigned aiol_uring_pending_get(aiol_loop *loop)
{
#ifdef AIOL_HAVE_IO_URING
    return on_uring(loop) ? aiol__uring_pending(loop) : 0;
#else
    (void)on_uring(loop);
    return 0;
#endif
}

int aiol_uring_bufs_new(aiol_loop *loop, unsigned count, unsigned size,
                        aiol_uring_bufs **out)
{
    aiol__check(out != NULL, "out is NULL");
    if (!on_uring(loop)) {
        return -ENOTSUP;
    }
    aiol__assert_poller(loop);
#ifdef AIOL_HAVE_IO_URING
    aiol__uring_bind(loop);
    return aiol__uring_bufs_new(loop, count, size, out);
#else
    (void)count;
    (void)size;
    return -ENOTSUP;
#endif
}

void aiol_uring_bufs_free(aiol_uring_bufs *bufs)
{
    if (bufs == NULL) {
        return;
    }
#ifdef AIOL_HAVE_IO_URING
    aiol__uring_bind(aiol__uring_bufs_loop_get(bufs));
    aiol__uring_bufs_free(bufs);
#else
    aiol__fail(__func__, "no buffer group can exist in this build");
#endif
}

int aiol_uring_recv_submit(aiol_loop *loop, int fd, aiol_uring_bufs *bufs,
                          aiol_recv_fn *cb, void *opaque,
                          aiol_uring_recv **out)
{
    aiol__check(bufs != NULL && cb != NULL, "bufs or cb is NULL");
    aiol__check(fd >= 0, "fd is negative");
    if (!on_uring(loop)) {
        return -ENOTSUP;
    }
    aiol__assert_poller(loop);
#ifdef AIOL_HAVE_IO_URING
    aiol__uring_bind(loop);
    return aiol__uring_recv_submit(loop, fd, bufs, cb, opaque, out);
#else
    (void)opaque;
    (void)out;
    return -ENOTSUP;
#endif
}

int aiol_uring_recv_cancel(aiol_uring_recv *recv)
{
    aiol__check(recv != NULL, "recv is NULL");
#ifdef AIOL_HAVE_IO_URING
    return aiol__uring_recv_cancel(recv);
#else
    aiol__fail(__func__, "no receive can exist in this build");
#endif
}

int aiol_uring_send_submit(aiol_loop *loop, int fd, const void *buf, size_t len,
                    aiol_cqe_fn *done, void *opaque)
{
    aiol__check(done != NULL && (buf != NULL || len == 0),
                "done or buf is NULL");
    aiol__check(fd >= 0, "fd is negative");
    if (!on_uring(loop)) {
        return -ENOTSUP;
    }
    aiol__assert_poller(loop);
#ifdef AIOL_HAVE_IO_URING
    aiol__uring_bind(loop);
    return aiol__uring_send_submit(loop, fd, buf, len, done, opaque);
#else
    (void)opaque;
    return -ENOTSUP;
#endif
}
