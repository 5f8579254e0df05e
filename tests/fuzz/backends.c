/*
 * backends.c - byte 0 of a fuzz input picks the loop backend (fuzz.h);
 * shared by the harnesses and replay.c.
 */
#include "aioloop/loop.h"
#include "fuzz.h"

const char *fz_backend_name(int b)
{
    static const char *const names[] = { "poll", "epoll", "io_uring" };

    return names[(unsigned)b % 3];
}

int fz_backend_runnable(int backend)
{
    aiol_loop *loop;

    if (aiol_loop_new(&loop, fz_backend_name(backend)) < 0) {
        return 0;
    }
    aiol_loop_free(loop);
    return 1;
}
