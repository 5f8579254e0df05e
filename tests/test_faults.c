/* SPDX-License-Identifier: MIT */
/*
 * test_faults.c - allocation-failure sweeps and syscall faults (fault.h).
 *
 * The sweep runs one representative workload (a loop with 80 pipe
 * handlers with busy-poll callbacks, a regular file, bottom halves, a one-shot, timers, a phase,
 * io_uring requests on io_uring; once plain and once embedded) again and
 * again, failing its 1st allocation, then its 2nd, and so on until a run
 * makes fewer allocations than the armed number.  In every run:
 *
 *   - a call that fails returns -ENOMEM, and retrying it then succeeds
 *     (a failed call left nothing behind that makes the retry fail);
 *   - a failure a call absorbs (best-effort growth) must have no visible
 *     effect;
 *   - afterwards every ready handler is dispatched exactly once per
 *     readiness, every bottom half, timer and request runs exactly once,
 *     removed handlers never run, and the loop frees cleanly:
 *     LeakSanitizer (the ASan build of make check) reports any leak.
 *
 * The syscall cases fail the kernel objects a loop needs at creation
 * (EMFILE, ENOMEM) and check the error and that nothing leaked.
 * Once per fd monitor ($AIOLOOP_FDMON).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#ifdef AIOL_HAVE_IO_URING
#include <liburing.h>
#endif

#include "aioloop/aioloop.h"
#include "fault.h"
#include "testutil.h"

#define NPIPES 80  /* fds past 64 and 128: every fd-indexed array grows */
#define NTIMERS 70 /* the timer heap grows too */
#define NREQS 70   /* io_uring: more requests than one array step */

typedef struct work {
    aiol_loop *loop;
    bool embed;
    int pipes[NPIPES][2];
    int pipe_calls[NPIPES];
    bool removed[NPIPES];
    int file_fd, file_calls;
    aiol_bh *bh;
    int bh_calls, oneshot_calls, phase_calls;
    aiol_phase *phase;
    aiol_timer *timers[NTIMERS];
    int timer_calls[NTIMERS];
    int req_calls[NREQS];
    int nreqs;
    long reported; /* calls that returned -ENOMEM (then retried) */
} work;

static work W;

static void on_pipe(void *opaque)
{
    int i = (int)(intptr_t)opaque;

    W.pipe_calls[i]++;
    tu_pipe_drain(W.pipes[i][0]);
}

/* A busy-poll callback that never finds work: the handler is a poller. */
static bool on_pipe_poll(void *opaque)
{
    (void)opaque;
    return false;
}

static void on_file(void *opaque)
{
    (void)opaque;
    W.file_calls++;
}

static void on_bh(void *opaque)
{
    (void)opaque;
    W.bh_calls++;
}

static void on_oneshot(void *opaque)
{
    (void)opaque;
    W.oneshot_calls++;
}

static bool on_phase(void *opaque)
{
    (void)opaque;
    W.phase_calls++;
    return false;
}

static void on_timer(void *opaque)
{
    W.timer_calls[(intptr_t)opaque]++;
}

#ifdef AIOL_HAVE_IO_URING
static void prep_nop(struct io_uring_sqe *sqe, void *opaque)
{
    (void)opaque;
    io_uring_prep_nop(sqe);
}

static void on_req(void *opaque, int res, uint32_t flags)
{
    (void)flags;
    assert_int_equal(res, 0);
    W.req_calls[(intptr_t)opaque]++;
}
#endif

/*
 * Runs @expr (an int call); on -ENOMEM counts it as reported and runs it
 * again, which must then succeed: the fault is one-shot.
 */
#define TRY(expr)                                                            \
    do {                                                                     \
        int r_ = (expr);                                                     \
        if (r_ == -ENOMEM) {                                                 \
            W.reported++;                                                    \
            r_ = (expr);                                                     \
        }                                                                    \
        if (r_ != 0) {                                                       \
            fail_msg("%s = %d (%s) with allocation %ld failed", #expr, r_,   \
                     strerror(-r_), tf_count(TF_ALLOC));                     \
        }                                                                    \
    } while (0)

/* Polls until @done() or a bounded number of iterations. */
static void poll_until(bool (*done)(void))
{
    for (int i = 0; i < 200 && !done(); i++) {
        aiol_loop_poll_deadline(W.loop, aiol_mono_time_get() + 5000000);
    }
}

