/* SPDX-License-Identifier: MIT */
/*
 * test_vhost_daemon.c - the aioloop-vhost-blk daemon, out of process, as
 * a frontend meets it: it serves data over two queues, flushes and exits
 * 0 on SIGTERM (removing its socket) or, with --exit-on-disconnect, when
 * the frontend goes; otherwise it serves the next frontend, as
 * qemu-storage-daemon does.  It drops a malformed frontend without
 * crashing, takes qemu-storage-daemon's --blockdev/--export for several
 * exports (a unix path, an inherited listening fd), runs as a daemon with
 * a pidfile and under systemd's socket activation, and refuses bad
 * arguments with a message naming the option.
 *
 * argv[1] is the daemon's path (meson passes it).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <linux/virtio_blk.h>

#include "vblk.h"
#include "fixture.h"

#define IMG_SECTORS 128
#define SEC 512

static const char *daemon_path;

typedef struct dt {
    pid_t pid;
    int out;              /* the daemon's stdout and stderr */
    char dir[64], sock[96], img[96];
    char listening[512];  /* the first thing it printed (dt_exec()) */
    vfe f;
} dt;

/* A fresh directory in @t, with an image of @img_sectors (0: none). */
static void dt_prepare(dt *t, unsigned img_sectors)
{
    memset(t, 0, sizeof(*t));
    t->f.sock = -1;
    snprintf(t->dir, sizeof(t->dir), "/tmp/aiol-vdaemon-XXXXXX");
    assert_non_null(mkdtemp(t->dir));
    snprintf(t->sock, sizeof(t->sock), "%s/sock", t->dir);
    snprintf(t->img, sizeof(t->img), "%s/img", t->dir);
    if (img_sectors > 0) {
        int fd = open(t->img, O_RDWR | O_CREAT | O_CLOEXEC, 0600);

        assert_true(fd >= 0);
        assert_int_equal(ftruncate(fd, (off_t)img_sectors * SEC), 0);
        close(fd);
    }
}

/* Runs @argv (argv[0]: the program) with stdout and stderr to t->out;
 * with @wait, returns once it printed that it listens. */
