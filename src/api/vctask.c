/*
 * vctask.c - the fast decoders of Volcano's predicate and prioritize
 * bodies and the memo of decoded task Pods (contract in vctask.h).
 */
#include "agentsched/api/vctask.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "agentsched/base/hash.h"
#include "agentsched/base/jscan.h"
#include "agentsched/base/json.h"
#include "agentsched/core/cache.h"
#include "agentsched/model/skip.h"

/* ------------------------------------------------------------------ */
/* Scanning                                                            */
/* ------------------------------------------------------------------ */

/* One key a level wants: exact when spelt so, seen twice is not plain,
 * a case-insensitive match without the exact key is not plain. */
typedef struct want {
    const char *key;
    size_t klen;
    bool exact; /* seen exactly */
    bool fold;  /* seen in another case */
} want;

/* key_is: 1 exact, 2 the same but for case, 0 another key. */
static int key_is(const want *w, const char *k, size_t klen)
{
    if (klen != w->klen)
        return 0;
    if (memcmp(k, w->key, klen) == 0)
        return 1;
    return strncasecmp(k, w->key, klen) == 0 ? 2 : 0;
}

/* settle: false when the level was not plain for w (twice, or only in
 * another case). */
static bool settle(const want *w)
{
    return w->exact || !w->fold;
}

/* next_key reads a key of the object being scanned: 1 with k/klen, 0 at
 * its end, -1 failed or an escaped key (not plain). */
static int next_key(jscan *s, bool *first, const char **k, size_t *klen)
{
    bool esc;
    int r = jscan_next_key(s, first, k, klen, &esc);
    if (r == 1 && esc)
        return -1;
    return r;
}

/* scan_meta reads a Pod's metadata for uid and resourceVersion (plain
 * strings; absent otherwise, which only disables the memo). */
static bool scan_meta(jscan *s, vctask_pod_span *out)
{
    if (*s->p != '{')
        return jscan_value(s) == 1;
    if (!jscan_enter(s))
        return false;
    want w[2] = {{"uid", 3, false, false}, {"resourceVersion", 15, false, false}};
    const char *vals[2] = {NULL, NULL};
    size_t lens[2] = {0, 0};
    bool bad = false, first = true;
    const char *k;
    size_t klen;
    int r;
    while ((r = next_key(s, &first, &k, &klen)) == 1) {
        int which = -1;
        for (int i = 0; i < 2; i++) {
            int m = key_is(&w[i], k, klen);
            if (m == 1) {
                bad |= w[i].exact;
                w[i].exact = true;
                which = i;
            } else if (m == 2) {
                w[i].fold = true;
            }
        }
        if (which >= 0 && *s->p == '"') {
            bool esc;
            if (!jscan_string(s, &vals[which], &lens[which], &esc))
                return false;
            bad |= esc;
        } else {
            bad |= which >= 0;
            if (!jscan_value(s))
                return false;
        }
    }
    if (r < 0)
        return false;
    /* the pod model reads metadata keys as Go does: any doubt, no memo */
    if (!bad && w[0].exact && w[1].exact && !w[0].fold && !w[1].fold && lens[0] && lens[1]) {
        out->uid = vals[0];
        out->uid_len = lens[0];
        out->rv = vals[1];
        out->rv_len = lens[1];
    }
    return true;
}

/* scan_pod steps over the Pod object at s->p, recording its span and its
 * metadata's uid and resourceVersion. */
static bool scan_pod(jscan *s, vctask_pod_span *out)
{
    const char *start = s->p;
    if (!jscan_enter(s))
        return false;
    bool first = true, seen = false;
    const char *k;
    size_t klen;
    int r;
    while ((r = next_key(s, &first, &k, &klen)) == 1) {
        if (klen == 8 && memcmp(k, "metadata", 8) == 0 && !seen) {
            seen = true;
            if (!scan_meta(s, out))
                return false;
        } else if (!jscan_value(s)) {
            return false;
        }
    }
    if (r < 0)
        return false;
    out->pod = start;
    out->pod_len = (size_t)(s->p - start);
    return true;
}

