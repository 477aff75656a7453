/*
 * test_placement.c - dry-run placement: fixture cases (request.json ->
 * expected.json under data/placement/<case>/), isolation from the shared
 * cache, determinism, concurrency, shard modes, every answer as if the
 * earlier pods were bound (also on random clusters), and the table printer.
 *
 * Fixture matching: objects must have exactly the expected keys, arrays
 * the expected length, numbers match within 1e-6, and the string "*"
 * matches any string. An expected body with an "error" key means 400.
 * Scores assume the most-allocated strategy (set explicitly below).
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agentsched/base/doc.h"
#include "agentsched/api/placement.h"
#include "agentsched/core/policy.h"
#include "agentsched/serve/svc.h"
#include "core_fixtures.h"

#define DATA    TEST_DATA_DIR "/placement"
#define CLUSTER DATA "/cluster.yaml"

static svc *new_svc(void)
{
    svc_config cfg;
    svc_config_defaults(&cfg);
    cfg.log_level = 0;
    svc *s = NULL;
    as_diag d = {{0}, {0}};
    cr_assert_eq(svc_new(&cfg, &s, &d), AS_OK, "svc_new: %s", d.msg);
    cr_assert_eq(svc_load_cluster(s, CLUSTER, &d), AS_OK, "load: %s: %s", d.field, d.msg);
    score_policy *p = NULL;
    cr_assert_eq(score_policy_new_strategy(&s->core->reg, SCORE_MOST_ALLOCATED, &p), AS_OK);
    core_policy_set(s->core, p);
    return s;
}

typedef struct answer {
    int status;
    char *body; /* malloc'ed, NUL-terminated */
    size_t len;
} answer;

static answer call(svc *s, const char *body, size_t len)
{
    http_request req = {
        .method = "POST",
        .path = PLACEMENT_PATH,
        .body = body,
        .body_len = len,
        .pool = pool_new(0),
    };
    http_response resp = {.status = 200, .content_type = "application/json"};
    buf_init(&resp.body, 0);
    placement_handle(s->core, &req, &resp);
    answer a = {.status = resp.status};
    cr_assert_eq(resp.body.err, AS_OK);
    cr_assert_eq(buf_take(&resp.body, &a.body, &a.len), AS_OK);
    buf_free(&resp.body);
    pool_free(req.pool);
    return a;
}

static answer call_str(svc *s, const char *body)
{
    return call(s, body, strlen(body));
}

/* match: see the file comment. Writes the first mismatch path into why. */
static bool match(const json_t *exp, const json_t *act, const char *path, char *why, size_t wl)
{
    if (json_is_string(exp) && strcmp(json_string_value(exp), "*") == 0) {
        if (json_is_string(act))
            return true;
        snprintf(why, wl, "%s: expected any string", path);
        return false;
    }
    if (json_is_number(exp)) {
        if (json_is_number(act) && fabs(json_number_value(exp) - json_number_value(act)) < 1e-6)
            return true;
        snprintf(why, wl, "%s: expected %g, got %s %g", path, json_number_value(exp),
                 json_is_number(act) ? "" : "non-number", json_number_value(act));
        return false;
    }
    if (json_is_object(exp)) {
        if (!json_is_object(act) || json_object_size(act) != json_object_size(exp)) {
            snprintf(why, wl, "%s: expected an object with %zu keys", path, json_object_size(exp));
            return false;
        }
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)exp, k, v)
        {
            char sub[512];
            snprintf(sub, sizeof sub, "%s.%s", path, k);
            const json_t *a = json_object_get(act, k);
            if (!a) {
                snprintf(why, wl, "%s: missing", sub);
                return false;
            }
            if (!match(v, a, sub, why, wl))
                return false;
        }
        return true;
    }
    if (json_is_array(exp)) {
        if (!json_is_array(act) || json_array_size(act) != json_array_size(exp)) {
            snprintf(why, wl, "%s: expected an array of %zu", path, json_array_size(exp));
            return false;
        }
        for (size_t i = 0; i < json_array_size(exp); i++) {
            char sub[512];
            snprintf(sub, sizeof sub, "%s[%zu]", path, i);
            if (!match(json_array_get(exp, i), json_array_get(act, i), sub, why, wl))
                return false;
        }
        return true;
    }
    if (json_equal((json_t *)exp, (json_t *)act))
        return true;
    snprintf(why, wl, "%s: values differ", path);
    return false;
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

Test(placement, fixtures)
{
    svc *s = new_svc();
    DIR *dir = opendir(DATA);
    cr_assert_not_null(dir);
    char *names[256];
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir(dir)) && n < 256) {
        if (de->d_name[0] == '.' || strchr(de->d_name, '.'))
            continue;
        names[n++] = strdup(de->d_name);
    }
    closedir(dir);
    qsort(names, n, sizeof names[0], name_cmp);
    cr_assert_geq(n, 20, "only %zu fixture cases", n);
    for (size_t i = 0; i < n; i++) {
        char path[1024];
        char *req = NULL;
        size_t rlen = 0;
        as_diag d = {{0}, {0}};
        snprintf(path, sizeof path, DATA "/%s/request.json", names[i]);
        cr_assert_eq(doc_read_file(path, 0, &req, &rlen, &d), AS_OK, "%s", d.msg);
        snprintf(path, sizeof path, DATA "/%s/expected.json", names[i]);
        json_error_t je;
        json_t *exp = json_load_file(path, 0, &je);
        cr_assert_not_null(exp, "%s: %s", path, je.text);

        answer a = call(s, req, rlen);
        int want = json_object_get(exp, "error") ? 400 : 200;
        cr_expect_eq(a.status, want, "%s: status %d, want %d: %s", names[i], a.status, want,
                     a.body);
        json_t *act = json_loadb(a.body, a.len, 0, &je);
        cr_expect_not_null(act, "%s: answer is not JSON: %s", names[i], a.body);
        char why[512] = "";
        cr_expect(match(exp, act, "$", why, sizeof why), "%s: %s\n  got: %s", names[i], why,
                  a.body);
        json_decref(act);
        json_decref(exp);
        free(a.body);
        free(req);
        free(names[i]);
    }
    svc_free(s);
}

