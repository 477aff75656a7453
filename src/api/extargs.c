/*
 * extargs.c - streaming decoders of the extender request bodies.
 *
 * ExtenderArgs: the validating scanner (jscan.h) copies NodeNames and
 * notes Node item and Pod spans without a DOM; the Pod, the binding and
 * the preemption args are built into DOMs by the JSON layer (json.h).
 */
#include "agentsched/api/extargs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "agentsched/base/jscan.h"
#include "agentsched/model/podscan.h"

/*
 * dedupe compacts n elements of `stride` bytes, each starting with a
 * sched_name, keeping the first occurrence of every name. Returns the new
 * count, or (size_t)-1 when out of memory. The table holds kept elements'
 * positions (+1; 4 bytes an entry, so the one cleared per request stays
 * small); a probe compares the kept element's stored hash before its name.
 */
static size_t dedupe(pool *p, void *base, size_t n, size_t stride)
{
    if (n < 2)
        return n;
    size_t size = 16;
    while (size < n * 2)
        size <<= 1;
    uint32_t *tab = pool_alloc(p, size * sizeof *tab); /* kept index + 1; 0 = empty */
    if (!tab)
        return (size_t)-1;
    char *b = base;
    size_t out = 0;
    for (size_t i = 0; i < n; i++) {
        const sched_name *nm = (const sched_name *)(b + i * stride);
        uint64_t hv = sched_name_hash(nm);
        size_t h = (size_t)hv & (size - 1);
        bool dup = false;
        while (tab[h]) {
            const sched_name *o = (const sched_name *)(b + (tab[h] - 1) * stride);
            if (sched_name_hash(o) == hv && o->len == nm->len &&
                memcmp(o->s, nm->s, nm->len) == 0) {
                dup = true;
                break;
            }
            h = (h + 1) & (size - 1);
        }
        if (dup)
            continue;
        if (out != i)
            memmove(b + out * stride, b + i * stride, stride);
        tab[h] = (uint32_t)out + 1;
        out++;
    }
    return out;
}

/*
 * ExtenderArgs is decoded by the scanner rather than into a DOM: a
 * full-Nodes request is mostly Node objects whose content agentsched does
 * not read (only metadata.name and the byte span to echo), and the
 * scanner validates them several times faster than yajl tokenizes them.
 * The Pod's span is built into a DOM by the JSON layer's walk
 * (json_parse_validated); the scan leaves the Pod's keys holding NUL to
 * that builder (keys_nul_ok), which names their paths.
 */
typedef struct sc {
    jscan j;
    pool *pool;
    size_t cap_names;
    size_t cap_nodes;
    char *arena;       /* node names are carved from here (one pool block per */
    size_t arena_left; /* many names) */
    size_t arena_next; /* size of the next arena block */
    unsigned flags;    /* EXTARGS_LAZY_POD */
} sc;

static int sc_fail_at(sc *s, as_err err, const char *tmpl, size_t idx, const char *fmt,
                      const char *detail)
{
    if (s->j.err == AS_OK) {
        char field[96];
        snprintf(field, sizeof field, tmpl, idx);
        s->j.err = err;
        as_diag_set(s->j.diag, err, field, fmt, detail ? detail : "");
    }
    return 0;
}

static bool sc_key_is(const char *raw, size_t len, bool esc, const char *name)
{
    size_t n = strlen(name);
    if (esc) {
        char buf[32];
        if (len > sizeof buf)
            return false;
        len = jscan_unescape(raw, len, buf);
        return len == n && strncasecmp(buf, name, n) == 0;
    }
    return len == n && strncasecmp(raw, name, n) == 0;
}

static int sc_grow_slow(sc *s, void **arr, size_t *cap, size_t n, size_t elem, const char *tmpl)
{
    if (n >= EXTARGS_MAX_NAMES)
        return sc_fail_at(s, AS_ETOOBIG, tmpl, n, "more than 65536 nodes in one request%s", NULL);
    size_t ncap = *cap ? *cap * 2 : 64;
    void *na = pool_alloc_raw(s->pool, ncap * elem); /* filled as it grows */
    if (!na)
        return sc_fail_at(s, AS_ENOMEM, tmpl, n, "request too large for its memory budget%s", NULL);
    if (n)
        memcpy(na, *arr, n * elem);
    *arr = na;
    *cap = ncap;
    return 1;
}

