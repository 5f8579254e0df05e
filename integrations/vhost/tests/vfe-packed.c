/* SPDX-License-Identifier: MIT */
/*
 * vfe-packed.c - the test frontend's packed rings (virtio 1.1, 2.8): the
 * driver side, written from the specification, not from the backend, so
 * that a layout bug on either side shows up as a failing test.
 *
 * Buffer ids come from a per-queue free list: a buffer may complete out
 * of order, so a chain's first slot cannot be its id.  The driver keeps
 * each id's descriptor count to skip over a used chain, as the spec says.
 */
#include <stdatomic.h>
#include <string.h>

#include "aioloop/vhost.h"
#include "vfe.h"

#define F_NEXT 1u
#define F_WRITE 2u
#define F_INDIRECT 4u
#define F_AVAIL (1u << 7)
#define F_USED (1u << 15)
#define EV_ENABLE 0u
#define EV_DISABLE 1u
#define EV_DESC 2u

static uint8_t *slot(vfe_vq *q, uint16_t i)
{
    return q->desc + 16u * i;
}

void vfe_pdesc_put(uint8_t *p, uint64_t addr, uint32_t len, uint16_t id,
                   uint16_t flags)
{
    memcpy(p, &addr, 8);
    memcpy(p + 8, &len, 4);
    memcpy(p + 12, &id, 2);
    memcpy(p + 14, &flags, 2);
}

/* The avail/used flags of a descriptor the driver makes available now. */
uint16_t vfe_packed_avail_flags(const vfe_vq *q)
{
    return q->avail_wrap ? F_AVAIL : F_USED;
}

void vfe_packed_reset(vfe_vq *q)
{
    q->avail_wrap = q->used_wrap = true;
    q->next_desc = q->last_used = 0;
    memset(q->id_busy, 0, sizeof(q->id_busy));
}

static uint16_t id_alloc(vfe_vq *q)
{
    for (uint16_t k = 0; k < q->num; k++) {
        uint16_t id = (uint16_t)((q->id_next + k) % q->num);

        if (!q->id_busy[id]) {
            q->id_busy[id] = true;
            q->id_next = (uint16_t)(id + 1);
            return id;
        }
    }
    return UINT16_MAX; /* (a test that overfills its ring) */
}

/* Steps the driver's position one descriptor on. */
static void avail_step(vfe_vq *q)
{
    if (++q->next_desc == q->num) {
        q->next_desc = 0;
        q->avail_wrap = !q->avail_wrap;
    }
}

void vfe_packed_post(vfe_vq *q, uint64_t addr, uint32_t len, uint16_t id,
                     uint16_t flags)
{
    uint16_t at = q->next_desc;
    uint16_t fl = (uint16_t)(flags | vfe_packed_avail_flags(q));

    vfe_pdesc_put(slot(q, at), addr, len, id, 0);
    q->id_busy[id] = true;
    q->id_ndescs[id] = 1;
    avail_step(q);
    /* Release: the descriptor before its flags (2.8.21). */
    __atomic_store_n((uint16_t *)(slot(q, at) + 14), fl, __ATOMIC_RELEASE);
}

uint16_t vfe_packed_add(vfe *f, vfe_vq *q, const vfe_buf *bufs, unsigned n,
                        bool indirect)
{
    uint16_t id = id_alloc(q), first = q->next_desc, first_flags = 0;
    unsigned ndescs = indirect ? 1 : n;

    if (indirect) {
        uint64_t t = vfe_alloc(f, 0, 16u * n, 16);

        for (unsigned i = 0; i < n; i++) {
            vfe_pdesc_put((uint8_t *)vfe_gpa(f, t) + 16u * i, bufs[i].gpa,
                          bufs[i].len, 0,
                          (uint16_t)(bufs[i].write ? F_WRITE : 0));
        }
        vfe_packed_post(q, t, 16u * n, id, F_INDIRECT);
        return id;
    } else {
        for (unsigned i = 0; i < n; i++) {
            uint16_t fl = (uint16_t)((bufs[i].write ? F_WRITE : 0) |
                                     (i + 1 < n ? F_NEXT : 0) |
                                     vfe_packed_avail_flags(q));

            /* (the first descriptor's flags go last, below) */
            vfe_pdesc_put(slot(q, q->next_desc), bufs[i].gpa, bufs[i].len,
                          id, i == 0 ? 0 : fl);
            if (i == 0) {
                first_flags = fl;
            }
            avail_step(q);
        }
    }
    q->id_ndescs[id] = (uint16_t)ndescs;
    /* Release: the chain before its first descriptor's flags (2.8.21). */
    __atomic_store_n((uint16_t *)(slot(q, first) + 14), first_flags,
                     __ATOMIC_RELEASE);
    return id;
}

