/* SPDX-License-Identifier: MIT */
/*
 * server.c - the unix-socket server of a vhost-user device: listening,
 * accepting one frontend at a time, message framing with SCM_RIGHTS fd
 * passing, replies, and dropping a connection.
 *
 * Everything is non-blocking and driven by loop fd handlers.  The
 * listening socket keeps its handler for the device's whole life (so no
 * allocation is needed to resume serving after a drop); a frontend that
 * connects while another is connected is refused: accepted and closed at
 * once.  A message is read in pieces into dev->hdr and dev->payload
 * (dev->got counts the bytes); fds may arrive with any piece and are
 * collected, at most AIOL__VHOST_MAX_FDS per message (a truncated control
 * message drops the connection).  Replies are sent with MSG_DONTWAIT: a
 * frontend that does not read its replies until the socket buffer is full
 * is dropped rather than blocking the loop.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "aioloop/fd.h"
#include "internal.h"

_Noreturn void aiol__vhost_fail(const char *func, const char *msg)
{
    aiol__fail_in("aioloop-vhost", func, msg);
}

static void on_listen(void *opaque);
static void on_conn(void *opaque);

int aiol_vhost_dev_new(aiol_loop *loop, const aiol_vhost_dev_ops *ops,
                       void *opaque, unsigned num_queues,
                       aiol_vhost_dev **out)
{
    aiol_vhost_dev *dev;

    aiol__vhost_check(loop != NULL && ops != NULL && out != NULL,
                      "NULL argument");
    aiol__vhost_check(ops->queue != NULL, "ops->queue is required");
    aiol__vhost_check(num_queues >= 1 && num_queues <= AIOL__VHOST_MAX_QUEUES,
                      "num_queues out of range 1..64");
    dev = calloc(1, sizeof(*dev));
    if (dev == NULL) {
        return -ENOMEM;
    }
    dev->vqs = calloc(num_queues, sizeof(*dev->vqs));
    if (dev->vqs == NULL) {
        free(dev);
        return -ENOMEM;
    }
    dev->loop = loop;
    dev->ops = *ops;
    dev->opaque = opaque;
    dev->num_queues = num_queues;
    dev->listen_fd = -1;
    dev->conn_fd = -1;
    aiol__vhost_check(pthread_mutex_init(&dev->err_lock, NULL) == 0,
                      "cannot initialise a mutex");
    aiol__vhost_park_init(dev);
    for (unsigned i = 0; i < num_queues; i++) {
        aiol__vhost_vq_init(&dev->vqs[i], dev, i);
    }
    *out = dev;
    return 0;
}

int aiol_vhost_dev_listen_fd(aiol_vhost_dev *dev, int fd)
{
    int on = 0, type = 0, fl, r;
    socklen_t len = sizeof(on), tlen = sizeof(type);

    aiol__vhost_check(dev != NULL && fd >= 0, "NULL device or bad fd");
    if (dev->listen_fd >= 0) {
        close(fd);
        return -EBUSY;
    }
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &on, &len) != 0 ||
        getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tlen) != 0) {
        r = errno == ENOTSOCK ? -ENOTSOCK : -errno;
        close(fd);
        return r;
    }
    fl = fcntl(fd, F_GETFL);
    if (!on || type != SOCK_STREAM || fl < 0 ||
        fcntl(fd, F_SETFL, fl | O_NONBLOCK) != 0 ||
        fcntl(fd, F_SETFD, FD_CLOEXEC) != 0) {
        close(fd);
        return -EINVAL;
    }
    r = aiol_fd_set(dev->loop, fd, on_listen, NULL, NULL, dev);
    if (r < 0) {
        close(fd);
        return r;
    }
    dev->listen_fd = fd;
    return 0;
}

int aiol_vhost_dev_listen(aiol_vhost_dev *dev, const char *path)
{
    struct sockaddr_un sa;
    int fd, r;

    aiol__vhost_check(dev != NULL && path != NULL, "NULL argument");
    if (dev->listen_fd >= 0) {
        return -EBUSY;
    }
    memset(&sa, 0, sizeof(sa));
    sa.sun_family = AF_UNIX;
    if (strlen(path) >= sizeof(sa.sun_path)) {
        return -ENAMETOOLONG;
    }
    memcpy(sa.sun_path, path, strlen(path) + 1);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return -errno;
    }
    unlink(path);
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
        listen(fd, 4) != 0) {
        r = -errno;
        close(fd);
        return r;
    }
    dev->path = strdup(path);
    r = dev->path == NULL ? -ENOMEM : aiol_vhost_dev_listen_fd(dev, fd);
    if (r < 0) {
        if (dev->path == NULL) {
            close(fd);
        }
        unlink(path);
        free(dev->path);
        dev->path = NULL;
    }
    return r;
}

int aiol_vhost_dev_adopt(aiol_vhost_dev *dev, int fd)
{
    int r;

    aiol__vhost_check(dev != NULL && fd >= 0, "NULL device or bad fd");
    if (dev->conn_fd >= 0) {
        close(fd);
        return -EBUSY;
    }
    r = aiol_fd_set(dev->loop, fd, on_conn, NULL, NULL, dev);
    if (r < 0) {
        close(fd);
        return r;
    }
    dev->conn_fd = fd;
    dev->got = 0;
    dev->nfds = 0;
    dev->st.accepts++;
    if (dev->ops.connection != NULL) {
        dev->ops.connection(dev->opaque, true);
    }
    return 0;
}

static void on_listen(void *opaque)
{
    aiol_vhost_dev *dev = opaque;
    int fd = accept4(dev->listen_fd, NULL, NULL,
                     SOCK_NONBLOCK | SOCK_CLOEXEC);

    if (fd < 0) {
        return; /* EAGAIN, or an aborted connection: wait for the next */
    }
    if (dev->conn_fd >= 0) {
        /* The current frontend may have gone already (its EOF not read
         * yet, as when it closes and reconnects at once): look first. */
        on_conn(dev);
    }
    if (dev->conn_fd >= 0) {
        close(fd); /* one frontend at a time: refused */
        dev->st.refused++;
        return;
    }
    (void)aiol_vhost_dev_adopt(dev, fd); /* on -ENOMEM: fd closed, retry */
}

