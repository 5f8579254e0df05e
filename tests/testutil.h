/* SPDX-License-Identifier: MIT */
/*
 * testutil.h - small helpers shared by the cmocka suites.
 *
 * Infrastructure failures (no eventfd, no pipe) abort with a message: they
 * are not what a test checks, and the test must not pass when they happen.
 */
#ifndef AIOLOOP_TESTUTIL_H
#define AIOLOOP_TESTUTIL_H

#include <stdbool.h>
#include <stddef.h>

#include "aioloop/aioloop.h"

/** Exit status meson and automake read as "skipped". */
#define TU_EXIT_SKIP 77

/**
 * Creates a loop on the fd monitor named by $AIOLOOP_FDMON (strictly:
 * that fd monitor or nothing), thread-confined (AIOL_LOOP_CONFINED) when
 * $AIOLOOP_TEST_CONFINED is 1.  Exits 77 when the fd monitor cannot run
 * here; aborts on any other failure or when the loop runs on another fd
 * monitor.  For a test whose scenario is single-threaded.
 */
aiol_loop *tu_loop_new(void);

/**
 * tu_loop_new() for a test that changes the loop from several threads:
 * never confined.
 */
aiol_loop *tu_loop_new_shared(void);

/** tu_loop_new() with more aiol_loop_new_flags() flags. */
aiol_loop *tu_loop_new_flags(unsigned flags);

/** True when the suite runs on thread-confined loops. */
bool tu_confined_requested(void);

/** The fd monitor the suite was asked to test, or NULL for the default. */
const char *tu_fdmon_requested(void);

/** A fresh non-blocking, close-on-exec eventfd (counter 0: not readable). */
int tu_eventfd(void);
/** Makes an eventfd readable (adds 1 to its counter). */
void tu_eventfd_signal(int fd);
/** Resets an eventfd's counter so it is no longer readable. */
void tu_eventfd_drain(int fd);

/** A non-blocking, close-on-exec pipe: fds[0] reads, fds[1] writes. */
void tu_pipe(int fds[2]);
/** Makes the read end of a pipe readable by writing one byte to @p wfd. */
void tu_pipe_signal(int wfd);
/** Reads everything buffered on the read end @p rfd. */
void tu_pipe_drain(int rfd);

/**
 * Runs @p fn(@p arg) in a forked child whose stderr is captured into
 * @p err (NUL-terminated, at most @p errlen bytes).  Returns the child's
 * wait status.  A child that returns from @p fn exits 0.
 */
int tu_run_child(void (*fn)(void *arg), void *arg, char *err, size_t errlen);

/**
 * True when a wait status from tu_run_child() is an abort (SIGABRT) whose
 * stderr contains @p needle: how the library reports misuse.
 */
bool tu_aborted_with(int status, const char *err, const char *needle);

#endif /* AIOLOOP_TESTUTIL_H */
