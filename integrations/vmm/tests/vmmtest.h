/* SPDX-License-Identifier: MIT */
/*
 * vmmtest.h - helpers shared by the VMM library's cmocka suites, beside
 * the project's (tests/testutil.h: loops, eventfds, child processes).
 */
#ifndef AIOLOOP_VMMTEST_H
#define AIOLOOP_VMMTEST_H

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "aioloop/aioloop.h"
#include "aioloop/vmm.h"
#include "testutil.h"

/* Puts a fresh eventfd at number @fd (after a test closed it). */
static inline void vt_eventfd_at(int fd)
{
    int e = tu_eventfd();

    if (e == fd) {
        return; /* the lowest free number was that one */
    }
    if (dup3(e, fd, O_CLOEXEC) != fd) {
        /* infrastructure, not what a test checks */
        fprintf(stderr, "vmmtest: dup3: %s\n", strerror(errno));
        abort();
    }
    close(e);
}

/* x86 MSI: destination APIC @dest, vector @vec. */
static inline aiol_vmm_msi_msg vt_msg(uint32_t dest, uint32_t vec)
{
    aiol_vmm_msi_msg m = { 0xfee00000u | (dest << 12), 0, vec };

    return m;
}

static inline aiol_vmm_ioev_match vt_mmio(uint64_t addr, uint64_t data)
{
    aiol_vmm_ioev_match m = { .addr = addr, .len = 2, .pio = false,
                          .datamatch = true, .data = data };

    return m;
}

/* Polls until *@flag is at least @want or about 2 s passed. */
static inline void vt_poll_until(aiol_loop *l, const volatile int *flag,
                                 int want)
{
    for (int i = 0; i < 400 && *flag < want; i++) {
        aiol_loop_poll_deadline(l, aiol_mono_time_get() + 5000000);
    }
}

#endif /* AIOLOOP_VMMTEST_H */
