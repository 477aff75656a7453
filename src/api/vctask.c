/*
 * vctask.c - the fast decoders of Volcano's predicate and prioritize
 * bodies and the memo of decoded task Pods (contract in vctask.h).
 */
#include "agentsched/api/vctask.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "agentsched/base/hash.h"
#include "agentsched/base/jscan.h"
#include "agentsched/base/json.h"
#include "agentsched/base/utf8.h"
#include "agentsched/core/cache.h"
#include "agentsched/model/skip.h"

/* ------------------------------------------------------------------ */
/* The DOM path: TaskInfo and NodeInfo objects                          */
/* ------------------------------------------------------------------ */

/* See vctask.h. */
as_err vctask_opt_string(const json_t *obj, const char *key, const char *field, const char **out,
                         as_diag *d)
{
    const json_t *v = json_get(obj, key);
    *out = "";
    if (!v || json_is_null(v))
        return AS_OK;
    if (!json_is_string(v))
        return as_diag_set(d, AS_EINVAL, field, "%s must be a string", field);
    /* a C string would silently cut "a\u0000b" to "a" (another name) */
    const char *s = json_string_value(v);
    size_t len = json_string_length(v);
    if (memchr(s, '\0', len))
        return as_diag_set(d, AS_EINVAL, field, "%s must not contain NUL characters", field);
    /* the decoder guarantees it; the documents built from it need it */
    if (utf8_prefix(s, len) != len)
        return as_diag_set(d, AS_EINVAL, field, "%s must be valid UTF-8", field);
    *out = s;
    return AS_OK;
}

/* res_amount reads a Resource amount: a finite, non-negative number
 * (null = 0), rounded up to an integer. The bound keeps "%.0f" exact and
 * inside int64 after the quantity parser scales it. */
static as_err res_amount(const json_t *v, const char *field, double *out, as_diag *d)
{
    *out = 0;
    if (!v || json_is_null(v))
        return AS_OK;
    if (!json_is_number(v))
        return as_diag_set(d, AS_EINVAL, field, "%s must be a number", field);
    double x = json_number_value(v);
    if (!isfinite(x) || x < 0)
        return as_diag_set(d, AS_EINVAL, field, "%s must be a finite, non-negative number", field);
    if (x > 1e15)
        return as_diag_set(d, AS_ERANGE, field, "%s is too large for a task request (at most 1e15)",
                           field);
    *out = ceil(x);
    return AS_OK;
}

/* set_quantity stores amount (with an optional "m" suffix) as a quantity
 * string under key in obj. key must be valid UTF-8 without NUL (the
 * callers' checks), so a failure here can only be an allocation's. */
static as_err set_quantity(json_t *obj, const char *key, double amount, bool milli)
{
    char q[48];
    snprintf(q, sizeof q, "%.0f%s", amount, milli ? "m" : "");
    return json_object_set_new(obj, key, json_string(q)) ? AS_ENOMEM : AS_OK;
}

/*
 * pod_from_resreq builds a v1 Pod document from the task's identity and
 * Resreq (units in volcano.h) and decodes it, so the request goes through
 * the same validation and accounting as any pod.
 */
