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

#define VD_MAX 32 /* block nodes, and exports, at most */

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
    aiol_vhost_blk *blk;       /* the device, once started */
} vd_export;

/* Everything the command line asked for. */
typedef struct vd_config {
    vd_node nodes[VD_MAX];
    unsigned nnodes;
    vd_export exports[VD_MAX];
    unsigned nexports;
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

#endif
