/* SPDX-License-Identifier: MIT */
/*
 * model.h - the fuzzer's reference model of one loop.
 *
 * The model is deliberately simple and O(n): flat arrays, linear scans,
 * no cleverness.  It is driven in lock-step with the real loop: the
 * harness tells it every operation it performs (fd writes and reads,
 * handler changes, bottom-half and timer calls, poll entry and return) and
 * every callback the loop invokes, and the model fails loudly the moment
 * the loop does something the documented semantics forbid:
 *
 *   - a callback for a handler that was removed, or that this poll call
 *     did not collect as ready (no double dispatch across nesting);
 *   - a ready handler not dispatched by the poll call that collected it;
 *   - a bottom half run out of FIFO order, twice, after cancel or delete,
 *     or not at all;
 *   - a timer fired out of (deadline, arming order), early, or not at all;
 *   - a poll whose progress return value disagrees with what ran.
 *
 * Semantics modelled (docs/design.md and the public headers):
 *   - readiness is level-triggered and sampled once, when a poll call
 *     waits (before any of its callbacks);
 *   - a poll call runs its bottom-half phase, then its fd phase (read
 *     before write for one handler), then its timer phase;
 *   - a nested poll takes the handlers it sees ready off the lists of the
 *     calls it is nested in;
 *   - bottom halves form one FIFO: each poll call appends what was
 *     scheduled since the last take and runs everything queued, its
 *     parents' leftovers first;
 *   - a timer run fires, while the earliest armed timer is due and was
 *     armed before the run started, that earliest timer.
 */
#ifndef AIOLOOP_FUZZ_MODEL_H
#define AIOLOOP_FUZZ_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#define FZ_MAX_SLOTS 16      /* fd slots (a pipe takes two) */
#define FZ_MAX_HANDLERS 256  /* handlers set per input */
#define FZ_MAX_BHS 64        /* bottom halves, one-shots included */
#define FZ_MAX_TIMERS 24
#define FZ_MAX_DEPTH 4       /* poll calls on the stack at once */
#define FZ_QUEUE_MAX (FZ_MAX_BHS * 2)

typedef enum { FZ_PIPE_R, FZ_PIPE_W, FZ_EVENTFD } fz_kind;

/* One fd the harness opened.  A pipe's buffer state lives on its read end. */
typedef struct m_slot {
    fz_kind kind;
    int peer;       /* the pipe's other end's slot, or -1 */
    long bytes;     /* pipe (read end): bytes buffered; eventfd: counter */
    bool full;      /* pipe (read end): filled until EAGAIN */
    bool closed;    /* closed by the harness: no handler, no more ops */
    int handler;    /* id of the handler set on it, or -1 */
    unsigned was;   /* M_EV_* it had at some moment since the last wait */
} m_slot;

typedef struct m_handler {
    bool alive;
    int slot;
    bool rd, wr;
    /*
     * Readiness each poll call on the stack (index: depth) collected for
     * it.  Exact fd monitors: at most one nonzero entry, as the handler sits
     * on at most one ready list.  Inexact: what each call may have.
     */
    unsigned coll[FZ_MAX_DEPTH + 1];
} m_handler;

enum { MB_PENDING = 1, MB_SCHEDULED = 2, MB_DELETED = 4, MB_ONESHOT = 8,
       MB_IDLE = 16 };

typedef struct m_bh {
    bool exists;    /* not yet freed by the loop */
    bool usable;    /* the harness may still call it (not deleted, not one-shot) */
    bool local;     /* a confined loop's aiol_bh_new(): runs after the
                       thread-safe ones a poll takes with it */
    unsigned flags; /* MB_* */
    long runs;
} m_bh;

typedef struct m_timer {
    bool live;
    bool armed;
    int64_t expire;
    uint64_t seq;
} m_timer;

enum { PH_BH, PH_FD, PH_TIMER, PH_END };
#define M_EV_IN 1u
#define M_EV_OUT 2u

