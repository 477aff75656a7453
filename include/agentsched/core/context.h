/*
 * context.h - the decision core's state: the one place that holds the
 * registry, the node cache, the versioned binder, the scoring policy, the
 * equivalence cache and the metrics the entry points update (no globals
 * elsewhere).
 *
 * The entry points (extender, Volcano, placement, fast path) receive a core
 * and reach everything that lives above them (the API server, the NodeShard
 * gate) through a core_ports table the server fills in, so none of them
 * knows the server that runs them.
 */
#ifndef AGENTSCHED_CORE_CONTEXT_H
#define AGENTSCHED_CORE_CONTEXT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agentsched/base/error.h"
#include "agentsched/base/metrics.h"
#include "agentsched/core/binder.h"
#include "agentsched/core/cache.h"
#include "agentsched/core/decision.h"
#include "agentsched/core/score.h"
#include "agentsched/model/pod.h"
#include "agentsched/model/registry.h"

/* Pod shapes the extender verbs keep evaluations of (eqcache.h): about
 * 48 bytes per node per shape, so 64 shapes cost ~25 MB at 5000 nodes. */
#define CORE_EXTENDER_SHAPES 64

typedef struct core_config {
    const char *policy_path;     /* NULL = built-in default */
    cache_shard_mode shard_mode; /* default none */
    unsigned candidates;         /* K of a placement request without one */
    /* Comma-separated schedulerNames whose pods the extender verbs may
     * bind (NULL = CORE_DEFAULT_EXTENDER_NAMES) and whose pods Volcano's
     * allocateFunc/deallocateFunc may act on (NULL =
     * CORE_DEFAULT_VOLCANO_NAMES). Copied by core_new. */
    const char *extender_names;
    const char *volcano_names;
} core_config;

#define CORE_DEFAULT_EXTENDER_NAMES "agent-scheduler"
#define CORE_DEFAULT_VOLCANO_NAMES  "volcano"
/* The longest name list core_new accepts (bytes, NUL included). */
#define CORE_NAMES_MAX 1024

/* Metric handles the entry points update (declared by core_new). */
typedef struct core_metrics {
    metrics_counter *requests_total;
    metrics_counter *request_errors_total;
    metrics_histogram *filter_seconds;
    metrics_histogram *prioritize_seconds;
    metrics_histogram *bind_seconds;
    metrics_histogram *preempt_seconds;
    metrics_histogram *placement_seconds;
    metrics_counter *binds_fast;
    metrics_counter *binds_rechecked;
    metrics_counter *binds_idempotent;
    metrics_counter *bind_conflicts;
    metrics_counter *memo_hits;        /* prioritize answered from the filter's memo */
    metrics_counter *memo_misses;      /* prioritize evaluated afresh */
    metrics_counter *spec_memo_hits;   /* a Pod's spec reused (extender.c) */
    metrics_counter *spec_memo_misses; /* a Pod's spec decoded */
    /* device annotations written before a Binding (core_gpu_prebind) */
    metrics_counter *gpu_annot_written, *gpu_annot_conflicts, *gpu_annot_errors;
} core_metrics;

/*
 * What the entry points need from above the core, filled by the server
 * (every member may be NULL: embedded, no API server and no shard gate).
 * All are called from request and worker threads concurrently.
 *   live        true while an API server client is running
 *   synced      true once its first list of nodes and pods is done
 *   bind        posts a Binding for the pod (k8s_bind's contract)
 *   bind_try    one attempt that never waits (k8s_bind_try's contract)
 *   bind_send, bind_recv, bind_answered  bind_try in two steps
 *               (k8s_bind_try_send / _recv / _answered, the handle as
 *               an opaque pointer)
 *   patch_pod   sends a JSON merge patch to the pod (k8s_patch_pod's
 *               contract: AS_ECONFLICT when a precondition failed)
 *   decision_begin/end  the NodeShard gate (shard.h shard_decision_*)
 *   unschedulable  reports a pod that fits nowhere (condition and Event)
 *   scheduled      reports a pod bound to node (Event)
 */
typedef struct core_ports {
    void *arg;
    bool (*live)(void *arg);
    bool (*synced)(void *arg);
    as_err (*bind)(void *arg, const char *ns, const char *name, const char *uid, const char *node,
                   as_diag *diag);
    as_err (*bind_try)(void *arg, const char *ns, const char *name, const char *uid,
                       const char *node, as_diag *diag);
    as_err (*bind_send)(void *arg, const char *ns, const char *name, const char *uid,
                        const char *node, void **sent, as_diag *diag);
    as_err (*bind_recv)(void *arg, void *sent, const char *ns, const char *name, const char *uid,
                        const char *node, as_diag *diag);
    bool (*bind_answered)(void *arg, void *sent);
    as_err (*patch_pod)(void *arg, const char *ns, const char *name, const char *body, size_t len,
                        as_diag *diag);
    uint64_t (*decision_begin)(void *arg);
    void (*decision_end)(void *arg, uint64_t revision);
    void (*unschedulable)(void *arg, const model_pod *pod, const char *message);
    void (*scheduled)(void *arg, const model_pod *pod, const char *node);
} core_ports;

