/* SPDX-License-Identifier: MIT */
/*
 * test_glib.c - aioloop-glib (aioloop/glib.h): the host scenarios of
 * embedhost.c with the loop driven only by g_main_loop_run(), once per
 * fd monitor, and glib sources created, attached, destroyed and unref'd in
 * every order (the ASan build checks that nothing leaks).  A glib timeout
 * ends any g_main_loop_run() that would otherwise hang, and fails.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "aioloop/aioloop.h"
#include "aioloop/glib.h"
#include "embedhost.h"

typedef struct glib_host {
    GMainContext *ctx;
    GMainLoop *ml;
    GSource *src[2];
    bool timed_out;
} glib_host;

static void g_attach(eh_host *h, aiol_loop *loop, int slot)
{
    glib_host *g = h->impl;

    g->src[slot] = aiol_glib_source_new(loop);
    assert_ptr_equal(aiol_glib_source_loop_get(g->src[slot]), loop);
    g_source_attach(g->src[slot], g->ctx);
}

static void g_detach(eh_host *h, int slot)
{
    glib_host *g = h->impl;

    g_source_destroy(g->src[slot]);
    g_source_unref(g->src[slot]);
    g->src[slot] = NULL;
}

static gboolean on_timeout(gpointer data)
{
    glib_host *g = data;

    g->timed_out = true;
    g_main_loop_quit(g->ml);
    return G_SOURCE_REMOVE;
}

static void g_run(eh_host *h)
{
    glib_host *g = h->impl;
    GSource *to = g_timeout_source_new(10000);

    g_source_set_callback(to, on_timeout, g, NULL);
    g_source_attach(to, g->ctx);
    g_main_loop_run(g->ml);
    g_source_destroy(to);
    g_source_unref(to);
    assert_false(g->timed_out);
}

static void g_quit(eh_host *h)
{
    g_main_loop_quit(((glib_host *)h->impl)->ml);
}

static const eh_ops glib_ops = { g_attach, g_detach, g_run, g_quit };

static int host_setup(void **state)
{
    static glib_host g;
    static eh_host h = { &glib_ops, &g, AIOL_EMBED_DIRECT_MAX };

    g = (glib_host){ .ctx = g_main_context_new() };
    g.ml = g_main_loop_new(g.ctx, FALSE);
    *state = &h;
    return 0;
}

static int host_teardown(void **state)
{
    glib_host *g = ((eh_host *)*state)->impl;

    g_main_loop_unref(g->ml);
    g_main_context_unref(g->ctx);
    return 0;
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
        EH_TESTS(host_setup, host_teardown),
        cmocka_unit_test(test_glib_lifetimes),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