/* scan_task reads a TaskInfo for its Pod (an object, spelt exactly). */
static bool scan_task(jscan *s, vctask_pod_span *out)
{
    if (*s->p != '{' || !jscan_enter(s))
        return false;
    want w = {"Pod", 3, false, false};
    bool first = true;
    const char *k;
    size_t klen;
    int r;
    while ((r = next_key(s, &first, &k, &klen)) == 1) {
        int m = key_is(&w, k, klen);
        if (m == 1) {
            if (w.exact || *s->p != '{')
                return false;
            w.exact = true;
            if (!scan_pod(s, out))
                return false;
            continue;
        }
        if (m == 2)
            w.fold = true;
        if (!jscan_value(s))
            return false;
    }
    return r == 0 && w.exact;
}

/* scan_node reads a NodeInfo for its Name (a plain non-empty string). */
static bool scan_node(jscan *s, const char **name, size_t *len)
{
    if (*s->p != '{' || !jscan_enter(s))
        return false;
    want w = {"Name", 4, false, false};
    bool first = true;
    const char *k;
    size_t klen;
    int r;
    while ((r = next_key(s, &first, &k, &klen)) == 1) {
        int m = key_is(&w, k, klen);
        if (m == 1) {
            bool esc;
            if (w.exact || *s->p != '"' || !jscan_string(s, name, len, &esc) || esc || !*len)
                return false;
            w.exact = true;
            continue;
        }
        if (m == 2)
            w.fold = true;
        if (!jscan_value(s))
            return false;
    }
    return r == 0 && w.exact;
}

/* scan_root opens the body's object. */
static bool scan_root(jscan *s, const char *body, size_t len, as_diag *quiet)
{
    memset(s, 0, sizeof *s);
    s->base = s->p = body;
    s->end = body + len;
    s->diag = quiet;
    jscan_ws(s);
    return s->p < s->end && *s->p == '{' && jscan_enter(s);
}

/* scan_end: only whitespace after the root. */
static bool scan_end(jscan *s)
{
    jscan_ws(s);
    return s->p == s->end;
}

/* See vctask.h. */
bool vctask_scan_predicate(const char *body, size_t len, vctask_pod_span *pod, const char **name,
                           size_t *name_len)
{
    memset(pod, 0, sizeof *pod);
    *name = NULL;
    *name_len = 0;
    as_diag quiet;
    jscan s;
    if (!scan_root(&s, body, len, &quiet))
        return false;
    want w[2] = {{"task", 4, false, false}, {"node", 4, false, false}};
    bool first = true;
    const char *k;
    size_t klen;
    int r;
    while ((r = next_key(&s, &first, &k, &klen)) == 1) {
        int m0 = key_is(&w[0], k, klen), m1 = key_is(&w[1], k, klen);
        if (m0 == 1 || m1 == 1) {
            want *x = m0 == 1 ? &w[0] : &w[1];
            if (x->exact)
                return false;
            x->exact = true;
            if (!(m0 == 1 ? scan_task(&s, pod) : scan_node(&s, name, name_len)))
                return false;
            continue;
        }
        w[0].fold |= m0 == 2;
        w[1].fold |= m1 == 2;
        if (!jscan_value(&s))
            return false;
    }
    return r == 0 && w[0].exact && w[1].exact && scan_end(&s);
}

/* A set of name spans, for de-duplication. */
typedef struct spanset {
    const sched_name **slot;
    size_t cap; /* power of two */
} spanset;

static bool spanset_add(spanset *ss, const sched_name *n)
{
    size_t i = (size_t)n->hash & (ss->cap - 1);
    while (ss->slot[i]) {
        const sched_name *o = ss->slot[i];
        if (o->hash == n->hash && o->len == n->len && memcmp(o->s, n->s, n->len) == 0)
            return false;
        i = (i + 1) & (ss->cap - 1);
    }
    ss->slot[i] = n;
    return true;
}

