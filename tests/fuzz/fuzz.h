/* SPDX-License-Identifier: MIT */
/*
 * fuzz.h - what the fuzz harness exports to its drivers (libFuzzer's own
 * main, or replay.c).
 */
#ifndef AIOLOOP_FUZZ_H
#define AIOLOOP_FUZZ_H

#include <stddef.h>
#include <stdint.h>

/* Runs one input (byte 0 picks the fd monitor, the rest is the program). */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The fd monitor byte 0 picks: @b % 3 is 0 poll, 1 epoll, 2 io_uring. */
const char *fz_fdmon_name(int b);

/* 1 if a loop on fd monitor @fdmon (0 poll, 1 epoll, 2 io_uring) starts. */
int fz_fdmon_runnable(int fdmon);

#endif /* AIOLOOP_FUZZ_H */
