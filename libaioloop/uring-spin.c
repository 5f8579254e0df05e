/* SPDX-License-Identifier: MIT */
/*
 * uring-spin.c - the io_uring monitor's part in busy polling (busypoll.c).
 *
 * Before the window opens, requests queued since the last wait go to the
 * kernel, so a fast device completes them while the loop spins.
 *
 * While it spins, the loop must see what its poll callbacks cannot: a
 * request's completion, or readiness of a handler that is not being
 * polled.  The bound ring defers completion work to its thread and says
 * so in IORING_SQ_TASKRUN, read without a syscall; that flag does not
 * say what completed.  Most of it, on a busy iothread, is readiness of
 * the handlers the window polls anyway: a virtqueue's ioeventfd fires
 * when the guest kicks it.  Ending the window for those would cut most
 * windows short, where epoll, which the window does not consult, keeps
 * spinning.  So the check posts the deferred work (one io_uring_enter,
 * only when the flag is up) and looks at the completions that arrived
 * since the last check (aiol__uring_cqe_ends_spin()); those that do not
 * end the window stay in the ring for the wait after it to reap.
 */
#include "fdmon.h"
#include "uring-priv.h"

void aiol__uring_spin_begin(aiol_loop *loop)
{
    aiol__uring_state *s = loop->fdmon_state;

    aiol__uring_ring_bind(loop, s);
    if (io_uring_sq_ready(&s->ring) != 0) {
        (void)aiol__uring_ring_look(loop, s);
    }
    s->spin_seen = *s->ring.cq.khead; /* (only we move the head) */
}

bool aiol__uring_spin_check(aiol_loop *loop)
{
    aiol__uring_state *s = loop->fdmon_state;
    struct io_uring_cq *cq = &s->ring.cq;
    unsigned tail;
    bool ends = false;

    (void)aiol__uring_ring_look(loop, s); /* enters only for held work */
    if (IO_URING_READ_ONCE(*s->ring.sq.kflags) & IORING_SQ_CQ_OVERFLOW) {
        return true; /* a full CQ: the wait's reap makes room */
    }
    /* Acquire pairs with the kernel's release of the tail it posts. */
    tail = io_uring_smp_load_acquire(cq->ktail);
    if (tail == s->spin_seen) {
        return false;
    }
    aiol__lock(loop);
    while (s->spin_seen != tail && !ends) {
        ends = aiol__uring_cqe_ends_spin(
            loop, s, &cq->cqes[s->spin_seen & cq->ring_mask]);
        s->spin_seen++;
    }
    aiol__unlock(loop);
    return ends;
}