static void dt_exec(dt *t, const char *const *argv, bool wait)
{
    int pipefd[2];
    char line[512];
    ssize_t got;

    assert_int_equal(pipe2(pipefd, O_CLOEXEC), 0);
    t->pid = fork();
    assert_true(t->pid >= 0);
    if (t->pid == 0) {
        dup2(pipefd[1], STDOUT_FILENO);
        dup2(pipefd[1], STDERR_FILENO);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    close(pipefd[1]);
    t->out = pipefd[0];
    if (!wait) {
        return;
    }
    got = read(t->out, line, sizeof(line) - 1);
    assert_true(got > 0);
    line[got] = '\0';
    assert_non_null(strstr(line, "listening on"));
    memcpy(t->listening, line, (size_t)got + 1);
}

static void dt_pump(void *opaque)
{
    (void)opaque;
    usleep(1000); /* the backend runs in its own process */
}

/* Runs the daemon with --socket, --file and @extra arguments
 * (NULL-terminated); returns once it listens.  @img_sectors 0: no image
 * file, and no waiting. */
static void dt_spawn(dt *t, unsigned img_sectors, const char *const *extra)
{
    const char *argv[16];
    int n = 0;

    dt_prepare(t, img_sectors);
    argv[n++] = daemon_path;
    argv[n++] = "--socket";
    argv[n++] = t->sock;
    argv[n++] = "--file";
    argv[n++] = t->img;
    for (; extra != NULL && *extra != NULL; extra++) {
        argv[n++] = *extra;
    }
    argv[n] = NULL;
    dt_exec(t, argv, img_sectors > 0);
}

/* Waits (at most 10 s) for the daemon to exit; its wait status. */
static int dt_wait(dt *t)
{
    int st;

    for (int i = 0; i < 10000; i++) {
        pid_t r = waitpid(t->pid, &st, WNOHANG);

        if (r == t->pid) {
            t->pid = 0;
            return st;
        }
        usleep(1000);
    }
    kill(t->pid, SIGKILL);
    waitpid(t->pid, &st, 0);
    t->pid = 0;
    fail_msg("the daemon did not exit");
    return -1;
}

/* The rest of the daemon's output (after dt_wait): what is in the pipe
 * (not waiting for its end: a daemonized child may still hold it). */
static void dt_output(dt *t, char *buf, size_t cap)
{
    size_t at = 0;
    ssize_t r;

    fcntl(t->out, F_SETFL, fcntl(t->out, F_GETFL) | O_NONBLOCK);
    while (at + 1 < cap && (r = read(t->out, buf + at, cap - 1 - at)) > 0) {
        at += (size_t)r;
    }
    buf[at] = '\0';
}

/* Waits for the daemon; asserts it exited (not by a signal) with @code
 * and, unless NULL, printed @needle. */
static void dt_expect_exit(dt *t, int code, const char *needle)
{
    char out[2048];
    int st = dt_wait(t);

    dt_output(t, out, sizeof(out));
    if (!WIFEXITED(st) || WEXITSTATUS(st) != code ||
        (needle != NULL && strstr(out, needle) == NULL)) {
        fail_msg("the daemon ended with status %#x, not exit %d%s%s; it "
                 "printed:\n%s", st, code, needle != NULL ? " printing " : "",
                 needle != NULL ? needle : "", out);
    }
}

static void dt_cleanup(dt *t)
{
    vfe_close(&t->f);
    if (t->pid > 0) {
        kill(t->pid, SIGKILL);
        waitpid(t->pid, NULL, 0);
    }
    close(t->out);
    unlink(t->img);
    unlink(t->sock);
    rmdir(t->dir);
}

/* Connects (while the socket is not listening yet: for 10 s),
 * negotiates, two queues. */
static void dt_session(dt *t)
{
    int r = vfe_connect(&t->f, t->sock, dt_pump, t);

    for (int i = 0; i < 10000 && r == -ECONNREFUSED; i++) {
        usleep(1000); /* (bound, not listening yet) */
        r = vfe_connect(&t->f, t->sock, dt_pump, t);
    }
    assert_int_equal(r, 0);
    assert_int_equal(vfe_negotiate(&t->f, FX_ALL_FEATURES, FX_ALL_PROTOCOL),
                     0);
    assert_int_equal(vfe_mem_create(&t->f, FX_RAM, 2), 0);
    assert_int_equal(vfe_set_mem_table(&t->f, false), 0);
    assert_int_equal(vfe_vq_setup(&t->f, 0, FX_RING, false), 0);
    assert_int_equal(vfe_vq_setup(&t->f, 1, FX_RING, false), 0);
}

/* Writes 8 sectors at @sector through queue 1, reads them back through
 * queue 0; the pattern written. */
static void dt_write_read(dt *t, uint64_t sector, uint8_t *w, size_t len)
{
    uint8_t r[8 * SEC];
    uint32_t used;

    assert_true(len == sizeof(r));
    vblk_pattern(w, len, (unsigned)sector);
    assert_int_equal(vblk_req(&t->f, 1, VIRTIO_BLK_T_OUT, sector, w,
                              (uint32_t)len, false, 2, 16, &used),
                     VIRTIO_BLK_S_OK);
    assert_int_equal(vblk_req(&t->f, 0, VIRTIO_BLK_T_IN, sector, r,
                              (uint32_t)len, true, 3, 16, &used),
                     VIRTIO_BLK_S_OK);
    assert_memory_equal(r, w, len);
}

static void assert_file_holds(const dt *t, uint64_t sector,
                              const uint8_t *w, size_t len)
{
    uint8_t buf[8 * SEC];
    int fd = open(t->img, O_RDONLY | O_CLOEXEC);

    assert_true(fd >= 0 && len <= sizeof(buf));
    assert_int_equal(pread(fd, buf, len, (off_t)(sector * SEC)),
                     (ssize_t)len);
    close(fd);
    assert_memory_equal(buf, w, len);
}

static void test_daemon_serves_and_exits_on_disconnect(void **state)
{
    static const char *const args[] = { "--num-queues", "2",
                                        "--exit-on-disconnect", NULL };
    uint8_t w[8 * SEC];
    uint32_t used;
    dt t;

    (void)state;
    dt_spawn(&t, IMG_SECTORS, args);
    dt_session(&t);
    assert_true(t.f.features & (1ull << VIRTIO_BLK_F_MQ));
    dt_write_read(&t, 16, w, sizeof(w));
    assert_int_equal(vblk_req(&t.f, 0, VIRTIO_BLK_T_FLUSH, 0, NULL, 0,
                              false, 1, 16, &used), VIRTIO_BLK_S_OK);
    vfe_close(&t.f);
    /* (the session starts two rings, on the layout VFE_RING asks for) */
    dt_expect_exit(&t, 0, vfe_packed(&t.f)
        ? "frontend disconnected; 1 reads, 1 writes, 1 flushes, 0 discards, "
          "0 write zeroes, 0 I/O errors, 0 malformed connections, "
          "2 ring starts (2 packed)"
        : "frontend disconnected; 1 reads, 1 writes, 1 flushes, 0 discards, "
          "0 write zeroes, 0 I/O errors, 0 malformed connections, "
          "2 ring starts (0 packed)");
    assert_file_holds(&t, 16, w, sizeof(w));
    assert_int_equal(access(t.sock, F_OK), -1); /* socket removed */
    dt_cleanup(&t);
}

static void test_daemon_sigterm_flushes_and_exits(void **state)
{
    static const char *const args[] = { "--num-queues", "2", NULL };
    uint8_t w[8 * SEC];
    dt t;

    (void)state;
    dt_spawn(&t, IMG_SECTORS, args);
    dt_session(&t);
    dt_write_read(&t, 40, w, sizeof(w));
    assert_int_equal(kill(t.pid, SIGTERM), 0);
    dt_expect_exit(&t, 0, "Terminated; 1 reads, 1 writes");
    assert_file_holds(&t, 40, w, sizeof(w));
    assert_true(vfe_dropped(&t.f));
    assert_int_equal(access(t.sock, F_OK), -1);
    dt_cleanup(&t);
}

static void test_daemon_drops_malformed_frontend(void **state)
{
    /* request 1 (GET_FEATURES), version 1, payload size far over the cap */
    static const uint32_t bad[3] = { 1, 1, 0x7fffffff };
    static const char *const args[] = { "--exit-on-disconnect", NULL };
    dt t;

    (void)state;
    dt_spawn(&t, IMG_SECTORS, args);
    assert_int_equal(vfe_connect(&t.f, t.sock, dt_pump, &t), 0);
    assert_int_equal(vfe_send_raw(&t.f, bad, sizeof(bad), NULL, 0), 0);
    assert_true(vfe_dropped(&t.f));
    dt_expect_exit(&t, 1, "1 malformed connections"); /* no crash */
    dt_cleanup(&t);
}

static void test_daemon_read_only(void **state)
{
    /* (on the poll fd monitor whatever AIOLOOP_FDMON says: --fdmon wins) */
    static const char *const args[] = { "--read-only", "--fdmon", "poll",
                                        "--exit-on-disconnect", NULL };
    uint8_t w[SEC];
    uint32_t used;
    dt t;

    (void)state;
    dt_spawn(&t, IMG_SECTORS, args);
    assert_int_equal(vfe_connect(&t.f, t.sock, dt_pump, &t), 0);
    assert_int_equal(vfe_negotiate(&t.f, FX_ALL_FEATURES, FX_ALL_PROTOCOL),
                     0);
    assert_true(t.f.features & (1ull << VIRTIO_BLK_F_RO));
    assert_int_equal(vfe_mem_create(&t.f, FX_RAM, 2), 0);
    assert_int_equal(vfe_set_mem_table(&t.f, false), 0);
    assert_int_equal(vfe_vq_setup(&t.f, 0, FX_RING, false), 0);
    memset(w, 0x5a, sizeof(w));
    assert_int_equal(vblk_req(&t.f, 0, VIRTIO_BLK_T_OUT, 0, w, sizeof(w),
                              false, 1, 16, &used), VIRTIO_BLK_S_IOERR);
    assert_int_equal(vblk_req(&t.f, 0, VIRTIO_BLK_T_IN, 0, w, sizeof(w),
                              true, 1, 16, &used), VIRTIO_BLK_S_OK);
    vfe_close(&t.f);
    dt_expect_exit(&t, 0, NULL);
    dt_cleanup(&t);
}

/* Each engine serves the image, O_DIRECT with native (where /tmp's
 * filesystem has O_DIRECT: the daemon exits 3 if it cannot open it). */
static void test_daemon_engines(void **state)
{
    static const char *const engines[][6] = {
        { "--num-queues", "2", "--aio", "threads", NULL },
        { "--num-queues", "2", "--aio", "io_uring", NULL },
        { "--num-queues", "2", "--aio", "native", "--direct", NULL },
        { "--num-queues", "2", "--aio", "threads", "--direct", NULL },
    };
    uint8_t w[8 * SEC];
    dt t;

    (void)state;
    for (unsigned i = 0; i < sizeof(engines) / sizeof(engines[0]); i++) {
        dt_spawn(&t, IMG_SECTORS, engines[i]);
        dt_session(&t);
        dt_write_read(&t, 8 + i, w, sizeof(w));
        assert_int_equal(kill(t.pid, SIGTERM), 0);
        dt_expect_exit(&t, 0, "Terminated; 1 reads, 1 writes");
        assert_file_holds(&t, 8 + i, w, sizeof(w));
        dt_cleanup(&t);
    }
}

/* Reads @len bytes at @sector through queue 0 into @r. */
static void dt_read(dt *t, uint64_t sector, uint8_t *r, size_t len)
{
    uint32_t used;

    assert_int_equal(vblk_req(&t->f, 0, VIRTIO_BLK_T_IN, sector, r,
                              (uint32_t)len, true, 1, 16, &used),
                     VIRTIO_BLK_S_OK);
}

/* A frontend that goes leaves the daemon listening (qsd keeps its
 * exports): the next one reads what the first wrote and flushed. */
static void test_daemon_keeps_serving_after_disconnect(void **state)
{
    static const char *const args[] = { "--num-queues", "2", NULL };
    uint8_t w[8 * SEC], r[8 * SEC];
    dt t;

    (void)state;
    dt_spawn(&t, IMG_SECTORS, args);
    for (int round = 0; round < 3; round++) {
        dt_session(&t);
        if (round == 0) {
            dt_write_read(&t, 24, w, sizeof(w));
        } else {
            dt_read(&t, 24, r, sizeof(r));
            assert_memory_equal(r, w, sizeof(r));
        }
        vfe_close(&t.f);
    }
    usleep(20000);
    assert_int_equal(waitpid(t.pid, NULL, WNOHANG), 0); /* still there */
    assert_int_equal(kill(t.pid, SIGTERM), 0);
    dt_expect_exit(&t, 0, "Terminated; 3 reads, 1 writes");
    dt_cleanup(&t);
}

/* A listening unix socket at @path, inheritable (no CLOEXEC). */
static int listening_socket(const char *path)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);

    assert_true(fd >= 0);
    assert_true(strlen(path) < sizeof(sa.sun_path));
    memcpy(sa.sun_path, path, strlen(path) + 1);
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(listen(fd, 4), 0);
    return fd;
}

