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

#include <stdarg.h>
#include <stdint.h>

#include "aioloop/vhost.h"

/* Misuse check that survives NDEBUG: "aioloop-vhost: <func>: <msg>", abort. */
#define aiol__vhost_check(cond, msg)                                         \
    do {                                                                     \
        if (__builtin_expect(!(cond), 0)) {                                  \
            aiol__vhost_fail(__func__, (msg));                               \
        }                                                                    \
    } while (0)

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
    vu_region r[AIOL_VHOST_MAX_FDS];
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
/* Host address of a gpa and how many bytes from there lie in its region. */
void *aiol__vhost_gpa_chunk(const vu_mem *m, uint64_t gpa, uint64_t *avail);

/* ---- split rings (virtio 1.x layout) ---- */

#define VRING_DESC_F_NEXT 1u
#define VRING_DESC_F_WRITE 2u
#define VRING_DESC_F_INDIRECT 4u
#define VRING_AVAIL_F_NO_INTERRUPT 1u
#define VRING_USED_F_NO_NOTIFY 1u  /* used->flags: the device wants no kick */

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

struct aiol_vhost_vq {
    aiol_vhost_dev *dev;
    unsigned index;
    uint16_t num;                 /* SET_VRING_NUM, 0: not set */
    bool have_uva;                /* SET_VRING_ADDR seen */
    bool addr_set;                /* and translated */
    uint64_t desc_uva, avail_uva, used_uva;
    vring_desc *desc;             /* host pointers, valid when addr_set */
    uint16_t *avail;              /* flags, idx, ring[num], used_event */
    uint16_t *used;               /* flags, idx, then elems, avail_event */
    uint16_t last_avail;          /* next avail entry to pop */
    uint16_t used_idx;            /* shadow of used->idx */
    uint16_t signalled_used;      /* used idx at the last notify */
    bool signalled_valid;
    bool pushed;                  /* pushed since the last notify */
    int kick_fd, call_fd, err_fd; /* -1: none */
    bool started, enabled, broken;
    bool polling;                 /* the loop busy-polls the ring: no kicks
                                     asked for (vq.c) */
    unsigned inflight;            /* popped, not yet pushed */
    aiol_vhost_vq_stats st;
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
    uint8_t hdr[AIOL_VHOST_HDR_SIZE];
    uint8_t payload[AIOL_VHOST_PAYLOAD_MAX];
    uint32_t got;                 /* bytes of header + payload read */
    uint32_t req, flags, size;
    int fds[AIOL_VHOST_MAX_FDS];
    unsigned nfds;

    uint64_t features, protocol;
    bool owner;
    vu_mem mem;

    aiol_vhost_stats st;
    const char *why;              /* reason of a refusal (msg.c) */
    char err[160];
};

/* server.c */
void aiol__vhost_drop(aiol_vhost_dev *dev, bool malformed, const char *fmt,
                      ...) __attribute__((format(printf, 3, 4)));
int aiol__vhost_send_reply(aiol_vhost_dev *dev, uint32_t req,
                           const void *payload, uint32_t size);

/* msg.c: handles the complete message in dev->hdr/payload/fds. */
void aiol__vhost_dispatch(aiol_vhost_dev *dev);
/* Resets the protocol state of a connection (features, memory, rings). */
void aiol__vhost_reset(aiol_vhost_dev *dev);

/* vq.c */
void aiol__vhost_vq_init(aiol_vhost_vq *vq, aiol_vhost_dev *dev,
                         unsigned index);
/* Closes the ring's fds and forgets it (stops it first). */
void aiol__vhost_vq_reset(aiol_vhost_vq *vq);
/* Stops the ring (GET_VRING_BASE): no more kicks, queue_stop called. */
void aiol__vhost_vq_stop(aiol_vhost_vq *vq);
/* Translates the ring addresses against @m; 0 or -EFAULT/-EINVAL. */
int aiol__vhost_vq_map(aiol_vhost_vq *vq, const vu_mem *m, bool commit);
/* Sets the kick fd (taken; -1 with nofd) and starts the ring. */
int aiol__vhost_vq_set_kick(aiol_vhost_vq *vq, int fd);
/* Runs the queue handler once if the ring started running just now. */
void aiol__vhost_vq_kick_if_running(aiol_vhost_vq *vq, bool was_running);
void aiol__vhost_vq_set_call(aiol_vhost_vq *vq, int fd);
void aiol__vhost_vq_set_err(aiol_vhost_vq *vq, int fd);

#endif /* AIOLOOP_VHOST_INTERNAL_H */
