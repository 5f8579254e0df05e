/* SPDX-License-Identifier: MIT */
/*
 * print-version.c - prints every version libaioloop's C side states, one
 * "WHAT VERSION" line each, for check-version.py to compare with
 * pkg-config: the macros of aioloop/version.h (the string, the parts, the
 * number) and what the library says, aiol_version_string() and
 * aiol_version().  Fails (exit 1) when AIOL_CHECK_VERSION() answers
 * wrong; a wrong answer in #if does not compile.
 */
#include <stdbool.h>
#include <stdio.h>

#include "aioloop/aioloop.h"

#if !AIOL_CHECK_VERSION(AIOL_VERSION_MAJOR, AIOL_VERSION_MINOR, AIOL_VERSION_PATCH)
#error "AIOL_CHECK_VERSION() is false for the headers' own version"
#endif
#if AIOL_CHECK_VERSION(AIOL_VERSION_MAJOR, AIOL_VERSION_MINOR, AIOL_VERSION_PATCH + 1)
#error "AIOL_CHECK_VERSION() is true for a later version"
#endif

/* Prints @hex, an AIOL_VERSION_HEX-style number, as "WHAT M.m.p". */
static void print_hex(const char *what, unsigned hex)
{
    printf("%s %u.%u.%u\n", what, hex >> 16, (hex >> 8) & 0xff, hex & 0xff);
}

/* Whether AIOL_CHECK_VERSION() says the headers are at least @hex's
 * version, @hex taken apart into its (major, minor, patch). */
static bool check_hex(unsigned hex)
{
    return AIOL_CHECK_VERSION(hex >> 16, (hex >> 8) & 0xff, hex & 0xff);
}

int main(void)
{
    const unsigned maj = AIOL_VERSION_MAJOR, min = AIOL_VERSION_MINOR,
                   pat = AIOL_VERSION_PATCH, hex = AIOL_VERSION_HEX;
    int rc = 0;

    printf("AIOL_VERSION_STRING %s\n", AIOL_VERSION_STRING);
    printf("AIOL_VERSION_MAJOR.MINOR.PATCH %u.%u.%u\n", maj, min, pat);
    print_hex("AIOL_VERSION_HEX", hex);
    printf("aiol_version_string() %s\n", aiol_version_string());
    print_hex("aiol_version()", aiol_version());
    /* true for the headers' version and every earlier one (the one just
     * before, 0.0.0), false for the one just after and the next major */
    if (!check_hex(hex) || !check_hex(0) || (hex > 0 && !check_hex(hex - 1)) ||
        check_hex(hex + 1) || AIOL_CHECK_VERSION(maj + 1, 0, 0)) {
        fprintf(stderr, "AIOL_CHECK_VERSION() answers wrong around %u.%u.%u\n",
                maj, min, pat);
        rc = 1;
    }
    return rc;
}