/*
 * qemu-storage-daemon's command line, two exports in one process: one on
 * a unix path, one on an inherited listening fd (addr.type=fd) with
 * 4096-byte logical blocks and io_uring.  Each serves its own image.
 */
static void test_daemon_qsd_form_two_exports(void **state)
{
    char img1[96], sock1[96], bd0[256], bd1[256], ex0[256], ex1[256];
    char fdnum[16];
    uint8_t w[8 * SEC], w1[8 * SEC], r[8 * SEC], small[SEC];
    const char *argv[12];
    uint32_t used;
    dt t, t1;
    int lfd, fd, n = 0;

    (void)state;
    dt_prepare(&t, IMG_SECTORS);
    snprintf(img1, sizeof(img1), "%s/img1", t.dir);
    snprintf(sock1, sizeof(sock1), "%s/sock1", t.dir);
    fd = open(img1, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, IMG_SECTORS * SEC), 0);
    close(fd);
    lfd = listening_socket(sock1);
    snprintf(fdnum, sizeof(fdnum), "%d", lfd);
    snprintf(bd0, sizeof(bd0), "driver=file,node-name=disk0,filename=%s",
             t.img);
    snprintf(bd1, sizeof(bd1), "driver=file,node-name=disk1,filename=%s,"
             "aio=io_uring,cache.direct=off", img1);
    snprintf(ex0, sizeof(ex0), "type=vhost-user-blk,id=e0,node-name=disk0,"
             "addr.type=unix,addr.path=%s,writable=on,num-queues=2", t.sock);
    snprintf(ex1, sizeof(ex1), "type=vhost-user-blk,id=e1,node-name=disk1,"
             "addr.type=fd,addr.str=%s,writable=on,num-queues=2,"
             "logical-block-size=4096", fdnum);
    argv[n++] = daemon_path;
    argv[n++] = "--blockdev";
    argv[n++] = bd0;
    argv[n++] = "--blockdev";
    argv[n++] = bd1;
    argv[n++] = "--export";
    argv[n++] = ex0;
    argv[n++] = "--export";
    argv[n++] = ex1;
    argv[n] = NULL;
    dt_exec(&t, argv, true);
    close(lfd);

    dt_session(&t);
    dt_write_read(&t, 16, w, sizeof(w));
    memset(&t1, 0, sizeof(t1));
    t1.f.sock = -1;
    memcpy(t1.sock, sock1, sizeof(sock1));
    dt_session(&t1);
    dt_read(&t1, 16, r, sizeof(r)); /* its own image: still zeros */
    memset(small, 0, sizeof(small));
    assert_memory_equal(r, small, sizeof(small));
    dt_write_read(&t1, 8, w1, sizeof(w1));
    /* 512 bytes are not a 4096-byte block: an I/O error, as in qsd */
    assert_int_equal(vblk_req(&t1.f, 0, VIRTIO_BLK_T_IN, 9, small,
                              sizeof(small), true, 1, 16, &used),
                     VIRTIO_BLK_S_IOERR);
    vfe_close(&t1.f);
    assert_int_equal(kill(t.pid, SIGTERM), 0);
    dt_expect_exit(&t, 0, "Terminated; 4 reads, 2 writes");
    assert_file_holds(&t, 16, w, sizeof(w));
    unlink(img1);
    unlink(sock1);
    dt_cleanup(&t);
}

