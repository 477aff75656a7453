/*
 * podscan.c - see podscan.h. test_podscan holds the digest to the decoder
 * (texts that decode differently digest differently) and the brief's pod
 * to the decoded one.
 */
#include "agentsched/model/podscan.h"

#include <string.h>

#include "agentsched/base/hash.h"
#include "agentsched/base/json.h"
#include "agentsched/base/pool.h"
#include "agentsched/model/gpuannot.h"
#include "model_priv.h"

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

/* What a section's member callback makes of one key (walk_object). */
typedef enum {
    MEMBER_FAILED = 0, /* s failed */
    MEMBER_TAKEN,      /* the callback stepped over the value itself */
    MEMBER_DIGEST,     /* the walker folds the value into the digest */
    MEMBER_READ,       /* ... and then hands the callback its span */
} member_how;

/* The context of one scan: the brief being filled and the digest so far. */
typedef struct scan_ctx {
    model_pod_brief *b;
    uint64_t h;
} scan_ctx;

/* A section's per-key callback. Called first with digested false and s at
 * the key's value in the object: it either steps over the value itself
 * (MEMBER_TAKEN, the value not digested) or leaves it to the walker
 * (MEMBER_DIGEST, MEMBER_READ). After MEMBER_READ it is called again with
 * digested true and s a scanner over the value's span alone. */
typedef member_how (*member_fn)(scan_ctx *c, jscan *s, const char *k, size_t klen, bool digested);

/* walk_object walks the object member value at s->p, section sec: every
 * key escaped clears the brief's plain, and each member goes to fn, which
 * takes it or has its raw text folded into the digest. A value of another
 * type is stepped over with plain cleared. 1 for an object, 2 for another
 * value, 0 with s failed. */
static int walk_object(scan_ctx *c, jscan *s, int sec, member_fn fn)
{
    bool is_obj, first = true;
    if (!open_object(s, c->b, &is_obj))
        return 0;
    if (!is_obj)
        return 2;
    const char *k, *v;
    size_t klen, vlen;
    bool kesc;
    int r;
    while ((r = jscan_next_key(s, &first, &k, &klen, &kesc)) == 1) {
        if (kesc)
            c->b->plain = false;
        member_how how = fn(c, s, k, klen, false);
        if (how == MEMBER_FAILED)
            return 0;
        if (how == MEMBER_TAKEN)
            continue;
        if (!value_span(s, &v, &vlen))
            return 0;
        c->h = digest_member(c->h, sec, k, klen, v, vlen);
        if (how == MEMBER_READ) {
            jscan sub = *s;
            sub.p = v;
            sub.end = v + vlen;
            if (!fn(c, &sub, k, klen, true))
                return 0;
        }
    }
    return r == 0;
}

/* skip_member steps over the value at s->p, leaving it out of the digest. */
static member_how skip_member(jscan *s)
{
    return jscan_value(s) ? MEMBER_TAKEN : MEMBER_FAILED;
}

/* read_member reads the string member at s->p into *out (str_member). */
static member_how read_member(scan_ctx *c, jscan *s, model_span *out)
{
    return str_member(s, c->b, out) ? MEMBER_TAKEN : MEMBER_FAILED;
}

static member_how meta_member(scan_ctx *c, jscan *s, const char *k, size_t klen, bool digested)
{
    model_pod_brief *b = c->b;
    if (!digested) {
        /* deletionGracePeriodSeconds: read by no decoder */
        if (key_is(k, klen, "managedFields") || key_is(k, klen, "generation") ||
            key_is(k, klen, "deletionGracePeriodSeconds"))
            return skip_member(s);
        if (key_is(k, klen, "resourceVersion"))
            return read_member(c, s, &b->resource_version);
        if (key_is(k, klen, "deletionTimestamp")) {
            /* carried apart (b->terminating), as spec.nodeName is: the
             * deletion's MODIFIED of a pod the cache holds then matches
             * its digest and needs no decode */
            const char *v;
            size_t vlen;
            if (!value_span(s, &v, &vlen))
                return MEMBER_FAILED;
            b->terminating = !(vlen == 4 && memcmp(v, "null", 4) == 0);
            if (!b->terminating || *v != '"')
                b->plain = false;
            return MEMBER_TAKEN;
        }
        if (key_is(k, klen, "uid") || key_is(k, klen, "namespace") || key_is(k, klen, "name"))
            return MEMBER_READ;
        return MEMBER_DIGEST;
    }
    if (key_is(k, klen, "uid"))
        return read_member(c, s, &b->uid);
    if (key_is(k, klen, "namespace"))
        return read_member(c, s, &b->ns);
    return read_member(c, s, &b->name);
}

