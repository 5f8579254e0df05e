/* SPDX-License-Identifier: MIT */
/* pkg-config: aioloop-vmm
 * An installed aioloop-vmm: an MSI table over a counting fake KVM (no
 * /dev/kvm needed) commits two routes in one KVM_SET_GSI_ROUTING. */
#include <stdio.h>

#include <linux/kvm.h>

#include <aioloop/vmm.h>

static int routing_calls;

static int fake_ioctl(void *opaque, int fd, unsigned long req, void *arg)
{
    (void)opaque, (void)fd, (void)arg;
    if (req == KVM_CHECK_EXTENSION) {
        return 4096; /* KVM_CAP_IRQ_ROUTING: the route limit */
    }
    routing_calls += req == KVM_SET_GSI_ROUTING;
    return 0;
}

static const aiol_vmm_kvm_ops fake = { .ioctl = fake_ioctl };

int main(void)
{
    aiol_vmm_kvm kvm = { .ops = &fake, .vm_fd = 100 };
    aiol_vmm_msi_msg m = { .address_lo = 0xfee00000, .data = 0x41 };
    aiol_vmm_msi_table *t;
    uint32_t a, b;

    if (aiol_vmm_msi_table_new(&kvm, 24, &t) < 0 ||
        aiol_vmm_msi_route_set(t, &m, &a) < 0 ||
        aiol_vmm_msi_route_set(t, &m, &b) < 0 ||
        aiol_vmm_msi_table_commit(t) < 0 ||
        routing_calls != 1) {
        return 1;
    }
    aiol_vmm_msi_table_free(t);
    printf("aioloop-vmm: ok (routes %u and %u, one commit)\n", a, b);
    return 0;
}
