/*
 * cache.h - the shard-aware node cache every entry point schedules against.
 *
 * Holds every node (spec + live usage) and every pod that occupies capacity
 * (bound, or assumed: bound by agentsched and not yet confirmed by the API
 * server). Scheduling decisions read it in place; nothing copies the
 * cluster.
 *
 * CONCURRENCY MODEL
 *   - Many readers: a decision brackets its scan with cache_read_lock /
 *     cache_read_unlock (a pthread rwlock, writer-preferring). Inside, node
 *     pointers and specs are stable. Usage fields (requested[], gpu_used[],
 *     bind_version, generation, in_shard) change concurrently and are read
 *     with the cache_node_* accessors (atomic loads).
 *   - One writer at a time: every mutation takes the cache's writer mutex.
 *     Usage-only mutations (assume, forget, pod add/remove) need nothing
 *     else, so they never block readers. Structural mutations (node
 *     add/replace/remove) also take the rwlock for writing.
 *   - Seqlock-like versioning: a writer updates usage first and bumps
 *     bind_version last (release). A reader loads bind_version (acquire)
 *     before reading usage. Hence if bind_version is unchanged when the
 *     binder looks again, no usage write overlapped or followed the read,
 *     and the reader's fit decision is still valid. Any change that can make
 *     a fitting pod stop fitting (usage increase, allocatable or spec
 *     change) bumps bind_version; every change bumps generation.
 *
 * Lock order: writer mutex, then rwlock. Never call back into the cache
 * from a cache_assume_if recheck callback.
 *
 * CHANGE LOG (for incremental readers such as eqcache.h)
 *   - A ring of CACHE_LOG_CAP node slots with a 64-bit sequence: entry q
 *     (q = 0, 1, ...) says "the node at slot s changed". Every mutation
 *     that changes a node's usage, spec, shard membership, or which node
 *     occupies a slot appends the slot(s) AFTER its usage/version writes,
 *     then publishes the new head with release order. Node add logs the new
 *     slot; node remove logs the hole (now holding the moved last node) and
 *     the old last slot (now empty, >= cache_node_count). Structural and
 *     spec changes are appended while the write lock is held, so a reader
 *     that takes the read lock afterwards always finds them below the head.
 *   - A shard MODE change logs every slot (it bumps every bind_version);
 *     readers should still compare the mode, which is cheaper to act on.
 *   - A reader remembers the head H it consumed up to. Later: load the
 *     head (cache_log_head, acquire: every usage write of entries below it
 *     is visible), cache_log_read [H, head), re-read those slots. When
 *     cache_log_read returns false the ring wrapped past H: the reader must
 *     re-read every slot. Re-reading a slot while a writer is still
 *     mid-mutation is harmless: that mutation appends the slot again.
 *   - One writer appends (the writer-mutex holder); readers never block
 *     writers. Each entry carries a tag of its own sequence number, so a
 *     reader detects reuse by the ring entry by entry (no fences: TSan
 *     checks this). Slots >= 2^24 - 1 are logged as "unknown", which
 *     cache_log_read reports like a wrap.
 */
#ifndef AGENTSCHED_CACHE_H
#define AGENTSCHED_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agentsched/base/error.h"
#include "agentsched/model/node.h"
#include "agentsched/model/pod.h"
#include "agentsched/model/registry.h"

typedef enum cache_shard_mode {
    CACHE_SHARD_NONE = 0, /* every node is usable */
    CACHE_SHARD_SOFT,     /* prefer in-shard nodes; others when none fits */
    CACHE_SHARD_HARD,     /* only in-shard nodes */
} cache_shard_mode;

/* cache_shard_mode_parse maps "none"/"soft"/"hard"; AS_EINVAL otherwise. */
as_err cache_shard_mode_parse(const char *s, cache_shard_mode *out);
const char *cache_shard_mode_name(cache_shard_mode m);

/* A GPU model (the node label the registry names) as the cache counts it:
 * the GPU devices of its nodes that a scheduler may place on, those wholly
 * free, and the milli-GPU free on them, as cluster_gpus counts them all.
 * Entries are never removed or renamed. */
#define CACHE_MAX_GPU_MODELS 32
typedef struct cache_gpu_model {
    char name[64];         /* label value */
    uint64_t devices;      /* (atomic) */
    uint64_t free_devices; /* (atomic) nothing charged to them */
    uint64_t free_milli;   /* (atomic) milli-GPU not charged, over its devices */
} cache_gpu_model;

