/* test_shard_status.c - the NodeShard writes on the wire (a fake API
 * server on http.h): the coordinator's status merge patch, the
 * controller's nodesDesired patch falling back to create, and errors. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <pthread.h>
#include <string.h>

#include "agentsched/base/http.h"
#include "agentsched/k8s/k8s.h"
#include "agentsched/k8s/shard_status.h"
#include "agentsched/shard/shard.h"

#define API "/apis/shard.volcano.sh/v1alpha1/nodeshards"

typedef struct fake {
    pthread_mutex_t mu;
    char last_method[16], last_path[256];
    json_t *last_body;
    int calls;
} fake;

static fake F;

static void record(const http_request *req)
{
    pthread_mutex_lock(&F.mu);
    snprintf(F.last_method, sizeof F.last_method, "%s", req->method);
    snprintf(F.last_path, sizeof F.last_path, "%s", req->path);
    json_decref(F.last_body);
    F.last_body = json_loads(req->body, 0, NULL);
    F.calls++;
    pthread_mutex_unlock(&F.mu);
}

static void ok200(void *ctx, const http_request *req, http_response *resp)
{
    (void)ctx;
    record(req);
    buf_puts(&resp->body, "{}");
}

static void created(void *ctx, const http_request *req, http_response *resp)
{
    (void)ctx;
    record(req);
    resp->status = 201;
    buf_puts(&resp->body, "{}");
}

static void notfound(void *ctx, const http_request *req, http_response *resp)
{
    (void)ctx;
    record(req);
    resp->status = 404;
    buf_puts(&resp->body, "{\"kind\":\"Status\",\"code\":404}");
}

static void forbidden(void *ctx, const http_request *req, http_response *resp)
{
    (void)ctx;
    record(req);
    resp->status = 403;
    buf_puts(&resp->body, "{\"kind\":\"Status\",\"code\":403}");
}

static const http_route routes[] = {
    {"PATCH", API "/agent/status", ok200, false, NULL, false, false},
    {"PATCH", API "/agent", ok200, false, NULL, false, false},
    {"PATCH", API "/fresh", notfound, false, NULL, false, false},
    {"POST", API, created, false, NULL, false, false},
    {"PATCH", API "/denied/status", forbidden, false, NULL, false, false},
};

static http_server *srv;
static model_registry reg;
static cache *c;
static k8s_client *k;

static void setup(void)
{
    memset(&F, 0, sizeof F);
    pthread_mutex_init(&F.mu, NULL);
    http_server_config hc = {.listen = "127.0.0.1:0",
                             .threads = 2,
                             .routes = routes,
                             .nroutes = sizeof routes / sizeof routes[0]};
    as_diag d = {0};
    cr_assert_eq(http_server_start(&hc, &srv, &d), AS_OK, "%s", d.msg);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%u", (unsigned)http_server_port(srv));
    model_registry_init(&reg);
    cr_assert_eq(cache_new(&reg, &c), AS_OK);
    k8s_conn conn = {0};
    conn.server = url;
    k8s_config cfg;
    k8s_config_defaults(&cfg);
    cfg.conn = &conn;
    cfg.watch_shards = false;
    cr_assert_eq(k8s_client_new(&cfg, c, &k, &d), AS_OK, "%s", d.msg);
}

static void teardown(void)
{
    k8s_client_free(k);
    http_server_stop(srv);
    cache_free(c);
    model_registry_destroy(&reg);
    json_decref(F.last_body);
    pthread_mutex_destroy(&F.mu);
}

TestSuite(shard_status, .init = setup, .fini = teardown);

static char *names[] = {"n1", "n2"};
static char *none[] = {NULL};

Test(shard_status, coordinator_publishes_a_status_merge_patch)
{
    shard_view v = {0};
    v.usable.v = names;
    v.usable.n = 2;
    v.to_add.v = names + 1;
    v.to_add.n = 1;
    v.to_remove.v = none;
    as_diag d = {0};
    cr_assert_eq(shard_publish_k8s(k, "agent", &v, &d), AS_OK, "%s", d.msg);
    cr_assert_str_eq(F.last_method, "PATCH");
    cr_assert_str_eq(F.last_path, API "/agent/status");
    json_t *st = json_object_get(F.last_body, "status");
    cr_assert(json_is_object(st));
    cr_assert_eq(json_array_size(json_object_get(st, "nodesInUse")), 2);
    cr_assert_str_eq(json_string_value(json_array_get(json_object_get(st, "nodesToAdd"), 0)), "n2");
    cr_assert(json_is_array(json_object_get(st, "nodesToRemove")));
    const char *ts = json_string_value(json_object_get(st, "lastUpdateTime"));
    cr_assert(ts && strlen(ts) == 20 && ts[19] == 'Z', "%s", ts ? ts : "(null)");
    cr_assert_null(json_object_get(F.last_body, "spec"), "a status patch touches only status");
}

Test(shard_status, errors_are_explained)
{
    json_t *st = json_object();
    as_diag d = {0};
    cr_assert_eq(k8s_shard_patch_status(k, "denied", st, &d), AS_EAUTH);
    cr_assert(strstr(d.msg, "nodeshards/status"), "%s", d.msg);
    cr_assert_eq(k8s_shard_patch_status(k, "Bad_Name", st, &d), AS_EINVAL);
    cr_assert_eq(k8s_shard_patch_status(k, "absent", st, &d), AS_ENOTFOUND);
    json_decref(st);
}

Test(shard_status, desired_patches_or_creates)
{
    as_diag d = {0};
    const char *nodes[] = {"a", "b", "c"};
    cr_assert_eq(k8s_shard_put_desired(k, "agent", nodes, 3, &d), AS_OK, "%s", d.msg);
    cr_assert_str_eq(F.last_method, "PATCH");
    json_t *nd = json_object_get(json_object_get(F.last_body, "spec"), "nodesDesired");
    cr_assert_eq(json_array_size(nd), 3);

    cr_assert_eq(k8s_shard_put_desired(k, "fresh", nodes, 1, &d), AS_OK, "%s", d.msg);
    cr_assert_str_eq(F.last_method, "POST");
    cr_assert_str_eq(F.last_path, API);
    cr_assert_str_eq(json_string_value(json_object_get(F.last_body, "kind")), "NodeShard");
    cr_assert_str_eq(
        json_string_value(json_object_get(json_object_get(F.last_body, "metadata"), "name")),
        "fresh");
    cr_assert_eq(
        json_array_size(json_object_get(json_object_get(F.last_body, "spec"), "nodesDesired")), 1);
    cr_assert_eq(F.calls, 3);
}
