/*
 * podscan.c - see podscan.h. test_podscan holds the digest to the decoder
 * (texts that decode differently digest differently) and the brief's pod
 * to the decoded one.
 */
#include "agentsched/model/podscan.h"

#include <string.h>

#include "agentsched/base/hash.h"
#include "agentsched/base/pool.h"

/* Section tags, so that the same member under another parent digests
 * differently. */
enum { SEC_TOP = 1, SEC_META, SEC_SPEC, SEC_STATUS };

static uint64_t digest_member(uint64_t h, int sec, const char *k, size_t klen, const char *v,
                              size_t vlen)
{
    const uint64_t k1 = 0x9e3779b97f4a7c15ULL, k2 = 0xc2b2ae3d27d4eb4fULL;
    h = hash_mix(h ^ hash_bytes(k, klen) ^ (uint64_t)sec, k1);
    return hash_mix(h ^ hash_bytes(v, vlen), k2);
}

static bool key_is(const char *k, size_t klen, const char *want)
{
    size_t n = strlen(want);
    return klen == n && memcmp(k, want, n) == 0;
}

/* str_member reads a string member into *out (plain only); anything else
 * (null, another type, an escape) clears b->plain. 1, or 0 with s failed. */
static int str_member(jscan *s, model_pod_brief *b, model_span *out)
{
    jscan_ws(s);
    if (s->p < s->end && *s->p == '"') {
        const char *raw;
        size_t len;
        bool esc;
        if (!jscan_string(s, &raw, &len, &esc))
            return 0;
        if (esc)
            b->plain = false;
        out->s = raw;
        out->len = len;
        return 1;
    }
    b->plain = false;
    return jscan_value(s);
}

/* value_span steps over the value at s->p, giving its raw text. */
static int value_span(jscan *s, const char **v, size_t *vlen)
{
    jscan_ws(s);
    const char *start = s->p;
    if (!jscan_value(s))
        return 0;
    *v = start;
    *vlen = (size_t)(s->p - start);
    return 1;
}

/* Opens the object member value at s->p; a value of another type is
 * stepped over with b->plain cleared (*is_obj false). */
static int open_object(jscan *s, model_pod_brief *b, bool *is_obj)
{
    jscan_ws(s);
    *is_obj = s->p < s->end && *s->p == '{';
    if (*is_obj)
        return jscan_enter(s);
    b->plain = false;
    return jscan_value(s);
}

static int scan_metadata(jscan *s, model_pod_brief *b, uint64_t *h)
{
    bool is_obj, first = true;
    if (!open_object(s, b, &is_obj))
        return 0;
    if (!is_obj)
        return 1;
    const char *k, *v;
    size_t klen, vlen;
    bool kesc;
    int r;
    while ((r = jscan_next_key(s, &first, &k, &klen, &kesc)) == 1) {
        if (kesc)
            b->plain = false;
        if (key_is(k, klen, "managedFields") || key_is(k, klen, "generation")) {
            if (!jscan_value(s))
                return 0;
            continue;
        }
        if (key_is(k, klen, "resourceVersion")) {
            if (!str_member(s, b, &b->resource_version))
                return 0;
            continue;
        }
        if (!value_span(s, &v, &vlen))
            return 0;
        *h = digest_member(*h, SEC_META, k, klen, v, vlen);
        jscan sub = *s;
        sub.p = v;
        sub.end = v + vlen;
        if (key_is(k, klen, "uid") && !str_member(&sub, b, &b->uid))
            return 0;
        if (key_is(k, klen, "namespace") && !str_member(&sub, b, &b->ns))
            return 0;
        if (key_is(k, klen, "name") && !str_member(&sub, b, &b->name))
            return 0;
        if (key_is(k, klen, "deletionTimestamp")) {
            b->terminating = !(vlen == 4 && memcmp(v, "null", 4) == 0);
            if (!b->terminating || *v != '"')
                b->plain = false;
        }
    }
    return r == 0;
}

static int scan_spec(jscan *s, model_pod_brief *b, uint64_t *h)
{
    bool is_obj, first = true;
    if (!open_object(s, b, &is_obj))
        return 0;
    if (!is_obj)
        return 1;
    const char *k, *v;
    size_t klen, vlen;
    bool kesc;
    int r;
    while ((r = jscan_next_key(s, &first, &k, &klen, &kesc)) == 1) {
        if (kesc)
            b->plain = false;
        if (key_is(k, klen, "nodeName")) {
            if (!str_member(s, b, &b->node_name))
                return 0;
            continue;
        }
        if (!value_span(s, &v, &vlen))
            return 0;
        *h = digest_member(*h, SEC_SPEC, k, klen, v, vlen);
        if (key_is(k, klen, "schedulerName")) {
            jscan sub = *s;
            sub.p = v;
            sub.end = v + vlen;
            if (!str_member(&sub, b, &b->scheduler_name))
                return 0;
        }
    }
    return r == 0;
}

