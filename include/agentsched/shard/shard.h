/*
 * shard.h - NodeShard coordination inside `agentsched serve`.
 *
 * The sharding controller (ours or Volcano's) writes one NodeShard
 * (shard.volcano.sh/v1alpha1) per scheduler; spec.nodesDesired is what the
 * scheduler should use. Two schedulers must never use one node at once, so
 * a node moves in two steps: the old owner stops using it and drops it from
 * its status.nodesInUse, then the new owner may use it. Hence:
 *
 *   usable = own nodesDesired  \  union(every OTHER shard's nodesInUse)
 *
 * The coordinator recomputes the usable set on every shard-table change,
 * applies it to the cache (cache_shard_apply, O(changed + names); no rescan
 * of the nodes), and publishes its own status:
 *   nodesInUse    = the usable set
 *   nodesToRemove = nodes the previous status had in use that are no longer
 *                   desired (being released by this update)
 *   nodesToAdd    = desired but not yet usable (another shard still uses them)
 *   lastUpdateTime
 *
 * REVISION GATING. A status that drops node X tells the other scheduler it
 * may take X. That is only true once no decision made against the older
 * usable set (which still contained X) can still place a pod on X. Every
 * decision therefore brackets itself with shard_decision_begin/_end, which
 * register the cache shard revision it reads; a status computed at revision
 * R is published only when no decision registered with a revision < R is
 * in flight. Callers (wired):
 *   - extender filter/prioritize: the whole request;
 *   - extender bind verb: binder commit through the API bind (the binder's
 *     recheck also refuses a node that left the shard: leaving bumps its
 *     bind_version and pred_check applies the hard-mode shard predicate);
 *   - fast-path workers: evaluation through the API bind (the bind worker
 *     ends it).
 * Placement (dry run) binds nothing and does not need to call them; any
 * new entry point that binds must. begin/end are NULL-safe.
 *
 * Threads: shard_coord_update runs on the shard reflector thread (or a
 * test); begin/end on any thread (one mutex, no allocation on the common
 * path); publishing runs on the coordinator's own thread
 * (shard_coord_start), or synchronously with shard_coord_publish_now.
 */
#ifndef AGENTSCHED_SHARD_H
#define AGENTSCHED_SHARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agentsched/core/cache.h"
#include "agentsched/base/error.h"
#include "agentsched/k8s/k8s.h"
#include "agentsched/k8s/watch.h"

/* agentsched's default shard (--shard-name): distinct from Volcano's
 * vc-agent-scheduler's default, agent-scheduler, so that the two never
 * share a NodeShard by default. */
#define SHARD_DEFAULT_NAME "agentsched"

/* The field manager agentsched's writes carry (its User-Agent up to '/'). */
#define SHARD_OWN_MANAGER "agentsched"

/*
 * shard_foreign_status: does NodeShard s carry a status written by another
 * live scheduler? True when its newest status entry in managedFields is
 * another manager's than own_manager, written at most window_s seconds
 * before now_unix_s (RFC 3339 UTC time; an unparsable one counts as
 * recent). *age_s (may be NULL) gets the entry's age (-1 when unknown).
 */
bool shard_foreign_status(const k8s_shard *s, const char *own_manager, int64_t now_unix_s,
                          int64_t window_s, int64_t *age_s);

/* A sorted, de-duplicated set of node names (all strings owned). */
typedef struct shard_names {
    char **v;
    size_t n;
} shard_names;

/* shard_names_free frees every string and the array and leaves *s empty
 * (the struct itself is the caller's). NULL ok. */
void shard_names_free(shard_names *s);

/* The computed view of our shard. */
typedef struct shard_view {
    bool own_present;       /* our NodeShard exists */
    shard_names desired;    /* own spec.nodesDesired */
    shard_names usable;     /* desired minus others' nodesInUse (= next nodesInUse) */
    shard_names to_add;     /* desired but used by another shard */
    shard_names to_remove;  /* own status.nodesInUse minus desired */
    char *resource_version; /* own object's, NULL when absent */
    bool status_current;    /* own status.nodesInUse already equals usable */
} shard_view;

/* shard_view_free frees the four sets and resource_version and zeroes *v
 * (the struct itself is the caller's). NULL ok. */
void shard_view_free(shard_view *v);