/*
 * A node as the cache holds it. Fields marked (atomic) must be read with the
 * accessors below; everything else is stable while the read lock is held.
 */
typedef struct cache_node {
    const model_node *spec; /* owned by the cache; replaced only under wrlock */
    uint64_t id;            /* unique per incarnation (never reused), never 0, and
                               differs between caches in one process */
    uint32_t slot;          /* index in the dense node array (moves on remove) */
    /* (atomic) 1 when in this scheduler's shard. Next to slot and id: a
     * node answered from the equivalence cache reads these three only. */
    int in_shard;
    int64_t requested[MODEL_MAX_RES]; /* (atomic) sum of bound+assumed pod requests;
                                         requested[MODEL_RES_PODS] = pod count */
    int32_t gpu_used[MODEL_MAX_GPUS]; /* (atomic) milli-GPU used per device */
    uint64_t generation;              /* (atomic) bumped on every change */
    uint64_t bind_version;            /* (atomic) bumped on every bind / usage increase /
                                         spec change */
    /* Copies of the spec fields every predicate reads, written with spec
     * (under the write lock), so a scan reads one dense record per node
     * instead of chasing each spec. Stable under the read lock. */
    bool ready;         /* spec->ready */
    bool unschedulable; /* spec->unschedulable */
    uint32_t ntaints;   /* spec->ntaints */
    uint32_t ngpus;     /* spec->ngpus, capped at MODEL_MAX_GPUS */
    uint32_t name_len;  /* strlen(spec->name) */
    model_resvec alloc; /* spec->alloc */
    /* The cache's GPU device counts, [0] devices, [1] wholly free ones and
     * [2] the milli-GPU free on them, over the nodes a scheduler may place
     * on (atomic; cache_gpu_devices, cache_gpu_free_milli), so a score can
     * ask how scarce free devices are; NULL on a node built by hand. */
    const uint64_t *cluster_gpus;
    /* Its GPU model's entry (counted like cluster_gpus), one of those
     * cache_gpu_models returns; NULL
     * without devices or a model label, past CACHE_MAX_GPU_MODELS models,
     * or on a node built by hand. */
    const cache_gpu_model *gpu_model;
    /* (atomic) what Volcano's sharding controller counts of the same pods:
     * their containers' CPU requests (model_pod containers_cpu), mirror
     * pods left out. Only the shard controller reads it. */
    int64_t containers_cpu;
} cache_node;

static inline int64_t cache_node_requested(const cache_node *n, int r)
{
    return __atomic_load_n(&n->requested[r], __ATOMIC_RELAXED);
}
static inline int64_t cache_node_containers_cpu(const cache_node *n)
{
    return __atomic_load_n(&n->containers_cpu, __ATOMIC_RELAXED);
}
static inline int32_t cache_node_gpu_used(const cache_node *n, int dev)
{
    return __atomic_load_n(&n->gpu_used[dev], __ATOMIC_RELAXED);
}
/* Load bind_version with acquire order BEFORE reading usage (see above). */
static inline uint64_t cache_node_bind_version(const cache_node *n)
{
    return __atomic_load_n(&n->bind_version, __ATOMIC_ACQUIRE);
}
static inline uint64_t cache_node_generation(const cache_node *n)
{
    return __atomic_load_n(&n->generation, __ATOMIC_ACQUIRE);
}
static inline bool cache_node_in_shard(const cache_node *n)
{
    return __atomic_load_n(&n->in_shard, __ATOMIC_RELAXED) != 0;
}

typedef struct cache cache;

/* cache_new creates an empty cache using reg for resource names (borrowed;
 * must outlive the cache). Caller owns; cache_free. */
as_err cache_new(model_registry *reg, cache **out);

/* cache_free frees the cache, its nodes and pods. NULL ok. */
void cache_free(cache *c);

/* cache_registry returns the registry (borrowed). */
model_registry *cache_registry(cache *c);

/* ---- readers ---------------------------------------------------- */

/* Bracket every scan. Re-entrant reads from one thread are not allowed. */
void cache_read_lock(cache *c);
void cache_read_unlock(cache *c);

/* Under the read lock: number of nodes, node by dense index [0, count). */
size_t cache_node_count(const cache *c);
cache_node *cache_node_at(const cache *c, size_t i);

