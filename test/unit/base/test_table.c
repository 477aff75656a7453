/* test_table.c - the string table: lookups after growth and after deletes
 * in the middle of probe runs (backward shift must keep every key found). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agentsched/base/table.h"

#define N 2000

static char keys[N][16];

static void fill(table *m)
{
    for (int i = 0; i < N; i++) {
        snprintf(keys[i], sizeof keys[i], "node-%d", i);
        cr_assert_eq(table_put(m, keys[i], strlen(keys[i]), keys[i]), AS_OK);
    }
}

Test(table, empty_table_finds_nothing)
{
    table m = {0};
    cr_expect_null(table_get(&m, "a", 1));
    cr_expect_null(table_del(&m, "a", 1));
    table_free(&m);
}

Test(table, every_key_is_found_after_growth)
{
    table m = {0};
    fill(&m);
    cr_expect_eq(m.n, N);
    cr_expect_leq(m.n * 2, m.cap);
    for (int i = 0; i < N; i++)
        cr_expect_eq(table_get(&m, keys[i], strlen(keys[i])), keys[i], "%s", keys[i]);
    cr_expect_null(table_get(&m, "node-", 5));
    cr_expect_null(table_get(&m, "node-20000", 10));
    table_free(&m);
    cr_expect_eq(m.cap, 0);
}

Test(table, deletes_keep_the_rest_reachable)
{
    table m = {0};
    fill(&m);
    for (int i = 0; i < N; i += 3)
        cr_expect_eq(table_del(&m, keys[i], strlen(keys[i])), keys[i]);
    for (int i = 0; i < N; i++) {
        void *v = table_get(&m, keys[i], strlen(keys[i]));
        if (i % 3 == 0)
            cr_expect_null(v, "%s still there", keys[i]);
        else
            cr_expect_eq(v, keys[i], "%s lost", keys[i]);
    }
    size_t live = 0;
    for (size_t i = 0; i < m.cap; i++)
        live += m.t[i].k != NULL;
    cr_expect_eq(live, m.n);
    table_free(&m);
}
