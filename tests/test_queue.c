/* SPDX-License-Identifier: MIT */
/*
 * test_queue.c - unit tests of the intrusive lists in aioloop/queue.h.
 *
 * Every check walks the list into an array and compares it with the
 * expected contents; the walkers also verify the back links (le_prev,
 * tqe_prev, tqh_last), which is where intrusive-list bugs hide.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>

#include "aioloop/queue.h"

#define MAXN 32
#define END (-1) /* terminates expected-contents arrays */

struct node {
    int v;
    AIOL_LIST_ENTRY(node) l;
    AIOL_TAILQ_ENTRY(node) t;
};

AIOL_LIST_HEAD(lhead, node);
AIOL_TAILQ_HEAD(thead, node);

static void nodes_init(struct node *n, int count)
{
    for (int i = 0; i < count; i++) {
        n[i].v = i;
        AIOL_LIST_ENTRY_INIT(&n[i], l);
        AIOL_TAILQ_ENTRY_INIT(&n[i], t);
    }
}

static void check_values(const int *got, int n, const int *want)
{
    int wn = 0;

    while (want[wn] != END) {
        wn++;
    }
    for (int i = 0; i < n && i < wn; i++) {
        if (got[i] != want[i]) {
            fail_msg("element %d: got %d, want %d", i, got[i], want[i]);
        }
    }
    assert_int_equal(n, wn);
}

/* ----------------------------------------------------------------- LIST */

static void expect_list(struct lhead *h, const int *want)
{
    int got[MAXN];
    int n = 0;
    struct node *it;
    struct node **prev_next = &h->lh_first;

    AIOL_LIST_FOREACH(it, h, l) {
        assert_true(n < MAXN);
        assert_true(AIOL_LIST_IS_INSERTED(it, l));
        /* le_prev points at whatever points at us */
        assert_ptr_equal(it->l.le_prev, prev_next);
        assert_ptr_equal(*it->l.le_prev, it);
        prev_next = &it->l.le_next;
        got[n++] = it->v;
    }
    check_values(got, n, want);
    assert_int_equal(AIOL_LIST_EMPTY(h), n == 0);
}

static void test_list_insert(void **state)
{
    struct lhead h = AIOL_LIST_HEAD_INITIALIZER;
    struct node n[6];

    (void)state;
    nodes_init(n, 6);
    for (int i = 0; i < 6; i++) {
        assert_false(AIOL_LIST_IS_INSERTED(&n[i], l));
    }
    expect_list(&h, (int[]){END});

    AIOL_LIST_INSERT_HEAD(&h, &n[2], l);
    assert_true(AIOL_LIST_IS_INSERTED(&n[2], l));
    AIOL_LIST_INSERT_AFTER(&n[2], &n[4], l);        /* after the last */
    AIOL_LIST_INSERT_AFTER(&n[2], &n[3], l);        /* middle */
    expect_list(&h, (int[]){2, 3, 4, END});
    AIOL_LIST_INSERT_BEFORE(&n[2], &n[1], l);       /* before the first */
    assert_ptr_equal(AIOL_LIST_FIRST(&h), &n[1]);
    AIOL_LIST_INSERT_BEFORE(&n[4], &n[5], l);       /* before the last */
    AIOL_LIST_INSERT_HEAD(&h, &n[0], l);
    expect_list(&h, (int[]){0, 1, 2, 3, 5, 4, END});
    assert_ptr_equal(AIOL_LIST_NEXT(&n[3], l), &n[5]);
    assert_null(AIOL_LIST_NEXT(&n[4], l));
    for (int i = 0; i < 6; i++) {
        assert_true(AIOL_LIST_IS_INSERTED(&n[i], l));
    }
}

static void test_list_calloc_not_inserted(void **state)
{
    struct node *e = calloc(1, sizeof(*e));

    (void)state;
    assert_non_null(e);
    assert_false(AIOL_LIST_IS_INSERTED(e, l));
    assert_false(AIOL_TAILQ_IS_INSERTED(e, t));
    free(e);
}

