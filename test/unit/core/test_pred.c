/* test_pred.c - every predicate and its kube-scheduler reason string. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <string.h>

#include "agentsched/core/cache.h"
#include "agentsched/core/pred.h"
#include "core_fixtures.h"

static model_registry reg;
static cache *c;

static void setup(void)
{
    model_registry_init(&reg);
    cr_assert_eq(cache_new(&reg, &c), AS_OK);
}

static void teardown(void)
{
    cache_free(c);
    model_registry_destroy(&reg);
}

TestSuite(pred, .init = setup, .fini = teardown);

/* occupy binds a pod of the given size to node (usage for the checks). */
static void occupy(const char *node, const char *uid, int64_t cpu, int64_t mem, uint32_t gpus,
                   uint32_t milli)
{
    model_pod *p = fx_pod(uid, uid, cpu, mem);
    if (gpus || milli)
        fx_pod_gpu(&reg, p, gpus, milli);
    fx_pod_bind(p, node);
    cr_assert_eq(cache_pod_upsert(c, p), AS_OK);
    model_pod_free(p);
}

/* expect runs pred_check for pod on the (added) node and checks the code
 * and the rendered reason; takes ownership of pod. */
static void expect(cache_shard_mode mode, const char *node_name, model_pod *pod, pred_code code,
                   const char *text)
{
    cache_read_lock(c);
    const cache_node *n = cache_node_find(c, node_name, strlen(node_name));
    cr_assert(n, "%s", node_name);
    pred_result r = pred_check(&reg, mode, pod, n);
    char buf[160];
    pred_reason(&reg, n, pod, r, buf, sizeof buf);
    pred_result rs = pred_check_static(mode, pod, n);
    cache_read_unlock(c);
    cr_assert_eq(r.code, code, "%s: got %d (%s)", pod->name, r.code, buf);
    if (text)
        cr_assert_str_eq(buf, text);
    /* pred_check == static, then resources */
    if (rs.code != PRED_OK)
        cr_assert_eq(rs.code, r.code);
    model_pod_free(pod);
}

static void add(model_node *n)
{
    cr_assert_eq(cache_node_upsert(c, n), AS_OK);
}

Test(pred, fits)
{
    add(fx_node("n", 4000, 8 * FX_GI, 110));
    expect(CACHE_SHARD_NONE, "n", fx_pod("p", "u", 1000, FX_GI), PRED_OK, "fits");
}

Test(pred, insufficient_cpu_memory_extended)
{
    model_node *n = fx_node("n", 1000, 2 * FX_GI, 110);
    fx_node_res(&reg, n, "example.com/foo", 2);
    add(n);
    occupy("n", "o1", 800, FX_GI, 0, 0);
    expect(CACHE_SHARD_NONE, "n", fx_pod("p1", "u1", 300, 0), PRED_INSUFFICIENT,
           "Insufficient cpu");
    expect(CACHE_SHARD_NONE, "n", fx_pod("p2", "u2", 200, 0), PRED_OK, NULL);
    expect(CACHE_SHARD_NONE, "n", fx_pod("p3", "u3", 100, FX_GI + 1), PRED_INSUFFICIENT,
           "Insufficient memory");
    /* Above what the node has at all: no eviction helps. */
    expect(CACHE_SHARD_NONE, "n", fx_pod("p6", "u6", 1001, 0), PRED_EXCEEDS, "Insufficient cpu");
    expect(CACHE_SHARD_NONE, "n", fx_pod("p7", "u7", 100, 2 * FX_GI + 1), PRED_EXCEEDS,
           "Insufficient memory");
    model_pod *p = fx_pod("p4", "u4", 100, 0);
    fx_pod_res(&reg, p, "example.com/foo", 3);
    expect(CACHE_SHARD_NONE, "n", p, PRED_EXCEEDS, "Insufficient example.com/foo");
    p = fx_pod("p5", "u5", 100, 0);
    fx_pod_res(&reg, p, "example.com/foo", 2);
    expect(CACHE_SHARD_NONE, "n", p, PRED_OK, NULL);
}

