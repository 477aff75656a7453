/* cache_acct.c - how the cache charges pods to nodes (see cache_acct.h). */
#include "cache_acct.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agentsched/core/gpu.h"

/* Device d's usage on n (the writer mutex orders it; readers may load it
 * concurrently, hence atomic). */
static inline int32_t gpu_used(const cache_acct_node *n, int d)
{
    return __atomic_load_n(&n->gpu_used[d], __ATOMIC_RELAXED);
}

/* usage_apply adds (sign > 0) or removes the pod's usage on n. An increase
 * bumps bind_version last; a decrease only generation (it can only make
 * more pods fit, so earlier fit decisions stay valid). */
static void usage_apply(cache_acct *a, cache_acct_node *n, const pentry *e, int sign)
{
    int64_t *requested = n->requested;
    int32_t *used = n->gpu_used;
    int k = 0;
    for (uint32_t m = e->req_mask; m; m &= m - 1) {
        int r = __builtin_ctz(m);
        __atomic_add_fetch(&requested[r], sign * e->req[k++], __ATOMIC_RELAXED);
    }
    for (uint32_t m = e->gpu_devices; m; m &= m - 1) {
        int d = __builtin_ctz(m);
        __atomic_add_fetch(&used[d], sign * e->gpu_milli, __ATOMIC_RELAXED);
    }
    if (e->containers_cpu)
        __atomic_add_fetch(n->containers_cpu, sign * e->containers_cpu, __ATOMIC_RELAXED);
    if (e->gpu_devices)
        devices_note(a, n, false);
    bump_generation(n);
    if (sign > 0)
        bump_bind_version(n);
    log_node(a, n);
}

/* See cache_acct.h. */
uint32_t cache_acct_pick_devices(const cache_acct_node *n, const pentry *e)
{
    uint32_t ngpus = *n->ngpus;
    if (!e->gpu_count || !ngpus)
        return 0;
    uint32_t dev = 0;
    if (gpu_choose(e->gpu_count, (uint32_t)e->gpu_milli, n->gpu_used, ngpus, &dev))
        return dev;
    dev = 0;
    for (uint32_t k = 0; k < e->gpu_count && k < ngpus; k++) {
        int best = -1;
        for (uint32_t d = 0; d < ngpus; d++) {
            if (dev & (1u << d))
                continue;
            if (best < 0 || gpu_used(n, (int)d) < gpu_used(n, best))
                best = (int)d;
        }
        dev |= 1u << best;
    }
    return dev;
}

/* See cache_acct.h. */
bool cache_acct_devices_valid(const cache_acct_node *n, const pentry *e)
{
    uint32_t ngpus = *n->ngpus;
    if (!e->gpu_devices || (ngpus < 32 && (e->gpu_devices >> ngpus) != 0) ||
        (uint32_t)__builtin_popcount(e->gpu_devices) != e->gpu_count)
        return false;
    for (uint32_t m = e->gpu_devices; m; m &= m - 1)
        if (gpu_used(n, __builtin_ctz(m)) + e->gpu_milli > MODEL_GPU_MILLI)
            return false;
    return true;
}

static void rec_link(prec *r, pentry *e)
{
    e->rec = r;
    e->prev = NULL;
    e->next = r->pods;
    if (r->pods)
        r->pods->prev = e;
    r->pods = e;
    r->npods++;
}

static void rec_unlink(pentry *e)
{
    prec *r = e->rec;
    if (e->prev)
        e->prev->next = e->next;
    else
        r->pods = e->next;
    if (e->next)
        e->next->prev = e->prev;
    r->npods--;
    e->rec = NULL;
    e->next = e->prev = NULL;
}

static void assumed_link(cache_acct *a, pentry *e)
{
    e->aprev = NULL;
    e->anext = a->assumed;
    if (a->assumed)
        a->assumed->aprev = e;
    a->assumed = e;
}

/* See cache_acct.h. */
void cache_acct_assumed_unlink(cache_acct *a, pentry *e)
{
    if (e->aprev)
        e->aprev->anext = e->anext;
    else
        a->assumed = e->anext;
    if (e->anext)
        e->anext->aprev = e->aprev;
    e->anext = e->aprev = NULL;
}

/* See cache_acct.h. */
prec *cache_acct_rec_get(cache_acct *a, const char *name, size_t len, bool create)
{
    prec *r = table_get(&a->recs, name, len);
    if (r || !create)
        return r;
    r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->name = strndup(name, len);
    r->len = len;
    if (!r->name || table_put(&a->recs, r->name, len, r) != AS_OK) {
        free(r->name);
        free(r);
        return NULL;
    }
    return r;
}

