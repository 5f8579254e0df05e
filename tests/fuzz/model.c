/* SPDX-License-Identifier: MIT */
/*
 * model.c - the fuzzer's reference model (see model.h for what it checks).
 *
 * Everything here is a linear scan over small arrays; that is the point:
 * the model must be obviously right, not fast.
 */
#include "model.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void m_fail(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    fputs("fuzz model: loop violated its semantics: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    abort();
}

void m_init(model *m, bool exact, bool confined)
{
    memset(m, 0, sizeof(*m));
    m->exact = exact;
    m->confined = confined;
}

/* ------------------------------------------------------------------ fds */

int m_slot_add(model *m, fz_kind kind, int peer)
{
    m_slot *s = &m->slots[m->nslots];

    *s = (m_slot){ .kind = kind, .peer = peer, .handler = -1 };
    return m->nslots++;
}

int m_buffer_slot(const model *m, int slot)
{
    return m->slots[slot].kind == FZ_PIPE_W ? m->slots[slot].peer : slot;
}

bool m_peer_closed(const model *m, int slot)
{
    const m_slot *s = &m->slots[slot];

    return s->peer >= 0 && m->slots[s->peer].closed;
}

bool m_readable(const model *m, int slot)
{
    const m_slot *s = &m->slots[slot];

    if (s->closed) {
        return false;
    }
    switch (s->kind) {
    case FZ_PIPE_R:
        return s->bytes > 0 || s->full || m_peer_closed(m, slot);
    case FZ_EVENTFD:
        return s->bytes > 0;
    default:
        return m_peer_closed(m, slot); /* error: no reader left */
    }
}

bool m_writable(const model *m, int slot)
{
    const m_slot *s = &m->slots[slot];

    if (s->closed) {
        return false;
    }
    switch (s->kind) {
    case FZ_PIPE_W:
        return !m->slots[s->peer].full || m_peer_closed(m, slot);
    case FZ_EVENTFD:
        return true; /* the counter never gets near its maximum here */
    default:
        return false; /* a pipe's read end never writes */
    }
}

static unsigned ready_now(const model *m, int slot)
{
    return (m_readable(m, slot) ? M_EV_IN : 0u) |
           (m_writable(m, slot) ? M_EV_OUT : 0u);
}

void m_fd_changed(model *m, int slot)
{
    int b = m_buffer_slot(m, slot);

    /* Both ends of a pipe see its buffer. */
    m->slots[b].was |= ready_now(m, b);
    if (m->slots[b].peer >= 0) {
        int w = m->slots[b].peer;
        m->slots[w].was |= ready_now(m, w);
    }
}

bool m_any_ready(const model *m)
{
    for (int i = 0; i < m->nh; i++) {
        const m_handler *h = &m->h[i];
        unsigned want = (h->rd ? M_EV_IN : 0u) | (h->wr ? M_EV_OUT : 0u);

        if (h->alive && (want & ready_now(m, h->slot))) {
            return true;
        }
    }
    return false;
}

/* ------------------------------------------------------------- handlers */

static m_frame *cur_frame(model *m)
{
    if (m->depth == 0) {
        m_fail("callback outside of any poll call");
    }
    return &m->fr[m->depth];
}

static void handler_kill(model *m, int id)
{
    m_handler *h = &m->h[id];

    h->alive = false;
    memset(h->coll, 0, sizeof(h->coll));
    m->slots[h->slot].handler = -1;
    for (int d = 1; d <= m->depth; d++) {
        if (m->fr[d].expect_write == id) {
            m->fr[d].expect_write = -1; /* deleted: the write is skipped */
        }
    }
}

int m_handler_set(model *m, int slot, bool rd, bool wr)
{
    int id = m->nh++;

    if (m->slots[slot].handler >= 0) {
        handler_kill(m, m->slots[slot].handler); /* replaced: a new handler */
    }
    m->h[id] = (m_handler){ .alive = true, .slot = slot, .rd = rd, .wr = wr };
    m->slots[slot].handler = id;
    return id;
}

void m_handler_remove(model *m, int slot)
{
    if (m->slots[slot].handler >= 0) {
        handler_kill(m, m->slots[slot].handler);
    }
}

/* -------------------------------------------------------- bottom halves */

int m_bh_new(model *m, bool oneshot)
{
    int b = m->nbh++;

    m->bh[b] = (m_bh){ .exists = true, .usable = !oneshot,
                       .local = m->confined && !oneshot };
    if (oneshot) {
        m->bh[b].flags = MB_PENDING | MB_SCHEDULED | MB_ONESHOT;
        m->gq[m->ngq++] = b;
    }
    return b;
}

static void bh_enqueue(model *m, int b, unsigned set, unsigned clear)
{
    m_bh *x = &m->bh[b];

    if (!(x->flags & MB_PENDING)) {
        if (m->ngq == FZ_QUEUE_MAX) {
            m_fail("model queue overflow");
        }
        m->gq[m->ngq++] = b;
    }
    x->flags = (x->flags | MB_PENDING | set) & ~clear;
}