/* sc_grow makes room for element n of *arr (capacity *cap, elements of
 * elem bytes), doubling it in the pool when full; 0 with s failed. Inline:
 * the check runs once per element, the growth a handful of times. */
static inline int sc_grow(sc *s, void **arr, size_t *cap, size_t n, size_t elem, const char *tmpl)
{
    return n < *cap || sc_grow_slow(s, arr, cap, n, elem, tmpl);
}

/* sc_name_alloc returns n bytes for a name that had escapes (the others
 * stay in the body): from the arena, which grows in blocks of 256 doubling
 * to 4096 bytes, so 500 such names cost a handful of pool allocations; an
 * exact allocation when a block does not fit the pool's budget. */
static char *sc_name_alloc(sc *s, size_t n)
{
    if (n > s->arena_left) {
        size_t want = s->arena_next ? s->arena_next : 256;
        char *blk = n <= want / 4 ? pool_alloc_raw(s->pool, want) : NULL;
        if (!blk)
            return pool_alloc_raw(s->pool, n);
        s->arena = blk;
        s->arena_left = want;
        s->arena_next = want < 4096 ? want * 2 : 4096;
    }
    char *out = s->arena;
    s->arena += n;
    s->arena_left -= n;
    return out;
}

/* sc_name_escaped unescapes a name that had escapes (raw[0..*len)) into
 * the pool: *name and *len get the result. The rare path of sc_name. */
static int sc_name_escaped(sc *s, const char *raw, const char **name, size_t *len, const char *tmpl,
                           size_t idx)
{
    char *out = sc_name_alloc(s, *len + 1);
    if (!out)
        return sc_fail_at(s, AS_ENOMEM, tmpl, idx, "request too large for its memory budget%s",
                          NULL);
    *len = jscan_unescape(raw, *len, out);
    if (memchr(out, '\0', *len))
        return sc_fail_at(s, AS_EINVAL, tmpl, idx, "a node name cannot contain NUL characters%s",
                          NULL);
    out[*len] = '\0';
    *name = out;
    return 1;
}

/* sc_name reads a string value (s->j.p at '"') as a node name: pointing into
 * the body when it has no escapes (the body outlives the args), else
 * unescaped into the pool. Inline: it runs once per name of the request. */
static inline int sc_name(sc *s, sched_name *dst, const char *tmpl, size_t idx)
{
    const char *raw;
    size_t len;
    bool esc;
    if (!jscan_string(&s->j, &raw, &len, &esc))
        return 0;
    const char *name = raw;
    if (esc && !sc_name_escaped(s, raw, &name, &len, tmpl, idx))
        return 0;
    if (len > EXTARGS_MAX_NAME_LEN)
        return sc_fail_at(s, AS_EINVAL, tmpl, idx,
                          "a node name is at most 253 bytes (a DNS subdomain)%s", NULL);
    dst->s = name;
    dst->len = len;
    /* once, while the bytes are in cache: the dedupe, the node lookup and
     * the extender's memo all key on it */
    dst->hash = cache_name_hash(name, len);
    return 1;
}

/* pod_field puts "Pod" before the field of an error inside the Pod's DOM
 * ("spec.nodeSelector" -> "Pod.spec.nodeSelector"; a key of the Pod's own
 * object, field "", -> "Pod"); errors of the whole span (syntax, caps:
 * not AS_EINVAL) keep theirs. */
static void pod_field(as_err err, as_diag *diag)
{
    if (diag && (err == AS_EINVAL || diag->field[0]))
        as_diag_prefix_field(diag, "Pod");
}