/* See cache_acct.h. */
void cache_acct_rec_maybe_free(cache_acct *a, prec *r)
{
    if (r->node || r->pods)
        return;
    table_del(&a->recs, r->name, r->len);
    free(r->name);
    free(r);
}

/* See cache_acct.h. */
pentry *cache_acct_entry_new(const char *uid, size_t uid_len, const model_pod *pod)
{
    uint32_t mask = 0;
    int nreq = 0;
    for (int r = 0; r < MODEL_MAX_RES; r++)
        if (r == MODEL_RES_PODS || pod->req.v[r] != 0) {
            mask |= 1u << r;
            nreq++;
        }
    const char *ns = pod->ns ? pod->ns : "default";
    const char *name = pod->name ? pod->name : "";
    size_t ns_len = strlen(ns), name_len = strlen(name);
    size_t key_len = ns_len + 1 + name_len;
    size_t size = sizeof(pentry) + (size_t)nreq * sizeof(int64_t) + uid_len + 1 + key_len + 1;
    pentry *e = calloc(1, size);
    if (!e)
        return NULL;
    e->req_mask = mask;
    e->nreq = (uint8_t)nreq;
    e->digest = pod->digest;
    int k = 0;
    for (int r = 0; r < MODEL_MAX_RES; r++)
        if (mask & (1u << r))
            e->req[k++] = r == MODEL_RES_PODS ? 1 : pod->req.v[r];
    e->uid = (char *)&e->req[nreq];
    memcpy(e->uid, uid, uid_len);
    e->uid[uid_len] = '\0';
    e->key = e->uid + uid_len + 1;
    /* "ns/name", put together without printf: every pod assumed comes here */
    memcpy(e->key, ns, ns_len);
    e->key[ns_len] = '/';
    memcpy(e->key + ns_len + 1, name, name_len);
    e->key[key_len] = '\0';
    e->containers_cpu = pod->mirror ? 0 : pod->containers_cpu;
    e->gpu_count = (uint16_t)(pod->gpu_count > MODEL_MAX_GPUS ? MODEL_MAX_GPUS : pod->gpu_count);
    e->gpu_milli = (int32_t)(pod->gpu_milli > MODEL_GPU_MILLI ? MODEL_GPU_MILLI : pod->gpu_milli);
    return e;
}

/* See cache_acct.h. */
bool cache_acct_same_request(const pentry *e, const model_pod *pod)
{
    int k = 0;
    for (int r = 0; r < MODEL_MAX_RES; r++) {
        bool in = (e->req_mask >> r) & 1;
        int64_t want = r == MODEL_RES_PODS ? 1 : pod->req.v[r];
        if (in ? e->req[k++] != want : want != 0)
            return false;
    }
    return e->gpu_count == pod->gpu_count && (uint32_t)e->gpu_milli == pod->gpu_milli &&
           e->containers_cpu == (pod->mirror ? 0 : pod->containers_cpu);
}

/* by_size orders GPU pods largest first: more devices, then larger shares,
 * then by uid (a placement that does not depend on arrival order). */
static int by_size(const void *x, const void *y)
{
    const pentry *a = *(const pentry *const *)x, *b = *(const pentry *const *)y;
    if (a->gpu_count != b->gpu_count)
        return a->gpu_count > b->gpu_count ? -1 : 1;
    if (a->gpu_milli != b->gpu_milli)
        return a->gpu_milli > b->gpu_milli ? -1 : 1;
    return strcmp(a->uid, b->uid);
}

/* repack re-places every GPU pod charged on r's node best fit, largest
 * first, when that places each one within its devices' capacity; else it
 * leaves the placement as it is. Pinned pods (their devices from their
 * annotation) stay where they are and are charged first. Called when a bound pod found no device
 * set that holds it: a best-fit pass in arrival order (a restart lists
 * pods by name) can strand a share that a packing in size order places
 * (250 x 4 then 600 x 4 on four devices stacks the 250s on one device
 * and leaves the last 600 nowhere). Every pod of r must be charged. */
