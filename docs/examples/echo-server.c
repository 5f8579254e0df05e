/* SPDX-License-Identifier: MIT */
/*
 * echo-server.c - a TCP echo server on libaioloop (an example: docs/guide.md).
 *
 *   echo-server [--port N] [--fdmon epoll|io_uring|poll] [--sndbuf BYTES]
 *               [--ring]
 *
 * Listens on 127.0.0.1:N (0, the default: any free port) and prints
 * "echo-server: listening on 127.0.0.1:PORT".  Every client gets back
 * what it sends.  Backpressure: each client has a 64 KiB buffer; what its
 * socket cannot take yet waits there, with a write handler to flush it;
 * while the buffer is full the server stops reading from that client, so
 * a client that sends without reading is slowed down by TCP instead of
 * growing the server's memory (--sndbuf bounds each client's kernel send
 * buffer too, so the test sees it happen).  SIGTERM or SIGINT (a signalfd on the
 * loop) ends it with a summary: clients, bytes echoed, write stalls
 * (EAGAIN: the write handler took over), backpressure pauses (a full
 * buffer: reading stopped).
 *
 * --ring (io_uring fd monitor): clients' bytes move without readiness, as
 * completions on the loop's ring (aioloop/uring.h).  Each client has one
 * multishot receive into a shared group of buffers and at most one send
 * in flight: what arrives meanwhile is appended to its pending data (a
 * write stall), and once 64 KiB are pending its receive is cancelled
 * (a backpressure pause) and submitted again when the sends have drained
 * it.  Chunks the kernel had received before the cancel still arrive, so
 * a client may hold up to 64 KiB plus the group's size for a moment.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <aioloop/aioloop.h>
#include <aioloop/uring.h>

#define BUF (64 * 1024)

typedef struct client client;

typedef struct server {
    aiol_loop *loop;
    int lfd, sigfd;
    int sndbuf;          /* SO_SNDBUF of each client, 0: the system's */
    bool stop;
    aiol_uring_bufs *bufs; /* --ring: the clients' receive buffers */
    AIOL_LIST_HEAD(, client) clients_open; /* (aioloop/queue.h) */
    unsigned long long clients, open, bytes, pauses, stalls;
} server;

struct client {
    server *s;
    AIOL_LIST_ENTRY(client) link; /* on s->clients_open */
    int fd;
    size_t off, len;     /* buf[off, len) waits to be written */
    bool eof;            /* the client shut its side: close once flushed */
    /* --ring: pending bytes, the bytes a send owns, the receive */
    unsigned char *pend, *out;
    size_t npend, cap, nout, out_cap;
    aiol_uring_recv *recv; /* NULL: paused, or over */
    bool sending, paused;
    char buf[BUF];
};

static void on_readable(void *opaque);
static void on_writable(void *opaque);

static void client_close(client *c)
{
    if (c->s->bufs == NULL) {
        aiol_fd_remove(c->s->loop, c->fd);
    }
    close(c->fd);
    free(c->pend);
    free(c->out);
    AIOL_LIST_REMOVE(c, link);
    c->s->open--;
    free(c);
}

/*
 * Watches what the client's state needs: reads while there is room in
 * the buffer and the client has not shut its side; writes while data
 * waits.  A failed aiol_fd_set() (ENOMEM) leaves the old handler: the
 * client is dropped, the server goes on.
 */
static void client_watch(client *c)
{
    bool room = c->len < BUF && !c->eof;
    bool pending = c->off < c->len;

    if (!room && !pending) {
        client_close(c); /* (eof and all flushed) */
        return;
    }
    if (aiol_fd_set(c->s->loop, c->fd, room ? on_readable : NULL,
                    pending ? on_writable : NULL, NULL, c) < 0) {
        client_close(c);
    }
}

/* Writes what it can; false when the client is gone. */
static bool client_flush(client *c)
{
    while (c->off < c->len) {
        ssize_t n = write(c->fd, c->buf + c->off, c->len - c->off);

        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0) {
            if (errno == EAGAIN) {
                c->s->stalls++; /* the write handler takes over */
                return true;
            }
            client_close(c);
            return false;
        }
        c->off += (size_t)n;
        c->s->bytes += (unsigned long long)n;
    }
    c->off = c->len = 0;
    return true;
}