static void snapshot_usage(svc *s, int64_t *out, size_t max, size_t *n)
{
    cache_read_lock(s->core->cache);
    *n = cache_node_count(s->core->cache);
    cr_assert_leq(*n * MODEL_MAX_RES, max);
    for (size_t i = 0; i < *n; i++)
        for (int r = 0; r < MODEL_MAX_RES; r++)
            out[i * MODEL_MAX_RES + r] = cache_node_requested(cache_node_at(s->core->cache, i), r);
    cache_read_unlock(s->core->cache);
}

static const char fill_req[] =
    "{\"pods\": ["
    "{\"metadata\": {\"name\": \"p1\"}, \"spec\": {\"containers\": [{\"name\": \"c\", "
    "\"resources\": {\"requests\": {\"cpu\": \"2\", \"memory\": \"2Gi\"}}}]}},"
    "{\"metadata\": {\"name\": \"p2\"}, \"spec\": {\"containers\": [{\"name\": \"c\", "
    "\"resources\": {\"requests\": {\"cpu\": \"2\", \"memory\": \"2Gi\"}}}]}},"
    "{\"metadata\": {\"name\": \"p3\"}, \"spec\": {\"containers\": [{\"name\": \"c\", "
    "\"resources\": {\"requests\": {\"cpu\": \"3\", \"memory\": \"2Gi\"}}}]}},"
    "{\"metadata\": {\"name\": \"p4\"}, \"spec\": {\"containers\": [{\"name\": \"c\", "
    "\"resources\": {\"requests\": {\"cpu\": \"6\", \"memory\": \"2Gi\"}}}]}}"
    "], \"candidates\": 5}";

Test(placement, nothing_is_bound)
{
    svc *s = new_svc();
    int64_t before[64 * MODEL_MAX_RES], after[64 * MODEL_MAX_RES];
    size_t nb, na;
    snapshot_usage(s, before, 64 * MODEL_MAX_RES, &nb);
    cache_stats st0;
    cache_get_stats(s->core->cache, &st0);
    answer a = call_str(s, fill_req);
    cr_assert_eq(a.status, 200, "%s", a.body);
    snapshot_usage(s, after, 64 * MODEL_MAX_RES, &na);
    cr_assert_eq(na, nb);
    cr_assert_arr_eq(before, after, nb * MODEL_MAX_RES * sizeof before[0]);
    cache_stats st1;
    cache_get_stats(s->core->cache, &st1);
    cr_assert_eq(st1.pods_assumed, 0);
    cr_assert_eq(st1.pods_bound, st0.pods_bound);
    as_diag d = {{0}, {0}};
    cr_assert_eq(cache_check_invariants(s->core->cache, &d), AS_OK, "%s", d.msg);
    free(a.body);
    svc_free(s);
}

/* Many dry runs, good and bad, interleaved: the cache's usage, pod
 * counts (assumed, bound) and generation are as before. */
Test(placement, many_placements_mutate_nothing)
{
    svc *s = new_svc();
    int64_t before[64 * MODEL_MAX_RES], after[64 * MODEL_MAX_RES];
    size_t nb, na;
    snapshot_usage(s, before, 64 * MODEL_MAX_RES, &nb);
    cache_stats st0;
    cache_get_stats(s->core->cache, &st0);
    static const char *const bodies[] = {
        fill_req,
        "{\"pods\": [{\"metadata\": {\"name\": \"x\"}, \"spec\": {\"nodeName\": \"n1\"}}]}",
        "{\"pods\": [",
        "{\"pods\": [{\"spec\": {\"containers\": [{\"name\": \"c\", \"resources\": "
        "{\"requests\": {\"cpu\": \"-1\"}}}]}}]}",
        "{\"pods\": [], \"candidates\": 99}",
    };
    for (int i = 0; i < 500; i++) {
        answer a = call_str(s, bodies[i % 5]);
        cr_assert(a.status == 200 || a.status == 400, "%d: %s", a.status, a.body);
        free(a.body);
    }
    snapshot_usage(s, after, 64 * MODEL_MAX_RES, &na);
    cr_assert_eq(na, nb);
    cr_assert_arr_eq(before, after, nb * MODEL_MAX_RES * sizeof before[0]);
    cache_stats st1;
    cache_get_stats(s->core->cache, &st1);
    cr_assert_eq(st1.pods_assumed, st0.pods_assumed);
    cr_assert_eq(st1.pods_bound, st0.pods_bound);
    cr_assert_eq(st1.pods_detached, st0.pods_detached);
    as_diag d = {{0}, {0}};
    cr_assert_eq(cache_check_invariants(s->core->cache, &d), AS_OK, "%s", d.msg);
    svc_free(s);
}

/* The token bucket: a burst of 2 x qps, then one a 1/qps s; callers are
 * apart; Retry-After is whole seconds, at least 1; qps 0 is no limit. */
Test(placement, limiter_per_caller_bucket)
{
    placement_limiter *l = NULL;
    cr_assert_eq(placement_limiter_new(0, &l), AS_OK);
    cr_assert_null(l);
    cr_assert(placement_limiter_take(NULL, "1.2.3.4", 0, NULL));

    cr_assert_eq(placement_limiter_new(5, &l), AS_OK);
    uint64_t t = 1000000000ull;
    unsigned retry = 0;
    for (int i = 0; i < 10; i++)
        cr_assert(placement_limiter_take(l, "10.0.0.1", t, &retry), "burst %d", i);
    cr_assert_not(placement_limiter_take(l, "10.0.0.1", t, &retry));
    cr_assert_eq(retry, 1);
    cr_assert(placement_limiter_take(l, "10.0.0.2", t, &retry), "another caller is apart");
    cr_assert(placement_limiter_take(l, "", t, &retry), "an unknown peer has a bucket too");
    /* 200 ms later: one token (5 a second) */
    cr_assert(placement_limiter_take(l, "10.0.0.1", t + 200000000ull, &retry));
    cr_assert_not(placement_limiter_take(l, "10.0.0.1", t + 200000000ull, &retry));
    placement_limiter_free(l);

    cr_assert_eq(placement_limiter_new(1, &l), AS_OK);
    cr_assert(placement_limiter_take(l, "a", t, &retry));
    cr_assert(placement_limiter_take(l, "a", t, &retry));
    cr_assert_not(placement_limiter_take(l, "a", t, &retry));
    cr_assert_eq(retry, 1);
    /* more callers than slots: memory stays fixed, every one is answered */
    char peer[32];
    for (int i = 0; i < 3 * PLACEMENT_LIMIT_SLOTS; i++) {
        snprintf(peer, sizeof peer, "10.%d.%d.%d", i >> 16, (i >> 8) & 255, i & 255);
        cr_assert(placement_limiter_take(l, peer, t + (uint64_t)i, &retry), "%s", peer);
    }
    placement_limiter_free(l);
}

