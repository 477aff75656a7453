/*
 * placement.c - the dry-run placement engine and POST /v1/placements.
 *
 * The engine never writes to the cache. Pods placed earlier in a request
 * live in a private overlay keyed by node incarnation id (ids are never
 * reused, so an overlay entry cannot leak onto a node that replaced a
 * removed one). A node with an overlay entry is evaluated through a stack
 * copy whose usage is the cache's live usage plus the entry; once earlier
 * pods took GPU devices, every node's copy also sees the cluster's and its
 * GPU model's device counts less what they took. Every other node is
 * evaluated in place. Predicates and scores therefore run the very same
 * code as sched_evaluate, on the state the earlier pods would leave bound.
 */
#include "agentsched/api/placement.h"

#include <assert.h>
#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "agentsched/base/clock.h"
#include "agentsched/base/hash.h"
#include "agentsched/base/log.h"
#include "agentsched/core/gpu.h"
#include "agentsched/core/pred.h"
#include "agentsched/core/sched.h"

_Static_assert(PLACEMENT_MAX_K == SCHED_MAX_K, "placement K bound mirrors the decision core");

#define PLACEMENT_MAX_REASONS   64
#define PLACEMENT_OTHER_REASONS "(other reasons)"
#define PLACEMENT_RESPONSE_CAP  ((size_t)64 << 20)
/* An HTTP answer is copied into the server's response, capped at 16 MiB
 * (base/http.c): building a larger one first would only hold memory. */
#define PLACEMENT_HTTP_RESPONSE_CAP ((size_t)16 << 20)

/* ------------------------------------------------------------------ */
/* Overlay: node incarnation -> usage added by earlier pods            */
/* ------------------------------------------------------------------ */

typedef struct ov_entry {
    bool used;
    uint64_t id;
    int64_t req[MODEL_MAX_RES];
    int32_t gpu[MODEL_MAX_GPUS];
} ov_entry;

typedef struct overlay {
    ov_entry *e;
    size_t cap; /* power of two, > 2 * entries ever inserted */
} overlay;

static as_err overlay_init(overlay *ov, size_t npods)
{
    size_t cap = 16;
    while (cap < 2 * npods + 2)
        cap *= 2;
    ov->e = calloc(cap, sizeof *ov->e);
    ov->cap = cap;
    return ov->e ? AS_OK : AS_ENOMEM;
}

static void overlay_free(overlay *ov)
{
    free(ov->e);
    ov->e = NULL;
}

/* overlay_slot returns the entry for id, or the empty slot where it goes.
 * The table holds at most one entry per placed pod and is sized for twice
 * that, so an empty slot always exists. */
static ov_entry *overlay_slot(const overlay *ov, uint64_t id)
{
    size_t mask = ov->cap - 1;
    size_t i = (size_t)((id * 0x9E3779B97F4A7C15ull) >> 17) & mask;
    for (;;) {
        ov_entry *e = &ov->e[i];
        if (!e->used || e->id == id)
            return e;
        i = (i + 1) & mask;
    }
}

static const ov_entry *overlay_find(const overlay *ov, uint64_t id)
{
    const ov_entry *e = overlay_slot(ov, id);
    return e->used ? e : NULL;
}

/* The view copies a cache_node: the stable fields (before `requested` and
 * from `ready` on: the hot spec copies) as bytes, the atomic usage fields
 * in between through the accessors. Fields added to cache_node must keep
 * that split: stable ones at the end. */
_Static_assert(offsetof(cache_node, requested) > offsetof(cache_node, slot) &&
                   offsetof(cache_node, ready) > offsetof(cache_node, in_shard),
               "cache_node layout changed: revisit view_of");

/* view_of returns n itself when no earlier pod went there and the cluster's
 * device counts are the cache's (gpus NULL), else tmp filled with n's live
 * usage plus the overlay (e, if any; then with id 0), pointing at gpus and
 * at gm (if not NULL) for its GPU model's counts. bind_version is
 * loaded first (acquire), as every reader of usage must. */
