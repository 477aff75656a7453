/*
 * cache.c - the shard-aware node cache (see cache.h for the concurrency
 * model, cache_acct.h for how pods are charged to nodes).
 *
 * Layout: a dense array of cnode pointers (slot = index; the last node moves
 * into a removed slot), plus an open-addressing hash name -> cnode that
 * readers probe under the read lock. Both change only under the write lock.
 * Pods, the per-name records and the change log are the accounting's
 * (cache_int.h), embedded here.
 */
#include "agentsched/core/cache.h"

#include <assert.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agentsched/base/clock.h"
#include "agentsched/base/hash.h"
#include "agentsched/base/table.h"
#include "agentsched/core/gpu.h"
#include "agentsched/base/sync.h"
#include "cache_acct.h"

/* The public pod states and log capacity are the accounting's. */
static_assert((int)CACHE_POD_ABSENT == (int)CACHE_ACCT_ABSENT, "pod states");
static_assert((int)CACHE_POD_ASSUMED == (int)CACHE_ACCT_ASSUMED, "pod states");
static_assert((int)CACHE_POD_BOUND == (int)CACHE_ACCT_BOUND, "pod states");
static_assert(CACHE_LOG_CAP == CACHE_ACCT_LOG_CAP, "change log capacity");

typedef struct cnode {
    cache_node pub;       /* first: cache_node * and cnode * convert */
    cache_acct_node acct; /* the accounting's view of pub */
    prec *rec;
    uint64_t epoch;
} cnode;

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

    table shard; /* names (owned char *) in the shard */
    bool shard_applied;
    int mode;           /* (atomic) cache_shard_mode */
    uint64_t shard_rev; /* (atomic) */

    uint64_t next_id;
    uint64_t node_events, pod_events;
    uint64_t foreign_overcommits, foreign_overcommits_assumed; /* see cache_stats */
    cache_acct acct; /* pods, records, counters, change log */
};

/* See cache.h. */
uint64_t cache_name_hash(const char *s, size_t len)
{
    return hash_bytes(s, len);
}

/* cnodes come from slabs so a scan over the dense array touches
 * neighbouring memory instead of one heap block per node. */
#define CNODE_SLAB 64

static cnode *cnode_alloc(cache *c)
{
    if (!c->free_cnodes) {
        void **ns = realloc(c->slabs, (c->nslabs + 1) * sizeof *ns);
        if (!ns)
            return NULL;
        c->slabs = ns;
        cnode *slab = calloc(CNODE_SLAB, sizeof *slab);
        if (!slab)
            return NULL;
        c->slabs[c->nslabs++] = slab;
        for (int i = CNODE_SLAB - 1; i >= 0; i--) {
            slab[i].rec = (prec *)c->free_cnodes;
            c->free_cnodes = &slab[i];
        }
    }
    cnode *n = c->free_cnodes;
    c->free_cnodes = (cnode *)n->rec;
    memset(n, 0, sizeof *n);
    n->pub.cluster_gpus = c->acct.gpus;
    n->acct = (cache_acct_node){
        .requested = n->pub.requested,
        .gpu_used = n->pub.gpu_used,
        .containers_cpu = &n->pub.containers_cpu,
        .generation = &n->pub.generation,
        .bind_version = &n->pub.bind_version,
        .slot = &n->pub.slot,
        .ngpus = &n->pub.ngpus,
        .in_shard = &n->pub.in_shard,
    };
    return n;
}

static void cnode_release(cache *c, cnode *n)
{
    if (!n)
        return;
    memset(n, 0, sizeof *n);
    n->rec = (prec *)c->free_cnodes;
    c->free_cnodes = n;
}

/* ------------------------------------------------------------------ */
/* Shard mode                                                          */
/* ------------------------------------------------------------------ */

/* See cache.h. */
as_err cache_shard_mode_parse(const char *s, cache_shard_mode *out)
{
    if (!s)
        return AS_EINVAL;
    if (strcmp(s, "none") == 0)
        *out = CACHE_SHARD_NONE;
    else if (strcmp(s, "soft") == 0)
        *out = CACHE_SHARD_SOFT;
    else if (strcmp(s, "hard") == 0)
        *out = CACHE_SHARD_HARD;
    else
        return AS_EINVAL;
    return AS_OK;
}

/* See cache.h. */
const char *cache_shard_mode_name(cache_shard_mode m)
{
    switch (m) {
    case CACHE_SHARD_NONE:
        return "none";
    case CACHE_SHARD_SOFT:
        return "soft";
    case CACHE_SHARD_HARD:
        return "hard";
    }
    return "unknown";
}

/* ------------------------------------------------------------------ */
/* Lifecycle                                                           */
/* ------------------------------------------------------------------ */

/* See cache.h. */
as_err cache_new(model_registry *reg, cache **out)
{
    *out = NULL;
    cache *c = calloc(1, sizeof *c);
    if (!c)
        return AS_ENOMEM;
    c->reg = reg;
    sync_mutex_init_hot(&c->wmu);
    pthread_rwlockattr_t attr;
    pthread_rwlockattr_init(&attr);
    /* Writer preference so a node update is not starved by a stream of
     * decisions; the write lock is held only for pointer swaps. */
    pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&c->rw, &attr);
    pthread_rwlockattr_destroy(&attr);
    /* Ids start from a base of this cache's own (its address and the
     * clock, mixed), so that two caches in one process do not hand out
     * the same ids: whatever keys by node id (fragment's memo in a policy)
     * then cannot take one cache's node for another's. Never 0. */
    c->next_id = ((hash_mix((uint64_t)(uintptr_t)c, clock_mono_ns()) & 0xffffffffu) << 24) | 1;
    c->acct.epoch = 1;
    c->max_nodes = CACHE_MAX_NODES;
    c->max_pods = CACHE_MAX_PODS;
    *out = c;
    return AS_OK;
}

