/* SPDX-License-Identifier: MIT */
/*
 * test_vmm_faults.c - allocation-failure and ioctl-failure sweeps.
 *
 * One workload uses every part of the library: a notifier set with
 * NQ notifiers added in one transaction and kicked, an MSI table with
 * fixed entries, NQ routes and vring-call irqfds, and a coalescer burst
 * with completions.  The allocation sweep (tests/fault.h, the same
 * link-time wrappers as tests/test_faults.c) runs it again and again,
 * failing its 1st allocation, then its 2nd, ... until a run makes fewer
 * allocations than the armed number.  The ioctl sweep does the same with
 * the k-th KVM call (the fake's injection).  In every run each call that
 * fails returns its error, the library's view then equals the fake KVM's
 * (nothing half-applied), and a retry succeeds; at the end everything
 * ran exactly once, and teardown leaves KVM empty (LeakSanitizer in the
 * ASan build reports any leak).
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
#include "fault.h"
#include "vmmtest.h"

#define NQ 40
#define BASE 0xfe004000u

typedef struct work {
    aiol_loop *loop;
    fake_kvm *fk;
    aiol_vmm_kvm kvm;
    aiol_vmm_ioev_group *set;
    aiol_vmm_ioev *n[NQ];
    int kicks[NQ];
    aiol_vmm_msi_table *t;
    uint32_t gsi[NQ];
    aiol_vmm_callfd vc[NQ];
    aiol_vmm_msi_coalescer *c;
    int dones;
    long reported;  /* failures returned to the caller (then retried) */
    int inject;     /* errno the current sweep expects */
} work;

static work W;

static void on_kick(void *opaque)
{
    W.kicks[(intptr_t)opaque]++;
}

static void on_done(void *opaque, int result)
{
    (void)opaque;
    if (result != 0) {
        /* Only in the ioctl sweep: the burst's commit was the failed call,
         * and the routes keep their messages (checked by workload_check). */
        assert_int_equal(result, -W.inject);
    }
    W.dones++;
}

/* Library view == fake KVM, for notifiers and the table. */
static void check_consistent(void)
{
    size_t reg = 0, fds = 0;

    for (int i = 0; i < NQ && W.set != NULL; i++) {
        aiol_vmm_ioev_match m;

        if (W.n[i] != NULL && aiol_vmm_ioev_match_get(W.n[i], &m)) {
            assert_true(fk_ioeventfd_has(W.fk, aiol_vmm_ioev_fd_get(W.n[i]),
                                         &m));
            reg++;
        }
    }
    assert_int_equal(fk_ioeventfd_count(W.fk), reg);
    if (W.t != NULL) {
        for (uint32_t g = 0; g < aiol_vmm_msi_table_limit_get(W.t); g++) {
            aiol_vmm_msi_msg have, kvm;
            int fd = aiol_vmm_msi_irqfd_get(W.t, g, true);

            if (aiol_vmm_msi_msg_get(W.t, g, true, &have) == 0) {
                assert_true(fk_route(W.fk, g, &kvm));
                assert_memory_equal(&have, &kvm, sizeof(have));
            }
            if (fd >= 0) {
                assert_true(fk_irqfd_has(W.fk, fd, g));
                fds++;
            }
        }
    }
    assert_int_equal(fk_irqfd_count(W.fk), fds);
}

/*
 * Runs @expr; on the injected error checks consistency, counts it and
 * runs it again, which must then succeed (the faults are one-shot).
 */