static const cache_node *view_of(const cache_node *n, const ov_entry *e, const uint64_t *gpus,
                                 const cache_gpu_model *gm, cache_node *tmp)
{
    if (!e && !gpus)
        return n;
    tmp->bind_version = cache_node_bind_version(n);
    tmp->generation = cache_node_generation(n);
    memcpy(tmp, n, offsetof(cache_node, requested));
    memcpy((char *)tmp + offsetof(cache_node, ready), (const char *)n + offsetof(cache_node, ready),
           sizeof *tmp - offsetof(cache_node, ready));
    tmp->in_shard = cache_node_in_shard(n) ? 1 : 0;
    for (int r = 0; r < MODEL_MAX_RES; r++)
        tmp->requested[r] = cache_node_requested(n, r) + (e ? e->req[r] : 0);
    for (int d = 0; d < MODEL_MAX_GPUS; d++)
        tmp->gpu_used[d] = cache_node_gpu_used(n, d) + (e ? e->gpu[d] : 0);
    /* With earlier pods on it the view is not the node a score may have
     * kept a waste for under its id and generation (fragment's memo): id 0
     * is never memoized, so the view neither reads the node's nor
     * leaves its own for live decisions. */
    if (e)
        tmp->id = 0;
    if (gpus)
        tmp->cluster_gpus = gpus;
    if (gm)
        tmp->gpu_model = gm;
    return tmp;
}

/* ------------------------------------------------------------------ */
/* Reasons: counted per distinct text                                  */
/* ------------------------------------------------------------------ */

typedef struct reason_bucket {
    pred_code code;
    int32_t arg;
    uint32_t count;
    char text[160];
} reason_bucket;

typedef struct reason_set {
    reason_bucket b[PLACEMENT_MAX_REASONS];
    uint32_t n;
    uint32_t other; /* failures past PLACEMENT_MAX_REASONS distinct texts */
} reason_set;

static void reasons_add(reason_set *rs, const model_registry *reg, const cache_node *node,
                        const model_pod *pod, pred_result r)
{
    /* Every code but a taint renders the same text for the same (code,
     * arg), so those skip the rendering; taint texts depend on the node. */
    if (r.code != PRED_TAINT) {
        for (uint32_t i = 0; i < rs->n; i++)
            if (rs->b[i].code == r.code && rs->b[i].arg == r.arg) {
                rs->b[i].count++;
                return;
            }
    }
    char text[sizeof rs->b[0].text];
    pred_reason(reg, node, pod, r, text, sizeof text);
    for (uint32_t i = 0; i < rs->n; i++)
        if (strcmp(rs->b[i].text, text) == 0) {
            rs->b[i].count++;
            return;
        }
    if (rs->n == PLACEMENT_MAX_REASONS) {
        rs->other++;
        return;
    }
    reason_bucket *b = &rs->b[rs->n++];
    /* A taint bucket must never match by (code, arg); mark it apart. */
    b->code = r.code;
    b->arg = r.code == PRED_TAINT ? -1 : r.arg;
    b->count = 1;
    memcpy(b->text, text, sizeof text);
}

static int reason_cmp(const void *a, const void *b)
{
    const reason_bucket *x = a, *y = b;
    if (x->count != y->count)
        return x->count > y->count ? -1 : 1;
    return strcmp(x->text, y->text);
}

/* ------------------------------------------------------------------ */
/* Top-K candidates                                                    */
/* ------------------------------------------------------------------ */

typedef struct cand {
    const cache_node *node; /* live cache node (valid under the read lock) */
    double score;
} cand;

typedef struct topk {
    cand c[PLACEMENT_MAX_K];
    uint32_t n, k;
    size_t feasible;
} topk;

static bool cand_better(double s1, const char *n1, double s2, const char *n2)
{
    if (s1 != s2)
        return s1 > s2;
    return strcmp(n1, n2) < 0;
}

static void topk_offer(topk *t, const cache_node *node, double score)
{
    t->feasible++;
    const char *name = node->spec->name;
    if (t->n == t->k &&
        !cand_better(score, name, t->c[t->n - 1].score, t->c[t->n - 1].node->spec->name))
        return;
    uint32_t i = t->n < t->k ? t->n++ : t->n - 1;
    while (i > 0 && cand_better(score, name, t->c[i - 1].score, t->c[i - 1].node->spec->name)) {
        t->c[i] = t->c[i - 1];
        i--;
    }
    t->c[i].node = node;
    t->c[i].score = score;
}

/* ------------------------------------------------------------------ */
/* Rendering                                                           */
/* ------------------------------------------------------------------ */

/* Scores are printed with at most three decimals, trailing zeros cut, so
 * the output is stable across platforms and readable. */
static void put_score(buf *out, double s)
{
    if (!isfinite(s))
        s = 0;
    char tmp[64];
    int n = snprintf(tmp, sizeof tmp, "%.3f", s);
    while (n > 0 && tmp[n - 1] == '0')
        n--;
    if (n > 0 && tmp[n - 1] == '.')
        n--;
    if (n == 2 && tmp[0] == '-' && tmp[1] == '0')
        tmp[0] = '0', n = 1;
    buf_append(out, tmp, (size_t)n);
}

