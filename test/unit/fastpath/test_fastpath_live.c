/*
 * test_fastpath_live.c - the fast path wired to the k8s client as `serve`
 * wires it, against the in-process fake API server: pending pods of our
 * scheduler name arrive through the pod hook, are bound through
 * pods/binding without overcommit, a pod that fits nowhere gets a
 * FailedScheduling event and is bound once a node that fits it appears;
 * two replicas under leader election never schedule at once.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agentsched/base/doc.h"
#include "agentsched/fastpath/fastpath.h"
#include "agentsched/k8s/k8s.h"
#include "agentsched/model/gpuannot.h"
#include "agentsched/base/log.h"
#include "agentsched/serve/svc.h"
#include "k8s_stub.c"

/* How long a test waits for binds to show: a cap, not a timing (loaded and
 * sanitized runs are slow). */
#define WAIT_CAP_MS 30000

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Pods of the stub bound to node (name), or to any node (NULL). */
static int bound_on(k8s_stub *stub, const char *node, const char *only_pod)
{
    json_t *pods = stub_objects(stub, STUB_POD);
    size_t i;
    json_t *v;
    int n = 0;
    json_array_foreach(pods, i, v)
    {
        const char *nn = json_string_value(json_object_get(json_object_get(v, "spec"), "nodeName"));
        const char *name =
            json_string_value(json_object_get(json_object_get(v, "metadata"), "name"));
        if (only_pod && strcmp(name, only_pod) != 0)
            continue;
        if (nn && (!node || strcmp(nn, node) == 0))
            n++;
    }
    json_decref(pods);
    return n;
}

/* live_start wires svc, fast path and k8s client as `serve` does, against
 * the stub (workers 0: the svc default), and starts them; *out gets the
 * svc. live_stop stops and frees the fast path and the client, not the
 * svc. */
static fastpath *live_start_ex(k8s_stub *stub, int workers, bool watch_shards,
                               const char *lease_identity, svc **out);

static fastpath *live_start(k8s_stub *stub, int workers, bool watch_shards, svc **out)
{
    return live_start_ex(stub, workers, watch_shards, NULL, out);
}

/* live_start_ex: with lease_identity, the fast path runs under leader
 * election (Lease kube-system/agentsched-test, 3 s, rounds every 50 ms),
 * as `serve --leader-elect` wires it. */
static fastpath *live_start_ex(k8s_stub *stub, int workers, bool watch_shards,
                               const char *lease_identity, svc **out)
{
    svc_config cfg;
    svc_config_defaults(&cfg);
    if (workers > 0)
        cfg.workers = workers;
    as_diag d = {{0}, {0}};
    cr_assert_eq(svc_new(&cfg, out, &d), AS_OK, "%s", d.msg);
    fastpath_config fc;
    fastpath_config_defaults(&fc);
    fc.workers = cfg.workers; /* as `serve` passes --workers */
    fc.poll_ms = 5;
    fastpath *fp = NULL;
    cr_assert_eq(fastpath_new((*out)->core, &fc, NULL, &fp, &d), AS_OK, "%s", d.msg);
    k8s_conn conn = {0};
    conn.server = (char *)stub_url(stub);
    k8s_config kc;
    k8s_config_defaults(&kc);
    kc.conn = &conn;
    kc.watch_shards = watch_shards;
    kc.pod_hook = fastpath_pod_event;
    kc.pod_hook_arg = fp;
    if (lease_identity) {
        kc.lease_name = "agentsched-test";
        kc.lease_identity = lease_identity;
        kc.lease_duration_ms = 3000;
        kc.lease_retry_ms = 50;
        kc.leader_hook = fastpath_set_leading;
        kc.leader_hook_arg = fp;
    }
    cr_assert_eq(svc_k8s_start(*out, &kc, &d), AS_OK, "%s", d.msg);
    cr_assert_eq(fastpath_start(fp), AS_OK);
    return fp;
}

static void live_stop(svc *s, fastpath *fp)
{
    fastpath_stop(fp);
    svc_k8s_stop(s);
    fastpath_free(fp);
}

