/*
 * replay.h - trace replay: compare placement policies on a production trace.
 *
 * Replays a trace read by trace.h. Method (following the paper):
 *   - nodes become cluster nodes (GPU model as the policy's model label,
 *     GPUs as the whole-GPU resource);
 *   - pods are submitted in trace order (creation_time, then name; file
 *     order when there is no creation_time column) and never deleted; or,
 *     with options.shuffle, as the paper's experiments submit them: sorted
 *     by name, then shuffled with the seed;
 *   - once the list is exhausted, pods are sampled uniformly from it with
 *     the seed until the GPU demand that has arrived reaches inflate x the
 *     cluster's GPU capacity;
 *   - every pod goes through the real decision core: sched_evaluate over all
 *     nodes (K = 1) and binder_commit, exactly as the service schedules.
 * The pod sequence depends only on the trace and the seed, so every policy
 * sees the same pods.
 *
 * With churn, pods also leave, so packing is judged as a cluster lives:
 *   - the same sequence of pods (the list, then samples) arrives as a
 *     Poisson process, options.arrivals pods in all;
 *   - each placed pod leaves after its lifetime: deletion_time minus
 *     creation_time where the trace has both, else one drawn (with the
 *     seed) from the trace's observed lifetimes, else an exponential of
 *     mean 1 when no pod has one;
 *   - the arrival rate makes the offered load (rate x mean demand x mean
 *     lifetime over the list) inflate x the capacity, in GPU milli (CPU
 *     for a trace without GPU demand); refused pods are dropped;
 *   - a departure is a pod deletion in the cache, as the service sees it;
 *   - judged over the second half of the simulated time: mean allocation
 *     and the share of arrived demand refused; the curve is allocation
 *     against time / the last arrival's time.
 * Every policy sees the same arrivals and lifetimes; placements differ.
 */
#ifndef AGENTSCHED_REPLAY_H
#define AGENTSCHED_REPLAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "agentsched/base/error.h"
#include "agentsched/cmd/trace.h"

typedef struct replay_options {
    double inflate;   /* arrived GPU demand to reach, x capacity (default 1.3) */
    uint64_t seed;    /* sampling seed (default 42) */
    bool curve;       /* record allocation against arrived demand (for plots) */
    bool churn;       /* pods leave: see below */
    size_t arrivals;  /* churn: pods submitted (0: three times the list) */
    bool once;        /* fill: submit the list once, no samples */
    bool shuffle;     /* the list in name order shuffled with the seed, not in
                       * trace order (the paper's experiments) */
    FILE *placements; /* not NULL: one line "submission,pod,node" per pod
                       * submitted (node empty when refused); borrowed */
} replay_options;

#define REPLAY_MAX_ARRIVALS 2000000

/* One point of the curve: arrived GPU demand / capacity -> GPU allocation. */
typedef struct replay_point {
    double arrived;
    double gpu_alloc;
} replay_point;

typedef struct replay_result {
    char policy[128];
    uint64_t submitted;
    uint64_t placed;
    uint64_t failed;
    uint64_t cpu_pods_placed; /* pods without GPU demand */
    uint64_t cpu_pods_failed;
    double gpu_alloc_ratio_at_100; /* when arrived GPU demand reaches capacity */
    double cpu_alloc_ratio_at_100;
    double mem_alloc_ratio_at_100;
    double gpu_alloc_ratio_end;
    double cpu_alloc_ratio_end;
    double mem_alloc_ratio_end;
    double unallocated_gpus_end; /* whole-GPU units */
    double fragmentation_end;    /* FGD measure over the trace's task shapes, GPUs */
    double seconds;              /* scheduling time (decisions and commits) */
    double decisions_per_sec;
    /* churn only, over the second half of the simulated time: the mean
     * allocation (GPU, or CPU for a trace without GPU demand) / capacity,
     * the share of arrived demand that was refused; pods still placed at
     * the end */
    double churn_alloc_mean;
    double churn_refused;
    size_t churn_live_end;
    replay_point *curve; /* owned; NULL unless options.curve */
    size_t ncurve;
} replay_result;

/*
 * replay_run replays the trace with one policy. `policy` is a strategy name
 * (least-allocated, most-allocated, balanced-allocation, best-fit, fgd,
 * fragment) or the path of a policy YAML file (anything containing '/' or
 * ending in .yaml/.yml). Builds its own registry, cache and binder. o may
 * be NULL (defaults). Free the result with replay_result_free.
 */
as_err replay_run(const trace *t, const char *policy, const replay_options *o, replay_result *out,
                  as_diag *diag);

/* replay_result_free frees the curve r owns and empties it; *r itself is
 * the caller's storage and its other fields stay. NULL ok; idempotent.
 * replay_run calls it on its own errors. */
void replay_result_free(replay_result *r);

/*
 * replay_cli_main is `agentsched replay --nodes NODES.csv --pods PODS.csv
 * --policy a,b,c [--inflate 1.3] [--seed S] [--format table|json|csv]
 * [--plot FILE.png]`. argv[0] is the command name. Returns the exit status
 * (0 ok, 1 failure, 2 usage).
 */
int replay_cli_main(int argc, char **argv);

#endif
