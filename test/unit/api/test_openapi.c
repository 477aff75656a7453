/*
 * test_openapi.c - proto/openapi.yaml describes exactly what is served.
 *
 *  - every route of svc_routes() is a path + method of the document, and
 *    every path + method of the document is a route;
 *  - every $ref resolves and every schema uses only the keywords the small
 *    checker below understands (so a schema cannot silently go unchecked);
 *  - every endpoint's answer to its documented request example (and, for
 *    POST endpoints, to a malformed body) has a documented status and
 *    media type and validates against the documented schema;
 *  - the fixture files of the HTTP APIs (placement, extender verbs) validate
 *    against their schemas; there the string "*" is the fixtures' wildcard
 *    and matches anything.
 *
 * The checker handles the subset of OpenAPI 3.0 schemas the document uses:
 * type, nullable, required, properties, additionalProperties (bool or
 * schema), items, allOf, $ref (#/components/schemas/...), enum, minimum,
 * maximum, minItems, maxItems; description/format/default/example are
 * annotations.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agentsched/base/doc.h"
#include "agentsched/api/placement.h"
#include "agentsched/serve/svc.h"

#define OPENAPI        AGENTSCHED_SOURCE_DIR "/proto/openapi.yaml"
#define PLACEMENT_DATA TEST_DATA_DIR "/placement"

static json_t *load_doc(void)
{
    json_t *doc = NULL;
    as_diag d = {{0}, {0}};
    cr_assert_eq(doc_load_file(OPENAPI, 0, false, &doc, &d), AS_OK, "%s", d.msg);
    cr_assert(json_is_object(doc));
    return doc;
}

/* ------------------------------------------------------------------ */
/* Schema checker                                                      */
/* ------------------------------------------------------------------ */

typedef struct checker {
    const json_t *root;
    bool star_any; /* fixtures: the string "*" (a wildcard there) matches any schema */
    char why[1024];
} checker;

static bool fail(checker *c, const char *path, const char *fmt, const char *arg)
{
    char msg[512];
    snprintf(msg, sizeof msg, fmt, arg);
    snprintf(c->why, sizeof c->why, "%s: %s", path, msg);
    return false;
}

static const json_t *resolve(const json_t *root, const char *ref)
{
    static const char prefix[] = "#/components/schemas/";
    if (strncmp(ref, prefix, sizeof prefix - 1) != 0)
        return NULL;
    return json_object_get(json_object_get(json_object_get(root, "components"), "schemas"),
                           ref + sizeof prefix - 1);
}

static bool type_is(const json_t *v, const char *t)
{
    if (strcmp(t, "object") == 0)
        return json_is_object(v);
    if (strcmp(t, "array") == 0)
        return json_is_array(v);
    if (strcmp(t, "string") == 0)
        return json_is_string(v);
    if (strcmp(t, "integer") == 0)
        return json_is_integer(v);
    if (strcmp(t, "number") == 0)
        return json_is_number(v);
    if (strcmp(t, "boolean") == 0)
        return json_is_boolean(v);
    return false;
}

