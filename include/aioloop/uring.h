/* SPDX-License-Identifier: MIT */
/**
 * @file
 * aioloop/uring.h - submitting arbitrary io_uring requests on the loop's
 * own ring (io_uring fd monitor only).
 *
 * A storage backend can do its reads, writes and fsyncs on the ring the
 * loop already waits on: the requests go to the kernel in the same
 * io_uring_enter as the loop's wait, and their completions are dispatched
 * by aiol_loop_poll() like any other event, nested polls included.
 *
 *   static void prep_read(struct io_uring_sqe *sqe, void *opaque)
 *   {
 *       struct my_io *io = opaque;
 *       io_uring_prep_read(sqe, io->fd, io->buf, io->len, io->off);
 *   }
 *   static void read_done(void *opaque, int res, uint32_t flags) { ... }
 *
 *   aiol_uring_submit(loop, prep_read, read_done, io, &io->req);
 *
 * The prep callback fills the SQE with liburing's io_uring_prep_*()
 * helpers; it must not set user_data, which belongs to the loop.
 *
 * Threads: these calls belong to the loop's polling thread.  The ring is
 * bound to the first thread that polls the loop; requests must complete
 * there.  Another thread may poll or free the loop only once no request
 * is in flight (the ring then moves to a shared mode); otherwise the loop
 * aborts with a message.  aiol_loop_fd_get() with requests in flight keeps
 * the ring bound when called on its thread, and returns -EBUSY on another.
 * An iothread finishes its requests on its own thread when it stops.
 */
#ifndef AIOLOOP_URING_H
#define AIOLOOP_URING_H

#include <stddef.h>
#include <stdint.h>

#include "aioloop/loop.h"