Test(pred, extended_resource_the_node_lacks)
{
    add(fx_node("n", 1000, FX_GI, 110));
    model_pod *p = fx_pod("p", "u", 100, 0);
    fx_pod_res(&reg, p, "example.com/bar", 1);
    expect(CACHE_SHARD_NONE, "n", p, PRED_EXCEEDS, "Insufficient example.com/bar");
}

Test(pred, unknown_resource)
{
    add(fx_node("n", 1000, FX_GI, 110));
    model_pod *p = fx_pod("p", "u", 100, 0);
    p->unknown_res = "example.com/nowhere";
    expect(CACHE_SHARD_NONE, "n", p, PRED_UNKNOWN_RESOURCE, "Insufficient example.com/nowhere");
    cr_assert(pred_unresolvable(PRED_UNKNOWN_RESOURCE));
}

Test(pred, too_many_pods)
{
    add(fx_node("n", 4000, 8 * FX_GI, 1));
    expect(CACHE_SHARD_NONE, "n", fx_pod("p0", "u0", 0, 0), PRED_OK, NULL);
    occupy("n", "o1", 0, 0, 0, 0);
    expect(CACHE_SHARD_NONE, "n", fx_pod("p", "u", 0, 0), PRED_TOO_MANY_PODS, "Too many pods");
}

Test(pred, taints_and_tolerations)
{
    model_node *n = fx_node("n", 4000, 8 * FX_GI, 110);
    fx_node_taint(n, "soft", "x", MODEL_EFFECT_PREFER_NO_SCHEDULE);
    fx_node_taint(n, "dedicated", "gpu", MODEL_EFFECT_NO_SCHEDULE);
    add(n);
    cache_read_lock(c);
    const cache_node *cn = cache_node_find(c, "n", 1);
    model_pod *p = fx_pod("p", "u", 100, 0);
    pred_result r = pred_check(&reg, CACHE_SHARD_NONE, p, cn);
    cache_read_unlock(c);
    cr_assert_eq(r.code, PRED_TAINT);
    cr_assert_eq(r.arg, 1, "PreferNoSchedule does not filter; the NoSchedule taint does");
    expect(CACHE_SHARD_NONE, "n", p, PRED_TAINT, "node(s) had untolerated taint {dedicated: gpu}");

    p = fx_pod("p", "u", 100, 0);
    fx_pod_tol(p, "dedicated", MODEL_TOL_EQUAL, "gpu", MODEL_EFFECT_NO_SCHEDULE);
    expect(CACHE_SHARD_NONE, "n", p, PRED_OK, NULL);
    p = fx_pod("p", "u", 100, 0);
    fx_pod_tol(p, "dedicated", MODEL_TOL_EQUAL, "cpu", MODEL_EFFECT_NO_SCHEDULE);
    expect(CACHE_SHARD_NONE, "n", p, PRED_TAINT, NULL);
    p = fx_pod("p", "u", 100, 0);
    fx_pod_tol(p, "", MODEL_TOL_EXISTS, "", MODEL_EFFECT_ALL);
    expect(CACHE_SHARD_NONE, "n", p, PRED_OK, NULL);

    model_node *m = fx_node("m", 4000, 8 * FX_GI, 110);
    fx_node_taint(m, "evict", "", MODEL_EFFECT_NO_EXECUTE);
    add(m);
    expect(CACHE_SHARD_NONE, "m", fx_pod("p", "u", 100, 0), PRED_TAINT,
           "node(s) had untolerated taint {evict: }");
    p = fx_pod("p", "u", 100, 0);
    fx_pod_tol(p, "evict", MODEL_TOL_EXISTS, "", MODEL_EFFECT_NO_EXECUTE);
    expect(CACHE_SHARD_NONE, "m", p, PRED_OK, NULL);
    cr_assert(pred_unresolvable(PRED_TAINT));
}

