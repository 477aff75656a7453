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
#include "agentsched/base/clock.h"
#include "agentsched/base/log.h"
#include "agentsched/k8s/k8s.h"
#include "agentsched/serve/svc.h"
#include "k8s_stub.c"

/* write_stub_kubeconfig creates dir (a mkdtemp template) and in it a
 * kubeconfig for the stub with the token "secret"; path receives its path. */
static void write_stub_kubeconfig(k8s_stub *stub, char *dir, char *path, size_t pathlen)
{
    cr_assert_not_null(mkdtemp(dir));
    snprintf(path, pathlen, "%s/kubeconfig", dir);
    FILE *fp = fopen(path, "w");
    cr_assert_not_null(fp);
    fprintf(fp,
            "apiVersion: v1\nkind: Config\ncurrent-context: stub\nclusters:\n- name: stub\n"
            "  cluster:\n    server: %s\ncontexts:\n- name: stub\n  context:\n    cluster: stub\n"
            "    user: u\nusers:\n- name: u\n  user:\n    token: secret\n",
            stub_url(stub));
    fclose(fp);
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
    /* Extender bind verb for a pod agentsched never filtered: the live
     * hooks GET the pod, note it, assume it and post the binding. */
    json_t *px = stub_make_pod("default", "x", "uid-x", NULL, "1", "1Gi");
    stub_put(stub, STUB_POD, px);
    json_decref(px);
    const char *body =
        "{\"PodName\":\"x\",\"PodNamespace\":\"default\",\"PodUID\":\"uid-x\",\"Node\":\"n0\"}";
    http_request req = {0};
    req.method = "POST";
    req.path = "/scheduler/bind";
    req.body = body;
    req.body_len = strlen(body);
    req.pool = pool_new(0);
    http_response resp = {0};
    resp.status = 200;
    buf_init(&resp.body, 1 << 16);
    extender_handle_bind(s->ext, &req, &resp);
    cr_assert_str_eq(resp.body.data, "{\"Error\":\"\"}", "%s", resp.body.data);
    buf_free(&resp.body);
    pool_free(req.pool);
    json_t *pods = stub_objects(stub, STUB_POD);
    size_t i;
    json_t *v;
    bool bound = false;
    json_array_foreach(pods, i, v)
    {
        const char *nn = json_string_value(json_object_get(json_object_get(v, "spec"), "nodeName"));
        if (!strcmp(json_string_value(json_object_get(json_object_get(v, "metadata"), "uid")),
                    "uid-x"))
            bound = nn && !strcmp(nn, "n0");
    }
    json_decref(pods);
    cr_assert(bound, "the extender bind reached the API server");
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
