/*
 * shardctl.h - the sharding controller (`agentsched shard-controller`):
 * computes every scheduler's NodeShard.spec.nodesDesired from a sharding
 * config in Volcano's format and writes the NodeShards, one active replica
 * at a time (a coordination.k8s.io/v1 Lease).
 *
 * Layers, each testable on its own:
 *   shardcfg_config  parse + validate the config (YAML or JSON via doc.h)
 *   shardctl_engine  the assignment as Volcano's controller computes it:
 *                    per scheduler, in config order, filter (every filter
 *                    policy accepts) -> weighted score -> select
 *                    (node-limit's maxNodes), a node going to the first
 *                    scheduler that selects it; past SHARDCTL_BATCH nodes,
 *                    per batch of that many (cut in name order), maxNodes
 *                    capping each batch. Node events update it
 *                    incrementally.
 * The command that runs it (k8s client, config hot reload, loop) is
 * cmd/shard_controller.h.
 *
 * INCREMENTAL ASSIGNMENT. The engine keeps, per scheduler, the nodes its
 * filter accepts in an array sorted by (score desc, name asc), each node's
 * owner, and, for a scheduler at its maxNodes cap, its boundary (last
 * member). A node event re-scores that node (binary search + memmove per
 * scheduler) and then cascades: without a cap only the node itself can
 * change owner; at a cap the node may enter ahead of the boundary (the last
 * member is evicted and becomes a candidate for the next scheduler) or
 * leave (the next entry after the boundary is admitted). The work is the
 * owner changes times the schedulers, plus entries skipped near a boundary
 * (those already owned by earlier schedulers); no re-scoring, sorting or
 * pass over all nodes. A full resync rebuilds everything from scratch and
 * is the reference the tests compare the incremental result with.
 *
 * BATCHES. With more than SHARDCTL_BATCH live nodes and some scheduler
 * capped, the selection runs per batch (Volcano's controller cuts its
 * informer's list, in map order, so any fixed order gives one of its
 * possible answers; the engine's is by name). Batches are independent: a
 * node's change reselects its own batch (SHARDCTL_BATCH nodes times the
 * schedulers); a node added or removed shifts the batches after its name,
 * so the engine re-sorts the names and reselects every batch, once, at the
 * next read (members, version, owner, stats), however many nodes joined or
 * left meanwhile. Without a cap the batches change nothing and the cascade
 * above applies.
 */
#ifndef AGENTSCHED_SHARDCTL_H
#define AGENTSCHED_SHARDCTL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agentsched/base/error.h"
#include "agentsched/model/labels.h"
#include "agentsched/shard/shardcfg.h"

/* ------------------------------------------------------------------ */
/* Engine                                                              */
/* ------------------------------------------------------------------ */

/* What the engine needs of one node; borrowed for the call only. */
typedef struct shardctl_node_info {
    const char *name;
    /* milli-CPU of its pods as Volcano's controller counts them: the
     * containers' requests of the bound pods neither Succeeded nor Failed,
     * mirror pods left out (cache_node_containers_cpu) */
    int64_t cpu_requested;
    /* milli-CPU of status.capacity (not allocatable), the denominator
     * Volcano's controller uses; <= 0: utilisation 0, as there */
    int64_t cpu_capacity;
    const model_labels *labels; /* may be NULL */
    uint64_t tag;               /* caller's change marker (e.g. cache generation) */
} shardctl_node_info;

/*
 * shardctl_node_util is the CPU utilisation the allocation-rate policy
 * judges, as Volcano's controller computes it: requests / capacity, capped
 * at 1 and rounded to hundredths (the band's limits are rounded the same
 * way); 0 when the capacity is absent or 0.
 */
double shardctl_node_util(const shardctl_node_info *n);

typedef struct shardctl_engine shardctl_engine;

/* shardctl_engine_new: cfg is borrowed and must outlive the engine (a
 * config reload builds a new engine). Caller owns. */
as_err shardctl_engine_new(const shardcfg_config *cfg, shardctl_engine **out);
void shardctl_engine_free(shardctl_engine *e);

