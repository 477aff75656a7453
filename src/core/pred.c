/*
 * pred.c - filter predicates with kube-scheduler's reason strings.
 *
 * GPU accounting choice: when a node has GPU devices (spec->ngpus > 0) the
 * per-device check (pred_gpu_choose) is authoritative for the whole-GPU
 * resource and the vector check skips reg->gpu_res; a node without devices
 * is checked on the plain resource vector (allocatable 0 -> "Insufficient
 * nvidia.com/gpu"), and a GPU-share pod fails there with the same reason.
 */
#include "agentsched/core/pred.h"

#include <stdio.h>
#include <string.h>

#include "agentsched/core/gpu.h"

static const char taint_unschedulable_key[] = "node.kubernetes.io/unschedulable";

static bool tolerates_unschedulable(const model_pod *pod)
{
    /* Upstream NodeUnschedulable lets pods through that tolerate the
     * unschedulable taint. */
    model_taint t = {taint_unschedulable_key, "", MODEL_EFFECT_NO_SCHEDULE};
    for (uint32_t i = 0; i < pod->ntolerations; i++)
        if (model_toleration_matches(&pod->tolerations[i], &t))
            return true;
    return false;
}

static int untolerated_taint(const model_pod *pod, const model_node *spec)
{
    for (uint32_t i = 0; i < spec->ntaints; i++) {
        const model_taint *t = &spec->taints[i];
        if (t->effect != MODEL_EFFECT_NO_SCHEDULE && t->effect != MODEL_EFFECT_NO_EXECUTE)
            continue;
        bool ok = false;
        for (uint32_t j = 0; j < pod->ntolerations && !ok; j++)
            ok = model_toleration_matches(&pod->tolerations[j], t);
        if (!ok)
            return (int)i;
    }
    return -1;
}

static bool selector_matches(const model_pod *pod, const model_node *spec)
{
    for (uint32_t i = 0; i < pod->node_selector.n; i++) {
        const model_kv *kv = &pod->node_selector.items[i];
        const char *v = model_labels_get(&spec->labels, kv->key);
        if (!v || strcmp(v, kv->value) != 0)
            return false;
    }
    return model_affinity_matches(&pod->affinity, spec->name, &spec->labels);
}

/* See pred.h. */
pred_result pred_check_static(cache_shard_mode mode, const model_pod *pod, const cache_node *node)
{
    /* The node's hot copies answer the common case without touching the
     * spec (one cache line per node during a scan). */
    if (!node->ready)
        return (pred_result){PRED_NOT_READY, 0};
    if (node->unschedulable && !tolerates_unschedulable(pod))
        return (pred_result){PRED_UNSCHEDULABLE, 0};
    if (mode == CACHE_SHARD_HARD && !cache_node_in_shard(node))
        return (pred_result){PRED_SHARD, 0};
    if (node->ntaints) {
        int t = untolerated_taint(pod, node->spec);
        if (t >= 0)
            return (pred_result){PRED_TAINT, t};
    }
    if ((pod->node_selector.n || pod->affinity.present) && !selector_matches(pod, node->spec))
        return (pred_result){PRED_AFFINITY, 0};
    return (pred_result){PRED_OK, 0};
}

/* See pred.h. */
bool pred_gpu_choose(const model_pod *pod, const cache_node *node, uint32_t *devices)
{
    return gpu_choose(pod->gpu_count, pod->gpu_milli, node->gpu_used, node->ngpus, devices);
}

/* See pred.h. */
pred_result pred_check_resources(const model_registry *reg, const model_pod *pod,
                                 const cache_node *node)
{
    if (pod->unknown_res)
        return (pred_result){PRED_UNKNOWN_RESOURCE, 0};
    if (cache_node_requested(node, MODEL_RES_PODS) + 1 > node->alloc.v[MODEL_RES_PODS])
        return (pred_result){PRED_TOO_MANY_PODS, 0};
    bool devices = node->ngpus > 0;
    int gpu_res = __atomic_load_n(&reg->gpu_res, __ATOMIC_ACQUIRE);
    /* req_mask (pod.h) has a bit for every non-zero request, so only the
     * requested resources are visited. */
    for (uint32_t m = pod->req_mask & ~(1u << MODEL_RES_PODS); m; m &= m - 1) {
        int r = __builtin_ctz(m);
        int64_t want = pod->req.v[r];
        if (want <= 0)
            continue;
        if (devices && r == gpu_res)
            continue;
        if (want > node->alloc.v[r] - cache_node_requested(node, r))
            return (pred_result){want > node->alloc.v[r] ? PRED_EXCEEDS : PRED_INSUFFICIENT, r};
    }
    if (pod->gpu_count) {
        /* A share is at most one device (decode), so only the count can
         * be beyond the node. */
        if (!devices || pod->gpu_count > node->ngpus)
            return (pred_result){PRED_EXCEEDS_GPU, 0};
        uint32_t dev;
        if (!pred_gpu_choose(pod, node, &dev))
            return (pred_result){PRED_INSUFFICIENT_GPU, 0};
    }
    return (pred_result){PRED_OK, 0};
}

