/*
 * eqcache.c - equivalence classes of pod shapes over the cache's change
 * log (see eqcache.h for the contract and cache.h CHANGE LOG).
 *
 * Per class (cap = power of two >= nodes):
 *   hit[s]   slot s's answer for a names decision, in one 16-byte entry:
 *            the bind_version loaded (acquire) before its usage was read,
 *            and its score (soft-shard bonus included), -1 when the node
 *            does not fit or the slot is empty (scores are never negative)
 *   tree[]   tournament tree of entries {score (+ soft-shard bonus), slot,
 *            IN flag (in-shard group; always set outside soft mode)}:
 *            tree[cap + s] is slot s's leaf (slot NONE when infeasible or
 *            empty); tree[j] = the better of tree[2j], tree[2j + 1];
 *            tree[1] is the best node. Order: IN first, score desc, name asc, which
 *            is sched.c's top-K order (soft mode: in-shard nodes first,
 *            out-of-shard ones only when no in-shard node fits).
 * Names are read from the node currently at the slot (under the cache read
 * lock), never stored: a slot whose node changed is in the log, so its
 * entry is re-evaluated in the same decision and intermediate comparisons
 * with it only ever read valid memory.
 */
#include "agentsched/core/eqcache.h"

#include <assert.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "agentsched/core/pred.h"
#include "agentsched/base/hash.h"
#include "agentsched/base/sync.h"

#define NONE UINT32_MAX
#define F_IN 1u

#define NBUCKETS        1024 /* class hash buckets (classes are capped far below) */
#define DOORKEEPER      1024 /* key hashes seen once (direct mapped) */
#define SCRATCH         8192 /* log entries consumed incrementally at most */
#define DEFAULT_CLASSES 256
#define DEFAULT_BYTES   ((size_t)256 << 20)

/* A tree entry: the node at `slot` with its score and flags (a leaf), or
 * the best leaf below (an inner node). Keys live in the tree so a path
 * update compares neighbouring memory, not two random slots. */
typedef struct eq_entry {
    double score;
    uint32_t slot; /* NONE: infeasible / empty */
    uint32_t flags;
} eq_entry;

/* What a names decision reads of a slot (hit[] above). */
typedef struct eq_hit {
    double score; /* -1: does not fit, or no node */
    uint64_t ver;
} eq_hit;

typedef struct eq_class {
    struct eq_class *hnext;               /* bucket chain (table mutex) */
    struct eq_class *lru_prev, *lru_next; /* (table mutex) */
    uint64_t hash;
    unsigned char *key; /* owned */
    size_t keylen;
    int pins; /* (atomic) deciders using it; incremented under the table mutex */

    /* Everything below. Exclusive to change the class (consume, top K:
     * it lifts winners off the tree); shared to read leaves (a names
     * decision over a class already at the log head). */
    pthread_rwlock_t rw;
    bool built;
    score_policy *pol; /* own reference */
    uint64_t gen;
    uint64_t devices; /* cache_gpu_devices_version when its scores read it, else 0 */
    int mode;
    int reg_n, gpu_res;
    uint64_t seq; /* change log consumed up to */
    uint32_t cap;
    eq_hit *hit;    /* cap */
    eq_entry *tree; /* 2 * cap */
    uint32_t nfeasible;
    size_t bytes;
} eq_class;

struct eqcache {
    cache *c;
    eqcache_config cfg;
    pthread_mutex_t mu; /* table, LRU, doorkeeper, byte count */
    eq_class *buckets[NBUCKETS];
    eq_class *lru_head, *lru_tail; /* head = most recently used */
    size_t nclasses;
    size_t bytes;
    uint64_t seen[DOORKEEPER];
    eqcache_stats st; /* counters: atomics */
};

/* ---- canonical key ---------------------------------------------------- */

typedef struct keybuf {
    unsigned char *b;
    size_t n, cap;
    bool over;
} keybuf;

static void kput(keybuf *k, const void *p, size_t n)
{
    if (k->over || n > k->cap - k->n) {
        k->over = true;
        return;
    }
    memcpy(k->b + k->n, p, n);
    k->n += n;
}

