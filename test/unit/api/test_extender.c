/* test_extender.c - the kube-scheduler extender verbs, driven by fixtures
 * (test/unit/data/extender/<verb>/<case>/{request.json,expected.json[,status]})
 * plus the stateful bind paths and a table of hostile requests. */
#include <criterion/criterion.h>
#include <curl/curl.h>
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agentsched/base/doc.h"
#include "agentsched/api/extargs.h"
#include "agentsched/api/extender.h"
#include "agentsched/core/policy.h"
#include "agentsched/base/log.h"
#include "agentsched/serve/svc.h"

#define DATA TEST_DATA_DIR "/extender"

#include "core_fixtures.h"
#include "handler_fixtures.h"

static svc *new_svc(void)
{
    return new_svc_from(DATA "/cluster.yaml");
}

static size_t run_fixtures(const char *verb, http_handler_fn fn)
{
    return run_handler_fixtures(DATA, verb, fn, false);
}

Test(extender, fixtures_filter)
{
    cr_assert_geq(run_fixtures("filter", extender_handle_filter), 10);
}

Test(extender, fixtures_prioritize)
{
    cr_assert_geq(run_fixtures("prioritize", extender_handle_prioritize), 4);
}

Test(extender, fixtures_bind)
{
    cr_assert_geq(run_fixtures("bind", extender_handle_bind), 3);
}

Test(extender, fixtures_preempt)
{
    cr_assert_geq(run_fixtures("preempt", extender_handle_preempt), 4);
}

Test(extender, routes)
{
    /* The service's one route table serves each verb with its handler. */
    svc *s = new_svc();
    size_t n = 0;
    const http_route *r = svc_routes(s, &n);
    const char *paths[] = {"/scheduler/filter", "/scheduler/prioritize", "/scheduler/bind",
                           "/scheduler/preempt"};
    http_handler_fn fns[] = {extender_handle_filter, extender_handle_prioritize,
                             extender_handle_bind, extender_handle_preempt};
    for (size_t v = 0; v < 4; v++) {
        size_t found = 0;
        for (size_t i = 0; i < n; i++)
            if (strcmp(r[i].path, paths[v]) == 0) {
                cr_assert_str_eq(r[i].method, "POST");
                cr_assert(r[i].fn == fns[v], "%s", paths[v]);
                found++;
            }
        cr_assert_eq(found, 1, "%s", paths[v]);
    }
    svc_free(s);
}

static char *pod_args(const char *name, const char *uid, const char *cpu, const char *names_json)
{
    char *s = NULL;
    cr_assert(asprintf(&s,
                       "{\"Pod\":{\"metadata\":{\"name\":\"%s\",\"namespace\":\"default\","
                       "\"uid\":\"%s\"},\"spec\":{\"containers\":[{\"name\":\"c\",\"resources\":"
                       "{\"requests\":{\"cpu\":\"%s\",\"memory\":\"512Mi\"}}}]}},"
                       "\"NodeNames\":%s}",
                       name, uid, cpu, names_json) > 0);
    return s;
}

static char *bind_args(const char *name, const char *uid, const char *node)
{
    char *s = NULL;
    cr_assert(asprintf(&s,
                       "{\"PodName\":\"%s\",\"PodNamespace\":\"default\",\"PodUID\":\"%s\","
                       "\"Node\":\"%s\"}",
                       name, uid, node) > 0);
    return s;
}

static const char *error_of(const reply *r)
{
    return json_string_value(json_object_get(r->json, "Error"));
}

static void filter_ok(svc *s, const char *name, const char *uid, const char *cpu, const char *names,
                      size_t want_pass)
{
    char *args = pod_args(name, uid, cpu, names);
    reply r = call(s, extender_handle_filter, args);
    cr_assert_eq(r.status, 200, "%s", r.raw);
    cr_assert_str_eq(error_of(&r), "");
    cr_assert_eq(json_array_size(json_object_get(r.json, "NodeNames")), want_pass, "%s", r.raw);
    reply_free(&r);
    free(args);
}

static int64_t node_cpu(svc *s, const char *node)
{
    cache_read_lock(s->core->cache);
    const cache_node *n = cache_node_find(s->core->cache, node, strlen(node));
    int64_t v = n ? cache_node_requested(n, MODEL_RES_CPU) : -1;
    cache_read_unlock(s->core->cache);
    return v;
}

Test(extender, bind_after_filter_is_idempotent_and_exclusive)
{
    svc *s = new_svc();
    filter_ok(s, "agent-1", "uid-agent-1", "500m", "[\"last-slot\",\"node1\"]", 2);
    char *b = bind_args("agent-1", "uid-agent-1", "last-slot");
    reply r = call(s, extender_handle_bind, b);
    cr_assert_eq(r.status, 200);
    cr_assert_str_eq(error_of(&r), "", "%s", r.raw);
    reply_free(&r);
    cr_assert_eq(node_cpu(s, "last-slot"), 500);
    /* kube-scheduler retries a bind whose reply was lost */
    r = call(s, extender_handle_bind, b);
    cr_assert_str_eq(error_of(&r), "", "%s", r.raw);
    reply_free(&r);
    cr_assert_eq(node_cpu(s, "last-slot"), 500);
    free(b);
    /* the same pod to another node is refused */
    b = bind_args("agent-1", "uid-agent-1", "node1");
    r = call(s, extender_handle_bind, b);
    cr_assert_eq(r.status, 200);
    cr_assert(strstr(error_of(&r), "last-slot"), "%s", r.raw);
    reply_free(&r);
    free(b);
    cr_assert_eq(node_cpu(s, "node1"), 0);
    /* the next filter sees the capacity as taken */
    filter_ok(s, "agent-2", "uid-agent-2", "600m", "[\"last-slot\"]", 0);
    as_diag d = {{0}, {0}};
    cr_assert_eq(cache_check_invariants(s->core->cache, &d), AS_OK, "%s", d.msg);
    svc_free(s);
}

Test(extender, bind_without_filter_is_refused)
{
    svc *s = new_svc();
    char *b = bind_args("stranger", "uid-stranger", "node1");
    reply r = call(s, extender_handle_bind, b);
    cr_assert_eq(r.status, 403);
    cr_assert(strstr(error_of(&r), "agentsched did not filter this pod"), "%s", r.raw);
    reply_free(&r);
    free(b);
    cr_assert_eq(node_cpu(s, "node1"), 0);
    svc_free(s);
}

Test(extender, prioritize_notes_for_bind)
{
    svc *s = new_svc();
    char *args = pod_args("agent-p", "uid-p", "250m", "[\"big-1\",\"node1\",\"small-1\"]");
    reply r = call(s, extender_handle_prioritize, args);
    cr_assert_eq(r.status, 200);
    cr_assert_eq(json_array_size(r.json), 3);
    for (size_t i = 0; i < 3; i++) {
        json_int_t sc = json_integer_value(json_object_get(json_array_get(r.json, i), "Score"));
        cr_assert(sc >= 0 && sc <= 10);
    }
    cr_assert_eq(json_integer_value(json_object_get(json_array_get(r.json, 2), "Score")), 0);
    reply_free(&r);
    free(args);
    char *b = bind_args("agent-p", "uid-p", "big-1");
    r = call(s, extender_handle_bind, b);
    cr_assert_str_eq(error_of(&r), "", "%s", r.raw);
    reply_free(&r);
    free(b);
    cr_assert_eq(node_cpu(s, "big-1"), 250);
    svc_free(s);
}

/* prioritize right after filter for the same Pod bytes (kube-scheduler's
 * cycle) answers from the filter's memo, exactly as a fresh evaluation
 * would on an unchanged cluster; anything else evaluates afresh. */
Test(extender, prioritize_after_filter_uses_the_memo)
{
    svc *s = new_svc();
    const char *names = "[\"big-1\",\"node1\",\"small-1\",\"last-slot\"]";
    char *args = pod_args("agent-m", "uid-m", "250m", names);
    /* a fresh evaluation first: nothing memoised yet */
    reply fresh = call(s, extender_handle_prioritize, args);
    cr_assert_eq(fresh.status, 200, "%s", fresh.raw);
    cr_assert_eq(metrics_counter_get(s->core->m.memo_misses), 1);
    filter_ok(s, "agent-m", "uid-m", "250m", names, 3);
    reply hit = call(s, extender_handle_prioritize, args);
    cr_assert_eq(metrics_counter_get(s->core->m.memo_hits), 1);
    cr_assert_str_eq(hit.raw, fresh.raw);
    reply_free(&hit);
    /* consumed: the next prioritize evaluates again, with the same answer */
    reply again = call(s, extender_handle_prioritize, args);
    cr_assert_eq(metrics_counter_get(s->core->m.memo_misses), 2);
    cr_assert_str_eq(again.raw, fresh.raw);
    reply_free(&again);
    /* the nodes that passed, in the filter's order (what kube-scheduler
     * sends), and the same nodes reordered: both answered from the memo,
     * as a fresh evaluation would */
    static const char *const subsets[] = {"[\"big-1\",\"node1\",\"last-slot\"]",
                                          "[\"last-slot\",\"node1\",\"big-1\"]"};
    for (int k = 0; k < 2; k++) {
        char *sub = pod_args("agent-m", "uid-m", "250m", subsets[k]);
        reply want = call(s, extender_handle_prioritize, sub); /* no memo: fresh */
        uint64_t hits = metrics_counter_get(s->core->m.memo_hits);
        filter_ok(s, "agent-m", "uid-m", "250m", names, 3);
        reply got = call(s, extender_handle_prioritize, sub);
        cr_assert_eq(metrics_counter_get(s->core->m.memo_hits), hits + 1, "%s", subsets[k]);
        cr_assert_str_eq(got.raw, want.raw);
        reply_free(&want);
        reply_free(&got);
        free(sub);
    }
    uint64_t misses = metrics_counter_get(s->core->m.memo_misses);
    /* a name the filter never saw: evaluated afresh (unknown -> 0) */
    filter_ok(s, "agent-m", "uid-m", "250m", names, 3);
    char *more = pod_args("agent-m", "uid-m", "250m",
                          "[\"big-1\",\"node1\",\"small-1\",\"last-slot\",\"nope\"]");
    reply r = call(s, extender_handle_prioritize, more);
    cr_assert_eq(r.status, 200);
    cr_assert_eq(metrics_counter_get(s->core->m.memo_misses), misses + 1);
    cr_assert_eq(json_array_size(r.json), 5);
    cr_assert_eq(json_integer_value(json_object_get(json_array_get(r.json, 4), "Score")), 0);
    reply_free(&r);
    free(more);
    /* different Pod bytes (another pod): no hit */
    filter_ok(s, "agent-m", "uid-m", "250m", names, 3);
    char *other = pod_args("agent-o", "uid-o", "250m", names);
    uint64_t hits = metrics_counter_get(s->core->m.memo_hits);
    r = call(s, extender_handle_prioritize, other);
    cr_assert_eq(metrics_counter_get(s->core->m.memo_hits), hits);
    reply_free(&r);
    free(other);
    /* a new policy since the filter: no hit */
    score_policy *p = NULL;
    cr_assert_eq(score_policy_new_strategy(&s->core->reg, SCORE_LEAST_ALLOCATED, &p), AS_OK);
    core_policy_set(s->core, p);
    r = call(s, extender_handle_prioritize, args);
    cr_assert_eq(metrics_counter_get(s->core->m.memo_hits), hits);
    reply_free(&r);
    reply_free(&fresh);
    free(args);
    svc_free(s);
}