/* Over the rate the handler answers 429 with Retry-After and names the
 * flag, before decoding the body. */
Test(placement, handler_answers_429)
{
    svc *s = new_svc();
    cr_assert_eq(placement_limit_configure(1), AS_OK);
    int codes[3];
    for (int i = 0; i < 3; i++) {
        http_request req = {.method = "POST",
                            .path = PLACEMENT_PATH,
                            .body = "{\"pods\": []}",
                            .body_len = 12,
                            .pool = pool_new(0),
                            .peer = "192.0.2.7"};
        http_response resp = {.status = 200, .content_type = "application/json"};
        buf_init(&resp.body, 0);
        placement_handle(s->core, &req, &resp);
        codes[i] = resp.status;
        if (i == 2) {
            cr_assert_geq(resp.retry_after_s, 1);
            cr_assert_not_null(strstr(resp.body.data, "--placement-qps"), "%s", resp.body.data);
        }
        buf_free(&resp.body);
        pool_free(req.pool);
    }
    cr_assert_eq(placement_limit_configure(0), AS_OK);
    cr_assert_eq(codes[0], 200);
    cr_assert_eq(codes[1], 200);
    cr_assert_eq(codes[2], 429);
    svc_free(s);
}

Test(placement, later_pods_see_earlier_ones)
{
    svc *s = new_svc();
    answer a = call_str(s, fill_req);
    cr_assert_eq(a.status, 200, "%s", a.body);
    json_t *r = json_loads(a.body, 0, NULL);
    const json_t *pl = json_object_get(r, "placements");
    cr_assert_eq(json_array_size(pl), 4);
    /* node-c (2 cpu, 1 used) cannot take 2 cpu; most-allocated packs
     * node-a (4 cpu) first: p1 and p2 fill it, p3 (3 cpu) goes to node-b,
     * p4 (6 cpu) then fits nowhere (node-b has 5 left). */
    const char *want[] = {"node-a", "node-a", "node-b", NULL};
    for (size_t i = 0; i < 4; i++) {
        const json_t *node = json_object_get(json_array_get(pl, i), "node");
        if (want[i])
            cr_expect_str_eq(json_string_value(node), want[i], "pod %zu: %s", i, a.body);
        else
            cr_expect(json_is_null(node), "pod %zu: %s", i, a.body);
    }
    const json_t *reasons = json_object_get(json_array_get(pl, 3), "reasons");
    cr_expect_eq(json_integer_value(json_object_get(reasons, "Insufficient cpu")), 3, "%s", a.body);
    json_decref(r);
    free(a.body);
    svc_free(s);
}

Test(placement, deterministic_and_reasons_sorted)
{
    svc *s = new_svc();
    answer a = call_str(s, fill_req);
    answer b = call_str(s, fill_req);
    cr_assert_eq(a.len, b.len);
    cr_assert_str_eq(a.body, b.body);
    /* p4: "Insufficient cpu" (3 nodes) comes before the single-node reasons. */
    const char *p4 = strstr(a.body, "default/p4");
    cr_assert_not_null(p4);
    const char *ins = strstr(p4, "Insufficient cpu");
    const char *taint = strstr(p4, "untolerated taint");
    cr_assert(ins && taint && ins < taint, "%s", p4);
    free(a.body);
    free(b.body);
    svc_free(s);
}

typedef struct conc_arg {
    svc *s;
    const char *expect;
    int bad;
} conc_arg;

static void *conc_worker(void *p)
{
    conc_arg *x = p;
    for (int i = 0; i < 20; i++) {
        answer a = call_str(x->s, fill_req);
        if (a.status != 200 || strcmp(a.body, x->expect) != 0)
            __atomic_add_fetch(&x->bad, 1, __ATOMIC_RELAXED);
        free(a.body);
    }
    return NULL;
}

Test(placement, concurrent_requests_are_isolated)
{
    svc *s = new_svc();
    answer ref = call_str(s, fill_req);
    conc_arg x = {.s = s, .expect = ref.body};
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        cr_assert_eq(pthread_create(&t[i], NULL, conc_worker, &x), 0);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    cr_assert_eq(x.bad, 0, "%d answers differed from a lone request", x.bad);
    free(ref.body);
    svc_free(s);
}

Test(placement, too_many_pods)
{
    svc *s = new_svc();
    buf b;
    buf_init(&b, 0);
    buf_puts(&b, "{\"pods\": [");
    for (int i = 0; i <= PLACEMENT_MAX_PODS; i++)
        buf_puts(&b, i ? ",{}" : "{}");
    buf_puts(&b, "]}");
    answer a = call(s, b.data, b.len);
    cr_assert_eq(a.status, 400, "%s", a.body);
    cr_assert(strstr(a.body, "\"field\": \"pods\""), "%s", a.body);
    free(a.body);
    buf_free(&b);
    svc_free(s);
}