#ifdef __cplusplus
extern "C" {
#endif

/* (exported from the shared library; everything else is hidden) */
#pragma GCC visibility push(default)

struct io_uring_sqe;

/** An outstanding request.  Opaque; valid until its completion callback ran. */
typedef struct aiol_uring_req aiol_uring_req;

/** Fills @p sqe for the request (io_uring_prep_read(), ...). */
typedef void aiol_sqe_prep_fn(struct io_uring_sqe *sqe, void *opaque);

/**
 * Called once per request, from aiol_loop_poll() on the polling thread,
 * with the CQE's res (a byte count or a negative errno; -ECANCELED after a
 * successful cancel) and flags.
 */
typedef void aiol_cqe_fn(void *opaque, int res, uint32_t flags);

/**
 * Queues a request on the loop's ring.  It is handed to the kernel by the
 * loop's next wait (or by aiol_uring_flush()); @p done runs exactly once,
 * from a later poll.
 *
 * Room for the completion is reserved here, so a request, once accepted,
 * completes even when memory runs out later.
 *
 * @param loop    the loop, which must run on the io_uring fd monitor
 * @param prep    fills the request's SQE, called before this returns
 * @param done    its completion callback
 * @param opaque  passed to @p prep and @p done
 * @param out     receives a handle for aiol_uring_cancel(); may be NULL
 * @return 0, -ENOTSUP when the loop does not run on io_uring, -ENOMEM
 *         (nothing queued), -ESHUTDOWN from a completion callback that
 *         aiol_loop_free() runs (the loop is going away).
 */
int aiol_uring_submit(aiol_loop *loop, aiol_sqe_prep_fn *prep,
                      aiol_cqe_fn *done, void *opaque, aiol_uring_req **out);

/**
 * Asks the kernel to cancel @p req.  Its completion callback still runs
 * exactly once: with -ECANCELED if the cancel won, or with the request's
 * own result if it finished first.  Buffers the request uses must stay
 * valid until then.
 * @return 0 (the cancel is queued on the ring; it cannot fail).
 */
int aiol_uring_cancel(aiol_uring_req *req);

/**
 * Hands queued requests to the kernel now instead of at the next wait.
 * @return the number submitted, or a negative errno.
 */
int aiol_uring_flush(aiol_loop *loop);

/**
 * Waits until no request is in flight, running only request completion
 * callbacks (those may submit more requests, which are waited for too):
 * no fd handler, bottom half or timer runs, and fd readiness seen
 * meanwhile is reported by a later poll.  For a storage device that must
 * finish its I/O before it answers (a vhost-user GET_VRING_BASE, a memory
 * table about to be unmapped), from inside one of the loop's callbacks,
 * where a nested aiol_loop_poll() could re-enter the caller.  Requests
 * are not cancelled; aiol_uring_cancel() them first to hurry them.
 * Polling thread.
 * @return 0; -ENOTSUP when the loop does not run on io_uring; -EIO when
 *         the ring failed (the requests left complete at aiol_loop_free()).
 */
int aiol_uring_drain(aiol_loop *loop);

/**
 * Number of requests submitted whose completion callback has not run.
 * @return the count (0 on an fd monitor other than io_uring).
 */
unsigned aiol_uring_pending_get(aiol_loop *loop);

/*
 * Completion-based socket I/O.  A network service can receive and send
 * without readiness: a multishot receive takes its buffers from a group
 * the loop registered with the kernel (a provided-buffer ring) and calls
 * back once per chunk received; a send completes once, with everything
 * sent.  Same thread rules as the requests above.
 *
 *   static void got(void *opaque, int res, const void *data)
 *   {
 *       if (res > 0) consume(data, res);     // data valid until return
 *       else         done_with(opaque, res); // 0: EOF, or -errno: over
 *   }
 *
 *   aiol_uring_bufs_new(loop, 64, 4096, &bufs);
 *   aiol_uring_recv_submit(loop, sock, bufs, got, conn, &conn->recv);
 */

/** A group of receive buffers on the loop's ring.  Opaque. */
typedef struct aiol_uring_bufs aiol_uring_bufs;

/** A started multishot receive.  Opaque; valid until its final callback. */
typedef struct aiol_uring_recv aiol_uring_recv;

/**
 * Called from aiol_loop_poll() for each chunk a receive got: @p res bytes
 * (> 0) at @p data, which belongs to the loop again once this returns.
 * The last call has @p data NULL and @p res 0 (the peer closed), or
 * -ECANCELED (aiol_uring_recv_cancel(), or aiol_loop_free()), or another
 * -errno (the socket's error, -ENOMEM); the receive is gone after it.
 */
typedef void aiol_recv_fn(void *opaque, int res, const void *data);

/**
 * Creates a group of @p count receive buffers of @p size bytes each and
 * registers it with the loop's ring.  Receives sharing a group share its
 * buffers; when all are in use, a receive waits for one to come back (no
 * data is lost: it stays in the socket).
 * @param loop  the loop, which must run on the io_uring fd monitor
 * @param count a power of two, at most 32768
 * @param size  bytes per buffer (at most 1 GiB)
 * @param out   receives the group
 * @return 0; -ENOTSUP when the loop does not run on io_uring; -EINVAL;
 *         -ENOMEM; or the kernel's refusal (-EINVAL before Linux 5.19).
 */
int aiol_uring_bufs_new(aiol_loop *loop, unsigned count, unsigned size,
                        aiol_uring_bufs **out);

/**
 * Unregisters and frees a group.  Aborts, as misuse, while a receive
 * started on it has not had its final callback.  aiol_loop_free() frees
 * the groups still there.
 */
void aiol_uring_bufs_free(aiol_uring_bufs *bufs);

/**
 * Starts receiving on the connected stream socket @p fd into buffers of
 * @p bufs, calling @p cb for each chunk in order, until end of stream, an
 * error or aiol_uring_recv_cancel().  When the kernel ends the multishot
 * receive on its own (no free buffer: -ENOBUFS, which is not reported),
 * the loop starts it again once the callbacks have given the buffers
 * back.  The fd is not closed.  Leave it in blocking mode: on an
 * O_NONBLOCK socket io_uring reports -EAGAIN instead of waiting (the final
 * callback's result), as for aiol_uring_send_submit().
 * @param loop   the loop, which must run on the io_uring fd monitor
 * @param fd     a connected stream socket, in blocking mode
 * @param bufs   the group its buffers come from (of this loop)
 * @param cb     called per chunk, then once more at the end
 * @param opaque passed to @p cb
 * @param out    receives a handle for aiol_uring_recv_cancel(); may be NULL
 * @return 0; -ENOTSUP when the loop does not run on io_uring; -ENOMEM.
 */
int aiol_uring_recv_submit(aiol_loop *loop, int fd, aiol_uring_bufs *bufs,
                          aiol_recv_fn *cb, void *opaque,
                          aiol_uring_recv **out);

/**
 * Stops a receive: its final callback comes from a later poll, with
 * -ECANCELED (or 0 or an error that came first).  Chunks the kernel had
 * already received may still be delivered before it.  Stop a receive
 * before closing its fd.  Calling it again is a no-op.
 * @return 0
 */
int aiol_uring_recv_cancel(aiol_uring_recv *recv);

/**
 * Sends @p len bytes of @p buf on the stream socket @p fd (MSG_NOSIGNAL),
 * submitting the rest again after a short send; @p done runs once, from
 * a later poll, with @p len or a -errno (-EPIPE when the peer is gone).
 * @p buf must stay valid until then.
 * @return 0; -ENOTSUP when the loop does not run on io_uring; -EINVAL
 *         (@p len over INT32_MAX); -ENOMEM; -ESHUTDOWN as for
 *         aiol_uring_submit().
 */
int aiol_uring_send_submit(aiol_loop *loop, int fd, const void *buf, size_t len,
                    aiol_cqe_fn *done, void *opaque);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif

#endif /* AIOLOOP_URING_H */