/* fragment's reserve through the verbs: once 20 GPU pods of 4 cores a GPU
 * were seen, gpu-2a (16 cores, 0.3 used; 600 milli-GPU free) keeps 2.4
 * cores for its GPUs. A CPU-only pod of 14 cores fails it with the kept
 * reason (in FailedNodes, not unresolvable), one of 10 cores passes, and
 * preempt drops gpu-2a from the victims' nodes: with no victim there the
 * 14 cores would still leave 1.7 beside 600 free milli-GPU. */
Test(extender, a_node_kept_for_its_gpus_fails_filter_and_preempt)
{
    svc *s = new_svc();
    teach_gpu_pods(s, 20);

    char *args = pod_args("cpu-big", "uid-cb", "14", "[\"gpu-2a\",\"big-1\"]");
    reply r = call(s, extender_handle_filter, args);
    cr_assert_eq(r.status, 200, "%s", r.raw);
    const json_t *pass = json_object_get(r.json, "NodeNames");
    cr_assert_eq(json_array_size(pass), 1, "%s", r.raw);
    cr_assert_str_eq(json_string_value(json_array_get(pass, 0)), "big-1");
    cr_assert_str_eq(
        json_string_value(json_object_get(json_object_get(r.json, "FailedNodes"), "gpu-2a")),
        "node(s) kept their cpu and memory for their free GPUs", "%s", r.raw);
    cr_assert_null(
        json_object_get(json_object_get(r.json, "FailedAndUnresolvableNodes"), "gpu-2a"));
    reply_free(&r);
    free(args);
    filter_ok(s, "cpu-small", "uid-cs", "10", "[\"gpu-2a\",\"big-1\"]", 2);

    char *pre = NULL;
    cr_assert(asprintf(&pre,
                       "{\"Pod\":{\"metadata\":{\"name\":\"cpu-big\",\"namespace\":\"default\","
                       "\"uid\":\"uid-cb\"},\"spec\":{\"containers\":[{\"name\":\"c\","
                       "\"resources\":{\"requests\":{\"cpu\":\"14\",\"memory\":\"512Mi\"}}}]}},"
                       "\"NodeNameToMetaVictims\":{\"gpu-2a\":{\"Pods\":[],\"NumPDBViolations\":0},"
                       "\"big-1\":{\"Pods\":[],\"NumPDBViolations\":0}}}") > 0);
    r = call(s, extender_handle_preempt, pre);
    cr_assert_eq(r.status, 200, "%s", r.raw);
    const json_t *v = json_object_get(r.json, "NodeNameToMetaVictims");
    cr_assert_eq(json_object_size(v), 1, "%s", r.raw);
    cr_assert(json_object_get(v, "big-1"), "%s", r.raw);
    reply_free(&r);
    free(pre);
    /* 13.5 cores: on gpu-2a emptied they would leave 2.5 of its 16 (not
     * kept), but the pods there stay (no victim), and with their 0.3 the
     * pod leaves 2.2 */
    cr_assert(
        asprintf(&pre,
                 "{\"Pod\":{\"metadata\":{\"name\":\"cpu-mid\",\"namespace\":\"default\","
                 "\"uid\":\"uid-cm\"},\"spec\":{\"containers\":[{\"name\":\"c\","
                 "\"resources\":{\"requests\":{\"cpu\":\"13500m\",\"memory\":\"512Mi\"}}}]}},"
                 "\"NodeNameToMetaVictims\":{\"gpu-2a\":{\"Pods\":[],\"NumPDBViolations\":0}}}") >
        0);
    r = call(s, extender_handle_preempt, pre);
    cr_assert_eq(r.status, 200, "%s", r.raw);
    cr_assert_eq(json_object_size(json_object_get(r.json, "NodeNameToMetaVictims")), 0, "%s",
                 r.raw);
    reply_free(&r);
    free(pre);
    svc_free(s);
}

/* preempt_share_on is preempt's answer for a share of milli (1 core,
 * tolerating gpu-1's taint) on node, evicting there the pods of victims
 * (the inside of a Pods array: MetaVictims, possibly none), under the
 * fragment policy of policy_yaml having seen 20 such shares (caller
 * frees). */
static reply preempt_share_on(svc *s, const char *policy_yaml, int milli, const char *node,
                              const char *victims)
{
    char *pod = NULL, *pre = NULL;
    cr_assert(asprintf(&pod,
                       "{\"metadata\":{\"name\":\"share\",\"namespace\":\"default\","
                       "\"uid\":\"uid-share\"},\"spec\":{\"tolerations\":[{\"key\":"
                       "\"nvidia.com/gpu\",\"operator\":\"Exists\",\"effect\":\"NoSchedule\"}],"
                       "\"containers\":[{\"name\":\"c\","
                       "\"resources\":{\"requests\":{\"cpu\":\"1\",\"memory\":\"1Gi\","
                       "\"agentsched.io/gpu-milli\":\"%d\"}}}]}}",
                       milli) > 0);
    score_policy *p = fx_policy(&s->core->reg, policy_yaml);
    as_diag d = {{0}, {0}};
    json_t *j = json_loads(pod, 0, NULL);
    cr_assert(j);
    model_pod *g = NULL;
    cr_assert_eq(model_pod_from_json(&s->core->reg, j, &g, &d), AS_OK, "%s", d.msg);
    for (int k = 0; k < 20; k++)
        score_observe_pod(p, g);
    model_pod_free(g);
    json_decref(j);
    core_policy_set(s->core, p);
    cr_assert(asprintf(&pre,
                       "{\"Pod\":%s,\"NodeNameToMetaVictims\":{\"%s\":{\"Pods\":"
                       "[%s],\"NumPDBViolations\":0}}}",
                       pod, node, victims) > 0);
    reply r = call(s, extender_handle_preempt, pre);
    cr_assert_eq(r.status, 200, "%s", r.raw);
    free(pre);
    free(pod);
    return r;
}

/* preempt_offers: does r's answer name node? */
static bool preempt_offers(const reply *r, const char *node)
{
    const json_t *v = json_object_get(r->json, "NodeNameToMetaVictims");
    cr_assert(json_is_object(v), "%s", r->raw);
    return json_object_get(v, node) != NULL;
}

/* fragment's keepFree through preempt: 2 of the fixture's 12 devices are
 * wholly free (gpu-1's). An 810-milli share (no share seen fits the 190 it
 * leaves) would take the device that evicting gpu-3a's whole-GPU pod
 * frees; after that eviction 3 of 12 are free. With keepFree 0.2 free
 * devices are then not short and gpu-3a is a node for the share, though
 * 2 of 12 are short now; with keepFree 0.3 they stay short and preempt
 * drops it. */
Test(extender, preempt_counts_the_devices_its_victims_free)
{
    svc *s = new_svc();
    uint64_t dev = 0, nfree = 0;
    cache_gpu_devices(s->core->cache, &dev, &nfree);
    cr_assert_eq(dev, 12);
    cr_assert_eq(nfree, 2);
    const char *victim = "{\"UID\":\"gpu-3a-whole\"}";
    reply r = preempt_share_on(s, "strategy: fragment\nfragment:\n  keepFree: 0.2\n", 810, "gpu-3a",
                               victim);
    cr_assert_eq(json_object_size(json_object_get(r.json, "NodeNameToMetaVictims")), 1, "%s",
                 r.raw);
    cr_assert(preempt_offers(&r, "gpu-3a"), "%s", r.raw);
    reply_free(&r);
    r = preempt_share_on(s, "strategy: fragment\nfragment:\n  keepFree: 0.3\n", 810, "gpu-3a",
                         victim);
    cr_assert_not(preempt_offers(&r, "gpu-3a"), "%s", r.raw);
    reply_free(&r);
    svc_free(s);
}

/* fragment's keepFreeFragmented through preempt: the milli its victims
 * free count among the cluster's pieces. Shares fill gpu-1's third device
 * to 300 free and every piece elsewhere but gpu-3a's 500, so 1 of 12
 * devices is wholly free and the pieces hold 800: the free device holds
 * 1000 of the 1800 free, more than half, and an 810 share may open it.
 * Evicting a 300 share on gpu-1 leaves 600 there (too little for the 810)
 * and 2100 free, of which the device holds less than half: under the default
 * policy devices are short in the band (1 of 12, at most 0.1), not under
 * keepFree (0.05) alone, and preempt drops gpu-1, where forgetting the
 * freed milli would offer it. Without the band it offers gpu-1. */
