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
 * Requests.  aiol_uring_submit() puts a caller-prepared SQE on the same
 * ring with a pointer to its aiol_uring_req as user_data (8-byte aligned,
 * so tag bits 00).  Completions are queued in CQE order and dispatched by
 * the poll iteration after fd handlers (monitor op dispatch), from the
 * oldest, so a nested poll continues the queue as it does bottom halves.
 * At loop teardown every request still in flight is cancelled and waited
 * for, and its callback runs, before anything else is torn down.
 *
 * Setup.  The ring starts "bound": SINGLE_ISSUER|DEFER_TASKRUN|TASKRUN_FLAG
 * (6.1+), created disabled and enabled by the first thread that polls it,
 * which becomes its only submitter.  DEFER_TASKRUN runs completion work
 * only when we ask for events, in batches, which is what lets the ring
 * keep up with epoll (docs/backend-io_uring.md has the measurements).  A loop
 * may be polled by different threads over time, though (QEMU's main context
 * is polled by whichever thread holds its lock); when another thread polls
 * a bound ring, the ring is rebuilt "shared" (COOP_TASKRUN|TASKRUN_FLAG,
 * 5.19+, or plain) and every watched fd is re-armed on it.  That needs no
 * request of aioloop/uring.h in flight: those cannot move between rings.
 * Kernels that refuse the bound flags get a shared ring from the start.
 *
 * Direct embedding (aiol_loop_embed_fds()).  While a host polls the
 * handlers' fds itself, their polls are cancelled and the fds wait on the
 * dirty list; the monitor's own wait, aiol_loop_get_fd() and a fallback
 * to the ring fd re-arm them.  Not while aioloop/uring.h requests are in
 * flight: their completions arrive on the ring, so the host must poll the
 * ring fd then (embed_fds gives -EBUSY).
 * The ring fd is registered (io_uring_register_ring_fd, 5.18+, one fd
 * lookup less per io_uring_enter) for loops polled by one thread for life,
 * the iothreads': a registration belongs to one thread and would pin the
 * ring if the loop moved.  If no ring can be created (ENOSYS, EPERM from
 * seccomp or io_uring_disabled, ENOMEM), init fails and the default backend
 * choice falls back to epoll.
 */
#include <errno.h>
#include <liburing.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fdmon.h"
#include "uring-priv.h"

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

struct aiol_uring_req {
    aiol_loop *loop;                      /* immutable */
    aiol_cqe_fn *done;                    /* immutable */
    void *opaque;                         /* immutable */
    AIOL_LIST_ENTRY(aiol_uring_req) link; /* s->inflight; polling thread */
};

/* A completion waiting to be dispatched. */
typedef struct uring_done {
    aiol_uring_req *req;
    int res;
    uint32_t flags;
} uring_done;

typedef struct uring_state {
    struct io_uring ring;      /* SQ: polling thread */
    bool shared;               /* any thread may poll; polling thread */
    bool bound;                /* bound ring enabled for owner; polling thread */
    uint64_t owner;            /* the bound ring's thread (aiol__thread_id) */
    bool registered;           /* ring fd registered for owner */
    uring_fd *fds;             /* fd-indexed; lock */
    size_t nfds;               /* lock */
    int *dirty, *fired;        /* fds to (re)arm or cancel; lock */
    size_t ndirty, dirty_cap, nfired, fired_cap; /* lock */
    /*
     * lock.  A set since the last flush_changes() returned 0, so its
     * caller wakes the poller if it may sleep; later sets return
     * AIOL__UPDATE_OWED until the next flush (fdmon.h).  Removals never
     * raise it: their callers wake nobody.
     */
    bool owed;
    /* Requests; polling thread. */
    AIOL_LIST_HEAD(, aiol_uring_req) inflight; /* submitted, not completed */
    unsigned npending;          /* submitted, callback not yet run */
    bool closing;               /* aiol_loop_free() began: no submissions */
    bool host_bound;            /* get_fd() gave a host the bound ring's fd
                                   (requests pinned it): keep it bound */
    uring_done *done;           /* completions to dispatch, done[head..n) */
    size_t done_head, ndone, done_cap;
} uring_state;