static int sc_pod(sc *s, extargs_args *a)
{
    if (a->pod) {
        json_decref(a->pod);
        a->pod = NULL;
    }
    a->pod_raw = NULL;
    a->pod_raw_len = 0;
    a->pod_spec_raw = NULL;
    a->pod_spec_len = 0;
    if (*s->j.p == 'n')
        return jscan_literal(&s->j, "null");
    if (*s->j.p != '{')
        return sc_fail_at(s, AS_EINVAL, "Pod", 0, "Pod must be a v1.Pod object, not %s",
                          jscan_peek_type(&s->j));
    const char *start = s->j.p;
    int depth = s->j.depth;
    s->j.keys_nul_ok = true;
    /* jscan_value's object loop, noting the top-level spec's span on the way */
    if (!jscan_enter(&s->j))
        return 0;
    bool first = true, plain = true;
    const char *k;
    size_t kl;
    bool ke;
    int r;
    while ((r = jscan_next_key(&s->j, &first, &k, &kl, &ke)) == 1) {
        const char *v = s->j.p;
        if (!jscan_value(&s->j))
            return 0;
        plain = plain && !ke;
        if (!ke && kl == 4 && memcmp(k, "spec", 4) == 0) {
            a->pod_spec_raw = *v == '{' ? v : NULL;
            a->pod_spec_len = *v == '{' ? (size_t)(s->j.p - v) : 0;
        }
    }
    if (r != 0)
        return 0;
    if (!plain) {
        /* an escaped key may spell "spec" too: no span to trust */
        a->pod_spec_raw = NULL;
        a->pod_spec_len = 0;
    }
    s->j.keys_nul_ok = false;
    s->j.depth = depth;
    a->pod_raw = start;
    a->pod_raw_len = (size_t)(s->j.p - start);
    if (s->flags & EXTARGS_LAZY_POD)
        return 1; /* validated JSON; the DOM is built on demand */
    as_err err = json_parse_validated(start, (size_t)(s->j.p - start), NULL, &a->pod, s->j.diag);
    if (err) {
        pod_field(err, s->j.diag);
        s->j.err = err;
        return 0;
    }
    return 1;
}

static int sc_node_names(sc *s, extargs_args *a)
{
    a->nnames = 0;
    a->has_node_names = false;
    if (*s->j.p == 'n')
        return jscan_literal(&s->j, "null");
    if (*s->j.p != '[')
        return sc_fail_at(s, AS_EINVAL, "NodeNames", 0,
                          "NodeNames must be an array of node names, not %s",
                          jscan_peek_type(&s->j));
    a->has_node_names = true;
    if (!jscan_enter(&s->j))
        return 0;
    if (!a->names) {
        /* Sized once for what the rest of the body can hold at 12 bytes a
         * name (kube-scheduler's node names are longer), up to 8192,
         * instead of doubling from 64 and copying at every step; a denser
         * or longer list grows on from there. */
        size_t guess = (size_t)(s->j.end - s->j.p) / 12;
        guess = guess < 64 ? 64 : guess > 8192 ? 8192 : guess;
        a->names = pool_alloc_raw(s->pool, guess * sizeof *a->names);
        s->cap_names = a->names ? guess : 0;
    }
    bool first = true;
    int r;
    while ((r = jscan_next_elem(&s->j, &first)) == 1) {
        if (*s->j.p != '"')
            return sc_fail_at(s, AS_EINVAL, "NodeNames[%zu]", a->nnames,
                              "every NodeNames entry must be a string, not %s",
                              jscan_peek_type(&s->j));
        /* The compact run every client sends, "a","b",...: plain names
         * (jscan_string's fast case) one comma apart are read here with the
         * scan position in a register. Anything else (escapes, a name too
         * long, whitespace, the end of the array, a full names array) goes
         * back to the general reader below, which reports what is wrong. */
        const char *p = s->j.p, *end = s->j.end;
        size_t n = a->nnames;
        bool at_elem = true; /* p is at an element's opening quote */
        while (n < s->cap_names) {
            const unsigned char *q =
                jscan_plain_run((const unsigned char *)p + 1, (const unsigned char *)end, false);
            size_t len = (size_t)((const char *)q - p - 1);
            if (q >= (const unsigned char *)end || *q != '"' || len > EXTARGS_MAX_NAME_LEN)
                break;
            a->names[n++] = (sched_name){p + 1, len, cache_name_hash(p + 1, len)};
            p = (const char *)q + 1;
            at_elem = end - p >= 2 && p[0] == ',' && p[1] == '"';
            if (!at_elem)
                break;
            p++;
        }
        s->j.p = p;
        a->nnames = n;
        if (!at_elem)
            continue; /* the run ended after a name: sc_next_elem goes on */
        if (!sc_grow(s, (void **)&a->names, &s->cap_names, a->nnames, sizeof *a->names,
                     "NodeNames[%zu]"))
            return 0;
        if (!sc_name(s, &a->names[a->nnames], "NodeNames[%zu]", a->nnames))
            return 0;
        a->nnames++;
    }
    return r == 0;
}

