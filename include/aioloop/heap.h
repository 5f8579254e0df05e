/* SPDX-License-Identifier: MIT */
/**
 * @file
 * aioloop/heap.h - an intrusive 4-ary min-heap, generated per element type.
 *
 * The loop keeps its timers in one (libaioloop/timer.c); embedders with
 * timer lists of their own (QEMU's QEMUTimerList) can use the same code.
 * Like queue.h it is header-only and intrusive: each element keeps its own
 * position in a size_t member, so removing or re-keying an element is
 * O(log n) with no search.  The owner supplies the ordering and serialises
 * access.
 *
 *   struct job { int64_t when; size_t heap_idx; };
 *   static bool job_before(const struct job *a, const struct job *b)
 *   { return a->when < b->when; }
 *   AIOL_HEAP_HEAD(job_heap, job);
 *   AIOL_HEAP_GENERATE(job_heap, job, heap_idx, job_before)
 *
 *   struct job_heap h = AIOL_HEAP_INITIALIZER;
 *   job_heap_push(&h, &j);              // 0 or -ENOMEM
 *   j.when = 5; job_heap_update(&h, &j);
 *   struct job *first = job_heap_top(&h);
 *   job_heap_remove(&h, &j);            // j.heap_idx == AIOL_HEAP_NONE after
 *   job_heap_fini(&h);
 *
 * A 4-ary heap is half as deep as a binary one and keeps a node's children
 * in one or two cache lines (libev's observation).  Elements in no heap
 * must have their index set to AIOL_HEAP_NONE.
 *
 * The keyed kind (AIOL_HEAP_KEYED_HEAD, AIOL_HEAP_KEYED_GENERATE) keeps
 * each key in the heap's array beside its element's pointer, so sifting
 * reads no element: for large heaps whose elements are scattered in
 * memory, as a loop's timers are (libaioloop/timer.c).
 */
#ifndef AIOLOOP_HEAP_H
#define AIOLOOP_HEAP_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

/** Index of an element that is in no heap. */
#define AIOL_HEAP_NONE SIZE_MAX

/** Children per node. */
#define AIOL_HEAP_D 4

/* Generated functions: a file need not use them all. */
#define AIOL_HEAP_FN_ static inline __attribute__((unused))

/** Declares a struct type @p name that heads a heap of struct @p type. */
#define AIOL_HEAP_HEAD(name, type)                                           \
    struct name {                                                            \
        struct type **v;                                                     \
        size_t n, cap;                                                       \
    }

/**
 * Declares a struct type @p name that heads a keyed heap of struct @p type:
 * each slot keeps the element's key (of type @p keytype) next to its
 * pointer, so reordering compares keys in the heap's own array and never
 * reads an element (libev's cached deadline); only a moved element's
 * index is written.  For large heaps of scattered elements.
 */
#define AIOL_HEAP_KEYED_HEAD(name, type, keytype)                            \
    struct name##_slot {                                                     \
        keytype key;                                                         \
        struct type *e;                                                      \
    };                                                                       \
    struct name {                                                            \
        struct name##_slot *v;                                               \
        size_t n, cap;                                                       \
    }

/** Static initialiser for an empty heap (either kind). */
#define AIOL_HEAP_INITIALIZER { NULL, 0, 0 }

/*
 * What both kinds share, over slots of type @p slot_t: name##_el_(slot)
 * (the element) and name##_lt_(a, b) (the order), which the caller
 * defines first.
 */
