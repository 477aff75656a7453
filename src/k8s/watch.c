/* watch.c - list+watch reflectors for Nodes, Pods and NodeShards. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agentsched/base/json.h"
#include "agentsched/base/clock.h"
#include "agentsched/base/jscan.h"
#include "agentsched/base/log.h"
#include "agentsched/k8s/watch.h"
#include "agentsched/model/podscan.h"
#include "agentsched/model/skip.h"
#include "agentsched/model/specmemo.h"
#include "internal.h"

#define RV_MAX      128
#define ERRBODY_CAP (64 * 1024)
#define SHARDS_MAX  4096
/* libcurl's receive buffer for watch streams (its default is 16 KiB). */
#define WATCH_RECV_BUFFER (256L * 1024)
/* The watch wire's answer cap: an error's Status (ERRBODY_CAP); a stream
 * holds one read (16 KiB) and a partial chunk-size line at a time. */
#define WATCH_WIRE_CAP ERRBODY_CAP

/* See watch.h. */
const struct json_skip *k8s_stream_skip(k8s_kind kind)
{
    switch (kind) {
    case K8S_KIND_NODE:
        return model_skip_node();
    case K8S_KIND_POD:
        return model_skip_pod_watch();
    default:
        return NULL; /* NodeShards: small, and read whole */
    }
}

static const char *const kind_obj[K8S_KIND__COUNT] = {"Node", "Pod", "NodeShard"};

/* ================================================================== */
/* Shard table                                                         */
/* ================================================================== */

static void free_strv(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

/* shard_free_fields frees every field of *s and zeroes it; s itself is not
 * freed. */
static void shard_free_fields(k8s_shard *s)
{
    free(s->name);
    free(s->resource_version);
    free_strv(s->nodes_desired, s->n_desired);
    free_strv(s->nodes_in_use, s->n_in_use);
    free_strv(s->nodes_to_remove, s->n_to_remove);
    free_strv(s->nodes_to_add, s->n_to_add);
    free(s->last_update_time);
    memset(s, 0, sizeof *s);
}

/* See watch.h. */
void k8s_shards_free(k8s_shard *shards, size_t n)
{
    for (size_t i = 0; i < n; i++)
        shard_free_fields(&shards[i]);
    free(shards);
}

static as_err strv_from_json(const json_t *arr, char ***out, size_t *n)
{
    *out = NULL;
    *n = 0;
    if (!json_is_array(arr) || json_array_size(arr) == 0)
        return AS_OK;
    size_t cnt = json_array_size(arr);
    char **v = calloc(cnt, sizeof *v);
    if (!v)
        return AS_ENOMEM;
    size_t k = 0;
    for (size_t i = 0; i < cnt; i++) {
        const char *s = json_string_value(json_array_get(arr, i));
        if (!s)
            continue;
        if (!(v[k] = strdup(s))) {
            free_strv(v, k);
            return AS_ENOMEM;
        }
        k++;
    }
    *out = v;
    *n = k;
    return AS_OK;
}

static as_err strv_copy(char *const *src, size_t n, char ***out)
{
    *out = NULL;
    if (!n)
        return AS_OK;
    char **v = calloc(n, sizeof *v);
    if (!v)
        return AS_ENOMEM;
    for (size_t i = 0; i < n; i++)
        if (!(v[i] = strdup(src[i]))) {
            free_strv(v, i);
            return AS_ENOMEM;
        }
    *out = v;
    return AS_OK;
}

/* See watch.h. Entries are compared by their RFC 3339 times, which the
 * apiserver writes in UTC with a fixed width, so strcmp orders them. */
void k8s_shard_managers(const json_t *managed_fields, k8s_shard *s)
{
    s->desired_manager[0] = s->desired_time[0] = 0;
    s->status_manager[0] = s->status_time[0] = 0;
    size_t i;
    const json_t *e;
    json_array_foreach(managed_fields, i, e)
    {
        const char *mgr = json_string_value(json_object_get(e, "manager"));
        const char *t = json_string_value(json_object_get(e, "time"));
        const char *sub = json_string_value(json_object_get(e, "subresource"));
        const json_t *f = json_object_get(e, "fieldsV1");
        if (!mgr || !*mgr)
            continue;
        if (!t)
            t = "";
        if (sub && strcmp(sub, "status") == 0) {
            if (json_object_get(f, "f:status") && strcmp(t, s->status_time) >= 0) {
                snprintf(s->status_manager, sizeof s->status_manager, "%s", mgr);
                snprintf(s->status_time, sizeof s->status_time, "%s", t);
            }
            continue;
        }
        /* Ownership of a field moves to the writer that changes it, so one
         * entry owns nodesDesired; the newest wins should two claim it. */
        if (json_object_get(json_object_get(f, "f:spec"), "f:nodesDesired") &&
            strcmp(t, s->desired_time) >= 0) {
            snprintf(s->desired_manager, sizeof s->desired_manager, "%s", mgr);
            snprintf(s->desired_time, sizeof s->desired_time, "%s", t);
        }
    }
}

static as_err shard_from_json(const json_t *obj, k8s_shard *s)
{
    memset(s, 0, sizeof *s);
    const json_t *md = json_object_get(obj, "metadata");
    const char *name = json_string_value(json_object_get(md, "name"));
    if (!name || !*name)
        return AS_EINVAL;
    const char *rv = json_string_value(json_object_get(md, "resourceVersion"));
    const json_t *spec = json_object_get(obj, "spec");
    const json_t *st = json_object_get(obj, "status");
    const char *lut = json_string_value(json_object_get(st, "lastUpdateTime"));
    as_err err = AS_ENOMEM;
    if (!(s->name = strdup(name)) || !(s->resource_version = strdup(rv ? rv : "")) ||
        (lut && !(s->last_update_time = strdup(lut))))
        goto fail;
    if ((err = strv_from_json(json_object_get(spec, "nodesDesired"), &s->nodes_desired,
                              &s->n_desired)) ||
        (err = strv_from_json(json_object_get(st, "nodesInUse"), &s->nodes_in_use, &s->n_in_use)) ||
        (err = strv_from_json(json_object_get(st, "nodesToRemove"), &s->nodes_to_remove,
                              &s->n_to_remove)) ||
        (err = strv_from_json(json_object_get(st, "nodesToAdd"), &s->nodes_to_add, &s->n_to_add)))
        goto fail;
    k8s_shard_managers(json_object_get(md, "managedFields"), s);
    return AS_OK;
fail:
    shard_free_fields(s);
    return err;
}

static as_err shard_copy(const k8s_shard *src, k8s_shard *dst)
{
    memset(dst, 0, sizeof *dst);
    as_err err = AS_ENOMEM;
    if (!(dst->name = strdup(src->name)) ||
        !(dst->resource_version = strdup(src->resource_version)) ||
        (src->last_update_time && !(dst->last_update_time = strdup(src->last_update_time))))
        goto fail;
    if ((err = strv_copy(src->nodes_desired, src->n_desired, &dst->nodes_desired)))
        goto fail;
    dst->n_desired = src->n_desired;
    if ((err = strv_copy(src->nodes_in_use, src->n_in_use, &dst->nodes_in_use)))
        goto fail;
    dst->n_in_use = src->n_in_use;
    if ((err = strv_copy(src->nodes_to_remove, src->n_to_remove, &dst->nodes_to_remove)))
        goto fail;
    dst->n_to_remove = src->n_to_remove;
    if ((err = strv_copy(src->nodes_to_add, src->n_to_add, &dst->nodes_to_add)))
        goto fail;
    dst->n_to_add = src->n_to_add;
    memcpy(dst->desired_manager, src->desired_manager, sizeof dst->desired_manager);
    memcpy(dst->desired_time, src->desired_time, sizeof dst->desired_time);
    memcpy(dst->status_manager, src->status_manager, sizeof dst->status_manager);
    memcpy(dst->status_time, src->status_time, sizeof dst->status_time);
    return AS_OK;
fail:
    shard_free_fields(dst);
    return err;
}

/* See watch.h. */
as_err k8s_shards_copy(k8s_client *k, k8s_shard **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    pthread_mutex_lock(&k->shard_mu);
    as_err err = AS_OK;
    if (k->nshards) {
        k8s_shard *v = calloc(k->nshards, sizeof *v);
        if (!v) {
            err = AS_ENOMEM;
            goto done;
        }
        for (size_t i = 0; i < k->nshards; i++)
            if ((err = shard_copy(&k->shards[i], &v[i]))) {
                k8s_shards_free(v, i);
                goto done;
            }
        *out = v;
        *n = k->nshards;
    }
done:
    pthread_mutex_unlock(&k->shard_mu);
    return err;
}

/* Finds name's index in the sorted table, or its insertion point (*found false). */
static size_t shard_find(k8s_shard *v, size_t n, const char *name, bool *found)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = strcmp(v[mid].name, name);
        if (c == 0) {
            *found = true;
            return mid;
        }
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    *found = false;
    return lo;
}

