/*
 * fuzz_json.c - libFuzzer target for the JSON layer (base/json.h,
 * base/jscan.h, base/utf8.h).
 *
 * The walk of a validated document and yajl's builder agree (errors and
 * trees), whole and with skip rules; a document built whole builds with
 * rules too, into a tree that has no more values; a projection parses to
 * what the rules build; the iterator stays inside the object and meets
 * every member the DOM has; the scanner's acceptance is strict UTF-8.
 * Build: cmake -DAGENTSCHED_FUZZ=ON -DCMAKE_C_COMPILER=clang; run
 * ./fuzz_json -max_len=65536 test/fuzz/corpus/json.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agentsched/base/json.h"
#include "agentsched/base/utf8.h"
#include "agentsched/model/skip.h"
#include "fuzz_json.h"
#include "json_count.h"

/* walk_matches_yajl: json_parse_skip (the scanner's validation
 * and the walk) and json_parse_ref (yajl) agree on body, with and
 * without rules: the same error and message, or equal trees. */
static void walk_matches_yajl(const char *body, size_t size)
{
    /* a root rule ("") and a member rule for short keys */
    static const char *const few[] = {"a", "spec", NULL};
    static const json_skip root_rules[] = {{"", few}, {"b", few}, {NULL, NULL}};
    for (int r = 0; r < 3; r++) {
        const json_skip *rules = r == 1 ? model_skip_pod() : r ? root_rules : NULL;
        json_t *w = NULL, *y = NULL;
        as_diag wd, yd;
        memset(&wd, 0, sizeof wd);
        memset(&yd, 0, sizeof yd);
        as_err we = json_parse_skip(body, size, rules, &w, &wd);
        as_err ye = json_parse_ref(body, size, rules, &y, &yd);
        bool sur = has_surrogate_escape(body, size);
        if (!sur && (we != ye || (we && strcmp(wd.msg, yd.msg) != 0)))
            abort();
        if (!we && !ye && !sur && !json_equal(w, y))
            abort();
        if (w)
            json_decref(w);
        if (y)
            json_decref(y);
    }
}

/* a table whose parents are common short keys, the root's among them */
static const char *const few[] = {"a", "b", "items", NULL};
static const json_skip short_rules[] = {{"a", few}, {"", few}, {NULL, NULL}};

/* projection_matches_dom: a projection of the validated document is no
 * longer than it and parses to what the builder makes of it under the
 * same rules. */
static void projection_matches_dom(const char *body, size_t size)
{
    char *out = malloc(size ? size : 1);
    size_t n = 0;
    if (!out)
        abort();
    if (json_project(body, size, short_rules, NULL, out, size, &n)) {
        if (n > size)
            abort();
        json_t *built = NULL, *proj = NULL;
        as_diag d;
        if (json_parse_skip(body, size, short_rules, &built, &d) != AS_OK)
            abort(); /* projected what the builder refuses */
        if (json_parse(out, n, &proj, &d) != AS_OK)
            abort(); /* the projection is not JSON */
        if (!json_equal(proj, built))
            abort();
        json_decref(proj);
        json_decref(built);
    }
    free(out);
}

/* iter_matches_dom: iterating the validated object reads spans inside it,
 * each container value valid JSON on its own; when the whole object was
 * read, every key of dom (its DOM, NULL when the builder refused it) is
 * among those read and no more members are in dom than were read. */
static void iter_matches_dom(const char *body, size_t size, const json_t *dom)
{
    json_iter it;
    if (!json_iter_begin(&it, body, size))
        return;
    const char *k;
    size_t kl, members = 0;
    bool kesc;
    json_value v;
    int r;
    while ((r = json_iter_next(&it, &k, &kl, &kesc, &v)) == 1) {
        if (k < body || k + kl > body + size || v.s < body || v.s + v.len > body + size)
            abort();
        if ((v.type == '{' || v.type == '[') && !jscan_document(v.s, v.len))
            abort();
        if (dom && !kesc && !json_object_getn(dom, k, kl))
            abort(); /* a member the DOM does not have */
        members++;
    }
    if (r == 0 && dom && json_object_size(dom) > members)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *body = (const char *)data;

    walk_matches_yajl(body, size);

    /* The builder whole and with skip rules (the watch's pod rules, and a
     * table whose parents are common short keys): a document built whole
     * builds with rules too, into a tree that has no more values. */
    static const char *const few[] = {"a", "b", "items", NULL};
    static const json_skip short_rules[] = {{"a", few}, {"", few}, {NULL, NULL}};
    const json_skip *tables[] = {model_skip_pod(), short_rules};
    json_t *dom = NULL;
    as_diag d;
    bool whole = json_parse(body, size, &dom, &d) == AS_OK;
    for (size_t t = 0; t < sizeof tables / sizeof tables[0]; t++) {
        json_t *sk = NULL;
        as_diag d2 = {{0}, {0}};
        as_err e = json_parse_skip(body, size, tables[t], &sk, &d2);
        if (whole && (e != AS_OK || json_count_values(sk) > json_count_values(dom)))
            abort();
        if (e != AS_OK && (sk || !d2.msg[0]))
            abort();
        json_decref(sk);
    }
    json_decref(dom);

    /* what the scanner passes is valid JSON in strict UTF-8 */
    if (jscan_document(body, size)) {
        if (utf8_prefix(body, size) != size)
            abort();
        projection_matches_dom(body, size);
        json_t *obj = NULL;
        as_diag d3;
        if (json_parse(body, size, &obj, &d3) != AS_OK || !json_is_object(obj)) {
            json_decref(obj);
            obj = NULL;
        }
        iter_matches_dom(body, size, obj);
        json_decref(obj);
    }
    return 0;
}