/* Nodes n0..n{count-1}, each of cpu and mem, 110 pods. */
static void put_nodes(k8s_stub *stub, int count, const char *cpu, const char *mem)
{
    for (int i = 0; i < count; i++) {
        char name[16];
        snprintf(name, sizeof name, "n%d", i);
        json_t *n = stub_make_node(name, cpu, mem, 110);
        stub_put(stub, STUB_NODE, n);
        json_decref(n);
    }
}

/* Pending pods PREFIX{from..to-1} (uid "uid-" + name), 1 cpu, 1Gi each. */
static void put_pods(k8s_stub *stub, const char *prefix, int from, int to)
{
    for (int i = from; i < to; i++) {
        char name[32], uid[40];
        snprintf(name, sizeof name, "%s%d", prefix, i);
        snprintf(uid, sizeof uid, "uid-%s", name);
        json_t *p = stub_make_pod("default", name, uid, NULL, "1", "1Gi");
        stub_put(stub, STUB_POD, p);
        json_decref(p);
    }
}

/* A pod bound gets kube-scheduler's Scheduled Event, its message naming
 * the pod and the node. */
Test(fastpath_live, scheduled_event_names_pod_and_node)
{
    log_set_level(LOG_ERROR);
    k8s_stub *stub = stub_new();
    put_nodes(stub, 1, "4", "16Gi");
    put_pods(stub, "p", 0, 1);
    svc *s = NULL;
    fastpath *fp = live_start(stub, 1, false, &s);
    int64_t end = mono_ms() + WAIT_CAP_MS;
    while (stub_events_posted(stub) < 1 && mono_ms() < end)
        usleep(5000);
    cr_assert_eq(bound_on(stub, "n0", NULL), 1);
    json_t *ev = stub_last_event(stub);
    cr_assert_not_null(ev);
    cr_expect_str_eq(json_string_value(json_object_get(ev, "reason")), "Scheduled");
    cr_expect_str_eq(json_string_value(json_object_get(ev, "message")),
                     "Successfully assigned default/p0 to n0");
    json_decref(ev);
    live_stop(s, fp);
    svc_free(s);
    stub_free(stub);
}

Test(fastpath_live, binds_through_the_api_server_and_reports_unschedulable)
{
    log_set_level(LOG_ERROR);
    k8s_stub *stub = stub_new();
    put_nodes(stub, 2, "4", "16Gi");
    /* 12 pods of 1 cpu for 8 cpus: 8 bound, 4 wait; one pod too big. */
    put_pods(stub, "a", 0, 12);
    json_t *big = stub_make_pod("default", "big", "uid-big", NULL, "16", "1Gi");
    stub_put(stub, STUB_POD, big);
    json_decref(big);
    json_t *other = stub_make_pod("default", "other", "uid-other", NULL, "1", "1Gi");
    json_object_set_new(json_object_get(other, "spec"), "schedulerName",
                        json_string("default-scheduler"));
    stub_put(stub, STUB_POD, other);
    json_decref(other);

    svc *s = NULL;
    fastpath *fp = live_start(stub, 3, false, &s);
    as_diag d = {{0}, {0}};

    int64_t end = mono_ms() + WAIT_CAP_MS;
    while (bound_on(stub, NULL, NULL) < 8 && mono_ms() < end)
        usleep(5000);
    cr_assert_eq(bound_on(stub, NULL, NULL), 8);
    usleep(100000);
    cr_assert_eq(bound_on(stub, NULL, NULL), 8, "a node got more than its 4 cpus");
    cr_assert_eq(bound_on(stub, "n0", NULL), 4);
    cr_assert_eq(bound_on(stub, "n1", NULL), 4);
    cr_assert_eq(bound_on(stub, NULL, "other"), 0);
    /* Scheduled events for the bound, FailedScheduling for the rest. */
    end = mono_ms() + 5000;
    while (stub_events_posted(stub) < 9 && mono_ms() < end)
        usleep(5000);
    cr_assert_geq(stub_events_posted(stub), 9);

    /* A big node arrives: the waiting pods, the big one included, go on it. */
    json_t *n2 = stub_make_node("n2", "32", "64Gi", 110);
    stub_put(stub, STUB_NODE, n2);
    json_decref(n2);
    end = mono_ms() + 3000;
    while (bound_on(stub, NULL, "big") == 0 && mono_ms() < end)
        usleep(5000);
    cr_assert_eq(bound_on(stub, "n2", "big"), 1, "big not bound after the node was added");
    while (bound_on(stub, NULL, NULL) < 13 && mono_ms() < end)
        usleep(5000);
    cr_assert_eq(bound_on(stub, NULL, NULL), 13);

    live_stop(s, fp);
    cr_assert_eq(cache_check_invariants(s->core->cache, &d), AS_OK, "%s", d.msg);
    svc_free(s);
    stub_free(stub);
}

