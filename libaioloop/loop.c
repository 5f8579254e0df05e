/*
 * loop.c - loop lifetime, backend selection and one poll iteration.
 *
 * One iteration (aiol_loop_poll_deadline):
 *   1. enter the walking counter, so nothing removed from now on is freed
 *      under our feet;
 *   2. wait on the fd monitor until the deadline (0: just look), collecting
 *      ready handlers on this call's own ready list;
 *   3. dispatch that list;
 *   4. leave the walking counter; the outermost call frees removed handlers.
 * docs/design.md describes the phases, nesting and deletion in full.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"

/* In order of preference for the default choice. */
static const aiol__fdmon_ops *const monitors[] = {
    &aiol__fdmon_epoll,
    &aiol__fdmon_poll,
};
#define N_MONITORS (sizeof(monitors) / sizeof(monitors[0]))

int64_t aiol_clock_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

bool aiol__deadline_to_timespec(int64_t deadline_ns, struct timespec *ts)
{
    int64_t rel = 0;

    if (deadline_ns == AIOL_DEADLINE_NONE) {
        return false;
    }
    if (deadline_ns > 0) {
        rel = deadline_ns - aiol_clock_now_ns();
        if (rel < 0) {
            rel = 0;
        }
    }
    ts->tv_sec = rel / 1000000000;
    ts->tv_nsec = rel % 1000000000;
    return true;
}

static int loop_start(aiol_loop **out, const aiol__fdmon_ops *mon)
{
    aiol_loop *loop = calloc(1, sizeof(*loop));
    int ret;

    if (loop == NULL) {
        return -ENOMEM;
    }
    pthread_mutex_init(&loop->lock, NULL);
    AIOL_LIST_INIT(&loop->deleted);
    loop->mon = mon;
    ret = mon->init(loop);
    if (ret < 0) {
        pthread_mutex_destroy(&loop->lock);
        free(loop);
        return ret;
    }
    *out = loop;
    return 0;
}

static const aiol__fdmon_ops *monitor_find(const char *name)
{
    for (size_t i = 0; i < N_MONITORS; i++) {
        if (strcmp(monitors[i]->name, name) == 0) {
            return monitors[i];
        }
    }
    return NULL;
}

int aiol_loop_new(aiol_loop **out, const char *backend)
{
    const aiol__fdmon_ops *mon;
    const char *env;
    int ret = -ENOSYS;

    aiol__check(out != NULL, "out is NULL");
    if (backend != NULL) {
        mon = monitor_find(backend);
        return mon != NULL ? loop_start(out, mon) : -EINVAL;
    }
    env = getenv("AIOLOOP_BACKEND");
    if (env != NULL && *env != '\0' && (mon = monitor_find(env)) != NULL &&
        loop_start(out, mon) == 0) {
        return 0;
    }
    for (size_t i = 0; i < N_MONITORS; i++) {
        ret = loop_start(out, monitors[i]);
        if (ret == 0 || ret == -ENOMEM || ret == -EMFILE || ret == -ENFILE) {
            break;
        }
    }
    return ret;
}

void aiol_loop_free(aiol_loop *loop)
{
    if (loop == NULL) {
        return;
    }
    aiol__check(atomic_load(&loop->walkers) == 0,
                "loop freed from inside its own poll");
    aiol__handlers_free_all(loop);
    loop->mon->fini(loop);
    pthread_mutex_destroy(&loop->lock);
    free(loop);
}

const char *aiol_loop_backend(const aiol_loop *loop)
{
    aiol__check(loop != NULL, "loop is NULL");
    return loop->mon->name;
}

bool aiol_loop_poll_deadline(aiol_loop *loop, int64_t deadline_ns)
{
    aiol__ready_list ready = AIOL_LIST_HEAD_INITIALIZER;
    bool progress;
    int ret;

    aiol__check(loop != NULL, "loop is NULL");
    aiol__walk_begin(loop);
    loop->stats.iterations++;
    ret = loop->mon->wait(loop, &ready, deadline_ns);
    aiol__check(ret >= 0, "fd monitor wait failed");
    progress = aiol__dispatch_ready(loop, &ready);
    aiol__walk_end(loop);
    return progress;
}

bool aiol_loop_poll(aiol_loop *loop, bool blocking)
{
    return aiol_loop_poll_deadline(loop, blocking ? AIOL_DEADLINE_NONE : 0);
}

void aiol_loop_stats_get(const aiol_loop *loop, aiol_loop_stats *out)
{
    aiol__check(loop != NULL, "loop is NULL");
    aiol__check(out != NULL, "out is NULL");
    *out = loop->stats;
}
