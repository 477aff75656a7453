/* test_pool.c - the bump allocator: caps, alignment, zeroing, small pools,
 * what a pool reports holding. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include "agentsched/base/pool.h"

static bool aligned16(const void *p)
{
    return ((uintptr_t)p & 15) == 0;
}

/* Every allocation is 16-aligned, zeroed by pool_alloc, and none overlaps
 * another, across chunk boundaries and allocations larger than a chunk. */
static void fill_and_check(pool *p)
{
    enum { N = 300 };
    unsigned char *got[N];
    size_t len[N];
    for (int i = 0; i < N; i++) {
        len[i] = i % 7 == 0 ? 5000 + (size_t)i : 1 + (size_t)(i * 37) % 700;
        got[i] = i % 2 ? pool_alloc(p, len[i]) : pool_alloc_raw(p, len[i]);
        cr_assert_not_null(got[i], "allocation %d", i);
        cr_assert(aligned16(got[i]), "allocation %d", i);
        if (i % 2)
            for (size_t k = 0; k < len[i]; k++)
                cr_assert_eq(got[i][k], 0, "allocation %d byte %zu", i, k);
        memset(got[i], i & 0xff, len[i]);
    }
    for (int i = 0; i < N; i++)
        for (size_t k = 0; k < len[i]; k++)
            cr_assert_eq(got[i][k], (unsigned char)(i & 0xff), "allocation %d was overwritten", i);
}

Test(pool, allocations_are_aligned_zeroed_and_separate)
{
    pool *p = pool_new(0);
    fill_and_check(p);
    pool_free(p);
    p = pool_new_small(0);
    fill_and_check(p);
    pool_free(p);
}

Test(pool, the_cap_counts_what_is_handed_out)
{
    pool *p = pool_new(4096);
    cr_assert_not_null(pool_alloc(p, 4000));
    cr_assert_null(pool_alloc(p, 200), "4000 rounded to 4000, +208 is past 4096");
    cr_assert_not_null(pool_alloc(p, 80));
    cr_assert_eq(pool_used(p), 4000 + 80);
    cr_assert_null(pool_alloc_raw(p, SIZE_MAX - 8), "no wrap-around");
    pool_free(p);
    pool_free(NULL);
}

/* A small pool's first kilobyte comes with the pool itself: a decoded pod
 * that fits holds one allocation, and what it reports holding says so. */
Test(pool, a_small_pool_holds_little_more_than_it_hands_out)
{
    pool *p = pool_new_small(0);
    size_t empty = pool_footprint(p);
    cr_assert_lt(empty, 1024 + 128);
    cr_assert_not_null(pool_alloc(p, 304)); /* a model_pod */
    for (int i = 0; i < 10; i++)
        cr_assert_not_null(pool_strdup(p, "agent-1234567890"));
    cr_assert_eq(pool_footprint(p), empty, "still in the first chunk");
    cr_assert_not_null(pool_alloc(p, 900));
    size_t grown = pool_footprint(p);
    cr_assert_gt(grown, empty);
    cr_assert_lt(grown, empty + 2048 + 128, "the next chunk is 2 KB, not 4");
    pool_free(p);

    p = pool_new(0);
    cr_assert_not_null(pool_alloc(p, 16));
    cr_assert_geq(pool_footprint(p), 4096, "an ordinary pool's chunks are 4 KB");
    pool_free(p);
}