Test(placement, hostile_bodies_never_crash)
{
    svc *s = new_svc();
    static const char *bodies[] = {
        "",
        "null",
        "1",
        "\"pods\"",
        "{\"pods\": null}",
        "{\"pods\": [null]}",
        "{\"pods\": [[]]}",
        "{\"pods\": [{\"metadata\": 5}]}",
        "{\"pods\": [{\"spec\": {\"containers\": [{\"resources\": {\"requests\": {\"cpu\": "
        "\"99999999999999999999\"}}}]}}]}",
        "{\"pods\": [{\"spec\": {\"containers\": [{\"resources\": {\"requests\": {\"cpu\": "
        "-1}}}]}}]}",
        "{\"pods\": [{\"spec\": {\"nodeSelector\": [1]}}]}",
        "{\"pods\": [{\"spec\": {\"tolerations\": {}}}]}",
        "{\"pods\": [], \"candidates\": -1}",
        "{\"pods\": [], \"candidates\": 9223372036854775807}",
        "{\"pods\": [], \"candidates\": true}",
        "{\"pods\": [{\"kind\": 7}]}",
        "{\"pods\": [{}]}\n\n garbage",
        "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]",
    };
    for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++) {
        answer a = call_str(s, bodies[i]);
        cr_expect(a.status == 200 || a.status == 400, "body %zu: status %d", i, a.status);
        json_t *j = json_loadb(a.body, a.len, 0, NULL);
        cr_expect_not_null(j, "body %zu: answer not JSON: %s", i, a.body);
        if (a.status == 400)
            cr_expect(json_is_string(json_object_get(j, "error")), "body %zu: %s", i, a.body);
        json_decref(j);
        free(a.body);
    }
    svc_free(s);
}

/* error_of returns the answer's JSON and checks its status and field
 * (NULL: none, as for syntax errors). */
static json_t *error_of(const answer *a, int status, const char *field)
{
    json_t *j = json_loadb(a->body, a->len, 0, NULL);
    cr_assert_not_null(j, "answer not JSON: %s", a->body);
    cr_expect_eq(a->status, status, "%s", a->body);
    if (field)
        cr_expect_str_eq(json_string_value(json_object_get(j, "field")), field, "%s", a->body);
    else
        cr_expect_null(json_object_get(j, "field"), "%s", a->body);
    cr_expect(json_is_string(json_object_get(j, "error")), "%s", a->body);
    return j;
}

/* A pod name past Kubernetes' 253 bytes is the request's fault (400 naming
 * it), not an answer too large (it was a 500 past 4 KB). */
Test(placement, long_pod_names_are_refused)
{
    svc *s = new_svc();
    static const struct {
        size_t name, ns;
        int status;
        const char *field;
    } cases[] = {
        {253, 63, 200, NULL},
        {254, 0, 400, "pods[0].metadata.name"},
        {5000, 0, 400, "pods[0].metadata.name"},
        {10, 64, 400, "pods[0].metadata.namespace"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        buf b;
        buf_init(&b, 0);
        buf_puts(&b, "{\"pods\": [{\"metadata\": {\"name\": \"");
        for (size_t k = 0; k < cases[i].name; k++)
            buf_puts(&b, "n");
        buf_puts(&b, "\"");
        if (cases[i].ns) {
            buf_puts(&b, ", \"namespace\": \"");
            for (size_t k = 0; k < cases[i].ns; k++)
                buf_puts(&b, "s");
            buf_puts(&b, "\"");
        }
        buf_puts(&b, "}}]}");
        answer a = call(s, b.data, b.len);
        if (cases[i].status == 200) {
            cr_expect_eq(a.status, 200, "case %zu: %s", i, a.body);
        } else {
            json_t *j = error_of(&a, cases[i].status, cases[i].field);
            cr_expect_null(strstr(a.body, "exceeds"), "case %zu: %s", i, a.body);
            json_decref(j);
        }
        free(a.body);
        buf_free(&b);
    }
    svc_free(s);
}

/* \u0000 is refused in agentsched's words, not jansson's (which name a
 * flag of its own API). */
Test(placement, nul_is_refused_in_our_words)
{
    svc *s = new_svc();
    static const char *const bodies[] = {
        "{\"pods\": [{\"metadata\": {\"name\": \"a\\u0000b\"}}]}",
        "{\"pods\": [{\"spec\": {\"nodeSelector\": {\"kubernetes.io/hostname\\u0000x\": "
        "\"n1\"}}}]}",
    };
    for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++) {
        answer a = call_str(s, bodies[i]);
        json_t *j = error_of(&a, 400, NULL);
        const char *e = json_string_value(json_object_get(j, "error"));
        cr_expect(e && strstr(e, "\\u0000") && strstr(e, "may not contain"), "body %zu: %s", i,
                  a.body);
        cr_expect(e && !strstr(e, "JSON_ALLOW_NUL"), "body %zu: %s", i, a.body);
        cr_expect(e && strstr(e, "line 1 column"), "body %zu: %s", i, a.body);
        json_decref(j);
        free(a.body);
    }
    svc_free(s);
}

static json_t *placements_of(svc *s, const char *req)
{
    answer a = call_str(s, req);
    cr_assert_eq(a.status, 200, "%s", a.body);
    json_t *r = json_loads(a.body, 0, NULL);
    free(a.body);
    return r;
}

static const char one_cpu_pod[] = "{\"pods\": [{\"metadata\": {\"name\": \"x\"}, \"spec\": "
                                  "{%s\"containers\": [{\"name\": \"c\", \"resources\": "
                                  "{\"requests\": {\"cpu\": \"1\"}}}]}}], \"candidates\": 16}";

static json_t *place_one_cpu(svc *s, const char *spec_extra)
{
    char req[1024];
    snprintf(req, sizeof req, one_cpu_pod, spec_extra);
    return placements_of(s, req);
}

Test(placement, soft_shard_prefers_in_shard)
{
    svc *s = new_svc();
    cache_set_shard_mode(s->core->cache, CACHE_SHARD_SOFT);
    const char *names[] = {"node-b"};
    uint64_t rev;
    cr_assert_eq(cache_shard_apply(s->core->cache, names, 1, &rev), AS_OK);

    json_t *r = place_one_cpu(s, "");
    const json_t *p = json_array_get(json_object_get(r, "placements"), 0);
    cr_expect_str_eq(json_string_value(json_object_get(p, "node")), "node-b");
    /* Out-of-shard nodes are candidates only when no in-shard node fits. */
    cr_expect_eq(json_array_size(json_object_get(p, "candidates")), 1);
    json_decref(r);

    r = place_one_cpu(s, "\"nodeSelector\": {\"zone\": \"z1\"}, ");
    p = json_array_get(json_object_get(r, "placements"), 0);
    cr_expect_str_eq(json_string_value(json_object_get(p, "node")), "node-c");
    cr_expect_eq(json_array_size(json_object_get(p, "candidates")), 2);
    json_decref(r);
    svc_free(s);
}

