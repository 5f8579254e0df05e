/* SPDX-License-Identifier: MIT */
/*
 * test_vhost_daemon.c - the aioloop-vhost-blk daemon, out of process, as
 * a frontend meets it: it serves data over two queues, flushes and exits
 * 0 when the frontend goes or on SIGTERM (removing its socket), drops a
 * malformed frontend without crashing, and refuses bad arguments.
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
#include <sys/stat.h>
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
    int out;              /* the daemon's stdout */
    char dir[64], sock[96], img[96];
    vfe f;
} dt;

static void dt_pump(void *opaque)
{
    (void)opaque;
    usleep(1000); /* the backend runs in its own process */
}

/* Runs the daemon with @extra arguments (NULL-terminated); returns once
 * it listens.  @img_sectors 0: no image file. */
static void dt_spawn(dt *t, unsigned img_sectors, const char *const *extra)
{
    const char *argv[16];
    int pipefd[2], n = 0;
    char line[256];
    ssize_t got;

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
    argv[n++] = daemon_path;
    argv[n++] = "--socket";
    argv[n++] = t->sock;
    argv[n++] = "--file";
    argv[n++] = t->img;
    for (; extra != NULL && *extra != NULL; extra++) {
        argv[n++] = *extra;
    }
    argv[n] = NULL;
    assert_int_equal(pipe2(pipefd, O_CLOEXEC), 0);
    t->pid = fork();
    assert_true(t->pid >= 0);
    if (t->pid == 0) {
        dup2(pipefd[1], STDOUT_FILENO);
        execv(daemon_path, (char *const *)argv);
        _exit(127);
    }
    close(pipefd[1]);
    t->out = pipefd[0];
    if (img_sectors == 0) {
        return;
    }
    got = read(t->out, line, sizeof(line) - 1);
    assert_true(got > 0);
    line[got] = '\0';
    assert_non_null(strstr(line, "listening on"));
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

/* The rest of the daemon's stdout (after dt_wait). */
static void dt_output(dt *t, char *buf, size_t cap)
{
    size_t at = 0;
    ssize_t r;

    while (at + 1 < cap && (r = read(t->out, buf + at, cap - 1 - at)) > 0) {
        at += (size_t)r;
    }
    buf[at] = '\0';
}

/* Waits for the daemon; asserts it exited (not by a signal) with @code
 * and, unless NULL, printed @needle. */
static void dt_expect_exit(dt *t, int code, const char *needle)
{
    char out[512];
    int st = dt_wait(t);

    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), code);
    if (needle != NULL) {
        dt_output(t, out, sizeof(out));
        assert_non_null(strstr(out, needle));
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

/* Connects, negotiates, two queues. */
static void dt_session(dt *t)
{
    assert_int_equal(vfe_connect(&t->f, t->sock, dt_pump, t), 0);
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
    static const char *const args[] = { "--num-queues", "2", NULL };
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
    dt_expect_exit(&t, 0, "frontend disconnected; 1 reads, 1 writes, "
                          "1 flushes");
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
    dt t;

    (void)state;
    dt_spawn(&t, IMG_SECTORS, NULL);
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
                                        NULL };
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

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_daemon_serves_and_exits_on_disconnect),
        cmocka_unit_test(test_daemon_sigterm_flushes_and_exits),
        cmocka_unit_test(test_daemon_drops_malformed_frontend),
        cmocka_unit_test(test_daemon_read_only),
        cmocka_unit_test(test_daemon_engines),
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
