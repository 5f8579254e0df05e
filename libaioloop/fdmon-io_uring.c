/*
 * fdmon-io_uring.c - the io_uring fd monitor (liburing).
 *
 * Level-triggered on an edge-free primitive.  Every watched fd has at most
 * one single-shot IORING_OP_POLL_ADD in flight.  A single-shot poll checks
 * readiness when it is armed, so re-arming after each completion gives
 * level-triggered delivery: an fd that is still readable completes again
 * at once.  Multishot poll is not used: it reports wakeups, not levels
 * (the reason upstream QEMU dropped it).
 *
 * Batching.  Registration changes (from any thread, under loop->lock) only
 * mark the fd dirty.  The polling thread turns dirty fds and fds that fired
 * into POLL_ADD / POLL_REMOVE SQEs right before it waits, so they go to the
 * kernel in the same io_uring_enter as the wait.  A re-arm with unchanged
 * events needs no SQE at all.
 *
 * Stale completions.  Each fd's poll carries (fd, generation, tag) in its
 * user_data.  Changing or removing a registration bumps the generation and
 * cancels the old poll; its late completion (-ECANCELED, or a readiness
 * that raced the cancel) then no longer matches and is dropped.  Nothing in
 * user_data is a pointer, so a completion can never reach freed memory,
 * and handlers are looked up through the fd table at completion time.
 *
 * Waiting.  io_uring_submit_and_wait_timeout() with the kernel's extended
 * argument gives nanosecond timeouts without a timeout SQE.  A non-blocking
 * look costs no syscall when there is nothing to submit: completions are
 * read from the shared CQ ring, and IORING_SETUP_TASKRUN_FLAG tells us
 * (IORING_SQ_TASKRUN) when the kernel holds completions that need a kernel
 * entry to be posted.
 *
 * Setup.  COOP_TASKRUN|TASKRUN_FLAG where the kernel accepts them (5.19+),
 * plain otherwise.  SINGLE_ISSUER|DEFER_TASKRUN are not used: they bind the
 * ring to one thread, but a loop may be created on one thread and polled by
 * another (aiol_iothread_new), and QEMU's main context is polled by
 * whichever thread holds its lock.  The ring fd is registered by the
 * polling thread on its first wait (io_uring_register_ring_fd, 5.18+),
 * which saves an fd lookup per io_uring_enter; a later polling thread
 * registers its own.  If the ring cannot be created (ENOSYS, EPERM from
 * seccomp or io_uring_disabled, ENOMEM), init fails and the default backend
 * choice falls back to epoll.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define RING_ENTRIES 1024

/* user_data layout: [generation:31][fd:31][tag:2] */
enum { TAG_SQE = 0, TAG_POLL = 1, TAG_IGNORE = 2 };
#define UD_IGNORE ((uint64_t)TAG_IGNORE)

static uint64_t ud_poll(int fd, uint32_t gen)
{
    return ((uint64_t)(gen & 0x7fffffffu) << 33) | ((uint64_t)fd << 2) |
           TAG_POLL;
}

typedef struct uring_fd {
    uint32_t gen;   /* generation of the poll in flight; lock */
    uint8_t armed;  /* AIOL__EV_* of the poll in flight, 0: none; lock */
    bool dirty;     /* on the dirty list; lock */
    bool fired;     /* on the fired list; lock */
    bool dropped;   /* watching stopped since the last sync: a poll in
                     * flight may watch a file the fd no longer names; lock */
} uring_fd;

typedef struct uring_state {
    struct io_uring ring;      /* SQ: polling thread, under lock */
    pthread_t reg_thread;      /* thread the ring fd is registered for */
    bool reg_valid;            /* polling thread */
    uring_fd *fds;             /* fd-indexed; lock */
    size_t nfds;               /* lock */
    int *dirty, *fired;        /* fds to (re)arm or cancel; lock */
    size_t ndirty, dirty_cap, nfired, fired_cap; /* lock */
} uring_state;

static int uring_setup(struct io_uring *ring)
{
    static const unsigned flag_sets[] = {
        IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG,
        0,
    };
    int ret = -ENOSYS;

    for (size_t i = 0; i < sizeof(flag_sets) / sizeof(flag_sets[0]); i++) {
        struct io_uring_params p;

        memset(&p, 0, sizeof(p));
        p.flags = flag_sets[i];
        ret = io_uring_queue_init_params(RING_ENTRIES, ring, &p);
        if (ret != -EINVAL) {
            break;
        }
    }
    return ret;
}

static int uring_init(aiol_loop *loop)
{
    uring_state *s = calloc(1, sizeof(*s));
    int ret;

    if (s == NULL) {
        return -ENOMEM;
    }
    ret = uring_setup(&s->ring);
    if (ret < 0) {
        free(s);
        return ret;
    }
    loop->mon_state = s;
    return 0;
}

