/*
 * binder.c - versioned binder on top of cache_assume_if, plus the memo of
 * pods evaluated by filter/prioritize for the extender `bind` verb.
 *
 * The memo is a chained hash uid -> note with an LRU list (oldest first)
 * under one mutex. A bind takes its note out of the memo while it commits,
 * so the pod it borrows cannot be freed under it by a concurrent
 * replacement or eviction.
 */
#include "agentsched/core/binder.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agentsched/base/clock.h"
#include "agentsched/base/hash.h"
#include "agentsched/core/pred.h"

/* A noted candidate: the node incarnation evaluated and its bind version
 * then. No name: the bind verb resolves the node it is asked for and
 * matches the incarnation, so a note never points into a node spec. */
typedef struct note_cand {
    uint64_t node_id;
    uint64_t bind_version;
} note_cand;

/* One allocation per note: the header, n candidates, then the uid. A
 * kube-scheduler that binds itself (no bindVerb) leaves every filtered pod
 * noted until the caps evict it, so the memo is usually full: its
 * footprint is the notes' size times memo_max_pods. */
typedef struct note {
    struct note *hnext;         /* hash chain */
    struct note *older, *newer; /* LRU list */
    uint64_t h;
    model_pod *pod;  /* owned */
    const char *uid; /* in this allocation, after cands */
    int64_t at_ms;
    size_t bytes; /* what the note holds, for the memo's byte cap */
    uint32_t n;
    note_cand cands[];
} note;

struct binder {
    cache *c;
    binder_config cfg;
    pthread_mutex_t mu;
    note **buckets;
    size_t nbuckets; /* power of two */
    size_t count, bytes;
    note *oldest, *newest;
    binder_stats st; /* updated with atomics */
};

static void stat_inc(uint64_t *v)
{
    __atomic_add_fetch(v, 1, __ATOMIC_RELAXED);
}

/* See binder.h. */
as_err binder_new(cache *c, const binder_config *cfg, binder **out)
{
    *out = NULL;
    binder *b = calloc(1, sizeof *b);
    if (!b)
        return AS_ENOMEM;
    b->c = c;
    b->cfg.memo_max_pods = cfg && cfg->memo_max_pods ? cfg->memo_max_pods : 16384;
    b->cfg.memo_ttl_ms = cfg && cfg->memo_ttl_ms > 0 ? cfg->memo_ttl_ms : 120000;
    b->cfg.memo_max_bytes =
        cfg && cfg->memo_max_bytes ? cfg->memo_max_bytes : BINDER_MEMO_DEFAULT_BYTES;
    b->nbuckets = 64;
    while (b->nbuckets < b->cfg.memo_max_pods && b->nbuckets < ((size_t)1 << 20))
        b->nbuckets <<= 1;
    b->buckets = calloc(b->nbuckets, sizeof *b->buckets);
    if (!b->buckets) {
        free(b);
        return AS_ENOMEM;
    }
    pthread_mutex_init(&b->mu, NULL);
    *out = b;
    return AS_OK;
}

static void note_free(note *n)
{
    if (!n)
        return;
    model_pod_free(n->pod);
    free(n);
}

/* See binder.h. */
void binder_free(binder *b)
{
    if (!b)
        return;
    note *n = b->oldest;
    while (n) {
        note *next = n->newer;
        note_free(n);
        n = next;
    }
    free(b->buckets);
    pthread_mutex_destroy(&b->mu);
    free(b);
}

/* ---- memo (b->mu held) ------------------------------------------- */

static note *memo_find(binder *b, const char *uid, uint64_t h)
{
    for (note *n = b->buckets[h & (b->nbuckets - 1)]; n; n = n->hnext)
        if (n->h == h && strcmp(n->uid, uid) == 0)
            return n;
    return NULL;
}

static void memo_unlink(binder *b, note *n)
{
    note **pp = &b->buckets[n->h & (b->nbuckets - 1)];
    while (*pp != n)
        pp = &(*pp)->hnext;
    *pp = n->hnext;
    if (n->older)
        n->older->newer = n->newer;
    else
        b->oldest = n->newer;
    if (n->newer)
        n->newer->older = n->older;
    else
        b->newest = n->older;
    n->hnext = n->older = n->newer = NULL;
    b->count--;
    b->bytes -= n->bytes;
}

