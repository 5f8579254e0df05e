/* SPDX-License-Identifier: MIT */
/*
 * fuzz_loop.c - libFuzzer harness: random programs of loop operations,
 * checked against the reference model (model.h) as they run.
 *
 * Input format.  Byte 0 picks the fd monitor (0 poll, 1 epoll, 2 io_uring,
 * modulo 3) and, by (byte 0 / 3) odd, a thread-confined loop
 * (AIOL_LOOP_CONFINED: its bottom halves but the one-shots are local).  The rest is the program: a sequence of ops, each an opcode
 * byte (modulo OP_COUNT) followed by a fixed number of operand bytes; a
 * program that ends mid-op stops there, so every byte string is a valid
 * program.  END stops the program (or script) early: the bytes after it
 * are only reachable as scripts.  Callbacks run sub-programs: each handler, bottom half and
 * timer is created with a script, a (start, length) window into the same
 * program bytes, which the harness interprets whenever that callback
 * runs.  A script's POLL ops are nested polls (up to FZ_MAX_DEPTH calls on
 * the stack); its SELF op acts on the callback's own object (removes or
 * replaces the handler being dispatched, reschedules or deletes the
 * running bottom half, re-arms or frees the firing timer).
 *
 * Timers use a fake clock that only ADVANCE moves, so the run does not
 * depend on real time; blocking polls are bounded (20 us).  Every run
 * ends by removing everything, polling until no bottom half is queued,
 * and freeing the loop: leaks and use-after-free show up under ASan.
 *
 * Budgets (ops and polls per input) keep a run short whatever the input.
 * The harness checks its own view of the fds against the kernel's answers
 * (bytes read, EAGAIN) so the model's readiness is known to be right.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "aioloop/aioloop.h"
#include "aioloop/embed.h"
#include "fuzz.h"
#include "model.h"

enum {
    OP_FD_NEW, OP_FEED, OP_DRAIN, OP_FILL, OP_SET, OP_REMOVE,
    OP_BH_NEW, OP_BH_SCHED, OP_BH_IDLE, OP_BH_CANCEL, OP_BH_DELETE,
    OP_BH_ONESHOT, OP_T_NEW, OP_T_MOD, OP_T_CANCEL, OP_T_FREE,
    OP_ADVANCE, OP_POLL, OP_POLL_BLOCK, OP_NOTIFY, OP_SELF, OP_END,
    OP_CLOSE, OP_EMBED,
    OP_COUNT
};

/* Operand bytes per opcode. */
static const uint8_t op_args[OP_COUNT] = {
    [OP_FD_NEW] = 1, [OP_FEED] = 1, [OP_DRAIN] = 1, [OP_FILL] = 1,
    [OP_SET] = 5, [OP_REMOVE] = 1, [OP_BH_NEW] = 3, [OP_BH_SCHED] = 1,
    [OP_BH_IDLE] = 1, [OP_BH_CANCEL] = 1, [OP_BH_DELETE] = 1,
    [OP_BH_ONESHOT] = 3, [OP_T_NEW] = 3, [OP_T_MOD] = 2, [OP_T_CANCEL] = 1,
    [OP_T_FREE] = 1, [OP_ADVANCE] = 1, [OP_POLL] = 0, [OP_POLL_BLOCK] = 0,
    [OP_NOTIFY] = 0, [OP_SELF] = 1, [OP_END] = 0, [OP_CLOSE] = 1,
    [OP_EMBED] = 0,
};

#define OPS_BUDGET 4000
#define POLLS_BUDGET 400
#define SCRIPT_MAX_OPS 6
#define BLOCK_NS 20000

typedef struct script {
    size_t start, nops;
} script;

/* What a callback's opaque points to. */
typedef enum { OBJ_HANDLER, OBJ_BH, OBJ_TIMER } obj_kind;
typedef struct obj {
    obj_kind kind;
    int id;        /* model id */
    script sc;
} obj;