static void kput_u32(keybuf *k, uint32_t v)
{
    kput(k, &v, sizeof v);
}

static void kput_i64(keybuf *k, int64_t v)
{
    kput(k, &v, sizeof v);
}

/* Strings are length-prefixed so no two field sequences encode alike;
 * NULL and "" differ where the predicates tell them apart. */
static void kput_str(keybuf *k, const char *s)
{
    if (!s) {
        kput_u32(k, UINT32_MAX);
        return;
    }
    size_t n = strlen(s);
    kput_u32(k, (uint32_t)(n > UINT32_MAX - 1 ? UINT32_MAX - 1 : n));
    kput(k, s, n);
}

static void kput_sel(keybuf *k, const model_selector_req *r, uint32_t n)
{
    kput_u32(k, n);
    for (uint32_t i = 0; i < n; i++) {
        kput_str(k, r[i].key);
        kput_u32(k, (uint32_t)r[i].op);
        kput_i64(k, r[i].num);
        kput_u32(k, r[i].nvalues);
        for (uint32_t v = 0; v < r[i].nvalues; v++)
            kput_str(k, r[i].values[v]);
    }
}

/* pod_key encodes everything pred.c and score.c read from a pod. */
static void pod_key(const model_pod *pod, keybuf *k)
{
    for (int r = 0; r < MODEL_MAX_RES; r++)
        kput_i64(k, pod->req.v[r]);
    kput_u32(k, pod->req_mask);
    kput_str(k, pod->unknown_res);
    kput_u32(k, pod->gpu_count);
    kput_u32(k, pod->gpu_milli);
    kput_u32(k, pod->node_selector.n);
    for (uint32_t i = 0; i < pod->node_selector.n; i++) {
        kput_str(k, pod->node_selector.items[i].key);
        kput_str(k, pod->node_selector.items[i].value);
    }
    kput_u32(k, pod->affinity.present);
    kput_u32(k, pod->affinity.nterms);
    for (uint32_t t = 0; t < pod->affinity.nterms; t++) {
        const model_selector_term *term = &pod->affinity.terms[t];
        kput_sel(k, term->exprs, term->nexprs);
        kput_sel(k, term->fields, term->nfields);
    }
    kput_u32(k, pod->ntolerations);
    for (uint32_t i = 0; i < pod->ntolerations; i++) {
        const model_toleration *t = &pod->tolerations[i];
        kput_str(k, t->key);
        kput_str(k, t->value);
        kput_u32(k, (uint32_t)t->op);
        kput_u32(k, (uint32_t)t->effect);
    }
}

static uint64_t key_hash(const unsigned char *p, size_t n)
{
    uint64_t h = hash_bytes((const char *)p, n);
    return h ? h : 1; /* 0 marks an empty doorkeeper slot */
}

/* ---- lifecycle -------------------------------------------------------- */

/* See eqcache.h. */
void eqcache_config_defaults(eqcache_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->max_classes = DEFAULT_CLASSES;
    cfg->max_bytes = DEFAULT_BYTES;
}

/* See eqcache.h. */
as_err eqcache_new(cache *c, const eqcache_config *cfg, eqcache **out)
{
    *out = NULL;
    eqcache *e = calloc(1, sizeof *e);
    if (!e)
        return AS_ENOMEM;
    e->c = c;
    eqcache_config_defaults(&e->cfg);
    if (cfg) {
        if (cfg->max_classes)
            e->cfg.max_classes = cfg->max_classes;
        if (cfg->max_bytes)
            e->cfg.max_bytes = cfg->max_bytes;
        e->cfg.admit_first = cfg->admit_first;
    }
    sync_mutex_init_hot(&e->mu);
    *out = e;
    return AS_OK;
}

static void class_free_arrays(eq_class *k)
{
    free(k->hit);
    free(k->tree);
    k->hit = NULL;
    k->tree = NULL;
    k->cap = 0;
}

static void class_free(eq_class *k)
{
    class_free_arrays(k);
    if (k->pol)
        score_policy_unref(k->pol);
    pthread_rwlock_destroy(&k->rw);
    free(k->key);
    free(k);
}