/* Volcano's controller selects per batch of this many nodes (in its
 * informer's list order; the engine's batches are cut in name order) once
 * there are more nodes than that. */
#define SHARDCTL_BATCH 50

/* Nodes an engine holds at most (the node cache's CACHE_MAX_NODES): only a
 * runaway source reaches it; new nodes past it are refused with AS_ELIMIT. */
#define SHARDCTL_MAX_NODES ((size_t)1 << 20)

/* shardctl_engine_set_node adds or updates one node incrementally (see the
 * header comment for the cost) and marks it seen in `epoch`. AS_ELIMIT for
 * a new node when SHARDCTL_MAX_NODES are held. */
as_err shardctl_engine_set_node(shardctl_engine *e, const shardctl_node_info *n, uint64_t epoch);

/* shardctl_engine_remove_node drops a node. AS_ENOTFOUND if unknown. */
as_err shardctl_engine_remove_node(shardctl_engine *e, const char *name);

/* shardctl_engine_seen: when name is known, marks it seen in epoch and
 * returns true with its tag in *tag (may be NULL). */
bool shardctl_engine_seen(shardctl_engine *e, const char *name, uint64_t epoch, uint64_t *tag);

/* shardctl_engine_sweep removes every node not seen in epoch; *removed
 * (may be NULL) gets how many. */
as_err shardctl_engine_sweep(shardctl_engine *e, uint64_t epoch, size_t *removed);

/* shardctl_engine_resync replaces every node with nodes[0..n) and
 * recomputes from scratch (re-score, sort, select); AS_ELIMIT past
 * SHARDCTL_MAX_NODES. */
as_err shardctl_engine_resync(shardctl_engine *e, const shardctl_node_info *nodes, size_t n,
                              uint64_t epoch);

/*
 * shardctl_engine_members returns the sorted names (borrowed from the
 * engine; valid until its next mutation) assigned to scheduler i in a
 * malloc'ed array the caller frees (not the strings). *version gets a
 * counter bumped whenever that membership changes.
 */
as_err shardctl_engine_members(shardctl_engine *e, size_t i, const char ***names, size_t *n,
                               uint64_t *version);

/* shardctl_engine_version: scheduler i's membership counter (as
 * shardctl_engine_members reports it), without building the list. */
uint64_t shardctl_engine_version(shardctl_engine *e, size_t i);

/* shardctl_engine_owner: index of the scheduler owning name, -1 when
 * unassigned or unknown. */
int shardctl_engine_owner(shardctl_engine *e, const char *name);

typedef struct shardctl_engine_stats {
    size_t nodes;
    size_t unfit;  /* nodes no scheduler's filter accepts */
    size_t capped; /* fit some scheduler but every fitting one is full */
    size_t members[SHARDCFG_MAX_SCHEDULERS];
    bool below_min[SHARDCFG_MAX_SCHEDULERS]; /* fewer members than minNodes */
    uint64_t fast_updates;                   /* node events reassigned in O(S) */
    uint64_t passes;                         /* linear selection passes (saturated events) */
    uint64_t resyncs;                        /* full recomputes */
} shardctl_engine_stats;

/* shardctl_engine_get_stats fills *out from the engine's current state
 * (entries beyond the config's schedulers are 0). The engine has no lock:
 * like every engine call (reads too, which settle the batches), not
 * concurrently with a mutation. */
void shardctl_engine_get_stats(shardctl_engine *e, shardctl_engine_stats *out);

/*
 * shardctl_needs_write is Volcano's rule for rewriting a NodeShard's
 * nodesDesired (its controller's assignmentNeedsUpdate), compared with the
 * object, not with time: cur (ncur names, the object's nodesDesired; NULL
 * when there is no object) is replaced by next (n names) when the count
 * differs, or when at least max(1, n / 10) (integer division) of next's
 * names are not in cur. So with the count unchanged, fewer new names than
 * that leave the object as it is, at every later check too.
 */
bool shardctl_needs_write(const char *const *cur, size_t ncur, const char *const *next, size_t n);

#endif