/* See cache.h. */
void cache_set_limits(cache *c, size_t max_nodes, size_t max_pods)
{
    pthread_mutex_lock(&c->wmu);
    c->max_nodes = max_nodes && max_nodes < CACHE_MAX_NODES ? max_nodes : CACHE_MAX_NODES;
    c->max_pods = max_pods && max_pods < CACHE_MAX_PODS ? max_pods : CACHE_MAX_PODS;
    pthread_mutex_unlock(&c->wmu);
}

/* See cache.h. */
void cache_free(cache *c)
{
    if (!c)
        return;
    cache_acct_free(&c->acct);
    for (size_t i = 0; i < c->nnodes; i++) {
        model_node_free((model_node *)c->nodes[i]->pub.spec);
    }
    for (size_t i = 0; i < c->nslabs; i++)
        free(c->slabs[i]);
    free(c->slabs);
    for (size_t i = 0; i < c->shard.cap; i++)
        if (c->shard.t[i].k)
            free(c->shard.t[i].v);
    free(c->nodes);
    table_free(&c->by_name);
    table_free(&c->shard);
    pthread_rwlock_destroy(&c->rw);
    pthread_mutex_destroy(&c->wmu);
    free(c);
}

/* See cache.h. */
model_registry *cache_registry(cache *c)
{
    return c->reg;
}

/* ------------------------------------------------------------------ */
/* Readers                                                             */
/* ------------------------------------------------------------------ */

/* See cache.h. */
void cache_read_lock(cache *c)
{
    /* Fails only on a broken invariant (a recursive read lock past the
     * reader limit, a deadlock): stop loudly in every build, never go on
     * reading unlocked. */
    int rc = pthread_rwlock_rdlock(&c->rw);
    if (rc != 0) {
        fprintf(stderr, "agentsched: cache read lock failed: %s\n", strerror(rc));
        abort();
    }
}

/* See cache.h. */
void cache_read_unlock(cache *c)
{
    pthread_rwlock_unlock(&c->rw);
}

/* See cache.h. */
size_t cache_node_count(const cache *c)
{
    return c->nnodes;
}

/* See cache.h. */
cache_node *cache_node_at(const cache *c, size_t i)
{
    return i < c->nnodes ? &c->nodes[i]->pub : NULL;
}

/* See cache.h. */
cache_node *cache_node_find(const cache *c, const char *name, size_t len)
{
    cnode *n = table_get(&c->by_name, name, len);
    return n ? &n->pub : NULL;
}

/* See cache.h. */
void cache_node_find_n(const cache *c, const cache_name *names, size_t n, cache_node **out)
{
    const table *m = &c->by_name;
    if (!m->cap) {
        for (size_t i = 0; i < n; i++)
            out[i] = NULL;
        return;
    }
    size_t mask = m->cap - 1;
    enum { BATCH = 16 };
    uint64_t h[BATCH];
    for (size_t b = 0; b < n; b += BATCH) {
        size_t k = n - b < BATCH ? n - b : BATCH;
        const cache_name *nm = names + b;
        /* 1: hash every name and start loading its home slot */
        for (size_t i = 0; i < k; i++) {
            h[i] = nm[i].hash ? nm[i].hash : hash_bytes(nm[i].s, nm[i].len);
            __builtin_prefetch(&m->t[h[i] & mask]);
        }
        /* 2: start loading the key and the node of each home slot */
        for (size_t i = 0; i < k; i++) {
            const table_entry *e = &m->t[h[i] & mask];
            if (e->k) {
                __builtin_prefetch(e->k);
                __builtin_prefetch(e->v);
            }
        }
        /* 3: probe as table_get does; start loading the node's usage and
         * allocatable for the caller's predicates */
        for (size_t i = 0; i < k; i++) {
            cnode *found = NULL;
            size_t len = nm[i].len;
            for (size_t j = h[i] & mask;; j = (j + 1) & mask) {
                const table_entry *e = &m->t[j];
                if (!e->k)
                    break;
                if (e->h == h[i] && e->klen == len && table_key_eq(e->k, nm[i].s, len)) {
                    found = e->v;
                    break;
                }
            }
            if (found) {
                const char *base = (const char *)&found->pub;
                __builtin_prefetch(base + offsetof(cache_node, requested));
                __builtin_prefetch(base + offsetof(cache_node, bind_version));
                __builtin_prefetch(base + offsetof(cache_node, alloc));
            }
            out[b + i] = found ? &found->pub : NULL;
        }
    }
}

/* See cache.h. */
cache_node *cache_node_get(const cache *c, uint32_t slot, uint64_t id)
{
    if (slot < c->nnodes && c->nodes[slot]->pub.id == id)
        return &c->nodes[slot]->pub;
    /* Slots move only when a node is removed; find the incarnation if it
     * moved (rare, so a scan is fine). */
    for (size_t i = 0; i < c->nnodes; i++)
        if (c->nodes[i]->pub.id == id)
            return &c->nodes[i]->pub;
    return NULL;
}

/* See cache.h. */
cache_shard_mode cache_get_shard_mode(const cache *c)
{
    return (cache_shard_mode)__atomic_load_n(&c->mode, __ATOMIC_RELAXED);
}

/* See cache.h. */
uint64_t cache_log_head(const cache *c)
{
    return __atomic_load_n(&c->acct.log_head, __ATOMIC_ACQUIRE);
}

