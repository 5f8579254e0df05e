/* SPDX-License-Identifier: MIT */
/*
 * fdmon-io_uring.c - the io_uring fd monitor (liburing).
 *
 * Level-triggered on an edge-free primitive.  Every watched fd has at most
 * one IORING_OP_POLL_ADD in flight, single-shot as a rule.  A single-shot
 * poll checks readiness when it is armed, so re-arming after each
 * completion gives level-triggered delivery: an fd that is still readable
 * completes again at once.  A multishot poll reports wakeups, not levels
 * (the reason upstream QEMU dropped it), so it is kept for the handlers
 * for which the two coincide: read-only ones flagged AIOL_FD_DRAINS, whose
 * callback empties the fd (the loop's own notifier is one).  Their poll
 * stays armed across events and costs no re-arm; a completion without
 * IORING_CQE_F_MORE (the kernel ended it) re-arms it like a single-shot
 * one, and a kernel that refuses multishot polls (-EINVAL, before 5.13)
 * gets single-shot ones from then on.
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
 * The ring.  Bound to its first polling thread where the kernel allows,
 * rebuilt shared when another thread polls it (uring-ring.c).  The same
 * ring carries the requests of aioloop/uring.h (uring-req.c): their
 * completions are told from polls by the tag bits of user_data.
 *
 * Direct embedding (aiol_loop_embed_fds()).  While a host polls the
 * handlers' fds itself, their polls are cancelled and the fds wait on the
 * dirty list; the monitor's own wait, aiol_loop_fd_get() and a fallback
 * to the ring fd re-arm them.  Not while aioloop/uring.h requests are in
 * flight: their completions arrive on the ring, so the host must poll the
 * ring fd then (embed_fds gives -EBUSY).
 * If no ring can be created (ENOSYS, EPERM from seccomp or
 * io_uring_disabled, ENOMEM), init fails and the default fd monitor choice
 * falls back to epoll.
 */
#include <errno.h>
#include <stdlib.h>

#include "fdmon.h"
#include "uring-priv.h"

static uint64_t ud_poll(int fd, uint32_t gen)
{
    return ((uint64_t)(gen & 0x7fffffffu) << 33) | ((uint64_t)fd << 2) |
           AIOL__UD_POLL;
}

/* In aiol__uring_fd.armed: the poll in flight is multishot. */
#define ARM_MULTISHOT 0x80u

struct aiol__uring_fd {
    uint32_t gen;   /* generation of the poll in flight; lock */
    uint8_t armed;  /* arm_bits() of the poll in flight, 0: none; lock */
    bool dirty;     /* on the dirty list; lock */
    bool fired;     /* on the fired list; lock */
    bool dropped;   /* watching stopped since the last sync: a poll in
                     * flight may watch a file the fd no longer names; lock */
};

static int uring_init(aiol_loop *loop)
{
    aiol__uring_state *s = calloc(1, sizeof(*s));
    int ret;

    if (s == NULL) {
        return -ENOMEM;
    }
    ret = aiol__uring_ring_create(s, &s->ring, false);
    if (ret < 0) {
        free(s);
        return ret;
    }
    loop->fdmon_state = s;
    return 0;
}

/* Frees the monitor's memory (the ring is gone already). */
static void state_free(aiol_loop *loop)
{
    aiol__uring_state *s = loop->fdmon_state;

    aiol__uring_bufs_drop_all(s);
    free(s->done);
    free(s->fds);
    free(s->dirty);
    free(s->fired);
    free(s);
    loop->fdmon_state = NULL;
}

static void uring_fini(aiol_loop *loop)
{
    aiol__uring_ring_close(loop->fdmon_state);
    state_free(loop);
}

/*
 * Under loop->lock.  Makes room for @fd in the per-fd array and, since an
 * fd is on the dirty and the fired list at most once, room on both lists
 * for every fd number the array covers: a completion's re-arm (reap) and
 * a cancel (direct embedding, a rebuilt ring) then never allocate, so they
 * cannot lose an fd, the notifier's above all.  0 or -ENOMEM.
 */
