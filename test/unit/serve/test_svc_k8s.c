/*
 * test_svc_k8s.c - the server wired to an API server (the stub): the API
 * client started on the core's cache, readiness after the first sync, the
 * bind port, the extender's verbs through it, and the client's metrics.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "agentsched/api/extender.h"
#include "agentsched/api/volcano.h"
#include "agentsched/base/clock.h"
#include "agentsched/base/log.h"
#include "agentsched/k8s/k8s.h"
#include "agentsched/model/gpuannot.h"
#include "agentsched/serve/svc.h"
#include "k8s_stub.c"

/* write_stub_kubeconfig creates dir (a mkdtemp template) and in it a
 * kubeconfig for the stub with the token "secret"; path receives its path. */
static void write_stub_kubeconfig(k8s_stub *stub, char *dir, char *path, size_t pathlen)
{
    cr_assert_not_null(mkdtemp(dir));
    snprintf(path, pathlen, "%s/kubeconfig", dir);
    cr_assert(stub_write_kubeconfig(stub, path));
}

/* run_verb runs an extender handler the way the server does; the body of
 * the answer goes to out. Returns the status. */
static int run_verb(svc *s, http_handler_fn fn, const char *body, char *out, size_t outlen)
{
    http_request req = {0};
    req.method = "POST";
    req.path = "/scheduler";
    req.body = body;
    req.body_len = strlen(body);
    req.pool = pool_new(0);
    req.remote = "192.0.2.1:4242";
    http_response resp = {0};
    resp.status = 200;
    buf_init(&resp.body, 1 << 16);
    fn(s->ext, &req, &resp);
    snprintf(out, outlen, "%s", resp.body.data ? resp.body.data : "");
    int st = resp.status ? resp.status : 200;
    buf_free(&resp.body);
    pool_free(req.pool);
    return st;
}

/* filter_body is the ExtenderArgs of a filter for pod over node n0. */
static char *filter_body(const json_t *pod)
{
    char *p = json_dumps(pod, JSON_COMPACT);
    size_t n = strlen(p) + 64;
    char *b = malloc(n);
    snprintf(b, n, "{\"Pod\":%s,\"NodeNames\":[\"n0\"]}", p);
    free(p);
    return b;
}

/* stub_pod_on: the stub's pod uid has spec.nodeName node. */
static bool stub_pod_on(k8s_stub *stub, const char *uid, const char *node)
{
    json_t *pods = stub_objects(stub, STUB_POD);
    size_t i;
    json_t *v;
    bool on = false;
    json_array_foreach(pods, i, v)
    {
        const char *nn = json_string_value(json_object_get(json_object_get(v, "spec"), "nodeName"));
        if (!strcmp(json_string_value(json_object_get(json_object_get(v, "metadata"), "uid")), uid))
            on = nn && !strcmp(nn, node);
    }
    json_decref(pods);
    return on;
}