/* See cache.h. */
bool cache_log_read(const cache *c, uint64_t from, size_t n, uint32_t *out)
{
    if (n > CACHE_LOG_CAP || cache_log_head(c) - from > CACHE_LOG_CAP)
        return false;
    for (size_t i = 0; i < n; i++) {
        /* The head (acquired by the caller) was published after entry
         * from + i was written, so this load sees that write or a later
         * reuse, whose tag differs. */
        uint64_t e =
            __atomic_load_n(&c->acct.log[(from + i) & (CACHE_LOG_CAP - 1)], __ATOMIC_RELAXED);
        uint32_t slot = (uint32_t)(e & LOG_SLOT_NONE);
        if ((e & ~(uint64_t)LOG_SLOT_NONE) != log_tag(from + i) || slot == LOG_SLOT_NONE)
            return false;
        out[i] = slot;
    }
    return true;
}

/* ------------------------------------------------------------------ */
/* Pod index                                                           */
/* ------------------------------------------------------------------ */

static void copy_str(char *dst, size_t cap, const char *src, size_t len)
{
    if (len >= cap)
        len = cap - 1;
    memcpy(dst, src, len);
    dst[len] = '\0';
}

/* See cache.h. */
void cache_pod_lookup(cache *c, const char *uid, cache_pod_info *out)
{
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&c->wmu);
    pentry *e = uid ? table_get(&c->acct.pods, uid, strlen(uid)) : NULL;
    if (e) {
        out->state = (cache_pod_state)e->state;
        copy_str(out->node, sizeof out->node, e->rec->name, e->rec->len);
        copy_str(out->key, sizeof out->key, e->key, strlen(e->key));
        out->assumed_at_ms = e->assumed_at_ms;
        out->gpu_devices = e->gpu_devices;
        out->gpu_milli = e->gpu_milli;
        int k = 0;
        for (uint32_t m = e->req_mask; m; m &= m - 1)
            out->req.v[__builtin_ctz(m)] = e->req[k++];
    }
    pthread_mutex_unlock(&c->wmu);
}

/* count_foreign_overcommit: e was just charged BOUND on its node, and this
 * cache had not assumed it there (another scheduler bound it, or it moved).
 * If that pushed a resource e requests past the node's allocatable, capacity
 * the cache had already counted as taken went to e twice: count it, and
 * whether pods of ours were still assumed (in flight) on that node. Writer
 * mutex held; O(pods on the node) only when overcommitted. */
static void count_foreign_overcommit(cache *c, const pentry *e)
{
    const cache_acct_node *an = e->rec->node;
    if (!an)
        return; /* detached: no node to overcommit yet */
    const cnode *n = c->nodes[*an->slot];
    const model_node *spec = n->pub.spec;
    bool over = false;
    for (uint32_t m = e->req_mask; m && !over; m &= m - 1) {
        int r = __builtin_ctz(m);
        bool devices_cover =
            r == __atomic_load_n(&c->reg->gpu_res, __ATOMIC_ACQUIRE) && spec->ngpus > 0;
        over = !devices_cover && cache_node_requested(&n->pub, r) > spec->alloc.v[r];
    }
    if (!over)
        return;
    c->foreign_overcommits++;
    for (const pentry *p = e->rec->pods; p; p = p->next)
        if (p->state == CACHE_ACCT_ASSUMED) {
            c->foreign_overcommits_assumed++;
            break;
        }
}

/* annotated_devices: the devices pod's annotation (model_pod
 * annot_gpu_*) gives it on node, or 0 when it has none for that node or
 * they do not match its demand (as many devices as it asks for, at the
 * milli it asks for). */
static uint32_t annotated_devices(const model_pod *pod, const char *node)
{
    uint32_t devs = pod->annot_gpu_devices;
    if (!devs || !pod->gpu_count || !pod->annot_gpu_node || strcmp(pod->annot_gpu_node, node) != 0)
        return 0;
    uint32_t milli = pod->gpu_milli ? pod->gpu_milli : MODEL_GPU_MILLI;
    if ((uint32_t)__builtin_popcount(devs) != pod->gpu_count || pod->annot_gpu_milli != milli)
        return 0;
    return devs;
}

/* entry_on: e is charged to the node named node[0..len). */
static bool entry_on(const pentry *e, const char *node, size_t len)
{
    return e->rec->len == len && memcmp(e->rec->name, node, len) == 0;
}

/* See cache.h. */
as_err cache_pod_upsert(cache *c, const model_pod *pod)
{
    char tmp[600];
    size_t uid_len;
    const char *uid = model_pod_key(pod, tmp, sizeof tmp, &uid_len);
    as_err err = AS_OK;

    pthread_mutex_lock(&c->wmu);
    c->pod_events++;
    pentry *e = table_get(&c->acct.pods, uid, uid_len);
    bool terminal = model_pod_is_terminal(pod);
    const char *node = pod->node_name && pod->node_name[0] ? pod->node_name : NULL;

    if (terminal || !node) {
        /* An ASSUMED pod seen unbound is our own bind the watch has not
         * caught up with; its expiry governs it. */
        if (e && (terminal || e->state == CACHE_ACCT_BOUND))
            cache_acct_drop(&c->acct, e);
        else if (e)
            e->epoch = c->acct.epoch;
        goto done;
    }

    size_t node_len = strlen(node);
    uint32_t pinned = annotated_devices(pod, node);
    if (e && entry_on(e, node, node_len) && cache_acct_same_request(e, pod) &&
        (!pinned || pinned == e->gpu_devices)) {
        cache_acct_confirm(&c->acct, e);
        e->digest = pod->digest;
        if (pinned)
            e->gpu_pinned = 1;
        goto done;
    }
    /* New, moved, or resized: replace the entry wholesale. A pod resized
     * in place keeps its devices when they still hold it. */
    uint32_t keep_devices = 0;
    if (e) {
        if (entry_on(e, node, node_len))
            keep_devices = e->gpu_devices;
        cache_acct_drop(&c->acct, e);
    } else if (c->acct.pods.n >= c->max_pods) {
        err = AS_ELIMIT;
        goto done;
    }
    pentry *ne = cache_acct_entry_new(uid, uid_len, pod);
    if (!ne) {
        err = AS_ENOMEM;
        goto done;
    }
    ne->gpu_devices = pinned ? pinned : keep_devices;
    ne->gpu_pinned = pinned != 0;
    err = cache_acct_insert(&c->acct, ne, node, node_len, CACHE_ACCT_BOUND, true);
    if (err != AS_OK)
        free(ne);
    else
        count_foreign_overcommit(c, ne);
done:
    pthread_mutex_unlock(&c->wmu);
    return err;
}

