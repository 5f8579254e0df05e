/*
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

/** Static initialiser for an empty heap. */
#define AIOL_HEAP_INITIALIZER { NULL, 0, 0 }

/**
 * Defines static functions name_push, name_remove, name_update, name_top,
 * name_pop, name_count and name_fini for heap head struct @p name of struct
 * @p type elements, whose size_t member @p field holds their position and
 * which @p before (bool (*)(const struct type *, const struct type *))
 * orders.
 */
#define AIOL_HEAP_GENERATE(name, type, field, before)                        \
    AIOL_HEAP_FN_ void name##_set_(struct name *h, size_t i,                 \
                                   struct type *e)                           \
    {                                                                        \
        h->v[i] = e;                                                         \
        e->field = i;                                                        \
    }                                                                        \
    AIOL_HEAP_FN_ void name##_up_(struct name *h, size_t i)                  \
    {                                                                        \
        struct type *e = h->v[i];                                            \
        while (i > 0) {                                                      \
            size_t p = (i - 1) / AIOL_HEAP_D;                                \
            if (!before(e, h->v[p])) {                                       \
                break;                                                       \
            }                                                                \
            name##_set_(h, i, h->v[p]);                                      \
            i = p;                                                           \
        }                                                                    \
        name##_set_(h, i, e);                                                \
    }                                                                        \
    AIOL_HEAP_FN_ void name##_down_(struct name *h, size_t i)                \
    {                                                                        \
        struct type *e = h->v[i];                                            \
        for (;;) {                                                           \
            size_t c = i * AIOL_HEAP_D + 1, best = i;                        \
            struct type *m = e;                                              \
            for (size_t k = c; k < c + AIOL_HEAP_D && k < h->n; k++) {       \
                if (before(h->v[k], m)) {                                    \
                    m = h->v[k];                                             \
                    best = k;                                                \
                }                                                            \
            }                                                                \
            if (best == i) {                                                 \
                break;                                                       \
            }                                                                \
            name##_set_(h, i, m);                                            \
            i = best;                                                        \
        }                                                                    \
        name##_set_(h, i, e);                                                \
    }                                                                        \
    /* Adds @e (in no heap).  O(log n).  0 or -ENOMEM (heap unchanged). */   \
    AIOL_HEAP_FN_ int name##_push(struct name *h, struct type *e)            \
    {                                                                        \
        if (h->n == h->cap) {                                                \
            size_t cap = h->cap ? 2 * h->cap : 64;                           \
            struct type **v = (struct type **)realloc(h->v,                  \
                                                      cap * sizeof(*v));     \
            if (v == NULL) {                                                 \
                return -ENOMEM;                                              \
            }                                                                \
            h->v = v;                                                        \
            h->cap = cap;                                                    \
        }                                                                    \
        h->v[h->n] = e;                                                      \
        name##_up_(h, h->n++);                                               \
        return 0;                                                            \
    }                                                                        \
    /* Restores order after @e's key changed (@e in @h).  O(log n). */      \
    AIOL_HEAP_FN_ void name##_update(struct name *h, struct type *e)         \
    {                                                                        \
        size_t i = e->field;                                                 \
        if (i > 0 && before(e, h->v[(i - 1) / AIOL_HEAP_D])) {               \
            name##_up_(h, i);                                                \
        } else {                                                             \
            name##_down_(h, i);                                              \
        }                                                                    \
    }                                                                        \
    /* Takes @e (in @h) out.  O(log n). */                                   \
    AIOL_HEAP_FN_ void name##_remove(struct name *h, struct type *e)         \
    {                                                                        \
        size_t i = e->field;                                                 \
        struct type *last = h->v[--h->n];                                    \
        e->field = AIOL_HEAP_NONE;                                           \
        if (last != e) {                                                     \
            name##_set_(h, i, last);                                         \
            name##_update(h, last);                                          \
        }                                                                    \
    }                                                                        \
    /* The first element, or NULL.  O(1). */                                 \
    AIOL_HEAP_FN_ struct type *name##_top(const struct name *h)              \
    {                                                                        \
        return h->n ? h->v[0] : NULL;                                        \
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

#endif /* AIOLOOP_HEAP_H */
