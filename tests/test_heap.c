/* SPDX-License-Identifier: MIT */
/*
 * test_heap.c - aioloop/heap.h against a reference model.
 *
 * Random pushes, removals, re-keys and pops on a heap of 2000 elements,
 * checked after every step against an O(n) scan for the minimum, and the
 * index every element keeps checked against its real position, and every
 * slot against its parent.  A keyed
 * heap (the kind timers use) over the same elements takes every step
 * alongside and is checked the same way, its stored keys too.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdbool.h>

#include "aioloop/heap.h"

typedef struct item {
    int64_t key;
    uint64_t seq;       /* ties: first pushed or re-keyed first */
    size_t idx;
    size_t kidx;        /* in the keyed heap */
} item;

typedef struct item_key {
    int64_t key;
    uint64_t seq;
} item_key;

static bool item_before(const item *a, const item *b)
{
    return a->key < b->key || (a->key == b->key && a->seq < b->seq);
}

AIOL_HEAP_HEAD(item_heap, item);
AIOL_HEAP_GENERATE(item_heap, item, idx, item_before)

static bool key_before(const item_key *a, const item_key *b)
{
    return a->key < b->key || (a->key == b->key && a->seq < b->seq);
}

AIOL_HEAP_KEYED_HEAD(item_kheap, item, item_key);
AIOL_HEAP_KEYED_GENERATE(item_kheap, item, kidx, item_key, key_before)

static item_key key_of(const item *it)
{
    return (item_key){ it->key, it->seq };
}

enum { N = 2000, STEPS = 40000 };

static uint64_t rng = 88172645463325252ull;

static uint64_t next_rand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* The reference: the smallest element in the heap, by a full scan. */
static item *model_min(item *items, size_t n)
{
    item *best = NULL;

    for (size_t i = 0; i < n; i++) {
        if (items[i].idx != AIOL_HEAP_NONE &&
            (best == NULL || item_before(&items[i], best))) {
            best = &items[i];
        }
    }
    return best;
}

static void check(struct item_heap *h, struct item_kheap *k, item *items)
{
    item *min = model_min(items, N);
    size_t in = 0;

    for (size_t i = 0; i < N; i++) {
        if (items[i].idx != AIOL_HEAP_NONE) {
            assert_ptr_equal(h->v[items[i].idx], &items[i]);
            assert_ptr_equal(k->v[items[i].kidx].e, &items[i]);
            assert_int_equal(k->v[items[i].kidx].key.key, items[i].key);
            assert_int_equal(k->v[items[i].kidx].key.seq, items[i].seq);
            in++;
        } else {
            assert_true(items[i].kidx == AIOL_HEAP_NONE);
        }
    }
    assert_int_equal(item_heap_count(h), in);
    assert_int_equal(item_kheap_count(k), in);
    /* The heap property itself, so a misplaced slot shows at once and not
     * only when it should have become the top. */
    for (size_t i = 1; i < in; i++) {
        size_t p = (i - 1) / AIOL_HEAP_D;

        assert_false(item_before(h->v[i], h->v[p]));
        assert_false(key_before(&k->v[i].key, &k->v[p].key));
    }
    assert_ptr_equal(item_heap_top(h), min);
    assert_ptr_equal(item_kheap_top(k), min);
    if (min != NULL) {
        assert_int_equal(item_kheap_top_key(k)->seq, min->seq);
    } else {
        assert_null(item_kheap_top_key(k));
    }
}

static void test_heap_against_model(void **state)
{
    static item items[N];
    struct item_heap h = AIOL_HEAP_INITIALIZER;
    struct item_kheap k = AIOL_HEAP_INITIALIZER;
    uint64_t seq = 0;

    (void)state;
    for (size_t i = 0; i < N; i++) {
        items[i].idx = items[i].kidx = AIOL_HEAP_NONE;
    }
    for (int step = 0; step < STEPS; step++) {
        item *it = &items[next_rand() % N];
        int op = (int)(next_rand() % 4);

        if (it->idx == AIOL_HEAP_NONE) {
            it->key = (int64_t)(next_rand() % 500);  /* many equal keys */
            it->seq = seq++;
            assert_int_equal(item_heap_push(&h, it), 0);
            assert_int_equal(item_kheap_push(&k, it, key_of(it)), 0);
        } else if (op == 0) {
            item_heap_remove(&h, it);
            item_kheap_remove(&k, it);
            assert_true(it->idx == AIOL_HEAP_NONE);
            assert_true(it->kidx == AIOL_HEAP_NONE);
        } else if (op == 1) {
            it->key = (int64_t)(next_rand() % 500);
            it->seq = seq++;
            item_heap_update(&h, it);
            item_kheap_update(&k, it, key_of(it));
        } else if (op == 2) {
            item *want = model_min(items, N);

            assert_ptr_equal(item_heap_pop(&h), want);
            assert_ptr_equal(item_kheap_pop(&k), want);
            assert_true(want->idx == AIOL_HEAP_NONE);
            assert_true(want->kidx == AIOL_HEAP_NONE);
        }
        check(&h, &k, items);
    }
    while (item_heap_pop(&h) != NULL) {
        assert_non_null(item_kheap_pop(&k));
    }
    assert_int_equal(item_heap_count(&h), 0);
    assert_null(item_heap_top(&h));
    assert_null(item_kheap_top(&k));
    item_heap_fini(&h);
    item_kheap_fini(&k);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_heap_against_model),
    };

    return cmocka_run_group_tests_name("heap", tests, NULL, NULL);
}
