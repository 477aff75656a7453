/* test_cache.c - node cache: nodes, pod index transitions, assume/forget,
 * detach/reattach, resync epochs, shards, invariants, memory. */
/* Tables leave trailing step fields zero on purpose. */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

TestSuite(cache, .init = setup, .fini = teardown);

static void add_node(const char *name, int64_t cpu)
{
    cr_assert_eq(cache_node_upsert(c, fx_node(name, cpu, 64 * FX_GI, 110)), AS_OK);
}

typedef struct nref {
    uint32_t slot;
    uint64_t id, version, generation;
} nref;

static bool node_ref(const char *name, nref *out)
{
    cache_read_lock(c);
    cache_node *n = cache_node_find(c, name, strlen(name));
    if (n)
        *out = (nref){n->slot, n->id, cache_node_bind_version(n), cache_node_generation(n)};
    cache_read_unlock(c);
    return n != NULL;
}

static int64_t used(const char *name, int r)
{
    int64_t v = -1;
    cache_read_lock(c);
    cache_node *n = cache_node_find(c, name, strlen(name));
    if (n)
        v = cache_node_requested(n, r);
    cache_read_unlock(c);
    return v;
}

static cache_assume_result assume(const model_pod *pod, const char *node)
{
    nref r;
    cr_assert(node_ref(node, &r), "node %s", node);
    cache_assume_result res;
    cr_assert_eq(cache_assume_if(c, pod, r.slot, r.id, r.version, NULL, NULL, &res, NULL), AS_OK);
    return res;
}

static void check_invariants(void)
{
    as_diag d = {0};
    cr_assert_eq(cache_check_invariants(c, &d), AS_OK, "%s", d.msg);
}

Test(cache, shard_mode_names)
{
    cache_shard_mode m;
    cr_assert_eq(cache_shard_mode_parse("soft", &m), AS_OK);
    cr_assert_eq(m, CACHE_SHARD_SOFT);
    cr_assert_eq(cache_shard_mode_parse("hard", &m), AS_OK);
    cr_assert_eq(m, CACHE_SHARD_HARD);
    cr_assert_eq(cache_shard_mode_parse("none", &m), AS_OK);
    cr_assert_eq(cache_shard_mode_parse("Soft", &m), AS_EINVAL);
    cr_assert_str_eq(cache_shard_mode_name(CACHE_SHARD_HARD), "hard");
}

/* cache_node_find_n with caller-computed hashes, without, and one find at
 * a time agree, over batches longer than its interleaving block and names
 * of every tail length around the hash's 8-byte steps. */
Test(cache, find_n_with_caller_hashes_matches_single_finds)
{
    enum { N = 40 };
    char names[N + 3][32];
    for (int i = 0; i < N; i++) {
        snprintf(names[i], sizeof names[i], "%.*s%d", i % 20, "abcdefghijklmnopqrst", i);
        add_node(names[i], 1000);
    }
    snprintf(names[N], sizeof names[N], "absent");
    snprintf(names[N + 1], sizeof names[N + 1], "abcdefghij10x");
    snprintf(names[N + 2], sizeof names[N + 2], "%s", names[3]); /* a repeat */
    cache_name with_h[N + 3], no_h[N + 3];
    for (int i = 0; i < N + 3; i++) {
        size_t len = strlen(names[i]);
        with_h[i] = (cache_name){names[i], len, cache_name_hash(names[i], len)};
        no_h[i] = (cache_name){names[i], len, 0};
    }
    cache_node *with[N + 3], *without[N + 3];
    cache_read_lock(c);
    cache_node_find_n(c, with_h, N + 3, with);
    cache_node_find_n(c, no_h, N + 3, without);
    for (int i = 0; i < N + 3; i++) {
        cache_node *one = cache_node_find(c, names[i], no_h[i].len);
        cr_assert_eq(with[i], one, "%s", names[i]);
        cr_assert_eq(without[i], one, "%s", names[i]);
        cr_assert(i >= N && i != N + 2 ? one == NULL : one != NULL, "%s", names[i]);
    }
    cache_read_unlock(c);
}

Test(cache, node_add_find_by_len_replace_remove)
{
    add_node("n1", 4000);
    add_node("n2", 8000);
    add_node("n3", 2000);
    cache_read_lock(c);
    cr_assert_eq(cache_node_count(c), 3);
    /* names are ptr+len, not NUL-terminated */
    const char *buf = "n2,n3";
    cache_node *n2 = cache_node_find(c, buf, 2);
    cr_assert(n2);
    cr_assert_str_eq(n2->spec->name, "n2");
    cr_assert_null(cache_node_find(c, buf, 1));
    cr_assert_null(cache_node_find(c, "n4", 2));
    cr_assert_eq(cache_node_at(c, n2->slot), n2);
    cache_read_unlock(c);

    nref before, after;
    cr_assert(node_ref("n2", &before));
    model_pod *p = fx_pod("a", "ua", 1000, FX_GI);
    fx_pod_bind(p, "n2");
    cr_assert_eq(cache_pod_upsert(c, p), AS_OK);
    cr_assert_eq(used("n2", MODEL_RES_CPU), 1000);

    /* Replacing the spec keeps usage, id and slot, bumps bind_version. */
    cr_assert_eq(cache_node_upsert(c, fx_node("n2", 6000, 64 * FX_GI, 110)), AS_OK);
    cr_assert(node_ref("n2", &after));
    cr_assert_eq(after.id, before.id);
    cr_assert_eq(after.slot, before.slot);
    cr_assert_gt(after.version, before.version);
    cr_assert_gt(after.generation, before.generation);
    cr_assert_eq(used("n2", MODEL_RES_CPU), 1000);
    cache_read_lock(c);
    cr_assert_eq(cache_node_find(c, "n2", 2)->spec->alloc.v[MODEL_RES_CPU], 6000);
    cache_read_unlock(c);

    /* Removing n1 moves the last node into its slot; (slot,id) lookups
     * still find the moved incarnation and not the removed one. */
    nref n1 = {0}, n3 = {0};
    cr_assert(node_ref("n1", &n1));
    cr_assert(node_ref("n3", &n3));
    cr_assert_eq(cache_node_remove(c, "n1"), AS_OK);
    cr_assert_eq(cache_node_remove(c, "n1"), AS_ENOTFOUND);
    cache_read_lock(c);
    cr_assert_eq(cache_node_count(c), 2);
    cr_assert_null(cache_node_get(c, n1.slot, n1.id));
    cache_node *m3 = cache_node_get(c, n3.slot, n3.id);
    cr_assert(m3);
    cr_assert_str_eq(m3->spec->name, "n3");
    cr_assert_eq(cache_node_at(c, m3->slot), m3);
    cache_read_unlock(c);

    /* A returning name is a new incarnation. */
    add_node("n1", 4000);
    nref again;
    cr_assert(node_ref("n1", &again));
    cr_assert_neq(again.id, n1.id);
    check_invariants();
    model_pod_free(p);
}

Test(cache, node_upsert_rejects_nameless)
{
    model_node *n = fx_node("x", 1, 1, 1);
    n->name = NULL;
    cr_assert_eq(cache_node_upsert(c, n), AS_EINVAL);
    cr_assert_eq(cache_node_upsert(c, NULL), AS_EINVAL);
}