static int reserve_fd(aiol__uring_state *s, int fd)
{
    return aiol__fd_reserve(&s->fds, &s->nfds, sizeof(*s->fds), fd,
                            &s->dirty, &s->dirty_cap, &s->fired,
                            &s->fired_cap);
}

/* Under loop->lock.  Puts @fd on the dirty list (room: reserve_fd()). */
static void mark_dirty(aiol__uring_state *s, int fd)
{
    aiol__check(aiol__fd_list_mark(&s->dirty, &s->ndirty, &s->dirty_cap,
                                   &s->fds[fd].dirty, fd) == 0,
                "dirty list full despite reserve_fd()");
}

/*
 * Under loop->lock.  The poll @node wants: its events, and ARM_MULTISHOT
 * for a read-only handler that drains its fd (see the top).  0: none.
 */
static unsigned arm_bits(const aiol__uring_state *s, const aiol__handler *node)
{
    if (node == NULL) {
        return 0;
    }
    if (node->events == AIOL__EV_IN && (node->ops.flags & AIOL_FD_DRAINS) &&
        !s->no_multishot) {
        return AIOL__EV_IN | ARM_MULTISHOT;
    }
    return node->events;
}

/* Under loop->lock.  Only records the change; wait() applies it. */
static int uring_update(aiol_loop *loop, aiol__handler *old,
                        aiol__handler *new_)
{
    aiol__uring_state *s = loop->fdmon_state;
    unsigned oev = arm_bits(s, old), nev = arm_bits(s, new_);
    int fd = old ? old->fd : new_->fd;
    int ret;

    aiol__assert_locked(loop);
    if (oev == nev) {
        return 0; /* unchanged re-arm */
    }
    /*
     * A removal (nev 0, so oev was not) needs no room: the fd got it when
     * it was added.  So a removal cannot fail, and never leaves a poll
     * armed for a handler that is gone.
     */
    ret = nev != 0 ? reserve_fd(s, fd) : 0;
    if (ret < 0) {
        return ret;
    }
    if (nev == 0) {
        s->fds[fd].dropped = true;
        atomic_store_explicit(&s->cancel_owed, true, memory_order_relaxed);
    }
    mark_dirty(s, fd);
    return aiol__update_owed(loop, &s->owed, new_ != NULL);
}

/* Under loop->lock.  The fd-indexed arrays cover @max_fd (fdmon.h). */
static int uring_reserve(aiol_loop *loop, size_t more, int max_fd)
{
    aiol__assert_locked(loop);
    (void)more; /* (nothing here grows with the handler count) */
    return reserve_fd(loop->fdmon_state, max_fd);
}

/*
 * Under loop->lock.  Cancels @fd's poll in flight: its completion, now of
 * an old generation, will be dropped.
 */
static void poll_cancel(aiol_loop *loop, aiol__uring_state *s, int fd)
{
    aiol__uring_fd *st = &s->fds[fd];
    struct io_uring_sqe *sqe = aiol__uring_sqe_get(s);

    io_uring_prep_poll_remove(sqe, ud_poll(fd, st->gen));
    io_uring_sqe_set_data64(sqe, (uint64_t)AIOL__UD_IGNORE);
    st->gen++;
    st->armed = 0;
    loop->stats.fdmon_ctls++;
}

/* Under loop->lock.  Brings fd's poll in line with its handler's events. */
static void sync_fd(aiol_loop *loop, aiol__uring_state *s, int fd)
{
    unsigned want = arm_bits(s, aiol__handler_lookup(loop, fd));
    aiol__uring_fd *st = &s->fds[fd];
    bool dropped = st->dropped;

    aiol__assert_locked(loop);
    st->dropped = false;
    if (st->armed == want && !dropped) {
        return;
    }
    if (st->armed != 0) {
        poll_cancel(loop, s, fd);
    }
    if (want != 0) {
        struct io_uring_sqe *sqe = aiol__uring_sqe_get(s);

        unsigned mask = aiol__events_to_poll(want & ~ARM_MULTISHOT);

        if (want & ARM_MULTISHOT) {
            io_uring_prep_poll_multishot(sqe, fd, mask);
        } else {
            io_uring_prep_poll_add(sqe, fd, mask);
        }
        io_uring_sqe_set_data64(sqe, ud_poll(fd, st->gen));
        st->armed = (uint8_t)want;
        loop->stats.fdmon_arms++;
    }
}

