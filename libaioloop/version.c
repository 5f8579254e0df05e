/* SPDX-License-Identifier: MIT */
/* version.c - the library's version (aioloop/aioloop.h), from the
 * generated aioloop/version.h it was built with. */
#include "aioloop/aioloop.h"

unsigned aiol_version(void)
{
    return AIOL_VERSION_HEX;
}

const char *aiol_version_string(void)
{
    return AIOL_VERSION_STRING;
}