/*
 * shard_compute derives the view of shard `own` from a NodeShard table
 * (borrowed; any order, duplicates tolerated). Cost O(total names) with
 * hashing. An absent own shard gives empty sets (own_present false).
 * Caller owns *out (shard_view_free). AS_ENOMEM only.
 */
as_err shard_compute(const k8s_shard *shards, size_t n, const char *own, shard_view *out);

/* Status publisher: write st for shard `name` (PATCH of nodeshards/{name}/
 * status in production: shard_publish_k8s). AS_OK on success. */
typedef as_err (*shard_publish_fn)(void *arg, const char *name, const shard_view *st,
                                   as_diag *diag);

typedef struct shard_coord_config {
    const char *name;         /* our shard (copied) */
    cache_shard_mode mode;    /* NONE: the coordinator does nothing */
    cache *cache;             /* borrowed, must outlive the coordinator */
    shard_publish_fn publish; /* NULL: never publish (tests of gating use a fake) */
    void *publish_arg;
    int64_t retry_ms; /* publish retry after a failure; default 2000 */
} shard_coord_config;

typedef struct shard_coord shard_coord;

/* shard_coord_new validates cfg (name non-empty) and sets the cache's shard
 * mode. Caller owns (shard_coord_free). */
as_err shard_coord_new(const shard_coord_config *cfg, shard_coord **out, as_diag *diag);

/* shard_coord_start starts the publisher thread (optional; without it use
 * shard_coord_publish_now). */
as_err shard_coord_start(shard_coord *c);

/* shard_coord_free stops the thread and frees. NULL ok. */
void shard_coord_free(shard_coord *c);

/*
 * shard_coord_update recomputes the view from a shard table, applies the
 * usable set to the cache (only when it changed) and queues a status
 * publish gated on the new revision. In NONE mode it only records the
 * view. AS_ENOMEM only.
 */
as_err shard_coord_update(shard_coord *c, const k8s_shard *shards, size_t n);

/* shard_k8s_hook is a k8s_shard_fn (arg = shard_coord): copies the
 * client's shard table and calls shard_coord_update. */
void shard_k8s_hook(void *arg, k8s_client *k);

/*
 * shard_decision_begin registers a decision against the current cache
 * shard revision and returns it (pass it to _end); shard_decision_end
 * unregisters it and wakes the publisher when the gate opens. With c NULL
 * begin returns 0 and end does nothing.
 */
uint64_t shard_decision_begin(shard_coord *c);
void shard_decision_end(shard_coord *c, uint64_t revision);

/* shard_coord_inflight: decisions currently registered with a revision
 * strictly below `revision` (all when revision is UINT64_MAX). */
size_t shard_coord_inflight(shard_coord *c, uint64_t revision);

/*
 * shard_coord_publish_now publishes the pending status if the gate is open
 * (synchronously, on the caller's thread). *published (may be NULL) says
 * whether it did. AS_OK when nothing is pending or the gate is closed;
 * the publisher's error otherwise (the status stays pending).
 */
as_err shard_coord_publish_now(shard_coord *c, bool *published, as_diag *diag);

typedef struct shard_coord_stats {
    uint64_t updates;   /* shard_coord_update calls */
    uint64_t applies;   /* usable set changed and applied */
    uint64_t published; /* statuses written */
    uint64_t publish_failed;
    uint64_t gated;               /* publish attempts deferred by in-flight decisions */
    uint64_t pending_revision;    /* 0 when nothing pending */
    uint64_t publishing_revision; /* of the status being written now; 0 when none */
    uint64_t published_revision;
    size_t usable; /* nodes in the usable set */
    size_t to_add;
    bool own_present;
    bool kept_last;          /* own NodeShard absent: the last desired set is used */
    uint64_t foreign_status; /* status writes seen from another live scheduler */
} shard_coord_stats;

/* shard_coord_get_stats copies the counters as one snapshot (under the
 * coordinator's mutex). Thread-safe; unlike begin/end, c must not be NULL. */
void shard_coord_get_stats(shard_coord *c, shard_coord_stats *out);

/* shard_publish_k8s is a shard_publish_fn (arg = k8s_client): a JSON merge
 * patch of nodeshards/{name}/status (k8s_shard_patch_status). */
as_err shard_publish_k8s(void *arg, const char *name, const shard_view *st, as_diag *diag);

#endif