/* Upserts (takes s's fields) or deletes name in the table. */
static as_err shard_table_apply(k8s_client *k, k8s_shard *s, bool del)
{
    as_err err = AS_OK;
    pthread_mutex_lock(&k->shard_mu);
    bool found;
    size_t i = shard_find(k->shards, k->nshards, s->name, &found);
    if (del) {
        if (found) {
            shard_free_fields(&k->shards[i]);
            memmove(&k->shards[i], &k->shards[i + 1], (k->nshards - i - 1) * sizeof *k->shards);
            k->nshards--;
        }
        shard_free_fields(s);
    } else if (found) {
        shard_free_fields(&k->shards[i]);
        k->shards[i] = *s;
    } else if (k->nshards >= SHARDS_MAX) {
        shard_free_fields(s);
        err = AS_ELIMIT;
    } else {
        k8s_shard *nv = realloc(k->shards, (k->nshards + 1) * sizeof *nv);
        if (!nv) {
            shard_free_fields(s);
            err = AS_ENOMEM;
        } else {
            k->shards = nv;
            memmove(&nv[i + 1], &nv[i], (k->nshards - i) * sizeof *nv);
            nv[i] = *s;
            k->nshards++;
        }
    }
    pthread_mutex_unlock(&k->shard_mu);
    return err;
}

static int shard_cmp(const void *a, const void *b)
{
    return strcmp(((const k8s_shard *)a)->name, ((const k8s_shard *)b)->name);
}

static void shard_table_clear(k8s_client *k)
{
    pthread_mutex_lock(&k->shard_mu);
    k8s_shards_free(k->shards, k->nshards);
    k->shards = NULL;
    k->nshards = 0;
    pthread_mutex_unlock(&k->shard_mu);
}

static void shard_notify(k8s_client *k)
{
    if (k && k->cfg.shard_hook)
        k->cfg.shard_hook(k->cfg.shard_hook_arg, k);
}

/* ================================================================== */
/* Event decoding                                                      */
/* ================================================================== */

struct k8s_stream {
    k8s_kind kind;
    cache *cache;
    model_registry *reg;
    k8s_client *client; /* may be NULL */
    buf line;           /* partial line carried between feeds (capped) */
    size_t max_line;
    char rv[RV_MAX];
    uint64_t events;
    uint64_t briefs;       /* pod events applied from their brief, not decoded */
    uint64_t fields;       /* pod events built from their fields and a remembered spec */
    model_specmemo *specs; /* pods: decoded specs by their text */
    char *scratch;         /* a spec's projection (specmemo.h), grown to the longest */
    size_t scratch_cap;
    bool discard; /* tests/fuzz: nothing */
};

/* See watch.h. */
as_err k8s_stream_new(k8s_kind kind, cache *c, k8s_client *client, size_t max_line,
                      k8s_stream **out)
{
    *out = NULL;
    if ((int)kind < 0 || kind >= K8S_KIND__COUNT || !c)
        return AS_EINVAL;
    k8s_stream *s = calloc(1, sizeof *s);
    if (!s)
        return AS_ENOMEM;
    s->kind = kind;
    s->cache = c;
    s->reg = cache_registry(c);
    s->client = client;
    s->max_line = max_line ? max_line : ((size_t)8 << 20);
    buf_init(&s->line, s->max_line);
    if (kind == K8S_KIND_POD && model_specmemo_new(true, &s->specs) != AS_OK) {
        free(s);
        return AS_ENOMEM;
    }
    *out = s;
    return AS_OK;
}

/* See watch.h. */
void k8s_stream_free(k8s_stream *s)
{
    if (!s)
        return;
    buf_free(&s->line);
    model_specmemo_free(s->specs);
    free(s->scratch);
    free(s);
}

/* See watch.h. */
void k8s_stream_reset(k8s_stream *s, const char *rv)
{
    buf_reset(&s->line);
    if (rv)
        snprintf(s->rv, sizeof s->rv, "%s", rv);
}

/* See watch.h. */
const char *k8s_stream_rv(const k8s_stream *s)
{
    return s->rv;
}

/* See watch.h. */
uint64_t k8s_stream_events(const k8s_stream *s)
{
    return s->events;
}

/* See watch.h. */
uint64_t k8s_stream_briefs(const k8s_stream *s)
{
    return s->briefs;
}

/* See watch.h. */
uint64_t k8s_stream_fields(const k8s_stream *s)
{
    return s->fields;
}

static void note_rv(k8s_stream *s, const json_t *obj)
{
    const char *rv =
        json_string_value(json_object_get(json_object_get(obj, "metadata"), "resourceVersion"));
    if (rv && *rv && strlen(rv) < sizeof s->rv)
        memcpy(s->rv, rv, strlen(rv) + 1);
}

