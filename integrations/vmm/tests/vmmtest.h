/*
 * vmmtest.h - helpers shared by the VMM library's cmocka suites.
 */
#ifndef AIOLOOP_VMMTEST_H
#define AIOLOOP_VMMTEST_H

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "aioloop/aioloop.h"
#include "aioloop/vmm.h"

/* Dies with a message: infrastructure, not what a test checks. */
#define VT_DIE(...)                                                          \
    do {                                                                     \
        fprintf(stderr, "vmmtest: " __VA_ARGS__);                            \
        fputc('\n', stderr);                                                 \
        abort();                                                             \
    } while (0)

static inline aiol_loop *vt_loop(void)
{
    aiol_loop *l = NULL;
    int r = aiol_loop_new(&l, NULL);

    if (r != 0) {
        VT_DIE("aiol_loop_new: %s", strerror(-r));
    }
    return l;
}

static inline int vt_eventfd(void)
{
    int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);

    if (fd < 0) {
        VT_DIE("eventfd: %s", strerror(errno));
    }
    return fd;
}

/* Puts a fresh eventfd at number @fd (after a test closed it). */
static inline void vt_eventfd_at(int fd)
{
    int e = vt_eventfd();

    if (e == fd) {
        return; /* the lowest free number was that one */
    }
    if (dup3(e, fd, O_CLOEXEC) != fd) {
        VT_DIE("dup3: %s", strerror(errno));
    }
    close(e);
}

/* A write to an eventfd, as a device raising its interrupt. */
static inline void vt_signal(int fd)
{
    uint64_t one = 1;

    if (write(fd, &one, sizeof(one)) != sizeof(one)) {
        VT_DIE("write eventfd: %s", strerror(errno));
    }
}

/* x86 MSI: destination APIC @dest, vector @vec. */
static inline aiol_msi_msg vt_msg(uint32_t dest, uint32_t vec)
{
    aiol_msi_msg m = { 0xfee00000u | (dest << 12), 0, vec };

    return m;
}

static inline aiol_ioev_match vt_mmio(uint64_t addr, uint64_t data)
{
    aiol_ioev_match m = { .addr = addr, .len = 2, .pio = false,
                          .datamatch = true, .data = data };

    return m;
}

/* Polls until *@flag is at least @want or about 2 s passed. */
static inline void vt_poll_until(aiol_loop *l, const volatile int *flag,
                                 int want)
{
    for (int i = 0; i < 400 && *flag < want; i++) {
        aiol_loop_poll_deadline(l, aiol_clock_now_ns() + 5000000);
    }
}

#endif /* AIOLOOP_VMMTEST_H */
