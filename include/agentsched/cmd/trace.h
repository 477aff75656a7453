/*
 * trace.h - the openb trace reader: a cluster and a pod list from CSV.
 *
 * Reads the openb trace format (Alibaba cluster-trace-gpu-v2023, Weng et
 * al., ATC '23): a node list `sn,cpu_milli,memory_mib,gpu,model` and a pod
 * list `name,cpu_milli,memory_mib,num_gpu,gpu_milli[,gpu_spec,...,
 * creation_time,deletion_time,...]`. The reader is strict: the header names
 * the columns, every value is an integer in range, lines and files are
 * capped, and errors name the file, line and column. Values may be quoted
 * (RFC 4180, within one line); an empty or "nan" model, gpu_spec or
 * deletion_time is absent. Pods are kept in trace
 * order: creation_time, then name; file order without a creation_time
 * column. The replay engine (replay.h) and the benchmarks read it.
 */
#ifndef AGENTSCHED_TRACE_H
#define AGENTSCHED_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agentsched/base/error.h"
#include "agentsched/base/pool.h"

#define TRACE_MAX_LINE 4096       /* longest CSV line accepted */
#define TRACE_FILE_CAP (64 << 20) /* largest CSV file accepted */
#define TRACE_MAX_ROWS 1000000

typedef struct trace trace;

typedef struct trace_node {
    const char *name;
    int64_t cpu; /* millicores */
    int64_t mem_mib;
    int64_t gpus;
    const char *model; /* NULL for CPU-only nodes (model empty or "nan") */
} trace_node;

typedef struct trace_pod {
    const char *name;
    int64_t cpu;
    int64_t mem_mib;
    int64_t num_gpu;
    int64_t gpu_milli;    /* per device; 1000 for whole GPUs, 0 without GPU */
    const char *gpu_spec; /* "A|B", or NULL when empty or "nan" */
    int64_t created;      /* creation_time, s; 0 without the column */
    int64_t deleted;      /* deletion_time, s; -1 without the column, an empty
                           * value, "nan" or a time not after creation */
    size_t line;          /* in the pod file, for messages */
} trace_pod;

/* A trace: both lists, in the trace pool. */
struct trace {
    pool *pool;
    trace_node *nodes;
    size_t nnodes;
    trace_pod *pods; /* in submission order */
    size_t npods;
    int64_t gpu_cap;    /* milli */
    int64_t cpu_cap;    /* millicores */
    int64_t mem_cap;    /* MiB */
    int64_t gpu_demand; /* milli, over the list */
    bool has_lifetimes; /* some pod has a usable deletion_time */
};

/*
 * trace_load reads both CSV files. Errors (AS_EIO, AS_EPARSE, AS_EINVAL,
 * AS_ETOOBIG) name the file, line and column in diag. Caller owns *out
 * (trace_free).
 */
as_err trace_load(const char *nodes_csv, const char *pods_csv, trace **out, as_diag *diag);

/* trace_parse is trace_load on CSV text already in memory; the names stand
 * for the files in messages. The text is copied: the caller keeps it. */
as_err trace_parse(const char *nodes_name, const char *nodes_text, size_t nodes_len,
                   const char *pods_name, const char *pods_text, size_t pods_len, trace **out,
                   as_diag *diag);

/* trace_free frees the trace and everything it holds. NULL ok. */
void trace_free(trace *t);

#endif