/* The list API omits kind/apiVersion on items; decoders may want them. */
static void ensure_kind(json_t *obj, k8s_kind kind)
{
    if (!json_object_get(obj, "kind"))
        json_object_set_new(obj, "kind", json_string(kind_obj[kind]));
}

static void apply_node(k8s_stream *s, k8s_event_type ev, json_t *obj)
{
    const char *name = json_string_value(json_object_get(json_object_get(obj, "metadata"), "name"));
    if (ev == K8S_EV_DELETED) {
        if (name)
            cache_node_remove(s->cache, name);
        return;
    }
    model_node *n = NULL;
    as_diag d = {{0}, {0}};
    as_err err = model_node_from_json(s->reg, obj, &n, &d);
    if (err) {
        /* A node we cannot read must not stay schedulable with an old spec. */
        log_warn("msg=\"ignoring node the model cannot decode\" node=%s field=%s err=\"%s\"",
                 name ? name : "?", d.field, d.msg);
        if (name)
            cache_node_remove(s->cache, name);
        return;
    }
    err = cache_node_upsert(s->cache, n); /* takes n */
    if (err == AS_ELIMIT)
        log_error("msg=\"cache rejected node: it holds its maximum of %zu nodes; this cluster is "
                  "larger than agentsched supports\" node=%s",
                  (size_t)CACHE_MAX_NODES, name ? name : "?");
    else if (err)
        log_warn("msg=\"cache rejected node\" node=%s err=%s", name ? name : "?", as_strerror(err));
}

static void pod_hook(k8s_stream *s, k8s_event_type ev, model_pod *p)
{
    k8s_client *k = s->client;
    if (k && k->cfg.pod_hook && k->cfg.pod_hook(k->cfg.pod_hook_arg, ev, p))
        return; /* the hook took p */
    model_pod_free(p);
}

/* pod_upsert puts p (owned) into the cache and hands it to the hook. */
static void pod_upsert(k8s_stream *s, k8s_event_type ev, model_pod *p)
{
    as_err err = cache_pod_upsert(s->cache, p);
    if (err == AS_ELIMIT)
        log_error("msg=\"cache rejected pod: it holds its maximum of %zu pods\" pod=%s/%s",
                  (size_t)CACHE_MAX_PODS, p->ns, p->name);
    else if (err)
        log_warn("msg=\"cache rejected pod\" pod=%s/%s err=%s", p->ns, p->name, as_strerror(err));
    pod_hook(s, ev, p);
}

/* decode_pod decodes obj; with mk (the keys a spec memo lookup missed
 * under) worth remembering, through its spec decoded apart, which is then
 * remembered. */
static as_err decode_pod(k8s_stream *s, json_t *obj, const model_specmemo_keys *mk, model_pod **out,
                         as_diag *d)
{
    model_pod_spec *spec = NULL;
    as_diag scratch = {{0}, {0}};
    if (mk && mk->admit &&
        model_pod_spec_from_json(s->reg, json_object_get(obj, "spec"), &spec, &scratch) == AS_OK) {
        as_err err = model_pod_from_json_spec(s->reg, obj, spec, out, d);
        if (!err)
            model_specmemo_put(s->specs, mk, spec);
        model_pod_spec_unref(spec);
        return err;
    }
    /* no memo, or a spec it refuses: the whole pod's decode says why */
    return model_pod_from_json(s->reg, obj, out, d);
}

static void apply_pod(k8s_stream *s, k8s_event_type ev, json_t *obj, uint64_t digest,
                      const model_specmemo_keys *mk)
{
    model_pod *p = NULL;
    as_diag d = {{0}, {0}};
    as_err derr = decode_pod(s, obj, ev == K8S_EV_DELETED ? NULL : mk, &p, &d);
    if (!derr)
        p->digest = digest;
    if (ev == K8S_EV_DELETED) {
        char uid[600];
        model_pod_key_json(obj, uid, sizeof uid);
        cache_pod_delete(s->cache, uid); /* ENOTFOUND: it held no capacity */
        if (!derr)
            pod_hook(s, ev, p);
        return;
    }
    if (derr) {
        /* Keep what the cache had: releasing usage could double-book. */
        char uid[600];
        model_pod_key_json(obj, uid, sizeof uid);
        log_warn("msg=\"ignoring pod update the model cannot decode\" pod=%s field=%s err=\"%s\"",
                 uid, d.field, d.msg);
        return;
    }
    pod_upsert(s, ev, p);
}

static void apply_shard(k8s_stream *s, k8s_event_type ev, json_t *obj)
{
    if (!s->client)
        return;
    k8s_shard sh;
    if (shard_from_json(obj, &sh) != AS_OK) {
        log_warn("msg=\"ignoring malformed NodeShard\"");
        return;
    }
    as_err err = shard_table_apply(s->client, &sh, ev == K8S_EV_DELETED);
    if (err)
        log_warn("msg=\"NodeShard table update failed\" err=%s", as_strerror(err));
    shard_notify(s->client);
}

/* Applies one object (watch event or list item); digest: the pod's
 * (model_pod_digest), 0 when unknown; mk: the keys its spec was missed
 * under in the spec memo, NULL when not looked up. */
static void apply_object(k8s_stream *s, k8s_event_type ev, json_t *obj, uint64_t digest,
                         const model_specmemo_keys *mk)
{
    ensure_kind(obj, s->kind);
    switch (s->kind) {
    case K8S_KIND_NODE:
        apply_node(s, ev, obj);
        break;
    case K8S_KIND_POD:
        apply_pod(s, ev, obj, digest, mk);
        break;
    default:
        apply_shard(s, ev, obj);
        break;
    }
}

/* A pod event's text read by the scanner alone (k8s_stream_brief). */
typedef struct pod_event_brief {
    k8s_event_type type; /* K8S_EV_BOOKMARK for anything but the three */
    bool scanned;        /* an object was scanned: brief is set */
    model_pod_brief brief;
    model_span obj; /* the object's text */
} pod_event_brief;

/* scan_pod_event reads the event's type and its object's brief; false
 * when the line is not what a brief can stand for (the full path then
 * says why, if anything is wrong). */
