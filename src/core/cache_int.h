/*
 * cache_int.h - the accounting's layout: pod entries, the per-name records
 * that hold them, the view of a node the accounting charges, and the state
 * (indexes, assumed list, counters, change log) the cache embeds. Below the
 * cache's public API: nothing here depends on cache.h. Not a public header:
 * src/core only.
 *
 * Layout:
 *   - recs: one record per node *name* that has a node or pods (writer
 *     mutex only). A record lists the pods occupying that name, so a node
 *     that goes away leaves its pods detached on the record and a node that
 *     comes back with the same name re-attaches them in O(its pods).
 *   - pods: hash uid -> pentry. A pentry exists only while the pod occupies
 *     capacity (ASSUMED or BOUND); its request vector is stored compactly
 *     (only the resources it requests), so 100k pods stay small.
 *   - assumed pods are also on a list so expiry costs O(assumed).
 */
#ifndef AGENTSCHED_CACHE_INT_H
#define AGENTSCHED_CACHE_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agentsched/base/table.h"
#include "agentsched/core/cache.h"
#include "agentsched/core/gpu.h"
#include "agentsched/model/node.h"
#include "agentsched/model/pod.h"

/* A pod's state in the accounting. The cache's public pod states have the
 * same values (cache.c asserts it), so they convert by a cast. */
typedef enum cache_acct_state {
    CACHE_ACCT_ABSENT = 0,
    CACHE_ACCT_ASSUMED,
    CACHE_ACCT_BOUND,
} cache_acct_state;

/* Entries kept by the change log; a power of two. */
#define CACHE_ACCT_LOG_CAP 65536u

/*
 * The node as the accounting sees it: where its published usage and
 * versions live. The cache owns the node and points these at its public
 * record once, when the node is allocated, so charging a pod writes the
 * very counters readers load.
 */
typedef struct cache_acct_node {
    int64_t *requested;      /* [MODEL_MAX_RES] (atomic) */
    int32_t *gpu_used;       /* [MODEL_MAX_GPUS] (atomic) */
    int64_t *containers_cpu; /* (atomic) */
    uint64_t *generation;
    uint64_t *bind_version;
    const uint32_t *slot;  /* where the node sits in the dense array */
    const uint32_t *ngpus; /* devices of the current spec, capped */
    const int *in_shard;   /* (atomic) the node is in the cache's shard */
    /* What the node adds to the accounting's device counts (devices_note):
     * its devices and those wholly free, as last counted (0, 0 while a
     * scheduler may not place on it). */
    uint32_t counted_devices, counted_free;
    uint64_t counted_milli; /* and the milli-GPU free on them */
    /* Its GPU model's entry (cache_node gpu_model), or NULL. */
    cache_gpu_model *model;
} cache_acct_node;

typedef struct prec prec;
typedef struct pentry pentry;

/* One per node name that has a node or pods. */
struct prec {
    char *name;
    size_t len;
    cache_acct_node *node; /* NULL while detached */
    pentry *pods;
    size_t npods;
};

/* A pod occupying capacity. Allocated with its request values and strings
 * in one block. */
struct pentry {
    prec *rec;
    pentry *next, *prev;   /* on rec->pods */
    pentry *anext, *aprev; /* on the assumed list (state ASSUMED only) */
    int64_t assumed_at_ms;
    int64_t containers_cpu; /* the pod's containers_cpu; 0 for a mirror pod */
    uint64_t epoch;
    uint64_t digest; /* model_pod digest of the text the entry was charged from; 0 unknown */
    uint32_t req_mask;
    uint32_t gpu_devices;
    int32_t gpu_milli;
    uint16_t gpu_count;
    uint8_t gpu_pinned; /* gpu_devices come from the pod's annotation: never re-picked */
    uint8_t state;      /* cache_acct_state */
    uint8_t nreq;
    char *uid;
    char *key;
    int64_t req[]; /* popcount(req_mask) values, then the strings */
};

/* The accounting state the cache embeds. Written by the writer-mutex
 * holder only, except the change log, which readers read lock-free. */
typedef struct cache_acct {
    table recs;      /* name -> prec */
    table pods;      /* uid -> pentry */
    pentry *assumed; /* ASSUMED entries, newest first */
    uint64_t epoch;  /* resync mark given to entries inserted or seen */
    size_t pods_bound, pods_assumed, pods_detached;

    /* GPU devices of the attached nodes a scheduler may place on (with
     * `hard`, hard shard mode, those in the shard), those with nothing on
     * them, and the milli-GPU free on them ([0], [1], [2]; atomic: readers
     * load them lock-free, through the nodes' cluster_gpus too;
     * devices_note writes, and is called for every node when `hard`
     * changes). */
    uint64_t gpus[3];
    bool hard;
    /* The same devices per GPU model (cache_node gpu_model): entries are
     * appended under the writer mutex, nmodels published with release. */
    cache_gpu_model models[CACHE_MAX_GPU_MODELS];
    uint32_t nmodels; /* atomic */
    /* Bumped (release) after the device counts when a node's devices
     * counted change, or a free-capacity level (gpu_free_level) of all
     * devices or of a model's (cache_gpu_devices_version). */
    uint64_t devices_version; /* atomic */

    /* Change log (cache.h CHANGE LOG): slots of changed nodes. */
    uint64_t log[CACHE_ACCT_LOG_CAP]; /* (atomic) sequence tag << LOG_SLOT_BITS | slot */
    uint64_t log_head;                /* (atomic) entries appended */
} cache_acct;