Test(placement, hard_shard_only_in_shard)
{
    svc *s = new_svc();
    cache_set_shard_mode(s->core->cache, CACHE_SHARD_HARD);
    const char *names[] = {"node-a"};
    uint64_t rev;
    cr_assert_eq(cache_shard_apply(s->core->cache, names, 1, &rev), AS_OK);
    json_t *r = place_one_cpu(s, "");
    const json_t *p = json_array_get(json_object_get(r, "placements"), 0);
    cr_expect_str_eq(json_string_value(json_object_get(p, "node")), "node-a");
    cr_expect_eq(json_array_size(json_object_get(p, "candidates")), 1);
    json_decref(r);
    svc_free(s);
}

Test(placement, run_direct_and_k_bounds)
{
    svc *s = new_svc();
    json_t *req = json_loads("{\"pods\": [{\"metadata\": {\"name\": \"a\"}, \"spec\": "
                             "{\"containers\": [{\"name\": \"c\"}]}}], \"candidates\": 16}",
                             0, NULL);
    model_pod **pods = NULL;
    size_t n = 0;
    uint32_t k = 0;
    as_diag d = {{0}, {0}};
    cr_assert_eq(placement_request_decode(&s->core->reg, req, 3, &pods, &n, &k, &d), AS_OK, "%s",
                 d.msg);
    cr_assert_eq(n, 1);
    cr_assert_eq(k, 16);
    score_policy *pol = core_policy_get(s->core);
    buf out;
    buf_init(&out, 0);
    cr_assert_eq(placement_run(s->core->cache, pol, (const model_pod *const *)pods, n, k, &out),
                 AS_OK);
    json_t *r = json_loadb(out.data, out.len, 0, NULL);
    cr_assert_not_null(r);
    /* Every node that passes the predicates: node-a, node-b, node-c. */
    cr_expect_eq(json_array_size(json_object_get(
                     json_array_get(json_object_get(r, "placements"), 0), "candidates")),
                 3, "%s", out.data);
    json_decref(r);
    /* A tiny response cap is reported, not overrun. */
    buf small;
    buf_init(&small, 16);
    cr_assert_eq(placement_run(s->core->cache, pol, (const model_pod *const *)pods, n, 1, &small),
                 AS_ETOOBIG);
    buf_free(&small);
    buf_free(&out);
    score_policy_unref(pol);
    placement_pods_free(pods, n);

    /* Default K when absent. */
    json_object_del(req, "candidates");
    cr_assert_eq(placement_request_decode(&s->core->reg, req, 5, &pods, &n, &k, &d), AS_OK);
    cr_expect_eq(k, 5);
    placement_pods_free(pods, n);
    cr_assert_eq(placement_request_decode(&s->core->reg, req, 0, &pods, &n, &k, &d), AS_OK);
    cr_expect_eq(k, PLACEMENT_DEFAULT_K);
    placement_pods_free(pods, n);
    json_decref(req);
    svc_free(s);
}

/* four_gpu_nodes: reg initialized with the GPU resource, and a new cache
 * over it holding four 2-GPU nodes g0-g3 (the caller frees both). */
static cache *four_gpu_nodes(model_registry *reg)
{
    model_registry_init(reg);
    fx_res(reg, reg->gpu_name);
    cache *c = NULL;
    cr_assert_eq(cache_new(reg, &c), AS_OK);
    for (int i = 0; i < 4; i++)
        cr_assert_eq(cache_node_upsert(c, fx_gpu_node(reg, i, 2)), AS_OK);
    return c;
}

/* A dry run counts the free devices its own earlier pods took: fragment
 * with keepFree 0.5 on 8 devices places four 810-milli shares (8 free down
 * to 4) and keeps the last free devices from the other four, as a live
 * scheduler would, though the cache still has all 8 free. */
Test(placement, earlier_pods_take_free_devices)
{
    model_registry reg;
    cache *c = four_gpu_nodes(&reg);
    score_policy *pol = fx_policy(&reg, "strategy: fragment\nfragment:\n  keepFree: 0.5\n");
    model_pod *pods[8];
    for (int i = 0; i < 8; i++) {
        char uid[8];
        snprintf(uid, sizeof uid, "s%d", i);
        pods[i] = fx_pod(uid, uid, 3000, 4 * FX_GI);
        fx_pod_gpu(&reg, pods[i], 1, 810);
    }
    for (int i = 0; i < 20; i++)
        score_observe_pod(pol, pods[0]);
    buf out;
    buf_init(&out, 0);
    cr_assert_eq(placement_run(c, pol, (const model_pod *const *)pods, 8, 1, &out), AS_OK);
    json_t *r = json_loadb(out.data, out.len, 0, NULL);
    cr_assert_not_null(r);
    json_t *pl = json_object_get(r, "placements");
    for (int i = 0; i < 8; i++) {
        json_t *e = json_array_get(pl, (size_t)i);
        bool placed = json_is_string(json_object_get(e, "node"));
        cr_expect_eq(placed, i < 4, "pod %d: %s", i, out.data);
        if (i >= 4)
            cr_expect_not_null(
                json_object_get(json_object_get(e, "reasons"),
                                "node(s) kept their free GPU devices for shares that fill them "
                                "(free devices are short)"),
                "pod %d: %s", i, out.data);
    }
    uint64_t dev = 0, nfree = 0;
    cache_gpu_devices(c, &dev, &nfree);
    cr_assert_eq(nfree, 8, "a dry run changes nothing");
    json_decref(r);
    buf_free(&out);
    for (int i = 0; i < 8; i++)
        model_pod_free(pods[i]);
    score_policy_unref(pol);
    cache_free(c);
    model_registry_destroy(&reg);
}