static void put_pod_key(buf *out, buf *scratch, const model_pod *pod)
{
    buf_reset(scratch);
    buf_puts(scratch, pod->ns ? pod->ns : "default");
    buf_puts(scratch, "/");
    buf_puts(scratch, pod->name ? pod->name : "");
    if (scratch->err) {
        out->err = out->err ? out->err : scratch->err;
        return;
    }
    buf_json_str(out, scratch->data ? scratch->data : "", scratch->len);
}

/* ------------------------------------------------------------------ */
/* Engine                                                              */
/* ------------------------------------------------------------------ */

/* What a dry run's pods took of some GPU devices: the devices that were
 * wholly free before them, and the free milli-GPU (gpu_device_free). */
typedef struct ov_taken {
    uint64_t devices, milli;
} ov_taken;

/* model_index: node's GPU model as an index in the cache's entries. */
static size_t model_index(const cache_gpu_model *models, const cache_node *node)
{
    size_t i = (size_t)(node->gpu_model - models);
    assert(i < CACHE_MAX_GPU_MODELS);
    return i;
}

typedef struct run_ctx {
    cache *c;
    const model_registry *reg;
    const score_policy *policy;
    overlay ov;
    /* What the overlay's pods took of the GPU devices, in all and per GPU
     * model (by index in the cache's entries, cache_models), and the
     * counts less that, which the policy's keepFree and modelPressure
     * read: the cluster's (gpus) once anything was taken, a model's copy
     * (models) once any of its devices were. */
    ov_taken all, model_taken[CACHE_MAX_GPU_MODELS];
    uint64_t gpus[3];
    const cache_gpu_model *cache_models;
    cache_gpu_model models[CACHE_MAX_GPU_MODELS];
    reason_set rs;
    buf key;
    uint32_t k;
} run_ctx;

static void eval_node(run_ctx *x, cache_shard_mode mode, double bonus, const model_pod *pod,
                      const cache_node *node, topk *in, topk *out_shard)
{
    pred_result r = pred_check_static(mode, pod, node);
    if (r.code != PRED_OK) {
        reasons_add(&x->rs, x->reg, node, pod, r);
        return;
    }
    const cache_gpu_model *gm = NULL;
    if (node->gpu_model) {
        size_t i = model_index(x->cache_models, node);
        gm = x->model_taken[i].milli ? &x->models[i] : NULL;
    }
    cache_node tmp;
    const cache_node *v =
        view_of(node, overlay_find(&x->ov, node->id), x->all.milli ? x->gpus : NULL, gm, &tmp);
    r = pred_check_resources(x->reg, pod, v);
    if (r.code != PRED_OK) {
        reasons_add(&x->rs, x->reg, v, pod, r);
        return;
    }
    double score = score_node(x->policy, pod, v);
    if (score == SCORE_KEPT) {
        reasons_add(&x->rs, x->reg, v, pod, (pred_result){PRED_KEPT, 0});
        return;
    }
    if (mode == CACHE_SHARD_SOFT) {
        if (!cache_node_in_shard(node)) {
            topk_offer(out_shard, node, score);
            return;
        }
        score += bonus;
    }
    topk_offer(in, node, score);
}

/* commit_overlay records pod as placed on node in the private overlay;
 * returns the GPU devices it takes there (0: none). */
static uint32_t commit_overlay(run_ctx *x, const model_pod *pod, const cache_node *node)
{
    ov_entry *e = overlay_slot(&x->ov, node->id);
    if (!e->used) {
        memset(e, 0, sizeof *e);
        e->used = true;
        e->id = node->id;
    }
    uint32_t devices = 0;
    if (pod->gpu_count > 0) {
        cache_node tmp;
        const cache_node *v = view_of(node, e, NULL, NULL, &tmp);
        if (!pred_gpu_choose(pod, v, &devices)) {
            /* pred_check_resources accepted this very view; a refusal here
             * means the two disagree. Count the request without devices. */
            log_warn("msg=\"placement: GPU devices not choosable after fit\" node=%s",
                     node->spec->name);
            devices = 0;
        }
        ov_taken t = {0, 0};
        for (uint32_t m = devices; m; m &= m - 1) {
            int32_t used = cache_node_gpu_used(v, __builtin_ctz(m));
            t.devices += used == 0;
            t.milli += gpu_device_free(used) - gpu_device_free(used + (int32_t)pod->gpu_milli);
        }
        x->all.devices += t.devices;
        x->all.milli += t.milli;
        if (node->gpu_model) {
            ov_taken *mt = &x->model_taken[model_index(x->cache_models, node)];
            mt->devices += t.devices;
            mt->milli += t.milli;
        }
    }
    for (int r = 0; r < MODEL_MAX_RES; r++)
        e->req[r] += pod->req.v[r];
    for (int d = 0; d < MODEL_MAX_GPUS; d++)
        if (devices & (1u << d))
            e->gpu[d] += (int32_t)pod->gpu_milli;
    return devices;
}