static as_err pod_from_resreq(const model_registry *reg, const json_t *task, const json_t *rr,
                              const char *field, model_pod **out, as_diag *d)
{
    char f[160];
    const char *name, *ns, *uid;
    json_t *doc = NULL;
    as_err err;
    snprintf(f, sizeof f, "%s.Name", field);
    if ((err = vctask_opt_string(task, "Name", f, &name, d)))
        return err;
    if (!name[0])
        return as_diag_set(d, AS_EINVAL, f,
                           "a TaskInfo without Pod needs its Name (and Namespace, Resreq)");
    snprintf(f, sizeof f, "%s.Namespace", field);
    if ((err = vctask_opt_string(task, "Namespace", f, &ns, d)))
        return err;
    snprintf(f, sizeof f, "%s.UID", field);
    if ((err = vctask_opt_string(task, "UID", f, &uid, d)))
        return err;

    json_t *requests = json_object();
    if (!requests)
        return as_diag_set(d, AS_ENOMEM, NULL, "out of memory");
    /* "o" steals requests, on failure too */
    json_error_t je;
    doc = json_pack_ex(&je, 0, "{s:{s:s,s:s,s:s},s:{s:[{s:s,s:{s:o}}]}}", "metadata", "name", name,
                       "namespace", ns[0] ? ns : "default", "uid", uid, "spec", "containers",
                       "name", "task", "resources", "requests", requests);
    if (!doc) {
        /* the strings are checked above (opt_string): anything but an
         * allocation failing here is a broken invariant, not a full heap */
        if (json_error_code(&je) == json_error_out_of_memory)
            return as_diag_set(d, AS_ENOMEM, NULL, "out of memory");
        return as_diag_set(d, AS_EINTERNAL, field, "%s: the task's pod could not be built: %s",
                           field, je.text);
    }
    double amount;
    snprintf(f, sizeof f, "%s.Resreq.MilliCPU", field);
    if ((err = res_amount(json_get(rr, "MilliCPU"), f, &amount, d)))
        goto done;
    if (amount > 0 && (err = set_quantity(requests, "cpu", amount, true)))
        goto done;
    snprintf(f, sizeof f, "%s.Resreq.Memory", field);
    if ((err = res_amount(json_get(rr, "Memory"), f, &amount, d)))
        goto done;
    if (amount > 0 && (err = set_quantity(requests, "memory", amount, false)))
        goto done;
    const json_t *sc = json_get(rr, "ScalarResources");
    if (sc && !json_is_null(sc)) {
        if (!json_is_object(sc)) {
            snprintf(f, sizeof f, "%s.Resreq.ScalarResources", field);
            err = as_diag_set(d, AS_EINVAL, f,
                              "%s must be an object of resource name -> milli-units", f);
            goto done;
        }
        const char *k;
        size_t klen;
        json_t *v;
        json_object_keylen_foreach((json_t *)sc, k, klen, v)
        {
            /* the decoder refuses keys with NUL or invalid UTF-8; checked
             * again because a C-string key with either would count as
             * another resource ("nvidia.com/gpu\u0000x" as a GPU) */
            if (klen == 0 || memchr(k, '\0', klen) || utf8_prefix(k, klen) != klen) {
                snprintf(f, sizeof f, "%s.Resreq.ScalarResources", field);
                err = as_diag_set(d, AS_EINVAL, f,
                                  "%s: a resource name is %s; name each scalar resource (e.g. "
                                  "nvidia.com/gpu)",
                                  f,
                                  klen == 0               ? "empty"
                                  : memchr(k, '\0', klen) ? "holding \\u0000 (a NUL character)"
                                                          : "not valid UTF-8");
                goto done;
            }
            snprintf(f, sizeof f, "%s.Resreq.ScalarResources.%.*s", field,
                     (int)as_utf8_excerpt(k, klen, 100), k);
            if ((err = res_amount(v, f, &amount, d)))
                goto done;
            /* "pods" is a count there (not a request); cpu and memory never
             * belong in the scalar map and must not override the fields */
            if (amount == 0 || strcmp(k, "pods") == 0 || strcmp(k, "cpu") == 0 ||
                strcmp(k, "memory") == 0)
                continue;
            if ((err = set_quantity(requests, k, amount, true)))
                goto done;
        }
    }
    err = model_pod_from_json(reg, doc, out, d);
    if (err) {
        snprintf(f, sizeof f, "%s.Resreq", field);
        /* the synthetic document's paths mean nothing to the sender */
        d->field[0] = '\0';
        as_diag_prefix_field(d, f);
    }
done:
    if (err && err == AS_ENOMEM && !d->msg[0])
        as_diag_set(d, err, NULL, "out of memory");
    json_decref(doc);
    return err;
}