/* A dry run counts the free milli its own earlier pods took, which
 * keepFreeFragmented reads: 2 of 8 devices free (g3's; keepFree 0.125
 * keeps at 1, keepFreeFragmented 0.25 at 2) and 2700 milli in pieces on
 * g0-g2 make them short, so a 950-milli share (what it leaves fits none of
 * the shares seen) is kept from g3. An 800 share first fills one piece
 * (1900 left in pieces): no longer short, and the 950 that follows it in
 * the same run goes to g3, as it would once the 800 were bound. */
Test(placement, earlier_pods_take_free_milli)
{
    model_registry reg;
    cache *c = four_gpu_nodes(&reg);
    fx_bind_pieces(&reg, c, 3);
    score_policy *pol = fx_policy(
        &reg, "strategy: fragment\nfragment:\n  keepFree: 0.125\n  keepFreeFragmented: 0.25\n");
    model_pod *fill = fx_pod("f", "f", 100, FX_GI);
    fx_pod_gpu(&reg, fill, 1, 800);
    model_pod *big = fx_pod("w", "w", 100, FX_GI);
    fx_pod_gpu(&reg, big, 1, 950);
    for (int i = 0; i < 20; i++)
        score_observe_pod(pol, big);
    cr_assert(score_policy_devices_short(pol, c));
    for (int run = 0; run < 2; run++) {
        const model_pod *batch[2] = {fill, big};
        size_t n = run ? 2 : 1;
        buf out;
        buf_init(&out, 0);
        cr_assert_eq(placement_run(c, pol, batch + (run ? 0 : 1), n, 1, &out), AS_OK);
        json_t *r = json_loadb(out.data, out.len, 0, NULL);
        cr_assert_not_null(r);
        json_t *last = json_array_get(json_object_get(r, "placements"), n - 1);
        const char *node = json_string_value(json_object_get(last, "node"));
        if (run)
            cr_expect(node && strcmp(node, "g3") == 0, "after the 800: %s", out.data);
        else
            cr_expect_null(node, "alone: kept from g3, %s", out.data);
        json_decref(r);
        buf_free(&out);
    }
    model_pod_free(fill);
    model_pod_free(big);
    score_policy_unref(pol);
    cache_free(c);
    model_registry_destroy(&reg);
}

typedef struct rnode {
    uint32_t ngpus;
    int64_t cpu;
    const char *model;
} rnode;

typedef struct rpod {
    int64_t cpu;
    uint32_t count, milli; /* count 0: no GPU; milli 0: whole GPUs */
    const char *pin;       /* GPU model by nodeSelector, or NULL */
} rpod;

static const char *const rmodels[3] = {"A", "B", "C"};

static rpod rpod_draw(uint64_t *s)
{
    static const uint32_t shares[5] = {150, 320, 470, 650, 810};
    rpod r = {.cpu = 1000 * (1 + (int64_t)fx_rnd(s, 12))};
    uint32_t kind = fx_rnd(s, 8);
    if (kind >= 2) {
        r.count = 1;
        r.milli = kind < 5 ? shares[fx_rnd(s, 5)] : 0;
        if (kind == 7)
            r.count = 2;
        if (fx_rnd(s, 4) == 0)
            r.pin = rmodels[fx_rnd(s, 3)];
    }
    return r;
}

/* rpod_new builds pod number i of shape r, bound to node if not NULL. */
static model_pod *rpod_new(model_registry *reg, const rpod *r, int i, const char *node)
{
    char name[16];
    snprintf(name, sizeof name, "r%d", i);
    model_pod *p = fx_pod(name, name, r->cpu, 4 * FX_GI);
    if (r->count)
        fx_pod_gpu(reg, p, r->count, r->milli);
    if (r->pin)
        fx_pod_selector(p, "agentsched.io/gpu-model", r->pin);
    if (node)
        fx_pod_bind(p, node);
    return p;
}

/* rplacements: the answers of the dry run of pods[0..n) on a fresh cache
 * of the nodes (n00, n01, ...; model NULL: no model label), with
 * bound[0..nb) bound first (caller decrefs). */
static json_t *rplacements(model_registry *reg, const score_policy *pol, const rnode *nodes,
                           size_t nn, model_pod **bound, size_t nb, model_pod **pods, size_t n)
{
    cache *c = NULL;
    cr_assert_eq(cache_new(reg, &c), AS_OK);
    for (size_t i = 0; i < nn; i++) {
        char name[16];
        snprintf(name, sizeof name, "n%02zu", i);
        model_node *node = fx_node(name, nodes[i].cpu, 256 * FX_GI, 110);
        if (nodes[i].ngpus)
            fx_node_gpus(reg, node, nodes[i].ngpus);
        if (nodes[i].ngpus && nodes[i].model) {
            fx_node_label(node, "agentsched.io/gpu-model", nodes[i].model);
            node->gpu_model = pool_strdup(node->pool, nodes[i].model);
        }
        cr_assert_eq(cache_node_upsert(c, node), AS_OK);
    }
    for (size_t i = 0; i < nb; i++)
        cr_assert_eq(cache_pod_upsert(c, bound[i]), AS_OK);
    buf out;
    buf_init(&out, 0);
    cr_assert_eq(placement_run(c, pol, (const model_pod *const *)pods, n, 16, &out), AS_OK);
    json_t *r = json_loadb(out.data, out.len, 0, NULL);
    cr_assert_not_null(r, "%s", out.data);
    json_t *pl = json_incref(json_object_get(r, "placements"));
    json_decref(r);
    buf_free(&out);
    cache_free(c);
    return pl;
}

/* expect_as_if_bound runs the dry run of the pods of shapes[0..n)
 * (rpod_new of each index) on a fresh cache of the nodes, and expects for
 * each pod after the first the answer the dry run of that pod alone gives
 * once the pods before it are bound where the run placed them. `what`
 * names the case in a failure. Returns the run's answers (caller decrefs). */