/* Under the read lock: node by name (O(1) hash), NULL if absent. */
cache_node *cache_node_find(const cache *c, const char *name, size_t len);

/* A name to look up: pointer + length, need not be NUL-terminated. hash:
 * cache_name_hash(s, len) when the caller computed it (the extender's
 * decoder does, once per name, for every table the name meets), else 0. */
typedef struct cache_name {
    const char *s;
    size_t len;
    uint64_t hash;
} cache_name;

/* Under the read lock: out[i] = cache_node_find(c, names[i].s,
 * names[i].len) for every i < n (a hash of 0 is computed here). The
 * lookups are interleaved 16 at a time (hash and prefetch every probe
 * slot, then every key and node, then compare) so the cache misses of a
 * batch of names overlap instead of being paid one after the other. Same
 * results as n single finds. */
void cache_node_find_n(const cache *c, const cache_name *names, size_t n, cache_node **out);

/* cache_name_hash is the hash of the cache's name index over s[0, len)
 * (hash_bytes of hash.h; never reads past it). Pure; a caller that computes it once per name can
 * hand it to cache_node_find_n and use it for its own tables. */
uint64_t cache_name_hash(const char *s, size_t len);

/* Under the read lock: node by (slot, id) as recorded in a candidate; falls
 * back to NULL when that incarnation is gone. */
cache_node *cache_node_get(const cache *c, uint32_t slot, uint64_t id);

/* cache_get_shard_mode returns the current shard mode (atomic load; no lock
 * needed). It can change even under the read lock; a change bumps every
 * node's bind_version, so the binder's recheck catches a stale read. */
cache_shard_mode cache_get_shard_mode(const cache *c);

/* ---- change log (see CHANGE LOG above) --------------------------- */

#define CACHE_LOG_CAP 65536u /* entries kept; a power of two */

/* cache_log_head returns the number of entries ever appended (acquire). No
 * lock needed. */
uint64_t cache_log_head(const cache *c);

/* cache_log_read copies the slots of entries [from, from + n) into out,
 * where from + n <= a head value the caller loaded. Returns false when any
 * of them was overwritten by the ring wrapping (or names a slot too large
 * to log): out is then garbage and the caller must re-read every node. No
 * lock needed. */
bool cache_log_read(const cache *c, uint64_t from, size_t n, uint32_t *out);

/* ---- pod index -------------------------------------------------- */

typedef enum cache_pod_state {
    CACHE_POD_ABSENT = 0,
    CACHE_POD_ASSUMED, /* bound by agentsched, not yet seen bound by the API server */
    CACHE_POD_BOUND,   /* seen with spec.nodeName */
} cache_pod_state;

typedef struct cache_pod_info {
    cache_pod_state state;
    char node[256];        /* node name it occupies */
    char key[512];         /* "namespace/name" */
    int64_t assumed_at_ms; /* when it was assumed (0 when BOUND from the start) */
    uint32_t gpu_devices;  /* bitmask of GPU device indexes it holds */
    int32_t gpu_milli;     /* milli-GPU it holds on each of them (1000: whole) */
    model_resvec req;      /* what it adds to its node's requested (1 pod) */
} cache_pod_info;

/* cache_pod_lookup copies what the cache knows of pod uid into *out
 * (state ABSENT when unknown). Takes the writer mutex briefly. */
void cache_pod_lookup(cache *c, const char *uid, cache_pod_info *out);

/* ---- writers ---------------------------------------------------- */

/* Bounds on what the cache holds, whatever an API server or a file sends:
 * far above Kubernetes' own limits (5000 nodes, 150000 pods per cluster),
 * so that only a runaway source reaches them. */
#define CACHE_MAX_NODES ((size_t)1 << 20)
#define CACHE_MAX_PODS  ((size_t)1 << 23)

/* cache_set_limits lowers the bounds above (0, or a value above them,
 * keeps the built-in one); what is held already stays. Thread-safe. */
void cache_set_limits(cache *c, size_t max_nodes, size_t max_pods);

/*
 * cache_node_upsert adds a node or replaces the spec of the node with the
 * same name (usage is kept; a spec change bumps bind_version). Takes
 * ownership of node in every case (frees it on error). New nodes start in
 * shard only when the shard mode is NONE (cache_shard_apply sets others).
 * Pods already recorded against this node name are re-attached. AS_ELIMIT
 * for a new node when CACHE_MAX_NODES are held.
 */
