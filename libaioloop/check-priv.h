/* SPDX-License-Identifier: MIT */
/*
 * check-priv.h - the misuse check of every library of the project: a
 * condition that must hold whatever NDEBUG says.  When it does not, the
 * library's name, the function and the message go to stderr and the
 * process aborts.  libaioloop (util-priv.h), libaioloop-vhost and
 * libaioloop-vmm (their internal.h) each define their check with it, and
 * their out-of-line fail function with aiol__fail_in().
 */
#ifndef AIOLOOP_CHECK_PRIV_H
#define AIOLOOP_CHECK_PRIV_H

#include <stdio.h>
#include <stdlib.h>

/* If @cond is false, calls @fail(__func__, @msg), which does not return. */
#define AIOL__CHECK_IN(fail, cond, msg)                                      \
    do {                                                                     \
        if (__builtin_expect(!(cond), 0)) {                                  \
            fail(__func__, (msg));                                           \
        }                                                                    \
    } while (0)

/* Prints "@lib: @func: @msg" and aborts. */
static inline _Noreturn void aiol__fail_in(const char *lib, const char *func,
                                           const char *msg)
{
    fprintf(stderr, "%s: %s: %s\n", lib, func, msg);
    fflush(stderr);
    abort();
}

#endif /* AIOLOOP_CHECK_PRIV_H */
