/* SPDX-License-Identifier: MIT */
/*
 * test_vmm_kvm.c - the VMM library on real /dev/kvm (KVM_CREATE_VM +
 * KVM_CREATE_IRQCHIP; no vCPU runs, so PVM hosts do).  Exits 77 with a
 * message where /dev/kvm is absent or cannot make a VM.
 *
 * KVM cannot be asked what it holds, so registrations are checked by
 * their effects: a match KVM still holds makes a new registration fail
 * with EEXIST, a freed one lets it succeed.  Every ioctl goes through a
 * counting wrapper around aiol_vmm_kvm_sys_ops.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <sys/ioctl.h>

#include "vmmtest.h"

#define BASE 0xfe005000u

typedef struct counting {
    long ioeventfd, routing, irqfd, other;
} counting;

static int count_ioctl(void *opaque, int fd, unsigned long req, void *arg)
{
    counting *c = opaque;

    switch (req) {
    case KVM_IOEVENTFD: c->ioeventfd++; break;
    case KVM_SET_GSI_ROUTING: c->routing++; break;
    case KVM_IRQFD: c->irqfd++; break;
    default: c->other++; break;
    }
    return aiol_vmm_kvm_sys_ops.ioctl(NULL, fd, req, arg);
}

static const aiol_vmm_kvm_ops counting_ops = { .ioctl = count_ioctl };

typedef struct fixture {
    int vm;
    counting cnt;
    aiol_vmm_kvm kvm;
    aiol_loop *loop;
} fixture;

static fixture F;

static int setup(void **state)
{
    (void)state;
    memset(&F, 0, sizeof(F));
    assert_int_equal(aiol_vmm_vm_new(true, &F.vm), 0);
    F.kvm = (aiol_vmm_kvm){ .ops = &counting_ops, .opaque = &F.cnt,
                        .vm_fd = F.vm };
    F.loop = tu_loop_new();
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    aiol_loop_free(F.loop);
    close(F.vm);
    return 0;
}

static void reset_counts(void)
{
    memset(&F.cnt, 0, sizeof(F.cnt));
}

/* Registration in one transaction; EEXIST; rollback; EBADF. */
static void test_ioeventfd(void **state)
{
    enum { N = 16 };
    aiol_vmm_ioev_group *set;
    aiol_vmm_ioev *n[N], *x, *y;
    aiol_vmm_ioev_match dup = vt_mmio(BASE, 0), fresh = vt_mmio(BASE + 8, 0);

    (void)state;
    assert_int_equal(aiol_vmm_ioev_group_new(F.loop, &F.kvm, &set), 0);
    aiol_vmm_ioev_txn_begin(set);
    for (int i = 0; i < N; i++) {
        aiol_vmm_ioev_match m = vt_mmio(BASE, (uint64_t)i);

        assert_int_equal(aiol_vmm_ioev_new(set, NULL, NULL, &n[i]), 0);
        assert_int_equal(aiol_vmm_ioev_set(n[i], &m), 0);
    }
    assert_int_equal(aiol_vmm_ioev_txn_commit(set), 0);
    assert_int_equal(F.cnt.ioeventfd, N);
    assert_int_equal(aiol_vmm_ioev_group_count_get(set), N);

    /* Nothing changed: zero ioctls. */
    reset_counts();
    aiol_vmm_ioev_txn_begin(set);
    assert_int_equal(aiol_vmm_ioev_remove(n[0]), 0);
    assert_int_equal(aiol_vmm_ioev_set(n[0], &dup), 0);
    assert_int_equal(aiol_vmm_ioev_txn_commit(set), 0);
    assert_int_equal(F.cnt.ioeventfd, 0);

    /* A duplicate: KVM's EEXIST; x's assign in the same commit undone. */
    assert_int_equal(aiol_vmm_ioev_new(set, NULL, NULL, &x), 0);
    assert_int_equal(aiol_vmm_ioev_new(set, NULL, NULL, &y), 0);
    aiol_vmm_ioev_txn_begin(set);
    assert_int_equal(aiol_vmm_ioev_set(x, &fresh), 0);
    assert_int_equal(aiol_vmm_ioev_set(y, &dup), 0);
    assert_int_equal(aiol_vmm_ioev_txn_commit(set), -EEXIST);
    aiol_vmm_ioev_txn_abort(set);
    assert_false(aiol_vmm_ioev_match_get(x, NULL));
    assert_int_equal(aiol_vmm_ioev_set(y, &fresh), 0); /* KVM freed it */
    assert_int_equal(aiol_vmm_ioev_remove(y), 0);

    /* A bad fd: KVM's EBADF, and nothing registered. */
    int fd = aiol_vmm_ioev_fd_get(x);
    close(fd);
    assert_int_equal(aiol_vmm_ioev_set(x, &fresh), -EBADF);
    assert_false(aiol_vmm_ioev_match_get(x, NULL));
    vt_eventfd_at(fd);

    reset_counts();
    aiol_vmm_ioev_txn_begin(set);
    for (int i = 0; i < N; i++) {
        assert_int_equal(aiol_vmm_ioev_remove(n[i]), 0);
    }
    assert_int_equal(aiol_vmm_ioev_txn_commit(set), 0);
    assert_int_equal(F.cnt.ioeventfd, N);
    assert_int_equal(aiol_vmm_ioev_set(y, &dup), 0); /* KVM freed them all */
    assert_int_equal(aiol_vmm_ioev_remove(y), 0);
    for (int i = 0; i < N; i++) {
        aiol_vmm_ioev_free(n[i]);
    }
    aiol_vmm_ioev_group_free(set);
}

