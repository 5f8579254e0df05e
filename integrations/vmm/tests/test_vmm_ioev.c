/* SPDX-License-Identifier: MIT */
/*
 * test_vmm_ioev.c - host-notifier transactions against the fake KVM.
 *
 * Each test counts the KVM_IOEVENTFD calls a commit makes (fake_kvm's
 * counters) and compares the library's view of what is registered with
 * the fake's, after successes and after failures.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "fake_kvm.h"
#include "vmmtest.h"

#define NQ 8
#define BASE 0xfe003000u

typedef struct fixture {
    aiol_loop *loop;
    fake_kvm *fk;
    aiol_vmm_kvm kvm;
    aiol_vmm_ioev_group *set;
    aiol_vmm_ioev *n[NQ];
    int kicks[NQ];
} fixture;

static fixture F;

static void on_kick(void *opaque)
{
    F.kicks[(intptr_t)opaque]++;
}

static int setup(void **state)
{
    (void)state;
    memset(&F, 0, sizeof(F));
    F.loop = tu_loop_new();
    F.fk = fk_new();
    F.kvm = fk_kvm(F.fk);
    assert_int_equal(aiol_vmm_ioev_group_new(F.loop, &F.kvm, &F.set), 0);
    for (int i = 0; i < NQ; i++) {
        assert_int_equal(aiol_vmm_ioev_new(F.set, on_kick, (void *)(intptr_t)i,
                                           &F.n[i]), 0);
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    aiol_vmm_ioev_group_free(F.set);
    assert_int_equal(fk_ioeventfd_count(F.fk), 0);
    fk_free(F.fk);
    aiol_loop_free(F.loop);
    return 0;
}

/* The library's view of every notifier equals the fake's. */
static void assert_consistent(void)
{
    size_t reg = 0;

    for (int i = 0; i < NQ; i++) {
        aiol_vmm_ioev_match m;

        if (F.n[i] != NULL && aiol_vmm_ioev_match_get(F.n[i], &m)) {
            assert_true(fk_ioeventfd_has(F.fk, aiol_vmm_ioev_fd_get(F.n[i]),
                                         &m));
            reg++;
        }
    }
    assert_int_equal(fk_ioeventfd_count(F.fk), reg);
    assert_int_equal(aiol_vmm_ioev_group_count_get(F.set), reg);
    assert_int_equal(fk_stale_fds(F.fk), 0);
}

static void add_all(void)
{
    aiol_vmm_ioev_txn_begin(F.set);
    for (int i = 0; i < NQ; i++) {
        aiol_vmm_ioev_match m = vt_mmio(BASE, (uint64_t)i);

        assert_int_equal(aiol_vmm_ioev_set(F.n[i], &m), 0);
    }
    assert_int_equal(fk_total(F.fk), 0); /* nothing before the commit */
    assert_int_equal(aiol_vmm_ioev_txn_commit(F.set), 0);
}

/* One transaction: one assign per notifier, nothing else. */
static void test_commit_counts(void **state)
{
    (void)state;
    add_all();
    assert_int_equal(fk_count(F.fk, FK_IOEVENTFD_ASSIGN), NQ);
    assert_int_equal(fk_total(F.fk), NQ);
    assert_consistent();

    /* An empty transaction, and one that changes nothing: zero calls. */
    fk_reset_counts(F.fk);
    aiol_vmm_ioev_txn_begin(F.set);
    assert_int_equal(aiol_vmm_ioev_txn_commit(F.set), 0);
    aiol_vmm_ioev_txn_begin(F.set);
    assert_int_equal(aiol_vmm_ioev_remove(F.n[1]), 0);
    aiol_vmm_ioev_match m1 = vt_mmio(BASE, 1);
    assert_int_equal(aiol_vmm_ioev_set(F.n[1], &m1), 0);
    assert_int_equal(aiol_vmm_ioev_txn_commit(F.set), 0);
    assert_int_equal(fk_total(F.fk), 0);

    /* A move: one deassign, one assign. */
    aiol_vmm_ioev_txn_begin(F.set);
    assert_int_equal(aiol_vmm_ioev_remove(F.n[2]), 0);
    aiol_vmm_ioev_match moved = vt_mmio(BASE + 0x100, 2);
    assert_int_equal(aiol_vmm_ioev_set(F.n[2], &moved), 0);
    assert_int_equal(aiol_vmm_ioev_txn_commit(F.set), 0);
    assert_int_equal(fk_count(F.fk, FK_IOEVENTFD_DEASSIGN), 1);
    assert_int_equal(fk_count(F.fk, FK_IOEVENTFD_ASSIGN), 1);
    assert_consistent();

    /* Two notifiers swap matches in one commit: deassigns go first. */
    fk_reset_counts(F.fk);
    aiol_vmm_ioev_match m3 = vt_mmio(BASE, 3), m4 = vt_mmio(BASE, 4);
    aiol_vmm_ioev_txn_begin(F.set);
    assert_int_equal(aiol_vmm_ioev_remove(F.n[3]), 0);
    assert_int_equal(aiol_vmm_ioev_remove(F.n[4]), 0);
    assert_int_equal(aiol_vmm_ioev_set(F.n[3], &m4), 0);
    assert_int_equal(aiol_vmm_ioev_set(F.n[4], &m3), 0);
    assert_int_equal(aiol_vmm_ioev_txn_commit(F.set), 0);
    assert_int_equal(fk_count(F.fk, FK_IOEVENTFD_DEASSIGN), 2);
    assert_int_equal(fk_count(F.fk, FK_IOEVENTFD_ASSIGN), 2);
    assert_consistent();

    /* Stop: every notifier in one transaction, one deassign each. */
    fk_reset_counts(F.fk);
    aiol_vmm_ioev_txn_begin(F.set);
    for (int i = 0; i < NQ; i++) {
        assert_int_equal(aiol_vmm_ioev_remove(F.n[i]), 0);
    }
    assert_int_equal(aiol_vmm_ioev_txn_commit(F.set), 0);
    assert_int_equal(fk_count(F.fk, FK_IOEVENTFD_DEASSIGN), NQ);
    assert_int_equal(fk_total(F.fk), NQ);
    assert_consistent();
}