static bool scan_pod_event(const char *line, size_t len, pod_event_brief *out)
{
    as_diag d = {{0}, {0}};
    jscan sc = {.base = line, .p = line, .end = line + len, .diag = &d};
    out->type = K8S_EV_BOOKMARK;
    out->scanned = false;
    bool first = true, typed = false;
    jscan_ws(&sc);
    if (sc.p >= sc.end || *sc.p != '{' || !jscan_enter(&sc))
        return false;
    const char *k;
    size_t klen;
    bool kesc;
    int r;
    while ((r = jscan_next_key(&sc, &first, &k, &klen, &kesc)) == 1) {
        if (kesc)
            return false;
        if (klen == 6 && !memcmp(k, "object", 6)) {
            jscan_ws(&sc);
            const char *o = sc.p;
            if (out->scanned || !model_podscan(&sc, &out->brief))
                return false;
            out->obj = (model_span){o, (size_t)(sc.p - o)};
            out->scanned = true;
        } else if (klen == 4 && !memcmp(k, "type", 4)) {
            const char *t;
            size_t tlen;
            bool esc;
            jscan_ws(&sc);
            if (typed || sc.p >= sc.end || *sc.p != '"' || !jscan_string(&sc, &t, &tlen, &esc))
                return false;
            typed = true;
            if (tlen == 5 && !memcmp(t, "ADDED", 5))
                out->type = K8S_EV_ADDED;
            else if (tlen == 8 && !memcmp(t, "MODIFIED", 8))
                out->type = K8S_EV_MODIFIED;
            else if (tlen == 7 && !memcmp(t, "DELETED", 7))
                out->type = K8S_EV_DELETED;
        } else if (!jscan_value(&sc)) {
            return false;
        }
    }
    if (r != 0)
        return false;
    jscan_ws(&sc);
    return sc.p == sc.end && typed && out->scanned;
}

/* applied_from_text counts an event applied without its DOM and notes
 * its resourceVersion (which the callers checked fits). */
static void applied_from_text(k8s_stream *s, const model_pod_brief *b)
{
    if (b->resource_version.len) {
        memcpy(s->rv, b->resource_version.s, b->resource_version.len);
        s->rv[b->resource_version.len] = '\0';
    }
    s->events++;
}

/* apply_brief applies a pod event from its brief when that is exact
 * (podscan.h, cache_pod_touch): every DELETED event (the cache and the
 * hooks need only the pod's key, node and scheduler), and a MODIFIED
 * event of a pod the cache holds on that node from a text with the same
 * digest. True when applied (the resourceVersion noted); false: decode. */
static bool apply_brief(k8s_stream *s, const pod_event_brief *pe, uint64_t digest)
{
    const model_pod_brief *b = &pe->brief;
    if (!b->plain || b->resource_version.len >= sizeof s->rv)
        return false;
    char uid[600];
    if (!model_pod_brief_key(b, uid, sizeof uid))
        return false;
    bool deleted = pe->type == K8S_EV_DELETED;
    if (!deleted && !(pe->type == K8S_EV_MODIFIED && b->node_name.len))
        return false;
    model_pod *p = NULL;
    if (model_pod_from_brief(b, &p) != AS_OK)
        return false;
    if (deleted) {
        cache_pod_delete(s->cache, uid); /* ENOTFOUND: it held no capacity */
    } else if (!cache_pod_touch(s->cache, uid, b->node_name.s, b->node_name.len, digest)) {
        model_pod_free(p);
        return false;
    }
    pod_hook(s, pe->type, p);
    applied_from_text(s, b);
    s->briefs++;
    return true;
}

/* Labels a pod may have to be built from its fields. */
#define FIELDS_MAX_LABELS 64

/* apply_fields applies an ADDED or MODIFIED pod event without a DOM when
 * its spec's text, or that text less what the model never reads, was
 * decoded before, for this or another node (specmemo.h,
 * model_skip_pod_spec_key): the pod is built from the fields the
 * scanner reads (model_pod_from_fields), the same pod the decode would
 * give. True when applied; false: decode, with *mk the keys the lookup
 * missed under (borrowing the line and s->scratch) when mk->text is set. */
static bool apply_fields(k8s_stream *s, const pod_event_brief *pe, uint64_t digest,
                         model_specmemo_keys *mk)
{
    const model_pod_brief *b = &pe->brief;
    mk->text = NULL;
    mk->proj = NULL;
    if (!s->specs || !b->plain || !b->spec.s || b->resource_version.len >= sizeof s->rv)
        return false;
    if (b->spec.len > s->scratch_cap) {
        /* at most the line cap: the spec is part of a line */
        char *g = realloc(s->scratch, b->spec.len);
        if (g) {
            s->scratch = g;
            s->scratch_cap = b->spec.len;
        }
    }
    model_pod_spec *spec =
        model_specmemo_find(s->specs, model_registry_count(s->reg), b->spec.s, b->spec.len,
                            model_skip_pod_spec_key(), s->scratch, s->scratch_cap, mk);
    if (!spec)
        return false;
    mk->text = NULL; /* found: nothing to remember */
    mk->proj = NULL;
    model_pod_fields f;
    model_span keys[FIELDS_MAX_LABELS], values[FIELDS_MAX_LABELS];
    model_pod *p = NULL;
    bool ok = model_pod_fields_read(pe->obj.s, pe->obj.len, b->spec.s, b->spec.s + b->spec.len, &f,
                                    keys, values, FIELDS_MAX_LABELS);
    if (ok) {
        /* the spec may be another node's pod's: the projection leaves
         * nodeName out (model_skip_pod_spec_key) */
        f.node_name = &b->node_name;
        ok = model_pod_from_fields(s->reg, &f, spec, &p) == AS_OK;
    }
    model_pod_spec_unref(spec);
    if (!ok)
        return false;
    p->digest = digest;
    pod_upsert(s, pe->type, p);
    applied_from_text(s, b);
    s->fields++;
    return true;
}