/* Under loop->lock.  Queues the SQEs for every pending change. */
static void flush_changes(aiol_loop *loop, aiol__uring_state *s)
{
    aiol__assert_locked(loop);
    for (size_t i = 0; i < s->ndirty; i++) {
        s->fds[s->dirty[i]].dirty = false;
        sync_fd(loop, s, s->dirty[i]);
    }
    for (size_t i = 0; i < s->nfired; i++) {
        s->fds[s->fired[i]].fired = false;
        sync_fd(loop, s, s->fired[i]);
    }
    s->ndirty = s->nfired = 0;
    s->owed = false;
    atomic_store_explicit(&s->cancel_owed, false, memory_order_relaxed);
}

/*
 * A look is owed while a request's completion may be due, or a removed
 * handler's poll still holds its file (the caller may have closed it).
 */
static bool uring_look_owed(aiol_loop *loop)
{
    aiol__uring_state *s = loop->fdmon_state;

    return s->npending != 0 ||
           atomic_load_explicit(&s->cancel_owed, memory_order_relaxed);
}

/*
 * Under loop->lock; polling thread.  Enters direct embedding (see the
 * top): queues a POLL_REMOVE per armed fd (the next look submits them:
 * embed.c flushes right after) and leaves the fds dirty, for the flush
 * that follows direct mode (flushes skip them meanwhile).  Refused while
 * requests ride the ring, or with no SQ room to cancel every poll.
 */
static bool uring_direct_enter(aiol_loop *loop)
{
    aiol__uring_state *s = loop->fdmon_state;
    aiol__handler *node;

    aiol__assert_locked(loop);
    if (s->npending != 0 ||
        io_uring_sq_space_left(&s->ring) < aiol__handlers_count(loop)) {
        return false;
    }
    AIOL_LIST_FOREACH(node, &loop->live, node_live) {
        if (s->fds[node->fd].armed != 0) {
            poll_cancel(loop, s, node->fd); /* (room checked above) */
            mark_dirty(s, node->fd);
        }
    }
    return true;
}

/*
 * Under loop->lock.  The state of @fd's poll in flight when @ud names it
 * (fd in *@fdp); NULL for a request, a cancel or a cancelled generation.
 */
static aiol__uring_fd *poll_current(aiol__uring_state *s, uint64_t ud,
                                    int *fdp)
{
    int fd = (int)((ud >> 2) & 0x7fffffffu);
    aiol__uring_fd *st;

    if ((ud & 3) != AIOL__UD_POLL || (size_t)fd >= s->nfds) {
        return NULL;
    }
    st = &s->fds[fd];
    if ((st->gen & 0x7fffffffu) != (uint32_t)(ud >> 33) || st->armed == 0) {
        return NULL;
    }
    *fdp = fd;
    return st;
}

/*
 * Under loop->lock.  Handles one completion; returns 1 if it queued a
 * handler, -1 if it must stay in the ring for now (aiol__uring_req_complete()).
 */
