/* SPDX-License-Identifier: MIT */
/*
 * bench-vhost - drives a vhost-user-blk backend at full speed from the
 * host, as a frontend with a guest would, and reports requests/s and
 * latency.  Our own frontend (integrations/vhost/tests/vfe.c); any
 * backend: aioloop-vhost-blk or qemu-storage-daemon's vhost-user-blk
 * export.
 *
 *   bench-vhost --socket PATH [--queues N] [--depth D] [--seconds S]
 *               [--write] [--bs BYTES] [--span BYTES] [--packed]
 *
 * Each of N queues keeps D requests in flight (a slot per request, each
 * an indirect table: header, data, status), at random bs-aligned offsets
 * within the first span bytes of the disk, reads (default) or writes.  It
 * waits on the queues' call eventfds, collects what completed, refills
 * and kicks once per batch.  --packed asks for packed rings (the same
 * requests, each one descriptor pointing at its table; refused if the
 * backend does not offer them).  Prints one JSON line: requests, seconds,
 * iops, mean and p50/p99 latency in microseconds.  Exit 1 if a request
 * failed or the backend went away.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <linux/virtio_blk.h>

#include "aioloop/vhost.h"
#include "vfe.h"

#define RING 256
#define MAX_QUEUES VFE_MAX_VQ
#define HIST_US 20000 /* latency histogram: 1 us buckets up to 20 ms */

typedef struct slot {
    uint64_t hdr, data, status, table; /* guest addresses */
    uint64_t t0;                       /* submit time, ns */
} slot;

typedef struct bench {
    vfe f;
    unsigned queues, depth, bs;
    bool write, packed;
    uint64_t span, rng;
    slot s[MAX_QUEUES][RING];
    uint64_t done, failed, lat_sum, hist[HIST_US + 1];
} bench;