static as_err process_line(k8s_stream *s, const char *line, size_t len)
{
    size_t i = 0;
    while (i < len && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r'))
        i++;
    if (i == len)
        return AS_OK; /* blank keep-alive line */
    uint64_t digest = 0;
    bool validated = false;
    model_specmemo_keys mk = {0};
    if (s->kind == K8S_KIND_POD) {
        pod_event_brief pe;
        if (scan_pod_event(line + i, len - i, &pe)) {
            validated = true; /* the scan checked every byte of the line */
            digest = model_pod_digest(s->reg, &pe.brief);
            if (pe.type != K8S_EV_ADDED && apply_brief(s, &pe, digest))
                return AS_OK;
            if ((pe.type == K8S_EV_ADDED || pe.type == K8S_EV_MODIFIED) &&
                apply_fields(s, &pe, digest, &mk))
                return AS_OK;
        }
    }
    /* The streaming builder (yajl events straight into the DOM, nesting
     * capped at JSON_MAX_DEPTH) instead of json_loadb, here and for
     * list pages: bench_watch's pod events decode about twice as fast.
     * A line the pod scan read whole is not validated a second time. */
    json_t *ev = NULL;
    as_diag jd = {{0}, {0}};
    as_err perr = validated
                      ? json_parse_validated(line + i, len - i, k8s_stream_skip(s->kind), &ev, &jd)
                      : json_parse_skip(line + i, len - i, k8s_stream_skip(s->kind), &ev, &jd);
    as_err err = AS_OK;
    if (perr != AS_OK) {
        log_warn("msg=\"watch line is not JSON\" kind=%s err=\"%s\" len=%zu",
                 k8s_kind_name(s->kind), jd.msg, len);
        err = AS_EPARSE;
        goto done;
    }
    const char *type = json_string_value(json_object_get(ev, "type"));
    json_t *obj = json_object_get(ev, "object");
    if (!type || !json_is_object(obj)) {
        log_warn("msg=\"watch line is not an event\" kind=%s", k8s_kind_name(s->kind));
        err = AS_EPARSE;
        goto done;
    }
    if (!strcmp(type, "ERROR")) {
        json_int_t code = json_integer_value(json_object_get(obj, "code"));
        const char *reason = json_string_value(json_object_get(obj, "reason"));
        const char *msg = json_string_value(json_object_get(obj, "message"));
        log_info("msg=\"watch ERROR event\" kind=%s code=%lld reason=%s message=\"%s\"",
                 k8s_kind_name(s->kind), (long long)code, reason ? reason : "", msg ? msg : "");
        if (code == 410 || (reason && (!strcmp(reason, "Expired") || !strcmp(reason, "Gone"))))
            err = AS_EGONE;
        else
            err = AS_EHTTP;
        goto done;
    }
    k8s_event_type et;
    if (!strcmp(type, "ADDED"))
        et = K8S_EV_ADDED;
    else if (!strcmp(type, "MODIFIED"))
        et = K8S_EV_MODIFIED;
    else if (!strcmp(type, "DELETED"))
        et = K8S_EV_DELETED;
    else if (!strcmp(type, "BOOKMARK"))
        et = K8S_EV_BOOKMARK;
    else {
        log_warn("msg=\"unknown watch event type\" kind=%s type=%.32s", k8s_kind_name(s->kind),
                 type);
        err = AS_EPARSE;
        goto done;
    }
    if (et != K8S_EV_BOOKMARK)
        apply_object(s, et, obj, digest, mk.text ? &mk : NULL);
    note_rv(s, obj);
    s->events++;
done:
    json_decref(ev);
    return err;
}

/* See watch.h. */
as_err k8s_stream_feed(k8s_stream *s, const char *data, size_t len)
{
    while (len > 0) {
        const char *nl = memchr(data, '\n', len);
        if (!nl) {
            if (buf_append(&s->line, data, len) != AS_OK) {
                log_warn("msg=\"watch event larger than the line cap\" kind=%s cap=%zu",
                         k8s_kind_name(s->kind), s->max_line);
                buf_reset(&s->line);
                return AS_ETOOBIG;
            }
            return AS_OK;
        }
        size_t n = (size_t)(nl - data);
        as_err err;
        if (s->line.len > 0) {
            if (buf_append(&s->line, data, n) != AS_OK) {
                log_warn("msg=\"watch event larger than the line cap\" kind=%s cap=%zu",
                         k8s_kind_name(s->kind), s->max_line);
                buf_reset(&s->line);
                return AS_ETOOBIG;
            }
            err = process_line(s, s->line.data, s->line.len);
            buf_reset(&s->line);
        } else if (n > s->max_line) {
            log_warn("msg=\"watch event larger than the line cap\" kind=%s cap=%zu",
                     k8s_kind_name(s->kind), s->max_line);
            return AS_ETOOBIG;
        } else {
            err = process_line(s, data, n);
        }
        if (err)
            return err;
        data = nl + 1;
        len -= n + 1;
    }
    return AS_OK;
}

/* ================================================================== */
/* Reflector                                                           */
/* ================================================================== */

struct k8s_reflector {
    k8s_client *k;
    k8s_kind kind;
    k8s_stream *stream;
    CURL *h;       /* one persistent connection for list pages (and the watch: no wire) */
    k8s_wire wire; /* the watch's connection, where the client's requests can use one */
    uint64_t rng;
    bool absent_logged;
    unsigned attempt;
    unsigned relist_streak; /* relists since a watch last delivered */
};

/* Builds "<base>?<params>" for kind into a malloc'ed string. */
static char *build_path(k8s_reflector *r, const char *params)
{
    k8s_client *k = r->k;
    const char *base = r->kind == K8S_KIND_NODE  ? "/api/v1/nodes"
                       : r->kind == K8S_KIND_POD ? "/api/v1/pods"
                                                 : "/apis/shard.volcano.sh/v1alpha1/nodeshards";
    char *sel = NULL;
    if (r->kind == K8S_KIND_POD && k->pod_field_selector[0]) {
        char *e = curl_easy_escape(r->h, k->pod_field_selector, 0);
        if (!e)
            return NULL;
        size_t n = strlen(e) + 32;
        sel = malloc(n);
        if (sel)
            snprintf(sel, n, "fieldSelector=%s&", e);
        curl_free(e);
        if (!sel)
            return NULL;
    }
    size_t n = strlen(base) + strlen(params) + (sel ? strlen(sel) : 0) + 4;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s?%s%s", base, sel ? sel : "", params);
    free(sel);
    return p;
}

static void log_http_failure(k8s_reflector *r, const char *what, long status, const buf *body)
{
    const char *msg = NULL;
    json_t *st = body && body->len ? json_loadb(body->data, body->len, 0, NULL) : NULL;
    if (st)
        msg = json_string_value(json_object_get(st, "message"));
    log_warn("msg=\"%s failed\" kind=%s status=%ld message=\"%s\"", what, k8s_kind_name(r->kind),
             status, msg ? msg : "");
    json_decref(st);
}

static as_err status_err(long status)
{
    if (status == 410)
        return AS_EGONE;
    if (status == 404)
        return AS_ENOTFOUND;
    if (status == 401 || status == 403)
        return AS_EAUTH;
    return AS_EHTTP;
}

/* Lists every page inside a sync epoch (nodes/pods) or into a fresh table
 * (shards); leaves the list's resourceVersion in the stream. */
static as_err do_list(k8s_reflector *r)
{
    k8s_client *k = r->k;
    buf body;
    buf_init(&body, k->cfg.max_list_body);
    char *cont = NULL;
    char *path = NULL;
    as_err err = AS_OK;
    bool locked = false;
    uint64_t epoch = 0;
    uint64_t items = 0;
    as_diag d = {{0}, {0}};
    k8s_shard *staged = NULL;
    size_t nstaged = 0;
    /* items a page asks for: list_limit, halved for the rest of this list
     * when a page is over max_list_body */
    unsigned page_limit = k->cfg.list_limit;

    if (r->kind != K8S_KIND_NODESHARD) {
        /* Epochs compare with <, so concurrent relists of nodes and pods
         * do not disturb each other: no lock across the network I/O. */
        locked = true;
        epoch = cache_sync_begin(k->cache);
        if (r->kind == K8S_KIND_POD && k->cfg.pod_hook)
            k->cfg.pod_hook(k->cfg.pod_hook_arg, K8S_EV_SYNC_BEGIN, NULL);
    }
    for (;;) {
        char params[1024];
        if (cont) {
            char *e = curl_easy_escape(r->h, cont, 0);
            if (!e) {
                err = AS_ENOMEM;
                goto done;
            }
            snprintf(params, sizeof params, "limit=%u&continue=%s", page_limit, e);
            curl_free(e);
        } else {
            snprintf(params, sizeof params, "limit=%u", page_limit);
        }
        free(path);
        if (!(path = build_path(r, params))) {
            err = AS_ENOMEM;
            goto done;
        }
        long status = 0;
        buf_reset(&body);
        err = k8s_do(k, r->h, "GET", path, NULL, 0, &body, &status, &d);
        if (err == AS_ETOOBIG && page_limit > 1) {
            /* The same page again (same continue token) with half as many
             * items: a page of large objects fits the cap, down to one
             * object, which etcd keeps under 1.5 MiB. */
            page_limit /= 2;
            log_warn("msg=\"list page over its cap; asking for fewer items a page\" kind=%s "
                     "cap_bytes=%zu limit=%u",
                     k8s_kind_name(r->kind), k->cfg.max_list_body, page_limit);
            err = AS_OK;
            continue;
        }
        if (err) {
            log_warn("msg=\"list failed\" kind=%s err=\"%s\"", k8s_kind_name(r->kind), d.msg);
            goto done;
        }
        if (status != 200) {
            /* The shard stream reports 404/403 once, from the reflector. */
            if (!(r->kind == K8S_KIND_NODESHARD && (status == 404 || status == 403)))
                log_http_failure(r, "list", status, &body);
            err = status_err(status);
            if (status == 410 && cont) {
                /* The continue token expired: restart the list from scratch. */
                free(cont);
                cont = NULL;
                log_info("msg=\"list continue token expired; restarting\" kind=%s",
                         k8s_kind_name(r->kind));
                err = AS_OK;
                continue;
            }
            goto done;
        }
        json_t *doc = NULL;
        as_diag jd = {{0}, {0}};
        if (json_parse_skip(body.data, body.len, k8s_stream_skip(r->kind), &doc, &jd) != AS_OK) {
            log_warn("msg=\"list response is not JSON\" kind=%s err=\"%s\"", k8s_kind_name(r->kind),
                     jd.msg);
            err = AS_EPARSE;
            goto done;
        }
        json_t *md = json_object_get(doc, "metadata");
        const char *rv = json_string_value(json_object_get(md, "resourceVersion"));
        const char *c = json_string_value(json_object_get(md, "continue"));
        json_t *arr = json_object_get(doc, "items");
        size_t i;
        json_t *it;
        json_array_foreach(arr, i, it)
        {
            if (!json_is_object(it))
                continue;
            if (r->kind != K8S_KIND_NODESHARD) {
                apply_object(r->stream, K8S_EV_ADDED, it, 0, NULL);
                continue;
            }
            /* Shards are staged and swapped in whole: readers never see a
             * half-listed table. */
            if (nstaged >= SHARDS_MAX)
                continue;
            k8s_shard *nv = realloc(staged, (nstaged + 1) * sizeof *nv);
            if (!nv) {
                err = AS_ENOMEM;
                json_decref(doc);
                goto done;
            }
            staged = nv;
            if (shard_from_json(it, &staged[nstaged]) == AS_OK)
                nstaged++;
        }
        items += json_array_size(arr);
        free(cont);
        cont = c && *c ? strdup(c) : NULL;
        bool oom = c && *c && !cont;
        if (rv && *rv && !cont)
            k8s_stream_reset(r->stream, rv);
        json_decref(doc);
        if (oom) {
            err = AS_ENOMEM;
            goto done;
        }
        if (!cont)
            break;
        if (k8s_stopping(k)) {
            err = AS_EIO;
            goto done;
        }
    }
    if (locked) {
        size_t removed = 0;
        if (r->kind == K8S_KIND_NODE)
            err = cache_sync_end_nodes(k->cache, epoch, &removed);
        else
            err = cache_sync_end_pods(k->cache, epoch, &removed);
        log_info("msg=\"listed\" kind=%s items=%llu removed_stale=%zu rv=%s",
                 k8s_kind_name(r->kind), (unsigned long long)items, removed,
                 k8s_stream_rv(r->stream));
    } else {
        if (nstaged) /* staged is NULL for an empty list: qsort(NULL, 0) is UB */
            qsort(staged, nstaged, sizeof *staged, shard_cmp);
        pthread_mutex_lock(&k->shard_mu);
        k8s_shard *old = k->shards;
        size_t nold = k->nshards;
        k->shards = staged;
        k->nshards = nstaged;
        pthread_mutex_unlock(&k->shard_mu);
        k8s_shards_free(old, nold);
        staged = NULL;
        nstaged = 0;
        shard_notify(k);
        log_info("msg=\"listed\" kind=%s items=%llu rv=%s", k8s_kind_name(r->kind),
                 (unsigned long long)items, k8s_stream_rv(r->stream));
    }
done:
    k8s_shards_free(staged, nstaged);
    if (locked) {
        if (r->kind == K8S_KIND_POD && k->cfg.pod_hook)
            k->cfg.pod_hook(k->cfg.pod_hook_arg, K8S_EV_SYNC_END, NULL);
    }
    free(cont);
    free(path);
    buf_free(&body);
    return err;
}

typedef struct watch_ctx {
    k8s_reflector *r;
    long status;
    buf errbody;
    as_err feed_err;
    uint64_t last_byte_ns;
    bool timed_out;
    bool marked_up;
    uint64_t bytes;
} watch_ctx;

static size_t watch_write(char *ptr, size_t size, size_t nmemb, void *ud)
{
    watch_ctx *w = ud;
    size_t n = size * nmemb;
    w->last_byte_ns = clock_mono_ns();
    if (!w->status)
        curl_easy_getinfo(w->r->h, CURLINFO_RESPONSE_CODE, &w->status);
    if (w->status != 200) {
        buf_append(&w->errbody, ptr, n); /* capped; truncation is fine */
        return n;
    }
    if (!w->marked_up) {
        w->marked_up = true;
        k8s_mark_up(w->r->k, w->r->kind);
    }
    w->bytes += n;
    uint64_t before = k8s_stream_events(w->r->stream);
    uint64_t briefs_before = k8s_stream_briefs(w->r->stream);
    uint64_t fields_before = k8s_stream_fields(w->r->stream);
    as_err err = k8s_stream_feed(w->r->stream, ptr, n);
    uint64_t applied = k8s_stream_events(w->r->stream) - before;
    uint64_t briefs = k8s_stream_briefs(w->r->stream) - briefs_before;
    uint64_t fields = k8s_stream_fields(w->r->stream) - fields_before;
    if (applied)
        k8s_count(w->r->k, &w->r->k->st.events[w->r->kind], applied);
    if (briefs)
        k8s_count(w->r->k, &w->r->k->st.pod_events_undecoded, briefs);
    if (fields)
        k8s_count(w->r->k, &w->r->k->st.pod_events_spec_reused, fields);
    if (err) {
        w->feed_err = err;
        return 0; /* abort the transfer */
    }
    return n;
}

static int watch_progress(void *ud, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
    watch_ctx *w = ud;
    k8s_client *k = w->r->k;
    if (k8s_stopping(k))
        return 1;
    if (!w->marked_up) {
        long st = 0;
        curl_easy_getinfo(w->r->h, CURLINFO_RESPONSE_CODE, &st);
        if (st == 200) {
            w->marked_up = true;
            k8s_mark_up(k, w->r->kind);
        }
    }
    uint64_t idle = clock_mono_ns() - w->last_byte_ns;
    if (idle > (uint64_t)k->cfg.watch_timeout_ms * 1000000ull) {
        w->timed_out = true;
        return 1;
    }
    return 0;
}

/* wire_sink takes the stream's bytes as watch_write takes libcurl's;
 * after a feed error the rest is dropped (the connection is closed). */
static void wire_sink(void *arg, const char *data, size_t len)
{
    watch_ctx *w = arg;
    if (!w->feed_err)
        (void)watch_write((char *)data, 1, len, w);
}

/* watch_wire is the watch on the reflector's wire: the stream read as it
 * comes, none of libcurl's transfer machinery per wake-up (its polls and
 * state machine cost as much as the events' own reading at a few hundred
 * events a second). The outcome lands in w as watch_write's and
 * watch_progress's do; AS_EIO with diag when the connection failed. */
static as_err watch_wire(k8s_reflector *r, const char *path, watch_ctx *w, as_diag *diag)
{
    k8s_client *k = r->k;
    as_err err = k8s_get_stream_open(k, &r->wire, r->h, path, &w->status, &w->errbody, diag);
    if (err || w->status != 200)
        return err;
    w->marked_up = true;
    k8s_mark_up(k, r->kind);
    for (;;) {
        int64_t idle_ms = (int64_t)((clock_mono_ns() - w->last_byte_ns) / 1000000u);
        int64_t left = k->cfg.watch_timeout_ms - idle_ms;
        bool end = false;
        err = left > 0 ? k8s_get_stream_read(k, &r->wire, left, wire_sink, w, &end, diag)
                       : AS_ETIMEOUT;
        if (w->feed_err || end || (err == AS_ETIMEOUT && left <= 0)) {
            w->timed_out = !w->feed_err && !end;
            k8s_wire_close(&r->wire);
            return AS_OK;
        }
        if (err && err != AS_ETIMEOUT)
            return err;
    }
}

/* One watch connection from the stream's resourceVersion until it ends. */
static as_err do_watch(k8s_reflector *r, bool *progressed)
{
    k8s_client *k = r->k;
    *progressed = false;
    /* Ask the server to end the watch before our dead-stream timer could
     * fire on a healthy but quiet stream; jitter spreads reconnects. */
    int64_t lo = k->cfg.watch_timeout_ms / 2, span = k->cfg.watch_timeout_ms * 4 / 10;
    int64_t tmo_ms = lo + (int64_t)(r->rng % (uint64_t)(span + 1));
    long tmo_s = (long)(tmo_ms / 1000);
    if (tmo_s < 1)
        tmo_s = 1;
    char params[512];
    char *erv = curl_easy_escape(r->h, k8s_stream_rv(r->stream), 0);
    if (!erv)
        return AS_ENOMEM;
    snprintf(params, sizeof params,
             "watch=true&allowWatchBookmarks=true&resourceVersion=%s&timeoutSeconds=%ld", erv,
             tmo_s);
    curl_free(erv);
    char *path = build_path(r, params);
    char *url = path ? k8s_url(k, path) : NULL;
    struct curl_slist *hdrs = NULL;
    watch_ctx w;
    memset(&w, 0, sizeof w);
    w.r = r;
    buf_init(&w.errbody, ERRBODY_CAP);
    as_err err;
    if (!url) {
        err = AS_ENOMEM;
        goto done;
    }
    curl_easy_reset(r->h);
    if ((err = k8s_easy_prepare(k, r->h, url, false, &hdrs)))
        goto done;
    k8s_stream_reset(r->stream, NULL);
    w.last_byte_ns = clock_mono_ns();
    uint64_t events_before = k8s_stream_events(r->stream);
    as_diag wd = {{0}, {0}};
    as_err werr = watch_wire(r, path, &w, &wd);
    if (werr != AS_EUNSUPPORTED) {
        *progressed = k8s_stream_events(r->stream) > events_before;
        if (werr && !w.feed_err && !k8s_stopping(k)) {
            log_warn("msg=\"watch connection dropped\" kind=%s err=\"%s\" rv=%s",
                     k8s_kind_name(r->kind), wd.msg, k8s_stream_rv(r->stream));
            err = AS_EIO;
            goto done;
        }
        goto outcome;
    }
    if (!k8s_rl_wait(k)) {
        err = AS_EIO;
        goto done;
    }
    /* Under load several events wait in the socket: a larger receive
     * buffer takes them in one read and one write callback. */
    curl_easy_setopt(r->h, CURLOPT_BUFFERSIZE, WATCH_RECV_BUFFER);
    curl_easy_setopt(r->h, CURLOPT_WRITEFUNCTION, watch_write);
    curl_easy_setopt(r->h, CURLOPT_WRITEDATA, &w);
    curl_easy_setopt(r->h, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(r->h, CURLOPT_XFERINFOFUNCTION, watch_progress);
    curl_easy_setopt(r->h, CURLOPT_XFERINFODATA, &w);
    CURLcode cc = curl_easy_perform(r->h);
    *progressed = k8s_stream_events(r->stream) > events_before;
    if (!w.status)
        curl_easy_getinfo(r->h, CURLINFO_RESPONSE_CODE, &w.status);
    if (cc != CURLE_OK && !w.feed_err && !k8s_stopping(k) && !w.timed_out) {
        log_warn("msg=\"watch connection dropped\" kind=%s err=\"%s\" rv=%s",
                 k8s_kind_name(r->kind), curl_easy_strerror(cc), k8s_stream_rv(r->stream));
        err = AS_EIO;
        goto done;
    }
outcome:
    if (w.feed_err) {
        err = w.feed_err;
    } else if (k8s_stopping(k)) {
        err = AS_EIO;
    } else if (w.timed_out) {
        log_warn("msg=\"watch stream dead: no bytes\" kind=%s idle_ms=%lld rv=%s",
                 k8s_kind_name(r->kind), (long long)k->cfg.watch_timeout_ms,
                 k8s_stream_rv(r->stream));
        err = AS_ETIMEOUT;
    } else if (w.status != 200) {
        if (!(r->kind == K8S_KIND_NODESHARD && w.status == 404))
            log_http_failure(r, "watch", w.status, &w.errbody);
        if (w.status == 401)
            k8s_token_invalidate(k);
        err = status_err(w.status);
    } else if (r->stream->line.len > 0) {
        /* Clean end in the middle of an event: it was not applied. */
        log_warn("msg=\"watch stream ended mid-event\" kind=%s rv=%s", k8s_kind_name(r->kind),
                 k8s_stream_rv(r->stream));
        err = AS_EIO;
    } else {
        err = AS_OK;
    }
done:
    curl_easy_setopt(r->h, CURLOPT_HTTPHEADER, NULL);
    curl_slist_free_all(hdrs);
    buf_free(&w.errbody);
    k8s_stream_reset(r->stream, NULL);
    free(url);
    free(path);
    return err;
}

static bool backoff_sleep(k8s_reflector *r)
{
    int64_t ms =
        k8s_backoff_ms(r->k->cfg.backoff_initial_ms, r->k->cfg.backoff_max_ms, r->attempt, &r->rng);
    if (r->attempt < 32)
        r->attempt++;
    return k8s_sleep_ms(r->k, ms);
}

static void *reflector_main(void *arg)
{
    k8s_reflector *r = arg;
    k8s_client *k = r->k;
    char tname[16];
    snprintf(tname, sizeof tname, "as-watch-%s", k8s_kind_name(r->kind));
    pthread_setname_np(pthread_self(), tname);
    bool need_list = true;
    while (!k8s_stopping(k)) {
        if (need_list) {
            as_err err = do_list(r);
            if (k8s_stopping(k))
                break;
            if ((err == AS_ENOTFOUND || err == AS_EAUTH) && r->kind == K8S_KIND_NODESHARD) {
                if (!r->absent_logged && err == AS_ENOTFOUND)
                    log_info("msg=\"NodeShard CRD (shard.volcano.sh/v1alpha1) not installed; "
                             "shards absent\"");
                else if (!r->absent_logged)
                    log_warn("msg=\"no permission to list nodeshards.shard.volcano.sh; shards "
                             "absent (grant get/list/watch to use them)\"");
                r->absent_logged = true;
                pthread_mutex_lock(&k->st_mu);
                k->st.shards_present = false;
                pthread_mutex_unlock(&k->st_mu);
                k8s_sleep_ms(k, k->cfg.shard_retry_ms);
                continue;
            }
            if (err) {
                log_debug("msg=\"list attempt failed\" kind=%s err=%s", k8s_kind_name(r->kind),
                          as_strerror(err));
                k8s_mark_down(k, r->kind);
                k8s_count(k, &k->st.reconnects[r->kind], 1);
                backoff_sleep(r);
                continue;
            }
            if (r->kind == K8S_KIND_NODESHARD) {
                pthread_mutex_lock(&k->st_mu);
                k->st.shards_present = true;
                pthread_mutex_unlock(&k->st_mu);
                if (r->absent_logged)
                    log_info("msg=\"NodeShard CRD now installed\"");
                r->absent_logged = false;
            }
            need_list = false;
            r->attempt = 0; /* relist_streak stays: a watch must progress first */
            k8s_mark_up(k, r->kind);
            k8s_mark_listed(k, r->kind);
        }
        bool progressed = false;
        uint64_t t0 = clock_mono_ns();
        as_err err = do_watch(r, &progressed);
        bool lasted = clock_mono_ns() - t0 >= 1000000000ull;
        if (k8s_stopping(k))
            break;
        if (progressed) {
            r->attempt = 0;
            r->relist_streak = 0;
        }
        switch (err) {
        case AS_OK:
            /* Server ended the watch (timeoutSeconds): resume at once, a
             * quiet stream included, unless it keeps ending right away. */
            if (lasted)
                r->attempt = 0;
            else if (!progressed)
                backoff_sleep(r);
            break;
        case AS_EGONE:
        case AS_ETOOBIG:
            log_info("msg=\"relisting\" kind=%s reason=%s", k8s_kind_name(r->kind),
                     err == AS_EGONE ? "resourceVersion expired" : "event over the line cap");
            need_list = true;
            /* A server that fails every watch right after the list must
             * not get a relist loop: back off from the second in a row. */
            if (r->relist_streak++ > 0) {
                int64_t ms = k8s_backoff_ms(k->cfg.backoff_initial_ms, k->cfg.backoff_max_ms,
                                            r->relist_streak - 1, &r->rng);
                k8s_sleep_ms(k, ms);
            }
            break;
        case AS_ENOTFOUND:
            if (r->kind == K8S_KIND_NODESHARD) {
                shard_table_clear(k);
                shard_notify(k);
                need_list = true;
                break;
            }
            /* fallthrough */
        default:
            k8s_count(k, &k->st.reconnects[r->kind], 1);
            if (err != AS_EPARSE && err != AS_ETIMEOUT)
                k8s_mark_down(k, r->kind);
            backoff_sleep(r);
            break;
        }
    }
    return NULL;
}

/* See watch.h. */
as_err k8s_reflectors_start(k8s_client *k)
{
    for (int i = 0; i < K8S_KIND__COUNT; i++) {
        if (i == K8S_KIND_NODESHARD && !k->cfg.watch_shards)
            continue;
        k8s_reflector *r = calloc(1, sizeof *r);
        if (!r)
            return AS_ENOMEM;
        r->k = k;
        r->kind = (k8s_kind)i;
        r->rng = clock_mono_ns() ^ ((uint64_t)(uintptr_t)r << 7) ^ (uint64_t)i;
        r->h = curl_easy_init();
        k8s_wire_init(&r->wire, WATCH_WIRE_CAP);
        if (!r->h || k8s_stream_new(r->kind, k->cache, k, k->cfg.max_line, &r->stream)) {
            if (r->h)
                curl_easy_cleanup(r->h);
            k8s_wire_free(&r->wire);
            free(r);
            return AS_ENOMEM;
        }
        k->refl[i] = r;
        if (pthread_create(&k->refl_thread[i], NULL, reflector_main, r) != 0)
            return AS_ENOMEM;
        k->refl_running[i] = true;
    }
    return AS_OK;
}

/* See watch.h. */
void k8s_reflectors_join(k8s_client *k)
{
    for (int i = 0; i < K8S_KIND__COUNT; i++) {
        if (k->refl_running[i]) {
            pthread_join(k->refl_thread[i], NULL);
            k->refl_running[i] = false;
        }
        k8s_reflector *r = k->refl[i];
        if (r) {
            k8s_stream_free(r->stream);
            k8s_wire_free(&r->wire);
            curl_easy_cleanup(r->h);
            free(r);
            k->refl[i] = NULL;
        }
    }
}
