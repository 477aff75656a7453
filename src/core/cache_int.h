/*
 * cache_int.h - the cache's private layout, shared by cache.c (the public
 * API) and cache_acct.c (how pods are charged to nodes). Not a public
 * header: src/core only.
 *
 * Layout:
 *   - nodes: a dense array of cnode pointers (slot = index; the last node
 *     moves into a removed slot), plus an open-addressing hash name -> cnode
 *     that readers probe under the read lock. Both change only under the
 *     write lock.
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

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agentsched/base/table.h"
#include "agentsched/core/cache.h"

typedef struct prec prec;
typedef struct pentry pentry;

typedef struct cnode {
    cache_node pub; /* first: cache_node * and cnode * convert */
    prec *rec;
    uint64_t epoch;
    cache *cache; /* owner, for the change log */
} cnode;

/* One per node name that has a node or pods. */
struct prec {
    char *name;
    size_t len;
    cnode *node; /* NULL while detached */
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
    uint64_t epoch;
    uint32_t req_mask;
    uint32_t gpu_devices;
    int32_t gpu_milli;
    uint16_t gpu_count;
    uint8_t state; /* cache_pod_state */
    uint8_t nreq;
    char *uid;
    char *key;
    int64_t req[]; /* popcount(req_mask) values, then the strings */
};

struct cache {
    model_registry *reg;
    pthread_mutex_t wmu;
    pthread_rwlock_t rw;

    cnode **nodes;
    void **slabs; /* cnode slabs (CNODE_SLAB each), freed with the cache */
    size_t nslabs;
    cnode *free_cnodes; /* recycled cnodes, linked through rec */
    size_t nnodes, nodes_cap;
    size_t max_nodes, max_pods; /* CACHE_MAX_NODES/PODS or lower (cache_set_limits) */
    table by_name;              /* name -> cnode (key owned by the rec) */
    table recs;                 /* name -> prec */
    table pods;                 /* uid -> pentry */
    pentry *assumed;

    table shard; /* names (owned char *) in the shard */
    bool shard_applied;
    int mode;           /* (atomic) cache_shard_mode */
    uint64_t shard_rev; /* (atomic) */

    uint64_t next_id;
    uint64_t epoch;
    size_t pods_bound, pods_assumed, pods_detached;

    /* Change log (cache.h CHANGE LOG): slots of changed nodes. Written by
     * the writer-mutex holder only; read lock-free. */
    uint64_t log[CACHE_LOG_CAP]; /* (atomic) sequence tag << LOG_SLOT_BITS | slot */
    uint64_t log_head;           /* (atomic) entries appended */
    uint64_t node_events, pod_events;
};

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
static inline void bump_generation(cnode *n)
{
    __atomic_add_fetch(&n->pub.generation, 1, __ATOMIC_RELEASE);
}

/* Must be the last write of a mutation that can make a fitting pod stop
 * fitting (see the seqlock argument in cache.h). */
static inline void bump_bind_version(cnode *n)
{
    __atomic_add_fetch(&n->pub.bind_version, 1, __ATOMIC_RELEASE);
}

/* log_append records that the node at slot changed. Called with the
 * writer mutex held (one appender), after the change's usage and version
 * writes, and under the write lock for structural changes so a reader that
 * takes the read lock afterwards sees the entry. */
static inline void log_append(cache *c, uint32_t slot)
{
    uint64_t h = __atomic_load_n(&c->log_head, __ATOMIC_RELAXED);
    uint64_t e = log_tag(h) | (slot < LOG_SLOT_NONE ? slot : LOG_SLOT_NONE);
    __atomic_store_n(&c->log[h & (CACHE_LOG_CAP - 1)], e, __ATOMIC_RELAXED);
    __atomic_store_n(&c->log_head, h + 1, __ATOMIC_RELEASE);
}

/* log_node is log_append for n's current slot. */
static inline void log_node(cnode *n)
{
    log_append(n->cache, n->pub.slot);
}

#endif