typedef struct fz {
    const uint8_t *prog;
    size_t len;
    aiol_loop *loop;
    aiol_clock *clock;
    model m;
    int fds[FZ_MAX_SLOTS];
    obj hobj[FZ_MAX_HANDLERS];
    obj bobj[FZ_MAX_BHS];
    aiol_bh *bhs[FZ_MAX_BHS];
    obj tobj[FZ_MAX_TIMERS];
    aiol_timer *timers[FZ_MAX_TIMERS];
    long ops_left, polls_left;
    long embeds;     /* EMBED ops so far: odd ones poll the loop fd */
    bool tearing_down;
} fz;

static fz g; /* one input at a time */
static bool g_trace; /* FZ_TRACE=1: print each op and callback to stderr */

#define TRACE(...)                                                           \
    do {                                                                     \
        if (g_trace) {                                                       \
            fprintf(stderr, "%*s", 2 * g.m.depth, "");                       \
            fprintf(stderr, __VA_ARGS__);                                    \
        }                                                                    \
    } while (0)

#define CHECK(cond)                                                          \
    do {                                                                     \
        if (!(cond)) {                                                       \
            m_fail("%s:%d: %s (errno %d)", __FILE__, __LINE__, #cond,        \
                   errno);                                                   \
        }                                                                    \
    } while (0)

static int64_t fake_now(void *opaque)
{
    return ((fz *)opaque)->m.now;
}

static void run_script(const script *sc, const obj *self);

/* ------------------------------------------------------------------ fds */

static void fd_new(uint8_t kind)
{
    model *m = &g.m;

    if (kind % 2 == 0 && m->nslots + 2 <= FZ_MAX_SLOTS) {
        int p[2];
        CHECK(pipe2(p, O_NONBLOCK | O_CLOEXEC) == 0);
        g.fds[m->nslots] = p[0];
        g.fds[m->nslots + 1] = p[1];
        m_slot_add(m, FZ_PIPE_R, m->nslots + 1);
        m_slot_add(m, FZ_PIPE_W, m->nslots - 1);
    } else if (kind % 2 == 1 && m->nslots < FZ_MAX_SLOTS) {
        int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        CHECK(fd >= 0);
        g.fds[m->nslots] = fd;
        m_slot_add(m, FZ_EVENTFD, -1);
    }
}

static void fd_feed(int slot)
{
    int b = m_buffer_slot(&g.m, slot);
    m_slot *s = &g.m.slots[b];

    if (s->kind == FZ_EVENTFD) {
        uint64_t one = 1;
        CHECK(write(g.fds[b], &one, sizeof(one)) == sizeof(one));
        s->bytes++;
        return;
    }
    ssize_t r = write(g.fds[s->peer], "x", 1);
    if (s->full) {
        CHECK(r < 0 && errno == EAGAIN);
    } else {
        CHECK(r == 1);
        s->bytes++;
    }
}

static void fd_drain(int slot)
{
    int b = m_buffer_slot(&g.m, slot);
    m_slot *s = &g.m.slots[b];
    char buf[65536];
    long got = 0;
    ssize_t r;

    while ((r = read(g.fds[b], buf, sizeof(buf))) > 0) {
        got += r;
    }
    /*
     * End of file once the writer is gone, else "nothing more for now".
     * io_uring: a cancelled poll holds the closed writer's file until the
     * loop's next wait, so the end of file may come late.
     */
    if (m_peer_closed(&g.m, b)) {
        CHECK(r == 0 || (!g.m.exact && r < 0 && errno == EAGAIN));
    } else {
        CHECK(r < 0 && errno == EAGAIN);
    }
    if (s->kind == FZ_EVENTFD) {
        uint64_t count;
        CHECK(got == 0 || got == sizeof(count));
        if (got) {
            memcpy(&count, buf, sizeof(count));
            CHECK((long)count == s->bytes);
        } else {
            CHECK(s->bytes == 0);
        }
    } else if (!s->full) {
        CHECK(got == s->bytes);
    }
    s->bytes = 0;
    s->full = false;
}

