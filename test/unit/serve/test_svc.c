/* test_svc.c - service context: defaults, construction and load errors,
 * core endpoints, route table, policy swap. */
#include <criterion/criterion.h>
#include <curl/curl.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "agentsched/base/log.h"
#include "agentsched/base/clock.h"
#include "agentsched/serve/svc.h"

#define DATA TEST_DATA_DIR "/svc/"

static void quiet(void)
{
    log_set_level(LOG_ERROR);
}

TestSuite(svc, .init = quiet);

static svc *new_svc(const char *policy)
{
    svc_config cfg;
    svc_config_defaults(&cfg);
    cfg.policy_path = policy;
    svc *s = NULL;
    as_diag d = {0};
    cr_assert_eq(svc_new(&cfg, &s, &d), AS_OK, "%s", d.msg);
    return s;
}

/* Runs the handler routed at (method, path) directly. */
static http_response call(svc *s, const char *method, const char *path)
{
    size_t n = 0;
    const http_route *r = svc_routes(s, &n);
    http_response resp = {.status = 200, .content_type = "application/json"};
    buf_init(&resp.body, 0);
    for (size_t i = 0; i < n; i++) {
        if (strcmp(r[i].method, method) == 0 && strcmp(r[i].path, path) == 0) {
            pool *p = pool_new(0);
            http_request req = {.method = method, .path = path, .body = "", .pool = p};
            r[i].fn(r[i].ctx, &req, &resp);
            pool_free(p);
            return resp;
        }
    }
    cr_assert_fail("no route %s %s", method, path);
    return resp;
}

Test(svc, config_defaults)
{
    svc_config c;
    memset(&c, 0x5a, sizeof c);
    svc_config_defaults(&c);
    cr_assert_str_eq(c.listen, "127.0.0.1:8888");
    cr_assert_str_eq(c.scheduler_name, "agent-scheduler");
    cr_assert_null(c.shard_name);
    cr_assert_null(c.cluster_path);
    cr_assert_null(c.kubeconfig);
    cr_assert_null(c.policy_path);
    cr_assert_not(c.in_cluster);
    cr_assert_eq(c.shard_mode, CACHE_SHARD_NONE);
    cr_assert_eq(c.http_threads, 0);
    cr_assert_eq(c.max_body, (size_t)16 << 20);
    cr_assert_eq(c.workers, 2);
    cr_assert_eq(c.candidates, 3);
    cr_assert_eq(c.log_level, LOG_INFO);
    cr_assert_gt(c.kube_api_qps, 0);
    cr_assert_gt(c.kube_api_burst, 0);
    cr_assert_gt(c.watch_down_ms, 0);
}

Test(svc, new_copies_config_strings_and_defaults_shard_name)
{
    char listen[] = "127.0.0.1:0";
    char name[] = "my-sched";
    svc_config cfg;
    svc_config_defaults(&cfg);
    cfg.listen = listen;
    cfg.scheduler_name = name;
    cfg.shard_mode = CACHE_SHARD_HARD;
    svc *s = NULL;
    as_diag d = {0};
    cr_assert_eq(svc_new(&cfg, &s, &d), AS_OK, "%s", d.msg);
    memset(listen, 'x', sizeof listen - 1);
    memset(name, 'y', sizeof name - 1);
    cr_assert_str_eq(s->cfg.listen, "127.0.0.1:0");
    cr_assert_str_eq(s->cfg.scheduler_name, "my-sched");
    /* Not the scheduler name: agentsched's own default NodeShard. */
    cr_assert_str_eq(s->cfg.shard_name, "agentsched");
    cr_assert_eq(cache_get_shard_mode(s->core->cache), CACHE_SHARD_HARD);
    cr_assert_not_null(s->core->binder);
    cr_assert_not_null(s->core->metrics);
    cr_assert_not_null(s->core->m.requests_total);
    cr_assert_not_null(s->core->m.filter_seconds);
    cr_assert_not_null(s->core->m.bind_conflicts);
    cr_assert_eq(s->core->ready, 0);
    cr_assert_gt(s->core->started_ms, 0);
    svc_free(s);
    svc_free(NULL);
}

Test(svc, bad_policy_file_fails_naming_the_file)
{
    svc_config cfg;
    svc_config_defaults(&cfg);
    cfg.policy_path = DATA "no-such-policy.yaml";
    svc *s = NULL;
    as_diag d = {0};
    cr_assert_neq(svc_new(&cfg, &s, &d), AS_OK);
    cr_assert_null(s);
    cr_assert_not_null(strstr(d.msg, "no-such-policy.yaml"), "%s", d.msg);
    memset(&d, 0, sizeof d);
    cfg.policy_path = DATA "bad-policy.yaml";
    cr_assert_neq(svc_new(&cfg, &s, &d), AS_OK);
    cr_assert_null(s);
    cr_assert_neq(d.msg[0], '\0');
}