static void close_fds(aiol_vhost_dev *dev)
{
    for (unsigned i = 0; i < dev->nfds; i++) {
        if (dev->fds[i] >= 0) {
            close(dev->fds[i]);
        }
    }
    dev->nfds = 0;
}

static void err_vset(aiol_vhost_dev *dev, const char *fmt, va_list ap)
{
    pthread_mutex_lock(&dev->err_lock);
    vsnprintf(dev->err, sizeof(dev->err), fmt, ap);
    pthread_mutex_unlock(&dev->err_lock);
}

void aiol__vhost_err_set(aiol_vhost_dev *dev, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    err_vset(dev, fmt, ap);
    va_end(ap);
}

void aiol__vhost_drop(aiol_vhost_dev *dev, bool malformed, const char *fmt,
                      ...)
{
    va_list ap;

    if (dev->conn_fd < 0) {
        return;
    }
    va_start(ap, fmt);
    err_vset(dev, fmt, ap);
    va_end(ap);
    aiol_fd_remove(dev->loop, dev->conn_fd);
    /* The rings stop first, their requests completed into the used
     * rings, and only then may the frontend see the connection close: a
     * frontend that finds its backend gone resumes from the used index
     * it reads then (QEMU's vhost_virtqueue_stop() when GET_VRING_BASE
     * fails), so a request completed after the close would be run again
     * by the next backend and completed to the guest twice. */
    aiol__vhost_park(dev);
    aiol__vhost_reset(dev);
    aiol__vhost_unpark(dev);
    close(dev->conn_fd);
    dev->conn_fd = -1;
    close_fds(dev);
    dev->got = 0;
    dev->st.drops++;
    if (malformed) {
        dev->st.malformed++;
    }
    if (dev->ops.connection != NULL) {
        dev->ops.connection(dev->opaque, false);
    }
}