static void fd_fill(int slot)
{
    int b = m_buffer_slot(&g.m, slot);
    m_slot *s = &g.m.slots[b];
    static const char zeros[65536];
    ssize_t r;

    if (s->kind == FZ_EVENTFD) {
        fd_feed(slot);
        return;
    }
    while ((r = write(g.fds[s->peer], zeros, sizeof(zeros))) > 0) {
    }
    CHECK(r < 0 && errno == EAGAIN);
    s->full = true;
}

/*
 * Closes a slot's fd (only one without a handler: closing a watched fd is
 * the caller's bug).  Its pipe peer then sees hang-up or error; a later
 * FD_NEW may get the same fd number, which is what the monitors' stale
 * state must survive.
 */
static void fd_close(int slot)
{
    g.m.slots[slot].closed = true;
    CHECK(close(g.fds[slot]) == 0);
}

/* Whether @op may touch @slot now. */
static bool slot_usable(int op, int slot)
{
    const m_slot *s = &g.m.slots[slot];
    int b = m_buffer_slot(&g.m, slot);

    if (s->closed) {
        return false;
    }
    switch (op) {
    case OP_FEED:
    case OP_FILL: /* needs both ends: no SIGPIPE, no writing a closed fd */
        return g.m.slots[b].kind == FZ_EVENTFD ||
               (!g.m.slots[b].closed && !m_peer_closed(&g.m, b));
    case OP_DRAIN:
        return !g.m.slots[b].closed;
    case OP_CLOSE:
        return s->handler < 0;
    default:
        return true;
    }
}

/* ------------------------------------------------------------- handlers */

static void handler_cb(obj *o, bool write)
{
    TRACE("cb handler %d %s\n", o->id, write ? "write" : "read");
    m_fd_called(&g.m, o->id, write);
    run_script(&o->sc, o);
    m_fd_returned(&g.m, o->id, write);
}

static void on_read(void *opaque)
{
    handler_cb(opaque, false);
}

static void on_write(void *opaque)
{
    handler_cb(opaque, true);
}

static void handler_set(int slot, uint8_t mask, script sc)
{
    model *m = &g.m;
    bool rd = mask & 1, wr = mask & 2;
    obj *o;

    if (!rd && !wr) { /* all callbacks NULL: the other way to remove */
        CHECK(aiol_fd_set(g.loop, g.fds[slot], NULL, NULL, NULL, NULL) == 0);
        m_handler_remove(m, slot);
        return;
    }
    if (m->nh == FZ_MAX_HANDLERS) {
        return;
    }
    o = &g.hobj[m->nh];
    *o = (obj){ .kind = OBJ_HANDLER, .id = m->nh, .sc = sc };
    CHECK(aiol_fd_set(g.loop, g.fds[slot], rd ? on_read : NULL,
                      wr ? on_write : NULL, NULL, o) == 0);
    CHECK(m_handler_set(m, slot, rd, wr) == o->id);
}

static void handler_remove(int slot)
{
    int want = g.m.slots[slot].handler >= 0 ? 0 : -ENOENT;

    CHECK(aiol_fd_remove(g.loop, g.fds[slot]) == want);
    m_handler_remove(&g.m, slot);
}

/* -------------------------------------------------------- bottom halves */

static void on_bh(void *opaque)
{
    obj *o = opaque;

    TRACE("cb bh %d\n", o->id);
    m_bh_called(&g.m, o->id);
    run_script(&o->sc, o);
}

static void bh_new(script sc, bool oneshot)
{
    model *m = &g.m;
    obj *o;

    if (m->nbh == FZ_MAX_BHS) {
        return;
    }
    o = &g.bobj[m->nbh];
    *o = (obj){ .kind = OBJ_BH, .id = m->nbh, .sc = sc };
    if (oneshot) {
        CHECK(aiol_bh_schedule_oneshot(g.loop, on_bh, o) == 0);
    } else {
        CHECK(aiol_bh_new(g.loop, on_bh, o, &g.bhs[o->id]) == 0);
    }
    CHECK(m_bh_new(m, oneshot) == o->id);
}