#define AIOL_HEAP_CORE_(name, type, slot_t, field)                          \
    AIOL_HEAP_FN_ void name##_set_(struct name *h, size_t i, slot_t x)       \
    {                                                                        \
        h->v[i] = x;                                                         \
        name##_el_(&h->v[i])->field = i;                                     \
    }                                                                        \
    AIOL_HEAP_FN_ void name##_up_(struct name *h, size_t i)                  \
    {                                                                        \
        slot_t x = h->v[i];                                                  \
        while (i > 0) {                                                      \
            size_t p = (i - 1) / AIOL_HEAP_D;                                \
            if (!name##_lt_(&x, &h->v[p])) {                                 \
                break;                                                       \
            }                                                                \
            name##_set_(h, i, h->v[p]);                                      \
            i = p;                                                           \
        }                                                                    \
        name##_set_(h, i, x);                                                \
    }                                                                        \
    AIOL_HEAP_FN_ void name##_down_(struct name *h, size_t i)                \
    {                                                                        \
        slot_t x = h->v[i];                                                  \
        for (;;) {                                                           \
            size_t c = i * AIOL_HEAP_D + 1, best = i;                        \
            for (size_t k = c; k < c + AIOL_HEAP_D && k < h->n; k++) {       \
                if (name##_lt_(&h->v[k], best == i ? &x : &h->v[best])) {    \
                    best = k;                                                \
                }                                                            \
            }                                                                \
            if (best == i) {                                                 \
                break;                                                       \
            }                                                                \
            name##_set_(h, i, h->v[best]);                                   \
            i = best;                                                        \
        }                                                                    \
        name##_set_(h, i, x);                                                \
    }                                                                        \
    /* Restores order around slot @i after its key changed. */               \
    AIOL_HEAP_FN_ void name##_fix_(struct name *h, size_t i)                 \
    {                                                                        \
        if (i > 0 && name##_lt_(&h->v[i], &h->v[(i - 1) / AIOL_HEAP_D])) {   \
            name##_up_(h, i);                                                \
        } else {                                                             \
            name##_down_(h, i);                                              \
        }                                                                    \
    }                                                                        \
    AIOL_HEAP_FN_ int name##_push_slot_(struct name *h, slot_t x)            \
    {                                                                        \
        if (h->n == h->cap) {                                                \
            size_t cap = h->cap ? 2 * h->cap : 64;                           \
            slot_t *v = (slot_t *)realloc(h->v, cap * sizeof(*v));           \
            if (v == NULL) {                                                 \
                return -ENOMEM;                                              \
            }                                                                \
            h->v = v;                                                        \
            h->cap = cap;                                                    \
        }                                                                    \
        h->v[h->n] = x;                                                      \
        name##_up_(h, h->n++);                                               \
        return 0;                                                            \
    }                                                                        \
    /*                                                                       \
     * Takes @e (in @h) out.  O(log n).  The last slot fills the hole the    \
     * bottom-up way (Floyd): the hole sinks to a leaf along the smaller     \
     * children, 3 comparisons a level instead of 4, and the last slot,      \
     * which belongs near the leaves, rises from there (usually not far).    \
     */                                                                      \
    AIOL_HEAP_FN_ void name##_remove(struct name *h, struct type *e)         \
    {                                                                        \
        size_t i = e->field;                                                 \
        e->field = AIOL_HEAP_NONE;                                           \
        if (i == --h->n) {                                                   \
            return;                                                          \
        }                                                                    \
        for (;;) {                                                           \
            size_t c = i * AIOL_HEAP_D + 1, best = c;                        \
            if (c >= h->n) {                                                 \
                break;                                                       \
            }                                                                \
            for (size_t k = c + 1; k < c + AIOL_HEAP_D && k < h->n; k++) {   \
                if (name##_lt_(&h->v[k], &h->v[best])) {                     \
                    best = k;                                                \
                }                                                            \
            }                                                                \
            name##_set_(h, i, h->v[best]);                                   \
            i = best;                                                        \
        }                                                                    \
        h->v[i] = h->v[h->n];                                                \
        name##_up_(h, i);                                                    \
    }                                                                        \
    /* The first element, or NULL.  O(1). */                                 \
    AIOL_HEAP_FN_ struct type *name##_top(const struct name *h)              \
    {                                                                        \
        return h->n ? name##_el_(&h->v[0]) : NULL;                           \
    }                                                                        \
    /* Takes the first element out and returns it, or NULL.  O(log n). */    \
    AIOL_HEAP_FN_ struct type *name##_pop(struct name *h)                    \
    {                                                                        \
        struct type *e = name##_top(h);                                      \
        if (e != NULL) {                                                     \
            name##_remove(h, e);                                             \
        }                                                                    \
        return e;                                                            \
    }                                                                        \
    /* Number of elements. */                                                \
    AIOL_HEAP_FN_ size_t name##_count(const struct name *h)                  \
    {                                                                        \
        return h->n;                                                         \
    }                                                                        \
    /* Frees the heap's array; the elements are the owner's. */             \
    AIOL_HEAP_FN_ void name##_fini(struct name *h)                           \
    {                                                                        \
        free(h->v);                                                          \
        h->v = NULL;                                                         \
        h->n = h->cap = 0;                                                   \
    }