static void memo_link(binder *b, note *n)
{
    note **head = &b->buckets[n->h & (b->nbuckets - 1)];
    n->hnext = *head;
    *head = n;
    n->older = b->newest;
    n->newer = NULL;
    if (b->newest)
        b->newest->newer = n;
    else
        b->oldest = n;
    b->newest = n;
    b->count++;
    b->bytes += n->bytes;
}

/* memo_evict drops expired notes and the oldest beyond the caps, making
 * room for `room` more notes of `bytes` in all; returns a chain (through
 * hnext) to free outside the lock. */
static note *memo_evict(binder *b, int64_t now, size_t room, size_t bytes)
{
    note *dead = NULL;
    while (b->oldest &&
           (b->count + room > b->cfg.memo_max_pods || b->bytes + bytes > b->cfg.memo_max_bytes ||
            b->oldest->at_ms < now - b->cfg.memo_ttl_ms)) {
        note *n = b->oldest;
        memo_unlink(b, n);
        n->hnext = dead;
        dead = n;
    }
    return dead;
}

static void free_chain(note *n)
{
    while (n) {
        note *next = n->hnext;
        note_free(n);
        n = next;
    }
}

/* See binder.h. */
as_err binder_note(binder *b, model_pod *pod, const sched_candidate *cands, size_t n)
{
    if (!pod)
        return AS_EINVAL;
    if (n > SCHED_MAX_K)
        n = SCHED_MAX_K;
    char tmp[MODEL_NAMESPACE_MAX + MODEL_POD_NAME_MAX + 2];
    size_t ulen;
    const char *uid = model_pod_key(pod, tmp, sizeof tmp, &ulen);
    size_t size = sizeof(note) + n * sizeof(note_cand) + ulen + 1;
    size_t bytes = size + pool_footprint(pod->pool);
    if (bytes > b->cfg.memo_max_bytes / 4) {
        /* One pod may not take the memo over (a hostile filter body with a
         * huge pod, each with a new uid, would hold it all). Unnoted, its
         * bind fetches the pod from the API server (live mode) or is
         * refused as unfiltered. */
        model_pod_free(pod);
        return AS_ETOOBIG;
    }
    note *nt = malloc(size);
    if (!nt) {
        model_pod_free(pod);
        return AS_ENOMEM;
    }
    memset(nt, 0, sizeof *nt);
    nt->pod = pod;
    nt->n = (uint32_t)n;
    for (size_t i = 0; i < n; i++)
        nt->cands[i] = (note_cand){cands[i].node_id, cands[i].bind_version};
    char *u = (char *)&nt->cands[n];
    memcpy(u, uid, ulen + 1);
    nt->uid = u;
    nt->h = hash_str(u);
    nt->at_ms = clock_mono_ms();
    nt->bytes = bytes;

    pthread_mutex_lock(&b->mu);
    note *old = memo_find(b, nt->uid, nt->h);
    if (old)
        memo_unlink(b, old);
    note *dead = memo_evict(b, nt->at_ms, 1, nt->bytes);
    memo_link(b, nt);
    pthread_mutex_unlock(&b->mu);
    note_free(old);
    free_chain(dead);
    return AS_OK;
}

/* See binder.h. */
bool binder_noted_key(binder *b, const char *uid, char *key, size_t keylen)
{
    return binder_noted_pod(b, uid, key, keylen, NULL, 0);
}

/* See binder.h. */
bool binder_noted_pod(binder *b, const char *uid, char *key, size_t keylen, char *sched,
                      size_t schedlen)
{
    if (!uid)
        return false;
    uint64_t h = hash_str(uid);
    pthread_mutex_lock(&b->mu);
    note *n = memo_find(b, uid, h);
    bool found = n && n->at_ms >= clock_mono_ms() - b->cfg.memo_ttl_ms;
    if (found && key && keylen)
        snprintf(key, keylen, "%s/%s", n->pod->ns ? n->pod->ns : "default",
                 n->pod->name ? n->pod->name : "");
    if (found && sched && schedlen)
        snprintf(sched, schedlen, "%s", n->pod->scheduler_name ? n->pod->scheduler_name : "");
    pthread_mutex_unlock(&b->mu);
    return found;
}

/* ---- commit ------------------------------------------------------- */

typedef struct fit_ctx {
    binder *b;
    pred_result last;
    char node[256]; /* name of the node re-checked (copied while stable) */
    char why[160];  /* rendered reason of the last refusal */
} fit_ctx;