/* See eqcache.h. */
void eqcache_free(eqcache *e)
{
    if (!e)
        return;
    for (eq_class *k = e->lru_head; k;) {
        eq_class *next = k->lru_next;
        class_free(k);
        k = next;
    }
    pthread_mutex_destroy(&e->mu);
    free(e);
}

/* ---- class table (table mutex held) ----------------------------------- */

static void lru_unlink(eqcache *e, eq_class *k)
{
    if (k->lru_prev)
        k->lru_prev->lru_next = k->lru_next;
    else
        e->lru_head = k->lru_next;
    if (k->lru_next)
        k->lru_next->lru_prev = k->lru_prev;
    else
        e->lru_tail = k->lru_prev;
    k->lru_prev = k->lru_next = NULL;
}

static void lru_push_front(eqcache *e, eq_class *k)
{
    k->lru_prev = NULL;
    k->lru_next = e->lru_head;
    if (e->lru_head)
        e->lru_head->lru_prev = k;
    e->lru_head = k;
    if (!e->lru_tail)
        e->lru_tail = k;
}

static void bucket_unlink(eqcache *e, eq_class *k)
{
    eq_class **pp = &e->buckets[k->hash & (NBUCKETS - 1)];
    while (*pp != k)
        pp = &(*pp)->hnext;
    *pp = k->hnext;
}

/* evict_one drops the least recently used class nobody is using; false
 * when every class is pinned. */
static bool evict_one(eqcache *e)
{
    for (eq_class *k = e->lru_tail; k; k = k->lru_prev) {
        if (__atomic_load_n(&k->pins, __ATOMIC_ACQUIRE))
            continue;
        lru_unlink(e, k);
        bucket_unlink(e, k);
        e->nclasses--;
        e->bytes -= k->bytes;
        class_free(k);
        __atomic_add_fetch(&e->st.evictions, 1, __ATOMIC_RELAXED);
        return true;
    }
    return false;
}

/* acquire_class finds or (when admitted) creates the class of key and pins
 * it; NULL means "decide without a class". */
static eq_class *acquire_class(eqcache *e, const unsigned char *key, size_t n, uint64_t h)
{
    eq_class *k = NULL;
    pthread_mutex_lock(&e->mu);
    for (k = e->buckets[h & (NBUCKETS - 1)]; k; k = k->hnext)
        if (k->hash == h && k->keylen == n && memcmp(k->key, key, n) == 0)
            break;
    if (!k) {
        uint64_t *seen = &e->seen[h & (DOORKEEPER - 1)];
        if (!e->cfg.admit_first && *seen != h) {
            *seen = h; /* first sighting: remember, decide without a class */
            goto done;
        }
        while (e->nclasses >= e->cfg.max_classes || e->bytes >= e->cfg.max_bytes)
            if (!evict_one(e))
                goto done; /* everything is in use: decide without a class */
        k = calloc(1, sizeof *k);
        unsigned char *kk = malloc(n ? n : 1);
        if (!k || !kk) {
            free(k);
            free(kk);
            k = NULL;
            goto done;
        }
        memcpy(kk, key, n);
        k->key = kk;
        k->keylen = n;
        k->hash = h;
        pthread_rwlockattr_t attr;
        pthread_rwlockattr_init(&attr);
        /* a stream of shared names decisions must not starve the one that
         * has to catch the class up */
        pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
        pthread_rwlock_init(&k->rw, &attr);
        pthread_rwlockattr_destroy(&attr);
        k->hnext = e->buckets[h & (NBUCKETS - 1)];
        e->buckets[h & (NBUCKETS - 1)] = k;
        e->nclasses++;
        *seen = 0;
    } else {
        lru_unlink(e, k);
    }
    lru_push_front(e, k);
    __atomic_add_fetch(&k->pins, 1, __ATOMIC_RELAXED);
done:
    pthread_mutex_unlock(&e->mu);
    return k;
}

static void release_class(eq_class *k)
{
    __atomic_sub_fetch(&k->pins, 1, __ATOMIC_RELEASE);
}

/* ---- evaluation (class mutex and cache read lock held) ---------------- */

