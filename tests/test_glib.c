/*
 * test_glib.c - aioloop-glib (aioloop/glib.h): a loop driven only by
 * g_main_loop_run() / g_main_context_iteration(), once per backend.
 *
 * fd handlers (in direct mode and, past AIOL_GLIB_DIRECT_MAX handlers,
 * through the loop fd), bottom halves from the loop's thread and from
 * other threads, timers, a nested aiol_loop_poll() from a callback, two
 * loops in one context, and attach/detach/destroy in every order (the
 * ASan build checks that nothing leaks).  A glib timeout quits any
 * g_main_loop_run() that would otherwise hang, and fails the test.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "aioloop/aioloop.h"
#include "aioloop/glib.h"
#include "testutil.h"
#include "tuplus.h"

#define NFDS (AIOL_GLIB_DIRECT_MAX + 4)

typedef struct gt gt;

typedef struct reader {
    gt *t;
    int i;
} reader;

struct gt {
    aiol_loop *loop;
    GMainContext *ctx;
    GMainLoop *ml;
    GSource *src;
    int pipes[NFDS][2];
    int reads[NFDS];
    int bh_runs, timer_runs, nested_ok;
    bool timed_out;
    aiol_bh *bh;
    reader rd[NFDS];
};

static gboolean on_timeout(gpointer data)
{
    gt *t = data;

    t->timed_out = true;
    g_main_loop_quit(t->ml);
    return G_SOURCE_REMOVE;
}

/* Runs the glib loop until quit; fails after 10 s. */
static void run(gt *t)
{
    GSource *to = g_timeout_source_new(10000);

    g_source_set_callback(to, on_timeout, t, NULL);
    g_source_attach(to, t->ctx);
    g_main_loop_run(t->ml);
    g_source_destroy(to);
    g_source_unref(to);
    assert_false(t->timed_out);
}

static void gt_init(gt *t)
{
    memset(t, 0, sizeof(*t));
    assert_int_equal(aiol_loop_new(&t->loop, NULL), 0);
    t->ctx = g_main_context_new();
    t->ml = g_main_loop_new(t->ctx, FALSE);
    t->src = aiol_glib_source_new(t->loop);
    assert_ptr_equal(aiol_glib_source_loop(t->src), t->loop);
    g_source_attach(t->src, t->ctx);
    for (int i = 0; i < NFDS; i++) {
        assert_int_equal(pipe2(t->pipes[i], O_NONBLOCK | O_CLOEXEC), 0);
    }
}

static void gt_fini(gt *t)
{
    for (int i = 0; i < NFDS; i++) {
        aiol_fd_remove(t->loop, t->pipes[i][0]);
        close(t->pipes[i][0]);
        close(t->pipes[i][1]);
    }
    if (t->bh != NULL) {
        aiol_bh_delete(t->bh);
    }
    g_source_destroy(t->src);
    g_source_unref(t->src);
    g_main_loop_unref(t->ml);
    g_main_context_unref(t->ctx);
    aiol_loop_free(t->loop);
}

/* Reads its pipe dry; the last expected read quits the glib loop. */
static void on_read(void *opaque)
{
    reader *r = opaque;
    char buf[64];

    while (read(r->t->pipes[r->i][0], buf, sizeof(buf)) > 0) {
    }
    r->t->reads[r->i]++;
    g_main_loop_quit(r->t->ml);
}

static void add_reader(gt *t, int i)
{
    t->rd[i] = (reader){ t, i };
    assert_int_equal(aiol_fd_set(t->loop, t->pipes[i][0], on_read, NULL,
                                 NULL, &t->rd[i]), 0);
}

/* Makes pipe @i readable and runs glib until its handler ran. */
static void expect_read(gt *t, int i)
{
    int before = t->reads[i];

    assert_int_equal(write(t->pipes[i][1], "x", 1), 1);
    while (t->reads[i] == before) {
        run(t);
    }
    assert_int_equal(t->reads[i], before + 1);
}

static void test_glib_fd_handlers(void **state)
{
    uint64_t waits;
    gt t;

    (void)state;
    gt_init(&t);
    /* few handlers: glib polls their fds directly, so dispatching asks
     * the fd monitor nothing */
    add_reader(&t, 0);
    add_reader(&t, 1);
    expect_read(&t, 1);
    waits = tu_stats(t.loop).monitor_waits;
    expect_read(&t, 0);
    expect_read(&t, 1);
    assert_int_equal(tu_stats(t.loop).monitor_waits, waits);
    /* more than AIOL_GLIB_DIRECT_MAX: glib polls the loop fd, and each
     * dispatch asks the monitor which handler is ready */
    for (int i = 2; i < NFDS; i++) {
        add_reader(&t, i);
    }
    waits = tu_stats(t.loop).monitor_waits;
    for (int i = NFDS - 1; i >= 0; i -= 3) {
        expect_read(&t, i);
    }
    assert_true(tu_stats(t.loop).monitor_waits > waits);
    /* and back to few */
    for (int i = 2; i < NFDS; i++) {
        assert_int_equal(aiol_fd_remove(t.loop, t.pipes[i][0]), 0);
    }
    expect_read(&t, 0);
    expect_read(&t, 1);
    for (int i = 0; i < NFDS; i++) {
        assert_true(t.reads[i] <= 3);
    }
    gt_fini(&t);
}

static void on_bh(void *opaque)
{
    gt *t = opaque;

    t->bh_runs++;
    g_main_loop_quit(t->ml);
}

static void *schedule_from_thread(void *opaque)
{
    gt *t = opaque;

    usleep(20000); /* (glib is asleep by now, most likely) */
    aiol_bh_schedule(t->bh);
    return NULL;
}