static void test_list_remove(void **state)
{
    struct lhead h;
    struct node n[5];

    (void)state;
    nodes_init(n, 5);
    AIOL_LIST_INIT(&h);
    for (int i = 4; i >= 0; i--) {
        AIOL_LIST_INSERT_HEAD(&h, &n[i], l);
    }
    AIOL_LIST_REMOVE(&n[2], l);                     /* middle */
    assert_false(AIOL_LIST_IS_INSERTED(&n[2], l));
    assert_null(n[2].l.le_next);
    expect_list(&h, (int[]){0, 1, 3, 4, END});
    AIOL_LIST_REMOVE(&n[4], l);                     /* last */
    assert_false(AIOL_LIST_IS_INSERTED(&n[4], l));
    expect_list(&h, (int[]){0, 1, 3, END});
    AIOL_LIST_REMOVE(&n[0], l);                     /* first */
    assert_false(AIOL_LIST_IS_INSERTED(&n[0], l));
    expect_list(&h, (int[]){1, 3, END});
    /* a removed element can be inserted again, anywhere */
    AIOL_LIST_INSERT_AFTER(&n[3], &n[4], l);
    AIOL_LIST_INSERT_BEFORE(&n[1], &n[0], l);
    expect_list(&h, (int[]){0, 1, 3, 4, END});
    AIOL_LIST_REMOVE(&n[0], l);
    AIOL_LIST_REMOVE(&n[1], l);
    AIOL_LIST_REMOVE(&n[4], l);
    AIOL_LIST_REMOVE(&n[3], l);
    expect_list(&h, (int[]){END});
}

static void test_list_safe_remove(void **state)
{
    struct lhead h = AIOL_LIST_HEAD_INITIALIZER;
    struct node n[4];

    (void)state;
    nodes_init(n, 4);
    for (int i = 2; i >= 0; i--) {
        AIOL_LIST_INSERT_HEAD(&h, &n[i], l);
    }
    /* n[3] is in no list: no-op, list and element untouched */
    AIOL_LIST_SAFE_REMOVE(&n[3], l);
    assert_false(AIOL_LIST_IS_INSERTED(&n[3], l));
    assert_null(n[3].l.le_next);
    expect_list(&h, (int[]){0, 1, 2, END});
    /* inserted: removed */
    AIOL_LIST_SAFE_REMOVE(&n[1], l);
    assert_false(AIOL_LIST_IS_INSERTED(&n[1], l));
    expect_list(&h, (int[]){0, 2, END});
    /* a second SAFE_REMOVE of the same element is a no-op */
    AIOL_LIST_SAFE_REMOVE(&n[1], l);
    expect_list(&h, (int[]){0, 2, END});
    AIOL_LIST_SAFE_REMOVE(&n[0], l);
    AIOL_LIST_SAFE_REMOVE(&n[2], l);
    expect_list(&h, (int[]){END});
}

static void test_list_foreach_safe_free(void **state)
{
    struct lhead h = AIOL_LIST_HEAD_INITIALIZER;
    struct node *it, *tmp;
    int freed = 0, visits = 0;

    (void)state;
    for (int i = 7; i >= 0; i--) {
        struct node *e = calloc(1, sizeof(*e));

        assert_non_null(e);
        e->v = i;
        AIOL_LIST_INSERT_HEAD(&h, e, l);
    }
    AIOL_LIST_FOREACH_SAFE(it, &h, l, tmp) {
        visits++;
        if (it->v % 3 == 0) {   /* 0 (head), 3, 6 */
            AIOL_LIST_REMOVE(it, l);
            free(it);
            freed++;
        }
    }
    assert_int_equal(visits, 8);
    assert_int_equal(freed, 3);
    expect_list(&h, (int[]){1, 2, 4, 5, 7, END});
    AIOL_LIST_FOREACH_SAFE(it, &h, l, tmp) {
        AIOL_LIST_REMOVE(it, l);
        free(it);
        freed++;
    }
    assert_int_equal(freed, 8);
    expect_list(&h, (int[]){END});
}

/* ---------------------------------------------------------------- TAILQ */

static void expect_tailq(struct thead *h, const int *want)
{
    int got[MAXN];
    int n = 0;
    struct node *it, *last = NULL;
    struct node **prev_next = &h->tqh_first;

    AIOL_TAILQ_FOREACH(it, h, t) {
        assert_true(n < MAXN);
        assert_true(AIOL_TAILQ_IS_INSERTED(it, t));
        assert_ptr_equal(it->t.tqe_prev, prev_next);
        assert_ptr_equal(*it->t.tqe_prev, it);
        prev_next = &it->t.tqe_next;
        last = it;
        got[n++] = it->v;
    }
    check_values(got, n, want);
    assert_int_equal(AIOL_TAILQ_EMPTY(h), n == 0);
    /* tqh_last points at the last tqe_next, or at tqh_first when empty */
    assert_ptr_equal(h->tqh_last, prev_next);
    assert_ptr_equal(AIOL_TAILQ_LAST(h, node, t), last);
}

