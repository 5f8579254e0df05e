/* SPDX-License-Identifier: MIT */
/*
 * test_vmm_msi.c - MSI route tables, irqfds and the vring-call policy
 * against the fake KVM: ioctl counts and order per commit, the limit,
 * delivery through the current route, and rollback on failures.
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

#define NV 64

typedef struct fixture {
    fake_kvm *fk;
    aiol_vmm_kvm kvm;
    aiol_vmm_msi_table *t;
    uint32_t gsi[NV];
    int efd[NV];
} fixture;

static fixture F;

static int setup(void **state)
{
    (void)state;
    memset(&F, 0, sizeof(F));
    F.fk = fk_new();
    F.kvm = fk_kvm(F.fk);
    assert_int_equal(aiol_vmm_msi_table_new(&F.kvm, 0, &F.t), 0);
    assert_int_equal(aiol_vmm_msi_table_limit_get(F.t), 4096);
    for (int i = 0; i < NV; i++) {
        F.efd[i] = tu_eventfd();
    }
    fk_reset_counts(F.fk);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    aiol_vmm_msi_table_free(F.t);
    assert_int_equal(fk_irqfd_count(F.fk), 0);
    for (int i = 0; i < NV; i++) {
        close(F.efd[i]);
    }
    fk_free(F.fk);
    return 0;
}

/* Every committed route and irqfd of the table is what the fake holds. */
static void assert_consistent(void)
{
    size_t routes = 0, irqfds = 0;

    for (uint32_t g = 0; g < aiol_vmm_msi_table_limit_get(F.t); g++) {
        aiol_vmm_msi_msg have, kvm;
        int fd = aiol_vmm_msi_irqfd_get(F.t, g, true);

        if (aiol_vmm_msi_msg_get(F.t, g, true, &have) == 0) {
            assert_true(fk_route(F.fk, g, &kvm));
            assert_memory_equal(&have, &kvm, sizeof(have));
            routes++;
        } else {
            assert_false(fk_route(F.fk, g, NULL));
        }
        if (fd >= 0) {
            assert_true(fk_irqfd_has(F.fk, fd, g));
            irqfds++;
        }
    }
    assert_int_equal(fk_irqfd_count(F.fk), irqfds);
    (void)routes;
}

static void add_all(bool irqfds)
{
    for (int i = 0; i < NV; i++) {
        aiol_vmm_msi_msg m = vt_msg(0, 0x30 + (uint32_t)i);

        assert_int_equal(aiol_vmm_msi_route_set(F.t, &m, &F.gsi[i]), 0);
        assert_int_equal(F.gsi[i], (uint32_t)i);
        if (irqfds) {
            assert_int_equal(aiol_vmm_msi_irqfd_set(F.t, F.gsi[i],
                                                    F.efd[i]), 0);
        }
    }
    assert_int_equal(fk_total(F.fk), 0);
    assert_true(aiol_vmm_msi_table_is_dirty(F.t));
    assert_int_equal(aiol_vmm_msi_table_commit(F.t), 0);
}

/* N routes with irqfds: one KVM_SET_GSI_ROUTING, then N KVM_IRQFD. */
static void test_batch_one_commit(void **state)
{
    fk_call log[256];
    size_t n;

    (void)state;
    add_all(true);
    assert_int_equal(fk_count(F.fk, FK_SET_GSI_ROUTING), 1);
    assert_int_equal(fk_count(F.fk, FK_IRQFD_ASSIGN), NV);
    assert_int_equal(fk_total(F.fk), NV + 1);
    n = fk_log(F.fk, log, 256);
    assert_int_equal(n, NV + 1);
    assert_int_equal(log[0], FK_SET_GSI_ROUTING); /* routes first */
    assert_int_equal(fk_route_count(F.fk), NV);
    assert_false(aiol_vmm_msi_table_is_dirty(F.t));
    assert_consistent();
}

/* An unchanged table, or changes that cancel out, commit nothing. */
static void test_unchanged_commits_nothing(void **state)
{
    aiol_vmm_msi_msg a = vt_msg(0, 0x30), b = vt_msg(1, 0x99);

    (void)state;
    add_all(true);
    fk_reset_counts(F.fk);
    assert_int_equal(aiol_vmm_msi_table_commit(F.t), 0);
    assert_int_equal(aiol_vmm_msi_msg_set(F.t, F.gsi[0], &a), 0); /* same */
    assert_int_equal(aiol_vmm_msi_irqfd_set(F.t, F.gsi[1], F.efd[1]), 0);
    assert_false(aiol_vmm_msi_table_is_dirty(F.t));
    assert_int_equal(aiol_vmm_msi_table_commit(F.t), 0);
    assert_int_equal(aiol_vmm_msi_msg_set(F.t, F.gsi[0], &b), 0);
    assert_true(aiol_vmm_msi_table_is_dirty(F.t));
    assert_int_equal(aiol_vmm_msi_msg_set(F.t, F.gsi[0], &a), 0); /* back */
    assert_int_equal(aiol_vmm_msi_table_commit(F.t), 0);
    assert_int_equal(fk_total(F.fk), 0);
}

