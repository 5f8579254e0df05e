/*
 * fuzz.h - what the fuzz harness exports to its drivers (libFuzzer's own
 * main, or replay.c).
 */
#ifndef AIOLOOP_FUZZ_H
#define AIOLOOP_FUZZ_H

#include <stddef.h>
#include <stdint.h>

/* Runs one input (byte 0 picks the backend, the rest is the program). */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The backend byte 0 picks: @b % 3 is 0 poll, 1 epoll, 2 io_uring. */
const char *fz_backend_name(int b);

/* 1 if a loop on backend @backend (0 poll, 1 epoll, 2 io_uring) starts. */
int fz_backend_runnable(int backend);

#endif /* AIOLOOP_FUZZ_H */