static void on_readable(void *opaque)
{
    client *c = opaque;
    ssize_t n;

    if (c->off > 0 && c->off == c->len) {
        c->off = c->len = 0;
    }
    n = read(c->fd, c->buf + c->len, BUF - c->len);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
        return;
    }
    if (n <= 0) {
        c->eof = true;
        if (n < 0) {
            c->off = c->len = 0; /* (reset: nothing to echo) */
        }
    } else {
        c->len += (size_t)n;
        if (!client_flush(c)) {
            return;
        }
        if (c->len == BUF) {
            c->s->pauses++; /* full: no more reading until it drains */
        }
    }
    client_watch(c);
}

static void on_writable(void *opaque)
{
    client *c = opaque;

    if (client_flush(c)) {
        if (c->off > 0) { /* (room again at the end of the buffer) */
            memmove(c->buf, c->buf + c->off, c->len - c->off);
            c->len -= c->off;
            c->off = 0;
        }
        client_watch(c);
    }
}

/* ---- --ring: receives and sends as completions on the loop's ring */

static void ring_received(void *opaque, int res, const void *data);
static void ring_sent(void *opaque, int res, uint32_t flags);

/* Sends the pending bytes if no send is in flight; closes when done. */
static void ring_pump(client *c)
{
    unsigned char *t;
    size_t t_cap;

    if (c->sending) {
        return;
    }
    if (c->npend > 0) {
        t = c->out; /* (swap: the send owns out until it completes) */
        t_cap = c->out_cap;
        c->out = c->pend;
        c->out_cap = c->cap;
        c->nout = c->npend;
        c->pend = t;
        c->cap = t_cap;
        c->npend = 0;
        c->sending = true;
        if (aiol_uring_send_submit(c->s->loop, c->fd, c->out, c->nout,
                                   ring_sent, c) < 0) {
            c->sending = false;
            c->eof = true; /* (no memory: drop the client) */
        }
        return;
    }
    if (c->paused && !c->eof && c->recv == NULL) {
        c->paused = false; /* drained: read again */
        if (aiol_uring_recv_submit(c->s->loop, c->fd, c->s->bufs,
                                   ring_received, c, &c->recv) < 0) {
            c->eof = true;
        }
    }
    if (c->eof && c->recv == NULL) {
        client_close(c);
    }
}

static void ring_sent(void *opaque, int res, uint32_t flags)
{
    client *c = opaque;

    (void)flags;
    c->sending = false;
    if (res < 0) {
        c->eof = true; /* the client is gone: stop, drop what is pending */
        c->npend = 0;
        if (c->recv != NULL) {
            aiol_uring_recv_cancel(c->recv);
        }
    } else {
        c->s->bytes += (unsigned long long)res;
    }
    ring_pump(c);
}

static void ring_received(void *opaque, int res, const void *data)
{
    client *c = opaque;

    if (res <= 0) {  /* the receive is over */
        c->recv = NULL;
        if (!(res == -ECANCELED && c->paused)) {
            c->eof = true; /* end of stream or an error */
        }
        ring_pump(c);
        return;
    }
    if (c->npend + (size_t)res > c->cap) {
        size_t cap = c->cap * 2 > c->npend + (size_t)res
                         ? c->cap * 2 : c->npend + (size_t)res;
        unsigned char *p = realloc(c->pend, cap);

        if (p == NULL) {
            return; /* (no memory: these bytes are lost to this client) */
        }
        c->pend = p;
        c->cap = cap;
    }
    memcpy(c->pend + c->npend, data, (size_t)res);
    c->npend += (size_t)res;
    if (c->sending) {
        c->s->stalls++; /* the socket has not taken the last send yet */
    }
    if (c->npend >= BUF && !c->paused && c->recv != NULL) {
        c->s->pauses++; /* full: no more reading until it drains */
        c->paused = true;
        aiol_uring_recv_cancel(c->recv);
    }
    ring_pump(c);
}