/* Whether @pid runs (a zombie does not: not ours to reap). */
static bool alive(pid_t pid)
{
    char path[64], stat[256] = "";
    const char *st;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    f = fopen(path, "r");
    if (f == NULL) {
        return false;
    }
    if (fgets(stat, sizeof(stat), f) == NULL) {
        stat[0] = '\0';
    }
    fclose(f);
    st = strrchr(stat, ')');
    return st != NULL && st[1] == ' ' && st[2] != 'Z' && st[2] != 'X';
}

/* --daemonize: the parent exits 0 once the export listens; the daemon
 * writes --pidfile, serves, and removes the pidfile when it stops (here
 * when its frontend goes, so that no daemon outlives a failed test). */
static void test_daemon_daemonize_and_pidfile(void **state)
{
    char pidfile[128], buf[32];
    const char *args[] = { "--daemonize", "--pidfile", pidfile,
                           "--num-queues", "2", "--exit-on-disconnect",
                           NULL };
    uint8_t w[8 * SEC];
    long pid;
    FILE *f;
    dt t;

    (void)state;
    dt_prepare(&t, 0);
    rmdir(t.dir);
    snprintf(pidfile, sizeof(pidfile), "%s.pid", t.dir);
    dt_spawn(&t, IMG_SECTORS, (const char *const *)args);
    dt_expect_exit(&t, 0, NULL); /* the parent */
    f = fopen(pidfile, "r");
    assert_non_null(f);
    assert_non_null(fgets(buf, sizeof(buf), f));
    fclose(f);
    pid = strtol(buf, NULL, 10);
    assert_true(pid > 1 && kill((pid_t)pid, 0) == 0);
    dt_session(&t);
    dt_write_read(&t, 4, w, sizeof(w));
    vfe_close(&t.f);
    for (int i = 0; i < 10000 && access(pidfile, F_OK) == 0; i++) {
        usleep(1000);
    }
    assert_int_equal(access(pidfile, F_OK), -1);
    for (int i = 0; i < 10000 && alive((pid_t)pid); i++) {
        usleep(1000);
    }
    assert_false(alive((pid_t)pid));
    assert_file_holds(&t, 4, w, sizeof(w));
    dt_cleanup(&t);
}

