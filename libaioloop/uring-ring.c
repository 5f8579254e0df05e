/* SPDX-License-Identifier: MIT */
/*
 * uring-ring.c - the io_uring monitor's ring: creating it bound or
 * shared, enabling it for its polling thread, entering the kernel, and
 * closing or forgetting it.  Calls nothing of the monitor's; the decision
 * to bind or rebuild is the monitor's (aiol__uring_bind()).
 *
 * Setup.  The ring starts "bound": SINGLE_ISSUER|DEFER_TASKRUN|TASKRUN_FLAG
 * (6.1+), created disabled and enabled by the first thread that polls it,
 * which becomes its only submitter.  DEFER_TASKRUN runs completion work
 * only when we ask for events, in batches, which is what lets the ring
 * keep up with epoll (docs/fdmon-io_uring.md has the measurements).  A loop
 * may be polled by different threads over time, though (QEMU's main context
 * is polled by whichever thread holds its lock); when another thread polls
 * a bound ring, the ring is rebuilt "shared" (COOP_TASKRUN|TASKRUN_FLAG,
 * 5.19+, or plain) and every watched fd is re-armed on it.  That needs no
 * request of aioloop/uring.h in flight: those cannot move between rings.
 * Kernels that refuse the bound flags get a shared ring from the start.
 *
 * The ring fd is registered (io_uring_register_ring_fd, 5.18+, one fd
 * lookup less per io_uring_enter) for loops polled by one thread for life,
 * the iothreads': a registration belongs to one thread and would pin the
 * ring if the loop moved.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include "uring-priv.h"

#define RING_ENTRIES 1024
/*
 * The kernel sizes a ring's cancel hash, where every armed poll waits and
 * every POLL_REMOVE looks its target up, from the CQ: 2^(log2(cq) - 5)
 * buckets, at most 256.  8192 CQ entries get the 256, four times the
 * default's 64 (with 10,000 watched fds, about 40 polls per bucket
 * instead of 160), and room for a flush's worth of cancel completions.
 */
#define RING_CQ_ENTRIES 8192

static int ring_init(struct io_uring *ring, unsigned flags)
{
    struct io_uring_params p;

    memset(&p, 0, sizeof(p));
    p.flags = flags | IORING_SETUP_CQSIZE;
    p.cq_entries = RING_CQ_ENTRIES;
    return io_uring_queue_init_params(RING_ENTRIES, ring, &p);
}

int aiol__uring_ring_create(aiol__uring_state *s, struct io_uring *ring,
                            bool shared)
{
    static const unsigned shared_flags[] = {
        IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG,
        0,
    };
    int ret = -EINVAL;

    if (!shared) {
        ret = ring_init(ring, IORING_SETUP_SINGLE_ISSUER |
                                  IORING_SETUP_DEFER_TASKRUN |
                                  IORING_SETUP_TASKRUN_FLAG |
                                  IORING_SETUP_R_DISABLED);
        if (ret != -EINVAL) {
            s->shared = false;
            return ret;
        }
    }
    for (size_t i = 0; i < sizeof(shared_flags) / sizeof(*shared_flags);
         i++) {
        ret = ring_init(ring, shared_flags[i]);
        if (ret != -EINVAL) {
            break;
        }
    }
    s->shared = true;
    return ret;
}

struct io_uring_sqe *aiol__uring_sqe_get(aiol__uring_state *s)
{
    struct io_uring_sqe *sqe;

    while ((sqe = io_uring_get_sqe(&s->ring)) == NULL) {
        io_uring_submit(&s->ring); /* SQ full: push what we have */
    }
    return sqe;
}

void aiol__uring_ring_enable(aiol_loop *loop, aiol__uring_state *s)
{
    /* io_uring_enable_rings() is declared but not exported by liburing 2.3. */
    aiol__check(io_uring_register((unsigned)s->ring.ring_fd,
                                  IORING_REGISTER_ENABLE_RINGS, NULL, 0) == 0,
                "cannot enable the io_uring ring");
    s->owner = aiol__thread_id();
    s->bound = true;
    if (loop->single_thread) {
        s->registered = io_uring_register_ring_fd(&s->ring) == 1;
    }
}

/*
 * A look that enters the kernel only if something needs it: SQEs to
 * submit, or completions the kernel holds as task work (a poll woken since
 * our last entry: IORING_SQ_TASKRUN) or in its overflow list.  Posting
 * those also makes the ring fd readable for a host that polls it without
 * sleeping.  Polling thread.  0, or io_uring_submit_and_get_events()'s
 * result.
 */