static int ring_init(struct io_uring *ring, unsigned flags)
{
    struct io_uring_params p;

    memset(&p, 0, sizeof(p));
    p.flags = flags;
    return io_uring_queue_init_params(RING_ENTRIES, ring, &p);
}

/* Creates a ring, bound unless @shared; sets s->shared to what it got. */
static int ring_create(uring_state *s, struct io_uring *ring, bool shared)
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
    for (size_t i = 0; i < sizeof(shared_flags) / sizeof(shared_flags[0]); i++) {
        ret = ring_init(ring, shared_flags[i]);
        if (ret != -EINVAL) {
            break;
        }
    }
    s->shared = true;
    return ret;
}

static int uring_init(aiol_loop *loop)
{
    uring_state *s = calloc(1, sizeof(*s));
    int ret;

    if (s == NULL) {
        return -ENOMEM;
    }
    ret = ring_create(s, &s->ring, false);
    if (ret < 0) {
        free(s);
        return ret;
    }
    loop->mon_state = s;
    return 0;
}

/* Frees the monitor's memory (the ring is gone already). */
static void state_free(aiol_loop *loop)
{
    uring_state *s = loop->mon_state;

    free(s->done);
    free(s->fds);
    free(s->dirty);
    free(s->fired);
    free(s);
    loop->mon_state = NULL;
}

static void uring_fini(aiol_loop *loop)
{
    uring_state *s = loop->mon_state;

    if (s->registered && s->owner == aiol__thread_id()) {
        io_uring_unregister_ring_fd(&s->ring);
    }
    /* Closing the ring cancels every request still in flight. */
    io_uring_queue_exit(&s->ring);
    state_free(loop);
}

/*
 * Under loop->lock.  Makes room for @fd in the per-fd array and, since an
 * fd is on the dirty and the fired list at most once, room on both lists
 * for every fd number the array covers: a completion's re-arm (reap) and
 * a cancel (direct embedding, a rebuilt ring) then never allocate, so they
 * cannot lose an fd, the notifier's above all.  0 or -ENOMEM.
 */
static int reserve_fd(uring_state *s, int fd)
{
    return aiol__fd_reserve(&s->fds, &s->nfds, sizeof(*s->fds), fd,
                            &s->dirty, &s->dirty_cap, &s->fired,
                            &s->fired_cap);
}

/* Under loop->lock.  Puts @fd on the dirty list (room: reserve_fd()). */
static void mark_dirty(uring_state *s, int fd)
{
    aiol__check(aiol__fd_list_mark(&s->dirty, &s->ndirty, &s->dirty_cap,
                                   &s->fds[fd].dirty, fd) == 0,
                "dirty list full despite reserve_fd()");
}

/* Under loop->lock.  Only records the change; wait() applies it. */
static int uring_update(aiol_loop *loop, aiol__handler *old,
                        aiol__handler *new_)
{
    uring_state *s = loop->mon_state;
    unsigned oev = old ? old->events : 0u, nev = new_ ? new_->events : 0u;
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
    }
    mark_dirty(s, fd);
    return aiol__update_owed(loop, &s->owed, new_ != NULL);
}

static struct io_uring_sqe *get_sqe(uring_state *s)
{
    struct io_uring_sqe *sqe;

    while ((sqe = io_uring_get_sqe(&s->ring)) == NULL) {
        io_uring_submit(&s->ring); /* SQ full: push what we have */
    }
    return sqe;
}

/*
 * Under loop->lock.  Cancels @fd's poll in flight: its completion, now of
 * an old generation, will be dropped.
 */
static void poll_cancel(aiol_loop *loop, uring_state *s, int fd)
{
    uring_fd *st = &s->fds[fd];
    struct io_uring_sqe *sqe = get_sqe(s);

    io_uring_prep_poll_remove(sqe, ud_poll(fd, st->gen));
    io_uring_sqe_set_data64(sqe, UD_IGNORE);
    st->gen++;
    st->armed = 0;
    loop->stats.monitor_ctls++;
}

