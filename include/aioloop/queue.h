/* SPDX-License-Identifier: MIT */
/**
 * @file
 * aioloop/queue.h - intrusive lists for event-loop bookkeeping.
 *
 * Two shapes, both intrusive (the link lives inside the element, nothing
 * is allocated) and header-only:
 *
 *   AIOL_LIST   doubly linked list: O(1) insert and O(1) remove of any element.
 *   AIOL_TAILQ  doubly linked tail queue: like AIOL_LIST plus O(1) insert at
 *               the tail and O(1) access to the last element (FIFO queues).
 *
 * Membership.  An element whose link is all zeroes (calloc, or
 * AIOL_LIST_ENTRY_INIT / AIOL_TAILQ_ENTRY_INIT) is "in no list".  REMOVE leaves the link zeroed again, so:
 *
 *   AIOL_LIST_IS_INSERTED(elm, field)   true while elm is in some list
 *   AIOL_LIST_SAFE_REMOVE(elm, field)   removes elm if it is in a list, else
 *                                       does nothing
 *
 * and the same for TAILQ.  This is what lets the loop keep a handler on at
 * most one ready list at a time and take it off in O(1) from wherever it is,
 * without knowing which list (which poll call) owns it.
 *
 * None of these macros is thread-safe: the owner of the list serialises
 * access (see each list's comment in the code that declares it).
 *
 * The FOREACH_SAFE forms allow the body to remove (and free) the current
 * element; the plain FOREACH forms do not.
 */
#ifndef AIOLOOP_QUEUE_H
#define AIOLOOP_QUEUE_H

#include <stddef.h>

/* ----------------------------------------------------------------- LIST */

/** Declares a struct type @p name that heads a doubly linked list of @p type. */
#define AIOL_LIST_HEAD(name, type)                                           \
    struct name {                                                            \
        struct type *lh_first;                                               \
    }

/** Static initialiser for an empty LIST head. */
#define AIOL_LIST_HEAD_INITIALIZER { NULL }

/**
 * Declares the link member of a LIST element.  le_prev points at the
 * previous element's le_next (or at the head's lh_first); it is NULL exactly
 * when the element is in no list.
 */
#define AIOL_LIST_ENTRY(type)                                                \
    struct {                                                                 \
        struct type *le_next;                                                \
        struct type **le_prev;                                               \
    }

/** Makes @p head empty. */
#define AIOL_LIST_INIT(head) ((head)->lh_first = NULL)
/** Marks @p elm as being in no list (not needed after calloc). */
#define AIOL_LIST_ENTRY_INIT(elm, field)                                     \
    ((elm)->field.le_next = NULL, (elm)->field.le_prev = NULL)
/** True when the list has no element. */
#define AIOL_LIST_EMPTY(head) ((head)->lh_first == NULL)
/** First element, or NULL. */
#define AIOL_LIST_FIRST(head) ((head)->lh_first)
/** Element after @p elm, or NULL. */
#define AIOL_LIST_NEXT(elm, field) ((elm)->field.le_next)
/** True while @p elm is in some list. */
#define AIOL_LIST_IS_INSERTED(elm, field) ((elm)->field.le_prev != NULL)

/** Inserts @p elm at the head. O(1). @p elm must be in no list. */
#define AIOL_LIST_INSERT_HEAD(head, elm, field)                              \
    do {                                                                     \
        if (((elm)->field.le_next = (head)->lh_first) != NULL) {             \
            (head)->lh_first->field.le_prev = &(elm)->field.le_next;         \
        }                                                                    \
        (head)->lh_first = (elm);                                            \
        (elm)->field.le_prev = &(head)->lh_first;                            \
    } while (0)

