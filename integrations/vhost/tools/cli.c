/* SPDX-License-Identifier: MIT */
/*
 * cli.c - aioloop-vhost-blk's command line (cli.h).
 *
 * qemu-storage-daemon's form, for a vhost-user-blk export:
 *   --blockdev driver=file,node-name=N,filename=F[,aio=threads|native|
 *              io_uring][,cache.direct=on|off][,read-only=on|off]
 *   --export type=vhost-user-blk,id=I,node-name=N,addr.type=unix,
 *            addr.path=P | addr.type=fd,addr.str=FD[,writable=on|off]
 *            [,num-queues=Q][,logical-block-size=S][,iothread=T |
 *            ,iothread.0=T0,iothread.1=T1...]
 *   --object iothread,id=T[,poll-max-ns=N]
 * repeated for several exports, parsed as qsd's key=value lists: a
 * doubled comma is a comma in a value.  The short form (--socket or --fd,
 * --file, ...) makes one node and one export of the same records.  What
 * qsd accepts and this daemon does not is refused with a one-line message
 * naming the option.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "aioloop/aioloop.h"
#include "cli.h"

#define PROG "aioloop-vhost-blk"
#define KV_MAX 16

/* One key=value of a list; both point into the list's own copy. */
typedef struct kv {
    const char *key, *val;
    bool used;
} kv;

/* Splits @s (a copy kept in *buf) into at most KV_MAX pairs; a doubled
 * comma is a comma in the value.  The number of pairs, or -1 with the
 * malformed piece in *bad. */
static int kv_split(const char *s, char **buf, kv *out, const char **bad)
{
    char *p, *w;
    int n = 0;

    *buf = p = w = strdup(s);
    if (p == NULL) {
        *bad = "(out of memory)";
        return -1;
    }
    while (*p != '\0') {
        char *item = w, *eq;

        while (*p != '\0' && !(p[0] == ',' && p[1] != ',')) {
            if (p[0] == ',') {
                p++; /* ",," -> "," */
            }
            *w++ = *p++;
        }
        if (*p == ',') {
            p++;
        }
        *w++ = '\0';
        eq = strchr(item, '=');
        if (eq == NULL || eq == item || n == KV_MAX) {
            *bad = item;
            return -1;
        }
        *eq = '\0';
        out[n++] = (kv){ item, eq + 1, false };
    }
    return n;
}

/* The value of @key in @v (marking it used), or NULL. */
static const char *kv_get(kv *v, int n, const char *key)
{
    const char *val = NULL;

    for (int i = 0; i < n; i++) {
        if (strcmp(v[i].key, key) == 0) {
            v[i].used = true;
            val = v[i].val; /* (the last one wins, as in qsd) */
        }
    }
    return val;
}

/* The first key of @v nobody asked for, or NULL. */
static const char *kv_unused(const kv *v, int n)
{
    for (int i = 0; i < n; i++) {
        if (!v[i].used) {
            return v[i].key;
        }
    }
    return NULL;
}

/* "on"/"off" (and qsd's other spellings) into *out; false if neither. */
static bool parse_bool(const char *s, bool *out)
{
    static const char *const yes[] = { "on", "yes", "true", "y" };
    static const char *const no[] = { "off", "no", "false", "n" };

    for (unsigned i = 0; i < 4; i++) {
        if (strcmp(s, yes[i]) == 0 || strcmp(s, no[i]) == 0) {
            *out = strcmp(s, yes[i]) == 0;
            return true;
        }
    }
    return false;
}

/* A decimal in @lo..@hi into *out; false if @s is not one. */
static bool parse_uint(const char *s, unsigned long lo, unsigned long hi,
                       unsigned *out)
{
    char *end;
    unsigned long v;

    errno = 0;
    v = strtoul(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || *s == '-' || v < lo ||
        v > hi) {
        return false;
    }
    *out = (unsigned)v;
    return true;
}

