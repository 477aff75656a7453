/*
 * eqcache.h - equivalence cache for full-scan decisions in O(nodes changed).
 *
 * Pods of one shape (everything pred_check and score_node read from a pod:
 * the request vector and mask, unknown resource, GPU count and share, node
 * selector, required node affinity, tolerations) get the same predicate
 * result and score on a node in a given state. An equivalence class keeps,
 * for every node slot, the result of the last evaluation of that node for
 * the shape (bind_version loaded before the usage, feasibility, score) and
 * a tournament tree over the slots ordered exactly like sched.c's top-K
 * (in-shard first in soft mode, score desc, node name asc). A decision
 * consumes the cache's change log (cache.h CHANGE LOG) since the class's
 * last decision, re-evaluates only those slots and reads the top K off the
 * tree: the same candidates as sched_evaluate with max_feasible = 0 (a
 * full scan) over the cache state at the head it consumed.
 *
 * A class is rebuilt (every node evaluated) on first use, when the change
 * log wrapped past it, when the node count outgrew its arrays, or when the
 * policy, its score-table generation (score_policy_generation), the shard
 * mode, the registry's resource count or GPU resource changed.
 *
 * Admission: a shape gets a class the second time it is seen (a small
 * doorkeeper table of key hashes); one-off shapes are decided with
 * sched_evaluate (a full scan, or the caller's request: eqcache_evaluate_ex),
 * so they neither evict useful classes nor pay for building a class they
 * never reuse. Pods whose canonical key exceeds
 * EQCACHE_MAX_KEY bytes are also decided with sched_evaluate.
 *
 * Infeasible pods (no candidate): the reasons ("0/5000 nodes are available:
 * ...") come from a sched_evaluate full scan on that rare path.
 *
 * MEMORY: per class, 48 bytes per node slot (two 16-byte tree entries and
 * a 16-byte score and bind_version that names decisions read), the slot
 * count being the node count x 1.25 rounded up to a power of two, plus the
 * key: 384 KB per class at 5000 nodes, 3 MB at 50000. The cache holds at most max_classes classes
 * and about max_bytes bytes of them (checked when a class is created); the least recently used
 * unpinned class is evicted past either cap.
 *
 * CONCURRENCY: thread-safe. A table mutex guards the class table (held for
 * a hash lookup); each class has its own writer-preferring rwlock, taken
 * BEFORE the cache read lock (cache writers never take class locks, so
 * this order cannot deadlock with the cache's writer-preferring rwlock):
 * exclusive for a decision that changes the class (consume, top K), shared
 * for a names decision over a class already at the log head
 * (eqcache_evaluate_names; one behind is decided again exclusively).
 * Deciders of different shapes run in parallel, and names decisions of
 * one shape too while the cluster does not change.
 */
#ifndef AGENTSCHED_EQCACHE_H
#define AGENTSCHED_EQCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agentsched/core/cache.h"
#include "agentsched/base/error.h"
#include "agentsched/model/pod.h"
#include "agentsched/core/sched.h"
#include "agentsched/core/score.h"

#define EQCACHE_MAX_KEY 4096 /* canonical pod-shape key bytes; larger: bypass */

typedef struct eqcache_config {
    uint32_t max_classes; /* default 256 */
    size_t max_bytes;     /* class memory cap; default 256 MiB */
    bool admit_first;     /* build a class on a shape's first sighting (tests) */
} eqcache_config;

/* eqcache_config_defaults fills cfg. */
void eqcache_config_defaults(eqcache_config *cfg);

typedef struct eqcache eqcache;

/* eqcache_new creates an empty equivalence cache over c (borrowed: must
 * outlive it). cfg NULL = defaults; zero fields take defaults. Caller owns
 * *out (eqcache_free). */
as_err eqcache_new(cache *c, const eqcache_config *cfg, eqcache **out);

/* eqcache_free frees every class (dropping their policy references). No
 * decision may be running. NULL ok. */
void eqcache_free(eqcache *e);

/* How a decision was made. */
typedef enum eqcache_how {
    EQCACHE_HIT = 0, /* class consumed the log (maybe nothing) and answered */
    EQCACHE_REBUILT, /* class (re)built with a full evaluation */
    EQCACHE_BYPASS,  /* not admitted / key too large: sched_evaluate */
} eqcache_how;

/*
 * eqcache_evaluate decides pod under policy (both borrowed; the class
 * keeps its own reference to policy) with top-k candidates (k capped at
 * SCHED_MAX_K). *out gets what sched_evaluate with names NULL and
 * max_feasible 0 would give: cand/ncand (names borrowed from node specs,
 * hints only after return), feasible, evaluated (= nodes), shard_revision,
 * and reasons when ncand == 0. *how (may be NULL) says how. AS_ENOMEM when
 * out of memory (out is then empty); never fails for an infeasible pod.
 */
as_err eqcache_evaluate(eqcache *e, score_policy *policy, const model_pod *pod, uint32_t k,
                        sched_result *out, eqcache_how *how);

/*
 * eqcache_evaluate_ex is eqcache_evaluate, except that a decision no class
 * serves (EQCACHE_BYPASS: a shape's first sighting, a key too large, every
 * class in use) runs sched_evaluate(bypass) when bypass is not NULL: the
 * caller's own request for the same pod, policy and k (the fast path keeps
 * kube-scheduler's early stop on huge clusters there, where a full scan
 * for a one-off shape would cost more than it is worth).
 */
as_err eqcache_evaluate_ex(eqcache *e, score_policy *policy, const model_pod *pod, uint32_t k,
                           const sched_request *bypass, sched_result *out, eqcache_how *how);

/*
 * eqcache_evaluate_names is sched_evaluate(req) for a request that names
 * its nodes (the kube-scheduler and Volcano extenders): the same result,
 * with the named nodes that fitted at their class's last evaluation
 * answered from the class (fit, score, bind version) instead of being
 * evaluated again; the others are evaluated as sched_evaluate does, for
 * their reason. req->policy must be policy; req->oracle must be NULL; with
 * skip_filter or without a class (not admitted yet, key too large) it is
 * plain sched_evaluate. *how (may be NULL) as eqcache_evaluate.
 */
as_err eqcache_evaluate_names(eqcache *e, score_policy *policy, const sched_request *req,
                              sched_result *out, eqcache_how *how);

typedef struct eqcache_stats {
    uint64_t hits;          /* answered incrementally */
    uint64_t rebuilds;      /* full class evaluations, every cause */
    uint64_t rebuild_new;   /* ... of which: class created */
    uint64_t rebuild_wrap;  /* ... change log wrapped / too many changes */
    uint64_t rebuild_other; /* ... policy, generation, mode, registry, size */
    uint64_t bypass;        /* decided with sched_evaluate */
    uint64_t evictions;
    uint64_t reevaluated; /* node evaluations done incrementally */
    size_t classes;
    size_t bytes;
} eqcache_stats;

/* eqcache_get_stats copies the counters. Thread-safe. */
void eqcache_get_stats(eqcache *e, eqcache_stats *out);

#endif
