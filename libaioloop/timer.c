/*
 * timer.c - clocks and their timer heaps.
 *
 * Each clock owns a 4-ary min-heap (aioloop/heap.h) of armed timers ordered
 * by (deadline, arming sequence number).  The sequence number makes equal
 * deadlines fire in arming order and lets a timer run stop at timers armed
 * during the run.  Each timer remembers its heap index, so re-arm and
 * cancel are O(log n) with no search.
 */
#include <errno.h>
#include <stdlib.h>

#include "internal.h"

struct aiol_timer {
    aiol_clock *clock;   /* immutable */
    aiol_handler_fn *cb; /* immutable */
    void *opaque;        /* immutable */
    int64_t expire;      /* valid while armed */
    uint64_t seq;        /* arming order, valid while armed */
    size_t idx;          /* heap index or AIOL_HEAP_NONE */
};

static bool timer_before(const aiol_timer *a, const aiol_timer *b)
{
    return a->expire < b->expire || (a->expire == b->expire && a->seq < b->seq);
}

AIOL_HEAP_GENERATE(aiol__timer_heap, aiol_timer, idx, timer_before)

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
        aiol__check(c->heap.n == 0, "loop freed while timers are armed");
        aiol__check(c == loop->mono, "loop freed while clocks still exist");
    }
    AIOL_LIST_REMOVE(loop->mono, link);
    aiol__timer_heap_fini(&loop->mono->heap);
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
    aiol__check(clock->heap.n == 0, "clock freed while timers are armed");
    AIOL_LIST_REMOVE(clock, link);
    aiol__timer_heap_fini(&clock->heap);
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
                       .idx = AIOL_HEAP_NONE };
    *out = t;
    return 0;
}

int aiol_timer_mod(aiol_timer *timer, int64_t expire_ns)
{
    aiol_clock *c;
    int ret;

    aiol__check(timer != NULL, "timer is NULL");
    c = timer->clock;
    timer->seq = c->seq++;
    timer->expire = expire_ns;
    if (timer->idx != AIOL_HEAP_NONE) {
        aiol__timer_heap_update(&c->heap, timer);
        return 0;
    }
    ret = aiol__timer_heap_push(&c->heap, timer);
    c->loop->timers_armed += ret == 0;
    return ret;
}

void aiol_timer_cancel(aiol_timer *timer)
{
    aiol__check(timer != NULL, "timer is NULL");
    if (timer->idx != AIOL_HEAP_NONE) {
        aiol__timer_heap_remove(&timer->clock->heap, timer);
        timer->clock->loop->timers_armed--;
    }
}

bool aiol_timer_is_armed(const aiol_timer *timer)
{
    aiol__check(timer != NULL, "timer is NULL");
    return timer->idx != AIOL_HEAP_NONE;
}

int64_t aiol_timer_expire_ns(const aiol_timer *timer)
{
    aiol__check(timer != NULL, "timer is NULL");
    return timer->idx != AIOL_HEAP_NONE ? timer->expire : -1;
}

void aiol_timer_free(aiol_timer *timer)
{
    if (timer != NULL) {
        aiol_timer_cancel(timer);
        free(timer);
    }
}

int64_t aiol__timers_deadline_scan(aiol_loop *loop, aiol__now *now)
{
    int64_t deadline = AIOL_DEADLINE_NONE;
    aiol_clock *c;

    AIOL_LIST_FOREACH(c, &loop->clocks, link) {
        const aiol_timer *first = aiol__timer_heap_top(&c->heap);
        int64_t d;

        if (first == NULL) {
            continue;
        }
        if (c->now == NULL) {
            d = first->expire;
        } else {
            /* Assume the clock runs no faster than real time. */
            int64_t left = first->expire - c->now(c->opaque);
            d = left <= 0 ? 0 : aiol__now_get(now) + left;
        }
        deadline = d < deadline ? d : deadline;
    }
    return deadline;
}

bool aiol__timers_run_due(aiol_loop *loop)
{
    bool progress = false;
    aiol_clock *c;

    AIOL_LIST_FOREACH(c, &loop->clocks, link) {
        uint64_t armed_before = c->seq;
        aiol_timer *t;
        int64_t now;

        if (aiol__timer_heap_count(&c->heap) == 0) {
            continue;
        }
        now = aiol_clock_get_ns(c);
        while ((t = aiol__timer_heap_top(&c->heap)) != NULL &&
               t->expire <= now && t->seq < armed_before) {
            aiol__timer_heap_remove(&c->heap, t);
            loop->timers_armed--;
            loop->stats.timer_runs++;
            t->cb(t->opaque);
            progress = true;
        }
    }
    return progress;
}