#define TRY(expr)                                                            \
    do {                                                                     \
        int r_ = (expr);                                                     \
        if (r_ == -W.inject) {                                               \
            W.reported++;                                                    \
            check_consistent();                                              \
            r_ = (expr);                                                     \
        }                                                                    \
        if (r_ != 0) {                                                       \
            fail_msg("%s = %d (%s)", #expr, r_, strerror(-r_));              \
        }                                                                    \
    } while (0)

static int add_route(int i)
{
    aiol_vmm_msi_msg m = vt_msg(0, 0x30 + (uint32_t)i);

    return aiol_vmm_msi_route_set(W.t, &m, &W.gsi[i]);
}

static int add_notifier(int i)
{
    aiol_vmm_ioev_match m = vt_mmio(BASE, (uint64_t)i);

    return aiol_vmm_ioev_set(W.n[i], &m);
}

static void workload(void)
{
    struct kvm_irq_routing_entry pin;
    uint64_t seq = 0;

    TRY(aiol_vmm_ioev_group_new(W.loop, &W.kvm, &W.set));
    for (int i = 0; i < NQ; i++) {
        TRY(aiol_vmm_ioev_new(W.set, on_kick, (void *)(intptr_t)i, &W.n[i]));
    }
    aiol_vmm_ioev_txn_begin(W.set);
    for (int i = 0; i < NQ; i++) {
        TRY(add_notifier(i));
    }
    TRY(aiol_vmm_ioev_txn_commit(W.set));
    check_consistent();

    TRY(aiol_vmm_msi_table_new(&W.kvm, 24, &W.t));
    memset(&pin, 0, sizeof(pin));
    pin.type = KVM_IRQ_ROUTING_IRQCHIP;
    pin.u.irqchip.irqchip = 2;
    TRY(aiol_vmm_msi_fixed_set(W.t, &pin, 1));
    for (int i = 0; i < NQ; i++) {
        TRY(add_route(i));
        W.vc[i] = (aiol_vmm_callfd)AIOL_VMM_CALLFD_INIT;
        TRY(aiol_vmm_callfd_set(W.t, &W.vc[i],
                                i % 4 == 3 ? AIOL_VMM_NO_VECTOR
                                                  : (uint16_t)i,
                                       W.gsi[i]));
    }
    TRY(aiol_vmm_msi_table_commit(W.t));
    check_consistent();

    TRY(aiol_vmm_msi_coalescer_new(W.loop, W.t, &W.c));
    for (int i = 0; i < NQ; i++) {
        aiol_vmm_msi_msg m = vt_msg(1, 0x60 + (uint32_t)i);

        TRY(aiol_vmm_msi_coalescer_set(W.c, W.gsi[i], &m, on_done, NULL,
                                       &seq));
    }
    for (int i = 0; i < 400 && W.dones < NQ; i++) {
        aiol_loop_poll_deadline(W.loop, aiol_mono_time_get() + 5000000);
    }
}

static void workload_check(bool ioctl_sweep)
{
    for (int i = 0; i < NQ; i++) {
        assert_true(fk_guest_write(W.fk, false, BASE, 2, (uint64_t)i));
    }
    for (int i = 0; i < 400; i++) {
        bool all = true;

        for (int q = 0; q < NQ; q++) {
            all = all && W.kicks[q] > 0;
        }
        if (all) {
            break;
        }
        aiol_loop_poll_deadline(W.loop, aiol_mono_time_get() + 5000000);
    }
    for (int i = 0; i < NQ; i++) {
        assert_int_equal(W.kicks[i], 1);
    }
    assert_int_equal(W.dones, NQ);
    if (!ioctl_sweep) {
        /* An injected commit error is what the done callbacks see in the
         * ioctl sweep; allocation failures never reach a commit. */
        for (int i = 0; i < NQ; i++) {
            aiol_vmm_msi_msg want = vt_msg(1, 0x60 + (uint32_t)i), got;

            assert_true(fk_route(W.fk, W.gsi[i], &got));
            assert_memory_equal(&got, &want, sizeof(want));
        }
    }
    assert_int_equal(fk_irqfd_count(W.fk), NQ - NQ / 4);
    check_consistent();
}

static void workload_teardown(void)
{
    aiol_vmm_msi_coalescer_free(W.c);
    W.c = NULL;
    for (int i = 0; i < NQ; i++) {
        (void)aiol_vmm_callfd_set(W.t, &W.vc[i], AIOL_VMM_NO_VECTOR,
                                  0);
    }
    assert_int_equal(aiol_vmm_msi_table_commit(W.t), 0);
    for (int i = 0; i < NQ; i++) {
        aiol_vmm_callfd_remove(W.t, &W.vc[i]);
    }
    aiol_vmm_msi_table_free(W.t);
    aiol_vmm_ioev_txn_begin(W.set);
    for (int i = 0; i < NQ; i++) {
        assert_int_equal(aiol_vmm_ioev_remove(W.n[i]), 0);
    }
    assert_int_equal(aiol_vmm_ioev_txn_commit(W.set), 0);
    for (int i = 0; i < NQ; i++) {
        aiol_vmm_ioev_free(W.n[i]);
    }
    aiol_vmm_ioev_group_free(W.set);
    assert_int_equal(fk_ioeventfd_count(W.fk), 0);
    assert_int_equal(fk_irqfd_count(W.fk), 0);
    assert_int_equal(fk_stale_fds(W.fk), 0);
}

static void reset(void)
{
    memset(&W, 0, sizeof(W));
    W.loop = tu_loop_new();
    W.fk = fk_new();
    W.kvm = fk_kvm(W.fk);
}

static void done(void)
{
    fk_free(W.fk);
    aiol_loop_free(W.loop);
}

/* One run with the k-th allocation failing; false once k is past the end. */
static bool alloc_run(long k, long *reported)
{
    bool hit;

    reset();
    W.inject = ENOMEM;
    tf_fail_at(TF_ALLOC, k, ENOMEM);
    workload();
    hit = tf_failed(TF_ALLOC) > 0;
    tf_disarm();
    workload_check(false);
    *reported += W.reported;
    workload_teardown();
    done();
    return hit;
}

static void test_alloc_sweep(void **state)
{
    long k, reported = 0;

    (void)state;
    for (k = 1; alloc_run(k, &reported); k++) {
    }
    printf("allocation sweep: %ld allocations failed one at a time, "
           "%ld reported as -ENOMEM and retried\n", k - 1, reported);
    assert_true(k > NQ); /* the workload did allocate: the sweep ran */
    assert_true(reported > 0);
}

/* One run with the k-th KVM call failing with @err. */
static bool ioctl_run(long k, int err, long *reported)
{
    bool hit;
    long before;

    reset();
    W.inject = err;
    fk_fail_at(W.fk, FK_ANY, k, err);
    workload();
    before = fk_total(W.fk);
    fk_disarm(W.fk);
    hit = before >= k;
    workload_check(true);
    *reported += W.reported;
    workload_teardown();
    done();
    return hit;
}

static void test_ioctl_sweep(void **state)
{
    static const int errs[] = { ENOMEM, EINVAL };

    (void)state;
    for (size_t e = 0; e < sizeof(errs) / sizeof(errs[0]); e++) {
        long k, reported = 0;

        for (k = 1; ioctl_run(k, errs[e], &reported); k++) {
        }
        printf("ioctl sweep (%s): %ld calls failed one at a time, %ld "
               "reported and retried\n", strerror(errs[e]), k - 1, reported);
        assert_true(k > NQ);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_alloc_sweep),
        cmocka_unit_test(test_ioctl_sweep),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
