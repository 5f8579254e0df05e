/* SPDX-License-Identifier: MIT */
/*
 * echo-client - the load side of the asyncio echo-server benchmarks
 * (python_echo.py): CLIENTS connections to an echo server, each sending a
 * SIZE-byte message and reading the whole echo back before the next, N
 * round trips per connection, all driven by one epoll loop in C so that
 * the server under test, not the client, is what the rate measures.
 *
 *     echo-client ADDRESS SIZE CLIENTS N
 *
 * ADDRESS is HOST:PORT (TCP, TCP_NODELAY) or a Unix socket path.  Prints
 * one line, the messages echoed per second, and exits 0; 1 with a message
 * on any error (a server that closes early included).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

struct conn {
    int fd;
    size_t sent, got; /* bytes of the current round trip */
    long left;        /* round trips still to start */
    int out;          /* EPOLLOUT is being watched */
};

static void die(const char *what)
{
    fprintf(stderr, "echo-client: %s: %s\n", what, strerror(errno));
    exit(1);
}

static int dial(const char *address)
{
    const char *colon = strrchr(address, ':');
    int fd;

    if (address[0] != '/' && colon != NULL) {
        struct sockaddr_in sin = { .sin_family = AF_INET };
        char host[64];
        int one = 1;

        snprintf(host, sizeof(host), "%.*s", (int)(colon - address), address);
        sin.sin_port = htons((unsigned short)atoi(colon + 1));
        if (inet_pton(AF_INET, host, &sin.sin_addr) != 1) {
            fprintf(stderr, "echo-client: bad address %s\n", address);
            exit(1);
        }
        fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0) {
            die("connect");
        }
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    } else {
        struct sockaddr_un sun = { .sun_family = AF_UNIX };

        snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", address);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0) {
            die("connect");
        }
    }
    return fd;
}

/*
 * Sends what is left of c's message, watching for writability while some
 * of it waits for room (a message larger than the socket buffer).
 */
static void push(int ep, struct conn *c, const char *msg, size_t size)
{
    struct epoll_event ev = { .events = EPOLLIN, .data.ptr = c };
    while (c->sent < size) {
        ssize_t n = send(c->fd, msg + c->sent, size - c->sent, MSG_DONTWAIT);

        if (n < 0) {
            if (errno != EAGAIN) {
                die("send");
            }
            break;
        }
        c->sent += (size_t)n;
    }
    if ((c->sent < size) != c->out) {
        c->out = c->sent < size;
        ev.events |= c->out ? EPOLLOUT : 0;
        if (epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev) < 0) {
            die("epoll_ctl");
        }
    }
}

int main(int argc, char **argv)
{
    size_t size;
    long clients, rounds, active;
    struct conn *conns;
    char *msg, *buf;
    struct timespec t0, t1;
    int ep;

    if (argc != 5) {
        fprintf(stderr, "usage: echo-client ADDRESS SIZE CLIENTS N\n");
        return 1;
    }
    size = strtoul(argv[2], NULL, 10);
    clients = strtol(argv[3], NULL, 10);
    rounds = strtol(argv[4], NULL, 10);
    if (size == 0 || clients <= 0 || rounds <= 0) {
        fprintf(stderr, "echo-client: SIZE, CLIENTS and N must be > 0\n");
        return 1;
    }
    conns = calloc((size_t)clients, sizeof(*conns));
    msg = malloc(size);
    buf = malloc(size);
    ep = epoll_create1(EPOLL_CLOEXEC);
    if (conns == NULL || msg == NULL || buf == NULL || ep < 0) {
        die("setup");
    }
    memset(msg, 'x', size);
    for (long i = 0; i < clients; i++) {
        struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &conns[i] };

        conns[i].fd = dial(argv[1]);
        conns[i].left = rounds;
        if (epoll_ctl(ep, EPOLL_CTL_ADD, conns[i].fd, &ev) < 0) {
            die("epoll_ctl");
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (long i = 0; i < clients; i++) {
        conns[i].left--;
        push(ep, &conns[i], msg, size);
    }
    active = clients;
    while (active > 0) {
        struct epoll_event evs[64];
        int n = epoll_wait(ep, evs, 64, 10000);

        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            errno = n == 0 ? ETIMEDOUT : errno;
            die("epoll_wait");
        }
        for (int i = 0; i < n; i++) {
            struct conn *c = evs[i].data.ptr;
            ssize_t r;

            if (evs[i].events & EPOLLOUT) {
                push(ep, c, msg, size);
            }
            r = recv(c->fd, buf, size - c->got, MSG_DONTWAIT);
            if (r == 0) {
                errno = ECONNRESET;
                die("the server closed a connection");
            }
            if (r < 0) {
                if (errno == EAGAIN) {
                    continue;
                }
                die("recv");
            }
            c->got += (size_t)r;
            if (c->got < size) {
                continue;
            }
            if (c->sent < size) {
                errno = EPROTO;
                die("more echoed than was sent");
            }
            c->got = c->sent = 0;
            if (c->left == 0) {
                active--;
                continue;
            }
            c->left--;
            push(ep, c, msg, size);
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("%.0f\n", (double)(clients * rounds) /
                     ((double)(t1.tv_sec - t0.tv_sec) +
                      (double)(t1.tv_nsec - t0.tv_nsec) / 1e9));
    for (long i = 0; i < clients; i++) {
        close(conns[i].fd);
    }
    return 0;
}
