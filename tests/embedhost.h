/* SPDX-License-Identifier: MIT */
/*
 * embedhost.h - the scenarios a host main loop adapter (aioloop-glib,
 * aioloop-ev) must pass, written once against a small host interface:
 * each adapter's test supplies attach/detach/run/quit for its host and
 * calls the scenarios.
 */
#ifndef AIOLOOP_TESTS_EMBEDHOST_H
#define AIOLOOP_TESTS_EMBEDHOST_H

#include <stdbool.h>

#include "aioloop/aioloop.h"

/* More than either adapter polls directly (both: 8). */
#define EH_NFDS 12

typedef struct eh_host eh_host;

/* A host main loop under test. */
typedef struct eh_ops {
    /* Attaches @loop as the host's loop number @slot (0 or 1). */
    void (*attach)(eh_host *h, aiol_loop *loop, int slot);
    void (*detach)(eh_host *h, int slot);
    /* Runs the host until quit(); fails the test after 10 s. */
    void (*run)(eh_host *h);
    void (*quit)(eh_host *h);
} eh_ops;

struct eh_host {
    const eh_ops *ops;
    void *impl;
    int direct_max;   /* the adapter polls this many fds directly */
};

/* The scenarios, as cmocka tests: *state is the eh_host (the test's
 * setup makes it). */
void eh_fd_handlers(void **state);
void eh_bottom_halves(void **state);
void eh_timers(void **state);
void eh_nested_poll(void **state);
void eh_two_loops(void **state);

/* The scenarios as cmocka test entries, each with the host's setup and
 * teardown (which make and free the eh_host in *state). */
#define EH_TESTS(setup, teardown)                                        \
    cmocka_unit_test_setup_teardown(eh_fd_handlers, setup, teardown),    \
    cmocka_unit_test_setup_teardown(eh_bottom_halves, setup, teardown),  \
    cmocka_unit_test_setup_teardown(eh_timers, setup, teardown),         \
    cmocka_unit_test_setup_teardown(eh_nested_poll, setup, teardown),    \
    cmocka_unit_test_setup_teardown(eh_two_loops, setup, teardown)

#endif
