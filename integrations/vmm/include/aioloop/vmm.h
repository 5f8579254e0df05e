/* SPDX-License-Identifier: MIT */
/**
 * @file
 * aioloop/vmm.h - KVM notifier batching for VMM authors, on libaioloop.
 *
 * Four small pieces, usable without QEMU (docs/vmm.md walks through them):
 *
 *   aiol_vmm_ioev_*    host notifiers (KVM ioeventfds) whose eventfds are
 *                      libaioloop fd handlers, set and removed in
 *                      transactions: a commit issues only the KVM_IOEVENTFD
 *                      calls the net change needs, in O(changes).
 *   aiol_vmm_msi_*     an MSI route table with irqfds: any number of
 *                      changes cost one KVM_SET_GSI_ROUTING per commit, and
 *                      an unchanged table commits nothing.
 *   aiol_vmm_msi_coalescer_*  guest-driven route updates from any thread,
 *                      collapsed by a bottom half into one commit per burst
 *                      (last state per route wins); callers may wait.
 *   aiol_vmm_callfd_*  the call-side policy of a virtqueue: no call eventfd
 *                      and no irqfd for a queue without an MSI-X vector.
 *
 * Names: aiol_vmm_<noun>_<verb>, the verb one of new/free (objects),
 * set/remove (entries), get (values), begin/commit/abort (pending changes).
 *
 * Every KVM ioctl goes through an aiol_vmm_kvm_ops table (aiol_vmm_kvm), so
 * a test can put a model of KVM underneath, and a VMM can count or trace
 * calls.
 *
 * Conventions (libaioloop's): calls that can fail return 0 or a negative
 * errno and leave everything as it was; misuse (a NULL object, freeing a
 * notifier that is still registered...) aborts with a message naming the
 * function.  Threads: each object belongs to one thread, named in its
 * section, except where a function says "any thread".
 */
#ifndef AIOLOOP_VMM_H
#define AIOLOOP_VMM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <linux/kvm.h>

#include "aioloop/bh.h"
#include "aioloop/fd.h"
#include "aioloop/loop.h"