Test(pred, node_selector_and_affinity)
{
    model_node *n = fx_node("n", 4000, 8 * FX_GI, 110);
    fx_node_label(n, "zone", "a");
    fx_node_label(n, "disk", "ssd");
    add(n);
    const char *msg = "node(s) didn't match Pod's node affinity/selector";
    model_pod *p = fx_pod("p", "u", 100, 0);
    fx_pod_selector(p, "zone", "a");
    fx_pod_selector(p, "disk", "ssd");
    expect(CACHE_SHARD_NONE, "n", p, PRED_OK, NULL);
    p = fx_pod("p", "u", 100, 0);
    fx_pod_selector(p, "zone", "b");
    expect(CACHE_SHARD_NONE, "n", p, PRED_AFFINITY, msg);
    p = fx_pod("p", "u", 100, 0);
    fx_pod_selector(p, "gpu", "yes");
    expect(CACHE_SHARD_NONE, "n", p, PRED_AFFINITY, msg);
    p = fx_pod("p", "u", 100, 0);
    fx_pod_affinity_in(p, "zone", "a");
    expect(CACHE_SHARD_NONE, "n", p, PRED_OK, NULL);
    p = fx_pod("p", "u", 100, 0);
    fx_pod_affinity_in(p, "zone", "c");
    expect(CACHE_SHARD_NONE, "n", p, PRED_AFFINITY, msg);
    p = fx_pod("p", "u", 100, 0);
    p->affinity.present = true; /* no terms: matches nothing */
    expect(CACHE_SHARD_NONE, "n", p, PRED_AFFINITY, msg);
}

Test(pred, unschedulable_not_ready_and_order)
{
    model_node *n = fx_node("cordoned", 4000, 8 * FX_GI, 110);
    n->unschedulable = true;
    add(n);
    expect(CACHE_SHARD_NONE, "cordoned", fx_pod("p", "u", 100, 0), PRED_UNSCHEDULABLE,
           "node(s) were unschedulable");
    model_pod *p = fx_pod("p", "u", 100, 0);
    fx_pod_tol(p, "node.kubernetes.io/unschedulable", MODEL_TOL_EXISTS, "",
               MODEL_EFFECT_NO_SCHEDULE);
    expect(CACHE_SHARD_NONE, "cordoned", p, PRED_OK, NULL);

    model_node *m = fx_node("down", 1000, 8 * FX_GI, 110);
    m->ready = false;
    m->unschedulable = true;
    add(m);
    /* cheapest-first: not ready is reported before anything else */
    expect(CACHE_SHARD_NONE, "down", fx_pod("p", "u", 5000, 0), PRED_NOT_READY,
           "node(s) were not ready");
    cr_assert(pred_unresolvable(PRED_NOT_READY));
    cr_assert(pred_unresolvable(PRED_UNSCHEDULABLE));
}

Test(pred, shard_modes)
{
    cache_set_shard_mode(c, CACHE_SHARD_HARD);
    add(fx_node("in", 4000, 8 * FX_GI, 110));
    add(fx_node("out", 4000, 8 * FX_GI, 110));
    const char *names[] = {"in"};
    cr_assert_eq(cache_shard_apply(c, names, 1, NULL), AS_OK);
    expect(CACHE_SHARD_HARD, "in", fx_pod("p", "u", 100, 0), PRED_OK, NULL);
    expect(CACHE_SHARD_HARD, "out", fx_pod("p", "u", 100, 0), PRED_SHARD,
           "node(s) were not in this scheduler's shard");
    expect(CACHE_SHARD_SOFT, "out", fx_pod("p", "u", 100, 0), PRED_OK, NULL);
    expect(CACHE_SHARD_NONE, "out", fx_pod("p", "u", 100, 0), PRED_OK, NULL);
    cr_assert(pred_unresolvable(PRED_SHARD));
}

Test(pred, not_found_reason_and_resolvability)
{
    char buf[128];
    pred_reason(&reg, NULL, NULL, (pred_result){PRED_NOT_FOUND, 0}, buf, sizeof buf);
    cr_assert_str_eq(buf, "node(s) were not found in agentsched's node cache");
    cr_assert(pred_unresolvable(PRED_NOT_FOUND));
    cr_assert(pred_unresolvable(PRED_AFFINITY));
    cr_assert(!pred_unresolvable(PRED_INSUFFICIENT));
    cr_assert(!pred_unresolvable(PRED_TOO_MANY_PODS));
    cr_assert(!pred_unresolvable(PRED_INSUFFICIENT_GPU));
    cr_assert(pred_unresolvable(PRED_EXCEEDS));
    cr_assert(pred_unresolvable(PRED_EXCEEDS_GPU));
    cr_assert(!pred_unresolvable(PRED_OK));
    /* truncation is safe */
    char tiny[8];
    pred_reason(&reg, NULL, NULL, (pred_result){PRED_NOT_READY, 0}, tiny, sizeof tiny);
    cr_assert_str_eq(tiny, "node(s)");
}

