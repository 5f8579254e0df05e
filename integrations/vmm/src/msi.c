/* SPDX-License-Identifier: MIT */
/*
 * msi.c - an MSI route table with irqfds, committed in one
 * KVM_SET_GSI_ROUTING.
 *
 * Design.  The table is an array of route slots indexed by GSI (up to
 * KVM's limit, 4096 on x86), each with the state KVM holds ("have") and
 * the wanted one ("want"): presence, message and irqfd.  A dense array of
 * the GSIs that are wanted present gives the commit its payload without a
 * scan of empty slots, and a dirty list (chained through the slots) holds
 * the GSIs changed since the last commit, so deciding "nothing to do" and
 * the irqfd work are O(changes).  KVM_SET_GSI_ROUTING itself always takes
 * the whole table: that is the kernel's interface.
 *
 * Commit order: detach the irqfds that go away (before their route can
 * vanish), set the routes (once, if any differs), attach the new irqfds
 * (after their routes exist).  On a failure the steps already taken are
 * undone: attached irqfds detached, the previous table (an image of what
 * KVM accepted last) set again, detached irqfds attached again.  The one
 * case without an image is a failure after the table's very first route
 * commit (KVM's own initial table cannot be read back): then the routes
 * stay as committed, the slots record that, and only the failed irqfds
 * stay pending.  Every "have" always describes KVM's real state.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define NO_GSI UINT32_MAX
#define DEFAULT_LIMIT 4096u

/* Steps a commit took for one route, so a failure can undo them. */
#define STEP_DETACHED (1u << 0)
#define STEP_ATTACHED (1u << 1)

/* One GSI.  All fields: the table's thread. */
typedef struct route {
    aiol_vmm_msi_msg want, have;
    bool want_on, have_on; /* a route exists (wanted / in KVM) */
    bool dirty;            /* on the dirty list */
    int want_fd, have_fd;  /* irqfd or -1 */
    int old_fd;            /* during a commit: the irqfd it detached */
    unsigned steps;        /* STEP_*: during a commit only */
    uint32_t dense;        /* index in t->dense while want_on */
    uint32_t dnext;        /* next on the dirty list, or NO_GSI */
} route;

struct aiol_vmm_msi_table {
    aiol_vmm_kvm kvm;
    uint32_t limit;        /* KVM's route limit */
    uint32_t first_gsi;
    /* The table's thread owns everything below. */
    route *r;              /* [limit] */
    uint32_t *dense;       /* [limit]: GSIs wanted present, unordered */
    uint32_t ndense;
    uint32_t free_hint;    /* no free GSI below this one */
    uint32_t dirty_head;   /* first dirty GSI or NO_GSI */
    struct kvm_irq_routing_entry *fixed_want, *fixed_have; /* may alias */
    size_t nfixed_want, nfixed_have;
    struct kvm_irq_routing *payload; /* built by a commit */
    size_t payload_cap;
    struct kvm_irq_routing *image;   /* the table KVM accepted last */
    size_t image_cap;
    bool have_image;
};

static bool msg_eq(const aiol_vmm_msi_msg *a, const aiol_vmm_msi_msg *b)
{
    return a->address_lo == b->address_lo && a->address_hi == b->address_hi &&
           a->data == b->data;
}

static bool route_differs(const route *r)
{
    return r->want_on != r->have_on || r->want_fd != r->have_fd ||
           (r->want_on && !msg_eq(&r->want, &r->have));
}

static bool route_msg_differs(const route *r)
{
    return r->want_on != r->have_on ||
           (r->want_on && !msg_eq(&r->want, &r->have));
}

static bool fixed_differs(const aiol_vmm_msi_table *t)
{
    return t->fixed_want != t->fixed_have &&
           (t->nfixed_want != t->nfixed_have ||
            (t->nfixed_want > 0 &&
             memcmp(t->fixed_want, t->fixed_have,
                    t->nfixed_want * sizeof(*t->fixed_want)) != 0));
}

static route *slot(const aiol_vmm_msi_table *t, uint32_t gsi)
{
    return gsi < t->limit ? &t->r[gsi] : NULL;
}

static void mark_dirty(aiol_vmm_msi_table *t, uint32_t gsi)
{
    route *r = &t->r[gsi];

    if (!r->dirty) {
        r->dirty = true;
        r->dnext = t->dirty_head;
        t->dirty_head = gsi;
    }
}

static void dense_add(aiol_vmm_msi_table *t, uint32_t gsi)
{
    t->r[gsi].dense = t->ndense;
    t->dense[t->ndense++] = gsi;
}

static void dense_del(aiol_vmm_msi_table *t, uint32_t gsi)
{
    uint32_t i = t->r[gsi].dense, last = t->dense[--t->ndense];

    t->dense[i] = last;
    t->r[last].dense = i;
}