as_err cache_node_upsert(cache *c, model_node *node);

/* cache_node_remove removes the node; pods on it stay indexed (detached)
 * until deleted, and re-attach if the node returns. AS_ENOTFOUND if absent. */
as_err cache_node_remove(cache *c, const char *name);

/*
 * cache_pod_upsert applies a pod seen from the API server or a cluster
 * file: bound and non-terminal -> BOUND on spec.nodeName (confirming an
 * assumed pod, or moving it if it was assumed elsewhere); terminal or
 * unbound -> its usage is released, except that an ASSUMED pod seen
 * unbound is kept (the watch may lag behind our own bind; see
 * cache_expire_assumed). Pods with no uid use "namespace/name" as uid.
 * GPU devices: a bound pod whose device annotation (model_pod
 * annot_gpu_*, written before agentsched's Binding) names its node and
 * matches its demand occupies exactly those devices, pinned: never
 * re-picked (not on a node's return or spec change either), even past a
 * device's capacity; any other GPU pod keeps the devices it held on that
 * node when they still fit, or gets devices picked (best fit) as before.
 * AS_ELIMIT for a new pod when CACHE_MAX_PODS are held.
 */
as_err cache_pod_upsert(cache *c, const model_pod *pod);

/*
 * cache_pod_touch applies an event of pod uid bound to node[0..node_len)
 * without its decode, when that decode could change nothing: the pod's
 * entry was charged from a text whose model_pod digest is digest (not 0)
 * and occupies that node, and the pod holds no GPU devices. It then does
 * what cache_pod_upsert of the event's pod would (an ASSUMED pod becomes
 * BOUND) and returns true; otherwise it changes nothing and returns false
 * (decode and upsert).
 */
bool cache_pod_touch(cache *c, const char *uid, const char *node, size_t node_len, uint64_t digest);

/* cache_pod_delete releases and forgets the pod (any state). AS_ENOTFOUND
 * when unknown. */
as_err cache_pod_delete(cache *c, const char *uid);

/* Outcome of cache_assume_if. */
typedef enum cache_assume_result {
    CACHE_ASSUME_FAST = 0,   /* bind_version unchanged: accepted */
    CACHE_ASSUME_RECHECKED,  /* version moved but the pod still fits: accepted */
    CACHE_ASSUME_SAME_NODE,  /* pod already assumed/bound on this node: idempotent ok */
    CACHE_ASSUME_OTHER_NODE, /* pod already assumed/bound elsewhere: refused */
    CACHE_ASSUME_NO_FIT,     /* version moved and it no longer fits: refused */
    CACHE_ASSUME_NODE_GONE,  /* that node incarnation is gone: refused */
} cache_assume_result;

/* Re-check callback: does pod fit node in its *current* state? Called with
 * the writer mutex held; must not call into the cache. On success it may
 * fill *gpu_devices with the device bitmask to take (0 when no GPU). */
typedef bool (*cache_fit_fn)(void *arg, const model_pod *pod, const cache_node *node,
                             uint32_t *gpu_devices);

/*
 * cache_assume_if atomically (w.r.t. other writers) marks pod ASSUMED on
 * the node incarnation (slot, id) if the node's bind_version still equals
 * seen_bind_version, or else if fit() accepts the node's current state.
 * `fit` is also called on the fast path when the pod needs GPU devices, to
 * choose them. On acceptance usage is added, bind_version and generation
 * bumped, and *gpu_devices (may be NULL) receives the chosen devices.
 * Returns AS_OK with *result set for every outcome above; AS_ENOMEM, or
 * AS_ELIMIT when CACHE_MAX_PODS are held, for real errors. The pod is
 * borrowed (its uid, key and request copied).
 */
as_err cache_assume_if(cache *c, const model_pod *pod, uint32_t slot, uint64_t id,
                       uint64_t seen_bind_version, cache_fit_fn fit, void *arg,
                       cache_assume_result *result, uint32_t *gpu_devices);

/* cache_forget drops an ASSUMED pod (bind failed / expired) and releases
 * its usage. A BOUND pod is left alone (AS_ECONFLICT). AS_ENOTFOUND if unknown. */
as_err cache_forget(cache *c, const char *uid);

/* cache_expire_assumed forgets pods ASSUMED before now_ms - ttl_ms; returns
 * how many in *n. */