typedef struct eval_ctx {
    eqcache *e;
    cache *c;
    eq_class *k;
    const model_registry *reg;
    const model_pod *pod;
    const score_policy *pol;
    cache_shard_mode mode;
    double bonus;
    size_t nnodes;
} eval_ctx;

static inline const char *slot_name(const eval_ctx *x, uint32_t s)
{
    const cache_node *n = cache_node_at(x->c, s);
    return n ? n->spec->name : "";
}

/* beats: is entry a strictly better candidate than entry b? */
static inline bool beats(const eval_ctx *x, const eq_entry *a, const eq_entry *b)
{
    if (a->slot == NONE)
        return false;
    if (b->slot == NONE)
        return true;
    uint32_t ia = a->flags & F_IN, ib = b->flags & F_IN;
    if (ia != ib)
        return ia != 0;
    if (a->score != b->score)
        return a->score > b->score;
    return strcmp(slot_name(x, a->slot), slot_name(x, b->slot)) < 0;
}

/* fix_path recomputes the winners above leaf s after its entry changed.
 * It stops early at a node whose winner is unchanged and is not s: the
 * nodes above see the same slot with the same entry. */
static inline void fix_path(const eval_ctx *x, uint32_t s)
{
    eq_entry *t = x->k->tree;
    for (uint32_t j = (x->k->cap + s) >> 1; j; j >>= 1) {
        const eq_entry *w = beats(x, &t[2 * j + 1], &t[2 * j]) ? &t[2 * j + 1] : &t[2 * j];
        if (w->slot == t[j].slot && w->slot != s)
            return;
        t[j] = *w;
    }
}

/* eval_slot re-evaluates slot s exactly as sched.c's eval_node and sets
 * its leaf (the caller fixes the tree). */
static void eval_slot(const eval_ctx *x, uint32_t s)
{
    eq_class *k = x->k;
    const cache_node *node = cache_node_at(x->c, s);
    eq_entry *leaf = &k->tree[k->cap + s];
    bool was = leaf->slot != NONE;
    *leaf = (eq_entry){0, NONE, 0};
    k->hit[s].score = -1;
    if (node) {
        /* Acquire the version before any usage read: the seqlock contract. */
        k->hit[s].ver = cache_node_bind_version(node);
        double sc;
        if (pred_check(x->reg, x->mode, x->pod, node).code == PRED_OK &&
            (sc = score_node(x->pol, x->pod, node)) != SCORE_KEPT) {
            bool in = x->mode == CACHE_SHARD_NONE || cache_node_in_shard(node);
            if (x->mode == CACHE_SHARD_SOFT && in)
                sc += x->bonus;
            *leaf = (eq_entry){sc, s, x->mode != CACHE_SHARD_SOFT || in ? F_IN : 0};
            k->hit[s].score = sc;
        }
    }
    bool now = leaf->slot != NONE;
    k->nfeasible += (uint32_t)now - (uint32_t)was;
}

static uint32_t pow2_at_least(size_t n)
{
    uint32_t p = 64;
    while (p < n)
        p <<= 1;
    return p;
}

/* rebuild evaluates every node; grows the arrays when the cluster outgrew
 * them. AS_ENOMEM leaves the class unbuilt. */
static as_err rebuild(eval_ctx *x)
{
    eq_class *k = x->k;
    size_t n = x->nnodes;
    if (!k->tree || n > k->cap) {
        uint32_t cap = pow2_at_least(n + n / 4);
        size_t bytes = (size_t)cap * (sizeof *k->hit + 2 * sizeof *k->tree);
        class_free_arrays(k);
        k->hit = malloc((size_t)cap * sizeof *k->hit);
        k->tree = malloc(2 * (size_t)cap * sizeof *k->tree);
        pthread_mutex_lock(&x->e->mu);
        x->e->bytes = x->e->bytes - k->bytes + (k->tree ? bytes : 0);
        k->bytes = k->tree ? bytes : 0;
        pthread_mutex_unlock(&x->e->mu);
        if (!k->hit || !k->tree) {
            class_free_arrays(k);
            pthread_mutex_lock(&x->e->mu);
            x->e->bytes -= k->bytes;
            k->bytes = 0;
            pthread_mutex_unlock(&x->e->mu);
            k->built = false;
            return AS_ENOMEM;
        }
        k->cap = cap;
    }
    k->nfeasible = 0;
    for (uint32_t s = 0; s < k->cap; s++) {
        k->tree[k->cap + s] = (eq_entry){0, NONE, 0};
        k->hit[s] = (eq_hit){-1, 0};
    }
    for (uint32_t s = 0; s < n; s++)
        eval_slot(x, s);
    for (uint32_t j = k->cap - 1; j; j--) {
        const eq_entry *l = &k->tree[2 * j], *r = &k->tree[2 * j + 1];
        k->tree[j] = beats(x, r, l) ? *r : *l;
    }
    k->built = true;
    __atomic_add_fetch(&x->e->st.rebuilds, 1, __ATOMIC_RELAXED);
    return AS_OK;
}