Test(cache, limits_refuse_new_nodes_and_pods_but_keep_updates)
{
    cache_set_limits(c, 2, 2);
    add_node("a", 4000);
    add_node("b", 4000);
    cr_assert_eq(cache_node_upsert(c, fx_node("c", 1000, FX_GI, 10)), AS_ELIMIT);
    cr_assert_eq(cache_node_count(c), 2);
    /* a known node's update is not a new node */
    cr_assert_eq(cache_node_upsert(c, fx_node("a", 8000, FX_GI, 10)), AS_OK);
    model_pod *p1 = fx_pod("p1", "u1", 100, FX_GI), *p2 = fx_pod("p2", "u2", 100, FX_GI);
    model_pod *p3 = fx_pod("p3", "u3", 100, FX_GI);
    fx_pod_bind(p1, "a");
    fx_pod_bind(p2, "a");
    fx_pod_bind(p3, "b");
    cr_assert_eq(cache_pod_upsert(c, p1), AS_OK);
    cr_assert_eq(cache_pod_upsert(c, p2), AS_OK);
    cr_assert_eq(cache_pod_upsert(c, p3), AS_ELIMIT);
    cr_assert_eq(used("b", MODEL_RES_CPU), 0, "a refused pod takes nothing");
    /* the binder's assume is refused the same way */
    nref r = {0};
    cr_assert(node_ref("b", &r));
    cache_assume_result res;
    p3->node_name = NULL;
    cr_assert_eq(cache_assume_if(c, p3, r.slot, r.id, r.version, NULL, NULL, &res, NULL),
                 AS_ELIMIT);
    /* moving a held pod is an update, not a new pod */
    fx_pod_bind(p2, "b");
    cr_assert_eq(cache_pod_upsert(c, p2), AS_OK);
    cr_assert_eq(used("b", MODEL_RES_CPU), 100);
    /* once one leaves, a new one fits again */
    cr_assert_eq(cache_pod_delete(c, "u1"), AS_OK);
    fx_pod_bind(p3, "b");
    cr_assert_eq(cache_pod_upsert(c, p3), AS_OK);
    /* 0 restores the built-in bounds */
    cache_set_limits(c, 0, 0);
    cr_assert_eq(cache_node_upsert(c, fx_node("c", 1000, FX_GI, 10)), AS_OK);
    check_invariants();
    model_pod_free(p1);
    model_pod_free(p2);
    model_pod_free(p3);
}

Test(cache, many_nodes_hash_with_removals)
{
    char name[32];
    for (int i = 0; i < 3000; i++) {
        snprintf(name, sizeof name, "node-%d", i);
        add_node(name, 1000);
    }
    for (int i = 0; i < 3000; i += 3) {
        snprintf(name, sizeof name, "node-%d", i);
        cr_assert_eq(cache_node_remove(c, name), AS_OK);
    }
    cache_read_lock(c);
    cr_assert_eq(cache_node_count(c), 2000);
    for (int i = 0; i < 3000; i++) {
        snprintf(name, sizeof name, "node-%d", i);
        cache_node *n = cache_node_find(c, name, strlen(name));
        if (i % 3 == 0) {
            cr_assert_null(n, "%s", name);
        } else {
            cr_assert(n, "%s", name);
            cr_assert_str_eq(n->spec->name, name);
            cr_assert_eq(cache_node_at(c, n->slot), n);
        }
    }
    cache_read_unlock(c);
    check_invariants();
}

/* ---- pod state transitions (table) -------------------------------- */

enum { OP_END = 0, OP_UPSERT, OP_ASSUME, OP_DELETE, OP_FORGET };

typedef struct step {
    int op;
    const char *node; /* UPSERT: spec.nodeName (NULL unbound); ASSUME: target */
    model_phase phase;
    int64_t cpu; /* request (0 = 100) */
    int expect;  /* as_err for DELETE/FORGET, cache_assume_result for ASSUME */
} step;

typedef struct transition {
    const char *name;
    step steps[4];
    cache_pod_state state;
    const char *node;
    int64_t n1_cpu, n2_cpu;
    size_t detached;
} transition;

static const transition transitions[] = {
    {"bound", {{OP_UPSERT, "n1"}}, CACHE_POD_BOUND, "n1", 100, 0, 0},
    {"unbound is not indexed", {{OP_UPSERT, NULL}}, CACHE_POD_ABSENT, "", 0, 0, 0},
    {"bound twice counts once",
     {{OP_UPSERT, "n1"}, {OP_UPSERT, "n1"}},
     CACHE_POD_BOUND,
     "n1",
     100,
     0,
     0},
    {"resized in place",
     {{OP_UPSERT, "n1"}, {OP_UPSERT, "n1", MODEL_PHASE_RUNNING, 300}},
     CACHE_POD_BOUND,
     "n1",
     300,
     0,
     0},
    {"bound moves", {{OP_UPSERT, "n1"}, {OP_UPSERT, "n2"}}, CACHE_POD_BOUND, "n2", 0, 100, 0},
    {"bound then succeeded",
     {{OP_UPSERT, "n1"}, {OP_UPSERT, "n1", MODEL_PHASE_SUCCEEDED}},
     CACHE_POD_ABSENT,
     "",
     0,
     0,
     0},
    {"bound then failed",
     {{OP_UPSERT, "n1"}, {OP_UPSERT, "n1", MODEL_PHASE_FAILED}},
     CACHE_POD_ABSENT,
     "",
     0,
     0,
     0},
    {"bound then unbound", {{OP_UPSERT, "n1"}, {OP_UPSERT, NULL}}, CACHE_POD_ABSENT, "", 0, 0, 0},
    {"bound then deleted",
     {{OP_UPSERT, "n1"}, {OP_DELETE, .expect = AS_OK}},
     CACHE_POD_ABSENT,
     "",
     0,
     0,
     0},
    {"delete unknown", {{OP_DELETE, .expect = AS_ENOTFOUND}}, CACHE_POD_ABSENT, "", 0, 0, 0},
    {"assumed",
     {{OP_ASSUME, "n1", .expect = CACHE_ASSUME_FAST}},
     CACHE_POD_ASSUMED,
     "n1",
     100,
     0,
     0},
    {"assumed then watch lags (unbound)",
     {{OP_ASSUME, "n1", .expect = CACHE_ASSUME_FAST}, {OP_UPSERT, NULL}},
     CACHE_POD_ASSUMED,
     "n1",
     100,
     0,
     0},
    {"assumed then confirmed",
     {{OP_ASSUME, "n1", .expect = CACHE_ASSUME_FAST}, {OP_UPSERT, "n1"}},
     CACHE_POD_BOUND,
     "n1",
     100,
     0,
     0},
    {"assumed then bound elsewhere",
     {{OP_ASSUME, "n1", .expect = CACHE_ASSUME_FAST}, {OP_UPSERT, "n2"}},
     CACHE_POD_BOUND,
     "n2",
     0,
     100,
     0},
    {"assumed then terminal",
     {{OP_ASSUME, "n1", .expect = CACHE_ASSUME_FAST}, {OP_UPSERT, NULL, MODEL_PHASE_FAILED}},
     CACHE_POD_ABSENT,
     "",
     0,
     0,
     0},
    {"assumed then forgotten",
     {{OP_ASSUME, "n1", .expect = CACHE_ASSUME_FAST}, {OP_FORGET, .expect = AS_OK}},
     CACHE_POD_ABSENT,
     "",
     0,
     0,
     0},
    {"bound cannot be forgotten",
     {{OP_UPSERT, "n1"}, {OP_FORGET, .expect = AS_ECONFLICT}},
     CACHE_POD_BOUND,
     "n1",
     100,
     0,
     0},
    {"forget unknown", {{OP_FORGET, .expect = AS_ENOTFOUND}}, CACHE_POD_ABSENT, "", 0, 0, 0},
    {"assume twice same node",
     {{OP_ASSUME, "n1", .expect = CACHE_ASSUME_FAST},
      {OP_ASSUME, "n1", .expect = CACHE_ASSUME_SAME_NODE}},
     CACHE_POD_ASSUMED,
     "n1",
     100,
     0,
     0},
    {"assume on other node refused",
     {{OP_UPSERT, "n1"}, {OP_ASSUME, "n2", .expect = CACHE_ASSUME_OTHER_NODE}},
     CACHE_POD_BOUND,
     "n1",
     100,
     0,
     0},
    {"bound on unknown node is detached", {{OP_UPSERT, "nx"}}, CACHE_POD_BOUND, "nx", 0, 0, 1},
    {"detached then moved",
     {{OP_UPSERT, "nx"}, {OP_UPSERT, "n2"}},
     CACHE_POD_BOUND,
     "n2",
     0,
     100,
     0},
};