static json_t *expect_as_if_bound(model_registry *reg, const score_policy *pol, const rnode *nodes,
                                  size_t nn, const rpod *shapes, size_t n, const char *what)
{
    model_pod **pods = calloc(n, sizeof *pods), **bound = calloc(n, sizeof *bound);
    cr_assert(pods && bound);
    for (size_t i = 0; i < n; i++)
        pods[i] = rpod_new(reg, &shapes[i], (int)i, NULL);
    json_t *all = rplacements(reg, pol, nodes, nn, NULL, 0, pods, n);
    for (size_t k = 1; k < n; k++) {
        size_t nb = 0;
        for (size_t j = 0; j < k; j++) {
            const char *node = json_string_value(json_object_get(json_array_get(all, j), "node"));
            if (node)
                bound[nb++] = rpod_new(reg, &shapes[j], (int)j, node);
        }
        json_t *alone = rplacements(reg, pol, nodes, nn, bound, nb, &pods[k], 1);
        char *a = json_dumps(json_array_get(all, k), JSON_SORT_KEYS);
        char *b = json_dumps(json_array_get(alone, 0), JSON_SORT_KEYS);
        cr_expect_str_eq(a, b, "%s pod %zu", what, k);
        free(a);
        free(b);
        json_decref(alone);
        for (size_t j = 0; j < nb; j++)
            model_pod_free(bound[j]);
    }
    for (size_t i = 0; i < n; i++)
        model_pod_free(pods[i]);
    free(pods);
    free(bound);
    return all;
}

/* first_node: the node a dry run's answers (rplacements) give its first pod, or NULL. */
static const char *first_node(const json_t *all)
{
    return json_string_value(json_object_get(json_array_get(all, 0), "node"));
}

/* A dry run scores each pod on the nodes as its earlier pods left them,
 * as if they were bound: the answer for the second of two shares equals
 * the answer for it alone where the first is bound where the dry run put
 * it. fragment keeps each node's waste between scans; a node with the
 * dry run's earlier pods on it is not that node, and must neither read
 * nor write what was kept for it. */
Test(placement, earlier_pods_score_as_if_bound)
{
    model_registry reg;
    model_registry_init(&reg);
    fx_res(&reg, reg.gpu_name);
    score_policy *pol = NULL;
    cr_assert_eq(score_policy_new_strategy(&reg, SCORE_FRAGMENT, &pol), AS_OK);
    model_pod *seen[3] = {fx_pod("a", "a", 2000, 4 * FX_GI), fx_pod("b", "b", 4000, 8 * FX_GI),
                          fx_pod("c", "c", 8000, 16 * FX_GI)};
    fx_pod_gpu(&reg, seen[0], 1, 300);
    fx_pod_gpu(&reg, seen[1], 1, 500);
    fx_pod_gpu(&reg, seen[2], 1, 0);
    for (int i = 0; i < 30; i++)
        score_observe_pod(pol, seen[i % 3]);
    /* the first share goes to the first node */
    static const rpod shares[2] = {{2000, 1, 300, NULL}, {2000, 1, 300, NULL}};
    static const rnode plain[3] = {{2, 32000, NULL}, {2, 32000, NULL}, {2, 32000, NULL}};
    json_t *all = expect_as_if_bound(&reg, pol, plain, 3, shares, 2, "two shares");
    cr_assert_str_eq(first_node(all), "n00");
    json_decref(all);
    for (int i = 0; i < 3; i++)
        model_pod_free(seen[i]);
    score_policy_unref(pol);
    model_registry_destroy(&reg);
}

/* The same with pinned GPU models: a pod pinned to T4 (a quarter of the
 * devices, asked for by 3/8 of the demand) takes a T4 device, and the
 * share after it weighs T4 with the cluster's and T4's free capacity as
 * they are once the first pod is bound (modelPressure reads both). */
Test(placement, earlier_pods_take_their_models_capacity)
{
    model_registry reg;
    model_registry_init(&reg);
    fx_res(&reg, reg.gpu_name);
    score_policy *pol = NULL;
    cr_assert_eq(score_policy_new_strategy(&reg, SCORE_FRAGMENT, &pol), AS_OK);
    model_pod *any = fx_pod("a", "a", 2000, 4 * FX_GI), *pin = fx_pod("t", "t", 2000, 4 * FX_GI);
    fx_pod_gpu(&reg, any, 1, 0);
    fx_pod_gpu(&reg, pin, 1, 0);
    fx_pod_selector(pin, "agentsched.io/gpu-model", "T4");
    for (int i = 0; i < 128; i++)
        score_observe_pod(pol, i % 8 < 3 ? pin : any);
    static const rpod two[2] = {{2000, 1, 0, "T4"}, {2000, 1, 300, NULL}};
    static const rnode models[4] = {
        {2, 32000, "T4"}, {2, 32000, "G2"}, {2, 32000, "G2"}, {2, 32000, "G2"}};
    json_t *all = expect_as_if_bound(&reg, pol, models, 4, two, 2, "pinned, then a share");
    cr_assert_str_eq(first_node(all), "n00");
    json_decref(all);
    model_pod_free(any);
    model_pod_free(pin);
    score_policy_unref(pol);
    model_registry_destroy(&reg);
}

/* Random clusters, learned mixes and pod lists (seeded): every pod of a dry
 * run is answered as the dry run of that pod alone answers once the pods
 * before it are bound where the run placed them (shares, whole GPUs,
 * pinned models, keepFree's counts and keepFreeFragmented's free milli,
 * the memo of each node's waste). */