/* dedupe drops repeated slots from buf[0..n) in place (order is free:
 * every slot is re-evaluated once); returns the new length. A small
 * open-addressing set on the stack, cheaper than sorting. */
static size_t dedupe(uint32_t *buf, size_t n)
{
    if (n < 2)
        return n;
    uint32_t set[2 * SCRATCH];
    size_t cap = 4;
    while (cap < 2 * n)
        cap <<= 1;
    memset(set, 0xff, cap * sizeof set[0]);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t v = buf[i];
        size_t h = (v * 2654435761u) & (cap - 1);
        while (set[h] != NONE && set[h] != v)
            h = (h + 1) & (cap - 1);
        if (set[h] == v)
            continue;
        set[h] = v;
        buf[m++] = v;
    }
    return m;
}

/* class_gen: what the class's scores depend on besides the nodes: the
 * policy's table generation, and whether free GPU devices are short (a
 * cluster-wide state that changes no node, score_policy_devices_short). */
static uint64_t class_gen(const eval_ctx *x)
{
    return score_policy_generation(x->pol) << 1 | score_policy_devices_short(x->pol, x->c);
}

/* class_devices: the cache's device-count version where the policy's scores
 * read the counts (modelPressure: a node joining or leaving moves every
 * node of its model), else 0. */
static uint64_t class_devices(const eval_ctx *x)
{
    return score_policy_reads_device_counts(x->pol) ? cache_gpu_devices_version(x->c) : 0;
}

/* class_stale: the class cannot be brought up to date incrementally (not
 * built, or built for another policy, score-table generation, device
 * counts its scores read, shard mode, registry or a smaller cluster). */
static bool class_stale(const eval_ctx *x, uint64_t gen, uint64_t devices, int reg_n, int gpu_res)
{
    const eq_class *k = x->k;
    return !k->built || k->pol != x->pol || k->gen != gen || k->devices != devices ||
           k->mode != (int)x->mode || k->reg_n != reg_n || k->gpu_res != gpu_res ||
           x->nnodes > k->cap;
}

/* consume brings the class up to the log head: incrementally when it can,
 * else by a rebuild. *rebuilt says which. */