/* A bottom half the harness may still use, or -1. */
static int bh_pick(uint8_t a)
{
    if (g.m.nbh == 0) {
        return -1;
    }
    int b = a % g.m.nbh;
    return g.m.bh[b].usable ? b : -1;
}

static void bh_op(int op, int b)
{
    if (b < 0) {
        return;
    }
    switch (op) {
    case OP_BH_SCHED:
        aiol_bh_schedule(g.bhs[b]);
        m_bh_schedule(&g.m, b, false);
        break;
    case OP_BH_IDLE:
        aiol_bh_schedule_idle(g.bhs[b]);
        m_bh_schedule(&g.m, b, true);
        break;
    case OP_BH_CANCEL:
        aiol_bh_cancel(g.bhs[b]);
        m_bh_cancel(&g.m, b);
        break;
    default:
        aiol_bh_free(g.bhs[b]);
        m_bh_delete(&g.m, b);
        g.bhs[b] = NULL;
        break;
    }
}

/* ------------------------------------------------------------------ timers */

static void on_timer(void *opaque)
{
    obj *o = opaque;

    TRACE("cb timer %d\n", o->id);
    m_timer_called(&g.m, o->id);
    run_script(&o->sc, o);
}

static void timer_new(script sc)
{
    model *m = &g.m;
    obj *o;

    if (m->nt == FZ_MAX_TIMERS) {
        return;
    }
    o = &g.tobj[m->nt];
    *o = (obj){ .kind = OBJ_TIMER, .id = m->nt, .sc = sc };
    CHECK(aiol_timer_new(g.clock, on_timer, o, &g.timers[o->id]) == 0);
    CHECK(m_timer_new(m) == o->id);
}

static int timer_pick(uint8_t a)
{
    if (g.m.nt == 0) {
        return -1;
    }
    int t = a % g.m.nt;
    return g.m.t[t].live ? t : -1;
}

static void timer_op(int op, int t, uint8_t d)
{
    if (t < 0) {
        return;
    }
    switch (op) {
    case OP_T_MOD: {
        int64_t expire = g.m.now + (int64_t)d - 64; /* may be in the past */
        CHECK(aiol_timer_mod(g.timers[t], expire) == 0);
        m_timer_mod(&g.m, t, expire);
        CHECK(aiol_timer_deadline_get(g.timers[t]) == expire);
        break;
    }
    case OP_T_CANCEL:
        aiol_timer_cancel(g.timers[t]);
        m_timer_cancel(&g.m, t);
        CHECK(!aiol_timer_is_armed(g.timers[t]));
        break;
    default:
        aiol_timer_free(g.timers[t]);
        m_timer_free(&g.m, t);
        g.timers[t] = NULL;
        break;
    }
}

/* ----------------------------------------------------------------- polls */

static void poll_once(bool blocking)
{
    bool progress;

    if (g.polls_left <= 0 || g.m.depth == FZ_MAX_DEPTH) {
        return;
    }
    g.polls_left--;
    m_poll_enter(&g.m);
    if (blocking) {
        progress = aiol_loop_poll_deadline(g.loop,
                                           aiol_mono_time_get() + BLOCK_NS);
    } else {
        progress = aiol_loop_poll(g.loop, false);
    }
    TRACE("poll returned %d\n", progress);
    m_poll_exit(&g.m, progress);
}

/*
 * The host's poll, retrying EINTR as hosts do (io_uring's task work
 * interrupts a poll like a signal: found by the fuzzer).
 */
static int host_poll(struct pollfd *p, int n, int ms)
{
    int r;

    while ((r = poll(p, (nfds_t)n, ms)) < 0 && errno == EINTR) {
    }
    CHECK(r >= 0);
    return r;
}

/*
 * One iteration the way a host main loop (glib, libev) drives the loop:
 * prepare, poll, check, dispatch.  Every other EMBED polls the handlers'
 * own fds (direct embedding: aiol_loop_embed_fds() and
 * aiol_loop_dispatch_fds()) where the fd monitor allows it, the others the
 * loop fd.  Checks the embedding contract on the way: the host's poll
 * sees input when a handler's fd is ready, and prepare's deadline is due
 * when a bottom half is.
 */