/* See cache.h. */
bool cache_pod_touch(cache *c, const char *uid, const char *node, size_t node_len, uint64_t digest)
{
    bool done = false;
    if (!uid || !digest || !node || !node_len)
        return false;
    pthread_mutex_lock(&c->wmu);
    pentry *e = table_get(&c->acct.pods, uid, strlen(uid));
    /* cache_pod_upsert's "same node, same request" case, GPU pods aside
     * (their devices may be pinned by an annotation: they decode). */
    if (e && e->digest == digest && !e->gpu_count && entry_on(e, node, node_len)) {
        c->pod_events++;
        cache_acct_confirm(&c->acct, e);
        done = true;
    }
    pthread_mutex_unlock(&c->wmu);
    return done;
}

/* See cache.h. */
as_err cache_pod_delete(cache *c, const char *uid)
{
    as_err err = AS_OK;
    pthread_mutex_lock(&c->wmu);
    c->pod_events++;
    pentry *e = uid ? table_get(&c->acct.pods, uid, strlen(uid)) : NULL;
    if (e)
        cache_acct_drop(&c->acct, e);
    else
        err = AS_ENOTFOUND;
    pthread_mutex_unlock(&c->wmu);
    return err;
}

/* See cache.h. */
as_err cache_assume_if(cache *c, const model_pod *pod, uint32_t slot, uint64_t id,
                       uint64_t seen_bind_version, cache_fit_fn fit, void *arg,
                       cache_assume_result *result, uint32_t *gpu_devices)
{
    char tmp[600];
    size_t uid_len;
    const char *uid = model_pod_key(pod, tmp, sizeof tmp, &uid_len);
    as_err err = AS_OK;
    uint32_t dev = 0;

    if (gpu_devices)
        *gpu_devices = 0;
    pthread_mutex_lock(&c->wmu);
    /* The writer mutex excludes structural changes, so the node array is
     * stable here without the read lock. */
    cache_node *node = cache_node_get(c, slot, id);
    pentry *e = table_get(&c->acct.pods, uid, uid_len);
    if (e) {
        bool same = node && e->rec->node == &((cnode *)node)->acct;
        if (same && gpu_devices)
            *gpu_devices = e->gpu_devices;
        *result = same ? CACHE_ASSUME_SAME_NODE : CACHE_ASSUME_OTHER_NODE;
        goto done;
    }
    if (!node) {
        *result = CACHE_ASSUME_NODE_GONE;
        goto done;
    }
    cnode *n = (cnode *)node;
    bool fast = __atomic_load_n(&n->pub.bind_version, __ATOMIC_RELAXED) == seen_bind_version;
    if (fast) {
        /* Still fits by the seqlock argument; only devices need choosing. */
        if (pod->gpu_count && n->pub.spec->ngpus) {
            bool ok =
                fit ? fit(arg, pod, node, &dev)
                    : gpu_choose(pod->gpu_count, pod->gpu_milli, node->gpu_used, node->ngpus, &dev);
            if (!ok) {
                *result = CACHE_ASSUME_NO_FIT;
                goto done;
            }
        }
        *result = CACHE_ASSUME_FAST;
    } else {
        if (!fit || !fit(arg, pod, node, &dev)) {
            *result = CACHE_ASSUME_NO_FIT;
            goto done;
        }
        *result = CACHE_ASSUME_RECHECKED;
    }
    if (c->acct.pods.n >= c->max_pods) {
        err = AS_ELIMIT;
        goto done;
    }
    pentry *ne = cache_acct_entry_new(uid, uid_len, pod);
    if (!ne) {
        err = AS_ENOMEM;
        goto done;
    }
    ne->gpu_devices = dev;
    ne->assumed_at_ms = clock_now_ms();
    err = cache_acct_insert(&c->acct, ne, n->rec->name, n->rec->len, CACHE_ACCT_ASSUMED, false);
    if (err != AS_OK) {
        free(ne);
        goto done;
    }
    if (gpu_devices)
        *gpu_devices = dev;
done:
    pthread_mutex_unlock(&c->wmu);
    return err;
}

/* See cache.h. */
as_err cache_forget(cache *c, const char *uid)
{
    as_err err = AS_OK;
    pthread_mutex_lock(&c->wmu);
    pentry *e = uid ? table_get(&c->acct.pods, uid, strlen(uid)) : NULL;
    if (!e)
        err = AS_ENOTFOUND;
    else if (e->state != CACHE_ACCT_ASSUMED)
        err = AS_ECONFLICT;
    else
        cache_acct_drop(&c->acct, e);
    pthread_mutex_unlock(&c->wmu);
    return err;
}

/* See cache.h. */
as_err cache_expire_assumed(cache *c, int64_t now, int64_t ttl_ms, size_t *n)
{
    pthread_mutex_lock(&c->wmu);
    size_t count = cache_acct_expire(&c->acct, now, ttl_ms);
    pthread_mutex_unlock(&c->wmu);
    if (n)
        *n = count;
    return AS_OK;
}

/* ------------------------------------------------------------------ */
/* Nodes                                                               */
/* ------------------------------------------------------------------ */

/* set_spec installs spec and its hot copies (write lock held, or the node
 * not yet published). */