/* sub0: a - b, at least 0 (the cache may have freed what a pod took). */
static uint64_t sub0(uint64_t a, uint64_t b)
{
    return a > b ? a - b : 0;
}

static void place_one(run_ctx *x, const model_pod *pod, buf *out)
{
    topk in = {.k = x->k}, out_shard = {.k = x->k};
    memset(&x->rs, 0, sizeof x->rs);
    double bonus = score_policy_soft_shard_bonus(x->policy);

    cache_read_lock(x->c);
    if (x->all.milli) {
        cache_gpu_devices(x->c, &x->gpus[0], &x->gpus[1]);
        x->gpus[1] = sub0(x->gpus[1], x->all.devices);
        x->gpus[2] = sub0(cache_gpu_free_milli(x->c), x->all.milli);
        for (size_t i = 0; i < CACHE_MAX_GPU_MODELS; i++) {
            const ov_taken *mt = &x->model_taken[i];
            if (!mt->milli)
                continue;
            const cache_gpu_model *gm = &x->cache_models[i];
            cache_gpu_model *cp = &x->models[i];
            memcpy(cp->name, gm->name, sizeof cp->name);
            cp->devices = __atomic_load_n(&gm->devices, __ATOMIC_RELAXED);
            cp->free_devices =
                sub0(__atomic_load_n(&gm->free_devices, __ATOMIC_RELAXED), mt->devices);
            cp->free_milli = sub0(__atomic_load_n(&gm->free_milli, __ATOMIC_RELAXED), mt->milli);
        }
    }
    cache_shard_mode mode = cache_get_shard_mode(x->c);
    if (pod->node_name) {
        /* Already pinned: the only question is whether that node takes it. */
        cache_node *n = cache_node_find(x->c, pod->node_name, strlen(pod->node_name));
        if (n)
            eval_node(x, mode, bonus, pod, n, &in, &out_shard);
        else
            reasons_add(&x->rs, x->reg, NULL, pod, (pred_result){PRED_NOT_FOUND, 0});
    } else {
        size_t count = cache_node_count(x->c);
        for (size_t i = 0; i < count; i++)
            eval_node(x, mode, bonus, pod, cache_node_at(x->c, i), &in, &out_shard);
    }
    const topk *win = in.n > 0 ? &in : &out_shard;
    uint32_t devices = win->n > 0 ? commit_overlay(x, pod, win->c[0].node) : 0;

    /* Names are borrowed from node specs: render before unlocking. */
    buf_puts(out, "{\"pod\":");
    put_pod_key(out, &x->key, pod);
    buf_puts(out, ",\"node\":");
    buf_json_cstr(out, win->n > 0 ? win->c[0].node->spec->name : NULL);
    /* the devices a bind would write on the pod (gpuannot.h) */
    buf_puts(out, ",\"gpuDevices\":[");
    for (uint32_t m = devices; m; m &= m - 1)
        buf_printf(out, "%s%d", m == devices ? "" : ",", __builtin_ctz(m));
    buf_puts(out, "],\"candidates\":[");
    for (uint32_t i = 0; i < win->n; i++) {
        buf_puts(out, i ? ",{\"node\":" : "{\"node\":");
        buf_json_cstr(out, win->c[i].node->spec->name);
        buf_puts(out, ",\"score\":");
        put_score(out, win->c[i].score);
        buf_puts(out, "}");
    }
    cache_read_unlock(x->c);

    qsort(x->rs.b, x->rs.n, sizeof x->rs.b[0], reason_cmp);
    buf_puts(out, "],\"reasons\":{");
    for (uint32_t i = 0; i < x->rs.n; i++) {
        if (i)
            buf_puts(out, ",");
        buf_json_cstr(out, x->rs.b[i].text);
        buf_printf(out, ":%u", x->rs.b[i].count);
    }
    if (x->rs.other)
        buf_printf(out, "%s\"" PLACEMENT_OTHER_REASONS "\":%u", x->rs.n ? "," : "", x->rs.other);
    buf_puts(out, "}}");
}

