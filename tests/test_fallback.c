/* SPDX-License-Identifier: MIT */
/*
 * test_fallback.c - fd monitor selection when a monitor cannot start.
 *
 * Each test forks a child that installs a seccomp filter making chosen
 * syscalls fail with a chosen errno (io_uring_setup, epoll_create1), then
 * checks, in the child, what aiol_loop_new() does:
 *
 *   - asking for "io_uring" by name is strict: the call fails with exactly
 *     the errno io_uring_setup gave;
 *   - NULL with AIOLOOP_FDMON=io_uring falls back to the default chain
 *     (epoll, io_uring, poll), and the loop it returns works;
 *   - with epoll_create1 failing the default chain lands on io_uring, and
 *     with both failing, on poll.
 *
 * The errnos are the ones a real machine gives: ENOSYS (kernel without
 * io_uring), EPERM (seccomp policies of container runtimes, and
 * /proc/sys/kernel/io_uring_disabled = 2, which makes io_uring_setup fail
 * with EPERM for everybody; = 1 does the same for processes that are
 * neither CAP_SYS_ADMIN nor in kernel.io_uring_group) and ENOMEM
 * (RLIMIT_MEMLOCK too small on kernels before 5.12).  The sysctl is only
 * read and printed here: writing it would change the whole machine.
 *
 * A child reports failures on stderr and exits 1; the parent asserts it
 * exited 0.  The parent itself must be able to create an io_uring loop,
 * otherwise nothing here proves the filter made the difference: the
 * program then exits 77 (SKIP).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "aioloop/aioloop.h"
#include "refuse.h"
#include "testutil.h"

/* Child exit status meaning "seccomp is not available here". */
#define CHILD_NO_SECCOMP 77

/* ------------------------------------------------------- in the child */

static int child_failures;

#define CHECK(cond, ...)                                                     \
    do {                                                                     \
        if (!(cond)) {                                                       \
            fprintf(stderr, "child %s:%d: check failed: %s: ", __FILE__,     \
                    __LINE__, #cond);                                        \
            fprintf(stderr, __VA_ARGS__);                                    \
            fputc('\n', stderr);                                             \
            child_failures++;                                                \
        }                                                                    \
    } while (0)

static void count_read(void *opaque)
{
    ++*(int *)opaque;
}

/* Checks that @p l dispatches an eventfd handler. */
static void check_loop_works(aiol_loop *l)
{
    int fd = tu_eventfd(), calls = 0;

    CHECK(aiol_fd_set(l, fd, count_read, NULL, NULL, &calls) == 0,
          "cannot set a handler on %s", aiol_loop_fdmon_get(l));
    tu_eventfd_signal(fd);
    /* returns at once when the handler runs; the deadline only bounds a bug */
    for (int i = 0; i < 3 && calls == 0; i++) {
        (void)aiol_loop_poll_deadline(l, aiol_mono_time_get() + 2000000000);
    }
    CHECK(calls >= 1, "eventfd handler did not run on %s",
          aiol_loop_fdmon_get(l));
    CHECK(aiol_fd_remove(l, fd) == 0, "remove failed");
    close(fd);
}

/* aiol_loop_new(name) must give a working loop on fd monitor @p want */
static void check_new_lands_on(const char *name, const char *want)
{
    aiol_loop *l = NULL;
    int rc = aiol_loop_new(&l, name);

    CHECK(rc == 0, "aiol_loop_new(%s) = %d (%s), env AIOLOOP_FDMON=%s",
          name ? name : "NULL", rc, strerror(rc < 0 ? -rc : 0),
          getenv("AIOLOOP_FDMON") ? getenv("AIOLOOP_FDMON") : "(unset)");
    if (rc != 0 || l == NULL) {
        return;
    }
    CHECK(strcmp(aiol_loop_fdmon_get(l), want) == 0,
          "aiol_loop_new(%s) with AIOLOOP_FDMON=%s runs on %s, want %s",
          name ? name : "NULL",
          getenv("AIOLOOP_FDMON") ? getenv("AIOLOOP_FDMON") : "(unset)",
          aiol_loop_fdmon_get(l), want);
    check_loop_works(l);
    aiol_loop_free(l);
}

/* aiol_loop_new(name) must fail with exactly @p err and leave *out alone */
static void check_new_fails(const char *name, int err)
{
    aiol_loop *l = NULL;
    int rc = aiol_loop_new(&l, name);

    CHECK(rc == -err, "aiol_loop_new(%s) = %d (%s), want %d (%s)", name, rc,
          strerror(rc < 0 ? -rc : 0), -err, strerror(err));
    CHECK(l == NULL, "out was written on failure");
    if (rc == 0) {
        aiol_loop_free(l);
    }
}

static void child_main(const tu_refusals *b)
{
    int rc = tu_refuse(b);

    if (rc < 0) {
        fprintf(stderr, "child: cannot install a seccomp filter: %s\n",
                strerror(-rc));
        exit(CHILD_NO_SECCOMP);
    }
    unsetenv("AIOLOOP_FDMON");
    unsetenv("AIOLOOP_BACKEND"); /* its old name */
    if (b->uring_errno != 0) {
        /* (a) the named fd monitor is strict */
        check_new_fails("io_uring", b->uring_errno);
    }
    if (b->epoll_errno != 0) {
        check_new_fails("epoll", b->epoll_errno);
    }

    if (b->uring_errno != 0 && b->epoll_errno == 0) {
        /* (b) $AIOLOOP_FDMON that does not start: the default chain */
        setenv("AIOLOOP_FDMON", "io_uring", 1);
        check_new_lands_on(NULL, "epoll");
        unsetenv("AIOLOOP_FDMON");
        check_new_lands_on(NULL, "epoll");
        check_new_lands_on("poll", "poll");
    } else if (b->uring_errno == 0 && b->epoll_errno != 0) {
        /* default chain: epoll, then io_uring */
        check_new_lands_on(NULL, "io_uring");
        setenv("AIOLOOP_FDMON", "epoll", 1);
        check_new_lands_on(NULL, "io_uring");
        unsetenv("AIOLOOP_FDMON");
        check_new_lands_on("io_uring", "io_uring");
    } else {
        /* both gone: poll, whatever the environment asks for */
        check_new_lands_on(NULL, "poll");
        setenv("AIOLOOP_FDMON", "io_uring", 1);
        check_new_lands_on(NULL, "poll");
        setenv("AIOLOOP_FDMON", "epoll", 1);
        check_new_lands_on(NULL, "poll");
        unsetenv("AIOLOOP_FDMON");
    }
    fflush(stderr);
    /* exit(), not _exit(): a leak checker then looks at the child too */
    exit(child_failures == 0 ? 0 : 1);
}

/* ------------------------------------------------------- in the parent */

static void child_entry(void *arg)
{
    child_main(arg);
}

static void run_child(int uring_errno, int epoll_errno)
{
    tu_refusals b = { uring_errno, epoll_errno };
    char err[4096];
    int status = tu_run_child(child_entry, &b, err, sizeof(err));

    if (WIFEXITED(status) && WEXITSTATUS(status) == CHILD_NO_SECCOMP) {
        skip();
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fail_msg("child (io_uring_setup -> %s, epoll_create1 -> %s) %s %d: %s",
                 uring_errno ? strerror(uring_errno) : "allowed",
                 epoll_errno ? strerror(epoll_errno) : "allowed",
                 WIFEXITED(status) ? "exited" : "killed by signal",
                 WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status),
                 err);
    }
}

