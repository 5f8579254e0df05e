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

/** @{ */
/** Version of the headers. */
#define AIOL_VERSION_MAJOR 0
#define AIOL_VERSION_MINOR 1
#define AIOL_VERSION_PATCH 0
/** @} */

#include "aioloop/queue.h"
#include "aioloop/loop.h"
#include "aioloop/fd.h"
#include "aioloop/bh.h"
#include "aioloop/timer.h"
#include "aioloop/embed.h"
#include "aioloop/iothread.h"
#include "aioloop/uring.h"

#endif /* AIOLOOP_AIOLOOP_H */