/* See vctask.h. */
as_err vctask_task_pod(const model_registry *reg, const json_t *task, const char *field,
                       model_pod **out, as_diag *d)
{
    *out = NULL;
    char f[160];
    if (!json_is_object(task))
        return as_diag_set(d, AS_EINVAL, field, "%s must be a TaskInfo object", field);
    as_err err;
    const json_t *pod = json_get(task, "Pod");
    if (pod && !json_is_null(pod)) {
        snprintf(f, sizeof f, "%s.Pod", field);
        if (!json_is_object(pod))
            return as_diag_set(d, AS_EINVAL, f, "%s must be a v1.Pod object", f);
        err = model_pod_from_json(reg, pod, out, d);
        if (err) {
            as_diag_prefix_field(d, f);
            if (!d->msg[0])
                as_diag_set(d, err, d->field, "%s could not be decoded: %s", f, as_strerror(err));
            return err;
        }
    } else {
        const json_t *rr = json_get(task, "Resreq");
        snprintf(f, sizeof f, "%s.Resreq", field);
        if (!rr || json_is_null(rr))
            return as_diag_set(d, AS_EINVAL, f,
                               "%s needs Pod (the v1.Pod) or Resreq {MilliCPU, Memory, "
                               "ScalarResources}",
                               field);
        if (!json_is_object(rr))
            return as_diag_set(d, AS_EINVAL, f, "%s must be a Resource object", f);
        if ((err = pod_from_resreq(reg, task, rr, field, out, d)))
            return err;
    }
    /* Volcano's task UID is the pod's uid; use it when the Pod has none. */
    if (!(*out)->uid[0]) {
        const char *uid;
        snprintf(f, sizeof f, "%s.UID", field);
        if ((err = vctask_opt_string(task, "UID", f, &uid, d))) {
            model_pod_free(*out);
            *out = NULL;
            return err;
        }
        if (uid[0]) {
            const char *copy = pool_strdup((*out)->pool, uid);
            if (copy)
                (*out)->uid = copy;
        }
    }
    return AS_OK;
}

/* See vctask.h. */
as_err vctask_node_name(const json_t *node, const char *field, const char **name, as_diag *d)
{
    char f[160];
    *name = NULL;
    if (!json_is_object(node))
        return as_diag_set(d, AS_EINVAL, field, "%s must be a NodeInfo object", field);
    snprintf(f, sizeof f, "%s.Name", field);
    const char *s;
    as_err err = vctask_opt_string(node, "Name", f, &s, d);
    if (err)
        return err;
    if (s[0]) {
        *name = s;
        return AS_OK;
    }
    const json_t *n = json_get(node, "Node");
    if (n && !json_is_null(n)) {
        snprintf(f, sizeof f, "%s.Node", field);
        if (!json_is_object(n))
            return as_diag_set(d, AS_EINVAL, f, "%s must be a v1.Node object", f);
        const json_t *meta = json_get(n, "metadata");
        snprintf(f, sizeof f, "%s.Node.metadata", field);
        if (meta && !json_is_null(meta) && !json_is_object(meta))
            return as_diag_set(d, AS_EINVAL, f, "%s must be an object", f);
        snprintf(f, sizeof f, "%s.Node.metadata.name", field);
        if (meta && (err = vctask_opt_string(meta, "name", f, &s, d)))
            return err;
        if (meta && s[0]) {
            *name = s;
            return AS_OK;
        }
    }
    snprintf(f, sizeof f, "%s.Name", field);
    return as_diag_set(d, AS_EINVAL, f, "%s needs its Name (or Node.metadata.name)", field);
}

/* ------------------------------------------------------------------ */
/* NodeInfos seen before                                               */
/* ------------------------------------------------------------------ */

/*
 * Volcano sends a node's NodeInfo byte for byte the same for every task it
 * asks about there, session after session, and most of a predicate body
 * is that NodeInfo (a kubelet's Node with its images, the tasks on the
 * node). A NodeInfo the scan validated is remembered by its length, a
 * hash of its bytes (hash_span) and the depth it was validated at, in a
 * set of SEEN_WAYS chosen by its Name, read from its first member as Go
 * marshals it ({"Name":"...). A later NodeInfo with that Name whose bytes,
 * over the remembered length, hash the same is stepped over without
 * scanning, when it sits no deeper than that depth (the nesting cap): the
 * scan would take the same Name from the same bytes. A node's entry is its
 * latest NodeInfo at the deepest place seen, so predicate's (one level
 * down) and prioritize's (two) share it instead of evicting each other
 * on every call. Hashing costs a fraction of the scan. An entry is two
 * words written and read with relaxed atomics: a torn pair hashes to a
 * mismatch, which only costs a scan.
 */
#define SEEN_WAYS  4
#define SEEN_SETS  4096  /* a power of two: 16,384 NodeInfos, 256 KiB */
#define SEEN_DEPTH 0x7fu /* lentag's low bits: depth + 1 (JSCAN_MAX_DEPTH < 127) */

typedef struct seen_ent {
    uint64_t key;    /* hash_span of the bytes; 0: empty */
    uint64_t lentag; /* length << 32 | the Name's tag | (depth + 1) */
} seen_ent;

