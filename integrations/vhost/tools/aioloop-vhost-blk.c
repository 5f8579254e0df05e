/* SPDX-License-Identifier: MIT */
/*
 * aioloop-vhost-blk - a vhost-user-blk daemon on libaioloop.
 *
 *   aioloop-vhost-blk --socket PATH --file FILE [--num-queues N]
 *                     [--read-only] [--serial ID] [--fdmon NAME]
 *                     [--aio threads|native|io_uring] [--direct]
 *   aioloop-vhost-blk --version | --help
 *
 * Serves FILE (a raw image or a block device; with --direct, opened
 * O_DIRECT) to one vhost-user frontend, e.g. QEMU's
 * `-chardev socket,path=PATH,id=c0 -device vhost-user-blk-pci,chardev=c0`,
 * on one loop thread; its I/O runs on the --aio engine (default: the
 * loop's io_uring ring on io_uring, else native with --direct, else a
 * pool of worker threads), never on the loop's thread.  It exits when the frontend that connected goes
 * away, or on SIGTERM, SIGINT or SIGHUP; either way the image is
 * fdatasync()ed before the exit status is decided, so a write the guest
 * saw acknowledged is on stable storage when the daemon is gone.
 *
 * Exit status: 0 after a clean shutdown; 1 when the flush failed or the
 * connection ended on malformed input; 2 for bad arguments; 3 when
 * setting up failed.  Prints one "aioloop-vhost-blk: listening on PATH"
 * line to stdout once the socket accepts connections, and a summary of
 * the requests served on exit.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "aioloop/aioloop.h"
#include "aioloop/fd.h"
#include "aioloop/loop.h"
#include "aioloop/vhost-blk.h"

typedef struct daemon {
    aiol_loop *loop;
    aiol_vhost_blk *blk;
    int sigfd;
    int signo;         /* the signal that stops us, 0 if none yet */
} daemon_t;

static void usage(FILE *to)
{
    fprintf(to,
            "usage: aioloop-vhost-blk --socket PATH --file FILE "
            "[--num-queues N] [--read-only]\n"
            "                         [--serial ID] [--fdmon "
            "epoll|io_uring|poll]\n"
            "                         [--aio threads|native|io_uring] "
            "[--direct]\n"
            "       aioloop-vhost-blk --version   prints "
            "\"aioloop-vhost-blk VERSION\" (libaioloop's)\n"
            "       aioloop-vhost-blk --help      prints this\n");
}