static member_how spec_member(scan_ctx *c, jscan *s, const char *k, size_t klen, bool digested)
{
    if (digested) /* schedulerName */
        return read_member(c, s, &c->b->scheduler_name);
    if (key_is(k, klen, "nodeName"))
        return read_member(c, s, &c->b->node_name);
    return key_is(k, klen, "schedulerName") ? MEMBER_READ : MEMBER_DIGEST;
}

static member_how status_member(scan_ctx *c, jscan *s, const char *k, size_t klen, bool digested)
{
    if (digested) /* phase */
        return read_member(c, s, &c->b->phase);
    return key_is(k, klen, "phase") ? MEMBER_READ : skip_member(s);
}

static member_how top_member(scan_ctx *c, jscan *s, const char *k, size_t klen, bool digested)
{
    int ok;
    model_pod_brief *b = c->b;
    /* a repeated member: the decoder's DOM keeps the last, so the brief
     * takes its spans from the last alone */
    if (key_is(k, klen, "metadata")) {
        b->uid = b->ns = b->name = b->resource_version = (model_span){NULL, 0};
        b->terminating = false;
        ok = walk_object(c, s, SEC_META, meta_member);
    } else if (key_is(k, klen, "spec")) {
        b->node_name = b->scheduler_name = b->spec = (model_span){NULL, 0};
        jscan_ws(s);
        const char *start = s->p;
        if ((ok = walk_object(c, s, SEC_SPEC, spec_member)) == 1)
            b->spec = (model_span){start, (size_t)(s->p - start)};
    } else if (key_is(k, klen, "status")) {
        b->phase = (model_span){NULL, 0};
        ok = walk_object(c, s, SEC_STATUS, status_member);
    } else {
        return MEMBER_DIGEST;
    }
    return ok ? MEMBER_TAKEN : MEMBER_FAILED;
}

/* See podscan.h. */
int model_podscan(jscan *s, model_pod_brief *out)
{
    memset(out, 0, sizeof *out);
    out->plain = true;
    scan_ctx c = {.b = out, .h = 0x243f6a8885a308d3ULL};
    int r = walk_object(&c, s, SEC_TOP, top_member);
    if (r == 1)
        out->digest = c.h ? c.h : 1; /* 0 means "no digest" to the cache */
    return r != 0;
}

