/* SPDX-License-Identifier: MIT */
/* pkg-config: aioloop
 * An installed libaioloop: a pipe handler, a bottom half and a timer. */
#include <stdio.h>
#include <unistd.h>

#include <aioloop/aioloop.h>

static int reads, bhs, timers;

static void on_read(void *opaque)
{
    char c;

    (void)!read(*(int *)opaque, &c, 1);
    reads++;
}

static void on_bh(void *opaque) { (void)opaque; bhs++; }
static void on_timer(void *opaque) { (void)opaque; timers++; }

int main(void)
{
    aiol_loop *loop;
    aiol_bh *bh;
    aiol_timer *t;
    int p[2];

    if (pipe(p) < 0 || aiol_loop_new(&loop, NULL) < 0 ||
        aiol_fd_set(loop, p[0], on_read, NULL, NULL, &p[0]) < 0 ||
        aiol_bh_new(loop, on_bh, NULL, &bh) < 0 ||
        aiol_timer_new(aiol_loop_clock_get(loop), on_timer, NULL, &t) < 0) {
        return 1;
    }
    aiol_bh_schedule(bh);
    aiol_timer_mod(t, aiol_clock_time_get(aiol_loop_clock_get(loop)) + 1000000);
    (void)!write(p[1], "x", 1);
    while (reads == 0 || bhs == 0 || timers == 0) {
        aiol_loop_poll(loop, true);
    }
    aiol_timer_free(t);
    aiol_bh_free(bh);
    aiol_fd_remove(loop, p[0]);
    printf("aioloop (%s): ok\n", aiol_loop_fdmon_get(loop));
    aiol_loop_free(loop);
    return 0;
}