Test(k8s_svc, start_ready_bind_stop)
{
    log_set_level(LOG_ERROR);
    k8s_stub *stub = stub_new();
    json_t *n = stub_make_node("n0", "4", "16Gi", 110);
    stub_put(stub, STUB_NODE, n);
    json_decref(n);
    json_t *p = stub_make_pod("default", "w", "uid-w", NULL, "1", "1Gi");
    stub_put(stub, STUB_POD, p);
    json_decref(p);
    char dir[] = "/tmp/agentsched-kcXXXXXX";
    char path[600];
    write_stub_kubeconfig(stub, dir, path, sizeof path);

    svc_config cfg;
    svc_config_defaults(&cfg);
    cfg.kubeconfig = path;
    cfg.watch_down_ms = 500;
    svc *s = NULL;
    as_diag d = {{0}, {0}};
    cr_assert_eq(svc_new(&cfg, &s, &d), AS_OK, "%s", d.msg);
    char why[256];
    const core_ports *ports = &s->core->ports;
    cr_assert_eq(ports->bind(ports->arg, "default", "w", "uid-w", "n0", &d), AS_EUNSUPPORTED);
    k8s_config kc;
    k8s_config_defaults(&kc);
    kc.kubeconfig = path;
    kc.watch_shards = false;
    cr_assert_eq(svc_k8s_start(s, &kc, &d), AS_OK, "%s", d.msg);
    cr_assert_not_null(s->k8s);
    cr_assert(k8s_wait_synced(s->k8s, 5000));
    cr_assert_eq(__atomic_load_n(&s->core->ready, __ATOMIC_ACQUIRE), 1);
    cr_assert(k8s_ready(s->k8s, clock_now_ms(), why, sizeof why), "%s", why);
    cr_assert_eq(ports->bind(ports->arg, "default", "w", "uid-w", "n0", &d), AS_OK, "%s", d.msg);
    stub_last_auth(stub, why, sizeof why);
    cr_assert_str_eq(why, "Bearer secret");
    /* Extender bind verb for a pod agentsched never filtered: refused
     * (403), nothing posted; after a filter the same bind goes through. */
    json_t *px = stub_make_pod("default", "x", "uid-x", NULL, "1", "1Gi");
    stub_put(stub, STUB_POD, px);
    const char *body =
        "{\"PodName\":\"x\",\"PodNamespace\":\"default\",\"PodUID\":\"uid-x\",\"Node\":\"n0\"}";
    int st = run_verb(s, extender_handle_bind, body, why, sizeof why);
    cr_assert_eq(st, 403, "%s", why);
    cr_assert(strstr(why, "did not filter"), "%s", why);
    cr_assert_not(stub_pod_on(stub, "uid-x", "n0"));
    char *fbody = filter_body(px);
    st = run_verb(s, extender_handle_filter, fbody, why, sizeof why);
    cr_assert_eq(st, 200, "%s", why);
    /* live mode: a PodUID is required, and must be the filtered pod's */
    st = run_verb(s, extender_handle_bind,
                  "{\"PodName\":\"x\",\"PodNamespace\":\"default\",\"Node\":\"n0\"}", why,
                  sizeof why);
    cr_assert_eq(st, 403, "%s", why);
    cr_assert(strstr(why, "PodUID is required"), "%s", why);
    st = run_verb(s, extender_handle_bind,
                  "{\"PodName\":\"w\",\"PodNamespace\":\"default\",\"PodUID\":\"uid-x\","
                  "\"Node\":\"n0\"}",
                  why, sizeof why);
    cr_assert_eq(st, 403, "%s", why);
    cr_assert(strstr(why, "belongs to pod default/x"), "%s", why);
    cr_assert_not(stub_pod_on(stub, "uid-x", "n0"));
    st = run_verb(s, extender_handle_bind, body, why, sizeof why);
    cr_assert_eq(st, 200, "%s", why);
    cr_assert_str_eq(why, "{\"Error\":\"\"}");
    cr_assert(stub_pod_on(stub, "uid-x", "n0"), "the extender bind reached the API server");
    free(fbody);
    json_decref(px);
    k8s_metrics_update(s->k8s, s->core->metrics);
    buf m;
    buf_init(&m, 1 << 20);
    cr_assert_eq(metrics_render(s->core->metrics, &m), AS_OK);
    cr_assert_not_null(strstr(m.data, "agentsched_k8s_binds_total{result=\"ok\"} 2\n"), "%s",
                       m.data);
    cr_assert_not_null(strstr(m.data, "agentsched_k8s_synced 1\n"), "%s", m.data);
    buf_free(&m);
    svc_free(s); /* stops the client before the cache goes */
    stub_free(stub);
    unlink(path);
    rmdir(dir);
}

/* Until the first sync, the extender's filter answers 503 (an extender
 * error kube-scheduler retries) rather than failing every node as "not
 * found" (which would park the pod as unschedulable). */
