/* SPDX-License-Identifier: MIT */
/*
 * bench_vmm.c - batched against unbatched KVM calls on real /dev/kvm,
 * through the library.
 *
 *   MSI routes: N vectors, each with a route and an irqfd.  "per vector"
 *   commits after each vector (one KVM_SET_GSI_ROUTING each, as QEMU's
 *   kvm_irqchip_add_msi_route() does); "batched" commits once.
 *
 *   Host notifiers: N ioeventfds.  "one txn each" commits every add on
 *   its own (QEMU's vhost before 8.0); "one txn" adds all in one.
 *
 * Each cell is the median of ROUNDS runs, each on a fresh VM (VM creation
 * is not timed).  Prints a markdown table.  Exits 77 without /dev/kvm.
 *
 *   build/integrations/vmm/bench-vmm [rounds]
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "aioloop/aioloop.h"
#include "aioloop/vmm.h"

#define MAXN 2048
#define MAX_ROUNDS 31

typedef struct counting {
    long routing, irqfd, ioeventfd;
} counting;

static int count_ioctl(void *opaque, int fd, unsigned long req, void *arg)
{
    counting *c = opaque;

    c->routing += req == KVM_SET_GSI_ROUTING;
    c->irqfd += req == KVM_IRQFD;
    c->ioeventfd += req == KVM_IOEVENTFD;
    return aiol_vmm_kvm_sys_ops.ioctl(NULL, fd, req, arg);
}

static const aiol_vmm_kvm_ops counting_ops = { .ioctl = count_ioctl };

static void die(const char *what, int r)
{
    fprintf(stderr, "bench-vmm: %s: %s\n", what, strerror(-r));
    exit(1);
}

static int new_vm(void)
{
    int vm, r = aiol_vmm_vm_new(true, &vm);

    if (r < 0) {
        die("KVM_CREATE_VM", r);
    }
    return vm;
}

/* N routes with irqfds; returns ms, fills *c. */
static double run_routes(int n, bool batched, counting *c)
{
    static int efd[MAXN];
    int vm = new_vm();
    aiol_vmm_kvm kvm = { &counting_ops, c, vm };
    aiol_vmm_msi_table *t;
    counting snap;
    int64_t t0, t1;
    int r;

    memset(c, 0, sizeof(*c));
    for (int i = 0; i < n; i++) {
        efd[i] = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (efd[i] < 0) {
            die("eventfd", -errno);
        }
    }
    if ((r = aiol_vmm_msi_table_new(&kvm, 24, &t)) < 0) {
        die("aiol_vmm_msi_table_new", r);
    }
    t0 = aiol_mono_time_get();
    for (int i = 0; i < n; i++) {
        aiol_vmm_msi_msg m = { 0xfee00000u | ((uint32_t)(i % 8) << 12), 0,
                           0x30 + (uint32_t)(i % 200) };
        uint32_t gsi;

        if ((r = aiol_vmm_msi_route_set(t, &m, &gsi)) < 0 ||
            (r = aiol_vmm_msi_irqfd_set(t, gsi, efd[i])) < 0 ||
            (!batched && (r = aiol_vmm_msi_table_commit(t)) < 0)) {
            die("route", r);
        }
    }
    if (batched && (r = aiol_vmm_msi_table_commit(t)) < 0) {
        die("aiol_vmm_msi_table_commit", r);
    }
    t1 = aiol_mono_time_get();
    snap = *c; /* the setup's calls, not the teardown's */
    aiol_vmm_msi_table_free(t);
    for (int i = 0; i < n; i++) {
        close(efd[i]);
    }
    close(vm);
    *c = snap;
    return (double)(t1 - t0) / 1e6;
}

/* N host notifiers; returns ms, fills *c. */
static double run_notifiers(aiol_loop *loop, int n, bool one_txn, counting *c)
{
    static aiol_vmm_ioev *ev[MAXN];
    int vm = new_vm();
    aiol_vmm_kvm kvm = { &counting_ops, c, vm };
    aiol_vmm_ioev_group *set;
    counting snap;
    int64_t t0, t1;
    int r;

    memset(c, 0, sizeof(*c));
    if ((r = aiol_vmm_ioev_group_new(loop, &kvm, &set)) < 0) {
        die("aiol_vmm_ioev_group_new", r);
    }
    for (int i = 0; i < n; i++) {
        if ((r = aiol_vmm_ioev_new(set, NULL, NULL, &ev[i])) < 0) {
            die("aiol_vmm_ioev_new", r);
        }
    }
    t0 = aiol_mono_time_get();
    if (one_txn) {
        aiol_vmm_ioev_txn_begin(set);
    }
    for (int i = 0; i < n; i++) {
        /* virtio-pci modern: one notify address per queue, 4 bytes apart */
        aiol_vmm_ioev_match m = { .addr = 0xfe000000u + 4u * (uint64_t)i,
                              .len = 2, .datamatch = true,
                              .data = (uint64_t)i };

        if ((r = aiol_vmm_ioev_set(ev[i], &m)) < 0) {
            die("aiol_vmm_ioev_set", r);
        }
    }
    if (one_txn && (r = aiol_vmm_ioev_txn_commit(set)) < 0) {
        die("aiol_vmm_ioev_txn_commit", r);
    }
    t1 = aiol_mono_time_get();
    snap = *c;
    aiol_vmm_ioev_group_free(set);
    close(vm);
    *c = snap;
    return (double)(t1 - t0) / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int main(int argc, char **argv)
{
    static const int sizes[] = { 64, 128, 256, 512, 1024, 2048 };
    int rounds = argc > 1 ? atoi(argv[1]) : 5;
    aiol_loop *loop;
    int vm, r;

    if (rounds < 1 || rounds > MAX_ROUNDS) {
        fprintf(stderr, "usage: bench-vmm [rounds 1..%d]\n", MAX_ROUNDS);
        return 2;
    }
    r = aiol_vmm_vm_new(true, &vm);
    if (r < 0) {
        printf("SKIP: no usable /dev/kvm (%s)\n", strerror(-r));
        return 77;
    }
    close(vm);
    if ((r = aiol_loop_new(&loop, NULL)) < 0) {
        die("aiol_loop_new", r);
    }

    printf("KVM batching through libaioloop-vmm; median of %d rounds, ms\n\n",
           rounds);
    printf("| N | routes per vector | routes batched | speedup | "
           "SET_GSI_ROUTING per vector / batched | KVM_IRQFD | "
           "notifiers one txn each | notifiers one txn | KVM_IOEVENTFD |\n");
    printf("|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
        int n = sizes[s];
        double pv[MAX_ROUNDS], bt[MAX_ROUNDS], each[MAX_ROUNDS],
               one[MAX_ROUNDS];
        counting cpv, cbt, ceach, cone;

        for (int k = 0; k < rounds; k++) {
            pv[k] = run_routes(n, false, &cpv);
            bt[k] = run_routes(n, true, &cbt);
            each[k] = run_notifiers(loop, n, false, &ceach);
            one[k] = run_notifiers(loop, n, true, &cone);
        }
        double mpv = median(pv, rounds), mbt = median(bt, rounds);

        printf("| %d | %.2f | %.3f | %.0fx | %ld / %ld | %ld | %.2f | %.2f | "
               "%ld / %ld |\n",
               n, mpv, mbt, mbt > 0 ? mpv / mbt : 0.0, cpv.routing,
               cbt.routing, cbt.irqfd, median(each, rounds),
               median(one, rounds), ceach.ioeventfd, cone.ioeventfd);
        fflush(stdout);
    }
    aiol_loop_free(loop);
    return 0;
}