static int reap_one(aiol_loop *loop, aiol__uring_state *s,
                    const struct io_uring_cqe *cqe, aiol__ready_list *ready)
{
    uint64_t ud = cqe->user_data;
    int fd, res = cqe->res;
    aiol__handler *node;
    aiol__uring_fd *st;

    aiol__assert_locked(loop);
    if ((ud & 3) == AIOL__UD_REQ) {
        return aiol__uring_req_complete(s, (aiol_uring_req *)(uintptr_t)ud,
                                        res, cqe->flags)
                   ? 0 : -1;
    }
    st = poll_current(s, ud, &fd);
    if (st == NULL) {
        return 0; /* a cancel, or a cancelled generation */
    }
    /* (a multishot poll with IORING_CQE_F_MORE stays armed: no re-arm) */
    if (!(cqe->flags & IORING_CQE_F_MORE)) {
        if (res == -EINVAL && (st->armed & ARM_MULTISHOT)) {
            s->no_multishot = true; /* re-armed single-shot, below */
            res = -ECANCELED;
        }
        st->armed = 0;
        if (res < 0 && res != -ECANCELED) {
            /*
             * -EBADF: the fd was closed before it was armed.  Like epoll,
             * stop watching it (no re-arm, no callback) until its handler
             * changes.
             */
            loop->stats.bad_fds += res == -EBADF;
            return 0;
        }
        /* re-armed by the next flush (room: reserve_fd()) */
        aiol__check(aiol__fd_list_mark(&s->fired, &s->nfired, &s->fired_cap,
                                       &st->fired, fd) == 0,
                    "fired list full despite reserve_fd()");
        if (res < 0) {
            /*
             * -ECANCELED of the current generation: not our cancel (those
             * bump the generation) but the kernel's, when the thread that
             * armed the poll exited.  Re-arm, with no callback.
             */
            return 0;
        }
    }
    node = aiol__handler_lookup(loop, fd);
    if (node == NULL || node->events == 0) {
        return 0;
    }
    aiol__ready_add(ready, node, aiol__events_from_poll((unsigned)res));
    return 1;
}

int aiol__uring_cqes_reap(aiol_loop *loop, aiol__uring_state *s,
                          aiol__ready_list *ready)
{
    struct io_uring_cqe *cqe;
    unsigned head, seen = 0;
    int queued = 0;

    aiol__assert_locked(loop);
    io_uring_for_each_cqe(&s->ring, head, cqe) {
        int got = reap_one(loop, s, cqe, ready);

        if (got < 0) {
            break; /* no room to queue it: left for the next reap */
        }
        queued += got;
        seen++;
    }
    io_uring_cq_advance(&s->ring, seen);
    return seen ? queued : -1;
}

bool aiol__uring_cqe_ends_spin(aiol_loop *loop, aiol__uring_state *s,
                               const struct io_uring_cqe *cqe)
{
    aiol__handler *node;
    int fd;

    aiol__assert_locked(loop);
    if ((cqe->user_data & 3) == AIOL__UD_REQ) {
        return true;
    }
    if (poll_current(s, cqe->user_data, &fd) == NULL) {
        return false; /* nothing to dispatch */
    }
    node = aiol__handler_lookup(loop, fd);
    return node != NULL && !node->poll_started;
}

void aiol__uring_poll_redo(aiol_loop *loop, aiol__uring_state *s, int fd)
{
    aiol__assert_locked(loop);
    if ((size_t)fd < s->nfds && (s->fds[fd].armed & ARM_MULTISHOT)) {
        /*
         * Its event was reaped and not dispatched.  A multishot poll
         * reports edges, so that one is gone; a new poll reports the
         * level when it is armed (the next flush).
         */
        poll_cancel(loop, s, fd);
        mark_dirty(s, fd);
    }
}

void aiol__uring_polls_rearm(aiol_loop *loop, aiol__uring_state *s)
{
    aiol__assert_locked(loop);
    for (size_t fd = 0; fd < s->nfds; fd++) {
        aiol__uring_fd *st = &s->fds[fd];

        if (st->armed != 0) {
            st->armed = 0;
            st->gen++;
            mark_dirty(s, (int)fd);
        }
    }
}

