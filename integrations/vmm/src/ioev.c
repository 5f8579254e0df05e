/* SPDX-License-Identifier: MIT */
/*
 * ioev.c - host notifiers (KVM ioeventfds) and their transactions.
 *
 * Design.  Each notifier keeps two states: the one KVM holds ("have",
 * changed only by a successful ioctl) and the one the current transaction
 * wants ("want").  set and remove change "want" and put the notifier on
 * the group's dirty list (an intrusive list: O(1), no allocation).  The
 * commit walks only that list, so its cost is O(changes) whatever the
 * size of the group, and issues for each notifier exactly the difference:
 *
 *   have == want               nothing (set+remove, remove+set, untouched)
 *   have registered, want not  one deassign
 *   want registered, have not  one assign
 *   both, different matches    one deassign, one assign
 *
 * All deassigns run before all assigns, so a match can move between
 * notifiers inside one commit without KVM seeing a duplicate.  If an
 * ioctl fails, the ioctls this commit already made are undone in reverse
 * kind (deassign what was assigned, assign again what was deassigned),
 * every "have" tracks what KVM really holds at each step, and the "want"
 * states stay: the transaction is still open and can be committed again.
 *
 * Lifetime.  A notifier's eventfd is closed only by aiol_vmm_ioev_free(),
 * which insists that the notifier is neither registered nor pending: KVM
 * looks a registration up by its eventfd, so a deassign needs the fd
 * open, and a closed fd with a live registration would leak it in KVM.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "aioloop/queue.h"
#include "internal.h"

/* Steps a commit took for one notifier, so a failure can undo them. */
#define STEP_DEASSIGNED (1u << 0)
#define STEP_ASSIGNED (1u << 1)

struct aiol_vmm_ioev {
    aiol_vmm_ioev_group *set;
    int fd;                   /* the eventfd; owned */
    aiol_handler_fn *cb;      /* set at creation, read by the loop's thread */
    void *opaque;
    /* The rest: the set's thread. */
    bool have_on;             /* registered with KVM */
    aiol_vmm_ioev_match have; /* ... at this match */
    bool want_on;             /* the transaction wants it registered */
    aiol_vmm_ioev_match want;
    aiol_vmm_ioev_match old;  /* during a commit: what a deassign removed */
    unsigned steps;           /* STEP_*: during a commit only */
    AIOL_LIST_ENTRY(aiol_vmm_ioev) all;   /* set->all */
    AIOL_LIST_ENTRY(aiol_vmm_ioev) dirty; /* set->dirty while changed */
};

struct aiol_vmm_ioev_group {
    aiol_loop *loop;
    aiol_vmm_kvm kvm;
    /* The set's thread owns everything below. */
    unsigned depth;         /* transaction nesting; 0: none open */
    size_t registered;      /* notifiers with have_on */
    AIOL_LIST_HEAD(, aiol_vmm_ioev) all;
    AIOL_LIST_HEAD(, aiol_vmm_ioev) dirty;
};

static bool match_eq(const aiol_vmm_ioev_match *a,
                     const aiol_vmm_ioev_match *b)
{
    return a->addr == b->addr && a->len == b->len && a->pio == b->pio &&
           a->datamatch == b->datamatch &&
           (!a->datamatch || a->data == b->data);
}

static bool match_valid(const aiol_vmm_ioev_match *m)
{
    switch (m->len) {
    case 0: case 1: case 2: case 4: case 8:
        break;
    default:
        return false;
    }
    if (m->datamatch && m->len == 0) {
        return false;
    }
    return m->addr + m->len >= m->addr;
}

/* One KVM_IOEVENTFD for @n at @m. */
static int ioev_ioctl(aiol_vmm_ioev *n, const aiol_vmm_ioev_match *m,
                      bool assign)
{
    struct kvm_ioeventfd a;

    memset(&a, 0, sizeof(a));
    a.addr = m->addr;
    a.len = m->len;
    a.fd = n->fd;
    a.datamatch = m->datamatch ? m->data : 0;
    a.flags = (m->datamatch ? KVM_IOEVENTFD_FLAG_DATAMATCH : 0) |
              (m->pio ? KVM_IOEVENTFD_FLAG_PIO : 0) |
              (assign ? 0 : KVM_IOEVENTFD_FLAG_DEASSIGN);
    return aiol__vmm_kvm_ioctl(&n->set->kvm, KVM_IOEVENTFD, &a);
}

