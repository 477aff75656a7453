/* table.c - see table.h. */
#include "agentsched/base/table.h"

#include <stdlib.h>

static void insert_raw(table_entry *t, size_t cap, const table_entry *src)
{
    size_t mask = cap - 1;
    size_t i = src->h & mask;
    while (t[i].k)
        i = (i + 1) & mask;
    t[i] = *src;
}

/* See table.h. */
as_err table_put(table *m, const char *k, size_t len, void *v)
{
    if ((m->n + 1) * 2 > m->cap) {
        size_t ncap = m->cap ? m->cap * 2 : 16;
        table_entry *nt = calloc(ncap, sizeof *nt);
        if (!nt)
            return AS_ENOMEM;
        for (size_t i = 0; i < m->cap; i++)
            if (m->t[i].k)
                insert_raw(nt, ncap, &m->t[i]);
        free(m->t);
        m->t = nt;
        m->cap = ncap;
    }
    table_entry e = {hash_bytes(k, len), k, len, v};
    insert_raw(m->t, m->cap, &e);
    m->n++;
    return AS_OK;
}

/* See table.h. */
void *table_del(table *m, const char *k, size_t len)
{
    if (!m->cap)
        return NULL;
    uint64_t h = hash_bytes(k, len);
    size_t mask = m->cap - 1;
    size_t i = h & mask;
    for (;; i = (i + 1) & mask) {
        table_entry *e = &m->t[i];
        if (!e->k)
            return NULL;
        if (e->h == h && e->klen == len && table_key_eq(e->k, k, len))
            break;
    }
    void *v = m->t[i].v;
    /* Backward shift: pull later entries of the probe run into the hole
     * when their home slot allows it, so lookups never need tombstones. */
    size_t hole = i;
    for (size_t j = (i + 1) & mask; m->t[j].k; j = (j + 1) & mask) {
        size_t home = m->t[j].h & mask;
        bool movable = hole <= j ? (home <= hole || home > j) : (home <= hole && home > j);
        if (movable) {
            m->t[hole] = m->t[j];
            hole = j;
        }
    }
    m->t[hole].k = NULL;
    m->n--;
    return v;
}

/* See table.h. */
void table_free(table *m)
{
    free(m->t);
    memset(m, 0, sizeof *m);
}