Test(cache, pod_transitions_table)
{
    for (size_t t = 0; t < sizeof transitions / sizeof transitions[0]; t++) {
        const transition *tr = &transitions[t];
        cache_free(c);
        cr_assert_eq(cache_new(&reg, &c), AS_OK);
        add_node("n1", 4000);
        add_node("n2", 4000);
        for (int s = 0; s < 4 && tr->steps[s].op != OP_END; s++) {
            const step *st = &tr->steps[s];
            model_pod *p = fx_pod("web", "u1", st->cpu ? st->cpu : 100, 0);
            p->phase = st->phase;
            switch (st->op) {
            case OP_UPSERT:
                fx_pod_bind(p, st->node);
                cr_assert_eq(cache_pod_upsert(c, p), AS_OK, "%s step %d", tr->name, s);
                break;
            case OP_ASSUME:
                cr_assert_eq(assume(p, st->node), (cache_assume_result)st->expect, "%s step %d",
                             tr->name, s);
                break;
            case OP_DELETE:
                cr_assert_eq(cache_pod_delete(c, "u1"), (as_err)st->expect, "%s step %d", tr->name,
                             s);
                break;
            case OP_FORGET:
                cr_assert_eq(cache_forget(c, "u1"), (as_err)st->expect, "%s step %d", tr->name, s);
                break;
            }
            model_pod_free(p);
        }
        cache_pod_info info;
        cache_pod_lookup(c, "u1", &info);
        cr_assert_eq(info.state, tr->state, "%s: state %d", tr->name, info.state);
        cr_assert_str_eq(info.node, tr->node, "%s", tr->name);
        if (tr->state != CACHE_POD_ABSENT)
            cr_assert_str_eq(info.key, "default/web", "%s", tr->name);
        cr_assert_eq(used("n1", MODEL_RES_CPU), tr->n1_cpu, "%s: n1", tr->name);
        cr_assert_eq(used("n2", MODEL_RES_CPU), tr->n2_cpu, "%s: n2", tr->name);
        int64_t pods = (tr->state != CACHE_POD_ABSENT && tr->detached == 0) ? 1 : 0;
        cr_assert_eq(used("n1", MODEL_RES_PODS) + used("n2", MODEL_RES_PODS), pods, "%s", tr->name);
        cache_stats st;
        cache_get_stats(c, &st);
        cr_assert_eq(st.pods_detached, tr->detached, "%s", tr->name);
        cr_assert_eq(st.pods_bound + st.pods_assumed, tr->state != CACHE_POD_ABSENT, "%s",
                     tr->name);
        check_invariants();
    }
}

Test(cache, pod_without_uid_keys_by_namespace_name)
{
    add_node("n1", 4000);
    model_pod *p = fx_pod("web", "", 100, 0);
    fx_pod_bind(p, "n1");
    cr_assert_eq(cache_pod_upsert(c, p), AS_OK);
    cache_pod_info info;
    cache_pod_lookup(c, "default/web", &info);
    cr_assert_eq(info.state, CACHE_POD_BOUND);
    /* what it adds to the node's requested, as preempt frees it */
    cr_assert_eq(info.req.v[MODEL_RES_CPU], 100);
    cr_assert_eq(info.req.v[MODEL_RES_PODS], 1);
    cr_assert_eq(info.req.v[MODEL_RES_CPU], used("n1", MODEL_RES_CPU));
    cr_assert_eq(cache_pod_delete(c, "default/web"), AS_OK);
    model_pod_free(p);
}

/* ---- assume / recheck / expire ------------------------------------ */

static bool fit_pred(void *arg, const model_pod *pod, const cache_node *node, uint32_t *dev)
{
    int *calls = arg;
    (*calls)++;
    if (pred_check(&reg, CACHE_SHARD_NONE, pod, node).code != PRED_OK)
        return false;
    return pred_gpu_choose(pod, node, dev);
}

Test(cache, assume_fast_rechecked_nofit_gone)
{
    add_node("n1", 1000);
    nref r0;
    cr_assert(node_ref("n1", &r0));
    model_pod *a = fx_pod("a", "ua", 400, 0);
    model_pod *b = fx_pod("b", "ub", 400, 0);
    model_pod *d = fx_pod("d", "ud", 400, 0);
    int calls = 0;
    cache_assume_result res;

    cr_assert_eq(cache_assume_if(c, a, r0.slot, r0.id, r0.version, fit_pred, &calls, &res, NULL),
                 AS_OK);
    cr_assert_eq(res, CACHE_ASSUME_FAST);
    cr_assert_eq(calls, 0, "no GPU: the fast path needs no callback");
    nref r1;
    cr_assert(node_ref("n1", &r1));
    cr_assert_gt(r1.version, r0.version);

    /* b was evaluated at r0: version moved, still fits -> rechecked */
    cr_assert_eq(cache_assume_if(c, b, r0.slot, r0.id, r0.version, fit_pred, &calls, &res, NULL),
                 AS_OK);
    cr_assert_eq(res, CACHE_ASSUME_RECHECKED);
    cr_assert_eq(calls, 1);

    /* d at r0: 1200 > 1000 -> refused; nothing changes */
    cr_assert_eq(cache_assume_if(c, d, r0.slot, r0.id, r0.version, fit_pred, &calls, &res, NULL),
                 AS_OK);
    cr_assert_eq(res, CACHE_ASSUME_NO_FIT);
    cr_assert_eq(used("n1", MODEL_RES_CPU), 800);

    /* without a callback a moved version is always refused */
    cr_assert_eq(cache_assume_if(c, d, r0.slot, r0.id, r0.version, NULL, NULL, &res, NULL), AS_OK);
    cr_assert_eq(res, CACHE_ASSUME_NO_FIT);

    cr_assert_eq(cache_node_remove(c, "n1"), AS_OK);
    add_node("n1", 1000);
    cr_assert_eq(cache_assume_if(c, d, r0.slot, r0.id, r0.version, fit_pred, &calls, &res, NULL),
                 AS_OK);
    cr_assert_eq(res, CACHE_ASSUME_NODE_GONE);
    /* the assumed pods re-attached to the new incarnation */
    cr_assert_eq(used("n1", MODEL_RES_CPU), 800);
    check_invariants();
    model_pod_free(a);
    model_pod_free(b);
    model_pod_free(d);
}

Test(cache, assume_gpu_devices_and_expire)
{
    model_node *n = fx_node("g1", 8000, 64 * FX_GI, 110);
    fx_node_gpus(&reg, n, 2);
    cr_assert_eq(cache_node_upsert(c, n), AS_OK);
    model_pod *share = fx_pod("s", "us", 100, 0);
    fx_pod_gpu(&reg, share, 1, 600);
    model_pod *whole = fx_pod("w", "uw", 100, 0);
    fx_pod_gpu(&reg, whole, 1, 0);
    nref r;
    cr_assert(node_ref("g1", &r));
    int calls = 0;
    cache_assume_result res;
    uint32_t dev = 0;
    cr_assert_eq(cache_assume_if(c, share, r.slot, r.id, r.version, fit_pred, &calls, &res, &dev),
                 AS_OK);
    cr_assert_eq(res, CACHE_ASSUME_FAST);
    cr_assert_eq(calls, 1, "GPU pods choose devices through the callback");
    cr_assert_eq(dev, 1u);
    cr_assert(node_ref("g1", &r));
    cr_assert_eq(cache_assume_if(c, whole, r.slot, r.id, r.version, fit_pred, &calls, &res, &dev),
                 AS_OK);
    cr_assert_eq(res, CACHE_ASSUME_FAST);
    cr_assert_eq(dev, 2u, "the whole GPU takes the free device");
    cache_pod_info info;
    cache_pod_lookup(c, "uw", &info);
    cr_assert_eq(info.gpu_devices, 2u);
    cr_assert_gt(info.assumed_at_ms, 0);
    check_invariants();

    /* Expiry: nothing is older than an hour; everything is older than -1s. */
    size_t nexp = 99;
    cr_assert_eq(cache_expire_assumed(c, info.assumed_at_ms, 3600 * 1000, &nexp), AS_OK);
    cr_assert_eq(nexp, 0);
    cr_assert_eq(cache_expire_assumed(c, info.assumed_at_ms + 1000, 500, &nexp), AS_OK);
    cr_assert_eq(nexp, 2);
    cache_read_lock(c);
    cache_node *g = cache_node_find(c, "g1", 2);
    cr_assert_eq(cache_node_gpu_used(g, 0), 0);
    cr_assert_eq(cache_node_gpu_used(g, 1), 0);
    cache_read_unlock(c);
    check_invariants();
    model_pod_free(share);
    model_pod_free(whole);
}