Test(pred, whole_gpus_need_free_devices)
{
    model_node *n = fx_node("g", 16000, 64 * FX_GI, 110);
    fx_node_gpus(&reg, n, 2);
    add(n);
    occupy("g", "share", 100, 0, 0, 300); /* 300 milli on device 0 */
    model_pod *p = fx_pod("p", "u", 100, 0);
    fx_pod_gpu(&reg, p, 2, 0);
    expect(CACHE_SHARD_NONE, "g", p, PRED_INSUFFICIENT_GPU, "Insufficient nvidia.com/gpu");
    p = fx_pod("p", "u", 100, 0);
    fx_pod_gpu(&reg, p, 1, 0);
    cache_read_lock(c);
    uint32_t dev = 0;
    cr_assert(pred_gpu_choose(p, cache_node_find(c, "g", 1), &dev));
    cache_read_unlock(c);
    cr_assert_eq(dev, 2u, "the fully free device");
    expect(CACHE_SHARD_NONE, "g", p, PRED_OK, NULL);
}

Test(pred, gpu_share_never_spans_devices)
{
    model_node *n = fx_node("g", 16000, 64 * FX_GI, 110);
    fx_node_gpus(&reg, n, 3);
    add(n);
    occupy("g", "s0", 100, 0, 0, 600); /* device 0: 400 free */
    occupy("g", "s1", 100, 0, 0, 600); /* device 1: 400 free */
    occupy("g", "w2", 100, 0, 1, 0);   /* device 2: full */
    cache_read_lock(c);
    const cache_node *g = cache_node_find(c, "g", 1);
    cr_assert_eq(cache_node_gpu_used(g, 0), 600);
    cr_assert_eq(cache_node_gpu_used(g, 1), 600);
    cr_assert_eq(cache_node_gpu_used(g, 2), 1000);
    cache_read_unlock(c);
    model_pod *p = fx_pod("p", "u", 100, 0);
    fx_pod_gpu(&reg, p, 1, 600);
    expect(CACHE_SHARD_NONE, "g", p, PRED_INSUFFICIENT_GPU, "Insufficient nvidia.com/gpu");
    p = fx_pod("p", "u", 100, 0);
    fx_pod_gpu(&reg, p, 1, 400);
    expect(CACHE_SHARD_NONE, "g", p, PRED_OK, NULL);
}

Test(pred, gpu_share_best_fit)
{
    model_node *n = fx_node("g", 16000, 64 * FX_GI, 110);
    fx_node_gpus(&reg, n, 3);
    add(n);
    occupy("g", "s0", 100, 0, 0, 200); /* device 0: 800 free */
    occupy("g", "s1", 100, 0, 0, 500); /* best fit puts it on device 0: 300 free */
    model_pod *p = fx_pod("p", "u", 100, 0);
    fx_pod_gpu(&reg, p, 1, 250);
    cache_read_lock(c);
    const cache_node *g = cache_node_find(c, "g", 1);
    cr_assert_eq(cache_node_gpu_used(g, 0), 700);
    uint32_t dev = 0;
    cr_assert(pred_gpu_choose(p, g, &dev));
    cache_read_unlock(c);
    cr_assert_eq(dev, 1u, "least free device that still holds the share");
    model_pod_free(p);
}