static void on_accept(void *opaque)
{
    server *s = opaque;

    for (;;) {
        /* (on the ring a socket stays blocking: io_uring waits for it) */
        int fd = accept4(s->lfd, NULL, NULL,
                         SOCK_CLOEXEC | (s->bufs != NULL ? 0 : SOCK_NONBLOCK));
        client *c;

        if (fd < 0) {
            return; /* EAGAIN, or EMFILE and friends: try at the next one */
        }
        c = calloc(1, sizeof(*c));
        if (c == NULL ||
            (s->bufs != NULL
                 ? aiol_uring_recv_submit(s->loop, fd, s->bufs, ring_received,
                                          c, &c->recv)
                 : aiol_fd_set(s->loop, fd, on_readable, NULL, NULL, c)) < 0) {
            free(c);
            close(fd);
            continue;
        }
        if (s->sndbuf > 0) {
            setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &s->sndbuf,
                       sizeof(s->sndbuf));
        }
        c->s = s;
        c->fd = fd;
        AIOL_LIST_INSERT_HEAD(&s->clients_open, c, link);
        s->clients++;
        s->open++;
    }
}

static void on_signal(void *opaque)
{
    server *s = opaque;
    struct signalfd_siginfo si;

    while (read(s->sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
        s->stop = true;
    }
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        { "port", required_argument, NULL, 'p' },
        { "fdmon", required_argument, NULL, 'm' },
        { "sndbuf", required_argument, NULL, 's' },
        { "ring", no_argument, NULL, 'r' },
        { NULL, 0, NULL, 0 },
    };
    struct sockaddr_in sa = { .sin_family = AF_INET };
    socklen_t len = sizeof(sa);
    const char *fdmon = NULL;
    server s = { .lfd = -1 };
    sigset_t set;
    int c, one = 1;
    bool ring = false;

    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'p': sa.sin_port = htons((uint16_t)atoi(optarg)); break;
        case 'm': fdmon = optarg; break;
        case 's': s.sndbuf = atoi(optarg); break;
        case 'r': ring = true; break;
        default: return 2;
        }
    }
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigprocmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if ((s.sigfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC)) < 0 ||
        (s.lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
                        0)) < 0 ||
        setsockopt(s.lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
        bind(s.lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
        listen(s.lfd, 4096) < 0 ||
        getsockname(s.lfd, (struct sockaddr *)&sa, &len) < 0) {
        perror("echo-server");
        return 1;
    }
    if (aiol_loop_new(&s.loop, fdmon) < 0 ||
        aiol_fd_set(s.loop, s.lfd, on_accept, NULL, NULL, &s) < 0 ||
        aiol_fd_set(s.loop, s.sigfd, on_signal, NULL, NULL, &s) < 0) {
        fprintf(stderr, "echo-server: cannot start the loop\n");
        return 1;
    }
    if (ring && aiol_uring_bufs_new(s.loop, 256, 4096, &s.bufs) < 0) {
        fprintf(stderr, "echo-server: --ring needs the io_uring fd monitor\n");
        return 1;
    }
    printf("echo-server: listening on 127.0.0.1:%u (%s%s)\n",
           (unsigned)ntohs(sa.sin_port), aiol_loop_fdmon_get(s.loop),
           ring ? ", ring" : "");
    fflush(stdout);
    while (!s.stop) {
        aiol_loop_poll(s.loop, true);
    }
    printf("echo-server: %llu clients, %llu bytes echoed, %llu write stalls, "
           "%llu backpressure pauses, %llu still open\n", s.clients, s.bytes,
           s.stalls, s.pauses, s.open);
    fflush(stdout);
    if (ring) {
        /* receives end (their final callbacks close the clients once
           their sends are done) */
        client *cl;

        AIOL_LIST_FOREACH(cl, &s.clients_open, link) {
            cl->eof = true;
            if (cl->recv != NULL) {
                aiol_uring_recv_cancel(cl->recv);
            }
        }
        while (!AIOL_LIST_EMPTY(&s.clients_open)) {
            aiol_loop_poll(s.loop, true);
        }
        aiol_uring_bufs_free(s.bufs);
    }
    while (!AIOL_LIST_EMPTY(&s.clients_open)) {
        client_close(AIOL_LIST_FIRST(&s.clients_open));
    }
    aiol_fd_remove(s.loop, s.lfd);
    aiol_fd_remove(s.loop, s.sigfd);
    close(s.lfd);
    close(s.sigfd);
    aiol_loop_free(s.loop);
    return 0;
}