static void set_spec(cnode *n, const model_node *spec)
{
    n->pub.spec = spec;
    n->pub.ready = spec->ready;
    n->pub.unschedulable = spec->unschedulable;
    n->pub.ntaints = spec->ntaints;
    n->pub.name_len = (uint32_t)strlen(spec->name);
    n->pub.ngpus = spec->ngpus > MODEL_MAX_GPUS ? MODEL_MAX_GPUS : spec->ngpus;
    n->pub.alloc = spec->alloc;
}

/* gpu_model_entry is spec's GPU model entry, appended when new if add;
 * NULL without devices or a model label, for a label longer than an entry
 * holds, or when not found (or the table is full). Writer mutex held. */
static cache_gpu_model *gpu_model_entry(cache *c, const model_node *spec, bool add)
{
    if (!spec->ngpus || !spec->gpu_model || !spec->gpu_model[0])
        return NULL;
    size_t len = strlen(spec->gpu_model);
    uint32_t n = c->acct.nmodels;
    if (len >= sizeof c->acct.models[0].name)
        return NULL;
    for (uint32_t i = 0; i < n; i++)
        if (strcmp(c->acct.models[i].name, spec->gpu_model) == 0)
            return &c->acct.models[i];
    if (!add || n == CACHE_MAX_GPU_MODELS)
        return NULL;
    memcpy(c->acct.models[n].name, spec->gpu_model, len + 1);
    __atomic_store_n(&c->acct.nmodels, n + 1, __ATOMIC_RELEASE);
    return &c->acct.models[n];
}

/* set_gpu_model points n at its spec's GPU model entry; an attached node
 * (attached) moves its devices from the old entry's count to the new
 * one's. Writer mutex and write lock held (scans read the pointer). */
static void set_gpu_model(cache *c, cnode *n, bool attached)
{
    cache_gpu_model *gm = gpu_model_entry(c, n->pub.spec, true);
    if (gm == n->pub.gpu_model)
        return;
    if (attached)
        devices_note(&c->acct, &n->acct, true);
    n->pub.gpu_model = gm;
    n->acct.model = gm;
    if (attached)
        devices_note(&c->acct, &n->acct, false);
}

static bool shard_has(const cache *c, const char *name, size_t len)
{
    return table_get(&c->shard, name, len) != NULL;
}

static int initial_in_shard(const cache *c, const char *name, size_t len)
{
    if (c->shard_applied)
        return shard_has(c, name, len);
    return cache_get_shard_mode(c) == CACHE_SHARD_NONE;
}

/* See cache.h. */
as_err cache_node_upsert(cache *c, model_node *node)
{
    if (!node)
        return AS_EINVAL;
    if (!node->name || !node->name[0]) {
        model_node_free(node);
        return AS_EINVAL;
    }
    as_err err = AS_OK;
    size_t len = strlen(node->name);
    pthread_mutex_lock(&c->wmu);
    c->node_events++;
    cnode *n = table_get(&c->by_name, node->name, len);
    if (n) {
        const model_node *old = n->pub.spec;
        pthread_rwlock_wrlock(&c->rw);
        set_spec(n, node);
        set_gpu_model(c, n, true);
        /* Logged under the write lock: the old spec is freed below, and a
         * reader that still remembers this slot must re-read it first. */
        log_node(&c->acct, &n->acct);
        pthread_rwlock_unlock(&c->rw);
        n->epoch = c->acct.epoch;
        if (old->ngpus != node->ngpus) {
            /* Device indexes may no longer exist. */
            cache_acct_replace_devices(&c->acct, n->rec);
        }
        bump_generation(&n->acct);
        bump_bind_version(&n->acct);
        log_node(&c->acct, &n->acct);
        model_node_free((model_node *)old);
        goto done;
    }

    if (c->nnodes >= c->max_nodes) {
        /* A bound on memory whatever the API server or a file sends. */
        model_node_free(node);
        err = AS_ELIMIT;
        goto done;
    }
    prec *r = cache_acct_rec_get(&c->acct, node->name, len, true);
    n = cnode_alloc(c);
    if (!r || !n) {
        cnode_release(c, n);
        if (r)
            cache_acct_rec_maybe_free(&c->acct, r);
        model_node_free(node);
        err = AS_ENOMEM;
        goto done;
    }
    set_spec(n, node);
    set_gpu_model(c, n, false); /* counted when attached, below */
    n->pub.id = c->next_id++;
    n->pub.bind_version = 1; /* 0 never matches: "always recheck" */
    n->pub.generation = 1;
    n->pub.in_shard = initial_in_shard(c, r->name, len);
    n->rec = r;
    n->epoch = c->acct.epoch;

    pthread_rwlock_wrlock(&c->rw);
    if (c->nnodes == c->nodes_cap) {
        size_t ncap = c->nodes_cap ? c->nodes_cap * 2 : 64;
        cnode **nn = realloc(c->nodes, ncap * sizeof *nn);
        if (!nn) {
            err = AS_ENOMEM;
            goto unlock;
        }
        c->nodes = nn;
        c->nodes_cap = ncap;
    }
    err = table_put(&c->by_name, r->name, len, n);
    if (err != AS_OK)
        goto unlock;
    n->pub.slot = (uint32_t)c->nnodes;
    c->nodes[c->nnodes++] = n;
    log_node(&c->acct, &n->acct);
unlock:
    pthread_rwlock_unlock(&c->rw);
    if (err != AS_OK) {
        cnode_release(c, n);
        cache_acct_rec_maybe_free(&c->acct, r);
        model_node_free(node);
        goto done;
    }
    /* Only writer-mutex holders follow a record to its node, so the
     * record learns it after the write lock. */
    cache_acct_node_attach(&c->acct, r, &n->acct);
done:
    pthread_mutex_unlock(&c->wmu);
    return err;
}