/* systemd's socket activation (systemd-socket-activate: LISTEN_FDS,
 * the socket on fd 3), the short form without --socket or --fd. */
static void test_daemon_socket_activation(void **state)
{
    const char *const act = "/usr/bin/systemd-socket-activate";
    char listen_arg[128];
    const char *argv[12];
    uint8_t w[8 * SEC];
    int n = 0;
    dt t;

    (void)state;
    if (access(act, X_OK) != 0) {
        skip(); /* (Debian's systemd package) */
    }
    dt_prepare(&t, IMG_SECTORS);
    snprintf(listen_arg, sizeof(listen_arg), "--listen=%s", t.sock);
    argv[n++] = act;
    argv[n++] = listen_arg;
    argv[n++] = daemon_path;
    argv[n++] = "--file";
    argv[n++] = t.img;
    argv[n++] = "--num-queues";
    argv[n++] = "2";
    argv[n] = NULL;
    dt_exec(&t, argv, false);
    for (int i = 0; i < 10000 && access(t.sock, F_OK) != 0; i++) {
        usleep(1000);
    }
    /* (systemd-socket-activate starts the daemon at the first connect) */
    dt_session(&t);
    dt_write_read(&t, 2, w, sizeof(w));
    assert_int_equal(kill(t.pid, SIGTERM), 0);
    dt_expect_exit(&t, 0, "Terminated; 1 reads, 1 writes");
    assert_file_holds(&t, 2, w, sizeof(w));
    dt_cleanup(&t);
}