/** Inserts @p elm after @p listelm. O(1). */
#define AIOL_LIST_INSERT_AFTER(listelm, elm, field)                          \
    do {                                                                     \
        if (((elm)->field.le_next = (listelm)->field.le_next) != NULL) {     \
            (listelm)->field.le_next->field.le_prev = &(elm)->field.le_next; \
        }                                                                    \
        (listelm)->field.le_next = (elm);                                    \
        (elm)->field.le_prev = &(listelm)->field.le_next;                    \
    } while (0)

/** Inserts @p elm before @p listelm. O(1). */
#define AIOL_LIST_INSERT_BEFORE(listelm, elm, field)                         \
    do {                                                                     \
        (elm)->field.le_prev = (listelm)->field.le_prev;                     \
        (elm)->field.le_next = (listelm);                                    \
        *(listelm)->field.le_prev = (elm);                                   \
        (listelm)->field.le_prev = &(elm)->field.le_next;                    \
    } while (0)

/** Removes @p elm, which must be in a list, and marks it as in no list. O(1). */
#define AIOL_LIST_REMOVE(elm, field)                                         \
    do {                                                                     \
        if ((elm)->field.le_next != NULL) {                                  \
            (elm)->field.le_next->field.le_prev = (elm)->field.le_prev;      \
        }                                                                    \
        *(elm)->field.le_prev = (elm)->field.le_next;                        \
        (elm)->field.le_next = NULL;                                         \
        (elm)->field.le_prev = NULL;                                         \
    } while (0)

/** Removes @p elm if it is in a list; does nothing otherwise. O(1). */
#define AIOL_LIST_SAFE_REMOVE(elm, field)                                    \
    do {                                                                     \
        if (AIOL_LIST_IS_INSERTED(elm, field)) {                             \
            AIOL_LIST_REMOVE(elm, field);                                    \
        }                                                                    \
    } while (0)

/** Iterates; the body must not remove @p var. */
#define AIOL_LIST_FOREACH(var, head, field)                                  \
    for ((var) = (head)->lh_first; (var); (var) = (var)->field.le_next)

/** Iterates; the body may remove and free @p var (but not its successor). */
#define AIOL_LIST_FOREACH_SAFE(var, head, field, tvar)                       \
    for ((var) = (head)->lh_first;                                           \
         (var) && ((tvar) = (var)->field.le_next, 1); (var) = (tvar))

/* ---------------------------------------------------------------- TAILQ */

/** Declares a struct type @p name that heads a tail queue of @p type. */
#define AIOL_TAILQ_HEAD(name, type)                                          \
    struct name {                                                            \
        struct type *tqh_first;                                              \
        struct type **tqh_last;                                              \
    }

/** Static initialiser for an empty TAILQ head named @p head. */
#define AIOL_TAILQ_HEAD_INITIALIZER(head) { NULL, &(head).tqh_first }

/**
 * Declares the link member of a TAILQ element.  tqe_prev is NULL exactly
 * when the element is in no queue.
 */
#define AIOL_TAILQ_ENTRY(type)                                               \
    struct {                                                                 \
        struct type *tqe_next;                                               \
        struct type **tqe_prev;                                              \
    }

/** Makes @p head empty. Required before first use (unlike LIST). */
#define AIOL_TAILQ_INIT(head)                                                \
    do {                                                                     \
        (head)->tqh_first = NULL;                                            \
        (head)->tqh_last = &(head)->tqh_first;                               \
    } while (0)

/** Marks @p elm as being in no queue (not needed after calloc). */
#define AIOL_TAILQ_ENTRY_INIT(elm, field)                                    \
    ((elm)->field.tqe_next = NULL, (elm)->field.tqe_prev = NULL)
/** True when the queue has no element. */
#define AIOL_TAILQ_EMPTY(head) ((head)->tqh_first == NULL)
/** First element, or NULL. */
#define AIOL_TAILQ_FIRST(head) ((head)->tqh_first)
/** Element after @p elm, or NULL. */
#define AIOL_TAILQ_NEXT(elm, field) ((elm)->field.tqe_next)
/** True while @p elm is in some queue. */
#define AIOL_TAILQ_IS_INSERTED(elm, field) ((elm)->field.tqe_prev != NULL)

