/*
 * replay.h - trace replay: compare placement policies on a production trace.
 *
 * Reads the openb trace format (Alibaba cluster-trace-gpu-v2023, Weng et
 * al., ATC '23): a node list `sn,cpu_milli,memory_mib,gpu,model` and a pod
 * list `name,cpu_milli,memory_mib,num_gpu,gpu_milli[,gpu_spec,...,
 * creation_time,...]`. Method (following the paper):
 *   - nodes become cluster nodes (GPU model as the policy's model label,
 *     GPUs as the whole-GPU resource);
 *   - pods are submitted in trace order (creation_time, then name; file
 *     order when there is no creation_time column) and never deleted;
 *   - once the list is exhausted, pods are sampled uniformly from it with
 *     the seed until the GPU demand that has arrived reaches inflate x the
 *     cluster's GPU capacity;
 *   - every pod goes through the real decision core: sched_evaluate over all
 *     nodes (K = 1) and binder_commit, exactly as the service schedules.
 * The pod sequence depends only on the trace and the seed, so every policy
 * sees the same pods.
 */
#ifndef AGENTSCHED_REPLAY_H
#define AGENTSCHED_REPLAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agentsched/base/error.h"

#define REPLAY_MAX_LINE 4096       /* longest CSV line accepted */
#define REPLAY_FILE_CAP (64 << 20) /* largest CSV file accepted */
#define REPLAY_MAX_ROWS 1000000

typedef struct replay_trace replay_trace;

/*
 * replay_trace_load reads both CSV files. Errors (AS_EIO, AS_EPARSE,
 * AS_EINVAL, AS_ETOOBIG) name the file, line and column in diag. Caller
 * owns *out (replay_trace_free).
 */
as_err replay_trace_load(const char *nodes_csv, const char *pods_csv, replay_trace **out,
                         as_diag *diag);

/* replay_trace_parse is replay_trace_load on CSV text already in memory;
 * the names stand for the files in messages. */
as_err replay_trace_parse(const char *nodes_name, const char *nodes_text, size_t nodes_len,
                          const char *pods_name, const char *pods_text, size_t pods_len,
                          replay_trace **out, as_diag *diag);

/* replay_trace_free frees the trace and everything it holds. NULL ok. */
void replay_trace_free(replay_trace *t);

/* Counts of the trace: nodes, pods in the list, GPU capacity in milli-GPU. */
size_t replay_trace_nnodes(const replay_trace *t);
size_t replay_trace_npods(const replay_trace *t);
int64_t replay_trace_gpu_capacity(const replay_trace *t);

typedef struct replay_options {
    double inflate; /* arrived GPU demand to reach, x capacity (default 1.3) */
    uint64_t seed;  /* sampling seed (default 42) */
    bool curve;     /* record allocation against arrived demand (for plots) */
} replay_options;

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
as_err replay_run(const replay_trace *t, const char *policy, const replay_options *o,
                  replay_result *out, as_diag *diag);

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