int aiol__vhost_send_reply(aiol_vhost_dev *dev, uint32_t req,
                           const void *payload, uint32_t size)
{
    uint8_t buf[AIOL__VHOST_HDR_SIZE + AIOL__VHOST_PAYLOAD_MAX];
    uint32_t h[3] = { req, AIOL__VHOST_FLAG_VERSION | AIOL__VHOST_FLAG_REPLY,
                      size };
    ssize_t n;

    aiol__vhost_check(size <= AIOL__VHOST_PAYLOAD_MAX, "reply too large");
    memcpy(buf, h, sizeof(h));
    if (size > 0) {
        memcpy(buf + sizeof(h), payload, size);
    }
    do {
        n = send(dev->conn_fd, buf, sizeof(h) + size,
                 MSG_DONTWAIT | MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    if (n != (ssize_t)(sizeof(h) + size)) {
        return n < 0 ? -errno : -EAGAIN;
    }
    return 0;
}

/* Collects the SCM_RIGHTS fds of @mh; false when too many came. */
static bool take_fds(aiol_vhost_dev *dev, struct msghdr *mh)
{
    bool ok = (mh->msg_flags & MSG_CTRUNC) == 0;

    for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c != NULL;
         c = CMSG_NXTHDR(mh, c)) {
        size_t n;

        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) {
            continue;
        }
        n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < n; i++) {
            int fd;

            memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
            if (dev->nfds < AIOL__VHOST_MAX_FDS) {
                dev->fds[dev->nfds++] = fd;
            } else {
                close(fd);
                ok = false;
            }
        }
    }
    return ok;
}

/* Reads what is there of the current message.  1: complete, 0: more to
 * come (EAGAIN), -1: the connection was dropped. */
static int read_some(aiol_vhost_dev *dev)
{
    for (;;) {
        union {
            char buf[CMSG_SPACE(AIOL__VHOST_MAX_FDS * sizeof(int))];
            struct cmsghdr align;
        } ctl;
        struct iovec iov;
        struct msghdr mh;
        ssize_t n;

        if (dev->got < AIOL__VHOST_HDR_SIZE) {
            iov.iov_base = dev->hdr + dev->got;
            iov.iov_len = AIOL__VHOST_HDR_SIZE - dev->got;
        } else if (dev->got < AIOL__VHOST_HDR_SIZE + dev->size) {
            iov.iov_base = dev->payload + (dev->got - AIOL__VHOST_HDR_SIZE);
            iov.iov_len = AIOL__VHOST_HDR_SIZE + dev->size - dev->got;
        } else {
            return 1;
        }
        memset(&mh, 0, sizeof(mh));
        mh.msg_iov = &iov;
        mh.msg_iovlen = 1;
        mh.msg_control = ctl.buf;
        mh.msg_controllen = sizeof(ctl.buf);
        n = recvmsg(dev->conn_fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            return 0;
        }
        if (n <= 0) {
            if (n == 0 && dev->got == 0) {
                aiol__vhost_drop(dev, false, "frontend closed the connection");
            } else {
                aiol__vhost_drop(dev, true, "%s",
                                 n == 0 ? "connection closed mid-message"
                                        : "receive error");
            }
            return -1;
        }
        if (!take_fds(dev, &mh)) {
            aiol__vhost_drop(dev, true, "more than %u fds in one message",
                             AIOL__VHOST_MAX_FDS);
            return -1;
        }
        dev->got += (uint32_t)n;
        if (dev->got == AIOL__VHOST_HDR_SIZE) {
            uint32_t h[3];

            memcpy(h, dev->hdr, sizeof(h));
            dev->req = h[0];
            dev->flags = h[1];
            dev->size = h[2];
            if ((dev->flags & AIOL__VHOST_FLAG_VERSION_MASK) !=
                AIOL__VHOST_FLAG_VERSION) {
                aiol__vhost_drop(dev, true, "bad protocol version in flags "
                                 "0x%x", dev->flags);
                return -1;
            }
            if (dev->size > AIOL__VHOST_PAYLOAD_MAX) {
                aiol__vhost_drop(dev, true, "payload size %u over the "
                                 "maximum %u", dev->size,
                                 AIOL__VHOST_PAYLOAD_MAX);
                return -1;
            }
        }
    }
}