static as_err consume(eval_ctx *x, uint64_t head, bool *rebuilt)
{
    eq_class *k = x->k;
    eqcache *e = x->e;
    *rebuilt = false;
    uint64_t gen = class_gen(x), devices = class_devices(x);
    int reg_n = model_registry_count(x->reg);
    int gpu_res = __atomic_load_n(&x->reg->gpu_res, __ATOMIC_ACQUIRE);
    bool stale = class_stale(x, gen, devices, reg_n, gpu_res);
    uint64_t cnt = head - k->seq;
    if (!stale && cnt > x->nnodes / 2 + 64) {
        /* A rebuild costs about as much, and the log may have wrapped. */
        stale = true;
        __atomic_add_fetch(&e->st.rebuild_wrap, 1, __ATOMIC_RELAXED);
    } else if (stale) {
        __atomic_add_fetch(k->built ? &e->st.rebuild_other : &e->st.rebuild_new, 1,
                           __ATOMIC_RELAXED);
    }
    if (stale) {
        if (k->pol != x->pol) {
            if (k->pol)
                score_policy_unref(k->pol);
            k->pol = score_policy_ref((score_policy *)x->pol);
        }
        k->gen = gen;
        k->devices = devices;
        k->mode = (int)x->mode;
        k->reg_n = reg_n;
        k->gpu_res = gpu_res;
        as_err err = rebuild(x);
        if (err)
            return err;
        k->seq = head;
        *rebuilt = true;
        return AS_OK;
    }
    /* Chunk by chunk (a small stack buffer); each chunk is checked against
     * the ring wrapping when it is copied. Duplicates within a chunk (a pod
     * assumed then forgotten on one node) are evaluated once. */
    uint32_t buf[SCRATCH];
    uint64_t done = 0;
    for (uint64_t from = k->seq; from < head;) {
        size_t n = head - from > SCRATCH ? SCRATCH : (size_t)(head - from);
        if (!cache_log_read(x->c, from, n, buf)) {
            __atomic_add_fetch(&e->st.rebuild_wrap, 1, __ATOMIC_RELAXED);
            as_err err = rebuild(x);
            if (err)
                return err;
            k->seq = head;
            *rebuilt = true;
            return AS_OK;
        }
        size_t m = dedupe(buf, n);
        for (size_t i = 0; i < m; i++) {
            uint32_t s = buf[i];
            if (s >= k->cap)
                continue; /* a slot beyond the arrays: empty now */
            eval_slot(x, s);
            fix_path(x, s);
            done++;
        }
        from += n;
    }
    k->seq = head;
    if (done)
        __atomic_add_fetch(&e->st.reevaluated, done, __ATOMIC_RELAXED);
    return AS_OK;
}

/* top_k takes the best k off the tree (soft mode: only in-shard nodes when
 * the best is in shard) by removing each winner's leaf, then restores. */
static uint32_t top_k(const eval_ctx *x, uint32_t k, eq_entry *best)
{
    eq_class *c = x->k;
    uint32_t n = 0;
    while (n < k) {
        eq_entry w = c->tree[1];
        if (w.slot == NONE)
            break;
        if (n && (best[0].flags & F_IN) && !(w.flags & F_IN))
            break;
        best[n++] = w;
        c->tree[c->cap + w.slot].slot = NONE;
        fix_path(x, w.slot);
    }
    for (uint32_t i = n; i-- > 0;) {
        c->tree[c->cap + best[i].slot] = best[i];
        fix_path(x, best[i].slot);
    }
    return n;
}

/* ---- decisions ------------------------------------------------------- */

static as_err full_scan(eqcache *e, const score_policy *policy, const model_pod *pod, uint32_t k,
                        sched_result *out)
{
    sched_request req;
    memset(&req, 0, sizeof req);
    req.pod = pod;
    req.policy = policy;
    req.k = k;
    return sched_evaluate(e->c, &req, out);
}

/* class_for returns pod's class, acquired (release_class when done), or
 * NULL for a bypass (pod NULL: the caller cannot use a class): counted,
 * *how (may be NULL) set. */
static eq_class *class_for(eqcache *e, const model_pod *pod, eqcache_how *how)
{
    eq_class *cl = NULL;
    if (pod) {
        unsigned char kb[EQCACHE_MAX_KEY];
        keybuf key = {kb, 0, sizeof kb, false};
        pod_key(pod, &key);
        if (!key.over)
            cl = acquire_class(e, kb, key.n, key_hash(kb, key.n));
    }
    if (!cl) {
        __atomic_add_fetch(&e->st.bypass, 1, __ATOMIC_RELAXED);
        if (how)
            *how = EQCACHE_BYPASS;
    }
    return cl;
}

/* refresh reads what a decision takes from the cache into x (shard mode,
 * its bonus, node count): under the cache read lock. */
static void refresh(eval_ctx *x)
{
    x->mode = cache_get_shard_mode(x->c);
    x->bonus = x->mode == CACHE_SHARD_SOFT ? score_policy_soft_shard_bonus(x->pol) : 0;
    x->nnodes = cache_node_count(x->c);
}

/* catch_up brings x's class up to the change log's head: call under the
 * cache read lock, which also makes mode, bonus and node count current.
 * The head is loaded under that lock: every structural change before it
 * is in the log below it (cache.h CHANGE LOG). */