/* See placement.h. */
as_err placement_run(cache *c, const score_policy *policy, const model_pod *const *pods,
                     size_t npods, uint32_t k, buf *out)
{
    assert(c && policy && (pods || npods == 0) && out);
    assert(k >= 1 && k <= PLACEMENT_MAX_K);
    as_err err = AS_OK;
    run_ctx *x = calloc(1, sizeof *x);
    if (!x)
        return AS_ENOMEM;
    x->c = c;
    x->reg = cache_registry(c);
    x->policy = policy;
    x->k = k;
    cache_gpu_models(c, &x->cache_models);
    /* as large as the answer may grow: a key that does not fit it would not
     * fit the answer either (the pod model caps names far below) */
    buf_init(&x->key, PLACEMENT_RESPONSE_CAP);
    err = overlay_init(&x->ov, npods);
    if (err)
        goto done;

    buf_puts(out, "{\"placements\":[");
    for (size_t i = 0; i < npods && !out->err; i++) {
        if (i)
            buf_puts(out, ",");
        place_one(x, pods[i], out);
    }
    buf_puts(out, "]}");
    err = out->err;
done:
    overlay_free(&x->ov);
    buf_free(&x->key);
    free(x);
    return err;
}

/* ------------------------------------------------------------------ */
/* Request decoding                                                    */
/* ------------------------------------------------------------------ */

/* See placement.h. */
void placement_pods_free(model_pod **pods, size_t npods)
{
    if (!pods)
        return;
    for (size_t i = 0; i < npods; i++)
        model_pod_free(pods[i]);
    free(pods);
}

/* See placement.h. */
as_err placement_request_decode(const model_registry *reg, const json_t *req, uint32_t default_k,
                                model_pod ***pods_out, size_t *npods_out, uint32_t *k_out,
                                as_diag *diag)
{
    *pods_out = NULL;
    *npods_out = 0;
    if (!json_is_object(req))
        return as_diag_set(diag, AS_EINVAL, "",
                           "the request body must be a JSON object "
                           "{\"pods\": [v1.Pod, ...], \"candidates\": K}");

    uint32_t k = default_k >= 1 && default_k <= PLACEMENT_MAX_K ? default_k : PLACEMENT_DEFAULT_K;
    const json_t *jk = json_object_get(req, "candidates");
    if (jk && !json_is_null(jk)) {
        if (!json_is_integer(jk))
            return as_diag_set(diag, AS_EINVAL, "candidates",
                               "candidates must be an integer from 1 to %d", PLACEMENT_MAX_K);
        json_int_t v = json_integer_value(jk);
        if (v < 1 || v > PLACEMENT_MAX_K)
            return as_diag_set(diag, AS_EINVAL, "candidates",
                               "candidates is %lld; give an integer from 1 to %d", (long long)v,
                               PLACEMENT_MAX_K);
        k = (uint32_t)v;
    }

    const json_t *jp = json_object_get(req, "pods");
    if (!jp || json_is_null(jp))
        return as_diag_set(diag, AS_EINVAL, "pods",
                           "pods is missing: give the pods to place as \"pods\": [v1.Pod, ...]");
    if (!json_is_array(jp))
        return as_diag_set(diag, AS_EINVAL, "pods", "pods must be an array of v1.Pod objects");
    size_t n = json_array_size(jp);
    if (n > PLACEMENT_MAX_PODS)
        return as_diag_set(diag, AS_EINVAL, "pods",
                           "%zu pods in one request; at most %d are allowed, split the request", n,
                           PLACEMENT_MAX_PODS);

    as_err err = AS_OK;
    model_pod **pods = calloc(n ? n : 1, sizeof *pods);
    if (!pods)
        return AS_ENOMEM;
    size_t done_n = 0;
    char at[48];
    for (size_t i = 0; i < n; i++) {
        const json_t *item = json_array_get(jp, i);
        snprintf(at, sizeof at, "pods[%zu]", i);
        if (!json_is_object(item)) {
            err = as_diag_set(diag, AS_EINVAL, at, "%s must be a v1.Pod object", at);
            goto done;
        }
        const json_t *kind = json_object_get(item, "kind");
        if (kind && !json_is_null(kind) &&
            (!json_is_string(kind) || json_string_length(kind) != 3 ||
             strcmp(json_string_value(kind), "Pod") != 0)) {
            snprintf(at, sizeof at, "pods[%zu].kind", i);
            err = as_diag_set(diag, AS_EINVAL, at, "%s must be \"Pod\" (or absent)", at);
            goto done;
        }
        err = model_pod_from_json(reg, item, &pods[i], diag);
        if (err) {
            as_diag_prefix_field(diag, at);
            goto done;
        }
        done_n = i + 1;
    }
    *pods_out = pods;
    *npods_out = n;
    *k_out = k;
    pods = NULL;
done:
    placement_pods_free(pods, done_n);
    return err;
}