/* A message change keeps the irqfd: one route commit, no KVM_IRQFD. */
static void test_update_keeps_irqfd(void **state)
{
    aiol_vmm_msi_msg b = vt_msg(3, 0x41);
    aiol_vmm_msi_msg got;

    (void)state;
    add_all(true);
    fk_reset_counts(F.fk);
    for (int i = 0; i < NV; i++) {
        assert_int_equal(aiol_vmm_msi_msg_set(F.t, F.gsi[i], &b), 0);
    }
    assert_int_equal(aiol_vmm_msi_table_commit(F.t), 0);
    assert_int_equal(fk_count(F.fk, FK_SET_GSI_ROUTING), 1);
    assert_int_equal(fk_total(F.fk), 1);
    assert_true(fk_route(F.fk, F.gsi[7], &got));
    assert_memory_equal(&got, &b, sizeof(b));
    assert_consistent();
}

/* Removing a route detaches its irqfd first. */
static void test_remove_detaches_first(void **state)
{
    fk_call log[8];

    (void)state;
    add_all(true);
    fk_reset_counts(F.fk);
    assert_int_equal(aiol_vmm_msi_route_remove(F.t, F.gsi[5]), 0);
    assert_int_equal(aiol_vmm_msi_route_remove(F.t, F.gsi[5]), -ENOENT);
    assert_int_equal(aiol_vmm_msi_table_commit(F.t), 0);
    assert_int_equal(fk_log(F.fk, log, 8), 2);
    assert_int_equal(log[0], FK_IRQFD_DEASSIGN);
    assert_int_equal(log[1], FK_SET_GSI_ROUTING);
    assert_false(fk_route(F.fk, F.gsi[5], NULL));
    assert_false(fk_irqfd_has(F.fk, F.efd[5], F.gsi[5]));
    assert_int_equal(aiol_vmm_msi_table_count_get(F.t), NV - 1);
    assert_consistent();
    /* The GSI is reused by the next add. */
    aiol_vmm_msi_msg m = vt_msg(0, 0x77);
    uint32_t g;
    assert_int_equal(aiol_vmm_msi_route_set(F.t, &m, &g), 0);
    assert_int_equal(g, F.gsi[5]);
}

/* The limit: -ENOSPC before any call, the batch stays committable. */
static void test_limit_enospc(void **state)
{
    aiol_vmm_msi_msg m = vt_msg(0, 0x50);
    struct kvm_irq_routing_entry pin;
    uint32_t g;

    (void)state;
    for (uint32_t i = 0; i < 4096; i++) {
        assert_int_equal(aiol_vmm_msi_route_set(F.t, &m, &g), 0);
        assert_int_equal(g, i);
    }
    assert_int_equal(aiol_vmm_msi_route_set(F.t, &m, &g), -ENOSPC);
    /* An IOAPIC pin at the GSI freed below: KVM takes no irqchip pin at
     * a GSI that has an MSI route. */
    memset(&pin, 0, sizeof(pin));
    pin.gsi = 4095;
    pin.type = KVM_IRQ_ROUTING_IRQCHIP;
    pin.u.irqchip.irqchip = 2;
    assert_int_equal(aiol_vmm_msi_fixed_set(F.t, &pin, 1), -ENOSPC);
    assert_int_equal(aiol_vmm_msi_table_count_get(F.t), 4096);
    assert_int_equal(fk_total(F.fk), 0);
    assert_int_equal(aiol_vmm_msi_table_commit(F.t), 0);
    assert_int_equal(fk_count(F.fk, FK_SET_GSI_ROUTING), 1);
    assert_int_equal(fk_route_count(F.fk), 4096);
    /* Make room, and the fixed entry fits. */
    assert_int_equal(aiol_vmm_msi_route_remove(F.t, 4095), 0);
    assert_int_equal(aiol_vmm_msi_fixed_set(F.t, &pin, 1), 0);
    assert_int_equal(aiol_vmm_msi_table_commit(F.t), 0);
    assert_int_equal(fk_route_count(F.fk), 4096);
}