/* See podscan.h. */
uint64_t model_pod_digest(const model_registry *reg, const model_pod_brief *b)
{
    uint64_t h =
        hash_mix(b->digest ^ (uint64_t)(unsigned)model_registry_count(reg), 0x9fb21c651e98df25ULL);
    return h ? h : 1;
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
    if (!b->plain || !model_priv_phase_of(b->phase.s, b->phase.len, &phase) || !b->name.s ||
        !b->name.len)
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

/* ------------------------------------------------------------------ */
/* The fields of model_pod_from_fields                                  */
/* ------------------------------------------------------------------ */

/* pod_str takes a string member's value into *out (null: absent); false
 * for another type or a string with escapes (the DOM path decides). */
static bool pod_str(const json_value *v, model_span *out)
{
    if (v->type == 'n') {
        *out = (model_span){NULL, 0};
        return true;
    }
    if (v->type != '"' || v->esc)
        return false;
    *out = (model_span){v->s, v->len};
    return true;
}

/* One member of an object being read (key and value). */
typedef struct member {
    const char *k;
    size_t kl;
    bool kesc;
    json_value v;
} member;

/* next_member is json_iter_next into m. */
static int next_member(json_iter *it, member *m)
{
    return json_iter_next(it, &m->k, &m->kl, &m->kesc, &m->v);
}

/* How each_member ended. */
typedef enum {
    EACH_OTHER = -1, /* v is neither an object nor null */
    EACH_NULL = 0,   /* v is null: an absent object */
    EACH_DONE = 1,   /* fn took every member */
    EACH_STOPPED = 2 /* fn refused one, or the iterator refused the text */
} each_end;

/* A member's callback: false stops the walk. */
typedef bool (*each_fn)(void *ctx, const member *m);

/* each_member hands every member of the object v to fn, in order. */
static each_end each_member(const json_value *v, each_fn fn, void *ctx)
{
    json_iter it;
    if (v->type == 'n')
        return EACH_NULL;
    if (v->type != '{' || !json_iter_begin(&it, v->s, v->len))
        return EACH_OTHER;
    member m;
    int r;
    while ((r = next_member(&it, &m)) == 1)
        if (!fn(ctx, &m))
            return EACH_STOPPED;
    return r == 0 ? EACH_DONE : EACH_STOPPED;
}

/* The fields being read, and the room for their labels. */
typedef struct fields_ctx {
    model_pod_fields *f;
    model_span *keys, *values;
    size_t cap;
} fields_ctx;

/* label: one member of metadata.labels, a plain string */
static bool label(void *ctx, const member *m)
{
    fields_ctx *c = ctx;
    model_pod_fields *f = c->f;
    if (m->kesc || f->nlabels == c->cap || m->v.type != '"' || m->v.esc)
        return false;
    c->keys[f->nlabels] = (model_span){m->k, m->kl};
    c->values[f->nlabels++] = (model_span){m->v.s, m->v.len};
    return true;
}

/* unread_annotation: false for a key the pod decoder reads (agentsched's
 * device annotations, the mirror pod's) or may (an escaped key). */
static bool unread_annotation(void *ctx, const member *m)
{
    (void)ctx;
    return !(m->kesc || key_is(m->k, m->kl, GPUANNOT_DEVICES) ||
             key_is(m->k, m->kl, GPUANNOT_MILLI) || key_is(m->k, m->kl, GPUANNOT_NODE) ||
             key_is(m->k, m->kl, MODEL_MIRROR_ANNOTATION));
}

/* meta_field: one member of metadata */
static bool meta_field(void *ctx, const member *m)
{
    fields_ctx *c = ctx;
    model_pod_fields *f = c->f;
    if (m->kesc)
        return false; /* an escaped key may spell one of ours */
    if (key_is(m->k, m->kl, "name"))
        return pod_str(&m->v, &f->name);
    if (key_is(m->k, m->kl, "namespace"))
        return pod_str(&m->v, &f->ns);
    if (key_is(m->k, m->kl, "uid"))
        return pod_str(&m->v, &f->uid);
    if (key_is(m->k, m->kl, "resourceVersion"))
        return pod_str(&m->v, &f->resource_version);
    if (key_is(m->k, m->kl, "creationTimestamp"))
        return pod_str(&m->v, &f->creation_timestamp);
    if (key_is(m->k, m->kl, "deletionTimestamp")) {
        model_span ts = {NULL, 0};
        bool ok = pod_str(&m->v, &ts);
        f->deletion_timestamp = ts.s != NULL;
        return ok;
    }
    if (key_is(m->k, m->kl, "labels")) {
        /* a repeated "labels" starts over, as the DOM keeps the last */
        f->nlabels = 0;
        each_end e = each_member(&m->v, label, c);
        return e == EACH_DONE || e == EACH_NULL;
    }
    if (key_is(m->k, m->kl, "annotations")) {
        each_end e = each_member(&m->v, unread_annotation, NULL);
        f->annotated |= e == EACH_STOPPED || e == EACH_OTHER;
    }
    return true;
}

/* status_field: one member of status */
static bool status_field(void *ctx, const member *m)
{
    fields_ctx *c = ctx;
    return !m->kesc && (!key_is(m->k, m->kl, "phase") || pod_str(&m->v, &c->f->phase));
}

/* section reads metadata or status (v) into c->f; a repeated one starts
 * over, as the DOM keeps the last. */
static bool section(const json_value *v, fields_ctx *c, bool meta)
{
    model_pod_fields *f = c->f;
    if (meta) {
        f->name = f->ns = f->uid = f->resource_version = f->creation_timestamp =
            (model_span){NULL, 0};
        f->deletion_timestamp = f->annotated = false;
        f->nlabels = 0;
    } else {
        f->phase = (model_span){NULL, 0};
    }
    each_end e = each_member(v, meta ? meta_field : status_field, c);
    return e == EACH_DONE || e == EACH_NULL;
}

/* See podscan.h. */
bool model_pod_fields_read(const char *pod, size_t len, const char *known, const char *known_end,
                           model_pod_fields *f, model_span *keys, model_span *values, size_t cap)
{
    memset(f, 0, sizeof *f);
    f->label_keys = keys;
    f->label_values = values;
    fields_ctx c = {f, keys, values, cap};
    json_iter it;
    if (!json_iter_begin(&it, pod, len))
        return false;
    it.known = known;
    it.known_end = known_end;
    member m;
    int r;
    while ((r = next_member(&it, &m)) == 1) {
        if (m.kesc)
            return false;
        bool ok = true;
        if (key_is(m.k, m.kl, "kind"))
            ok = pod_str(&m.v, &f->kind);
        else if (key_is(m.k, m.kl, "metadata"))
            ok = section(&m.v, &c, true);
        else if (key_is(m.k, m.kl, "status"))
            ok = section(&m.v, &c, false);
        if (!ok)
            return false;
    }
    return r == 0;
}