static void on_signal(void *opaque)
{
    daemon_t *d = opaque;
    struct signalfd_siginfo si;

    while (read(d->sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
        d->signo = (int)si.ssi_signo;
    }
}

/* Parses a queue count in 1..64; 0 when @s is not one. */
static unsigned parse_queues(const char *s)
{
    char *end;
    unsigned long v;

    errno = 0;
    v = strtoul(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < 1 || v > 64) {
        return 0;
    }
    return (unsigned)v;
}

/* Blocks the stop signals and returns a non-blocking signalfd for them. */
static int stop_signals_fd(void)
{
    sigset_t set;

    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    if (sigprocmask(SIG_BLOCK, &set, NULL) < 0) {
        return -errno;
    }
    /* a frontend that vanishes mid-reply must not kill us */
    signal(SIGPIPE, SIG_IGN);
    return signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "socket", required_argument, NULL, 's' },
        { "file", required_argument, NULL, 'f' },
        { "num-queues", required_argument, NULL, 'q' },
        { "read-only", no_argument, NULL, 'r' },
        { "serial", required_argument, NULL, 'i' },
        { "fdmon", required_argument, NULL, 'm' },
        { "aio", required_argument, NULL, 'a' },
        { "direct", no_argument, NULL, 'd' },
        { "help", no_argument, NULL, 'h' },
        { "version", no_argument, NULL, 'V' },
        { NULL, 0, NULL, 0 },
    };
    aiol_vhost_blk_opts o = { .num_queues = 1 };
    const char *sock = NULL, *file = NULL, *fdmon = NULL;
    daemon_t d = { .sigfd = -1 };
    aiol_vhost_blk_stats bs;
    aiol_vhost_stats ds;
    aiol_vhost_dev *dev;
    bool was_connected = false;
    static const char *const engines[] = {
        [AIOL_VHOST_BLK_AIO_THREADS] = "threads",
        [AIOL_VHOST_BLK_AIO_NATIVE] = "native",
        [AIOL_VHOST_BLK_AIO_IO_URING] = "io_uring",
    };
    bool direct = false;
    int c, fd, r, rc = 0;

    while ((c = getopt_long(argc, argv, "s:f:q:ri:m:a:dh", longopts, NULL)) !=
           -1) {
        switch (c) {
        case 's': sock = optarg; break;
        case 'f': file = optarg; break;
        case 'q':
            o.num_queues = parse_queues(optarg);
            if (o.num_queues == 0) {
                fprintf(stderr, "aioloop-vhost-blk: --num-queues wants "
                                "1..64, not '%s'\n", optarg);
                return 2;
            }
            break;
        case 'r': o.read_only = true; break;
        case 'i': o.serial = optarg; break;
        case 'm': fdmon = optarg; break;
        case 'a':
            o.aio = AIOL_VHOST_BLK_AIO_AUTO;
            for (unsigned i = AIOL_VHOST_BLK_AIO_THREADS;
                 i <= AIOL_VHOST_BLK_AIO_IO_URING; i++) {
                if (strcmp(optarg, engines[i]) == 0) {
                    o.aio = (aiol_vhost_blk_aio)i;
                }
            }
            if (o.aio == AIOL_VHOST_BLK_AIO_AUTO) {
                fprintf(stderr, "aioloop-vhost-blk: --aio wants threads, "
                                "native or io_uring, not '%s'\n", optarg);
                return 2;
            }
            break;
        case 'd': direct = true; break;
        case 'h': usage(stdout); return 0;
        case 'V':
            printf("aioloop-vhost-blk %s\n", aiol_version_string());
            return 0;
        default: usage(stderr); return 2;
        }
    }
    if (sock == NULL || file == NULL || optind != argc) {
        usage(stderr);
        return 2;
    }
    if (o.aio == AIOL_VHOST_BLK_AIO_NATIVE && !direct) {
        fprintf(stderr, "aioloop-vhost-blk: --aio native needs --direct "
                        "(as aio=native needs cache.direct=on)\n");
        return 2;
    }

    fd = open(file, (o.read_only ? O_RDONLY : O_RDWR) | O_CLOEXEC |
                        (direct ? O_DIRECT : 0));
    if (fd < 0) {
        fprintf(stderr, "aioloop-vhost-blk: %s: %s\n", file, strerror(errno));
        return 3;
    }
    d.sigfd = stop_signals_fd();
    if (d.sigfd < 0) {
        fprintf(stderr, "aioloop-vhost-blk: signalfd: %s\n",
                strerror(-d.sigfd));
        return 3;
    }
    r = aiol_loop_new(&d.loop, fdmon);
    if (r < 0) {
        fprintf(stderr, "aioloop-vhost-blk: loop (%s): %s\n",
                fdmon != NULL ? fdmon : "default", strerror(-r));
        return 3;
    }
    r = aiol_fd_set(d.loop, d.sigfd, on_signal, NULL, NULL, &d);
    if (r == 0) {
        r = aiol_vhost_blk_new(d.loop, fd, &o, &d.blk);
    }
    if (r == 0) {
        r = aiol_vhost_dev_listen(aiol_vhost_blk_dev_get(d.blk), sock);
    }
    if (r < 0) {
        fprintf(stderr, "aioloop-vhost-blk: %s: %s\n", sock, strerror(-r));
        return 3;
    }
    dev = aiol_vhost_blk_dev_get(d.blk);
    printf("aioloop-vhost-blk: listening on %s (%u queues%s, %s)\n", sock,
           o.num_queues, o.read_only ? ", read-only" : "",
           aiol_loop_fdmon_get(d.loop));
    fflush(stdout);

    /* Serve until a signal, or until the frontend that came goes. */
    while (d.signo == 0) {
        aiol_loop_poll(d.loop, true);
        if (aiol_vhost_dev_is_connected(dev)) {
            was_connected = true;
        } else if (was_connected) {
            break;
        }
    }

    aiol_vhost_dev_stats_get(dev, &ds);
    aiol_vhost_blk_stats_get(d.blk, &bs);
    /* Disconnects and drains: nothing is in flight after this. */
    aiol_vhost_blk_free(d.blk);
    if (!o.read_only && fdatasync(fd) < 0) {
        fprintf(stderr, "aioloop-vhost-blk: flushing %s: %s\n", file,
                strerror(errno));
        rc = 1;
    }
    close(fd);
    aiol_fd_remove(d.loop, d.sigfd);
    close(d.sigfd);
    aiol_loop_free(d.loop);

    if (ds.malformed > 0) {
        rc = 1;
    }
    printf("aioloop-vhost-blk: %s; %" PRIu64 " reads, %" PRIu64
           " writes, %" PRIu64 " flushes, %" PRIu64 " discards, %" PRIu64
           " I/O errors, %" PRIu64 " malformed connections\n",
           d.signo != 0 ? strsignal(d.signo) : "frontend disconnected",
           bs.reads, bs.writes, bs.flushes, bs.discards, bs.ioerr,
           ds.malformed);
    return rc;
}
