/* json_fixtures.h - a check shared by the tests of json_project and of
 * the extender's Pod rules: a projection is what the rules build. */
#ifndef TEST_JSON_FIXTURES_H
#define TEST_JSON_FIXTURES_H

#include <criterion/criterion.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agentsched/base/json.h"

/* project checks json_project of doc (valid JSON) under parent against
 * the builder with the same rules: when it projects, the projection parses
 * to the DOM the rules build, is no longer than doc, and want (when not
 * NULL) is its exact text; it returns whether it projected. */
static bool project(const char *doc, const json_skip *rules, const char *parent, const char *want)
{
    size_t len = strlen(doc), n = 0;
    char *out = malloc(len + 1);
    cr_assert_not_null(out);
    bool ok = json_project(doc, len, rules, parent, out, len, &n);
    if (ok) {
        cr_assert_leq(n, len, "%s", doc);
        out[n] = '\0';
        json_t *built = NULL, *proj = json_loadb(out, n, JSON_DECODE_ANY, NULL);
        as_diag d = {0};
        cr_assert_not_null(proj, "%s: the projection is not JSON: %s", doc, out);
        /* the builder places the document's root under parent */
        bool under = parent && parent[0];
        char *wrapped = NULL;
        cr_assert(asprintf(&wrapped, "{\"%s\":%s}", under ? parent : "", doc) > 0);
        const char *whole = under ? wrapped : doc;
        cr_assert_eq(json_parse_skip(whole, strlen(whole), rules, &built, &d), AS_OK,
                     "%s: projected what the builder refuses (%s)", doc, d.msg);
        json_t *want_dom = under ? json_object_get(built, parent) : built;
        char *b = json_dumps(want_dom, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
        cr_assert(json_equal(proj, want_dom), "%s:\n projection %s\n built      %s", doc, out, b);
        free(b);
        if (want)
            cr_assert_str_eq(out, want, "%s", doc);
        json_decref(proj);
        json_decref(built);
        free(wrapped);
    } else {
        /* want is NULL here: the message prints only when it is not */
        cr_assert_null(want, "%s: not projected, expected %s", doc, want ? want : "");
    }
    free(out);
    return ok;
}

#endif