static bool validate(checker *c, const json_t *schema, const json_t *v, const char *path)
{
    if (c->star_any && json_is_string(v) && strcmp(json_string_value(v), "*") == 0)
        return true;
    const json_t *ref = json_object_get(schema, "$ref");
    if (ref) {
        const json_t *target = resolve(c->root, json_string_value(ref));
        if (!target)
            return fail(c, path, "unresolvable $ref %s", json_string_value(ref));
        return validate(c, target, v, path);
    }
    if (json_is_null(v)) {
        if (json_is_true(json_object_get(schema, "nullable")))
            return true;
        const json_t *t = json_object_get(schema, "type");
        if (t || json_object_get(schema, "allOf"))
            return fail(c, path, "null where %s is not nullable",
                        t ? json_string_value(t) : "the schema");
    }
    const json_t *all = json_object_get(schema, "allOf");
    if (all) {
        size_t i;
        const json_t *s;
        json_array_foreach(all, i, s)
        {
            if (!validate(c, s, v, path))
                return false;
        }
    }
    const json_t *t = json_object_get(schema, "type");
    if (t && !type_is(v, json_string_value(t)))
        return fail(c, path, "expected %s", json_string_value(t));
    const json_t *en = json_object_get(schema, "enum");
    if (en) {
        bool ok = false;
        size_t i;
        const json_t *e;
        json_array_foreach(en, i, e) ok |= json_equal((json_t *)e, (json_t *)v);
        if (!ok)
            return fail(c, path, "value not in enum%s", "");
    }
    if (json_is_number(v)) {
        const json_t *mn = json_object_get(schema, "minimum");
        const json_t *mx = json_object_get(schema, "maximum");
        if (mn && json_number_value(v) < json_number_value(mn))
            return fail(c, path, "below minimum%s", "");
        if (mx && json_number_value(v) > json_number_value(mx))
            return fail(c, path, "above maximum%s", "");
    }
    if (json_is_array(v)) {
        const json_t *mn = json_object_get(schema, "minItems");
        const json_t *mx = json_object_get(schema, "maxItems");
        if (mn && (json_int_t)json_array_size(v) < json_integer_value(mn))
            return fail(c, path, "fewer items than minItems%s", "");
        if (mx && (json_int_t)json_array_size(v) > json_integer_value(mx))
            return fail(c, path, "more items than maxItems%s", "");
        const json_t *items = json_object_get(schema, "items");
        if (items) {
            size_t i;
            const json_t *e;
            json_array_foreach(v, i, e)
            {
                char sub[512];
                snprintf(sub, sizeof sub, "%s[%zu]", path, i);
                if (!validate(c, items, e, sub))
                    return false;
            }
        }
    }
    if (json_is_object(v)) {
        const json_t *req = json_object_get(schema, "required");
        size_t i;
        const json_t *r;
        json_array_foreach(req, i, r)
        {
            if (!json_object_get(v, json_string_value(r)))
                return fail(c, path, "required property %s missing", json_string_value(r));
        }
        const json_t *props = json_object_get(schema, "properties");
        const json_t *addl = json_object_get(schema, "additionalProperties");
        const char *k;
        const json_t *pv;
        json_object_foreach((json_t *)v, k, pv)
        {
            char sub[512];
            snprintf(sub, sizeof sub, "%s.%s", path, k);
            const json_t *ps = json_object_get(props, k);
            if (ps) {
                if (!validate(c, ps, pv, sub))
                    return false;
            } else if (json_is_object(addl)) {
                if (!validate(c, addl, pv, sub))
                    return false;
            } else if (json_is_false(addl)) {
                return fail(c, sub, "property not allowed%s", "");
            }
        }
    }
    return true;
}

static const char *const known_keywords[] = {
    "type",    "nullable", "required", "properties",  "additionalProperties",
    "items",   "allOf",    "$ref",     "enum",        "minimum",
    "maximum", "minItems", "maxItems", "description", "format",
    "default", "example",  NULL,
};

/* lint_schema: every keyword known, every $ref resolvable. */
static bool lint_schema(checker *c, const json_t *s, const char *path)
{
    if (!json_is_object(s))
        return fail(c, path, "schema is not an object%s", "");
    const char *k;
    const json_t *v;
    json_object_foreach((json_t *)s, k, v)
    {
        bool known = false;
        for (const char *const *kw = known_keywords; *kw; kw++)
            known |= strcmp(*kw, k) == 0;
        if (!known)
            return fail(c, path, "keyword %s is not understood by the checker", k);
        char sub[512];
        snprintf(sub, sizeof sub, "%s.%s", path, k);
        if (strcmp(k, "$ref") == 0 && !resolve(c->root, json_string_value(v)))
            return fail(c, path, "unresolvable $ref %s", json_string_value(v));
        if ((strcmp(k, "items") == 0 ||
             (strcmp(k, "additionalProperties") == 0 && json_is_object(v))) &&
            !lint_schema(c, v, sub))
            return false;
        if (strcmp(k, "properties") == 0) {
            const char *pk;
            const json_t *ps;
            json_object_foreach((json_t *)v, pk, ps)
            {
                char psub[600];
                snprintf(psub, sizeof psub, "%s.%s", sub, pk);
                if (!lint_schema(c, ps, psub))
                    return false;
            }
        }
        if (strcmp(k, "allOf") == 0) {
            size_t i;
            const json_t *e;
            json_array_foreach(v, i, e)
            {
                if (!lint_schema(c, e, sub))
                    return false;
            }
        }
    }
    return true;
}