typedef struct seen_tab {
    seen_ent ent[SEEN_SETS * SEEN_WAYS];
} seen_tab;

/* A NodeInfo being scanned: where it starts and the Name its first member
 * holds, if it has that shape (name NULL otherwise). */
typedef struct seen_try {
    const char *start;
    const char *name;
    size_t name_len;
    uint32_t tag; /* the name's hash, SEEN_DEPTH bits clear */
    uint64_t nh;  /* hash_bytes of the name */
} seen_try;

static uint64_t seen_key(const char *p, size_t len)
{
    uint64_t k = hash_span(p, len);
    return k ? k : 1;
}

static seen_ent *seen_set(seen_tab *t, uint64_t nh)
{
    return &t->ent[(size_t)(nh >> (64 - __builtin_ctz(SEEN_SETS))) * SEEN_WAYS];
}

/* seen_step: the NodeInfo at s->p was seen before; s->p is past it and
 * try holds its Name. False (s untouched) otherwise, try then ready for
 * seen_note after the scan. */
static bool seen_step(seen_tab *t, jscan *s, seen_try *try)
{
    static const char pre[] = "{\"Name\":\"";
    const size_t pl = sizeof pre - 1;
    memset(try, 0, sizeof *try);
    try->start = s->p;
    size_t avail = (size_t)(s->end - s->p);
    if (!t || avail < pl || memcmp(s->p, pre, pl) != 0)
        return false;
    const char *n = s->p + pl, *q = memchr(n, '"', avail - pl < 256 ? avail - pl : 256);
    if (!q || q == n)
        return false;
    try->name = n;
    try->name_len = (size_t)(q - n);
    try->nh = hash_bytes(n, try->name_len);
    try->tag = (uint32_t)try->nh & ~SEEN_DEPTH;
    seen_ent *e = seen_set(t, try->nh);
    for (int w = 0; w < SEEN_WAYS; w++) {
        uint64_t lt = __atomic_load_n(&e[w].lentag, __ATOMIC_RELAXED);
        size_t len = (size_t)(lt >> 32);
        unsigned depth = (unsigned)lt & SEEN_DEPTH;
        if (((uint32_t)lt & ~SEEN_DEPTH) != try->tag || !depth || (unsigned)s->depth > depth - 1 ||
            len > avail)
            continue;
        if (seen_key(s->p, len) == __atomic_load_n(&e[w].key, __ATOMIC_RELAXED)) {
            s->p += len;
            return true;
        }
    }
    return false;
}

/* seen_note remembers the NodeInfo try started, now scanned up to s->p,
 * whose Name the scan took at name: only when that is the first member's
 * (the Name seen_step reads). The same bytes already known deeper stay. */
static void seen_note(seen_tab *t, const jscan *s, const seen_try *try, const char *name)
{
    size_t len = (size_t)(s->p - try->start);
    if (!t || !try->name || name != try->name || len > UINT32_MAX || s->depth < 0 ||
        (unsigned)s->depth >= SEEN_DEPTH)
        return;
    uint64_t key = seen_key(try->start, len);
    seen_ent *e = seen_set(t, try->nh);
    /* the way holding this Name, else an empty one, else one the key picks */
    int way = (int)(key & (SEEN_WAYS - 1));
    for (int w = SEEN_WAYS - 1; w >= 0; w--) {
        uint64_t lt = __atomic_load_n(&e[w].lentag, __ATOMIC_RELAXED);
        if (((uint32_t)lt & ~SEEN_DEPTH) == try->tag && (lt & SEEN_DEPTH)) {
            way = w;
            break;
        }
        if (!lt)
            way = w;
    }
    uint64_t old = __atomic_load_n(&e[way].lentag, __ATOMIC_RELAXED);
    unsigned depth = (unsigned)s->depth + 1;
    if ((old >> 32) == len && ((uint32_t)old & ~SEEN_DEPTH) == try->tag &&
        (old & SEEN_DEPTH) > depth && __atomic_load_n(&e[way].key, __ATOMIC_RELAXED) == key)
        depth = (unsigned)old & SEEN_DEPTH;
    __atomic_store_n(&e[way].lentag, (uint64_t)len << 32 | try->tag | depth, __ATOMIC_RELAXED);
    __atomic_store_n(&e[way].key, key, __ATOMIC_RELAXED);
}