/* An add then del of a new notifier inside one transaction: no call. */
static void test_add_del_cancels(void **state)
{
    aiol_vmm_ioev *x;
    aiol_vmm_ioev_match m = vt_mmio(BASE + 0x200, 0);

    (void)state;
    assert_int_equal(aiol_vmm_ioev_new(F.set, NULL, NULL, &x), 0);
    aiol_vmm_ioev_txn_begin(F.set);
    assert_int_equal(aiol_vmm_ioev_set(x, &m), 0);
    assert_int_equal(aiol_vmm_ioev_remove(x), 0);
    assert_int_equal(aiol_vmm_ioev_txn_commit(F.set), 0);
    assert_int_equal(fk_total(F.fk), 0);
    aiol_vmm_ioev_free(x); /* never registered: may go */
}

/* Nested transactions: only the outermost commit calls KVM. */
static void test_nested(void **state)
{
    aiol_vmm_ioev_match m = vt_mmio(BASE, 0);

    (void)state;
    aiol_vmm_ioev_txn_begin(F.set);
    aiol_vmm_ioev_txn_begin(F.set);
    assert_int_equal(aiol_vmm_ioev_set(F.n[0], &m), 0);
    assert_int_equal(aiol_vmm_ioev_txn_commit(F.set), 0);
    assert_true(aiol_vmm_ioev_txn_is_open(F.set));
    assert_int_equal(fk_total(F.fk), 0);
    assert_int_equal(aiol_vmm_ioev_txn_commit(F.set), 0);
    assert_false(aiol_vmm_ioev_txn_is_open(F.set));
    assert_int_equal(fk_total(F.fk), 1);
    assert_consistent();
}

/* O(changes): with many registered, a one-notifier change is one call. */
static void test_many_registered_one_change(void **state)
{
    enum { MANY = 1000 };
    aiol_vmm_ioev **many = calloc(MANY, sizeof(*many));

    (void)state;
    assert_non_null(many);
    aiol_vmm_ioev_txn_begin(F.set);
    for (int i = 0; i < MANY; i++) {
        aiol_vmm_ioev_match m = vt_mmio(BASE + 0x10000, (uint64_t)i);

        assert_int_equal(aiol_vmm_ioev_new(F.set, NULL, NULL, &many[i]), 0);
        assert_int_equal(aiol_vmm_ioev_set(many[i], &m), 0);
    }
    assert_int_equal(aiol_vmm_ioev_txn_commit(F.set), 0);
    assert_int_equal(fk_count(F.fk, FK_IOEVENTFD_ASSIGN), MANY);
    fk_reset_counts(F.fk);
    assert_int_equal(aiol_vmm_ioev_remove(many[500]), 0); /* own transaction */
    assert_int_equal(fk_total(F.fk), 1);
    assert_int_equal(aiol_vmm_ioev_group_count_get(F.set), MANY - 1);
    aiol_vmm_ioev_free(many[500]);
    free(many); /* the rest go with the set */
}

