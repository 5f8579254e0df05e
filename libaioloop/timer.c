/*
 * timer.c - clocks and their timer heaps.
 *
 * Each clock owns a 4-ary min-heap of armed timers ordered by (deadline,
 * arming sequence number).  The sequence number makes equal deadlines fire
 * in arming order and lets a timer run stop at timers armed during the run.
 * Each timer remembers its heap index, so re-arm and cancel are O(log n)
 * with no search.  A 4-ary heap halves the depth of a binary one and keeps
 * a node's children in one or two cache lines (libev's observation).
 */
#include <errno.h>
#include <stdlib.h>

#include "internal.h"

#define HEAP_D 4
#define NOT_ARMED SIZE_MAX

struct aiol_timer {
    aiol_clock *clock;   /* immutable */
    aiol_handler_fn *cb; /* immutable */
    void *opaque;        /* immutable */
    int64_t expire;      /* valid while armed */
    uint64_t seq;        /* arming order, valid while armed */
    size_t idx;          /* heap index or NOT_ARMED */
};

static bool timer_before(const aiol_timer *a, const aiol_timer *b)
{
    return a->expire < b->expire || (a->expire == b->expire && a->seq < b->seq);
}

static void heap_set(aiol_clock *c, size_t i, aiol_timer *t)
{
    c->heap[i] = t;
    t->idx = i;
}

static void sift_up(aiol_clock *c, size_t i)
{
    aiol_timer *t = c->heap[i];

    while (i > 0) {
        size_t parent = (i - 1) / HEAP_D;
        if (!timer_before(t, c->heap[parent])) {
            break;
        }
        heap_set(c, i, c->heap[parent]);
        i = parent;
    }
    heap_set(c, i, t);
}

static void sift_down(aiol_clock *c, size_t i)
{
    aiol_timer *t = c->heap[i];

    for (;;) {
        size_t first = i * HEAP_D + 1, best = i;
        aiol_timer *min = t;

        for (size_t k = first; k < first + HEAP_D && k < c->n; k++) {
            if (timer_before(c->heap[k], min)) {
                min = c->heap[k];
                best = k;
            }
        }
        if (best == i) {
            break;
        }
        heap_set(c, i, min);
        i = best;
    }
    heap_set(c, i, t);
}

/* Takes the timer at heap index @i out of the heap. */
static void heap_remove(aiol_clock *c, size_t i)
{
    aiol_timer *t = c->heap[i];
    aiol_timer *last = c->heap[--c->n];

    t->idx = NOT_ARMED;
    if (last == t) {
        return;
    }
    heap_set(c, i, last);
    if (i > 0 && timer_before(last, c->heap[(i - 1) / HEAP_D])) {
        sift_up(c, i);
    } else {
        sift_down(c, i);
    }
}

static void clock_init(aiol_clock *c, aiol_loop *loop, aiol_clock_now_fn *now,
                       void *opaque)
{
    c->loop = loop;
    c->now = now;
    c->opaque = opaque;
    AIOL_LIST_INSERT_HEAD(&loop->clocks, c, link);
}

int aiol__clocks_init(aiol_loop *loop)
{
    AIOL_LIST_INIT(&loop->clocks);
    loop->mono = calloc(1, sizeof(*loop->mono));
    if (loop->mono == NULL) {
        return -ENOMEM;
    }
    clock_init(loop->mono, loop, NULL, NULL);
    return 0;
}

void aiol__clocks_fini(aiol_loop *loop)
{
    aiol_clock *c;

    if (loop->mono == NULL) {
        return;
    }
    AIOL_LIST_FOREACH(c, &loop->clocks, link) {
        aiol__check(c->n == 0, "loop freed while timers are armed");
        aiol__check(c == loop->mono, "loop freed while clocks still exist");
    }
    AIOL_LIST_REMOVE(loop->mono, link);
    free(loop->mono->heap);
    free(loop->mono);
    loop->mono = NULL;
}

aiol_clock *aiol_loop_clock(aiol_loop *loop)
{
    aiol__check(loop != NULL, "loop is NULL");
    return loop->mono;
}

int aiol_clock_new(aiol_loop *loop, aiol_clock_now_fn *now, void *opaque,
                   aiol_clock **out)
{
    aiol_clock *c;

    aiol__check(loop != NULL, "loop is NULL");
    aiol__check(now != NULL && out != NULL, "now or out is NULL");
    c = calloc(1, sizeof(*c));
    if (c == NULL) {
        return -ENOMEM;
    }
    clock_init(c, loop, now, opaque);
    *out = c;
    return 0;
}

