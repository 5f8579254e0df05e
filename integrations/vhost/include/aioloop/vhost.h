/* SPDX-License-Identifier: MIT */
/**
 * @file
 * aioloop/vhost.h - a vhost-user backend (device side) on libaioloop.
 *
 * One aiol_vhost_dev is one vhost-user device: a unix-socket server on an
 * aiol_loop that accepts one frontend (QEMU, or the test frontend) at a
 * time, speaks the vhost-user protocol to it (feature and protocol-feature
 * negotiation with MQ, REPLY_ACK and CONFIG, SET_MEM_TABLE, the vring
 * messages), maps the guest RAM the frontend shares and runs split and
 * packed virtqueues (direct and indirect descriptors, event idx).  Kick eventfds
 * are loop fd handlers that call the device's queue handler; the device
 * pops descriptor chains, does its work, pushes used elements and asks
 * the library to notify the driver through the call eventfd.  A call
 * eventfd is also signalled once when the frontend sets it
 * (VHOST_USER_SET_VRING_CALL), as libvhost-user does: after a reconnect
 * the driver may have missed a notify.
 *
 * What a device supplies is an aiol_vhost_dev_ops: its feature bits, its
 * config space and a queue handler (docs/vhost.md walks through a device).
 *
 * Trust: the frontend and the guest are untrusted.  Every message size,
 * fd count, memory region, address translation and descriptor chain is
 * checked.  A malformed message drops the connection (fds closed, memory
 * unmapped, state reset) and the server then accepts the next frontend.
 * A malformed descriptor chain breaks its queue (aiol_vhost_vq_pop()
 * returns -EIO from then on, the err eventfd is signalled) until the
 * frontend sets the ring up again.
 *
 * Conventions (libaioloop's): calls that can fail return 0 or a negative
 * errno; misuse by the embedding program (a NULL device, a queue index out
 * of range, pushing more than an element can hold) aborts with a message
 * naming the function.  Threads: a device and its queues belong to the
 * thread that polls its loop.
 */
#ifndef AIOLOOP_VHOST_H
#define AIOLOOP_VHOST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "aioloop/loop.h"