int aiol_vmm_ioev_group_new(aiol_loop *loop, const aiol_vmm_kvm *kvm,
                            aiol_vmm_ioev_group **out)
{
    aiol_vmm_ioev_group *set;

    aiol__vmm_check(loop != NULL && kvm != NULL && out != NULL,
                    "NULL argument");
    set = calloc(1, sizeof(*set));
    if (set == NULL) {
        return -ENOMEM;
    }
    set->loop = loop;
    set->kvm = *kvm;
    AIOL_LIST_INIT(&set->all);
    AIOL_LIST_INIT(&set->dirty);
    *out = set;
    return 0;
}

static void ioev_destroy(aiol_vmm_ioev *n)
{
    if (n->cb != NULL) {
        aiol_fd_remove(n->set->loop, n->fd);
    }
    close(n->fd);
    AIOL_LIST_REMOVE(n, all);
    free(n);
}

void aiol_vmm_ioev_group_free(aiol_vmm_ioev_group *set)
{
    aiol_vmm_ioev *n, *next;

    if (set == NULL) {
        return;
    }
    aiol__vmm_check(set->depth == 0, "a transaction is still open");
    AIOL_LIST_FOREACH_SAFE(n, &set->all, all, next) {
        if (n->have_on) {
            (void)ioev_ioctl(n, &n->have, false);
        }
        ioev_destroy(n);
    }
    free(set);
}

void aiol_vmm_ioev_txn_begin(aiol_vmm_ioev_group *set)
{
    aiol__vmm_check(set != NULL, "group is NULL");
    aiol__vmm_check(set->depth < UINT32_MAX, "transactions nested too deep");
    set->depth++;
}

bool aiol_vmm_ioev_txn_is_open(const aiol_vmm_ioev_group *set)
{
    return set->depth > 0;
}

/* Marks @n changed in the open transaction. */
static void mark_dirty(aiol_vmm_ioev *n)
{
    if (!AIOL_LIST_IS_INSERTED(n, dirty)) {
        AIOL_LIST_INSERT_HEAD(&n->set->dirty, n, dirty);
    }
}

static void set_have(aiol_vmm_ioev *n, bool on, const aiol_vmm_ioev_match *m)
{
    if (on && !n->have_on) {
        n->set->registered++;
    } else if (!on && n->have_on) {
        n->set->registered--;
    }
    n->have_on = on;
    if (on) {
        n->have = *m;
    }
}

static bool needs_deassign(const aiol_vmm_ioev *n)
{
    return n->have_on && (!n->want_on || !match_eq(&n->have, &n->want));
}

static bool needs_assign(const aiol_vmm_ioev *n)
{
    return n->want_on && (!n->have_on || !match_eq(&n->have, &n->want));
}

/*
 * Undoes the steps a failed commit took.  Assigns are undone first, so the
 * matches they took are free again for the re-assigns.  Each successful
 * ioctl updates "have"; a failing one leaves it describing KVM's state.
 */
static void commit_undo(aiol_vmm_ioev_group *set)
{
    aiol_vmm_ioev *n;

    AIOL_LIST_FOREACH(n, &set->dirty, dirty) {
        if ((n->steps & STEP_ASSIGNED) && ioev_ioctl(n, &n->want, false) == 0) {
            set_have(n, false, NULL);
        }
    }
    AIOL_LIST_FOREACH(n, &set->dirty, dirty) {
        if ((n->steps & STEP_DEASSIGNED) && !n->have_on &&
            ioev_ioctl(n, &n->old, true) == 0) {
            set_have(n, true, &n->old);
        }
        n->steps = 0;
    }
}

static int commit_apply(aiol_vmm_ioev_group *set)
{
    aiol_vmm_ioev *n, *next;
    int r;

    AIOL_LIST_FOREACH(n, &set->dirty, dirty) {
        if (needs_deassign(n)) {
            r = ioev_ioctl(n, &n->have, false);
            if (r < 0) {
                goto fail;
            }
            n->steps |= STEP_DEASSIGNED;
            n->old = n->have;
            set_have(n, false, NULL);
        }
    }
    AIOL_LIST_FOREACH(n, &set->dirty, dirty) {
        if (needs_assign(n)) {
            r = ioev_ioctl(n, &n->want, true);
            if (r < 0) {
                goto fail;
            }
            n->steps |= STEP_ASSIGNED;
            set_have(n, true, &n->want);
        }
    }
    AIOL_LIST_FOREACH_SAFE(n, &set->dirty, dirty, next) {
        n->steps = 0;
        AIOL_LIST_REMOVE(n, dirty);
    }
    return 0;

fail:
    commit_undo(set);
    return r;
}