static void embed_once(void)
{
    struct pollfd p[FZ_MAX_SLOTS + 1] = { { .events = POLLIN } };
    int64_t deadline;
    bool progress, direct = ++g.embeds % 2 == 0;
    int n = 1, ready;

    if (g.polls_left <= 0 || g.m.depth > 0) {
        return; /* the host loop is the outermost level */
    }
    g.polls_left--;
    deadline = aiol_loop_prepare(g.loop);
    if (direct) {
        n = aiol_loop_embed_fds(g.loop, p, FZ_MAX_SLOTS + 1);
        CHECK(n > 0 || n == -ENOTSUP || n == -EBUSY);
        direct = n > 0;
    }
    if (!direct) {
        n = 1;
        p[0] = (struct pollfd){ .fd = aiol_loop_fd_get(g.loop),
                                .events = POLLIN };
        CHECK(p[0].fd >= 0);
    }
    if (m_bh_due(&g.m)) {
        CHECK(deadline <= aiol_mono_time_get());
    }
    ready = host_poll(p, n, 0);
    if (m_any_ready(&g.m) && ready == 0 && !g.m.exact) {
        /*
         * io_uring: a poll woken before prepare may still be kernel task
         * work that posts its completion only after the host's look; a
         * host that sleeps is woken by it.  Require that, within 1 s.
         */
        ready = host_poll(p, n, 1000);
    }
    if (m_any_ready(&g.m)) {
        CHECK(ready > 0);
    }
    (void)aiol_loop_check(g.loop);
    TRACE("embed dispatch (%s)\n", direct ? "direct" : "loop fd");
    m_poll_enter(&g.m);
    progress = direct ? aiol_loop_dispatch_fds(g.loop, p, (size_t)n)
                      : aiol_loop_dispatch(g.loop);
    TRACE("embed dispatch returned %d\n", progress);
    m_poll_exit(&g.m, progress);
}

/* ------------------------------------------------------------ interpreter */

static void self_op(const obj *self, uint8_t a)
{
    if (self == NULL) {
        return;
    }
    switch (self->kind) {
    case OBJ_HANDLER: {
        int slot = g.m.h[self->id].slot;
        if (g.m.slots[slot].handler != self->id) {
            return; /* already removed or replaced */
        }
        if (a % 2 == 0) {
            handler_remove(slot);
        } else {
            handler_set(slot, (uint8_t)(a >> 1) % 4, self->sc);
        }
        break;
    }
    case OBJ_BH:
        bh_op((int[]){ OP_BH_SCHED, OP_BH_DELETE, OP_BH_CANCEL,
                       OP_BH_IDLE }[a % 4],
              g.m.bh[self->id].usable ? self->id : -1);
        break;
    case OBJ_TIMER:
        timer_op(a % 2 ? OP_T_MOD : OP_T_FREE,
                 g.m.t[self->id].live ? self->id : -1,
                 (uint8_t)(a / 2));
        break;
    }
}

static int slot_pick(uint8_t a)
{
    return g.m.nslots ? a % g.m.nslots : -1;
}

static script script_at(const uint8_t *x)
{
    return (script){ .start = ((size_t)x[0] | (size_t)x[1] << 8) % g.len,
                     .nops = x[2] % (SCRIPT_MAX_OPS + 1) };
}

/*
 * Runs ops from program offset @pos, at most @max of them; @self is the
 * object whose callback runs the script (NULL at the top level).
 */