/* A smaller limit reported by KVM is the table's limit. */
static void test_reported_limit(void **state)
{
    aiol_vmm_msi_table *t;
    aiol_vmm_msi_msg m = vt_msg(0, 0x50);
    uint32_t g;

    (void)state;
    fk_set_route_limit(F.fk, 40);
    assert_int_equal(aiol_vmm_msi_table_new(&F.kvm, 24, &t), 0);
    assert_int_equal(aiol_vmm_msi_table_limit_get(t), 40);
    for (int i = 0; i < 16; i++) {
        assert_int_equal(aiol_vmm_msi_route_set(t, &m, &g), 0);
        assert_int_equal(g, 24 + (uint32_t)i);
    }
    assert_int_equal(aiol_vmm_msi_route_set(t, &m, &g), -ENOSPC);
    assert_int_equal(aiol_vmm_msi_table_commit(t), 0);
    aiol_vmm_msi_table_free(t);
    assert_int_equal(aiol_vmm_msi_table_new(&F.kvm, 40, &t), -EINVAL);

    /* PIC and IOAPIC pins: 30 fixed entries leave room for 10 routes,
     * though 16 GSIs are free.  (GSI g: IOAPIC pin g, and pin g % 8 of
     * the PIC master below 8, of the slave from 8.) */
    struct kvm_irq_routing_entry pins[30];
    memset(pins, 0, sizeof(pins));
    for (int i = 0; i < 30; i++) {
        uint32_t g = (uint32_t)(i / 2);

        pins[i].gsi = g;
        pins[i].type = KVM_IRQ_ROUTING_IRQCHIP;
        pins[i].u.irqchip.irqchip = i % 2 ? 2u : g / 8;
        pins[i].u.irqchip.pin = i % 2 ? g : g % 8;
    }
    assert_int_equal(aiol_vmm_msi_table_new(&F.kvm, 24, &t), 0);
    assert_int_equal(aiol_vmm_msi_fixed_set(t, pins, 30), 0);
    for (int i = 0; i < 10; i++) {
        assert_int_equal(aiol_vmm_msi_route_set(t, &m, &g), 0);
    }
    fk_reset_counts(F.fk);
    assert_int_equal(aiol_vmm_msi_route_set(t, &m, &g), -ENOSPC);
    assert_int_equal(aiol_vmm_msi_table_count_get(t), 10);
    assert_int_equal(aiol_vmm_msi_table_commit(t), 0);
    assert_int_equal(fk_route_count(F.fk), 40);
    aiol_vmm_msi_table_free(t);
}

static void deliver(int i, aiol_vmm_msi_msg *got, bool *routed)
{
    fk_delivery d[4];

    fk_clear_deliveries(F.fk);
    tu_eventfd_signal(F.efd[i]);
    assert_int_equal(fk_pump(F.fk), 1);
    assert_int_equal(fk_deliveries(F.fk, d, 4), 1);
    assert_int_equal(d[0].gsi, F.gsi[i]);
    *routed = d[0].routed;
    *got = d[0].msg;
}

/* An irqfd delivers through the route KVM holds now. */
static void test_msi_delivered_current_route(void **state)
{
    aiol_vmm_msi_msg a = vt_msg(0, 0x32), b = vt_msg(2, 0x60), got;
    bool routed;

    (void)state;
    add_all(true);
    deliver(2, &got, &routed);
    assert_true(routed);
    assert_memory_equal(&got, &a, sizeof(a));
    /* Updated but not committed: KVM still delivers the old message. */
    assert_int_equal(aiol_vmm_msi_msg_set(F.t, F.gsi[2], &b), 0);
    deliver(2, &got, &routed);
    assert_memory_equal(&got, &a, sizeof(a));
    assert_int_equal(aiol_vmm_msi_table_commit(F.t), 0);
    deliver(2, &got, &routed);
    assert_memory_equal(&got, &b, sizeof(b));
}