Test(k8s_svc, filter_waits_for_first_sync)
{
    log_set_level(LOG_ERROR);
    k8s_stub *stub = stub_new();
    json_t *n = stub_make_node("n0", "4", "16Gi", 110);
    stub_put(stub, STUB_NODE, n);
    json_decref(n);
    stub_fault(stub, "/api/v1/pods", STUB_LIST, STUB_F_SLOW, 1500);
    char dir[] = "/tmp/agentsched-kcXXXXXX";
    char path[600];
    write_stub_kubeconfig(stub, dir, path, sizeof path);

    svc_config cfg;
    svc_config_defaults(&cfg);
    cfg.kubeconfig = path;
    svc *s = NULL;
    as_diag d = {{0}, {0}};
    cr_assert_eq(svc_new(&cfg, &s, &d), AS_OK, "%s", d.msg);
    k8s_config kc;
    k8s_config_defaults(&kc);
    kc.kubeconfig = path;
    kc.watch_shards = false;
    cr_assert_eq(svc_k8s_start(s, &kc, &d), AS_OK, "%s", d.msg);

    const char *body = "{\"Pod\":{\"metadata\":{\"name\":\"a\",\"namespace\":\"default\","
                       "\"uid\":\"uid-a\"},\"spec\":{\"containers\":[{\"name\":\"c\"}]}},"
                       "\"Nodes\":null,\"NodeNames\":[\"n0\"]}";
    for (int round = 0; round < 2; round++) {
        http_request req = {0};
        req.method = "POST";
        req.path = "/scheduler/filter";
        req.body = body;
        req.body_len = strlen(body);
        req.pool = pool_new(0);
        http_response resp = {0};
        resp.status = 200;
        buf_init(&resp.body, 1 << 16);
        extender_handle_filter(s->ext, &req, &resp);
        if (round == 0) {
            cr_assert_eq(resp.status, 503, "%s", resp.body.data);
            cr_assert_not_null(strstr(resp.body.data, "\"Error\":\"agentsched's node cache has "
                                                      "not finished its first sync"),
                               "%s", resp.body.data);
            cr_assert(k8s_wait_synced(s->k8s, 10000));
        } else {
            cr_assert_eq(resp.status, 200, "%s", resp.body.data);
            cr_assert_not_null(strstr(resp.body.data, "\"NodeNames\":[\"n0\"]"), "%s",
                               resp.body.data);
        }
        buf_free(&resp.body);
        pool_free(req.pool);
    }
    svc_free(s);
    stub_free(stub);
    unlink(path);
    rmdir(dir);
}

/* Live mode: Volcano's allocateFunc acts on the pods the watch delivered
 * with a schedulerName of Volcano's, and on no other. */
