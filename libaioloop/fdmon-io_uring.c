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
 * rebuilt shared when another thread polls it (aiol__uring_bind(), here;
 * uring-ring.c has the ring itself).  The same ring carries the requests
 * of aioloop/uring.h (uring-req.c): their completions are told from polls
 * by the tag bits of user_data.
 *
 * Files.  This one is the monitor's ops and its waits; it calls the rest,
 * which never call it back: uring-net.c (socket I/O) calls uring-req.c
 * (requests), which calls uring-reap.c (draining the completion ring),
 * which calls uring-poll.c (the polls), which calls uring-ring.c.
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

static int uring_init(aiol_loop *loop)
{
    aiol__uring_state *s = calloc(1, sizeof(*s));
    int ret;

    if (s == NULL) {
        return -ENOMEM;
    }
    s->host_efd = -1;
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
 * Replaces a bound ring with a shared one: buffer groups registered on it
 * and every armed poll re-armed.  0; -EBUSY while requests are in flight
 * (they cannot move between rings); or the error creating the ring or
 * registering a group, the bound ring left as it was.
 */
static int rebuild_shared(aiol_loop *loop, aiol__uring_state *s)
{
    struct io_uring fresh;
    int ret;

    if (s->npending != 0) {
        return -EBUSY;
    }
    ret = aiol__uring_ring_create(s, &fresh, true);
    if (ret < 0) {
        s->shared = false; /* (set by the create, for the fresh ring) */
        return ret;
    }
    ret = aiol__uring_bufs_move(s, &fresh);
    if (ret < 0) {
        io_uring_queue_exit(&fresh);
        s->shared = false;
        (void)aiol__uring_bufs_move(s, &s->ring); /* (their rings were reset) */
        return ret;
    }
    io_uring_queue_exit(&s->ring); /* cancels the old ring's polls */
    s->ring = fresh;
    /* A host's eventfd was the old ring's: the host takes the new fd. */
    aiol__uring_host_efd_close(s);
    s->host_bound = false;
    aiol__lock(loop);
    aiol__uring_polls_rearm(loop, s);
    aiol__unlock(loop);
    return 0;
}

void aiol__uring_bind(aiol_loop *loop)
{
    aiol__uring_state *s = loop->fdmon_state;
    uint64_t self = aiol__thread_id();

    if (s->shared || (s->bound && s->owner == self)) {
        return;
    }
    if (s->bound) {
        int ret = rebuild_shared(loop, s);

        aiol__check(ret != -EBUSY,
                    "io_uring requests are in flight on a ring bound to "
                    "another thread: complete them there before another "
                    "thread polls or frees the loop");
        aiol__check(ret == 0,
                    "cannot create a shared io_uring ring for a new thread "
                    "(out of fds or memory)");
        return;
    }
    aiol__uring_ring_enable(loop, s);
}

static int uring_wait(aiol_loop *loop, aiol__ready_list *ready,
                      int64_t deadline_ns)
{
    aiol__uring_state *s = loop->fdmon_state;
    int queued = 0, ret;

    aiol__uring_bind(loop);
    for (;;) {
        struct io_uring_cqe *cqe;
        struct __kernel_timespec kts;
        struct timespec ts;
        int got;

        if (aiol__embed_is_direct(loop) || aiol__uring_polls_listed(s)) {
            aiol__lock(loop);
            (void)aiol__embed_direct(loop, false); /* our own wait: re-arm all */
            aiol__uring_polls_flush(loop, s);
            aiol__unlock(loop);
        }

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

        got = -1;
        if (io_uring_cq_ready(&s->ring) != 0) { /* (only we reap) */
            aiol__lock(loop);
            got = aiol__uring_cqes_reap(loop, s, ready);
            aiol__unlock(loop);
        }
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

    aiol__uring_bind(loop);
    /* Relaxed is exact for direct mode: only the polling thread sets it. */
    if (!aiol__embed_is_direct(loop) && aiol__uring_polls_listed(s)) {
        aiol__lock(loop);
        aiol__uring_polls_flush(loop, s);
        aiol__unlock(loop);
    }
    (void)aiol__uring_ring_look(loop, s);
    if (s->host_bound) {
        aiol__uring_host_efd_arm(s);
    }
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
        int ret = rebuild_shared(loop, s);

        if (ret == -EBUSY && s->bound && s->owner == aiol__thread_id()) {
            /*
             * Requests in flight pin the ring to us.  Keep it, for good
             * (the host holds its fd), and give the host an eventfd the
             * ring signals: a sleeper in poll(2) on the ring fd itself
             * would never be woken (aiol__uring_host_efd_open()).
             */
            ret = aiol__uring_host_efd_open(s);
            if (ret < 0) {
                return ret;
            }
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
    return s->host_bound ? s->host_efd : s->ring.ring_fd;
}

static void uring_spin_begin(aiol_loop *loop)
{
    aiol__uring_bind(loop);
    aiol__uring_spin_start(loop, loop->fdmon_state);
}

/*
 * A completion callback may submit again (a receive re-arming itself):
 * the ring must take this thread's submissions, whoever reaped it.
 */
static bool uring_reqs_dispatch(aiol_loop *loop)
{
    aiol__uring_state *s = loop->fdmon_state;

    if (s->done_head == s->ndone) {
        return false;
    }
    aiol__uring_bind(loop);
    return aiol__uring_reqs_dispatch(loop);
}

static void uring_reqs_quiesce(aiol_loop *loop)
{
    if (((aiol__uring_state *)loop->fdmon_state)->npending != 0) {
        aiol__uring_bind(loop);
    }
    aiol__uring_reqs_quiesce(loop);
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
    .update = aiol__uring_poll_update,   /* uring-poll.c */
    .reserve = aiol__uring_poll_reserve,
    .wait = uring_wait,
    .pending = uring_pending,
    .spin_begin = uring_spin_begin,
    .spin_check = aiol__uring_spin_check, /* uring-reap.c */
    .look_owed = uring_look_owed,
    .embed = &(const aiol__fdmon_embed_ops){
        .get_fd = uring_get_fd,
        .flush = uring_flush,
        .direct_enter = aiol__uring_polls_direct_enter, /* uring-poll.c */
    },
    .requests = &(const aiol__fdmon_req_ops){
        .dispatch = uring_reqs_dispatch,
        .quiesce = uring_reqs_quiesce,
    },
};
