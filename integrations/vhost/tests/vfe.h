/* SPDX-License-Identifier: MIT */
/*
 * vfe.h - a host-side vhost-user test frontend (our own code).
 *
 * It plays QEMU's part against a backend socket: negotiates features,
 * creates a memfd "guest RAM" split into regions (region i at guest
 * physical address i * 4 GiB), sends SET_MEM_TABLE, lays out split
 * virtqueues in that RAM, adds direct and indirect chains, kicks, and
 * waits for used elements and call signals.  It can also write any raw
 * bytes and descriptors, for malformed-input tests.
 *
 * Single-threaded use: whenever it waits (a reply, a used element) it
 * calls the pump callback, which runs the backend's loop once without
 * blocking, so frontend and backend share one thread deterministically.
 * It allocates nothing on the heap (the fault sweep counts allocations).
 */
#ifndef AIOLOOP_VHOST_VFE_H
#define AIOLOOP_VHOST_VFE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vhost-proto.h" /* (the library's, ../src) */

#define VFE_MAX_VQ 8
#define VFE_MAX_REGIONS 8

typedef void vfe_pump_fn(void *opaque);

typedef struct vfe_buf {
    uint64_t gpa;
    uint32_t len;
    bool write;  /* device-writable */
} vfe_buf;

/* Largest packed ring the test frontend drives. */
#define VFE_PACKED_MAX 1024

typedef struct vfe_vq {
    uint16_t num;
    bool packed;             /* packed layout (VIRTIO_F_RING_PACKED) */
    uint64_t desc_gpa, avail_gpa, used_gpa;
    uint8_t *desc, *avail, *used;
    int kick, call, err;     /* frontend's ends; call -1 with NOFD */
    uint64_t call_on_set;    /* signals the call fd had right after
                                SET_VRING_CALL (then read away) */
    uint16_t avail_idx, last_used, next_desc;
    /* packed: wrap counters of next_desc and last_used, buffer ids in
       use and each one's descriptor count */
    bool avail_wrap, used_wrap;
    uint16_t id_next;
    bool id_busy[VFE_PACKED_MAX];
    uint16_t id_ndescs[VFE_PACKED_MAX];
} vfe_vq;

typedef struct vfe_region {
    uint64_t gpa, size, uva, off, brk;
} vfe_region;

typedef struct vfe {
    int sock;
    vfe_pump_fn *pump;
    void *pump_opaque;
    int memfd;
    uint8_t *mem;
    size_t mem_size;
    unsigned nregions;
    vfe_region reg[VFE_MAX_REGIONS];
    vfe_vq vq[VFE_MAX_VQ];
    uint64_t features, protocol;
    bool want_packed;        /* VFE_RING=packed: negotiate packed rings */
} vfe;

/* Connects to @path.  0 or -errno.  With VFE_RING=packed in the
 * environment, the session negotiates packed rings when offered. */
int vfe_connect(vfe *f, const char *path, vfe_pump_fn *pump, void *opaque);
/* Closes the connection, the ring fds and the guest RAM. */
void vfe_close(vfe *f);

/* Sends one message (flags get version 1 added).  0 or -errno. */
int vfe_send(vfe *f, uint32_t req, uint32_t flags, const void *payload,
             uint32_t size, const int *fds, unsigned nfds);
/* Sends raw bytes with fds. */
int vfe_send_raw(vfe *f, const void *buf, size_t len, const int *fds,
                 unsigned nfds);
/* Waits for the reply to @req; returns its payload size or -errno
 * (-EPIPE: connection closed, -ETIMEDOUT, -EPROTO: not that reply). */
int vfe_recv(vfe *f, uint32_t req, void *payload, uint32_t cap);
/* GET_* returning a u64. */
int vfe_get_u64(vfe *f, uint32_t req, uint64_t *out);
/* SET_* with a u64; with @ack, NEED_REPLY and the ack's value returned as
 * 0 or -errno. */
int vfe_set_u64(vfe *f, uint32_t req, uint64_t v, bool ack);
/* Sends a message with NEED_REPLY and returns the ack (0 or -errno). */
int vfe_request_ack(vfe *f, uint32_t req, const void *payload,
                    uint32_t size, const int *fds, unsigned nfds);
/* Sends a vring state (index, num) message, optionally acked. */
int vfe_vring_state(vfe *f, uint32_t req, uint32_t idx, uint32_t num,
                    bool ack);
/* True when the backend closed the connection (pumps a while first). */
bool vfe_dropped(vfe *f);

/* GET/SET_FEATURES (offered & @features, packed rings only when wanted),
 * GET/SET_PROTOCOL_FEATURES (offered & @protocol), SET_OWNER.  0 or
 * -errno. */
int vfe_negotiate(vfe *f, uint64_t features, uint64_t protocol);