typedef struct m_frame {
    int phase;
    bool progress;
    int cur;          /* handler whose read callback ran last, or -1 */
    unsigned cur_ev;  /* its readiness as this call collected it */
    int expect_write; /* handler whose write callback must (exact) or may
                         (inexact) come next, or -1 */
    int64_t t_now;    /* timer phase: the clock as the run read it */
    uint64_t t_before;/* timer phase: timers armed before the run */
} m_frame;

typedef struct model {
    /*
     * Exact (poll, epoll): a wait reports precisely the fds ready at that
     * moment.  Inexact (io_uring): a single-shot poll completes with the
     * mask of the wakeup that fired it, so a wait may report readiness
     * the fd had at any moment since the previous wait (stale), and a
     * read+write handler may get one direction per completion.  Then the
     * model checks that every callback was allowed, not that every ready
     * handler was called.
     */
    bool exact;
    bool confined;    /* AIOL_LOOP_CONFINED: bottom halves but one-shots
                         are local */
    m_slot slots[FZ_MAX_SLOTS];
    int nslots;
    m_handler h[FZ_MAX_HANDLERS];
    int nh;
    m_bh bh[FZ_MAX_BHS];
    int nbh;
    m_timer t[FZ_MAX_TIMERS];
    int nt;
    uint64_t tseq;    /* arming counter of the fake clock */
    int64_t now;      /* the fake clock */
    int gq[FZ_QUEUE_MAX], ngq;   /* scheduled since the last take */
    int sq[FZ_QUEUE_MAX], nsq;   /* taken, not yet run (all slices) */
    m_frame fr[FZ_MAX_DEPTH + 1];
    int depth;        /* poll calls on the stack */
} model;

/* Aborts with the model's complaint (a semantic violation by the loop). */
_Noreturn void m_fail(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));

void m_init(model *m, bool exact, bool confined);

/* Call after every change to an fd's buffer (bytes, full). */
void m_fd_changed(model *m, int slot);

/* fds: the harness reports what it did and what the kernel answered. */
int m_slot_add(model *m, fz_kind kind, int peer);
/*
 * Readiness as the callbacks see it: "readable" means the read callback is
 * due (input, hang-up or error), "writable" the write callback (output or
 * error).  A pipe end whose peer is closed gets hang-up (read end) or
 * error (write end).
 */
bool m_readable(const model *m, int slot);
bool m_writable(const model *m, int slot);
/* True when the other end of @slot's pipe is closed. */
bool m_peer_closed(const model *m, int slot);
/* True when some handler's fd is ready for it (the loop's fd must be). */
bool m_any_ready(const model *m);
/* True when a bottom half that is not idle waits to run. */
bool m_bh_due(const model *m);
/* The pipe read end (or eventfd) whose buffer @slot's writes and reads use. */
int m_buffer_slot(const model *m, int slot);

/* Handlers. */
int m_handler_set(model *m, int slot, bool rd, bool wr); /* returns the id */
void m_handler_remove(model *m, int slot);

/* Bottom halves. */
int m_bh_new(model *m, bool oneshot);
void m_bh_schedule(model *m, int b, bool idle);
void m_bh_cancel(model *m, int b);
void m_bh_delete(model *m, int b);

/* Timers. */
int m_timer_new(model *m);
void m_timer_mod(model *m, int t, int64_t expire);
void m_timer_cancel(model *m, int t);
void m_timer_free(model *m, int t);

/* Poll calls and the callbacks they make. */
void m_poll_enter(model *m);
void m_poll_exit(model *m, bool progress);
void m_bh_called(model *m, int b);
void m_fd_called(model *m, int h, bool write);
void m_fd_returned(model *m, int h, bool write);
void m_timer_called(model *m, int t);

/* True when no bottom half is queued anywhere. */
bool m_bh_idle(const model *m);

#endif /* AIOLOOP_FUZZ_MODEL_H */