Test(k8s_svc, volcano_allocate_knows_pods_from_the_watch)
{
    log_set_level(LOG_ERROR);
    k8s_stub *stub = stub_new();
    json_t *n = stub_make_node("n0", "4", "16Gi", 110);
    stub_put(stub, STUB_NODE, n);
    json_decref(n);
    json_t *vp = stub_make_pod("default", "vp", "uid-vp", NULL, "1", "1Gi");
    json_object_set_new(json_object_get(vp, "spec"), "schedulerName", json_string("volcano"));
    stub_put(stub, STUB_POD, vp);
    json_t *ap = stub_make_pod("default", "ap", "uid-ap", NULL, "1", "1Gi");
    stub_put(stub, STUB_POD, ap);
    char dir[] = "/tmp/agentsched-kcXXXXXX";
    char path[600];
    write_stub_kubeconfig(stub, dir, path, sizeof path);
    svc_config cfg;
    svc_config_defaults(&cfg);
    cfg.kubeconfig = path;
    cfg.listen = "127.0.0.1:0";
    cfg.workers = 0;
    svc *s = NULL;
    as_diag d = {{0}, {0}};
    cr_assert_eq(svc_new(&cfg, &s, &d), AS_OK, "%s", d.msg);
    const char *stage = NULL;
    cr_assert_eq(svc_start(s, &stage, &d), AS_OK, "%s: %s", stage, d.msg);
    cr_assert(k8s_wait_synced(s->k8s, 5000));
    char out[2048];
    const char *tmpl = "{\"task\":{\"UID\":\"uid-%s\",\"Name\":\"%s\",\"Namespace\":"
                       "\"default\",\"NodeName\":\"n0\",\"Resreq\":{\"MilliCPU\":1000}}}";
    char body[512];
    snprintf(body, sizeof body, tmpl, "vp", "vp");
    http_request req = {.method = "POST",
                        .path = "/volcano/allocateFunc",
                        .body = body,
                        .body_len = strlen(body),
                        .pool = pool_new(0),
                        .remote = "192.0.2.9:1"};
    http_response resp = {.status = 200};
    buf_init(&resp.body, 1 << 16);
    volcano_handle_allocate(s->vol, &req, &resp);
    snprintf(out, sizeof out, "%s", resp.body.data);
    cr_expect_eq(resp.status, 200, "%s", out);
    cr_expect_str_eq(out, "{\"errorMessage\":\"\"}");
    cache_pod_info info;
    cache_pod_lookup(s->core->cache, "uid-vp", &info);
    cr_expect_eq(info.state, CACHE_POD_ASSUMED);
    /* the fast path's pod and a pod that does not exist are refused */
    const char *names[] = {"ap", "nope"};
    const char *says[] = {"schedulerName is not one of Volcano's", "pod watch does not know it"};
    for (int i = 0; i < 2; i++) {
        snprintf(body, sizeof body, tmpl, names[i], names[i]);
        req.body_len = strlen(body);
        buf_reset(&resp.body);
        resp.status = 200;
        volcano_handle_allocate(s->vol, &req, &resp);
        cr_expect_eq(resp.status, 403, "%s", resp.body.data);
        cr_expect(strstr(resp.body.data, says[i]), "%s", resp.body.data);
    }
    buf_free(&resp.body);
    pool_free(req.pool);
    json_decref(vp);
    json_decref(ap);
    svc_free(s);
    stub_free(stub);
    unlink(path);
    rmdir(dir);
}

/* gpu_pod: a pending pod of sched asking for a share of milli. */
static json_t *gpu_pod(const char *name, const char *sched, const char *milli)
{
    char uid[64];
    snprintf(uid, sizeof uid, "uid-%s", name);
    json_t *p = stub_make_pod("default", name, uid, NULL, "1", "1Gi");
    json_object_set_new(json_object_get(p, "spec"), "schedulerName", json_string(sched));
    json_t *c0 = json_array_get(json_object_get(json_object_get(p, "spec"), "containers"), 0);
    json_object_set_new(json_object_get(json_object_get(c0, "resources"), "requests"),
                        "agentsched.io/gpu-milli", json_string(milli));
    return p;
}

/* stub_annotation_of: annotation key of the stub's pod uid ("" if none). */
static void stub_annotation_of(k8s_stub *stub, const char *uid, const char *key, char *out,
                               size_t len)
{
    out[0] = 0;
    json_t *pods = stub_objects(stub, STUB_POD);
    size_t i;
    json_t *v;
    json_array_foreach(pods, i, v)
    {
        json_t *md = json_object_get(v, "metadata");
        if (strcmp(json_string_value(json_object_get(md, "uid")), uid) != 0)
            continue;
        const char *a = json_string_value(json_object_get(json_object_get(md, "annotations"), key));
        snprintf(out, len, "%s", a ? a : "");
    }
    json_decref(pods);
}

/* allocate_task runs Volcano's allocateFunc for pod (its JSON as the
 * task's Pod) on n0; the answer's body goes to out. */