/* node_remove_locked unlinks n (writer mutex and write lock held) and
 * returns it for freeing after the write lock is released. */
static cnode *node_remove_locked(cache *c, cnode *n)
{
    table_del(&c->by_name, n->rec->name, n->rec->len);
    uint32_t slot = n->pub.slot;
    cnode *last = c->nodes[--c->nnodes];
    c->nodes[slot] = last;
    last->pub.slot = slot;
    /* Both slots changed: the hole now holds the last node (or nothing if
     * n was last), and the last slot is empty. */
    log_append(&c->acct, slot);
    if (c->nnodes != slot)
        log_append(&c->acct, (uint32_t)c->nnodes);
    cache_acct_node_detach(&c->acct, n->rec);
    return n;
}

static void node_destroy(cache *c, cnode *n)
{
    prec *r = n->rec;
    /* Pods keep their device masks: if the node comes back with the same
     * devices they are reused (attach checks they are still valid). */
    model_node_free((model_node *)n->pub.spec);
    cnode_release(c, n);
    cache_acct_rec_maybe_free(&c->acct, r);
}

/* See cache.h. */
as_err cache_node_remove(cache *c, const char *name)
{
    if (!name)
        return AS_EINVAL;
    as_err err = AS_OK;
    pthread_mutex_lock(&c->wmu);
    c->node_events++;
    cnode *n = table_get(&c->by_name, name, strlen(name));
    if (!n) {
        err = AS_ENOTFOUND;
        goto done;
    }
    pthread_rwlock_wrlock(&c->rw);
    node_remove_locked(c, n);
    pthread_rwlock_unlock(&c->rw);
    node_destroy(c, n);
done:
    pthread_mutex_unlock(&c->wmu);
    return err;
}

/* ------------------------------------------------------------------ */
/* Resync                                                              */
/* ------------------------------------------------------------------ */

/* See cache.h. */
uint64_t cache_sync_begin(cache *c)
{
    pthread_mutex_lock(&c->wmu);
    uint64_t e = ++c->acct.epoch;
    pthread_mutex_unlock(&c->wmu);
    return e;
}

/* See cache.h. */
as_err cache_sync_end_nodes(cache *c, uint64_t epoch, size_t *removed)
{
    size_t count = 0;
    as_err err = AS_OK;
    pthread_mutex_lock(&c->wmu);
    cnode **gone = NULL;
    size_t ngone = 0;
    for (size_t i = 0; i < c->nnodes; i++)
        if (c->nodes[i]->epoch < epoch)
            ngone++;
    if (ngone) {
        gone = malloc(ngone * sizeof *gone);
        if (!gone) {
            err = AS_ENOMEM;
            goto done;
        }
        size_t k = 0;
        for (size_t i = 0; i < c->nnodes; i++)
            if (c->nodes[i]->epoch < epoch)
                gone[k++] = c->nodes[i];
        pthread_rwlock_wrlock(&c->rw);
        for (size_t i = 0; i < ngone; i++)
            node_remove_locked(c, gone[i]);
        pthread_rwlock_unlock(&c->rw);
        for (size_t i = 0; i < ngone; i++)
            node_destroy(c, gone[i]);
        c->node_events += ngone;
        count = ngone;
    }
done:
    pthread_mutex_unlock(&c->wmu);
    free(gone);
    if (removed)
        *removed = count;
    return err;
}

/* See cache.h. */
as_err cache_sync_end_pods(cache *c, uint64_t epoch, size_t *removed)
{
    size_t count = 0;
    pthread_mutex_lock(&c->wmu);
    as_err err = cache_acct_drop_stale(&c->acct, epoch, &count);
    c->pod_events += count;
    pthread_mutex_unlock(&c->wmu);
    if (removed)
        *removed = count;
    return err;
}

/* ------------------------------------------------------------------ */
/* Shards                                                              */
/* ------------------------------------------------------------------ */