/**
 * Defines static functions name_push, name_remove, name_update, name_top,
 * name_pop, name_count and name_fini for heap head struct @p name of struct
 * @p type elements, whose size_t member @p field holds their position and
 * which @p before (bool (*)(const struct type *, const struct type *))
 * orders.
 */
#define AIOL_HEAP_GENERATE(name, type, field, before)                        \
    AIOL_HEAP_FN_ struct type *name##_el_(struct type *const *x)             \
    {                                                                        \
        return *x;                                                           \
    }                                                                        \
    AIOL_HEAP_FN_ bool name##_lt_(struct type *const *a,                     \
                                  struct type *const *b)                     \
    {                                                                        \
        return before(*a, *b);                                               \
    }                                                                        \
    AIOL_HEAP_CORE_(name, type, struct type *, field)                       \
    /* Adds @e (in no heap).  O(log n).  0 or -ENOMEM (heap unchanged). */   \
    AIOL_HEAP_FN_ int name##_push(struct name *h, struct type *e)            \
    {                                                                        \
        return name##_push_slot_(h, e);                                      \
    }                                                                        \
    /* Restores order after @e's key changed (@e in @h).  O(log n). */      \
    AIOL_HEAP_FN_ void name##_update(struct name *h, struct type *e)         \
    {                                                                        \
        name##_fix_(h, e->field);                                            \
    }

/**
 * Defines, for keyed heap head struct @p name (AIOL_HEAP_KEYED_HEAD) of
 * struct @p type elements with their position in size_t member @p field
 * and keys of type @p keytype ordered by @p before (bool (*)(const keytype
 * *, const keytype *)): name_push(h, e, key), name_update(h, e, key) (a
 * new key), name_top_key(h) (the first key, or NULL), and name_remove,
 * name_top, name_pop, name_count and name_fini as for AIOL_HEAP_GENERATE.
 * The heap holds each key: an element need not keep its own.
 */
#define AIOL_HEAP_KEYED_GENERATE(name, type, field, keytype, before)         \
    AIOL_HEAP_FN_ struct type *name##_el_(const struct name##_slot *x)       \
    {                                                                        \
        return x->e;                                                         \
    }                                                                        \
    AIOL_HEAP_FN_ bool name##_lt_(const struct name##_slot *a,               \
                                  const struct name##_slot *b)               \
    {                                                                        \
        return before(&a->key, &b->key);                                     \
    }                                                                        \
    AIOL_HEAP_CORE_(name, type, struct name##_slot, field)                  \
    /* Adds @e (in no heap) with @key.  O(log n).  0 or -ENOMEM. */          \
    AIOL_HEAP_FN_ int name##_push(struct name *h, struct type *e,            \
                                  keytype key)                               \
    {                                                                        \
        return name##_push_slot_(h, (struct name##_slot){ key, e });         \
    }                                                                        \
    /* Gives @e (in @h) the key @key.  O(log n). */                          \
    AIOL_HEAP_FN_ void name##_update(struct name *h, struct type *e,         \
                                     keytype key)                            \
    {                                                                        \
        h->v[e->field].key = key;                                            \
        name##_fix_(h, e->field);                                            \
    }                                                                        \
    /* The first element's key, or NULL.  O(1). */                           \
    AIOL_HEAP_FN_ const keytype *name##_top_key(const struct name *h)        \
    {                                                                        \
        return h->n ? &h->v[0].key : NULL;                                   \
    }

#endif /* AIOLOOP_HEAP_H */