Test(extender, preempt_counts_the_milli_its_victims_free)
{
    svc *s = new_svc();
    cache *c = s->core->cache;
    model_registry *reg = &s->core->reg;
    fx_bind_gpu(reg, c, "g1-400", "gpu-1", 1, 400);
    fx_bind_gpu(reg, c, "g1-300", "gpu-1", 1, 300);
    static const struct {
        const char *uid, *node;
        uint32_t milli;
    } fill[] = {{"f2a-200", "gpu-2a", 200},
                {"f2a-400", "gpu-2a", 400},
                {"f2b-200", "gpu-2b", 200},
                {"f2b-400", "gpu-2b", 400},
                {"f3b-500", "gpu-3b", 500}};
    for (size_t i = 0; i < sizeof fill / sizeof fill[0]; i++)
        fx_bind_gpu(reg, c, fill[i].uid, fill[i].node, 1, fill[i].milli);
    uint64_t dev = 0, nfree = 0;
    cache_gpu_devices(c, &dev, &nfree);
    cr_assert_eq(dev, 12);
    cr_assert_eq(nfree, 1);
    cr_assert_eq(cache_gpu_free_milli(c), 1800);
    const char *band = "strategy: fragment\n";
    reply r = preempt_share_on(s, band, 810, "gpu-1", "");
    cr_assert(preempt_offers(&r, "gpu-1"), "%s", r.raw);
    reply_free(&r);
    r = preempt_share_on(s, band, 810, "gpu-1", "{\"UID\":\"g1-300\"}");
    cr_assert_not(preempt_offers(&r, "gpu-1"), "%s", r.raw);
    reply_free(&r);
    r = preempt_share_on(s, "strategy: fragment\nfragment:\n  keepFreeFragmented: 0.05\n", 810,
                         "gpu-1", "{\"UID\":\"g1-300\"}");
    cr_assert(preempt_offers(&r, "gpu-1"), "%s", r.raw);
    reply_free(&r);
    svc_free(s);
}

/* ---- preempt against the filter, on random clusters ----------------- */

enum { PR_NODES = 5, PR_PODS = 24 };

/* One random world: nodes r0..r4 of 4 to 16 cores and 0 to 4 GPUs, and
 * the pods bound on them (uids rp-0, rp-1, ...; -1: did not fit). */
typedef struct pr_pod {
    int node; /* -1: not placed */
    int64_t cpu;
    uint32_t count, milli; /* count 0: no GPU; milli 0: whole */
} pr_pod;

typedef struct pr_world {
    uint32_t ngpus[PR_NODES];
    int64_t cpu[PR_NODES];
    pr_pod pods[PR_PODS];
} pr_world;

static void pr_draw(uint64_t *s, pr_world *w)
{
    static const uint32_t gpus[4] = {0, 1, 2, 4};
    int32_t dev[PR_NODES][4] = {{0}};
    int64_t used[PR_NODES] = {0};
    for (int n = 0; n < PR_NODES; n++) {
        w->ngpus[n] = gpus[fx_rnd(s, 4)];
        w->cpu[n] = 4000 * (1 + (int64_t)fx_rnd(s, 4));
    }
    static const uint32_t shares[4] = {200, 300, 500, 700};
    for (int i = 0; i < PR_PODS; i++) {
        pr_pod *p = &w->pods[i];
        int n = (int)fx_rnd(s, PR_NODES);
        *p = (pr_pod){.node = -1, .cpu = 250 * (1 + (int64_t)fx_rnd(s, 8))};
        uint32_t kind = fx_rnd(s, 3);
        if (kind && w->ngpus[n]) {
            p->count = 1;
            p->milli = kind == 1 ? shares[fx_rnd(s, 4)] : 0;
        }
        if (used[n] + p->cpu > w->cpu[n])
            continue;
        if (p->count) {
            /* the cache's choice: best fit for a share, a free device for
             * a whole GPU */
            int best = -1;
            int32_t need = p->milli ? (int32_t)p->milli : 1000;
            for (uint32_t d = 0; d < w->ngpus[n]; d++) {
                int32_t f = 1000 - dev[n][d];
                if (f >= need && (p->milli || dev[n][d] == 0) &&
                    (best < 0 || f < 1000 - dev[n][best]))
                    best = (int)d;
            }
            if (best < 0)
                continue;
            dev[n][best] += need;
        }
        used[n] += p->cpu;
        p->node = n;
    }
}

/* pr_svc: the fixture cluster plus w's nodes and pods (as pr_draw placed
 * them, so the cache chooses the same devices), its policy having
 * seen 20 one-GPU pods (so fragment keeps CPU beside free GPUs). */
static svc *pr_svc(const pr_world *w)
{
    svc *s = new_svc();
    teach_gpu_pods(s, 20);
    model_registry *reg = &s->core->reg;
    for (int n = 0; n < PR_NODES; n++) {
        char name[8];
        snprintf(name, sizeof name, "r%d", n);
        model_node *node = fx_node(name, w->cpu[n], 64 * FX_GI, 110);
        if (w->ngpus[n])
            fx_node_gpus(reg, node, w->ngpus[n]);
        cr_assert_eq(cache_node_upsert(s->core->cache, node), AS_OK);
    }
    for (int i = 0; i < PR_PODS; i++) {
        const pr_pod *p = &w->pods[i];
        if (p->node < 0)
            continue;
        char uid[16], node[8];
        snprintf(uid, sizeof uid, "rp-%d", i);
        snprintf(node, sizeof node, "r%d", p->node);
        model_pod *m = fx_pod(uid, uid, p->cpu, FX_GI);
        if (p->count)
            fx_pod_gpu(reg, m, p->count, p->milli);
        fx_pod_bind(m, node);
        cr_assert_eq(cache_pod_upsert(s->core->cache, m), AS_OK);
        model_pod_free(m);
    }
    return s;
}

/* Random clusters (seeded): preempt keeps a node for a pod, with the
 * victims named by UID only, exactly where the filter passes the pod on
 * that node once the victims are deleted. */
Test(extender, random_preempt_answers_as_the_filter_after_the_evictions)
{
    int kept = 0, dropped = 0;
    for (uint64_t seed = 1; seed <= 30; seed++) {
        uint64_t st = seed * 0x9E3779B97F4A7C15ull;
        pr_world w;
        pr_draw(&st, &w);
        /* the preemptor: CPU only, a share or a whole GPU */
        int64_t cpu = 500 * (1 + (int64_t)fx_rnd(&st, 16));
        uint32_t kind = fx_rnd(&st, 3), milli = 100 * (1 + fx_rnd(&st, 9));
        char extra[64] = "";
        if (kind == 1)
            snprintf(extra, sizeof extra, ",\"agentsched.io/gpu-milli\":\"%u\"", milli);
        else if (kind == 2)
            snprintf(extra, sizeof extra, ",\"nvidia.com/gpu\":\"1\"");
        char pod[512];
        snprintf(pod, sizeof pod,
                 "{\"metadata\":{\"name\":\"pre\",\"namespace\":\"default\",\"uid\":\"uid-pre\"},"
                 "\"spec\":{\"containers\":[{\"name\":\"c\",\"resources\":{\"requests\":"
                 "{\"cpu\":\"%lldm\",\"memory\":\"1Gi\"%s},\"limits\":{%s}}}]}}",
                 (long long)cpu, extra, kind ? extra + 1 : "");
        /* victims: a random half of each node's pods */
        buf pre;
        buf_init(&pre, 0);
        buf_printf(&pre, "{\"Pod\":%s,\"NodeNameToMetaVictims\":{", pod);
        for (int n = 0; n < PR_NODES; n++) {
            buf_printf(&pre, "%s\"r%d\":{\"Pods\":[", n ? "," : "", n);
            bool first = true;
            for (int i = 0; i < PR_PODS; i++) {
                if (w.pods[i].node == n && fx_rnd(&st, 2)) {
                    buf_printf(&pre, "%s{\"UID\":\"rp-%d\"}", first ? "" : ",", i);
                    first = false;
                }
            }
            buf_puts(&pre, "],\"NumPDBViolations\":0}");
        }
        buf_puts(&pre, "}}");
        svc *s = pr_svc(&w);
        reply r = call_n(s, extender_handle_preempt, pre.data, pre.len);
        cr_assert_eq(r.status, 200, "%s", r.raw);
        const json_t *keep = json_object_get(r.json, "NodeNameToMetaVictims");
        json_t *req = json_loadb(pre.data, pre.len, 0, NULL);
        cr_assert_not_null(req);
        for (int n = 0; n < PR_NODES; n++) {
            char name[8];
            snprintf(name, sizeof name, "r%d", n);
            const json_t *ent = json_object_get(keep, name);
            /* the same node after its victims (as listed in the request)
             * are deleted, asked of the filter */
            const json_t *vs = json_object_get(
                json_object_get(json_object_get(req, "NodeNameToMetaVictims"), name), "Pods");
            svc *after = pr_svc(&w);
            size_t k;
            const json_t *v;
            json_array_foreach(vs, k, v)
            {
                cr_assert_eq(cache_pod_delete(after->core->cache,
                                              json_string_value(json_object_get(v, "UID"))),
                             AS_OK);
            }
            char *args = NULL;
            cr_assert(asprintf(&args, "{\"Pod\":%s,\"NodeNames\":[\"%s\"]}", pod, name) > 0);
            reply f = call(after, extender_handle_filter, args);
            cr_assert_eq(f.status, 200, "%s", f.raw);
            bool passes = json_array_size(json_object_get(f.json, "NodeNames")) == 1;
            cr_expect_eq(ent != NULL, passes, "seed %llu node %s: preempt %s, filter after %s: %s",
                         (unsigned long long)seed, name, ent ? "keeps" : "drops",
                         passes ? "passes" : "fails", f.raw);
            kept += ent != NULL;
            dropped += ent == NULL;
            reply_free(&f);
            free(args);
            svc_free(after);
        }
        json_decref(req);
        reply_free(&r);
        svc_free(s);
        buf_free(&pre);
    }
    cr_assert(kept > 10 && dropped > 10, "kept %d, dropped %d", kept, dropped);
}