/* The memo's entries (its functions are further down, after the
 * scanners that use its NodeInfo table). */
struct vctask_ent {
    uint64_t hash; /* of the Pod's bytes */
    size_t len;
    int gen;       /* the registry's generation it was decoded under */
    int refs;      /* the slot's (while live) plus every lender's */
    uint64_t used; /* the memo's tick at its last hit or insertion */
    bool live;     /* still in its slot */
    bool memo;     /* ever in a slot (false: the caller's alone) */
    model_pod *pod;
};

/* Four ways a set: tasks whose hashes share a set all stay (direct
 * mapping made such pairs evict each other on every alternate call; 64
 * tasks asked in turn left 4 colliding pairs, and two ways 2 sets of 3). */
#define MEMO_WAYS 4
#define MEMO_SETS (VCTASK_MEMO_SLOTS / MEMO_WAYS) /* a power of two */

struct vctask_memo {
    seen_tab seen; /* NodeInfos the scan validated */
    pthread_mutex_t mu;
    vctask_ent *slot[VCTASK_MEMO_SLOTS];
    uint64_t tick; /* counts lookups: an entry's last use */
};

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

/* find_key walks the object at s->p for the one key w names: take reads
 * its value (false: not plain); other keys are skipped, a near miss noted.
 * True when the key was there, exactly once, and taken. */
static bool find_key(jscan *s, want *w, bool (*take)(jscan *s, void *arg), void *arg)
{
    if (*s->p != '{' || !jscan_enter(s))
        return false;
    bool first = true;
    const char *k;
    size_t klen;
    int r;
    while ((r = next_key(s, &first, &k, &klen)) == 1) {
        int m = key_is(w, k, klen);
        if (m == 1) {
            if (w->exact || !take(s, arg))
                return false;
            w->exact = true;
            continue;
        }
        if (m == 2)
            w->fold = true;
        if (!jscan_value(s))
            return false;
    }
    return r == 0 && w->exact;
}

/* take_pod: a TaskInfo's "Pod", an object. */
static bool take_pod(jscan *s, void *out)
{
    return *s->p == '{' && scan_pod(s, out);
}

/* scan_task reads a TaskInfo for its Pod (an object, spelt exactly). */
static bool scan_task(jscan *s, vctask_pod_span *out)
{
    want w = {"Pod", 3, false, false};
    return find_key(s, &w, take_pod, out);
}

/* take_name: a NodeInfo's "Name", a plain non-empty string. */
static bool take_name(jscan *s, void *arg)
{
    model_span *n = arg;
    bool esc;
    return *s->p == '"' && jscan_string(s, &n->s, &n->len, &esc) && !esc && n->len;
}

/* scan_node reads a NodeInfo for its Name (a plain non-empty string):
 * stepped over when t has seen it, else scanned and then remembered in t
 * (NULL: no table); counted in *c. */
