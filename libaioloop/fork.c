/* SPDX-License-Identifier: MIT */
/*
 * fork.c - a loop in the child of fork().
 *
 * fork() copies the loop's memory but not its kernel objects: the child's
 * fds name the parent's epoll instance, io_uring ring (whose SQ and CQ
 * rings are shared memory, and which is bound to a parent thread) and
 * notify eventfd.  Anything the child does through them changes the
 * parent's loop: an epoll_ctl DEL removes the parent's registration, a
 * notify wakes the parent, a submission lands on the parent's ring.
 *
 * So the child drops what belongs to the parent with no syscall on it,
 * through the monitor's forget op: it frees the monitor's memory, munmaps
 * (io_uring) and closes the child's copies of the fds, which only drops
 * the child's references.  Either
 *
 *   - aiol_loop_after_fork() gives the loop kernel objects of its own
 *     first, every step that can fail before anything of the parent's is
 *     dropped: a new eventfd put in place of the old one's fd number
 *     (dup3, so the notifier's entry in the handler table stays as it
 *     is), a new monitor state from the monitor's init op, and every
 *     handler on loop->live registered there through its update op; then
 *     it forgets the parent's state and keeps the new one; or
 *   - aiol_loop_free() in a child that did not call it (loop->pid is not
 *     the caller's) forgets the parent's state and swaps in
 *     forgotten_mon, whose ops touch nothing, so the ordinary teardown
 *     frees memory and closes only the child's copy of the eventfd.
 *
 * Threading: the child's only thread; nothing else can hold loop->lock
 * unless a parent thread held it at fork time (a documented misuse).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "fdmon.h"
#include "loop-priv.h"

bool aiol__loop_forked(const aiol_loop *loop)
{
    return loop->pid != getpid();
}

/* Drops the parent's monitor state; loop->fdmon_state is NULL afterwards. */
static void mon_forget(aiol_loop *loop)
{
    if (loop->fdmon->forget != NULL) {
        loop->fdmon->forget(loop);
    }
    loop->fdmon_state = NULL; /* (leaked without forget: no syscall either) */
}

/*
 * The ops of a dying fork child's loop: only what teardown calls (update
 * for each handler's removal, fini), and those touch nothing.
 */
static void forgotten_fini(aiol_loop *loop)
{
    (void)loop;
}

static int forgotten_update(aiol_loop *loop, aiol__handler *old,
                            aiol__handler *new_)
{
    (void)loop;
    (void)old;
    (void)new_;
    return 0;
}

static const aiol__fdmon_ops forgotten_mon = {
    .name = "forgotten",
    .fini = forgotten_fini,
    .update = forgotten_update,
};

void aiol__loop_forget_forked(aiol_loop *loop)
{
    mon_forget(loop);
    /*
     * loop->fdmon is otherwise immutable; the loop is being freed by the
     * child's only thread, and teardown calls only update (handler
     * removal, the notifier's included) and fini.
     */
    loop->fdmon = &forgotten_mon;
}

/*
 * Puts a new eventfd in place of the inherited notify fd (same number, so
 * the notifier's handler and its registration stay as they are).  0 or
 * -errno, leaving the old one.
 */
static int notify_renew(aiol_loop *loop)
{
    int efd;

    if (loop->notify_fd < 0) {
        return 0; /* an embedder's wakeup_fn: the embedder's to handle */
    }
    efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (efd < 0) {
        return -errno;
    }
    /* dup3 closes the child's copy of the parent's eventfd. */
    if (dup3(efd, loop->notify_fd, O_CLOEXEC) < 0) {
        int ret = -errno;

        close(efd);
        return ret;
    }
    close(efd);
    /*
     * The new eventfd is empty: a kick the parent left set would make
     * every notify skip its write.  Relaxed: the child's only thread.
     */
    atomic_store_explicit(&loop->notify_kicked, false, memory_order_relaxed);
    return 0;
}

/*
 * Under loop->lock, with the child's new monitor state in loop->fdmon_state:
 * registers every handler on loop->live.  On failure unregisters those it
 * did and puts back each handler's fdmon_slot (the parent's state's, saved
 * in @slots, one per handler), so the parent's state is as it was.
 * 0 or -errno.
 */
static int register_all(aiol_loop *loop, int *slots)
{
    aiol__handler *node, *failed = NULL;
    size_t i = 0;
    int ret = 0;

    aiol__assert_locked(loop);
    AIOL_LIST_FOREACH(node, &loop->live, node_live) {
        slots[i++] = node->fdmon_slot;
        node->fdmon_slot = -1; /* "not in the monitor" (fdmon-poll.c) */
    }
    AIOL_LIST_FOREACH(node, &loop->live, node_live) {
        ret = loop->fdmon->update(loop, NULL, node);
        if (ret < 0) {
            failed = node;
            break;
        }
    }
    if (failed == NULL) {
        return 0;
    }
    AIOL_LIST_FOREACH(node, &loop->live, node_live) {
        if (node == failed) {
            break;
        }
        (void)loop->fdmon->update(loop, node, NULL); /* the child's own state */
    }
    i = 0;
    AIOL_LIST_FOREACH(node, &loop->live, node_live) {
        node->fdmon_slot = slots[i++];
    }
    return ret;
}

int aiol_loop_after_fork(aiol_loop *loop)
{
    void *parent_state, *child_state;
    int *slots;
    int ret;

    aiol__check(loop != NULL, "loop is NULL");
    if (!aiol__loop_forked(loop)) {
        return 0; /* the loop's objects are this process's already */
    }
    aiol__check(atomic_load(&loop->walkers) == 0,
                "aiol_loop_after_fork() called from inside the loop's poll");
    if (loop->fdmon->forget == NULL) {
        return -ENOTSUP;
    }
    aiol__owner_take(loop); /* the child's one thread */
    /* Everything that can fail comes first and leaves the parent's state. */
    ret = notify_renew(loop);
    if (ret < 0) {
        return ret;
    }
    parent_state = loop->fdmon_state;
    ret = loop->fdmon->init(loop);
    if (ret < 0) {
        loop->fdmon_state = parent_state;
        return ret;
    }
    child_state = loop->fdmon_state;
    aiol__lock(loop);
    slots = malloc((aiol__handlers_count(loop) + 1) * sizeof(*slots));
    ret = slots == NULL ? -ENOMEM : register_all(loop, slots);
    if (ret == 0) {
        aiol__embed_invalidate(loop); /* embed_fds' list was the parent's */
    }
    aiol__unlock(loop);
    free(slots);
    if (ret < 0) {
        loop->fdmon->fini(loop); /* the child's own new state, empty again */
        loop->fdmon_state = parent_state;
        return ret;
    }

    /* From here on nothing fails: drop the parent's state, keep ours. */
    loop->fdmon_state = parent_state;
    mon_forget(loop);
    loop->fdmon_state = child_state;
    loop->pid = getpid();
    return 0;
}
