/*
 * score.h - node scoring strategies and the policy object that selects them
 * (built from a file by policy.h).
 *
 * A score_policy is immutable once built, except for its learned task-shape
 * statistics (updated with atomics), so any number of threads may score
 * with it at once. Reload = build a new policy and swap the pointer
 * (score_policy_ref / score_policy_unref keep in-flight decisions safe).
 *
 * score_node returns a value in [0, 100], higher is better; the extender
 * integer score (0..10) and the standalone ranking derive from it as the
 * policy says. fragment may also keep a node from a pod (score_keeps),
 * which every filter treats as a predicate failure.
 */
#ifndef AGENTSCHED_SCORE_H
#define AGENTSCHED_SCORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agentsched/core/cache.h"
#include "agentsched/base/error.h"
#include "agentsched/model/pod.h"
#include "agentsched/model/registry.h"

typedef enum score_strategy {
    SCORE_LEAST_ALLOCATED = 0,
    SCORE_MOST_ALLOCATED,
    SCORE_BALANCED_ALLOCATION,
    SCORE_BEST_FIT,
    SCORE_FGD,
    SCORE_FRAGMENT,
    SCORE__COUNT
} score_strategy;

/* score_strategy_parse maps "least-allocated", "most-allocated",
 * "balanced-allocation", "best-fit", "fgd", "fragment". */
as_err score_strategy_parse(const char *name, score_strategy *out);
const char *score_strategy_name(score_strategy s);

typedef struct score_policy score_policy;

/* score_policy_new_default builds the built-in default policy: strategy
 * `fragment`, the same as policy/default.yaml. reg is borrowed and must
 * outlive the policy (every constructor below keeps it). */
as_err score_policy_new_default(model_registry *reg, score_policy **out);

/* score_policy_new_strategy builds a default policy with another strategy. */
as_err score_policy_new_strategy(model_registry *reg, score_strategy s, score_policy **out);

/* score_policy_gpu_names returns the GPU resource names the policy
 * configures (borrowed from the policy). */
void score_policy_gpu_names(const score_policy *p, const char **gpu_name, const char **share_name,
                            const char **model_label);

/* score_policy_gpu_annotations returns the device annotation contracts
 * (gpuannot.h GPUANNOT_* bits) the policy's gpu.annotations lists:
 * written on a pod that got devices, before its Binding. Default
 * GPUANNOT_AGENTSCHED. */
uint32_t score_policy_gpu_annotations(const score_policy *p);

/* score_policy_candidates: top-K the standalone path keeps (1..16);
 * score_policy_min_score: standalone candidates scoring below are dropped. */
uint32_t score_policy_candidates(const score_policy *p);
double score_policy_min_score(const score_policy *p);

/* Reference counting: _new/_load return one reference. */
score_policy *score_policy_ref(score_policy *p);
void score_policy_unref(score_policy *p);

/* score_policy_strategy returns the policy's scoring strategy. p not NULL;
 * immutable, so any thread. */
score_strategy score_policy_strategy(const score_policy *p);

/* score_policy_is_agent_pod: does the policy count this pod as an agent pod
 * (scheduler name / labels)? */
bool score_policy_is_agent_pod(const score_policy *p, const model_pod *pod);

/* score_policy_soft_shard_bonus: points (0..100 scale) added to in-shard
 * nodes in soft shard mode. */
double score_policy_soft_shard_bonus(const score_policy *p);

/* The largest extender.shortlist a policy may set. */
#define SCORE_MAX_SHORTLIST 100

/* score_policy_extender_shortlist: how many of the feasible nodes the
 * extender's filter answers, the best-scoring first (0: every feasible
 * node). policy/default.yaml's extender.shortlist says why one would. */
uint32_t score_policy_extender_shortlist(const score_policy *p);

/* What score_node returns for a node the policy keeps from the pod
 * (score_keeps): the caller treats the node as not fitting. */
#define SCORE_KEPT (-1.0)

/*
 * score_node scores placing pod on node (which must fit: pred_check OK) in
 * its current state. Reads usage with cache accessors; never allocates.
 * Returns [0, 100], or SCORE_KEPT when score_keeps holds. fragment keeps
 * what it computed for a node under the node's id and generation: a copy
 * whose usage differs from its cache node's (a dry run's or a preempt's
 * view) must carry id 0, which is never kept.
 */