static void on_conn(void *opaque)
{
    aiol_vhost_dev *dev = opaque;

    /* A bounded batch per wakeup, so one frontend cannot starve others
     * on the loop; level-triggered readiness brings us back. */
    for (int i = 0; i < 16 && dev->conn_fd >= 0; i++) {
        int r = read_some(dev);

        if (r <= 0) {
            return;
        }
        dev->st.messages++;
        aiol__vhost_dispatch(dev);
        if (dev->conn_fd < 0) {
            return;
        }
        close_fds(dev); /* those the handler did not take */
        dev->got = 0;
    }
}

void aiol_vhost_dev_disconnect(aiol_vhost_dev *dev)
{
    aiol__vhost_check(dev != NULL, "NULL device");
    aiol__vhost_drop(dev, false, "disconnected by the device");
}

bool aiol_vhost_dev_is_connected(const aiol_vhost_dev *dev)
{
    aiol__vhost_check(dev != NULL, "NULL device");
    return dev->conn_fd >= 0;
}

uint64_t aiol_vhost_dev_features_get(const aiol_vhost_dev *dev)
{
    aiol__vhost_check(dev != NULL, "NULL device");
    return dev->features;
}

uint64_t aiol_vhost_dev_protocol_features_get(const aiol_vhost_dev *dev)
{
    aiol__vhost_check(dev != NULL, "NULL device");
    return dev->protocol;
}

aiol_vhost_vq *aiol_vhost_dev_vq_get(aiol_vhost_dev *dev, unsigned index)
{
    aiol__vhost_check(dev != NULL, "NULL device");
    aiol__vhost_check(index < dev->num_queues, "queue index out of range");
    return &dev->vqs[index];
}

void aiol_vhost_dev_stats_get(const aiol_vhost_dev *dev,
                              aiol_vhost_stats *out)
{
    aiol__vhost_check(dev != NULL && out != NULL, "NULL argument");
    *out = dev->st;
}

const char *aiol_vhost_dev_last_error_get(const aiol_vhost_dev *dev)
{
    aiol_vhost_dev *d = (aiol_vhost_dev *)dev; /* (the lock, the copy) */

    aiol__vhost_check(dev != NULL, "NULL device");
    pthread_mutex_lock(&d->err_lock);
    memcpy(d->err_seen, d->err, sizeof(d->err_seen));
    pthread_mutex_unlock(&d->err_lock);
    return d->err_seen;
}

void aiol_vhost_dev_free(aiol_vhost_dev *dev)
{
    if (dev == NULL) {
        return;
    }
    if (dev->listen_fd >= 0) {
        aiol_fd_remove(dev->loop, dev->listen_fd);
        close(dev->listen_fd);
        dev->listen_fd = -1;
        if (dev->path != NULL) {
            unlink(dev->path); /* (a socket it was given has no path) */
        }
    }
    aiol__vhost_drop(dev, false, "device freed");
    aiol__vhost_park(dev);
    aiol__vhost_reset(dev);
    aiol__vhost_unpark(dev);
    aiol__vhost_park_fini(dev);
    pthread_mutex_destroy(&dev->err_lock);
    free(dev->path);
    free(dev->vqs);
    free(dev);
}
