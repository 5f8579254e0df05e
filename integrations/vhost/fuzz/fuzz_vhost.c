/* SPDX-License-Identifier: MIT */
/*
 * fuzz_vhost.c - libFuzzer harness for libaioloop-vhost: the message
 * parser and the virtqueue walker, through the vhost-user-blk device.
 *
 * The harness plays an untrusted frontend.  Byte 0 picks the loop fd monitor
 * (fuzz.h: 0 poll, 1 epoll, 2 io_uring, where the device's I/O goes on the
 * ring; byte 0 at 3..5 also serves queue 0 on an aiol_iothread, so every
 * message that touches it parks that thread: queue threads under
 * hostile input); the rest is a list of frames, each [ctl u8][len u16 le][len
 * bytes], run in order against a blk device on a 1 MiB memfd image, served
 * over a socketpair:
 *
 *   ctl 0x00-0x3f  send the bytes as one message (header and payload, as
 *                  they come); bits 0-2 attach that many fds, bit 3 makes
 *                  them the guest RAM memfd (else fresh eventfds, kept
 *                  for kicks);
 *   ctl 0x40-0x7f  write bytes[4..] into guest RAM at offset bytes[0..3]
 *                  (le, modulo the RAM size): descriptors, rings, data;
 *   ctl 0x80-0xbf  signal every eventfd sent so far (kicks);
 *   ctl 0xc0-0xff  run the loop len + 1 rounds.
 *
 * After each frame the loop runs a few rounds and the harness reads and
 * drops whatever the device answered.  It stops early when the device
 * drops the connection.  Whatever the input, nothing may crash, hang,
 * leak (LeakSanitizer) or touch memory it does not own (ASan); guest RAM
 * is the one shared mapping the device may write.  FUZZ_VHOST_STATS=1 in
 * the environment prints what each input made the device do.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "aioloop/aioloop.h"
#include "aioloop/iothread.h"
#include "aioloop/vhost-blk.h"
#include "fuzz.h"
#include "vfe.h"

#define RAM_SIZE (256u << 10)
#define IMG_SIZE (1u << 20)
#define MAX_EVENTFDS 64

typedef struct fz {
    aiol_loop *loop;
    aiol_iothread *io;         /* serves queue 0 (byte 0 at 3..5), or NULL */
    aiol_vhost_blk *blk;
    int sock;                  /* the frontend's end */
    int ram, img;              /* memfds */
    uint8_t *ram_map;
    int efd[MAX_EVENTFDS];
    unsigned nefd;
} fz;

static void pump(fz *f, unsigned rounds)
{
    uint8_t junk[4096];

    for (unsigned i = 0; i < rounds; i++) {
        aiol_loop_poll(f->loop, false);
        while (recv(f->sock, junk, sizeof(junk), MSG_DONTWAIT) > 0) {
            /* replies: dropped */
        }
    }
}

static void send_message(fz *f, uint8_t ctl, const uint8_t *p, size_t len)
{
    vfe fe = { .sock = f->sock }; /* (only its socket: vfe_send_raw) */
    unsigned nfds = ctl & 7;
    int fds[8] = { 0 };

    if (len == 0) {
        return;
    }
    for (unsigned i = 0; i < nfds; i++) {
        if (ctl & 8) {
            fds[i] = dup(f->ram);
        } else {
            fds[i] = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
            if (fds[i] >= 0 && f->nefd < MAX_EVENTFDS) {
                f->efd[f->nefd++] = dup(fds[i]);
            }
        }
        if (fds[i] < 0) {
            nfds = i;
            break;
        }
    }
    (void)vfe_send_raw(&fe, p, len, fds, nfds);
    for (unsigned i = 0; i < nfds; i++) {
        close(fds[i]);
    }
}

static void write_ram(fz *f, const uint8_t *p, size_t len)
{
    uint32_t off;

    if (len < 4) {
        return;
    }
    memcpy(&off, p, 4);
    off %= RAM_SIZE;
    p += 4;
    len -= 4;
    if (len > RAM_SIZE - off) {
        len = RAM_SIZE - off;
    }
    memcpy(f->ram_map + off, p, len);
}

static void kick_all(fz *f)
{
    for (unsigned i = 0; i < f->nefd; i++) {
        (void)eventfd_write(f->efd[i], 1);
    }
}