/* sc_node reads one Nodes item (s->j.p at '{'): its span and metadata.name. */
static int sc_node(sc *s, extargs_args *a)
{
    size_t i = a->nnodes;
    extargs_node *n = &a->nodes[i];
    memset(n, 0, sizeof *n);
    n->raw = s->j.p;
    if (!jscan_enter(&s->j))
        return 0;
    bool first = true;
    const char *k;
    size_t kl;
    bool ke;
    int r;
    while ((r = jscan_next_key(&s->j, &first, &k, &kl, &ke)) == 1) {
        if (!sc_key_is(k, kl, ke, "metadata")) {
            if (!jscan_value(&s->j))
                return 0;
            continue;
        }
        if (*s->j.p == 'n') {
            if (!jscan_literal(&s->j, "null"))
                return 0;
            continue;
        }
        if (*s->j.p != '{')
            return sc_fail_at(s, AS_EINVAL, "Nodes.items[%zu].metadata", i,
                              "metadata must be an object, not %s", jscan_peek_type(&s->j));
        if (!jscan_enter(&s->j))
            return 0;
        bool mfirst = true;
        int mr;
        while ((mr = jscan_next_key(&s->j, &mfirst, &k, &kl, &ke)) == 1) {
            if (!sc_key_is(k, kl, ke, "name")) {
                if (!jscan_value(&s->j))
                    return 0;
            } else if (*s->j.p == 'n') {
                if (!jscan_literal(&s->j, "null"))
                    return 0;
                n->name.s = NULL;
                n->name.len = 0;
            } else if (*s->j.p != '"') {
                return sc_fail_at(s, AS_EINVAL, "Nodes.items[%zu].metadata.name", i,
                                  "metadata.name must be a string, not %s", jscan_peek_type(&s->j));
            } else if (!sc_name(s, &n->name, "Nodes.items[%zu].metadata.name", i)) {
                return 0;
            }
        }
        if (mr < 0)
            return 0;
    }
    if (r < 0)
        return 0;
    if (!n->name.s || n->name.len == 0)
        return sc_fail_at(s, AS_EINVAL, "Nodes.items[%zu].metadata.name", i,
                          "every node needs a metadata.name%s", NULL);
    n->raw_len = (size_t)(s->j.p - n->raw);
    a->nnodes++;
    return 1;
}

static int sc_nodes(sc *s, extargs_args *a)
{
    a->nnodes = 0;
    a->has_nodes = false;
    if (*s->j.p == 'n')
        return jscan_literal(&s->j, "null");
    if (*s->j.p != '{')
        return sc_fail_at(s, AS_EINVAL, "Nodes", 0, "Nodes must be a v1.NodeList object, not %s",
                          jscan_peek_type(&s->j));
    a->has_nodes = true;
    if (!jscan_enter(&s->j))
        return 0;
    bool first = true;
    const char *k;
    size_t kl;
    bool ke;
    int r;
    while ((r = jscan_next_key(&s->j, &first, &k, &kl, &ke)) == 1) {
        if (!sc_key_is(k, kl, ke, "items")) {
            if (!jscan_value(&s->j))
                return 0;
            continue;
        }
        a->nnodes = 0;
        if (*s->j.p == 'n') {
            if (!jscan_literal(&s->j, "null"))
                return 0;
            continue;
        }
        if (*s->j.p != '[')
            return sc_fail_at(s, AS_EINVAL, "Nodes.items", 0,
                              "Nodes.items must be an array of v1.Node, not %s",
                              jscan_peek_type(&s->j));
        if (!jscan_enter(&s->j))
            return 0;
        bool ifirst = true;
        int ir;
        while ((ir = jscan_next_elem(&s->j, &ifirst)) == 1) {
            if (*s->j.p != '{')
                return sc_fail_at(s, AS_EINVAL, "Nodes.items[%zu]", a->nnodes,
                                  "every Nodes.items entry must be a v1.Node object, not %s",
                                  jscan_peek_type(&s->j));
            if (!sc_grow(s, (void **)&a->nodes, &s->cap_nodes, a->nnodes, sizeof *a->nodes,
                         "Nodes.items[%zu]"))
                return 0;
            if (!sc_node(s, a))
                return 0;
        }
        if (ir < 0)
            return 0;
    }
    return r == 0;
}

