/*
 * core_fixtures.h - hand-built model_node / model_pod objects for the
 * decision-core tests (cache, pred, sched, binder), so those tests state
 * exactly the fields they exercise, and the cache and policy set-ups they
 * share. Objects live in their own pool, as the decoders' do, and are
 * freed with model_node_free / model_pod_free.
 */
#ifndef AGENTSCHED_TEST_CORE_FIXTURES_H
#define AGENTSCHED_TEST_CORE_FIXTURES_H

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "agentsched/core/cache.h"
#include "agentsched/core/policy.h"
#include "agentsched/model/labels.h"
#include "agentsched/model/node.h"
#include "agentsched/model/pod.h"
#include "agentsched/model/registry.h"
#include "agentsched/base/pool.h"
#include "sanitizer_fixtures.h"

#define FX_UNUSED __attribute__((unused))

#define FX_GI ((int64_t)1 << 30)

FX_UNUSED static int fx_res(model_registry *reg, const char *name)
{
    int idx = -1;
    cr_assert_eq(model_registry_intern(reg, name, strlen(name), &idx), AS_OK);
    return idx;
}

/* fx_node: a Ready node with cpu (millicores), memory (bytes), pods. */
FX_UNUSED static model_node *fx_node(const char *name, int64_t cpu_m, int64_t mem, int64_t pods)
{
    pool *p = pool_new(0);
    cr_assert(p);
    model_node *n = pool_alloc(p, sizeof *n);
    cr_assert(n);
    n->pool = p;
    n->name = pool_strdup(p, name);
    n->uid = "";
    n->resource_version = "";
    n->alloc.v[MODEL_RES_CPU] = cpu_m;
    n->alloc.v[MODEL_RES_MEMORY] = mem;
    n->alloc.v[MODEL_RES_PODS] = pods;
    n->alloc.v[MODEL_RES_EPHEMERAL] = 100 * FX_GI;
    n->capacity = n->alloc;
    n->ready = true;
    return n;
}

FX_UNUSED static void fx_labels_set(pool *p, model_labels *l, const char *k, const char *v)
{
    model_kv *items = pool_alloc(p, (l->n + 1) * sizeof *items);
    uint32_t j = 0;
    bool placed = false;
    for (uint32_t i = 0; i < l->n; i++) {
        if (!placed && strcmp(k, l->items[i].key) < 0) {
            items[j++] = (model_kv){pool_strdup(p, k), pool_strdup(p, v)};
            placed = true;
        }
        items[j++] = l->items[i];
    }
    if (!placed)
        items[j++] = (model_kv){pool_strdup(p, k), pool_strdup(p, v)};
    l->items = items;
    l->n = j;
}

FX_UNUSED static void fx_node_label(model_node *n, const char *k, const char *v)
{
    fx_labels_set(n->pool, &n->labels, k, v);
}

FX_UNUSED static void fx_node_taint(model_node *n, const char *k, const char *v, model_effect e)
{
    model_taint *t = pool_alloc(n->pool, (n->ntaints + 1) * sizeof *t);
    if (n->ntaints)
        memcpy(t, n->taints, n->ntaints * sizeof *t);
    t[n->ntaints++] = (model_taint){pool_strdup(n->pool, k), pool_strdup(n->pool, v), e};
    n->taints = t;
}

FX_UNUSED static void fx_node_gpus(model_registry *reg, model_node *n, uint32_t ngpus)
{
    int r = fx_res(reg, reg->gpu_name);
    n->alloc.v[r] = ngpus;
    n->capacity.v[r] = ngpus;
    n->ngpus = ngpus;
}

/* fx_gpu_node: node "g<i>" of 32 cores, 128Gi and 110 pods with ngpus
 * devices (the GPU-share tests' node). */
FX_UNUSED static model_node *fx_gpu_node(model_registry *reg, int i, uint32_t ngpus)
{
    char name[16];
    snprintf(name, sizeof name, "g%d", i);
    model_node *n = fx_node(name, 32000, 128 * FX_GI, 110);
    fx_node_gpus(reg, n, ngpus);
    return n;
}

FX_UNUSED static void fx_node_res(model_registry *reg, model_node *n, const char *res, int64_t v)
{
    int r = fx_res(reg, res);
    n->alloc.v[r] = v;
    n->capacity.v[r] = v;
}

/* fx_pod: a pending pod requesting cpu (millicores) and memory (bytes). */
FX_UNUSED static model_pod *fx_pod(const char *name, const char *uid, int64_t cpu_m, int64_t mem)
{
    pool *p = pool_new_small(0); /* as model_pod_from_json's */
    cr_assert(p);
    model_pod *pod = pool_alloc(p, sizeof *pod);
    cr_assert(pod);
    pod->pool = p;
    pod->ns = "default";
    pod->name = pool_strdup(p, name);
    pod->uid = pool_strdup(p, uid ? uid : "");
    pod->resource_version = "";
    pod->scheduler_name = "agent-scheduler";
    pod->req.v[MODEL_RES_CPU] = cpu_m;
    pod->req.v[MODEL_RES_MEMORY] = mem;
    pod->req.v[MODEL_RES_PODS] = 1;
    for (int r = 0; r < MODEL_MAX_RES; r++)
        if (pod->req.v[r])
            pod->req_mask |= 1u << r;
    return pod;
}