/*
 * --threads 2: queue 1 on a second loop thread, with an I/O engine of its
 * own; every engine, on epoll and io_uring.  The data goes through both
 * queues, and a frontend that goes and one that comes are served.
 */
static void test_daemon_threads(void **state)
{
    static const char *const engines[][6] = {
        { "--aio", "threads", "--fdmon", "epoll" },
        { "--aio", "io_uring", "--fdmon", "io_uring" },
        { "--aio", "io_uring", "--fdmon", "epoll" },
        { "--aio", "native", "--direct", "--fdmon", "epoll" },
    };

    (void)state;
    for (unsigned i = 0; i < sizeof(engines) / sizeof(engines[0]); i++) {
        const char *extra[12] = { "--num-queues", "2", "--threads", "2" };
        uint8_t w[8 * SEC], w2[8 * SEC];
        unsigned n = 4;
        dt t;

        for (unsigned k = 0; engines[i][k] != NULL; k++) {
            extra[n++] = engines[i][k];
        }
        dt_spawn(&t, IMG_SECTORS, extra);
        assert_non_null(strstr(t.listening, "(2 queues, "));
        assert_non_null(strstr(t.listening, ", 2 threads)"));
        dt_session(&t);
        dt_write_read(&t, 16, w, sizeof(w));
        vfe_close(&t.f);
        dt_session(&t);
        dt_write_read(&t, 24, w2, sizeof(w2));
        vfe_close(&t.f);
        assert_int_equal(kill(t.pid, SIGTERM), 0);
        dt_expect_exit(&t, 0, "Terminated; 2 reads, 2 writes");
        assert_file_holds(&t, 16, w, sizeof(w));
        assert_file_holds(&t, 24, w2, sizeof(w2));
        dt_cleanup(&t);
    }
}