/* The used descriptor at @pos (lap @wrap), or false if not used yet. */
static bool used_at(vfe_vq *q, uint16_t pos, bool wrap, uint16_t *id,
                    uint32_t *len)
{
    uint16_t fl = __atomic_load_n((uint16_t *)(slot(q, pos) + 14),
                                  __ATOMIC_ACQUIRE);

    if (((fl & F_USED) != 0) != wrap || ((fl & F_AVAIL) != 0) != wrap) {
        return false;
    }
    memcpy(id, slot(q, pos) + 12, 2);
    memcpy(len, slot(q, pos) + 8, 4);
    if (!(fl & F_WRITE)) {
        *len = 0;
    }
    return true;
}

/* Moves (*pos, *wrap) past the chain of buffer @id. */
static void used_skip(vfe_vq *q, uint16_t id, uint16_t *pos, bool *wrap)
{
    uint16_t n = id < q->num ? q->id_ndescs[id] : 1;

    *pos = (uint16_t)(*pos + n);
    if (*pos >= q->num) {
        *pos = (uint16_t)(*pos - q->num);
        *wrap = !*wrap;
    }
}

bool vfe_packed_take_used(vfe_vq *q, uint32_t *id, uint32_t *len)
{
    uint16_t i;

    if (!used_at(q, q->last_used, q->used_wrap, &i, len)) {
        return false;
    }
    used_skip(q, i, &q->last_used, &q->used_wrap);
    if (i < q->num) {
        q->id_busy[i] = false;
    }
    *id = i;
    return true;
}

unsigned vfe_packed_used_pending(vfe_vq *q)
{
    uint16_t pos = q->last_used, id;
    bool wrap = q->used_wrap;
    uint32_t len;
    unsigned n = 0;

    while (n < q->num && used_at(q, pos, wrap, &id, &len)) {
        used_skip(q, id, &pos, &wrap);
        n++;
    }
    return n;
}

/* The event areas: [0] off_wrap, [1] flags. */
static void event_put(uint8_t *area, uint16_t off_wrap, uint16_t flags)
{
    __atomic_store_n((uint16_t *)area, off_wrap, __ATOMIC_RELAXED);
    __atomic_store_n((uint16_t *)area + 1, flags, __ATOMIC_RELEASE);
}

void vfe_packed_set_used_event(vfe_vq *q, uint16_t v)
{
    uint16_t lap_wrap = (v / q->num) % 2 == 0 ? 1 : 0;

    event_put(q->avail, (uint16_t)(v % q->num | lap_wrap << 15), EV_DESC);
}

uint16_t vfe_packed_avail_event(vfe_vq *q)
{
    uint16_t ow = __atomic_load_n((uint16_t *)q->used, __ATOMIC_ACQUIRE);

    return (uint16_t)((ow & 0x7fff) + ((ow >> 15) ? 0 : q->num));
}

void vfe_packed_no_interrupt(vfe_vq *q, bool on)
{
    event_put(q->avail, 0, on ? EV_DISABLE : EV_ENABLE);
}

bool vfe_packed_kicks_wanted(vfe_vq *q)
{
    return __atomic_load_n((uint16_t *)q->used + 1, __ATOMIC_ACQUIRE) !=
           EV_DISABLE;
}