/* scan_nodes reads prioritize's "nodes" array into *names (pool), the
 * names as the DOM path would take them, de-duplicated. */
static bool scan_nodes(jscan *s, pool *p, sched_name **names, size_t *n)
{
    *n = 0;
    if (*s->p == 'n')
        return jscan_literal(s, "null") == 1;
    if (*s->p != '[' || !jscan_enter(s))
        return false;
    size_t cap = 256;
    sched_name *arr = pool_alloc(p, cap * sizeof *arr);
    if (!arr)
        return false;
    bool first = true;
    int r;
    while ((r = jscan_next_elem(s, &first)) == 1) {
        if (*n == VCTASK_MAX_NODES)
            return false;
        if (*n == cap) {
            sched_name *grown = pool_alloc(p, 2 * cap * sizeof *arr);
            if (!grown)
                return false;
            memcpy(grown, arr, cap * sizeof *arr);
            arr = grown;
            cap *= 2;
        }
        const char *name;
        size_t len;
        if (!scan_node(s, &name, &len))
            return false;
        arr[(*n)++] = (sched_name){name, len, cache_name_hash(name, len)};
    }
    if (r < 0)
        return false;
    spanset ss = {NULL, 4};
    while (ss.cap < 2 * *n)
        ss.cap <<= 1;
    if (!(ss.slot = pool_alloc(p, ss.cap * sizeof *ss.slot)))
        return false;
    size_t kept = 0;
    for (size_t i = 0; i < *n; i++)
        if (spanset_add(&ss, &arr[i]))
            arr[kept++] = arr[i];
    *n = kept;
    *names = arr;
    return true;
}

/* See vctask.h. */
bool vctask_scan_prioritize(pool *p, const char *body, size_t len, vctask_pod_span *pod,
                            sched_name **names, size_t *n)
{
    memset(pod, 0, sizeof *pod);
    *names = NULL;
    *n = 0;
    as_diag quiet;
    jscan s;
    if (!scan_root(&s, body, len, &quiet))
        return false;
    want w[2] = {{"task", 4, false, false}, {"nodes", 5, false, false}};
    bool first = true;
    const char *k;
    size_t klen;
    int r;
    while ((r = next_key(&s, &first, &k, &klen)) == 1) {
        int m0 = key_is(&w[0], k, klen), m1 = key_is(&w[1], k, klen);
        if (m0 == 1 || m1 == 1) {
            want *x = m0 == 1 ? &w[0] : &w[1];
            if (x->exact)
                return false;
            x->exact = true;
            if (!(m0 == 1 ? scan_task(&s, pod) : scan_nodes(&s, p, names, n)))
                return false;
            continue;
        }
        w[0].fold |= m0 == 2;
        w[1].fold |= m1 == 2;
        if (!jscan_value(&s))
            return false;
    }
    if (!*names) /* absent: an empty array for the caller */
        *names = pool_alloc(p, sizeof **names);
    return r == 0 && w[0].exact && settle(&w[1]) && *names && scan_end(&s);
}

/* ------------------------------------------------------------------ */
/* The memo                                                            */
/* ------------------------------------------------------------------ */

struct vctask_ent {
    uint64_t hash; /* of the Pod's bytes */
    size_t len;
    int gen;   /* the registry's generation it was decoded under */
    int refs;  /* the slot's (while live) plus every lender's */
    bool live; /* still in its slot */
    bool memo; /* ever in a slot (false: the caller's alone) */
    model_pod *pod;
};

struct vctask_memo {
    pthread_mutex_t mu;
    vctask_ent *slot[VCTASK_MEMO_SLOTS];
};

/* See vctask.h. */
as_err vctask_memo_new(vctask_memo **out)
{
    *out = calloc(1, sizeof **out);
    if (!*out)
        return AS_ENOMEM;
    pthread_mutex_init(&(*out)->mu, NULL);
    return AS_OK;
}