static k8s_status live_status(svc *s)
{
    k8s_status st;
    k8s_get_status(s->k8s, &st);
    return st;
}

Test(fastpath_live, replicas_under_leader_election_schedule_one_at_a_time)
{
    log_set_level(LOG_ERROR);
    k8s_stub *stub = stub_new();
    put_nodes(stub, 2, "8", "64Gi");
    svc *sa = NULL, *sb = NULL;
    fastpath *fa = live_start_ex(stub, 2, false, "replica-a", &sa);
    int64_t end = mono_ms() + 5000;
    while (!live_status(sa).leader && mono_ms() < end)
        usleep(5000);
    cr_assert(live_status(sa).leader, "replica-a never led");
    fastpath *fb = live_start_ex(stub, 2, false, "replica-b", &sb);
    cr_assert(k8s_wait_synced(sb->k8s, 5000));

    /* Both replicas see every pending pod; only the leader binds. */
    put_pods(stub, "p", 0, 10);
    end = mono_ms() + WAIT_CAP_MS;
    while (bound_on(stub, NULL, NULL) < 10 && mono_ms() < end)
        usleep(5000);
    cr_assert_eq(bound_on(stub, NULL, NULL), 10);
    usleep(200000); /* time for a standby's stray decision to show */
    while (live_status(sa).binds_ok < 10 && mono_ms() < end)
        usleep(5000);
    cr_assert_eq(live_status(sa).binds_ok, 10);
    cr_assert_eq(live_status(sb).binds_ok, 0, "the standby bound pods");
    cr_assert_not(live_status(sb).leader);
    fastpath_stats fs;
    fastpath_get_stats(fb, &fs);
    cr_assert_eq(fs.attempts, 0, "the standby made %llu decisions",
                 (unsigned long long)fs.attempts);

    /* The leader stops (rolling update): it releases the Lease and the
     * standby schedules what arrives next, without waiting out 3 s. */
    live_stop(sa, fa);
    json_t *lease = stub_lease(stub, "kube-system", "agentsched-test");
    const char *holder =
        json_string_value(json_object_get(json_object_get(lease, "spec"), "holderIdentity"));
    cr_assert(holder && (!strcmp(holder, "") || !strcmp(holder, "replica-b")),
              "the stopped leader did not release the Lease (holder %s)", holder);
    json_decref(lease);
    put_pods(stub, "q", 0, 6);
    end = mono_ms() + WAIT_CAP_MS;
    while (bound_on(stub, NULL, NULL) < 16 && mono_ms() < end)
        usleep(5000);
    cr_assert_eq(bound_on(stub, NULL, NULL), 16);
    /* The stub counts a binding when it answers it, the client when it has
     * read the answer, a moment later (longer under ASan). */
    while (live_status(sb).binds_ok < 6 && mono_ms() < end)
        usleep(5000);
    cr_assert_eq(live_status(sb).binds_ok, 6);
    cr_assert(live_status(sb).leader);
    cr_assert_eq(bound_on(stub, "n0", NULL) + bound_on(stub, "n1", NULL), 16);
    cr_assert_leq(bound_on(stub, "n0", NULL), 8, "n0 overcommitted");
    cr_assert_leq(bound_on(stub, "n1", NULL), 8, "n1 overcommitted");

    live_stop(sb, fb);
    as_diag d = {{0}, {0}};
    cr_assert_eq(cache_check_invariants(sb->core->cache, &d), AS_OK, "%s", d.msg);
    svc_free(sa);
    svc_free(sb);
    stub_free(stub);
}

