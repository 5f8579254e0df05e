/* SPDX-License-Identifier: MIT */
/*
 * iothread.c - a loop polled by a thread of its own until stopped.
 *
 * Stopping sets a flag and notifies the loop; the thread sees the flag
 * after the blocking poll that the notify ended.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "loop-priv.h"

struct aiol_iothread {
    aiol_loop *loop;     /* immutable */
    pthread_t thread;    /* immutable */
    atomic_bool stopping; /* set by aiol_iothread_free() */
};

static void *iothread_run(void *opaque)
{
    aiol_iothread *t = opaque;

    /* Acquire pairs with the release store in aiol_iothread_free(). */
    while (!atomic_load_explicit(&t->stopping, memory_order_acquire)) {
        aiol_loop_poll(t->loop, true);
    }
    /*
     * Finish the fd monitor's own work (io_uring requests) here: a ring
     * bound to this thread cannot be driven from the freeing thread.
     */
    aiol__loop_quiesce(t->loop);
    return NULL;
}

int aiol_iothread_new(const char *fdmon, aiol_iothread **out)
{
    aiol_iothread *t;
    int ret;

    aiol__check(out != NULL, "out is NULL");
    t = calloc(1, sizeof(*t));
    if (t == NULL) {
        return -ENOMEM;
    }
    ret = aiol_loop_new(&t->loop, fdmon);
    if (ret < 0) {
        free(t);
        return ret;
    }
    t->loop->single_thread = true;
    ret = pthread_create(&t->thread, NULL, iothread_run, t);
    if (ret != 0) {
        aiol_loop_free(t->loop);
        free(t);
        return -ret;
    }
    *out = t;
    return 0;
}

aiol_loop *aiol_iothread_loop_get(aiol_iothread *iothread)
{
    aiol__check(iothread != NULL, "iothread is NULL");
    return iothread->loop;
}

void aiol_iothread_free(aiol_iothread *iothread)
{
    if (iothread == NULL) {
        return;
    }
    aiol__check(!pthread_equal(pthread_self(), iothread->thread),
                "an iothread cannot free itself");
    /* Release pairs with the acquire load in iothread_run(). */
    atomic_store_explicit(&iothread->stopping, true, memory_order_release);
    aiol_loop_notify(iothread->loop);
    pthread_join(iothread->thread, NULL);
    aiol_loop_free(iothread->loop);
    free(iothread);
}