/* Creates @size bytes of guest RAM in @nregions equal regions. */
int vfe_mem_create(vfe *f, size_t size, unsigned nregions);
/* Sends the table (with @ack: acked; returns the ack). */
int vfe_set_mem_table(vfe *f, bool ack);
/* Frontend pointer of a guest physical address (NULL outside RAM). */
void *vfe_gpa(vfe *f, uint64_t gpa);
/* Allocates guest RAM in region @r (aligned to @align). */
uint64_t vfe_alloc(vfe *f, unsigned r, size_t len, size_t align);

/* Lays out queue @idx (size @num) in region 0 and sends NUM, BASE, ADDR,
 * KICK, CALL (NOFD if @call_nofd) and ERR.  0 or -errno. */
int vfe_vq_setup(vfe *f, unsigned idx, uint16_t num, bool call_nofd);
/* Whether the session's rings are packed. */
bool vfe_packed(const vfe *f);
/* Ring positions @chains chains of @per descriptors take: descriptors on
 * a packed ring, avail entries on a split one. */
unsigned vfe_ring_units(const vfe *f, unsigned chains, unsigned per);
/* Writes descriptor @i of queue @idx (raw, split, for hostile tests). */
void vfe_desc_write(vfe *f, unsigned idx, uint16_t i, uint64_t addr,
                    uint32_t len, uint16_t flags, uint16_t next);
/* Writes descriptor @i of an indirect table at @table_gpa. */
void vfe_ind_write(vfe *f, uint64_t table_gpa, uint16_t i, uint64_t addr,
                   uint32_t len, uint16_t flags, uint16_t next);
/* Puts @head in the avail ring and publishes it (avail idx + 1). */
void vfe_vq_publish(vfe *f, unsigned idx, uint16_t head);
/* Adds a chain of @n buffers (direct, or one indirect table); returns
 * its head (split) or buffer id (packed): the used element's id. */
uint16_t vfe_vq_add(vfe *f, unsigned idx, const vfe_buf *bufs, unsigned n,
                    bool indirect);
void vfe_vq_kick(vfe *f, unsigned idx);
/* GET_VRING_BASE: stops the ring; returns its base (>= 0; packed: the
 * next descriptor, plus the size on an odd lap) or -errno. */
int vfe_vq_stop(vfe *f, unsigned idx);
/* Pumps until a used element appears; 0 or -ETIMEDOUT. */
int vfe_vq_wait_used(vfe *f, unsigned idx, uint32_t *id, uint32_t *len);
/* Pumps a few rounds and returns how many used elements are pending. */
unsigned vfe_vq_used_pending(vfe *f, unsigned idx);
/* Reads the call eventfd without blocking: its count, 0 if unsignalled. */
uint64_t vfe_vq_calls(vfe *f, unsigned idx);
/* The same for the err eventfd. */
uint64_t vfe_vq_errs(vfe *f, unsigned idx);
/* Event idx: sets used_event (avail ring's tail), reads avail_event.
 * Packed: the driver's and the device's event descriptor, as a count of
 * descriptors (offset, plus the size on an odd lap). */
void vfe_vq_set_used_event(vfe *f, unsigned idx, uint16_t v);
uint16_t vfe_vq_avail_event(vfe *f, unsigned idx);
/* Sets or clears VRING_AVAIL_F_NO_INTERRUPT (packed: the driver's event
 * flags, DISABLE or ENABLE). */
void vfe_vq_no_interrupt(vfe *f, unsigned idx, bool on);
/* Whether the device asks for no kicks: VRING_USED_F_NO_NOTIFY, or
 * (packed) its event flags DISABLE. */
bool vfe_vq_kicks_off(vfe *f, unsigned idx);
/* Pumps the backend @n rounds. */
void vfe_pump(vfe *f, int n);

/* vfe-packed.c, behind the calls above. */
void vfe_pdesc_put(uint8_t *p, uint64_t addr, uint32_t len, uint16_t id,
                   uint16_t flags);
uint16_t vfe_packed_avail_flags(const vfe_vq *q);
void vfe_packed_reset(vfe_vq *q);
uint16_t vfe_packed_add(vfe *f, vfe_vq *q, const vfe_buf *bufs, unsigned n,
                        bool indirect);
/* Makes one descriptor available with buffer id @id (a caller that
 * manages its own ids: nothing else may take @id meanwhile). */
void vfe_packed_post(vfe_vq *q, uint64_t addr, uint32_t len, uint16_t id,
                     uint16_t flags);
bool vfe_packed_take_used(vfe_vq *q, uint32_t *id, uint32_t *len);
unsigned vfe_packed_used_pending(vfe_vq *q);
void vfe_packed_set_used_event(vfe_vq *q, uint16_t v);
uint16_t vfe_packed_avail_event(vfe_vq *q);
void vfe_packed_no_interrupt(vfe_vq *q, bool on);
bool vfe_packed_kicks_wanted(vfe_vq *q);

#endif /* AIOLOOP_VHOST_VFE_H */
