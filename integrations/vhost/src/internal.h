/* SPDX-License-Identifier: MIT */
/*
 * internal.h - private state of the vhost-user backend (integrations/vhost).
 *
 * Nothing here is API.  Internal non-static names start with aiol__vhost.
 * Wire structures are read with memcpy from a byte buffer, never cast, so
 * a hostile size or alignment cannot make us read past a buffer.
 */
#ifndef AIOLOOP_VHOST_INTERNAL_H
#define AIOLOOP_VHOST_INTERNAL_H

#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>

#include "aioloop/bh.h"

#include "aioloop/vhost.h"
#include "vhost-proto.h"
#include "check-priv.h" /* (libaioloop's) */

/* Misuse check that survives NDEBUG: "aioloop-vhost: <func>: <msg>", abort. */
#define aiol__vhost_check(cond, msg) AIOL__CHECK_IN(aiol__vhost_fail, cond, msg)

_Noreturn void aiol__vhost_fail(const char *func, const char *msg);

/* ---- guest memory (mem.c) ---- */

typedef struct vu_region {
    uint64_t gpa, size, uva, mmap_offset;
    uint8_t *host;   /* host address of gpa */
    void *map;       /* the mmap()ed range [0, mmap_offset + size) */
    size_t map_len;
} vu_region;

typedef struct vu_mem {
    unsigned n;
    vu_region r[AIOL__VHOST_MAX_FDS];
} vu_mem;

/* Parses and maps a SET_MEM_TABLE payload with its fds into @out.  The
 * fds are only borrowed.  Returns 0 or -errno; nothing mapped on error. */
int aiol__vhost_mem_map(vu_mem *out, const uint8_t *payload, uint32_t size,
                        const int *fds, unsigned nfds, const char **why);
void aiol__vhost_mem_unmap(vu_mem *m);
/* Host pointer of [gpa, gpa+len) if it lies in one region, else NULL. */
void *aiol__vhost_gpa(const vu_mem *m, uint64_t gpa, uint64_t len);
/* The same for a frontend userspace address (SET_VRING_ADDR). */
void *aiol__vhost_uva(const vu_mem *m, uint64_t uva, uint64_t len);
/* aiol__vhost_uva(), NULL also when the host address is not a multiple
 * of @align (a ring part's alignment). */
void *aiol__vhost_uva_aligned(const vu_mem *m, uint64_t uva, uint64_t len,
                              uintptr_t align);
/* Host address of a gpa and how many bytes from there lie in its region. */
void *aiol__vhost_gpa_chunk(const vu_mem *m, uint64_t gpa, uint64_t *avail);

/* ---- ring layouts (vq-split.c, vq-packed.c) ---- */

#define VRING_DESC_F_NEXT 1u
#define VRING_DESC_F_WRITE 2u
#define VRING_DESC_F_INDIRECT 4u
#define VRING_AVAIL_F_NO_INTERRUPT 1u
#define VRING_USED_F_NO_NOTIFY 1u  /* used->flags: the device wants no kick */
/* Packed descriptors' flags: AVAIL equal to the driver's wrap counter and
 * USED not, available; both equal to the device's, used (virtio 1.1). */
#define VRING_PACKED_F_AVAIL (1u << 7)
#define VRING_PACKED_F_USED (1u << 15)
/* Event suppression flags (packed): both areas. */
#define VRING_EVENT_F_ENABLE 0u
#define VRING_EVENT_F_DISABLE 1u
#define VRING_EVENT_F_DESC 2u     /* at (off, wrap): with EVENT_IDX only */

typedef struct vring_desc {
    uint64_t addr;
    uint32_t len;
    uint16_t flags;
    uint16_t next;
} vring_desc;

typedef struct vring_used_elem {
    uint32_t id;
    uint32_t len;
} vring_used_elem;

/*
 * What differs between the split and the packed layout.  vq.c holds the
 * rest (fds, kicks, busy polling, the public calls) and calls these on
 * the loop's thread; each takes a ring whose addresses are mapped.
 */
typedef struct vu_ring_ops {
    /* Checks the ring's addresses against @m; with @commit, maps them.
     * 0 or -EFAULT. */
    int (*map)(aiol_vhost_vq *vq, const vu_mem *m, bool commit);
    /* The ring (re)starts on a kick fd: the device's used position. */
    void (*start)(aiol_vhost_vq *vq);
    /* Whether the driver published a chain not popped yet (busy polling,
     * no side effect). */
    bool (*avail_pending)(const aiol_vhost_vq *vq);
    /* aiol_vhost_vq_pop() on a running ring that is not broken. */
    int (*pop)(aiol_vhost_vq *vq, aiol_vhost_elem *e);
    /* aiol_vhost_vq_push() of an element popped from this ring. */
    void (*push)(aiol_vhost_vq *vq, const aiol_vhost_elem *e, uint32_t len);
    /* After a full fence behind the pushes: whether the driver wants a
     * call for them (its suppression, or with EVENT_IDX its event). */
    bool (*call_wanted)(aiol_vhost_vq *vq);
    /* Asks the driver for kicks again (@want) or for none (the loop polls
     * the ring).  Without a fence: the caller orders its look after. */
    void (*kicks_want)(aiol_vhost_vq *vq, bool want);
} vu_ring_ops;