static int scan_status(jscan *s, model_pod_brief *b, uint64_t *h)
{
    bool is_obj, first = true;
    if (!open_object(s, b, &is_obj))
        return 0;
    if (!is_obj)
        return 1;
    const char *k, *v;
    size_t klen, vlen;
    bool kesc;
    int r;
    while ((r = jscan_next_key(s, &first, &k, &klen, &kesc)) == 1) {
        if (kesc)
            b->plain = false;
        if (!key_is(k, klen, "phase")) {
            if (!jscan_value(s))
                return 0;
            continue;
        }
        if (!value_span(s, &v, &vlen))
            return 0;
        *h = digest_member(*h, SEC_STATUS, k, klen, v, vlen);
        jscan sub = *s;
        sub.p = v;
        sub.end = v + vlen;
        if (!str_member(&sub, b, &b->phase))
            return 0;
    }
    return r == 0;
}

/* See podscan.h. */
int model_podscan(jscan *s, model_pod_brief *out)
{
    memset(out, 0, sizeof *out);
    out->plain = true;
    uint64_t h = 0x243f6a8885a308d3ULL;
    bool is_obj, first = true;
    if (!open_object(s, out, &is_obj))
        return 0;
    if (!is_obj)
        return 1;
    const char *k, *v;
    size_t klen, vlen;
    bool kesc;
    int r;
    while ((r = jscan_next_key(s, &first, &k, &klen, &kesc)) == 1) {
        if (kesc)
            out->plain = false;
        int ok;
        if (key_is(k, klen, "metadata"))
            ok = scan_metadata(s, out, &h);
        else if (key_is(k, klen, "spec"))
            ok = scan_spec(s, out, &h);
        else if (key_is(k, klen, "status"))
            ok = scan_status(s, out, &h);
        else if ((ok = value_span(s, &v, &vlen)))
            h = digest_member(h, SEC_TOP, k, klen, v, vlen);
        if (!ok)
            return 0;
    }
    if (r != 0)
        return 0;
    out->digest = h ? h : 1; /* 0 means "no digest" to the cache */
    return 1;
}

/* See podscan.h. */
uint64_t model_pod_digest(const model_registry *reg, const model_pod_brief *b)
{
    uint64_t h =
        hash_mix(b->digest ^ (uint64_t)(unsigned)model_registry_count(reg), 0x9fb21c651e98df25ULL);
    return h ? h : 1;
}

/* pod_phase_of as the decoder reads status.phase: absent or "" is
 * Pending; false for a name that is none of the five. */
static bool phase_of(model_span s, model_phase *out)
{
    static const char *const names[] = {"Pending", "Running", "Succeeded", "Failed", "Unknown"};
    if (!s.s || !s.len) {
        *out = MODEL_PHASE_PENDING;
        return true;
    }
    for (int i = 0; i < 5; i++) {
        if (key_is(s.s, s.len, names[i])) {
            *out = (model_phase)i;
            return true;
        }
    }
    return false;
}

/* span_dup copies f into the pool (dflt when absent or empty). */
static const char *span_dup(pool *pl, model_span f, const char *dflt)
{
    if (!f.s || !f.len)
        return dflt;
    if (memchr(f.s, '\0', f.len))
        return NULL;
    return pool_strndup(pl, f.s, f.len);
}

/* See podscan.h. */
as_err model_pod_from_brief(const model_pod_brief *b, model_pod **out)
{
    *out = NULL;
    model_phase phase;
    if (!b->plain || !phase_of(b->phase, &phase) || !b->name.s || !b->name.len)
        return AS_EINVAL;
    pool *pl = pool_new_small(0);
    if (!pl)
        return AS_ENOMEM;
    model_pod *p = pool_alloc(pl, sizeof *p);
    if (!p)
        goto oom;
    p->pool = pl;
    if (!(p->ns = span_dup(pl, b->ns, "default")) || !(p->name = span_dup(pl, b->name, "")) ||
        !(p->uid = span_dup(pl, b->uid, "")) ||
        !(p->resource_version = span_dup(pl, b->resource_version, "")) ||
        !(p->scheduler_name = span_dup(pl, b->scheduler_name, "default-scheduler")))
        goto oom;
    if (b->node_name.s && b->node_name.len && !(p->node_name = span_dup(pl, b->node_name, NULL)))
        goto oom;
    p->req.v[MODEL_RES_PODS] = 1;
    p->req_mask = 1u << MODEL_RES_PODS;
    p->phase = phase;
    p->terminating = b->terminating;
    *out = p;
    return AS_OK;
oom:
    pool_free(pl);
    return AS_ENOMEM;
}

/* See podscan.h. */
bool model_pod_brief_key(const model_pod_brief *b, char *out, size_t cap)
{
    if (!b->plain || !cap)
        return false;
    if (b->uid.s && b->uid.len) {
        if (b->uid.len >= cap)
            return false;
        memcpy(out, b->uid.s, b->uid.len);
        out[b->uid.len] = '\0';
        return true;
    }
    model_span ns = b->ns.s && b->ns.len ? b->ns : (model_span){"default", 7};
    size_t nlen = b->name.s ? b->name.len : 0;
    if (ns.len + 1 + nlen >= cap)
        return false;
    memcpy(out, ns.s, ns.len);
    out[ns.len] = '/';
    if (nlen)
        memcpy(out + ns.len + 1, b->name.s, nlen);
    out[ns.len + 1 + nlen] = '\0';
    return true;
}