/* A failing irqfd attach undoes the commit: routes and irqfds as before. */
static void test_commit_failure_rolls_back(void **state)
{
    aiol_vmm_msi_msg a = vt_msg(0, 0x30), b = vt_msg(5, 0x90), got;
    int spare = tu_eventfd();
    uint32_t g;

    (void)state;
    add_all(true);
    fk_reset_counts(F.fk);
    /* Change route 0, move route 1's irqfd to a closed fd, add a route. */
    assert_int_equal(aiol_vmm_msi_msg_set(F.t, F.gsi[0], &b), 0);
    assert_int_equal(aiol_vmm_msi_irqfd_set(F.t, F.gsi[1], spare), 0);
    assert_int_equal(aiol_vmm_msi_route_set(F.t, &b, &g), 0);
    close(spare);
    assert_int_equal(aiol_vmm_msi_table_commit(F.t), -EBADF);
    assert_true(fk_route(F.fk, F.gsi[0], &got));
    assert_memory_equal(&got, &a, sizeof(a)); /* the old table again */
    assert_false(fk_route(F.fk, g, NULL));
    assert_true(fk_irqfd_has(F.fk, F.efd[1], F.gsi[1])); /* re-attached */
    assert_true(aiol_vmm_msi_table_is_dirty(F.t));
    assert_consistent();
    /* Retry once the cause is gone. */
    vt_eventfd_at(spare);
    assert_int_equal(aiol_vmm_msi_table_commit(F.t), 0);
    assert_true(fk_route(F.fk, g, NULL));
    assert_true(fk_irqfd_has(F.fk, spare, F.gsi[1]));
    assert_consistent();
    assert_int_equal(aiol_vmm_msi_irqfd_set(F.t, F.gsi[1], -1), 0);
    assert_int_equal(aiol_vmm_msi_table_commit(F.t), 0);
    close(spare);
}

/* KVM_SET_GSI_ROUTING fails: detached irqfds come back; EBUSY too. */
static void test_routing_failure_reattaches(void **state)
{
    (void)state;
    add_all(true);
    assert_int_equal(aiol_vmm_msi_route_remove(F.t, F.gsi[3]), 0);
    fk_fail_at(F.fk, FK_SET_GSI_ROUTING, 1, ENOMEM);
    assert_int_equal(aiol_vmm_msi_table_commit(F.t), -ENOMEM);
    assert_true(fk_route(F.fk, F.gsi[3], NULL));
    assert_true(fk_irqfd_has(F.fk, F.efd[3], F.gsi[3]));
    assert_consistent();
    aiol_vmm_msi_table_abort(F.t);
    assert_false(aiol_vmm_msi_table_is_dirty(F.t));
    assert_int_equal(aiol_vmm_msi_table_count_get(F.t), NV);

    /* One eventfd for two routes: KVM says EBUSY; nothing changes. */
    assert_int_equal(aiol_vmm_msi_irqfd_set(F.t, F.gsi[4], F.efd[5]), 0);
    assert_int_equal(aiol_vmm_msi_table_commit(F.t), -EBUSY);
    assert_true(fk_irqfd_has(F.fk, F.efd[4], F.gsi[4]));
    assert_consistent();
    aiol_vmm_msi_route_abort(F.t, F.gsi[4]);
    assert_false(aiol_vmm_msi_table_is_dirty(F.t));
}

/* Fixed entries go ahead of the MSI routes in every commit. */
static void test_fixed_entries(void **state)
{
    struct kvm_irq_routing_entry pins[2];
    aiol_vmm_msi_table *t;
    aiol_vmm_msi_msg m = vt_msg(0, 0x40);
    uint32_t g;

    (void)state;
    memset(pins, 0, sizeof(pins));
    for (int i = 0; i < 2; i++) {
        pins[i].gsi = (uint32_t)i;
        pins[i].type = KVM_IRQ_ROUTING_IRQCHIP;
        pins[i].u.irqchip.irqchip = 2; /* IOAPIC */
        pins[i].u.irqchip.pin = (uint32_t)i;
    }
    assert_int_equal(aiol_vmm_msi_table_new(&F.kvm, 24, &t), 0);
    assert_int_equal(aiol_vmm_msi_fixed_set(t, pins, 2), 0);
    assert_int_equal(aiol_vmm_msi_route_set(t, &m, &g), 0);
    assert_int_equal(g, 24);
    assert_int_equal(aiol_vmm_msi_table_commit(t), 0);
    assert_int_equal(fk_route_count(F.fk), 3);
    fk_reset_counts(F.fk);
    assert_int_equal(aiol_vmm_msi_fixed_set(t, pins, 2), 0); /* same */
    assert_int_equal(aiol_vmm_msi_table_commit(t), 0);
    assert_int_equal(fk_total(F.fk), 0);
    assert_int_equal(aiol_vmm_msi_fixed_set(t, pins, 1), 0);
    assert_int_equal(aiol_vmm_msi_table_commit(t), 0);
    assert_int_equal(fk_route_count(F.fk), 2);
    aiol_vmm_msi_table_free(t);
}