static int uring_wait(aiol_loop *loop, aiol__ready_list *ready,
                      int64_t deadline_ns)
{
    aiol__uring_state *s = loop->fdmon_state;
    int queued = 0, ret;

    aiol__uring_ring_bind(loop, s);
    for (;;) {
        struct io_uring_cqe *cqe;
        struct __kernel_timespec kts;
        struct timespec ts;
        int got;

        aiol__lock(loop);
        (void)aiol__embed_direct(loop, false); /* our own wait: re-arm all */
        flush_changes(loop, s);
        aiol__unlock(loop);

        if (deadline_ns == 0) {
            ret = aiol__uring_ring_look(loop, s);
        } else {
            loop->stats.fdmon_waits++;
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

        aiol__lock(loop);
        got = aiol__uring_cqes_reap(loop, s, ready);
        aiol__unlock(loop);
        if (got > 0) {
            queued += got;
        }
        /*
         * Return on handlers, on a timeout or after a look.  Completions
         * that carried nothing (cancels, stale generations) and EINTR do
         * not end a blocking wait early (EINTR does on an interruptible
         * loop).
         */
        if (queued > 0 || s->done_head < s->ndone || deadline_ns == 0 ||
            ret == -ETIME || (ret == -EINTR && loop->interruptible) ||
            (deadline_ns != AIOL_DEADLINE_NONE &&
             aiol_mono_time_get() >= deadline_ns)) {
            return queued;
        }
    }
}

static void uring_flush(aiol_loop *loop)
{
    aiol__uring_state *s = loop->fdmon_state;

    aiol__uring_ring_bind(loop, s);
    aiol__lock(loop);
    if (!aiol__embed_is_direct(loop)) {
        flush_changes(loop, s);
    }
    aiol__unlock(loop);
    (void)aiol__uring_ring_look(loop, s);
}

static bool uring_pending(aiol_loop *loop)
{
    aiol__uring_state *s = loop->fdmon_state;

    return s->done_head < s->ndone;
}

/*
 * A host loop sleeps in poll(2) on the ring fd and dispatches from
 * whichever thread runs it, while a bound ring takes submissions and posts
 * completions only for its owner.  Embedding therefore switches the loop
 * to a shared ring, unless requests in flight pin it (see below).
 */
static int uring_get_fd(aiol_loop *loop)
{
    aiol__uring_state *s = loop->fdmon_state;
    bool rearm;

    aiol__lock(loop);
    rearm = aiol__embed_is_direct(loop) || !s->shared;
    (void)aiol__embed_direct(loop, false);
    aiol__unlock(loop);
    if (!s->shared && !(s->host_bound && s->owner == aiol__thread_id())) {
        int ret = aiol__uring_ring_rebuild_shared(loop, s);

        if (ret == -EBUSY && s->bound && s->owner == aiol__thread_id()) {
            /*
             * Requests in flight pin the ring to us.  Keep it, for good
             * (the host holds its fd): a bound ring's fd polls readable
             * once completion work is pending for its owner, and our
             * dispatch posts it (test_uring checks the kernel does).
             */
            s->host_bound = true;
        } else if (ret < 0) {
            return ret; /* -EBUSY from another thread; -EMFILE, -ENOMEM */
        }
    }
    if (rearm) {
        /*
         * Nothing is armed (a new ring, or direct embedding just ended):
         * arm now, so a host that asks for the fd after aiol_loop_prepare()
         * still sees readiness.
         */
        uring_flush(loop);
    }
    return s->ring.ring_fd;
}

/*
 * A fork child (fork.c).  The ring and the requests in flight are the
 * parent's: drop the child's view of both without entering the kernel
 * (uring-ring.c, uring-req.c), then the monitor's memory.
 */
static void uring_forget(aiol_loop *loop)
{
    aiol__uring_state *s = loop->fdmon_state;

    aiol__uring_reqs_forget(s);
    aiol__uring_ring_forget(s);
    state_free(loop);
}

const aiol__fdmon_ops aiol__fdmon_io_uring = {
    .name = "io_uring",
    .init = uring_init,
    .fini = uring_fini,
    .forget = uring_forget,
    .update = uring_update,
    .reserve = uring_reserve,
    .wait = uring_wait,
    .pending = uring_pending,
    .spin_begin = aiol__uring_spin_begin, /* uring-spin.c */
    .spin_check = aiol__uring_spin_check,
    .look_owed = uring_look_owed,
    .embed = &(const aiol__fdmon_embed_ops){
        .get_fd = uring_get_fd,
        .flush = uring_flush,
        .direct_enter = uring_direct_enter, /* polls cancelled meanwhile */
    },
    .requests = &(const aiol__fdmon_req_ops){
        .dispatch = aiol__uring_reqs_dispatch,
        .quiesce = aiol__uring_reqs_quiesce,
    },
};