/* qsd's iothreads: --object iothread, and an export's iothread list
 * (queue q on the (q mod count)th). */
static void test_daemon_qsd_iothreads(void **state)
{
    char bd[256], ex[320];
    const char *argv[12];
    uint8_t w[8 * SEC];
    int n = 0;
    dt t;

    (void)state;
    dt_prepare(&t, IMG_SECTORS);
    snprintf(bd, sizeof(bd), "driver=file,node-name=disk0,filename=%s,"
             "aio=io_uring", t.img);
    snprintf(ex, sizeof(ex), "type=vhost-user-blk,id=e0,node-name=disk0,"
             "addr.type=unix,addr.path=%s,writable=on,num-queues=2,"
             "iothread.0=io0,iothread.1=io1", t.sock);
    argv[n++] = daemon_path;
    argv[n++] = "--object";
    argv[n++] = "iothread,id=io0";
    argv[n++] = "--object";
    argv[n++] = "qom-type=iothread,id=io1,poll-max-ns=10000";
    argv[n++] = "--blockdev";
    argv[n++] = bd;
    argv[n++] = "--export";
    argv[n++] = ex;
    argv[n] = NULL;
    dt_exec(&t, argv, true);
    assert_non_null(strstr(t.listening, ", 2 threads)"));
    dt_session(&t);
    dt_write_read(&t, 8, w, sizeof(w));
    vfe_close(&t.f);
    assert_int_equal(kill(t.pid, SIGTERM), 0);
    dt_expect_exit(&t, 0, "Terminated; 1 reads, 1 writes");
    assert_file_holds(&t, 8, w, sizeof(w));
    dt_cleanup(&t);
}

/* What qemu-storage-daemon's form gets wrong exits 1 (as qsd) with one
 * line naming the option or parameter. */
static void test_daemon_qsd_form_errors(void **state)
{
    static const struct {
        const char *opt, *val, *says;
    } bad[] = {
        { "--blockdev", "driver=file,node-name=n,filename=%s,bogus=1",
          "parameter 'bogus' is not supported" },
        { "--blockdev", "driver=nbd,node-name=n,filename=%s",
          "parameter 'driver' expects file" },
        { "--blockdev", "driver=file,node-name=n,filename=%s,aio=native",
          "aio=native was specified, but it requires cache.direct=on" },
        { "--blockdev", "driver=file,filename=%s",
          "parameter 'node-name' is missing" },
        { "--export", "type=nbd,id=e,node-name=n,addr.type=unix,"
                      "addr.path=/tmp/x%s", "parameter 'type' expects" },
        { "--export", "type=vhost-user-blk,id=e,node-name=none,"
                      "addr.type=unix,addr.path=/tmp/x%s",
          "no block node named 'none'" },
        { "--export", "type=vhost-user-blk,id=e,node-name=n,addr.type=unix%s",
          "parameter 'addr.path' is missing" },
        { "--export", "type=vhost-user-blk,id=e,node-name=n,addr.type=unix,"
                      "addr.path=/tmp/x,num-queues=0%s",
          "parameter 'num-queues' expects 1..64" },
        { "--monitor", "stdio%s", "option '--monitor' is not supported" },
        { "--object", "secret,id=s0,data=x%s",
          "only iothread objects are served, not 'secret'" },
        { "--object", "iothread%s", "parameter 'id' is missing" },
        { "--object", "iothread,id=io0,poll-max-ns=-1%s",
          "parameter 'poll-max-ns' expects 0..1000000000" },
        { "--export", "type=vhost-user-blk,id=e,node-name=n,addr.type=unix,"
                      "addr.path=/tmp/x,iothread=io9%s",
          "no iothread named 'io9'" },
    };

    (void)state;
    for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char node[192], val[192];
        const char *argv[8];
        int n = 0;
        dt t;

        dt_prepare(&t, IMG_SECTORS);
        snprintf(node, sizeof(node), "driver=file,node-name=n,filename=%s",
                 t.img);
        snprintf(val, sizeof(val), bad[i].val,
                 strcmp(bad[i].opt, "--blockdev") == 0 ? t.img : "");
        argv[n++] = daemon_path;
        if (strcmp(bad[i].opt, "--export") == 0) {
            argv[n++] = "--blockdev";
            argv[n++] = node;
        }
        argv[n++] = bad[i].opt;
        argv[n++] = val;
        argv[n] = NULL;
        dt_exec(&t, argv, false);
        dt_expect_exit(&t, 1, bad[i].says);
        dt_cleanup(&t);
    }
}

