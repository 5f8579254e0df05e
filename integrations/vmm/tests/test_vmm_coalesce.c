/* SPDX-License-Identifier: MIT */
/*
 * test_vmm_coalesce.c - the MSI update coalescer against the fake KVM:
 * a burst is one KVM_SET_GSI_ROUTING, the last update of a route wins,
 * completions and waiters learn the commit's result, errors included,
 * and updates from several threads (run under TSan in CI).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>

#include "fake_kvm.h"
#include "vmmtest.h"

#define NV 32

typedef struct fixture {
    aiol_loop *loop;
    fake_kvm *fk;
    aiol_vmm_kvm kvm;
    aiol_vmm_msi_table *t;
    aiol_vmm_msi_coalescer *c;
    uint32_t gsi[NV];
    int efd[NV];
    int done_calls;
    int done_results[64];
} fixture;

static fixture F;

static int setup(void **state)
{
    (void)state;
    memset(&F, 0, sizeof(F));
    F.loop = tu_loop_new();
    F.fk = fk_new();
    F.kvm = fk_kvm(F.fk);
    assert_int_equal(aiol_vmm_msi_table_new(&F.kvm, 0, &F.t), 0);
    for (int i = 0; i < NV; i++) {
        aiol_vmm_msi_msg m = vt_msg(0, 0x30 + (uint32_t)i);

        F.efd[i] = tu_eventfd();
        assert_int_equal(aiol_vmm_msi_route_set(F.t, &m, &F.gsi[i]), 0);
        assert_int_equal(aiol_vmm_msi_irqfd_set(F.t, F.gsi[i], F.efd[i]),
                         0);
    }
    assert_int_equal(aiol_vmm_msi_table_commit(F.t), 0);
    assert_int_equal(aiol_vmm_msi_coalescer_new(F.loop, F.t, &F.c), 0);
    fk_reset_counts(F.fk);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    aiol_vmm_msi_coalescer_free(F.c);
    aiol_vmm_msi_table_free(F.t);
    for (int i = 0; i < NV; i++) {
        close(F.efd[i]);
    }
    fk_free(F.fk);
    aiol_loop_free(F.loop);
    return 0;
}

static void on_done(void *opaque, int result)
{
    (void)opaque;
    assert_true(F.done_calls < 64);
    F.done_results[F.done_calls++] = result;
}

static void run_until_applied(uint64_t seq)
{
    for (int i = 0; i < 400 && aiol_vmm_msi_coalescer_applied_get(F.c) < seq;
         i++) {
        aiol_loop_poll_deadline(F.loop, aiol_mono_time_get() + 5000000);
    }
    assert_true(aiol_vmm_msi_coalescer_applied_get(F.c) >= seq);
}

/* A burst over every route, three updates each: one commit, last wins. */
static void test_burst_one_commit_last_wins(void **state)
{
    uint64_t seq = 0;

    (void)state;
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < NV; i++) {
            aiol_vmm_msi_msg m = vt_msg((uint32_t)round, 0x40 + (uint32_t)i);

            assert_int_equal(aiol_vmm_msi_coalescer_set(F.c, F.gsi[i], &m,
                                                        NULL, NULL, &seq), 0);
        }
    }
    assert_int_equal(seq, 3 * NV);
    assert_int_equal(fk_total(F.fk), 0); /* nothing until the loop runs */
    run_until_applied(seq);
    assert_int_equal(fk_count(F.fk, FK_SET_GSI_ROUTING), 1);
    assert_int_equal(fk_total(F.fk), 1); /* irqfds stay */
    assert_int_equal(aiol_vmm_msi_coalescer_commits_get(F.c), 1);
    for (int i = 0; i < NV; i++) {
        aiol_vmm_msi_msg want = vt_msg(2, 0x40 + (uint32_t)i), got;

        assert_true(fk_route(F.fk, F.gsi[i], &got));
        assert_memory_equal(&got, &want, sizeof(want));
    }
    /* After the commit, an irqfd delivers the newest message. */
    fk_delivery d;
    tu_eventfd_signal(F.efd[3]);
    assert_int_equal(fk_pump(F.fk), 1);
    assert_int_equal(fk_deliveries(F.fk, &d, 1), 1);
    assert_int_equal(d.msg.data, 0x43);
    assert_int_equal(d.msg.address_lo, 0xfee00000u | (2u << 12));
}

/* Every completion runs once with the result; ENOENT for no route. */
static void test_completions(void **state)
{
    aiol_vmm_msi_msg m = vt_msg(1, 0x51);
    uint64_t seq;

    (void)state;
    assert_int_equal(aiol_vmm_msi_coalescer_set(F.c, F.gsi[0], &m, on_done,
                                                NULL, NULL), 0);
    assert_int_equal(aiol_vmm_msi_coalescer_set(F.c, F.gsi[0], &m, on_done,
                                                NULL, NULL), 0);
    assert_int_equal(aiol_vmm_msi_coalescer_set(F.c, 4000, &m, on_done, NULL,
                                                &seq), 0);
    assert_int_equal(aiol_vmm_msi_coalescer_set(F.c, 5000, &m, on_done, NULL,
                                                NULL), -EINVAL);
    run_until_applied(seq);
    assert_int_equal(F.done_calls, 3);
    assert_int_equal(F.done_results[0], 0);
    assert_int_equal(F.done_results[1], 0);
    assert_int_equal(F.done_results[2], -ENOENT);
    assert_int_equal(fk_count(F.fk, FK_SET_GSI_ROUTING), 1);
}

/* A failing commit: every waiter of the burst gets the error, the routes
 * keep their messages, and the next burst works. */