static int bad_value(const char *opt, const char *key, const char *val,
                     const char *want)
{
    fprintf(stderr, PROG ": %s: parameter '%s' expects %s, not '%s'\n", opt,
            key, want, val);
    return -1;
}

static int missing(const char *opt, const char *key)
{
    fprintf(stderr, PROG ": %s: parameter '%s' is missing\n", opt, key);
    return -1;
}

static int unsupported(const char *opt, const char *key)
{
    fprintf(stderr, PROG ": %s: parameter '%s' is not supported\n", opt,
            key);
    return -1;
}

static bool parse_aio(const char *s, aiol_vhost_blk_aio *out)
{
    static const char *const names[] = {
        [AIOL_VHOST_BLK_AIO_THREADS] = "threads",
        [AIOL_VHOST_BLK_AIO_NATIVE] = "native",
        [AIOL_VHOST_BLK_AIO_IO_URING] = "io_uring",
    };

    for (unsigned i = AIOL_VHOST_BLK_AIO_THREADS;
         i <= AIOL_VHOST_BLK_AIO_IO_URING; i++) {
        if (strcmp(s, names[i]) == 0) {
            *out = (aiol_vhost_blk_aio)i;
            return true;
        }
    }
    return false;
}

/* One --blockdev. */
static int parse_blockdev(vd_config *c, const char *s)
{
    static const char opt[] = "--blockdev";
    kv v[KV_MAX];
    char *buf;
    const char *bad, *x;
    vd_node *nd = &c->nodes[c->nnodes];
    int n = kv_split(s, &buf, v, &bad), rc = -1;

    if (n < 0) {
        fprintf(stderr, PROG ": %s: '%s' is not key=value\n", opt, bad);
        free(buf);
        return -1;
    }
    if (c->nnodes == VD_MAX) {
        fprintf(stderr, PROG ": %s: at most %d nodes\n", opt, VD_MAX);
        goto out;
    }
    *nd = (vd_node){ .aio = AIOL_VHOST_BLK_AIO_THREADS, .fd = -1 };
    x = kv_get(v, n, "driver");
    if (x == NULL) {
        missing(opt, "driver");
        goto out;
    }
    if (strcmp(x, "file") != 0 && strcmp(x, "host_device") != 0) {
        bad_value(opt, "driver", x, "file or host_device");
        goto out;
    }
    if ((x = kv_get(v, n, "node-name")) == NULL) {
        missing(opt, "node-name");
        goto out;
    }
    for (unsigned i = 0; i < c->nnodes; i++) {
        if (strcmp(c->nodes[i].name, x) == 0) {
            fprintf(stderr, PROG ": %s: duplicate node name '%s'\n", opt, x);
            goto out;
        }
    }
    nd->name = strdup(x);
    if ((x = kv_get(v, n, "filename")) == NULL) {
        missing(opt, "filename");
        goto out;
    }
    nd->filename = strdup(x);
    if ((x = kv_get(v, n, "aio")) != NULL && !parse_aio(x, &nd->aio)) {
        bad_value(opt, "aio", x, "threads, native or io_uring");
        goto out;
    }
    if ((x = kv_get(v, n, "cache.direct")) != NULL &&
        !parse_bool(x, &nd->direct)) {
        bad_value(opt, "cache.direct", x, "on or off");
        goto out;
    }
    if ((x = kv_get(v, n, "read-only")) != NULL &&
        !parse_bool(x, &nd->read_only)) {
        bad_value(opt, "read-only", x, "on or off");
        goto out;
    }
    /* (what qsd would do anyway, here: accepted and nothing more) */
    (void)kv_get(v, n, "discard");
    (void)kv_get(v, n, "auto-read-only");
    if ((x = kv_unused(v, n)) != NULL) {
        unsupported(opt, x);
        goto out;
    }
    if (nd->aio == AIOL_VHOST_BLK_AIO_NATIVE && !nd->direct) {
        fprintf(stderr, PROG ": %s: aio=native was specified, but it "
                        "requires cache.direct=on\n", opt);
        goto out;
    }
    if (nd->name == NULL || nd->filename == NULL) {
        fprintf(stderr, PROG ": %s: out of memory\n", opt);
        goto out;
    }
    c->nnodes++;
    rc = 0;
out:
    if (rc < 0) {
        free(nd->name);
        free(nd->filename);
    }
    free(buf);
    return rc;
}