static const json_t *schema_named(const json_t *doc, const char *name)
{
    const json_t *s =
        json_object_get(json_object_get(json_object_get(doc, "components"), "schemas"), name);
    cr_assert_not_null(s, "no schema %s", name);
    return s;
}

/* ------------------------------------------------------------------ */
/* Routes                                                              */
/* ------------------------------------------------------------------ */

static const char *const http_methods[] = {"get",   "put",  "post",    "delete",
                                           "patch", "head", "options", NULL};

static void lower(const char *s, char *out, size_t n)
{
    size_t i = 0;
    for (; s[i] && i + 1 < n; i++)
        out[i] = (char)(s[i] >= 'A' && s[i] <= 'Z' ? s[i] - 'A' + 'a' : s[i]);
    out[i] = '\0';
}

static svc *new_svc(bool load);

Test(openapi, routes_match_document)
{
    svc *s = new_svc(false);
    json_t *doc = load_doc();
    const json_t *paths = json_object_get(doc, "paths");
    cr_assert(json_is_object(paths));
    size_t n = 0;
    const http_route *routes = svc_routes(s, &n);
    cr_assert_gt(n, 0);
    for (size_t i = 0; i < n; i++) {
        char m[16];
        lower(routes[i].method, m, sizeof m);
        const json_t *op = json_object_get(json_object_get(paths, routes[i].path), m);
        cr_expect(json_is_object(op), "served %s %s is missing from proto/openapi.yaml",
                  routes[i].method, routes[i].path);
    }
    const char *path;
    const json_t *item;
    size_t ops = 0;
    json_object_foreach((json_t *)paths, path, item)
    {
        for (const char *const *m = http_methods; *m; m++) {
            if (!json_object_get(item, *m))
                continue;
            ops++;
            bool served = false;
            for (size_t i = 0; i < n; i++) {
                char rm[16];
                lower(routes[i].method, rm, sizeof rm);
                served |= strcmp(routes[i].path, path) == 0 && strcmp(rm, *m) == 0;
            }
            cr_expect(served, "proto/openapi.yaml documents %s %s, which is not served", *m, path);
        }
    }
    cr_expect_eq(ops, n, "document has %zu operations, route table %zu", ops, n);
    json_decref(doc);
    svc_free(s);
}

Test(openapi, schemas_are_checkable)
{
    json_t *doc = load_doc();
    checker c = {.root = doc};
    const char *name;
    const json_t *s;
    json_object_foreach(json_object_get(json_object_get(doc, "components"), "schemas"), name, s)
    {
        char path[256];
        snprintf(path, sizeof path, "components.schemas.%s", name);
        cr_expect(lint_schema(&c, s, path), "%s", c.why);
    }
    /* And every media type schema of every operation. */
    const char *p;
    const json_t *item;
    json_object_foreach(json_object_get(doc, "paths"), p, item)
    {
        const char *m;
        const json_t *op;
        json_object_foreach((json_t *)item, m, op)
        {
            const json_t *resps = json_object_get(op, "responses");
            cr_expect(json_is_object(resps) && json_object_size(resps) > 0, "%s %s: no responses",
                      m, p);
            const char *code;
            const json_t *r;
            json_object_foreach((json_t *)resps, code, r)
            {
                const char *mt;
                const json_t *media;
                json_object_foreach(json_object_get(r, "content"), mt, media)
                {
                    char path[512];
                    snprintf(path, sizeof path, "%s %s %s %s", m, p, code, mt);
                    cr_expect(lint_schema(&c, json_object_get(media, "schema"), path), "%s", c.why);
                }
            }
        }
    }
    json_decref(doc);
}