Test(cache, invariants_catch_overcommit_by_assumed_pod)
{
    add_node("n1", 1000);
    model_pod *a = fx_pod("a", "ua", 800, 0);
    cr_assert_eq(assume(a, "n1"), CACHE_ASSUME_FAST);
    check_invariants();
    /* the node shrinks under an assumed pod: that is an overcommit */
    cr_assert_eq(cache_node_upsert(c, fx_node("n1", 500, 64 * FX_GI, 110)), AS_OK);
    as_diag d = {0};
    cr_assert_eq(cache_check_invariants(c, &d), AS_EINTERNAL);
    cr_assert(strstr(d.msg, "overcommitted cpu"), "%s", d.msg);
    /* once confirmed bound, the API server owns the truth */
    fx_pod_bind(a, "n1");
    cr_assert_eq(cache_pod_upsert(c, a), AS_OK);
    check_invariants();
    model_pod_free(a);
}

Test(cache, foreign_bind_past_allocatable_is_counted)
{
    add_node("n1", 1000);
    add_node("n2", 1000);
    cache_stats st;
    /* ours: 600m assumed on n1, then a foreign 500m bound there (another
     * scheduler that had not seen ours): counted, with ours in flight */
    model_pod *ours = fx_pod("ours", "uo", 600, 0);
    cr_assert_eq(assume(ours, "n1"), CACHE_ASSUME_FAST);
    model_pod *f1 = fx_pod("f1", "uf1", 500, 0);
    fx_pod_bind(f1, "n1");
    cr_assert_eq(cache_pod_upsert(c, f1), AS_OK);
    cache_get_stats(c, &st);
    cr_assert_eq(st.foreign_overcommits, 1);
    cr_assert_eq(st.foreign_overcommits_assumed, 1);
    /* our own bind confirmed: neither foreign nor counted */
    fx_pod_bind(ours, "n1");
    cr_assert_eq(cache_pod_upsert(c, ours), AS_OK);
    /* a repeat of the same foreign event changes nothing */
    cr_assert_eq(cache_pod_upsert(c, f1), AS_OK);
    cache_get_stats(c, &st);
    cr_assert_eq(st.foreign_overcommits, 1);
    /* a foreign pod that fits is not counted; one past allocatable on a
     * node with ours confirmed is, without ours in flight */
    model_pod *f2 = fx_pod("f2", "uf2", 900, 0);
    fx_pod_bind(f2, "n2");
    cr_assert_eq(cache_pod_upsert(c, f2), AS_OK);
    model_pod *f3 = fx_pod("f3", "uf3", 200, 0);
    fx_pod_bind(f3, "n2");
    cr_assert_eq(cache_pod_upsert(c, f3), AS_OK);
    cache_get_stats(c, &st);
    cr_assert_eq(st.foreign_overcommits, 2);
    cr_assert_eq(st.foreign_overcommits_assumed, 1);
    cr_assert_eq(used("n1", MODEL_RES_CPU), 1100, "the cache keeps the API server's truth");
    model_pod_free(ours);
    model_pod_free(f1);
    model_pod_free(f2);
    model_pod_free(f3);
}

/* ---- detach / reattach -------------------------------------------- */

Test(cache, detached_pods_reattach_when_node_returns)
{
    /* pods first (cluster file order), then the node */
    for (int i = 0; i < 3; i++) {
        char uid[8];
        snprintf(uid, sizeof uid, "u%d", i);
        model_pod *p = fx_pod(uid, uid, 100, 0);
        fx_pod_bind(p, "late");
        cr_assert_eq(cache_pod_upsert(c, p), AS_OK);
        model_pod_free(p);
    }
    cache_stats st;
    cache_get_stats(c, &st);
    cr_assert_eq(st.pods_detached, 3);
    add_node("late", 4000);
    cr_assert_eq(used("late", MODEL_RES_CPU), 300);
    cr_assert_eq(used("late", MODEL_RES_PODS), 3);
    cache_get_stats(c, &st);
    cr_assert_eq(st.pods_detached, 0);
    check_invariants();

    cr_assert_eq(cache_node_remove(c, "late"), AS_OK);
    cache_get_stats(c, &st);
    cr_assert_eq(st.pods_detached, 3);
    cr_assert_eq(st.pods_bound, 3);
    check_invariants();
    cr_assert_eq(cache_pod_delete(c, "u1"), AS_OK);
    add_node("late", 4000);
    cr_assert_eq(used("late", MODEL_RES_CPU), 200);
    check_invariants();
}

/* ---- resync epochs ------------------------------------------------ */

Test(cache, sync_epochs_mark_and_sweep)
{
    add_node("n1", 4000);
    add_node("n2", 4000);
    add_node("n3", 4000);
    model_pod *p1 = fx_pod("p1", "u1", 100, 0), *p2 = fx_pod("p2", "u2", 100, 0);
    model_pod *p3 = fx_pod("p3", "u3", 100, 0);
    fx_pod_bind(p1, "n1");
    fx_pod_bind(p2, "n2");
    cr_assert_eq(cache_pod_upsert(c, p1), AS_OK);
    cr_assert_eq(cache_pod_upsert(c, p2), AS_OK);
    cr_assert_eq(assume(p3, "n1"), CACHE_ASSUME_FAST);

    uint64_t e = cache_sync_begin(c);
    /* relist sees n1, n3 and only p1 */
    add_node("n1", 4000);
    add_node("n3", 4000);
    cr_assert_eq(cache_pod_upsert(c, p1), AS_OK);
    size_t removed = 0;
    cr_assert_eq(cache_sync_end_nodes(c, e, &removed), AS_OK);
    cr_assert_eq(removed, 1);
    cr_assert_eq(cache_sync_end_pods(c, e, &removed), AS_OK);
    cr_assert_eq(removed, 1, "p2 unseen -> removed; assumed p3 kept");
    nref r;
    cr_assert(!node_ref("n2", &r));
    cache_pod_info info;
    cache_pod_lookup(c, "u2", &info);
    cr_assert_eq(info.state, CACHE_POD_ABSENT);
    cache_pod_lookup(c, "u3", &info);
    cr_assert_eq(info.state, CACHE_POD_ASSUMED);
    cr_assert_eq(used("n1", MODEL_RES_CPU), 200);
    check_invariants();

    /* an epoch with everything seen removes nothing */
    e = cache_sync_begin(c);
    add_node("n1", 4000);
    add_node("n3", 4000);
    cr_assert_eq(cache_pod_upsert(c, p1), AS_OK);
    cr_assert_eq(cache_sync_end_nodes(c, e, &removed), AS_OK);
    cr_assert_eq(removed, 0);
    cr_assert_eq(cache_sync_end_pods(c, e, &removed), AS_OK);
    cr_assert_eq(removed, 0);
    model_pod_free(p1);
    model_pod_free(p2);
    model_pod_free(p3);
}

/* ---- shards ------------------------------------------------------- */

static bool in_shard(const char *name)
{
    cache_read_lock(c);
    cache_node *n = cache_node_find(c, name, strlen(name));
    bool v = n && cache_node_in_shard(n);
    cache_read_unlock(c);
    return v;
}