static int sc_args(sc *s, extargs_args *a)
{
    jscan_ws(&s->j);
    if (s->j.p >= s->j.end)
        return jscan_syntax(&s->j, "empty body");
    if (*s->j.p != '{') {
        if (strchr("[\"tfn-0123456789", *s->j.p) && *s->j.p)
            return sc_fail_at(s, AS_EINVAL, "", 0,
                              "the request body must be a JSON object (ExtenderArgs), not %s",
                              jscan_peek_type(&s->j));
        return jscan_syntax(&s->j, "invalid value");
    }
    if (!jscan_enter(&s->j))
        return 0;
    bool first = true;
    const char *k;
    size_t kl;
    bool ke;
    int r;
    while ((r = jscan_next_key(&s->j, &first, &k, &kl, &ke)) == 1) {
        int ok;
        if (sc_key_is(k, kl, ke, "Pod"))
            ok = sc_pod(s, a);
        else if (sc_key_is(k, kl, ke, "NodeNames"))
            ok = sc_node_names(s, a);
        else if (sc_key_is(k, kl, ke, "Nodes"))
            ok = sc_nodes(s, a);
        else
            ok = jscan_value(&s->j);
        if (!ok)
            return 0;
    }
    if (r < 0)
        return 0;
    jscan_ws(&s->j);
    if (s->j.p != s->j.end)
        return jscan_syntax(&s->j, "data after the end of the request");
    return 1;
}

/* See extargs.h. */
as_err extargs_decode_args(pool *p, const char *body, size_t len, extargs_args *out, as_diag *diag)
{
    return extargs_decode_args_ex(p, body, len, 0, out, diag);
}

/* ---- a Pod's fields without its DOM ---------------------------------- */

/* See extargs.h. */
bool extargs_pod_fields(const extargs_args *a, model_pod_fields *f, model_span *keys,
                        model_span *values, size_t cap)
{
    if (!a->pod_raw)
        return false;
    const char *known = a->pod_spec_raw;
    return model_pod_fields_read(a->pod_raw, a->pod_raw_len, known,
                                 known ? known + a->pod_spec_len : NULL, f, keys, values, cap);
}

/* See extargs.h. */
as_err extargs_parse_pod(extargs_args *a, const json_skip *skip, as_diag *diag)
{
    if (a->pod || !a->pod_raw)
        return AS_OK;
    /* pod_raw is a span sc_pod validated */
    as_err err = json_parse_validated(a->pod_raw, a->pod_raw_len, skip, &a->pod, diag);
    if (err)
        pod_field(err, diag);
    return err;
}

/* See extargs.h. */
as_err extargs_decode_args_ex(pool *p, const char *body, size_t len, unsigned flags,
                              extargs_args *out, as_diag *diag)
{
    as_err err = AS_OK;
    memset(out, 0, sizeof *out);
    sc s = {
        .j = {.base = body, .p = body, .end = body + len, .diag = diag}, .pool = p, .flags = flags};
    if (!sc_args(&s, out)) {
        err = s.j.err ? s.j.err : as_diag_set(diag, AS_EINTERNAL, NULL, "decoder failed");
        goto done;
    }
    size_t k = dedupe(p, out->names, out->nnames, sizeof *out->names);
    size_t m = dedupe(p, out->nodes, out->nnodes, sizeof *out->nodes);
    if (k == (size_t)-1 || m == (size_t)-1) {
        err = as_diag_set(diag, AS_ENOMEM, NULL, "request too large for its memory budget");
        goto done;
    }
    out->dup_names = out->nnames - k;
    out->nnames = k;
    out->dup_nodes = out->nnodes - m;
    out->nnodes = m;
done:
    if (err)
        extargs_args_release(out);
    return err;
}

/* See extargs.h. */
void extargs_args_release(extargs_args *a)
{
    if (a->pod)
        json_decref(a->pod);
    memset(a, 0, sizeof *a);
}