static int allocate_task(svc *s, const json_t *pod, char *out, size_t outlen)
{
    char *pj = json_dumps(pod, JSON_COMPACT);
    json_t *md = json_object_get(pod, "metadata");
    char body[8192];
    snprintf(body, sizeof body,
             "{\"task\":{\"UID\":\"%s\",\"Name\":\"%s\",\"Namespace\":\"default\","
             "\"NodeName\":\"n0\",\"Pod\":%s}}",
             json_string_value(json_object_get(md, "uid")),
             json_string_value(json_object_get(md, "name")), pj);
    free(pj);
    http_request req = {.method = "POST",
                        .path = "/volcano/allocateFunc",
                        .body = body,
                        .body_len = strlen(body),
                        .pool = pool_new(0),
                        .remote = "192.0.2.9:1"};
    http_response resp = {.status = 200};
    buf_init(&resp.body, 1 << 16);
    volcano_handle_allocate(s->vol, &req, &resp);
    snprintf(out, outlen, "%s", resp.body.data ? resp.body.data : "");
    buf_free(&resp.body);
    pool_free(req.pool);
    return resp.status;
}

/* The extender's bind and Volcano's allocateFunc write a GPU pod's devices
 * on it before the Binding (or before Volcano's), with the pod's uid and
 * resourceVersion as preconditions; a precondition that fails unreserves
 * and says so; CPU pods are never patched. */