Test(cache, shard_apply_membership_revision_and_versions)
{
    cache_set_shard_mode(c, CACHE_SHARD_HARD);
    add_node("a", 1000);
    add_node("b", 1000);
    cr_assert(!in_shard("a"), "new nodes start outside the shard in hard mode");
    uint64_t rev0 = cache_shard_revision(c), rev;
    const char *names1[] = {"a", "later"};
    cr_assert_eq(cache_shard_apply(c, names1, 2, &rev), AS_OK);
    cr_assert_gt(rev, rev0);
    cr_assert(in_shard("a"));
    cr_assert(!in_shard("b"));
    add_node("later", 1000);
    cr_assert(in_shard("later"), "remembered name applied on arrival");

    nref before, after;
    cr_assert(node_ref("a", &before));
    const char *names2[] = {"b", "later"};
    uint64_t rev2;
    cr_assert_eq(cache_shard_apply(c, names2, 2, &rev2), AS_OK);
    cr_assert_gt(rev2, rev);
    cr_assert_eq(cache_shard_revision(c), rev2);
    cr_assert(!in_shard("a"));
    cr_assert(in_shard("b"));
    cr_assert(node_ref("a", &after));
    cr_assert_gt(after.version, before.version, "leaving the shard bumps bind_version");

    cache_stats st;
    cache_get_stats(c, &st);
    cr_assert_eq(st.nodes, 3);
    cr_assert_eq(st.nodes_in_shard, 2);
    cache_set_shard_mode(c, CACHE_SHARD_NONE);
    cr_assert_eq(cache_get_shard_mode(c), CACHE_SHARD_NONE);
    cache_get_stats(c, &st);
    cr_assert_eq(st.nodes_in_shard, 3, "in NONE mode every node counts");
    cache_set_shard_mode(c, CACHE_SHARD_SOFT);
    cr_assert(in_shard("b") && !in_shard("a"), "switching back keeps the flags");
}

Test(cache, none_mode_nodes_start_in_shard)
{
    add_node("a", 1000);
    cr_assert(in_shard("a"));
    cache_stats st;
    cache_get_stats(c, &st);
    cr_assert_eq(st.nodes_in_shard, 1);
    cr_assert_eq(st.node_events, 1);
}

/* ---- memory ------------------------------------------------------- */

static long rss_kb(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = 0, rss = 0;
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &rss) != 2)
            rss = 0;
        fclose(f);
    }
    return rss * (sysconf(_SC_PAGESIZE) / 1024);
}

Test(cache, memory_5000_nodes_100000_pods)
{
    long before = rss_kb();
    char name[64], uid[64];
    for (int i = 0; i < 5000; i++) {
        snprintf(name, sizeof name, "worker-node-%05d.cluster.local", i);
        model_node *n = fx_node(name, 64000, 256 * FX_GI, 110);
        fx_node_label(n, "topology.kubernetes.io/zone", "zone-a");
        cr_assert_eq(cache_node_upsert(c, n), AS_OK);
    }
    model_pod *p = fx_pod("agent-pod-000000", "", 100, 128 << 20);
    for (int i = 0; i < 100000; i++) {
        snprintf(uid, sizeof uid, "5f2b6c1e-8d3a-4f7b-9c2e-%012d", i);
        snprintf(name, sizeof name, "worker-node-%05d.cluster.local", i % 5000);
        p->uid = uid;
        p->node_name = name;
        cr_assert_eq(cache_pod_upsert(c, p), AS_OK);
    }
    long after = rss_kb();
    cache_stats st;
    cache_get_stats(c, &st);
    cr_assert_eq(st.pods_bound, 100000);
    check_invariants();
    cr_log_info("RSS for 5000 nodes + 100000 pods: %ld KiB (cache total, test fixtures incl.)",
                after - before);
    fprintf(stderr, "cache memory: 5000 nodes + 100000 pods = %ld KiB RSS\n", after - before);
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
    /* sanitizer builds inflate every allocation; the budget is for release */
    cr_assert_lt(after - before, 256 * 1024);
#endif
    p->uid = "";
    p->node_name = NULL;
    model_pod_free(p);
}

static model_node *gpu_node(const char *name, uint32_t ngpus)
{
    model_node *n = fx_node(name, 64000, 256 * FX_GI, 110);
    fx_node_gpus(&reg, n, ngpus);
    return n;
}

static void gpu_used_of(const char *name, int32_t out[4])
{
    cache_read_lock(c);
    cache_node *n = cache_node_find(c, name, strlen(name));
    cr_assert(n);
    for (int d = 0; d < 4; d++)
        out[d] = cache_node_gpu_used(n, d);
    cache_read_unlock(c);
}

Test(cache, gpu_packing_survives_node_return_and_resize)
{
    cr_assert_eq(cache_node_upsert(c, gpu_node("g", 2)), AS_OK);
    /* packed as 600+300 | 600+300; a fresh best-fit pass over the pods in
     * another order (300, 300, 600, 600) could not place the last 600 */
    static const struct {
        const char *uid;
        uint32_t milli;
    } shares[] = {{"a", 600}, {"b", 600}, {"c", 300}, {"d", 300}};
    for (int i = 0; i < 4; i++) {
        model_pod *p = fx_pod(shares[i].uid, shares[i].uid, 100, 0);
        fx_pod_gpu(&reg, p, 1, shares[i].milli);
        fx_pod_bind(p, "g");
        cr_assert_eq(cache_pod_upsert(c, p), AS_OK);
        model_pod_free(p);
    }
    int32_t used[4];
    gpu_used_of("g", used);
    cr_assert_eq(used[0], 900);
    cr_assert_eq(used[1], 900);

    cr_assert_eq(cache_node_remove(c, "g"), AS_OK);
    cr_assert_eq(cache_node_upsert(c, gpu_node("g", 2)), AS_OK);
    gpu_used_of("g", used);
    cr_assert_eq(used[0], 900, "placements kept on return");
    cr_assert_eq(used[1], 900);
    check_invariants();

    /* grows to 4 devices: every placement still valid, kept */
    cr_assert_eq(cache_node_upsert(c, gpu_node("g", 4)), AS_OK);
    gpu_used_of("g", used);
    cr_assert_eq(used[0] + used[1], 1800);
    cr_assert_eq(used[2] + used[3], 0);
    check_invariants();

    /* shrinks to 1 device: the shares of device 1 are re-placed (the
     * API server says they run there, so they are counted, overcommitted) */
    cr_assert_eq(cache_node_upsert(c, gpu_node("g", 1)), AS_OK);
    gpu_used_of("g", used);
    cr_assert_eq(used[0], 1800);
    cr_assert_eq(used[1], 0);
    check_invariants();
}

/* devices_are: cache_gpu_devices reads `devices` and `free_devices`, and
 * the invariants (which recount both from the nodes) hold. */
static void devices_are(uint64_t devices, uint64_t free_devices, const char *what)
{
    uint64_t d = 0, f = 0;
    cache_gpu_devices(c, &d, &f);
    cr_assert_eq(d, devices, "%s: %llu devices", what, (unsigned long long)d);
    cr_assert_eq(f, free_devices, "%s: %llu free", what, (unsigned long long)f);
    check_invariants();
}

/* The cache's device counts follow every change to a node's devices or
 * usage: nodes coming, resized and going, shares and whole GPUs bound,
 * assumed, expired and deleted, pods waiting for their node. */