int aiol_vmm_ioev_txn_commit(aiol_vmm_ioev_group *set)
{
    int r;

    aiol__vmm_check(set != NULL, "group is NULL");
    aiol__vmm_check(set->depth > 0, "no transaction is open");
    if (set->depth > 1) {
        set->depth--;
        return 0;
    }
    r = commit_apply(set);
    if (r == 0) {
        set->depth = 0;
    }
    return r;
}

void aiol_vmm_ioev_txn_abort(aiol_vmm_ioev_group *set)
{
    aiol_vmm_ioev *n, *next;

    aiol__vmm_check(set != NULL, "group is NULL");
    aiol__vmm_check(set->depth > 0, "no transaction is open");
    AIOL_LIST_FOREACH_SAFE(n, &set->dirty, dirty, next) {
        n->want_on = n->have_on;
        n->want = n->have;
        AIOL_LIST_REMOVE(n, dirty);
    }
    set->depth = 0;
}

/* The loop's thread: the guest kicked. */
static void ioev_read(void *opaque)
{
    aiol_vmm_ioev *n = opaque;
    uint64_t v;

    while (read(n->fd, &v, sizeof(v)) < 0 && errno == EINTR) {
    }
    n->cb(n->opaque);
}

int aiol_vmm_ioev_new(aiol_vmm_ioev_group *set, aiol_handler_fn *cb,
                      void *opaque, aiol_vmm_ioev **out)
{
    aiol_vmm_ioev *n;
    int r;

    aiol__vmm_check(set != NULL && out != NULL, "NULL argument");
    n = calloc(1, sizeof(*n));
    if (n == NULL) {
        return -ENOMEM;
    }
    n->fd = aiol__vmm_eventfd_new();
    if (n->fd < 0) {
        r = n->fd;
        free(n);
        return r;
    }
    n->set = set;
    n->cb = cb;
    n->opaque = opaque;
    if (cb != NULL) {
        r = aiol_fd_set(set->loop, n->fd, ioev_read, NULL, NULL, n);
        if (r < 0) {
            close(n->fd);
            free(n);
            return r;
        }
    }
    AIOL_LIST_INSERT_HEAD(&set->all, n, all);
    *out = n;
    return 0;
}

void aiol_vmm_ioev_free(aiol_vmm_ioev *n)
{
    if (n == NULL) {
        return;
    }
    aiol__vmm_check(!n->have_on,
                    "notifier still registered: remove it and commit first");
    aiol__vmm_check(!n->want_on, "notifier has a set pending");
    if (AIOL_LIST_IS_INSERTED(n, dirty)) {
        AIOL_LIST_REMOVE(n, dirty);  /* set+remove: nothing left to do */
    }
    ioev_destroy(n);
}

/* Runs one change at once when no transaction is open. */
static int change_done(aiol_vmm_ioev_group *set, bool own_txn)
{
    int r;

    if (!own_txn) {
        return 0;
    }
    r = aiol_vmm_ioev_txn_commit(set);
    if (r < 0) {
        aiol_vmm_ioev_txn_abort(set);
    }
    return r;
}

int aiol_vmm_ioev_set(aiol_vmm_ioev *n, const aiol_vmm_ioev_match *m)
{
    bool own_txn;

    aiol__vmm_check(n != NULL && m != NULL, "NULL argument");
    if (!match_valid(m)) {
        return -EINVAL;
    }
    if (n->want_on) {
        return match_eq(&n->want, m) ? -EEXIST : -EBUSY;
    }
    own_txn = n->set->depth == 0;
    if (own_txn) {
        aiol_vmm_ioev_txn_begin(n->set);
    }
    n->want_on = true;
    n->want = *m;
    mark_dirty(n);
    return change_done(n->set, own_txn);
}

int aiol_vmm_ioev_remove(aiol_vmm_ioev *n)
{
    bool own_txn;

    aiol__vmm_check(n != NULL, "notifier is NULL");
    if (!n->want_on) {
        return -ENOENT;
    }
    own_txn = n->set->depth == 0;
    if (own_txn) {
        aiol_vmm_ioev_txn_begin(n->set);
    }
    n->want_on = false;
    mark_dirty(n);
    return change_done(n->set, own_txn);
}

int aiol_vmm_ioev_fd_get(const aiol_vmm_ioev *n)
{
    return n->fd;
}

bool aiol_vmm_ioev_match_get(const aiol_vmm_ioev *n, aiol_vmm_ioev_match *m)
{
    if (n->have_on && m != NULL) {
        *m = n->have;
    }
    return n->have_on;
}

size_t aiol_vmm_ioev_group_count_get(const aiol_vmm_ioev_group *set)
{
    return set->registered;
}