static bool first_round_done(void)
{
    for (int i = 0; i < NPIPES; i++) {
        if (W.pipe_calls[i] == 0) {
            return false;
        }
    }
    for (int i = 0; i < NTIMERS; i++) {
        if (W.timer_calls[i] == 0) {
            return false;
        }
    }
    for (int i = 0; i < W.nreqs; i++) {
        if (W.req_calls[i] == 0) {
            return false;
        }
    }
    return W.file_calls > 0 && W.bh_calls > 0 && W.oneshot_calls > 0;
}

static bool second_round_done(void)
{
    for (int i = 0; i < NPIPES; i++) {
        if (!W.removed[i] && W.pipe_calls[i] < 2) {
            return false;
        }
    }
    return true;
}

static int get_fd_ok(aiol_loop *loop)
{
    int fd = aiol_loop_fd_get(loop);

    return fd >= 0 ? 0 : fd;
}

/* Sets everything up, calling the fallible API under the armed fault. */
static void workload_setup(const char *fdmon)
{
    aiol_loop *loop = NULL;

    TRY(aiol_loop_new(&loop, fdmon));
    W.loop = loop;
    if (W.embed) {
        TRY(get_fd_ok(loop)); /* poll: the epoll mirror; io_uring: shared ring */
    }
    for (int i = 0; i < NPIPES; i++) {
        TRY(aiol_fd_set(loop, W.pipes[i][0], on_pipe, NULL, on_pipe_poll,
                        (void *)(intptr_t)i));
    }
    TRY(aiol_fd_set(loop, W.file_fd, on_file, NULL, NULL, NULL));
    TRY(aiol_bh_new(loop, on_bh, NULL, &W.bh));
    aiol_bh_schedule(W.bh);
    TRY(aiol_bh_schedule_oneshot(loop, on_oneshot, NULL));
    TRY(aiol_phase_new(loop, &(aiol_phase_ops){ .dispatch = on_phase }, NULL,
                       &W.phase));
    for (int i = 0; i < NTIMERS; i++) {
        TRY(aiol_timer_new(aiol_loop_clock_get(loop), on_timer,
                           (void *)(intptr_t)i, &W.timers[i]));
        TRY(aiol_timer_mod(W.timers[i], aiol_mono_time_get()));
    }
#ifdef AIOL_HAVE_IO_URING
    if (strcmp(aiol_loop_fdmon_get(loop), "io_uring") == 0) {
        for (int i = 0; i < NREQS; i++) {
            TRY(aiol_uring_submit(loop, prep_nop, on_req, (void *)(intptr_t)i,
                                  NULL));
            W.nreqs++;
        }
    }
#endif
    for (int i = 0; i < NPIPES; i++) {
        tu_pipe_signal(W.pipes[i][1]);
    }
}

/* Checks that everything ran exactly once; then a second round. */
static void workload_check(void)
{
    poll_until(first_round_done);
    for (int i = 0; i < NPIPES; i++) {
        if (W.pipe_calls[i] != 1) {
            fail_msg("pipe handler %d ran %d times (allocation %ld failed)", i,
                     W.pipe_calls[i], tf_count(TF_ALLOC));
        }
    }
    for (int i = 0; i < NTIMERS; i++) {
        assert_int_equal(W.timer_calls[i], 1);
    }
    for (int i = 0; i < W.nreqs; i++) {
        assert_int_equal(W.req_calls[i], 1);
    }
    assert_true(W.file_calls > 0);
    assert_int_equal(W.bh_calls, 1);
    assert_int_equal(W.oneshot_calls, 1);
    assert_true(W.phase_calls > 0);

    /* Remove every third handler, ready the rest again. */
    for (int i = 0; i < NPIPES; i += 3) {
        assert_int_equal(aiol_fd_remove(W.loop, W.pipes[i][0]), 0);
        W.removed[i] = true;
    }
    assert_int_equal(aiol_fd_remove(W.loop, W.file_fd), 0);
    for (int i = 0; i < NPIPES; i++) {
        tu_pipe_signal(W.pipes[i][1]);
    }
    poll_until(second_round_done);
    for (int i = 0; i < NPIPES; i++) {
        assert_int_equal(W.pipe_calls[i], W.removed[i] ? 1 : 2);
    }
}