int aiol_vmm_msi_table_new(const aiol_vmm_kvm *kvm, uint32_t first_gsi,
                           aiol_vmm_msi_table **out)
{
    aiol_vmm_msi_table *t;
    int lim;

    aiol__vmm_check(kvm != NULL && out != NULL, "NULL argument");
    t = calloc(1, sizeof(*t));
    if (t == NULL) {
        return -ENOMEM;
    }
    t->kvm = *kvm;
    lim = aiol__vmm_kvm_ioctl(&t->kvm, KVM_CHECK_EXTENSION,
                              (void *)(uintptr_t)KVM_CAP_IRQ_ROUTING);
    t->limit = lim > 0 ? (uint32_t)lim : DEFAULT_LIMIT;
    if (first_gsi >= t->limit) {
        free(t);
        return -EINVAL;
    }
    t->first_gsi = first_gsi;
    t->free_hint = first_gsi;
    t->dirty_head = NO_GSI;
    t->r = calloc(t->limit, sizeof(*t->r));
    t->dense = calloc(t->limit, sizeof(*t->dense));
    if (t->r == NULL || t->dense == NULL) {
        free(t->r);
        free(t->dense);
        free(t);
        return -ENOMEM;
    }
    for (uint32_t i = 0; i < t->limit; i++) {
        t->r[i].want_fd = t->r[i].have_fd = t->r[i].old_fd = -1;
    }
    *out = t;
    return 0;
}

void aiol_vmm_msi_table_free(aiol_vmm_msi_table *t)
{
    if (t == NULL) {
        return;
    }
    for (uint32_t i = 0; i < t->limit; i++) {
        if (t->r[i].have_fd >= 0) {
            struct kvm_irqfd a = { .fd = (uint32_t)t->r[i].have_fd,
                                   .gsi = i,
                                   .flags = KVM_IRQFD_FLAG_DEASSIGN };

            (void)aiol__vmm_kvm_ioctl(&t->kvm, KVM_IRQFD, &a);
        }
    }
    if (t->fixed_want != t->fixed_have) {
        free(t->fixed_want);
    }
    free(t->fixed_have);
    free(t->payload);
    free(t->image);
    free(t->dense);
    free(t->r);
    free(t);
}

int aiol_vmm_msi_fixed_set(aiol_vmm_msi_table *t,
                           const struct kvm_irq_routing_entry *entries,
                           size_t n)
{
    struct kvm_irq_routing_entry *copy = NULL;

    aiol__vmm_check(t != NULL && (entries != NULL || n == 0),
                    "NULL argument");
    if (n > t->limit || n + t->ndense > t->limit) {
        return -ENOSPC;
    }
    if (n > 0) {
        copy = malloc(n * sizeof(*copy));
        if (copy == NULL) {
            return -ENOMEM;
        }
        memcpy(copy, entries, n * sizeof(*copy));
    }
    if (t->fixed_want != t->fixed_have) {
        free(t->fixed_want);
    }
    t->fixed_want = copy;
    t->nfixed_want = n;
    if (!fixed_differs(t)) {  /* back to what KVM holds */
        free(t->fixed_want);
        t->fixed_want = t->fixed_have;
    }
    return 0;
}

int aiol_vmm_msi_route_set(aiol_vmm_msi_table *t, const aiol_vmm_msi_msg *msg,
                           uint32_t *gsi)
{
    uint32_t g;
    route *r;

    aiol__vmm_check(t != NULL && msg != NULL && gsi != NULL, "NULL argument");
    if (t->nfixed_want + t->ndense >= t->limit) {
        return -ENOSPC;
    }
    for (g = t->free_hint; g < t->limit && t->r[g].want_on; g++) {
    }
    t->free_hint = g;
    if (g >= t->limit) {
        return -ENOSPC;
    }
    r = &t->r[g];
    r->want_on = true;
    r->want = *msg;
    r->want_fd = -1;
    dense_add(t, g);
    mark_dirty(t, g);
    *gsi = g;
    return 0;
}

int aiol_vmm_msi_msg_set(aiol_vmm_msi_table *t, uint32_t gsi,
                         const aiol_vmm_msi_msg *msg)
{
    route *r;

    aiol__vmm_check(t != NULL && msg != NULL, "NULL argument");
    r = slot(t, gsi);
    if (r == NULL || !r->want_on) {
        return -ENOENT;
    }
    r->want = *msg;
    mark_dirty(t, gsi);
    return 0;
}

int aiol_vmm_msi_route_remove(aiol_vmm_msi_table *t, uint32_t gsi)
{
    route *r;

    aiol__vmm_check(t != NULL, "table is NULL");
    r = slot(t, gsi);
    if (r == NULL || !r->want_on) {
        return -ENOENT;
    }
    r->want_on = false;
    r->want_fd = -1;
    dense_del(t, gsi);
    if (gsi < t->free_hint) {
        t->free_hint = gsi;
    }
    mark_dirty(t, gsi);
    return 0;
}