static void repack(cache_acct *a, prec *r)
{
    cache_acct_node *n = r->node;
    uint32_t ngpus = n ? *n->ngpus : 0;
    if (ngpus > MODEL_MAX_GPUS)
        ngpus = MODEL_MAX_GPUS;
    size_t k = 0;
    for (pentry *e = r->pods; e; e = e->next)
        k += e->gpu_count != 0 && !e->gpu_pinned;
    if (!ngpus || !k)
        return;
    pentry **v = malloc(k * sizeof *v);
    uint32_t *dev = malloc(k * sizeof *dev);
    if (!v || !dev)
        goto done; /* keep the placement: counted, only less well packed */
    int32_t want[MODEL_MAX_GPUS];
    memset(want, 0, sizeof want);
    k = 0;
    for (pentry *e = r->pods; e; e = e->next)
        if (e->gpu_count && !e->gpu_pinned)
            v[k++] = e;
        else if (e->gpu_count)
            for (uint32_t m = e->gpu_devices; m; m &= m - 1)
                if ((uint32_t)__builtin_ctz(m) < ngpus)
                    want[__builtin_ctz(m)] += e->gpu_milli;
    qsort(v, k, sizeof *v, by_size);
    for (size_t i = 0; i < k; i++) {
        if (!gpu_choose(v[i]->gpu_count, (uint32_t)v[i]->gpu_milli, want, ngpus, &dev[i]))
            goto done;
        for (uint32_t m = dev[i]; m; m &= m - 1)
            want[__builtin_ctz(m)] += v[i]->gpu_milli;
    }
    /* Devices that gain first, then the bind version (a pod that fitted
     * may not any more), then those that lose (more pods fit). */
    int32_t *used = n->gpu_used;
    for (uint32_t d = 0; d < ngpus; d++)
        if (want[d] > gpu_used(n, (int)d))
            __atomic_store_n(&used[d], want[d], __ATOMIC_RELAXED);
    for (size_t i = 0; i < k; i++)
        v[i]->gpu_devices = dev[i];
    bump_generation(n);
    bump_bind_version(n);
    for (uint32_t d = 0; d < ngpus; d++)
        if (want[d] < gpu_used(n, (int)d))
            __atomic_store_n(&used[d], want[d], __ATOMIC_RELAXED);
    devices_note(a, n, false);
    bump_generation(n);
    log_node(a, n);
done:
    free(dev);
    free(v);
}

/* attach is cache_acct_attach; *stranded is set when e's devices had to
 * be re-picked and no set held it (it went to the least used). */
static void attach(cache_acct *a, pentry *e, bool choose_devices, bool *stranded)
{
    cache_acct_node *n = e->rec->node;
    if (!n) {
        a->pods_detached++;
        return;
    }
    if (choose_devices && !e->gpu_pinned && !cache_acct_devices_valid(n, e)) {
        e->gpu_devices = cache_acct_pick_devices(n, e);
        if (e->gpu_devices && !cache_acct_devices_valid(n, e))
            *stranded = true;
    }
    usage_apply(a, n, e, +1);
}

/* See cache_acct.h. */
void cache_acct_attach(cache_acct *a, pentry *e, bool choose_devices)
{
    bool stranded = false;
    attach(a, e, choose_devices, &stranded);
    if (stranded)
        repack(a, e->rec);
}

static void detach_usage(cache_acct *a, pentry *e)
{
    cache_acct_node *n = e->rec->node;
    if (!n) {
        a->pods_detached--;
        return;
    }
    usage_apply(a, n, e, -1);
}

/* See cache_acct.h. */
void cache_acct_drop(cache_acct *a, pentry *e)
{
    prec *r = e->rec;
    detach_usage(a, e);
    rec_unlink(e);
    if (e->state == CACHE_ACCT_ASSUMED) {
        cache_acct_assumed_unlink(a, e);
        a->pods_assumed--;
    } else {
        a->pods_bound--;
    }
    table_del(&a->pods, e->uid, strlen(e->uid));
    free(e);
    cache_acct_rec_maybe_free(a, r);
}

/* See cache_acct.h. */
as_err cache_acct_insert(cache_acct *a, pentry *e, const char *node, size_t node_len,
                         cache_acct_state state, bool choose_devices)
{
    prec *r = cache_acct_rec_get(a, node, node_len, true);
    if (!r)
        return AS_ENOMEM;
    if (table_put(&a->pods, e->uid, strlen(e->uid), e) != AS_OK) {
        cache_acct_rec_maybe_free(a, r);
        return AS_ENOMEM;
    }
    e->state = (uint8_t)state;
    e->epoch = a->epoch;
    rec_link(r, e);
    if (state == CACHE_ACCT_ASSUMED) {
        assumed_link(a, e);
        a->pods_assumed++;
    } else {
        a->pods_bound++;
    }
    cache_acct_attach(a, e, choose_devices);
    return AS_OK;
}

/* See cache_acct.h. */
void cache_acct_free(cache_acct *a)
{
    for (size_t i = 0; i < a->pods.cap; i++)
        if (a->pods.t[i].k)
            free(a->pods.t[i].v);
    for (size_t i = 0; i < a->recs.cap; i++)
        if (a->recs.t[i].k) {
            prec *r = a->recs.t[i].v;
            free(r->name);
            free(r);
        }
    table_free(&a->recs);
    table_free(&a->pods);
}

