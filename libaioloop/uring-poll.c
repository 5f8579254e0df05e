/* SPDX-License-Identifier: MIT */
/*
 * uring-poll.c - the io_uring monitor's polls: at most one
 * IORING_OP_POLL_ADD per watched fd, armed, re-armed and cancelled in
 * batches right before a wait (the design is at the top of
 * fdmon-io_uring.c), and what a poll's completion means for its fd.
 * Calls uring-ring.c alone.  Under loop->lock throughout.
 */
#include <errno.h>

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

/*
 * Under loop->lock.  The reserve op (fdmon.h), which update uses too:
 * makes room for @max_fd in the per-fd array and, since an fd is on the
 * dirty and the fired list at most once, room on both lists for every fd
 * number the array covers: a completion's re-arm (reap) and a cancel
 * (direct embedding, a rebuilt ring) then never allocate, so they cannot
 * lose an fd, the notifier's above all.  Nothing here grows with the
 * handler count (@more).  0 or -ENOMEM.
 */
int aiol__uring_poll_reserve(aiol_loop *loop, size_t more, int max_fd)
{
    aiol__uring_state *s = loop->fdmon_state;

    aiol__assert_locked(loop);
    (void)more;
    return aiol__fd_reserve(&s->fds, &s->nfds, sizeof(*s->fds), max_fd,
                            &s->dirty, &s->dirty_cap, &s->fired,
                            &s->fired_cap);
}

/*
 * Under loop->lock.  Puts @fd on the dirty or the fired list (@on its
 * flag; room: aiol__uring_poll_reserve()) and tells the poller (listed).
 */
static void list_fd(aiol__uring_state *s, int **v, size_t *n, size_t *cap,
                    bool *on, int fd)
{
    aiol__check(aiol__fd_list_mark(v, n, cap, on, fd) == 0,
                "dirty or fired list full despite aiol__uring_poll_reserve()");
    atomic_store_explicit(&s->listed, true, memory_order_relaxed);
}

static void mark_dirty(aiol__uring_state *s, int fd)
{
    list_fd(s, &s->dirty, &s->ndirty, &s->dirty_cap, &s->fds[fd].dirty, fd);
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

int aiol__uring_poll_update(aiol_loop *loop, aiol__handler *old,
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
    ret = nev != 0 ? aiol__uring_poll_reserve(loop, 0, fd) : 0;
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

void aiol__uring_polls_flush(aiol_loop *loop, aiol__uring_state *s)
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
    atomic_store_explicit(&s->listed, false, memory_order_relaxed);
    s->owed = false;
    atomic_store_explicit(&s->cancel_owed, false, memory_order_relaxed);
}

bool aiol__uring_polls_direct_enter(aiol_loop *loop)
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

aiol__uring_fd *aiol__uring_poll_current(aiol__uring_state *s, uint64_t ud,
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

int aiol__uring_poll_complete(aiol_loop *loop, aiol__uring_state *s,
                              const struct io_uring_cqe *cqe,
                              aiol__ready_list *ready)
{
    uint64_t ud = cqe->user_data;
    int fd, res = cqe->res;
    aiol__handler *node;
    aiol__uring_fd *st;

    aiol__assert_locked(loop);
    st = aiol__uring_poll_current(s, ud, &fd);
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
        /* re-armed by the next flush (room: aiol__uring_poll_reserve()) */
        list_fd(s, &s->fired, &s->nfired, &s->fired_cap, &st->fired, fd);
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