static vd_node *node_find(vd_config *c, const char *name)
{
    for (unsigned i = 0; i < c->nnodes; i++) {
        if (strcmp(c->nodes[i].name, name) == 0) {
            return &c->nodes[i];
        }
    }
    return NULL;
}

/* The address of an export: addr.type=unix,addr.path= or fd,addr.str=. */
static int parse_addr(kv *v, int n, vd_export *e)
{
    static const char opt[] = "--export";
    const char *type = kv_get(v, n, "addr.type"), *x;
    unsigned fd;

    if (type == NULL) {
        return missing(opt, "addr.type");
    }
    if (strcmp(type, "unix") == 0) {
        if ((x = kv_get(v, n, "addr.path")) == NULL) {
            return missing(opt, "addr.path");
        }
        e->path = strdup(x);
        return e->path != NULL ? 0 : -1;
    }
    if (strcmp(type, "fd") == 0) {
        if ((x = kv_get(v, n, "addr.str")) == NULL) {
            return missing(opt, "addr.str");
        }
        if (!parse_uint(x, 0, 1u << 30, &fd)) {
            return bad_value(opt, "addr.str", x, "a file descriptor number");
        }
        e->fd = (int)fd;
        return 0;
    }
    return bad_value(opt, "addr.type", type, "unix or fd");
}

/* One --export. */
static vd_iothread *iothread_find(vd_config *c, const char *id)
{
    for (unsigned i = 0; i < c->niothreads; i++) {
        if (strcmp(c->iothreads[i].id, id) == 0) {
            return &c->iothreads[i];
        }
    }
    return NULL;
}

/* --object iothread,id=T[,poll-max-ns=N] (qsd's implicit qom-type key
 * first); qsd's other object types are not served. */
static int parse_object(vd_config *c, const char *s)
{
    static const char opt[] = "--object";
    vd_iothread *t = &c->iothreads[c->niothreads];
    kv v[KV_MAX];
    char *buf = NULL, *full;
    const char *bad, *x;
    int n, rc = -1;

    /* (the first item without '=' is the qom-type) */
    if (s[strcspn(s, "=")] == '\0' || strcspn(s, ",") < strcspn(s, "=")) {
        if (asprintf(&full, "qom-type=%s", s) < 0) {
            return -1;
        }
    } else if ((full = strdup(s)) == NULL) {
        return -1;
    }
    n = kv_split(full, &buf, v, &bad);
    free(full);
    if (n < 0) {
        fprintf(stderr, PROG ": %s: '%s' is not key=value\n", opt, bad);
        goto out;
    }
    if ((x = kv_get(v, n, "qom-type")) == NULL || strcmp(x, "iothread") != 0) {
        fprintf(stderr, PROG ": %s: only iothread objects are served, not "
                        "'%s'\n", opt, x != NULL ? x : "");
        goto out;
    }
    *t = (vd_iothread){ .id = NULL };
    if ((x = kv_get(v, n, "id")) == NULL) {
        missing(opt, "id");
        goto out;
    }
    if (iothread_find(c, x) != NULL || c->niothreads == VD_MAX) {
        fprintf(stderr, PROG ": %s: iothread '%s' is defined twice, or "
                        "there are more than %d\n", opt, x, VD_MAX);
        goto out;
    }
    if ((x = kv_get(v, n, "poll-max-ns")) != NULL) {
        if (!parse_uint(x, 0, 1000000000u, &t->poll_max_ns)) {
            bad_value(opt, "poll-max-ns", x, "0..1000000000");
            goto out;
        }
        t->poll_set = true;
    }
    if ((x = kv_unused(v, n)) != NULL) {
        unsupported(opt, x);
        goto out;
    }
    if ((t->id = strdup(kv_get(v, n, "id"))) == NULL) {
        goto out;
    }
    c->niothreads++;
    rc = 0;
out:
    free(buf);
    return rc;
}

