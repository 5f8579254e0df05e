/* SPDX-License-Identifier: MIT */
/**
 * @file
 * aioloop/iothread.h - a loop running on a thread of its own.
 *
 * The thread polls its loop (blocking) until stopped.  Other threads hand
 * it work through the cross-thread calls: bottom halves, notify and fd
 * handler changes.
 */
#ifndef AIOLOOP_IOTHREAD_H
#define AIOLOOP_IOTHREAD_H

#include "aioloop/loop.h"

#ifdef __cplusplus
extern "C" {
#endif

/* (exported from the shared library; everything else is hidden) */
#pragma GCC visibility push(default)

/** A thread running a loop.  Opaque. */
typedef struct aiol_iothread aiol_iothread;

/**
 * Creates a loop on @p fdmon (as aiol_loop_new()) and starts a thread
 * polling it.
 * @return 0, an aiol_loop_new() error, or pthread_create's error (negative).
 */
int aiol_iothread_new(const char *fdmon, aiol_iothread **out);

/**
 * The iothread's loop.
 * @return the loop, valid until aiol_iothread_free().
 */
aiol_loop *aiol_iothread_loop_get(aiol_iothread *iothread);

/**
 * Stops the thread after its current iteration, joins it and frees the
 * loop.  Call from any thread but the iothread itself; the caller must
 * have removed its handlers and freed its bottom halves.  NULL is a
 * no-op.
 */
void aiol_iothread_free(aiol_iothread *iothread);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif

#endif /* AIOLOOP_IOTHREAD_H */