/* spec_args is a filter of pod name with spec text spec. */
static char *spec_args(const char *name, const char *spec_key, const char *spec)
{
    char *s = NULL;
    cr_assert(asprintf(&s,
                       "{\"Pod\":{\"metadata\":{\"name\":\"%s\",\"uid\":\"u-%s\"},\"%s\":%s,"
                       "\"status\":{\"phase\":\"Pending\"}},"
                       "\"NodeNames\":[\"node1\",\"nodename\",\"foo\",\"mynode\",\"big-1\"]}",
                       name, name, spec_key, spec) > 0);
    return s;
}

/* filter_same answers args on s and on a fresh service (no memo) alike;
 * returns s's answer (caller frees). */
static reply filter_same(svc *s, const char *args)
{
    svc *fresh = new_svc();
    reply a = call(s, extender_handle_filter, args), b = call(fresh, extender_handle_filter, args);
    cr_assert_eq(a.status, 200, "%s", a.raw);
    cr_assert_str_eq(a.raw, b.raw);
    reply_free(&b);
    svc_free(fresh);
    return a;
}

/* Pods of one template share their spec's text: its decode is reused, and
 * the answers are those of a full decode. */
Test(extender, pods_with_one_spec_share_its_decode)
{
    svc *s = new_svc();
    const char *small = "{\"containers\":[{\"name\":\"c\",\"resources\":{\"requests\":"
                        "{\"cpu\":\"1\",\"memory\":\"1Gi\"}}}],\"tolerations\":[]}";
    const char *large = "{\"containers\":[{\"name\":\"c\",\"resources\":{\"requests\":"
                        "{\"cpu\":\"3\",\"memory\":\"1Gi\"}}}],\"tolerations\":[]}";
    char *a1 = spec_args("a-1", "spec", small), *a2 = spec_args("a-2", "spec", small);
    reply r1 = filter_same(s, a1);
    cr_assert_eq(metrics_counter_get(s->core->m.spec_memo_misses), 1);
    cr_assert_eq(metrics_counter_get(s->core->m.spec_memo_hits), 0);
    reply r2 = filter_same(s, a2);
    cr_assert_eq(metrics_counter_get(s->core->m.spec_memo_hits), 1);
    cr_assert_str_eq(r1.raw, r2.raw);
    /* another spec is decoded, not mistaken for the remembered one */
    char *b1 = spec_args("b-1", "spec", large);
    reply r3 = filter_same(s, b1);
    cr_assert_eq(metrics_counter_get(s->core->m.spec_memo_misses), 2);
    cr_assert_lt(json_array_size(json_object_get(r3.json, "NodeNames")),
                 json_array_size(json_object_get(r1.json, "NodeNames")), "%s", r3.raw);
    /* an escaped top-level key may spell "spec": no memo either way */
    char *e1 = spec_args("e-1", "sp\\u0065c", large);
    reply r4 = filter_same(s, e1);
    cr_assert_str_eq(r4.raw, r3.raw);
    cr_assert_eq(metrics_counter_get(s->core->m.spec_memo_misses), 2);
    cr_assert_eq(metrics_counter_get(s->core->m.spec_memo_hits), 1);
    /* metadata errors are still found on a hit */
    char *bad = spec_args("Bad\\u0000Name", "spec", small);
    reply r5 = call(s, extender_handle_filter, bad);
    cr_assert_eq(r5.status, 400, "%s", r5.raw);
    cr_assert_eq(metrics_counter_get(s->core->m.spec_memo_hits), 2);
    reply_free(&r5);
    /* a resource a node brings later makes a remembered spec stale: a spec
     * asking for it is decoded again under the new registry */
    const char *widget = "{\"containers\":[{\"name\":\"c\",\"resources\":{\"requests\":"
                         "{\"cpu\":\"1\",\"example.com/widget\":\"1\"}}}]}";
    char *w1 = spec_args("w-1", "spec", widget), *w2 = spec_args("w-2", "spec", widget);
    reply r6 = filter_same(s, w1);
    cr_assert_eq(json_array_size(json_object_get(r6.json, "NodeNames")), 0, "%s", r6.raw);
    size_t misses = metrics_counter_get(s->core->m.spec_memo_misses);
    int idx;
    cr_assert_eq(model_registry_intern(&s->core->reg, "example.com/widget", 18, &idx), AS_OK);
    reply r7 = call(s, extender_handle_filter, w2);
    cr_assert_eq(r7.status, 200, "%s", r7.raw);
    cr_assert_eq(metrics_counter_get(s->core->m.spec_memo_misses), misses + 1);
    reply_free(&r7);
    reply_free(&r1);
    reply_free(&r2);
    reply_free(&r3);
    reply_free(&r4);
    reply_free(&r6);
    free(a1);
    free(a2);
    free(b1);
    free(e1);
    free(bad);
    free(w1);
    free(w2);
    svc_free(s);
}

/* Sandboxes of one template that differ only in what the pod model never
 * reads (their own session in env, args and volume names) share the
 * decoded spec; a difference the model reads is decoded again; what the
 * builder refuses in a left-out member is still refused on a memo hit. */
Test(extender, specs_differing_in_left_out_members_share_the_decode)
{
    svc *s = new_svc();
    static const char *const fmt =
        "{\"containers\":[{\"name\":\"agent\",\"args\":[\"--session=%s\"],\"env\":[{"
        "\"name\":\"SESSION\",\"value\":%s}],\"resources\":{\"requests\":{\"cpu\":\"%s\"}}}],"
        "\"volumes\":[{\"name\":\"work-%s\",\"emptyDir\":{}}]}";
    char spec[4][512];
    snprintf(spec[0], sizeof spec[0], fmt, "s-1", "\"s-1\"", "1", "s-1");
    snprintf(spec[1], sizeof spec[1], fmt, "s-22", "\"s-22\"", "1", "s-22");
    snprintf(spec[2], sizeof spec[2], fmt, "s-3", "\"s-3\"", "3", "s-3");
    snprintf(spec[3], sizeof spec[3], fmt, "s-4", "1e400", "1", "s-4");
    char *a1 = spec_args("a-1", "spec", spec[0]), *a2 = spec_args("a-2", "spec", spec[1]);
    char *b = spec_args("b-1", "spec", spec[2]), *bad = spec_args("x-1", "spec", spec[3]);
    reply r1 = filter_same(s, a1);
    cr_assert_eq(metrics_counter_get(s->core->m.spec_memo_misses), 1);
    reply r2 = filter_same(s, a2);
    cr_assert_eq(metrics_counter_get(s->core->m.spec_memo_hits), 1, "the second sandbox: a hit");
    cr_assert_str_eq(r1.raw, r2.raw);
    reply r3 = filter_same(s, b);
    cr_assert_eq(metrics_counter_get(s->core->m.spec_memo_misses), 2, "another request: a miss");
    cr_assert_str_neq(r3.raw, r1.raw);
    /* an out-of-range number in env: refused as by a fresh decode */
    reply r4 = call(s, extender_handle_filter, bad);
    cr_assert_eq(r4.status, 400, "%s", r4.raw);
    cr_assert(strstr(r4.raw, "overflow"), "%s", r4.raw);
    cr_assert_eq(metrics_counter_get(s->core->m.spec_memo_hits), 1);
    reply_free(&r1);
    reply_free(&r2);
    reply_free(&r3);
    reply_free(&r4);
    free(a1);
    free(a2);
    free(b);
    free(bad);
    svc_free(s);
}

typedef struct spec_race {
    svc *s;
    char *args[2];
    const char *want[2];
    int bad;
} spec_race;

static void *spec_racer(void *arg)
{
    spec_race *r = arg;
    for (int i = 0; i < 60; i++) {
        reply a = call(r->s, extender_handle_filter, r->args[i % 2]);
        if (a.status != 200 || strcmp(a.raw, r->want[i % 2]) != 0)
            __atomic_add_fetch(&r->bad, 1, __ATOMIC_RELAXED);
        reply_free(&a);
    }
    return NULL;
}

/* Filters on several threads share and replace remembered specs while
 * others read them (TSan runs this too); every answer stays its spec's. */
Test(extender, spec_memo_under_concurrent_filters)
{
    svc *s = new_svc();
    const char *cpu1 = "{\"containers\":[{\"name\":\"c\",\"resources\":{\"requests\":{\"cpu\":"
                       "\"1\"}}}]}";
    const char *cpu3 = "{\"containers\":[{\"name\":\"c\",\"resources\":{\"requests\":{\"cpu\":"
                       "\"3\"}}}]}";
    spec_race r = {.s = s};
    r.args[0] = spec_args("r-1", "spec", cpu1);
    r.args[1] = spec_args("r-3", "spec", cpu3);
    reply w0 = filter_same(s, r.args[0]), w1 = filter_same(s, r.args[1]);
    cr_assert_str_neq(w0.raw, w1.raw);
    r.want[0] = w0.raw;
    r.want[1] = w1.raw;
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        cr_assert_eq(pthread_create(&t[i], NULL, spec_racer, &r), 0);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    cr_assert_eq(r.bad, 0);
    cr_assert_geq(metrics_counter_get(s->core->m.spec_memo_hits), 200);
    reply_free(&w0);
    reply_free(&w1);
    free(r.args[0]);
    free(r.args[1]);
    svc_free(s);
}

/* set_policy replaces s's policy with one parsed from text. */
static void set_policy(svc *s, const char *text)
{
    score_policy *p = NULL;
    as_diag d = {{0}, {0}};
    cr_assert_eq(score_policy_parse(&s->core->reg, "test-policy", text, strlen(text), &p, &d),
                 AS_OK, "%s: %s", d.field, d.msg);
    core_policy_set(s->core, p);
}