static void test_tailq_insert(void **state)
{
    struct thead h;
    struct node n[7];

    (void)state;
    nodes_init(n, 7);
    AIOL_TAILQ_INIT(&h);
    assert_true(AIOL_TAILQ_EMPTY(&h));
    assert_null(AIOL_TAILQ_FIRST(&h));
    assert_null(AIOL_TAILQ_LAST(&h, node, t));
    expect_tailq(&h, (int[]){END});

    AIOL_TAILQ_INSERT_TAIL(&h, &n[2], t);           /* tail into empty */
    expect_tailq(&h, (int[]){2, END});
    AIOL_TAILQ_INSERT_HEAD(&h, &n[1], t);
    AIOL_TAILQ_INSERT_TAIL(&h, &n[4], t);
    expect_tailq(&h, (int[]){1, 2, 4, END});
    AIOL_TAILQ_INSERT_AFTER(&h, &n[2], &n[3], t);   /* middle */
    AIOL_TAILQ_INSERT_AFTER(&h, &n[4], &n[5], t);   /* after the last */
    assert_ptr_equal(AIOL_TAILQ_LAST(&h, node, t), &n[5]);
    AIOL_TAILQ_INSERT_TAIL(&h, &n[6], t);           /* tqh_last followed */
    AIOL_TAILQ_INSERT_HEAD(&h, &n[0], t);
    expect_tailq(&h, (int[]){0, 1, 2, 3, 4, 5, 6, END});
    assert_ptr_equal(AIOL_TAILQ_FIRST(&h), &n[0]);
    assert_ptr_equal(AIOL_TAILQ_NEXT(&n[3], t), &n[4]);
    assert_null(AIOL_TAILQ_NEXT(&n[6], t));
}

static void test_tailq_insert_head_into_empty(void **state)
{
    struct thead h = AIOL_TAILQ_HEAD_INITIALIZER(h);
    struct node n[2];

    (void)state;
    nodes_init(n, 2);
    expect_tailq(&h, (int[]){END});
    AIOL_TAILQ_INSERT_HEAD(&h, &n[0], t);           /* must set tqh_last */
    expect_tailq(&h, (int[]){0, END});
    AIOL_TAILQ_INSERT_TAIL(&h, &n[1], t);
    expect_tailq(&h, (int[]){0, 1, END});
}

static void test_tailq_remove(void **state)
{
    struct thead h;
    struct node n[5];

    (void)state;
    nodes_init(n, 5);
    AIOL_TAILQ_INIT(&h);
    for (int i = 0; i < 4; i++) {
        AIOL_TAILQ_INSERT_TAIL(&h, &n[i], t);
    }
    AIOL_TAILQ_REMOVE(&h, &n[1], t);                /* middle */
    assert_false(AIOL_TAILQ_IS_INSERTED(&n[1], t));
    assert_null(n[1].t.tqe_next);
    expect_tailq(&h, (int[]){0, 2, 3, END});

    AIOL_TAILQ_REMOVE(&h, &n[3], t);                /* last */
    assert_false(AIOL_TAILQ_IS_INSERTED(&n[3], t));
    expect_tailq(&h, (int[]){0, 2, END});
    assert_ptr_equal(AIOL_TAILQ_LAST(&h, node, t), &n[2]);
    /* insert at the tail after removing the last: needs a right tqh_last */
    AIOL_TAILQ_INSERT_TAIL(&h, &n[4], t);
    expect_tailq(&h, (int[]){0, 2, 4, END});

    AIOL_TAILQ_REMOVE(&h, &n[0], t);                /* first */
    assert_false(AIOL_TAILQ_IS_INSERTED(&n[0], t));
    expect_tailq(&h, (int[]){2, 4, END});
    assert_ptr_equal(AIOL_TAILQ_FIRST(&h), &n[2]);

    AIOL_TAILQ_REMOVE(&h, &n[4], t);
    AIOL_TAILQ_REMOVE(&h, &n[2], t);                /* the only one */
    expect_tailq(&h, (int[]){END});
    assert_ptr_equal(h.tqh_last, &h.tqh_first);
    /* the emptied queue works again: tail insert goes first */
    AIOL_TAILQ_INSERT_TAIL(&h, &n[1], t);
    AIOL_TAILQ_INSERT_TAIL(&h, &n[3], t);
    expect_tailq(&h, (int[]){1, 3, END});
}