static void uring_fini(aiol_loop *loop)
{
    uring_state *s = loop->mon_state;

    if (s->reg_valid && pthread_equal(s->reg_thread, pthread_self())) {
        io_uring_unregister_ring_fd(&s->ring);
    }
    /* Closing the ring cancels every request still in flight. */
    io_uring_queue_exit(&s->ring);
    free(s->fds);
    free(s->dirty);
    free(s->fired);
    free(s);
    loop->mon_state = NULL;
}

/* Appends @fd to an fd list.  0 or -ENOMEM. */
static int list_push(int **v, size_t *n, size_t *cap, int fd)
{
    int ret = aiol__reserve(v, cap, *n + 1, sizeof(**v));

    if (ret == 0) {
        (*v)[(*n)++] = fd;
    }
    return ret;
}

/* Under loop->lock.  Only records the change; wait() applies it. */
static int uring_update(aiol_loop *loop, aiol__handler *old,
                        aiol__handler *new_)
{
    uring_state *s = loop->mon_state;
    unsigned oev = old ? old->events : 0u, nev = new_ ? new_->events : 0u;
    int fd = old ? old->fd : new_->fd;
    int ret;

    if (oev == nev) {
        return 0; /* unchanged re-arm */
    }
    if (oev == 0 && fcntl(fd, F_GETFD) < 0) {
        return -errno; /* refuse a closed fd now, as epoll does */
    }
    ret = aiol__reserve(&s->fds, &s->nfds, (size_t)fd + 1, sizeof(*s->fds));
    if (ret == 0 && nev == 0) {
        s->fds[fd].dropped = true;
    }
    if (ret == 0 && !s->fds[fd].dirty) {
        ret = list_push(&s->dirty, &s->ndirty, &s->dirty_cap, fd);
        s->fds[fd].dirty = ret == 0;
    }
    return ret;
}

static struct io_uring_sqe *get_sqe(uring_state *s)
{
    struct io_uring_sqe *sqe;

    while ((sqe = io_uring_get_sqe(&s->ring)) == NULL) {
        io_uring_submit(&s->ring); /* SQ full: push what we have */
    }
    return sqe;
}

static unsigned to_poll(unsigned events)
{
    return (events & AIOL__EV_IN ? POLLIN | POLLRDHUP : 0u) |
           (events & AIOL__EV_OUT ? POLLOUT : 0u);
}

static unsigned from_poll(unsigned ev)
{
    return (ev & POLLIN ? AIOL__EV_IN : 0u) | (ev & POLLOUT ? AIOL__EV_OUT : 0u) |
           (ev & POLLERR ? AIOL__EV_ERR : 0u) |
           (ev & (POLLHUP | POLLRDHUP) ? AIOL__EV_HUP : 0u);
}

/* Under loop->lock.  Brings fd's poll in line with its handler's events. */
static void sync_fd(aiol_loop *loop, uring_state *s, int fd)
{
    aiol__handler *node = aiol__handler_lookup(loop, fd);
    unsigned want = node ? node->events : 0u;
    uring_fd *st = &s->fds[fd];
    bool dropped = st->dropped;

    st->dropped = false;
    if (st->armed == want && !dropped) {
        return;
    }
    if (st->armed != 0) {
        struct io_uring_sqe *sqe = get_sqe(s);

        io_uring_prep_poll_remove(sqe, ud_poll(fd, st->gen));
        io_uring_sqe_set_data64(sqe, UD_IGNORE);
        st->gen++;
        st->armed = 0;
        loop->stats.monitor_ctls++;
    }
    if (want != 0) {
        struct io_uring_sqe *sqe = get_sqe(s);

        io_uring_prep_poll_add(sqe, fd, to_poll(want));
        io_uring_sqe_set_data64(sqe, ud_poll(fd, st->gen));
        st->armed = (uint8_t)want;
    }
}

/* Under loop->lock.  Queues the SQEs for every pending change. */
static void flush_changes(aiol_loop *loop, uring_state *s)
{
    for (size_t i = 0; i < s->ndirty; i++) {
        s->fds[s->dirty[i]].dirty = false;
        sync_fd(loop, s, s->dirty[i]);
    }
    for (size_t i = 0; i < s->nfired; i++) {
        s->fds[s->fired[i]].fired = false;
        sync_fd(loop, s, s->fired[i]);
    }
    s->ndirty = s->nfired = 0;
}