Test(pred, gpu_pods_on_nodes_without_devices)
{
    add(fx_node("cpu-only", 16000, 64 * FX_GI, 110));
    model_node *g = fx_node("g", 16000, 64 * FX_GI, 110);
    fx_node_gpus(&reg, g, 1); /* interns nvidia.com/gpu */
    add(g);
    model_pod *p = fx_pod("p", "u", 100, 0);
    fx_pod_gpu(&reg, p, 1, 0);
    expect(CACHE_SHARD_NONE, "cpu-only", p, PRED_EXCEEDS, "Insufficient nvidia.com/gpu");
    p = fx_pod("p", "u", 100, 0);
    fx_pod_gpu(&reg, p, 1, 500);
    expect(CACHE_SHARD_NONE, "cpu-only", p, PRED_EXCEEDS_GPU, "Insufficient nvidia.com/gpu");
    /* more whole devices than g has: no eviction helps either */
    p = fx_pod("p", "u", 100, 0);
    fx_pod_gpu(&reg, p, 2, 0);
    expect(CACHE_SHARD_NONE, "g", p, PRED_EXCEEDS_GPU, "Insufficient nvidia.com/gpu");
    p = fx_pod("p", "u", 100, 0);
    cache_read_lock(c);
    uint32_t dev = 7;
    cr_assert(pred_gpu_choose(p, cache_node_find(c, "cpu-only", 8), &dev));
    cache_read_unlock(c);
    cr_assert_eq(dev, 0u, "no GPU demand: no devices");
    model_pod_free(p);
}

/* ---- fixtures: real v1 objects through the decoders ----------------- */

static model_pod *decode_pod(const json_t *obj, const char *what)
{
    model_pod *p = NULL;
    as_diag d = {0};
    cr_assert_eq(model_pod_from_json(&reg, obj, &p, &d), AS_OK, "%s: %s", what, d.msg);
    return p;
}

Test(pred, fixture_cases)
{
    json_error_t jerr;
    json_t *doc = json_load_file(TEST_DATA_DIR "/pred/cases.json", 0, &jerr);
    cr_assert(doc, "cases.json: %s", jerr.text);
    json_t *cases = json_object_get(doc, "cases");
    cr_assert(json_is_array(cases));
    size_t i;
    json_t *tc;
    json_array_foreach(cases, i, tc)
    {
        const char *name = json_string_value(json_object_get(tc, "name"));
        cache_free(c);
        model_registry_destroy(&reg);
        setup();

        const char *mode_s = json_string_value(json_object_get(tc, "shard"));
        cache_shard_mode mode = CACHE_SHARD_NONE;
        if (mode_s)
            cr_assert_eq(cache_shard_mode_parse(mode_s, &mode), AS_OK, "%s", name);
        cache_set_shard_mode(c, mode);

        model_node *node = NULL;
        as_diag d = {0};
        cr_assert_eq(model_node_from_json(&reg, json_object_get(tc, "node"), &node, &d), AS_OK,
                     "%s: %s", name, d.msg);
        char node_name[128];
        snprintf(node_name, sizeof node_name, "%s", node->name);
        cr_assert_eq(cache_node_upsert(c, node), AS_OK);
        const char *in[] = {node_name};
        bool in_shard = !json_is_false(json_object_get(tc, "in_shard"));
        cr_assert_eq(cache_shard_apply(c, in, in_shard ? 1 : 0, NULL), AS_OK);

        size_t j;
        json_t *rp;
        json_array_foreach(json_object_get(tc, "running"), j, rp)
        {
            model_pod *p = decode_pod(rp, name);
            cr_assert_eq(cache_pod_upsert(c, p), AS_OK, "%s", name);
            model_pod_free(p);
        }
        as_diag inv = {0};
        cr_assert_eq(cache_check_invariants(c, &inv), AS_OK, "%s: %s", name, inv.msg);

        model_pod *pod = decode_pod(json_object_get(tc, "pod"), name);
        cache_read_lock(c);
        const cache_node *n = cache_node_find(c, node_name, strlen(node_name));
        cr_assert(n);
        pred_result r = pred_check(&reg, mode, pod, n);
        char why[160] = "";
        if (r.code != PRED_OK)
            pred_reason(&reg, n, pod, r, why, sizeof why);
        cache_read_unlock(c);
        const char *want = json_string_value(json_object_get(tc, "reason"));
        cr_assert_str_eq(why, want, "%s", name);
        if (r.code != PRED_OK)
            cr_assert_eq(pred_unresolvable(r.code),
                         json_is_true(json_object_get(tc, "unresolvable")), "%s: unresolvable",
                         name);
        model_pod_free(pod);
    }
    json_decref(doc);
}