/* Duplicates: KVM's EEXIST, the transaction rolled back and retryable. */
static void test_eexist(void **state)
{
    aiol_vmm_ioev_match m0 = vt_mmio(BASE, 0);
    aiol_vmm_ioev_match fresh = vt_mmio(BASE + 0x300, 9);
    aiol_vmm_ioev_match wild = { .addr = BASE, .len = 2 };

    (void)state;
    assert_int_equal(aiol_vmm_ioev_set(F.n[0], &m0), 0);
    /* The same notifier again: refused by the library, no call. */
    fk_reset_counts(F.fk);
    assert_int_equal(aiol_vmm_ioev_set(F.n[0], &m0), -EEXIST);
    assert_int_equal(aiol_vmm_ioev_set(F.n[0], &fresh), -EBUSY);
    assert_int_equal(fk_total(F.fk), 0);

    /* Another notifier at the same match, without a transaction. */
    assert_int_equal(aiol_vmm_ioev_set(F.n[1], &m0), -EEXIST);
    assert_false(aiol_vmm_ioev_match_get(F.n[1], NULL));
    /* A wildcard at the same address collides with a datamatch. */
    assert_int_equal(aiol_vmm_ioev_set(F.n[1], &wild), -EEXIST);
    assert_consistent();

    /* In a transaction: n2 at a fresh match, then n1 duplicates m0. */
    fk_reset_counts(F.fk);
    aiol_vmm_ioev_txn_begin(F.set);
    assert_int_equal(aiol_vmm_ioev_set(F.n[2], &fresh), 0);
    assert_int_equal(aiol_vmm_ioev_set(F.n[1], &m0), 0);
    assert_int_equal(aiol_vmm_ioev_txn_commit(F.set), -EEXIST);
    /* Rolled back: n2's assign (if it ran) was undone. */
    assert_false(aiol_vmm_ioev_match_get(F.n[2], NULL));
    assert_consistent();
    assert_true(aiol_vmm_ioev_txn_is_open(F.set));
    /* Fix the transaction and commit it again. */
    assert_int_equal(aiol_vmm_ioev_remove(F.n[1]), 0);
    assert_int_equal(aiol_vmm_ioev_txn_commit(F.set), 0);
    assert_true(aiol_vmm_ioev_match_get(F.n[2], NULL));
    assert_false(aiol_vmm_ioev_match_get(F.n[1], NULL));
    assert_consistent();
}

/* A bad fd: KVM's EBADF; a move that fails half-way is undone. */
static void test_ebadf(void **state)
{
    aiol_vmm_ioev_match m0 = vt_mmio(BASE, 0), m1 = vt_mmio(BASE, 1);
    aiol_vmm_ioev_match to = vt_mmio(BASE + 0x400, 0);
    int fd1 = aiol_vmm_ioev_fd_get(F.n[1]);

    (void)state;
    assert_int_equal(aiol_vmm_ioev_set(F.n[0], &m0), 0);
    close(fd1); /* behind the library's back */
    assert_int_equal(aiol_vmm_ioev_set(F.n[1], &m1), -EBADF);
    assert_consistent();

    /* n0 moves away (deassign ok) while n1 fails: n0 is put back. */
    fk_reset_counts(F.fk);
    aiol_vmm_ioev_txn_begin(F.set);
    assert_int_equal(aiol_vmm_ioev_remove(F.n[0]), 0);
    assert_int_equal(aiol_vmm_ioev_set(F.n[0], &to), 0);
    assert_int_equal(aiol_vmm_ioev_set(F.n[1], &m1), 0);
    assert_int_equal(aiol_vmm_ioev_txn_commit(F.set), -EBADF);
    aiol_vmm_ioev_match now;
    assert_true(aiol_vmm_ioev_match_get(F.n[0], &now));
    assert_int_equal(now.addr, BASE);
    assert_true(fk_ioeventfd_has(F.fk, aiol_vmm_ioev_fd_get(F.n[0]), &m0));
    assert_false(fk_ioeventfd_has(F.fk, aiol_vmm_ioev_fd_get(F.n[0]), &to));
    assert_consistent();
    /* The fd comes back: the same transaction now commits. */
    vt_eventfd_at(fd1);
    assert_int_equal(aiol_vmm_ioev_txn_commit(F.set), 0);
    assert_true(fk_ioeventfd_has(F.fk, aiol_vmm_ioev_fd_get(F.n[0]), &to));
    assert_true(aiol_vmm_ioev_match_get(F.n[1], NULL));
    assert_consistent();
}