static bool scan_node(jscan *s, seen_tab *t, const char **name, size_t *len, vctask_seen *c)
{
    seen_try try;
    if (seen_step(t, s, &try)) {
        *name = try.name;
        *len = try.name_len;
        c->stepped++;
        return true;
    }
    c->scanned++;
    want w = {"Name", 4, false, false};
    model_span n = {NULL, 0};
    if (!find_key(s, &w, take_name, &n))
        return false;
    seen_note(t, s, &try, n.s);
    *name = n.s;
    *len = n.len;
    return true;
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

/* What a verb reads beside the task: predicate's "node" Name, or
 * prioritize's "nodes" Names (when names is set, from pool p). */
typedef struct other {
    const char **name;
    size_t *name_len;
    pool *p;
    sched_name **names;
    size_t *n;
    seen_tab *tab;     /* NULL: no memo */
    vctask_seen *seen; /* how the NodeInfos were taken */
} other;

static bool scan_nodes(jscan *s, const other *o);

/* scan_body opens the body's object (s, reporting to quiet, stays the
 * caller's) and reads its keys: "task" (w[0]) into pod, w[1]'s key into o;
 * other keys are skipped, near misses of either noted in their fold. False
 * on a malformed body, a key given twice or a value the verb cannot take
 * plainly. */
static bool scan_body(jscan *s, as_diag *quiet, const char *body, size_t len, want w[2],
                      vctask_pod_span *pod, const other *o)
{
    if (!scan_root(s, body, len, quiet))
        return false;
    bool first = true;
    const char *k;
    size_t klen;
    int r;
    while ((r = next_key(s, &first, &k, &klen)) == 1) {
        int m0 = key_is(&w[0], k, klen), m1 = key_is(&w[1], k, klen);
        if (m0 == 1 || m1 == 1) {
            want *x = m0 == 1 ? &w[0] : &w[1];
            if (x->exact)
                return false;
            x->exact = true;
            bool ok = m0 == 1    ? scan_task(s, pod)
                      : o->names ? scan_nodes(s, o)
                                 : scan_node(s, o->tab, o->name, o->name_len, o->seen);
            if (!ok)
                return false;
            continue;
        }
        w[0].fold |= m0 == 2;
        w[1].fold |= m1 == 2;
        if (!jscan_value(s))
            return false;
    }
    return r == 0;
}

/* See vctask.h. */
bool vctask_scan_predicate(vctask_memo *m, const char *body, size_t len, vctask_pod_span *pod,
                           const char **name, size_t *name_len, vctask_seen *seen)
{
    memset(pod, 0, sizeof *pod);
    *name = NULL;
    *name_len = 0;
    *seen = (vctask_seen){0, 0};
    as_diag quiet;
    jscan s;
    want w[2] = {{"task", 4, false, false}, {"node", 4, false, false}};
    other o = {.name = name, .name_len = name_len, .tab = m ? &m->seen : NULL, .seen = seen};
    return scan_body(&s, &quiet, body, len, w, pod, &o) && w[0].exact && w[1].exact && scan_end(&s);
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
static bool scan_nodes(jscan *s, const other *o)
{
    pool *p = o->p;
    sched_name **names = o->names;
    size_t *n = o->n;
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
        if (!scan_node(s, o->tab, &name, &len, o->seen))
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
bool vctask_scan_prioritize(vctask_memo *m, pool *p, const char *body, size_t len,
                            vctask_pod_span *pod, sched_name **names, size_t *n, vctask_seen *seen)
{
    memset(pod, 0, sizeof *pod);
    *names = NULL;
    *n = 0;
    *seen = (vctask_seen){0, 0};
    as_diag quiet;
    jscan s;
    want w[2] = {{"task", 4, false, false}, {"nodes", 5, false, false}};
    other o = {.p = p, .names = names, .n = n, .tab = m ? &m->seen : NULL, .seen = seen};
    if (!scan_body(&s, &quiet, body, len, w, pod, &o))
        return false;
    if (!*names) /* absent: an empty array for the caller */
        *names = pool_alloc(p, sizeof **names);
    return w[0].exact && settle(&w[1]) && *names && scan_end(&s);
}

/* ------------------------------------------------------------------ */
/* The memo                                                            */
/* ------------------------------------------------------------------ */

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

/* decode builds the Pod span into a model pod as vctask_task_pod does
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
    /* the hash's top bits: the old index, its low bits folded with its
     * high half, put 7 of 64 Pods that differ in a few digits into one
     * set of 64 (either half alone: at most 4) */
    size_t set = (size_t)(h >> (64 - __builtin_ctz(MEMO_SETS)));
    if (keyed) {
        pthread_mutex_lock(&m->mu);
        for (size_t w = 0; w < MEMO_WAYS; w++) {
            vctask_ent *e = m->slot[set * MEMO_WAYS + w];
            if (e && matches(e, sp, h, gen)) {
                e->refs++;
                e->used = ++m->tick;
                pthread_mutex_unlock(&m->mu);
                *pod = e->pod;
                *ent = e;
                *hit = true;
                return AS_OK;
            }
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
    *e = (vctask_ent){.hash = h, .len = sp->pod_len, .gen = gen, .refs = 1, .pod = p};
    /* remembered only when it is what the request named */
    if (keyed && matches(e, sp, h, gen)) {
        pthread_mutex_lock(&m->mu);
        /* an empty way, else the least recently used */
        size_t i = set * MEMO_WAYS;
        for (size_t x = set * MEMO_WAYS; x < (set + 1) * MEMO_WAYS; x++) {
            if (!m->slot[x]) {
                i = x;
                break;
            }
            if (m->slot[x]->used < m->slot[i]->used)
                i = x;
        }
        e->used = ++m->tick;
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