static void test_uring_enosys(void **state)
{
    (void)state;
    run_child(ENOSYS, 0);
}

/* What io_uring_disabled=2 (or 1 without privilege) gives. */
static void test_uring_eperm(void **state)
{
    (void)state;
    run_child(EPERM, 0);
}

static void test_uring_enomem(void **state)
{
    (void)state;
    run_child(ENOMEM, 0);
}

static void test_epoll_unavailable(void **state)
{
    (void)state;
    run_child(0, EMFILE);
}

static void test_epoll_and_uring_unavailable(void **state)
{
    (void)state;
    run_child(EPERM, EMFILE);
}

/* Prints kernel.io_uring_disabled if the kernel has it.  Read only. */
static void print_io_uring_disabled(void)
{
    FILE *f = fopen("/proc/sys/kernel/io_uring_disabled", "r");
    int v;

    if (f == NULL) {
        printf("kernel.io_uring_disabled: not present\n");
        return;
    }
    if (fscanf(f, "%d", &v) == 1) {
        printf("kernel.io_uring_disabled = %d\n", v);
    }
    fclose(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_uring_enosys),
        cmocka_unit_test(test_uring_eperm),
        cmocka_unit_test(test_uring_enomem),
        cmocka_unit_test(test_epoll_unavailable),
        cmocka_unit_test(test_epoll_and_uring_unavailable),
    };
    aiol_loop *l = NULL;
    int rc;

    print_io_uring_disabled();
#ifndef TU_REFUSE_SUPPORTED
    printf("SKIP: no seccomp architecture constant for this machine\n");
    return TU_EXIT_SKIP;
#endif
    /* the baseline: without a filter, io_uring starts */
    rc = aiol_loop_new(&l, "io_uring");
    if (rc != 0) {
        printf("SKIP: io_uring loop unavailable here: %s\n", strerror(-rc));
        return TU_EXIT_SKIP;
    }
    aiol_loop_free(l);
    fflush(stdout);
    return cmocka_run_group_tests_name("fallback", tests, NULL, NULL);
}