/* ---- binding and preemption args (DOM-based) ---------------------- */

static const char *type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "an object";
    case JSON_ARRAY:
        return "an array";
    case JSON_STRING:
        return "a string";
    case JSON_INTEGER:
    case JSON_REAL:
        return "a number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "a boolean";
    default:
        return "null";
    }
}

/* dup_str copies the string v into the pool as a C string; a NUL inside
 * (which would cut it short: "cpu-small-01\u0000garbage" as
 * "cpu-small-01") is AS_EINVAL naming field. */
static as_err dup_str(pool *p, const json_t *v, const char *field, const char **out, as_diag *diag)
{
    const char *s = json_string_value(v);
    size_t len = json_string_length(v);
    if (memchr(s, '\0', len))
        return as_diag_set(diag, AS_EINVAL, field,
                           "%s contains \\u0000 (a NUL character); remove it", field);
    *out = pool_strndup(p, s, len);
    if (!*out)
        return as_diag_set(diag, AS_ENOMEM, field, "out of memory");
    return AS_OK;
}

/* get_str reads an optional string member of at most max bytes into the
 * pool ("" when absent or null). */
static as_err get_str(pool *p, const json_t *obj, const char *key, size_t max, const char **out,
                      as_diag *diag)
{
    const json_t *v = json_get(obj, key);
    *out = "";
    if (!v || json_is_null(v))
        return AS_OK;
    if (!json_is_string(v))
        return as_diag_set(diag, AS_EINVAL, key, "%s must be a string, not %s", key, type_name(v));
    if (json_string_length(v) > max)
        return as_diag_set(diag, AS_EINVAL, key, "%s is longer than %zu bytes", key, max);
    return dup_str(p, v, key, out, diag);
}

/* See extargs.h. */
as_err extargs_decode_binding(pool *p, const char *body, size_t len, extargs_binding *out,
                              as_diag *diag)
{
    json_t *doc = NULL;
    memset(out, 0, sizeof *out);
    as_err err = json_parse(body, len, &doc, diag);
    if (err)
        return err;
    if (!json_is_object(doc)) {
        err = as_diag_set(diag, AS_EINVAL, "",
                          "the request body must be a JSON object (ExtenderBindingArgs), not %s",
                          type_name(doc));
        goto done;
    }
    if ((err = get_str(p, doc, "PodName", MODEL_POD_NAME_MAX, &out->pod_name, diag)) ||
        (err = get_str(p, doc, "PodNamespace", MODEL_NAMESPACE_MAX, &out->pod_namespace, diag)) ||
        (err = get_str(p, doc, "PodUID", JSON_MAX_KEY_LEN, &out->pod_uid, diag)) ||
        (err = get_str(p, doc, "Node", JSON_MAX_KEY_LEN, &out->node, diag)))
        goto done;
    if (!out->pod_name[0]) {
        err = as_diag_set(diag, AS_EINVAL, "PodName", "PodName is required");
        goto done;
    }
    if (!out->node[0]) {
        err = as_diag_set(diag, AS_EINVAL, "Node", "Node is required (the node to bind to)");
        goto done;
    }
    if (strlen(out->node) > EXTARGS_MAX_NAME_LEN) {
        err = as_diag_set(diag, AS_EINVAL, "Node", "a node name is at most 253 bytes");
        goto done;
    }
    if (!out->pod_namespace[0])
        out->pod_namespace = "default";
done:
    json_decref(doc);
    return err;
}