/* See cache_acct.h. */
void cache_acct_confirm(cache_acct *a, pentry *e)
{
    if (e->state == CACHE_ACCT_ASSUMED) {
        cache_acct_assumed_unlink(a, e);
        a->pods_assumed--;
        a->pods_bound++;
        e->state = CACHE_ACCT_BOUND;
    }
    e->epoch = a->epoch;
}

/* See cache_acct.h. */
void cache_acct_node_attach(cache_acct *a, prec *r, cache_acct_node *n)
{
    r->node = n;
    bool stranded = false;
    /* Readers may see usage grow; that is conservative and bumps
     * bind_version. Two passes: pods whose previous devices are still
     * valid keep them (pass 0, with every pod that needs no device); the
     * others are cleared and re-picked afterwards (pass 1), so a re-picked
     * pod cannot take a keeper's place. A re-picked pod that no device set
     * holds has every pod of the node re-placed, largest first. */
    for (int pass = 0; pass < 2; pass++)
        for (pentry *e = r->pods; e; e = e->next) {
            bool needs_device = e->gpu_count && *n->ngpus;
            if (pass == 0) {
                if (needs_device && !e->gpu_pinned && !cache_acct_devices_valid(n, e)) {
                    e->gpu_devices = 0;
                    continue;
                }
                if (!needs_device)
                    e->gpu_devices = 0;
            } else if (!needs_device || e->gpu_devices) {
                continue;
            }
            a->pods_detached--;
            attach(a, e, pass == 1, &stranded);
        }
    if (stranded)
        repack(a, r);
    devices_note(a, n, false);
}

/* See cache_acct.h. */
void cache_acct_node_detach(cache_acct *a, prec *r)
{
    devices_note(a, r->node, true);
    r->node = NULL;
    a->pods_detached += r->npods;
}

/* See cache_acct.h. */
void cache_acct_replace_devices(cache_acct *a, prec *r)
{
    cache_acct_node *n = r->node;
    int32_t *used = n->gpu_used;
    for (int d = 0; d < MODEL_MAX_GPUS; d++)
        __atomic_store_n(&used[d], 0, __ATOMIC_RELAXED);
    /* Pass 0 keeps every still-valid placement and clears the others; pass
     * 1 re-picks the cleared ones. */
    for (int pass = 0; pass < 2; pass++)
        for (pentry *e = r->pods; e; e = e->next) {
            if (!e->gpu_count)
                continue;
            if (pass == 0 && !e->gpu_pinned && !cache_acct_devices_valid(n, e)) {
                e->gpu_devices = 0;
                continue;
            }
            if (pass == 1) {
                if (e->gpu_devices)
                    continue;
                e->gpu_devices = cache_acct_pick_devices(n, e);
            }
            for (uint32_t m = e->gpu_devices; m; m &= m - 1)
                __atomic_add_fetch(&used[__builtin_ctz(m)], e->gpu_milli, __ATOMIC_RELAXED);
        }
    devices_note(a, n, false);
}

/* See cache_acct.h. */
size_t cache_acct_expire(cache_acct *a, int64_t now_ms, int64_t ttl_ms)
{
    size_t count = 0;
    pentry *e = a->assumed;
    while (e) {
        pentry *next = e->anext;
        if (e->assumed_at_ms < now_ms - ttl_ms) {
            cache_acct_drop(a, e);
            count++;
        }
        e = next;
    }
    return count;
}

static bool stale(const pentry *e, uint64_t epoch)
{
    return e && e->state == CACHE_ACCT_BOUND && e->epoch < epoch;
}

/* See cache_acct.h. */
as_err cache_acct_drop_stale(cache_acct *a, uint64_t epoch, size_t *n)
{
    /* Collected first: dropping while walking the index would move
     * entries under the walk. */
    size_t ngone = 0;
    *n = 0;
    for (size_t i = 0; i < a->pods.cap; i++)
        if (stale(a->pods.t[i].k ? a->pods.t[i].v : NULL, epoch))
            ngone++;
    if (!ngone)
        return AS_OK;
    pentry **gone = malloc(ngone * sizeof *gone);
    if (!gone)
        return AS_ENOMEM;
    size_t k = 0;
    for (size_t i = 0; i < a->pods.cap; i++) {
        pentry *e = a->pods.t[i].k ? a->pods.t[i].v : NULL;
        if (stale(e, epoch))
            gone[k++] = e;
    }
    for (size_t i = 0; i < ngone; i++)
        cache_acct_drop(a, gone[i]);
    free(gone);
    *n = ngone;
    return AS_OK;
}