/* An export's iothread=T, or the list iothread.0=T0,iothread.1=T1...
 * (named by --object iothread before it). */
static int parse_export_iothreads(vd_config *c, kv *v, int n, vd_export *e)
{
    static const char opt[] = "--export";
    const char *x = kv_get(v, n, "iothread");
    char key[32];

    if (x != NULL) {
        if ((e->iothreads[0] = iothread_find(c, x)) == NULL) {
            goto unknown;
        }
        e->niothreads = 1;
    }
    for (unsigned i = 0; i < VD_MAX_THREADS; i++) {
        snprintf(key, sizeof(key), "iothread.%u", i);
        if ((x = kv_get(v, n, key)) == NULL) {
            break;
        }
        if (i == 0 && e->niothreads > 0) {
            fprintf(stderr, PROG ": %s: iothread and iothread.0 both given\n",
                    opt);
            return -1;
        }
        if ((e->iothreads[i] = iothread_find(c, x)) == NULL) {
            goto unknown;
        }
        e->niothreads = i + 1;
    }
    return 0;
unknown:
    fprintf(stderr, PROG ": %s: no iothread named '%s' (--object iothread,"
                    "id=%s comes first)\n", opt, x, x);
    return -1;
}

static int parse_export(vd_config *c, const char *s)
{
    static const char opt[] = "--export";
    kv v[KV_MAX];
    char *buf;
    const char *bad, *x;
    vd_export *e = &c->exports[c->nexports];
    int n = kv_split(s, &buf, v, &bad), rc = -1;

    if (n < 0) {
        fprintf(stderr, PROG ": %s: '%s' is not key=value\n", opt, bad);
        free(buf);
        return -1;
    }
    *e = (vd_export){ .fd = -1, .num_queues = 1, .block_size = 512 };
    if (c->nexports == VD_MAX) {
        fprintf(stderr, PROG ": %s: at most %d exports\n", opt, VD_MAX);
        goto out;
    }
    if ((x = kv_get(v, n, "type")) == NULL) {
        missing(opt, "type");
        goto out;
    }
    if (strcmp(x, "vhost-user-blk") != 0) {
        bad_value(opt, "type", x, "vhost-user-blk (the only type served)");
        goto out;
    }
    if ((x = kv_get(v, n, "id")) == NULL) {
        missing(opt, "id");
        goto out;
    }
    e->id = strdup(x);
    if ((x = kv_get(v, n, "node-name")) == NULL) {
        missing(opt, "node-name");
        goto out;
    }
    if ((e->node = node_find(c, x)) == NULL) {
        fprintf(stderr, PROG ": %s: no block node named '%s' (--blockdev "
                        "comes first)\n", opt, x);
        goto out;
    }
    if (parse_addr(v, n, e) < 0) {
        goto out;
    }
    if ((x = kv_get(v, n, "writable")) != NULL &&
        !parse_bool(x, &e->writable)) {
        bad_value(opt, "writable", x, "on or off");
        goto out;
    }
    if ((x = kv_get(v, n, "num-queues")) != NULL &&
        !parse_uint(x, 1, 64, &e->num_queues)) {
        bad_value(opt, "num-queues", x, "1..64");
        goto out;
    }
    if ((x = kv_get(v, n, "logical-block-size")) != NULL &&
        (!parse_uint(x, 512, 65536, &e->block_size) ||
         (e->block_size & (e->block_size - 1)) != 0)) {
        bad_value(opt, "logical-block-size", x,
                  "a power of two from 512 to 65536");
        goto out;
    }
    if (parse_export_iothreads(c, v, n, e) < 0) {
        goto out;
    }
    if ((x = kv_unused(v, n)) != NULL) {
        unsupported(opt, x);
        goto out;
    }
    if (e->id == NULL) {
        fprintf(stderr, PROG ": %s: out of memory\n", opt);
        goto out;
    }
    if (e->writable && e->node->read_only) {
        fprintf(stderr, PROG ": %s: node '%s' is read-only, the export "
                        "writable\n", opt, e->node->name);
        goto out;
    }
    c->nexports++;
    rc = 0;
out:
    if (rc < 0) {
        free(e->id);
        free(e->path);
    }
    free(buf);
    return rc;
}