static void test_error_reaches_waiter(void **state)
{
    aiol_vmm_msi_msg m = vt_msg(7, 0x70), old = vt_msg(0, 0x31), got;
    uint64_t seq;

    (void)state;
    fk_fail_at(F.fk, FK_SET_GSI_ROUTING, 1, ENOMEM);
    assert_int_equal(aiol_vmm_msi_coalescer_set(F.c, F.gsi[1], &m, on_done,
                                                NULL, NULL), 0);
    assert_int_equal(aiol_vmm_msi_coalescer_set(F.c, F.gsi[2], &m, on_done,
                                                NULL, &seq), 0);
    run_until_applied(seq);
    assert_int_equal(F.done_calls, 2);
    assert_int_equal(F.done_results[0], -ENOMEM);
    assert_int_equal(F.done_results[1], -ENOMEM);
    assert_true(fk_route(F.fk, F.gsi[1], &got));
    assert_memory_equal(&got, &old, sizeof(old));
    assert_false(aiol_vmm_msi_table_is_dirty(F.t));
    assert_int_equal(aiol_vmm_msi_msg_get(F.t, F.gsi[1], false, &got), 0);
    assert_memory_equal(&got, &old, sizeof(old));
    /* Next burst succeeds. */
    assert_int_equal(aiol_vmm_msi_coalescer_set(F.c, F.gsi[1], &m, on_done,
                                                NULL, &seq), 0);
    run_until_applied(seq);
    assert_int_equal(F.done_results[2], 0);
    assert_true(fk_route(F.fk, F.gsi[1], &got));
    assert_memory_equal(&got, &m, sizeof(m));
}

/* Updates queued when the coalescer goes away are cancelled. */
static void test_free_cancels(void **state)
{
    aiol_vmm_msi_msg m = vt_msg(1, 0x51);

    (void)state;
    assert_int_equal(aiol_vmm_msi_coalescer_set(F.c, F.gsi[0], &m, on_done,
                                                NULL, NULL), 0);
    aiol_vmm_msi_coalescer_free(F.c);
    F.c = NULL;
    assert_int_equal(F.done_calls, 1);
    assert_int_equal(F.done_results[0], -ECANCELED);
    assert_int_equal(fk_total(F.fk), 0);
}

#define NTHREADS 4
#define PER_THREAD 200

typedef struct worker {
    int id;
    int failures;
    int stale;
} worker;

static atomic_int workers_done;

/* Each thread owns the routes id, id+4, ...: after its wait returns, KVM
 * must hold exactly its message (no stale route). */
static void *worker_main(void *arg)
{
    worker *w = arg;

    for (int k = 0; k < PER_THREAD; k++) {
        uint32_t g = F.gsi[(w->id + NTHREADS * (k % (NV / NTHREADS))) % NV];
        aiol_vmm_msi_msg m = vt_msg((uint32_t)w->id, (uint32_t)k), got;

        if (aiol_vmm_msi_coalescer_set_wait(F.c, g, &m) != 0) {
            w->failures++;
        }
        if (!fk_route(F.fk, g, &got) || got.data != m.data ||
            got.address_lo != m.address_lo) {
            w->stale++;
        }
    }
    atomic_fetch_add(&workers_done, 1);
    aiol_loop_notify(F.loop);
    return NULL;
}

static void test_cross_thread_waiters(void **state)
{
    pthread_t th[NTHREADS];
    worker w[NTHREADS];
    uint64_t commits;

    (void)state;
    atomic_store(&workers_done, 0);
    for (int i = 0; i < NTHREADS; i++) {
        w[i] = (worker){ .id = i };
        assert_int_equal(pthread_create(&th[i], NULL, worker_main, &w[i]), 0);
    }
    for (int i = 0; i < 200000 && atomic_load(&workers_done) < NTHREADS;
         i++) {
        aiol_loop_poll_deadline(F.loop, aiol_mono_time_get() + 10000000);
    }
    for (int i = 0; i < NTHREADS; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(w[i].failures, 0);
        assert_int_equal(w[i].stale, 0);
    }
    commits = aiol_vmm_msi_coalescer_commits_get(F.c);
    assert_true(commits >= 1 && commits <= NTHREADS * PER_THREAD);
    assert_int_equal((uint64_t)fk_count(F.fk, FK_SET_GSI_ROUTING) <= commits,
                     1);
    assert_int_equal(aiol_vmm_msi_coalescer_applied_get(F.c),
                     NTHREADS * PER_THREAD);
    printf("%d waited updates from %d threads took %llu commits\n",
           NTHREADS * PER_THREAD, NTHREADS, (unsigned long long)commits);
}

static void wait_on_loop_thread(void *arg)
{
    aiol_vmm_msi_msg m = vt_msg(1, 0x51);
    uint64_t seq;

    (void)arg;
    assert_int_equal(aiol_vmm_msi_coalescer_set(F.c, F.gsi[0], &m, NULL,
                                                NULL, &seq), 0);
    run_until_applied(seq);
    aiol_vmm_msi_coalescer_set_wait(F.c, F.gsi[0], &m); /* must abort */
}

static void test_wait_on_loop_thread_aborts(void **state)
{
    char err[512];
    int st;

    (void)state;
    st = tu_run_child(wait_on_loop_thread, NULL, err, sizeof(err));
    assert_true(tu_aborted_with(st, err, "loop thread"));
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_burst_one_commit_last_wins),
        T(test_completions),
        T(test_error_reaches_waiter),
        T(test_free_cancels),
        T(test_cross_thread_waiters),
        T(test_wait_on_loop_thread_aborts),
    };
#undef T

    return cmocka_run_group_tests(tests, NULL, NULL);
}