static void test_daemon_bad_arguments(void **state)
{
    static const char *const zero_queues[] = { "--num-queues", "0", NULL };
    static const char *const too_many[] = { "--num-queues", "65", NULL };
    static const char *const stray[] = { "stray", NULL };
    static const char *const bad_aio[] = { "--aio", "posix", NULL };
    static const char *const native_buffered[] = { "--aio", "native", NULL };
    dt t;

    (void)state;
    dt_spawn(&t, 0, bad_aio);
    dt_expect_exit(&t, 2, NULL);
    dt_cleanup(&t);
    dt_spawn(&t, 0, native_buffered);
    dt_expect_exit(&t, 2, NULL);
    dt_cleanup(&t);
    dt_spawn(&t, 0, zero_queues);
    dt_expect_exit(&t, 2, NULL);
    dt_cleanup(&t);
    dt_spawn(&t, 0, too_many);
    dt_expect_exit(&t, 2, NULL);
    dt_cleanup(&t);
    dt_spawn(&t, 0, stray);
    dt_expect_exit(&t, 2, NULL);
    dt_cleanup(&t);
    /* no image file */
    dt_spawn(&t, 0, NULL);
    dt_expect_exit(&t, 3, NULL);
    dt_cleanup(&t);
}

/* --help and --version after other options still exit 0, in either
 * form. */
static void test_daemon_help_and_version_anywhere(void **state)
{
    static const char *const help[] = { "--verbose", "--help", NULL };
    static const char *const version[] = { "--fdmon", "poll", "--version",
                                           NULL };
    const char *qsd_version[] = { daemon_path, "--blockdev",
                                  "driver=file,node-name=d,filename=x",
                                  "--version", NULL };
    dt t;

    (void)state;
    dt_spawn(&t, 0, help);
    dt_expect_exit(&t, 0, "usage: aioloop-vhost-blk");
    dt_cleanup(&t);
    dt_spawn(&t, 0, version);
    dt_expect_exit(&t, 0, "aioloop-vhost-blk " AIOL_VERSION_STRING);
    dt_cleanup(&t);
    dt_prepare(&t, 0);
    dt_exec(&t, qsd_version, false);
    dt_expect_exit(&t, 0, "aioloop-vhost-blk " AIOL_VERSION_STRING);
    dt_cleanup(&t);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_daemon_serves_and_exits_on_disconnect),
        cmocka_unit_test(test_daemon_sigterm_flushes_and_exits),
        cmocka_unit_test(test_daemon_drops_malformed_frontend),
        cmocka_unit_test(test_daemon_read_only),
        cmocka_unit_test(test_daemon_engines),
        cmocka_unit_test(test_daemon_keeps_serving_after_disconnect),
        cmocka_unit_test(test_daemon_qsd_form_two_exports),
        cmocka_unit_test(test_daemon_daemonize_and_pidfile),
        cmocka_unit_test(test_daemon_socket_activation),
        cmocka_unit_test(test_daemon_help_and_version_anywhere),
        cmocka_unit_test(test_daemon_qsd_form_errors),
        cmocka_unit_test(test_daemon_threads),
        cmocka_unit_test(test_daemon_qsd_iothreads),
        cmocka_unit_test(test_daemon_bad_arguments),
    };

    if (argc != 2) {
        fprintf(stderr, "usage: %s DAEMON\n", argv[0]);
        return 2;
    }
    daemon_path = argv[1];
    signal(SIGPIPE, SIG_IGN);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