static void usage(FILE *to)
{
    fputs(
"usage: " PROG " --socket PATH|--fd N --file FILE [OPTION]...\n"
"       " PROG " --blockdev NODE --export EXPORT [--blockdev ... --export ...]\n"
"\n"
"Serves raw images or block devices as vhost-user-blk devices, each to one\n"
"frontend at a time (QEMU's vhost-user-blk-pci), on one loop thread or,\n"
"with --threads or iothreads, each queue on one of several.\n"
"\n"
"qemu-storage-daemon's form (repeatable; exit status 1 on a bad one):\n"
"  --blockdev driver=file,node-name=N,filename=F[,aio=threads|native|io_uring]\n"
"             [,cache.direct=on|off][,read-only=on|off]\n"
"  --export type=vhost-user-blk,id=I,node-name=N,addr.type=unix,addr.path=P\n"
"           | ...,addr.type=fd,addr.str=FD [,writable=on|off][,num-queues=Q]\n"
"           [,logical-block-size=S][,iothread=T | ,iothread.0=T0,iothread.1=T1...]\n"
"           (queue q runs on the (q mod count)th iothread)\n"
"  --object iothread,id=T[,poll-max-ns=N]   a loop thread for exports' queues\n"
"\n"
"The short form (one export; exit status 2 on a bad one):\n"
"  -s, --socket PATH      listen on the unix socket PATH\n"
"  -F, --fd N             listen on the inherited listening socket N (without\n"
"                         --socket or --fd: systemd's LISTEN_FDS, fd 3)\n"
"  -f, --file FILE        the image or block device to serve\n"
"  -q, --num-queues N     request queues, 1..64 (default 1)\n"
"  -r, --read-only        a read-only device\n"
"  -i, --serial ID        the serial the guest reads (default aioloop)\n"
"  -a, --aio ENGINE       threads, native (needs --direct) or io_uring\n"
"  -d, --direct           open FILE with O_DIRECT (cache.direct=on)\n"
"\n"
"Both forms:\n"
"  -m, --fdmon NAME       the loop's fd monitor: epoll, io_uring or poll\n"
"  -t, --threads N        spread each export's queues over N loop threads,\n"
"                         the first the one that reads the frontends'\n"
"                         messages (default 1; an export's iothread= wins)\n"
"  -P, --poll-max-ns NS   busy-poll the rings and completions for up to NS\n"
"                         ns before sleeping, adaptively (default 0: off)\n"
"  -x, --exit-on-disconnect  exit once every export's frontend has gone\n"
"                         (default: keep listening, as qsd does)\n"
"  -p, --pidfile PATH     write the daemon's pid to PATH (removed at exit)\n"
"  -D, --daemonize        run in the background; the parent exits 0 once\n"
"                         every export listens\n"
"  -v, --verbose          log connections and disconnections\n"
"  -V, --version          print \"" PROG " VERSION\" and exit\n"
"  -h, --help             print this and exit\n"
"\n"
"Exit status: 0 after SIGTERM, SIGINT or SIGHUP (or, with\n"
"--exit-on-disconnect, the frontends' going), every request completed and\n"
"every writable image flushed; 1 when a flush failed, a connection ended on\n"
"malformed input, or a qemu-storage-daemon option was bad; 2 for a bad\n"
"short-form option; 3 when setting up failed.\n", to);
}