/**
 * Last element, or NULL.  Uses the layout trick every BSD-style tail queue
 * uses: tqh_last points at a tqe_next member, which is the first member of
 * the element's link, so the link struct can be read through it.
 */
#define AIOL_TAILQ_LAST(head, type, field)                                   \
    ((head)->tqh_first == NULL ? NULL                                        \
     : (struct type *)((char *)(head)->tqh_last -                            \
                       offsetof(struct type, field.tqe_next)))

/** Inserts @p elm at the head. O(1). */
#define AIOL_TAILQ_INSERT_HEAD(head, elm, field)                             \
    do {                                                                     \
        if (((elm)->field.tqe_next = (head)->tqh_first) != NULL) {           \
            (head)->tqh_first->field.tqe_prev = &(elm)->field.tqe_next;      \
        } else {                                                             \
            (head)->tqh_last = &(elm)->field.tqe_next;                       \
        }                                                                    \
        (head)->tqh_first = (elm);                                           \
        (elm)->field.tqe_prev = &(head)->tqh_first;                          \
    } while (0)

/** Inserts @p elm at the tail. O(1). */
#define AIOL_TAILQ_INSERT_TAIL(head, elm, field)                             \
    do {                                                                     \
        (elm)->field.tqe_next = NULL;                                        \
        (elm)->field.tqe_prev = (head)->tqh_last;                            \
        *(head)->tqh_last = (elm);                                           \
        (head)->tqh_last = &(elm)->field.tqe_next;                           \
    } while (0)

/** Inserts @p elm after @p listelm. O(1). */
#define AIOL_TAILQ_INSERT_AFTER(head, listelm, elm, field)                   \
    do {                                                                     \
        if (((elm)->field.tqe_next = (listelm)->field.tqe_next) != NULL) {   \
            (elm)->field.tqe_next->field.tqe_prev = &(elm)->field.tqe_next;  \
        } else {                                                             \
            (head)->tqh_last = &(elm)->field.tqe_next;                       \
        }                                                                    \
        (listelm)->field.tqe_next = (elm);                                   \
        (elm)->field.tqe_prev = &(listelm)->field.tqe_next;                  \
    } while (0)

/** Removes @p elm, which must be in @p head, and marks it as in no queue. O(1). */
#define AIOL_TAILQ_REMOVE(head, elm, field)                                  \
    do {                                                                     \
        if ((elm)->field.tqe_next != NULL) {                                 \
            (elm)->field.tqe_next->field.tqe_prev = (elm)->field.tqe_prev;   \
        } else {                                                             \
            (head)->tqh_last = (elm)->field.tqe_prev;                        \
        }                                                                    \
        *(elm)->field.tqe_prev = (elm)->field.tqe_next;                      \
        (elm)->field.tqe_next = NULL;                                        \
        (elm)->field.tqe_prev = NULL;                                        \
    } while (0)

/** Removes @p elm from @p head if it is in a queue; does nothing otherwise. */
#define AIOL_TAILQ_SAFE_REMOVE(head, elm, field)                             \
    do {                                                                     \
        if (AIOL_TAILQ_IS_INSERTED(elm, field)) {                            \
            AIOL_TAILQ_REMOVE(head, elm, field);                             \
        }                                                                    \
    } while (0)

/** Iterates; the body must not remove @p var. */
#define AIOL_TAILQ_FOREACH(var, head, field)                                 \
    for ((var) = (head)->tqh_first; (var); (var) = (var)->field.tqe_next)

/** Iterates; the body may remove and free @p var. */
#define AIOL_TAILQ_FOREACH_SAFE(var, head, field, tvar)                      \
    for ((var) = (head)->tqh_first;                                          \
         (var) && ((tvar) = (var)->field.tqe_next, 1); (var) = (tvar))

#endif /* AIOLOOP_QUEUE_H */
