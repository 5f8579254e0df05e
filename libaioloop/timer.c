/* SPDX-License-Identifier: MIT */
/*
 * timer.c - clocks and their timer heaps.
 *
 * Each clock owns a 4-ary min-heap (aioloop/heap.h) of armed timers ordered
 * by (deadline, arming sequence number).  The sequence number makes equal
 * deadlines fire in arming order and lets a timer run stop at timers armed
 * during the run.  Each timer remembers its heap index, so re-arm and
 * cancel are O(log n) with no search.  The heap is the keyed kind: the
 * key lives in the heap's array next to the timer's pointer and nowhere
 * else, so sifting a million timers compares keys in one array instead of
 * reading a timer per comparison (libev's cached deadline).
 *
 * A timer callback may free its own clock (after the clock's timers), or
 * any other, also from a nested poll.  A run counts itself in the clock's
 * running field while it calls callbacks; aiol_clock_free() of a clock
 * with a run in progress only marks it freed (its heap is empty by then)
 * and leaves it on loop->clocks, so every run on the stack can still read
 * it and step to its successor; the last run to finish with it unlinks
 * and frees it.  O(1): no run or free searches anything.  Polling thread.
 *
 * Deadlines on an embedder's clock become monotonic ones by
 * mono now + (expire - clock now), saturated: whatever the two clocks
 * read (either may be negative), a due timer gives 0 and one beyond the
 * range of int64_t gives AIOL_DEADLINE_NONE, never an overflow.
 */
#include <errno.h>
#include <stdlib.h>

#include "aioloop/heap.h"
#include "timer-priv.h"

/* A clock's armed timers, keyed by (deadline, arming order). */
typedef struct aiol__timer_key {
    int64_t expire;
    uint64_t seq;
} aiol__timer_key;
AIOL_HEAP_KEYED_HEAD(aiol__timer_heap, aiol_timer, aiol__timer_key);

struct aiol_clock {
    aiol_loop *loop;                /* immutable */
    aiol_clock_now_fn *now;         /* immutable; NULL: CLOCK_MONOTONIC */
    void *opaque;                   /* immutable */
    struct aiol__timer_heap heap;   /* polling thread */
    uint64_t seq;                   /* arming counter; polling thread */
    /*
     * Timer runs over this clock on the stack (nested polls); polling
     * thread.  aiol_clock_free() while one is sets freed instead and
     * leaves the clock linked; the last run to end frees it.
     */
    unsigned running;
    bool freed;
    AIOL_LIST_ENTRY(aiol_clock) link; /* loop->clocks; polling thread */
};

struct aiol_timer {
    aiol_clock *clock;   /* immutable */
    aiol_handler_fn *cb; /* immutable */
    void *opaque;        /* immutable */
    size_t idx;          /* heap index or AIOL_HEAP_NONE; the key is there */
};

static bool key_before(const aiol__timer_key *a, const aiol__timer_key *b)
{
    return a->expire < b->expire || (a->expire == b->expire && a->seq < b->seq);
}

AIOL_HEAP_KEYED_GENERATE(aiol__timer_heap, aiol_timer, idx, aiol__timer_key,
                         key_before)

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

aiol_clock *aiol_loop_clock_get(aiol_loop *loop)
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
    aiol__assert_poller(loop);
    c = calloc(1, sizeof(*c));
    if (c == NULL) {
        return -ENOMEM;
    }
    clock_init(c, loop, now, opaque);
    *out = c;
    return 0;
}

/* Unlinks and frees @c; no timer run has it on the stack.  Polling thread. */
static void clock_destroy(aiol_clock *c)
{
    AIOL_LIST_REMOVE(c, link);
    aiol__timer_heap_fini(&c->heap);
    free(c);
}

void aiol_clock_free(aiol_clock *clock)
{
    if (clock == NULL) {
        return;
    }
    aiol__check(clock != clock->loop->mono, "the loop's own clock is not freed");
    aiol__assert_poller(clock->loop);
    aiol__check(!clock->freed, "clock freed twice");
    aiol__check(clock->heap.n == 0, "clock freed while timers are armed");
    if (clock->running != 0) {
        /* From a timer callback: the run frees it (aiol__timers_run_due). */
        clock->freed = true;
        aiol__timer_heap_fini(&clock->heap);
        return;
    }
    clock_destroy(clock);
}

int64_t aiol_clock_time_get(aiol_clock *clock)
{
    aiol__check(clock != NULL, "clock is NULL");
    aiol__check(!clock->freed, "clock was freed");
    return clock->now ? clock->now(clock->opaque) : aiol_mono_time_get();
}

