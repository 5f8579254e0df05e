/* SPDX-License-Identifier: MIT */
/*
 * fdmons.c - byte 0 of a fuzz input picks the loop's fd monitor (fuzz.h);
 * shared by the harnesses and replay.c.
 */
#include "aioloop/loop.h"
#include "fuzz.h"

const char *fz_fdmon_name(int b)
{
    static const char *const names[] = { "poll", "epoll", "io_uring" };

    return names[(unsigned)b % 3];
}

int fz_fdmon_runnable(int fdmon)
{
    aiol_loop *loop;

    if (aiol_loop_new(&loop, fz_fdmon_name(fdmon)) < 0) {
        return 0;
    }
    aiol_loop_free(loop);
    return 1;
}
