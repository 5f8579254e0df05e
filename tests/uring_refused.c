/* SPDX-License-Identifier: MIT */
/*
 * uring_refused.c - uring-refused ERRNO PROGRAM [ARGS...]: runs PROGRAM
 * with io_uring_setup failing with ERRNO (ENOSYS, EPERM or ENOMEM: what a
 * kernel without io_uring, a container's seccomp policy or
 * kernel.io_uring_disabled, and a small locked-memory limit give), so a
 * test can check what a program does on a machine without io_uring.
 * Exits 125 when it cannot install the filter, 127 when PROGRAM does not
 * run.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "refuse.h"

int main(int argc, char **argv)
{
    static const struct {
        const char *name;
        int err;
    } errnos[] = { { "ENOSYS", ENOSYS }, { "EPERM", EPERM },
                   { "ENOMEM", ENOMEM } };
    tu_refusals r = { 0, 0 };
    int rc;

    for (size_t i = 0; argc >= 3 && i < sizeof(errnos) / sizeof(errnos[0]);
         i++) {
        if (strcmp(argv[1], errnos[i].name) == 0) {
            r.uring_errno = errnos[i].err;
        }
    }
    if (r.uring_errno == 0) {
        fprintf(stderr, "usage: uring-refused ENOSYS|EPERM|ENOMEM "
                        "PROGRAM [ARGS...]\n");
        return 2;
    }
    rc = tu_refuse(&r);
    if (rc < 0) {
        fprintf(stderr, "uring-refused: no seccomp filter here: %s\n",
                strerror(-rc));
        return 125;
    }
    execvp(argv[2], argv + 2);
    fprintf(stderr, "uring-refused: %s: %s\n", argv[2], strerror(errno));
    return 127;
}