/* names_of joins a JSON array of strings with commas. */
static void names_of(const json_t *arr, char *out, size_t cap)
{
    size_t i, off = 0;
    json_t *v;
    out[0] = '\0';
    json_array_foreach(arr, i, v)
    {
        int w = snprintf(out + off, cap - off, "%s%s", i ? "," : "", json_string_value(v));
        cr_assert(w > 0 && (size_t)w < cap - off);
        off += (size_t)w;
    }
}

/* extender.shortlist: filter answers the N best-scoring feasible nodes in
 * request order; the cut ones are neither answered nor failed, and the
 * failed ones are failed as without a shortlist. most-allocated for a 250m
 * pod ranks foo (3.5 of 4 cpu used) > last-slot (1 cpu) > mynode (2) >
 * nodename > node1 > big-1; small-1 is full, tainted-1 tainted. */
Test(extender, filter_shortlist_answers_the_best_nodes)
{
    svc *s = new_svc();
    const char *names =
        "[\"node1\",\"big-1\",\"foo\",\"mynode\",\"last-slot\",\"nodename\",\"small-1\","
        "\"tainted-1\"]";
    char *args = pod_args("short-1", "uid-short-1", "250m", names);
    static const struct {
        const char *policy, *want;
    } cases[] = {
        {"strategy: most-allocated\n", "node1,big-1,foo,mynode,last-slot,nodename"},
        {"strategy: most-allocated\nextender: {shortlist: 0}\n",
         "node1,big-1,foo,mynode,last-slot,nodename"},
        {"strategy: most-allocated\nextender: {shortlist: 1}\n", "foo"},
        {"strategy: most-allocated\nextender: {shortlist: 2}\n", "foo,last-slot"},
        {"strategy: most-allocated\nextender: {shortlist: 3}\n", "foo,mynode,last-slot"},
        {"strategy: most-allocated\nextender: {shortlist: 6}\n",
         "node1,big-1,foo,mynode,last-slot,nodename"},
        {"strategy: most-allocated\nextender: {shortlist: 100}\n",
         "node1,big-1,foo,mynode,last-slot,nodename"},
        /* every node scores the same (no node has the only weighted
         * resource): ties go to the lexically smaller names */
        {"strategy: most-allocated\nresources: {example.com/foo: 1}\nextender: {shortlist: 2}\n",
         "big-1,foo"},
        /* least-allocated turns the order round */
        {"strategy: least-allocated\nextender: {shortlist: 2}\n", "node1,big-1"},
    };
    char *failed_without = NULL;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        set_policy(s, cases[c].policy);
        reply r = call(s, extender_handle_filter, args);
        cr_assert_eq(r.status, 200, "%s", r.raw);
        char got[256];
        names_of(json_object_get(r.json, "NodeNames"), got, sizeof got);
        cr_assert_str_eq(got, cases[c].want, "policy %s: %s", cases[c].policy, r.raw);
        char *failed = json_dumps(json_object_get(r.json, "FailedNodes"), JSON_SORT_KEYS);
        if (!failed_without)
            failed_without = failed;
        else {
            cr_assert_str_eq(failed, failed_without, "policy %s", cases[c].policy);
            free(failed);
        }
        cr_assert_eq(json_object_size(json_object_get(r.json, "FailedAndUnresolvableNodes")), 1);
        /* kube-scheduler's prioritize of the shortlist: from the filter's memo */
        size_t hits = metrics_counter_get(s->core->m.memo_hits);
        char *list = json_dumps(json_object_get(r.json, "NodeNames"), JSON_COMPACT);
        char *pargs = pod_args("short-1", "uid-short-1", "250m", list);
        reply pr = call(s, extender_handle_prioritize, pargs);
        cr_assert_eq(pr.status, 200, "%s", pr.raw);
        cr_assert_eq(metrics_counter_get(s->core->m.memo_hits), hits + 1, "%s", list);
        reply_free(&pr);
        free(pargs);
        free(list);
        reply_free(&r);
    }
    free(failed_without);
    free(args);

    /* Full Nodes: the same cut over the items. */
    set_policy(s, "strategy: most-allocated\nextender: {shortlist: 1}\n");
    char *body = NULL;
    size_t len = 0;
    as_diag d = {{0}, {0}};
    cr_assert_eq(doc_read_file(DATA "/filter/nodes_mode/request.json", 0, &body, &len, &d), AS_OK,
                 "%s", d.msg);
    reply r = call_n(s, extender_handle_filter, body, len);
    cr_assert_eq(r.status, 200, "%s", r.raw);
    json_t *items = json_object_get(json_object_get(r.json, "Nodes"), "items");
    cr_assert_eq(json_array_size(items), 1, "%s", r.raw);
    /* node1 (8 cpu) ranks above big-1 (64) when packing */
    cr_assert_str_eq(json_string_value(json_object_get(
                         json_object_get(json_array_get(items, 0), "metadata"), "name")),
                     "node1", "%s", r.raw);
    cr_assert_eq(json_object_size(json_object_get(r.json, "FailedNodes")), 2, "%s", r.raw);
    reply_free(&r);
    free(body);
    svc_free(s);
}

/* Two pods race for the last slot: both pass filter, one binds, the other
 * gets an Error and the node is never overcommitted. */
Test(extender, bind_conflict_last_slot_sequential)
{
    svc *s = new_svc();
    filter_ok(s, "racer-1", "uid-r1", "1", "[\"last-slot\"]", 1);
    filter_ok(s, "racer-2", "uid-r2", "1", "[\"last-slot\"]", 1);
    char *b1 = bind_args("racer-1", "uid-r1", "last-slot");
    char *b2 = bind_args("racer-2", "uid-r2", "last-slot");
    reply r1 = call(s, extender_handle_bind, b1);
    reply r2 = call(s, extender_handle_bind, b2);
    cr_assert_str_eq(error_of(&r1), "", "%s", r1.raw);
    cr_assert_str_neq(error_of(&r2), "");
    cr_assert(strstr(error_of(&r2), "no longer fits"), "%s", r2.raw);
    cr_assert_eq(node_cpu(s, "last-slot"), 1000);
    as_diag d = {{0}, {0}};
    cr_assert_eq(cache_check_invariants(s->core->cache, &d), AS_OK, "%s", d.msg);
    reply_free(&r1);
    reply_free(&r2);
    free(b1);
    free(b2);
    svc_free(s);
}

typedef struct racer {
    svc *s;
    const char *body;
    pthread_barrier_t *go;
    bool ok;
} racer;

static void *race_bind(void *arg)
{
    racer *r = arg;
    pthread_barrier_wait(r->go);
    reply rep = call(r->s, extender_handle_bind, r->body);
    r->ok = rep.status == 200 && strcmp(error_of(&rep), "") == 0;
    reply_free(&rep);
    return NULL;
}

Test(extender, bind_conflict_last_slot_concurrent)
{
    for (int round = 0; round < 20; round++) {
        svc *s = new_svc();
        filter_ok(s, "racer-1", "uid-r1", "1", "[\"last-slot\"]", 1);
        filter_ok(s, "racer-2", "uid-r2", "1", "[\"last-slot\"]", 1);
        char *b1 = bind_args("racer-1", "uid-r1", "last-slot");
        char *b2 = bind_args("racer-2", "uid-r2", "last-slot");
        pthread_barrier_t go;
        pthread_barrier_init(&go, NULL, 2);
        racer r1 = {s, b1, &go, false}, r2 = {s, b2, &go, false};
        pthread_t t1, t2;
        pthread_create(&t1, NULL, race_bind, &r1);
        pthread_create(&t2, NULL, race_bind, &r2);
        pthread_join(t1, NULL);
        pthread_join(t2, NULL);
        pthread_barrier_destroy(&go);
        cr_assert_eq((int)r1.ok + (int)r2.ok, 1, "round %d: %d binds succeeded", round,
                     (int)r1.ok + (int)r2.ok);
        cr_assert_eq(node_cpu(s, "last-slot"), 1000);
        as_diag d = {{0}, {0}};
        cr_assert_eq(cache_check_invariants(s->core->cache, &d), AS_OK, "%s", d.msg);
        free(b1);
        free(b2);
        svc_free(s);
    }
}

Test(extender, filter_answers_only_input_names_in_order)
{
    svc *s = new_svc();
    const char *names = "[\"nodename\",\"zzz\",\"big-1\",\"node1\",\"foo\",\"mynode\"]";
    char *args = pod_args("order", "uid-order", "100m", names);
    reply r = call(s, extender_handle_filter, args);
    json_t *in = json_loads(names, 0, NULL);
    json_t *out = json_object_get(r.json, "NodeNames");
    size_t j = 0;
    for (size_t i = 0; i < json_array_size(out); i++) {
        const char *n = json_string_value(json_array_get(out, i));
        while (j < json_array_size(in) && strcmp(json_string_value(json_array_get(in, j)), n))
            j++;
        cr_assert_lt(j, json_array_size(in), "%s not in input order", n);
    }
    cr_assert_eq(json_array_size(out), 5);
    cr_assert(json_is_string(json_object_get(json_object_get(r.json, "FailedNodes"), "zzz")));
    json_decref(in);
    reply_free(&r);
    free(args);
    svc_free(s);
}

/* More failed names than the filter keeps on its stack (64): every one is
 * in FailedNodes, the unresolvable ones in FailedAndUnresolvableNodes too,
 * and the rest still pass. */
