/*
 * json_count.h - a helper the unit tests and the fuzzers share (each
 * includes it once; everything here is static).
 */
#ifndef AGENTSCHED_TEST_JSON_COUNT_H
#define AGENTSCHED_TEST_JSON_COUNT_H

#include <jansson.h>
#include <stddef.h>

/* json_count_values counts v and every value inside it (members, items):
 * how much of a document a decoder kept. */
static size_t json_count_values(const json_t *v)
{
    size_t n = 1;
    const char *k;
    json_t *m;
    size_t i;
    if (json_is_object(v))
        json_object_foreach((json_t *)v, k, m) n += json_count_values(m);
    else if (json_is_array(v))
        json_array_foreach(v, i, m) n += json_count_values(m);
    return n;
}

#endif