extern const vu_ring_ops aiol__vhost_split;
extern const vu_ring_ops aiol__vhost_packed;

/*
 * Threads.  A queue is served on one loop (vq->loop): the device's, or
 * another thread's (aiol_vhost_dev_queue_loop_set()).  Everything of a
 * vq below is read and written on its loop's thread, or on the device's
 * loop thread while the queue's loop is parked (park.c): its thread then
 * waits in a bottom half, the mutex hand-over ordering what either side
 * wrote before.  The device's fields are written on the device's loop
 * thread, with every other loop parked; queue threads read them.
 */
struct aiol_vhost_vq {
    aiol_vhost_dev *dev;
    aiol_loop *loop;              /* the loop serving it; written parked */
    const vu_ring_ops *ring;      /* the layout: packed once negotiated */
    unsigned index;
    uint16_t num;                 /* SET_VRING_NUM, 0: not set */
    bool have_uva;                /* SET_VRING_ADDR seen */
    bool addr_set;                /* and translated */
    uint64_t desc_uva, avail_uva, used_uva;
    /* Host pointers, valid when addr_set.  Split: the descriptor table,
     * avail ring (flags, idx, ring[num], used_event) and used ring (flags,
     * idx, elems, avail_event).  Packed: the descriptor ring and, in avail
     * and used, the driver and device event suppression areas (off_wrap,
     * flags). */
    void *desc;
    uint16_t *avail;
    uint16_t *used;
    uint16_t last_avail;          /* next avail entry (split) or descriptor
                                     (packed) to pop */
    uint16_t used_idx;            /* split: shadow of used->idx; packed: the
                                     next descriptor to write used */
    bool avail_wrap, used_wrap;   /* packed: the device's wrap counters of
                                     last_avail and used_idx */
    uint16_t signalled_used;      /* split: used idx at the last notify */
    uint32_t used_since;          /* packed: descriptors used since then */
    bool signalled_valid;
    bool pushed;                  /* pushed since the last notify */
    int kick_fd, call_fd, err_fd; /* -1: none */
    bool started, enabled, broken;
    bool polling;                 /* the loop busy-polls the ring: no kicks
                                     asked for (vq.c) */
    unsigned inflight;            /* popped, not yet pushed */
    aiol_vhost_vq_stats st;
};

/* A loop other than the device's serving some of its queues (park.c). */
typedef struct vu_park vu_park;
typedef struct vu_park_slot {
    vu_park *park;
    aiol_loop *loop;              /* device thread */
    aiol_bh *bh;                  /* parks the loop's thread; device thread */
    unsigned nqueues;             /* queues it serves; device thread */
    bool parked;                  /* its thread waits in bh; park lock */
    aiol_handler_fn *fn;          /* work handed to it, NULL: none; lock */
    void *arg;                    /* lock */
} vu_park_slot;

struct vu_park {
    pthread_mutex_t lock;
    pthread_cond_t cond;          /* a slot parked, left or did its work */
    unsigned gen, released;       /* parks begun and ended; lock */
    unsigned depth;               /* nesting; device thread */
    unsigned nslots;              /* device thread */
    vu_park_slot *slot[AIOL__VHOST_MAX_QUEUES];
};

struct aiol_vhost_dev {
    aiol_loop *loop;
    aiol_vhost_dev_ops ops;
    void *opaque;
    unsigned num_queues;
    aiol_vhost_vq *vqs;

    int listen_fd;
    char *path;
    int conn_fd;

    /* receive state of the message being read */
    uint8_t hdr[AIOL__VHOST_HDR_SIZE];
    uint8_t payload[AIOL__VHOST_PAYLOAD_MAX];
    uint32_t got;                 /* bytes of header + payload read */
    uint32_t req, flags, size;
    int fds[AIOL__VHOST_MAX_FDS];
    unsigned nfds;

    uint64_t features, protocol;
    bool owner;
    vu_mem mem;

    aiol_vhost_stats st;
    vu_park park;                 /* the other loops serving queues */
    const char *why;              /* reason of a refusal (msg.c) */
    /*
     * The last error: written by the device's thread and by a queue's
     * thread that finds its ring broken (aiol__vhost_err_set()), so under
     * err_lock; err_seen is the copy aiol_vhost_dev_last_error_get()
     * returns (device's thread).
     */
    pthread_mutex_t err_lock;
    char err[160];     /* err_lock */
    char err_seen[160];
};