Test(extender, filter_with_many_failed_names)
{
    svc *s = new_svc();
    buf names;
    buf_init(&names, 0);
    buf_puts(&names, "[\"node1\"");
    for (int i = 0; i < 150; i++)
        buf_printf(&names, ",\"ghost-%d\"%s", i, i % 50 == 0 ? ",\"small-1\"" : "");
    buf_puts(&names, ",\"big-1\"]");
    char *args = pod_args("many", "uid-many", "1", names.data);
    reply r = call(s, extender_handle_filter, args);
    cr_assert_eq(r.status, 200, "%s", r.raw);
    cr_assert_eq(json_array_size(json_object_get(r.json, "NodeNames")), 2, "%s", r.raw);
    json_t *failed = json_object_get(r.json, "FailedNodes");
    json_t *unres = json_object_get(r.json, "FailedAndUnresolvableNodes");
    cr_assert_eq(json_object_size(failed), 151); /* small-1 once: names are de-duplicated */
    cr_assert_eq(json_object_size(unres), 150);
    cr_assert_str_eq(json_string_value(json_object_get(failed, "small-1")), "Insufficient cpu");
    cr_assert_null(json_object_get(unres, "small-1"));
    cr_assert_str_eq(json_string_value(json_object_get(unres, "ghost-149")),
                     "node(s) were not found in agentsched's node cache");
    reply_free(&r);
    free(args);
    buf_free(&names);
    svc_free(s);
}

/* ---- hostile requests ----------------------------------------------- */

typedef struct hostile {
    const char *name;
    http_handler_fn fn;
    const char *body; /* NULL: built by the test */
    size_t len;       /* 0: strlen */
    int status;
    const char *field; /* expected field on 400, NULL: do not check */
} hostile;

#define POD     "{\"metadata\":{\"name\":\"h\",\"uid\":\"h\"},\"spec\":{\"containers\":[]}}"
#define NAME64  "nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn"
#define NAME253 NAME64 NAME64 NAME64 "nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn"
#define NAME254 NAME253 "n"

#define F extender_handle_filter
#define P extender_handle_prioritize
#define B extender_handle_bind
#define X extender_handle_preempt

static char *big_names(size_t n, bool dup, bool huge_depth)
{
    size_t cap = n * 24 + 400000;
    char *s = malloc(cap);
    size_t o = (size_t)snprintf(s, cap, "{\"Pod\":" POD ",\"NodeNames\":[");
    for (size_t i = 0; i < n; i++)
        o += (size_t)snprintf(s + o, cap - o, "%s\"n-%zu\"", i ? "," : "", dup ? i % 3 : i);
    o += (size_t)snprintf(s + o, cap - o, "]");
    if (huge_depth) {
        o += (size_t)snprintf(s + o, cap - o, ",\"x\":");
        for (int i = 0; i < 100000; i++)
            s[o++] = '[';
        for (int i = 0; i < 100000; i++)
            s[o++] = ']';
    }
    snprintf(s + o, cap - o, "}");
    return s;
}

Test(extender, hostile_requests)
{
    static const char nul_body[] = "{\"Pod\":" POD ",\"NodeNames\":[\"node1\0\"]}";
    static const hostile cases[] = {
        {"empty body", F, "", 0, 400, ""},
        {"whitespace", F, "  \n", 0, 400, ""},
        {"truncated", F, "{\"Pod\":" POD ",\"NodeNames\":[\"node1\"", 0, 400, ""},
        {"truncated string", F, "{\"Pod\":" POD ",\"NodeNames\":[\"no", 0, 400, ""},
        {"top array", F, "[\"node1\"]", 0, 400, ""},
        {"top string", P, "\"node1\"", 0, 400, ""},
        {"top null", F, "null", 0, 400, ""},
        {"pod array", F, "{\"Pod\":[],\"NodeNames\":[]}", 0, 400, "Pod"},
        {"pod number", P, "{\"Pod\":3,\"NodeNames\":[]}", 0, 400, "Pod"},
        {"names object", F, "{\"Pod\":" POD ",\"NodeNames\":{\"a\":1}}", 0, 400, "NodeNames"},
        {"name number", F, "{\"Pod\":" POD ",\"NodeNames\":[\"a\",1]}", 0, 400, "NodeNames[1]"},
        {"name bool", P, "{\"Pod\":" POD ",\"NodeNames\":[true]}", 0, 400, "NodeNames[0]"},
        {"name null", F, "{\"Pod\":" POD ",\"NodeNames\":[null]}", 0, 400, "NodeNames[0]"},
        {"nodes string", F, "{\"Pod\":" POD ",\"Nodes\":\"n\"}", 0, 400, "Nodes"},
        {"items object", P, "{\"Pod\":" POD ",\"Nodes\":{\"items\":{}}}", 0, 400, "Nodes.items"},
        {"item name number", F,
         "{\"Pod\":" POD ",\"Nodes\":{\"items\":[{\"metadata\":{\"name\":\"node1\"}},{\"metadata\":"
         "{\"name\":\"a\"}},{\"metadata\":{\"name\":1}}]}}",
         0, 400, "Nodes.items[2].metadata.name"},
        {"item without name", F, "{\"Pod\":" POD ",\"Nodes\":{\"items\":[{}]}}", 0, 400,
         "Nodes.items[0].metadata.name"},
        {"pod containers string", F,
         "{\"Pod\":{\"metadata\":{\"name\":\"p\"},\"spec\":{\"containers\":\"x\"}},\"NodeNames\":"
         "[]}",
         0, 400, NULL},
        {"pod cpu number-as-garbage", F,
         "{\"Pod\":{\"metadata\":{\"name\":\"p\"},\"spec\":{\"containers\":[{\"name\":\"c\","
         "\"resources\":{\"requests\":{\"cpu\":\"1x\"}}}]}},\"NodeNames\":[]}",
         0, 400, NULL},
        {"invalid utf8", F, "{\"Pod\":" POD ",\"NodeNames\":[\"\xc3\x28\"]}", 0, 400, ""},
        {"nul byte", F, nul_body, sizeof nul_body - 1, 400, ""},
        {"escaped nul name", F, "{\"Pod\":" POD ",\"NodeNames\":[\"a\\u0000b\"]}", 0, 400,
         "NodeNames[0]"},
        {"trailing garbage", F, "{\"Pod\":" POD ",\"NodeNames\":[]}}", 0, 400, ""},
        {"two documents", P, "{\"Pod\":" POD ",\"NodeNames\":[]} {}", 0, 400, ""},
        {"comments", F, "{/*c*/\"Pod\":" POD ",\"NodeNames\":[]}", 0, 400, ""},
        {"single quotes", F, "{'Pod':{}}", 0, 400, ""},
        {"numbers as strings", F, "{\"Pod\":" POD ",\"NodeNames\":[\"1\",2]}", 0, 400,
         "NodeNames[1]"},
        {"case variations", F, "{\"pOD\":" POD ",\"NODENAMES\":[\"node1\",\"NODE1\"]}", 0, 200,
         NULL},
        {"unknown names", P, "{\"Pod\":" POD ",\"NodeNames\":[\"nope\",\"nada\"]}", 0, 200, NULL},
        {"float overflow in an ignored key", F, "{\"Pod\":" POD ",\"NodeNames\":[],\"x\":1e999999}",
         0, 200, NULL},
        {"integer overflow in the pod", F,
         "{\"Pod\":{\"x\":123456789012345678901234567890},\"NodeNames\":[]}", 0, 400, ""},
        {"bind array", B, "[]", 0, 400, ""},
        {"bind node number", B, "{\"PodName\":\"p\",\"Node\":5}", 0, 400, "Node"},
        {"bind empty", B, "{}", 0, 400, "PodName"},
        {"bind truncated", B, "{\"PodName\":\"p\",\"Node\":\"node1", 0, 400, ""},
        {"bind unknown node", B, "{\"PodName\":\"p\",\"PodUID\":\"u\",\"Node\":\"nope\"}", 0, 403,
         NULL},
        {"preempt map array", X, "{\"Pod\":" POD ",\"NodeNameToVictims\":[]}", 0, 400,
         "NodeNameToVictims"},
        {"preempt pods string", X,
         "{\"Pod\":" POD ",\"NodeNameToMetaVictims\":{\"foo\":{\"Pods\":"
         "\"x\"}}}",
         0, 400, "NodeNameToMetaVictims.foo.Pods"},
        {"preempt pdb string", X,
         "{\"Pod\":" POD ",\"NodeNameToMetaVictims\":{\"foo\":{"
         "\"NumPDBViolations\":\"1\"}}}",
         0, 400, "NodeNameToMetaVictims.foo.NumPDBViolations"},
        {"preempt victim bad pod", X,
         "{\"Pod\":" POD ",\"NodeNameToVictims\":{\"foo\":{\"Pods\":"
         "[{\"metadata\":{\"name\":\"v\"},\"spec\":{\"containers\":7}}]}}}",
         0, 400, NULL},
        {"preempt no pod", X, "{\"NodeNameToMetaVictims\":{}}", 0, 400, "Pod"},
        {"preempt truncated", X, "{\"Pod\":", 0, 400, ""},
        /* NUL inside a key would be cut off by every C-string reader */
        {"nul in a nodeSelector key", F,
         "{\"Pod\":{\"metadata\":{\"name\":\"p\"},\"spec\":{\"nodeSelector\":{"
         "\"kubernetes.io/hostname\\u0000x\":\"node1\"},\"containers\":[]}},\"NodeNames\":"
         "[\"node1\"]}",
         0, 400, "Pod.spec.nodeSelector"},
        {"nul in a resource name", P,
         "{\"Pod\":{\"metadata\":{\"name\":\"p\"},\"spec\":{\"containers\":[{\"name\":"
         "\"c\",\"resources\":{\"requests\":{\"cpu\\u0000x\":\"100\"}}}]}},\"NodeNames\":"
         "[\"node1\"]}",
         0, 400, "Pod.spec.containers[0].resources.requests"},
        {"nul in a label key", F,
         "{\"Pod\":{\"metadata\":{\"name\":\"p\",\"labels\":{\"a\\u0000\":\"b\"}},"
         "\"spec\":{}},\"NodeNames\":[]}",
         0, 400, "Pod.metadata.labels"},
        {"nul in an ignored key", F, "{\"Pod\":" POD ",\"NodeNames\":[],\"x\\u0000\":1}", 0, 400,
         ""},
        {"nul in a node item key", P,
         "{\"Pod\":" POD ",\"Nodes\":{\"items\":[{\"metadata\":{\"name\":\"node1\",\"labels\":{"
         "\"a\\u0000\":\"b\"}}}]}}",
         0, 400, ""},
        {"pod name of 254 bytes", F,
         "{\"Pod\":{\"metadata\":{\"name\":\"" NAME254 "\"}},"
         "\"NodeNames\":[\"node1\"]}",
         0, 400, "Pod.metadata.name"},
        {"pod name of 253 bytes", F,
         "{\"Pod\":{\"metadata\":{\"name\":\"" NAME253 "\"}},"
         "\"NodeNames\":[\"node1\"]}",
         0, 200, NULL},
        {"namespace of 64 bytes", P,
         "{\"Pod\":{\"metadata\":{\"name\":\"p\",\"namespace\":\"" NAME64
         "\"}},\"NodeNames\":[\"node1\"]}",
         0, 400, "Pod.metadata.namespace"},
        /* the bind and preempt fields are C strings too */
        {"bind nul in Node", B,
         "{\"PodName\":\"p\",\"PodUID\":\"u\",\"Node\":\"node1\\u0000garbage\"}", 0, 400, "Node"},
        {"bind nul in PodName", B, "{\"PodName\":\"p\\u0000x\",\"Node\":\"node1\"}", 0, 400,
         "PodName"},
        {"bind nul in PodNamespace", B,
         "{\"PodName\":\"p\",\"PodNamespace\":\"default\\u0000\",\"Node\":\"node1\"}", 0, 400,
         "PodNamespace"},
        {"bind nul in PodUID", B, "{\"PodName\":\"p\",\"PodUID\":\"\\u0000\",\"Node\":\"node1\"}",
         0, 400, "PodUID"},
        {"bind nul in a key", B, "{\"PodName\":\"p\",\"Node\\u0000\":\"x\",\"Node\":\"node1\"}", 0,
         400, ""},
        {"bind long PodName", B, "{\"PodName\":\"" NAME254 "\",\"Node\":\"node1\"}", 0, 400,
         "PodName"},
        {"bind long PodNamespace", B,
         "{\"PodName\":\"p\",\"PodNamespace\":\"" NAME64 "\",\"Node\":\"node1\"}", 0, 400,
         "PodNamespace"},
        /* strict UTF-8 in every decoder: overlong '/', a surrogate, past
         * U+10FFFF (yajl takes all three) */
        {"bind overlong utf8", B, "{\"PodName\":\"p\",\"Node\":\"node1\xc0\xaf\"}", 0, 400, ""},
        {"bind surrogate", B, "{\"PodName\":\"\xed\xa0\x80\",\"Node\":\"node1\"}", 0, 400, ""},
        {"bind past U+10FFFF", B, "{\"PodName\":\"p\",\"Node\":\"\xf4\x90\x80\x80\"}", 0, 400, ""},
        {"bind invalid utf8 key", B, "{\"PodName\":\"p\",\"\xc0\xaf\":1,\"Node\":\"node1\"}", 0,
         400, ""},
        {"preempt overlong utf8", X,
         "{\"Pod\":" POD ",\"NodeNameToMetaVictims\":{\"foo\":{\"Pods\":[{\"UID\":"
         "\"\xc0\xaf\"}]}}}",
         0, 400, ""},
        {"preempt surrogate node", X,
         "{\"Pod\":" POD ",\"NodeNameToMetaVictims\":{\"\xed\xa0\x80\":{}}}", 0, 400, ""},
        {"preempt past U+10FFFF", X,
         "{\"Pod\":{\"metadata\":{\"name\":\"\xf4\x90\x80\x80\"}},\"NodeNameToMetaVictims\":"
         "{}}",
         0, 400, ""},
        {"preempt nul in a node name", X,
         "{\"Pod\":" POD ",\"NodeNameToMetaVictims\":{\"foo\\u0000\":{}}}", 0, 400,
         "NodeNameToMetaVictims"},
        {"preempt nul in a meta victim UID", X,
         "{\"Pod\":" POD ",\"NodeNameToMetaVictims\":{\"foo\":{\"Pods\":[{\"UID\":\"u\\u0000x\"}"
         "]}}}",
         0, 400, "NodeNameToMetaVictims.foo.Pods[0].UID"},
        {"preempt nul in a victim uid", X,
         "{\"Pod\":" POD ",\"NodeNameToVictims\":{\"foo\":{\"Pods\":[{\"metadata\":{\"name\":"
         "\"v\",\"uid\":\"\\u0000\"}}]}}}",
         0, 400, "NodeNameToVictims.foo.Pods[0].metadata.uid"},
        {"preempt negative pdb", X,
         "{\"Pod\":" POD ",\"NodeNameToMetaVictims\":{\"foo\":{\"NumPDBViolations\":-1}}}", 0, 400,
         "NodeNameToMetaVictims.foo.NumPDBViolations"},
    };
    svc *s = new_svc();
    size_t n = sizeof cases / sizeof cases[0];
    cr_assert_geq(n, 30);
    for (size_t i = 0; i < n; i++) {
        const hostile *h = &cases[i];
        reply r = call_n(s, h->fn, h->body, h->len ? h->len : strlen(h->body));
        cr_expect_eq(r.status, h->status, "%s: status %d body %.300s", h->name, r.status, r.raw);
        if (r.status == 400) {
            cr_expect(json_is_string(json_object_get(r.json, "error")), "%s: %s", h->name, r.raw);
            cr_expect(json_is_string(json_object_get(r.json, "field")), "%s: %s", h->name, r.raw);
            bool has_error_field = h->fn == F || h->fn == B;
            cr_expect_eq(json_object_get(r.json, "Error") != NULL, has_error_field, "%s: %s",
                         h->name, r.raw);
            if (h->field)
                cr_expect_str_eq(json_string_value(json_object_get(r.json, "field")), h->field,
                                 "%s: %s", h->name, r.raw);
        }
        reply_free(&r);
    }
    as_diag d = {{0}, {0}};
    cr_assert_eq(cache_check_invariants(s->core->cache, &d), AS_OK, "%s", d.msg);
    svc_free(s);
}