void m_bh_schedule(model *m, int b, bool idle)
{
    unsigned f = m->bh[b].flags;

    if (!idle) {
        /* A normal schedule makes it a normal run, whatever came before. */
        bh_enqueue(m, b, MB_SCHEDULED, MB_IDLE);
    } else if ((f & (MB_PENDING | MB_SCHEDULED)) == (MB_PENDING | MB_SCHEDULED) &&
               !(f & MB_IDLE)) {
        bh_enqueue(m, b, 0, 0); /* already due as a normal run */
    } else {
        bh_enqueue(m, b, MB_SCHEDULED | MB_IDLE, 0);
    }
}

void m_bh_cancel(model *m, int b)
{
    m->bh[b].flags &= ~(unsigned)MB_SCHEDULED;
}

void m_bh_delete(model *m, int b)
{
    bh_enqueue(m, b, MB_DELETED, 0);
    m->bh[b].usable = false;
}

bool m_bh_idle(const model *m)
{
    return m->ngq == 0 && m->nsq == 0;
}

static bool runnable_normal(unsigned f)
{
    return (f & (MB_SCHEDULED | MB_DELETED | MB_IDLE)) == MB_SCHEDULED;
}

bool m_bh_due(const model *m)
{
    for (int i = 0; i < m->ngq; i++) {
        if (runnable_normal(m->bh[m->gq[i]].flags)) {
            return true;
        }
    }
    for (int i = 0; i < m->nsq; i++) {
        if (runnable_normal(m->bh[m->sq[i]].flags)) {
            return true;
        }
    }
    return false;
}

/*
 * Takes the next entry off the taken queue the way the loop does: clears
 * its flags but DELETED, frees it if deleted or one-shot.  Returns the
 * bottom half whose callback must run now, or -1 when the queue is empty.
 */
static int bh_next_runnable(model *m, unsigned *flags_out)
{
    while (m->nsq > 0) {
        int b = m->sq[0];
        m_bh *x = &m->bh[b];
        unsigned f = x->flags;

        memmove(m->sq, m->sq + 1, (size_t)--m->nsq * sizeof(m->sq[0]));
        x->flags &= MB_DELETED;
        if (f & (MB_DELETED | MB_ONESHOT)) {
            x->exists = false;
        }
        if ((f & (MB_SCHEDULED | MB_DELETED)) == MB_SCHEDULED) {
            *flags_out = f;
            return b;
        }
    }
    return -1;
}

/* ------------------------------------------------------------------ timers */

int m_timer_new(model *m)
{
    int t = m->nt++;

    m->t[t] = (m_timer){ .live = true };
    return t;
}

void m_timer_mod(model *m, int t, int64_t expire)
{
    m->t[t].armed = true;
    m->t[t].expire = expire;
    m->t[t].seq = m->tseq++;
}

void m_timer_cancel(model *m, int t)
{
    m->t[t].armed = false;
}

void m_timer_free(model *m, int t)
{
    m->t[t].armed = false;
    m->t[t].live = false;
}

/* The earliest armed timer by (deadline, arming order), or -1. */
static int timer_top(const model *m)
{
    int best = -1;

    for (int i = 0; i < m->nt; i++) {
        const m_timer *x = &m->t[i];

        if (x->armed && (best < 0 || x->expire < m->t[best].expire ||
                         (x->expire == m->t[best].expire &&
                          x->seq < m->t[best].seq))) {
            best = i;
        }
    }
    return best;
}

/* The timer the current run must fire next, or -1. */
static int timer_due(const model *m, const m_frame *f)
{
    int top = timer_top(m);

    if (top >= 0 && m->t[top].expire <= f->t_now &&
        m->t[top].seq < f->t_before) {
        return top;
    }
    return -1;
}

/* ------------------------------------------------------------ poll calls */

/* Moves frame @f on to @phase, checking that the phases it leaves are done. */
static void advance(model *m, m_frame *f, int phase)
{
    unsigned flags;
    int b;

    if (phase < f->phase) {
        m_fail("depth %d: callback of phase %d after phase %d", m->depth,
               phase, f->phase);
    }
    if (f->phase == PH_BH && phase > PH_BH) {
        if ((b = bh_next_runnable(m, &flags)) >= 0) {
            m_fail("depth %d: bottom half %d should have run", m->depth, b);
        }
        f->phase = PH_FD;
    }
    if (f->phase == PH_FD && phase > PH_FD) {
        if (m->exact && f->expect_write >= 0) {
            m_fail("depth %d: handler %d's write callback did not run",
                   m->depth, f->expect_write);
        }
        for (int i = 0; i < m->nh; i++) {
            if (m->exact && m->h[i].coll[m->depth] != 0) {
                m_fail("depth %d: ready handler %d was not dispatched",
                       m->depth, i);
            }
            m->h[i].coll[m->depth] = 0;
        }
        f->phase = PH_TIMER;
        f->t_now = m->now;
        f->t_before = m->tseq;
    }
    if (f->phase == PH_TIMER && phase > PH_TIMER) {
        int t = timer_due(m, f);
        if (t >= 0) {
            m_fail("depth %d: due timer %d did not fire", m->depth, t);
        }
        f->phase = PH_END;
    }
}