Test(cache, gpu_device_counts_follow_every_change)
{
    devices_are(0, 0, "empty");
    add_node("cpu", 8000);
    devices_are(0, 0, "a node without GPUs");
    cr_assert_eq(cache_node_upsert(c, gpu_node("g", 4)), AS_OK);
    devices_are(4, 4, "a 4-GPU node");
    static const struct {
        const char *uid;
        uint32_t count, milli;
    } pods[] = {{"s1", 1, 300}, {"s2", 1, 300}, {"w2", 2, 0}};
    for (int i = 0; i < 3; i++) {
        model_pod *p = fx_pod(pods[i].uid, pods[i].uid, 100, 0);
        fx_pod_gpu(&reg, p, pods[i].count, pods[i].milli);
        fx_pod_bind(p, "g");
        cr_assert_eq(cache_pod_upsert(c, p), AS_OK);
        model_pod_free(p);
    }
    devices_are(4, 1, "two shares on one device, a 2-GPU pod");
    model_pod *a = fx_pod("a", "ua", 100, 0);
    fx_pod_gpu(&reg, a, 1, 400);
    cr_assert_eq(assume(a, "g"), CACHE_ASSUME_FAST);
    devices_are(4, 1, "an assumed share filling the shared device");
    size_t nexp = 0;
    cr_assert_eq(cache_expire_assumed(c, INT64_MAX / 2, 0, &nexp), AS_OK);
    cr_assert_eq(nexp, 1);
    devices_are(4, 1, "the assumed share expired (its device still holds two)");
    cr_assert_eq(cache_node_upsert(c, gpu_node("g", 6)), AS_OK);
    devices_are(6, 3, "grown to 6 devices");
    cr_assert_eq(cache_node_upsert(c, gpu_node("g", 2)), AS_OK);
    devices_are(2, 0, "shrunk to 2: every pod re-placed on them");
    cr_assert_eq(cache_node_remove(c, "g"), AS_OK);
    devices_are(0, 0, "the node gone, its pods waiting");
    cr_assert_eq(cache_node_upsert(c, gpu_node("g", 4)), AS_OK);
    devices_are(4, 1, "back with 4 devices, its pods on them again");
    cr_assert_eq(cache_pod_delete(c, "w2"), AS_OK);
    devices_are(4, 3, "the 2-GPU pod deleted");
    cr_assert_eq(cache_pod_delete(c, "s1"), AS_OK);
    cr_assert_eq(cache_pod_delete(c, "s2"), AS_OK);
    devices_are(4, 4, "every pod deleted");
    cr_assert_eq(cache_node_remove(c, "g"), AS_OK);
    devices_are(0, 0, "no GPU node");
    model_pod_free(a);
}

/* In hard shard mode a scheduler places only on its shard's nodes, so the
 * device counts it reads (cluster_gpus too) are the shard's: they follow
 * the membership and the mode, and every other mode counts all nodes. */
Test(cache, gpu_device_counts_are_the_shards_in_hard_mode)
{
    cr_assert_eq(cache_node_upsert(c, gpu_node("a", 4)), AS_OK);
    cr_assert_eq(cache_node_upsert(c, gpu_node("b", 2)), AS_OK);
    model_pod *p = fx_pod("w", "uw", 100, 0);
    fx_pod_gpu(&reg, p, 1, 0);
    fx_pod_bind(p, "b");
    cr_assert_eq(cache_pod_upsert(c, p), AS_OK);
    model_pod_free(p);
    devices_are(6, 5, "no shard mode: every node");
    cache_set_shard_mode(c, CACHE_SHARD_HARD);
    uint64_t rev = 0;
    const char *only_b[] = {"b"};
    cr_assert_eq(cache_shard_apply(c, only_b, 1, &rev), AS_OK);
    devices_are(2, 1, "hard, shard {b}");
    cache_read_lock(c);
    const cache_node *a = cache_node_find(c, "a", 1);
    cr_assert_not_null(a);
    uint64_t seen = __atomic_load_n(&a->cluster_gpus[1], __ATOMIC_RELAXED);
    cache_read_unlock(c);
    cr_assert_eq(seen, 1, "a node outside the shard reads the shard's counts too");
    const char *both[] = {"a", "b"};
    cr_assert_eq(cache_shard_apply(c, both, 2, &rev), AS_OK);
    devices_are(6, 5, "hard, shard {a, b}");
    const char *only_a[] = {"a"};
    cr_assert_eq(cache_shard_apply(c, only_a, 1, &rev), AS_OK);
    devices_are(4, 4, "hard, shard {a}");
    cr_assert_eq(cache_pod_delete(c, "uw"), AS_OK);
    devices_are(4, 4, "a change outside the shard");
    cache_set_shard_mode(c, CACHE_SHARD_SOFT);
    devices_are(6, 6, "soft: every node");
    cache_set_shard_mode(c, CACHE_SHARD_HARD);
    devices_are(4, 4, "hard again");
    cr_assert_eq(cache_node_remove(c, "a"), AS_OK);
    devices_are(0, 0, "the shard's node gone");
    cr_assert_eq(cache_node_upsert(c, gpu_node("a", 2)), AS_OK);
    devices_are(2, 2, "back, in the shard");
}

/* model_devices_are: the GPU model entry `name` counts `devices`, `nfree`
 * of them wholly free (0, 0 also when there is no such entry), and
 * cache_gpu_models lists the same entry. */
static void model_devices_are(const char *name, uint64_t devices, uint64_t nfree, const char *what)
{
    cache_read_lock(c);
    uint64_t got = 0, gotfree = 0;
    const cache_gpu_model *gm = NULL;
    for (size_t i = 0; i < cache_node_count(c); i++) {
        const cache_gpu_model *m = cache_node_at(c, i)->gpu_model;
        if (m && strcmp(m->name, name) == 0)
            gm = m;
    }
    cache_read_unlock(c);
    if (gm) {
        got = __atomic_load_n(&gm->devices, __ATOMIC_RELAXED);
        gotfree = __atomic_load_n(&gm->free_devices, __ATOMIC_RELAXED);
        const cache_gpu_model *all = NULL;
        size_t n = cache_gpu_models(c, &all);
        cr_assert(n <= CACHE_MAX_GPU_MODELS);
        cr_assert(all <= gm && gm < all + n, "%s: %s is listed", what, name);
    }
    cr_assert_eq(got, devices, "%s: %s has %llu devices", what, name, (unsigned long long)got);
    cr_assert_eq(gotfree, nfree, "%s: %s has %llu free", what, name, (unsigned long long)gotfree);
    check_invariants();
}

static model_node *model_node_of(const char *name, uint32_t ngpus, const char *model)
{
    model_node *n = gpu_node(name, ngpus);
    n->gpu_model = model;
    return n;
}

/* Each node points at its GPU model's entry, which counts the devices of
 * the model's nodes a scheduler may place on, and the wholly free ones:
 * through pods charged and released, a relabel, a resize, a removal and
 * hard shards. */
Test(cache, gpu_devices_are_counted_per_model)
{
    cr_assert_eq(cache_node_upsert(c, model_node_of("a", 4, "T4")), AS_OK);
    cr_assert_eq(cache_node_upsert(c, model_node_of("b", 2, "T4")), AS_OK);
    cr_assert_eq(cache_node_upsert(c, model_node_of("g", 8, "G2")), AS_OK);
    cr_assert_eq(cache_node_upsert(c, model_node_of("x", 0, "T4")), AS_OK);
    cr_assert_eq(cache_node_upsert(c, gpu_node("n", 2)), AS_OK); /* no label */
    model_devices_are("T4", 6, 6, "two T4 nodes");
    model_devices_are("G2", 8, 8, "one G2 node");
    cache_read_lock(c);
    cr_assert_null(cache_node_find(c, "x", 1)->gpu_model, "no devices, no entry");
    cr_assert_null(cache_node_find(c, "n", 1)->gpu_model, "no label, no entry");
    cache_read_unlock(c);
    const cache_gpu_model *all = NULL;
    cr_assert_eq(cache_gpu_models(c, &all), 2u, "T4 and G2");
    cr_assert_str_eq(all[0].name, "T4", "in the order first seen");
    cr_assert_str_eq(all[1].name, "G2");
    model_pod *p = fx_pod("p", "up", 100, 0);
    fx_pod_gpu(&reg, p, 1, 300);
    cr_assert_eq(assume(p, "b"), CACHE_ASSUME_FAST);
    model_devices_are("T4", 6, 5, "a share on b");
    cr_assert_eq(cache_node_upsert(c, model_node_of("b", 2, "G2")), AS_OK);
    model_devices_are("T4", 4, 4, "b relabelled");
    model_devices_are("G2", 10, 9, "b relabelled, its share with it");
    cr_assert_eq(cache_forget(c, "up"), AS_OK);
    model_devices_are("G2", 10, 10, "the share forgotten");
    cr_assert_eq(cache_node_upsert(c, model_node_of("a", 2, "T4")), AS_OK);
    model_devices_are("T4", 2, 2, "a resized");
    cache_set_shard_mode(c, CACHE_SHARD_HARD);
    uint64_t rev = 0;
    const char *only_g[] = {"g"};
    cr_assert_eq(cache_shard_apply(c, only_g, 1, &rev), AS_OK);
    model_devices_are("G2", 8, 8, "hard, shard {g}");
    model_devices_are("T4", 0, 0, "hard, shard {g}");
    cache_set_shard_mode(c, CACHE_SHARD_NONE);
    model_devices_are("G2", 10, 10, "every node again");
    cr_assert_eq(cache_node_remove(c, "g"), AS_OK);
    model_devices_are("G2", 2, 2, "g gone");
    model_pod_free(p);
}

