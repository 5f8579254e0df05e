/* SPDX-License-Identifier: MIT */
/*
 * replay.c - runs fuzz inputs without the fuzzing engine, so the corpora
 * are regression tests under any compiler (make check runs them with gcc).
 *
 * usage: fuzz-replay PATH...   (files, or directories of files)
 *
 * Each input runs as it is and then once per fd monitor, on a shared and on
 * a thread-confined loop (byte 0 replaced), so every corpus entry
 * exercises poll, epoll and io_uring, with both kinds of loop.  A violation
 * aborts with the model's message; the input's path is printed first.
 * Exits 0 when every input ran, 2 on a usage or I/O error.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

static long g_inputs, g_runs;
static int g_runnable[3];

static int replay_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    unsigned char *buf;
    long size;

    if (f == NULL || fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) < 0 ||
        fseek(f, 0, SEEK_SET) != 0) {
        perror(path);
        return -1;
    }
    buf = malloc((size_t)size + 1);
    if (buf == NULL || fread(buf, 1, (size_t)size, f) != (size_t)size) {
        perror(path);
        return -1;
    }
    fclose(f);
    fprintf(stderr, "replay: %s\n", path);
    LLVMFuzzerTestOneInput(buf, (size_t)size);
    g_runs++;
    for (int b = 0; b < 6 && size > 0; b++) {
        if (g_runnable[b % 3]) {
            buf[0] = (unsigned char)b; /* (3..5: confined) */
            LLVMFuzzerTestOneInput(buf, (size_t)size);
            g_runs++;
        }
    }
    free(buf);
    g_inputs++;
    return 0;
}

static int replay_path(const char *path)
{
    struct stat st;
    struct dirent **names;
    int n, ret = 0;

    if (stat(path, &st) != 0) {
        perror(path);
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        return replay_file(path);
    }
    n = scandir(path, &names, NULL, alphasort);
    if (n < 0) {
        perror(path);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        char *child;
        if (names[i]->d_name[0] != '.' && ret == 0) {
            if (asprintf(&child, "%s/%s", path, names[i]->d_name) < 0) {
                return -1;
            }
            ret = replay_path(child);
            free(child);
        }
        free(names[i]);
    }
    free(names);
    return ret;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s PATH...\n", argv[0]);
        return 2;
    }
    for (int b = 0; b < 3; b++) {
        g_runnable[b] = fz_fdmon_runnable(b);
        if (!g_runnable[b]) {
            printf("replay: fd monitor %d cannot start here; "
                   "its runs skipped\n", b);
        }
    }
    for (int i = 1; i < argc; i++) {
        if (replay_path(argv[i]) != 0) {
            return 2;
        }
    }
    printf("replay: %ld inputs, %ld runs, no violation\n", g_inputs, g_runs);
    return g_inputs > 0 ? 0 : 2;
}