/* Under loop->lock.  Brings fd's poll in line with its handler's events. */
static void sync_fd(aiol_loop *loop, uring_state *s, int fd)
{
    aiol__handler *node = aiol__handler_lookup(loop, fd);
    unsigned want = node ? node->events : 0u;
    uring_fd *st = &s->fds[fd];
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
        struct io_uring_sqe *sqe = get_sqe(s);

        io_uring_prep_poll_add(sqe, fd, aiol__events_to_poll(want));
        io_uring_sqe_set_data64(sqe, ud_poll(fd, st->gen));
        st->armed = (uint8_t)want;
    }
}

/* Under loop->lock.  Queues the SQEs for every pending change. */
static void flush_changes(aiol_loop *loop, uring_state *s)
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
    uring_state *s = loop->mon_state;
    aiol__handler *node;

    aiol__assert_locked(loop);
    if (s->npending != 0 ||
        io_uring_sq_space_left(&s->ring) < loop->nhandlers) {
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
 * Queues a request's completion for dispatch; the last one ends it.
 * Room: submit reserves one entry per pending request and entries already
 * dispatched are reclaimed here, so a request's final completion always
 * fits.  Only a multishot request's extra ones may need the array to grow;
 * if that fails, returns false and the CQE stays in the ring until a
 * dispatch has made room.
 */
static bool queue_done(uring_state *s, aiol_uring_req *req, int res,
                       uint32_t flags)
{
    if (s->ndone == s->done_cap && s->done_head > 0) {
        /* (uring_dispatch() indexes through done_head: safe to move) */
        memmove(s->done, s->done + s->done_head,
                (s->ndone - s->done_head) * sizeof(*s->done));
        s->ndone -= s->done_head;
        s->done_head = 0;
    }
    if (aiol__reserve(&s->done, &s->done_cap, s->ndone + 1,
                      sizeof(*s->done)) < 0) {
        return false;
    }
    if (!(flags & IORING_CQE_F_MORE)) {
        AIOL_LIST_REMOVE(req, link);
    }
    s->done[s->ndone++] = (uring_done){ req, res, flags };
    return true;
}

/*
 * Under loop->lock.  Handles one completion; returns 1 if it queued a
 * handler, -1 if it must stay in the ring for now (queue_done()).
 */
static int reap_one(aiol_loop *loop, uring_state *s,
                    const struct io_uring_cqe *cqe, aiol__ready_list *ready)
{
    uint64_t ud = cqe->user_data;
    int fd = (int)((ud >> 2) & 0x7fffffffu), res = cqe->res;
    uint32_t gen = (uint32_t)(ud >> 33);
    aiol__handler *node;
    uring_fd *st;

    aiol__assert_locked(loop);
    if ((ud & 3) == TAG_SQE) {
        return queue_done(s, (aiol_uring_req *)(uintptr_t)ud, res, cqe->flags)
                   ? 0 : -1;
    }
    if ((ud & 3) != TAG_POLL || (size_t)fd >= s->nfds) {
        return 0;
    }
    st = &s->fds[fd];
    if ((st->gen & 0x7fffffffu) != gen || st->armed == 0) {
        return 0; /* a cancelled generation */
    }
    st->armed = 0;
    if (res < 0 && res != -ECANCELED) {
        /*
         * -EBADF: the fd was closed before it was armed.  Like epoll, stop
         * watching it (no re-arm, no callback) until its handler changes.
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
         * -ECANCELED of the current generation: not our cancel (those bump
         * the generation) but the kernel's, when the thread that armed the
         * poll exited.  Re-arm, with no callback.
         */
        return 0;
    }
    node = aiol__handler_lookup(loop, fd);
    if (node == NULL || node->events == 0) {
        return 0;
    }
    aiol__ready_add(ready, node, aiol__events_from_poll((unsigned)res));
    return 1;
}

/* Under loop->lock.  Drains the CQ ring; returns handlers queued, or -1 if
 * it saw no completion at all. */
static int reap(aiol_loop *loop, uring_state *s, aiol__ready_list *ready)
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

/*
 * Handlers' polls and the bound ring stay behind: re-arm all on a new,
 * shared ring.  Polling thread.  0; -EBUSY while requests are in flight
 * (they cannot move between rings); or the error creating the ring
 * (-EMFILE, -ENOMEM).  On error the bound ring stays as it was.
 */
static int ring_rebuild_shared(aiol_loop *loop, uring_state *s)
{
    struct io_uring fresh;
    int ret;

    if (s->npending != 0) {
        return -EBUSY;
    }
    ret = ring_create(s, &fresh, true);
    if (ret < 0) {
        s->shared = false; /* (ring_create() set it for the fresh ring) */
        return ret;
    }
    io_uring_queue_exit(&s->ring); /* cancels the old ring's polls */
    s->ring = fresh;
    aiol__lock(loop);
    for (size_t fd = 0; fd < s->nfds; fd++) {
        uring_fd *st = &s->fds[fd];

        if (st->armed != 0) {
            st->armed = 0;
            st->gen++;
            mark_dirty(s, (int)fd);
        }
    }
    aiol__unlock(loop);
    return 0;
}

/*
 * Polling thread, before anything that may enter the kernel: enables a
 * bound ring for its first polling thread, or rebuilds it shared when a
 * different thread shows up.
 */
static void ring_bind(aiol_loop *loop, uring_state *s)
{
    uint64_t self = aiol__thread_id();

    if (s->shared || (s->bound && s->owner == self)) {
        return;
    }
    if (s->bound) {
        int ret = ring_rebuild_shared(loop, s);

        aiol__check(ret != -EBUSY,
                    "io_uring requests are in flight on a ring bound to "
                    "another thread: complete them there before another "
                    "thread polls or frees the loop");
        aiol__check(ret == 0,
                    "cannot create a shared io_uring ring for a new thread "
                    "(out of fds or memory)");
        return;
    }
    /* io_uring_enable_rings() is declared but not exported by liburing 2.3. */
    aiol__check(io_uring_register((unsigned)s->ring.ring_fd,
                                  IORING_REGISTER_ENABLE_RINGS, NULL, 0) == 0,
                "cannot enable the io_uring ring");
    s->owner = self;
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
static int ring_look(aiol_loop *loop, uring_state *s)
{
    if (io_uring_sq_ready(&s->ring) == 0 &&
        !(IO_URING_READ_ONCE(*s->ring.sq.kflags) &
          (IORING_SQ_TASKRUN | IORING_SQ_CQ_OVERFLOW))) {
        return 0;
    }
    loop->stats.monitor_waits++;
    return io_uring_submit_and_get_events(&s->ring);
}

static int uring_wait(aiol_loop *loop, aiol__ready_list *ready,
                      int64_t deadline_ns)
{
    uring_state *s = loop->mon_state;
    int queued = 0, ret;

    ring_bind(loop, s);
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
            ret = ring_look(loop, s);
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

        aiol__lock(loop);
        got = reap(loop, s, ready);
        aiol__unlock(loop);
        if (got > 0) {
            queued += got;
        }
        /*
         * Return on handlers, on a timeout or after a look.  Completions
         * that carried nothing (cancels, stale generations) and EINTR do
         * not end a blocking wait early.
         */
        if (queued > 0 || s->done_head < s->ndone || deadline_ns == 0 ||
            ret == -ETIME ||
            (deadline_ns != AIOL_DEADLINE_NONE &&
             aiol_clock_now_ns() >= deadline_ns)) {
            return queued;
        }
    }
}

/* Runs queued request completions, oldest first.  Polling thread. */
static bool uring_dispatch(aiol_loop *loop)
{
    uring_state *s = loop->mon_state;
    bool progress = false;

    while (s->done_head < s->ndone) {
        uring_done d = s->done[s->done_head++]; /* copy: a nested poll may
                                                   grow the array */
        if (!(d.flags & IORING_CQE_F_MORE)) {
            s->npending--;
        }
        d.req->done(d.req->opaque, d.res, d.flags);
        if (!(d.flags & IORING_CQE_F_MORE)) {
            free(d.req);
        }
        progress = true;
    }
    s->done_head = s->ndone = 0;
    return progress;
}

int aiol__uring_submit(aiol_loop *loop, aiol_sqe_prep_fn *prep,
                       aiol_cqe_fn *done, void *opaque, aiol_uring_req **out)
{
    uring_state *s = loop->mon_state;
    aiol_uring_req *req;
    struct io_uring_sqe *sqe;

    if (s->closing) {
        return -ESHUTDOWN; /* from a callback that aiol_loop_free() runs */
    }
    /* Room for its completion now: queue_done() cannot report ENOMEM. */
    if (aiol__reserve(&s->done, &s->done_cap, (size_t)s->npending + 1,
                      sizeof(*s->done)) < 0 ||
        (req = malloc(sizeof(*req))) == NULL) {
        return -ENOMEM;
    }
    ring_bind(loop, s); /* get_sqe() may have to submit */
    req->loop = loop;
    req->done = done;
    req->opaque = opaque;
    sqe = get_sqe(s);
    prep(sqe, opaque);
    io_uring_sqe_set_data(sqe, req);
    AIOL_LIST_INSERT_HEAD(&s->inflight, req, link);
    s->npending++;
    /* Its completion arrives on the ring: direct embedding ends (top). */
    aiol__embed_direct_end(loop);
    aiol__embed_invalidate(loop);
    if (out != NULL) {
        *out = req;
    }
    return 0;
}

int aiol__uring_cancel(aiol_uring_req *req)
{
    uring_state *s = req->loop->mon_state;
    struct io_uring_sqe *sqe;

    aiol__assert_poller(req->loop);
    ring_bind(req->loop, s);
    sqe = get_sqe(s);

    io_uring_prep_cancel64(sqe, (uint64_t)(uintptr_t)req, 0);
    io_uring_sqe_set_data64(sqe, UD_IGNORE);
    return 0;
}

unsigned aiol__uring_pending(aiol_loop *loop)
{
    return ((uring_state *)loop->mon_state)->npending;
}

/*
 * Waits until no request is in flight, running only their completion
 * callbacks (which may submit more: waited for too).  Poll completions
 * reaped meanwhile are not dispatched; their fds are re-armed by the next
 * flush and, being level-triggered, report again.  Polling thread.
 */
static void drain_requests(aiol_loop *loop, uring_state *s)
{
    while (s->npending != 0) {
        aiol__ready_list unused = AIOL_LIST_HEAD_INITIALIZER;

        if (!AIOL_LIST_EMPTY(&s->inflight)) {
            int ret = io_uring_submit_and_wait(&s->ring, 1);

            if (ret < 0 && ret != -EINTR && ret != -EBUSY && ret != -EAGAIN) {
                break; /* the ring is unusable: closing it cancels the rest */
            }
        }
        aiol__lock(loop);
        (void)reap(loop, s, &unused);
        aiol__unlock(loop);
        while (!AIOL_LIST_EMPTY(&unused)) {
            aiol__handler *node = AIOL_LIST_FIRST(&unused);
            AIOL_LIST_REMOVE(node, node_ready);
        }
        uring_dispatch(loop); /* (each round: frees room in s->done) */
    }
}

int aiol__uring_drain(aiol_loop *loop)
{
    uring_state *s = loop->mon_state;

    if (s->npending != 0) {
        ring_bind(loop, s);
        drain_requests(loop, s);
    }
    return s->npending == 0 ? 0 : -EIO;
}

/*
 * Loop teardown, before anything else goes: cancels every request in
 * flight, waits until the kernel is done with each, and runs their
 * callbacks, so no buffer is written after the loop is gone.  From then
 * on submissions fail (-ESHUTDOWN), so a callback that resubmits cannot
 * leave a request that never completes.
 */
static void uring_quiesce(aiol_loop *loop)
{
    uring_state *s = loop->mon_state;
    aiol_uring_req *req;

    s->closing = true;
    if (s->npending == 0) {
        return;
    }
    ring_bind(loop, s);
    AIOL_LIST_FOREACH(req, &s->inflight, link) {
        aiol__uring_cancel(req);
    }
    drain_requests(loop, s);
}

int aiol__uring_flush(aiol_loop *loop)
{
    uring_state *s = loop->mon_state;

    if (io_uring_sq_ready(&s->ring) == 0) {
        return 0;
    }
    ring_bind(loop, s);
    loop->stats.monitor_waits++;
    return io_uring_submit(&s->ring);
}

static void uring_flush(aiol_loop *loop)
{
    uring_state *s = loop->mon_state;

    ring_bind(loop, s);
    aiol__lock(loop);
    if (!aiol__embed_is_direct(loop)) {
        flush_changes(loop, s);
    }
    aiol__unlock(loop);
    (void)ring_look(loop, s);
}

static bool uring_pending(aiol_loop *loop)
{
    uring_state *s = loop->mon_state;

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
    uring_state *s = loop->mon_state;
    bool rearm;

    aiol__lock(loop);
    rearm = aiol__embed_is_direct(loop) || !s->shared;
    (void)aiol__embed_direct(loop, false);
    aiol__unlock(loop);
    if (!s->shared && !(s->host_bound && s->owner == aiol__thread_id())) {
        int ret = ring_rebuild_shared(loop, s);

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
 * A fork child (fork.c).  The ring is the parent's: bound to a parent
 * thread (SINGLE_ISSUER; and this thread's aiol__thread_id() is the
 * forking thread's, so ring_bind() would think it the owner), its fd maybe
 * registered in a parent thread's table, its SQ and CQ rings shared
 * memory.  So no io_uring_enter or register (io_uring_queue_exit() may
 * unregister the ring fd), and no write into the rings: unmap the child's
 * view (what liburing 2.3's io_uring_queue_exit() unmaps; the ring is
 * never SQE128) and close the child's copy of the fd.  Requests in flight
 * and completions not yet dispatched are the parent's to finish: they are
 * freed without their callbacks.
 */
static void uring_forget(aiol_loop *loop)
{
    uring_state *s = loop->mon_state;
    struct io_uring *r = &s->ring;
    aiol_uring_req *req;

    for (size_t i = s->done_head; i < s->ndone; i++) {
        if (!(s->done[i].flags & IORING_CQE_F_MORE)) {
            free(s->done[i].req); /* off s->inflight already (queue_done) */
        }
    }
    while ((req = AIOL_LIST_FIRST(&s->inflight)) != NULL) {
        AIOL_LIST_REMOVE(req, link);
        free(req);
    }
    munmap(r->sq.sqes, r->sq.ring_entries * sizeof(struct io_uring_sqe));
    munmap(r->sq.ring_ptr, r->sq.ring_sz);
    if (r->cq.ring_ptr != NULL && r->cq.ring_ptr != r->sq.ring_ptr) {
        munmap(r->cq.ring_ptr, r->cq.ring_sz);
    }
    close(r->ring_fd);
    state_free(loop);
}

const aiol__fdmon_ops aiol__fdmon_io_uring = {
    .name = "io_uring",
    .init = uring_init,
    .fini = uring_fini,
    .forget = uring_forget,
    .update = uring_update,
    .wait = uring_wait,
    .pending = uring_pending,
    .embed = &(const aiol__fdmon_embed_ops){
        .get_fd = uring_get_fd,
        .flush = uring_flush,
        .direct_enter = uring_direct_enter, /* polls cancelled meanwhile */
    },
    .requests = &(const aiol__fdmon_req_ops){
        .dispatch = uring_dispatch,
        .quiesce = uring_quiesce,
    },
};