int aiol_vmm_msi_irqfd_set(aiol_vmm_msi_table *t, uint32_t gsi, int fd)
{
    route *r;

    aiol__vmm_check(t != NULL, "table is NULL");
    if (fd < -1) {
        return -EBADF;
    }
    r = slot(t, gsi);
    if (r == NULL || !r->want_on) {
        return -ENOENT;
    }
    r->want_fd = fd;
    mark_dirty(t, gsi);
    return 0;
}

/* Makes the slot want exactly what KVM holds. */
static void revert_slot(aiol_vmm_msi_table *t, uint32_t gsi)
{
    route *r = &t->r[gsi];

    if (r->want_on && !r->have_on) {
        dense_del(t, gsi);
        if (gsi < t->free_hint) {
            t->free_hint = gsi;
        }
    } else if (!r->want_on && r->have_on) {
        dense_add(t, gsi);  /* it was in the table: there is room */
    }
    r->want_on = r->have_on;
    r->want = r->have;
    r->want_fd = r->have_fd;
}

void aiol_vmm_msi_route_abort(aiol_vmm_msi_table *t, uint32_t gsi)
{
    aiol__vmm_check(t != NULL, "table is NULL");
    if (gsi < t->limit) {
        revert_slot(t, gsi);  /* stays on the dirty list; commit skips it */
    }
}

void aiol_vmm_msi_table_abort(aiol_vmm_msi_table *t)
{
    uint32_t g, next;

    aiol__vmm_check(t != NULL, "table is NULL");
    for (g = t->dirty_head; g != NO_GSI; g = next) {
        next = t->r[g].dnext;
        revert_slot(t, g);
        t->r[g].dirty = false;
    }
    t->dirty_head = NO_GSI;
    if (t->fixed_want != t->fixed_have) {
        free(t->fixed_want);
        t->fixed_want = t->fixed_have;
        t->nfixed_want = t->nfixed_have;
    }
}

bool aiol_vmm_msi_table_is_dirty(const aiol_vmm_msi_table *t)
{
    if (fixed_differs(t)) {
        return true;
    }
    for (uint32_t g = t->dirty_head; g != NO_GSI; g = t->r[g].dnext) {
        if (route_differs(&t->r[g])) {
            return true;
        }
    }
    return false;
}

static int grow(struct kvm_irq_routing **p, size_t *cap, size_t n)
{
    struct kvm_irq_routing *q;

    if (*p != NULL && *cap >= n) {
        return 0;
    }
    q = realloc(*p, sizeof(*q) + n * sizeof(q->entries[0]));
    if (q == NULL) {
        return -ENOMEM;
    }
    *p = q;
    *cap = n;
    return 0;
}

static void build_payload(aiol_vmm_msi_table *t)
{
    struct kvm_irq_routing *p = t->payload;
    size_t n = t->nfixed_want;

    memset(p, 0, sizeof(*p));
    if (n > 0) {
        memcpy(p->entries, t->fixed_want, n * sizeof(p->entries[0]));
    }
    for (uint32_t i = 0; i < t->ndense; i++, n++) {
        const route *r = &t->r[t->dense[i]];
        struct kvm_irq_routing_entry *e = &p->entries[n];

        memset(e, 0, sizeof(*e));
        e->gsi = t->dense[i];
        e->type = KVM_IRQ_ROUTING_MSI;
        e->u.msi.address_lo = r->want.address_lo;
        e->u.msi.address_hi = r->want.address_hi;
        e->u.msi.data = r->want.data;
    }
    p->nr = (uint32_t)n;
}

static int irqfd_ioctl(aiol_vmm_msi_table *t, int fd, uint32_t gsi,
                       bool assign)
{
    struct kvm_irqfd a;

    memset(&a, 0, sizeof(a));
    a.fd = (uint32_t)fd;
    a.gsi = gsi;
    a.flags = assign ? 0 : KVM_IRQFD_FLAG_DEASSIGN;
    return aiol__vmm_kvm_ioctl(&t->kvm, KVM_IRQFD, &a);
}

/* KVM now holds the wanted routes (not necessarily the irqfds). */
static void routes_accepted(aiol_vmm_msi_table *t)
{
    size_t bytes = sizeof(*t->payload) +
                   t->payload->nr * sizeof(t->payload->entries[0]);

    memcpy(t->image, t->payload, bytes);  /* image_cap >= payload->nr */
    t->have_image = true;
    for (uint32_t g = t->dirty_head; g != NO_GSI; g = t->r[g].dnext) {
        route *r = &t->r[g];

        r->have_on = r->want_on;
        r->have = r->want;
    }
    if (t->fixed_have != t->fixed_want) {
        free(t->fixed_have);
        t->fixed_have = t->fixed_want;
        t->nfixed_have = t->nfixed_want;
    }
}