static void workload_teardown(void)
{
    for (int i = 0; i < NPIPES; i++) {
        if (W.loop != NULL && !W.removed[i]) {
            assert_int_equal(aiol_fd_remove(W.loop, W.pipes[i][0]), 0);
        }
        close(W.pipes[i][0]);
        close(W.pipes[i][1]);
    }
    for (int i = 0; i < NTIMERS; i++) {
        aiol_timer_free(W.timers[i]);
    }
    if (W.bh != NULL) {
        aiol_bh_free(W.bh);
    }
    if (W.phase != NULL) {
        aiol_phase_free(W.phase);
    }
    aiol_loop_free(W.loop);
    close(W.file_fd);
}

/* One run with the @k-th allocation failing; false once k is past the end. */
static bool workload_run(long k, bool embed, long *reported)
{
    const char *fdmon = tu_fdmon_requested();
    char path[] = "/tmp/aiol-faults-XXXXXX";
    bool hit;

    memset(&W, 0, sizeof(W));
    W.embed = embed;
    for (int i = 0; i < NPIPES; i++) {
        tu_pipe(W.pipes[i]);
    }
    W.file_fd = mkstemp(path);
    assert_true(W.file_fd >= 0);
    unlink(path);

    tf_fail_at(TF_ALLOC, k, ENOMEM);
    workload_setup(fdmon);
    hit = tf_failed(TF_ALLOC) > 0;
    workload_check(); /* (the one-shot fault may also hit in here) */
    hit = hit || tf_failed(TF_ALLOC) > 0;
    tf_disarm();
    *reported += W.reported;
    workload_teardown();
    return hit;
}

static void sweep(bool embed)
{
    long k, reported = 0;

    for (k = 1; workload_run(k, embed, &reported); k++) {
    }
    printf("sweep (%s%s): %ld allocations failed one at a time, "
           "%ld reported as -ENOMEM and retried, the rest absorbed\n",
           tu_fdmon_requested() ? tu_fdmon_requested() : "default",
           embed ? ", embedded" : "", k - 1, reported);
    assert_true(k > 50); /* the workload did allocate: the sweep ran */
}

static void test_alloc_sweep(void **state)
{
    (void)state;
    sweep(false);
}

static void test_alloc_sweep_embedded(void **state)
{
    (void)state;
    sweep(true);
}

/* A loop whose creation fails on syscall @kind leaves nothing behind. */
static void creation_fails(tf_call kind, int err, int want)
{
    const char *fdmon = tu_fdmon_requested();
    aiol_loop *loop = (aiol_loop *)&loop; /* must stay untouched */
    int ret;

    tf_fail_at(kind, 1, err);
    ret = aiol_loop_new(&loop, fdmon);
    tf_disarm();
    assert_int_equal(ret, want);
    assert_ptr_equal(loop, (aiol_loop *)&loop);
}

static void test_eventfd_emfile(void **state)
{
    (void)state;
    creation_fails(TF_EVENTFD, EMFILE, -EMFILE);
}

static void test_monitor_emfile(void **state)
{
    const char *b = tu_fdmon_requested();

    (void)state;
    if (b != NULL && strcmp(b, "epoll") == 0) {
        creation_fails(TF_EPOLL_CREATE, EMFILE, -EMFILE);
    }
#ifdef AIOL_HAVE_IO_URING
    else if (b != NULL && strcmp(b, "io_uring") == 0) {
        creation_fails(TF_URING_INIT, ENOMEM, -ENOMEM);
    }
#endif
    else {
        skip();
    }
}

/* Every allocation failing: creation reports it and leaks nothing. */
static void test_no_memory_at_all(void **state)
{
    aiol_loop *loop = NULL;
    int ret;

    (void)state;
    tf_fail_from(TF_ALLOC, 1, ENOMEM);
    ret = aiol_loop_new(&loop, tu_fdmon_requested());
    tf_disarm();
    assert_int_equal(ret, -ENOMEM);
    assert_null(loop);
}

enum { NRESERVED = 100 };

static int reserved_reads;

static void on_reserved(void *opaque)
{
    reserved_reads++;
    tu_eventfd_drain((int)(intptr_t)opaque);
}

/* Sets a handler on each of @fds; every set must succeed. */
static void reserved_set_all(aiol_loop *loop, const int *fds)
{
    for (int i = 0; i < NRESERVED; i++) {
        assert_int_equal(aiol_fd_set(loop, fds[i], on_reserved, NULL, NULL,
                                     (void *)(intptr_t)fds[i]),
                         0);
    }
}

/*
 * After aiol_fd_reserve(), setting that many handlers allocates nothing,
 * and neither does setting them again after a removal.  Their events run
 * with every allocation failing too (a wait may try to grow its buffer,
 * which only an epoll wait does, and not for lack of room).
 */
