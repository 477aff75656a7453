/*
 * test_k8s_watch.c - list+watch reflectors against the in-process stub API
 * server, with scripted faults. After every fault sequence the invariant is
 * checked: the cache equals a fresh list of the stub (node names, pod uids
 * and their nodes) and cache_check_invariants passes.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "agentsched/core/cache.h"
#include "agentsched/base/json.h"
#include "agentsched/k8s/k8s.h"
#include "agentsched/k8s/watch.h"
#include "agentsched/model/skip.h"
#include "agentsched/base/log.h"
#include "k8s_stub.c"

typedef struct fx {
    k8s_stub *stub;
    model_registry reg;
    cache *c;
    k8s_client *k;
    int shard_calls; /* atomic */
} fx;

typedef void (*tweak_fn)(k8s_config *cfg);

static void msleep(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void on_shards(void *arg, k8s_client *k)
{
    fx *f = arg;
    __atomic_add_fetch(&f->shard_calls, 1, __ATOMIC_RELAXED);
}

static void fx_init(fx *f)
{
    memset(f, 0, sizeof *f);
    log_set_level(getenv("K8S_TEST_DEBUG") ? LOG_DEBUG : LOG_WARN);
    f->stub = stub_new();
    model_registry_init(&f->reg);
    cr_assert_eq(cache_new(&f->reg, &f->c), AS_OK);
}

static void fx_start(fx *f, tweak_fn tweak)
{
    k8s_conn conn = {0};
    conn.server = (char *)stub_url(f->stub);
    k8s_config cfg;
    k8s_config_defaults(&cfg);
    cfg.conn = &conn;
    cfg.backoff_initial_ms = 10;
    cfg.backoff_max_ms = 80;
    cfg.watch_timeout_ms = 3000;
    cfg.list_limit = 3;
    cfg.max_line = 32 * 1024;
    cfg.watch_down_ms = 300;
    cfg.shard_retry_ms = 100;
    cfg.expire_period_ms = 50;
    cfg.connect_timeout_ms = 1000;
    cfg.request_timeout_ms = 3000;
    cfg.shard_hook = on_shards;
    cfg.shard_hook_arg = f;
    if (tweak)
        tweak(&cfg);
    as_diag d = {{0}, {0}};
    cr_assert_eq(k8s_client_new(&cfg, f->c, &f->k, &d), AS_OK, "%s", d.msg);
    cr_assert_eq(k8s_client_start(f->k), AS_OK);
}

static void fx_fini(fx *f)
{
    k8s_client_free(f->k);
    stub_free(f->stub);
    cache_free(f->c);
    model_registry_destroy(&f->reg);
}

static void seed(fx *f, int nodes, int pods)
{
    char name[64], uid[64], node[64];
    for (int i = 0; i < nodes; i++) {
        snprintf(name, sizeof name, "node-%d", i);
        json_t *n = stub_make_node(name, "8", "32Gi", 110);
        stub_put(f->stub, STUB_NODE, n);
        json_decref(n);
    }
    for (int i = 0; i < pods; i++) {
        snprintf(name, sizeof name, "pod-%d", i);
        snprintf(uid, sizeof uid, "uid-%d", i);
        snprintf(node, sizeof node, "node-%d", nodes ? i % nodes : 0);
        /* every fourth pod is pending (unbound) */
        json_t *p = stub_make_pod("default", name, uid, (i % 4 == 3 || !nodes) ? NULL : node,
                                  "100m", "128Mi");
        stub_put(f->stub, STUB_POD, p);
        json_decref(p);
    }
}

/* Compares the cache with the stub's current state. */
static bool consistent(fx *f, char *why, size_t len)
{
    json_t *nodes = stub_objects(f->stub, STUB_NODE);
    json_t *pods = stub_objects(f->stub, STUB_POD);
    bool ok = true;
    cache_read_lock(f->c);
    if (cache_node_count(f->c) != json_array_size(nodes)) {
        snprintf(why, len, "cache has %zu nodes, server %zu", cache_node_count(f->c),
                 json_array_size(nodes));
        ok = false;
    }
    size_t i;
    json_t *v;
    json_array_foreach(nodes, i, v)
    {
        const char *name =
            json_string_value(json_object_get(json_object_get(v, "metadata"), "name"));
        if (ok && !cache_node_find(f->c, name, strlen(name))) {
            snprintf(why, len, "node %s missing from the cache", name);
            ok = false;
        }
    }
    cache_read_unlock(f->c);
    size_t bound = 0;
    json_array_foreach(pods, i, v)
    {
        const char *uid = json_string_value(json_object_get(json_object_get(v, "metadata"), "uid"));
        const char *node =
            json_string_value(json_object_get(json_object_get(v, "spec"), "nodeName"));
        const char *phase =
            json_string_value(json_object_get(json_object_get(v, "status"), "phase"));
        bool terminal = phase && (!strcmp(phase, "Succeeded") || !strcmp(phase, "Failed"));
        cache_pod_info pi;
        cache_pod_lookup(f->c, uid, &pi);
        if (node && !terminal) {
            bound++;
            if (ok && (pi.state != CACHE_POD_BOUND || strcmp(pi.node, node) != 0)) {
                snprintf(why, len, "pod %s: cache state %d node %s, server node %s", uid,
                         (int)pi.state, pi.node, node);
                ok = false;
            }
        } else if (ok && pi.state != CACHE_POD_ABSENT) {
            snprintf(why, len, "pod %s holds capacity in the cache but not on the server", uid);
            ok = false;
        }
    }
    cache_stats st;
    cache_get_stats(f->c, &st);
    if (ok && st.pods_bound + st.pods_assumed != bound) {
        snprintf(why, len, "cache holds %zu pods, server %zu bound (stale pods)",
                 st.pods_bound + st.pods_assumed, bound);
        ok = false;
    }
    json_decref(nodes);
    json_decref(pods);
    return ok;
}

static void wait_consistent(fx *f, int timeout_ms)
{
    char why[512] = "";
    for (int t = 0; t < timeout_ms; t += 20) {
        if (consistent(f, why, sizeof why))
            break;
        msleep(20);
    }
    cr_assert(consistent(f, why, sizeof why), "cache differs from the server: %s", why);
    as_diag d = {{0}, {0}};
    cr_assert_eq(cache_check_invariants(f->c, &d), AS_OK, "%s", d.msg);
}

/* Waits for the first sync and for both watches to be open, so that a
 * following stub_drop_watches really cuts them. */
static void synced(fx *f)
{
    cr_assert(k8s_wait_synced(f->k, 5000));
    for (int t = 0; t < 5000 && stub_watchers(f->stub) < 2; t += 10)
        msleep(10);
    cr_assert_geq(stub_watchers(f->stub), 2);
}

static k8s_status status(fx *f)
{
    k8s_status st;
    k8s_get_status(f->k, &st);
    return st;
}

/* Waits until both kinds have relisted at least once: a watch reopens
 * after its backoff, so the cache may already agree with the server (the
 * mutation touched only the other kind) before the faulted watch is even
 * asked for. */
static void wait_relisted(fx *f, int timeout_ms)
{
    for (int t = 0; t < timeout_ms; t += 20) {
        k8s_status st = status(f);
        if (st.relists[K8S_KIND_NODE] >= 1 && st.relists[K8S_KIND_POD] >= 1)
            break;
        msleep(20);
    }
}

static void mutate(fx *f, int round)
{
    char name[64], uid[64];
    /* delete a node, add one, move nothing, delete a pod, add pods, finish one */
    snprintf(name, sizeof name, "node-%d", round % 3);
    stub_delete(f->stub, STUB_NODE, name);
    snprintf(name, sizeof name, "new-node-%d", round);
    json_t *n = stub_make_node(name, "16", "64Gi", 110);
    stub_put(f->stub, STUB_NODE, n);
    json_decref(n);
    snprintf(uid, sizeof uid, "uid-%d", round);
    stub_delete(f->stub, STUB_POD, uid);
    for (int i = 0; i < 3; i++) {
        snprintf(name, sizeof name, "r%d-pod-%d", round, i);
        snprintf(uid, sizeof uid, "r%d-uid-%d", round, i);
        json_t *p = stub_make_pod("ns1", name, uid, "new-node-0", "250m", "1Gi");
        stub_put(f->stub, STUB_POD, p);
        json_decref(p);
    }
    json_t *pods = stub_objects(f->stub, STUB_POD);
    json_t *p = json_deep_copy(json_array_get(pods, 0));
    if (p) {
        json_object_set_new(json_object_get(p, "status"), "phase", json_string("Succeeded"));
        stub_put(f->stub, STUB_POD, p);
        json_decref(p);
    }
    json_decref(pods);
}

/* ------------------------------------------------------------------ */

Test(k8s_watch, initial_sync_paginated)
{
    fx f;
    fx_init(&f);
    seed(&f, 7, 12);
    fx_start(&f, NULL);
    synced(&f);
    wait_consistent(&f, 2000);
    cr_assert_geq(stub_count(f.stub, "/api/v1/nodes", STUB_LIST), 3, "7 nodes / limit 3 = 3 pages");
    char why[256];
    cr_assert(k8s_ready(f.k, now_ms(), why, sizeof why), "%s", why);
    fx_fini(&f);
}

Test(k8s_watch, events_applied)
{
    fx f;
    fx_init(&f);
    seed(&f, 4, 8);
    fx_start(&f, NULL);
    synced(&f);
    mutate(&f, 1);
    wait_consistent(&f, 3000);
    /* modify a node's allocatable and a pod's node */
    json_t *n = stub_make_node("node-3", "4", "8Gi", 10);
    stub_put(f.stub, STUB_NODE, n);
    json_decref(n);
    wait_consistent(&f, 3000);
    cr_assert_gt(status(&f).events[K8S_KIND_POD], 0);
    cr_assert_eq(status(&f).relists[K8S_KIND_NODE], 0);
    fx_fini(&f);
}

Test(k8s_watch, drop_mid_event_resumes)
{
    fx f;
    fx_init(&f);
    seed(&f, 4, 8);
    fx_start(&f, NULL);
    synced(&f);
    stub_fault(f.stub, "/api/v1/pods", STUB_WATCH, STUB_F_DROP_MID, 0);
    stub_fault(f.stub, "/api/v1/nodes", STUB_WATCH, STUB_F_DROP_MID, 0);
    stub_drop_watches(f.stub);
    msleep(100);
    mutate(&f, 2);
    wait_consistent(&f, 4000);
    cr_assert_eq(stub_faults_pending(f.stub), 0);
    cr_assert_eq(status(&f).relists[K8S_KIND_POD], 0, "a drop resumes without relisting");
    cr_assert_geq(status(&f).reconnects[K8S_KIND_POD], 1);
    fx_fini(&f);
}

Test(k8s_watch, gone_after_compaction_relists)
{
    fx f;
    fx_init(&f);
    seed(&f, 5, 10);
    fx_start(&f, NULL);
    synced(&f);
    stub_pause_watches(f.stub, true);
    mutate(&f, 1);
    mutate(&f, 2);
    stub_compact(f.stub);
    stub_drop_watches(f.stub);
    stub_pause_watches(f.stub, false);
    wait_relisted(&f, 8000);
    wait_consistent(&f, 4000);
    cr_assert_geq(status(&f).relists[K8S_KIND_NODE], 1);
    cr_assert_geq(status(&f).relists[K8S_KIND_POD], 1);
    fx_fini(&f);
}

Test(k8s_watch, error_event_and_http_410_relist)
{
    fx f;
    fx_init(&f);
    seed(&f, 4, 6);
    fx_start(&f, NULL);
    synced(&f);
    stub_fault(f.stub, "/api/v1/pods", STUB_WATCH, STUB_F_ERROR_410, 0);
    stub_fault(f.stub, "/api/v1/nodes", STUB_WATCH, STUB_F_STATUS, 410);
    stub_pause_watches(f.stub, true);
    mutate(&f, 1);
    stub_drop_watches(f.stub);
    stub_pause_watches(f.stub, false);
    wait_relisted(&f, 8000);
    wait_consistent(&f, 4000);
    cr_assert_geq(status(&f).relists[K8S_KIND_POD], 1);
    cr_assert_geq(status(&f).relists[K8S_KIND_NODE], 1);
    fx_fini(&f);
}

Test(k8s_watch, list_errors_retry)
{
    fx f;
    fx_init(&f);
    seed(&f, 4, 6);
    stub_fault(f.stub, "/api/v1/nodes", STUB_LIST, STUB_F_STATUS, 500);
    stub_fault(f.stub, "/api/v1/nodes", STUB_LIST, STUB_F_STATUS, 429);
    stub_fault(f.stub, "/api/v1/pods", STUB_LIST, STUB_F_CLOSE, 0);
    stub_fault(f.stub, "/api/v1/pods", STUB_LIST, STUB_F_SLOW, 300);
    fx_start(&f, NULL);
    synced(&f);
    wait_consistent(&f, 2000);
    cr_assert_eq(stub_faults_pending(f.stub), 0);
    fx_fini(&f);
}

Test(k8s_watch, continue_token_expired_restarts_list)
{
    fx f;
    fx_init(&f);
    seed(&f, 8, 4);
    stub_fault(f.stub, "/api/v1/nodes", STUB_LIST, STUB_F_EXPIRE_CONTINUE, 0);
    fx_start(&f, NULL);
    synced(&f);
    wait_consistent(&f, 2000);
    fx_fini(&f);
}

Test(k8s_watch, garbage_line_reconnects)
{
    fx f;
    fx_init(&f);
    seed(&f, 4, 6);
    fx_start(&f, NULL);
    synced(&f);
    stub_fault(f.stub, "/api/v1/pods", STUB_WATCH, STUB_F_GARBAGE, 0);
    stub_drop_watches(f.stub);
    msleep(100);
    mutate(&f, 3);
    wait_consistent(&f, 4000);
    cr_assert_eq(stub_faults_pending(f.stub), 0);
    fx_fini(&f);
}

Test(k8s_watch, oversized_line_relists)
{
    fx f;
    fx_init(&f);
    seed(&f, 3, 3);
    fx_start(&f, NULL);
    synced(&f);
    json_t *n = stub_make_node("big-node", "8", "32Gi", 110);
    char *big = malloc(48 * 1024);
    memset(big, 'x', 48 * 1024 - 1);
    big[48 * 1024 - 1] = 0;
    json_object_set_new(json_object_get(json_object_get(n, "metadata"), "labels"), "big",
                        json_string(big));
    free(big);
    stub_put(f.stub, STUB_NODE, n);
    json_decref(n);
    wait_consistent(&f, 4000);
    cr_assert_geq(status(&f).relists[K8S_KIND_NODE], 1);
    fx_fini(&f);
}

static void small_pages(k8s_config *cfg)
{
    cfg->list_limit = 500;
    cfg->max_list_body = 64 * 1024;
}

/* A page over max_list_body is asked again with half as many items, down
 * to what fits: 40 nodes of 8 KiB each (320 KiB) against a 64 KiB cap
 * list in pages of 7, and the cache holds every node. */
Test(k8s_watch, page_over_its_cap_is_asked_again_smaller)
{
    fx f;
    fx_init(&f);
    char *pad = stub_filler(8 * 1024 - 1);
    cr_assert_not_null(pad);
    for (int i = 0; i < 40; i++) {
        char name[64];
        snprintf(name, sizeof name, "node-%d", i);
        json_t *n = stub_make_node(name, "8", "32Gi", 110);
        json_object_set_new(json_object_get(n, "metadata"), "annotations",
                            json_pack("{s:s}", "example.com/pad", pad));
        stub_put(f.stub, STUB_NODE, n);
        json_decref(n);
    }
    free(pad);
    fx_start(&f, small_pages);
    synced(&f);
    wait_consistent(&f, 4000);
    cache_read_lock(f.c);
    size_t n = cache_node_count(f.c);
    cache_read_unlock(f.c);
    cr_assert_eq(n, 40);
    /* 500, 250, 125, 62, 31, 15 over the cap; then 6 pages of 7 */
    cr_expect_eq(stub_count(f.stub, "/api/v1/nodes", STUB_LIST), 6 + 6);
    fx_fini(&f);
}

static void short_dead(k8s_config *cfg)
{
    cfg->watch_timeout_ms = 700;
}

Test(k8s_watch, dead_stream_detected)
{
    fx f;
    fx_init(&f);
    seed(&f, 3, 6);
    fx_start(&f, short_dead);
    synced(&f);
    stub_fault(f.stub, "/api/v1/pods", STUB_WATCH, STUB_F_HANG, 0);
    stub_drop_watches(f.stub);
    msleep(100);
    mutate(&f, 1);
    wait_consistent(&f, 5000);
    cr_assert_eq(stub_faults_pending(f.stub), 0);
    cr_assert_geq(status(&f).reconnects[K8S_KIND_POD], 2);
    fx_fini(&f);
}

Test(k8s_watch, bookmark_avoids_relist)
{
    fx f;
    fx_init(&f);
    seed(&f, 3, 3);
    fx_start(&f, NULL);
    synced(&f);
    /* Pod changes move the global resourceVersion; nodes see only a bookmark. */
    mutate(&f, 1);
    msleep(50);
    json_t *p = stub_make_pod("default", "late", "late-uid", "node-1", "1", "1Gi");
    stub_put(f.stub, STUB_POD, p);
    json_decref(p);
    stub_bookmark(f.stub, STUB_NODE);
    wait_consistent(&f, 3000);
    msleep(100);
    stub_compact(f.stub);
    stub_drop_watches(f.stub);
    msleep(300);
    wait_consistent(&f, 3000);
    cr_assert_eq(status(&f).relists[K8S_KIND_NODE], 0, "bookmark resourceVersion was used");
    cr_assert_eq(status(&f).relists[K8S_KIND_POD], 0);
    fx_fini(&f);
}

Test(k8s_watch, readiness_tracks_watch_downtime)
{
    fx f;
    fx_init(&f);
    seed(&f, 3, 3);
    char why[256];
    fx_start(&f, NULL);
    synced(&f);
    cr_assert(k8s_ready(f.k, now_ms(), why, sizeof why), "%s", why);
    for (int i = 0; i < 40; i++)
        stub_fault(f.stub, "/api/v1/pods", STUB_ANY, STUB_F_CLOSE, 0);
    stub_drop_watches(f.stub);
    bool went_down = false;
    for (int t = 0; t < 3000 && !went_down; t += 20) {
        went_down = !k8s_ready(f.k, now_ms(), why, sizeof why);
        msleep(20);
    }
    cr_assert(went_down, "readiness must fail after the watch is down > bound");
    cr_assert(strstr(why, "pods watch down") != NULL, "%s", why);
    bool back = false;
    for (int t = 0; t < 6000 && !back; t += 20) {
        back = k8s_ready(f.k, now_ms(), why, sizeof why);
        msleep(20);
    }
    cr_assert(back, "readiness must recover: %s", why);
    wait_consistent(&f, 2000);
    fx_fini(&f);
}

Test(k8s_watch, not_ready_before_sync)
{
    fx f;
    fx_init(&f);
    seed(&f, 2, 2);
    stub_fault(f.stub, "/api/v1/pods", STUB_LIST, STUB_F_SLOW, 500);
    fx_start(&f, NULL);
    char why[256];
    cr_assert_not(k8s_ready(f.k, now_ms(), why, sizeof why));
    cr_assert(strstr(why, "first sync") != NULL, "%s", why);
    synced(&f);
    fx_fini(&f);
}

Test(k8s_watch, shards_absent_then_installed)
{
    fx f;
    fx_init(&f);
    seed(&f, 2, 0);
    fx_start(&f, NULL);
    synced(&f);
    msleep(150);
    k8s_shard *sh;
    size_t n;
    cr_assert_eq(k8s_shards_copy(f.k, &sh, &n), AS_OK);
    cr_assert_eq(n, 0);
    cr_assert_not(status(&f).shards_present);
    json_t *s1 = json_pack("{s:s,s:s,s:{s:s},s:{s:[s,s]},s:{s:[s]}}", "apiVersion",
                           "shard.volcano.sh/v1alpha1", "kind", "NodeShard", "metadata", "name",
                           "agent-scheduler", "spec", "nodesDesired", "node-0", "node-1", "status",
                           "nodesInUse", "node-0");
    stub_put(f.stub, STUB_SHARD, s1);
    json_decref(s1);
    stub_set_shards_installed(f.stub, true);
    for (int t = 0; t < 3000 && !status(&f).shards_present; t += 20)
        msleep(20);
    cr_assert(status(&f).shards_present);
    cr_assert_eq(k8s_shards_copy(f.k, &sh, &n), AS_OK);
    cr_assert_eq(n, 1);
    cr_assert_str_eq(sh[0].name, "agent-scheduler");
    cr_assert_eq(sh[0].n_desired, 2);
    cr_assert_eq(sh[0].n_in_use, 1);
    k8s_shards_free(sh, n);
    json_t *s2 = json_pack("{s:s,s:{s:s},s:{s:[s]}}", "kind", "NodeShard", "metadata", "name",
                           "volcano", "spec", "nodesDesired", "node-1");
    stub_put(f.stub, STUB_SHARD, s2);
    json_decref(s2);
    for (int t = 0; t < 3000; t += 20) {
        cr_assert_eq(k8s_shards_copy(f.k, &sh, &n), AS_OK);
        k8s_shards_free(sh, n);
        if (n == 2)
            break;
        msleep(20);
    }
    cr_assert_eq(n, 2);
    stub_delete(f.stub, STUB_SHARD, "agent-scheduler");
    for (int t = 0; t < 3000; t += 20) {
        cr_assert_eq(k8s_shards_copy(f.k, &sh, &n), AS_OK);
        bool done = n == 1 && !strcmp(sh[0].name, "volcano");
        k8s_shards_free(sh, n);
        if (done)
            break;
        msleep(20);
    }
    cr_assert_eq(n, 1);
    cr_assert_gt(__atomic_load_n(&f.shard_calls, __ATOMIC_RELAXED), 0);
    fx_fini(&f);
}

Test(k8s_watch, fault_storm_invariant)
{
    fx f;
    fx_init(&f);
    seed(&f, 6, 20);
    fx_start(&f, NULL);
    synced(&f);
    stub_fault_kind kinds[] = {STUB_F_DROP_MID, STUB_F_GARBAGE, STUB_F_ERROR_410, STUB_F_CLOSE};
    for (int round = 0; round < 4; round++) {
        stub_fault(f.stub, "/api/v1/pods", STUB_WATCH, kinds[round], 0);
        stub_fault(f.stub, "/api/v1/nodes", STUB_WATCH, kinds[(round + 1) % 4], 0);
        if (round == 2)
            stub_fault(f.stub, "/api/v1/pods", STUB_LIST, STUB_F_STATUS, 500);
        stub_drop_watches(f.stub);
        mutate(&f, round + 10);
        if (round == 1)
            stub_compact(f.stub);
        wait_consistent(&f, 5000);
    }
    fx_fini(&f);
}

/* With basic auth (or user info in the URL) requests go through libcurl's
 * own transfers instead of the wire: the watch there must survive the
 * same faults, a hung stream included, and keep the cache equal to the
 * API server's. */
static k8s_conn g_basic_conn; /* test-only: the tweak's connection */

static void basic_auth(k8s_config *cfg)
{
    g_basic_conn = *cfg->conn;
    g_basic_conn.username = "alice";
    g_basic_conn.password = "secret";
    cfg->conn = &g_basic_conn;
    cfg->watch_timeout_ms = 700;
}

Test(k8s_watch, libcurl_watch_survives_faults)
{
    fx f;
    fx_init(&f);
    seed(&f, 5, 12);
    fx_start(&f, basic_auth);
    synced(&f);
    char auth[256];
    stub_last_auth(f.stub, auth, sizeof auth);
    cr_assert(!strncmp(auth, "Basic ", 6), "basic auth sent: '%s'", auth);
    mutate(&f, 1);
    wait_consistent(&f, 4000);
    stub_fault_kind kinds[] = {STUB_F_DROP_MID, STUB_F_GARBAGE, STUB_F_ERROR_410, STUB_F_CLOSE,
                               STUB_F_HANG};
    for (int round = 0; round < 5; round++) {
        stub_fault(f.stub, "/api/v1/pods", STUB_WATCH, kinds[round], 0);
        stub_fault(f.stub, "/api/v1/nodes", STUB_WATCH, kinds[(round + 1) % 5], 0);
        stub_drop_watches(f.stub);
        mutate(&f, round + 20);
        wait_consistent(&f, 6000);
    }
    cr_assert_eq(stub_faults_pending(f.stub), 0);
    cr_assert_geq(status(&f).reconnects[K8S_KIND_POD], 5);
    cr_assert_geq(status(&f).relists[K8S_KIND_POD], 1, "the 410 relists");
    fx_fini(&f);
}

/* ---- stream decoder (no network) ---------------------------------- */

static char *read_fixture(const char *name, size_t *len)
{
    char path[512];
    snprintf(path, sizeof path, "%s/k8s/%s", TEST_DATA_DIR, name);
    FILE *fp = fopen(path, "rb");
    cr_assert_not_null(fp, "%s", path);
    fseek(fp, 0, SEEK_END);
    long n = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    cr_assert_eq(fread(b, 1, (size_t)n, fp), (size_t)n);
    b[n] = 0;
    fclose(fp);
    *len = (size_t)n;
    return b;
}

Test(k8s_stream, any_split_gives_same_cache)
{
    log_set_level(LOG_ERROR);
    size_t len;
    char *data = read_fixture("nodes.watch", &len);
    for (size_t split = 0; split <= len; split += (split < 64 ? 1 : 37)) {
        model_registry reg;
        model_registry_init(&reg);
        cache *c;
        cr_assert_eq(cache_new(&reg, &c), AS_OK);
        k8s_stream *s;
        cr_assert_eq(k8s_stream_new(K8S_KIND_NODE, c, NULL, 0, &s), AS_OK);
        cr_assert_eq(k8s_stream_feed(s, data, split), AS_OK);
        cr_assert_eq(k8s_stream_feed(s, data + split, len - split), AS_OK);
        cr_assert_str_eq(k8s_stream_rv(s), "1007");
        cache_read_lock(c);
        cr_assert_eq(cache_node_count(c), 2, "split %zu", split);
        cr_assert_not_null(cache_node_find(c, "n1", 2));
        cr_assert_null(cache_node_find(c, "n2", 2));
        cr_assert_not_null(cache_node_find(c, "n3", 2));
        cache_node *n1 = cache_node_find(c, "n1", 2);
        cr_assert_eq(n1->spec->alloc.v[MODEL_RES_CPU], 16000, "MODIFIED applied");
        cache_read_unlock(c);
        k8s_stream_free(s);
        cache_free(c);
        model_registry_destroy(&reg);
    }
    free(data);
}

Test(k8s_stream, errors_classified)
{
    log_set_level(LOG_ERROR);
    model_registry reg;
    model_registry_init(&reg);
    cache *c;
    cr_assert_eq(cache_new(&reg, &c), AS_OK);
    k8s_stream *s;
    cr_assert_eq(k8s_stream_new(K8S_KIND_POD, c, NULL, 256, &s), AS_OK);
    const char *gone = "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"code\":410,"
                       "\"reason\":\"Expired\"}}\n";
    cr_assert_eq(k8s_stream_feed(s, gone, strlen(gone)), AS_EGONE);
    k8s_stream_reset(s, NULL);
    const char *other = "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"code\":500}}\n";
    cr_assert_eq(k8s_stream_feed(s, other, strlen(other)), AS_EHTTP);
    k8s_stream_reset(s, NULL);
    cr_assert_eq(k8s_stream_feed(s, "not json\n", 9), AS_EPARSE);
    k8s_stream_reset(s, NULL);
    cr_assert_eq(k8s_stream_feed(s, "{\"type\":\"WHAT\",\"object\":{}}\n", 29), AS_EPARSE);
    k8s_stream_reset(s, NULL);
    cr_assert_eq(k8s_stream_feed(s, "[1,2]\n", 6), AS_EPARSE);
    k8s_stream_reset(s, NULL);
    cr_assert_eq(k8s_stream_feed(s, "\n\r\n  \n", 6), AS_OK, "blank lines are keep-alives");
    char big[600];
    memset(big, 'a', sizeof big);
    cr_assert_eq(k8s_stream_feed(s, big, sizeof big), AS_ETOOBIG);
    k8s_stream_reset(s, NULL);
    cr_assert_eq(k8s_stream_feed(s, big, 200), AS_OK);
    cr_assert_eq(k8s_stream_feed(s, big, 200), AS_ETOOBIG, "cap holds across feeds");
    k8s_stream_reset(s, "55");
    cr_assert_str_eq(k8s_stream_rv(s), "55");
    const char *bm = "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"Pod\",\"metadata\":{"
                     "\"resourceVersion\":\"77\"}}}\n";
    cr_assert_eq(k8s_stream_feed(s, bm, strlen(bm)), AS_OK);
    cr_assert_str_eq(k8s_stream_rv(s), "77");
    k8s_stream_free(s);
    cache_free(c);
    model_registry_destroy(&reg);
}

Test(k8s_stream, pod_events_fixture)
{
    log_set_level(LOG_ERROR);
    size_t len;
    char *data = read_fixture("pods.watch", &len);
    model_registry reg;
    model_registry_init(&reg);
    cache *c;
    cr_assert_eq(cache_new(&reg, &c), AS_OK);
    k8s_stream *ns, *ps;
    size_t nlen;
    char *nodes = read_fixture("nodes.watch", &nlen);
    cr_assert_eq(k8s_stream_new(K8S_KIND_NODE, c, NULL, 0, &ns), AS_OK);
    cr_assert_eq(k8s_stream_feed(ns, nodes, nlen), AS_OK);
    cr_assert_eq(k8s_stream_new(K8S_KIND_POD, c, NULL, 0, &ps), AS_OK);
    cr_assert_eq(k8s_stream_feed(ps, data, len), AS_OK);
    cache_pod_info pi;
    cache_pod_lookup(c, "p1", &pi);
    cr_assert_eq(pi.state, CACHE_POD_BOUND);
    cr_assert_str_eq(pi.node, "n3", "moved by MODIFIED");
    cache_pod_lookup(c, "p2", &pi);
    cr_assert_eq(pi.state, CACHE_POD_ABSENT, "deleted");
    cache_pod_lookup(c, "p3", &pi);
    cr_assert_eq(pi.state, CACHE_POD_ABSENT, "Succeeded releases");
    cache_pod_lookup(c, "p4", &pi);
    cr_assert_eq(pi.state, CACHE_POD_ABSENT, "pending holds nothing");
    as_diag d = {{0}, {0}};
    cr_assert_eq(cache_check_invariants(c, &d), AS_OK, "%s", d.msg);
    k8s_stream_free(ns);
    k8s_stream_free(ps);
    cache_free(c);
    model_registry_destroy(&reg);
    free(data);
    free(nodes);
}

/* ---- the decoder's skip rules are the model's (test_skip.c) -------- */

Test(k8s_stream, skip_rules_by_kind)
{
    cr_assert_eq(k8s_stream_skip(K8S_KIND_POD), model_skip_pod_watch());
    cr_assert_eq(k8s_stream_skip(K8S_KIND_NODE), model_skip_node());
    cr_assert_null(k8s_stream_skip(K8S_KIND_NODESHARD));
}

/* ---- pod hook (the fast path's feed of pending pods) ---------------- */

typedef struct hook_log {
    pthread_mutex_t mu;
    int added, modified, deleted, sync_begin, sync_end, kept;
    model_pod *pending[64];
} hook_log;

static bool on_pod(void *arg, k8s_event_type ev, model_pod *pod)
{
    hook_log *h = arg;
    pthread_mutex_lock(&h->mu);
    bool take = false;
    switch (ev) {
    case K8S_EV_ADDED:
        h->added++;
        if (!pod->node_name && h->kept < 64) {
            h->pending[h->kept++] = pod; /* keep pending pods, as a queue would */
            take = true;
        }
        break;
    case K8S_EV_MODIFIED:
        h->modified++;
        break;
    case K8S_EV_DELETED:
        h->deleted++;
        break;
    case K8S_EV_SYNC_BEGIN:
        h->sync_begin++;
        break;
    case K8S_EV_SYNC_END:
        h->sync_end++;
        break;
    default:
        break;
    }
    pthread_mutex_unlock(&h->mu);
    return take;
}

static hook_log *g_hook_for_tweak; /* test-only: passes the log to the tweak */

static void with_pod_hook(k8s_config *cfg)
{
    cfg->pod_hook = on_pod;
    cfg->pod_hook_arg = g_hook_for_tweak;
}

Test(k8s_watch, pod_hook_sees_events_and_relists)
{
    fx f;
    fx_init(&f);
    seed(&f, 2, 8); /* pods 3 and 7 are pending */
    hook_log h = {.mu = PTHREAD_MUTEX_INITIALIZER};
    g_hook_for_tweak = &h;
    fx_start(&f, with_pod_hook);
    synced(&f);
    json_t *p = stub_make_pod("default", "late", "late-uid", NULL, "1", "1Gi");
    stub_put(f.stub, STUB_POD, p);
    json_decref(p);
    stub_delete(f.stub, STUB_POD, "uid-0");
    for (int t = 0; t < 3000; t += 20) {
        pthread_mutex_lock(&h.mu);
        bool done = h.added >= 9 && h.deleted >= 1;
        pthread_mutex_unlock(&h.mu);
        if (done)
            break;
        msleep(20);
    }
    pthread_mutex_lock(&h.mu);
    cr_assert_geq(h.added, 9);
    cr_assert_geq(h.deleted, 1);
    cr_assert_eq(h.kept, 3, "two pending from the list, one from the watch");
    cr_assert_eq(h.sync_begin, 1);
    cr_assert_eq(h.sync_end, 1);
    pthread_mutex_unlock(&h.mu);
    /* a relist is bracketed again */
    stub_fault(f.stub, "/api/v1/pods", STUB_WATCH, STUB_F_ERROR_410, 0);
    stub_drop_watches(f.stub);
    for (int t = 0; t < 3000; t += 20) {
        pthread_mutex_lock(&h.mu);
        bool done = h.sync_end >= 2;
        pthread_mutex_unlock(&h.mu);
        if (done)
            break;
        msleep(20);
    }
    wait_consistent(&f, 3000);
    fx_fini(&f);
    cr_assert_eq(h.sync_begin, 2);
    cr_assert_eq(h.sync_end, 2);
    for (int i = 0; i < h.kept; i++)
        model_pod_free(h.pending[i]);
}
