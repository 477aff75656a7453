/*
 * pred.h - filter predicates: can this pod go on this node?
 *
 * Pure functions over a model_pod and a cache_node (read in place, under the
 * cache read lock or the writer mutex). Checks run cheapest-first and stop at
 * the first failure: node ready, spec.unschedulable, shard (hard mode),
 * taints, node selector + required affinity, resources (every resource the
 * pod requests, pod count) and GPU devices.
 *
 * Reasons render as the strings kube-scheduler users know, e.g.
 * "Insufficient cpu", "Too many pods", "node(s) had untolerated taint
 * {dedicated: gpu}", "node(s) didn't match Pod's node affinity/selector",
 * "node(s) were unschedulable". A request above what the node has at all
 * reads "Insufficient cpu" too, as upstream's, but is told apart by its
 * code: preemption cannot help there.
 */
#ifndef AGENTSCHED_PRED_H
#define AGENTSCHED_PRED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agentsched/core/cache.h"
#include "agentsched/model/labels.h"
#include "agentsched/model/pod.h"
#include "agentsched/model/registry.h"

typedef enum pred_code {
    PRED_OK = 0,
    PRED_NOT_FOUND,        /* node name unknown to the cache */
    PRED_NOT_READY,        /* Ready condition not True */
    PRED_UNSCHEDULABLE,    /* spec.unschedulable */
    PRED_SHARD,            /* not in this scheduler's shard (hard mode) */
    PRED_TAINT,            /* arg = index of the untolerated taint */
    PRED_AFFINITY,         /* nodeSelector / required node affinity */
    PRED_UNKNOWN_RESOURCE, /* pod requests a resource no node has */
    PRED_TOO_MANY_PODS,    /* pods count */
    PRED_INSUFFICIENT,     /* arg = resource index */
    PRED_INSUFFICIENT_GPU, /* no device set can hold the GPU demand */
    /* The request is above what the node has at all, so no eviction can
     * make room (upstream NodeResourcesFit's Unresolvable): */
    PRED_EXCEEDS,     /* arg = resource index: above its allocatable */
    PRED_EXCEEDS_GPU, /* more devices than the node has, or it has none */
    /* Not from pred_check: the scoring policy keeps the node from the pod
     * (score_keeps: its CPU and memory for its free GPUs, or, from a share,
     * its last free devices); filters report it so. */
    PRED_KEPT,
    PRED__COUNT
} pred_code;

typedef struct pred_result {
    pred_code code;
    int32_t arg;
} pred_result;

/*
 * pred_check runs every predicate; returns {PRED_OK, 0} when pod fits node.
 * mode is the cache's shard mode (SOFT never fails here). reg names
 * resources. Never allocates.
 */
pred_result pred_check(const model_registry *reg, cache_shard_mode mode, const model_pod *pod,
                       const cache_node *node);

/* pred_check_static runs only the predicates that no pod change can fix
 * (ready, unschedulable, shard, taints, affinity); pred_check_resources the
 * rest. pred_check == static then resources. */
pred_result pred_check_static(cache_shard_mode mode, const model_pod *pod, const cache_node *node);
pred_result pred_check_resources(const model_registry *reg, const model_pod *pod,
                                 const cache_node *node);

/*
 * pred_gpu_choose picks the GPU devices for pod on node's current usage
 * (gpu_choose on the node's per-device usage; see gpu.h for the best-fit
 * rule). Returns false when impossible; *devices gets the bitmask (0 when
 * the pod needs no GPU).
 */
bool pred_gpu_choose(const model_pod *pod, const cache_node *node, uint32_t *devices);

/* pred_unresolvable: failures preemption cannot fix (upstream's
 * UnschedulableAndUnresolvable): not found, not ready, unschedulable, shard,
 * taint, affinity, unknown resource, and a request above the node's
 * allocatable or devices (PRED_EXCEEDS, PRED_EXCEEDS_GPU). */
bool pred_unresolvable(pred_code code);

/* pred_taint_of is the untolerated taint a PRED_TAINT result names on
 * node (borrowed from its spec), NULL for another result, no node or an
 * index past its taints. */
const model_taint *pred_taint_of(const cache_node *node, pred_result r);

/* pred_taint_same: a and b give the same reason text (pred_reason's: key
 * and value, NULL strings as ""); two NULLs are the same, one is not. */
bool pred_taint_same(const model_taint *a, const model_taint *b);

/*
 * pred_reason writes the human reason for r into out (at most len bytes,
 * NUL-terminated) and returns out. node may be NULL for codes that do not
 * need it.
 */
const char *pred_reason(const model_registry *reg, const cache_node *node, const model_pod *pod,
                        pred_result r, char *out, size_t len);

#endif
