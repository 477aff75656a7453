/* pool.c - chunked bump allocator with a byte cap. */
#include "agentsched/base/pool.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define POOL_CHUNK       4096
#define POOL_SMALL_CHUNK 1024 /* pool_new_small's first chunk, in its own allocation */
#define POOL_DEFAULT_CAP ((size_t)64 << 20)

typedef struct pool_chunk {
    struct pool_chunk *next;
    size_t size, used;
    _Alignas(16) unsigned char data[];
} pool_chunk;

struct pool {
    pool_chunk *head;
    size_t cap, used;
    size_t next_chunk;   /* size of the next ordinary chunk */
    size_t footprint;    /* bytes malloc'd: this struct and every chunk */
    pool_chunk *builtin; /* pool_new_small's first chunk, allocated with the
                            struct (not freed on its own); else NULL */
};

/* See pool.h. */
pool *pool_new(size_t cap)
{
    pool *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->cap = cap ? cap : POOL_DEFAULT_CAP; /* builtin NULL */
    p->next_chunk = POOL_CHUNK;
    p->footprint = sizeof *p;
    return p;
}

/* See pool.h. */
pool *pool_new_small(size_t cap)
{
    /* One allocation: the struct, then its first chunk (aligned as chunks
     * are), so a pod that fits is one malloc and one free. */
    size_t at = (sizeof(pool) + _Alignof(pool_chunk) - 1) & ~(_Alignof(pool_chunk) - 1);
    size_t bytes = at + sizeof(pool_chunk) + POOL_SMALL_CHUNK;
    pool *p = malloc(bytes);
    if (!p)
        return NULL;
    pool_chunk *c = (pool_chunk *)(void *)((char *)p + at);
    c->next = NULL;
    c->size = POOL_SMALL_CHUNK;
    c->used = 0;
    *p = (pool){.head = c,
                .cap = cap ? cap : POOL_DEFAULT_CAP,
                .next_chunk = POOL_SMALL_CHUNK * 2,
                .footprint = bytes,
                .builtin = c};
    return p;
}

/* See pool.h. */
void pool_free(pool *p)
{
    if (!p)
        return;
    pool_chunk *c = p->head;
    while (c) {
        pool_chunk *next = c->next;
        if (c != p->builtin)
            free(c);
        c = next;
    }
    free(p);
}

/* See pool.h. */
void *pool_alloc(pool *p, size_t n)
{
    void *out = pool_alloc_raw(p, n);
    if (out)
        memset(out, 0, n);
    return out;
}

/* See pool.h. */
void *pool_alloc_raw(pool *p, size_t n)
{
    size_t need = (n + 15) & ~(size_t)15;
    if (need < n || need > p->cap - p->used)
        return NULL;
    pool_chunk *c = p->head;
    if (!c || c->size - c->used < need) {
        /* Large requests get a chunk of their own so small ones keep
         * filling the current chunk. */
        size_t size = need > p->next_chunk / 2 ? need : p->next_chunk;
        pool_chunk *nc = malloc(sizeof *nc + size);
        if (!nc)
            return NULL;
        nc->size = size;
        nc->used = 0;
        p->footprint += sizeof *nc + size;
        if (size == p->next_chunk && p->next_chunk < POOL_CHUNK)
            p->next_chunk *= 2; /* a small pool that keeps growing */
        if (c && size == need && c->size - c->used >= 64) {
            /* keep the partially used chunk at the head */
            nc->next = c->next;
            c->next = nc;
        } else {
            nc->next = c;
            p->head = nc;
        }
        c = nc;
    }
    void *out = c->data + c->used;
    c->used += need;
    p->used += need;
    return out;
}

/* See pool.h. */
char *pool_strndup(pool *p, const char *s, size_t n)
{
    char *d = pool_alloc_raw(p, n + 1);
    if (!d)
        return NULL;
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

/* See pool.h. */
char *pool_strdup(pool *p, const char *s)
{
    return s ? pool_strndup(p, s, strlen(s)) : NULL;
}

/* See pool.h. */
size_t pool_used(const pool *p)
{
    return p->used;
}

/* See pool.h. */
size_t pool_footprint(const pool *p)
{
    return p->footprint;
}