static uint64_t now_ns(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void no_pump(void *opaque)
{
    (void)opaque; /* the backend is another process */
}

static uint64_t next_rand(bench *b)
{
    uint64_t x = b->rng;

    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    b->rng = x;
    return x * 0x2545F4914F6CDD1DULL;
}

/* (Re)submits slot @i of queue @q at a fresh random offset. */
static void submit(bench *b, unsigned q, uint16_t i)
{
    vfe *f = &b->f;
    slot *s = &b->s[q][i];
    struct virtio_blk_outhdr h = {
        .type = b->write ? VIRTIO_BLK_T_OUT : VIRTIO_BLK_T_IN,
        .sector = next_rand(b) % (b->span / b->bs) * (b->bs / 512),
    };

    memcpy(vfe_gpa(f, s->hdr), &h, sizeof(h));
    *(uint8_t *)vfe_gpa(f, s->status) = 0xff;
    if (b->packed) {
        uint8_t *t = vfe_gpa(f, s->table);

        vfe_pdesc_put(t, s->hdr, sizeof(h), 0, 0);
        vfe_pdesc_put(t + 16, s->data, b->bs, 0, b->write ? 0 : 2);
        vfe_pdesc_put(t + 32, s->status, 1, 0, 2 /* WRITE */);
        s->t0 = now_ns();
        vfe_packed_post(&f->vq[q], s->table, 48, i, 4 /* INDIRECT */);
        return;
    }
    vfe_ind_write(f, s->table, 0, s->hdr, sizeof(h), 1 /* NEXT */, 1);
    vfe_ind_write(f, s->table, 1, s->data, b->bs,
                  b->write ? 1 : 1 | 2 /* NEXT, WRITE */, 2);
    vfe_ind_write(f, s->table, 2, s->status, 1, 2 /* WRITE */, 0);
    vfe_desc_write(f, q, i, s->table, 48, 4 /* INDIRECT */, 0);
    s->t0 = now_ns();
    vfe_vq_publish(f, q, i);
}

static int setup(bench *b, const char *path)
{
    vfe *f = &b->f;
    uint64_t want = 1ull << AIOL__VHOST_F_VERSION_1 |
                    1ull << AIOL__VHOST_F_RING_INDIRECT_DESC |
                    1ull << AIOL__VHOST_F_PROTOCOL_FEATURES |
                    1ull << VIRTIO_BLK_F_MQ | 1ull << VIRTIO_BLK_F_SEG_MAX |
                    1ull << VIRTIO_BLK_F_BLK_SIZE | 1ull << VIRTIO_BLK_F_FLUSH;
    size_t ram = (size_t)b->queues * b->depth * (b->bs + 4096) + (8u << 20);
    int r;

    if ((r = vfe_connect(f, path, no_pump, NULL)) < 0) {
        return r;
    }
    f->want_packed = b->packed;
    if (b->packed) {
        want |= 1ull << AIOL__VHOST_F_RING_PACKED;
    }
    if ((r = vfe_negotiate(f, want, 1ull << AIOL__VHOST_PROTOCOL_F_MQ)) < 0) {
        return r;
    }
    if (b->packed && !vfe_packed(f)) {
        return -EPROTONOSUPPORT; /* (the backend offers no packed rings) */
    }
    if ((r = vfe_mem_create(f, ram, 1)) < 0 ||
        (r = vfe_set_mem_table(f, false)) < 0) {
        return r;
    }
    for (unsigned q = 0; q < b->queues; q++) {
        if ((r = vfe_vq_setup(f, q, RING, false)) < 0) {
            return r;
        }
        for (unsigned i = 0; i < b->depth; i++) {
            slot *s = &b->s[q][i];

            s->hdr = vfe_alloc(f, 0, 16, 16);
            s->status = vfe_alloc(f, 0, 1, 1);
            s->table = vfe_alloc(f, 0, 48, 16);
            s->data = vfe_alloc(f, 0, b->bs, 4096);
            if (s->data == UINT64_MAX) {
                return -ENOMEM;
            }
        }
    }
    return 0;
}

/* Takes every used element of queue @q; refills when @more. */
/* The next used element of @v (split or packed): false if none. */
static bool take_used(vfe_vq *v, uint32_t e[2])
{
    if (v->packed) {
        return vfe_packed_take_used(v, &e[0], &e[1]);
    }
    if (v->last_used == __atomic_load_n((uint16_t *)v->used + 1,
                                        __ATOMIC_ACQUIRE)) {
        return false;
    }
    memcpy(e, v->used + 4 + 8u * (v->last_used % v->num), 8);
    v->last_used++;
    return true;
}

static unsigned harvest(bench *b, unsigned q, bool more)
{
    vfe_vq *v = &b->f.vq[q];
    uint32_t e[2];
    unsigned n = 0;

    for (; take_used(v, e); n++) {
        slot *s;
        uint64_t us;

        if (e[0] >= b->depth) {
            b->failed++;
            continue;
        }
        s = &b->s[q][e[0]];
        us = (now_ns() - s->t0) / 1000;
        b->failed += *(uint8_t *)vfe_gpa(&b->f, s->status) != VIRTIO_BLK_S_OK;
        b->done++;
        b->lat_sum += us;
        b->hist[us < HIST_US ? us : HIST_US]++;
        if (more) {
            submit(b, q, (uint16_t)e[0]);
        }
    }
    if (n > 0 && more) {
        vfe_vq_kick(&b->f, q);
    }
    return n;
}

static uint64_t percentile(const bench *b, double p)
{
    uint64_t want = (uint64_t)(p * (double)b->done), seen = 0;

    for (unsigned us = 0; us <= HIST_US; us++) {
        seen += b->hist[us];
        if (seen > want) {
            return us;
        }
    }
    return HIST_US;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        { "socket", required_argument, NULL, 's' },
        { "queues", required_argument, NULL, 'q' },
        { "depth", required_argument, NULL, 'd' },
        { "seconds", required_argument, NULL, 't' },
        { "bs", required_argument, NULL, 'b' },
        { "span", required_argument, NULL, 'S' },
        { "write", no_argument, NULL, 'w' },
        { "packed", no_argument, NULL, 'p' },
        { NULL, 0, NULL, 0 },
    };
    static bench b;
    const char *path = NULL;
    double seconds = 5;
    uint64_t t0, t1, end, outstanding;
    struct pollfd pfd[MAX_QUEUES];
    int c, r;

    b.queues = 1;
    b.depth = 32;
    b.bs = 4096;
    b.span = 256u << 20;
    b.rng = 0x9E3779B97F4A7C15ULL;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 's': path = optarg; break;
        case 'q': b.queues = (unsigned)atoi(optarg); break;
        case 'd': b.depth = (unsigned)atoi(optarg); break;
        case 't': seconds = atof(optarg); break;
        case 'b': b.bs = (unsigned)atoi(optarg); break;
        case 'S': b.span = strtoull(optarg, NULL, 0); break;
        case 'w': b.write = true; break;
        case 'p': b.packed = true; break;
        default: return 2;
        }
    }
    if (path == NULL || b.queues < 1 || b.queues > MAX_QUEUES ||
        b.depth < 1 || b.depth > RING || b.bs < 512 || b.bs % 512 != 0 ||
        b.span < b.bs) {
        fprintf(stderr, "usage: bench-vhost --socket PATH [--queues 1..%d] "
                "[--depth 1..%d] [--seconds S] [--bs N] [--span N] "
                "[--write] [--packed]\n", MAX_QUEUES, RING);
        return 2;
    }
    if ((r = setup(&b, path)) < 0) {
        fprintf(stderr, "bench-vhost: setting up %s: %s\n", path,
                strerror(-r));
        return 1;
    }
    for (unsigned q = 0; q < b.queues; q++) {
        for (unsigned i = 0; i < b.depth; i++) {
            submit(&b, q, (uint16_t)i);
        }
        vfe_vq_kick(&b.f, q);
        pfd[q] = (struct pollfd){ .fd = b.f.vq[q].call, .events = POLLIN };
    }
    t0 = now_ns();
    end = t0 + (uint64_t)(seconds * 1e9);
    outstanding = (uint64_t)b.queues * b.depth;
    for (bool more = true; outstanding > 0;) {
        uint64_t t;

        if (poll(pfd, b.queues, 2000) <= 0) {
            fprintf(stderr, "bench-vhost: no completion for 2 s\n");
            return 1;
        }
        t = now_ns();
        more = t < end;
        for (unsigned q = 0; q < b.queues; q++) {
            if (pfd[q].revents & POLLIN) {
                unsigned n;

                (void)vfe_vq_calls(&b.f, q);
                n = harvest(&b, q, more);
                if (!more) {
                    outstanding -= n;
                }
            }
        }
    }
    t1 = now_ns();
    printf("{\"requests\": %llu, \"seconds\": %.3f, \"iops\": %.0f, "
           "\"mean_us\": %.2f, \"p50_us\": %llu, \"p99_us\": %llu, "
           "\"failed\": %llu, \"queues\": %u, \"depth\": %u, \"bs\": %u, "
           "\"write\": %s, \"packed\": %s}\n",
           (unsigned long long)b.done, (double)(t1 - t0) / 1e9,
           (double)b.done / ((double)(t1 - t0) / 1e9),
           (double)b.lat_sum / (double)(b.done ? b.done : 1),
           (unsigned long long)percentile(&b, 0.5),
           (unsigned long long)percentile(&b, 0.99),
           (unsigned long long)b.failed, b.queues, b.depth, b.bs,
           b.write ? "true" : "false", b.packed ? "true" : "false");
    vfe_close(&b.f);
    return b.failed == 0 ? 0 : 1;
}