/* Adds to names every agentsched_* series name found in s. */
static void series_names(const char *s, json_t *names)
{
    static const char pre[] = "agentsched_";
    for (const char *p = strstr(s, pre); p; p = strstr(p, pre)) {
        size_t n = sizeof pre - 1;
        while ((p[n] >= 'a' && p[n] <= 'z') || (p[n] >= '0' && p[n] <= '9') || p[n] == '_')
            n++;
        json_object_setn_new(names, p, n, json_true());
        p += n;
    }
}

/* Every "expr" string below v (dashboard targets, alert rules). */
static void exprs(json_t *v, json_t *names, int *count)
{
    if (json_is_object(v)) {
        const char *k;
        json_t *x;
        json_object_foreach(v, k, x)
        {
            if (!strcmp(k, "expr") && json_is_string(x)) {
                series_names(json_string_value(x), names);
                (*count)++;
            } else {
                exprs(x, names, count);
            }
        }
    } else if (json_is_array(v)) {
        size_t i;
        json_t *x;
        json_array_foreach(v, i, x) exprs(x, names, count);
    }
}

/* Pods that arrive one at a time after the sync find activeQ empty: the
 * pod watch decides and binds them itself, and they bind as the workers'
 * would; a binding the API server does not settle at once goes to the
 * bind threads. */
/* live_begin starts the fast path live over a stub API server with
 * nodes nodes of cpu CPUs (16Gi) and waits for the first sync. */
static fastpath *live_begin(int nodes, const char *cpu, int workers, k8s_stub **stub, svc **s)
{
    log_set_level(LOG_ERROR);
    *stub = stub_new();
    put_nodes(*stub, nodes, cpu, "16Gi");
    fastpath *fp = live_start(*stub, workers, false, s);
    cr_assert(k8s_wait_synced((*s)->k8s, 5000));
    return fp;
}

Test(fastpath_live, the_pod_watch_decides_pods_the_workers_are_not_behind_on)
{
    k8s_stub *stub = NULL;
    svc *s = NULL;
    fastpath *fp = live_begin(2, "4", 2, &stub, &s);
    as_diag d = {{0}, {0}};
    int64_t end = mono_ms() + WAIT_CAP_MS;
    for (int i = 0; i < 6; i++) {
        put_pods(stub, "w", i, i + 1);
        while (bound_on(stub, NULL, NULL) < i + 1 && mono_ms() < end)
            usleep(2000);
    }
    cr_assert_eq(bound_on(stub, NULL, NULL), 6);
    fastpath_stats st;
    /* a Binding the watch sent counts once its answer is read (the pod's
     * own event, or the watcher within 20 ms) */
    fastpath_get_stats(fp, &st);
    while (st.scheduled < 6 && mono_ms() < end) {
        usleep(2000);
        fastpath_get_stats(fp, &st);
    }
    cr_assert_geq(st.watch_decisions, 1, "no pod was decided by the watch");
    cr_assert_geq(st.watch_binds, 1, "no pod was bound by the watch");
    cr_assert_leq(st.watch_binds, st.watch_decisions);
    cr_assert_eq(st.scheduled, 6);
    cr_assert_eq(bound_on(stub, "n0", NULL) + bound_on(stub, "n1", NULL), 6);
    /* The API server refuses a binding (503): the watch's one attempt
     * leaves it to a bind thread, whose retry binds it. */
    uint64_t watch_binds = st.watch_binds;
    stub_fault(stub, "/api/v1/namespaces/default/pods/x0/binding", STUB_POST, STUB_F_STATUS, 503);
    put_pods(stub, "x", 0, 1);
    while (bound_on(stub, NULL, NULL) < 7 && mono_ms() < end)
        usleep(2000);
    cr_assert_eq(bound_on(stub, NULL, NULL), 7);
    cr_assert_eq(stub_faults_pending(stub), 0);
    put_pods(stub, "x", 1, 2);
    while (bound_on(stub, NULL, NULL) < 8 && mono_ms() < end)
        usleep(2000);
    cr_assert_eq(bound_on(stub, NULL, NULL), 8);
    fastpath_get_stats(fp, &st);
    while (st.scheduled < 8 && mono_ms() < end) {
        usleep(2000);
        fastpath_get_stats(fp, &st);
    }
    cr_assert_eq(st.scheduled, 8);
    cr_assert_eq(st.bind_failed, 0, "the refused binding was retried, not failed");
    /* x0 was not the watch's (x1 may be: the pause may be over) */
    cr_assert_leq(st.watch_binds, watch_binds + 1);
    live_stop(s, fp);
    cr_assert_eq(cache_check_invariants(s->core->cache, &d), AS_OK, "%s", d.msg);
    svc_free(s);
    stub_free(stub);
}