static void test_tailq_fifo(void **state)
{
    struct thead h = AIOL_TAILQ_HEAD_INITIALIZER(h);
    struct node n[8];
    int order[8], k = 0;

    (void)state;
    nodes_init(n, 8);
    /* interleave pushes and pops: the queue must stay FIFO throughout */
    for (int i = 0; i < 8; i++) {
        AIOL_TAILQ_INSERT_TAIL(&h, &n[i], t);
        if (i % 2 == 1) {
            struct node *first = AIOL_TAILQ_FIRST(&h);

            AIOL_TAILQ_REMOVE(&h, first, t);
            order[k++] = first->v;
        }
    }
    while (!AIOL_TAILQ_EMPTY(&h)) {
        struct node *first = AIOL_TAILQ_FIRST(&h);

        AIOL_TAILQ_REMOVE(&h, first, t);
        order[k++] = first->v;
    }
    check_values(order, k, (int[]){0, 1, 2, 3, 4, 5, 6, 7, END});
    expect_tailq(&h, (int[]){END});
}

static void test_tailq_safe_remove(void **state)
{
    struct thead h = AIOL_TAILQ_HEAD_INITIALIZER(h);
    struct node n[4];

    (void)state;
    nodes_init(n, 4);
    for (int i = 0; i < 3; i++) {
        assert_false(AIOL_TAILQ_IS_INSERTED(&n[i], t));
        AIOL_TAILQ_INSERT_TAIL(&h, &n[i], t);
        assert_true(AIOL_TAILQ_IS_INSERTED(&n[i], t));
    }
    AIOL_TAILQ_SAFE_REMOVE(&h, &n[3], t);           /* in no queue: no-op */
    assert_false(AIOL_TAILQ_IS_INSERTED(&n[3], t));
    expect_tailq(&h, (int[]){0, 1, 2, END});
    AIOL_TAILQ_SAFE_REMOVE(&h, &n[2], t);           /* last: tqh_last moves */
    assert_false(AIOL_TAILQ_IS_INSERTED(&n[2], t));
    expect_tailq(&h, (int[]){0, 1, END});
    AIOL_TAILQ_SAFE_REMOVE(&h, &n[2], t);           /* again: no-op */
    expect_tailq(&h, (int[]){0, 1, END});
    AIOL_TAILQ_INSERT_TAIL(&h, &n[3], t);
    expect_tailq(&h, (int[]){0, 1, 3, END});
    AIOL_TAILQ_SAFE_REMOVE(&h, &n[0], t);
    AIOL_TAILQ_SAFE_REMOVE(&h, &n[1], t);
    AIOL_TAILQ_SAFE_REMOVE(&h, &n[3], t);
    expect_tailq(&h, (int[]){END});
}

static void test_tailq_foreach_safe_free(void **state)
{
    struct thead h = AIOL_TAILQ_HEAD_INITIALIZER(h);
    struct node *it, *tmp;
    int freed = 0, visits = 0;

    (void)state;
    for (int i = 0; i < 8; i++) {
        struct node *e = calloc(1, sizeof(*e));

        assert_non_null(e);
        e->v = i;
        AIOL_TAILQ_INSERT_TAIL(&h, e, t);
    }
    AIOL_TAILQ_FOREACH_SAFE(it, &h, t, tmp) {
        visits++;
        if (it->v == 0 || it->v == 4 || it->v == 7) {  /* first, mid, last */
            AIOL_TAILQ_REMOVE(&h, it, t);
            free(it);
            freed++;
        }
    }
    assert_int_equal(visits, 8);
    expect_tailq(&h, (int[]){1, 2, 3, 5, 6, END});
    AIOL_TAILQ_FOREACH_SAFE(it, &h, t, tmp) {
        AIOL_TAILQ_REMOVE(&h, it, t);
        free(it);
        freed++;
    }
    assert_int_equal(freed, 8);
    expect_tailq(&h, (int[]){END});
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_list_insert),
        cmocka_unit_test(test_list_calloc_not_inserted),
        cmocka_unit_test(test_list_remove),
        cmocka_unit_test(test_list_safe_remove),
        cmocka_unit_test(test_list_foreach_safe_free),
        cmocka_unit_test(test_tailq_insert),
        cmocka_unit_test(test_tailq_insert_head_into_empty),
        cmocka_unit_test(test_tailq_remove),
        cmocka_unit_test(test_tailq_fifo),
        cmocka_unit_test(test_tailq_safe_remove),
        cmocka_unit_test(test_tailq_foreach_safe_free),
    };

    return cmocka_run_group_tests_name("queue", tests, NULL, NULL);
}
