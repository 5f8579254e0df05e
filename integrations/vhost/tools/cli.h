/* SPDX-License-Identifier: MIT */
/*
 * cli.h - aioloop-vhost-blk's command line: qemu-storage-daemon's
 * --blockdev and --export for a vhost-user-blk export, and the daemon's
 * own short form, parsed into the same records.
 */
#ifndef AIOLOOP_VHOST_CLI_H
#define AIOLOOP_VHOST_CLI_H

#include <stdbool.h>

#include "aioloop/vhost-blk.h"

#define VD_MAX 32 /* block nodes, exports and iothreads, at most */
#define VD_MAX_THREADS 64 /* --threads */

/* An --object iothread,id=I thread, or one of --threads' (threads.c). */
typedef struct vd_iothread {
    char *id;                  /* NULL for one of --threads' */
    unsigned poll_max_ns;      /* its busy-poll window (poll-max-ns=) */
    bool poll_set;             /* poll-max-ns= given; else --poll-max-ns */
    struct aiol_iothread *thread; /* once started */
} vd_iothread;

/* A --blockdev driver=file,... node. */
typedef struct vd_node {
    char *name;                /* node-name */
    char *filename;
    aiol_vhost_blk_aio aio;    /* aio=; qsd's default is threads */
    bool direct;               /* cache.direct=on */
    bool read_only;            /* read-only=on */
    int fd;                    /* opened by the daemon; -1 before */
} vd_node;

/* A --export type=vhost-user-blk,... export. */
typedef struct vd_export {
    char *id;
    vd_node *node;
    char *path;                /* addr.type=unix: addr.path */
    int fd;                    /* addr.type=fd: addr.str; else -1 */
    bool writable;             /* writable=on */
    unsigned num_queues;       /* num-queues=, default 1 */
    unsigned block_size;       /* logical-block-size=, default 512 */
    char *serial;              /* the short form's --serial, or NULL */
    /* iothread=I or iothread.0=I,iothread.1=J...: queue q runs on
       iothreads[q % niothreads]; none: --threads decides */
    vd_iothread *iothreads[VD_MAX_THREADS];
    unsigned niothreads;
    aiol_vhost_blk *blk;       /* the device, once started */
} vd_export;

/* Everything the command line asked for. */
typedef struct vd_config {
    vd_node nodes[VD_MAX];
    unsigned nnodes;
    vd_export exports[VD_MAX];
    unsigned nexports;
    vd_iothread iothreads[VD_MAX]; /* --object iothread */
    unsigned niothreads;
    unsigned threads;          /* --threads: loop threads, default 1 */
    vd_iothread extra[VD_MAX_THREADS]; /* --threads' own, beyond the
                                          main thread; threads.c */
    bool qsd_form;             /* --blockdev/--export seen: errors exit 1 */
    const char *fdmon;
    unsigned poll_max_ns;    /* busy polling's longest window; 0: off */
    const char *pidfile;
    bool daemonize;
    bool exit_on_disconnect;
    bool verbose;
} vd_config;

/* vd_parse()'s answer when --help or --version was served: exit 0. */
#define VD_DONE (-1)

/*
 * Parses argv into @c.  0: go on; VD_DONE: done (--help, --version);
 * else the exit status of a bad command line, after a one-line message on
 * stderr naming the option (1 in qemu-storage-daemon's form, as qsd
 * exits, 2 in the short form).
 */
int vd_parse(int argc, char **argv, vd_config *c);

/* Frees what vd_parse() allocated. */
void vd_config_fini(vd_config *c);

/* threads.c.  Starts every iothread (--object, --threads) on the daemon's
 * fd monitor with its busy-poll window; 0, or -1 having said why. */
int vd_threads_start(vd_config *c);
/* The loop that serves queue @q of @e (@main: the daemon's own). */
aiol_loop *vd_queue_loop(vd_config *c, const vd_export *e, unsigned q,
                         aiol_loop *main);
/* Stops and frees them (after every device is freed). */
void vd_threads_stop(vd_config *c);

#endif
