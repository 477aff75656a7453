/*
 * table.h - an open-addressing hash table from strings to pointers.
 *
 * Linear probing on hash_bytes, at most half full, backward-shift delete
 * (no tombstones, so a lookup never walks past deleted entries). Keys are
 * borrowed: the caller keeps each key valid while it is stored, usually by
 * pointing into the value. Not thread-safe: the owner serialises writers
 * and keeps readers out while it writes. The layout is public so a caller
 * can iterate (every entry with k != NULL) or batch its probes with
 * prefetches the way table_get probes.
 */
#ifndef AGENTSCHED_TABLE_H
#define AGENTSCHED_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "agentsched/base/error.h"
#include "agentsched/base/hash.h"

typedef struct table_entry {
    uint64_t h;    /* hash_bytes(k, klen) */
    const char *k; /* NULL = empty slot */
    size_t klen;
    void *v;
} table_entry;

/* A zeroed table is empty and ready. */
typedef struct table {
    table_entry *t;
    size_t cap; /* power of two, or 0 */
    size_t n;
} table;

/* table_key_eq compares a stored key with a probe of the same length; names are
 * short, so an inline compare beats a call to memcmp: words, the last one
 * overlapping the one before (a 10-byte name is two compares). */
static inline bool table_key_eq(const char *a, const char *b, size_t len)
{
    uint64_t x, y;
    if (len >= 8) {
        for (size_t i = 0; len - i > 8; i += 8) {
            memcpy(&x, a + i, 8);
            memcpy(&y, b + i, 8);
            if (x != y)
                return false;
        }
        memcpy(&x, a + len - 8, 8);
        memcpy(&y, b + len - 8, 8);
        return x == y;
    }
    if (len >= 4) {
        uint32_t p, q, r, t;
        memcpy(&p, a, 4);
        memcpy(&q, b, 4);
        memcpy(&r, a + len - 4, 4);
        memcpy(&t, b + len - 4, 4);
        return p == q && r == t;
    }
    for (size_t i = 0; i < len; i++)
        if (a[i] != b[i])
            return false;
    return true;
}

/* table_get returns the value stored under k[0..len), NULL when absent.
 * Inline: it is the probe of every name and pod lookup. */
static inline void *table_get(const table *m, const char *k, size_t len)
{
    if (!m->cap)
        return NULL;
    uint64_t h = hash_bytes(k, len);
    size_t mask = m->cap - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
        const table_entry *e = &m->t[i];
        if (!e->k)
            return NULL;
        if (e->h == h && e->klen == len && table_key_eq(e->k, k, len))
            return e->v;
    }
}

/* table_put inserts k (which must be absent) with v; k must stay valid
 * while stored. AS_ENOMEM when the table cannot grow (nothing changed). */
as_err table_put(table *m, const char *k, size_t len, void *v);

/* table_del removes k and returns its value (NULL when absent). */
void *table_del(table *m, const char *k, size_t len);

/* table_free frees the slots (not the keys or values) and empties m. */
void table_free(table *m);

#endif
