/*
 * uring-priv.h - the io_uring monitor's request API, behind aioloop/uring.h
 * (uring.c).
 */
#ifndef AIOLOOP_URING_PRIV_H
#define AIOLOOP_URING_PRIV_H

#include "internal.h"

#ifdef AIOL_HAVE_IO_URING
int aiol__uring_submit(aiol_loop *loop, aiol_sqe_prep_fn *prep,
                       aiol_cqe_fn *done, void *opaque, aiol_uring_req **out);
int aiol__uring_cancel(aiol_uring_req *req);
int aiol__uring_flush(aiol_loop *loop);
int aiol__uring_drain(aiol_loop *loop);
unsigned aiol__uring_pending(aiol_loop *loop);
#endif

#endif /* AIOLOOP_URING_PRIV_H */
