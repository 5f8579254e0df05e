/* SPDX-License-Identifier: MIT */
/*
 * vring.c - the call-side policy of a virtqueue: a queue whose driver
 * set no MSI-X vector gets no call eventfd and no irqfd, so its backend
 * is told "no call fd" and never signals it.
 *
 * The eventfd is made the first time the queue gets a vector and kept
 * while the vector comes and goes (a driver may set and clear it around
 * a reset); only aiol_vmm_callfd_remove() closes it, once the table no
 * longer has it attached, wanted or committed.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <unistd.h>

#include "internal.h"

/* Detaches vc's eventfd from its GSI if it is still wanted there. */
static void unbind(aiol_vmm_msi_table *t, aiol_vmm_callfd *vc)
{
    if (vc->bound && aiol_vmm_msi_irqfd_get(t, vc->gsi, false) == vc->efd) {
        (void)aiol_vmm_msi_irqfd_set(t, vc->gsi, -1);
    }
    vc->bound = false;
}

int aiol_vmm_callfd_set(aiol_vmm_msi_table *t, aiol_vmm_callfd *vc,
                        uint16_t vector, uint32_t gsi)
{
    bool made = false;
    int r;

    aiol__vmm_check(t != NULL && vc != NULL, "NULL argument");
    if (vector == AIOL_VMM_NO_VECTOR) {
        unbind(t, vc);
        return 0;
    }
    if (vc->bound && vc->gsi == gsi &&
        aiol_vmm_msi_irqfd_get(t, gsi, false) == vc->efd) {
        return 0;  /* unchanged */
    }
    if (vc->efd < 0) {
        r = aiol__vmm_eventfd_new();
        if (r < 0) {
            return r;
        }
        vc->efd = r;
        made = true;
    }
    r = aiol_vmm_msi_irqfd_set(t, gsi, vc->efd);
    if (r < 0) {
        if (made) {
            close(vc->efd);
            vc->efd = -1;
        }
        return r;
    }
    if (vc->bound && vc->gsi != gsi &&
        aiol_vmm_msi_irqfd_get(t, vc->gsi, false) == vc->efd) {
        (void)aiol_vmm_msi_irqfd_set(t, vc->gsi, -1);
    }
    vc->gsi = gsi;
    vc->bound = true;
    return 0;
}

int aiol_vmm_callfd_get(const aiol_vmm_callfd *vc)
{
    return vc->bound ? vc->efd : -1;
}

void aiol_vmm_callfd_remove(aiol_vmm_msi_table *t, aiol_vmm_callfd *vc)
{
    aiol__vmm_check(t != NULL && vc != NULL, "NULL argument");
    if (vc->efd < 0) {
        return;
    }
    aiol__vmm_check(!vc->bound, "queue still has a vector: "
                                "set AIOL_VMM_NO_VECTOR and commit first");
    aiol__vmm_check(aiol_vmm_msi_irqfd_get(t, vc->gsi, false) != vc->efd &&
                    aiol_vmm_msi_irqfd_get(t, vc->gsi, true) != vc->efd,
                    "call eventfd still attached: commit the detach first");
    close(vc->efd);
    vc->efd = -1;
}