/* copy_name copies s (NULL: "") into dst[0..cap), cut to fit and always
 * terminated (cap > 0); a memcpy, as it runs for every pod committed. */
static void copy_name(char *dst, size_t cap, const char *s)
{
    size_t n = s ? strnlen(s, cap - 1) : 0;
    if (n)
        memcpy(dst, s, n);
    dst[n] = '\0';
}

/* Re-check under the cache's writer mutex: every predicate against the
 * node's current spec and usage, then the GPU devices to take. */
static bool fit_now(void *arg, const model_pod *pod, const cache_node *node, uint32_t *devices)
{
    fit_ctx *f = arg;
    cache *c = f->b->c;
    copy_name(f->node, sizeof f->node, node->spec->name);
    f->last = pred_check(cache_registry(c), cache_get_shard_mode(c), pod, node);
    if (f->last.code == PRED_OK && !pred_gpu_choose(pod, node, devices))
        f->last = (pred_result){PRED_INSUFFICIENT_GPU, 0};
    if (f->last.code == PRED_OK)
        return true;
    pred_reason(cache_registry(c), node, pod, f->last, f->why, sizeof f->why);
    return false;
}

/* See binder.h. */
as_err binder_commit(binder *b, const model_pod *pod, const sched_candidate *cands, size_t n,
                     binder_outcome *out)
{
    memset(out, 0, sizeof *out);
    out->chosen = -1;
    if (!pod || (n && !cands))
        return AS_EINVAL;
    for (size_t i = 0; i < n; i++) {
        fit_ctx f = {b, {PRED_OK, 0}, "", ""};
        cache_assume_result res;
        uint32_t dev = 0;
        as_err err = cache_assume_if(b->c, pod, cands[i].slot, cands[i].node_id,
                                     cands[i].bind_version, fit_now, &f, &res, &dev);
        if (err != AS_OK)
            return err;
        switch (res) {
        case CACHE_ASSUME_FAST:
        case CACHE_ASSUME_RECHECKED:
        case CACHE_ASSUME_SAME_NODE: {
            out->chosen = (int)i;
            out->how = res == CACHE_ASSUME_FAST        ? BINDER_FAST
                       : res == CACHE_ASSUME_RECHECKED ? BINDER_RECHECKED
                                                       : BINDER_IDEMPOTENT;
            out->gpu_devices = dev;
            out->gpu_milli = dev ? (pod->gpu_milli ? pod->gpu_milli : MODEL_GPU_MILLI) : 0;
            copy_name(out->resource_version, sizeof out->resource_version, pod->resource_version);
            stat_inc(res == CACHE_ASSUME_FAST        ? &b->st.accepted_fast
                     : res == CACHE_ASSUME_RECHECKED ? &b->st.accepted_rechecked
                                                     : &b->st.idempotent);
            /* The candidate's name may dangle (the spec can be replaced
             * after evaluation); the cache has the authoritative copy. */
            cache_pod_info info;
            char tmp[600];
            cache_pod_lookup(b->c, model_pod_key(pod, tmp, sizeof tmp, NULL), &info);
            if (info.state != CACHE_POD_ABSENT)
                copy_name(out->node, sizeof out->node, info.node);
            else /* forgotten meanwhile; never read cands[i].name here */
                copy_name(out->node, sizeof out->node, f.node);
            return AS_OK;
        }
        case CACHE_ASSUME_OTHER_NODE: {
            cache_pod_info info;
            char tmp[600];
            cache_pod_lookup(b->c, model_pod_key(pod, tmp, sizeof tmp, NULL), &info);
            snprintf(out->reason, sizeof out->reason, "pod is already %s on node %s",
                     info.state == CACHE_POD_BOUND ? "bound" : "assumed", info.node);
            stat_inc(&b->st.conflicts);
            return AS_ECONFLICT;
        }
        case CACHE_ASSUME_NO_FIT:
            snprintf(out->reason, sizeof out->reason,
                     "node %s changed since it was evaluated and the pod no longer fits: %s",
                     f.node, f.why[0] ? f.why : "refused");
            stat_inc(&b->st.conflicts);
            break;
        case CACHE_ASSUME_NODE_GONE:
            /* cands[i].name died with that node's spec: do not read it */
            snprintf(out->reason, sizeof out->reason,
                     "candidate node %zu no longer exists (removed after evaluation)", i + 1);
            stat_inc(&b->st.conflicts);
            break;
        }
    }
    if (!n)
        snprintf(out->reason, sizeof out->reason, "no candidate nodes");
    stat_inc(&b->st.exhausted);
    return AS_ECONFLICT;
}