static void test_glib_bottom_halves(void **state)
{
    pthread_t th;
    gt t;

    (void)state;
    gt_init(&t);
    assert_int_equal(aiol_bh_new(t.loop, on_bh, &t, &t.bh), 0);
    aiol_bh_schedule(t.bh); /* from the loop's thread */
    run(&t);
    assert_int_equal(t.bh_runs, 1);
    for (int k = 0; k < 3; k++) { /* from another thread, glib asleep */
        assert_int_equal(pthread_create(&th, NULL, schedule_from_thread, &t),
                         0);
        run(&t);
        assert_int_equal(pthread_join(th, NULL), 0);
        assert_int_equal(t.bh_runs, 2 + k);
    }
    /* with many handlers, through the loop fd */
    for (int i = 0; i < NFDS; i++) {
        add_reader(&t, i);
    }
    assert_int_equal(pthread_create(&th, NULL, schedule_from_thread, &t), 0);
    run(&t);
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_int_equal(t.bh_runs, 5);
    gt_fini(&t);
}

static void on_timer(void *opaque)
{
    gt *t = opaque;

    t->timer_runs++;
    g_main_loop_quit(t->ml);
}

static void test_glib_timers(void **state)
{
    aiol_clock *c;
    aiol_timer *tm;
    int64_t armed, deadline;
    gt t;

    (void)state;
    gt_init(&t);
    c = aiol_loop_clock(t.loop);
    assert_int_equal(aiol_timer_new(c, on_timer, &t, &tm), 0);
    for (int k = 0; k < 3; k++) {
        armed = aiol_clock_get_ns(c);
        deadline = armed + 30 * 1000000;
        assert_int_equal(aiol_timer_mod(tm, deadline), 0);
        run(&t);
        assert_int_equal(t.timer_runs, k + 1);
        assert_true(aiol_clock_get_ns(c) >= deadline); /* never early */
    }
    aiol_timer_free(tm);
    gt_fini(&t);
}

/* fd callback: polls the loop nested until its bottom half ran */
static void on_read_nested(void *opaque)
{
    gt *t = opaque;
    char buf[8];

    (void)!read(t->pipes[0][0], buf, sizeof(buf));
    aiol_bh_schedule(t->bh);
    while (t->bh_runs == 0) {
        aiol_loop_poll(t->loop, true);
    }
    t->nested_ok++;
    g_main_loop_quit(t->ml);
}

static void on_bh_count(void *opaque)
{
    ((gt *)opaque)->bh_runs++;
}

static void test_glib_nested_poll(void **state)
{
    gt t;

    (void)state;
    gt_init(&t);
    assert_int_equal(aiol_bh_new(t.loop, on_bh_count, &t, &t.bh), 0);
    assert_int_equal(aiol_fd_set(t.loop, t.pipes[0][0], on_read_nested, NULL,
                                 NULL, &t), 0);
    assert_int_equal(write(t.pipes[0][1], "x", 1), 1);
    run(&t);
    assert_int_equal(t.nested_ok, 1);
    assert_int_equal(t.bh_runs, 1);
    gt_fini(&t);
}

/* Two loops in one context, each with its own source. */
static void test_glib_two_loops(void **state)
{
    gt a, b;

    (void)state;
    gt_init(&a);
    gt_init(&b);
    /* b's source moves to a's context */
    g_source_destroy(b.src);
    g_source_unref(b.src);
    b.src = aiol_glib_source_new(b.loop);
    g_source_attach(b.src, a.ctx);
    g_main_loop_unref(b.ml);
    b.ml = g_main_loop_ref(a.ml);
    add_reader(&a, 0);
    add_reader(&b, 0);
    for (int k = 0; k < 3; k++) {
        expect_read(&a, 0);
        expect_read(&b, 0);
    }
    assert_int_equal(a.reads[0], 3);
    assert_int_equal(b.reads[0], 3);
    gt_fini(&b);
    gt_fini(&a);
}

/* Sources made and dropped in every order; ASan finds what leaks. */
static void test_glib_lifetimes(void **state)
{
    aiol_loop *loop;
    GMainContext *ctx;
    GSource *src;

    (void)state;
    assert_int_equal(aiol_loop_new(&loop, NULL), 0);
    /* never attached */
    src = aiol_glib_source_new(loop);
    g_source_unref(src);
    /* attached, iterated, destroyed, then unref'd */
    ctx = g_main_context_new();
    src = aiol_glib_source_new(loop);
    g_source_attach(src, ctx);
    g_main_context_iteration(ctx, FALSE);
    g_source_destroy(src);
    g_source_unref(src);
    /* unref'd while attached: the context's unref destroys it */
    src = aiol_glib_source_new(loop);
    g_source_attach(src, ctx);
    g_source_unref(src);
    g_main_context_iteration(ctx, FALSE);
    g_main_context_unref(ctx);
    /* prepared but never checked: destroyed between the two */
    ctx = g_main_context_new();
    src = aiol_glib_source_new(loop);
    g_source_attach(src, ctx);
    {
        gint prio, timeout;
        GPollFD fds[16];

        g_main_context_acquire(ctx);
        g_main_context_prepare(ctx, &prio);
        (void)g_main_context_query(ctx, prio, &timeout, fds, 16);
        g_source_destroy(src);
        g_main_context_release(ctx);
    }
    g_source_unref(src);
    g_main_context_unref(ctx);
    /* the loop still works on its own */
    assert_false(aiol_loop_poll(loop, false));
    aiol_loop_free(loop);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_glib_fd_handlers),
        cmocka_unit_test(test_glib_bottom_halves),
        cmocka_unit_test(test_glib_timers),
        cmocka_unit_test(test_glib_nested_poll),
        cmocka_unit_test(test_glib_two_loops),
        cmocka_unit_test(test_glib_lifetimes),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