static as_err catch_up(eval_ctx *x, bool *rebuilt)
{
    refresh(x);
    return consume(x, cache_log_head(x->c), rebuilt);
}

/* is_current: under the cache read lock, whether x's class already stands
 * at the change log's head, so that catch_up would change nothing (then its
 * leaves may be read under the class's shared lock). Refreshes x as
 * catch_up does. */
static bool is_current(eval_ctx *x)
{
    refresh(x);
    int gpu_res = __atomic_load_n(&x->reg->gpu_res, __ATOMIC_ACQUIRE);
    return !class_stale(x, class_gen(x), class_devices(x), model_registry_count(x->reg), gpu_res) &&
           x->k->seq == cache_log_head(x->c);
}

/* count_answer counts an evaluation answered from a class. */
static void count_answer(eqcache *e, bool rebuilt, eqcache_how *how)
{
    if (!rebuilt)
        __atomic_add_fetch(&e->st.hits, 1, __ATOMIC_RELAXED);
    if (how)
        *how = rebuilt ? EQCACHE_REBUILT : EQCACHE_HIT;
}

/* See eqcache.h. */
as_err eqcache_evaluate(eqcache *e, score_policy *policy, const model_pod *pod, uint32_t k,
                        sched_result *out, eqcache_how *how)
{
    return eqcache_evaluate_ex(e, policy, pod, k, NULL, out, how);
}

/* See eqcache.h. */
as_err eqcache_evaluate_ex(eqcache *e, score_policy *policy, const model_pod *pod, uint32_t k,
                           const sched_request *bypass, sched_result *out, eqcache_how *how)
{
    if (k > SCHED_MAX_K)
        k = SCHED_MAX_K;
    eq_class *cl = class_for(e, k ? pod : NULL, how);
    if (!cl)
        return bypass ? sched_evaluate(e->c, bypass, out) : full_scan(e, policy, pod, k, out);

    sched_result_init(out);
    bool rebuilt = false;
    pthread_rwlock_wrlock(&cl->rw);
    cache_read_lock(e->c);
    eval_ctx x = {
        .e = e, .c = e->c, .k = cl, .reg = cache_registry(e->c), .pod = pod, .pol = policy};
    out->shard_revision = cache_shard_revision(e->c);
    as_err err = catch_up(&x, &rebuilt);
    if (err == AS_OK) {
        eq_entry best[SCHED_MAX_K];
        uint32_t n = top_k(&x, k, best);
        for (uint32_t i = 0; i < n; i++) {
            uint32_t s = best[i].slot;
            const cache_node *node = cache_node_at(e->c, s);
            out->cand[i] =
                (sched_candidate){s, node->id, cl->hit[s].ver, best[i].score, node->spec->name};
        }
        out->ncand = n;
        out->feasible = cl->nfeasible;
        out->evaluated = x.nnodes;
    }
    cache_read_unlock(e->c);
    pthread_rwlock_unlock(&cl->rw);
    release_class(cl);
    if (err)
        return err;
    count_answer(e, rebuilt, how);
    if (out->ncand == 0) {
        /* Rare: the reasons need every node's failure, which the class
         * does not keep. */
        sched_result_free(out);
        return full_scan(e, policy, pod, k, out);
    }
    return AS_OK;
}

/* The oracle sched_evaluate consults for eqcache_evaluate_names: the
 * class brought up to the log head under sched's read lock, then its
 * leaves. Under the class's shared lock (shared) the class may only be
 * read: prepare then refuses a class that is behind (behind), and the
 * decision is run again under the exclusive lock. */
typedef struct names_oracle {
    eval_ctx x;
    bool rebuilt;
    bool shared, behind;
} names_oracle;

static as_err names_prepare(void *arg)
{
    names_oracle *o = arg;
    if (o->shared) {
        o->behind = !is_current(&o->x);
        return o->behind ? AS_ECONFLICT : AS_OK;
    }
    return catch_up(&o->x, &o->rebuilt);
}