Test(extender, hostile_big_requests)
{
    svc *s = new_svc();
    /* 10k unknown names: answered, every one failed */
    char *body = big_names(10000, false, false);
    reply r = call(s, extender_handle_filter, body);
    cr_assert_eq(r.status, 200);
    cr_assert_eq(json_array_size(json_object_get(r.json, "NodeNames")), 0);
    cr_assert_eq(json_object_size(json_object_get(r.json, "FailedNodes")), 10000);
    reply_free(&r);
    free(body);
    /* duplicates: each name once */
    body = big_names(3000, true, false);
    r = call(s, extender_handle_prioritize, body);
    cr_assert_eq(r.status, 200);
    cr_assert_eq(json_array_size(r.json), 3);
    reply_free(&r);
    free(body);
    /* 100k-deep nesting in an ignored key */
    body = big_names(1, false, true);
    r = call(s, extender_handle_filter, body);
    cr_assert_eq(r.status, 400, "%.200s", r.raw);
    reply_free(&r);
    free(body);
    /* beyond the name cap */
    body = big_names(EXTARGS_MAX_NAMES + 1, false, false);
    r = call(s, extender_handle_filter, body);
    cr_assert_eq(r.status, 400, "%.200s", r.raw);
    reply_free(&r);
    free(body);
    /* a 1 MB pod name: refused, not echoed */
    size_t nl = (size_t)1 << 20;
    char *name = malloc(nl + 1);
    memset(name, 'a', nl);
    name[nl] = '\0';
    body = pod_args(name, "uid-huge", "100m", "[\"node1\"]");
    r = call(s, extender_handle_filter, body);
    cr_assert_eq(r.status, 400, "%.200s", r.raw);
    cr_assert_str_eq(json_string_value(json_object_get(r.json, "field")), "Pod.metadata.name");
    cr_assert_lt(strlen(r.raw), 2048, "the answer quotes the name: %zu bytes", strlen(r.raw));
    reply_free(&r);
    free(body);
    free(name);
    svc_free(s);
}

/* ---- through the HTTP server -------------------------------------- */

static size_t collect(char *p, size_t sz, size_t n, void *u)
{
    buf_append(u, p, sz * n);
    return sz * n;
}

static long http_post(unsigned port, const char *path, const char *body, buf *out)
{
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%u%s", port, path);
    CURL *e = curl_easy_init();
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, out);
    if (body)
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, body);
    long code = 0;
    cr_assert_eq(curl_easy_perform(e), CURLE_OK);
    curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &code);
    curl_easy_cleanup(e);
    return code;
}

Test(extender, served_by_the_http_server)
{
    svc_config cfg;
    svc_config_defaults(&cfg);
    cfg.listen = "127.0.0.1:0";
    cfg.extender_scheduler_names = "agent-scheduler,default-scheduler";
    log_set_level(LOG_ERROR);
    svc *s = NULL;
    as_diag d = {{0}, {0}};
    cr_assert_eq(svc_new(&cfg, &s, &d), AS_OK, "%s", d.msg);
    cr_assert_eq(svc_load_cluster(s, DATA "/cluster.yaml", &d), AS_OK, "%s", d.msg);
    cr_assert_eq(svc_http_start(s, &d), AS_OK, "%s", d.msg);
    unsigned port = http_server_port(s->http);
    buf b;
    buf_init(&b, 0);
    char *args = pod_args("web", "uid-web", "100m", "[\"node1\",\"nope\"]");
    cr_assert_eq(http_post(port, EXTENDER_PATH_FILTER, args, &b), 200, "%s", b.data);
    cr_assert(strstr(b.data, "\"NodeNames\":[\"node1\"]"), "%s", b.data);
    buf_reset(&b);
    cr_assert_eq(http_post(port, EXTENDER_PATH_PRIORITIZE, args, &b), 200, "%s", b.data);
    cr_assert(strstr(b.data, "\"Host\":\"nope\",\"Score\":0"), "%s", b.data);
    buf_reset(&b);
    char *bind = bind_args("web", "uid-web", "node1");
    cr_assert_eq(http_post(port, EXTENDER_PATH_BIND, bind, &b), 200, "%s", b.data);
    cr_assert_str_eq(b.data, "{\"Error\":\"\"}");
    buf_reset(&b);
    cr_assert_eq(http_post(port, EXTENDER_PATH_PREEMPT, "{\"Pod\":", &b), 400, "%s", b.data);
    buf_reset(&b);
    cr_assert_eq(http_post(port, EXTENDER_PATH_FILTER, NULL, &b), 405, "%s", b.data);
    buf_free(&b);
    free(args);
    free(bind);
    svc_http_stop(s);
    svc_free(s);
}

