/*
 * pool.h - bump allocator for objects freed all at once.
 *
 * A decoded Node or Pod keeps its strings and arrays in one pool, and an
 * HTTP request keeps its scratch memory in one pool, so freeing is one call
 * and error paths cannot leak. Not thread-safe: one owner at a time.
 * Every pool has a byte cap; allocation beyond it fails (returns NULL).
 */
#ifndef AGENTSCHED_POOL_H
#define AGENTSCHED_POOL_H

#include <stddef.h>

typedef struct pool pool;

/* pool_new creates a pool that will hand out at most `cap` bytes in total
 * (0 = 64 MiB). Returns NULL when out of memory. Caller owns; pool_free. */
pool *pool_new(size_t cap);

/* pool_new_small is pool_new for a pool that usually stays small and may
 * live long (a decoded pod, which the binder's memo keeps): its first 1 KiB
 * chunk comes in the pool's own allocation (one malloc for a pool that
 * stays within it) and later chunks double up to the usual 4 KiB, so that
 * it holds little more than it hands out. Caller owns; pool_free. */
pool *pool_new_small(size_t cap);

/* pool_free releases the pool and everything allocated from it. NULL ok. */
void pool_free(pool *p);

/* pool_alloc returns `n` zeroed bytes aligned to 16, or NULL when the cap
 * would be exceeded or memory is exhausted. Owned by the pool. */
void *pool_alloc(pool *p, size_t n);

/* pool_alloc_raw is pool_alloc without the zeroing, for buffers the caller
 * fills completely before reading (arrays being grown, string copies). */
void *pool_alloc_raw(pool *p, size_t n);

/* pool_strndup copies s[0..n) plus a NUL into the pool; NULL on failure. */
char *pool_strndup(pool *p, const char *s, size_t n);

/* pool_strdup copies the NUL-terminated s into the pool; NULL if s is NULL
 * or on failure. */
char *pool_strdup(pool *p, const char *s);

/* pool_used reports the bytes handed out so far (for metrics and tests). */
size_t pool_used(const pool *p);

/* pool_footprint reports the bytes the pool took from malloc: its chunks,
 * their headers and the pool itself (what holding it costs). */
size_t pool_footprint(const pool *p);

#endif