#ifdef __cplusplus
extern "C" {
#endif

/* (exported from the shared library; everything else is hidden) */
#pragma GCC visibility push(default)

/* ------------------------------------------------------------------------
 * The ioctl layer
 * ------------------------------------------------------------------------ */

/**
 * How the library talks to KVM.  One member today; new ones are only ever
 * added at the end.
 */
typedef struct aiol_vmm_kvm_ops {
    /**
     * Performs ioctl(@p fd, @p request, @p arg).  Returns the ioctl's
     * non-negative result or a negative errno (never -1 with errno).
     * @p opaque is aiol_vmm_kvm.opaque.  Called from the thread that
     * called into the library (the coalescer: the loop's thread).
     */
    int (*ioctl)(void *opaque, int fd, unsigned long request, void *arg);
} aiol_vmm_kvm_ops;

/** The real layer: ioctl(2), EINTR retried, -errno on failure. */
extern const aiol_vmm_kvm_ops aiol_vmm_kvm_sys_ops;

/**
 * A VM as the library sees it: a VM fd and the layer that reaches it.
 * Objects created from an aiol_vmm_kvm copy it; @c ops NULL means
 * &aiol_vmm_kvm_sys_ops.  The library never closes @c vm_fd.
 */
typedef struct aiol_vmm_kvm {
    const aiol_vmm_kvm_ops *ops; /**< NULL: aiol_vmm_kvm_sys_ops */
    void *opaque;                /**< passed to ops->ioctl */
    int vm_fd;                   /**< from KVM_CREATE_VM */
} aiol_vmm_kvm;

/**
 * Convenience for tests, benchmarks and small VMMs: opens /dev/kvm,
 * creates a VM and, with @p irqchip, an in-kernel irqchip
 * (KVM_CREATE_IRQCHIP, which KVM_SET_GSI_ROUTING and KVM_IRQFD need on
 * x86).  Uses the real layer.  The /dev/kvm fd is closed before returning
 * (the VM keeps KVM alive).
 * @param irqchip  also create the in-kernel irqchip
 * @param vm_fd    receives the VM fd (close-on-exec) on success
 * @return 0; -ENOENT (no /dev/kvm), -EACCES, or what KVM_CREATE_VM /
 *         KVM_CREATE_IRQCHIP gave; nothing is left open on failure.
 */
int aiol_vmm_vm_new(bool irqchip, int *vm_fd);

/* ------------------------------------------------------------------------
 * Host notifiers: ioeventfd transactions
 *
 * A group (aiol_vmm_ioev_group) holds the notifiers of one VM and one
 * loop.  A notifier (aiol_vmm_ioev) owns an eventfd, made by the library;
 * with a callback, the eventfd is a handler on the group's loop, and the
 * callback runs there each time the guest writes the notifier's address
 * (several kicks before the loop runs may run it once).  A notifier is
 * registered with KVM at most at one match (address, length, data) at a
 * time.
 *
 * aiol_vmm_ioev_set() and aiol_vmm_ioev_remove() inside
 * aiol_vmm_ioev_txn_begin() ... aiol_vmm_ioev_txn_commit() only record the
 * wanted state.  The commit then compares, for each notifier changed in
 * the transaction (never the whole group), the wanted state with the
 * registered one and issues exactly the difference: nothing for a set then
 * remove (or remove then set of the same match), one deassign plus one
 * assign for a move.  It deassigns first, so a match may pass from one
 * notifier to another in one commit.  Outside a transaction, set and
 * remove commit at once.
 *
 * An eventfd is closed only by aiol_vmm_ioev_free(), which refuses (aborts)
 * a notifier that is registered or has a change pending: remove it and
 * commit first.  So an eventfd is never closed before its deassign is
 * committed (KVM finds the registration to remove by the open eventfd).
 *
 * Thread: a group and its notifiers belong to one thread (the VMM's device
 * thread).  Callbacks run on the group's loop's thread; free notifiers from
 * that thread or while the loop is not polling.
 * ------------------------------------------------------------------------ */

/** A group of host notifiers of one VM.  Opaque. */
typedef struct aiol_vmm_ioev_group aiol_vmm_ioev_group;

/** One host notifier (an eventfd, at most one KVM registration).  Opaque. */
typedef struct aiol_vmm_ioev aiol_vmm_ioev;

/** What guest write a notifier catches (struct kvm_ioeventfd's fields). */
typedef struct aiol_vmm_ioev_match {
    uint64_t addr;  /**< guest physical (MMIO) or port (PIO) address */
    uint32_t len;   /**< 1, 2, 4, 8, or 0: a write of any length */
    bool pio;       /**< port I/O instead of MMIO */
    bool datamatch; /**< only writes of exactly @c data (len must not be 0) */
    uint64_t data;  /**< the value, with @c datamatch */
} aiol_vmm_ioev_match;

/**
 * Creates an empty group.  Handlers of its notifiers go on @p loop.
 * @p kvm is copied.
 * @return 0 or -ENOMEM.
 */
int aiol_vmm_ioev_group_new(aiol_loop *loop, const aiol_vmm_kvm *kvm,
                            aiol_vmm_ioev_group **out);

/**
 * Frees a group and every notifier still in it: registered ones are
 * deassigned first (one KVM_IOEVENTFD each; errors ignored), then their
 * handlers are removed and their eventfds closed.  Aborts while a
 * transaction is open.  NULL is a no-op.
 */
void aiol_vmm_ioev_group_free(aiol_vmm_ioev_group *g);

/**
 * Opens a transaction.  Transactions nest: only the outermost commit
 * applies the changes (so a machine-level transaction may wrap several
 * device starts).
 */
void aiol_vmm_ioev_txn_begin(aiol_vmm_ioev_group *g);

/**
 * Closes a transaction; the outermost one applies every change made since
 * its begin.  On failure nothing registered has changed (the calls made so
 * far are undone), the transaction stays open with its changes, and the
 * caller may fix the cause and commit again, or aiol_vmm_ioev_txn_abort().
 * (If undoing itself fails, which KVM only does out of memory, the group
 * still records exactly what KVM holds.)
 * @return 0 (an inner commit always); the first failing KVM_IOEVENTFD's
 *         error: -EEXIST (another registration matches the same writes),
 *         -EBADF, -EINVAL, -ENOSPC, -ENOMEM...
 */
int aiol_vmm_ioev_txn_commit(aiol_vmm_ioev_group *g);

/**
 * Drops every change of the open transaction (at any nesting depth) and
 * closes it completely.  No ioctl.
 */
void aiol_vmm_ioev_txn_abort(aiol_vmm_ioev_group *g);

/**
 * True while a transaction is open on @p g.
 * @return true inside a transaction (at any nesting depth), else false.
 */
bool aiol_vmm_ioev_txn_is_open(const aiol_vmm_ioev_group *g);

/**
 * Creates a notifier: a non-blocking eventfd and, with @p cb, a loop
 * handler that drains it and calls @p cb(@p opaque) on the loop's thread.
 * Without @p cb the eventfd has no handler (someone else reads it: a vhost
 * backend, say).  Not registered with KVM until set and committed.
 * @return 0, -EMFILE/-ENFILE (eventfd), -ENOMEM, or aiol_fd_set()'s error.
 */
int aiol_vmm_ioev_new(aiol_vmm_ioev_group *g, aiol_handler_fn *cb,
                      void *opaque, aiol_vmm_ioev **out);

/**
 * Frees a notifier: removes its handler and closes its eventfd.  Aborts
 * when it is registered or a change of it is pending (remove it and
 * commit first).  NULL is a no-op.
 */
void aiol_vmm_ioev_free(aiol_vmm_ioev *n);

/**
 * Registers @p n at @p m: in the open transaction, or at once (one
 * KVM_IOEVENTFD) without one.
 * @return 0; -EINVAL for a length other than 0, 1, 2, 4, 8, a datamatch
 *         with length 0, or an address range that wraps; -EEXIST when @p n
 *         is already set at @p m, -EBUSY when at another match (remove it
 *         first); without a transaction, the commit's error (and then
 *         nothing changed).
 */
int aiol_vmm_ioev_set(aiol_vmm_ioev *n, const aiol_vmm_ioev_match *m);

/**
 * Unregisters @p n: in the open transaction, or at once without one.
 * @return 0; -ENOENT when @p n is not set; without a transaction, the
 *         commit's error (nothing changed).
 */
int aiol_vmm_ioev_remove(aiol_vmm_ioev *n);

/**
 * The notifier's eventfd.
 * @return the fd, valid until aiol_vmm_ioev_free().
 */
int aiol_vmm_ioev_fd_get(const aiol_vmm_ioev *n);

/**
 * True when @p n is registered with KVM as of the last successful commit;
 * then *@p m (if not NULL) receives the match.
 * @return true when registered, false when not (*@p m untouched).
 */
bool aiol_vmm_ioev_match_get(const aiol_vmm_ioev *n, aiol_vmm_ioev_match *m);

/**
 * Number of notifiers registered with KVM as of the last commit.
 * @return the count.
 */
size_t aiol_vmm_ioev_group_count_get(const aiol_vmm_ioev_group *g);

/* ------------------------------------------------------------------------
 * MSI route tables with irqfds
 *
 * A table holds the VM's GSI routing: optional fixed entries (the
 * irqchip's pins, whatever the VMM set before) and MSI routes whose GSIs
 * the table allocates.  Each MSI route may have an irqfd: an eventfd that
 * injects the route's message when written (by a device model, a vhost
 * backend, VFIO).  The route, message and irqfd setters only record the
 * wanted table; aiol_vmm_msi_table_commit() applies it:
 *
 *   1. KVM_IRQFD deassign of every irqfd that goes away or whose route is
 *      removed: before the route, so no irqfd ever points at a missing one;
 *   2. one KVM_SET_GSI_ROUTING with the whole wanted table, if any route
 *      or fixed entry differs from the committed one (KVM's call replaces
 *      the table: its cost is the kernel's grace period, not the size);
 *   3. KVM_IRQFD assign of every new irqfd: after the routes exist.
 *
 * A table whose wanted state equals the committed one (nothing changed,
 * or changes that cancel out) commits with zero ioctls.  An irqfd whose
 * route only changes message costs no KVM_IRQFD: KVM re-reads the route.
 *
 * The limit is what KVM_CHECK_EXTENSION(KVM_CAP_IRQ_ROUTING) reports
 * (4096 on x86: KVM_MAX_IRQ_ROUTES), or 4096 if it reports nothing.  The
 * table refuses to grow past it with -ENOSPC before any ioctl (KVM itself
 * answers EINVAL to a table that large).
 *
 * The table never closes an irqfd: close one only after the commit that
 * detached it.
 *
 * Thread: a table belongs to one thread; with a coalescer, the thread of
 * the coalescer's loop.
 * ------------------------------------------------------------------------ */

/** An MSI message: what the device writes, where. */
typedef struct aiol_vmm_msi_msg {
    uint32_t address_lo; /**< e.g. 0xfee00000 | dest << 12 on x86 */
    uint32_t address_hi; /**< upper 32 bits of the address */
    uint32_t data;       /**< vector, delivery mode... */
} aiol_vmm_msi_msg;

/** A GSI routing table with irqfds.  Opaque. */
typedef struct aiol_vmm_msi_table aiol_vmm_msi_table;

/**
 * Creates an empty table (nothing is committed: KVM's own table stays as
 * it is until the first commit that changes something).  MSI routes get
 * GSIs from @p first_gsi up (24 leaves an IOAPIC's pins alone).  Asks KVM
 * for the route limit (one KVM_CHECK_EXTENSION).
 * @return 0, -ENOMEM, -EINVAL when @p first_gsi is at or past the limit.
 */
int aiol_vmm_msi_table_new(const aiol_vmm_kvm *kvm, uint32_t first_gsi,
                           aiol_vmm_msi_table **out);

/**
 * Frees a table.  Irqfds attached as of the last commit are deassigned
 * (errors ignored); KVM's routing table is left as committed.  NULL is a
 * no-op.
 */
void aiol_vmm_msi_table_free(aiol_vmm_msi_table *t);

/**
 * Replaces the fixed entries: @p n entries of any type (irqchip pins...)
 * sent ahead of the MSI routes in every KVM_SET_GSI_ROUTING.  Their GSIs
 * should lie below the table's first GSI.  Pending until commit.
 * @return 0, -ENOMEM, -ENOSPC when they and the routes exceed the limit.
 */
int aiol_vmm_msi_fixed_set(aiol_vmm_msi_table *t,
                           const struct kvm_irq_routing_entry *entries,
                           size_t n);

/**
 * Adds an MSI route with message @p msg at the lowest free GSI, into
 * *@p gsi.  Pending until commit.
 * @return 0, -ENOSPC (the table is at KVM's limit, or no GSI is free),
 *         -ENOMEM; on error nothing changed.
 */
int aiol_vmm_msi_route_set(aiol_vmm_msi_table *t, const aiol_vmm_msi_msg *msg,
                           uint32_t *gsi);

/**
 * Changes the message of route @p gsi.  Pending until commit; an update
 * back to the committed message cancels the change.
 * @return 0, -ENOENT when @p gsi has no route.
 */
int aiol_vmm_msi_msg_set(aiol_vmm_msi_table *t, uint32_t gsi,
                         const aiol_vmm_msi_msg *msg);

/**
 * Removes route @p gsi, and its irqfd with it.  Pending until commit; the
 * GSI may be reused by aiol_vmm_msi_route_set() at once.
 * @return 0, -ENOENT when @p gsi has no route.
 */
int aiol_vmm_msi_route_remove(aiol_vmm_msi_table *t, uint32_t gsi);

/**
 * Attaches the eventfd @p fd to route @p gsi as its irqfd, replacing any
 * other, or detaches it (@p fd -1).  Pending until commit.  The caller
 * keeps @p fd open until a commit has detached it.
 * @return 0, -ENOENT when @p gsi has no route, -EBADF for @p fd < -1.
 */
int aiol_vmm_msi_irqfd_set(aiol_vmm_msi_table *t, uint32_t gsi, int fd);

/**
 * Applies the pending changes (see above for the order of ioctls).
 * On failure KVM's routes and irqfds are as before (the calls already
 * made are undone), the changes stay pending, and the commit may be
 * retried or the changes dropped with aiol_vmm_msi_table_abort().
 * @return 0; -ENOSPC (over the limit; no ioctl); -ENOMEM before any ioctl;
 *         or the first failing ioctl's error (KVM_SET_GSI_ROUTING:
 *         -EINVAL, -ENOMEM; KVM_IRQFD: -EBADF, -EBUSY, -EINVAL...).
 */
int aiol_vmm_msi_table_commit(aiol_vmm_msi_table *t);

/** Drops every pending change: the wanted table becomes the committed one. */
void aiol_vmm_msi_table_abort(aiol_vmm_msi_table *t);

/**
 * Drops the pending change of route @p gsi only (whatever was set or
 * removed of it since the last commit).
 */
void aiol_vmm_msi_route_abort(aiol_vmm_msi_table *t, uint32_t gsi);

/**
 * True when a commit would issue an ioctl.
 * @return true when the wanted table differs from the committed one.
 */
bool aiol_vmm_msi_table_is_dirty(const aiol_vmm_msi_table *t);

/**
 * The wanted (@p committed false) or committed message of route @p gsi.
 * @return 0, -ENOENT when that table has no route at @p gsi.
 */
int aiol_vmm_msi_msg_get(const aiol_vmm_msi_table *t, uint32_t gsi,
                         bool committed, aiol_vmm_msi_msg *msg);

/**
 * The wanted (@p committed false) or committed irqfd of route @p gsi.
 * @return the irqfd, or -1 when that table has none at @p gsi.
 */
int aiol_vmm_msi_irqfd_get(const aiol_vmm_msi_table *t, uint32_t gsi,
                           bool committed);

/**
 * Number of MSI routes in the wanted table.
 * @return the count.
 */
size_t aiol_vmm_msi_table_count_get(const aiol_vmm_msi_table *t);

/**
 * The route limit (fixed entries and MSI routes together).
 * @return the most routes the table holds.
 */
uint32_t aiol_vmm_msi_table_limit_get(const aiol_vmm_msi_table *t);

/* ------------------------------------------------------------------------
 * Coalescing guest-driven MSI updates
 *
 * A guest reprogramming MSI-X vectors one by one (unmask, affinity
 * changes) would cost one KVM_SET_GSI_ROUTING each, and each one waits a
 * kernel grace period.  The coalescer queues updates from any thread; a
 * bottom half on the loop takes everything queued and commits it in one
 * KVM_SET_GSI_ROUTING.  Several updates of one route before that commit:
 * the last one wins.  Each update may carry a completion that learns the
 * commit's result (or -ENOENT when its route no longer exists); one that
 * was replaced by a later update of the same route completes with the
 * commit that carried the later one.  A failed commit drops the burst's
 * changes (the routes keep their committed messages).
 *
 * Until its commit, an irqfd of an updated route still injects the old
 * message (KVM holds it).  A device model that must not deliver through
 * a stale route waits for the update (aiol_vmm_msi_coalescer_set_wait())
 * before it raises the vector again.
 *
 * Thread: updates from any thread; completions, commits and free on the
 * loop's thread, which also owns the table.
 * ------------------------------------------------------------------------ */

/** A coalescer of MSI route updates.  Opaque. */
typedef struct aiol_vmm_msi_coalescer aiol_vmm_msi_coalescer;

/** Completion of an update: @p result 0 or a negative errno. */
typedef void aiol_vmm_msi_done_fn(void *opaque, int result);

/**
 * Creates a coalescer committing @p t from a bottom half on @p loop.
 * @return 0 or -ENOMEM.
 */
int aiol_vmm_msi_coalescer_new(aiol_loop *loop, aiol_vmm_msi_table *t,
                               aiol_vmm_msi_coalescer **out);

/**
 * Frees a coalescer.  Loop's thread.  Updates still queued are dropped
 * and their completions called with -ECANCELED.  NULL is a no-op.
 */
void aiol_vmm_msi_coalescer_free(aiol_vmm_msi_coalescer *c);

/**
 * Queues the update "route gsi gets message msg" (@p gsi, @p msg) and
 * schedules the commit.
 * Any thread.  @p done (may be NULL) runs on the loop's thread after the
 * commit that carried this update (or the later one that replaced it).
 * @param c       the coalescer
 * @param gsi     the route
 * @param msg     its new message (copied)
 * @param done    completion, or NULL
 * @param opaque  passed to @p done
 * @param seq     if not NULL, receives the update's sequence number (1,
 *                2... in queueing order, per coalescer)
 * @return 0; -EINVAL for a GSI at or past the table's limit; -ENOMEM
 *         (with @p done: its record); on error nothing was queued.
 */
int aiol_vmm_msi_coalescer_set(aiol_vmm_msi_coalescer *c, uint32_t gsi,
                               const aiol_vmm_msi_msg *msg,
                               aiol_vmm_msi_done_fn *done, void *opaque,
                               uint64_t *seq);

/**
 * Queues an update and waits until it is applied.  Any thread except the
 * loop's (the loop must run for it to return; calling it from inside the
 * coalescer's own loop thread aborts).
 * @return the commit's result: 0, -ENOENT (no such route), the commit's
 *         error; or the queueing error.
 */
int aiol_vmm_msi_coalescer_set_wait(aiol_vmm_msi_coalescer *c, uint32_t gsi,
                                    const aiol_vmm_msi_msg *msg);

/**
 * The sequence number of the last update applied (its commit finished,
 * successfully or not) or 0.  Any thread.
 * @return the sequence number, 0 before the first update was applied.
 */
uint64_t aiol_vmm_msi_coalescer_applied_get(const aiol_vmm_msi_coalescer *c);

/**
 * Number of commits (bursts) the coalescer made.  Loop's thread.
 * @return the count.
 */
uint64_t aiol_vmm_msi_coalescer_commits_get(const aiol_vmm_msi_coalescer *c);

/* ------------------------------------------------------------------------
 * Vring call policy
 *
 * A virtqueue whose driver gave it no MSI-X vector (VIRTIO_NO_VECTOR: a
 * polling driver such as a DPDK PMD) must not get a call eventfd: the
 * backend then never signals it (VHOST_SET_VRING_CALL with fd -1), which
 * saves the backend's signalling work on every used buffer.  With a
 * vector, the queue gets a call eventfd attached as the irqfd of the
 * vector's route.
 *
 * Thread: the table's.
 * ------------------------------------------------------------------------ */

/** The "no vector" value of the virtio PCI transport. */
#define AIOL_VMM_NO_VECTOR 0xffffu

/**
 * One queue's call side.  Initialise with AIOL_VMM_CALLFD_INIT; read only
 * through the functions below.
 */
typedef struct aiol_vmm_callfd {
    int efd;      /**< the call eventfd, made on first use, or -1 */
    uint32_t gsi; /**< route the eventfd is the irqfd of, with @c bound */
    bool bound;   /**< a vector is set: the eventfd is (to be) the irqfd */
} aiol_vmm_callfd;

/** Initialiser of an unbound aiol_vmm_callfd. */
#define AIOL_VMM_CALLFD_INIT { .efd = -1, .gsi = 0, .bound = false }

/**
 * Applies the policy to a queue whose vector is now @p vector, routed at
 * @p gsi (ignored for AIOL_VMM_NO_VECTOR).  With a vector: makes the
 * call eventfd if needed and sets it as @p gsi's irqfd (moving it off a
 * previous GSI).  Without: detaches it.  Pending in @p t until
 * aiol_vmm_msi_table_commit().  An unchanged binding changes nothing.
 * @return 0, -EMFILE (eventfd), or aiol_vmm_msi_irqfd_set()'s error;
 *         on error nothing changed.
 */
int aiol_vmm_callfd_set(aiol_vmm_msi_table *t, aiol_vmm_callfd *vc,
                        uint16_t vector, uint32_t gsi);

/**
 * The fd to hand to the backend as the queue's call fd: the eventfd with
 * a vector, -1 without one ("no call fd: do not signal").
 * @return the eventfd or -1.
 */
int aiol_vmm_callfd_get(const aiol_vmm_callfd *vc);

/**
 * Closes the call eventfd.  Aborts if it is still attached in @p t, wanted
 * or committed: set AIOL_VMM_NO_VECTOR and commit first.
 */
void aiol_vmm_callfd_remove(aiol_vmm_msi_table *t, aiol_vmm_callfd *vc);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif

#endif /* AIOLOOP_VMM_H */