static void ent_free(vctask_ent *e)
{
    model_pod_free(e->pod);
    free(e);
}

/* See vctask.h. */
void vctask_memo_free(vctask_memo *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < VCTASK_MEMO_SLOTS; i++)
        if (m->slot[i])
            ent_free(m->slot[i]);
    pthread_mutex_destroy(&m->mu);
    free(m);
}

/* matches: e is what the request's Pod decodes to. */
static bool matches(const vctask_ent *e, const vctask_pod_span *sp, uint64_t h, int gen)
{
    const model_pod *p = e->pod;
    return e->hash == h && e->len == sp->pod_len && e->gen == gen &&
           strlen(p->uid) == sp->uid_len && memcmp(p->uid, sp->uid, sp->uid_len) == 0 &&
           strlen(p->resource_version) == sp->rv_len &&
           memcmp(p->resource_version, sp->rv, sp->rv_len) == 0;
}

/* decode builds the Pod span into a model pod as volcano_task_pod does
 * for a TaskInfo's Pod object. */
static as_err decode(const model_registry *reg, const vctask_pod_span *sp, model_pod **out)
{
    as_diag d;
    memset(&d, 0, sizeof d);
    json_t *doc = NULL;
    as_err err = json_parse_validated(sp->pod, sp->pod_len, model_skip_pod(), &doc, &d);
    if (!err)
        err = model_pod_from_json(reg, doc, out, &d);
    json_decref(doc);
    if (!err && !(*out)->uid[0]) {
        /* the task's UID stands in then: the DOM path handles it */
        model_pod_free(*out);
        *out = NULL;
        err = AS_EINVAL;
    }
    return err;
}

/* See vctask.h. */
as_err vctask_pod(vctask_memo *m, const model_registry *reg, const vctask_pod_span *sp,
                  const model_pod **pod, vctask_ent **ent, bool *hit)
{
    *pod = NULL;
    *ent = NULL;
    *hit = false;
    int gen = model_registry_count(reg);
    bool keyed = m && sp->uid && sp->rv;
    uint64_t h = keyed ? hash_bytes(sp->pod, sp->pod_len) : 0;
    size_t i = (size_t)(h ^ (h >> 32)) & (VCTASK_MEMO_SLOTS - 1);
    if (keyed) {
        pthread_mutex_lock(&m->mu);
        vctask_ent *e = m->slot[i];
        if (e && matches(e, sp, h, gen)) {
            e->refs++;
            pthread_mutex_unlock(&m->mu);
            *pod = e->pod;
            *ent = e;
            *hit = true;
            return AS_OK;
        }
        pthread_mutex_unlock(&m->mu);
    }
    model_pod *p = NULL;
    as_err err = decode(reg, sp, &p);
    if (err)
        return err;
    vctask_ent *e = calloc(1, sizeof *e);
    if (!e) {
        model_pod_free(p);
        return AS_ENOMEM;
    }
    *e = (vctask_ent){h, sp->pod_len, gen, 1, false, false, p};
    /* remembered only when it is what the request named */
    if (keyed && matches(e, sp, h, gen)) {
        pthread_mutex_lock(&m->mu);
        vctask_ent *old = m->slot[i];
        if (old) {
            old->live = false;
            if (--old->refs == 0)
                ent_free(old);
        }
        e->live = e->memo = true;
        e->refs++;
        m->slot[i] = e;
        pthread_mutex_unlock(&m->mu);
    }
    *pod = p;
    *ent = e;
    return AS_OK;
}

/* See vctask.h. */
void vctask_put(vctask_memo *m, vctask_ent *e)
{
    if (!e)
        return;
    if (!e->memo) {
        ent_free(e);
        return;
    }
    pthread_mutex_lock(&m->mu);
    bool last = --e->refs == 0;
    pthread_mutex_unlock(&m->mu);
    if (last)
        ent_free(e);
}