Test(svc, load_cluster_ok_marks_ready)
{
    svc *s = new_svc(NULL);
    as_diag d = {0};
    cr_assert_eq(svc_load_cluster(s, DATA "cluster.json", &d), AS_OK, "%s", d.msg);
    cr_assert_eq(s->core->ready, 1);
    cache_stats cs;
    cache_get_stats(s->core->cache, &cs);
    cr_assert_eq(cs.nodes, 2);
    cr_assert_eq(cs.pods_bound, 1);
    svc_free(s);
}

Test(svc, load_cluster_missing_file)
{
    svc *s = new_svc(NULL);
    as_diag d = {0};
    as_err e = svc_load_cluster(s, DATA "does-not-exist.yaml", &d);
    cr_assert_eq(e, AS_EIO, "%d", e);
    cr_assert_not_null(strstr(d.msg, "does-not-exist.yaml"), "%s", d.msg);
    cr_assert_eq(s->core->ready, 0);
    svc_free(s);
}

Test(svc, load_cluster_malformed_yaml)
{
    svc *s = new_svc(NULL);
    as_diag d = {0};
    as_err e = svc_load_cluster(s, DATA "malformed.yaml", &d);
    cr_assert_eq(e, AS_EPARSE, "%d %s", e, d.msg);
    cr_assert_not_null(strstr(d.msg, "malformed.yaml"), "%s", d.msg);
    cr_assert_eq(s->core->ready, 0);
    svc_free(s);
}

Test(svc, load_cluster_bad_quantity_names_field)
{
    svc *s = new_svc(NULL);
    as_diag d = {0};
    as_err e = svc_load_cluster(s, DATA "bad-quantity.yaml", &d);
    cr_assert_neq(e, AS_OK);
    cr_assert_not_null(strstr(d.field, "status.allocatable.cpu"), "field=%s msg=%s", d.field,
                       d.msg);
    cr_assert_not_null(strstr(d.msg, "bad-quantity.yaml"), "%s", d.msg);
    cr_assert_eq(s->core->ready, 0);
    svc_free(s);
}

Test(svc, route_table_has_core_routes_once)
{
    svc *s = new_svc(NULL);
    size_t n = 0;
    const http_route *r = svc_routes(s, &n);
    cr_assert_geq(n, 4);
    static const char *core[] = {"/healthz", "/readyz", "/version", "/metrics"};
    for (size_t k = 0; k < 4; k++) {
        int found = 0;
        for (size_t i = 0; i < n; i++)
            if (strcmp(r[i].path, core[k]) == 0 && strcmp(r[i].method, "GET") == 0)
                found++;
        cr_assert_eq(found, 1, "%s", core[k]);
    }
    for (size_t i = 0; i < n; i++) {
        cr_assert_not_null(r[i].fn);
        cr_assert_eq(r[i].path[0], '/');
        cr_assert(strcmp(r[i].method, "GET") == 0 || strcmp(r[i].method, "POST") == 0 ||
                  strcmp(r[i].method, "PUT") == 0 || strcmp(r[i].method, "DELETE") == 0);
        for (size_t j = i + 1; j < n; j++)
            cr_assert(strcmp(r[i].path, r[j].path) != 0 || strcmp(r[i].method, r[j].method) != 0,
                      "duplicate route %s %s", r[i].method, r[i].path);
    }
    svc_free(s);
}

Test(svc, healthz_readyz_version)
{
    svc *s = new_svc(NULL);
    http_response h = call(s, "GET", "/healthz");
    cr_assert_eq(h.status, 200);
    cr_assert_str_eq(h.body.data, "ok\n");
    buf_free(&h.body);

    http_response r = call(s, "GET", "/readyz");
    cr_assert_eq(r.status, 503);
    json_t *j = json_loads(r.body.data, 0, NULL);
    cr_assert_not_null(j, "%s", r.body.data);
    cr_assert(json_is_string(json_object_get(j, "error")));
    json_decref(j);
    buf_free(&r.body);

    as_diag d = {0};
    cr_assert_eq(svc_load_cluster(s, DATA "cluster.json", &d), AS_OK, "%s", d.msg);
    r = call(s, "GET", "/readyz");
    cr_assert_eq(r.status, 200);
    buf_free(&r.body);

    http_response v = call(s, "GET", "/version");
    cr_assert_eq(v.status, 200);
    j = json_loads(v.body.data, 0, NULL);
    cr_assert_not_null(j, "%s", v.body.data);
    cr_assert_str_eq(json_string_value(json_object_get(j, "version")), AGENTSCHED_VERSION);
    cr_assert(json_is_string(json_object_get(j, "commit")));
    cr_assert(json_is_string(json_object_get(j, "build")));
    json_decref(j);
    buf_free(&v.body);
    svc_free(s);
}

