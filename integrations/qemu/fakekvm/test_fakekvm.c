/* SPDX-License-Identifier: MIT */
/*
 * test_fakekvm.c - the fake /dev/kvm seen from a program it is preloaded
 * into (meson runs it with LD_PRELOAD=libfakekvm.so and a log): the fds,
 * the mapping of a vCPU, KVM's rules on the notifier ioctls, KVM_RUN's
 * kicks (immediate_exit, a signal, KVM_SET_SIGNAL_MASK) and the log.
 * Fails, rather than touching the real /dev/kvm, when the fake is not
 * preloaded.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <linux/kvm.h>

static int failures;

#define CHECK(cond)                                                       \
    do {                                                                  \
        if (!(cond)) {                                                    \
            fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, #cond);     \
            failures++;                                                   \
        }                                                                 \
    } while (0)

/* ioctl()'s result, or -errno. */
static long kvm(int fd, unsigned long req, void *arg)
{
    int r = ioctl(fd, req, arg);

    return r < 0 ? -errno : r;
}

static volatile sig_atomic_t kicks;

static void on_kick(int sig)
{
    (void)sig;
    kicks++;
}

typedef struct kicker {
    pthread_t target;
    int sig;
} kicker;

static void *kick_later(void *opaque)
{
    kicker *k = opaque;

    usleep(100 * 1000);
    pthread_kill(k->target, k->sig);
    return NULL;
}

/* KVM_RUN in this thread while another thread sends @sig in 100 ms. */
static long run_kicked(int vcpu, int sig)
{
    kicker k = { pthread_self(), sig };
    pthread_t t;
    long r;

    pthread_create(&t, NULL, kick_later, &k);
    r = kvm(vcpu, KVM_RUN, NULL);
    pthread_join(t, NULL);
    return r;
}

static void test_run(int sys, int vcpu)
{
    long size = kvm(sys, KVM_GET_VCPU_MMAP_SIZE, NULL);
    struct kvm_run *run;
    struct kvm_signal_mask *mask = calloc(1, sizeof(*mask) + 8);
    sigset_t usr2;

    CHECK(size >= 4096 && mask != NULL);
    run = mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE, MAP_SHARED, vcpu,
               0);
    CHECK(run != MAP_FAILED);
    if (run == MAP_FAILED) {
        return;
    }
    signal(SIGUSR1, on_kick);
    signal(SIGUSR2, on_kick);
    run->immediate_exit = 1;
    CHECK(kvm(vcpu, KVM_RUN, NULL) == -EINTR);
    CHECK(run->exit_reason == KVM_EXIT_INTR && kicks == 0);
    run->immediate_exit = 0;
    run->exit_reason = 0;
    CHECK(run_kicked(vcpu, SIGUSR1) == -EINTR);
    CHECK(run->exit_reason == KVM_EXIT_INTR && kicks == 1);
    /* SIGUSR2 blocked in the thread, open during KVM_RUN by its mask. */
    sigemptyset(&usr2);
    sigaddset(&usr2, SIGUSR2);
    pthread_sigmask(SIG_BLOCK, &usr2, NULL);
    mask->len = 8;   /* and an empty set */
    CHECK(kvm(vcpu, KVM_SET_SIGNAL_MASK, mask) == 0);
    CHECK(run_kicked(vcpu, SIGUSR2) == -EINTR && kicks == 2);
    mask->len = 4;
    CHECK(kvm(vcpu, KVM_SET_SIGNAL_MASK, mask) == -EINVAL);
    CHECK(kvm(vcpu, KVM_SET_SIGNAL_MASK, NULL) == 0);
    pthread_sigmask(SIG_UNBLOCK, &usr2, NULL);
    munmap(run, (size_t)size);
    free(mask);
}