static void run_ops(size_t pos, size_t max, const obj *self)
{
    for (size_t n = 0; n < max && g.ops_left > 0; n++) {
        uint8_t x[5];
        int op, slot;

        if (pos >= g.len) {
            return;
        }
        op = g.prog[pos++] % OP_COUNT;
        if (pos + op_args[op] > g.len) {
            return;
        }
        memcpy(x, g.prog + pos, op_args[op]);
        pos += op_args[op];
        g.ops_left--;
        TRACE("op %d [%d %d %d %d %d]\n", op, x[0], x[1], x[2], x[3], x[4]);

        switch (op) {
        case OP_FD_NEW:
            fd_new(x[0]);
            break;
        case OP_FEED:
        case OP_DRAIN:
        case OP_FILL:
        case OP_REMOVE:
        case OP_CLOSE:
            if ((slot = slot_pick(x[0])) < 0 || !slot_usable(op, slot)) {
                break;
            }
            (op == OP_FEED ? fd_feed : op == OP_DRAIN ? fd_drain
             : op == OP_FILL ? fd_fill : op == OP_CLOSE ? fd_close
             : handler_remove)(slot);
            m_fd_changed(&g.m, slot);
            break;
        case OP_SET:
            if ((slot = slot_pick(x[0])) >= 0 && slot_usable(op, slot)) {
                handler_set(slot, x[1], script_at(x + 2));
            }
            break;
        case OP_BH_NEW:
        case OP_BH_ONESHOT:
            bh_new(script_at(x), op == OP_BH_ONESHOT);
            break;
        case OP_BH_SCHED:
        case OP_BH_IDLE:
        case OP_BH_CANCEL:
        case OP_BH_DELETE:
            bh_op(op, bh_pick(x[0]));
            break;
        case OP_T_NEW:
            timer_new(script_at(x));
            break;
        case OP_T_MOD:
        case OP_T_CANCEL:
        case OP_T_FREE:
            timer_op(op, timer_pick(x[0]), x[1]);
            break;
        case OP_ADVANCE:
            g.m.now += x[0];
            break;
        case OP_POLL:
        case OP_POLL_BLOCK:
            poll_once(op == OP_POLL_BLOCK);
            break;
        case OP_NOTIFY:
            aiol_loop_notify(g.loop);
            break;
        case OP_SELF:
            self_op(self, x[0]);
            break;
        case OP_END:
            return;
        case OP_EMBED:
            embed_once();
            break;
        }
    }
}

static void run_script(const script *sc, const obj *self)
{
    if (!g.tearing_down) {
        run_ops(sc->start, sc->nops, self);
    }
}

/* ------------------------------------------------------------ one input */

static void teardown(void)
{
    model *m = &g.m;

    g.tearing_down = true; /* callbacks still checked, scripts not run */
    for (int s = 0; s < m->nslots; s++) {
        if (m->slots[s].handler >= 0) {
            handler_remove(s);
        }
    }
    for (int t = 0; t < m->nt; t++) {
        if (m->t[t].live) {
            timer_op(OP_T_FREE, t, 0);
        }
    }
    for (int b = 0; b < m->nbh; b++) {
        if (m->bh[b].usable) {
            bh_op(OP_BH_DELETE, b);
        }
    }
    /* Queued one-shots still run; deleted ones are freed on the way. */
    g.polls_left = 4;
    while (!m_bh_idle(m) && g.polls_left > 0) {
        poll_once(false);
    }
    CHECK(m_bh_idle(m));
    for (int b = 0; b < m->nbh; b++) {
        CHECK(!m->bh[b].exists);
    }
    aiol_clock_free(g.clock);
    aiol_loop_free(g.loop);
    for (int s = 0; s < m->nslots; s++) {
        if (!m->slots[s].closed) {
            close(g.fds[s]);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2) {
        return 0;
    }
    memset(&g, 0, sizeof(g));
    g_trace = getenv("FZ_TRACE") != NULL;
    /* (io_uring may report stale readiness) */
    m_init(&g.m, data[0] % 3 != 2, (data[0] / 3) % 2 == 1);
    if (aiol_loop_new_flags(&g.loop, fz_fdmon_name(data[0]),
                            g.m.confined ? AIOL_LOOP_CONFINED : 0) < 0) {
        return 0; /* io_uring unavailable here: nothing to test */
    }
    CHECK(aiol_clock_new(g.loop, fake_now, &g, &g.clock) == 0);
    g.prog = data + 1;
    g.len = size - 1;
    g.ops_left = OPS_BUDGET;
    g.polls_left = POLLS_BUDGET;
    run_ops(0, SIZE_MAX, NULL);
    teardown();
    return 0;
}