int aiol__uring_ring_look(aiol_loop *loop, aiol__uring_state *s)
{
    if (io_uring_sq_ready(&s->ring) == 0 &&
        !(IO_URING_READ_ONCE(*s->ring.sq.kflags) &
          (IORING_SQ_TASKRUN | IORING_SQ_CQ_OVERFLOW))) {
        return 0;
    }
    loop->stats.fdmon_waits++;
    return io_uring_submit_and_get_events(&s->ring);
}

/*
 * A host sleeping in poll(2) on a bound ring's fd is never woken by the
 * ring: DEFER_TASKRUN queues a completion as work that only the owner's
 * io_uring_enter(GETEVENTS) runs, and wakes nobody but an owner waiting
 * in io_uring_enter; only posting a CQE wakes the ring fd's pollers.  The
 * kernel does signal an eventfd registered on the ring when such work
 * arrives on an empty list (and when CQEs are posted), so a host of a
 * bound ring sleeps on one of those instead.
 */
int aiol__uring_host_efd_open(aiol__uring_state *s)
{
    int efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK), ret;

    if (efd < 0) {
        return -errno;
    }
    ret = io_uring_register_eventfd(&s->ring, efd);
    if (ret < 0) {
        close(efd);
        return ret;
    }
    s->host_efd = efd;
    return 0;
}

/*
 * The eventfd counts wakeups, not levels, and our own entries into the
 * kernel post CQEs that signal it too: empty it, then signal it again if
 * work is pending (IORING_SQ_TASKRUN, set from the first work added until
 * the owner runs it) or CQEs wait unreaped.  Work added after our look at
 * the flag finds the list empty and signals the eventfd itself; work whose
 * signal our read consumed set the flag before signalling (under the
 * eventfd's lock, which our read takes too), so the look sees it.
 */
void aiol__uring_host_efd_arm(aiol__uring_state *s)
{
    uint64_t n;

    if (read(s->host_efd, &n, sizeof(n)) < 0 && errno != EAGAIN) {
        aiol__fail(__func__, "cannot read the host's eventfd");
    }
    atomic_thread_fence(memory_order_seq_cst);
    if ((IO_URING_READ_ONCE(*s->ring.sq.kflags) &
         (IORING_SQ_TASKRUN | IORING_SQ_CQ_OVERFLOW)) != 0 ||
        io_uring_cq_ready(&s->ring) != 0) {
        n = 1;
        aiol__check(write(s->host_efd, &n, sizeof(n)) == sizeof(n),
                    "cannot signal the host's eventfd");
    }
}

void aiol__uring_host_efd_close(aiol__uring_state *s)
{
    if (s->host_efd >= 0) {
        close(s->host_efd);
        s->host_efd = -1;
    }
}

void aiol__uring_ring_close(aiol__uring_state *s)
{
    aiol__uring_host_efd_close(s);
    if (s->registered && s->owner == aiol__thread_id()) {
        io_uring_unregister_ring_fd(&s->ring);
    }
    /* Closing the ring cancels every request still in flight. */
    io_uring_queue_exit(&s->ring);
}

/*
 * The ring is the parent's: bound to a parent thread (SINGLE_ISSUER; and
 * this thread's aiol__thread_id() is the forking thread's, so
 * aiol__uring_bind() would think it the owner), its fd maybe
 * registered in a parent thread's table, its SQ and CQ rings shared
 * memory.  So no io_uring_enter or register (io_uring_queue_exit() may
 * unregister the ring fd), and no write into the rings: unmap the child's
 * view (what liburing 2.3's io_uring_queue_exit() unmaps; the ring is
 * never SQE128) and close the child's copy of the fd.
 */
void aiol__uring_ring_forget(aiol__uring_state *s)
{
    struct io_uring *r = &s->ring;

    aiol__uring_host_efd_close(s); /* the child's copy */
    munmap(r->sq.sqes, r->sq.ring_entries * sizeof(struct io_uring_sqe));
    munmap(r->sq.ring_ptr, r->sq.ring_sz);
    if (r->cq.ring_ptr != NULL && r->cq.ring_ptr != r->sq.ring_ptr) {
        munmap(r->cq.ring_ptr, r->cq.ring_sz);
    }
    close(r->ring_fd);
}