typedef struct core {
    core_config cfg;
    model_registry reg;
    cache *cache;
    binder *binder;
    score_policy *policy; /* guarded by policy_mu; use core_policy_get/set */
    pthread_mutex_t policy_mu;
    metrics *metrics;
    core_metrics m;
    struct eqcache *eq; /* the extender verbs' equivalence cache (eqcache.h) */
    core_ports ports;   /* set once by the server before any request */
    int64_t started_ms;
    int ready;                           /* (atomic) 1 once the cache is loaded or synced */
    char extender_names[CORE_NAMES_MAX]; /* core_config's, copied */
    char volcano_names[CORE_NAMES_MAX];
} core;

/* core_config_defaults fills every field with its default. */
void core_config_defaults(core_config *cfg);

/* core_names_valid: true when list is a comma-separated list of one or
 * more non-empty names (no spaces) shorter than CORE_NAMES_MAX in all. */
bool core_names_valid(const char *list);

/* core_name_listed: true when name is one of list's comma-separated names
 * (exact match; a NULL or empty name never is). */
bool core_name_listed(const char *list, const char *name);

/* core_new builds the registry, cache (in cfg's shard mode), binder,
 * equivalence cache, policy (cfg's file or the default) and metrics. Does
 * not load a cluster. AS_ENOMEM, AS_EINVAL for a name list that is not
 * core_names_valid (diag names it), or the policy file's errors (diag says
 * where). Caller owns *out (core_free). */
as_err core_new(const core_config *cfg, core **out, as_diag *diag);

/* core_free frees everything core_new built. Whatever writes the cache (an
 * API client, the fast path) must be stopped first. NULL ok. */
void core_free(core *c);

/* core_load_cluster loads an embedded cluster file into the cache and marks
 * the core ready. Errors as model_cluster_load and the cache's. */
as_err core_load_cluster(core *c, const char *path, as_diag *diag);

/* core_load_cluster_each is core_load_cluster that also shows each of the
 * file's pods (borrowed for the call; bound or not) to each(arg, pod). */
as_err core_load_cluster_each(core *c, const char *path,
                              void (*each)(void *arg, const model_pod *pod), void *arg,
                              as_diag *diag);

/* core_ready: true once the cache is loaded or synced; core_set_ready marks
 * it so (any thread). */
bool core_ready(const core *c);
void core_set_ready(core *c);

/* core_policy_get returns a reference to the current policy (caller
 * unrefs); core_policy_set swaps in a new one (takes the reference). */
score_policy *core_policy_get(core *c);
void core_policy_set(core *c, score_policy *p);

/* core_live, core_synced, core_decision_begin and core_decision_end call
 * the matching port, or answer for a core without one: not live, synced,
 * revision 0, nothing to end. */
bool core_live(const core *c);
bool core_synced(const core *c);
uint64_t core_decision_begin(const core *c);
void core_decision_end(const core *c, uint64_t revision);

/*
 * core_gpu_prebind is the PreBind of a reservation that took GPU devices:
 * it writes them on pod ns/name before the Binding, as the policy's
 * gpu.annotations contracts say (gpuannot.h), with the preconditions uid
 * and resource_version (each skipped when NULL or ""), in one JSON merge
 * patch through the patch_pod port. AS_OK without a call when devices is
 * 0, the policy lists no contract, or there is no API server (not live, or
 * no patch_pod port). Otherwise the port's result: AS_ECONFLICT when the
 * pod changed since agentsched read it (409) or is another pod now (a
 * lost race: the caller unreserves and retries), AS_ENOTFOUND, AS_EAUTH
 * (pods patch not granted), other errors; diag says what happened.
 * Counted in agentsched_gpu_annotations_total{result}.
 */
as_err core_gpu_prebind(core *c, const char *ns, const char *name, const char *uid,
                        const char *resource_version, const char *node, uint32_t devices,
                        uint32_t milli, as_diag *diag);

/* core_decision_ports returns the ports of a decision (decision.h) taken
 * on this core: its gate is the server's (core_ports.decision_begin/end,
 * the NodeShard window), bind, report and arg the entry point's (each may
 * be NULL). */
decision_ports core_decision_ports(const core *c,
                                   as_err (*bind)(void *arg, const decision *d, as_diag *diag),
                                   void (*report)(void *arg, const decision *d), void *arg);

#endif