/* Undoes a failed commit's steps (see the top of the file). */
static void commit_undo(aiol_vmm_msi_table *t, bool routes_set)
{
    uint32_t g;

    for (g = t->dirty_head; g != NO_GSI; g = t->r[g].dnext) {
        route *r = &t->r[g];

        if ((r->steps & STEP_ATTACHED) &&
            irqfd_ioctl(t, r->have_fd, g, false) == 0) {
            r->have_fd = -1;
        }
    }
    if (routes_set) {
        if (!t->have_image ||
            aiol__vmm_kvm_ioctl(&t->kvm, KVM_SET_GSI_ROUTING, t->image) < 0) {
            routes_accepted(t);  /* KVM keeps the new routes: say so */
        }
    }
    for (g = t->dirty_head; g != NO_GSI; g = t->r[g].dnext) {
        route *r = &t->r[g];

        if ((r->steps & STEP_DETACHED) && r->have_fd < 0 &&
            (r->have_on || !routes_set) &&
            irqfd_ioctl(t, r->old_fd, g, true) == 0) {
            r->have_fd = r->old_fd;
        }
        r->steps = 0;
    }
}

int aiol_vmm_msi_table_commit(aiol_vmm_msi_table *t)
{
    bool routes = fixed_differs(t), any = routes, routes_set = false;
    uint32_t g, next;
    size_t n;
    int ret;

    aiol__vmm_check(t != NULL, "table is NULL");
    for (g = t->dirty_head; g != NO_GSI; g = t->r[g].dnext) {
        any = any || route_differs(&t->r[g]);
        routes = routes || route_msg_differs(&t->r[g]);
    }
    if (!any) {
        goto done;
    }
    n = t->nfixed_want + t->ndense;
    if (n > t->limit) {
        return -ENOSPC;
    }
    if (routes) {
        ret = grow(&t->payload, &t->payload_cap, n);
        if (ret == 0) {
            ret = grow(&t->image, &t->image_cap, n);
        }
        if (ret < 0) {
            return ret;
        }
        build_payload(t);
    }

    /* 1. irqfds that go away, before their routes can. */
    for (g = t->dirty_head; g != NO_GSI; g = t->r[g].dnext) {
        route *r = &t->r[g];

        if (r->have_fd >= 0 && r->have_fd != r->want_fd) {
            ret = irqfd_ioctl(t, r->have_fd, g, false);
            if (ret < 0) {
                goto fail;
            }
            r->steps |= STEP_DETACHED;
            r->old_fd = r->have_fd;
            r->have_fd = -1;
        }
    }
    /* 2. The routes, all at once. */
    if (routes) {
        ret = aiol__vmm_kvm_ioctl(&t->kvm, KVM_SET_GSI_ROUTING, t->payload);
        if (ret < 0) {
            goto fail;
        }
        routes_set = true;
    }
    /* 3. New irqfds, now that their routes exist. */
    for (g = t->dirty_head; g != NO_GSI; g = t->r[g].dnext) {
        route *r = &t->r[g];

        if (r->want_fd >= 0 && r->want_fd != r->have_fd) {
            ret = irqfd_ioctl(t, r->want_fd, g, true);
            if (ret < 0) {
                goto fail;
            }
            r->steps |= STEP_ATTACHED;
            r->have_fd = r->want_fd;
        }
    }
    if (routes) {
        routes_accepted(t);
    }

done:
    for (g = t->dirty_head; g != NO_GSI; g = next) {
        next = t->r[g].dnext;
        t->r[g].steps = 0;
        t->r[g].dirty = false;
    }
    t->dirty_head = NO_GSI;
    return 0;

fail:
    commit_undo(t, routes_set);
    return ret;
}

int aiol_vmm_msi_msg_get(const aiol_vmm_msi_table *t, uint32_t gsi,
                         bool committed, aiol_vmm_msi_msg *msg)
{
    const route *r = slot(t, gsi);

    if (r == NULL || !(committed ? r->have_on : r->want_on)) {
        return -ENOENT;
    }
    if (msg != NULL) {
        *msg = committed ? r->have : r->want;
    }
    return 0;
}

int aiol_vmm_msi_irqfd_get(const aiol_vmm_msi_table *t, uint32_t gsi,
                           bool committed)
{
    const route *r = slot(t, gsi);

    if (r == NULL) {
        return -1;
    }
    return committed ? r->have_fd : r->want_fd;
}

size_t aiol_vmm_msi_table_count_get(const aiol_vmm_msi_table *t)
{
    return t->ndense;
}

uint32_t aiol_vmm_msi_table_limit_get(const aiol_vmm_msi_table *t)
{
    return t->limit;
}