Test(placement, random_runs_answer_as_if_bound)
{
    model_registry reg;
    model_registry_init(&reg);
    fx_res(&reg, reg.gpu_name);
    enum { NPODS = 6 };
    for (uint64_t seed = 1; seed <= 40; seed++) {
        uint64_t s = seed * 0x9E3779B97F4A7C15ull;
        rnode nodes[12];
        size_t nn = 6 + fx_rnd(&s, 7);
        static const uint32_t gpus[5] = {0, 1, 2, 4, 8};
        for (size_t i = 0; i < nn; i++)
            nodes[i] = (rnode){gpus[fx_rnd(&s, 5)], 8000 << fx_rnd(&s, 4), rmodels[fx_rnd(&s, 3)]};
        static const char *const yaml[3] = {
            "strategy: fragment\n", "strategy: fragment\nfragment:\n  keepFree: 0.5\n",
            "strategy: fragment\nfragment:\n  keepFree: 0.1\n  keepFreeFragmented: 0.6\n"};
        score_policy *pol = fx_policy(&reg, yaml[seed % 3]);
        for (int i = 0; i < 128; i++) {
            rpod r = rpod_draw(&s);
            model_pod *p = rpod_new(&reg, &r, 1000 + i, NULL);
            score_observe_pod(pol, p);
            model_pod_free(p);
        }
        rpod shapes[NPODS];
        for (int i = 0; i < NPODS; i++)
            shapes[i] = rpod_draw(&s);
        char what[32];
        snprintf(what, sizeof what, "seed %llu", (unsigned long long)seed);
        json_decref(expect_as_if_bound(&reg, pol, nodes, nn, shapes, NPODS, what));
        score_policy_unref(pol);
    }
    model_registry_destroy(&reg);
}

Test(placement, table_printer)
{
    json_t *r =
        json_loads("{\"placements\": ["
                   "{\"pod\": \"default/a\", \"node\": \"node-c\", \"gpuDevices\": [0, 2], "
                   "\"candidates\": [{\"node\": \"node-c\", "
                   "\"score\": 75}, {\"node\": \"node-a\", \"score\": 18.75}], \"reasons\": "
                   "{\"node(s) were unschedulable\": 1}},"
                   "{\"pod\": \"default/b\", \"node\": null, \"candidates\": [], \"reasons\": "
                   "{\"Insufficient cpu\": 3, \"node(s) were unschedulable\": 1}}]}",
                   0, NULL);
    cr_assert_not_null(r);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    cr_assert_eq(placement_print_table(r, f), AS_OK);
    fclose(f);
    cr_expect(strncmp(text, "POD ", 4) == 0, "%s", text);
    cr_expect(strstr(text, "NODE") && strstr(text, "SCORE") && strstr(text, "CANDIDATES") &&
                  strstr(text, "REASONS"),
              "%s", text);
    cr_expect(strstr(text, "node-c(75),node-a(18.75)"), "%s", text);
    cr_expect(strstr(text, "node-c gpu:0,2 "), "%s", text);
    cr_expect(strstr(text, "<none>"), "%s", text);
    cr_expect(strstr(text, "3 Insufficient cpu, 1 node(s) were unschedulable"), "%s", text);
    free(text);
    json_decref(r);

    json_t *bad = json_loads("{\"placements\": [{\"pod\": 1}]}", 0, NULL);
    f = open_memstream(&text, &len);
    cr_expect_eq(placement_print_table(bad, f), AS_EINVAL);
    fclose(f);
    free(text);
    json_decref(bad);
}

Test(placement, route_table)
{
    size_t n = 0;
    cr_expect_str_eq(PLACEMENT_PATH, "/v1/placements");
    /* The service serves it. */
    svc *s = new_svc();
    const http_route *all = svc_routes(s, &n);
    bool found = false;
    for (size_t i = 0; i < n; i++)
        found |= strcmp(all[i].path, PLACEMENT_PATH) == 0 && strcmp(all[i].method, "POST") == 0 &&
                 all[i].fn == placement_handle;
    cr_expect(found, "svc_routes lacks POST " PLACEMENT_PATH);
    svc_free(s);
}

typedef struct churn_arg {
    svc *s;
    int stop;
    int bad;
} churn_arg;

static void *churn_writer(void *p)
{
    churn_arg *x = p;
    json_t *j = json_loads("{\"metadata\": {\"name\": \"churn\", \"namespace\": \"t\", \"uid\": "
                           "\"uid-churn\"}, \"spec\": {\"nodeName\": \"node-b\", \"containers\": "
                           "[{\"name\": \"c\", \"resources\": {\"requests\": {\"cpu\": \"3\"}}}]}, "
                           "\"status\": {\"phase\": \"Running\"}}",
                           0, NULL);
    model_pod *pod = NULL;
    as_diag d = {{0}, {0}};
    cr_assert_eq(model_pod_from_json(&x->s->core->reg, j, &pod, &d), AS_OK, "%s", d.msg);
    while (!__atomic_load_n(&x->stop, __ATOMIC_ACQUIRE)) {
        cache_pod_upsert(x->s->core->cache, pod);
        cache_pod_delete(x->s->core->cache, "uid-churn");
    }
    model_pod_free(pod);
    json_decref(j);
    return NULL;
}

static void *churn_reader(void *p)
{
    churn_arg *x = p;
    for (int i = 0; i < 30; i++) {
        answer a = call_str(x->s, fill_req);
        json_t *r = json_loadb(a.body, a.len, 0, NULL);
        if (a.status != 200 || json_array_size(json_object_get(r, "placements")) != 4)
            __atomic_add_fetch(&x->bad, 1, __ATOMIC_RELAXED);
        json_decref(r);
        free(a.body);
    }
    return NULL;
}

/* Placements read live usage while the cache changes underneath (TSan). */
Test(placement, concurrent_with_cache_writes)
{
    svc *s = new_svc();
    churn_arg x = {.s = s};
    pthread_t w, r[2];
    cr_assert_eq(pthread_create(&w, NULL, churn_writer, &x), 0);
    for (int i = 0; i < 2; i++)
        cr_assert_eq(pthread_create(&r[i], NULL, churn_reader, &x), 0);
    for (int i = 0; i < 2; i++)
        pthread_join(r[i], NULL);
    __atomic_store_n(&x.stop, 1, __ATOMIC_RELEASE);
    pthread_join(w, NULL);
    cr_assert_eq(x.bad, 0);
    as_diag d = {{0}, {0}};
    cr_assert_eq(cache_check_invariants(s->core->cache, &d), AS_OK, "%s", d.msg);
    svc_free(s);
}
