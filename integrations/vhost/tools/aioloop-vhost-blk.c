/* SPDX-License-Identifier: MIT */
/*
 * aioloop-vhost-blk - a vhost-user-blk daemon on libaioloop.
 *
 *   aioloop-vhost-blk --socket PATH|--fd N --file FILE [OPTION]...
 *   aioloop-vhost-blk --blockdev driver=file,node-name=N,filename=F,...
 *                     --export type=vhost-user-blk,id=I,node-name=N,... ...
 *
 * Serves raw images or block devices as vhost-user-blk devices, each to
 * one frontend at a time (QEMU's `-chardev socket,path=PATH,id=c0 -device
 * vhost-user-blk-pci,chardev=c0`), on one loop thread or, with --threads
 * or iothreads, each queue on one of several (threads.c); the I/O runs
 * on each node's engine (aio=), never on a loop's thread.  The command
 * line is qemu-storage-daemon's for this export, or a short form for one
 * export (cli.c; --help lists both).  A frontend that goes leaves the
 * export listening for the next one, as qsd does, unless
 * --exit-on-disconnect.  SIGTERM, SIGINT or SIGHUP end it: every device
 * is freed first (nothing in flight) and every writable image
 * fdatasync()ed before the exit status is decided, so a write the guest
 * saw acknowledged is on stable storage once the daemon is gone.
 *
 * Prints "aioloop-vhost-blk: listening on ADDR ..." to stdout for each
 * export once it accepts connections, and a summary of the requests
 * served on exit.  Exit status: cli.h and --help.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#include "aioloop/fd.h"
#include "aioloop/loop.h"
#include "aioloop/vhost-blk.h"
#include "cli.h"

#define PROG "aioloop-vhost-blk"

typedef struct daemon {
    vd_config cfg;
    aiol_loop *loop;
    int sigfd;
    int signo;                 /* the signal that stops us, 0 if none yet */
    bool connected[VD_MAX];    /* export i had a frontend when last seen */
    bool seen[VD_MAX];         /* export i had a frontend once */
} daemon_t;