/* Under loop->lock.  Handles one completion; returns 1 if it queued a handler. */
static int reap_one(aiol_loop *loop, uring_state *s, uint64_t ud, int res,
                    aiol__ready_list *ready)
{
    int fd = (int)((ud >> 2) & 0x7fffffffu);
    uint32_t gen = (uint32_t)(ud >> 33);
    aiol__handler *node;
    uring_fd *st;

    if ((ud & 3) != TAG_POLL || (size_t)fd >= s->nfds) {
        return 0;
    }
    st = &s->fds[fd];
    if ((st->gen & 0x7fffffffu) != gen || st->armed == 0) {
        return 0; /* a cancelled generation */
    }
    st->armed = 0;
    if (res < 0) {
        /*
         * -EBADF: the fd was closed before it was armed.  Like epoll, stop
         * watching it (no re-arm, no callback) until its handler changes.
         */
        return 0;
    }
    if (!st->fired) {
        /* re-armed by the next flush */
        st->fired = list_push(&s->fired, &s->nfired, &s->fired_cap, fd) == 0;
    }
    node = aiol__handler_lookup(loop, fd);
    if (node == NULL || node->events == 0) {
        return 0;
    }
    aiol__ready_add(ready, node, from_poll((unsigned)res));
    return 1;
}

/* Under loop->lock.  Drains the CQ ring; returns handlers queued, or -1 if
 * it saw no completion at all. */
static int reap(aiol_loop *loop, uring_state *s, aiol__ready_list *ready)
{
    struct io_uring_cqe *cqe;
    unsigned head, seen = 0;
    int queued = 0;

    io_uring_for_each_cqe(&s->ring, head, cqe) {
        queued += reap_one(loop, s, cqe->user_data, cqe->res, ready);
        seen++;
    }
    io_uring_cq_advance(&s->ring, seen);
    return seen ? queued : -1;
}

/* Registers the ring fd for the calling thread, once per polling thread. */
static void register_for_thread(uring_state *s)
{
    if (s->reg_valid && pthread_equal(s->reg_thread, pthread_self())) {
        return;
    }
    s->reg_thread = pthread_self();
    s->reg_valid = io_uring_register_ring_fd(&s->ring) == 1;
}

static int uring_wait(aiol_loop *loop, aiol__ready_list *ready,
                      int64_t deadline_ns)
{
    uring_state *s = loop->mon_state;
    int queued = 0, ret;

    register_for_thread(s);
    for (;;) {
        struct io_uring_cqe *cqe;
        struct __kernel_timespec kts;
        struct timespec ts;
        int got;

        pthread_mutex_lock(&loop->lock);
        flush_changes(loop, s);
        pthread_mutex_unlock(&loop->lock);

        if (deadline_ns == 0) {
            /* Just look: enter the kernel only if something needs it. */
            ret = 0;
            if (io_uring_sq_ready(&s->ring) > 0 ||
                (IO_URING_READ_ONCE(*s->ring.sq.kflags) &
                 (IORING_SQ_TASKRUN | IORING_SQ_CQ_OVERFLOW))) {
                loop->stats.monitor_waits++;
                ret = io_uring_submit_and_get_events(&s->ring);
            }
        } else {
            loop->stats.monitor_waits++;
            bool finite = aiol__deadline_to_timespec(deadline_ns, &ts);

            kts.tv_sec = ts.tv_sec;
            kts.tv_nsec = ts.tv_nsec;
            ret = io_uring_submit_and_wait_timeout(&s->ring, &cqe, 1,
                                                   finite ? &kts : NULL, NULL);
        }
        if (ret < 0 && ret != -ETIME && ret != -EINTR && ret != -EBUSY &&
            ret != -EAGAIN) {
            return ret;
        }

        pthread_mutex_lock(&loop->lock);
        got = reap(loop, s, ready);
        pthread_mutex_unlock(&loop->lock);
        if (got > 0) {
            queued += got;
        }
        /*
         * Return on handlers, on a timeout or after a look.  Completions
         * that carried nothing (cancels, stale generations) and EINTR do
         * not end a blocking wait early.
         */
        if (queued > 0 || deadline_ns == 0 || ret == -ETIME ||
            (deadline_ns != AIOL_DEADLINE_NONE &&
             aiol_clock_now_ns() >= deadline_ns)) {
            return queued;
        }
    }
}

static void uring_flush(aiol_loop *loop)
{
    uring_state *s = loop->mon_state;

    register_for_thread(s);
    pthread_mutex_lock(&loop->lock);
    flush_changes(loop, s);
    pthread_mutex_unlock(&loop->lock);
    if (io_uring_sq_ready(&s->ring) > 0) {
        loop->stats.monitor_waits++;
        io_uring_submit(&s->ring);
    }
}

static int uring_get_fd(aiol_loop *loop)
{
    return ((uring_state *)loop->mon_state)->ring.ring_fd;
}

const aiol__fdmon_ops aiol__fdmon_io_uring = {
    .name = "io_uring",
    .init = uring_init,
    .fini = uring_fini,
    .update = uring_update,
    .wait = uring_wait,
    .get_fd = uring_get_fd,
    .flush = uring_flush,
    .update_needs_notify = true, /* changes reach the ring in wait() */
};