/* decode_victims fills e from one map value (Victims or MetaVictims). */
static as_err decode_victims(pool *p, const char *mapname, const char *node, const json_t *v,
                             bool meta, extargs_victims *e, as_diag *diag)
{
    char field[384];
    e->node = node;
    if (!v || json_is_null(v))
        return AS_OK;
    snprintf(field, sizeof field, "%s.%s", mapname, node);
    if (!json_is_object(v))
        return as_diag_set(diag, AS_EINVAL, field, "%s entries must be objects, not %s", mapname,
                           type_name(v));
    const json_t *pdb = json_get(v, "NumPDBViolations");
    if (pdb && !json_is_null(pdb)) {
        if (!json_is_integer(pdb)) {
            snprintf(field, sizeof field, "%s.%s.NumPDBViolations", mapname, node);
            return as_diag_set(diag, AS_EINVAL, field,
                               "NumPDBViolations must be an integer, not %s", type_name(pdb));
        }
        e->num_pdb_violations = json_integer_value(pdb);
        if (e->num_pdb_violations < 0) {
            snprintf(field, sizeof field, "%s.%s.NumPDBViolations", mapname, node);
            return as_diag_set(diag, AS_EINVAL, field,
                               "NumPDBViolations is %lld; it counts violated budgets and must "
                               "be 0 or more",
                               (long long)e->num_pdb_violations);
        }
    }
    const json_t *pods = json_get(v, "Pods");
    if (!pods || json_is_null(pods))
        return AS_OK;
    if (!json_is_array(pods)) {
        snprintf(field, sizeof field, "%s.%s.Pods", mapname, node);
        return as_diag_set(diag, AS_EINVAL, field, "Pods must be an array, not %s",
                           type_name(pods));
    }
    size_t n = json_array_size(pods);
    if (n > EXTARGS_MAX_NAMES) {
        snprintf(field, sizeof field, "%s.%s.Pods", mapname, node);
        return as_diag_set(diag, AS_ETOOBIG, field, "more than 65536 victims on one node");
    }
    e->uids = pool_alloc(p, (n ? n : 1) * sizeof *e->uids);
    if (!meta)
        e->pods = pool_alloc(p, (n ? n : 1) * sizeof *e->pods);
    if (!e->uids || (!meta && !e->pods))
        return as_diag_set(diag, AS_ENOMEM, field, "out of memory");
    for (size_t i = 0; i < n; i++) {
        const json_t *it = json_array_get(pods, i);
        snprintf(field, sizeof field, "%s.%s.Pods[%zu]", mapname, node, i);
        if (!json_is_object(it))
            return as_diag_set(diag, AS_EINVAL, field, "%s must be an object, not %s",
                               meta ? "a MetaPod" : "a victim Pod", type_name(it));
        const json_t *holder = it;
        const char *uidkey = meta ? "UID" : "uid";
        if (!meta) {
            holder = json_get(it, "metadata");
            if (holder && !json_is_null(holder) && !json_is_object(holder)) {
                snprintf(field, sizeof field, "%s.%s.Pods[%zu].metadata", mapname, node, i);
                return as_diag_set(diag, AS_EINVAL, field, "metadata must be an object");
            }
            e->pods[i] = it;
        }
        const char *uid = "";
        const json_t *u = holder ? json_get(holder, uidkey) : NULL;
        if (u && !json_is_null(u)) {
            if (!json_is_string(u)) {
                snprintf(field, sizeof field, "%s.%s.Pods[%zu].%s", mapname, node, i,
                         meta ? "UID" : "metadata.uid");
                return as_diag_set(diag, AS_EINVAL, field, "a pod UID must be a string, not %s",
                                   type_name(u));
            }
            snprintf(field, sizeof field, "%s.%s.Pods[%zu].%s", mapname, node, i,
                     meta ? "UID" : "metadata.uid");
            as_err err = dup_str(p, u, field, &uid, diag);
            if (err)
                return err;
        }
        e->uids[i] = uid;
    }
    e->npods = n;
    return AS_OK;
}

