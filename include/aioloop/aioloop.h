/* SPDX-License-Identifier: MIT */
/**
 * @file
 * aioloop/aioloop.h - umbrella header of libaioloop.
 *
 * libaioloop is an event loop for virtualization and systems services: fd
 * handlers with O(1) add, remove and dispatch, safe nested polling, bottom
 * halves, timers, cross-thread notify, adaptive busy polling, embedding in
 * other main loops, and pluggable fd monitors (epoll, io_uring, poll).
 * Link with `pkg-config aioloop`.
 *
 * Every public name starts with aiol_; every function is aiol_<noun>_<verb>;
 * calls that can fail return 0 or a negative errno.
 */
#ifndef AIOLOOP_AIOLOOP_H
#define AIOLOOP_AIOLOOP_H

/* AIOL_VERSION_MAJOR, _MINOR, _PATCH, _STRING, _HEX, AIOL_CHECK_VERSION():
 * the headers' version, generated from the project version. */
#include "aioloop/version.h"

#include "aioloop/queue.h"
#include "aioloop/loop.h"
#include "aioloop/fd.h"
#include "aioloop/bh.h"
#include "aioloop/timer.h"
#include "aioloop/embed.h"
#include "aioloop/iothread.h"
#include "aioloop/uring.h"

#ifdef __cplusplus
extern "C" {
#endif

/* (exported from the shared library; everything else is hidden) */
#pragma GCC visibility push(default)

/**
 * The version of the library the program runs with, in the form of
 * AIOL_VERSION_HEX: (MAJOR << 16) | (MINOR << 8) | PATCH.  It equals the
 * AIOL_VERSION_HEX of the headers the library was built with, so
 * `aiol_version() >= AIOL_VERSION_HEX` tells a program that the shared
 * library it loaded is at least as new as the headers it was compiled
 * against.
 *
 * @return the library's version, (MAJOR << 16) | (MINOR << 8) | PATCH
 */
unsigned aiol_version(void);

/**
 * The version of the library the program runs with, "MAJOR.MINOR.PATCH":
 * the AIOL_VERSION_STRING the library was built with, a static string
 * (never NULL, never to be freed).
 *
 * @return the library's version as "MAJOR.MINOR.PATCH"
 */
const char *aiol_version_string(void);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif

#endif /* AIOLOOP_AIOLOOP_H */