Test(openapi, checker_self_test)
{
    json_t *doc = load_doc();
    checker c = {.root = doc};
    const json_t *resp = schema_named(doc, "PlacementResponse");
    static const char *good[] = {
        "{\"placements\": []}",
        "{\"placements\": [{\"pod\": \"a/b\", \"node\": null, \"gpuDevices\": [], "
        "\"candidates\": [], \"reasons\": {}}]}",
        "{\"placements\": [{\"pod\": \"a/b\", \"node\": \"n\", \"gpuDevices\": [0, 3], "
        "\"candidates\": [{\"node\": \"n\", \"score\": 1.5}], \"reasons\": "
        "{\"Insufficient cpu\": 2}}]}",
    };
    static const char *bad[] = {
        "{}",
        "{\"placements\": {}}",
        "{\"placements\": [{\"pod\": \"a/b\", \"candidates\": [], \"reasons\": {}}]}",
        "{\"placements\": [{\"pod\": 1, \"node\": null, \"candidates\": [], \"reasons\": {}}]}",
        "{\"placements\": [{\"pod\": \"a/b\", \"node\": null, \"candidates\": [{\"node\": "
        "\"n\"}], \"reasons\": {}}]}",
        "{\"placements\": [{\"pod\": \"a/b\", \"node\": null, \"candidates\": [], \"reasons\": "
        "{\"x\": 1.5}}]}",
        "{\"placements\": [{\"pod\": \"a/b\", \"node\": null, \"candidates\": [], \"reasons\": "
        "{\"x\": 0}}]}",
        "{\"placements\": [{\"pod\": \"a/b\", \"node\": \"n\", \"gpuDevices\": [-1], "
        "\"candidates\": [], \"reasons\": {}}]}",
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        json_t *v = json_loads(good[i], 0, NULL);
        cr_expect(validate(&c, resp, v, "$"), "good[%zu]: %s", i, c.why);
        json_decref(v);
    }
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        json_t *v = json_loads(bad[i], 0, NULL);
        cr_expect(!validate(&c, resp, v, "$"), "bad[%zu] validated", i);
        json_decref(v);
    }
    /* nullable via allOf, maps, integers. */
    const json_t *fr = schema_named(doc, "ExtenderFilterResult");
    json_t *v = json_loads("{\"Nodes\": null, \"NodeNames\": [\"a\"], \"FailedNodes\": {\"b\": "
                           "\"Insufficient cpu\"}, \"FailedAndUnresolvableNodes\": null, "
                           "\"Error\": \"\"}",
                           0, NULL);
    cr_expect(validate(&c, fr, v, "$"), "%s", c.why);
    json_object_set_new(v, "FailedNodes", json_pack("{s:i}", "b", 1));
    cr_expect(!validate(&c, fr, v, "$"));
    json_object_del(v, "Error");
    json_object_set_new(v, "FailedNodes", json_null());
    cr_expect(!validate(&c, fr, v, "$"), "missing Error must fail");
    json_decref(v);
    const json_t *hp = schema_named(doc, "HostPriorityList");
    v = json_loads("[{\"Host\": \"a\", \"Score\": 10}, {\"Host\": \"b\", \"Score\": 0}]", 0, NULL);
    cr_expect(validate(&c, hp, v, "$"), "%s", c.why);
    json_decref(v);
    v = json_loads("[{\"Host\": \"a\", \"Score\": 11}]", 0, NULL);
    cr_expect(!validate(&c, hp, v, "$"));
    json_decref(v);
    v = json_loads("[{\"Host\": \"a\", \"Score\": 2.5}]", 0, NULL);
    cr_expect(!validate(&c, hp, v, "$"));
    json_decref(v);
    json_decref(doc);
}

/* ------------------------------------------------------------------ */
/* Served answers                                                      */
/* ------------------------------------------------------------------ */

static svc *new_svc(bool load)
{
    svc_config cfg;
    svc_config_defaults(&cfg);
    cfg.log_level = 0;
    svc *s = NULL;
    as_diag d = {{0}, {0}};
    cr_assert_eq(svc_new(&cfg, &s, &d), AS_OK, "svc_new: %s", d.msg);
    if (load)
        cr_assert_eq(svc_load_cluster(s, PLACEMENT_DATA "/cluster.yaml", &d), AS_OK, "%s: %s",
                     d.field, d.msg);
    return s;
}