/* See binder.h. */
as_err binder_release(binder *b, const char *uid)
{
    stat_inc(&b->st.released);
    return cache_forget(b->c, uid);
}

/* See binder.h. */
as_err binder_bind_noted(binder *b, const char *uid, const char *node_name, binder_outcome *out)
{
    memset(out, 0, sizeof *out);
    out->chosen = -1;
    if (!uid || !node_name)
        return AS_EINVAL;
    uint64_t h = hash_str(uid);
    int64_t now = clock_mono_ms();
    pthread_mutex_lock(&b->mu);
    note *n = memo_find(b, uid, h);
    if (n)
        memo_unlink(b, n);
    pthread_mutex_unlock(&b->mu);
    if (n && n->at_ms < now - b->cfg.memo_ttl_ms) {
        note_free(n);
        n = NULL;
    }
    if (!n) {
        /* kube-scheduler retries a bind whose reply was lost: answer from
         * the cache when the pod already occupies a node. */
        cache_pod_info info;
        cache_pod_lookup(b->c, uid, &info);
        if (info.state == CACHE_POD_ABSENT) {
            snprintf(out->reason, sizeof out->reason,
                     "pod %s was not filtered by agentsched (or its note expired)", uid);
            return AS_ENOTFOUND;
        }
        if (strcmp(info.node, node_name) != 0) {
            snprintf(out->reason, sizeof out->reason, "pod is already %s on node %s",
                     info.state == CACHE_POD_BOUND ? "bound" : "assumed", info.node);
            stat_inc(&b->st.conflicts);
            return AS_ECONFLICT;
        }
        out->chosen = 0;
        out->how = BINDER_IDEMPOTENT;
        out->gpu_devices = info.gpu_devices;
        out->gpu_milli = info.gpu_devices ? (uint32_t)info.gpu_milli : 0;
        copy_name(out->node, sizeof out->node, info.node);
        stat_inc(&b->st.idempotent);
        return AS_OK;
    }

    /* The node asked for, as it is now; the version seen at evaluation
     * when that incarnation was a candidate, else 0, which never matches,
     * so the pod is always re-checked against the node's current state. */
    as_err err;
    sched_candidate cand = {0, 0, 0, 0, node_name};
    cache_read_lock(b->c);
    const cache_node *node = cache_node_find(b->c, node_name, strlen(node_name));
    if (node) {
        cand.slot = node->slot;
        cand.node_id = node->id;
    }
    cache_read_unlock(b->c);
    if (!node) {
        snprintf(out->reason, sizeof out->reason, "node %s is not in agentsched's node cache",
                 node_name);
        stat_inc(&b->st.conflicts);
        stat_inc(&b->st.exhausted);
        err = AS_ECONFLICT;
        goto put_back;
    }
    for (uint32_t i = 0; i < n->n; i++)
        if (n->cands[i].node_id == cand.node_id) {
            cand.bind_version = n->cands[i].bind_version;
            break;
        }
    err = binder_commit(b, n->pod, &cand, 1, out);
    if (err == AS_OK) {
        out->chosen = 0;
        note_free(n);
        return AS_OK;
    }
put_back:
    /* Keep the note for a retry unless a newer one arrived meanwhile. */
    pthread_mutex_lock(&b->mu);
    note *dead = NULL;
    if (!memo_find(b, uid, h)) {
        dead = memo_evict(b, now, 1, n->bytes);
        memo_link(b, n);
        n = NULL;
    }
    pthread_mutex_unlock(&b->mu);
    note_free(n);
    free_chain(dead);
    return err;
}

/* See binder.h. */
void binder_get_stats(binder *b, binder_stats *out)
{
    out->accepted_fast = __atomic_load_n(&b->st.accepted_fast, __ATOMIC_RELAXED);
    out->accepted_rechecked = __atomic_load_n(&b->st.accepted_rechecked, __ATOMIC_RELAXED);
    out->idempotent = __atomic_load_n(&b->st.idempotent, __ATOMIC_RELAXED);
    out->conflicts = __atomic_load_n(&b->st.conflicts, __ATOMIC_RELAXED);
    out->exhausted = __atomic_load_n(&b->st.exhausted, __ATOMIC_RELAXED);
    out->released = __atomic_load_n(&b->st.released, __ATOMIC_RELAXED);
}