double score_node(const score_policy *p, const model_pod *pod, const cache_node *node);

/*
 * score_keeps is true when fragment keeps node from pod (pod must fit it:
 * pred_check OK; never allocates; false for other strategies):
 *   - reserve: pod asks for no GPU, and after it the node would have less
 *     free CPU or memory than its free GPUs need at the learned CPU and
 *     memory per GPU, times min(1, reserve x g), g the share of pods asking
 *     for GPUs. Not until 20 pods and ten GPUs' worth of GPU pods were
 *     seen, nor with reserve 0.
 *   - keepFree: pod is a share (one device, under 1000 milli) that would
 *     take a wholly free device here (no partly used one holds it), free
 *     devices are short (score_policy_devices_short), fewer than
 *     `fillable` of the shares seen would fit the device's remainder (in
 *     50-milli steps; not before 20 shares), and the node has the CPU its
 *     free GPUs need at the learned CPU per GPU (a node short of CPU is
 *     best used by a share that asks for little). A node built by hand
 *     (no cluster_gpus) is never kept for this.
 */
bool score_keeps(const score_policy *p, const model_pod *pod, const cache_node *node);

/*
 * score_policy_devices_short: for a fragment policy with keepFree > 0, are
 * c's wholly free GPU devices at most keepFree of its devices, or at most
 * keepFreeFragmented of them while they hold at most half the milli free
 * on all its devices (so shares that would strand most of a device are
 * kept from the last ones, score_keeps)? False otherwise. It can change
 * with any pod bound or deleted anywhere, not only with the free count.
 * Lock-free; any thread.
 */
bool score_policy_devices_short(const score_policy *p, const cache *c);

/*
 * score_policy_reads_device_counts: do p's scores depend on the cache's GPU
 * device counts and free-capacity levels in all and per model (a fragment
 * policy with modelPressure > 0 once pods pinned to GPU models were seen),
 * so that a node joining or leaving, or usage elsewhere moving a level,
 * changes other nodes' scores (cache_gpu_devices_version)? Lock-free; any
 * thread.
 */
bool score_policy_reads_device_counts(const score_policy *p);

/* score_observe_pod feeds the learned task-shape popularity (fgd,
 * fragment). Thread-safe. */
void score_observe_pod(score_policy *p, const model_pod *pod);

/*
 * score_policy_generation changes (acquire load) whenever learning rebuilt
 * the tables in a way that can change a score_node result: the typical
 * shapes for fgd, the derived ratios and distributions for fragment; never
 * for the other strategies. A caller that cached scores computed after
 * reading generation g may keep them while it still reads g (eqcache.h).
 * A score racing a rebuild may mix old and new values; the generation is
 * bumped after the rebuild, so such a score is always re-done.
 */
uint64_t score_policy_generation(const score_policy *p);

/* A task shape with its popularity (share of pods), for the FGD measure. */
typedef struct score_task_shape {
    int64_t cpu; /* millicores */
    int64_t mem; /* bytes */
    uint32_t gpu_count;
    uint32_t gpu_milli; /* per device; 1000 for whole GPUs, 0 without GPU */
    double pop;
} score_task_shape;

/*
 * score_fgd_fragment returns the node's fragmentation in milli-GPU as FGD
 * defines it (Weng et al., ATC '23), in its current state: for each shape,
 * all idle GPU when the shape does not fit (CPU, memory, GPU) or asks for
 * no GPU, else the idle GPU on devices with less free than its per-device
 * demand; weighted by popularity. Never allocates.
 */
double score_fgd_fragment(const cache_node *node, const score_task_shape *shapes, size_t n);

/* score_to_extender maps a [0,100] score to the extender's 0..10 integer. */
int score_to_extender(const score_policy *p, double score);

/* score_to_extender_n is score_to_extender over score[0..n) into out, with
 * a negative score (infeasible, unknown) mapped to 0: one call per answer
 * instead of one per node. */
void score_to_extender_n(const score_policy *p, const double *score, size_t n, int8_t *out);

#endif
