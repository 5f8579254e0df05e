/* SPDX-License-Identifier: MIT */
/* pkg-config: aioloop-glib
 * An installed aioloop-glib: a bottom half run by g_main_loop_run(). */
#include <stdio.h>

#include <aioloop/aioloop.h>
#include <aioloop/glib.h>

static GMainLoop *ml;

static void on_bh(void *opaque) { (void)opaque; g_main_loop_quit(ml); }

int main(void)
{
    aiol_loop *loop;
    aiol_bh *bh;
    GSource *src;

    if (aiol_loop_new(&loop, NULL) < 0 ||
        aiol_bh_new(loop, on_bh, NULL, &bh) < 0) {
        return 1;
    }
    src = aiol_glib_source_new(loop);
    g_source_attach(src, NULL);
    ml = g_main_loop_new(NULL, FALSE);
    aiol_bh_schedule(bh);
    g_main_loop_run(ml);
    g_source_destroy(src);
    g_source_unref(src);
    g_main_loop_unref(ml);
    aiol_bh_free(bh);
    aiol_loop_free(loop);
    printf("aioloop-glib: ok\n");
    return 0;
}
