/* SPDX-License-Identifier: MIT */
/*
 * internal.h - private helpers of the VMM library (integrations/vmm).
 *
 * Nothing here is API.  Internal non-static names start with aiol__.
 */
#ifndef AIOLOOP_VMM_INTERNAL_H
#define AIOLOOP_VMM_INTERNAL_H

#include "aioloop/vmm.h"
#include "check-priv.h" /* (libaioloop's) */

/* Misuse check that survives NDEBUG: "aioloop-vmm: <func>: <msg>", abort. */
#define aiol__vmm_check(cond, msg) AIOL__CHECK_IN(aiol__vmm_fail, cond, msg)

_Noreturn void aiol__vmm_fail(const char *func, const char *msg);

/* Calls @kvm's ioctl (the default layer when ops is NULL). */
int aiol__vmm_kvm_ioctl(const aiol_vmm_kvm *kvm, unsigned long request,
                        void *arg);

/* A non-blocking, close-on-exec eventfd, or -errno. */
int aiol__vmm_eventfd_new(void);

#endif /* AIOLOOP_VMM_INTERNAL_H */