/* check_answer calls route r with body and validates the answer against the
 * operation's documented responses. */
static void check_answer(const json_t *doc, svc *s, const http_route *r, const char *body,
                         const char *what)
{
    char m[16];
    lower(r->method, m, sizeof m);
    const json_t *op = json_object_get(json_object_get(json_object_get(doc, "paths"), r->path), m);
    cr_assert_not_null(op, "%s %s undocumented", r->method, r->path);

    http_request req = {
        .method = r->method,
        .path = r->path,
        .body = body,
        .body_len = strlen(body),
        .pool = pool_new(0),
    };
    http_response resp = {.status = 200, .content_type = "application/json"};
    buf_init(&resp.body, 0);
    r->fn(r->ctx, &req, &resp);
    cr_assert_eq(resp.body.err, AS_OK, "%s %s (%s): response buffer error", r->method, r->path,
                 what);

    char code[8];
    snprintf(code, sizeof code, "%d", resp.status ? resp.status : 200);
    const json_t *rdoc = json_object_get(json_object_get(op, "responses"), code);
    cr_expect_not_null(rdoc, "%s %s (%s): status %s is not documented; body: %.300s", r->method,
                       r->path, what, code, resp.body.data ? resp.body.data : "");
    if (rdoc) {
        char mt[128];
        snprintf(mt, sizeof mt, "%s", resp.content_type ? resp.content_type : "application/json");
        char *semi = strchr(mt, ';');
        if (semi)
            *semi = '\0';
        const json_t *media = json_object_get(json_object_get(rdoc, "content"), mt);
        cr_expect_not_null(media, "%s %s (%s): media type %s of status %s is not documented",
                           r->method, r->path, what, mt, code);
        const json_t *schema = json_object_get(media, "schema");
        if (media && schema) {
            json_t *v = NULL;
            if (strcmp(mt, "application/json") == 0) {
                v = json_loadb(resp.body.data ? resp.body.data : "", resp.body.len, JSON_DECODE_ANY,
                               NULL);
                cr_expect_not_null(v, "%s %s (%s): body is not JSON: %.300s", r->method, r->path,
                                   what, resp.body.data);
            } else {
                v = json_stringn(resp.body.data ? resp.body.data : "", resp.body.len);
            }
            checker c = {.root = doc};
            if (v)
                cr_expect(validate(&c, schema, v, "$"), "%s %s (%s) status %s: %s\n  body: %.500s",
                          r->method, r->path, what, code, c.why, resp.body.data);
            json_decref(v);
        }
    }
    buf_free(&resp.body);
    pool_free(req.pool);
}

Test(openapi, served_answers_validate)
{
    json_t *doc = load_doc();
    svc *s = new_svc(true);
    size_t n = 0;
    const http_route *routes = svc_routes(s, &n);
    for (size_t i = 0; i < n; i++) {
        char m[16];
        lower(routes[i].method, m, sizeof m);
        const json_t *op =
            json_object_get(json_object_get(json_object_get(doc, "paths"), routes[i].path), m);
        if (!op)
            continue; /* reported by routes_match_document */
        const json_t *rb = json_object_get(op, "requestBody");
        if (!rb) {
            check_answer(doc, s, &routes[i], "", "no body");
            continue;
        }
        const json_t *media = json_object_get(json_object_get(rb, "content"), "application/json");
        const json_t *example = json_object_get(media, "example");
        cr_expect_not_null(example, "%s %s: requestBody has no example", routes[i].method,
                           routes[i].path);
        if (example) {
            /* The example must itself match the request schema. */
            checker c = {.root = doc};
            cr_expect(validate(&c, json_object_get(media, "schema"), example, "$"),
                      "%s %s example: %s", routes[i].method, routes[i].path, c.why);
            char *body = json_dumps(example, JSON_COMPACT);
            check_answer(doc, s, &routes[i], body, "example");
            free(body);
        }
        check_answer(doc, s, &routes[i], "{", "malformed JSON");
        check_answer(doc, s, &routes[i], "[]", "wrong top-level type");
    }
    svc_free(s);

    /* Not ready: /readyz answers its documented 503 (the route table is
     * the server's own: read it again from the new one). */
    s = new_svc(false);
    routes = svc_routes(s, &n);
    for (size_t i = 0; i < n; i++)
        if (strcmp(routes[i].path, "/readyz") == 0)
            check_answer(doc, s, &routes[i], "", "not ready");
    svc_free(s);
    json_decref(doc);
}