void aiol_clock_free(aiol_clock *clock)
{
    if (clock == NULL) {
        return;
    }
    aiol__check(clock != clock->loop->mono, "the loop's own clock is not freed");
    aiol__check(clock->n == 0, "clock freed while timers are armed");
    AIOL_LIST_REMOVE(clock, link);
    free(clock->heap);
    free(clock);
}

int64_t aiol_clock_get_ns(aiol_clock *clock)
{
    aiol__check(clock != NULL, "clock is NULL");
    return clock->now ? clock->now(clock->opaque) : aiol_clock_now_ns();
}

int aiol_timer_new(aiol_clock *clock, aiol_handler_fn *cb, void *opaque,
                   aiol_timer **out)
{
    aiol_timer *t;

    aiol__check(clock != NULL, "clock is NULL");
    aiol__check(cb != NULL && out != NULL, "cb or out is NULL");
    t = malloc(sizeof(*t));
    if (t == NULL) {
        return -ENOMEM;
    }
    *t = (aiol_timer){ .clock = clock, .cb = cb, .opaque = opaque,
                       .idx = NOT_ARMED };
    *out = t;
    return 0;
}

int aiol_timer_mod(aiol_timer *timer, int64_t expire_ns)
{
    aiol_clock *c;
    size_t i;

    aiol__check(timer != NULL, "timer is NULL");
    c = timer->clock;
    timer->seq = c->seq++;
    if (timer->idx != NOT_ARMED) {
        int64_t old = timer->expire;

        timer->expire = expire_ns;
        if (expire_ns < old) {
            sift_up(c, timer->idx);
        } else {
            sift_down(c, timer->idx);
        }
        return 0;
    }
    if (aiol__reserve(&c->heap, &c->cap, c->n + 1, sizeof(*c->heap)) < 0) {
        return -ENOMEM;
    }
    timer->expire = expire_ns;
    i = c->n++;
    c->heap[i] = timer;
    sift_up(c, i);
    return 0;
}

void aiol_timer_cancel(aiol_timer *timer)
{
    aiol__check(timer != NULL, "timer is NULL");
    if (timer->idx != NOT_ARMED) {
        heap_remove(timer->clock, timer->idx);
    }
}

bool aiol_timer_is_armed(const aiol_timer *timer)
{
    aiol__check(timer != NULL, "timer is NULL");
    return timer->idx != NOT_ARMED;
}

int64_t aiol_timer_expire_ns(const aiol_timer *timer)
{
    aiol__check(timer != NULL, "timer is NULL");
    return timer->idx != NOT_ARMED ? timer->expire : -1;
}

void aiol_timer_free(aiol_timer *timer)
{
    if (timer != NULL) {
        aiol_timer_cancel(timer);
        free(timer);
    }
}

int64_t aiol__timers_deadline(aiol_loop *loop, int64_t now_ns)
{
    int64_t deadline = AIOL_DEADLINE_NONE;
    aiol_clock *c;

    AIOL_LIST_FOREACH(c, &loop->clocks, link) {
        int64_t d;

        if (c->n == 0) {
            continue;
        }
        if (c->now == NULL) {
            d = c->heap[0]->expire;
        } else {
            /* Assume the clock runs no faster than real time. */
            int64_t left = c->heap[0]->expire - c->now(c->opaque);
            d = left <= 0 ? 0 : now_ns + left;
        }
        deadline = d < deadline ? d : deadline;
    }
    return deadline;
}

bool aiol__timers_run(aiol_loop *loop)
{
    bool progress = false;
    aiol_clock *c;

    AIOL_LIST_FOREACH(c, &loop->clocks, link) {
        uint64_t armed_before = c->seq;
        int64_t now;

        if (c->n == 0) {
            continue;
        }
        now = aiol_clock_get_ns(c);
        while (c->n > 0 && c->heap[0]->expire <= now &&
               c->heap[0]->seq < armed_before) {
            aiol_timer *t = c->heap[0];

            heap_remove(c, 0);
            loop->stats.timer_runs++;
            t->cb(t->opaque);
            progress = true;
        }
    }
    return progress;
}