/* See pred.h. */
pred_result pred_check(const model_registry *reg, cache_shard_mode mode, const model_pod *pod,
                       const cache_node *node)
{
    pred_result r = pred_check_static(mode, pod, node);
    if (r.code != PRED_OK)
        return r;
    return pred_check_resources(reg, pod, node);
}

/* See pred.h. */
bool pred_unresolvable(pred_code code)
{
    switch (code) {
    case PRED_NOT_FOUND:
    case PRED_NOT_READY:
    case PRED_UNSCHEDULABLE:
    case PRED_SHARD:
    case PRED_TAINT:
    case PRED_AFFINITY:
    case PRED_UNKNOWN_RESOURCE:
    case PRED_EXCEEDS:
    case PRED_EXCEEDS_GPU:
        return true;
    default:
        return false;
    }
}

/* See pred.h. */
const model_taint *pred_taint_of(const cache_node *node, pred_result r)
{
    if (r.code != PRED_TAINT || !node || r.arg < 0 || (uint32_t)r.arg >= node->spec->ntaints)
        return NULL;
    return &node->spec->taints[r.arg];
}

static bool str_same(const char *a, const char *b)
{
    return strcmp(a ? a : "", b ? b : "") == 0;
}

/* See pred.h. */
bool pred_taint_same(const model_taint *a, const model_taint *b)
{
    return a == b || (a && b && str_same(a->key, b->key) && str_same(a->value, b->value));
}

/* See pred.h. */
const char *pred_reason(const model_registry *reg, const cache_node *node, const model_pod *pod,
                        pred_result r, char *out, size_t len)
{
    if (!out || !len)
        return out;
    switch (r.code) {
    case PRED_OK:
        snprintf(out, len, "fits");
        break;
    case PRED_NOT_FOUND:
        snprintf(out, len, "node(s) were not found in agentsched's node cache");
        break;
    case PRED_NOT_READY:
        snprintf(out, len, "node(s) were not ready");
        break;
    case PRED_UNSCHEDULABLE:
        snprintf(out, len, "node(s) were unschedulable");
        break;
    case PRED_SHARD:
        snprintf(out, len, "node(s) were not in this scheduler's shard");
        break;
    case PRED_TAINT: {
        const model_taint *t = pred_taint_of(node, r);
        if (t)
            snprintf(out, len, "node(s) had untolerated taint {%s: %s}", t->key,
                     t->value ? t->value : "");
        else
            snprintf(out, len, "node(s) had untolerated taint");
        break;
    }
    case PRED_AFFINITY:
        snprintf(out, len, "node(s) didn't match Pod's node affinity/selector");
        break;
    case PRED_UNKNOWN_RESOURCE:
        snprintf(out, len, "Insufficient %s",
                 pod && pod->unknown_res ? pod->unknown_res : "unknown resource");
        break;
    case PRED_TOO_MANY_PODS:
        snprintf(out, len, "Too many pods");
        break;
    case PRED_INSUFFICIENT:
    case PRED_EXCEEDS:
        snprintf(out, len, "Insufficient %s",
                 reg && r.arg >= 0 && r.arg < MODEL_MAX_RES ? model_registry_name(reg, r.arg)
                                                            : "resource");
        break;
    case PRED_INSUFFICIENT_GPU:
    case PRED_EXCEEDS_GPU:
        snprintf(out, len, "Insufficient %s", reg ? reg->gpu_name : "nvidia.com/gpu");
        break;
    case PRED_KEPT:
        if (pod && pod->gpu_count)
            snprintf(out, len,
                     "node(s) kept their free GPU devices for shares that fill them "
                     "(free devices are short)");
        else
            snprintf(out, len, "node(s) kept their cpu and memory for their free GPUs");
        break;
    default:
        snprintf(out, len, "unknown predicate failure");
        break;
    }
    return out;
}