/* See cache.h. */
void cache_set_shard_mode(cache *c, cache_shard_mode mode)
{
    pthread_mutex_lock(&c->wmu);
    cache_shard_mode old = cache_get_shard_mode(c);
    __atomic_store_n(&c->mode, (int)mode, __ATOMIC_RELAXED);
    if (old != mode) {
        /* A stricter mode can make a fitting pod stop fitting; in hard
         * mode the device counts are the shard's nodes'. */
        c->acct.hard = mode == CACHE_SHARD_HARD;
        for (size_t i = 0; i < c->nnodes; i++) {
            devices_note(&c->acct, &c->nodes[i]->acct, false);
            bump_generation(&c->nodes[i]->acct);
            bump_bind_version(&c->nodes[i]->acct);
            log_node(&c->acct, &c->nodes[i]->acct);
        }
        __atomic_add_fetch(&c->shard_rev, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&c->wmu);
}

static void set_in_shard(cache *c, cnode *n, int v)
{
    if (__atomic_load_n(&n->pub.in_shard, __ATOMIC_RELAXED) == v)
        return;
    __atomic_store_n(&n->pub.in_shard, v, __ATOMIC_RELAXED);
    devices_note(&c->acct, &n->acct, false);
    bump_generation(&n->acct);
    if (!v)
        bump_bind_version(&n->acct);
    log_node(&c->acct, &n->acct);
}

/* See cache.h. */
as_err cache_shard_apply(cache *c, const char *const *names, size_t n, uint64_t *revision)
{
    table next = {0};
    as_err err = AS_OK;
    for (size_t i = 0; i < n; i++) {
        if (!names[i])
            continue;
        size_t len = strlen(names[i]);
        if (table_get(&next, names[i], len))
            continue;
        char *dup = strndup(names[i], len);
        if (!dup || table_put(&next, dup, len, dup) != AS_OK) {
            free(dup);
            err = AS_ENOMEM;
            break;
        }
    }
    if (err != AS_OK) {
        for (size_t i = 0; i < next.cap; i++)
            if (next.t[i].k)
                free(next.t[i].v);
        table_free(&next);
        return err;
    }

    pthread_mutex_lock(&c->wmu);
    if (!c->shard_applied) {
        /* First membership: every node's flag is decided now. */
        for (size_t i = 0; i < c->nnodes; i++) {
            cnode *nd = c->nodes[i];
            set_in_shard(c, nd, table_get(&next, nd->rec->name, nd->rec->len) != NULL);
        }
    } else {
        for (size_t i = 0; i < c->shard.cap; i++) {
            const table_entry *h = &c->shard.t[i];
            if (h->k && !table_get(&next, h->k, h->klen)) {
                cnode *nd = table_get(&c->by_name, h->k, h->klen);
                if (nd)
                    set_in_shard(c, nd, 0);
            }
        }
        for (size_t i = 0; i < next.cap; i++) {
            const table_entry *h = &next.t[i];
            if (h->k && !table_get(&c->shard, h->k, h->klen)) {
                cnode *nd = table_get(&c->by_name, h->k, h->klen);
                if (nd)
                    set_in_shard(c, nd, 1);
            }
        }
    }
    table old = c->shard;
    c->shard = next;
    c->shard_applied = true;
    uint64_t rev = __atomic_add_fetch(&c->shard_rev, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&c->wmu);

    for (size_t i = 0; i < old.cap; i++)
        if (old.t[i].k)
            free(old.t[i].v);
    table_free(&old);
    if (revision)
        *revision = rev;
    return AS_OK;
}

/* See cache.h. */
uint64_t cache_shard_revision(const cache *c)
{
    return __atomic_load_n(&c->shard_rev, __ATOMIC_ACQUIRE);
}

/* ------------------------------------------------------------------ */
/* Observability                                                       */
/* ------------------------------------------------------------------ */

/* See cache.h. */
void cache_gpu_devices(const cache *c, uint64_t *devices, uint64_t *free_devices)
{
    *devices = __atomic_load_n(&c->acct.gpus[0], __ATOMIC_RELAXED);
    *free_devices = __atomic_load_n(&c->acct.gpus[1], __ATOMIC_RELAXED);
}

/* See cache.h. */
uint64_t cache_gpu_devices_version(const cache *c)
{
    return __atomic_load_n(&c->acct.devices_version, __ATOMIC_ACQUIRE);
}

/* See cache.h. */
uint64_t cache_gpu_free_milli(const cache *c)
{
    return __atomic_load_n(&c->acct.gpus[2], __ATOMIC_RELAXED);
}

/* See cache.h. */
size_t cache_gpu_models(const cache *c, const cache_gpu_model **out)
{
    /* nmodels is published with release after the entry's name is written */
    *out = c->acct.models;
    return __atomic_load_n(&c->acct.nmodels, __ATOMIC_ACQUIRE);
}

/* See cache.h. */
void cache_get_stats(cache *c, cache_stats *out)
{
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&c->wmu);
    out->nodes = c->nnodes;
    bool none = cache_get_shard_mode(c) == CACHE_SHARD_NONE;
    for (size_t i = 0; i < c->nnodes; i++)
        if (none || cache_node_in_shard(&c->nodes[i]->pub))
            out->nodes_in_shard++;
    out->pods_bound = c->acct.pods_bound;
    out->pods_assumed = c->acct.pods_assumed;
    out->pods_detached = c->acct.pods_detached;
    out->node_events = c->node_events;
    out->pod_events = c->pod_events;
    out->foreign_overcommits = c->foreign_overcommits;
    out->foreign_overcommits_assumed = c->foreign_overcommits_assumed;
    pthread_mutex_unlock(&c->wmu);
}