/* park.c: the loops serving queues on other threads. */
void aiol__vhost_park_init(aiol_vhost_dev *dev);
void aiol__vhost_park_fini(aiol_vhost_dev *dev);
/* Device thread.  Parks every other loop serving a queue: their threads
 * wait in a bottom half until aiol__vhost_unpark().  Nests. */
void aiol__vhost_park(aiol_vhost_dev *dev);
void aiol__vhost_unpark(aiol_vhost_dev *dev);
/* Device thread, parked: runs @fn(@arg) on @vq's loop thread (here when
 * that is the device's loop) and waits for it. */
void aiol__vhost_run_on(aiol_vhost_vq *vq, aiol_handler_fn *fn, void *arg);

/* server.c */
void aiol__vhost_drop(aiol_vhost_dev *dev, bool malformed, const char *fmt,
                      ...) __attribute__((format(printf, 3, 4)));
/* Any thread serving @dev: sets its last error (under dev->err_lock). */
void aiol__vhost_err_set(aiol_vhost_dev *dev, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
int aiol__vhost_send_reply(aiol_vhost_dev *dev, uint32_t req,
                           const void *payload, uint32_t size);

/* msg.c: handles the complete message in dev->hdr/payload/fds. */
void aiol__vhost_dispatch(aiol_vhost_dev *dev);
/* Resets the protocol state of a connection (features, memory, rings). */
void aiol__vhost_reset(aiol_vhost_dev *dev);

/* vq.c */
void aiol__vhost_vq_init(aiol_vhost_vq *vq, aiol_vhost_dev *dev,
                         unsigned index);
/* The layout the negotiated features give (VIRTIO_F_RING_PACKED). */
const vu_ring_ops *aiol__vhost_vq_layout(const aiol_vhost_dev *dev);
/* Whether @bit of the device's features was negotiated. */
bool aiol__vhost_vq_has(const aiol_vhost_vq *vq, unsigned bit);
/* Breaks the ring for a malformed chain (@why in the device's error,
 * the err fd signalled).  Returns -EIO. */
int aiol__vhost_vq_broken(aiol_vhost_vq *vq, const char *why);
/*
 * Appends a buffer of a chain to @e: @len bytes at guest address @addr,
 * device-writable if @write.  0; -ENOBUFS (e->iov full); -EIO (broken: a
 * readable buffer after a writable one, a chain over 4 GiB, an address
 * outside guest RAM).
 */
int aiol__vhost_elem_add(aiol_vhost_vq *vq, aiol_vhost_elem *e,
                         uint64_t addr, uint32_t len, bool write);
/* The host address of an indirect table (@len bytes at @addr) after its
 * checks, with its descriptor count in *@count; NULL: broken. */
const uint8_t *aiol__vhost_ind_table(aiol_vhost_vq *vq, uint64_t addr,
                                     uint32_t len, uint32_t *count);
/* SET_VRING_BASE's number for the layout: 0 or -EINVAL. */
int aiol__vhost_vq_base_set(aiol_vhost_vq *vq, uint32_t num);
/* GET_VRING_BASE's number (after aiol__vhost_vq_stop()). */
uint32_t aiol__vhost_vq_base_get(const aiol_vhost_vq *vq);
/* Closes the ring's fds and forgets it (stops it first). */
void aiol__vhost_vq_reset(aiol_vhost_vq *vq);
/* Stops the ring (GET_VRING_BASE): no more kicks, queue_stop called. */
void aiol__vhost_vq_stop(aiol_vhost_vq *vq);
/* Translates the ring addresses against @m; 0 or -EFAULT/-EINVAL. */
int aiol__vhost_vq_map(aiol_vhost_vq *vq, const vu_mem *m, bool commit);
/* Watches the kick fd on the queue's loop; 0 or -errno. */
int aiol__vhost_vq_kick_watch(aiol_vhost_vq *vq);
/* Signals the kick fd: the queue's loop runs its handler once. */
void aiol__vhost_vq_kick_self(aiol_vhost_vq *vq);
/* Sets the kick fd (taken; -1 with nofd) and starts the ring. */
int aiol__vhost_vq_set_kick(aiol_vhost_vq *vq, int fd);
/* Runs the queue handler once if the ring started running just now. */
void aiol__vhost_vq_kick_if_running(aiol_vhost_vq *vq, bool was_running);
void aiol__vhost_vq_set_call(aiol_vhost_vq *vq, int fd);
void aiol__vhost_vq_set_err(aiol_vhost_vq *vq, int fd);

#endif /* AIOLOOP_VHOST_INTERNAL_H */