static void test_reserve_then_no_allocation(void **state)
{
    aiol_loop *loop = tu_loop_new();
    int fds[NRESERVED], max_fd = 0;

    (void)state;
    for (int i = 0; i < NRESERVED; i++) {
        fds[i] = tu_eventfd();
        max_fd = fds[i] > max_fd ? fds[i] : max_fd;
    }
    assert_int_equal(aiol_fd_reserve(loop, NRESERVED, max_fd), 0);
    for (int round = 0; round < 2; round++) {
        tf_fail_from(TF_ALLOC, 1, ENOMEM);
        reserved_set_all(loop, fds);
        assert_int_equal(tf_count(TF_ALLOC), 0);
        reserved_reads = 0;
        for (int i = 0; i < NRESERVED; i++) {
            tu_eventfd_signal(fds[i]);
        }
        while (reserved_reads < NRESERVED) {
            aiol_loop_poll(loop, true);
        }
        for (int i = 0; i < NRESERVED; i++) {
            assert_int_equal(aiol_fd_remove(loop, fds[i]), 0);
        }
        aiol_loop_poll(loop, false);
        tf_disarm();
    }
    aiol_loop_free(loop);
    for (int i = 0; i < NRESERVED; i++) {
        close(fds[i]);
    }
}

/*
 * A reserve that runs out of memory says so and leaves the loop working;
 * fd numbers no process can open are refused.
 */
static void test_reserve_fails_cleanly(void **state)
{
    aiol_loop *loop = tu_loop_new();
    struct rlimit rl;
    int efd = tu_eventfd();

    (void)state;
    assert_int_equal(aiol_fd_reserve(loop, 1, -1), -EBADF);
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
    if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max <= INT_MAX) {
        assert_int_equal(aiol_fd_reserve(loop, 1, (int)rl.rlim_max), -EBADF);
    }
    for (long k = 1;; k++) {
        int ret;

        tf_fail_at(TF_ALLOC, k, ENOMEM);
        ret = aiol_fd_reserve(loop, 1000, efd + 1000);
        tf_disarm();
        if (ret == 0) {
            assert_true(k > 1);
            break;
        }
        assert_int_equal(ret, -ENOMEM);
    }
    reserved_reads = 0;
    assert_int_equal(aiol_fd_set(loop, efd, on_reserved, NULL, NULL,
                                 (void *)(intptr_t)efd),
                     0);
    tu_eventfd_signal(efd);
    while (reserved_reads == 0) {
        aiol_loop_poll(loop, true);
    }
    aiol_loop_free(loop);
    close(efd);
}

static int pipe_reads;

static void on_pipe_count(void *opaque)
{
    pipe_reads++;
    tu_pipe_drain((int)(intptr_t)opaque);
}

/*
 * epoll: a deferred ADD the kernel refuses for now (ENOMEM, or ENOSPC once
 * max_user_watches is reached) is retried, so the handler runs late
 * instead of never; a blocking poll does not sleep past the retry.
 */
static void test_epoll_add_refused_for_now(void **state)
{
    static const int errs[] = { ENOMEM, ENOSPC };
    const char *b = tu_fdmon_requested();

    (void)state;
    if (b == NULL || strcmp(b, "epoll") != 0) {
        skip();
    }
    for (size_t i = 0; i < sizeof(errs) / sizeof(errs[0]); i++) {
        aiol_loop *loop = tu_loop_new();
        int p[2];

        pipe_reads = 0;
        aiol_loop_poll(loop, false); /* the notifier reaches the kernel */
        tu_pipe(p);
        assert_int_equal(aiol_fd_set(loop, p[0], on_pipe_count, NULL, NULL,
                                     (void *)(intptr_t)p[0]), 0);
        tu_pipe_signal(p[1]);
        tf_fail_at(TF_EPOLL_CTL, 1, errs[i]);
        for (int n = 0; n < 50 && pipe_reads == 0; n++) {
            aiol_loop_poll(loop, true); /* never forever: the retry */
        }
        assert_int_equal(tf_failed(TF_EPOLL_CTL), 1);
        tf_disarm();
        assert_int_equal(pipe_reads, 1);
        assert_int_equal(aiol_fd_remove(loop, p[0]), 0);
        aiol_loop_free(loop);
        close(p[0]);
        close(p[1]);
    }
}

