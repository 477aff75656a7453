/* cache_acct.c - how the cache charges pods to nodes (see cache_acct.h). */
#include "cache_acct.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agentsched/core/gpu.h"

/* usage_apply adds (sign > 0) or removes the pod's usage on n. An increase
 * bumps bind_version last; a decrease only generation (it can only make
 * more pods fit, so earlier fit decisions stay valid). */
static void usage_apply(cnode *n, const pentry *e, int sign)
{
    int k = 0;
    for (uint32_t m = e->req_mask; m; m &= m - 1) {
        int r = __builtin_ctz(m);
        __atomic_add_fetch(&n->pub.requested[r], sign * e->req[k++], __ATOMIC_RELAXED);
    }
    for (uint32_t m = e->gpu_devices; m; m &= m - 1) {
        int d = __builtin_ctz(m);
        __atomic_add_fetch(&n->pub.gpu_used[d], sign * e->gpu_milli, __ATOMIC_RELAXED);
    }
    bump_generation(n);
    if (sign > 0)
        bump_bind_version(n);
    log_node(n);
}

/* See cache_acct.h. */
uint32_t cache_acct_pick_devices(const cnode *n, const pentry *e)
{
    uint32_t ngpus = n->pub.spec->ngpus;
    if (!e->gpu_count || !ngpus)
        return 0;
    if (ngpus > MODEL_MAX_GPUS)
        ngpus = MODEL_MAX_GPUS;
    uint32_t dev = 0;
    if (gpu_choose(e->gpu_count, (uint32_t)e->gpu_milli, n->pub.gpu_used, ngpus, &dev))
        return dev;
    dev = 0;
    for (uint32_t k = 0; k < e->gpu_count && k < ngpus; k++) {
        int best = -1;
        for (uint32_t d = 0; d < ngpus; d++) {
            if (dev & (1u << d))
                continue;
            if (best < 0 ||
                cache_node_gpu_used(&n->pub, (int)d) < cache_node_gpu_used(&n->pub, best))
                best = (int)d;
        }
        dev |= 1u << best;
    }
    return dev;
}

/* See cache_acct.h. */
bool cache_acct_devices_valid(const cnode *n, const pentry *e)
{
    uint32_t ngpus = n->pub.ngpus;
    if (!e->gpu_devices || (ngpus < 32 && (e->gpu_devices >> ngpus) != 0) ||
        (uint32_t)__builtin_popcount(e->gpu_devices) != e->gpu_count)
        return false;
    for (uint32_t m = e->gpu_devices; m; m &= m - 1)
        if (cache_node_gpu_used(&n->pub, __builtin_ctz(m)) + e->gpu_milli > MODEL_GPU_MILLI)
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

static void assumed_link(cache *c, pentry *e)
{
    e->aprev = NULL;
    e->anext = c->assumed;
    if (c->assumed)
        c->assumed->aprev = e;
    c->assumed = e;
}

/* See cache_acct.h. */
void cache_acct_assumed_unlink(cache *c, pentry *e)
{
    if (e->aprev)
        e->aprev->anext = e->anext;
    else
        c->assumed = e->anext;
    if (e->anext)
        e->anext->aprev = e->aprev;
    e->anext = e->aprev = NULL;
}

/* See cache_acct.h. */
prec *cache_acct_rec_get(cache *c, const char *name, size_t len, bool create)
{
    prec *r = table_get(&c->recs, name, len);
    if (r || !create)
        return r;
    r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->name = strndup(name, len);
    r->len = len;
    if (!r->name || table_put(&c->recs, r->name, len, r) != AS_OK) {
        free(r->name);
        free(r);
        return NULL;
    }
    return r;
}

/* See cache_acct.h. */
void cache_acct_rec_maybe_free(cache *c, prec *r)
{
    if (r->node || r->pods)
        return;
    table_del(&c->recs, r->name, r->len);
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
    size_t key_len = strlen(ns) + 1 + strlen(name);
    size_t size = sizeof(pentry) + (size_t)nreq * sizeof(int64_t) + uid_len + 1 + key_len + 1;
    pentry *e = calloc(1, size);
    if (!e)
        return NULL;
    e->req_mask = mask;
    e->nreq = (uint8_t)nreq;
    int k = 0;
    for (int r = 0; r < MODEL_MAX_RES; r++)
        if (mask & (1u << r))
            e->req[k++] = r == MODEL_RES_PODS ? 1 : pod->req.v[r];
    e->uid = (char *)&e->req[nreq];
    memcpy(e->uid, uid, uid_len);
    e->uid[uid_len] = '\0';
    e->key = e->uid + uid_len + 1;
    snprintf(e->key, key_len + 1, "%s/%s", ns, name);
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
    return e->gpu_count == pod->gpu_count && (uint32_t)e->gpu_milli == pod->gpu_milli;
}

/* See cache_acct.h. */
void cache_acct_attach(cache *c, pentry *e, bool choose_devices)
{
    cnode *n = e->rec->node;
    if (!n) {
        c->pods_detached++;
        return;
    }
    if (choose_devices && !cache_acct_devices_valid(n, e))
        e->gpu_devices = cache_acct_pick_devices(n, e);
    usage_apply(n, e, +1);
}

static void detach_usage(cache *c, pentry *e)
{
    cnode *n = e->rec->node;
    if (!n) {
        c->pods_detached--;
        return;
    }
    usage_apply(n, e, -1);
}

/* See cache_acct.h. */
void cache_acct_drop(cache *c, pentry *e)
{
    prec *r = e->rec;
    detach_usage(c, e);
    rec_unlink(e);
    if (e->state == CACHE_POD_ASSUMED) {
        cache_acct_assumed_unlink(c, e);
        c->pods_assumed--;
    } else {
        c->pods_bound--;
    }
    table_del(&c->pods, e->uid, strlen(e->uid));
    free(e);
    cache_acct_rec_maybe_free(c, r);
}

/* See cache_acct.h. */
as_err cache_acct_insert(cache *c, pentry *e, const char *node, size_t node_len,
                         cache_pod_state state, bool choose_devices)
{
    prec *r = cache_acct_rec_get(c, node, node_len, true);
    if (!r)
        return AS_ENOMEM;
    if (table_put(&c->pods, e->uid, strlen(e->uid), e) != AS_OK) {
        cache_acct_rec_maybe_free(c, r);
        return AS_ENOMEM;
    }
    e->state = (uint8_t)state;
    e->epoch = c->epoch;
    rec_link(r, e);
    if (state == CACHE_POD_ASSUMED) {
        assumed_link(c, e);
        c->pods_assumed++;
    } else {
        c->pods_bound++;
    }
    cache_acct_attach(c, e, choose_devices);
    return AS_OK;
}