Test(k8s_svc, gpu_devices_written_by_the_extender_bind_and_allocate_func)
{
    log_set_level(LOG_ERROR);
    k8s_stub *stub = stub_new();
    json_t *n = stub_make_node("n0", "16", "64Gi", 110);
    json_object_set_new(json_object_get(json_object_get(n, "status"), "allocatable"),
                        "nvidia.com/gpu", json_string("2"));
    stub_put(stub, STUB_NODE, n);
    json_decref(n);
    json_t *xg = gpu_pod("xg", "agent-scheduler", "600");
    json_t *xc = stub_make_pod("default", "xc", "uid-xc", NULL, "1", "1Gi");
    json_t *vg = gpu_pod("vg", "volcano", "600");
    json_t *vs = gpu_pod("vs", "volcano", "300");
    stub_put(stub, STUB_POD, xg);
    stub_put(stub, STUB_POD, xc);
    stub_put(stub, STUB_POD, vg);
    stub_put(stub, STUB_POD, vs);
    char dir[] = "/tmp/agentsched-kcXXXXXX";
    char path[600];
    write_stub_kubeconfig(stub, dir, path, sizeof path);
    svc_config cfg;
    svc_config_defaults(&cfg);
    cfg.kubeconfig = path;
    cfg.listen = "127.0.0.1:0";
    cfg.workers = 0;
    svc *s = NULL;
    as_diag d = {{0}, {0}};
    cr_assert_eq(svc_new(&cfg, &s, &d), AS_OK, "%s", d.msg);
    const char *stage = NULL;
    cr_assert_eq(svc_start(s, &stage, &d), AS_OK, "%s: %s", stage, d.msg);
    cr_assert(k8s_wait_synced(s->k8s, 5000));
    char why[2048], a[128];
    cache_pod_info info;

    /* extender: the first patch loses a race (409): the bind fails and
     * unreserves, nothing is bound; kube-scheduler's retry goes through */
    stub_fault(stub, "/api/v1/namespaces/default/pods/xg", STUB_PATCH, STUB_F_STATUS, 409);
    char *fb = filter_body(xg);
    const char *bind_xg =
        "{\"PodName\":\"xg\",\"PodNamespace\":\"default\",\"PodUID\":\"uid-xg\",\"Node\":\"n0\"}";
    cr_assert_eq(run_verb(s, extender_handle_filter, fb, why, sizeof why), 200, "%s", why);
    cr_assert_eq(run_verb(s, extender_handle_bind, bind_xg, why, sizeof why), 200, "%s", why);
    cr_assert(strstr(why, "could not bind") && strstr(why, "409"), "%s", why);
    cache_pod_lookup(s->core->cache, "uid-xg", &info);
    cr_assert_eq(info.state, CACHE_POD_ABSENT, "unreserved after the conflict");
    cr_assert_not(stub_pod_on(stub, "uid-xg", "n0"));
    cr_assert_eq(run_verb(s, extender_handle_filter, fb, why, sizeof why), 200, "%s", why);
    cr_assert_eq(run_verb(s, extender_handle_bind, bind_xg, why, sizeof why), 200, "%s", why);
    cr_assert_str_eq(why, "{\"Error\":\"\"}");
    cr_assert(stub_pod_on(stub, "uid-xg", "n0"));
    stub_annotation_of(stub, "uid-xg", GPUANNOT_DEVICES, a, sizeof a);
    cr_assert_str_eq(a, "0");
    stub_annotation_of(stub, "uid-xg", GPUANNOT_MILLI, a, sizeof a);
    cr_assert_str_eq(a, "600");
    stub_annotation_of(stub, "uid-xg", GPUANNOT_NODE, a, sizeof a);
    cr_assert_str_eq(a, "n0");
    free(fb);

    /* a CPU pod: bound with no patch */
    fb = filter_body(xc);
    cr_assert_eq(run_verb(s, extender_handle_filter, fb, why, sizeof why), 200, "%s", why);
    cr_assert_eq(run_verb(s, extender_handle_bind,
                          "{\"PodName\":\"xc\",\"PodNamespace\":\"default\",\"PodUID\":\"uid-xc\","
                          "\"Node\":\"n0\"}",
                          why, sizeof why),
                 200, "%s", why);
    cr_assert_str_eq(why, "{\"Error\":\"\"}");
    cr_assert_eq(stub_count(stub, "/api/v1/namespaces/default/pods/xc", STUB_PATCH), 0);
    free(fb);

    /* Volcano: Volcano's copy with a stale resourceVersion loses (409):
     * errorMessage says so and nothing stays assumed */
    json_t *stale = json_deep_copy(vg);
    json_object_set_new(json_object_get(stale, "metadata"), "resourceVersion", json_string("1"));
    cr_assert_eq(allocate_task(s, stale, why, sizeof why), 200, "%s", why);
    cr_assert(strstr(why, "could not write the GPU devices") && strstr(why, "409"), "%s", why);
    cache_pod_lookup(s->core->cache, "uid-vg", &info);
    cr_assert_eq(info.state, CACHE_POD_ABSENT);
    json_decref(stale);
    /* the current copy: written, assumed on device 1 (600 + 600 > 1000) */
    cr_assert_eq(allocate_task(s, vg, why, sizeof why), 200, "%s", why);
    cr_assert_str_eq(why, "{\"errorMessage\":\"\"}");
    cache_pod_lookup(s->core->cache, "uid-vg", &info);
    cr_assert_eq(info.state, CACHE_POD_ASSUMED);
    cr_assert_eq(info.gpu_devices, 2u);
    stub_annotation_of(stub, "uid-vg", GPUANNOT_DEVICES, a, sizeof a);
    cr_assert_str_eq(a, "1");
    /* Volcano repeats the callback: nothing written again */
    int patches = stub_count(stub, "/api/v1/namespaces/default/pods/vg", STUB_PATCH);
    cr_assert_eq(allocate_task(s, vg, why, sizeof why), 200, "%s", why);
    cr_assert_str_eq(why, "{\"errorMessage\":\"\"}");
    cr_assert_eq(stub_count(stub, "/api/v1/namespaces/default/pods/vg", STUB_PATCH), patches);
    /* the 300 share goes where 400 are free: device 0 (best fit) */
    cr_assert_eq(allocate_task(s, vs, why, sizeof why), 200, "%s", why);
    cr_assert_str_eq(why, "{\"errorMessage\":\"\"}");
    stub_annotation_of(stub, "uid-vs", GPUANNOT_DEVICES, a, sizeof a);
    cr_assert_str_eq(a, "0");
    stub_annotation_of(stub, "uid-vs", GPUANNOT_MILLI, a, sizeof a);
    cr_assert_str_eq(a, "300");

    json_decref(xg);
    json_decref(xc);
    json_decref(vg);
    json_decref(vs);
    svc_free(s);
    stub_free(stub);
    unlink(path);
    rmdir(dir);
}