/* The short form's one node and export, once getopt is done. */
typedef struct shortform {
    const char *file, *sock, *serial;
    int fd;
    unsigned queues;
    bool read_only, direct, any;
    aiol_vhost_blk_aio aio;
} shortform;

static int shortform_add(vd_config *c, const shortform *s)
{
    vd_node *nd = &c->nodes[c->nnodes];
    vd_export *e = &c->exports[c->nexports];
    const char *lpid = getenv("LISTEN_PID"), *lfds = getenv("LISTEN_FDS");
    int fd = s->fd;

    if (s->file == NULL) {
        fprintf(stderr, PROG ": --file is missing\n");
        return 2;
    }
    if (s->sock == NULL && fd < 0 && lpid != NULL && lfds != NULL &&
        strtol(lpid, NULL, 10) == (long)getpid() &&
        strtol(lfds, NULL, 10) >= 1) {
        fd = 3; /* systemd socket activation (sd_listen_fds(3)) */
    }
    if ((s->sock == NULL) == (fd < 0)) {
        fprintf(stderr, PROG ": one of --socket and --fd is needed\n");
        return 2;
    }
    if (s->aio == AIOL_VHOST_BLK_AIO_NATIVE && !s->direct) {
        fprintf(stderr, PROG ": --aio native needs --direct (as aio=native "
                        "needs cache.direct=on)\n");
        return 2;
    }
    if (c->nnodes == VD_MAX || c->nexports == VD_MAX) {
        fprintf(stderr, PROG ": too many exports\n");
        return 2;
    }
    *nd = (vd_node){ .name = strdup("disk"), .filename = strdup(s->file),
                     .aio = s->aio, .direct = s->direct,
                     .read_only = s->read_only, .fd = -1 };
    *e = (vd_export){ .id = strdup("disk"), .node = nd, .fd = fd,
                      .path = s->sock != NULL ? strdup(s->sock) : NULL,
                      .writable = !s->read_only, .num_queues = s->queues,
                      .block_size = 512,
                      .serial = s->serial != NULL ? strdup(s->serial) : NULL };
    c->nnodes++;
    c->nexports++;
    return 0;
}