/* free_milli_is: the milli-GPU free on model `name`'s devices and on all. */
static void free_milli_is(const char *name, uint64_t model, uint64_t all, const char *what)
{
    const cache_gpu_model *m = NULL;
    size_t n = cache_gpu_models(c, &m);
    size_t i = 0;
    while (i < n && strcmp(m[i].name, name) != 0)
        i++;
    cr_assert_lt(i, n, "%s: no entry %s", what, name);
    uint64_t got = __atomic_load_n(&m[i].free_milli, __ATOMIC_RELAXED);
    cr_assert_eq(got, model, "%s: %s has %llu milli free", what, name, (unsigned long long)got);
    cr_assert_eq(cache_gpu_free_milli(c), all, "%s: %llu milli free in all", what,
                 (unsigned long long)cache_gpu_free_milli(c));
    check_invariants();
}

/* The milli-GPU free is counted per model and in all, and the device
 * version moves when a free-capacity level does (1/64 of the devices),
 * not for a change within one. */
Test(cache, free_milli_is_counted_per_model_and_moves_the_version_by_level)
{
    cr_assert_eq(cache_node_upsert(c, model_node_of("t", 2, "T4")), AS_OK);
    cr_assert_eq(cache_node_upsert(c, model_node_of("g", 4, "G2")), AS_OK);
    free_milli_is("T4", 2000, 6000, "nothing used");
    model_pod *p = fx_pod("p", "up", 100, 0);
    fx_pod_gpu(&reg, p, 1, 300);
    cr_assert_eq(assume(p, "t"), CACHE_ASSUME_FAST);
    free_milli_is("T4", 1700, 5700, "a 300 share on t");
    model_pod *a = fx_pod("a", "ua", 100, 0);
    fx_pod_gpu(&reg, a, 1, 10);
    uint64_t v = cache_gpu_devices_version(c);
    cr_assert_eq(assume(a, "g"), CACHE_ASSUME_FAST);
    free_milli_is("G2", 3990, 5690, "a 10 share on g");
    cr_assert_neq(cache_gpu_devices_version(c), v, "G2 no longer all free: level 63");
    model_pod *b = fx_pod("b", "ub", 100, 0);
    fx_pod_gpu(&reg, b, 1, 10);
    v = cache_gpu_devices_version(c);
    cr_assert_eq(assume(b, "g"), CACHE_ASSUME_FAST);
    free_milli_is("G2", 3980, 5680, "another 10 on g");
    cr_assert_eq(cache_gpu_devices_version(c), v, "levels 63 and 60 as before");
    cr_assert_eq(cache_node_upsert(c, model_node_of("t", 2, "G2")), AS_OK);
    free_milli_is("G2", 5680, 5680, "t relabelled, its share with it");
    free_milli_is("T4", 0, 5680, "t relabelled");
    cr_assert_eq(cache_forget(c, "up"), AS_OK);
    free_milli_is("G2", 5980, 5980, "the 300 share forgotten");
    cr_assert_eq(cache_node_remove(c, "g"), AS_OK);
    free_milli_is("G2", 2000, 2000, "g gone");
    model_pod_free(p);
    model_pod_free(a);
    model_pod_free(b);
}

Test(cache, resized_pod_keeps_its_gpu_device)
{
    cr_assert_eq(cache_node_upsert(c, gpu_node("g", 2)), AS_OK);
    model_pod *x = fx_pod("x", "ux", 100, 0);
    fx_pod_gpu(&reg, x, 1, 900);
    fx_pod_bind(x, "g");
    cr_assert_eq(cache_pod_upsert(c, x), AS_OK); /* device 0 */
    model_pod *a = fx_pod("a", "ua", 100, 0);
    fx_pod_gpu(&reg, a, 1, 200);
    cr_assert_eq(assume(a, "g"), CACHE_ASSUME_FAST);
    cache_pod_info info;
    cache_pod_lookup(c, "ua", &info);
    uint32_t dev = info.gpu_devices;
    cr_assert_eq(dev, 2u, "device 1: device 0 has only 100 free");
    cr_assert_eq(cache_pod_delete(c, "ux"), AS_OK); /* a fresh pick would now take device 0 */
    /* confirmed with a larger cpu request (e.g. overhead added) */
    a->req.v[MODEL_RES_CPU] = 300;
    fx_pod_bind(a, "g");
    cr_assert_eq(cache_pod_upsert(c, a), AS_OK);
    cache_pod_lookup(c, "ua", &info);
    cr_assert_eq(info.state, CACHE_POD_BOUND);
    cr_assert_eq(info.gpu_devices, dev);
    cr_assert_eq(used("g", MODEL_RES_CPU), 300);
    check_invariants();
    model_pod_free(a);
    model_pod_free(x);
}

/* annotate gives pod the device annotation agentsched writes before its
 * Binding (model_pod annot_gpu_*; node is a literal, never freed). */
static void annotate(model_pod *pod, uint32_t devices, uint32_t milli, const char *node)
{
    pod->annot_gpu_devices = devices;
    pod->annot_gpu_milli = milli;
    pod->annot_gpu_node = node;
}

static uint32_t devices_of(const char *uid)
{
    cache_pod_info info;
    cache_pod_lookup(c, uid, &info);
    cr_assert_neq(info.state, CACHE_POD_ABSENT, "%s", uid);
    return info.gpu_devices;
}

Test(cache, bound_pods_occupy_their_annotated_devices)
{
    /* After a restart the pods are listed in any order. Best fit would put
     * the 300 on device 0 and the first 600 on device 1; their annotations
     * say 3 and 2, and 2 already holds the 600 it names. */
    cr_assert_eq(cache_node_upsert(c, gpu_node("g", 4)), AS_OK);
    static const struct {
        const char *uid;
        uint32_t count, milli, devices;
        const char *node;
    } pods[] = {
        {"s300", 1, 300, 1u << 3, "g"},
        {"s600", 1, 600, 1u << 2, "g"},
        {"s400", 1, 400, 1u << 2, "g"},
        {"whole", 2, 0, (1u << 0) | (1u << 1), "g"},
        /* annotated for another node (a Binding that lost): picked as before */
        {"elsewhere", 1, 500, 1u << 3, "other"},
    };
    for (size_t i = 0; i < sizeof pods / sizeof pods[0]; i++) {
        model_pod *p = fx_pod(pods[i].uid, pods[i].uid, 100, 0);
        fx_pod_gpu(&reg, p, pods[i].count, pods[i].milli);
        annotate(p, pods[i].devices, pods[i].milli ? pods[i].milli : MODEL_GPU_MILLI, pods[i].node);
        fx_pod_bind(p, "g");
        cr_assert_eq(cache_pod_upsert(c, p), AS_OK);
        model_pod_free(p);
    }
    cr_expect_eq(devices_of("s300"), 1u << 3);
    cr_expect_eq(devices_of("s600"), 1u << 2);
    cr_expect_eq(devices_of("s400"), 1u << 2);
    cr_expect_eq(devices_of("whole"), 3u);
    /* 300 on 3 leaves 700 there: best fit takes it */
    cr_expect_eq(devices_of("elsewhere"), 1u << 3);
    int32_t u[4];
    gpu_used_of("g", u);
    cr_expect_eq(u[0], 1000);
    cr_expect_eq(u[1], 1000);
    cr_expect_eq(u[2], 1000);
    cr_expect_eq(u[3], 800);
    check_invariants();

    /* the node goes and returns smaller: annotated pods are never re-picked */
    cr_assert_eq(cache_node_remove(c, "g"), AS_OK);
    cr_assert_eq(cache_node_upsert(c, gpu_node("g", 4)), AS_OK);
    cr_expect_eq(devices_of("s300"), 1u << 3);
    cr_expect_eq(devices_of("whole"), 3u);
    cr_assert_eq(cache_node_upsert(c, gpu_node("g", 3)), AS_OK);
    cr_expect_eq(devices_of("s300"), 1u << 3, "pinned even past the node's devices");
    cr_expect_eq(devices_of("s600"), 1u << 2);
    cr_expect_neq(devices_of("elsewhere"), 1u << 3, "a picked pod moves to a device that exists");
    check_invariants();
}

