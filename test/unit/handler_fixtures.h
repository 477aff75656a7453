/*
 * handler_fixtures.h - shared helpers for tests that drive HTTP handlers
 * directly (extender, Volcano): a service over a cluster file, a call that
 * runs a handler the way the HTTP server does, and a JSON matcher for
 * request.json -> expected.json fixtures. Included by one test file each
 * (everything static).
 */
#ifndef AGENTSCHED_TEST_HANDLER_FIXTURES_H
#define AGENTSCHED_TEST_HANDLER_FIXTURES_H

#include <criterion/criterion.h>
#include <dirent.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agentsched/core/cache.h"
#include "agentsched/core/score.h"
#include "agentsched/model/pod.h"
#include "agentsched/base/doc.h"
#include "agentsched/base/http.h"
#include "agentsched/base/log.h"
#include "agentsched/serve/svc.h"

/* new_svc_names builds a service (quiet logs) over the cluster file whose
 * extender and Volcano verbs serve the given schedulerNames (NULL = the
 * server's defaults). */
static svc *new_svc_names(const char *cluster_path, const char *extender_names,
                          const char *volcano_names)
{
    svc_config cfg;
    svc_config_defaults(&cfg);
    cfg.extender_scheduler_names = extender_names;
    cfg.volcano_scheduler_names = volcano_names;
    cfg.log_level = 0;
    log_set_level(LOG_ERROR);
    svc *s = NULL;
    as_diag d = {{0}, {0}};
    cr_assert_eq(svc_new(&cfg, &s, &d), AS_OK, "svc_new: %s", d.msg);
    cr_assert_eq(svc_load_cluster(s, cluster_path, &d), AS_OK, "load: %s: %s", d.field, d.msg);
    return s;
}

/* new_svc_from builds a service over the cluster file that also serves the
 * fixtures' pods without a schedulerName (default-scheduler). */
static svc *new_svc_from(const char *cluster_path)
{
    return new_svc_names(cluster_path, "agent-scheduler,default-scheduler", NULL);
}

typedef struct reply {
    int status;
    char *raw;
    json_t *json;
} reply;

/* teach_gpu_pods gives s the default policy after it saw n one-GPU pods
 * of 4 cores and 8Gi, as the fast path shows them: fragment's learned
 * tables then say 4 cores and 8Gi per GPU, all pods asking for GPUs. */
__attribute__((unused)) static void teach_gpu_pods(svc *s, int n)
{
    score_policy *p = NULL;
    cr_assert_eq(score_policy_new_default(&s->core->reg, &p), AS_OK);
    json_t *j =
        json_loads("{\"metadata\":{\"name\":\"g\",\"namespace\":\"default\",\"uid\":\"g\"},"
                   "\"spec\":{\"containers\":[{\"name\":\"c\",\"resources\":{"
                   "\"requests\":{\"cpu\":\"4\",\"memory\":\"8Gi\",\"nvidia.com/gpu\":\"1\"},"
                   "\"limits\":{\"nvidia.com/gpu\":\"1\"}}}]}}",
                   0, NULL);
    cr_assert(j);
    model_pod *g = NULL;
    as_diag d = {{0}, {0}};
    cr_assert_eq(model_pod_from_json(&s->core->reg, j, &g, &d), AS_OK, "%s", d.msg);
    cr_assert_eq(g->gpu_count, 1);
    for (int k = 0; k < n; k++)
        score_observe_pod(p, g);
    model_pod_free(g);
    json_decref(j);
    core_policy_set(s->core, p);
}

static void reply_free(reply *r)
{
    free(r->raw);
    json_decref(r->json);
    memset(r, 0, sizeof *r);
}

/* call_n runs one handler the way the HTTP server does: NUL-terminated body
 * copy, a fresh request pool, an empty response. The answer must be JSON. */
static reply call_n(svc *s, http_handler_fn fn, const char *body, size_t len)
{
    char *copy = malloc(len + 1);
    memcpy(copy, body, len);
    copy[len] = '\0';
    http_request req = {.method = "POST",
                        .path = "/",
                        .body = copy,
                        .body_len = len,
                        .pool = pool_new((size_t)64 << 20)};
    http_response resp = {.status = 200, .content_type = "application/json"};
    buf_init(&resp.body, (size_t)64 << 20);
    fn(svc_handler_ctx(s, fn), &req, &resp);
    reply r;
    r.status = resp.status ? resp.status : 200;
    r.raw = strdup(resp.body.data ? resp.body.data : "");
    json_error_t je;
    r.json = json_loads(r.raw, JSON_DECODE_ANY, &je);
    cr_assert(r.json, "response is not JSON (%s): %.300s", je.text, r.raw);
    buf_free(&resp.body);
    pool_free(req.pool);
    free(copy);
    return r;
}

