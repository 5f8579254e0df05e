/* SPDX-License-Identifier: MIT */
/*
 * mem.c - the guest memory table: SET_MEM_TABLE parsing and mapping, and
 * address translation (guest physical and frontend userspace addresses to
 * host pointers).
 *
 * Validation of a table (any failure maps nothing and keeps the old one):
 *   - 1..8 regions, payload size exactly 8 + 32 * n, exactly n fds;
 *   - each region non-empty; gpa + size, uva + size and mmap_offset + size
 *     do not overflow; the fd is a regular file (memfd, tmpfs, hugetlbfs)
 *     at least mmap_offset + size long, so no access can hit SIGBUS past
 *     its end (a frontend that truncates the file later is not defended
 *     against: seal it, see docs/vhost.md);
 *   - no two regions overlap in guest physical or in userspace addresses.
 * Translation succeeds only for a range that lies entirely inside one
 * region, checked without overflow (len is compared with what is left).
 */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "internal.h"

static bool overlap(uint64_t a, uint64_t alen, uint64_t b, uint64_t blen)
{
    return a < b + blen && b < a + alen; /* callers checked no overflow */
}

int aiol__vhost_mem_map(vu_mem *out, const uint8_t *payload, uint32_t size,
                        const int *fds, unsigned nfds, const char **why)
{
    uint32_t n;
    vu_mem m;

    memset(&m, 0, sizeof(m));
    if (size < 8) {
        *why = "mem table: short payload";
        return -EINVAL;
    }
    memcpy(&n, payload, sizeof(n));
    if (n == 0 || n > AIOL__VHOST_MAX_FDS) {
        *why = "mem table: region count out of range";
        return -EINVAL;
    }
    if (size != 8 + n * 32u) {
        *why = "mem table: payload size does not match the region count";
        return -EINVAL;
    }
    if (nfds != n) {
        *why = "mem table: fd count does not match the region count";
        return -EINVAL;
    }
    for (uint32_t i = 0; i < n; i++) {
        vu_region *r = &m.r[i];
        uint64_t v[4];
        struct stat st;

        memcpy(v, payload + 8 + 32u * i, sizeof(v));
        r->gpa = v[0];
        r->size = v[1];
        r->uva = v[2];
        r->mmap_offset = v[3];
        if (r->size == 0 || r->gpa + r->size < r->gpa ||
            r->uva + r->size < r->uva ||
            r->mmap_offset + r->size < r->mmap_offset ||
            r->mmap_offset + r->size > (uint64_t)SIZE_MAX / 2) {
            *why = "mem table: region empty or overflowing";
            return -EINVAL;
        }
        for (uint32_t j = 0; j < i; j++) {
            if (overlap(r->gpa, r->size, m.r[j].gpa, m.r[j].size) ||
                overlap(r->uva, r->size, m.r[j].uva, m.r[j].size)) {
                *why = "mem table: regions overlap";
                return -EINVAL;
            }
        }
        if (fstat(fds[i], &st) != 0 || !S_ISREG(st.st_mode) ||
            st.st_size < 0 ||
            (uint64_t)st.st_size < r->mmap_offset + r->size) {
            *why = "mem table: region fd is not a file that large";
            return -EINVAL;
        }
    }
    for (uint32_t i = 0; i < n; i++) {
        vu_region *r = &m.r[i];
        void *p;

        r->map_len = (size_t)(r->mmap_offset + r->size);
        p = mmap(NULL, r->map_len, PROT_READ | PROT_WRITE, MAP_SHARED,
                 fds[i], 0);
        if (p == MAP_FAILED) {
            int e = errno;

            m.n = i;
            aiol__vhost_mem_unmap(&m);
            *why = "mem table: mmap failed";
            return -e;
        }
        r->map = p;
        r->host = (uint8_t *)p + r->mmap_offset;
    }
    m.n = n;
    *out = m;
    return 0;
}

void aiol__vhost_mem_unmap(vu_mem *m)
{
    for (unsigned i = 0; i < m->n; i++) {
        munmap(m->r[i].map, m->r[i].map_len);
    }
    memset(m, 0, sizeof(*m));
}

void *aiol__vhost_gpa_chunk(const vu_mem *m, uint64_t gpa, uint64_t *avail)
{
    for (unsigned i = 0; i < m->n; i++) {
        const vu_region *r = &m->r[i];

        if (gpa >= r->gpa && gpa - r->gpa < r->size) {
            *avail = r->size - (gpa - r->gpa);
            return r->host + (gpa - r->gpa);
        }
    }
    *avail = 0;
    return NULL;
}

void *aiol__vhost_gpa(const vu_mem *m, uint64_t gpa, uint64_t len)
{
    uint64_t avail;
    void *p = aiol__vhost_gpa_chunk(m, gpa, &avail);

    return p != NULL && len <= avail ? p : NULL;
}

void *aiol__vhost_uva(const vu_mem *m, uint64_t uva, uint64_t len)
{
    for (unsigned i = 0; i < m->n; i++) {
        const vu_region *r = &m->r[i];

        if (uva >= r->uva && uva - r->uva < r->size &&
            len <= r->size - (uva - r->uva)) {
            return r->host + (uva - r->uva);
        }
    }
    return NULL;
}

void *aiol__vhost_uva_aligned(const vu_mem *m, uint64_t uva, uint64_t len,
                              uintptr_t align)
{
    void *p = aiol__vhost_uva(m, uva, len);

    return p != NULL && (uintptr_t)p % align == 0 ? p : NULL;
}