/* The call policy: no call eventfd or irqfd for a queue without a vector. */
static void test_vring_call_policy(void **state)
{
    enum { NQ = 6, NVEC = 4 };
    aiol_vmm_callfd vc[NQ];

    (void)state;
    add_all(false);
    fk_reset_counts(F.fk);
    for (int q = 0; q < NQ; q++) {
        vc[q] = (aiol_vmm_callfd)AIOL_VMM_CALLFD_INIT;
        uint16_t vec = q < NVEC ? (uint16_t)q : AIOL_VMM_NO_VECTOR;

        assert_int_equal(aiol_vmm_callfd_set(F.t, &vc[q], vec,
                                             F.gsi[q]), 0);
    }
    assert_int_equal(aiol_vmm_msi_table_commit(F.t), 0);
    assert_int_equal(fk_count(F.fk, FK_IRQFD_ASSIGN), NVEC);
    assert_int_equal(fk_count(F.fk, FK_SET_GSI_ROUTING), 0);
    for (int q = 0; q < NQ; q++) {
        if (q < NVEC) {
            assert_true(aiol_vmm_callfd_get(&vc[q]) >= 0);
            assert_true(fk_irqfd_has(F.fk, aiol_vmm_callfd_get(&vc[q]),
                                     F.gsi[q]));
        } else {
            assert_int_equal(aiol_vmm_callfd_get(&vc[q]), -1);
            assert_int_equal(vc[q].efd, -1); /* not even made */
        }
    }
    /* Same vector again: nothing.  The driver clears queue 1's vector. */
    fk_reset_counts(F.fk);
    assert_int_equal(aiol_vmm_callfd_set(F.t, &vc[0], 0, F.gsi[0]), 0);
    assert_int_equal(aiol_vmm_callfd_set(F.t, &vc[1],
                                         AIOL_VMM_NO_VECTOR, 0), 0);
    assert_int_equal(aiol_vmm_callfd_get(&vc[1]), -1);
    assert_int_equal(aiol_vmm_msi_table_commit(F.t), 0);
    assert_int_equal(fk_count(F.fk, FK_IRQFD_DEASSIGN), 1);
    assert_int_equal(fk_total(F.fk), 1);
    /* Queue 2 moves to another vector's route. */
    assert_int_equal(aiol_vmm_callfd_set(F.t, &vc[2], 9, F.gsi[9]), 0);
    assert_int_equal(aiol_vmm_msi_table_commit(F.t), 0);
    assert_true(fk_irqfd_has(F.fk, vc[2].efd, F.gsi[9]));
    assert_false(fk_irqfd_has(F.fk, vc[2].efd, F.gsi[2]));
    aiol_vmm_callfd_remove(F.t, &vc[1]);
    for (int q = 0; q < NQ; q++) {
        assert_int_equal(aiol_vmm_callfd_set(F.t, &vc[q],
                                             AIOL_VMM_NO_VECTOR,
                                             0), 0);
    }
    assert_int_equal(aiol_vmm_msi_table_commit(F.t), 0);
    assert_int_equal(fk_irqfd_count(F.fk), 0);
    for (int q = 0; q < NQ; q++) {
        aiol_vmm_callfd_remove(F.t, &vc[q]);
    }
    assert_consistent();
}

static void release_bound(void *arg)
{
    aiol_vmm_callfd vc = AIOL_VMM_CALLFD_INIT;

    (void)arg;
    add_all(false);
    assert_int_equal(aiol_vmm_callfd_set(F.t, &vc, 0, F.gsi[0]), 0);
    assert_int_equal(aiol_vmm_msi_table_commit(F.t), 0);
    aiol_vmm_callfd_remove(F.t, &vc); /* must abort */
}

static void test_vring_release_bound_aborts(void **state)
{
    char err[512];
    int st;

    (void)state;
    st = tu_run_child(release_bound, NULL, err, sizeof(err));
    assert_true(tu_aborted_with(st, err, "still has a vector"));
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_batch_one_commit),
        T(test_unchanged_commits_nothing),
        T(test_update_keeps_irqfd),
        T(test_remove_detaches_first),
        T(test_limit_enospc),
        T(test_reported_limit),
        T(test_msi_delivered_current_route),
        T(test_commit_failure_rolls_back),
        T(test_routing_failure_reattaches),
        T(test_fixed_entries),
        T(test_vring_call_policy),
        T(test_vring_release_bound_aborts),
    };
#undef T

    return cmocka_run_group_tests(tests, NULL, NULL);
}