static void names_lookup_n(void *arg, const cache_node *const *nodes, size_t n, double *score,
                           uint64_t *version, uint8_t *fit)
{
    const eq_class *k = ((const names_oracle *)arg)->x.k;
    const eq_hit *hit = k->hit;
    uint32_t cap = k->cap, slot[SCHED_ORACLE_BLOCK];
    assert(n <= SCHED_ORACLE_BLOCK);
    /* first start loading every slot's entry, then read them */
    for (size_t i = 0; i < n; i++) {
        slot[i] = nodes[i] ? nodes[i]->slot : UINT32_MAX;
        if (slot[i] < cap)
            __builtin_prefetch(&hit[slot[i]]);
    }
    for (size_t i = 0; i < n; i++) {
        uint32_t s = slot[i];
        /* one that did not fit is evaluated by sched, for the reason */
        fit[i] = s < cap && hit[s].score >= 0;
        if (fit[i]) {
            score[i] = hit[s].score;
            version[i] = hit[s].ver;
        }
    }
}

/* See eqcache.h. */
as_err eqcache_evaluate_names(eqcache *e, score_policy *policy, const sched_request *req,
                              sched_result *out, eqcache_how *how)
{
    assert(req && req->policy == policy && !req->oracle);
    eq_class *cl = class_for(e, req->skip_filter ? NULL : req->pod, how);
    if (!cl)
        return sched_evaluate(e->c, req, out);
    names_oracle o = {.x = {.e = e,
                            .c = e->c,
                            .k = cl,
                            .reg = cache_registry(e->c),
                            .pod = req->pod,
                            .pol = policy}};
    sched_oracle oracle = {names_prepare, names_lookup_n, &o};
    sched_request r = *req;
    r.oracle = &oracle;
    /* Class lock before the read lock sched_evaluate takes (eqcache.h).
     * Shared: between cluster changes every extender call of one shape
     * only reads the class, and two HTTP threads would otherwise queue
     * behind each other for the whole decision. A class behind the log is
     * caught up under the exclusive lock alone (a few slots when binds
     * moved it), then read shared again; when changes keep outrunning
     * that, the decision is made under the exclusive lock. */
    as_err err = AS_OK;
    for (int attempt = 0;; attempt++) {
        o.shared = attempt < 3;
        o.behind = false;
        if (o.shared)
            pthread_rwlock_rdlock(&cl->rw);
        else
            pthread_rwlock_wrlock(&cl->rw);
        err = sched_evaluate(e->c, &r, out);
        if (!(err == AS_ECONFLICT && o.behind)) {
            pthread_rwlock_unlock(&cl->rw);
            break;
        }
        pthread_rwlock_unlock(&cl->rw);
        pthread_rwlock_wrlock(&cl->rw);
        cache_read_lock(e->c);
        bool rebuilt = false;
        err = catch_up(&o.x, &rebuilt);
        o.rebuilt = o.rebuilt || rebuilt;
        cache_read_unlock(e->c);
        pthread_rwlock_unlock(&cl->rw);
        if (err)
            break;
    }
    release_class(cl);
    if (err)
        return err;
    count_answer(e, o.rebuilt, how);
    return AS_OK;
}

/* See eqcache.h. */
void eqcache_get_stats(eqcache *e, eqcache_stats *out)
{
    out->hits = __atomic_load_n(&e->st.hits, __ATOMIC_RELAXED);
    out->rebuilds = __atomic_load_n(&e->st.rebuilds, __ATOMIC_RELAXED);
    out->rebuild_new = __atomic_load_n(&e->st.rebuild_new, __ATOMIC_RELAXED);
    out->rebuild_wrap = __atomic_load_n(&e->st.rebuild_wrap, __ATOMIC_RELAXED);
    out->rebuild_other = __atomic_load_n(&e->st.rebuild_other, __ATOMIC_RELAXED);
    out->bypass = __atomic_load_n(&e->st.bypass, __ATOMIC_RELAXED);
    out->evictions = __atomic_load_n(&e->st.evictions, __ATOMIC_RELAXED);
    out->reevaluated = __atomic_load_n(&e->st.reevaluated, __ATOMIC_RELAXED);
    pthread_mutex_lock(&e->mu);
    out->classes = e->nclasses;
    out->bytes = e->bytes;
    pthread_mutex_unlock(&e->mu);
}