/* Log entries carry the low bits of their own sequence number above the
 * slot, so a reader recognises an entry the ring reused without fences (a
 * tag repeats only after 2^40 appends). Slots that do not fit in
 * LOG_SLOT_BITS are logged as LOG_SLOT_NONE: "re-read everything". */
#define LOG_SLOT_BITS 24
#define LOG_SLOT_NONE ((1u << LOG_SLOT_BITS) - 1)

static inline uint64_t log_tag(uint64_t seq)
{
    return seq << LOG_SLOT_BITS;
}

/* bump_generation: any change a reader of the node may care about. */
static inline void bump_generation(const cache_acct_node *n)
{
    __atomic_add_fetch(n->generation, 1, __ATOMIC_RELEASE);
}

/* Must be the last write of a mutation that can make a fitting pod stop
 * fitting (see the seqlock argument in cache.h). */
static inline void bump_bind_version(const cache_acct_node *n)
{
    __atomic_add_fetch(n->bind_version, 1, __ATOMIC_RELEASE);
}

/* log_append records that the node at slot changed. Called with the
 * writer mutex held (one appender), after the change's usage and version
 * writes, and under the write lock for structural changes so a reader that
 * takes the read lock afterwards sees the entry. */
static inline void log_append(cache_acct *a, uint32_t slot)
{
    uint64_t h = __atomic_load_n(&a->log_head, __ATOMIC_RELAXED);
    uint64_t e = log_tag(h) | (slot < LOG_SLOT_NONE ? slot : LOG_SLOT_NONE);
    __atomic_store_n(&a->log[h & (CACHE_ACCT_LOG_CAP - 1)], e, __ATOMIC_RELAXED);
    __atomic_store_n(&a->log_head, h + 1, __ATOMIC_RELEASE);
}

/* devices_note brings a's device counts up to date with n (attached, or
 * `gone`: being detached): every change to a node's devices, usage or
 * shard membership ends with it. Writer mutex held. */
static inline void devices_note(cache_acct *a, cache_acct_node *n, bool gone)
{
    uint32_t dev = 0, nfree = 0;
    uint64_t fm = 0;
    if (!gone && (!a->hard || __atomic_load_n(n->in_shard, __ATOMIC_RELAXED))) {
        dev = *n->ngpus;
        for (uint32_t d = 0; d < dev; d++) {
            int32_t used = __atomic_load_n(&n->gpu_used[d], __ATOMIC_RELAXED);
            nfree += used == 0;
            fm += gpu_device_free(used);
        }
    }
    uint64_t td = __atomic_load_n(&a->gpus[0], __ATOMIC_RELAXED);
    uint64_t tf = __atomic_load_n(&a->gpus[1], __ATOMIC_RELAXED);
    uint64_t tm = __atomic_load_n(&a->gpus[2], __ATOMIC_RELAXED);
    uint64_t td2 = td - n->counted_devices + dev, tm2 = tm - n->counted_milli + fm;
    bool moved = dev != n->counted_devices || gpu_free_level(tm, td) != gpu_free_level(tm2, td2);
    __atomic_store_n(&a->gpus[0], td2, __ATOMIC_RELAXED);
    __atomic_store_n(&a->gpus[1], tf - n->counted_free + nfree, __ATOMIC_RELAXED);
    __atomic_store_n(&a->gpus[2], tm2, __ATOMIC_RELAXED);
    cache_gpu_model *m = n->model;
    if (m) {
        uint64_t md = __atomic_load_n(&m->devices, __ATOMIC_RELAXED);
        uint64_t mf = __atomic_load_n(&m->free_devices, __ATOMIC_RELAXED);
        uint64_t mm = __atomic_load_n(&m->free_milli, __ATOMIC_RELAXED);
        uint64_t md2 = md - n->counted_devices + dev, mm2 = mm - n->counted_milli + fm;
        moved |= gpu_free_level(mm, md) != gpu_free_level(mm2, md2);
        __atomic_store_n(&m->devices, md2, __ATOMIC_RELAXED);
        __atomic_store_n(&m->free_devices, mf - n->counted_free + nfree, __ATOMIC_RELAXED);
        __atomic_store_n(&m->free_milli, mm2, __ATOMIC_RELAXED);
    }
    if (moved)
        __atomic_add_fetch(&a->devices_version, 1, __ATOMIC_RELEASE);
    n->counted_devices = dev;
    n->counted_free = nfree;
    n->counted_milli = fm;
}

/* log_node is log_append for n's current slot. */
static inline void log_node(cache_acct *a, const cache_acct_node *n)
{
    log_append(a, *n->slot);
}

#endif