static bool loop_fd_ready(aiol_loop *loop)
{
    struct pollfd pfd = { .fd = aiol_loop_fd_get(loop), .events = POLLIN };

    assert_true(pfd.fd >= 0);
    return poll(&pfd, 1, 0) == 1;
}

/*
 * epoll: a registration whose file outlived its closed fd is dropped by
 * rebuilding the epoll instance (fdmon-epoll.c, "Lazy removal").  When
 * the rebuild fails (no fd for the new instance; an ADD refused for want
 * of memory, the k-th for every k) nothing changes: the live handler
 * keeps working, nothing runs for the old file, and the next event of the
 * old file tries again, which succeeds once the kernel gives in.
 */
static void test_epoll_rebuild_refused(void **state)
{
    const char *b = tu_fdmon_requested();

    (void)state;
    if (b == NULL || strcmp(b, "epoll") != 0) {
        skip();
    }
    for (long k = 0; k <= 3; k++) {
        aiol_loop *loop = tu_loop_new();
        int efd = tu_eventfd(), keep = dup(efd), p[2];

        pipe_reads = 0;
        tu_pipe(p);
        assert_int_equal(aiol_fd_set(loop, p[0], on_pipe_count, NULL, NULL,
                                     (void *)(intptr_t)p[0]), 0);
        assert_int_equal(aiol_fd_set(loop, efd, on_pipe_count, NULL, NULL,
                                     (void *)(intptr_t)efd), 0);
        assert_false(aiol_loop_poll(loop, false));
        assert_int_equal(aiol_fd_remove(loop, efd), 0);
        close(efd);
        tu_eventfd_signal(keep); /* the old file, ready for good */
        if (k == 0) {
            tf_fail_at(TF_EPOLL_CREATE, 1, EMFILE);
        } else {
            tf_fail_at(TF_EPOLL_CTL, k, ENOMEM);
        }
        assert_false(aiol_loop_poll(loop, false));
        assert_true(k == 0 ? tf_failed(TF_EPOLL_CREATE) == 1
                           : tf_failed(TF_EPOLL_CTL) == 1);
        tf_disarm();
        tu_pipe_signal(p[1]); /* the live handler still works */
        assert_true(aiol_loop_poll(loop, false));
        assert_int_equal(pipe_reads, 1);
        assert_false(aiol_loop_poll(loop, false)); /* the retry succeeds */
        assert_false(loop_fd_ready(loop));         /* the old file is gone */
        tu_pipe_signal(p[1]);
        assert_true(aiol_loop_poll(loop, false));
        assert_int_equal(pipe_reads, 2);
        assert_int_equal(aiol_fd_remove(loop, p[0]), 0);
        aiol_loop_free(loop);
        close(keep);
        close(p[0]);
        close(p[1]);
    }
}

#ifdef AIOL_HAVE_IO_URING
static bool on_uring(void)
{
    const char *b = tu_fdmon_requested();

    return b != NULL && strcmp(b, "io_uring") == 0;
}

static int efd_reads;

static void on_efd(void *opaque)
{
    efd_reads++;
    tu_eventfd_drain((int)(intptr_t)opaque);
}

/*
 * aiol_loop_fd_get() on a ring bound to its thread makes a shared ring;
 * when that fails (EMFILE) it returns the error and the loop keeps
 * working on the bound ring (it used to abort).
 */
static void test_get_fd_emfile(void **state)
{
    aiol_loop *loop;
    int efd = tu_eventfd(), lfd;

    (void)state;
    if (!on_uring()) {
        skip();
    }
    assert_int_equal(aiol_loop_new(&loop, "io_uring"), 0);
    assert_int_equal(aiol_fd_set(loop, efd, on_efd, NULL, NULL,
                                 (void *)(intptr_t)efd), 0);
    assert_false(aiol_loop_poll(loop, false)); /* binds the ring */
    tf_fail_at(TF_URING_INIT, 1, EMFILE);
    lfd = aiol_loop_fd_get(loop);
    tf_disarm();
    assert_int_equal(lfd, -EMFILE);
    tu_eventfd_signal(efd);
    assert_true(aiol_loop_poll(loop, true));
    assert_int_equal(efd_reads, 1);
    assert_true(aiol_loop_fd_get(loop) >= 0); /* works once fds are back */
    tu_eventfd_signal(efd);
    assert_true(aiol_loop_poll(loop, true));
    assert_int_equal(efd_reads, 2);
    assert_int_equal(aiol_fd_remove(loop, efd), 0);
    aiol_loop_free(loop);
    close(efd);
}

