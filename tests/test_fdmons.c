/* SPDX-License-Identifier: MIT */
/*
 * test_fdmons.c - the fd monitors the library lists (aiol_fdmon_name_get())
 * against the build's list of the project's fd monitors (tests/meson.build
 * passes it as arguments, the list every per-monitor suite runs over).
 *
 * The library lists each monitor it was built with once, in its default
 * order (epoll first, poll last), and only monitors the build knows; a
 * known monitor it does not list is one it was built without, which
 * aiol_loop_new() refuses by name with -EINVAL.  The bindings' FDMONS come
 * from the same call.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "aioloop/aioloop.h"

static int failures;

static void check(int ok, const char *what, const char *name)
{
    if (!ok) {
        fprintf(stderr, "test_fdmons: %s: %s\n", what, name);
        failures++;
    }
}

static int known(int argc, char **argv, const char *name)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], name) == 0) {
            return 1;
        }
    }
    return 0;
}

static int listed(const char *name)
{
    int n = 0;

    for (size_t i = 0; aiol_fdmon_name_get(i) != NULL; i++) {
        n += strcmp(aiol_fdmon_name_get(i), name) == 0;
    }
    return n;
}

int main(int argc, char **argv)
{
    size_t n = 0;

    if (argc < 2) {
        fprintf(stderr, "usage: test-fdmons FDMON...\n");
        return 2;
    }
    while (aiol_fdmon_name_get(n) != NULL) {
        const char *name = aiol_fdmon_name_get(n);

        check(known(argc, argv, name), "listed, not in the build's list",
              name);
        check(listed(name) == 1, "listed more than once", name);
        printf("%zu %s\n", n, name);
        n++;
    }
    check(n >= 2, "fewer than two monitors", "");
    check(n >= 1 && strcmp(aiol_fdmon_name_get(0), "epoll") == 0,
          "the default order does not start with", "epoll");
    check(n >= 1 && strcmp(aiol_fdmon_name_get(n - 1), "poll") == 0,
          "the default order does not end with", "poll");
    for (int i = 1; i < argc; i++) {
        aiol_loop *loop = NULL;

        if (listed(argv[i]) == 0) {
            check(aiol_loop_new(&loop, argv[i]) == -EINVAL,
                  "not listed, yet aiol_loop_new() knows it", argv[i]);
            printf("- %s (not built)\n", argv[i]);
        }
        if (loop != NULL) {
            aiol_loop_free(loop);
        }
    }
    return failures != 0;
}