/* The device gauges come per GPU model too, the model label escaped. */
Test(svc, metrics_endpoint_counts_devices_per_model)
{
    svc *s = new_svc(NULL);
    as_diag d = {0};
    cr_assert_eq(svc_load_cluster(s, DATA "gpu-models.yaml", &d), AS_OK, "%s", d.msg);
    http_response m = call(s, "GET", "/metrics");
    cr_assert_eq(m.status, 200);
    const char *t = m.body.data;
    cr_assert_not_null(strstr(t, "agentsched_cache_gpu_devices{state=\"all\"} 6\n"), "%s", t);
    cr_assert_not_null(strstr(t, "agentsched_cache_gpu_devices{state=\"free\"} 5\n"), "%s", t);
    cr_assert_not_null(
        strstr(t, "agentsched_cache_gpu_model_devices{model=\"A100\",state=\"all\"} 4\n"), "%s", t);
    cr_assert_not_null(
        strstr(t, "agentsched_cache_gpu_model_devices{model=\"A100\",state=\"free\"} 3\n"), "%s",
        t);
    cr_assert_not_null(strstr(t, "agentsched_cache_gpu_model_devices{model=\"odd\\\"model\\\\x\","
                                 "state=\"all\"} 2\n"),
                       "%s", t);
    cr_assert_not_null(strstr(t, "# TYPE agentsched_cache_gpu_model_devices gauge\n"), "%s", t);
    buf_free(&m.body);
    svc_free(s);
}

Test(svc, metrics_endpoint_reports_cache)
{
    svc *s = new_svc(NULL);
    as_diag d = {0};
    cr_assert_eq(svc_load_cluster(s, DATA "cluster.json", &d), AS_OK, "%s", d.msg);
    metrics_inc(s->core->m.binds_fast);
    metrics_observe(s->core->m.filter_seconds, 0.0003);
    http_response m = call(s, "GET", "/metrics");
    cr_assert_eq(m.status, 200);
    cr_assert_str_eq(m.content_type, "text/plain; version=0.0.4; charset=utf-8");
    const char *t = m.body.data;
    cr_assert_not_null(strstr(t, "\nagentsched_cache_nodes 2\n"), "%s", t);
    cr_assert_not_null(strstr(t, "agentsched_cache_pods{state=\"bound\"} 1\n"), "%s", t);
    cr_assert_not_null(strstr(t, "agentsched_cache_pods{state=\"assumed\"} 0\n"), "%s", t);
    cr_assert_not_null(strstr(t, "agentsched_cache_gpu_devices{state=\"all\"} 0\n"), "%s", t);
    cr_assert_not_null(strstr(t, "agentsched_cache_gpu_devices{state=\"free\"} 0\n"), "%s", t);
    cr_assert_not_null(strstr(t, "agentsched_policy_free_devices_short 0\n"), "%s", t);
    cr_assert_not_null(strstr(t, "agentsched_binds_total{result=\"fast\"} 1\n"), "%s", t);
    cr_assert_not_null(strstr(t, "agentsched_ready 1\n"), "%s", t);
    cr_assert_not_null(strstr(t, "agentsched_request_duration_seconds_count{verb=\"filter\"} 1\n"),
                       "%s", t);
    cr_assert_not_null(strstr(t, "# TYPE agentsched_request_duration_seconds histogram\n"));
    /* a second scrape does not duplicate series */
    buf_free(&m.body);
    m = call(s, "GET", "/metrics");
    const char *u = m.body.data;
    const char *first = strstr(u, "\nagentsched_cache_nodes ");
    cr_assert_not_null(first);
    cr_assert_null(strstr(first + 1, "\nagentsched_cache_nodes "));
    buf_free(&m.body);
    svc_free(s);
}