/* ---- bind authorization -------------------------------------------- */

/* sched_pod_args: pod_args with a schedulerName. */
static char *sched_pod_args(const char *name, const char *uid, const char *sched)
{
    char *s = NULL;
    cr_assert(asprintf(&s,
                       "{\"Pod\":{\"metadata\":{\"name\":\"%s\",\"namespace\":\"default\","
                       "\"uid\":\"%s\"},\"spec\":{\"schedulerName\":\"%s\",\"containers\":[{"
                       "\"name\":\"c\",\"resources\":{\"requests\":{\"cpu\":\"100m\"}}}]}},"
                       "\"NodeNames\":[\"node1\"]}",
                       name, uid, sched) > 0);
    return s;
}

static uint64_t refused_count(svc *s, const char *rule)
{
    buf m;
    buf_init(&m, 1 << 20);
    cr_assert_eq(metrics_render(s->core->metrics, &m), AS_OK);
    char want[160];
    snprintf(want, sizeof want, "agentsched_extender_bind_refused_total{rule=\"%s\"} ", rule);
    const char *p = strstr(m.data, want);
    uint64_t v = p ? strtoull(p + strlen(want), NULL, 10) : 0;
    buf_free(&m);
    return v;
}

/* Each case: a filter (when sched is set) for pod fname/fuid with that
 * schedulerName, then a bind for bname/buid on node1, on a server with the
 * default --extender-scheduler-names (agent-scheduler). */
typedef struct bind_case {
    const char *what;
    const char *sched; /* NULL: no filter first */
    const char *fname, *fuid;
    const char *bname, *buid;
    int status;
    const char *says; /* in Error */
    const char *rule; /* counter bumped, NULL = none */
} bind_case;

Test(extender, bind_authorization)
{
    static const bind_case cases[] = {
        {"unfiltered pod", NULL, NULL, NULL, "stray", "uid-stray", 403,
         "agentsched did not filter this pod", "not_filtered"},
        {"another scheduler's pod", "nobody", "other", "uid-other", "other", "uid-other", 403,
         "its schedulerName nobody is not one agentsched binds for", "scheduler_name"},
        {"default-scheduler's pod", "default-scheduler", "dflt", "uid-dflt", "dflt", "uid-dflt",
         403, "schedulerName default-scheduler", "scheduler_name"},
        {"uid of another pod", "agent-scheduler", "mine", "uid-mine", "victim", "uid-mine", 403,
         "PodUID uid-mine belongs to pod default/mine", "uid"},
        {"served and filtered", "agent-scheduler", "ok", "uid-ok", "ok", "uid-ok", 200, "", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const bind_case *c = &cases[i];
        svc *s = new_svc_names(DATA "/cluster.yaml", NULL, NULL);
        if (c->sched) {
            char *f = sched_pod_args(c->fname, c->fuid, c->sched);
            reply r = call(s, extender_handle_filter, f);
            /* the filter answers as before, whoever owns the pod */
            cr_assert_eq(r.status, 200, "%s: %s", c->what, r.raw);
            cr_assert_eq(json_array_size(json_object_get(r.json, "NodeNames")), 1, "%s: %s",
                         c->what, r.raw);
            reply_free(&r);
            free(f);
        }
        char *b = bind_args(c->bname, c->buid, "node1");
        reply r = call(s, extender_handle_bind, b);
        cr_expect_eq(r.status, c->status, "%s: %d %s", c->what, r.status, r.raw);
        cr_expect(strstr(error_of(&r), c->says), "%s: %s", c->what, r.raw);
        if (c->status == 403) {
            cr_expect(strstr(error_of(&r), "agentsched refused to bind pod default/"), "%s: %s",
                      c->what, r.raw);
            cr_expect_eq(node_cpu(s, "node1"), 0, "%s: nothing bound", c->what);
            cr_expect_eq(refused_count(s, c->rule), 1, "%s: rule %s", c->what, c->rule);
        } else {
            cr_expect_eq(node_cpu(s, "node1"), 100, "%s", c->what);
            /* a retried bind whose reply was lost stays a success */
            reply r2 = call(s, extender_handle_bind, b);
            cr_expect_eq(r2.status, 200, "%s: %s", c->what, r2.raw);
            cr_expect_str_eq(error_of(&r2), "", "%s: %s", c->what, r2.raw);
            reply_free(&r2);
            cr_expect_eq(node_cpu(s, "node1"), 100, "%s", c->what);
        }
        reply_free(&r);
        free(b);
        svc_free(s);
    }
}

/* --extender-scheduler-names lists every name served. */
Test(extender, bind_authorization_name_list)
{
    svc *s = new_svc_names(DATA "/cluster.yaml", "a,agents-2", NULL);
    char *f = sched_pod_args("p", "uid-p", "agents-2");
    reply r = call(s, extender_handle_filter, f);
    reply_free(&r);
    char *b = bind_args("p", "uid-p", "node1");
    r = call(s, extender_handle_bind, b);
    cr_assert_eq(r.status, 200, "%s", r.raw);
    cr_assert_str_eq(error_of(&r), "", "%s", r.raw);
    reply_free(&r);
    free(b);
    free(f);
    svc_free(s);
}

/* prio_scores runs prioritize for a 250m pod over names_json under s's
 * current policy and shard mode into out (in input order); returns n. */
static size_t prio_scores(svc *s, const char *uid, const char *names_json, int *out, size_t cap)
{
    char *args = pod_args(uid, uid, "250m", names_json);
    reply r = call(s, extender_handle_prioritize, args);
    cr_assert_eq(r.status, 200, "%s", r.raw);
    size_t n = json_array_size(r.json);
    cr_assert_leq(n, cap);
    for (size_t i = 0; i < n; i++) {
        const json_t *sc = json_object_get(json_array_get(r.json, i), "Score");
        cr_assert(json_is_integer(sc), "%s", r.raw);
        out[i] = (int)json_integer_value(sc);
        cr_assert(out[i] >= 0 && out[i] <= 10, "%s", r.raw);
    }
    reply_free(&r);
    free(args);
    return n;
}

/* kube-scheduler takes an extender's Score unclamped (score * weight *
 * 10), so agentsched's mapping onto 0..10 must scale, never saturate: a
 * policy's maxScore above 10 and the soft-shard bonus leave the nodes as
 * far apart as the default mapping does (within rounding), instead of
 * tying their upper part at 10. */
Test(extender, prioritize_scales_instead_of_saturating)
{
    svc *s = new_svc();
    const char *names = "[\"node1\",\"nodename\",\"foo\",\"mynode\",\"big-1\",\"last-slot\","
                        "\"gpu-2a\",\"small-1\"]";
    enum { N = 8 };
    int base[N], got[N];
    set_policy(s, "strategy: least-allocated\n");
    cr_assert_eq(prio_scores(s, "sc-base", names, base, N), N);
    int distinct = 0;
    for (int i = 0; i < N; i++) {
        bool seen = false;
        for (int j = 0; j < i; j++)
            seen |= base[j] == base[i];
        distinct += !seen;
    }
    cr_assert_geq(distinct, 4, "the nodes must score apart for this test to mean anything");
    static const char *const wide[] = {
        "strategy: least-allocated\nextender: {maxScore: 100}\n",
        "strategy: least-allocated\nextender: {maxScore: 20}\n",
        "strategy: least-allocated\nextender: {maxScore: 11, rounding: floor}\n",
    };
    for (size_t c = 0; c < sizeof wide / sizeof wide[0]; c++) {
        set_policy(s, wide[c]);
        char uid[32];
        snprintf(uid, sizeof uid, "sc-wide-%zu", c);
        prio_scores(s, uid, names, got, N);
        for (int i = 0; i < N; i++)
            cr_assert(got[i] >= base[i] - 1 && got[i] <= base[i] + 1,
                      "policy %s: node %d scores %d, %d with maxScore 10", wide[c], i, got[i],
                      base[i]);
    }

    /* Soft shard, bonus 50 (the default): in-shard nodes score up to 150
     * before the mapping; they keep their order and do not all tie at 10. */
    set_policy(s, "strategy: least-allocated\n");
    cache_set_shard_mode(s->core->cache, CACHE_SHARD_SOFT);
    const char *shard[] = {"node1", "nodename", "foo", "mynode", "big-1", "last-slot", "gpu-2a"};
    uint64_t rev;
    cr_assert_eq(cache_shard_apply(s->core->cache, shard, 7, &rev), AS_OK);
    prio_scores(s, "sc-soft", names, got, N);
    for (int i = 0; i < 7; i++) {
        /* clipped, every in-shard node scoring 50 or more would tie */
        if (base[i] < 9)
            cr_assert_lt(got[i], 10, "in-shard node %d (%d without the bonus) saturates", i,
                         base[i]);
        for (int j = 0; j < 7; j++)
            if (base[i] > base[j])
                cr_assert_geq(got[i], got[j], "node %d above node %d by score", i, j);
        cr_assert_geq(got[i], base[i], "the bonus lowers no in-shard node");
    }
    cr_assert_eq(got[7], 0, "small-1 is full");
    svc_free(s);
}
