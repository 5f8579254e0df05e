/* SPDX-License-Identifier: MIT */
/* pkg-config: aioloop-ev
 * An installed aioloop-ev: a bottom half run by ev_run(). */
#include <stdio.h>

#include <ev.h>

#include <aioloop/aioloop.h>
#include <aioloop/ev.h>

static void on_bh(void *opaque)
{
    (void)opaque;
    ev_break(EV_DEFAULT, EVBREAK_ALL);
}

int main(void)
{
    aiol_loop *loop;
    aiol_bh *bh;
    aiol_ev *e;

    if (aiol_loop_new(&loop, NULL) < 0 ||
        aiol_bh_new(loop, on_bh, NULL, &bh) < 0 ||
        aiol_ev_attach(loop, EV_DEFAULT, &e) < 0) {
        return 1;
    }
    aiol_bh_schedule(bh);
    ev_run(EV_DEFAULT, 0);
    aiol_ev_detach(e);
    aiol_bh_free(bh);
    aiol_loop_free(loop);
    printf("aioloop-ev: ok\n");
    return 0;
}
