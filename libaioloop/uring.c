/* SPDX-License-Identifier: MIT */
/*
 * uring.c - the public request API of aioloop/uring.h.  The work is done by
 * the io_uring monitor (fdmon-io_uring.c); on any other fd monitor, or when
 * built without liburing, these calls report -ENOTSUP.
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