/* A log line: "aioloop-vhost-blk: LEVEL: ..." on stderr. */
static void say(const char *level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void say(const char *level, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    fprintf(stderr, PROG ": %s: ", level);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static void on_signal(void *opaque)
{
    daemon_t *d = opaque;
    struct signalfd_siginfo si;

    while (read(d->sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
        d->signo = (int)si.ssi_signo;
    }
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

/* Opens every node's image; 0 or -1 (said why). */
static int open_nodes(vd_config *c)
{
    for (unsigned i = 0; i < c->nnodes; i++) {
        vd_node *n = &c->nodes[i];
        bool writable = false;

        for (unsigned k = 0; k < c->nexports; k++) {
            writable |= c->exports[k].node == n && c->exports[k].writable;
        }
        n->fd = open(n->filename, (writable ? O_RDWR : O_RDONLY) |
                                      O_CLOEXEC | (n->direct ? O_DIRECT : 0));
        if (n->fd < 0) {
            say("error", "%s: %s%s", n->filename, strerror(errno),
                n->direct && errno == EINVAL ? " (no O_DIRECT there)" : "");
            return -1;
        }
    }
    return 0;
}

/* How many loop threads serve @e's queues. */
static unsigned threads_of(daemon_t *d, const vd_export *e)
{
    aiol_loop *seen[VD_MAX_THREADS];
    unsigned n = 0;

    for (unsigned q = 0; q < e->num_queues; q++) {
        aiol_loop *loop = vd_queue_loop(&d->cfg, e, q, d->loop);
        unsigned k = 0;

        while (k < n && seen[k] != loop) {
            k++;
        }
        if (k == n && n < VD_MAX_THREADS) {
            seen[n++] = loop;
        }
    }
    return n;
}

/* Starts export @e: its device, listening; 0 or -1 (said why). */
static int start_export(daemon_t *d, vd_export *e)
{
    aiol_vhost_blk_opts o = { .num_queues = e->num_queues,
                              .read_only = !e->writable,
                              .serial = e->serial != NULL ? e->serial : e->id,
                              .aio = e->node->aio,
                              .block_size = e->block_size };
    aiol_vhost_dev *dev;
    int r;

    r = aiol_vhost_blk_new(d->loop, e->node->fd, &o, &e->blk);
    if (r < 0) {
        say("error", "export '%s' (%s): %s", e->id, e->node->filename,
            strerror(-r));
        return -1;
    }
    dev = aiol_vhost_blk_dev_get(e->blk);
    for (unsigned q = 0; q < e->num_queues; q++) {
        aiol_loop *loop = vd_queue_loop(&d->cfg, e, q, d->loop);

        if (loop != d->loop &&
            (r = aiol_vhost_dev_queue_loop_set(dev, q, loop)) < 0) {
            say("error", "export '%s': queue %u on its iothread: %s", e->id,
                q, strerror(-r));
            return -1;
        }
    }
    r = e->path != NULL ? aiol_vhost_dev_listen(dev, e->path)
                        : aiol_vhost_dev_listen_fd(dev, e->fd);
    if (r < 0) {
        if (e->path != NULL) {
            say("error", "export '%s': %s: %s", e->id, e->path, strerror(-r));
        } else {
            say("error", "export '%s': fd %d: %s", e->id, e->fd,
                strerror(-r));
        }
        return -1;
    }
    if (e->path != NULL) {
        printf(PROG ": listening on %s", e->path);
    } else {
        printf(PROG ": listening on fd %d", e->fd);
    }
    printf(" (%u queues%s, %s, %u threads)\n", e->num_queues,
           e->writable ? "" : ", read-only", aiol_loop_fdmon_get(d->loop),
           threads_of(d, e));
    return 0;
}

/* Notes frontends that came and went; true when the daemon should stop
 * for --exit-on-disconnect (every export had one, and all are gone). */
static bool watch_frontends(daemon_t *d)
{
    vd_config *c = &d->cfg;
    bool all_gone = true;

    for (unsigned i = 0; i < c->nexports; i++) {
        bool now = aiol_vhost_dev_is_connected(
            aiol_vhost_blk_dev_get(c->exports[i].blk));

        if (now != d->connected[i] && c->verbose) {
            say("info", "export '%s': frontend %s", c->exports[i].id,
                now ? "connected" : "disconnected");
        }
        d->connected[i] = now;
        d->seen[i] |= now;
        all_gone &= d->seen[i] && !now;
    }
    return c->exit_on_disconnect && all_gone;
}

/* --daemonize: the parent waits for the child's "listening" word. */
static int daemonize_start(int *ready_fd)
{
    int p[2];
    pid_t pid;
    char ok;

    if (pipe2(p, O_CLOEXEC) < 0 || (pid = fork()) < 0) {
        say("error", "--daemonize: %s", strerror(errno));
        return -1;
    }
    if (pid > 0) {
        close(p[1]);
        _exit(read(p[0], &ok, 1) == 1 && ok == 0 ? 0 : 3);
    }
    close(p[0]);
    if (setsid() < 0) {
        say("warning", "--daemonize: setsid: %s", strerror(errno));
    }
    *ready_fd = p[1];
    return 0;
}

static void daemonize_done(int ready_fd)
{
    char ok = 0;
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);

    (void)!write(ready_fd, &ok, 1);
    close(ready_fd);
    if (null >= 0) {
        dup2(null, STDIN_FILENO);
        dup2(null, STDOUT_FILENO);
        close(null);
    }
}

static int write_pidfile(const char *path)
{
    FILE *f = fopen(path, "we");

    if (f == NULL || fprintf(f, "%ld\n", (long)getpid()) < 0 ||
        fclose(f) != 0) {
        say("error", "--pidfile %s: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

/* What the exports did, for the line printed at exit. */
typedef struct totals {
    aiol_vhost_blk_stats io;
    uint64_t malformed;             /* malformed connections */
    uint64_t starts, starts_packed; /* ring starts, of those packed */
} totals;

/* Frees every device (draining it), flushes and closes the images; 1 if
 * a flush failed or a connection was malformed, else 0. */
static int shut_down(daemon_t *d, totals *sum)
{
    vd_config *c = &d->cfg;
    int rc = 0;

    memset(sum, 0, sizeof(*sum));
    for (unsigned i = 0; i < c->nexports; i++) {
        vd_export *e = &c->exports[i];
        aiol_vhost_blk_stats bs;
        aiol_vhost_stats ds;
        aiol_vhost_dev *dev;

        if (e->blk == NULL) {
            continue;
        }
        dev = aiol_vhost_blk_dev_get(e->blk);
        aiol_vhost_dev_stats_get(dev, &ds);
        for (unsigned q = 0; q < e->num_queues; q++) {
            aiol_vhost_vq_stats vs;

            aiol_vhost_vq_stats_get(aiol_vhost_dev_vq_get(dev, q), &vs);
            sum->starts += vs.starts;
            sum->starts_packed += vs.starts_packed;
        }
        aiol_vhost_blk_stats_get(e->blk, &bs);
        aiol_vhost_blk_free(e->blk); /* disconnects, drains */
        e->blk = NULL;
        sum->io.reads += bs.reads;
        sum->io.writes += bs.writes;
        sum->io.flushes += bs.flushes;
        sum->io.discards += bs.discards;
        sum->io.write_zeroes += bs.write_zeroes;
        sum->io.ioerr += bs.ioerr;
        sum->malformed += ds.malformed;
    }
    for (unsigned i = 0; i < c->nnodes; i++) {
        vd_node *n = &c->nodes[i];

        if (n->fd >= 0 && !n->read_only && fdatasync(n->fd) < 0 &&
            errno != EINVAL && errno != EBADF) {
            say("error", "flushing %s: %s", n->filename, strerror(errno));
            rc = 1;
        }
        if (n->fd >= 0) {
            close(n->fd);
            n->fd = -1;
        }
    }
    return sum->malformed > 0 ? 1 : rc;
}

int main(int argc, char **argv)
{
    daemon_t d = { .sigfd = -1 };
    vd_config *c = &d.cfg;
    totals sum;
    int ready_fd = -1, r, rc;
    int setup_fail;

    rc = vd_parse(argc, argv, c);
    if (rc != 0) {
        vd_config_fini(c);
        return rc == VD_DONE ? 0 : rc;
    }
    setup_fail = c->qsd_form ? 1 : 3;
    if (open_nodes(c) < 0) {
        vd_config_fini(c);
        return setup_fail;
    }
    if (c->daemonize && daemonize_start(&ready_fd) < 0) {
        return setup_fail;
    }
    d.sigfd = stop_signals_fd();
    if (d.sigfd < 0) {
        say("error", "signalfd: %s", strerror(-d.sigfd));
        return setup_fail;
    }
    r = aiol_loop_new(&d.loop, c->fdmon);
    if (r < 0) {
        say("error", "loop (%s): %s", c->fdmon != NULL ? c->fdmon : "default",
            strerror(-r));
        return setup_fail;
    }
    /* (QEMU's iothread poll-max-ns; grow and shrink as its defaults) */
    r = aiol_loop_poll_params_set(d.loop, (int64_t)c->poll_max_ns, 0, 0);
    if (r == 0) {
        r = aiol_fd_set(d.loop, d.sigfd, on_signal, NULL, NULL, &d);
    }
    if (r == 0) {
        r = vd_threads_start(c);
    }
    for (unsigned i = 0; r == 0 && i < c->nexports; i++) {
        r = start_export(&d, &c->exports[i]);
    }
    if (r == 0 && c->pidfile != NULL) {
        r = write_pidfile(c->pidfile);
    }
    if (r < 0) {
        (void)shut_down(&d, &sum);
        vd_threads_stop(c);
        return setup_fail;
    }
    fflush(stdout);
    if (ready_fd >= 0) {
        daemonize_done(ready_fd);
    }

    /* Serve until a signal (or, with --exit-on-disconnect, until every
     * export's frontend has come and gone). */
    while (d.signo == 0 && !watch_frontends(&d)) {
        aiol_loop_poll(d.loop, true);
    }

    rc = shut_down(&d, &sum);
    vd_threads_stop(c); /* (every device is freed: no queue runs there) */
    aiol_fd_remove(d.loop, d.sigfd);
    close(d.sigfd);
    aiol_loop_free(d.loop);
    if (c->pidfile != NULL) {
        unlink(c->pidfile);
    }
    printf(PROG ": %s; %" PRIu64 " reads, %" PRIu64 " writes, %" PRIu64
           " flushes, %" PRIu64 " discards, %" PRIu64 " write zeroes, %" PRIu64
           " I/O errors, %" PRIu64 " malformed connections, %" PRIu64
           " ring starts (%" PRIu64 " packed)\n",
           d.signo != 0 ? strsignal(d.signo) : "frontend disconnected",
           sum.io.reads, sum.io.writes, sum.io.flushes, sum.io.discards,
           sum.io.write_zeroes, sum.io.ioerr, sum.malformed, sum.starts,
           sum.starts_packed);
    vd_config_fini(c);
    return rc;
}