Test(cache, annotation_not_matching_the_demand_is_ignored)
{
    cr_assert_eq(cache_node_upsert(c, gpu_node("g", 2)), AS_OK);
    model_pod *x = fx_pod("x", "ux", 100, 0);
    fx_pod_gpu(&reg, x, 1, 900);
    fx_pod_bind(x, "g");
    cr_assert_eq(cache_pod_upsert(c, x), AS_OK); /* device 0 (best fit on empty: lowest) */
    cr_assert_eq(devices_of("ux"), 1u);
    /* two devices named for one share, or another milli: picked as today */
    model_pod *a = fx_pod("a", "ua", 100, 0);
    fx_pod_gpu(&reg, a, 1, 500);
    annotate(a, 3u, 500, "g");
    fx_pod_bind(a, "g");
    cr_assert_eq(cache_pod_upsert(c, a), AS_OK);
    cr_expect_eq(devices_of("ua"), 2u);
    model_pod *b = fx_pod("b", "ub", 100, 0);
    fx_pod_gpu(&reg, b, 1, 100);
    annotate(b, 2u, 200, "g");
    fx_pod_bind(b, "g");
    cr_assert_eq(cache_pod_upsert(c, b), AS_OK);
    cr_expect_eq(devices_of("ub"), 1u, "best fit: device 0 has 100 free");
    check_invariants();
    model_pod_free(a);
    model_pod_free(b);
    model_pod_free(x);
}

Test(cache, confirmed_binding_takes_the_annotated_devices)
{
    cr_assert_eq(cache_node_upsert(c, gpu_node("g", 2)), AS_OK);
    model_pod *a = fx_pod("a", "ua", 100, 0);
    fx_pod_gpu(&reg, a, 1, 500);
    cr_assert_eq(assume(a, "g"), CACHE_ASSUME_FAST);
    cr_assert_eq(devices_of("ua"), 1u);
    /* the watch shows it bound with its annotation: same devices, kept */
    annotate(a, 1u, 500, "g");
    fx_pod_bind(a, "g");
    cr_assert_eq(cache_pod_upsert(c, a), AS_OK);
    cr_expect_eq(devices_of("ua"), 1u);
    /* another replica's annotation said device 1: the API server's word wins */
    annotate(a, 2u, 500, "g");
    cr_assert_eq(cache_pod_upsert(c, a), AS_OK);
    cr_expect_eq(devices_of("ua"), 2u);
    int32_t u[4];
    gpu_used_of("g", u);
    cr_expect_eq(u[0], 0);
    cr_expect_eq(u[1], 500);
    check_invariants();
    model_pod_free(a);
}

/* Upserts a bound GPU-share pod named uid on node g. */
static void bound_share(const char *uid, uint32_t milli)
{
    model_pod *p = fx_pod(uid, uid, 100, 0);
    fx_pod_gpu(&reg, p, 1, milli);
    fx_pod_bind(p, "g");
    cr_assert_eq(cache_pod_upsert(c, p), AS_OK);
    model_pod_free(p);
}

/* Does a share of milli fit one of g's devices? */
static bool share_fits(uint32_t milli)
{
    model_pod *p = fx_pod("probe", "uprobe", 100, 0);
    fx_pod_gpu(&reg, p, 1, milli);
    cache_read_lock(c);
    cache_node *n = cache_node_find(c, "g", 1);
    uint32_t dev = 0;
    bool ok =
        pred_check(&reg, CACHE_SHARD_NONE, p, n).code == PRED_OK && pred_gpu_choose(p, n, &dev);
    cache_read_unlock(c);
    model_pod_free(p);
    return ok;
}

Test(cache, bound_shares_repacked_when_arrival_order_strands_one)
{
    /* A restart lists the pods by name: four 250 shares before four 600
     * shares. Best fit in that order stacks the 250s on device 0 and finds
     * no device for the last 600; the node is re-placed largest first
     * (600 + 250 on each device), so no device is over 1000 and a 300
     * share, which no placement of these pods can hold, is refused. */
    cr_assert_eq(cache_node_upsert(c, gpu_node("g", 4)), AS_OK);
    const char *small[] = {"a0", "a1", "a2", "a3"}, *big[] = {"b0", "b1", "b2", "b3"};
    for (int i = 0; i < 4; i++)
        bound_share(small[i], 250);
    for (int i = 0; i < 4; i++)
        bound_share(big[i], 600);
    int32_t used[4];
    gpu_used_of("g", used);
    for (int d = 0; d < 4; d++)
        cr_assert_eq(used[d], 850, "device %d holds %d", d, used[d]);
    cr_assert(!share_fits(300));
    cr_assert(share_fits(150));
    check_invariants();
}

Test(cache, pods_before_their_node_repacked_when_stranded)
{
    /* The same pods listed before their node, attached when it arrives
     * (in the reverse of their arrival: the 250s first). */
    const char *small[] = {"a0", "a1", "a2", "a3"}, *big[] = {"b0", "b1", "b2", "b3"};
    for (int i = 0; i < 4; i++)
        bound_share(big[i], 600);
    for (int i = 0; i < 4; i++)
        bound_share(small[i], 250);
    cr_assert_eq(cache_node_upsert(c, gpu_node("g", 4)), AS_OK);
    int32_t used[4];
    gpu_used_of("g", used);
    for (int d = 0; d < 4; d++)
        cr_assert_eq(used[d], 850, "device %d holds %d", d, used[d]);
    cr_assert(!share_fits(300));
    check_invariants();
}

Test(cache, repacking_keeps_annotated_pods_in_place)
{
    /* 500 pinned on device 0; then in this order 400 (best fit: device 0),
     * 600 (device 1), 500 (100 and 400 free: no device holds it). The
     * re-placement, largest first, moves the others around the pinned
     * pod (unpinned, it would have put the 600 on device 0 and moved the
     * pinned 500 to device 1). */
    cr_assert_eq(cache_node_upsert(c, gpu_node("g", 2)), AS_OK);
    static const struct {
        const char *uid;
        uint32_t milli;
        bool pinned;
    } pods[] = {
        {"p500", 500, true}, {"a400", 400, false}, {"b600", 600, false}, {"c500", 500, false}};
    for (size_t i = 0; i < sizeof pods / sizeof pods[0]; i++) {
        model_pod *p = fx_pod(pods[i].uid, pods[i].uid, 100, 0);
        fx_pod_gpu(&reg, p, 1, pods[i].milli);
        if (pods[i].pinned)
            annotate(p, 1u, pods[i].milli, "g");
        fx_pod_bind(p, "g");
        cr_assert_eq(cache_pod_upsert(c, p), AS_OK);
        model_pod_free(p);
    }
    cr_expect_eq(devices_of("p500"), 1u, "the annotated pod never moves");
    cr_expect_eq(devices_of("c500"), 1u);
    cr_expect_eq(devices_of("b600"), 2u);
    cr_expect_eq(devices_of("a400"), 2u);
    int32_t u[4];
    gpu_used_of("g", u);
    cr_expect_eq(u[0], 1000);
    cr_expect_eq(u[1], 1000);
    check_invariants();
}
