/* SPDX-License-Identifier: MIT */
/*
 * prng.h - the deterministic pseudo-random numbers (prng_) of the stress
 * suites: xorshift64* from a fixed seed, so every run draws the same
 * numbers and a failure reproduces.
 */
#ifndef AIOLOOP_TESTS_PRNG_H
#define AIOLOOP_TESTS_PRNG_H

#include <stdint.h>

/* The next number of the sequence whose state is *@p s (never 0). */
static inline uint64_t prng_next(uint64_t *s)
{
    uint64_t x = *s;

    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1DULL;
}

#endif /* AIOLOOP_TESTS_PRNG_H */