/* See placement.h. */
as_err placement_eval(core *co, const char *body, size_t len, buf *out, as_diag *diag)
{
    json_error_t je;
    json_t *req = json_loadb(body ? body : "", body ? len : 0, JSON_REJECT_DUPLICATES, &je);
    if (!req) {
        /* jansson's words for these name its own flags; say what to do */
        const char *why = je.text;
        switch (json_error_code(&je)) {
        case json_error_null_character:
            why = "strings may not contain \\u0000 (a NUL character); remove it";
            break;
        case json_error_null_byte_in_key:
            why = "object keys may not contain \\u0000 (a NUL character); remove it";
            break;
        case json_error_out_of_memory:
            return as_diag_set(diag, AS_ENOMEM, "", "out of memory while decoding the request");
        default:
            break;
        }
        return as_diag_set(diag, AS_EPARSE, "", "malformed JSON at line %d column %d: %s", je.line,
                           je.column, why);
    }
    model_pod **pods = NULL;
    size_t npods = 0;
    uint32_t k = 0;
    score_policy *policy = NULL;
    as_err err =
        placement_request_decode(&co->reg, req, co->cfg.candidates, &pods, &npods, &k, diag);
    if (err)
        goto done;
    policy = core_policy_get(co);
    err = placement_run(co->cache, policy, (const model_pod *const *)pods, npods, k, out);
    if (err == AS_ETOOBIG)
        as_diag_set(diag, err, "", "the answer exceeds %zu bytes; place fewer pods per request",
                    out->cap);
    else if (err)
        as_diag_set(diag, err, "", "placement failed: %s", as_strerror(err));
done:
    if (policy)
        score_policy_unref(policy);
    placement_pods_free(pods, npods);
    json_decref(req);
    return err;
}

/* ------------------------------------------------------------------ */
/* HTTP                                                                */
/* ------------------------------------------------------------------ */

/* ------------------------------------------------------------------ */
/* Per-caller rate limit                                               */
/* ------------------------------------------------------------------ */

/* Slots a caller's hash probes before evicting the stalest of them. */
#define PLACEMENT_LIMIT_PROBES 8

typedef struct limit_slot {
    char peer[64]; /* "" = free */
    double tokens;
    uint64_t last_ns; /* last refill */
} limit_slot;

struct placement_limiter {
    pthread_mutex_t mu;
    double rate, burst; /* tokens a second, most tokens held */
    limit_slot slots[PLACEMENT_LIMIT_SLOTS];
};

/* See placement.h. */
as_err placement_limiter_new(unsigned qps, placement_limiter **out)
{
    *out = NULL;
    if (qps == 0)
        return AS_OK;
    placement_limiter *l = calloc(1, sizeof *l);
    if (!l)
        return AS_ENOMEM;
    pthread_mutex_init(&l->mu, NULL);
    l->rate = qps;
    l->burst = 2.0 * qps;
    *out = l;
    return AS_OK;
}

/* See placement.h. */
void placement_limiter_free(placement_limiter *l)
{
    if (!l)
        return;
    pthread_mutex_destroy(&l->mu);
    free(l);
}