void m_poll_enter(model *m)
{
    m_frame *f;

    if (m->depth == FZ_MAX_DEPTH) {
        m_fail("model: poll nested too deep");
    }
    f = &m->fr[++m->depth];
    *f = (m_frame){ .phase = PH_BH, .cur = -1, .expect_write = -1 };

    /*
     * The wait.  Exact: every handler whose fd is ready now is this call's,
     * taken off any parent's list.  Inexact: it may be, with what its fd
     * had at any moment since the last wait; parents keep their claim
     * until this call is seen to dispatch it.
     */
    for (int i = 0; i < m->nh; i++) {
        m_handler *h = &m->h[i];
        const m_slot *s = &m->slots[h->slot];
        unsigned want = (h->rd ? M_EV_IN : 0u) | (h->wr ? M_EV_OUT : 0u);
        unsigned ev = want & (m->exact ? ready_now(m, h->slot)
                                       : ready_now(m, h->slot) | s->was);

        if (!h->alive || ev == 0) {
            continue;
        }
        if (m->exact) {
            memset(h->coll, 0, sizeof(h->coll));
        }
        h->coll[m->depth] = ev;
    }
    for (int i = 0; i < m->nslots; i++) {
        m->slots[i].was = ready_now(m, i);
    }
    /*
     * Bottom halves scheduled so far join the queue this call runs: the
     * thread-safe ones first, then the local ones, each kind in its order.
     */
    for (int local = 0; local <= 1; local++) {
        for (int i = 0; i < m->ngq; i++) {
            if (m->bh[m->gq[i]].local == (bool)local) {
                m->sq[m->nsq++] = m->gq[i];
            }
        }
    }
    m->ngq = 0;
}

void m_poll_exit(model *m, bool progress)
{
    m_frame *f = cur_frame(m);

    advance(m, f, PH_END);
    if (progress != f->progress) {
        m_fail("depth %d: poll returned progress=%d, expected %d", m->depth,
               progress, f->progress);
    }
    m->depth--;
}

void m_bh_called(model *m, int b)
{
    m_frame *f = cur_frame(m);
    unsigned flags = 0;
    int want;

    advance(m, f, PH_BH);
    want = bh_next_runnable(m, &flags);
    if (want != b) {
        m_fail("depth %d: bottom half %d ran, expected %d", m->depth, b, want);
    }
    m->bh[b].runs++;
    if (!(flags & MB_IDLE)) {
        f->progress = true;
    }
}

void m_fd_called(model *m, int id, bool write)
{
    m_frame *f = cur_frame(m);
    m_handler *h = &m->h[id];
    unsigned need = write ? M_EV_OUT : M_EV_IN;
    int expected = f->expect_write;

    advance(m, f, PH_FD);
    if (!h->alive) {
        m_fail("depth %d: handler %d called after its removal", m->depth, id);
    }
    f->progress = true;
    f->expect_write = -1;
    if (write && expected == id) {
        return; /* the write half of the dispatch whose read just ran */
    }
    if (m->exact && expected >= 0) {
        m_fail("depth %d: handler %d called before handler %d's write",
               m->depth, id, expected);
    }
    if (!(h->coll[m->depth] & need)) {
        m_fail("depth %d: handler %d %s callback, but this poll call "
               "collected %#x for it", m->depth, id,
               write ? "write" : "read", h->coll[m->depth]);
    }
    if (m->exact && write && h->coll[m->depth] != M_EV_OUT) {
        m_fail("depth %d: handler %d write callback before its read",
               m->depth, id);
    }
    f->cur = id;
    f->cur_ev = h->coll[m->depth];
    /* Dispatched here: no call on the stack may dispatch this readiness. */
    memset(h->coll, 0, sizeof(h->coll));
}

void m_fd_returned(model *m, int id, bool write)
{
    m_frame *f = cur_frame(m);

    if (!write && f->cur == id && (f->cur_ev & M_EV_OUT) && m->h[id].alive) {
        f->expect_write = id;
    }
}

void m_timer_called(model *m, int t)
{
    m_frame *f = cur_frame(m);
    int want;

    advance(m, f, PH_TIMER);
    want = timer_due(m, f);
    if (want != t) {
        m_fail("depth %d: timer %d fired, expected %d (now %lld)", m->depth,
               t, want, (long long)f->t_now);
    }
    m->t[t].armed = false;
    f->progress = true;
}