/* ------------------------------------------------------------------ */
/* Fixtures                                                            */
/* ------------------------------------------------------------------ */

Test(openapi, placement_fixtures_validate)
{
    json_t *doc = load_doc();
    checker c = {.root = doc, .star_any = true};
    DIR *dir = opendir(PLACEMENT_DATA);
    cr_assert_not_null(dir);
    struct dirent *de;
    size_t checked = 0;
    while ((de = readdir(dir))) {
        if (de->d_name[0] == '.' || strchr(de->d_name, '.'))
            continue;
        char path[1024];
        snprintf(path, sizeof path, PLACEMENT_DATA "/%s/expected.json", de->d_name);
        json_t *exp = json_load_file(path, 0, NULL);
        cr_assert_not_null(exp, "%s", path);
        bool is_err = json_object_get(exp, "error") != NULL;
        cr_expect(validate(&c, schema_named(doc, is_err ? "Error" : "PlacementResponse"), exp, "$"),
                  "%s: %s", path, c.why);
        if (!is_err) {
            snprintf(path, sizeof path, PLACEMENT_DATA "/%s/request.json", de->d_name);
            json_t *req = json_load_file(path, 0, NULL);
            cr_assert_not_null(req, "%s", path);
            cr_expect(validate(&c, schema_named(doc, "PlacementRequest"), req, "$"), "%s: %s", path,
                      c.why);
            json_decref(req);
        }
        json_decref(exp);
        checked++;
    }
    closedir(dir);
    cr_expect_gt(checked, 0);
    json_decref(doc);
}

/* data/extender/<verb>/<case>/{request.json, expected.json, status}: the
 * expected answers (status file absent = 200) match the documented schema of
 * POST /scheduler/<verb> for that status. */
Test(openapi, extender_fixtures_validate)
{
    json_t *doc = load_doc();
    checker c = {.root = doc, .star_any = true};
    static const char *const verbs[] = {"filter", "prioritize", "bind", "preempt"};
    size_t checked = 0;
    for (size_t v = 0; v < sizeof verbs / sizeof verbs[0]; v++) {
        char dpath[512];
        snprintf(dpath, sizeof dpath, TEST_DATA_DIR "/extender/%s", verbs[v]);
        DIR *dir = opendir(dpath);
        if (!dir)
            continue; /* the extender's fixtures are optional here */
        char api[64];
        snprintf(api, sizeof api, "/scheduler/%s", verbs[v]);
        const json_t *op =
            json_object_get(json_object_get(json_object_get(doc, "paths"), api), "post");
        cr_assert_not_null(op, "%s undocumented", api);
        struct dirent *de;
        while ((de = readdir(dir))) {
            if (de->d_name[0] == '.')
                continue;
            char path[1024];
            int status = 200;
            snprintf(path, sizeof path, "%s/%s/status", dpath, de->d_name);
            FILE *f = fopen(path, "r");
            if (f) {
                cr_assert_eq(fscanf(f, "%d", &status), 1, "%s", path);
                fclose(f);
            }
            snprintf(path, sizeof path, "%s/%s/expected.json", dpath, de->d_name);
            json_t *exp = json_load_file(path, JSON_DECODE_ANY, NULL);
            if (!exp)
                continue; /* not a case directory */
            char code[8];
            snprintf(code, sizeof code, "%d", status);
            const json_t *media = json_object_get(
                json_object_get(json_object_get(json_object_get(op, "responses"), code), "content"),
                "application/json");
            cr_expect_not_null(media, "%s: status %d of %s is not documented", path, status, api);
            if (media)
                cr_expect(validate(&c, json_object_get(media, "schema"), exp, "$"), "%s: %s", path,
                          c.why);
            json_decref(exp);
            checked++;
        }
        closedir(dir);
    }
    json_decref(doc);
}