/* Invalid matches are refused before any call. */
static void test_einval(void **state)
{
    aiol_vmm_ioev_match bad_len = { .addr = BASE, .len = 3 };
    aiol_vmm_ioev_match dm0 = { .addr = BASE, .len = 0, .datamatch = true };
    aiol_vmm_ioev_match wrap = { .addr = UINT64_MAX - 1, .len = 4 };
    aiol_vmm_ioev_match any = { .addr = BASE, .len = 0 };

    (void)state;
    assert_int_equal(aiol_vmm_ioev_set(F.n[0], &bad_len), -EINVAL);
    assert_int_equal(aiol_vmm_ioev_set(F.n[0], &dm0), -EINVAL);
    assert_int_equal(aiol_vmm_ioev_set(F.n[0], &wrap), -EINVAL);
    assert_int_equal(aiol_vmm_ioev_remove(F.n[0]), -ENOENT);
    assert_int_equal(fk_total(F.fk), 0);
    assert_int_equal(aiol_vmm_ioev_set(F.n[0], &any), 0); /* any length */
    assert_true(fk_guest_write(F.fk, false, BASE, 4, 77));
}

/* A guest kick runs the notifier's callback on the loop, once. */
static void test_kick_runs_handler(void **state)
{
    aiol_vmm_ioev_match m = vt_mmio(BASE, 5);

    (void)state;
    assert_int_equal(aiol_vmm_ioev_set(F.n[5], &m), 0);
    assert_false(fk_guest_write(F.fk, false, BASE, 2, 4)); /* other data */
    assert_true(fk_guest_write(F.fk, false, BASE, 2, 5));
    vt_poll_until(F.loop, &F.kicks[5], 1);
    assert_int_equal(F.kicks[5], 1);
    /* Drained: no second run without a second kick. */
    aiol_loop_poll(F.loop, false);
    assert_int_equal(F.kicks[5], 1);
    for (int i = 0; i < NQ; i++) {
        assert_int_equal(F.kicks[i], i == 5 ? 1 : 0);
    }
    assert_int_equal(aiol_vmm_ioev_remove(F.n[5]), 0);
    assert_false(fk_guest_write(F.fk, false, BASE, 2, 5));
}

static void free_registered(void *arg)
{
    aiol_vmm_ioev_match m = vt_mmio(BASE, 0);

    (void)arg;
    assert_int_equal(aiol_vmm_ioev_set(F.n[0], &m), 0);
    aiol_vmm_ioev_free(F.n[0]); /* must abort */
}

static void free_pending_del(void *arg)
{
    aiol_vmm_ioev_match m = vt_mmio(BASE, 0);

    (void)arg;
    assert_int_equal(aiol_vmm_ioev_set(F.n[0], &m), 0);
    aiol_vmm_ioev_txn_begin(F.set);
    assert_int_equal(aiol_vmm_ioev_remove(F.n[0]), 0);
    aiol_vmm_ioev_free(F.n[0]); /* deassign not committed yet: must abort */
}

/* No eventfd is closed before its deassign is committed. */
static void test_free_registered_aborts(void **state)
{
    char err[512];
    int st;

    (void)state;
    st = tu_run_child(free_registered, NULL, err, sizeof(err));
    assert_true(tu_aborted_with(st, err, "still registered"));
    st = tu_run_child(free_pending_del, NULL, err, sizeof(err));
    assert_true(tu_aborted_with(st, err, "still registered"));
}

/* Freeing the set deassigns what is registered, then closes. */
static void test_set_free_deassigns(void **state)
{
    (void)state;
    add_all();
    fk_reset_counts(F.fk);
    aiol_vmm_ioev_group_free(F.set);
    assert_int_equal(fk_count(F.fk, FK_IOEVENTFD_DEASSIGN), NQ);
    assert_int_equal(fk_ioeventfd_count(F.fk), 0);
    assert_int_equal(aiol_vmm_ioev_group_new(F.loop, &F.kvm, &F.set), 0);
}

/* Abort drops the changes without a call. */
static void test_abort(void **state)
{
    aiol_vmm_ioev_match m = vt_mmio(BASE, 0);

    (void)state;
    aiol_vmm_ioev_txn_begin(F.set);
    assert_int_equal(aiol_vmm_ioev_set(F.n[0], &m), 0);
    aiol_vmm_ioev_txn_abort(F.set);
    assert_false(aiol_vmm_ioev_txn_is_open(F.set));
    assert_int_equal(fk_total(F.fk), 0);
    aiol_vmm_ioev_free(F.n[0]);
    F.n[0] = NULL;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_commit_counts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_add_del_cancels, setup, teardown),
        cmocka_unit_test_setup_teardown(test_nested, setup, teardown),
        cmocka_unit_test_setup_teardown(test_many_registered_one_change,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_eexist, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ebadf, setup, teardown),
        cmocka_unit_test_setup_teardown(test_einval, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kick_runs_handler, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_free_registered_aborts, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_set_free_deassigns, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_abort, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
