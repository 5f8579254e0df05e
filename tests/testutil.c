/* SPDX-License-Identifier: MIT */
/* testutil.c - see testutil.h. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "testutil.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#define TU_DIE(...)                                                          \
    do {                                                                     \
        fprintf(stderr, "testutil: " __VA_ARGS__);                           \
        fputc('\n', stderr);                                                 \
        abort();                                                             \
    } while (0)

const char *tu_fdmon_requested(void)
{
    const char *b = getenv("AIOLOOP_FDMON");

    return (b != NULL && b[0] != '\0') ? b : NULL;
}

bool tu_confined_requested(void)
{
    const char *c = getenv("AIOLOOP_TEST_CONFINED");

    return c != NULL && strcmp(c, "1") == 0;
}

static aiol_loop *loop_make(unsigned flags)
{
    const char *want = tu_fdmon_requested();
    aiol_loop *l = NULL;
    int rc = aiol_loop_new_flags(&l, want, flags);

    if (rc == -ENOSYS || rc == -EPERM || rc == -EOPNOTSUPP ||
        (rc == -EINVAL && want != NULL)) {
        printf("SKIP: fd monitor %s unavailable: %s\n",
               want ? want : "(default)", strerror(-rc));
        fflush(stdout);
        exit(TU_EXIT_SKIP);
    }
    if (rc != 0 || l == NULL) {
        TU_DIE("aiol_loop_new(%s) failed: %d (%s)",
               want ? want : "NULL", rc, rc < 0 ? strerror(-rc) : "?");
    }
    if (aiol_loop_fdmon_get(l) == NULL) {
        TU_DIE("aiol_loop_fdmon_get() returned NULL");
    }
    if (want != NULL && strcmp(aiol_loop_fdmon_get(l), want) != 0) {
        TU_DIE("asked for fd monitor %s, loop runs on %s", want,
               aiol_loop_fdmon_get(l));
    }
    if (aiol_loop_is_confined(l) != ((flags & AIOL_LOOP_CONFINED) != 0)) {
        TU_DIE("aiol_loop_is_confined() does not tell the flag it was made "
               "with");
    }
    return l;
}

aiol_loop *tu_loop_new(void)
{
    return loop_make(tu_confined_requested() ? AIOL_LOOP_CONFINED : 0);
}

aiol_loop *tu_loop_new_shared(void)
{
    return loop_make(0);
}

aiol_loop *tu_loop_new_flags(unsigned flags)
{
    return loop_make(flags | (tu_confined_requested() ? AIOL_LOOP_CONFINED : 0));
}

int tu_eventfd(void)
{
    int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);

    if (fd < 0) {
        TU_DIE("eventfd: %s", strerror(errno));
    }
    return fd;
}

void tu_eventfd_signal(int fd)
{
    if (eventfd_write(fd, 1) != 0) {
        TU_DIE("eventfd_write(%d): %s", fd, strerror(errno));
    }
}

void tu_eventfd_drain(int fd)
{
    eventfd_t v;

    if (eventfd_read(fd, &v) != 0 && errno != EAGAIN) {
        TU_DIE("eventfd_read(%d): %s", fd, strerror(errno));
    }
}

void tu_pipe(int fds[2])
{
    if (pipe2(fds, O_NONBLOCK | O_CLOEXEC) != 0) {
        TU_DIE("pipe2: %s", strerror(errno));
    }
}

void tu_pipe_signal(int wfd)
{
    ssize_t n;

    do {
        n = write(wfd, "x", 1);
    } while (n < 0 && errno == EINTR);
    if (n != 1) {
        TU_DIE("write(%d): %s", wfd, n < 0 ? strerror(errno) : "short");
    }
}

void tu_pipe_drain(int rfd)
{
    char buf[512];

    for (;;) {
        ssize_t n = read(rfd, buf, sizeof(buf));

        if (n > 0) {
            continue;
        }
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0 && errno != EAGAIN) {
            TU_DIE("read(%d): %s", rfd, strerror(errno));
        }
        return;
    }
}

int tu_run_child(void (*fn)(void *arg), void *arg, char *err, size_t errlen)
{
    size_t len = 0;
    int p[2], status = 0;
    ssize_t n;
    pid_t pid;

    if (pipe2(p, O_CLOEXEC) != 0) {
        TU_DIE("pipe2: %s", strerror(errno));
    }
    fflush(stdout);
    fflush(stderr);
    pid = fork();
    if (pid < 0) {
        TU_DIE("fork: %s", strerror(errno));
    }
    if (pid == 0) {
        struct rlimit nocore = { 0, 0 };

        setrlimit(RLIMIT_CORE, &nocore);
        signal(SIGABRT, SIG_DFL);
        dup2(p[1], STDERR_FILENO);
        fn(arg);
        _exit(0);
    }
    close(p[1]);
    while (len + 1 < errlen &&
           (n = read(p[0], err + len, errlen - 1 - len)) > 0) {
        len += (size_t)n;
    }
    err[len] = '\0';
    close(p[0]);
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            TU_DIE("waitpid: %s", strerror(errno));
        }
    }
    return status;
}

bool tu_aborted_with(int status, const char *err, const char *needle)
{
    return WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT &&
           strstr(err, needle) != NULL;
}