/* Routes with irqfds: one KVM_SET_GSI_ROUTING per commit; unchanged: 0. */
static void test_routes(void **state)
{
    enum { N = 64 };
    aiol_vmm_msi_table *t;
    uint32_t gsi[N];
    int efd[N];
    aiol_vmm_msi_msg b = vt_msg(1, 0x45);

    (void)state;
    assert_int_equal(aiol_vmm_msi_table_new(&F.kvm, 24, &t), 0);
    /* KVM_MAX_IRQ_ROUTES */
    assert_int_equal(aiol_vmm_msi_table_limit_get(t), 4096);
    reset_counts();
    for (int i = 0; i < N; i++) {
        aiol_vmm_msi_msg m = vt_msg(0, 0x30 + (uint32_t)i);

        efd[i] = tu_eventfd();
        assert_int_equal(aiol_vmm_msi_route_set(t, &m, &gsi[i]), 0);
        assert_int_equal(aiol_vmm_msi_irqfd_set(t, gsi[i], efd[i]), 0);
    }
    assert_int_equal(aiol_vmm_msi_table_commit(t), 0);
    assert_int_equal(F.cnt.routing, 1);
    assert_int_equal(F.cnt.irqfd, N);
    reset_counts();
    assert_int_equal(aiol_vmm_msi_table_commit(t), 0);
    for (int i = 0; i < N; i++) {
        assert_int_equal(aiol_vmm_msi_msg_set(t, gsi[i], &b), 0);
    }
    assert_int_equal(aiol_vmm_msi_table_commit(t), 0);
    assert_int_equal(F.cnt.routing, 1);
    assert_int_equal(F.cnt.irqfd, 0);

    /* EBUSY: one eventfd as the irqfd of two routes; rolled back. */
    reset_counts();
    assert_int_equal(aiol_vmm_msi_irqfd_set(t, gsi[1], efd[0]), 0);
    assert_int_equal(aiol_vmm_msi_table_commit(t), -EBUSY);
    aiol_vmm_msi_table_abort(t);
    /* efd[1] is attached again: attaching it elsewhere is EBUSY too. */
    aiol_vmm_msi_msg m = vt_msg(0, 0x99);
    uint32_t g;
    assert_int_equal(aiol_vmm_msi_route_set(t, &m, &g), 0);
    assert_int_equal(aiol_vmm_msi_irqfd_set(t, g, efd[1]), 0);
    assert_int_equal(aiol_vmm_msi_table_commit(t), -EBUSY);
    assert_int_equal(aiol_vmm_msi_irqfd_get(t, gsi[1], true), efd[1]);

    /* EBADF: a closed irqfd; the table stays dirty and retryable. */
    int spare = tu_eventfd();
    assert_int_equal(aiol_vmm_msi_irqfd_set(t, g, spare), 0);
    close(spare);
    assert_int_equal(aiol_vmm_msi_table_commit(t), -EBADF);
    assert_true(aiol_vmm_msi_table_is_dirty(t));
    vt_eventfd_at(spare);
    assert_int_equal(aiol_vmm_msi_table_commit(t), 0);
    assert_int_equal(aiol_vmm_msi_irqfd_get(t, g, true), spare);

    aiol_vmm_msi_table_free(t);  /* detaches every irqfd */
    for (int i = 0; i < N; i++) {
        close(efd[i]);
    }
    close(spare);
}