int aiol_timer_new(aiol_clock *clock, aiol_handler_fn *cb, void *opaque,
                   aiol_timer **out)
{
    aiol_timer *t;

    aiol__check(clock != NULL, "clock is NULL");
    aiol__check(!clock->freed, "clock was freed");
    aiol__check(cb != NULL && out != NULL, "cb or out is NULL");
    aiol__assert_poller(clock->loop);
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
    aiol__timer_key key;
    aiol_clock *c;
    int ret;

    aiol__check(timer != NULL, "timer is NULL");
    c = timer->clock;
    aiol__check(!c->freed, "the timer's clock was freed");
    aiol__assert_poller(c->loop);
    key = (aiol__timer_key){ .expire = expire_ns, .seq = c->seq++ };
    if (timer->idx != AIOL_HEAP_NONE) {
        aiol__timer_heap_update(&c->heap, timer, key);
        return 0;
    }
    ret = aiol__timer_heap_push(&c->heap, timer, key);
    c->loop->timers_armed += ret == 0;
    return ret;
}

void aiol_timer_cancel(aiol_timer *timer)
{
    aiol__check(timer != NULL, "timer is NULL");
    aiol__assert_poller(timer->clock->loop);
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

int64_t aiol_timer_deadline_get(const aiol_timer *timer)
{
    aiol__check(timer != NULL, "timer is NULL");
    return timer->idx != AIOL_HEAP_NONE ?
        timer->clock->heap.v[timer->idx].key.expire : -1;
}

void aiol_timer_free(aiol_timer *timer)
{
    if (timer == NULL) {
        return;
    }
    /* A disarmed timer may outlive its clock and loop: touch neither. */
    if (timer->idx != AIOL_HEAP_NONE) {
        aiol_timer_cancel(timer);
    }
    free(timer);
}

/*
 * The CLOCK_MONOTONIC deadline of a timer due at @expire on @c, saturated:
 * 0 (not negative) when it is due or in the past, AIOL_DEADLINE_NONE when
 * it lies beyond int64_t.  An embedder's clock is assumed to run no faster
 * than real time: mono now + (expire - clock now).  Polling thread.
 */
static int64_t clock_deadline(aiol_clock *c, int64_t expire, aiol__now *now)
{
    int64_t cnow, left, d;

    if (c->now == NULL) {
        return expire > 0 ? expire : 0; /* negative: long past */
    }
    cnow = c->now(c->opaque);
    if (__builtin_sub_overflow(expire, cnow, &left)) {
        return expire > cnow ? AIOL_DEADLINE_NONE : 0;
    }
    if (left <= 0) {
        return 0;
    }
    /* mono now >= 0 and left > 0: only an overflow past INT64_MAX. */
    if (__builtin_add_overflow(aiol__now_get(now), left, &d)) {
        return AIOL_DEADLINE_NONE;
    }
    return d;
}

int64_t aiol__timers_deadline_scan(aiol_loop *loop, aiol__now *now)
{
    int64_t deadline = AIOL_DEADLINE_NONE;
    aiol_clock *c;

    AIOL_LIST_FOREACH(c, &loop->clocks, link) {
        const aiol__timer_key *first = aiol__timer_heap_top_key(&c->heap);
        int64_t d;

        if (first == NULL) {
            continue; /* freed clocks too: their heap is empty */
        }
        d = clock_deadline(c, first->expire, now);
        deadline = d < deadline ? d : deadline;
    }
    return deadline;
}

bool aiol__timers_run_due(aiol_loop *loop)
{
    bool progress = false;
    aiol_clock *c, *next;

    for (c = AIOL_LIST_FIRST(&loop->clocks); c != NULL; c = next) {
        uint64_t armed_before = c->seq;
        const aiol__timer_key *k;
        aiol_timer *t;
        int64_t now;

        if (aiol__timer_heap_count(&c->heap) == 0) {
            next = AIOL_LIST_NEXT(c, link);
            continue;
        }
        now = aiol_clock_time_get(c);
        /* Callbacks may free c: it then stays linked until running is 0. */
        c->running++;
        while (!c->freed && (k = aiol__timer_heap_top_key(&c->heap)) != NULL &&
               k->expire <= now && k->seq < armed_before) {
            t = aiol__timer_heap_pop(&c->heap);
            loop->timers_armed--;
            loop->stats.timer_runs++;
            t->cb(t->opaque);
            progress = true;
        }
        /* Still linked, so its successor is current (or NULL). */
        next = AIOL_LIST_NEXT(c, link);
        if (--c->running == 0 && c->freed) {
            clock_destroy(c);
        }
    }
    return progress;
}