static int setup(fz *f, int fdmon, bool queue_thread)
{
    aiol_vhost_blk_opts o = { .num_queues = 2, .serial = "fuzz" };
    int sv[2];

    memset(f, 0, sizeof(*f));
    f->sock = f->ram = f->img = -1;
    if (aiol_loop_new(&f->loop, fz_fdmon_name(fdmon)) < 0) {
        return -1;
    }
    f->ram = memfd_create("fuzz-ram", MFD_CLOEXEC);
    f->img = memfd_create("fuzz-img", MFD_CLOEXEC);
    if (f->ram < 0 || f->img < 0 || ftruncate(f->ram, RAM_SIZE) < 0 ||
        ftruncate(f->img, IMG_SIZE) < 0) {
        return -1;
    }
    f->ram_map = mmap(NULL, RAM_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED,
                      f->ram, 0);
    if (f->ram_map == MAP_FAILED) {
        f->ram_map = NULL;
        return -1;
    }
    if (aiol_vhost_blk_new(f->loop, f->img, &o, &f->blk) < 0 ||
        socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
        return -1;
    }
    if (queue_thread &&
        (aiol_iothread_new(fz_fdmon_name(fdmon), &f->io) < 0 ||
         aiol_vhost_dev_queue_loop_set(aiol_vhost_blk_dev_get(f->blk), 0,
                                       aiol_iothread_loop_get(f->io)) < 0)) {
        close(sv[0]);
        close(sv[1]);
        return -1;
    }
    f->sock = sv[0];
    return aiol_vhost_dev_adopt(aiol_vhost_blk_dev_get(f->blk), sv[1]);
}

static void teardown(fz *f)
{
    if (f->sock >= 0) {
        close(f->sock);
    }
    if (f->blk != NULL) {
        pump(f, 2);
        if (getenv("FUZZ_VHOST_STATS") != NULL) {
            aiol_vhost_blk_stats b;
            aiol_vhost_stats d;

            aiol_vhost_blk_stats_get(f->blk, &b);
            aiol_vhost_dev_stats_get(aiol_vhost_blk_dev_get(f->blk), &d);
            fprintf(stderr, "fuzz-vhost [%s]: %llu messages, %llu reads, "
                    "%llu writes, %llu flushes, %llu get-ids, %llu discards,"
                    " %llu unsupported, %llu I/O errors, %llu on the ring; "
                    "dropped %llu (malformed %llu): %s\n",
                    aiol_loop_fdmon_get(f->loop),
                    (unsigned long long)d.messages,
                    (unsigned long long)b.reads, (unsigned long long)b.writes,
                    (unsigned long long)b.flushes,
                    (unsigned long long)b.get_ids,
                    (unsigned long long)b.discards,
                    (unsigned long long)b.unsupp, (unsigned long long)b.ioerr,
                    (unsigned long long)b.on_ring,
                    (unsigned long long)d.drops,
                    (unsigned long long)d.malformed,
                    aiol_vhost_dev_last_error_get(aiol_vhost_blk_dev_get(f->blk)));
        }
        aiol_vhost_blk_free(f->blk);
    }
    aiol_iothread_free(f->io); /* (after the device: no queue there now) */
    for (unsigned i = 0; i < f->nefd; i++) {
        close(f->efd[i]);
    }
    if (f->ram_map != NULL) {
        munmap(f->ram_map, RAM_SIZE);
    }
    if (f->ram >= 0) {
        close(f->ram);
    }
    if (f->img >= 0) {
        close(f->img);
    }
    aiol_loop_free(f->loop);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz f;

    if (size < 1) {
        return 0;
    }
    if (setup(&f, data[0], (data[0] / 3) % 2 == 1) == 0) {
        size_t at = 1;

        while (at + 3 <= size &&
               aiol_vhost_dev_is_connected(aiol_vhost_blk_dev_get(f.blk))) {
            uint8_t ctl = data[at];
            size_t len = (size_t)data[at + 1] | (size_t)data[at + 2] << 8;

            at += 3;
            if (len > size - at) {
                len = size - at;
            }
            switch (ctl & 0xc0) {
            case 0x00: send_message(&f, ctl, data + at, len); break;
            case 0x40: write_ram(&f, data + at, len); break;
            case 0x80: kick_all(&f); break;
            default: pump(&f, (unsigned)(len % 16) + 1); break;
            }
            at += len;
            pump(&f, 3);
        }
    }
    teardown(&f);
    return 0;
}