static void test_notifiers(int vm)
{
    int e1 = eventfd(0, EFD_CLOEXEC), e2 = eventfd(0, EFD_CLOEXEC);
    struct kvm_ioeventfd io = { .addr = 0xe0000000, .len = 2,
                                .fd = e1 };
    struct kvm_irqfd irq = { .fd = (uint32_t)e2, .gsi = 24 };
    struct kvm_irq_routing *rt = calloc(1, sizeof(*rt) +
                                           2 * sizeof(rt->entries[0]));
    uint64_t one = 1;

    if (rt == NULL) {
        abort();
    }
    for (int i = 0; i < 2; i++) {
        rt->entries[i].gsi = 24;
        rt->entries[i].type = KVM_IRQ_ROUTING_MSI;
    }

    /* No irqchip yet: KVM takes neither routes nor irqfds. */
    CHECK(kvm(vm, KVM_IRQFD, &irq) == -EINVAL);
    rt->nr = 1;
    CHECK(kvm(vm, KVM_SET_GSI_ROUTING, rt) == -EINVAL);
    CHECK(kvm(vm, KVM_CREATE_IRQCHIP, NULL) == 0);
    CHECK(kvm(vm, KVM_CREATE_IRQCHIP, NULL) == -EEXIST);
    CHECK(kvm(vm, KVM_SET_GSI_ROUTING, rt) == 0);
    rt->nr = 2;
    CHECK(kvm(vm, KVM_SET_GSI_ROUTING, rt) == -EINVAL); /* GSI twice */
    free(rt);

    CHECK(kvm(vm, KVM_IOEVENTFD, &io) == 0);
    io.fd = e2;
    CHECK(kvm(vm, KVM_IOEVENTFD, &io) == -EEXIST);
    io.fd = vm;
    io.addr += 8;
    CHECK(kvm(vm, KVM_IOEVENTFD, &io) == -EINVAL);   /* not an eventfd */
    io.fd = e1;
    io.flags = KVM_IOEVENTFD_FLAG_DEASSIGN;
    CHECK(kvm(vm, KVM_IOEVENTFD, &io) == -ENOENT);
    io.addr -= 8;
    CHECK(kvm(vm, KVM_IOEVENTFD, &io) == 0);

    /* An irqfd signalled as it is attached is read, as KVM injects it. */
    CHECK(write(e2, &one, sizeof(one)) == sizeof(one));
    CHECK(kvm(vm, KVM_IRQFD, &irq) == 0);
    CHECK(fcntl(e2, F_SETFL, O_NONBLOCK) == 0);
    CHECK(read(e2, &one, sizeof(one)) < 0 && errno == EAGAIN);
    irq.gsi = 25;
    CHECK(kvm(vm, KVM_IRQFD, &irq) == -EBUSY);
    irq.flags = KVM_IRQFD_FLAG_DEASSIGN;
    CHECK(kvm(vm, KVM_IRQFD, &irq) == 0);              /* no match: 0 */
    irq.gsi = 24;
    CHECK(kvm(vm, KVM_IRQFD, &irq) == 0);
    irq.flags = 0;
    CHECK(kvm(vm, KVM_IRQFD, &irq) == 0);
    close(e2);
    /* A new eventfd on the number of one closed while an irqfd is not
     * that irqfd. */
    CHECK(eventfd(0, EFD_CLOEXEC) == e2);
    CHECK(kvm(vm, KVM_IRQFD, &irq) == 0);
    close(e1);
    close(e2);
}

/* The log has a line for @name's failure with @err. */
static int logged(const char *path, const char *name, const char *err)
{
    char line[512];
    int n = 0;
    FILE *f = fopen(path, "r");

    if (f == NULL) {
        return 0;
    }
    while (fgets(line, sizeof(line), f)) {
        n += strstr(line, name) && strstr(line, err) &&
             strstr(line, " ioctl(") != NULL;
    }
    fclose(f);
    return n;
}

int main(void)
{
    const char *log = getenv("AIOL_FAKE_KVM_LOG");
    int sys, vm, vcpu;
    char path[64], target[64];
    ssize_t n;

    if (log == NULL || getenv("LD_PRELOAD") == NULL) {
        fprintf(stderr, "test-fakekvm: run with LD_PRELOAD=libfakekvm.so "
                "and AIOL_FAKE_KVM_LOG (meson test does)\n");
        return 1;
    }
    unlink(log);
    sys = open("/dev/kvm", O_RDWR | O_CLOEXEC);
    CHECK(sys >= 0);
    snprintf(path, sizeof(path), "/proc/self/fd/%d", sys);
    n = readlink(path, target, sizeof(target) - 1);
    target[n > 0 ? n : 0] = '\0';
    if (strstr(target, "fakekvm") == NULL) {
        fprintf(stderr, "test-fakekvm: /dev/kvm is %s, not the fake\n",
                target);
        return 1;
    }
    CHECK(kvm(sys, KVM_GET_API_VERSION, NULL) == KVM_API_VERSION);
    CHECK(kvm(sys, KVM_CHECK_EXTENSION, (void *)KVM_CAP_IRQFD) == 1);
    vm = (int)kvm(sys, KVM_CREATE_VM, NULL);
    CHECK(vm >= 0);
    test_notifiers(vm);
    vcpu = (int)kvm(vm, KVM_CREATE_VCPU, NULL);
    CHECK(vcpu >= 0);
    CHECK(kvm(vm, KVM_CREATE_VCPU, NULL) == -EEXIST);
    test_run(sys, vcpu);
    CHECK(kvm(vcpu, 0xae00ff, NULL) == -ENOTTY);
    close(vcpu);
    close(vm);
    close(sys);
    /* Closed: plain fds again (EBADF from the kernel). */
    CHECK(kvm(vm, KVM_CREATE_VCPU, NULL) == -EBADF);
    CHECK(logged(log, "KVM_IOEVENTFD", "= -1 EEXIST") == 1);
    CHECK(logged(log, "KVM_IRQFD", "= -1 EBUSY") == 1);
    CHECK(logged(log, "KVM_RUN", "= -1 EINTR") == 3);
    CHECK(logged(log, "KVM_CREATE_VCPU", "= -1") == 1); /* not after close */
    if (failures) {
        fprintf(stderr, "test-fakekvm: %d check(s) failed\n", failures);
        return 1;
    }
    printf("test-fakekvm: all checks passed\n");
    return 0;
}