/* See placement.h. */
bool placement_limiter_take(placement_limiter *l, const char *peer, uint64_t now_ns,
                            unsigned *retry_after_s)
{
    if (!l)
        return true;
    char key[sizeof l->slots[0].peer];
    snprintf(key, sizeof key, "%s", peer && *peer ? peer : "?");
    uint64_t h = hash_str(key);
    bool ok;
    pthread_mutex_lock(&l->mu);
    limit_slot *slot = NULL, *stalest = NULL;
    for (unsigned i = 0; i < PLACEMENT_LIMIT_PROBES; i++) {
        limit_slot *c = &l->slots[(h + i) % PLACEMENT_LIMIT_SLOTS];
        if (strcmp(c->peer, key) == 0) {
            slot = c;
            break;
        }
        if (!stalest || !c->peer[0] || (stalest->peer[0] && c->last_ns < stalest->last_ns))
            stalest = c;
    }
    if (!slot) {
        /* A caller not seen lately starts with a full bucket; so does one
         * whose slot was taken, which at worst lets it burst once more. */
        slot = stalest;
        memcpy(slot->peer, key, sizeof key);
        slot->tokens = l->burst;
        slot->last_ns = now_ns;
    }
    if (now_ns > slot->last_ns) {
        slot->tokens += (double)(now_ns - slot->last_ns) / 1e9 * l->rate;
        if (slot->tokens > l->burst)
            slot->tokens = l->burst;
        slot->last_ns = now_ns;
    }
    ok = slot->tokens >= 1.0;
    if (ok)
        slot->tokens -= 1.0;
    else if (retry_after_s)
        *retry_after_s = (unsigned)ceil((1.0 - slot->tokens) / l->rate);
    pthread_mutex_unlock(&l->mu);
    if (!ok && retry_after_s && *retry_after_s == 0)
        *retry_after_s = 1;
    return ok;
}

/* The limiter placement_handle consults. Replaced ones are kept until the
 * next replacement, since a handler may still hold the old pointer. */
static placement_limiter *placement_limit;
static placement_limiter *placement_limit_old;
static pthread_mutex_t placement_limit_mu = PTHREAD_MUTEX_INITIALIZER;

/* See placement.h. */
as_err placement_limit_configure(unsigned qps)
{
    placement_limiter *l = NULL;
    as_err err = placement_limiter_new(qps, &l);
    if (err)
        return err;
    pthread_mutex_lock(&placement_limit_mu);
    placement_limiter_free(placement_limit_old);
    placement_limit_old = __atomic_exchange_n(&placement_limit, l, __ATOMIC_ACQ_REL);
    pthread_mutex_unlock(&placement_limit_mu);
    return AS_OK;
}

/* See placement.h. */
void placement_handle(void *ctx, const http_request *req, http_response *resp)
{
    core *co = ctx;
    uint64_t t0 = clock_mono_ns();
    as_diag d = {{0}, {0}};
    unsigned retry = 0;
    placement_limiter *lim = __atomic_load_n(&placement_limit, __ATOMIC_ACQUIRE);
    if (!placement_limiter_take(lim, req->peer, t0, &retry)) {
        http_error(resp, 429, "--placement-qps",
                   "more than %.0f dry runs a second from %s (--placement-qps); retry after %u s",
                   lim->rate, req->peer[0] ? req->peer : "this caller", retry);
        resp->retry_after_s = retry;
        return;
    }
    buf out;
    buf_init(&out, PLACEMENT_HTTP_RESPONSE_CAP);
    as_err err = placement_eval(co, req->body, req->body_len, &out, &d);
    if (!err)
        err = buf_append(&resp->body, out.data ? out.data : "", out.len);
    buf_free(&out);
    if (err) {
        buf_reset(&resp->body);
        int status;
        switch (err) {
        case AS_EINVAL:
        case AS_EPARSE:
        case AS_ERANGE:
        case AS_EUNSUPPORTED:
            status = 400;
            break;
        case AS_ETOOBIG:
            status = 500; /* the answer, not the request, is too big */
            break;
        default:
            status = http_status_for_err(err);
        }
        http_error(resp, status, d.field[0] ? d.field : NULL, "%s",
                   d.msg[0] ? d.msg : as_strerror(err));
    } else {
        resp->status = 200;
        resp->content_type = "application/json";
    }
    metrics_observe(co->m.placement_seconds, (double)(clock_mono_ns() - t0) / 1e9);
}

/* ------------------------------------------------------------------ */
/* Table output                                                        */
/* ------------------------------------------------------------------ */

typedef struct row {
    char *col[5];
} row;

static char *fmt_score_str(const json_t *v)
{
    buf b;
    buf_init(&b, 64);
    put_score(&b, json_number_value(v));
    char *s = NULL;
    size_t len;
    if (buf_take(&b, &s, &len) != AS_OK)
        s = NULL;
    buf_free(&b);
    return s;
}

static char *take_or_null(buf *b)
{
    char *s = NULL;
    size_t len;
    if (b->err || buf_take(b, &s, &len) != AS_OK) {
        buf_free(b);
        return NULL;
    }
    return s;
}