/* A burst: the pod watch sends several Bindings before their answers
 * come and reads them at later events; every pod is bound once, within
 * the nodes' capacity, and counted once. */
Test(fastpath_live, the_pod_watch_has_several_bindings_out)
{
    k8s_stub *stub = NULL;
    svc *s = NULL;
    fastpath *fp = live_begin(4, "6", 1, &stub, &s);
    int64_t end = mono_ms() + WAIT_CAP_MS;
    put_pods(stub, "b", 0, 30); /* 24 fit */
    fastpath_stats st = {0};
    while ((st.scheduled < 24 || st.unschedulable < 1) && mono_ms() < end) {
        usleep(2000);
        fastpath_get_stats(fp, &st);
    }
    usleep(100000); /* nothing more is bound */
    int per_node[4];
    for (int n = 0; n < 4; n++) {
        char node[16];
        snprintf(node, sizeof node, "n%d", n);
        per_node[n] = bound_on(stub, node, NULL);
    }
    fastpath_get_stats(fp, &st);
    live_stop(s, fp);
    as_diag d = {{0}, {0}};
    as_err inv = cache_check_invariants(s->core->cache, &d);
    svc_free(s);
    stub_free(stub);
    for (int n = 0; n < 4; n++)
        cr_assert_eq(per_node[n], 6, "n%d holds %d pods", n, per_node[n]);
    cr_assert_eq(st.scheduled, 24);
    cr_assert_eq(st.bind_failed, 0);
    cr_assert_geq(st.watch_binds, 1, "no pod was bound by the watch");
    cr_assert_eq(inv, AS_OK, "%s", d.msg);
}

/* The shipped Grafana dashboard and alert rules query only series that
 * `serve` in live mode with the fast path actually exports. */
Test(fastpath_live, dashboard_and_alerts_use_served_metrics)
{
    log_set_level(LOG_ERROR);
    k8s_stub *stub = stub_new();
    put_nodes(stub, 1, "4", "16Gi");
    /* a GPU node with a model label, for the per-model device series */
    json_t *g = stub_make_node("g0", "8", "32Gi", 110);
    json_object_set_new(json_object_get(json_object_get(g, "metadata"), "labels"),
                        "agentsched.io/gpu-model", json_string("T4"));
    json_object_set_new(json_object_get(json_object_get(g, "status"), "allocatable"),
                        "nvidia.com/gpu", json_string("2"));
    stub_put(stub, STUB_NODE, g);
    json_decref(g);
    svc *s = NULL;
    fastpath *fp = live_start(stub, 0, true, &s);
    as_diag d = {{0}, {0}};
    cr_assert(k8s_wait_synced(s->k8s, 5000));
    /* What GET /metrics answers (the handler refreshes the client's and
     * the cache's series before rendering). */
    size_t nroutes = 0;
    const http_route *routes = svc_routes(s, &nroutes);
    const http_route *mr = NULL;
    for (size_t i = 0; i < nroutes; i++)
        if (!strcmp(routes[i].path, "/metrics"))
            mr = &routes[i];
    cr_assert_not_null(mr);
    http_request req = {0};
    req.method = "GET";
    req.path = "/metrics";
    req.pool = pool_new(0);
    http_response resp = {0};
    resp.status = 200;
    buf_init(&resp.body, 1 << 20);
    mr->fn(mr->ctx, &req, &resp);
    cr_assert_eq(resp.status, 200);
    pool_free(req.pool);
    buf out = resp.body;
    live_stop(s, fp);
    svc_free(s);
    stub_free(stub);

    /* Families from "# TYPE name kind" lines; histograms add their series. */
    json_t *served = json_object();
    for (const char *p = strstr(out.data, "# TYPE "); p; p = strstr(p + 1, "# TYPE ")) {
        const char *name = p + 7, *sp = strchr(name, ' ');
        cr_assert_not_null(sp);
        json_object_setn_new(served, name, (size_t)(sp - name), json_true());
        if (!strncmp(sp, " histogram", 10))
            for (int i = 0; i < 3; i++) {
                static const char *const sfx[] = {"_bucket", "_sum", "_count"};
                char full[256];
                snprintf(full, sizeof full, "%.*s%s", (int)(sp - name), name, sfx[i]);
                json_object_set_new(served, full, json_true());
            }
    }
    buf_free(&out);
    cr_assert_gt(json_object_size(served), 30);

    static const char *const files[] = {AGENTSCHED_SOURCE_DIR "/deploy/dashboards/agentsched.json",
                                        AGENTSCHED_SOURCE_DIR
                                        "/deploy/dashboards/agentsched-alerts.yaml"};
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        json_t *doc = NULL;
        cr_assert_eq(doc_load_file(files[f], 1 << 20, false, &doc, &d), AS_OK, "%s: %s", files[f],
                     d.msg);
        json_t *names = json_object();
        int count = 0;
        exprs(doc, names, &count);
        cr_assert_gt(count, 5, "%s: no expr found", files[f]);
        const char *k;
        json_t *v;
        json_object_foreach(names, k, v)
        {
            cr_assert_not_null(json_object_get(served, k), "%s queries %s, which /metrics lacks",
                               files[f], k);
        }
        json_decref(names);
        json_decref(doc);
    }
    json_decref(served);
}