Test(svc, policy_get_set_and_reload_without_file)
{
    svc *s = new_svc(NULL);
    score_policy *p = core_policy_get(s->core);
    cr_assert_not_null(p);
    score_policy *q = NULL;
    cr_assert_eq(score_policy_new_strategy(&s->core->reg, SCORE_LEAST_ALLOCATED, &q), AS_OK);
    core_policy_set(s->core, q);
    score_policy *r = core_policy_get(s->core);
    cr_assert_eq(r, q);
    cr_assert_eq(score_policy_strategy(r), SCORE_LEAST_ALLOCATED);
    score_policy_unref(r);
    score_policy_unref(p); /* the old policy outlived the swap through our reference */
    as_diag d = {0};
    cr_assert_eq(svc_reload_policy(s, &d), AS_ENOTFOUND);
    cr_assert_not_null(strstr(d.msg, "--policy"));
    svc_free(s);
}

static size_t sink(char *p, size_t sz, size_t n, void *u)
{
    buf_append(u, p, sz * n);
    return sz * n;
}

/* GET url; returns the status (0 when no answer), the body in b. */
static long get(CURL *c, const char *url, buf *b)
{
    buf_reset(b);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sink);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, b);
    long st = 0;
    if (curl_easy_perform(c) == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &st);
    return st;
}

Test(svc, http_start_serves_core_routes_and_counts_requests)
{
    svc_config cfg;
    svc_config_defaults(&cfg);
    cfg.listen = "127.0.0.1:0";
    cfg.http_threads = 2;
    svc *s = NULL;
    as_diag d = {0};
    cr_assert_eq(svc_new(&cfg, &s, &d), AS_OK, "%s", d.msg);
    cr_assert_eq(svc_http_start(s, &d), AS_OK, "%s", d.msg);
    cr_assert_eq(svc_http_start(s, &d), AS_OK); /* idempotent */
    uint16_t port = http_server_port(s->http);
    cr_assert_neq(port, 0);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    CURL *c = curl_easy_init();
    static const struct {
        const char *path;
        long status;
    } cases[] = {
        {"/healthz", 200}, {"/readyz", 503}, {"/version", 200}, {"/metrics", 200}, {"/nope", 404}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char url[128];
        snprintf(url, sizeof url, "http://127.0.0.1:%u%s", port, cases[i].path);
        buf b;
        buf_init(&b, 0);
        cr_assert_eq(get(c, url, &b), cases[i].status, "%s", cases[i].path);
        buf_free(&b);
    }
    curl_easy_cleanup(c);
    curl_global_cleanup();
    http_response m = call(s, "GET", "/metrics");
    cr_assert_not_null(strstr(m.body.data, "agentsched_http_requests_total 5\n"), "%s",
                       m.body.data);
    cr_assert_not_null(strstr(m.body.data, "agentsched_http_request_errors_total 2\n"));
    buf_free(&m.body);
    svc_http_stop(s);
    svc_http_stop(s);
    svc_free(s);
}

/* The metrics listener serves the probes and /metrics alone; its /healthz
 * is the main listener's, asked over loopback, so it fails once the main
 * listener stops answering. */
Test(svc, metrics_listener_probes_the_main_listener)
{
    svc_config cfg;
    svc_config_defaults(&cfg);
    cfg.listen = "0.0.0.0:0";
    cfg.metrics_listen = "127.0.0.1:0";
    svc *s = NULL;
    as_diag d = {0};
    cr_assert_eq(svc_new(&cfg, &s, &d), AS_OK, "%s", d.msg);
    cr_assert_eq(svc_http_start(s, &d), AS_OK, "%s", d.msg);
    cr_assert_not_null(s->http_metrics);
    unsigned mport = http_server_port(s->http_metrics);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    CURL *c = curl_easy_init();
    buf b;
    buf_init(&b, 0);
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%u/healthz", mport);
    cr_assert_eq(get(c, url, &b), 200, "%s", b.data ? b.data : "");
    snprintf(url, sizeof url, "http://127.0.0.1:%u/metrics", mport);
    cr_assert_eq(get(c, url, &b), 200);
    cr_assert_not_null(strstr(b.data, "agentsched_http_requests_total"));
    snprintf(url, sizeof url, "http://127.0.0.1:%u/version", mport);
    cr_assert_eq(get(c, url, &b), 404);
    /* the main listener gone: the probe says so */
    http_server_stop(s->http);
    s->http = NULL;
    snprintf(url, sizeof url, "http://127.0.0.1:%u/healthz", mport);
    cr_assert_eq(get(c, url, &b), 503);
    cr_assert_not_null(strstr(b.data, "main listener"), "%s", b.data);
    buf_free(&b);
    curl_easy_cleanup(c);
    curl_global_cleanup();
    svc_free(s);
}

Test(svc, clocks)
{
    int64_t a = clock_now_ms();
    cr_assert_gt(a, 1600000000000LL);
    uint64_t x = clock_mono_ns(), y = clock_mono_ns();
    cr_assert_geq(y, x);
}