int vd_parse(int argc, char **argv, vd_config *c)
{
    static const struct option longopts[] = {
        { "blockdev", required_argument, NULL, 'B' },
        { "export", required_argument, NULL, 'E' },
        { "socket", required_argument, NULL, 's' },
        { "fd", required_argument, NULL, 'F' },
        { "file", required_argument, NULL, 'f' },
        { "num-queues", required_argument, NULL, 'q' },
        { "read-only", no_argument, NULL, 'r' },
        { "serial", required_argument, NULL, 'i' },
        { "aio", required_argument, NULL, 'a' },
        { "direct", no_argument, NULL, 'd' },
        { "fdmon", required_argument, NULL, 'm' },
        { "poll-max-ns", required_argument, NULL, 'P' },
        { "threads", required_argument, NULL, 't' },
        { "exit-on-disconnect", no_argument, NULL, 'x' },
        { "pidfile", required_argument, NULL, 'p' },
        { "daemonize", no_argument, NULL, 'D' },
        { "verbose", no_argument, NULL, 'v' },
        { "version", no_argument, NULL, 'V' },
        { "help", no_argument, NULL, 'h' },
        /* qemu-storage-daemon's, which this daemon does not serve */
        { "chardev", required_argument, NULL, 'U' },
        { "monitor", required_argument, NULL, 'U' },
        { "nbd-server", required_argument, NULL, 'U' },
        { "object", required_argument, NULL, 'O' },
        { "trace", required_argument, NULL, 'U' },
        { NULL, 0, NULL, 0 },
    };
    shortform s = { .fd = -1, .queues = 1 };
    unsigned fd;
    int ch, idx;

    memset(c, 0, sizeof(*c));
    c->threads = 1;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, "s:F:f:q:ri:a:dm:P:t:xp:DvVhT:", longopts,
                             &idx)) != -1) {
        switch (ch) {
        case 'B':
        case 'E':
            c->qsd_form = true;
            if ((ch == 'B' ? parse_blockdev(c, optarg)
                           : parse_export(c, optarg)) < 0) {
                return 1;
            }
            break;
        case 's': s.sock = optarg; s.any = true; break;
        case 'F':
            if (!parse_uint(optarg, 0, 1u << 30, &fd)) {
                fprintf(stderr, PROG ": --fd wants a descriptor number, "
                                "not '%s'\n", optarg);
                return 2;
            }
            s.fd = (int)fd;
            s.any = true;
            break;
        case 'f': s.file = optarg; s.any = true; break;
        case 'q':
            if (!parse_uint(optarg, 1, 64, &s.queues)) {
                fprintf(stderr, PROG ": --num-queues wants 1..64, not "
                                "'%s'\n", optarg);
                return 2;
            }
            break;
        case 'r': s.read_only = true; break;
        case 'i': s.serial = optarg; break;
        case 'a':
            if (!parse_aio(optarg, &s.aio)) {
                fprintf(stderr, PROG ": --aio wants threads, native or "
                                "io_uring, not '%s'\n", optarg);
                return 2;
            }
            break;
        case 'd': s.direct = true; break;
        case 'm': c->fdmon = optarg; break;
        case 'P':
            if (!parse_uint(optarg, 0, 1000000000u, &c->poll_max_ns)) {
                fprintf(stderr, PROG ": --poll-max-ns wants 0..1000000000, "
                                "not '%s'\n", optarg);
                return c->qsd_form ? 1 : 2;
            }
            break;
        case 't':
            if (!parse_uint(optarg, 1, VD_MAX_THREADS, &c->threads)) {
                fprintf(stderr, PROG ": --threads wants 1..%d, not '%s'\n",
                        VD_MAX_THREADS, optarg);
                return c->qsd_form ? 1 : 2;
            }
            break;
        case 'O':
            c->qsd_form = true;
            if (parse_object(c, optarg) < 0) {
                return 1;
            }
            break;
        case 'x': c->exit_on_disconnect = true; break;
        case 'p': c->pidfile = optarg; break;
        case 'D': c->daemonize = true; break;
        case 'v': c->verbose = true; break;
        case 'V':
            printf(PROG " %s\n", aiol_version_string());
            return VD_DONE;
        case 'h':
            usage(stdout);
            return VD_DONE;
        case 'U':
        case 'T':
            fprintf(stderr, PROG ": option '%s%s' is not supported (only "
                            "vhost-user-blk exports are served)\n",
                    ch == 'T' ? "-" : "--",
                    ch == 'T' ? "T" : longopts[idx].name);
            return 1;
        default:
            fprintf(stderr, PROG ": unknown or incomplete option '%s' "
                            "(--help lists them)\n", argv[optind - 1]);
            return c->qsd_form ? 1 : 2;
        }
    }
    if (optind != argc) {
        fprintf(stderr, PROG ": unexpected argument '%s'\n", argv[optind]);
        return c->qsd_form ? 1 : 2;
    }
    if (s.any || !c->qsd_form) {
        int rc = shortform_add(c, &s);

        if (rc != 0) {
            return rc;
        }
    }
    if (c->nexports == 0) {
        fprintf(stderr, PROG ": no --export\n");
        return 1;
    }
    return 0;
}

void vd_config_fini(vd_config *c)
{
    for (unsigned i = 0; i < c->nnodes; i++) {
        free(c->nodes[i].name);
        free(c->nodes[i].filename);
    }
    for (unsigned i = 0; i < c->nexports; i++) {
        free(c->exports[i].id);
        free(c->exports[i].path);
        free(c->exports[i].serial);
    }
    for (unsigned i = 0; i < c->niothreads; i++) {
        free(c->iothreads[i].id);
    }
}