/* The annotation key of pod name at the stub ("" when absent). */
static void stub_annotation(k8s_stub *stub, const char *name, const char *key, char *out,
                            size_t len)
{
    out[0] = 0;
    json_t *pods = stub_objects(stub, STUB_POD);
    size_t i;
    json_t *v;
    json_array_foreach(pods, i, v)
    {
        json_t *md = json_object_get(v, "metadata");
        if (strcmp(json_string_value(json_object_get(md, "name")), name) != 0)
            continue;
        const char *a = json_string_value(json_object_get(json_object_get(md, "annotations"), key));
        snprintf(out, len, "%s", a ? a : "");
    }
    json_decref(pods);
}

/* Share pods get their devices written on them before the Binding: a
 * precondition that fails (409) is a lost race, requeued and retried;
 * CPU pods are bound without a patch; after a restart the cache holds
 * each pod on the devices its annotation names. */
Test(fastpath_live, gpu_devices_written_before_the_binding_and_read_back)
{
    log_set_level(LOG_ERROR);
    k8s_stub *stub = stub_new();
    json_t *n = stub_make_node("g0", "32", "64Gi", 110);
    json_object_set_new(json_object_get(json_object_get(n, "status"), "allocatable"),
                        "nvidia.com/gpu", json_string("2"));
    stub_put(stub, STUB_NODE, n);
    json_decref(n);
    enum { NSHARE = 3 };
    for (int i = 0; i < NSHARE; i++) {
        char name[16], uid[24];
        snprintf(name, sizeof name, "s%d", i);
        snprintf(uid, sizeof uid, "uid-%s", name);
        json_t *p = stub_make_pod("default", name, uid, NULL, "1", "1Gi");
        json_t *c0 = json_array_get(json_object_get(json_object_get(p, "spec"), "containers"), 0);
        json_object_set_new(json_object_get(json_object_get(c0, "resources"), "requests"),
                            "agentsched.io/gpu-milli", json_string("600"));
        stub_put(stub, STUB_POD, p);
        json_decref(p);
    }
    put_pods(stub, "cpu", 0, 1);
    /* the first device patch of a share pod loses a race (whichever share
     * comes first; the one left waiting only patches its status) */
    stub_fault(stub, "/api/v1/namespaces/default/pods/s$", STUB_PATCH, STUB_F_STATUS, 409);

    svc *s = NULL;
    fastpath *fp = live_start(stub, 2, false, &s);
    as_diag d = {{0}, {0}};
    /* 3 shares of 600 on 2 devices: two bound, one waits */
    int64_t end = mono_ms() + WAIT_CAP_MS;
    while (bound_on(stub, NULL, NULL) < 3 && mono_ms() < end)
        usleep(5000);
    usleep(200000);
    cr_assert_eq(bound_on(stub, NULL, NULL), 3, "two shares and the CPU pod");
    cr_assert_eq(bound_on(stub, NULL, "cpu0"), 1);
    cr_assert_eq(stub_count(stub, "/api/v1/namespaces/default/pods/cpu0", STUB_PATCH), 0,
                 "a CPU pod is bound without a patch");
    cr_assert_eq(stub_faults_pending(stub), 0, "the 409 was served");
    cr_assert_geq(metrics_counter_get(s->core->m.gpu_annot_conflicts), 1);
    cr_assert_geq(metrics_counter_get(s->core->m.gpu_annot_written), 2);
    int32_t per_dev[2] = {0, 0};
    char devs[64], milli[16], node[64];
    for (int i = 0; i < NSHARE; i++) {
        char name[16];
        snprintf(name, sizeof name, "s%d", i);
        stub_annotation(stub, name, GPUANNOT_DEVICES, devs, sizeof devs);
        if (!bound_on(stub, NULL, name)) {
            /* pending: annotated only if a Binding lost after its patch */
            continue;
        }
        stub_annotation(stub, name, GPUANNOT_MILLI, milli, sizeof milli);
        stub_annotation(stub, name, GPUANNOT_NODE, node, sizeof node);
        cr_assert(devs[0], "%s bound without its annotation", name);
        cr_assert_str_eq(milli, "600");
        cr_assert_str_eq(node, "g0");
        uint32_t m = 0;
        cr_assert(gpuannot_parse_devices(devs, strlen(devs), 2, &m), "%s", devs);
        cr_assert_eq(__builtin_popcount(m), 1);
        per_dev[__builtin_ctz(m)] += 600;
        cache_pod_info info;
        char uid[24];
        snprintf(uid, sizeof uid, "uid-%s", name);
        cache_pod_lookup(s->core->cache, uid, &info);
        cr_assert_eq(info.gpu_devices, m, "%s: the cache holds the written devices", name);
    }
    cr_assert_leq(per_dev[0], 1000);
    cr_assert_leq(per_dev[1], 1000);
    live_stop(s, fp);
    cr_assert_eq(cache_check_invariants(s->core->cache, &d), AS_OK, "%s", d.msg);
    svc_free(s);

    /* A restart: a fresh replica lists the bound pods and holds them where
     * their annotations say, not where its own best fit would. Swap the
     * devices on the API server to tell the two apart. */
    json_t *pods = stub_objects(stub, STUB_POD);
    size_t i;
    json_t *v;
    json_array_foreach(pods, i, v)
    {
        json_t *an = json_object_get(json_object_get(v, "metadata"), "annotations");
        const char *dv = json_string_value(json_object_get(an, GPUANNOT_DEVICES));
        if (!dv || !json_string_value(json_object_get(json_object_get(v, "spec"), "nodeName")))
            continue;
        json_object_set_new(an, GPUANNOT_DEVICES, json_string(strcmp(dv, "0") ? "0" : "1"));
        stub_put(stub, STUB_POD, v);
    }
    json_decref(pods);
    fp = live_start(stub, 2, false, &s);
    end = mono_ms() + 5000;
    int held = 0;
    while (held < 2 && mono_ms() < end) {
        held = 0;
        for (int k = 0; k < NSHARE; k++) {
            char name[16], uid[24];
            snprintf(name, sizeof name, "s%d", k);
            snprintf(uid, sizeof uid, "uid-%s", name);
            if (!bound_on(stub, NULL, name))
                continue;
            stub_annotation(stub, name, GPUANNOT_DEVICES, devs, sizeof devs);
            cache_pod_info info;
            cache_pod_lookup(s->core->cache, uid, &info);
            if (info.state == CACHE_POD_BOUND && info.gpu_devices == (devs[0] == '0' ? 1u : 2u))
                held++;
        }
        usleep(5000);
    }
    cr_assert_eq(held, 2, "the relisted pods sit on their annotated devices");
    usleep(100000);
    cr_assert_eq(bound_on(stub, NULL, NULL), 3, "the third share still does not fit");
    live_stop(s, fp);
    svc_free(s);
    stub_free(stub);
}