/* row_fill renders one placement object; AS_EINVAL when its shape is off. */
static as_err row_fill(const json_t *p, row *r)
{
    const json_t *pod = json_object_get(p, "pod");
    const json_t *node = json_object_get(p, "node");
    const json_t *cands = json_object_get(p, "candidates");
    const json_t *reasons = json_object_get(p, "reasons");
    if (!json_is_string(pod) || !(json_is_string(node) || json_is_null(node)) ||
        !json_is_array(cands) || !json_is_object(reasons))
        return AS_EINVAL;
    r->col[0] = strdup(json_string_value(pod));
    /* NODE notes the GPU devices the pod would take there: "node-t gpu:0,2"
     * (a server from before gpuDevices answers without them) */
    const json_t *gd = json_object_get(p, "gpuDevices");
    buf nb;
    buf_init(&nb, 1 << 16);
    buf_puts(&nb, json_is_string(node) ? json_string_value(node) : "<none>");
    for (size_t gi = 0; json_is_array(gd) && gi < json_array_size(gd); gi++)
        buf_printf(&nb, "%s%lld",
                   gi ? "," : " gpu:", (long long)json_integer_value(json_array_get(gd, gi)));
    r->col[1] = take_or_null(&nb);
    const json_t *first = json_array_get(cands, 0);
    const json_t *first_score = first ? json_object_get(first, "score") : NULL;
    r->col[2] = json_is_number(first_score) && json_is_string(node) ? fmt_score_str(first_score)
                                                                    : strdup("-");
    buf b;
    buf_init(&b, 1 << 20);
    size_t i;
    const json_t *c;
    json_array_foreach(cands, i, c)
    {
        const json_t *cn = json_object_get(c, "node");
        const json_t *cs = json_object_get(c, "score");
        if (!json_is_string(cn) || !json_is_number(cs)) {
            buf_free(&b);
            return AS_EINVAL;
        }
        buf_printf(&b, "%s%s(", i ? "," : "", json_string_value(cn));
        put_score(&b, json_number_value(cs));
        buf_puts(&b, ")");
    }
    if (b.len == 0)
        buf_puts(&b, "-");
    r->col[3] = take_or_null(&b);
    buf_init(&b, 1 << 20);
    const char *key;
    const json_t *cnt;
    int j = 0;
    json_object_foreach((json_t *)reasons, key, cnt)
    {
        if (!json_is_integer(cnt)) {
            buf_free(&b);
            return AS_EINVAL;
        }
        buf_printf(&b, "%s%lld %s", j++ ? ", " : "", (long long)json_integer_value(cnt), key);
    }
    if (b.len == 0)
        buf_puts(&b, "-");
    r->col[4] = take_or_null(&b);
    for (int k = 0; k < 5; k++)
        if (!r->col[k])
            return AS_ENOMEM;
    return AS_OK;
}

/* See placement.h. */
as_err placement_print_table(const json_t *resp, FILE *f)
{
    const json_t *pl = json_is_object(resp) ? json_object_get(resp, "placements") : NULL;
    if (!json_is_array(pl))
        return AS_EINVAL;
    size_t n = json_array_size(pl);
    as_err err = AS_OK;
    row *rows = calloc(n + 1, sizeof *rows);
    if (!rows)
        return AS_ENOMEM;
    static const char *const hdr[5] = {"POD", "NODE", "SCORE", "CANDIDATES", "REASONS"};
    size_t w[5];
    for (int k = 0; k < 5; k++)
        w[k] = strlen(hdr[k]);
    for (size_t i = 0; i < n; i++) {
        err = row_fill(json_array_get(pl, i), &rows[i]);
        if (err)
            goto done;
        for (int k = 0; k < 4; k++) {
            size_t l = strlen(rows[i].col[k]);
            w[k] = l > w[k] ? l : w[k];
        }
    }
    fprintf(f, "%-*s  %-*s  %-*s  %-*s  %s\n", (int)w[0], hdr[0], (int)w[1], hdr[1], (int)w[2],
            hdr[2], (int)w[3], hdr[3], hdr[4]);
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%-*s  %-*s  %-*s  %-*s  %s\n", (int)w[0], rows[i].col[0], (int)w[1],
                rows[i].col[1], (int)w[2], rows[i].col[2], (int)w[3], rows[i].col[3],
                rows[i].col[4]);
done:
    for (size_t i = 0; i < n; i++)
        for (int k = 0; k < 5; k++)
            free(rows[i].col[k]);
    free(rows);
    return err;
}

static const http_route placement_route_table[] = {
    {"POST", PLACEMENT_PATH, placement_handle, false, NULL, false, false},
};

/* See placement.h. */
const http_route *placement_routes(size_t *n)
{
    *n = sizeof placement_route_table / sizeof placement_route_table[0];
    return placement_route_table;
}