as_err cache_expire_assumed(cache *c, int64_t now_ms, int64_t ttl_ms, size_t *n);

/* ---- full resync (relist) --------------------------------------- */

/*
 * A relist after a dropped/expired watch: cache_sync_begin starts a mark
 * epoch, every node/pod upserted afterwards is marked, and
 * cache_sync_end_nodes / cache_sync_end_pods remove the unmarked ones
 * (ASSUMED pods are kept: they are governed by their own expiry).
 */
uint64_t cache_sync_begin(cache *c);
as_err cache_sync_end_nodes(cache *c, uint64_t epoch, size_t *removed);
as_err cache_sync_end_pods(cache *c, uint64_t epoch, size_t *removed);

/* ---- shards ----------------------------------------------------- */

/* cache_set_shard_mode sets the mode. With NONE every node counts as in
 * shard; switching to SOFT/HARD keeps the current membership flags. */
void cache_set_shard_mode(cache *c, cache_shard_mode mode);

/*
 * cache_shard_apply makes exactly the named nodes in-shard (names not yet
 * in the cache are remembered and applied when the node arrives). Costs
 * O(changed + names). Bumps bind_version of nodes that leave the shard.
 * *revision receives the new shard revision (monotonic).
 */
as_err cache_shard_apply(cache *c, const char *const *names, size_t n, uint64_t *revision);

/* cache_shard_revision returns the current shard revision. */
uint64_t cache_shard_revision(const cache *c);

/* ---- observability ---------------------------------------------- */

typedef struct cache_stats {
    size_t nodes;
    size_t nodes_in_shard;
    size_t pods_bound;
    size_t pods_assumed;
    size_t pods_detached; /* on a node the cache does not hold */
    uint64_t node_events;
    uint64_t pod_events;
    /* Bound pods applied by cache_pod_upsert that this cache had not
     * assumed on that node (another scheduler's binds) and that pushed a
     * resource they request past the node's allocatable: capacity already
     * counted as taken (by pods of ours or anyone's) was given twice. Of
     * those, _assumed: the node still held pods of ours in flight (assumed,
     * not yet confirmed), the bind lost to the other scheduler's. */
    uint64_t foreign_overcommits;
    uint64_t foreign_overcommits_assumed;
} cache_stats;

/*
 * cache_gpu_devices reads the GPU devices a scheduler may place on (the
 * cache's nodes; in hard shard mode those in its shard) and how many of
 * them nothing is charged to (wholly free), kept up to date by every
 * change to a node's devices, usage or shard membership and by a change of
 * mode. Lock-free; the two values are each exact after a change completes,
 * and may be one change apart while a writer runs.
 */
void cache_gpu_devices(const cache *c, uint64_t *devices, uint64_t *free_devices);

/* cache_gpu_free_milli reads the milli-GPU free over those devices
 * (cluster_gpus[2]). Lock-free, exact after a change completes. */
uint64_t cache_gpu_free_milli(const cache *c);

/*
 * cache_gpu_devices_version changes (after the counts) whenever the number
 * of GPU devices a scheduler may place on changes, in all or of a model
 * (cache_node gpu_model), and whenever a free-capacity level changes
 * (gpu_free_level, of all of them or of a model's): what a score that
 * reads those counts and levels was computed with is current while it
 * stays the same. Lock-free.
 */
uint64_t cache_gpu_devices_version(const cache *c);

/*
 * cache_gpu_models points *out at the cache's GPU model entries (borrowed:
 * they live as long as the cache, and are never removed or renamed) and
 * returns how many there are, at most CACHE_MAX_GPU_MODELS. Lock-free: read
 * each entry's counts with atomic loads; like cache_gpu_devices, they are
 * exact after a change completes.
 */
size_t cache_gpu_models(const cache *c, const cache_gpu_model **out);

/* cache_get_stats fills *out with one consistent snapshot, O(nodes). Takes
 * the writer mutex: never call it with the read lock held (lock order) or
 * from a cache_assume_if recheck. */
void cache_get_stats(cache *c, cache_stats *out);

/*
 * cache_check_invariants recomputes every node's usage from the pod index
 * and compares: returns AS_EINTERNAL with a description in diag on a
 * mismatch or an overcommit caused by assumed pods. For tests.
 */
as_err cache_check_invariants(cache *c, as_diag *diag);

#endif
