/* SPDX-License-Identifier: MIT */
/*
 * notify.c - waking the loop from any thread.
 *
 * The protocol (a "notify_me" handshake):
 *
 *   polling thread, about to block       notifier (any thread)
 *   ------------------------------       ---------------------
 *   notify_me += 2                        [F0] fence
 *   [F1] fence                            notified = true
 *   read notified, bottom halves...       [F2] fence
 *   sleep only if nothing is pending      if (notify_me) write(notify_fd)
 *
 * F1 and F2 order a store before a load on each side (Dekker): either the
 * polling thread sees notified (and does not sleep), or the notifier sees
 * notify_me (and writes the eventfd, which is in the fd monitor and wakes
 * the sleep).  A notifier that finds notify_me 0 makes no syscall: the loop
 * is not sleeping and will look at notified before it does.
 *
 * F2b: a bottom-half push is a notify of its own.  The push is a seq_cst
 * read-modify-write of loop->bh_list, and the polling thread reads that
 * list after F1 (or, embedded, after prepare()'s seq_cst store of
 * host_armed) with a seq_cst load.  So the pusher needs neither fence
 * nor notified = true: its seq_cst loads of notify_me and host_armed see
 * the announcement, and it kicks, or the poller's read sees the push
 * (aiol__notify_pushed()).  A schedule saves F0 and F2, two full fences.
 *
 * After the wait, aiol__notify_accept() clears notified, then [F3] fences
 * before the iteration reads the bottom-half list.  F3 pairs with F0: a
 * notifier whose work (say a bottom-half push, made before F0) the
 * iteration missed has its notified = true ordered after our clear, so the
 * next iteration does not sleep.
 *
 * notify_kicked keeps notifies from writing the eventfd more than once per
 * wakeup: a notifier writes only when it flips the flag from false to true,
 * and the notifier handler clears it after draining the eventfd.  So the
 * flag is set on an empty eventfd only between that drain and that clear,
 * while the loop runs an iteration that already accepted every notify
 * made before it; see notify_drain().
 *
 * An embedder may replace the eventfd with its own wakeup
 * (aiol_loop_wakeup_set()): the kick then calls it, every time, since
 * nothing of ours drains it and could clear notify_kicked.
 */
#include <errno.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "loop-priv.h"
#include "notify-priv.h"

/* Internal read handler of notify_fd.  Not progress. */
AIOL__HOT
static void notify_drain(void *opaque)
{
    aiol_loop *loop = opaque;
    eventfd_t value;

    (void)eventfd_read(loop->notify_fd, &value);
    /*
     * Drain, then clear (seq_cst, pairs with the exchange in
     * aiol_loop_notify()).  A notifier that finds the flag still set in
     * between skips its write, but this iteration has already accepted the
     * notify, so its notified = true survives to the next iteration, which
     * will not sleep.  Clearing first would be wrong: a write landing
     * between the clear and the drain would be drained, leaving the flag
     * set on an empty eventfd, and later notifies would skip the write
     * while the loop sleeps.
     */
    atomic_store_explicit(&loop->notify_kicked, false, memory_order_seq_cst);
}

/*
 * A kick ends the wait of the iteration that harvests it, but its handler
 * runs at that iteration's dispatch, after the bottom halves.  A bottom
 * half (or a phase) that polls again, blocking, would find the flag set
 * on an undrained eventfd: later notifies skip their write, and a monitor
 * that reports only new writes (io_uring's poll of it) lets that poll
 * sleep through them.  So before a nested poll may block, it drains the
 * eventfd itself, drain then clear as above; the outer handler then finds
 * it empty.
 */
void aiol__notify_drain_nested(aiol_loop *loop)
{
    if (loop->wakeup_fn == NULL && loop->notify_fd >= 0 &&
        atomic_load_explicit(&loop->notify_kicked, memory_order_seq_cst)) {
        notify_drain(loop);
    }
}

int aiol__notify_init(aiol_loop *loop)
{
    int ret;

    loop->notify_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (loop->notify_fd < 0) {
        return -errno;
    }
    ret = aiol__fd_set_internal(loop, loop->notify_fd, notify_drain, loop);
    if (ret < 0) {
        close(loop->notify_fd);
        loop->notify_fd = -1;
    }
    return ret;
}

void aiol__notify_fini(aiol_loop *loop)
{
    if (loop->notify_fd >= 0) {
        aiol_fd_remove(loop, loop->notify_fd);
        close(loop->notify_fd);
        loop->notify_fd = -1;
    }
}

int aiol_loop_wakeup_set(aiol_loop *loop, aiol_wakeup_fn *fn, void *opaque)
{
    aiol__check(loop != NULL && fn != NULL, "loop or fn is NULL");
    aiol__check(atomic_load(&loop->walkers) == 0,
                "the wakeup is not set from inside the loop's callbacks");
    if (loop->wakeup_fn != NULL) {
        return -EALREADY;
    }
    loop->wakeup_fn = fn;
    loop->wakeup_opaque = opaque;
    aiol__notify_fini(loop);
    return 0;
}

void aiol_loop_notify(aiol_loop *loop)
{
    aiol__check(loop != NULL, "loop is NULL");
    /* F0: pairs with F3 in aiol__notify_accept(). */
    atomic_thread_fence(memory_order_seq_cst);
    atomic_store_explicit(&loop->notified, true, memory_order_relaxed);
    /* F2: pairs with F1 in the poll iteration and in aiol_loop_prepare(). */
    atomic_thread_fence(memory_order_seq_cst);
    if (!aiol__poller_may_sleep(loop) ||
        (loop->wakeup_fn == NULL &&
         atomic_exchange_explicit(&loop->notify_kicked, true,
                                  memory_order_seq_cst))) {
        return; /* nobody may sleep, or our eventfd is written already */
    }
    __atomic_fetch_add(&loop->stats.notify_kicks, 1, __ATOMIC_RELAXED);
    if (loop->wakeup_fn != NULL) {
        loop->wakeup_fn(loop->wakeup_opaque);
    } else {
        (void)eventfd_write(loop->notify_fd, 1);
    }
}

AIOL__HOT
void aiol__notify_accept(aiol_loop *loop)
{
    if (atomic_load_explicit(&loop->notified, memory_order_relaxed)) {
        atomic_store_explicit(&loop->notified, false, memory_order_relaxed);
        /* F3: pairs with F0 in aiol_loop_notify(). */
        atomic_thread_fence(memory_order_seq_cst);
    }
}