/* The limit: the library stops at 4096 with ENOSPC; KVM says EINVAL. */
static void test_route_limit(void **state)
{
    aiol_vmm_msi_table *t;
    aiol_vmm_msi_msg m = vt_msg(0, 0x50);
    uint32_t g;
    struct kvm_irq_routing *rt;

    (void)state;
    assert_int_equal(aiol_vmm_msi_table_new(&F.kvm, 0, &t), 0);
    for (uint32_t i = 0; i < 4096; i++) {
        assert_int_equal(aiol_vmm_msi_route_set(t, &m, &g), 0);
    }
    reset_counts();
    assert_int_equal(aiol_vmm_msi_route_set(t, &m, &g), -ENOSPC);
    assert_int_equal(F.cnt.routing, 0);
    assert_int_equal(aiol_vmm_msi_table_commit(t), 0);
    assert_int_equal(F.cnt.routing, 1);
    aiol_vmm_msi_table_free(t);

    /* What KVM itself does with 4097 entries. */
    rt = calloc(1, sizeof(*rt) + 4097 * sizeof(rt->entries[0]));
    assert_non_null(rt);
    rt->nr = 4097;
    for (uint32_t i = 0; i < 4097; i++) {
        rt->entries[i].gsi = i;
        rt->entries[i].type = KVM_IRQ_ROUTING_MSI;
        rt->entries[i].u.msi.address_lo = 0xfee00000u;
    }
    assert_int_equal(aiol_vmm_kvm_sys_ops.ioctl(NULL, F.vm,
                                                KVM_SET_GSI_ROUTING, rt),
                     -EINVAL);
    free(rt);
}

/* The coalescer on real KVM: a burst is one KVM_SET_GSI_ROUTING. */
static void test_coalescer(void **state)
{
    enum { N = 128 };
    aiol_vmm_msi_table *t;
    aiol_vmm_msi_coalescer *c;
    uint32_t gsi[N];
    uint64_t seq = 0;

    (void)state;
    assert_int_equal(aiol_vmm_msi_table_new(&F.kvm, 24, &t), 0);
    for (int i = 0; i < N; i++) {
        aiol_vmm_msi_msg m = vt_msg(0, 0x30);

        assert_int_equal(aiol_vmm_msi_route_set(t, &m, &gsi[i]), 0);
    }
    assert_int_equal(aiol_vmm_msi_table_commit(t), 0);
    assert_int_equal(aiol_vmm_msi_coalescer_new(F.loop, t, &c), 0);
    reset_counts();
    for (int i = 0; i < N; i++) {
        aiol_vmm_msi_msg m = vt_msg(1, 0x40 + (uint32_t)i);

        assert_int_equal(aiol_vmm_msi_coalescer_set(c, gsi[i], &m, NULL, NULL,
                                                    &seq), 0);
    }
    for (int i = 0; i < 400 && aiol_vmm_msi_coalescer_applied_get(c) < seq;
         i++) {
        aiol_loop_poll_deadline(F.loop, aiol_mono_time_get() + 5000000);
    }
    assert_int_equal(aiol_vmm_msi_coalescer_applied_get(c), seq);
    assert_int_equal(F.cnt.routing, 1);
    aiol_vmm_msi_coalescer_free(c);
    aiol_vmm_msi_table_free(t);
}

int main(void)
{
    int vm, r = aiol_vmm_vm_new(true, &vm);

    if (r != 0) {
        printf("SKIP: no usable /dev/kvm (creating a VM with an irqchip: "
               "%s)\n", strerror(-r));
        return TU_EXIT_SKIP;
    }
    close(vm);
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_ioeventfd),
        T(test_routes),
        T(test_route_limit),
        T(test_coalescer),
    };
#undef T

    return cmocka_run_group_tests(tests, NULL, NULL);
}