/* See cache.h. */
as_err cache_check_invariants(cache *c, as_diag *diag)
{
    as_err err = AS_OK;
    pthread_mutex_lock(&c->wmu);
    size_t bound = 0, assumed = 0, detached = 0;
    for (size_t i = 0; i < c->acct.pods.cap; i++) {
        const pentry *e = c->acct.pods.t[i].k ? c->acct.pods.t[i].v : NULL;
        if (!e)
            continue;
        if (e->state == CACHE_ACCT_ASSUMED)
            assumed++;
        else if (e->state == CACHE_ACCT_BOUND)
            bound++;
        else {
            err = as_diag_set(diag, AS_EINTERNAL, NULL, "pod %s has state %d", e->uid, e->state);
            goto done;
        }
        if (!e->rec->node)
            detached++;
    }
    if (bound != c->acct.pods_bound || assumed != c->acct.pods_assumed ||
        detached != c->acct.pods_detached) {
        err = as_diag_set(diag, AS_EINTERNAL, NULL,
                          "pod counters bound=%zu/%zu assumed=%zu/%zu detached=%zu/%zu", bound,
                          c->acct.pods_bound, assumed, c->acct.pods_assumed, detached,
                          c->acct.pods_detached);
        goto done;
    }
    uint64_t ndev = 0, nfree = 0, nmilli = 0, mdev[CACHE_MAX_GPU_MODELS] = {0},
             mfree[CACHE_MAX_GPU_MODELS] = {0}, mmilli[CACHE_MAX_GPU_MODELS] = {0};
    for (size_t i = 0; i < c->nnodes; i++) {
        const cnode *n = c->nodes[i];
        const model_node *spec = n->pub.spec;
        if (n->pub.slot != i || n->rec->node != &n->acct) {
            err =
                as_diag_set(diag, AS_EINTERNAL, NULL, "node %s: slot/record mismatch", spec->name);
            goto done;
        }
        int64_t sum[MODEL_MAX_RES] = {0}, asum[MODEL_MAX_RES] = {0};
        int32_t gsum[MODEL_MAX_GPUS] = {0};
        uint32_t gassumed = 0;
        int64_t csum = 0;
        size_t npods = 0;
        for (const pentry *e = n->rec->pods; e; e = e->next) {
            int k = 0;
            csum += e->containers_cpu;
            for (uint32_t m = e->req_mask; m; m &= m - 1) {
                int r = __builtin_ctz(m);
                sum[r] += e->req[k];
                if (e->state == CACHE_ACCT_ASSUMED)
                    asum[r] += e->req[k];
                k++;
            }
            for (uint32_t m = e->gpu_devices; m; m &= m - 1)
                gsum[__builtin_ctz(m)] += e->gpu_milli;
            if (e->state == CACHE_ACCT_ASSUMED)
                gassumed |= e->gpu_devices;
            npods++;
        }
        if (cache_node_containers_cpu(&n->pub) != csum) {
            err = as_diag_set(diag, AS_EINTERNAL, NULL,
                              "node %s: containers_cpu = %lld but its pods sum to %lld", spec->name,
                              (long long)cache_node_containers_cpu(&n->pub), (long long)csum);
            goto done;
        }
        if (npods != n->rec->npods) {
            err = as_diag_set(diag, AS_EINTERNAL, NULL, "node %s: pod list length", spec->name);
            goto done;
        }
        for (int r = 0; r < MODEL_MAX_RES; r++) {
            int64_t have = cache_node_requested(&n->pub, r);
            if (have != sum[r]) {
                err = as_diag_set(diag, AS_EINTERNAL, NULL,
                                  "node %s: requested[%s] = %lld but its pods sum to %lld",
                                  spec->name, model_registry_name(c->reg, r), (long long)have,
                                  (long long)sum[r]);
                goto done;
            }
            bool devices_cover =
                r == __atomic_load_n(&c->reg->gpu_res, __ATOMIC_ACQUIRE) && spec->ngpus > 0;
            if (asum[r] > 0 && !devices_cover && have > spec->alloc.v[r]) {
                err = as_diag_set(diag, AS_EINTERNAL, NULL,
                                  "node %s: overcommitted %s (%lld requested > %lld "
                                  "allocatable) with assumed pods",
                                  spec->name, model_registry_name(c->reg, r), (long long)have,
                                  (long long)spec->alloc.v[r]);
                goto done;
            }
        }
        /* the nodes a scheduler may place on are the ones counted */
        bool usable = !c->acct.hard || cache_node_in_shard(&n->pub);
        uint64_t nodefree = 0, nodemilli = 0;
        for (int d = 0; d < MODEL_MAX_GPUS; d++) {
            int32_t have = cache_node_gpu_used(&n->pub, d);
            if (have != gsum[d]) {
                err = as_diag_set(diag, AS_EINTERNAL, NULL,
                                  "node %s: gpu %d used %d but its pods sum to %d", spec->name, d,
                                  have, gsum[d]);
                goto done;
            }
            if ((gassumed >> d & 1) && have > MODEL_GPU_MILLI) {
                err = as_diag_set(diag, AS_EINTERNAL, NULL,
                                  "node %s: gpu %d overcommitted (%d milli) with assumed pods",
                                  spec->name, d, have);
                goto done;
            }
            bool counted = usable && (uint32_t)d < n->pub.ngpus;
            nodefree += counted && have == 0;
            if (counted)
                nodemilli += gpu_device_free(have);
        }
        nfree += nodefree;
        nmilli += nodemilli;
        ndev += usable ? n->pub.ngpus : 0;
        const cache_gpu_model *gm = n->pub.gpu_model;
        if (gm != gpu_model_entry(c, spec, false)) {
            err = as_diag_set(diag, AS_EINTERNAL, NULL, "node %s: GPU model entry %s, label %s",
                              spec->name, gm ? gm->name : "none",
                              spec->gpu_model ? spec->gpu_model : "none");
            goto done;
        }
        if (gm && usable) {
            mdev[gm - c->acct.models] += n->pub.ngpus;
            mfree[gm - c->acct.models] += nodefree;
            mmilli[gm - c->acct.models] += nodemilli;
        }
    }
    if (ndev != c->acct.gpus[0] || nfree != c->acct.gpus[1] || nmilli != c->acct.gpus[2]) {
        err =
            as_diag_set(diag, AS_EINTERNAL, NULL,
                        "device counts: %llu devices, %llu free, %llu milli free, but the nodes a "
                        "scheduler may place on hold %llu, %llu, %llu",
                        (unsigned long long)c->acct.gpus[0], (unsigned long long)c->acct.gpus[1],
                        (unsigned long long)c->acct.gpus[2], (unsigned long long)ndev,
                        (unsigned long long)nfree, (unsigned long long)nmilli);
        goto done;
    }
    for (uint32_t m = 0; m < c->acct.nmodels; m++)
        if (mdev[m] != c->acct.models[m].devices || mfree[m] != c->acct.models[m].free_devices ||
            mmilli[m] != c->acct.models[m].free_milli) {
            err = as_diag_set(diag, AS_EINTERNAL, NULL,
                              "GPU model %s: %llu devices, %llu free, %llu milli free counted, its "
                              "nodes hold %llu, %llu, %llu",
                              c->acct.models[m].name, (unsigned long long)c->acct.models[m].devices,
                              (unsigned long long)c->acct.models[m].free_devices,
                              (unsigned long long)c->acct.models[m].free_milli,
                              (unsigned long long)mdev[m], (unsigned long long)mfree[m],
                              (unsigned long long)mmilli[m]);
            break;
        }
done:
    pthread_mutex_unlock(&c->wmu);
    return err;
}