#ifdef __cplusplus
extern "C" {
#endif

/* (exported from the shared library; everything else is hidden) */
#pragma GCC visibility push(default)

/* ---- Devices ---------------------------------------------------------- */

/** A vhost-user device: server, connection state, guest memory, queues. */
typedef struct aiol_vhost_dev aiol_vhost_dev;
/**
 * One virtqueue of a device, split or packed (virtio 1.1): the layout is
 * the frontend's choice (VIRTIO_F_RING_PACKED, offered for every device)
 * and the calls below work the same on both.
 */
typedef struct aiol_vhost_vq aiol_vhost_vq;

/**
 * aiol_vhost_dev_ops.flags: the device's queues may be served on other
 * loops than the device's own, each on its own thread
 * (aiol_vhost_dev_queue_loop_set()).  The device's queue, queue_stop and
 * drain_queue callbacks for a queue then run on that queue's loop thread,
 * concurrently with those of queues on other loops; the rest of its
 * callbacks stay on the device's loop thread, while every other loop
 * serving its queues is paused.
 */
#define AIOL_VHOST_DEV_QUEUE_THREADS 1u

/**
 * What a device implements.  Every member but queue may be NULL.  Called
 * from inside aiol_loop_poll(): on the device's loop thread, or for a
 * queue served on another loop (AIOL_VHOST_DEV_QUEUE_THREADS), the
 * per-queue callbacks on that loop's thread.
 */
typedef struct aiol_vhost_dev_ops {
    /** The device's own feature bits to offer (the library adds
     *  VERSION_1, INDIRECT_DESC, EVENT_IDX and PROTOCOL_FEATURES). */
    uint64_t (*get_features)(void *opaque);
    /** The frontend acked @p features (a subset of what was offered).
     *  Return 0 or a negative errno to refuse them. */
    int (*set_features)(void *opaque, uint64_t features);
    /** Copies @p len bytes of config space from @p offset into @p buf.
     *  Return 0 or a negative errno.  NULL: no CONFIG protocol feature. */
    int (*get_config)(void *opaque, uint8_t *buf, uint32_t offset,
                      uint32_t len);
    /** The frontend writes @p len bytes at @p offset (@p flags from the
     *  message).  Return 0 or a negative errno (-EPERM: read-only). */
    int (*set_config)(void *opaque, const uint8_t *buf, uint32_t offset,
                      uint32_t len, uint32_t flags);
    /** Queue handler: @p vq was kicked (and is started and enabled).
     *  Pop chains with aiol_vhost_vq_pop(), push, then notify. */
    void (*queue)(void *opaque, aiol_vhost_vq *vq);
    /** The ring @p vq is stopping (GET_VRING_BASE or a disconnect): the
     *  device must push or drop what it popped before returning. */
    void (*queue_stop)(void *opaque, aiol_vhost_vq *vq);
    /** Guest memory is about to be replaced (SET_MEM_TABLE) while chains
     *  are popped: push them all before returning, or the table is
     *  refused (-EBUSY).  NULL: refused whenever chains are popped. */
    void (*drain)(void *opaque);
    /** The frontend connected (true) or the connection was dropped. */
    void (*connection)(void *opaque, bool connected);
    /** AIOL_VHOST_DEV_QUEUE_THREADS or 0. */
    unsigned flags;
    /** Guest memory is about to be replaced while chains of @p vq are
     *  popped: push them before returning (on @p vq's loop thread).
     *  Used instead of drain when set; required with
     *  AIOL_VHOST_DEV_QUEUE_THREADS. */
    void (*drain_queue)(void *opaque, aiol_vhost_vq *vq);
    /** @p vq is about to be served on @p loop (device's loop thread,
     *  nothing of @p vq in flight): prepare what the device needs there
     *  (its I/O engine on that loop).  Return 0, or a negative errno to
     *  refuse the move.  NULL: every loop is fine. */
    int (*queue_loop)(void *opaque, aiol_vhost_vq *vq, aiol_loop *loop);
} aiol_vhost_dev_ops;

/** Counters of a device (the polling thread's view). */
typedef struct aiol_vhost_stats {
    uint64_t accepts;    /**< frontends accepted */
    uint64_t refused;    /**< frontends refused (closed at once) because
                              another one was connected */
    uint64_t drops;      /**< connections dropped (malformed input, EOF) */
    uint64_t malformed;  /**< of those, for malformed or refused input */
    uint64_t messages;   /**< messages handled */
    uint64_t nacks;      /**< REPLY_ACK replies with a failure */
} aiol_vhost_stats;

/** Counters of a queue, since the device was created. */
typedef struct aiol_vhost_vq_stats {
    uint64_t kicks;        /**< kick eventfd readings */
    uint64_t calls;        /**< call eventfd signals written for used
                                buffers (not the one a new call fd gets) */
    uint64_t suppressed;   /**< notifies the driver suppressed (flags,
                                event idx) */
    uint64_t skipped;      /**< notifies that were due but the ring has no
                                call fd (VHOST_USER_VRING_NOFD_MASK: a
                                polling driver) */
    uint64_t popped;       /**< chains popped */
    uint64_t broken;       /**< malformed chains found (ring broken) */
    uint64_t starts;       /**< ring starts (a kick fd set) */
    uint64_t starts_packed; /**< of those, on the packed layout */
} aiol_vhost_vq_stats;

/**
 * Creates a device on @p loop with @p num_queues queues (1..64).
 * @p ops is copied; ops->queue must be set.  Nothing listens yet.
 * @return 0, -ENOMEM; *out untouched on failure.
 */
int aiol_vhost_dev_new(aiol_loop *loop, const aiol_vhost_dev_ops *ops,
                       void *opaque, unsigned num_queues,
                       aiol_vhost_dev **out);

/**
 * Listens on the unix socket @p path (a stale socket file there is
 * replaced) and accepts one frontend at a time from then on: one that
 * connects while another is connected is closed at once (counted in
 * aiol_vhost_stats.refused).
 * @return 0; -ENAMETOOLONG; -EBUSY when already listening; socket(),
 *         bind(), listen() errors; -ENOMEM from the loop.
 */
int aiol_vhost_dev_listen(aiol_vhost_dev *dev, const char *path);

/**
 * The same on a socket already bound and listening (@p fd: inherited,
 * socket activation); the device owns @p fd from then on, also on
 * failure, and makes it non-blocking and close-on-exec.
 * @return 0; -EBUSY when already listening; -ENOTSOCK; -EINVAL when
 *         @p fd is not a listening stream socket; -ENOMEM from the loop.
 */
int aiol_vhost_dev_listen_fd(aiol_vhost_dev *dev, int fd);

/**
 * Serves an already connected stream socket @p fd (socketpair(), an
 * inherited fd) as the frontend connection; the device owns @p fd from
 * then on, also on failure.  @return 0, -EBUSY when a frontend is
 * connected, -ENOMEM.
 */
int aiol_vhost_dev_adopt(aiol_vhost_dev *dev, int fd);

/** Drops the current connection, if any, as a malformed message would. */
void aiol_vhost_dev_disconnect(aiol_vhost_dev *dev);

/**
 * True while a frontend is connected.
 * @return true when connected, else false.
 */
bool aiol_vhost_dev_is_connected(const aiol_vhost_dev *dev);

/**
 * Features the frontend acked (SET_FEATURES).
 * @return the feature bits, 0 before SET_FEATURES.
 */
uint64_t aiol_vhost_dev_features_get(const aiol_vhost_dev *dev);

/**
 * Protocol features the frontend acked (SET_PROTOCOL_FEATURES).
 * @return the protocol feature bits, 0 before SET_PROTOCOL_FEATURES.
 */
uint64_t aiol_vhost_dev_protocol_features_get(const aiol_vhost_dev *dev);

/**
 * Queue @p index (< num_queues; misuse aborts).
 * @return the queue, owned by @p dev; never NULL.
 */
aiol_vhost_vq *aiol_vhost_dev_vq_get(aiol_vhost_dev *dev, unsigned index);

/** Copies the device's counters into @p out. */
void aiol_vhost_dev_stats_get(const aiol_vhost_dev *dev,
                              aiol_vhost_stats *out);

/**
 * Why the last connection was dropped, request refused or ring broken.
 * Device's loop thread (a queue served on another loop may set it
 * meanwhile: the message is copied under a lock).
 * @return a message owned by @p dev, valid until the next call; "" if
 *         none was.
 */
const char *aiol_vhost_dev_last_error_get(const aiol_vhost_dev *dev);

/**
 * Destroys a device: drops the connection, stops listening (the socket
 * file is unlinked), frees everything.  NULL is a no-op.  Must not be
 * called from inside one of the device's own callbacks.
 */
void aiol_vhost_dev_free(aiol_vhost_dev *dev);

/* ---- Virtqueues --------------------------------------------------------- */

/**
 * A descriptor chain popped from a queue.  The caller provides the iovec
 * array (iov, iov_cap); pop fills the device-readable segments first
 * (iov[0 .. out_num)) and the device-writable ones after them
 * (iov[out_num .. out_num + in_num)).  The pointers are into guest RAM and
 * stay valid until the element is pushed (or the ring stops).
 */
typedef struct aiol_vhost_elem {
    struct iovec *iov;  /**< caller's array */
    unsigned iov_cap;   /**< its number of entries */
    unsigned out_num;   /**< device-readable segments */
    unsigned in_num;    /**< device-writable segments */
    uint64_t out_len;   /**< bytes readable */
    uint64_t in_len;    /**< bytes writable */
    uint16_t head;      /**< the used element's id: the chain's head
                             (split) or its buffer id (packed) */
    uint16_t ndescs;    /**< ring descriptors the chain took (packed:
                             where the next used one goes); set by pop,
                             read by push */
} aiol_vhost_elem;

/**
 * Pops the next available chain of @p vq into @p elem.
 * @return 1 with a chain; 0 when none is available or the ring is not
 *         started and enabled; -ENOBUFS when the chain needs more than
 *         elem->iov_cap segments (nothing consumed: retry with more);
 *         -EIO when the ring is broken: this chain (or an earlier one) was
 *         malformed: a loop, a chain longer than the queue, a nested or
 *         empty indirect table, a readable descriptor after a writable
 *         one, an address outside guest RAM, a length sum over 4 GiB, or an
 *         avail index more than the queue size ahead; on a packed ring, a
 *         descriptor of the chain whose avail and used flags do not match
 *         the ring's wrap counter, or an indirect one inside a chain.
 */
int aiol_vhost_vq_pop(aiol_vhost_vq *vq, aiol_vhost_elem *elem);

/**
 * Returns a popped chain to the driver with @p len bytes written (at most
 * elem->in_len; more is misuse).  Does not notify: see
 * aiol_vhost_vq_notify().
 */
void aiol_vhost_vq_push(aiol_vhost_vq *vq, const aiol_vhost_elem *elem,
                        uint32_t len);

/**
 * Notifies the driver of what was pushed, if it wants it: honours
 * VRING_AVAIL_F_NO_INTERRUPT, or with event idx the used_event index
 * (packed: the driver's event suppression flags, or its event offset and
 * wrap counter).
 * A due notify on a ring whose call fd is "none" is counted as skipped.
 * Nothing pushed since the last notify: nothing signalled or counted.
 * @return true when the call eventfd was signalled.
 */
bool aiol_vhost_vq_notify(aiol_vhost_vq *vq);

/**
 * The queue's index in its device.
 * @return the index, 0 to the device's num_queues - 1.
 */
unsigned aiol_vhost_vq_index_get(const aiol_vhost_vq *vq);

/**
 * The queue's size (SET_VRING_NUM).
 * @return the number of descriptors, 0 before SET_VRING_NUM.
 */
unsigned aiol_vhost_vq_size_get(const aiol_vhost_vq *vq);

/**
 * True when started (kick fd set, not stopped) and enabled.
 * @return true when running, else false.
 */
bool aiol_vhost_vq_is_running(const aiol_vhost_vq *vq);

/**
 * True when a malformed chain broke the ring.
 * @return true when broken, else false.
 */
bool aiol_vhost_vq_is_broken(const aiol_vhost_vq *vq);

/** Copies the queue's counters into @p out.  Its loop's thread or the
 *  device's (read as relaxed atomics: each counter is exact, the set
 *  may be a moment apart). */
void aiol_vhost_vq_stats_get(const aiol_vhost_vq *vq,
                             aiol_vhost_vq_stats *out);

/**
 * The loop that serves @p vq: the device's, or the one
 * aiol_vhost_dev_queue_loop_set() gave it.
 * @return the loop; never NULL.
 */
aiol_loop *aiol_vhost_vq_loop_get(const aiol_vhost_vq *vq);

/**
 * Serves queue @p index on @p loop from now on: its kick handler and
 * busy polling, and the device's callbacks for it, run on @p loop's
 * thread, which must poll @p loop (an aiol_iothread's loop, say) for as
 * long as the queue is served there.  Messages from the frontend are
 * still read and handled on the device's loop: before one is handled,
 * every other loop serving the device's queues is paused (its thread
 * waits in a bottom half) and what a message does to such a queue (stop
 * it, complete what it popped) runs on that queue's thread.  @p loop may
 * be the device's own loop (the queue comes back).  A queue that runs
 * moves too, between two of its chains.  Device's loop thread; not from
 * the device's callbacks.
 * @return 0; -ENOTSUP when the device did not set
 *         AIOL_VHOST_DEV_QUEUE_THREADS; -EBUSY while chains of the queue
 *         are popped and not pushed (nothing changes: move it when it is
 *         idle); -ENOMEM; the device's queue_loop refusal; an error
 *         watching the kick fd on @p loop (the queue stays where it was).
 */
int aiol_vhost_dev_queue_loop_set(aiol_vhost_dev *dev, unsigned index,
                                  aiol_loop *loop);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif

#endif /* AIOLOOP_VHOST_H */