#ifndef IORING_TIMEOUT_MULTISHOT
#define IORING_TIMEOUT_MULTISHOT (1U << 6) /* Linux 6.4; liburing 2.4 */
#endif
#define NSHOTS 200

static struct __kernel_timespec shot_ts = { .tv_nsec = 1000 };
static int shots, shots_final;

static void prep_multishot(struct io_uring_sqe *sqe, void *opaque)
{
    (void)opaque;
    io_uring_prep_timeout(sqe, &shot_ts, NSHOTS, IORING_TIMEOUT_MULTISHOT);
}

static void on_shot(void *opaque, int res, uint32_t flags)
{
    (void)opaque;
    (void)res;
    shots++;
    shots_final += !(flags & IORING_CQE_F_MORE);
}

/*
 * Whether the kernel has multishot timeouts (Linux 6.4), asked on a ring
 * of our own, apart from the library: a kernel without them refuses the
 * flag (-EINVAL); one with them marks the first of two shots
 * IORING_CQE_F_MORE.
 */
static bool kernel_has_multishot_timeouts(void)
{
    struct __kernel_timespec ts = { .tv_nsec = 1000 };
    struct io_uring ring;
    struct io_uring_cqe *cqe;
    bool more;

    assert_int_equal(io_uring_queue_init(4, &ring, 0), 0);
    io_uring_prep_timeout(io_uring_get_sqe(&ring), &ts, 2,
                          IORING_TIMEOUT_MULTISHOT);
    assert_int_equal(io_uring_submit_and_wait(&ring, 1), 1);
    assert_int_equal(io_uring_peek_cqe(&ring, &cqe), 0);
    more = (cqe->flags & IORING_CQE_F_MORE) != 0;
    if (!more) {
        print_message("a multishot timeout on a fresh ring: res %d (%s), "
                      "no IORING_CQE_F_MORE\n", cqe->res, strerror(-cqe->res));
    }
    io_uring_queue_exit(&ring);
    return more;
}

/*
 * A multishot request's completions can outnumber the room submit
 * reserved.  With every allocation failing, the extra ones stay in the
 * ring until dispatch made room, and every one is delivered (queueing
 * them used to abort the process on ENOMEM).
 */
static void test_multishot_no_memory(void **state)
{
    aiol_loop *loop;
    int64_t end;

    (void)state;
    if (!on_uring()) {
        skip();
    }
    if (!kernel_has_multishot_timeouts()) {
        print_message("skipped: this kernel has no multishot timeouts "
                      "(Linux 6.4)\n");
        skip();
    }
    assert_int_equal(aiol_loop_new(&loop, "io_uring"), 0);
    assert_int_equal(aiol_uring_submit(loop, prep_multishot, on_shot, NULL,
                                       NULL), 0);
    assert_int_equal(aiol_uring_flush(loop), 1);
    usleep(50000); /* let the shots pile up in the kernel */
    tf_fail_from(TF_ALLOC, 1, ENOMEM);
    end = aiol_mono_time_get() + 5000000000;
    while (shots_final == 0 && aiol_mono_time_get() < end) {
        aiol_loop_poll_deadline(loop, aiol_mono_time_get() + 10000000);
    }
    tf_disarm();
    assert_int_equal(shots, NSHOTS);
    assert_int_equal(shots_final, 1);
    assert_int_equal(aiol_uring_pending_get(loop), 0);
    aiol_loop_free(loop);
}
#endif

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_alloc_sweep),
        cmocka_unit_test(test_alloc_sweep_embedded),
        cmocka_unit_test(test_eventfd_emfile),
        cmocka_unit_test(test_monitor_emfile),
        cmocka_unit_test(test_no_memory_at_all),
        cmocka_unit_test(test_reserve_then_no_allocation),
        cmocka_unit_test(test_reserve_fails_cleanly),
        cmocka_unit_test(test_epoll_add_refused_for_now),
        cmocka_unit_test(test_epoll_rebuild_refused),
#ifdef AIOL_HAVE_IO_URING
        cmocka_unit_test(test_get_fd_emfile),
        cmocka_unit_test(test_multishot_no_memory),
#endif
    };

    aiol_loop_free(tu_loop_new()); /* exits 77 if the fd monitor cannot run */
    printf("fdmon: %s\n",
           tu_fdmon_requested() ? tu_fdmon_requested() : "default");
    return cmocka_run_group_tests(tests, NULL, NULL);
}