static reply call(svc *s, http_handler_fn fn, const char *body)
{
    return call_n(s, fn, body, strlen(body));
}

/*
 * json_match compares got against want, where the string "*" in want
 * matches any value and objects must have the same keys. With
 * numbers_by_value an integer and a real of equal value match (Volcano's
 * float scores); otherwise JSON types must be equal. where receives the
 * path of the first difference.
 */
static bool json_match(const json_t *want, const json_t *got, bool numbers_by_value, char *where,
                       size_t len)
{
    if (json_is_string(want) && strcmp(json_string_value(want), "*") == 0)
        return got != NULL;
    if (!got || json_typeof(want) != json_typeof(got)) {
        if (numbers_by_value && got && json_is_number(want) && json_is_number(got))
            return json_number_value(want) == json_number_value(got);
        snprintf(where, len, "type differs");
        return false;
    }
    if (json_is_object(want)) {
        if (json_object_size(want) != json_object_size(got)) {
            snprintf(where, len, "object sizes differ");
            return false;
        }
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)want, k, v)
        {
            if (!json_match(v, json_object_get(got, k), numbers_by_value, where, len)) {
                size_t n = strlen(where);
                snprintf(where + n, len - n, " <- %s", k);
                return false;
            }
        }
        return true;
    }
    if (json_is_array(want)) {
        if (json_array_size(want) != json_array_size(got)) {
            snprintf(where, len, "array sizes differ");
            return false;
        }
        for (size_t i = 0; i < json_array_size(want); i++)
            if (!json_match(json_array_get(want, i), json_array_get(got, i), numbers_by_value,
                            where, len)) {
                size_t n = strlen(where);
                snprintf(where + n, len - n, " <- [%zu]", i);
                return false;
            }
        return true;
    }
    return json_equal(want, got);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/*
 * run_handler_fixtures runs every fixture directory under data/verb:
 * request.json through fn on a fresh service over data/cluster.yaml; the
 * answer must match expected.json (json_match) with the status in the
 * optional file `status` (default 200); a non-200 answer must say why in
 * "error"; the cache's invariants must hold afterwards. Returns how many
 * fixtures ran.
 */
static size_t run_handler_fixtures(const char *data, const char *verb, http_handler_fn fn,
                                   bool numbers_by_value)
{
    char dir[512];
    snprintf(dir, sizeof dir, "%s/%s", data, verb);
    DIR *dp = opendir(dir);
    cr_assert(dp, "no fixture dir %s", dir);
    char *names[256];
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir(dp)) && n < 256)
        if (de->d_name[0] != '.')
            names[n++] = strdup(de->d_name);
    closedir(dp);
    qsort(names, n, sizeof names[0], cmp_str);
    for (size_t i = 0; i < n; i++) {
        char path[1024];
        as_diag d = {{0}, {0}};
        char *body = NULL;
        size_t len = 0;
        snprintf(path, sizeof path, "%s/%s/request.json", dir, names[i]);
        cr_assert_eq(doc_read_file(path, 0, &body, &len, &d), AS_OK, "%s: %s", path, d.msg);
        snprintf(path, sizeof path, "%s/%s/expected.json", dir, names[i]);
        json_error_t je;
        json_t *want = json_load_file(path, JSON_DECODE_ANY, &je);
        cr_assert(want, "%s: %s", path, je.text);
        int want_status = 200;
        snprintf(path, sizeof path, "%s/%s/status", dir, names[i]);
        FILE *f = fopen(path, "r");
        if (f) {
            cr_assert_eq(fscanf(f, "%d", &want_status), 1);
            fclose(f);
        }
        char cluster[1024];
        snprintf(cluster, sizeof cluster, "%s/cluster.yaml", data);
        svc *s = new_svc_from(cluster);
        reply r = call_n(s, fn, body, len);
        char where[512] = "";
        cr_expect_eq(r.status, want_status, "%s/%s: status %d, body %.400s", verb, names[i],
                     r.status, r.raw);
        cr_expect(json_match(want, r.json, numbers_by_value, where, sizeof where),
                  "%s/%s: mismatch (%s)\n got: %s", verb, names[i], where, r.raw);
        /* a refusal or an error always says why */
        const json_t *em = json_object_get(r.json, "error");
        if (want_status != 200)
            cr_expect(json_is_string(em) && json_string_length(em) > 0, "%s/%s: no error text",
                      verb, names[i]);
        as_diag inv = {{0}, {0}};
        cr_expect_eq(cache_check_invariants(s->core->cache, &inv), AS_OK, "%s/%s: %s", verb,
                     names[i], inv.msg);
        reply_free(&r);
        svc_free(s);
        json_decref(want);
        free(body);
        free(names[i]);
    }
    return n;
}

#endif