FX_UNUSED static void fx_pod_bind(model_pod *pod, const char *node)
{
    pod->node_name = node ? pool_strdup(pod->pool, node) : NULL;
}

FX_UNUSED static void fx_pod_res(model_registry *reg, model_pod *pod, const char *res, int64_t v)
{
    int r = fx_res(reg, res);
    pod->req.v[r] = v;
    pod->req_mask |= 1u << r;
}

/* fx_pod_gpu: count whole GPUs (milli 0) or one share of `milli`. */
FX_UNUSED static void fx_pod_gpu(model_registry *reg, model_pod *pod, uint32_t count,
                                 uint32_t milli)
{
    if (milli == 0) {
        fx_pod_res(reg, pod, reg->gpu_name, count);
        pod->gpu_count = count;
        pod->gpu_milli = MODEL_GPU_MILLI;
    } else {
        pod->gpu_count = 1;
        pod->gpu_milli = milli;
    }
}

FX_UNUSED static void fx_pod_tol(model_pod *pod, const char *k, model_tol_op op, const char *v,
                                 model_effect e)
{
    model_toleration *t = pool_alloc(pod->pool, (pod->ntolerations + 1) * sizeof *t);
    if (pod->ntolerations)
        memcpy(t, pod->tolerations, pod->ntolerations * sizeof *t);
    t[pod->ntolerations++] =
        (model_toleration){pool_strdup(pod->pool, k), pool_strdup(pod->pool, v), op, e};
    pod->tolerations = t;
}

FX_UNUSED static void fx_pod_selector(model_pod *pod, const char *k, const char *v)
{
    fx_labels_set(pod->pool, &pod->node_selector, k, v);
}

/* fx_pod_affinity_in: required affinity with one term "key In (value)". */
FX_UNUSED static void fx_pod_affinity_in(model_pod *pod, const char *k, const char *v)
{
    pool *p = pod->pool;
    const char **vals = pool_alloc(p, sizeof *vals);
    vals[0] = pool_strdup(p, v);
    model_selector_req *req = pool_alloc(p, sizeof *req);
    *req = (model_selector_req){pool_strdup(p, k), MODEL_SEL_IN, vals, 1, 0};
    model_selector_term *term = pool_alloc(p, sizeof *term);
    term->exprs = req;
    term->nexprs = 1;
    pod->affinity = (model_affinity){true, term, 1};
}

/* fx_bind_gpu upserts into c a pod uid bound to node (100m CPU, 1Gi) that
 * asks for count whole GPUs (milli 0) or a share of milli on one device. */
FX_UNUSED static void fx_bind_gpu(model_registry *reg, cache *c, const char *uid, const char *node,
                                  uint32_t count, uint32_t milli)
{
    model_pod *p = fx_pod(uid, uid, 100, FX_GI);
    fx_pod_gpu(reg, p, count, milli);
    fx_pod_bind(p, node);
    cr_assert_eq(cache_pod_upsert(c, p), AS_OK);
    model_pod_free(p);
}

/* fx_bind_pieces binds in c, on each of fx_gpu_node's g0..g<n-1>, a
 * 100-milli share and then a whole GPU (uids piece-g<i>, whole-g<i>): on
 * 2-GPU nodes each holds one device wholly used and 900 milli in pieces. */
FX_UNUSED static void fx_bind_pieces(model_registry *reg, cache *c, int n)
{
    for (int i = 0; i < n; i++) {
        char uid[24], node[16];
        snprintf(node, sizeof node, "g%d", i);
        snprintf(uid, sizeof uid, "piece-%s", node);
        fx_bind_gpu(reg, c, uid, node, 1, 100);
        snprintf(uid, sizeof uid, "whole-%s", node);
        fx_bind_gpu(reg, c, uid, node, 1, 0);
    }
}

/* fx_policy parses yaml as a policy file over reg; it must be valid. The
 * caller unrefs the result. */
FX_UNUSED static score_policy *fx_policy(model_registry *reg, const char *yaml)
{
    score_policy *pol = NULL;
    as_diag d = {{0}, {0}};
    cr_assert_eq(score_policy_parse(reg, "t.yaml", yaml, strlen(yaml), &pol, &d), AS_OK, "%s",
                 d.msg);
    return pol;
}

/* fx_rnd: a small deterministic generator for randomized cases (xorshift
 * on the caller's state *s, which must not be 0): the next value below n. */
FX_UNUSED static uint32_t fx_rnd(uint64_t *s, uint32_t n)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return (uint32_t)(*s % n);
}

#endif