/* See extargs.h. */
as_err extargs_decode_preemption(pool *p, const char *body, size_t len, extargs_preemption *out,
                                 as_diag *diag)
{
    memset(out, 0, sizeof *out);
    as_err err = json_parse(body, len, &out->doc, diag);
    if (err)
        return err;
    json_t *doc = out->doc;
    if (!json_is_object(doc)) {
        err = as_diag_set(diag, AS_EINVAL, "",
                          "the request body must be a JSON object (ExtenderPreemptionArgs), not %s",
                          type_name(doc));
        goto done;
    }
    const json_t *pod = json_get(doc, "Pod");
    if (pod && !json_is_null(pod)) {
        if (!json_is_object(pod)) {
            err = as_diag_set(diag, AS_EINVAL, "Pod", "Pod must be a v1.Pod object, not %s",
                              type_name(pod));
            goto done;
        }
        out->pod = pod;
    }
    const char *mapname = "NodeNameToMetaVictims";
    json_t *map = json_get(doc, mapname);
    out->meta = true;
    if (!map || json_is_null(map)) {
        mapname = "NodeNameToVictims";
        map = json_get(doc, mapname);
        out->meta = false;
    }
    if (!map || json_is_null(map))
        goto done;
    if (!json_is_object(map)) {
        err =
            as_diag_set(diag, AS_EINVAL, mapname, "%s must be an object keyed by node name, not %s",
                        mapname, type_name(map));
        goto done;
    }
    size_t n = json_object_size(map);
    if (n > EXTARGS_MAX_NAMES) {
        err = as_diag_set(diag, AS_ETOOBIG, mapname, "more than 65536 nodes in one request");
        goto done;
    }
    out->entries = pool_alloc(p, (n ? n : 1) * sizeof *out->entries);
    if (!out->entries) {
        err = as_diag_set(diag, AS_ENOMEM, mapname, "out of memory");
        goto done;
    }
    const char *key;
    size_t klen;
    json_t *val;
    json_object_keylen_foreach(map, key, klen, val)
    {
        char field[300];
        snprintf(field, sizeof field, "%s.%.*s", mapname, (int)(klen > 256 ? 256 : klen), key);
        if (klen == 0 || klen > EXTARGS_MAX_NAME_LEN || memchr(key, '\0', klen)) {
            err = as_diag_set(diag, AS_EINVAL, field,
                              "node names must be 1 to 253 bytes without NUL characters");
            goto done;
        }
        const char *node = pool_strndup(p, key, klen);
        if (!node) {
            err = as_diag_set(diag, AS_ENOMEM, field, "out of memory");
            goto done;
        }
        err = decode_victims(p, mapname, node, val, out->meta, &out->entries[out->nentries], diag);
        if (err)
            goto done;
        out->nentries++;
    }
done:
    if (err)
        extargs_preemption_release(out);
    return err;
}

/* See extargs.h. */
void extargs_preemption_release(extargs_preemption *a)
{
    if (a->doc)
        json_decref(a->doc);
    memset(a, 0, sizeof *a);
}

/* See extargs.h. */
as_err extargs_eval_names(pool *p, const extargs_args *a, sched_name **names, size_t *n,
                          size_t **item_index)
{
    *item_index = NULL;
    if (a->nnodes == 0) {
        *names = a->names;
        *n = a->nnames;
        return AS_OK;
    }
    size_t total = a->nnames + a->nnodes;
    sched_name *all = pool_alloc(p, total * sizeof *all);
    size_t *idx = pool_alloc(p, a->nnodes * sizeof *idx);
    size_t size = 16;
    while (size < total * 2)
        size <<= 1;
    uint32_t *tab = a->nnames ? pool_alloc(p, size * sizeof *tab) : NULL;
    if (!all || !idx || (a->nnames && !tab))
        return AS_ENOMEM;
    if (a->nnames)
        memcpy(all, a->names, a->nnames * sizeof *all);
    size_t count = a->nnames;
    if (!tab) {
        /* items are already unique among themselves */
        for (size_t j = 0; j < a->nnodes; j++) {
            all[j] = a->nodes[j].name;
            idx[j] = j;
        }
        count = a->nnodes;
    } else {
        for (size_t i = 0; i < a->nnames; i++) {
            size_t h = (size_t)sched_name_hash(&all[i]) & (size - 1);
            while (tab[h])
                h = (h + 1) & (size - 1);
            tab[h] = (uint32_t)i + 1;
        }
        for (size_t j = 0; j < a->nnodes; j++) {
            const sched_name *nm = &a->nodes[j].name;
            size_t h = (size_t)sched_name_hash(nm) & (size - 1);
            size_t found = (size_t)-1;
            while (tab[h]) {
                const sched_name *o = &all[tab[h] - 1];
                if (o->len == nm->len && memcmp(o->s, nm->s, nm->len) == 0) {
                    found = tab[h] - 1;
                    break;
                }
                h = (h + 1) & (size - 1);
            }
            if (found == (size_t)-1) {
                found = count;
                all[count++] = *nm;
                tab[h] = (uint32_t)found + 1;
            }
            idx[j] = found;
        }
    }
    *names = all;
    *n = count;
    *item_index = idx;
    return AS_OK;
}
